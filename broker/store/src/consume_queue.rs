//! Consume queues: per (topic, queueId), 20-byte entries pointing into commit logs
//! (docs/protocol.md#consume-queue-format), in segmented files
//! `consumequeue/<topic>/<queueId>/<20-digit start byte>`.
//!
//! ```text
//!  entry  0        8        12                20
//!        +--------+--------+-----------------+
//!        | physical offset i64 | size i32 | tag code i64 |
//!        +--------+--------+-----------------+
//! ```
//!
//! Entry `q` lives at byte `q * 20` of the concatenated files ([`entry_byte`] is the only
//! place that converts); a file holds `entries_per_file` entries (a multiple of 1024, so
//! files are whole pages). The schedule topic's tag field holds the due time
//! (docs/protocol.md#delay-levels).
//!
//! The queue is held in memory (entries since the oldest retained file) and written to its
//! files lazily, rewriting the partial tail page; files only save a rescan at start-up, the
//! commit log is the truth. Entries are only ever added for durable records (visibility).
//! Placeholder entries (size `0x7FFFFFFF`) fill a file's start when a queue begins mid-file,
//! and replace entries whose records were deleted (written back to their file), so a
//! deleted record is never served again, even once its log id names a new commit log.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::rc::Rc;

use comet_rt::io::{AlignedBuffer, DirectFile, FaultInjector, OpenMode};

use crate::commit_log::{align_down, align_up, to_index};
use crate::error::StoreError;
use crate::limits::CQ_ENTRY_BYTES;
use crate::offset::{file_name, parse_file_name, LogId, PhysicalOffset, QueueOffset};

/// Size field of a placeholder entry.
pub const PLACEHOLDER_SIZE: u32 = 0x7FFF_FFFF;

/// One consume-queue entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CqEntry {
    /// Where the record is.
    pub physical: PhysicalOffset,
    /// Its TOTALSIZE.
    pub size: u32,
    /// Tag hash code (sign-extended), or the due time on the schedule topic.
    pub tag_code: i64,
}

impl CqEntry {
    fn placeholder() -> CqEntry {
        CqEntry {
            physical: PhysicalOffset::from_i64(0).expect("zero"),
            size: PLACEHOLDER_SIZE,
            tag_code: 0,
        }
    }

    /// True for a placeholder (no record).
    pub fn is_placeholder(&self) -> bool {
        self.size == PLACEHOLDER_SIZE
    }

    fn encode(&self, target: &mut [u8]) {
        target[..8].copy_from_slice(&self.physical.as_i64().to_be_bytes());
        target[8..12].copy_from_slice(&self.size.to_be_bytes());
        target[12..20].copy_from_slice(&self.tag_code.to_be_bytes());
    }

    /// Decodes an entry; `None` for the all-zero end of written data or an impossible one.
    fn decode(bytes: &[u8]) -> Option<CqEntry> {
        let physical = i64::from_be_bytes(bytes[..8].try_into().expect("8 bytes"));
        let size = u32::from_be_bytes(bytes[8..12].try_into().expect("4 bytes"));
        let tag_code = i64::from_be_bytes(bytes[12..20].try_into().expect("8 bytes"));
        if size == 0 {
            return None;
        }
        Some(CqEntry {
            physical: PhysicalOffset::from_i64(physical)?,
            size,
            tag_code,
        })
    }
}

/// Byte offset of entry `offset` in the concatenated files.
pub fn entry_byte(offset: QueueOffset) -> u64 {
    offset.0 * CQ_ENTRY_BYTES
}

/// One queue (see the module docs). Lives on the shard owning the queue.
pub(crate) struct ConsumeQueue {
    dir: PathBuf,
    entries_per_file: u64,
    /// Queue offset of `entries[0]`; always a file start.
    base: u64,
    entries: VecDeque<CqEntry>,
    /// Smallest offset with a record (placeholders and deleted records lie below).
    min: u64,
    /// Entries `[base, flushed)` are in the files.
    flushed: u64,
    /// One past the last entry the files may hold (stale entries past `max` get zeroed).
    disk_end: u64,
    /// Entries below `flushed` turned into placeholders (records deleted) and not yet
    /// written back: `[low, high)`.
    rewrite: Option<(u64, u64)>,
    files: BTreeMap<u64, Rc<DirectFile>>,
}

