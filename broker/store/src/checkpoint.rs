//! The checkpoint of one commit log: two alternating, checksummed, page-sized copies in
//! `checkpoint/<log id>` (docs/style.md#checksummed-checkpoint-copies). Recovery takes the newest
//! valid copy; a torn write can only spoil the copy being written, never the previous one.
//!
//! ```text
//!  slot (4096 bytes, slot = sequence % 2)
//!  0  magic "CMCK" u32     4  version u32 (1)
//!  8  sequence u64         16 log durable position u64
//!  24 consume queues and index durable for every record below this position u64
//!  32 store time of the last durable record, ms i64
//!  40 CRC-32 of bytes 0..40 u32          rest zero
//! ```

use std::path::Path;
use std::rc::Rc;

use comet_rt::io::{DirectFile, FaultInjector, OpenMode};

use crate::error::StoreError;
use crate::limits::CHECKPOINT_SLOT_BYTES;

const MAGIC: u32 = u32::from_be_bytes(*b"CMCK");
const VERSION: u32 = 1;
const BODY_BYTES: usize = 40;

/// What a checkpoint records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Checkpoint {
    /// Monotonic write counter; picks the slot and the newest copy.
    pub sequence: u64,
    /// Commit-log bytes below this are durable.
    pub log_durable_position: u64,
    /// Consume-queue and index entries of every record below this are durable.
    pub dispatch_durable_position: u64,
    /// Store time of the last durable record.
    pub last_store_timestamp_ms: i64,
}

impl Checkpoint {
    fn encode(&self, slot: &mut [u8]) {
        slot[0..4].copy_from_slice(&MAGIC.to_be_bytes());
        slot[4..8].copy_from_slice(&VERSION.to_be_bytes());
        slot[8..16].copy_from_slice(&self.sequence.to_be_bytes());
        slot[16..24].copy_from_slice(&self.log_durable_position.to_be_bytes());
        slot[24..32].copy_from_slice(&self.dispatch_durable_position.to_be_bytes());
        slot[32..40].copy_from_slice(&self.last_store_timestamp_ms.to_be_bytes());
        let crc = crc32fast::hash(&slot[..BODY_BYTES]);
        slot[40..44].copy_from_slice(&crc.to_be_bytes());
    }

    fn decode(slot: &[u8]) -> Option<Checkpoint> {
        let word32 = |at: usize| u32::from_be_bytes(slot[at..at + 4].try_into().expect("4"));
        let word64 = |at: usize| u64::from_be_bytes(slot[at..at + 8].try_into().expect("8"));
        if slot.len() < 44 || word32(0) != MAGIC || word32(4) != VERSION {
            return None;
        }
        if crc32fast::hash(&slot[..BODY_BYTES]) != word32(40) {
            return None;
        }
        Some(Checkpoint {
            sequence: word64(8),
            log_durable_position: word64(16),
            dispatch_durable_position: word64(24),
            last_store_timestamp_ms: i64::from_be_bytes(slot[32..40].try_into().expect("8")),
        })
    }
}

/// The checkpoint file, open for the store's lifetime.
pub(crate) struct CheckpointFile {
    file: DirectFile,
    last: Checkpoint,
}

impl CheckpointFile {
    /// Opens (creating) the file and reads the newest valid copy (default if none).
    pub(crate) async fn open(
        path: &Path,
        faults: Option<Rc<FaultInjector>>,
    ) -> Result<CheckpointFile, StoreError> {
        let file = DirectFile::open(path, OpenMode::CreateReadWrite, faults).await?;
        let slot_bytes = usize::try_from(CHECKPOINT_SLOT_BYTES).expect("small");
        let bytes = file.read_at(0, 2 * slot_bytes).await?;
        let newest = bytes
            .chunks(slot_bytes)
            .filter_map(Checkpoint::decode)
            .max_by_key(|checkpoint| checkpoint.sequence)
            .unwrap_or_default();
        Ok(CheckpointFile { file, last: newest })
    }

    /// The newest checkpoint read or written.
    pub(crate) fn last(&self) -> Checkpoint {
        self.last
    }

    /// Writes `checkpoint` (its sequence is set here) into the older slot and syncs it.
    pub(crate) async fn write(&mut self, mut checkpoint: Checkpoint) -> Result<(), StoreError> {
        checkpoint.sequence = self.last.sequence + 1;
        assert!(checkpoint.log_durable_position >= checkpoint.dispatch_durable_position);
        let slot_bytes = usize::try_from(CHECKPOINT_SLOT_BYTES).expect("small");
        let mut buffer = self.file.alloc_buffer(slot_bytes);
        checkpoint.encode(buffer.as_mut_slice());
        let slot = checkpoint.sequence % 2;
        self.file
            .write_at(buffer, slot * CHECKPOINT_SLOT_BYTES)
            .await?;
        self.file.fdatasync().await?;
        self.last = checkpoint;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a slot round-trips and that any flipped byte in the body makes it invalid.
    #[test]
    fn slot_round_trip_and_crc() {
        let checkpoint = Checkpoint {
            sequence: 7,
            log_durable_position: 1 << 30,
            dispatch_durable_position: 4096,
            last_store_timestamp_ms: 1_700_000_000_000,
        };
        let mut slot = vec![0u8; 4096];
        checkpoint.encode(&mut slot);
        assert_eq!(Checkpoint::decode(&slot), Some(checkpoint));
        for at in 0..44 {
            let mut broken = slot.clone();
            broken[at] ^= 0x10;
            assert_eq!(Checkpoint::decode(&broken), None, "byte {at}");
        }
        assert_eq!(Checkpoint::decode(&[0u8; 4096]), None);
    }
}
