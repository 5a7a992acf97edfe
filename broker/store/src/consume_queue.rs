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
//! files are whole pages, and a block of 1024 entries is 5 whole pages). The schedule
//! topic's tag field holds the due time (docs/protocol.md#delay-levels).
//!
//! The files are the queue: memory holds only its hot tail, the entries from the page the
//! next flush rewrites (the one holding the first unwritten entry) or the last
//! [`CQ_TAIL_ENTRIES`] entries, whichever reach further back, plus the entries dispatched
//! since the last lazy flush. Older entries are read from the files on demand, a block of
//! [`CQ_BLOCK_ENTRIES`] at a time, through the store's bounded block cache (`cq_cache`):
//! with direct I/O through `comet_rt::io::DirectFile` on the serving path (io_uring, so the
//! shard never blocks and no page cache grows behind the bound), and with plain positional
//! reads at start-up and for the bounded admin inspection, which cannot await. Resident
//! memory per queue is therefore a constant once its entries are written: at most 205
//! entries in an allocation of at most 512 slots of 24 bytes (12 KiB; a burst's larger
//! allocation is given back, see [`CQ_TAIL_ROOM_ENTRIES`]) and the queue's fields and paths
//! (about 300 bytes); nothing grows with the entries retained. A queue holds no open file:
//! a flush opens the files it writes through the store's bounded pool of open files
//! (`cq_files`), so file descriptors do not grow with the number of queues either.
//!
//! Entries are only ever added for durable records (visibility). Placeholder entries (size
//! `0x7FFFFFFF`) fill the block below a queue's first entry when it begins mid-file, and
//! gaps left by records missing from the log; entries below `min` (records deleted) stay
//! in their file until the whole file goes, never served: the queue table
//! (`queue_table`) keeps `min` across restarts.

use std::collections::VecDeque;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

use comet_rt::io::{AlignedBuffer, DirectFile, IoError, OpenMode};

