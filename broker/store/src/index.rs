//! The key index: `UNIQ_KEY` and each word of `KEYS` of every record, for query by key and
//! by unique id within a time range.
//!
//! Layout (a deliberate change from RocketMQ's IndexFile,
//! docs/protocol.md#index-file-format): one append-only
//! file per span of the commit log, `index/<log id>/<20-digit span start>`, of 32-byte
//! entries, with the hash chains held in memory. A span is `index_span_bytes` of log (64 MiB
//! by default, dividing the segment size; recorded in `index/<log id>/span` when the index
//! is created, so a store keeps the span it was written with; an index from before the span
//! existed used the segment size):
//!
//! ```text
//!  0               8                  16                 24          32
//! +---------------+------------------+------------------+-----------+
//! | key hash u64  | physical off i64 | store time ms i64| 1 (valid) |
//! +---------------+------------------+------------------+-----------+
//! ```
//!
//! Why: RocketMQ's file updates random hash-slot words in a 420 MB preallocated file, which
//! under direct I/O means a read-modify-write of a page per insert; appending 32-byte entries
//! writes each byte once, sequentially, and spans within segments make retention a file
//! delete. The 64-bit FNV-1a hash of `topic#key` makes collisions rare (results are still
//! filtered by the caller against the record). The cost is memory: about 48 bytes per indexed
//! key for the entry and its chain link, but only until its span is sealed: once the
//! checkpoint covers a whole span, maintenance writes its entries sorted by hash
//! (`sealed_index`), deletes the append-order file and drops them from memory, so memory
//! holds the keys of the newest one or two spans, whatever the store retains (with 1 GiB
//! spans that was 5.8 million keys, about 280 MiB, per shard for small messages). Like
//! consume queues, the files are written lazily and rebuilt from the commit log past the
//! checkpoint after a crash.
//!
//! Linking is deferred: dispatch only appends the entry (sequential, cheap); putting it at
//! the head of its key's chain (a random access into a table of every key, the costliest
//! step of dispatch in a timer storm's profile) is done by [`KeyIndex::link`] from a
//! background task when the shard has time. Entries past `linked` are newer than every
//! linked one, so a lookup scans them first, newest first, then follows the chains: results
//! are the same whether or not linking has caught up.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use comet_log::progress::Progress;
use comet_rt::io::{DirectFile, FaultInjector, OpenMode};

use crate::commit_log::{align_down, align_up, to_index};
use crate::consume_queue::FileWrite;
use crate::error::{setup_error, StoreError};
use crate::index_entry::IndexEntry;
use crate::limits::{INDEX_ENTRY_BYTES, PAGE_BYTES};
use crate::offset::{file_name, parse_file_name, LogId, PhysicalOffset};
use crate::sealed_index::{sealed_path, SealedIndex, PARTIAL_SUFFIX, SEALED_SUFFIX};

const NO_PREVIOUS: u64 = u64::MAX;

/// Capacity (entries, links, heads) the in-memory index keeps however few it holds, so a
/// small store does not reallocate at every seal.
const INDEX_KEPT_CAPACITY_MIN: usize = 4096;

/// Hashing for maps keyed by a [`key_hash`]: the key already is a well-mixed 64-bit hash, so
/// it is used as is (SipHash over it cost a quarter of dispatch in a timer storm's profile).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct KeyHashIsHash;

impl std::hash::BuildHasher for KeyHashIsHash {
    type Hasher = KeyHashHasher;

    fn build_hasher(&self) -> KeyHashHasher {
        KeyHashHasher(0)
    }
}

/// See [`KeyHashIsHash`]; only `u64` keys are hashed with it.
#[derive(Debug)]
pub(crate) struct KeyHashHasher(u64);

impl std::hash::Hasher for KeyHashHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, _bytes: &[u8]) {
        unreachable!("only u64 key hashes are hashed with KeyHashHasher");
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }
}

