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
//!  40 CRC-32 of bytes 0..40 u32          44 zero u32
//!  48 verify-from position u64           56 CRC-32 of bytes 0..56 u32      rest zero
//! ```
//!
//! The verify-from position is an extension an older binary ignores (it checks bytes 0..44
//! only and writes zeros past them, which fail the second CRC): a record boundary below the
//! page holding the dispatch position, from which recovery after a crash re-verifies the log
//! (see [`VerifyBoundaries`]). Every flush after the checkpoint writes at or past the start
//! of the page holding the durable position then (flushes rewrite only that partial page
//! below their data), so a torn write cannot reach below that page; without the extension
//! recovery re-verifies the whole segment holding the dispatch position.

use std::path::Path;
use std::rc::Rc;

use std::collections::VecDeque;

use comet_rt::io::{DirectFile, FaultInjector, OpenMode};

use crate::commit_log::align_down;
use crate::error::StoreError;
use crate::limits::{CHECKPOINT_SLOT_BYTES, VERIFY_BOUNDARIES_MAX};

const MAGIC: u32 = u32::from_be_bytes(*b"CMCK");
const VERSION: u32 = 1;
const BODY_BYTES: usize = 40;
/// Bytes the second CRC covers (the body, its CRC, and the verify-from position).
const EXTENDED_BYTES: usize = 56;

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
    /// A record boundary below the page holding `dispatch_durable_position`: recovery after a
    /// crash re-verifies the log from here (`None`: written by a binary without it).
    pub verify_from: Option<u64>,
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
        slot[44..48].fill(0);
        if let Some(verify_from) = self.verify_from {
            slot[48..56].copy_from_slice(&verify_from.to_be_bytes());
            let crc = crc32fast::hash(&slot[..EXTENDED_BYTES]);
            slot[56..60].copy_from_slice(&crc.to_be_bytes());
        } else {
            slot[48..60].fill(0);
        }
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
        let dispatch_durable_position = word64(24);
        let verify_from = (slot.len() >= 60
            && crc32fast::hash(&slot[..EXTENDED_BYTES]) == word32(56))
        .then(|| word64(48))
        .filter(|verify_from| *verify_from <= align_down(dispatch_durable_position));
        Some(Checkpoint {
            sequence: word64(8),
            log_durable_position: word64(16),
            dispatch_durable_position,
            last_store_timestamp_ms: i64::from_be_bytes(slot[32..40].try_into().expect("8")),
            verify_from,
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

/// Record boundaries a checkpoint's verify-from position is chosen among: the dispatch
/// positions of earlier checkpoints (each a record boundary) and the position the store
/// opened at. The newest one at least `behind_bytes` below the page holding the new
/// checkpoint's dispatch position is chosen, else the newest below that page at all: recovery
/// after a crash then reads about `behind_bytes` plus what was written since the checkpoint,
/// whatever the segment size. Sans-I/O; the maintenance task owns it.
pub(crate) struct VerifyBoundaries {
    /// Ascending.
    known: VecDeque<u64>,
    behind_bytes: u64,
}

impl VerifyBoundaries {
    /// `boundaries`: record boundaries of the log known at open (where dispatch starts,
    /// where recovery's scan started, the last checkpoint's verify-from position).
    pub(crate) fn new(boundaries: Vec<u64>, behind_bytes: u64) -> VerifyBoundaries {
        let mut known = boundaries;
        known.sort_unstable();
        known.dedup();
        VerifyBoundaries {
            known: known.into(),
            behind_bytes,
        }
    }

    /// The verify-from position of a checkpoint at `dispatched` (a record boundary, at or
    /// past every one given before); remembers `dispatched` for later checkpoints.
    pub(crate) fn choose(&mut self, dispatched: u64) -> Option<u64> {
        let page = align_down(dispatched);
        let wanted = page.saturating_sub(self.behind_bytes);
        // Boundaries older than the newest one at or below `wanted` are never chosen again.
        while self.known.len() >= 2 && self.known[1] <= wanted {
            self.known.pop_front();
        }
        let chosen = if self.known.front().is_some_and(|first| *first <= wanted) {
            self.known.front().copied()
        } else {
            self.known
                .iter()
                .rev()
                .find(|known| **known <= page)
                .copied()
        };
        if self.known.back().is_none_or(|last| *last < dispatched) {
            self.known.push_back(dispatched);
        }
        if self.known.len() > VERIFY_BOUNDARIES_MAX {
            // Thin out the middle: the oldest stays as the one that may reach `wanted`.
            self.known.remove(1);
        }
        chosen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the verify-from position is a known boundary below the dispatch position's
    // page, as far behind as asked when one is, and that the list stays bounded.
    #[test]
    fn verify_boundaries_choose_far_enough_behind() {
        let mut boundaries = VerifyBoundaries::new(vec![1000], 10_000);
        // Nothing 10,000 behind yet: the newest below the page (1000 for 5000's page 4096).
        assert_eq!(boundaries.choose(5000), Some(1000));
        // 5000 lies within the page of 5100: the boundary 1000 is still the one below it.
        assert_eq!(boundaries.choose(5100), Some(1000));
        assert_eq!(boundaries.choose(9000), Some(5100));
        // 30,000's page is 28,672; 10,000 behind it is 18,672: 9000 is the newest below.
        assert_eq!(boundaries.choose(30_000), Some(9000));
        assert_eq!(boundaries.choose(31_000), Some(9000));
        assert_eq!(boundaries.choose(60_000), Some(31_000));
        // A page holding every boundary: none below it.
        let mut fresh = VerifyBoundaries::new(vec![4097], 0);
        assert_eq!(fresh.choose(4200), None);
        for step in 1..10_000u64 {
            let chosen = fresh.choose(4200 + step * 16);
            assert!(chosen.is_none_or(|at| at <= align_down(4200 + step * 16)));
        }
        assert!(fresh.known.len() <= VERIFY_BOUNDARIES_MAX);
        // Opened at 50,000 after a scan from 20,000 with an older verify-from at 9,000: the
        // first checkpoint, still at 50,000, names a boundary below its page.
        let mut reopened = VerifyBoundaries::new(vec![50_000, 20_000, 9_000, 50_000], 10_000);
        assert_eq!(reopened.choose(50_000), Some(20_000));
    }

    // Proves a slot round-trips and that any flipped byte in the body makes it invalid.
    #[test]
    fn slot_round_trip_and_crc() {
        let checkpoint = Checkpoint {
            sequence: 7,
            log_durable_position: 1 << 30,
            dispatch_durable_position: 8192,
            last_store_timestamp_ms: 1_700_000_000_000,
            verify_from: Some(4000),
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
        // A flipped byte in the extension drops only the extension; so do the zeros an older
        // binary writes there.
        for at in 48..60 {
            let mut broken = slot.clone();
            broken[at] ^= 0x10;
            let decoded = Checkpoint::decode(&broken).expect("the body stands");
            assert_eq!(decoded.verify_from, None, "byte {at}");
        }
        let mut old = slot.clone();
        old[48..60].fill(0);
        let decoded = Checkpoint::decode(&old).expect("an older binary's slot");
        assert_eq!(decoded.verify_from, None);
        assert_eq!(decoded.dispatch_durable_position, 8192);
    }
}