impl ConsumeQueue {
    /// An empty queue stored in `dir`.
    pub(crate) fn new(dir: PathBuf, entries_per_file: u64) -> ConsumeQueue {
        ConsumeQueue {
            dir,
            entries_per_file,
            base: 0,
            entries: VecDeque::new(),
            min: 0,
            flushed: 0,
            disk_end: 0,
            rewrite: None,
            files: BTreeMap::new(),
        }
    }

    /// One past the last entry.
    pub(crate) fn max_offset(&self) -> u64 {
        self.base + self.entries.len() as u64
    }

    /// The first entry with a record.
    pub(crate) fn min_offset(&self) -> u64 {
        self.min.min(self.max_offset())
    }

    /// The entry at `offset`, if held.
    pub(crate) fn entry(&self, offset: u64) -> Option<CqEntry> {
        let index = offset.checked_sub(self.base)?;
        self.entries.get(to_index(index)).copied()
    }

    /// Appends the entry for `offset`, which must be the next one or lie past it (the gap,
    /// left by deleted log data, is filled with placeholders).
    pub(crate) fn push(&mut self, offset: u64, entry: CqEntry) {
        let max = self.max_offset();
        assert!(
            offset >= max,
            "entry {offset} below max {max}: offsets are dense"
        );
        if self.entries.is_empty() && offset > max {
            self.base = offset - offset % self.entries_per_file;
            self.min = offset;
            self.flushed = self.base;
        }
        while self.max_offset() < offset {
            self.entries.push_back(CqEntry::placeholder());
        }
        self.entries.push_back(entry);
        assert_eq!(self.max_offset(), offset + 1);
    }

    /// Drops trailing entries of log `log_id` at or past `position` (recovery truncation).
    pub(crate) fn truncate_from(&mut self, log_id: LogId, position: u64) {
        while let Some(last) = self.entries.back() {
            let ours = last.physical.log_id() == log_id;
            if last.is_placeholder() || !ours || last.physical.position() < position {
                break;
            }
            self.entries.pop_back();
        }
        self.flushed = self.flushed.min(self.max_offset());
    }

    /// Moves `min` past leading entries whose records are `gone` (deleted by retention of
    /// their log) and returns the files that hold only such entries (deleted by the caller).
    pub(crate) fn drop_below(
        &mut self,
        gone: impl Fn(PhysicalOffset) -> bool,
    ) -> Vec<Rc<DirectFile>> {
        let old_min = self.min.max(self.base);
        let mut new_min = old_min;
        while let Some(entry) = self.entry(new_min) {
            if !entry.is_placeholder() {
                if !gone(entry.physical) {
                    break;
                }
                self.entries[to_index(new_min - self.base)] = CqEntry::placeholder();
            }
            new_min += 1;
        }
        self.min = new_min;
        if new_min > old_min && old_min < self.flushed {
            let (low, high) = self.rewrite.unwrap_or((old_min, new_min));
            self.rewrite = Some((low.min(old_min), high.max(new_min)));
        }
        let mut dropped = Vec::new();
        while self.base + self.entries_per_file <= new_min.min(self.flushed) {
            for _ in 0..self.entries_per_file {
                self.entries.pop_front();
            }
            if let Some(file) = self.files.remove(&self.base) {
                dropped.push(file);
            }
            self.base += self.entries_per_file;
        }
        dropped
    }

    /// Loads the queue's files from disk (start-up). Entries end at the first all-zero one.
    pub(crate) async fn load(
        &mut self,
        faults: &Option<Rc<FaultInjector>>,
    ) -> Result<(), StoreError> {
        let mut starts = Vec::new();
        let listing = std::fs::read_dir(&self.dir)
            .map_err(|error| StoreError::Config(format!("list {}: {error}", self.dir.display())))?;
        for item in listing.flatten() {
            if let Some(start) = item.file_name().to_str().and_then(parse_file_name) {
                starts.push(start);
            }
        }
        starts.sort_unstable();
        for start_byte in starts {
            self.load_file(start_byte, faults).await?;
        }
        self.flushed = self.max_offset();
        self.disk_end = self.flushed;
        Ok(())
    }

