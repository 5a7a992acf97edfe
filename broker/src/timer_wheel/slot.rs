//! Slot files: the persistent part of the timing wheel.
//!
//! One file per (timer queue, due second): `<storePathRootDir>/timerwheel/<queue>/<second>`,
//! where `<second>` is the entry's due time in epoch seconds. A file is a sequence of 24-byte
//! little-endian entries, appended only:
//!
//! ```text
//! 0   due_ms        i64  effective due time, epoch ms (see `super::wheel` for "effective")
//! 8   queue_offset  i64  offset of the timer record in its timer queue
//! 16  crc           u32  CRC-32 (IEEE) of bytes 0..16
//! 20  reserved      u32  zero
//! ```
//!
//! Entries name a consume-queue offset rather than a physical offset because a slot is read
//! back in queue order, in runs of consecutive offsets, through the store's batched reads
//! (one disk read serves many records); the physical offset and size come from the consume
//! queue. Appends are fsynced (and the directory, when the file is new) before the wheel's
//! enqueue cursor moves past them. A torn last entry (crash mid-append) is ignored; an entry
//! whose CRC does not match is skipped and logged. The same entry may appear twice (written,
//! then written again after a crash before the cursor moved): readers deduplicate by queue
//! offset.
//!
//! Every function here is blocking: the wheel runs them off the shard thread.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use super::limits::{SLOT_ENTRY_BYTES, SLOT_FILE_BYTES_MAX};

/// One timer entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotEntry {
    /// Effective due time, epoch ms.
    pub due_ms: i64,
    /// Offset of the timer record in its queue.
    pub queue_offset: i64,
}

impl SlotEntry {
    /// The 24-byte form.
    pub fn encode(&self) -> [u8; SLOT_ENTRY_BYTES] {
        let mut bytes = [0u8; SLOT_ENTRY_BYTES];
        bytes[0..8].copy_from_slice(&self.due_ms.to_le_bytes());
        bytes[8..16].copy_from_slice(&self.queue_offset.to_le_bytes());
        let crc = crc32fast::hash(&bytes[0..16]);
        bytes[16..20].copy_from_slice(&crc.to_le_bytes());
        bytes
    }

    /// Parses one entry; `None` when its CRC does not match.
    pub fn decode(bytes: &[u8; SLOT_ENTRY_BYTES]) -> Option<SlotEntry> {
        let crc = u32::from_le_bytes(bytes[16..20].try_into().expect("4 bytes"));
        if crc != crc32fast::hash(&bytes[0..16]) {
            return None;
        }
        Some(SlotEntry {
            due_ms: i64::from_le_bytes(bytes[0..8].try_into().expect("8 bytes")),
            queue_offset: i64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes")),
        })
    }
}

/// The second a due time falls in.
pub fn second_of(due_ms: i64) -> i64 {
    due_ms.div_euclid(1000)
}

/// `<root>/timerwheel`.
pub fn wheel_dir(store_root: &Path) -> PathBuf {
    store_root.join("timerwheel")
}

/// The directory of one timer queue's slots.
pub fn queue_dir(store_root: &Path, queue_id: i32) -> PathBuf {
    wheel_dir(store_root).join(queue_id.to_string())
}

/// The slot file of (queue, second).
pub fn slot_path(store_root: &Path, queue_id: i32, second: i64) -> PathBuf {
    queue_dir(store_root, queue_id).join(second.to_string())
}

/// Appends entries to their slot files, grouped by (queue, second), and makes them durable
/// (file data, and the directory entry of each new file).
pub fn append(store_root: &Path, batch: &BTreeMap<(i32, i64), Vec<SlotEntry>>) -> io::Result<()> {
    let mut new_dirs = BTreeMap::new();
    for ((queue_id, second), entries) in batch {
        assert!(!entries.is_empty());
        let directory = queue_dir(store_root, *queue_id);
        if !directory.exists() {
            fs::create_dir_all(&directory)?;
            new_dirs.insert(wheel_dir(store_root), ());
        }
        let path = directory.join(second.to_string());
        let created = !path.exists();
        let mut bytes = Vec::with_capacity(entries.len() * SLOT_ENTRY_BYTES);
        for entry in entries {
            bytes.extend_from_slice(&entry.encode());
        }
        let mut file = OpenOptions::new().create(true).append(true).open(&path)?;
        file.write_all(&bytes)
            .map_err(|e| with_path(e, "append to", &path))?;
        file.sync_data()
            .map_err(|e| with_path(e, "fdatasync", &path))?;
        if created {
            new_dirs.insert(directory, ());
        }
    }
    for directory in new_dirs.keys() {
        File::open(directory)?.sync_all()?;
    }
    Ok(())
}