use crate::commit_log::{align_down, align_up, to_index};
use crate::cq_cache::{BlockKey, CqCache};
use crate::error::StoreError;
use crate::limits::{CQ_BLOCK_ENTRIES, CQ_ENTRY_BYTES, CQ_TAIL_ENTRIES, CQ_TAIL_ROOM_ENTRIES};
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
    pub(crate) fn placeholder() -> CqEntry {
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
    pub(crate) fn decode(bytes: &[u8]) -> Option<CqEntry> {
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

/// Distinct block-cache keys for the queues of this process.
static NEXT_CACHE_KEY: AtomicU64 = AtomicU64::new(0);

/// Start of the block holding `offset` (blocks never span files: files hold whole blocks).
fn block_floor(offset: u64) -> u64 {
    offset - offset % CQ_BLOCK_ENTRIES
}

/// What the queue table promised about a queue at open (see `queue_table`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Promise {
    /// Its first entry with a record.
    pub(crate) min: u64,
    /// One past its last entry written durably to its files.
    pub(crate) max: u64,
    /// Where the record at `min` is, when known.
    pub(crate) min_physical: Option<PhysicalOffset>,
}

/// One queue (see the module docs). Lives on the shard owning the queue.
pub(crate) struct ConsumeQueue {
    dir: PathBuf,
    entries_per_file: u64,
    cache_key: u64,
    /// Queue offset where the oldest retained file starts.
    base: u64,
    /// Smallest offset with a record (placeholders and deleted records lie below).
    min: u64,
    /// One past the last entry.
    max: u64,
    /// Queue offset of `tail[0]`: the hot tail holds `[tail_start, max)`.
    tail_start: u64,
    tail: VecDeque<CqEntry>,
    /// Entries below this are planned into writes of the files.
    flushed: u64,
    /// Entries below this are in the files, synced (at most `flushed`): reads of the files
    /// and the queue table never go past it.
    written: u64,
    /// One past the last entry the files may hold (stale entries past `max` get zeroed).
    disk_end: u64,
    /// Stale entries in `[max, zeroed_to)` are planned as zeros already: a flush step holds
    /// a bounded number of files, so zeroing a long stale range takes several steps, each
    /// going on from here (0 when no zeroing is under way; reset whenever `max` moves back).
    zeroed_to: u64,
    /// Files known to exist, created and their directory synced, run from the one holding
    /// `written` up to (not including) the one starting here; a flush creates the others.
    created_to: u64,
    /// Where the record at `min` is, when known: retention then skips the queue without
    /// reading its files while that record is stored.
    min_physical: Option<PhysicalOffset>,
    /// `max` the queue table promised at open (0 without a promise): recovery repairs a
    /// queue that ends short of it.
    promised: u64,
    /// Recovery rebuilt entries of this queue from the commit log at open.
    repaired: bool,
}

/// Where the entries from an offset are (see [`ConsumeQueue::lookup`]).
pub(crate) enum Lookup {
    /// No entry there (at or past `max`, or below the oldest file).
    End,
    /// The entries from the offset on, in order (at least one).
    Entries(Vec<CqEntry>),
    /// In a file and not cached: read this block.
    Cold(ColdBlock),
}

/// A block of a queue file to read (see [`Lookup::Cold`]).
pub(crate) struct ColdBlock {
    /// Its block-cache key.
    pub(crate) key: BlockKey,
    path: PathBuf,
    /// Byte of the block in its file.
    position: u64,
    /// Entries of the block that are written.
    entries: u64,
}

impl ColdBlock {
    fn bytes(&self) -> usize {
        to_index(self.entries * CQ_ENTRY_BYTES)
    }

    /// Reads the block with direct I/O (io_uring: the shard never blocks), opening the file
    /// for the read only.
    pub(crate) async fn read(&self) -> Result<Vec<u8>, StoreError> {
        let file = DirectFile::open(&self.path, OpenMode::Read, None).await?;
        let read = file.read_at(self.position, self.bytes()).await;
        file.close().await?;
        self.checked(read?)
    }

    /// Reads the block with a plain positional read (start-up and admin inspection, which
    /// cannot await; at most one block).
    pub(crate) fn read_blocking(&self) -> Result<Vec<u8>, StoreError> {
        let bytes = read_blocking(&self.path, self.position, self.bytes())?;
        self.checked(bytes)
    }

    fn checked(&self, bytes: Vec<u8>) -> Result<Vec<u8>, StoreError> {
        if bytes.len() < self.bytes() {
            let reason = format!(
                "{} bytes at {} where {} entries were flushed",
                bytes.len(),
                self.position,
                self.entries
            );
            return Err(StoreError::corrupt(&self.path, reason));
        }
        Ok(bytes)
    }

    /// The entries from `from` (at most `limit`) in the block's bytes.
    pub(crate) fn run(
        &self,
        bytes: &[u8],
        from: u64,
        limit: u64,
    ) -> Result<Vec<CqEntry>, StoreError> {
        let first = self.key.1;
        decode_run(&self.path, bytes, first, from, limit)?
            .ok_or_else(|| StoreError::corrupt(&self.path, format!("entry {from} not read")))
    }
}

/// Decodes the entries `[from, from + limit)` (clipped to `bytes`) of the block starting at
/// queue offset `first`; `None` when `bytes` ends before `from`. An unwritten entry among
/// flushed ones is damage.
fn decode_run(
    path: &Path,
    bytes: &[u8],
    first: u64,
    from: u64,
    limit: u64,
) -> Result<Option<Vec<CqEntry>>, StoreError> {
    assert!(from >= first, "entry {from} below its block {first}");
    let held = bytes.len() as u64 / CQ_ENTRY_BYTES;
    if from - first >= held {
        return Ok(None);
    }
    let end = held.min(from - first + limit);
    let mut entries = Vec::with_capacity(to_index(end - (from - first)));
    for index in (from - first)..end {
        let at = to_index(index * CQ_ENTRY_BYTES);
        let raw = &bytes[at..at + to_index(CQ_ENTRY_BYTES)];
        let Some(entry) = CqEntry::decode(raw) else {
            let reason = format!("entry {} is not written", first + index);
            return Err(StoreError::corrupt(path, reason));
        };
        entries.push(entry);
    }
    Ok(Some(entries))
}

/// Reads up to `length` bytes at `position` of `path`; fewer at the end of the file, none
/// when the file is missing.
fn read_blocking(path: &Path, position: u64, length: usize) -> Result<Vec<u8>, StoreError> {
    let io = |error| StoreError::Io(IoError::new("read", path, position, error));
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(io(error)),
    };
    let mut bytes = vec![0u8; length];
    let mut filled = 0;
    while filled < length {
        match file.read_at(&mut bytes[filled..], position + filled as u64) {
            Ok(0) => break,
            Ok(read) => filled += read,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(io(error)),
        }
    }
    bytes.truncate(filled);
    Ok(bytes)
}

