//! The controller's durable Raft log: every entry and every hard state (term, vote, commit
//! point) the Raft node must keep across a crash, in one append-only file
//! `raft.log` under `controllerStorePath`.
//!
//! A record is `[body length u32 LE][CRC32 of body u32 LE][body]`, the body a kind byte and
//! the protobuf encoding of one `Entry` or `HardState`. [`RaftStore::append`] writes records
//! and `fdatasync`s before it returns, so a vote or an acknowledged entry is never lost.
//! A crash mid-write leaves a torn tail: [`RaftStore::open`] reads records until the first
//! one that is short, fails its checksum or does not decode, and cuts the file there (it is
//! the unacknowledged end of the last write). An entry whose index is at or below the last
//! one read replaces that suffix, as Raft replaces a follower's conflicting entries: the file
//! is never rewritten in place.
//!
//! A snapshot (the controller's state at an applied index, the protobuf encoding of a
//! raft-rs `Snapshot` in one record) lives in the file `snapshot` beside the log.
//! [`RaftStore::save_snapshot`] replaces it and then rewrites the log with only the entries
//! after it, each file replaced whole (written aside, fsynced, renamed): a crash between the
//! two leaves the new snapshot with the old log, whose entries up to the snapshot are then
//! dropped at the next open.
//!
//! The calls block (file I/O): the controller runs them on the blocking thread
//! (`comet_rt::task_class::run_blocking`), never on the shard.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use protobuf::Message as _;
use raft::eraftpb::{Entry, HardState, Snapshot};
use thiserror::Error;

/// The log's file name inside `controllerStorePath`.
pub const LOG_FILE_NAME: &str = "raft.log";
/// The snapshot's file name inside `controllerStorePath`.
pub const SNAPSHOT_FILE_NAME: &str = "snapshot";

const RECORD_HEADER_BYTES: usize = 8;
/// A bound on one record, far above any controller entry, so that a corrupt length cannot
/// make recovery allocate the disk's size.
const RECORD_BODY_BYTES_MAX: usize = 64 * 1024 * 1024;
const KIND_ENTRY: u8 = 1;
const KIND_HARD_STATE: u8 = 2;
const KIND_SNAPSHOT: u8 = 3;

/// Why the log cannot be used.
#[derive(Debug, Error)]
pub enum StoreError {
    /// A file operation failed.
    #[error("controller log {path}: {operation}: {source}")]
    Io {
        /// What was being done.
        operation: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// A record to write does not encode.
    #[error("controller log: cannot encode a record: {0}")]
    Encode(#[from] protobuf::ProtobufError),
    /// A record is larger than a record may be.
    #[error("controller log: a record of {0} bytes is too large")]
    TooLarge(usize),
    /// The snapshot file does not hold one whole, valid snapshot. It is replaced whole, so
    /// this is damage from outside, not a crash: the member does not start on a guess.
    #[error("controller snapshot {0} is damaged: move it away to copy the state from the leader")]
    DamagedSnapshot(PathBuf),
}

/// What the log held when it was opened.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Recovered {
    /// The last hard state written (default when none was).
    pub hard_state: HardState,
    /// The snapshot, if one was taken or received.
    pub snapshot: Option<Snapshot>,
    /// The entries after the snapshot, contiguous by index.
    pub entries: Vec<Entry>,
    /// Bytes cut from the end because they did not form whole valid records.
    pub cut_bytes: u64,
}

/// The open log, appended to by the controller's Raft task.
#[derive(Debug)]
pub struct RaftStore {
    dir: PathBuf,
    path: PathBuf,
    file: File,
}

impl RaftStore {
    /// Opens (or creates) the log in `dir`, reads it back and cuts a torn tail.
    pub fn open(dir: &Path) -> Result<(RaftStore, Recovered), StoreError> {
        let io = |operation, path: &Path| {
            let path = path.to_owned();
            move |source| StoreError::Io {
                operation,
                path,
                source,
            }
        };
        std::fs::create_dir_all(dir).map_err(io("create folder", dir))?;
        let path = dir.join(LOG_FILE_NAME);
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)
            .map_err(io("open", &path))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io("read", &path))?;
        let (mut recovered, valid_len) = parse(&bytes);
        let valid_len = valid_len as u64;
        let file_len = bytes.len() as u64;
        if valid_len < file_len {
            log::warn!(
                "controller log {}: cutting {} bytes of torn or corrupt tail",
                path.display(),
                file_len - valid_len
            );
            file.set_len(valid_len).map_err(io("truncate", &path))?;
            file.sync_all().map_err(io("fsync", &path))?;
            recovered.cut_bytes = file_len - valid_len;
        }
        comet_rt::fs::sync_dir(dir).map_err(io("fsync folder", dir))?;
        let snapshot_path = dir.join(SNAPSHOT_FILE_NAME);
        match std::fs::read(&snapshot_path) {
            Ok(bytes) => {
                let snapshot = record_at(&bytes, 0)
                    .filter(|(kind, payload)| {
                        *kind == KIND_SNAPSHOT
                            && RECORD_HEADER_BYTES + payload.len() + 1 == bytes.len()
                    })
                    .and_then(|(_, payload)| Snapshot::parse_from_bytes(payload).ok())
                    .ok_or_else(|| StoreError::DamagedSnapshot(snapshot_path.clone()))?;
                let index = snapshot.get_metadata().index;
                recovered.entries.retain(|entry| entry.index > index);
                if recovered
                    .entries
                    .first()
                    .is_some_and(|entry| entry.index != index + 1)
                {
                    // Entries that do not follow the snapshot cannot be used.
                    recovered.entries.clear();
                }
                recovered.snapshot = Some(snapshot);
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => return Err(io("read", &snapshot_path)(error)),
        }
        let store = RaftStore {
            dir: dir.to_owned(),
            path,
            file,
        };
        Ok((store, recovered))
    }