/// FNV-1a 64 of `topic#key`: stable across builds (it is stored on disk).
pub fn key_hash(topic: &str, key: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let bytes = topic
        .bytes()
        .chain(std::iter::once(b'#'))
        .chain(key.bytes());
    for byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// Index files of one span: the file and the number of its first entry.
struct IndexFile {
    first: u64,
    file: Option<Rc<DirectFile>>,
}

/// Name of the file in an index directory that records its span in bytes (decimal).
const SPAN_FILE: &str = "span";

/// The span of the index in `dir` for a log of `segment_bytes` segments: the one recorded
/// there; for an index directory without a record, `wanted` when it holds no index file yet
/// (recorded when `record` is set), else the segment size (an index from before spans).
/// Blocking file-system calls: used at open only.
pub(crate) fn index_span(
    dir: &Path,
    segment_bytes: u64,
    wanted: u64,
    record: bool,
) -> Result<u64, StoreError> {
    let path = dir.join(SPAN_FILE);
    let span = match std::fs::read_to_string(&path) {
        Ok(text) => text
            .trim()
            .parse::<u64>()
            .map_err(|_| StoreError::corrupt(&path, "the index span is not a number"))?,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let has_files = std::fs::read_dir(dir).is_ok_and(|mut items| items.next().is_some());
            let span = if has_files { segment_bytes } else { wanted };
            if record {
                comet_rt::fs::write_atomic(&path, span.to_string().as_bytes())
                    .map_err(|error| setup_error(&path, error))?;
            }
            span
        }
        Err(error) => return Err(setup_error(&path, error)),
    };
    if span == 0 || span % PAGE_BYTES != 0 || segment_bytes % span != 0 {
        return Err(StoreError::corrupt(
            &path,
            "the index span does not divide the segment size",
        ));
    }
    Ok(span)
}

/// The key index of one commit log (see the module docs). Lives on the log's shard.
pub(crate) struct KeyIndex {
    dir: PathBuf,
    log_id: LogId,
    span_bytes: u64,
    /// Number of `entries[0]`.
    base: u64,
    entries: VecDeque<IndexEntry>,
    /// Chain links of the linked entries, parallel to `entries[..linked - base]`.
    previous: VecDeque<u64>,
    /// Entries below this number are in `heads` and `previous`; at least `base`.
    linked: u64,
    heads: HashMap<u64, u64, KeyHashIsHash>,
    /// Append-order files of segments not sealed yet, keyed by segment start.
    files: BTreeMap<u64, IndexFile>,
    /// Sealed segments (older than every entry in memory), keyed by segment start.
    sealed: BTreeMap<u64, Rc<SealedIndex>>,
    /// Entries below this number are in the files.
    flushed: u64,
    /// One past the last entry the files may hold (stale entries past the end get zeroed).
    disk_end: u64,
}

impl KeyIndex {
    /// An empty index stored in `dir`.
    pub(crate) fn new(dir: PathBuf, log_id: LogId, span_bytes: u64) -> KeyIndex {
        KeyIndex {
            dir,
            log_id,
            span_bytes,
            base: 0,
            entries: VecDeque::new(),
            previous: VecDeque::new(),
            linked: 0,
            heads: HashMap::default(),
            files: BTreeMap::new(),
            sealed: BTreeMap::new(),
            flushed: 0,
            disk_end: 0,
        }
    }

    pub(crate) fn end(&self) -> u64 {
        self.base + self.entries.len() as u64
    }

    /// Indexes `key` of `topic` for the record at `physical`.
    pub(crate) fn add(&mut self, topic: &str, key: &str, physical: PhysicalOffset, time: i64) {
        assert_eq!(
            physical.log_id(),
            self.log_id,
            "index entries belong to this log"
        );
        let segment = physical.position() - physical.position() % self.span_bytes;
        if self.sealed.contains_key(&segment) {
            // Recovery re-dispatching records a sealed index already holds.
            return;
        }
        let hash = key_hash(topic, key);
        self.push(IndexEntry {
            hash,
            physical,
            store_timestamp_ms: time,
        });
    }

    fn push(&mut self, entry: IndexEntry) {
        if let Some(last) = self.entries.back() {
            assert!(
                last.physical <= entry.physical,
                "index entries follow the log"
            );
        }
        let segment = entry.physical.position() - entry.physical.position() % self.span_bytes;
        let number = self.end();
        self.files.entry(segment).or_insert(IndexFile {
            first: number,
            file: None,
        });
        self.entries.push_back(entry);
    }

    /// Entries pushed but not yet linked into their chains.
    pub(crate) fn unlinked(&self) -> u64 {
        self.end() - self.linked
    }