/// A block read at start-up, kept while a walk stays inside it.
type Memo = Option<(u64, Vec<u8>)>;

impl ConsumeQueue {
    /// An empty queue stored in `dir`.
    pub(crate) fn new(dir: PathBuf, entries_per_file: u64) -> ConsumeQueue {
        assert!(
            entries_per_file % CQ_BLOCK_ENTRIES == 0,
            "files hold whole blocks"
        );
        ConsumeQueue {
            dir,
            entries_per_file,
            cache_key: NEXT_CACHE_KEY.fetch_add(1, Ordering::Relaxed),
            base: 0,
            min: 0,
            max: 0,
            tail_start: 0,
            tail: VecDeque::new(),
            flushed: 0,
            written: 0,
            disk_end: 0,
            zeroed_to: 0,
            created_to: 0,
            min_physical: None,
            promised: 0,
            repaired: false,
        }
    }

    /// One past the last entry.
    pub(crate) fn max_offset(&self) -> u64 {
        self.max
    }

    /// The first entry with a record.
    pub(crate) fn min_offset(&self) -> u64 {
        self.min.min(self.max)
    }

    /// What the queue table promised at open (`max`; 0 without a promise).
    pub(crate) fn promised(&self) -> u64 {
        self.promised
    }

    /// Where the record at `min` is, when known.
    pub(crate) fn min_physical(&self) -> Option<PhysicalOffset> {
        self.min_physical
    }

    /// Recovery is rebuilding entries of this queue from the commit log.
    pub(crate) fn mark_repaired(&mut self) {
        self.repaired = true;
    }

    /// Whether recovery rebuilt entries of this queue from the commit log at open.
    pub(crate) fn was_repaired(&self) -> bool {
        self.repaired
    }

    /// Entries below this are in the files, synced.
    pub(crate) fn written_offset(&self) -> u64 {
        self.written
    }

    /// Entry slots the hot tail holds in memory (its allocation, 24 bytes each).
    pub(crate) fn resident_entries(&self) -> usize {
        self.tail.capacity()
    }

    /// Entries below this are planned into writes of the files.
    pub(crate) fn flushed_offset(&self) -> u64 {
        self.flushed
    }

    /// True when the files may hold stale entries past `max` that a flush must zero.
    pub(crate) fn has_stale(&self) -> bool {
        self.disk_end > self.max
    }

    /// Entries dispatched but not yet written to the files.
    pub(crate) fn unflushed_entries(&self) -> u64 {
        self.max - self.flushed
    }

    /// The entry at `offset` if memory holds it (the hot tail; placeholders below `min`).
    pub(crate) fn hot_entry(&self, offset: u64) -> Option<CqEntry> {
        if offset >= self.max || offset < self.base {
            return None;
        }
        if offset < self.min {
            return Some(CqEntry::placeholder());
        }
        let index = offset.checked_sub(self.tail_start)?;
        self.tail.get(to_index(index)).copied()
    }

    /// Appends the entry for `offset`, which must be the next one or lie past it (the gap,
    /// left by records missing from the log, is filled with placeholders; a queue holding
    /// no record starts over at `offset`).
    pub(crate) fn push(&mut self, offset: u64, entry: CqEntry) {
        assert!(
            offset >= self.max,
            "entry {offset} below max {}: offsets are dense",
            self.max
        );
        if offset > self.max && self.min_offset() == self.max {
            self.restart_at(offset);
        }
        while self.max < offset {
            self.tail.push_back(CqEntry::placeholder());
            self.max += 1;
        }
        if self.min_offset() == self.max {
            self.min = offset;
            self.min_physical = Some(entry.physical);
        }
        self.tail.push_back(entry);
        self.max += 1;
        assert_eq!(self.max, offset + 1);
        assert_eq!(
            self.tail_start + self.tail.len() as u64,
            self.max,
            "tail ends at max"
        );
    }