    /// Makes `snapshot` the member's snapshot and rewrites the log to hold only
    /// `entries_after` (the entries past it) and `hard_state`; durable when it returns.
    pub fn save_snapshot(
        &mut self,
        snapshot: &Snapshot,
        entries_after: &[Entry],
        hard_state: &HardState,
    ) -> Result<(), StoreError> {
        let mut snapshot_bytes = Vec::new();
        push_record(
            &mut snapshot_bytes,
            KIND_SNAPSHOT,
            &snapshot.write_to_bytes()?,
        )?;
        let mut log_bytes = Vec::new();
        for entry in entries_after {
            push_record(&mut log_bytes, KIND_ENTRY, &entry.write_to_bytes()?)?;
        }
        push_record(
            &mut log_bytes,
            KIND_HARD_STATE,
            &hard_state.write_to_bytes()?,
        )?;
        let snapshot_path = self.dir.join(SNAPSHOT_FILE_NAME);
        let io = |operation, path: &Path| {
            let path = path.to_owned();
            move |source| StoreError::Io {
                operation,
                path,
                source,
            }
        };
        comet_rt::fs::write_atomic(&snapshot_path, &snapshot_bytes)
            .map_err(io("replace", &snapshot_path))?;
        comet_rt::fs::write_atomic(&self.path, &log_bytes).map_err(io("replace", &self.path))?;
        self.file = OpenOptions::new()
            .append(true)
            .open(&self.path)
            .map_err(io("open", &self.path))?;
        Ok(())
    }

    /// Appends `entries` and then `hard_state`, and makes them durable before returning.
    pub fn append(
        &mut self,
        entries: &[Entry],
        hard_state: Option<&HardState>,
    ) -> Result<(), StoreError> {
        let mut buffer = Vec::new();
        for entry in entries {
            push_record(&mut buffer, KIND_ENTRY, &entry.write_to_bytes()?)?;
        }
        if let Some(hard_state) = hard_state {
            push_record(&mut buffer, KIND_HARD_STATE, &hard_state.write_to_bytes()?)?;
        }
        if buffer.is_empty() {
            return Ok(());
        }
        let io = |operation| {
            let path = self.path.clone();
            move |source| StoreError::Io {
                operation,
                path,
                source,
            }
        };
        self.file.write_all(&buffer).map_err(io("write"))?;
        self.file.sync_data().map_err(io("fdatasync"))?;
        Ok(())
    }
}

