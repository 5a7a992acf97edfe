//! Which logs a slave hosts, and on which shard (see
//! `docs/architecture.md#slave-and-master-shard-counts`).
//!
//! A slave's queues belong to its master's logs: a queue's records are in log
//! `owner(topic, queueId)` computed with the master's log count, whatever the slave's shard
//! count. The slave keeps that count in `<storeRoot>/master-logs` (`logs <count>\n`, written
//! atomically) once a Welcome told it; each start hosts that many logs, log `l` on shard
//! `l % shards`. A master ignores the file and removes it: its queues belong to its shards.

use std::io;
use std::path::{Path, PathBuf};

use thiserror::Error;

/// The file's name under the store root.
pub const FILE_NAME: &str = "master-logs";

/// Most logs a master has (log ids are 7 bits, see `comet_store::PhysicalOffset`).
pub const LOGS_MAX: usize = 128;

/// Why the master's log count could not be read or kept.
#[derive(Debug, Error)]
pub enum HostingError {
    /// The file could not be read, written or removed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The file holds something else than a log count from 1 to [`LOGS_MAX`].
    #[error("{path}: not a log count: {text:?}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What it holds.
        text: String,
    },
}

/// Where the master's log count is kept under `store_root`.
pub fn path(store_root: &Path) -> PathBuf {
    store_root.join(FILE_NAME)
}

/// The master's log count a slave recorded, or `None` before the first Welcome. Blocking.
pub fn read_master_logs(store_root: &Path) -> Result<Option<usize>, HostingError> {
    let path = path(store_root);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(source) if source.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(HostingError::Io { path, source }),
    };
    let count = text
        .trim()
        .strip_prefix("logs ")
        .and_then(|count| count.parse::<usize>().ok())
        .filter(|count| (1..=LOGS_MAX).contains(count));
    match count {
        Some(count) => Ok(Some(count)),
        None => Err(HostingError::Malformed { path, text }),
    }
}

/// Records the master's log count for the next start. Blocking.
pub fn record_master_logs(store_root: &Path, count: usize) -> Result<(), HostingError> {
    assert!(
        (1..=LOGS_MAX).contains(&count),
        "a master has 1 to 128 logs"
    );
    let path = path(store_root);
    crate::persist::write_atomic(&path, format!("logs {count}\n").as_bytes())
        .map_err(|source| HostingError::Io { path, source })
}

/// Forgets a recorded count (a master: its queues belong to its own shards). Blocking.
pub fn forget_master_logs(store_root: &Path) -> Result<(), HostingError> {
    let path = path(store_root);
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(source) if source.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(HostingError::Io { path, source }),
    }
}

/// How many logs the queues belong to: a master's shard count, or the master's log count a
/// slave recorded (its shard count before it knows). Blocking.
pub fn queue_logs(
    store_root: &Path,
    shard_count: usize,
    is_master: bool,
) -> Result<usize, HostingError> {
    if is_master {
        forget_master_logs(store_root)?;
        return Ok(shard_count);
    }
    Ok(read_master_logs(store_root)?.unwrap_or(shard_count))
}

/// The logs shard `shard` hosts among `queue_logs` when `shard_count` shards run: every
/// `l` with `l % shard_count == shard`, its own log first when it has one. Empty for a shard
/// past the logs (a slave with more shards than its master has logs).
pub fn hosted_logs(shard: usize, shard_count: usize, queue_logs: usize) -> Vec<usize> {
    assert!(shard < shard_count);
    (shard..queue_logs).step_by(shard_count).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_are_spread_over_the_shards_by_remainder() {
        assert_eq!(hosted_logs(0, 1, 2), vec![0, 1]);
        assert_eq!(hosted_logs(0, 2, 5), vec![0, 2, 4]);
        assert_eq!(hosted_logs(1, 2, 5), vec![1, 3]);
        assert_eq!(hosted_logs(1, 2, 2), vec![1]);
        assert!(
            hosted_logs(3, 4, 2).is_empty(),
            "a shard past the logs hosts none"
        );
    }

    #[test]
    fn the_count_is_kept_and_read_back() {
        let root = std::env::temp_dir().join(format!("comet-hosting-{}", std::process::id()));
        std::fs::create_dir_all(&root).unwrap();
        assert_eq!(read_master_logs(&root).unwrap(), None);
        assert_eq!(queue_logs(&root, 1, false).unwrap(), 1);
        record_master_logs(&root, 3).unwrap();
        assert_eq!(read_master_logs(&root).unwrap(), Some(3));
        assert_eq!(queue_logs(&root, 1, false).unwrap(), 3);
        assert_eq!(
            queue_logs(&root, 1, true).unwrap(),
            1,
            "a master uses its shards"
        );
        assert_eq!(
            read_master_logs(&root).unwrap(),
            None,
            "and forgets the count"
        );
        std::fs::write(path(&root), "logs 0\n").unwrap();
        assert!(matches!(
            read_master_logs(&root),
            Err(HostingError::Malformed { .. })
        ));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