    /// Starts a queue holding no record over at `offset`: its block gets placeholders up to
    /// it (the page a flush rewrites must be known), earlier entries are below `min`.
    fn restart_at(&mut self, offset: u64) {
        let block = block_floor(offset);
        self.disk_end = self.disk_end.max(self.max).max(self.flushed);
        self.zeroed_to = 0;
        self.tail.clear();
        self.tail_start = block;
        self.flushed = block;
        self.written = block;
        self.max = block;
        self.min = offset;
        self.min_physical = None;
        // Files between the old end and this block were never created.
        self.created_to = self.created_to.max(block - block % self.entries_per_file);
        while self.max < offset {
            self.tail.push_back(CqEntry::placeholder());
            self.max += 1;
        }
    }

    /// Where the entries from `from` (at most `limit`) are: in memory, in the block cache,
    /// or in a file ([`Lookup::Cold`]: the caller reads the block and caches it).
    pub(crate) fn lookup(
        &self,
        from: u64,
        limit: u64,
        cache: &mut CqCache,
    ) -> Result<Lookup, StoreError> {
        assert!(limit > 0, "look up at least one entry");
        if from >= self.max || from < self.base {
            return Ok(Lookup::End);
        }
        if from < self.min {
            let count = to_index((self.min - from).min(limit));
            return Ok(Lookup::Entries(vec![CqEntry::placeholder(); count]));
        }
        if from >= self.tail_start {
            let first = to_index(from - self.tail_start);
            let count = to_index((self.max - from).min(limit));
            let entries = self.tail.range(first..first + count).copied().collect();
            return Ok(Lookup::Entries(entries));
        }
        let block = block_floor(from);
        let key = (self.cache_key, block);
        if let Some(bytes) = cache.get(key) {
            if let Some(entries) = decode_run(&self.dir, bytes, block, from, limit)? {
                return Ok(Lookup::Entries(entries));
            }
        }
        Ok(Lookup::Cold(self.cold_block(block)))
    }

    fn cold_block(&self, block: u64) -> ColdBlock {
        let file_start = block - block % self.entries_per_file;
        let end = (block + CQ_BLOCK_ENTRIES).min(self.written);
        assert!(block < end, "entries below the hot tail are written");
        ColdBlock {
            key: (self.cache_key, block),
            path: self.file_path(file_start),
            position: (block - file_start) * CQ_ENTRY_BYTES,
            entries: end - block,
        }
    }

    fn file_path(&self, file_start: u64) -> PathBuf {
        self.dir.join(file_name(file_start * CQ_ENTRY_BYTES))
    }

    /// Moves `min` to `new_min` (the records below are gone; `physical` is where the record
    /// at it is) and returns the files now wholly below it, for the caller to delete; their
    /// cached blocks are forgotten. Entries below `min` are never served again, so they
    /// stay as they are in a file that still holds newer ones.
    pub(crate) fn advance_min(
        &mut self,
        new_min: u64,
        physical: Option<PhysicalOffset>,
        cache: &mut CqCache,
    ) -> Vec<PathBuf> {
        assert!(
            new_min >= self.min_offset() && new_min <= self.max,
            "min {new_min} moves forward within the queue"
        );
        self.min = new_min;
        self.min_physical = physical;
        let mut dropped = Vec::new();
        while self.base + self.entries_per_file <= new_min.min(self.written) {
            dropped.push(self.file_path(self.base));
            self.base += self.entries_per_file;
        }
        if !dropped.is_empty() {
            cache.forget_below(self.cache_key, self.base);
        }
        dropped
    }

    /// Opens the queue stored in `dir` at start-up, with blocking reads (the store serves
    /// nothing yet): finds where its written entries end (reading back from the end of its
    /// last file, one block in the normal case), checks the files against what the queue
    /// table promised (each file the promise covers exists, is long enough and has its
    /// first and last promised entries written; a queue file cut short, deleted or zeroed
    /// ends the trusted entries there, and recovery repairs the rest from the commit log),
    /// and loads the hot tail.
    pub(crate) fn load(
        dir: PathBuf,
        entries_per_file: u64,
        promise: Option<Promise>,
    ) -> Result<ConsumeQueue, StoreError> {
        let mut queue = ConsumeQueue::new(dir, entries_per_file);
        queue.promised = promise.map_or(0, |promise| promise.max);
        let files = queue.list_files()?;
        let Some(&(first, _)) = files.first() else {
            if let Some(promise) = promise.filter(|promise| promise.min == promise.max) {
                // Every record was deleted, and the files with them.
                queue.restart_at(promise.min);
            }
            return Ok(queue);
        };
        queue.base = first;
        if let Some(promise) = promise.filter(|promise| promise.min < first) {
            // Files holding promised entries are gone from the front: start at the file of
            // `min`, so the check below finds them missing.
            queue.base = promise.min - promise.min % entries_per_file;
        }
        // One block read serves the end, the last promised entry and the hot tail.
        let mut memo = None;
        let written = queue.written_end(&files, &mut memo)?;
        let trusted = match promise {
            Some(promise) => queue.first_damage(&files, promise, written, &mut memo)?,
            None => written,
        };
        queue.max = trusted;
        queue.flushed = trusted;
        queue.written = trusted;
        queue.tail_start = trusted;
        queue.disk_end = written;
        queue.zeroed_to = 0;
        queue.min = match promise {
            Some(promise) => promise.min.clamp(queue.base, trusted),
            None => queue.first_record(first, trusted, &mut memo)?,
        };
        queue.min_physical = promise.and_then(|promise| promise.min_physical);
        if queue.min == trusted {
            queue.min_physical = None;
        }
        queue.reload_tail(&mut memo)?;
        Ok(queue)
    }