fn push_record(buffer: &mut Vec<u8>, kind: u8, payload: &[u8]) -> Result<(), StoreError> {
    let body_len = payload.len() + 1;
    if body_len > RECORD_BODY_BYTES_MAX {
        return Err(StoreError::TooLarge(body_len));
    }
    let mut crc = crc32fast::Hasher::new();
    crc.update(&[kind]);
    crc.update(payload);
    let body_len = u32::try_from(body_len).map_err(|_| StoreError::TooLarge(body_len))?;
    buffer.extend_from_slice(&body_len.to_le_bytes());
    buffer.extend_from_slice(&crc.finalize().to_le_bytes());
    buffer.push(kind);
    buffer.extend_from_slice(payload);
    Ok(())
}

/// Reads records from the start of `bytes`: what they hold and how many bytes form whole
/// valid records.
pub fn parse(bytes: &[u8]) -> (Recovered, usize) {
    let mut recovered = Recovered::default();
    let mut at = 0;
    while let Some((kind, payload)) = record_at(bytes, at) {
        let fits = match kind {
            KIND_ENTRY => match Entry::parse_from_bytes(payload) {
                Ok(entry) => add_entry(&mut recovered.entries, entry),
                Err(_) => false,
            },
            KIND_HARD_STATE => match HardState::parse_from_bytes(payload) {
                Ok(hard_state) => {
                    recovered.hard_state = hard_state;
                    true
                }
                Err(_) => false,
            },
            _ => false,
        };
        if !fits {
            break;
        }
        at += RECORD_HEADER_BYTES + payload.len() + 1;
    }
    (recovered, at)
}

/// The record starting at `at`, if a whole one with a matching checksum is there.
fn record_at(bytes: &[u8], at: usize) -> Option<(u8, &[u8])> {
    let header = bytes.get(at..at.checked_add(RECORD_HEADER_BYTES)?)?;
    let body_len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
    let crc = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    if body_len == 0 || body_len > RECORD_BODY_BYTES_MAX {
        return None;
    }
    let start = at + RECORD_HEADER_BYTES;
    let body = bytes.get(start..start.checked_add(body_len)?)?;
    (crc32fast::hash(body) == crc).then(|| (body[0], &body[1..]))
}