    /// Links up to `max` entries into their chains, oldest first; returns how many.
    pub(crate) fn link(&mut self, max: usize) -> usize {
        let count = usize::try_from(self.unlinked())
            .unwrap_or(usize::MAX)
            .min(max);
        for _ in 0..count {
            let number = self.linked;
            let entry = self.entries[to_index(number - self.base)];
            let previous = self.heads.insert(entry.hash, number).unwrap_or(NO_PREVIOUS);
            self.previous.push_back(previous);
            self.linked += 1;
        }
        debug_assert_eq!(self.previous.len() as u64, self.linked - self.base);
        count
    }

    /// What a lookup of `topic#key` within `[begin_ms, end_ms]` (newest first, at most
    /// `max`) finds in memory, and the sealed indexes still to search (newest first), which
    /// [`LookupPlan::finish`] reads without a borrow of this index.
    pub(crate) fn plan_lookup(
        &self,
        topic: &str,
        key: &str,
        max: usize,
        begin_ms: i64,
        end_ms: i64,
    ) -> LookupPlan {
        let hash = key_hash(topic, key);
        LookupPlan {
            hash,
            found: self.lookup_hash(hash, max, begin_ms, end_ms),
            sealed: self.sealed.values().rev().cloned().collect(),
            max,
            begin_ms,
            end_ms,
        }
    }

    /// The directory of the index files.
    pub(crate) fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// Entries kept in memory (those of segments not sealed yet).
    pub(crate) fn entries_in_memory(&self) -> usize {
        self.entries.len()
    }

    /// Bytes the in-memory index holds allocated: entries, their chain links and the key
    /// heads (a hash map slot per head plus its control byte).
    pub(crate) fn held_bytes(&self) -> usize {
        self.entries.capacity() * std::mem::size_of::<IndexEntry>()
            + self.previous.capacity() * std::mem::size_of::<u64>()
            + self.heads.capacity() * (2 * std::mem::size_of::<u64>() + 1)
    }

    /// Gives back the allocations' room beyond twice what they hold once a span's entries
    /// have gone: they grow by doubling while spans fill and never shrink on their own, so
    /// one burst (or a slow seal) would otherwise keep its peak for the life of the process.
    fn release_spare_capacity(&mut self) {
        let spare = |capacity: usize, len: usize| capacity > 2 * len.max(INDEX_KEPT_CAPACITY_MIN);
        if spare(self.entries.capacity(), self.entries.len()) {
            self.entries.shrink_to(self.entries.len());
        }
        if spare(self.previous.capacity(), self.previous.len()) {
            self.previous.shrink_to(self.previous.len());
        }
        if spare(self.heads.capacity(), self.heads.len()) {
            self.heads.shrink_to(self.heads.len());
        }
    }

    /// Segments whose index is sealed.
    pub(crate) fn sealed_segments(&self) -> usize {
        self.sealed.len()
    }

    /// The in-memory part of a lookup of `topic#key` (see [`KeyIndex::plan_lookup`]).
    #[cfg(test)]
    fn lookup_memory(
        &self,
        topic: &str,
        key: &str,
        max: usize,
        begin_ms: i64,
        end_ms: i64,
    ) -> Vec<PhysicalOffset> {
        self.lookup_hash(key_hash(topic, key), max, begin_ms, end_ms)
    }

    /// The in-memory part of a lookup of the key hashing to `hash`.
    fn lookup_hash(
        &self,
        hash: u64,
        max: usize,
        begin_ms: i64,
        end_ms: i64,
    ) -> Vec<PhysicalOffset> {
        let in_range = |entry: &IndexEntry| (begin_ms..=end_ms).contains(&entry.store_timestamp_ms);
        let unlinked = self.entries.range(to_index(self.linked - self.base)..);
        let mut found: Vec<PhysicalOffset> = unlinked
            .rev()
            .filter(|entry| entry.hash == hash && in_range(entry))
            .map(|entry| entry.physical)
            .take(max)
            .collect();
        let mut number = self.heads.get(&hash).copied().unwrap_or(NO_PREVIOUS);
        while number != NO_PREVIOUS && number >= self.base && found.len() < max {
            let index = to_index(number - self.base);
            let entry = self.entries[index];
            assert_eq!(entry.hash, hash, "chains link equal hashes");
            if in_range(&entry) {
                found.push(entry.physical);
            }
            let previous = self.previous[index];
            assert!(
                previous == NO_PREVIOUS || previous < number,
                "chains go backwards"
            );
            number = previous;
        }
        found
    }