    /// The queue's files, by start (queue offset), with the entries their size holds; only
    /// those contiguous from the first (data after a gap is not trusted: recovery rebuilds
    /// it from the commit log).
    fn list_files(&self) -> Result<Vec<(u64, u64)>, StoreError> {
        let setup = |error| crate::error::setup_error(&self.dir, error);
        let mut files = Vec::new();
        let listing = match std::fs::read_dir(&self.dir) {
            Ok(listing) => listing,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(files),
            Err(error) => return Err(setup(error)),
        };
        let file_bytes = self.entries_per_file * CQ_ENTRY_BYTES;
        for item in listing {
            let item = item.map_err(setup)?;
            let Some(start_byte) = item.file_name().to_str().and_then(parse_file_name) else {
                continue;
            };
            if start_byte % file_bytes != 0 {
                let reason = "file start is not a file boundary";
                return Err(StoreError::corrupt(item.path(), reason));
            }
            let length = item.metadata().map_err(setup)?.len();
            let held = (length / CQ_ENTRY_BYTES).min(self.entries_per_file);
            files.push((start_byte / CQ_ENTRY_BYTES, held));
        }
        files.sort_unstable();
        let contiguous = files
            .windows(2)
            .position(|pair| pair[1].0 != pair[0].0 + self.entries_per_file)
            .map_or(files.len(), |last| last + 1);
        files.truncate(contiguous);
        Ok(files)
    }

    /// One past the last written entry of `files`, reading back from the end.
    fn written_end(&self, files: &[(u64, u64)], memo: &mut Memo) -> Result<u64, StoreError> {
        for &(start, held) in files.iter().rev() {
            for offset in (start..start + held).rev() {
                if self.disk_entry(offset, memo)?.is_some() {
                    return Ok(offset + 1);
                }
            }
        }
        Ok(files.first().map_or(self.base, |first| first.0))
    }

    /// The first offset of `[promise.min, min(promise.max, written))` whose file is
    /// missing, short, or has its first or last promised entry unwritten; `written` when
    /// none is.
    fn first_damage(
        &self,
        files: &[(u64, u64)],
        promise: Promise,
        written: u64,
        memo: &mut Memo,
    ) -> Result<u64, StoreError> {
        let to = promise.max.min(written);
        let mut at = promise.min.max(self.base);
        while at < to {
            let file_start = at - at % self.entries_per_file;
            let file_end = (file_start + self.entries_per_file).min(to);
            let held = files
                .iter()
                .find(|file| file.0 == file_start)
                .map(|file| file.1);
            if held.is_none_or(|held| file_start + held < file_end) {
                return Ok(at);
            }
            for probe in [file_end - 1, at] {
                if self.disk_entry(probe, memo)?.is_none() {
                    return Ok(at);
                }
            }
            at = file_end;
        }
        Ok(written)
    }

    /// The first entry of `[from, to)` with a record (skipping unwritten entries and
    /// placeholders below it); `to` when none has.
    fn first_record(&self, from: u64, to: u64, memo: &mut Memo) -> Result<u64, StoreError> {
        for offset in from..to {
            let entry = self.disk_entry(offset, memo)?;
            if entry.is_some_and(|entry| !entry.is_placeholder()) {
                return Ok(offset);
            }
        }
        Ok(to)
    }

