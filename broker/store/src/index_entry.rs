//! One key-index entry, the 32-byte unit of both index file forms: the append-order file of
//! `index` and the sorted file of `sealed_index` (layout in the `index` module docs).

use crate::offset::PhysicalOffset;

/// One indexed key of one record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct IndexEntry {
    pub(crate) hash: u64,
    pub(crate) physical: PhysicalOffset,
    pub(crate) store_timestamp_ms: i64,
}

impl IndexEntry {
    pub(crate) fn encode(&self, target: &mut [u8]) {
        target[..8].copy_from_slice(&self.hash.to_be_bytes());
        target[8..16].copy_from_slice(&self.physical.as_i64().to_be_bytes());
        target[16..24].copy_from_slice(&self.store_timestamp_ms.to_be_bytes());
        target[24..32].copy_from_slice(&1u64.to_be_bytes());
    }

    pub(crate) fn decode(raw: &[u8]) -> Option<IndexEntry> {
        let word = |at: usize| u64::from_be_bytes(raw[at..at + 8].try_into().expect("8 bytes"));
        if word(24) != 1 {
            return None;
        }
        Some(IndexEntry {
            hash: word(0),
            physical: PhysicalOffset::from_i64(i64::try_from(word(8)).ok()?)?,
            store_timestamp_ms: i64::try_from(word(16)).ok()?,
        })
    }
}