    async fn load_file(
        &mut self,
        start_byte: u64,
        faults: &Option<Rc<FaultInjector>>,
    ) -> Result<(), StoreError> {
        let path = self.dir.join(file_name(start_byte));
        let file_bytes = self.entries_per_file * CQ_ENTRY_BYTES;
        if start_byte % file_bytes != 0 {
            return Err(StoreError::corrupt(
                path,
                "file start is not a file boundary",
            ));
        }
        let start = start_byte / CQ_ENTRY_BYTES;
        // The first file (by start) fixes the base, even when it holds no entry: a flush
        // killed after creating its files but before writing them leaves empty files, and
        // letting a later file become the base would put the queue's max above records that
        // recovery then rejects as stale, ending the commit log early.
        if self.files.is_empty() {
            self.base = start;
            self.min = start;
        } else if start != self.max_offset() {
            // A gap between files (or data after a short or torn file): later files are not
            // trusted; recovery rebuilds their entries from the commit log.
            return Ok(());
        }
        let file = DirectFile::open(&path, OpenMode::ReadWrite, faults.clone()).await?;
        let bytes = file.read_at(0, to_index(file_bytes)).await?;
        assert_eq!(self.max_offset(), start, "loaded entries are dense");
        for raw in bytes.chunks_exact(to_index(CQ_ENTRY_BYTES)) {
            match CqEntry::decode(raw) {
                Some(entry) => self.entries.push_back(entry),
                None => break,
            }
        }
        while self
            .entry(self.min)
            .is_some_and(|entry| entry.is_placeholder())
        {
            self.min += 1;
        }
        self.files.insert(start, Rc::new(file));
        Ok(())
    }

    /// True when entries wait to be written.
    pub(crate) fn is_dirty(&self) -> bool {
        self.flushed < self.max_offset()
            || self.disk_end > self.max_offset()
            || self.rewrite.is_some()
    }

    /// File starts (queue offsets) a flush will write to that have no open file yet.
    pub(crate) fn missing_files(&self) -> Vec<(u64, PathBuf)> {
        let end = self.max_offset().max(self.disk_end);
        let mut from = self.flushed.max(self.base);
        let mut missing = Vec::new();
        while from < end {
            let file_start = from - from % self.entries_per_file;
            if !self.files.contains_key(&file_start) {
                let path = self.dir.join(file_name(file_start * CQ_ENTRY_BYTES));
                missing.push((file_start, path));
            }
            from = file_start + self.entries_per_file;
        }
        missing
    }

    /// Adopts a file created for [`ConsumeQueue::missing_files`].
    pub(crate) fn attach_file(&mut self, file_start: u64, file: Rc<DirectFile>) {
        self.files.insert(file_start, file);
    }

    /// The writes that put unwritten entries (and zeros over stale ones) into the files that
    /// exist; the queue counts them as flushed (the caller stops the store if a write fails).
    pub(crate) fn plan_flush(&mut self) -> Vec<FileWrite> {
        let mut writes = self.plan_rewrite();
        let end = self.max_offset().max(self.disk_end);
        let mut from = self.flushed.max(self.base);
        while from < end {
            let file_start = from - from % self.entries_per_file;
            let file_end = (file_start + self.entries_per_file).min(end);
            // Entries dispatched while the missing files were being created may need a file
            // that does not exist yet: they wait for the next flush.
            let Some(file) = self.files.get(&file_start).map(Rc::clone) else {
                break;
            };
            writes.push(self.write_range(file, file_start, from, file_end));
            from = file_end;
        }
        if from >= end {
            self.disk_end = self.max_offset();
        }
        self.flushed = from.min(self.max_offset());
        writes
    }

    /// The writes that put placeholders of deleted records over their entries in the files
    /// (files already deleted need none; entries past `flushed` go with the normal flush).
    fn plan_rewrite(&mut self) -> Vec<FileWrite> {
        let Some((low, high)) = self.rewrite.take() else {
            return Vec::new();
        };
        let mut from = low.max(self.base);
        let to = high.min(self.flushed);
        let mut writes = Vec::new();
        while from < to {
            let file_start = from - from % self.entries_per_file;
            let file_end = (file_start + self.entries_per_file).min(to);
            if let Some(file) = self.files.get(&file_start).map(Rc::clone) {
                writes.push(self.write_range(file, file_start, from, file_end));
            }
            from = file_end;
        }
        writes
    }

