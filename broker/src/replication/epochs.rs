//! The epoch history of one log, persisted next to it as `<shard store>/replication.json`:
//! the history (epoch, start position) oldest first, the highest epoch the log heard of
//! (a slave promoted by hand begins above it), and a truncation or a fresh copy the slave's
//! master asked for that a restart must apply before the store serves reads.
//!
//! Written with `comet_rt::fs::write_atomic` (temporary file, fsync, rename, fsync of the
//! directory), so a crash leaves the old or the new content, never a mix. Small and
//! rare (a master start, a new epoch, a handshake), so it is written off the shard thread.

use std::io;
use std::path::{Path, PathBuf};

use comet_replication::epoch::{Epoch, EpochError, EpochHistory, EpochStart};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The file's name under a shard's store root.
pub const FILE_NAME: &str = "replication.json";

/// Where the replication state of the log whose store root is `store_root` lives.
pub fn path(store_root: &Path) -> PathBuf {
    store_root.join(FILE_NAME)
}

/// What is kept of one log's replication.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogEpochs {
    /// The log's epochs.
    pub history: EpochHistory,
    /// The highest epoch the log heard of (its own, or a master's).
    pub highest_seen: Option<Epoch>,
    /// A slave's log must end here before it serves reads again (set when the master's
    /// answer asked for a truncation while the store was open).
    pub pending_truncate: Option<u64>,
    /// A slave's log must be dropped and start empty here (a segment start) before it
    /// serves reads again: it shares no retained bytes with its master, which asked for a
    /// full copy from its oldest retained segment.
    pub pending_reset: Option<u64>,
}

/// Why the file cannot be used.
#[derive(Debug, Error)]
pub enum EpochFileError {
    /// Reading or writing failed.
    #[error("replication state {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The content is not the file's JSON shape.
    #[error("replication state {} does not parse: {source}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// The history in it breaks the epoch rules (epochs and starts increasing).
    #[error("replication state {}: {source}", path.display())]
    History {
        /// The file.
        path: PathBuf,
        /// The rule broken.
        #[source]
        source: EpochError,
    },
}

/// The JSON shape.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Stored {
    /// `[epoch, start]` pairs, oldest first.
    epochs: Vec<(Epoch, u64)>,
    highest_seen: Option<Epoch>,
    pending_truncate: Option<u64>,
    pending_reset: Option<u64>,
}

/// Reads the state at `path` (blocking); a missing file is an empty state (a log that never
/// replicated).
pub fn load(path: &Path) -> Result<LogEpochs, EpochFileError> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(LogEpochs::default()),
        Err(source) => {
            return Err(EpochFileError::Io {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    let stored: Stored =
        serde_json::from_slice(&bytes).map_err(|source| EpochFileError::Parse {
            path: path.to_path_buf(),
            source,
        })?;
    let entries = stored
        .epochs
        .iter()
        .map(|&(epoch, start)| EpochStart { epoch, start })
        .collect();
    let history =
        EpochHistory::from_entries(entries).map_err(|source| EpochFileError::History {
            path: path.to_path_buf(),
            source,
        })?;
    Ok(LogEpochs {
        history,
        highest_seen: stored.highest_seen,
        pending_truncate: stored.pending_truncate,
        pending_reset: stored.pending_reset,
    })
}

/// Replaces the state at `path` atomically and durably (blocking).
pub fn store(path: &Path, state: &LogEpochs) -> Result<(), EpochFileError> {
    let stored = Stored {
        epochs: state
            .history
            .entries()
            .iter()
            .map(|entry| (entry.epoch, entry.start))
            .collect(),
        highest_seen: state.highest_seen,
        pending_truncate: state.pending_truncate,
        pending_reset: state.pending_reset,
    };
    let io_error = |source| EpochFileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let bytes = serde_json::to_vec(&stored).map_err(|source| io_error(source.into()))?;
    comet_rt::fs::write_atomic(path, &bytes).map_err(io_error)
}

/// Stores `state` from a shard without blocking it.
pub async fn store_off_shard(path: PathBuf, state: LogEpochs) -> Result<(), EpochFileError> {
    comet_rt::task_class::run_blocking(move || store(&path, &state)).await
}

/// A master log's history for this start: a new epoch above every epoch the log holds or
/// heard of, beginning at its written end (`written`); a log that never replicated gets its
/// first epoch at `oldest`, so every retained byte belongs to an epoch.
pub fn begin_master_epoch(
    state: &mut LogEpochs,
    written: u64,
    oldest: u64,
) -> Result<Epoch, EpochError> {
    let held = state.history.latest().map(|latest| latest.epoch);
    let epoch = held.max(state.highest_seen).map_or(1, |top| top + 1);
    let start = if state.history.is_empty() {
        oldest
    } else {
        written
    };
    state.history.begin(epoch, start)?;
    state.highest_seen = Some(epoch);
    Ok(epoch)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a state round-trips through its file, a missing file is an empty state, and a
    // file that breaks the epoch rules or is not JSON is an error naming the file.
    #[test]
    fn state_round_trips_and_bad_files_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = path(dir.path());
        assert_eq!(load(&path).unwrap(), LogEpochs::default());
        let mut state = LogEpochs::default();
        state.history.begin(1, 0).unwrap();
        state.history.begin(3, 4096).unwrap();
        state.highest_seen = Some(4);
        state.pending_truncate = Some(2048);
        store(&path, &state).unwrap();
        assert_eq!(load(&path).unwrap(), state);
        state.pending_truncate = None;
        state.pending_reset = Some(8192);
        store(&path, &state).unwrap();
        assert_eq!(load(&path).unwrap(), state);
        std::fs::write(&path, br#"{"epochs":[[2,10],[1,20]]}"#).unwrap();
        let error = load(&path).unwrap_err();
        assert!(matches!(error, EpochFileError::History { .. }), "{error}");
        assert!(error.to_string().contains(FILE_NAME), "{error}");
        std::fs::write(&path, b"not json").unwrap();
        assert!(matches!(load(&path), Err(EpochFileError::Parse { .. })));
    }

    // Proves each master start begins an epoch above everything held or heard of, at the
    // written end, and a log that never replicated begins at its oldest byte.
    #[test]
    fn each_master_start_begins_a_newer_epoch() {
        let mut state = LogEpochs::default();
        assert_eq!(begin_master_epoch(&mut state, 9000, 4096), Ok(1));
        assert_eq!(state.history.latest().unwrap().start, 4096);
        assert_eq!(begin_master_epoch(&mut state, 9000, 4096), Ok(2));
        assert_eq!(state.history.latest().unwrap().start, 9000);
        state.highest_seen = Some(7);
        assert_eq!(begin_master_epoch(&mut state, 12000, 4096), Ok(8));
        assert_eq!(state.highest_seen, Some(8));
        let starts: Vec<u64> = state.history.entries().iter().map(|e| e.start).collect();
        assert_eq!(starts, vec![4096, 9000, 12000]);
    }
}
