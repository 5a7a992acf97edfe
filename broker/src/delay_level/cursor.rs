//! Persisted delivery cursors: `config/delayOffset-<shard>.json`,
//! `{"offsetTable":{"<queueId>":<next offset>,...}}` (queue id = level - 1).
//!
//! Every shard writes only the levels it owns. At start-up every shard's file is read and a
//! level's cursor is the largest value found: cursors only grow, so after a change of core
//! count (a level moving to another shard) the newest value wins.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::persist;

/// The file's content.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CursorFile {
    /// Schedule queue id → next offset to deliver.
    pub offset_table: BTreeMap<i32, i64>,
}

/// This shard's cursor file.
pub fn path(config_dir: &Path, shard: u16) -> PathBuf {
    config_dir.join(format!("delayOffset-{shard}.json"))
}

/// Reads every shard's cursor file (blocking) and merges them, largest cursor wins.
pub fn load_all(config_dir: &Path) -> BTreeMap<i32, i64> {
    let mut merged = BTreeMap::new();
    for file in persist::read_json_family::<CursorFile>(config_dir, "delayOffset") {
        match file.parsed {
            Ok(Some(cursors)) => {
                for (queue_id, offset) in cursors.offset_table {
                    let slot = merged.entry(queue_id).or_insert(offset);
                    *slot = (*slot).max(offset);
                }
            }
            Ok(None) => {}
            Err(e) => log::warn!("ignoring {}: {e}", file.name),
        }
    }
    merged
}

/// Writes `cursors` atomically and durably (blocking).
pub fn store(path: &Path, cursors: &BTreeMap<i32, i64>) -> std::io::Result<()> {
    let file = CursorFile {
        offset_table: cursors.clone(),
    };
    persist::write_json_atomic(path, &file)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves cursors survive a write/read and that the largest value across shard files wins.
    #[test]
    fn cursors_round_trip_and_merge() {
        let directory =
            std::env::temp_dir().join(format!("comet-delay-cursor-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&directory);
        assert!(load_all(&directory).is_empty());
        store(&path(&directory, 0), &BTreeMap::from([(0, 5), (1, 7)])).unwrap();
        store(&path(&directory, 1), &BTreeMap::from([(1, 9), (2, 1)])).unwrap();
        let merged = load_all(&directory);
        assert_eq!(merged, BTreeMap::from([(0, 5), (1, 9), (2, 1)]));
        std::fs::remove_dir_all(&directory).unwrap();
    }
}
