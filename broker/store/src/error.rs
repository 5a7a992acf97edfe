//! Store errors. Operating errors are typed; broken invariants panic (docs/style.md#error-classes).

use std::path::PathBuf;

use comet_rt::io::IoError;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file operation failed.
    #[error("store i/o: {0}")]
    Io(#[from] IoError),
    /// An earlier write or fdatasync failed; nothing more is written until a restart
    /// recovers from the last durable state (no retry over a possibly lost page).
    #[error("store refuses writes after an i/o failure: {reason}")]
    WriteFailed {
        /// The failure that stopped writes.
        reason: String,
    },
    /// Disk use passed the hard mark.
    #[error("disk use {used_percent}% passed the hard mark {hard_percent}%; writes refused")]
    DiskFull {
        /// Current disk use.
        used_percent: u32,
        /// The configured hard mark.
        hard_percent: u32,
    },
    /// The record bytes given to append are not a valid record.
    #[error("record {index} of the append is invalid: {reason}")]
    RecordInvalid {
        /// Position of the record in the append call.
        index: usize,
        /// What is wrong.
        reason: String,
    },
    /// A record (or batch) is larger than a segment or the configured limit.
    #[error("record of {length} bytes exceeds the limit of {max} bytes")]
    RecordTooLarge {
        /// Its length.
        length: usize,
        /// The limit.
        max: usize,
    },
    /// The store configuration cannot be used.
    #[error("store config: {0}")]
    Config(String),
    /// Another process holds the store lock.
    #[error("store {path} is locked by another process")]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
    /// A file on disk does not have the expected format.
    #[error("store file {path} is corrupt: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The next commit-log segment could not be created (for example the disk is full);
    /// nothing was written, the append may be retried later.
    #[error("cannot create the next commit-log segment: {reason}")]
    SegmentUnavailable {
        /// Why.
        reason: String,
    },
    /// The store is shut down.
    #[error("store is shut down")]
    Closed,
}

impl StoreError {
    pub(crate) fn corrupt(path: impl Into<PathBuf>, reason: impl Into<String>) -> StoreError {
        StoreError::Corrupt {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

/// Blocking file-system setup errors at open (before serving), with the path.
pub(crate) fn setup_error(path: &std::path::Path, error: std::io::Error) -> StoreError {
    StoreError::Config(format!("{}: {error}", path.display()))
}
