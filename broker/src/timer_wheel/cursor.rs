//! The wheel's persisted cursors: `<storePathRootDir>/timerwheel/cursor-<shard>.json`,
//! `{"queues":{"<queue>":{"enqueuedOffset":n,"deliveredMs":t,"inFlightUntilMs":u}}}`.
//!
//! Per timer queue:
//! * `enqueuedOffset`: every timer record below it has a durable slot-file entry;
//! * `deliveredMs`: every entry with effective due time at or below it is delivered (durable
//!   in its real queue);
//! * `inFlightUntilMs`: no entry with effective due time above it was ever handed to an
//!   append. Entries between `deliveredMs` and this may or may not be delivered (a crash in
//!   the middle of a delivery): those, and only those, are checked before delivery after a
//!   restart.
//!
//! `cleanStop` is true only in a file written by a clean stop; after anything else, slot
//! entries past `enqueuedOffset` may exist (written, then a crash before the cursor moved),
//! and the wheel reads its slot files at start-up so as not to write them twice.
//!
//! Every shard writes the queues it owns; at start-up every shard's file is read and the
//! largest value of each field wins (all three only grow), so a queue that moved to another
//! shard after a change of core count keeps its newest state.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::persist;

/// One queue's cursors.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueCursor {
    /// Next timer-queue offset to enqueue.
    pub enqueued_offset: i64,
    /// Entries due at or before this are delivered.
    pub delivered_ms: i64,
    /// No entry due after this was handed to an append.
    pub in_flight_until_ms: i64,
}

impl QueueCursor {
    /// The field-wise maximum.
    pub fn max(self, other: QueueCursor) -> QueueCursor {
        QueueCursor {
            enqueued_offset: self.enqueued_offset.max(other.enqueued_offset),
            delivered_ms: self.delivered_ms.max(other.delivered_ms),
            in_flight_until_ms: self.in_flight_until_ms.max(other.in_flight_until_ms),
        }
    }
}

/// The file's content.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CursorFile {
    /// Timer queue id → cursors.
    pub queues: BTreeMap<i32, QueueCursor>,
    /// Written by a clean stop: no slot entry past `enqueuedOffset` exists.
    #[serde(default)]
    pub clean_stop: bool,
}

/// Every shard's cursors, merged.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Loaded {
    /// Timer queue id → cursors (field-wise maximum).
    pub queues: BTreeMap<i32, QueueCursor>,
    /// Every file found was written by a clean stop (true when there is none).
    pub clean_stop: bool,
}

/// This shard's cursor file.
pub fn path(store_root: &Path, shard: u16) -> PathBuf {
    super::slot::wheel_dir(store_root).join(format!("cursor-{shard}.json"))
}

/// A slave's start: drops any wheel this store kept (cursors and slot files) from a run as
/// master. A slave runs no wheel; the master it follows delivers, and the records it
/// delivered are in the log the slave copies. A wheel kept from an earlier run would take
/// its old cursors for the truth once promoted, and deliver again what another master
/// delivered meanwhile; without one the promoted wheel reads its queues from the start
/// and checks what is due against the real queues (see `wheel`). Blocking.
pub fn forget_on_slave(store_root: &Path) -> std::io::Result<()> {
    let dir = super::slot::wheel_dir(store_root);
    match std::fs::remove_dir_all(&dir) {
        Ok(()) => {
            log::warn!("a slave keeps no timer wheel: removed {}", dir.display());
            Ok(())
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(error),
    }
}

/// Reads every shard's cursor file (blocking) and merges them field-wise, largest wins.
pub fn load_all(store_root: &Path) -> Loaded {
    let mut loaded = Loaded {
        queues: BTreeMap::new(),
        clean_stop: true,
    };
    let directory = super::slot::wheel_dir(store_root);
    for file in persist::read_json_family::<CursorFile>(&directory, "cursor-") {
        match file.parsed {
            Ok(Some(cursors)) => {
                loaded.clean_stop &= cursors.clean_stop;
                for (queue_id, cursor) in cursors.queues {
                    let slot = loaded.queues.entry(queue_id).or_default();
                    *slot = slot.max(cursor);
                }
            }
            Ok(None) => {}
            Err(e) => {
                loaded.clean_stop = false;
                log::warn!("ignoring {}: {e}", file.name);
            }
        }
    }
    loaded
}

/// Writes `queues` atomically and durably (blocking); `clean_stop` only from a clean stop.
pub fn store(
    path: &Path,
    queues: &BTreeMap<i32, QueueCursor>,
    clean_stop: bool,
) -> std::io::Result<()> {
    let file = CursorFile {
        queues: queues.clone(),
        clean_stop,
    };
    persist::write_json_atomic(path, &file)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves cursors survive a write/read and that shard files merge field by field.
    #[test]
    fn cursors_round_trip_and_merge() {
        let root = std::env::temp_dir().join(format!("comet-timer-cursor-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        assert!(load_all(&root).queues.is_empty());
        assert!(load_all(&root).clean_stop);
        let a = QueueCursor {
            enqueued_offset: 5,
            delivered_ms: 100,
            in_flight_until_ms: 120,
        };
        let b = QueueCursor {
            enqueued_offset: 9,
            delivered_ms: 90,
            in_flight_until_ms: 90,
        };
        store(&path(&root, 0), &BTreeMap::from([(0, a), (1, a)]), true).unwrap();
        store(&path(&root, 1), &BTreeMap::from([(1, b)]), false).unwrap();
        let loaded = load_all(&root);
        assert!(!loaded.clean_stop);
        let merged = loaded.queues;
        assert_eq!(merged[&0], a);
        assert_eq!(
            merged[&1],
            QueueCursor {
                enqueued_offset: 9,
                delivered_ms: 100,
                in_flight_until_ms: 120
            }
        );
        store(&path(&root, 1), &BTreeMap::from([(1, b)]), true).unwrap();
        assert!(load_all(&root).clean_stop);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