fn with_path(error: io::Error, operation: &str, path: &Path) -> io::Error {
    io::Error::new(
        error.kind(),
        format!("{operation} {}: {error}", path.display()),
    )
}

/// Reads a slot file; missing files are empty. Entries come in file order, duplicates kept.
pub fn read(path: &Path) -> io::Result<Vec<SlotEntry>> {
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(with_path(e, "open", path)),
    };
    let length = file.metadata()?.len();
    if length > SLOT_FILE_BYTES_MAX {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "slot file {} holds {length} bytes, over the {SLOT_FILE_BYTES_MAX} limit",
                path.display()
            ),
        ));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(length).unwrap_or(0));
    file.read_to_end(&mut bytes)
        .map_err(|e| with_path(e, "read", path))?;
    let mut entries = Vec::with_capacity(bytes.len() / SLOT_ENTRY_BYTES);
    let mut corrupt = 0usize;
    for chunk in bytes.chunks_exact(SLOT_ENTRY_BYTES) {
        let chunk: &[u8; SLOT_ENTRY_BYTES] = chunk.try_into().expect("exact chunk");
        match SlotEntry::decode(chunk) {
            Some(entry) => entries.push(entry),
            None => corrupt += 1,
        }
    }
    if corrupt > 0 {
        log::error!(
            "slot file {}: {corrupt} corrupt entries skipped",
            path.display()
        );
    }
    Ok(entries)
}

/// The seconds that have a slot file for `queue_id`.
pub fn list_seconds(store_root: &Path, queue_id: i32) -> io::Result<Vec<i64>> {
    let directory = queue_dir(store_root, queue_id);
    let entries = match fs::read_dir(&directory) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(with_path(e, "list", &directory)),
    };
    let mut seconds: Vec<i64> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .collect();
    seconds.sort_unstable();
    Ok(seconds)
}

/// Deletes the slot file of (queue, second) once all its entries are delivered.
pub fn remove(store_root: &Path, queue_id: i32, second: i64) -> io::Result<()> {
    match fs::remove_file(slot_path(store_root, queue_id, second)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves entries survive an append/read round trip in order, that a torn tail entry and a
    // corrupted entry are dropped without failing the read, and that seconds are listed.
    #[test]
    fn slot_files_round_trip_and_tolerate_damage() {
        let root = std::env::temp_dir().join(format!("comet-slot-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let first = SlotEntry {
            due_ms: 1_700_000_000_123,
            queue_offset: 7,
        };
        let second = SlotEntry {
            due_ms: 1_700_000_000_999,
            queue_offset: 8,
        };
        let batch = BTreeMap::from([((3, 1_700_000_000), vec![first, second])]);
        append(&root, &batch).unwrap();
        append(&root, &batch).unwrap();
        let path = slot_path(&root, 3, 1_700_000_000);
        assert_eq!(read(&path).unwrap(), vec![first, second, first, second]);
        let mut bytes = fs::read(&path).unwrap();
        bytes[SLOT_ENTRY_BYTES + 3] ^= 0xFF;
        bytes.extend_from_slice(&[1, 2, 3]);
        fs::write(&path, &bytes).unwrap();
        assert_eq!(read(&path).unwrap(), vec![first, first, second]);
        assert_eq!(list_seconds(&root, 3).unwrap(), vec![1_700_000_000]);
        assert!(read(&slot_path(&root, 3, 5)).unwrap().is_empty());
        remove(&root, 3, 1_700_000_000).unwrap();
        assert!(list_seconds(&root, 3).unwrap().is_empty());
        assert_eq!(second_of(1999), 1);
        assert_eq!(second_of(-1), -1);
        fs::remove_dir_all(&root).unwrap();
    }
}