    fn write_range(&self, file: Rc<DirectFile>, file_start: u64, from: u64, to: u64) -> FileWrite {
        let low_byte = align_down((from - file_start) * CQ_ENTRY_BYTES);
        let high_byte = align_up((to - file_start) * CQ_ENTRY_BYTES);
        let mut buffer = file.alloc_buffer(to_index(high_byte - low_byte));
        let first = file_start + low_byte / CQ_ENTRY_BYTES;
        let target = buffer.as_mut_slice();
        // 20 bytes: fits any usize.
        #[allow(clippy::cast_possible_truncation)]
        let mut scratch = [0u8; CQ_ENTRY_BYTES as usize];
        for offset in first..=(file_start + (high_byte - 1) / CQ_ENTRY_BYTES) {
            let entry_start = (offset - file_start) * CQ_ENTRY_BYTES;
            scratch.fill(0);
            if offset < self.max_offset() {
                if let Some(entry) = self.entry(offset) {
                    entry.encode(&mut scratch);
                }
            }
            copy_clipped(target, low_byte, entry_start, &scratch);
        }
        FileWrite {
            file,
            position: low_byte,
            buffer,
        }
    }
}

/// One aligned write of a lazy flush (consume queue or index).
pub(crate) struct FileWrite {
    pub(crate) file: Rc<DirectFile>,
    pub(crate) position: u64,
    pub(crate) buffer: AlignedBuffer,
}

/// Copies `bytes` (which start at byte `at`) into `target` (which starts at byte `base`),
/// clipped to the target.
fn copy_clipped(target: &mut [u8], base: u64, at: u64, bytes: &[u8]) {
    let target_end = base + target.len() as u64;
    let low = at.max(base);
    let high = (at + bytes.len() as u64).min(target_end);
    if low >= high {
        return;
    }
    let source = &bytes[to_index(low - at)..to_index(high - at)];
    target[to_index(low - base)..to_index(high - base)].copy_from_slice(source);
}

/// The consume-queue tag code of a `TAGS` value
/// (docs/protocol.md#tags-and-subscription-expressions).
pub fn tag_code(tags: &str) -> i64 {
    comet_proto::filter::tag_code(Some(tags))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the tag code matches the reference's verified Java values.
    #[test]
    fn tag_codes_match_java() {
        assert_eq!(tag_code("TagA"), 2598919);
        assert_eq!(tag_code("TagB"), 2598920);
        assert_eq!(tag_code("*"), 42);
        assert_eq!(tag_code(""), 0);
    }

    // Proves entries round-trip through their 20-byte form and that zeros end the data.
    #[test]
    fn entry_round_trip() {
        let entry = CqEntry {
            physical: PhysicalOffset::new(LogId::new(3).expect("id"), 4096),
            size: 1234,
            tag_code: -5,
        };
        let mut raw = [0u8; 20];
        entry.encode(&mut raw);
        assert_eq!(CqEntry::decode(&raw), Some(entry));
        assert_eq!(CqEntry::decode(&[0u8; 20]), None);
        assert_eq!(entry_byte(QueueOffset(3)), 60);
    }

    // Proves a queue that starts mid-file gets placeholders below its first entry, reports the
    // right min and max, and that truncation and retention move max and min.
    #[test]
    fn placeholders_truncate_and_drop() {
        let log = LogId::new(0).expect("id");
        let mut queue = ConsumeQueue::new(PathBuf::from("/nonexistent"), 1024);
        let entry = |position| CqEntry {
            physical: PhysicalOffset::new(log, position),
            size: 100,
            tag_code: 0,
        };
        queue.push(1030, entry(0));
        assert_eq!(queue.max_offset(), 1031);
        assert_eq!(queue.min_offset(), 1030);
        assert!(queue.entry(1025).expect("placeholder").is_placeholder());
        queue.push(1031, entry(100));
        queue.push(1032, entry(200));
        queue.truncate_from(log, 150);
        assert_eq!(queue.max_offset(), 1032);
        let dropped = queue.drop_below(|physical| physical.position() < 100);
        assert!(dropped.is_empty());
        assert_eq!(queue.min_offset(), 1031);
    }
}