    /// The entry at `offset` as its file holds it (`None`: unwritten), reading its block
    /// with a blocking read unless `memo` holds it.
    fn disk_entry(&self, offset: u64, memo: &mut Memo) -> Result<Option<CqEntry>, StoreError> {
        let block = block_floor(offset);
        if memo.as_ref().is_none_or(|(first, _)| *first != block) {
            let file_start = block - block % self.entries_per_file;
            let position = (block - file_start) * CQ_ENTRY_BYTES;
            let length = to_index(CQ_BLOCK_ENTRIES * CQ_ENTRY_BYTES);
            let bytes = read_blocking(&self.file_path(file_start), position, length)?;
            *memo = Some((block, bytes));
        }
        let (_, bytes) = memo.as_ref().expect("just read");
        let at = to_index((offset - block) * CQ_ENTRY_BYTES);
        Ok(bytes
            .get(at..at + to_index(CQ_ENTRY_BYTES))
            .and_then(CqEntry::decode))
    }

    /// The entry at `offset` below `max` at start-up: from the hot tail, else from its
    /// file (blocking read). `None`: its file does not hold it (damage).
    pub(crate) fn entry_blocking(&self, offset: u64) -> Result<Option<CqEntry>, StoreError> {
        if let Some(entry) = self.hot_entry(offset) {
            return Ok(Some(entry));
        }
        if offset >= self.max || offset < self.base {
            return Ok(None);
        }
        self.disk_entry(offset, &mut None)
    }

    /// Loads the hot tail from the block holding `max` (all flushed): the page a flush
    /// rewrites must be known. An unwritten entry at or above `min` there ends the queue.
    fn reload_tail(&mut self, memo: &mut Memo) -> Result<(), StoreError> {
        assert_eq!(self.flushed, self.max, "only flushed entries are reloaded");
        let start = block_floor(self.max).max(self.base);
        self.tail.clear();
        self.tail_start = start;
        for offset in start..self.max {
            match self.disk_entry(offset, memo)? {
                Some(entry) => self.tail.push_back(entry),
                None if offset < self.min => self.tail.push_back(CqEntry::placeholder()),
                None => break,
            }
        }
        self.max = self.tail_start + self.tail.len() as u64;
        self.flushed = self.max;
        self.written = self.max;
        self.trim(None);
        Ok(())
    }

    /// Drops trailing entries of log `log_id` at or past `position` (recovery truncation),
    /// and unwritten ones, reading back from the end (blocking reads at start-up).
    pub(crate) fn truncate_from(&mut self, log_id: LogId, position: u64) -> Result<(), StoreError> {
        let old_max = self.max;
        let mut memo = None;
        while self.max > self.min_offset() {
            let offset = self.max - 1;
            let entry = match self.hot_entry(offset) {
                Some(entry) => Some(entry),
                None => self.disk_entry(offset, &mut memo)?,
            };
            let keep = entry.is_some_and(|entry| {
                entry.is_placeholder()
                    || entry.physical.log_id() != log_id
                    || entry.physical.position() < position
            });
            if keep {
                break;
            }
            self.max -= 1;
        }
        if self.max == old_max {
            return Ok(());
        }
        self.disk_end = self.disk_end.max(self.flushed);
        self.zeroed_to = 0;
        self.flushed = self.flushed.min(self.max);
        self.written = self.written.min(self.max);
        if self.max >= self.tail_start && self.page_first(self.flushed) >= self.tail_start {
            self.tail.truncate(to_index(self.max - self.tail_start));
            return Ok(());
        }
        // The page the next flush rewrites starts below the tail: all flushed, reread it.
        self.reload_tail(&mut memo)
    }

    /// True when entries wait to be written.
    pub(crate) fn is_dirty(&self) -> bool {
        self.flushed < self.max || self.disk_end > self.max
    }

    /// The files the next flush writes, at most `limit` from the first (a later flush writes
    /// the rest), each saying whether it is known to exist or must be created.
    pub(crate) fn flush_files(&self, limit: usize) -> Vec<FlushFile> {
        let end = self.max.max(self.disk_end);
        let mut from = self.plan_start();
        let mut files = Vec::new();
        while from < end && files.len() < limit {
            let start = from - from % self.entries_per_file;
            files.push(FlushFile {
                start,
                path: self.file_path(start),
                exists: start < self.created_to,
            });
            from = start + self.entries_per_file;
        }
        files
    }

