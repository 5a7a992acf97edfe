//! Whole-file replacement that survives a crash at any point: the one writer every component
//! uses for its small files (config, cursors, layout, sealed indexes, KV config).
//!
//! A file is replaced by writing `<name>.tmp`, fsyncing it, renaming it over `<name>` and
//! fsyncing the directory, so after a crash the file holds either the old or the new content,
//! never a torn mix, and a completed call is durable. Without the file fsync a crash after the
//! rename can leave an empty file; without the directory fsync the rename itself can be lost.
//!
//! These are blocking calls: broker shards run them on the blocking thread
//! (`comet_rt::task_class::run_blocking`) or at start-up; the client calls them from its own
//! threads. A crate of its own, with no runtime, so that the client (which must not depend on the
//! broker's runtime) and the server crates share one writer (`comet_rt::fs` re-exports it). Every
//! error is an [`std::io::Error`] of the original kind whose payload is a [`FileError`] naming the
//! operation and the path.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Suffix appended to a file's name for the temporary file it is written through.
pub const TEMPORARY_SUFFIX: &str = ".tmp";
/// Suffix appended to a file's name for the previous version kept by
/// [`write_atomic_keeping_backup`].
pub const BACKUP_SUFFIX: &str = ".bak";

/// A failed file operation with its context (the payload of the `io::Error`s returned here).
#[derive(Debug, thiserror::Error)]
#[error("{operation} {}: {source}", path.display())]
pub struct FileError {
    /// The operation that failed (`"write"`, `"fsync"`, `"rename"`, ...).
    pub operation: &'static str,
    /// The file or directory it was done on.
    pub path: PathBuf,
    /// The operating system's error.
    #[source]
    pub source: io::Error,
}

/// Wraps `source` so that it names `operation` and `path`, keeping its kind.
pub fn file_error(operation: &'static str, path: &Path, source: io::Error) -> io::Error {
    let kind = source.kind();
    io::Error::new(
        kind,
        FileError {
            operation,
            path: path.to_path_buf(),
            source,
        },
    )
}

/// `path` with `suffix` appended to its file name (`a/b.json` + `.tmp` = `a/b.json.tmp`).
pub fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// The temporary file `path` is written through.
pub fn temporary_path(path: &Path) -> PathBuf {
    with_suffix(path, TEMPORARY_SUFFIX)
}

/// The backup [`write_atomic_keeping_backup`] keeps of `path`.
pub fn backup_path(path: &Path) -> PathBuf {
    with_suffix(path, BACKUP_SUFFIX)
}

/// Replaces the content of `path` with `bytes` atomically and durably (see the module docs),
/// creating missing parent directories.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace(path, bytes, false)
}

/// As [`write_atomic`], and first copies the current content (if any) to `<name>.bak`, so a
/// reader can fall back to the previous version when the current one does not parse, as
/// RocketMQ's `MixAll.string2File` does for its config files.
pub fn write_atomic_keeping_backup(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace(path, bytes, true)
}

/// Fsyncs the directory `dir`, making the creation, rename or removal of its entries durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)
        .and_then(|file| file.sync_all())
        .map_err(|error| file_error("fsync directory", dir, error))
}

fn replace(path: &Path, bytes: &[u8], keep_backup: bool) -> io::Result<()> {
    let directory = path
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    create_dir_durably(directory)?;
    let temporary = temporary_path(path);
    write_synced(&temporary, bytes)?;
    let result = back_up_and_rename(path, &temporary, keep_backup);
    if result.is_err() {
        // Best effort: the error being returned matters more than a leftover temporary file.
        let _ = fs::remove_file(&temporary);
    }
    result?;
    sync_dir(directory)
}

fn write_synced(temporary: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(temporary)
        .map_err(|error| file_error("create", temporary, error))?;
    let written = file
        .write_all(bytes)
        .map_err(|error| file_error("write", temporary, error))
        .and_then(|()| {
            file.sync_all()
                .map_err(|error| file_error("fsync", temporary, error))
        });
    if written.is_err() {
        drop(file);
        let _ = fs::remove_file(temporary);
    }
    written
}

fn back_up_and_rename(path: &Path, temporary: &Path, keep_backup: bool) -> io::Result<()> {
    if keep_backup && path.is_file() {
        let backup = backup_path(path);
        fs::copy(path, &backup).map_err(|error| file_error("copy to backup", &backup, error))?;
        File::open(&backup)
            .and_then(|file| file.sync_all())
            .map_err(|error| file_error("fsync", &backup, error))?;
    }
    fs::rename(temporary, path).map_err(|error| file_error("rename over", path, error))
}

/// Creates `dir` and its missing ancestors, fsyncing the parent of each directory created so
/// that the new entries survive a crash too.
fn create_dir_durably(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let missing: Vec<&Path> = dir
        .ancestors()
        .take_while(|ancestor| !ancestor.as_os_str().is_empty() && !ancestor.exists())
        .collect();
    fs::create_dir_all(dir).map_err(|error| file_error("create directory", dir, error))?;
    for created in missing.iter().rev() {
        let parent = created
            .parent()
            .filter(|parent| !parent.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        sync_dir(parent)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    // Proves a longer content is replaced by a shorter one whole (no tail of the old one), in
    // a directory the call creates, and that no temporary file stays behind.
    #[test]
    fn content_is_replaced_whole_without_leftovers() {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("a/b/state.json");
        write_atomic(&path, b"a much longer first version").unwrap();
        write_atomic(&path, b"short").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"short");
        assert_eq!(names_in(&root.path().join("a/b")), ["state.json"]);
    }

    // Proves the backup variant keeps exactly the previous version, and none on first write.
    #[test]
    fn backup_holds_the_previous_version() {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("topics.json");
        write_atomic_keeping_backup(&path, b"1").unwrap();
        assert!(!backup_path(&path).exists());
        write_atomic_keeping_backup(&path, b"2").unwrap();
        write_atomic_keeping_backup(&path, b"3").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"3");
        assert_eq!(fs::read(backup_path(&path)).unwrap(), b"2");
        assert_eq!(names_in(root.path()), ["topics.json", "topics.json.bak"]);
    }

    // Proves a failed rename leaves the old content and no temporary file, and that the
    // error names the operation and the path while keeping the OS error as its source.
    #[test]
    fn failed_rename_leaves_old_content() {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("layout");
        fs::create_dir(&path).unwrap();
        fs::write(path.join("old"), b"old").unwrap();
        let error = write_atomic(&path, b"new").unwrap_err();
        assert_eq!(fs::read(path.join("old")).unwrap(), b"old");
        assert!(!temporary_path(&path).exists());
        let detail = error
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<FileError>())
            .unwrap();
        assert_eq!(detail.operation, "rename over");
        assert_eq!(detail.path, path);
        assert!(error.to_string().contains("layout"), "{error}");
    }

    // Proves a write that cannot create its temporary file fails before touching the target.
    #[test]
    fn failed_create_leaves_old_content() {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("cursor");
        fs::write(&path, b"old").unwrap();
        fs::create_dir(temporary_path(&path)).unwrap();
        let error = write_atomic(&path, b"new").unwrap_err();
        assert_eq!(fs::read(&path).unwrap(), b"old");
        assert!(error.to_string().starts_with("create "), "{error}");
    }
}