    /// Drops entries at or past `position` (recovery re-indexes from there), with the sealed
    /// indexes of segments that end past it and the files left without entries; returns
    /// those files for deletion.
    pub(crate) fn truncate_from(&mut self, position: u64) -> Vec<PathBuf> {
        let gone = self
            .sealed
            .split_off(&(position - position % self.span_bytes));
        let mut dropped: Vec<PathBuf> = gone
            .values()
            .map(|sealed| sealed.path().to_path_buf())
            .collect();
        while self
            .entries
            .back()
            .is_some_and(|entry| entry.physical.position() >= position)
        {
            let entry = self.entries.pop_back().expect("non-empty");
            if self.end() < self.linked {
                self.linked -= 1;
                let previous = self
                    .previous
                    .pop_back()
                    .expect("parallel to linked entries");
                match previous {
                    NO_PREVIOUS => self.heads.remove(&entry.hash),
                    number => self.heads.insert(entry.hash, number),
                };
            }
        }
        // A file left without entries goes: the entries re-dispatched into its segment may
        // be numbered differently (a dropped sealed segment's entries come back before
        // them), and a new file starts at the first of them.
        let end = self.end();
        let (kept, emptied): (BTreeMap<u64, IndexFile>, BTreeMap<u64, IndexFile>) =
            std::mem::take(&mut self.files)
                .into_iter()
                .partition(|(_, file)| file.first < end);
        self.files = kept;
        dropped.extend(
            emptied
                .into_values()
                .filter_map(|file| file.file)
                .map(|file| file.path().to_path_buf()),
        );
        self.flushed = self.flushed.min(end);
        dropped
    }

    /// Drops entries and sealed indexes of segments below `position`; returns their files
    /// for deletion.
    pub(crate) fn drop_below(&mut self, position: u64) -> Vec<PathBuf> {
        let kept = self
            .sealed
            .split_off(&(position - position % self.span_bytes));
        let dropped = std::mem::replace(&mut self.sealed, kept);
        let mut paths: Vec<PathBuf> = dropped
            .values()
            .map(|sealed| sealed.path().to_path_buf())
            .collect();
        paths.extend(self.drop_memory_below(position));
        paths
    }

    /// Drops in-memory entries and append-order files of segments below `position`;
    /// returns the open files among them for deletion.
    fn drop_memory_below(&mut self, position: u64) -> Vec<PathBuf> {
        while self
            .entries
            .front()
            .is_some_and(|entry| entry.physical.position() < position)
        {
            self.entries.pop_front();
            if self.base < self.linked {
                self.previous.pop_front();
            }
            self.base += 1;
        }
        self.linked = self.linked.max(self.base);
        let base = self.base;
        self.heads.retain(|_, number| *number >= base);
        self.release_spare_capacity();
        let kept = self
            .files
            .split_off(&(position - position % self.span_bytes));
        let dropped = std::mem::replace(&mut self.files, kept);
        dropped
            .into_values()
            .filter_map(|file| file.file)
            .map(|file| file.path().to_path_buf())
            .collect()
    }

    /// The oldest segment held in memory, with a copy of its entries, if it ends at or
    /// below `up_to` (its records are all dispatched and the checkpoint says so, so no
    /// recovery re-indexes them).
    pub(crate) fn sealable(&self, up_to: u64) -> Option<(u64, Vec<IndexEntry>)> {
        let (&start, file) = self.files.iter().next()?;
        if start + self.span_bytes > up_to || file.first != self.base {
            return None;
        }
        let count = self
            .entries
            .iter()
            .take_while(|entry| entry.physical.position() < start + self.span_bytes)
            .count();
        Some((start, self.entries.range(..count).copied().collect()))
    }