    /// The file starting at `start`, one of [`ConsumeQueue::flush_files`], was created
    /// durably (with those before it).
    pub(crate) fn mark_created(&mut self, start: u64) {
        self.created_to = self.created_to.max(start + self.entries_per_file);
    }

    /// The writes that put unwritten entries (and zeros over stale ones) into `files` (open
    /// files of [`ConsumeQueue::flush_files`], by start), and the offset they reach: once
    /// they are written and synced, the caller reports it to [`ConsumeQueue::finish_flush`]
    /// (or stops the store if a write fails). One flush at a time.
    pub(crate) fn plan_flush(&mut self, files: &[(u64, Rc<DirectFile>)]) -> (Vec<FileWrite>, u64) {
        let mut writes = Vec::new();
        let end = self.max.max(self.disk_end);
        let mut from = self.plan_start();
        while from < end {
            let file_start = from - from % self.entries_per_file;
            let file_end = (file_start + self.entries_per_file).min(end);
            // Entries dispatched while the files were being opened may need a file that is
            // not open: they wait for the next flush.
            let Some(file) = files
                .iter()
                .find(|(start, _)| *start == file_start)
                .map(|(_, file)| Rc::clone(file))
            else {
                break;
            };
            writes.push(self.write_range(file, file_start, from, file_end));
            from = file_end;
        }
        if from >= end {
            self.disk_end = self.max;
            self.zeroed_to = 0;
        } else if from > self.max {
            self.zeroed_to = from;
        }
        self.flushed = from.min(self.max);
        (writes, self.flushed)
    }

    /// Where the next flush step starts: the first unwritten entry, or once every entry is
    /// planned, past the stale range earlier steps zeroed (without this, a stale range
    /// longer than one step's files would be zeroed again from `max` on every step).
    fn plan_start(&self) -> u64 {
        let from = self.flushed.max(self.base);
        if from >= self.max {
            from.max(self.zeroed_to)
        } else {
            from
        }
    }

    /// The writes of a flush reaching `planned` are synced: reads may go to the files below
    /// it, and the hot tail shrinks to what later flushes and tailing readers need; the
    /// entries leaving the tail join `cache` when given.
    pub(crate) fn finish_flush(&mut self, planned: u64, cache: Option<&mut CqCache>) {
        self.written = self.written.max(planned.min(self.max));
        assert!(self.written <= self.flushed, "written entries were planned");
        self.trim(cache);
    }

    /// Drops hot entries no flush rewrites and no tailing reader needs: the tail keeps what
    /// is not written yet, the page holding `flushed` (a flush rewrites it whole) and the
    /// last [`CQ_TAIL_ENTRIES`].
    fn trim(&mut self, mut cache: Option<&mut CqCache>) {
        let page_first = self.page_first(self.flushed);
        let keep_from = page_first
            .min(self.max.saturating_sub(CQ_TAIL_ENTRIES))
            .min(self.written);
        while self.tail_start < keep_from {
            let block = block_floor(self.tail_start);
            let run_end = keep_from.min(block + CQ_BLOCK_ENTRIES);
            let count = to_index(run_end - self.tail_start);
            if let Some(cache) = cache.as_deref_mut() {
                // These entries are written and synced: the cache may serve them.
                let mut bytes = vec![0u8; count * to_index(CQ_ENTRY_BYTES)];
                let raws = bytes.chunks_exact_mut(to_index(CQ_ENTRY_BYTES));
                for (raw, entry) in raws.zip(self.tail.range(..count)) {
                    entry.encode(raw);
                }
                let at = to_index((self.tail_start - block) * CQ_ENTRY_BYTES);
                cache.append((self.cache_key, block), at, &bytes);
            }
            self.tail.drain(..count);
            self.tail_start = run_end;
        }
        // A burst left a large allocation behind: give it back, keeping room for the usual
        // tail so a steady queue does not reallocate at every flush.
        let room = to_index(CQ_TAIL_ROOM_ENTRIES);
        if self.tail.capacity() > 2 * room.max(self.tail.len()) {
            self.tail.shrink_to(room.max(self.tail.len()));
        }
        assert!(
            self.tail_start <= self.page_first(self.flushed),
            "tail holds the page"
        );
    }

