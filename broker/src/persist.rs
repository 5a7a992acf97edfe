//! Atomic persistence of the broker's small config files (`config/*.json`).
//!
//! A file is replaced through `comet_rt::fs` (temporary file, fsync, rename, directory fsync)
//! after keeping the previous version as `<name>.bak`, so a crash at any point leaves either
//! the old or the new content, never a torn mix. Loading falls back to
//! `.bak` when the main file is missing, empty or unparsable, as RocketMQ does.
//!
//! These are blocking calls on small files; callers run them off the shards' hot path (at
//! start-up, at shutdown, and from the periodic persist task).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

/// Writes `bytes` to `path` atomically and durably, keeping the previous version as
/// `<name>.bak` for [`read_json`]'s fallback.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    comet_rt::fs::write_atomic_keeping_backup(path, bytes)
}

/// Writes `value` as JSON to `path` with [`write_atomic`]; a value that does not encode is an
/// [`io::ErrorKind::Other`] error, and nothing is written.
pub fn write_json_atomic<T: serde::Serialize>(path: &Path, value: &T) -> io::Result<()> {
    let bytes = serde_json::to_vec(value).map_err(io::Error::other)?;
    write_atomic(path, &bytes)
}

/// A config file that exists but cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    /// The file cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// The file does not parse.
    #[error("cannot parse {}: {source}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// Reads and parses `path`, falling back to `<path>.bak`. `Ok(None)` when neither exists
/// (or both are empty); otherwise the error of the last candidate tried.
pub fn read_json<T, E>(
    path: &Path,
    parse: impl Fn(&[u8]) -> Result<T, E>,
) -> Result<Option<T>, PersistError>
where
    E: std::error::Error + Send + Sync + 'static,
{
    let mut last_error = None;
    for candidate in [path.to_path_buf(), comet_rt::fs::backup_path(path)] {
        match fs::read(&candidate) {
            Ok(bytes) if bytes.iter().all(u8::is_ascii_whitespace) => continue,
            Ok(bytes) => match parse(&bytes) {
                Ok(value) => return Ok(Some(value)),
                Err(error) => {
                    log::warn!("cannot parse {}: {error}", candidate.display());
                    last_error = Some(PersistError::Parse {
                        path: candidate,
                        source: Box::new(error),
                    });
                }
            },
            Err(error) if error.kind() == io::ErrorKind::NotFound => continue,
            Err(source) => {
                last_error = Some(PersistError::Read {
                    path: candidate,
                    source,
                })
            }
        }
    }
    match last_error {
        Some(error) => Err(error),
        None => Ok(None),
    }
}

/// One file of a per-shard family read by [`read_json_family`].
pub struct FamilyFile<T> {
    /// The file name.
    pub name: String,
    /// Its content (`Ok(None)`: empty or gone; `Err`: unreadable or unparsable).
    pub parsed: Result<Option<T>, PersistError>,
}

/// Reads every `<prefix>*.json` file directly in `directory` as JSON of type `T`, in name
/// order (blocking). Per-shard files (one per shard, `<prefix>-<shard>.json`) are read this
/// way so that a changed core count still finds every shard's file. An unreadable directory
/// gives no files.
pub fn read_json_family<T: DeserializeOwned>(directory: &Path, prefix: &str) -> Vec<FamilyFile<T>> {
    let Ok(entries) = fs::read_dir(directory) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(prefix) && name.ends_with(".json"))
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let parsed = read_json(&directory.join(&name), |bytes| {
                serde_json::from_slice::<T>(bytes)
            });
            FamilyFile { name, parsed }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(bytes: &[u8]) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::from_slice(bytes)
    }

    // Proves replace-with-backup, and that a corrupt main file falls back to the backup.
    #[test]
    fn atomic_write_and_backup_fallback() {
        let directory = std::env::temp_dir().join(format!("comet-persist-{}", std::process::id()));
        let path = directory.join("config/topics.json");
        assert!(matches!(read_json(&path, parse), Ok(None)));
        write_atomic(&path, b"{\"v\":1}").unwrap();
        write_atomic(&path, b"{\"v\":2}").unwrap();
        assert_eq!(read_json(&path, parse).unwrap().unwrap()["v"], 2);
        fs::write(&path, b"{garbage").unwrap();
        assert_eq!(read_json(&path, parse).unwrap().unwrap()["v"], 1);
        fs::write(comet_rt::fs::backup_path(&path), b"[").unwrap();
        match read_json(&path, parse) {
            Err(PersistError::Parse {
                path: failed,
                source,
            }) => {
                assert_eq!(failed, comet_rt::fs::backup_path(&path));
                assert!(source.downcast_ref::<serde_json::Error>().is_some());
            }
            other => panic!("expected a parse error, got {:?}", other.map(|_| ())),
        }
        fs::remove_dir_all(&directory).unwrap();
    }
}
