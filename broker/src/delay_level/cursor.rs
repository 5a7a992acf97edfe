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

/// The file telling a promoted slave's delivery when it became master:
/// `config/delayPromotion`, `slave` while the broker runs as a slave, `promoted <ms>` from
/// its first start as master on (see [`note_role`]).
pub const PROMOTION_FILE: &str = "delayPromotion";

/// Records the role at start-up (blocking). A slave's cursors are copies of its master's,
/// up to one metadata copy old, and its master may have delivered entries past them that
/// the one-round check after a crash does not cover. A slave writes `slave`; the first start
/// as master after that writes `promoted <now_ms>`, and its delivery checks every entry due
/// by then against its real queue before delivering it (see [`promoted_at_ms`]). Once the
/// cursors are past those entries the file no longer matters; it stays until the next start
/// as slave.
pub fn note_role(config_dir: &Path, is_master: bool, now_ms: i64) -> std::io::Result<()> {
    let path = config_dir.join(PROMOTION_FILE);
    if !is_master {
        return persist::write_atomic(&path, b"slave\n");
    }
    match std::fs::read_to_string(&path) {
        Ok(text) if text.trim() == "slave" => {
            persist::write_atomic(&path, format!("promoted {now_ms}\n").as_bytes())
        }
        Ok(_) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(error),
    }
}

/// When this broker was promoted from slave to master, if it was (blocking).
pub fn promoted_at_ms(config_dir: &Path) -> Option<i64> {
    let path = config_dir.join(PROMOTION_FILE);
    let text = std::fs::read_to_string(&path).ok()?;
    let promoted = text
        .trim()
        .strip_prefix("promoted ")
        .and_then(|ms| ms.parse::<i64>().ok());
    if promoted.is_none() && text.trim() != "slave" {
        log::warn!("ignoring {}: {text:?}", path.display());
    }
    promoted
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