    /// Replaces the in-memory entries of segment `start` with its sealed index; returns the
    /// files to delete: the append-order file, or the sealed one if retention dropped the
    /// segment while it was being written.
    pub(crate) fn complete_seal(&mut self, start: u64, sealed: SealedIndex) -> Vec<PathBuf> {
        let still_oldest = self.files.keys().next() == Some(&start);
        if !still_oldest {
            return vec![sealed.path().to_path_buf()];
        }
        assert!(
            self.sealed
                .keys()
                .next_back()
                .is_none_or(|last| *last < start),
            "segments seal oldest first"
        );
        self.sealed.insert(start, Rc::new(sealed));
        // An append-order file on disk always has a handle here (loaded, or attached when
        // created), so the handles name every file to delete.
        self.drop_memory_below(start + self.span_bytes)
    }

    /// Segment starts of the append-order files and of the sealed indexes in the
    /// directory, each in order (none when it is missing), and the partial sealed files a
    /// crash left.
    fn listing(&self) -> (Vec<u64>, Vec<u64>, Vec<PathBuf>) {
        let (mut appended, mut sealed, mut partial) = (Vec::new(), Vec::new(), Vec::new());
        if let Ok(listing) = std::fs::read_dir(&self.dir) {
            for item in listing.flatten() {
                let name = item.file_name();
                let Some(name) = name.to_str() else { continue };
                if let Some(start) = parse_file_name(name) {
                    appended.push(start);
                } else if let Some(start) =
                    name.strip_suffix(SEALED_SUFFIX).and_then(parse_file_name)
                {
                    sealed.push(start);
                } else if name.ends_with(PARTIAL_SUFFIX) {
                    partial.push(item.path());
                }
            }
        }
        appended.sort_unstable();
        sealed.sort_unstable();
        (appended, sealed, partial)
    }

    /// Opens the sealed indexes at `starts`. A damaged one is logged and left out (its
    /// segment's keys cannot be queried) rather than keeping the store closed.
    async fn open_sealed(&mut self, starts: &[u64], faults: &Option<Rc<FaultInjector>>) {
        for &start in starts {
            let path = sealed_path(&self.dir, start);
            match SealedIndex::open(&path, faults).await {
                Ok(sealed) => {
                    self.sealed.insert(start, Rc::new(sealed));
                }
                Err(error) => log::error!("key index of segment {start} is unusable: {error}"),
            }
        }
    }

    /// Loads every index file (start-up): sealed indexes by their footers, append-order
    /// files whole. Removes what a crash during sealing left: a partial sealed file, or an
    /// append-order file whose sealed index is complete.
    pub(crate) async fn load(
        &mut self,
        faults: &Option<Rc<FaultInjector>>,
    ) -> Result<(), StoreError> {
        let (appended, sealed, partial) = self.listing();
        for path in partial {
            comet_rt::io::remove_file(&path).await?;
        }
        self.open_sealed(&sealed, faults).await;
        let what = format!("key index {}: loading", self.dir.display());
        let total = appended.len() as u64;
        let now = comet_rt::clock::monotonic_now();
        let mut progress = Progress::new(what, "index file", 0, total, now);
        for (loaded, start) in appended.into_iter().enumerate() {
            progress.report(loaded as u64, comet_rt::clock::monotonic_now());
            let path = self.dir.join(file_name(start));
            if self.sealed.contains_key(&start) {
                comet_rt::io::remove_file(&path).await?;
                continue;
            }
            let file = DirectFile::open(&path, OpenMode::ReadWrite, faults.clone()).await?;
            let first = self.load_entries(start, &file).await?;
            self.link(usize::MAX);
            self.files.insert(
                start,
                IndexFile {
                    first,
                    file: Some(Rc::new(file)),
                },
            );
        }
        self.flushed = self.end();
        self.disk_end = self.flushed;
        Ok(())
    }

    /// Loads the index files of a log no shard writes any more (see `orphan`): opened
    /// read-only and closed again (this index never writes), yielding to the shard between
    /// files so a large index does not hold it.
    pub(crate) async fn load_adopted(&mut self) -> Result<(), StoreError> {
        let (appended, sealed, _) = self.listing();
        self.open_sealed(&sealed, &None).await;
        for start in appended {
            if self.sealed.contains_key(&start) {
                continue;
            }
            let path = self.dir.join(file_name(start));
            let file = DirectFile::open(&path, OpenMode::Read, None).await?;
            let loaded = self.load_entries(start, &file).await;
            file.close().await?;
            let first = loaded?;
            // Nothing links an adopted index later: its lookups must not scan.
            self.link(usize::MAX);
            self.files.insert(start, IndexFile { first, file: None });
            comet_rt::local::yield_if_needed().await;
        }
        self.flushed = self.end();
        self.disk_end = self.flushed;
        Ok(())
    }

