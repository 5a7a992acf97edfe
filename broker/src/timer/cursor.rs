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
}

/// This shard's cursor file.
pub fn path(store_root: &Path, shard: u16) -> PathBuf {
    super::slot::wheel_dir(store_root).join(format!("cursor-{shard}.json"))
}

/// Reads every shard's cursor file (blocking) and merges them field-wise, largest wins.
pub fn load_all(store_root: &Path) -> BTreeMap<i32, QueueCursor> {
    let mut merged: BTreeMap<i32, QueueCursor> = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(super::slot::wheel_dir(store_root)) else {
        return merged;
    };
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !(name.starts_with("cursor-") && name.ends_with(".json")) {
            continue;
        }
        let parsed = persist::read_json(&entry.path(), |bytes| {
            serde_json::from_slice::<CursorFile>(bytes).map_err(|e| e.to_string())
        });
        match parsed {
            Ok(Some(file)) => {
                for (queue_id, cursor) in file.queues {
                    let slot = merged.entry(queue_id).or_default();
                    *slot = slot.max(cursor);
                }
            }
            Ok(None) => {}
            Err(e) => log::warn!("ignoring {name}: {e}"),
        }
    }
    merged
}

/// Writes `queues` atomically and durably (blocking).
pub fn store(path: &Path, queues: &BTreeMap<i32, QueueCursor>) -> std::io::Result<()> {
    let file = CursorFile {
        queues: queues.clone(),
    };
    let bytes = serde_json::to_vec(&file).map_err(std::io::Error::other)?;
    persist::write_atomic(path, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves cursors survive a write/read and that shard files merge field by field.
    #[test]
    fn cursors_round_trip_and_merge() {
        let root = std::env::temp_dir().join(format!("comet-timer-cursor-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        assert!(load_all(&root).is_empty());
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
        store(&path(&root, 0), &BTreeMap::from([(0, a), (1, a)])).unwrap();
        store(&path(&root, 1), &BTreeMap::from([(1, b)])).unwrap();
        let merged = load_all(&root);
        assert_eq!(merged[&0], a);
        assert_eq!(
            merged[&1],
            QueueCursor {
                enqueued_offset: 9,
                delivered_ms: 100,
                in_flight_until_ms: 120
            }
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