/// Adds an entry read back: one at or below the last index replaces that suffix (a leader
/// overwrote conflicting entries); one past the next index means the file is not a log this
/// store wrote, so reading stops there.
fn add_entry(entries: &mut Vec<Entry>, entry: Entry) -> bool {
    if let Some(first) = entries.first().map(|first| first.index) {
        if entry.index < first || entry.index > first + entries.len() as u64 {
            return false;
        }
        let keep = usize::try_from(entry.index - first).unwrap_or(usize::MAX);
        entries.truncate(keep);
    }
    entries.push(entry);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(index: u64, term: u64, data: &[u8]) -> Entry {
        Entry {
            index,
            term,
            data: data.to_vec().into(),
            ..Entry::default()
        }
    }

    fn hard_state(term: u64, vote: u64, commit: u64) -> HardState {
        HardState {
            term,
            vote,
            commit,
            ..HardState::default()
        }
    }

    // Proves entries and the last hard state survive a reopen, that a torn last record (a
    // crash mid-write) and a flipped byte in the last record are cut, not a panic, and that
    // what came before them, the hard state included, is kept; appending after the cut works.
    #[test]
    fn recovery_cuts_a_torn_tail_and_keeps_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (mut store, recovered) = RaftStore::open(dir.path()).unwrap();
            assert_eq!(recovered, Recovered::default());
            store
                .append(
                    &[entry(1, 1, b"a"), entry(2, 1, b"b")],
                    Some(&hard_state(1, 2, 1)),
                )
                .unwrap();
            store
                .append(&[entry(3, 1, b"c")], Some(&hard_state(1, 2, 2)))
                .unwrap();
        }
        let path = dir.path().join(LOG_FILE_NAME);
        let whole = std::fs::read(&path).unwrap();
        // A crash mid-write: the last record (the second hard state) is half there.
        std::fs::write(&path, &whole[..whole.len() - 5]).unwrap();
        let (mut store, recovered) = RaftStore::open(dir.path()).unwrap();
        assert_eq!(recovered.entries.len(), 3);
        assert_eq!(recovered.entries[2].data.as_ref(), b"c");
        assert_eq!(
            recovered.hard_state,
            hard_state(1, 2, 1),
            "the earlier hard state kept"
        );
        assert!(recovered.cut_bytes > 0);
        store
            .append(&[entry(4, 2, b"d")], Some(&hard_state(2, 3, 3)))
            .unwrap();
        drop(store);
        let (_, recovered) = RaftStore::open(dir.path()).unwrap();
        assert_eq!(recovered.entries.len(), 4);
        assert_eq!(recovered.hard_state, hard_state(2, 3, 3));
        assert_eq!(recovered.cut_bytes, 0);

        // A flipped byte inside the last record: its checksum fails, it is cut.
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 2;
        bytes[last] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let (_, recovered) = RaftStore::open(dir.path()).unwrap();
        assert_eq!(recovered.entries.len(), 4);
        assert_eq!(recovered.hard_state, hard_state(1, 2, 1));
        assert!(recovered.cut_bytes > 0);
        let after_cut = std::fs::metadata(&path).unwrap().len();
        assert_eq!(after_cut, bytes.len() as u64 - recovered.cut_bytes);
    }

    // Proves an entry written again at a lower index replaces the suffix it conflicts with,
    // as a follower's log is overwritten by a new leader.
    #[test]
    fn a_rewritten_index_replaces_the_suffix() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, _) = RaftStore::open(dir.path()).unwrap();
        store
            .append(
                &[entry(1, 1, b"a"), entry(2, 1, b"b"), entry(3, 1, b"c")],
                None,
            )
            .unwrap();
        store.append(&[entry(2, 2, b"x")], None).unwrap();
        drop(store);
        let (_, recovered) = RaftStore::open(dir.path()).unwrap();
        let seen: Vec<(u64, u64)> = recovered
            .entries
            .iter()
            .map(|e| (e.index, e.term))
            .collect();
        assert_eq!(seen, vec![(1, 1), (2, 2)]);
    }

    // Proves a saved snapshot comes back with only the entries after it and the hard state,
    // that appends after it land in the rewritten log, and that a damaged snapshot stops the
    // open with an error instead of a guess.
    #[test]
    fn a_snapshot_replaces_the_entries_it_covers() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, _) = RaftStore::open(dir.path()).unwrap();
        store
            .append(
                &[entry(1, 1, b"a"), entry(2, 1, b"b"), entry(3, 1, b"c")],
                Some(&hard_state(1, 1, 3)),
            )
            .unwrap();
        let mut snapshot = Snapshot {
            data: b"state at 2".to_vec().into(),
            ..Snapshot::default()
        };
        snapshot.mut_metadata().index = 2;
        snapshot.mut_metadata().term = 1;
        store
            .save_snapshot(&snapshot, &[entry(3, 1, b"c")], &hard_state(1, 1, 3))
            .unwrap();
        store.append(&[entry(4, 2, b"d")], None).unwrap();
        drop(store);
        let (_, recovered) = RaftStore::open(dir.path()).unwrap();
        assert_eq!(recovered.snapshot.as_ref(), Some(&snapshot));
        let indexes: Vec<u64> = recovered.entries.iter().map(|e| e.index).collect();
        assert_eq!(indexes, vec![3, 4]);
        assert_eq!(recovered.hard_state, hard_state(1, 1, 3));

        let path = dir.path().join(SNAPSHOT_FILE_NAME);
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let error = RaftStore::open(dir.path()).unwrap_err();
        assert!(matches!(error, StoreError::DamagedSnapshot(_)), "{error}");
    }

    // Proves garbage (not a log) is cut from its first byte instead of failing the start.
    #[test]
    fn garbage_is_cut() {
        let (recovered, valid) = parse(b"\xff\xff\xff\x7fnot a raft log at all");
        assert_eq!(valid, 0);
        assert!(recovered.entries.is_empty());
    }
}