    /// Appends the entries of the index file of segment `start` that continue the index;
    /// returns the number of the first one.
    async fn load_entries(&mut self, start: u64, file: &DirectFile) -> Result<u64, StoreError> {
        let length = file.file_size().await?;
        let bytes = file.read_at(0, to_index(length)).await?;
        let first = self.end();
        for raw in bytes.chunks_exact(to_index(INDEX_ENTRY_BYTES)) {
            match IndexEntry::decode(raw) {
                Some(entry) if self.follows(start, &entry) => self.push(entry),
                _ => break,
            }
        }
        Ok(first)
    }

    /// Whether a loaded entry continues the index (stale entries past a truncation may not).
    fn follows(&self, segment_start: u64, entry: &IndexEntry) -> bool {
        let in_segment = entry.physical.position() >= segment_start
            && entry.physical.position() < segment_start + self.span_bytes;
        let ordered = self
            .entries
            .back()
            .is_none_or(|last| last.physical <= entry.physical);
        in_segment && ordered && entry.physical.log_id() == self.log_id
    }

    /// Segment starts whose index file a flush needs and that is not open yet.
    pub(crate) fn missing_files(&self) -> Vec<(u64, PathBuf)> {
        let end = self.end();
        self.files
            .iter()
            .filter(|(_, file)| file.file.is_none() && file.first < end)
            .map(|(start, _)| (*start, self.dir.join(file_name(*start))))
            .collect()
    }

    /// Adopts a file created for [`KeyIndex::missing_files`].
    pub(crate) fn attach_file(&mut self, start: u64, file: Rc<DirectFile>) {
        self.files.get_mut(&start).expect("file state exists").file = Some(file);
    }

    /// The writes that put unwritten entries into their files (tail page rewritten); the
    /// entries count as flushed (the caller stops the store if a write fails).
    pub(crate) fn plan_flush(&mut self) -> Vec<FileWrite> {
        let end = self.end();
        let starts: Vec<u64> = self.files.keys().copied().collect();
        let mut writes = Vec::new();
        for (position, start) in starts.iter().enumerate() {
            let first = self.files[start].first;
            let next_first = starts
                .get(position + 1)
                .map_or(end.max(self.disk_end), |next| self.files[next].first);
            if next_first <= self.flushed || first >= next_first {
                continue;
            }
            // Entries dispatched while missing files were being created wait for the next
            // flush when their file does not exist yet.
            let Some(file) = self.files[start].file.clone() else {
                self.flushed = self.flushed.max(first);
                return writes;
            };
            let from = self.flushed.max(first);
            writes.push(self.write_range(file, first, from, next_first));
        }
        self.flushed = end;
        self.disk_end = end;
        writes
    }

    fn write_range(&self, file: Rc<DirectFile>, first: u64, from: u64, to: u64) -> FileWrite {
        let low_byte = align_down((from - first) * INDEX_ENTRY_BYTES);
        let high_byte = align_up((to - first) * INDEX_ENTRY_BYTES);
        let mut buffer = file.alloc_buffer(to_index(high_byte - low_byte));
        let target = buffer.as_mut_slice();
        let entry_bytes = to_index(INDEX_ENTRY_BYTES);
        let low_number = first + low_byte / INDEX_ENTRY_BYTES;
        for number in low_number.max(self.base)..to.min(self.end()) {
            let at = to_index((number - low_number) * INDEX_ENTRY_BYTES);
            let entry = self.entries[to_index(number - self.base)];
            entry.encode(&mut target[at..at + entry_bytes]);
        }
        FileWrite {
            file,
            position: low_byte,
            buffer,
        }
    }
}

/// A lookup's in-memory results and the sealed indexes left to search (see
/// [`KeyIndex::plan_lookup`]).
pub(crate) struct LookupPlan {
    hash: u64,
    found: Vec<PhysicalOffset>,
    sealed: Vec<Rc<SealedIndex>>,
    max: usize,
    begin_ms: i64,
    end_ms: i64,
}