    /// The first entry with bytes in the page holding entry `offset`.
    fn page_first(&self, offset: u64) -> u64 {
        let file_start = offset - offset % self.entries_per_file;
        let page_byte = align_down((offset - file_start) * CQ_ENTRY_BYTES);
        file_start + page_byte / CQ_ENTRY_BYTES
    }

    /// The entry a flush writes at `offset` (`None`: zeros, past `max`).
    fn entry_to_write(&self, offset: u64) -> Option<CqEntry> {
        if offset >= self.max {
            return None;
        }
        assert!(
            offset >= self.tail_start,
            "a flush writes only pages the tail holds"
        );
        self.tail.get(to_index(offset - self.tail_start)).copied()
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
            if let Some(entry) = self.entry_to_write(offset) {
                entry.encode(&mut scratch);
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

/// A file a flush of a queue writes (see [`ConsumeQueue::flush_files`]).
pub(crate) struct FlushFile {
    /// Its first entry (queue offset).
    pub(crate) start: u64,
    pub(crate) path: PathBuf,
    /// Known to exist: opened, not created.
    pub(crate) exists: bool,
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

    // Proves a queue that starts mid-file gets placeholders below its first entry (only in
    // its block), reports the right min and max, and that truncation and a moved min move
    // max and min.
    #[test]
    fn placeholders_truncate_and_advance_min() {
        let log = LogId::new(0).expect("id");
        let mut queue = ConsumeQueue::new(PathBuf::from("/nonexistent"), 1024);
        let mut cache = CqCache::new(0);
        let entry = |position| CqEntry {
            physical: PhysicalOffset::new(log, position),
            size: 100,
            tag_code: 0,
        };
        queue.push(1030, entry(0));
        assert_eq!(queue.max_offset(), 1031);
        assert_eq!(queue.min_offset(), 1030);
        assert!(
            queue.resident_entries() < 64,
            "placeholders from the block start only"
        );
        assert!(queue.hot_entry(1025).expect("placeholder").is_placeholder());
        assert!(queue.hot_entry(10).expect("below min").is_placeholder());
        queue.push(1031, entry(100));
        queue.push(1032, entry(200));
        queue.truncate_from(log, 150).expect("in memory");
        assert_eq!(queue.max_offset(), 1032);
        let dropped = queue.advance_min(1031, Some(entry(100).physical), &mut cache);
        // The first file lies wholly below min (it was never written: the queue began in
        // the second), so it may go.
        assert_eq!(
            dropped,
            vec![PathBuf::from("/nonexistent/00000000000000000000")]
        );
        assert!(queue.hot_entry(10).is_none(), "below the oldest file");
        assert_eq!(queue.min_offset(), 1031);
        match queue.lookup(1031, 10, &mut cache).expect("lookup") {
            Lookup::Entries(entries) => assert_eq!(entries, vec![entry(100)]),
            _ => panic!("the hot tail holds the entry"),
        }
        assert!(matches!(
            queue.lookup(1032, 1, &mut cache).expect("lookup"),
            Lookup::End
        ));
    }

    // Proves entries not written yet stay in the hot tail whatever their number: a flush
    // that cannot write them (no file open) trims nothing.
    #[test]
    fn unwritten_entries_stay_hot() {
        let log = LogId::new(0).expect("id");
        let mut queue = ConsumeQueue::new(PathBuf::from("/nonexistent"), 1024);
        for offset in 0..5000u64 {
            let entry = CqEntry {
                physical: PhysicalOffset::new(log, offset * 100),
                size: 100,
                tag_code: 0,
            };
            queue.push(offset, entry);
        }
        assert!(queue.resident_entries() >= 5000);
        // No file is open: nothing can be written, nothing is trimmed.
        let (writes, planned) = queue.plan_flush(&[]);
        assert!(writes.is_empty());
        queue.finish_flush(planned, None);
        assert!(queue.resident_entries() >= 5000);
        assert!(
            queue.hot_entry(0).is_some(),
            "the first entry is still held"
        );
        assert_eq!(queue.unflushed_entries(), 5000);
        let files = queue.flush_files(usize::MAX);
        assert_eq!(files.len(), 5);
        assert!(files.iter().all(|file| !file.exists), "none created yet");
        assert_eq!(queue.flush_files(2).len(), 2, "at most the limit");
        queue.mark_created(1024);
        let files = queue.flush_files(usize::MAX);
        assert!(files[0].exists && files[1].exists && !files[2].exists);
    }
}