impl LookupPlan {
    /// Searches the sealed indexes, newest first, until `max` offsets are found.
    pub(crate) async fn finish(self) -> Result<Vec<PhysicalOffset>, StoreError> {
        let mut found = self.found;
        for sealed in &self.sealed {
            if found.len() >= self.max {
                break;
            }
            let left = self.max - found.len();
            match sealed
                .lookup(self.hash, left, self.begin_ms, self.end_ms)
                .await
            {
                Ok(more) => found.extend(more),
                // A damaged sealed index loses its segment's keys, not the whole query.
                Err(error @ StoreError::Corrupt { .. }) => {
                    log::error!("key index lookup skips a sealed segment: {error}");
                }
                Err(error) => return Err(error),
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves lookups follow the chain newest first, honour the time range and the limit, and
    // that truncation and retention restore the right chain heads, whatever number of entries
    // the background linker has linked at each step (0 to all).
    #[test]
    fn chains_lookup_truncate_and_drop_at_any_link_progress() {
        let log = LogId::new(0).expect("id");
        let at = |position| PhysicalOffset::new(log, position);
        let all = |index: &KeyIndex, key: &str| index.lookup_memory("T", key, 10, 0, i64::MAX);
        for linked_at_first in 0..=4 {
            for linked_after_truncate in [0, 1, usize::MAX] {
                let mut index = KeyIndex::new(PathBuf::from("/nonexistent"), log, 1 << 20);
                index.add("T", "k1", at(0), 1000);
                index.add("T", "k2", at(100), 2000);
                index.add("T", "k1", at(200), 3000);
                index.add("T", "k1", at(300), 4000);
                assert_eq!(index.link(linked_at_first), linked_at_first);
                assert_eq!(index.unlinked(), 4 - linked_at_first as u64);
                assert_eq!(all(&index, "k1"), vec![at(300), at(200), at(0)]);
                assert_eq!(
                    index.lookup_memory("T", "k1", 2, 0, i64::MAX),
                    vec![at(300), at(200)]
                );
                assert_eq!(index.lookup_memory("T", "k1", 10, 0, 1500), vec![at(0)]);
                assert_eq!(
                    index.lookup_memory("T", "k1", 10, 2500, 3500),
                    vec![at(200)]
                );
                assert!(index.lookup_memory("U", "k1", 10, 0, i64::MAX).is_empty());
                index.truncate_from(150);
                index.link(linked_after_truncate);
                assert_eq!(all(&index, "k1"), vec![at(0)]);
                index.add("T", "k1", at(400), 5000);
                assert_eq!(all(&index, "k1"), vec![at(400), at(0)]);
                index.drop_below(50);
                assert_eq!(all(&index, "k1"), vec![at(400)]);
                assert_eq!(all(&index, "k2"), vec![at(100)]);
                index.link(usize::MAX);
                assert_eq!(index.unlinked(), 0);
                assert_eq!(all(&index, "k1"), vec![at(400)]);
                assert_eq!(all(&index, "k2"), vec![at(100)]);
            }
        }
    }

    // Proves the in-memory index gives back its allocations once a span's entries go: after
    // 200,000 keys of one span are dropped, it holds room for about the few left, not its
    // peak, and still finds them.
    #[test]
    fn dropping_a_span_gives_back_its_memory() {
        let log = LogId::new(0).expect("id");
        let at = |position| PhysicalOffset::new(log, position);
        let span = 1u64 << 30;
        let mut index = KeyIndex::new(PathBuf::from("/nonexistent"), log, span);
        for number in 0..200_000u64 {
            index.add("T", &format!("k{number}"), at(number * 100), 1);
        }
        index.add("T", "later", at(span), 2);
        index.link(usize::MAX);
        let peak = index.held_bytes();
        assert!(peak > 200_000 * 32, "held {peak}");
        index.drop_below(span);
        let held = index.held_bytes();
        assert!(
            held <= 2 * INDEX_KEPT_CAPACITY_MIN * 64,
            "held {held} bytes after the drop (peak {peak})"
        );
        assert_eq!(
            index.lookup_memory("T", "later", 10, 0, i64::MAX),
            vec![at(span)]
        );
        assert!(index.lookup_memory("T", "k7", 10, 0, i64::MAX).is_empty());
    }
}
