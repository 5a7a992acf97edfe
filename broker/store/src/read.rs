//! The read path: pulls by queue offset (with tag filtering), lookups by time, by physical
//! offset (view by id) and by key, and the wait for new data that long polling uses.
//!
//! Consume-queue entries come from the queue's hot tail, the store's block cache, or the
//! queue's files (a block at a time, see `consume_queue`). Records come from the in-memory
//! chunks when still cached (tailing consumers never touch the disk), from a read-ahead window
//! kept from an earlier pull (`read_windows`: the queues interleaved in the log read each cold
//! range once) and otherwise from the segment files with read-ahead; disk reads are verified
//! (magic, lengths, body CRC) before they are returned (docs/style.md#paired-record-checks). Only
//! durable, dispatched records are ever reachable.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use bytes::Bytes;
use comet_proto::message::RecordView;
use comet_rt::io::{DirectFile, OpenMode};
use comet_rt::sync::WakerList;

use crate::commit_log::{to_index, CommitLog};
use crate::config::StoreConfig;
use crate::consume_queue::{ConsumeQueue, CqEntry};
use crate::cq_cache::CqCache;
use crate::cq_files::run_bounded;
use crate::error::StoreError;
use crate::index::KeyIndex;
use crate::limits::{
    CQ_BLOCK_ENTRIES, CQ_INSPECT_ENTRIES_MAX, PULL_RECORDS_MAX, PULL_SCAN_ENTRIES_MAX,
    READ_AHEAD_BYTES, READ_AHEAD_WINDOWS_IN_FLIGHT_MAX, READ_PAST_PULL_BYTES,
};
use crate::offset::{file_name, PhysicalOffset, QueueOffset};
use crate::queues::{queue_state, read_entries, read_entries_blocking, Queues};
use crate::shard::{Shared, StoreStats};

/// Which records a pull wants.
#[derive(Clone, Copy, Debug)]
pub enum MessageFilter<'a> {
    /// Every record.
    All,
    /// Records whose consume-queue tag code is one of these (RocketMQ's broker-side tag
    /// filter; hash collisions pass, the client re-filters by tag string).
    TagCodes(&'a [i64]),
}

impl MessageFilter<'_> {
    // Truncating to the low 32 bits is the comparison (see below).
    #[allow(clippy::cast_possible_truncation)]
    fn accepts(&self, entry: &CqEntry) -> bool {
        match self {
            MessageFilter::All => true,
            MessageFilter::TagCodes(codes) => {
                // Compared as i32, like the Java broker
                // (docs/protocol.md#tags-and-subscription-expressions).
                let code = entry.tag_code as i32;
                codes.iter().any(|wanted| *wanted as i32 == code)
            }
        }
    }
}

/// Outcome of a pull, as RocketMQ's GetMessageStatus.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GetStatus {
    /// Records returned.
    Found,
    /// Entries were scanned but none passed the filter.
    NoMatchedMessage,
    /// The queue has no records.
    NoMessageInQueue,
    /// The offset is below the queue's min.
    OffsetTooSmall,
    /// The offset equals the max (nothing new yet).
    OffsetOverflowOne,
    /// The offset is past the max.
    OffsetOverflowBadly,
}

/// What a pull returns.
#[derive(Clone, Debug)]
pub struct GetResult {
    /// Outcome.
    pub status: GetStatus,
    /// Stored record bytes, in queue order, ready to send.
    pub records: Vec<Bytes>,
    /// Where the next pull should start.
    pub next_offset: QueueOffset,
    /// The queue's min offset.
    pub min_offset: QueueOffset,
    /// The queue's max offset (one past the last entry).
    pub max_offset: QueueOffset,
}

/// Which entry `offset_by_timestamp` picks when several records share a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeBoundary {
    /// The first record stored at or after the time.
    Lower,
    /// The last record stored at or before the time.
    Upper,
}

/// A bounded window of bytes read from disk, reused for neighbouring records.
struct ReadWindow {
    position: u64,
    bytes: Bytes,
}

/// Where a cold read of the own log goes: the segment's start and file, where the read must
/// end (the durable end or the segment's), and the read windows' generation to quote when
/// keeping what is read (taken together, before the read).
struct DiskSource {
    segment_start: u64,
    file: Rc<DirectFile>,
    limit: u64,
    generation: u64,
}

/// What the read path uses of the shard state: the log, the queue tables, the key index,
/// the read counters and whether the store is closed (it never writes records).
#[derive(Clone, Copy)]
pub(crate) struct ReadPath<'s> {
    config: &'s StoreConfig,
    log: &'s RefCell<CommitLog>,
    queues: &'s RefCell<Queues>,
    cq_cache: &'s RefCell<CqCache>,
    index: &'s RefCell<KeyIndex>,
    stats: &'s Cell<StoreStats>,
    window_read: &'s WakerList,
    closed: &'s Cell<bool>,
}

impl<'s> ReadPath<'s> {
    /// The read path of the store whose state is `shared`.
    pub(crate) fn new(shared: &'s Shared) -> ReadPath<'s> {
        ReadPath {
            config: &shared.config,
            log: &shared.log,
            queues: &shared.queues,
            cq_cache: &shared.cq_cache,
            index: &shared.index,
            stats: &shared.stats,
            window_read: &shared.window_read,
            closed: &shared.closed,
        }
    }

    fn count_disk_read(&self) {
        let mut stats = self.stats.get();
        stats.disk_reads += 1;
        self.stats.set(stats);
    }

    /// Counts a read of the own log that found a kept read window (`hit`) or went to disk.
    fn count_window(&self, hit: bool) {
        let mut stats = self.stats.get();
        if hit {
            stats.read_window_hits += 1;
        } else {
            stats.read_window_misses += 1;
            stats.disk_reads += 1;
        }
        self.stats.set(stats);
    }

    /// The bytes from `position` to the end of a read window kept from an earlier pull,
    /// if one holds `length_min` bytes from there (counted as a hit).
    fn kept_window(&self, position: u64, length_min: usize) -> Option<Bytes> {
        let kept = self
            .log
            .borrow_mut()
            .read_windows
            .get_from(position, length_min)?;
        self.count_window(true);
        Some(kept)
    }

    /// Where `physical` of the own log is read from disk (see [`DiskSource`]).
    fn disk_source(&self, physical: PhysicalOffset) -> Result<DiskSource, StoreError> {
        let log = self.log.borrow();
        let (segment_start, file) = log
            .segment_of(physical.position())
            .ok_or_else(|| missing(physical))?;
        Ok(DiskSource {
            segment_start,
            file,
            limit: log.durable.min(segment_start + log.segment_bytes),
            generation: log.read_windows.generation(),
        })
    }

    /// One direct read of `length` bytes at `position` of the segment `source` names (a miss
    /// of the kept windows).
    async fn read_disk(
        &self,
        source: &DiskSource,
        position: u64,
        length: usize,
    ) -> Result<Bytes, StoreError> {
        self.count_window(false);
        let read = source
            .file
            .read_at(position - source.segment_start, length)
            .await?;
        Ok(Bytes::from(read))
    }

    /// Entries of (topic, queue_id) from `from` on (at least one, at most `limit`), through
    /// the hot tail, the block cache or the queue's file; `None` past the end.
    async fn entries(
        &self,
        topic: &str,
        queue_id: i32,
        from: u64,
        limit: u64,
    ) -> Result<Option<Vec<CqEntry>>, StoreError> {
        let queue = (topic, queue_id);
        let (entries, read) = read_entries(self.queues, self.cq_cache, queue, from, limit).await?;
        if read {
            let mut stats = self.stats.get();
            stats.cq_disk_reads += 1;
            self.stats.set(stats);
        }
        Ok(entries)
    }

    /// One past the last entry of (topic, queue_id); 0 for an unknown queue.
    pub(crate) fn max_offset(&self, topic: &str, queue_id: i32) -> QueueOffset {
        self.with_queue(topic, queue_id, |queue| queue.max_offset())
    }

    /// The first entry of (topic, queue_id) that has a record.
    pub(crate) fn min_offset(&self, topic: &str, queue_id: i32) -> QueueOffset {
        self.with_queue(topic, queue_id, |queue| queue.min_offset())
    }

    fn with_queue(
        &self,
        topic: &str,
        queue_id: i32,
        read: impl FnOnce(&ConsumeQueue) -> u64,
    ) -> QueueOffset {
        let queues = self.queues.borrow();
        let offset = queues
            .get(topic)
            .and_then(|queues| queues.get(&queue_id))
            .map_or(0, |queue| read(&queue.consume_queue));
        QueueOffset(offset)
    }

    /// Reads up to `max_count` records (at most `max_bytes`, but always at least one) from
    /// (topic, queue_id) starting at `offset`, keeping those `filter` accepts.
    pub(crate) async fn get_messages(
        &self,
        topic: &str,
        queue_id: i32,
        offset: QueueOffset,
        max_count: usize,
        max_bytes: usize,
        filter: MessageFilter<'_>,
    ) -> Result<GetResult, StoreError> {
        let min = self.min_offset(topic, queue_id);
        let max = self.max_offset(topic, queue_id);
        let mut result = GetResult {
            status: GetStatus::Found,
            records: Vec::new(),
            next_offset: offset,
            min_offset: min,
            max_offset: max,
        };
        if let Some((status, next)) = offset_status(offset, min, max) {
            result.status = status;
            result.next_offset = next;
            return Ok(result);
        }
        let (chosen, next) = self
            .choose_entries((topic, queue_id), offset, max_count, max_bytes, filter)
            .await?;
        result.next_offset = next;
        if chosen.is_empty() {
            result.status = GetStatus::NoMatchedMessage;
            return Ok(result);
        }
        self.read_ahead(&chosen).await?;
        let mut window = None;
        for entry in chosen {
            let size = to_index(u64::from(entry.size));
            result
                .records
                .push(self.read_span(entry.physical, size, &mut window).await?);
        }
        Ok(result)
    }

    /// Reads the windows under a pull's records of the own log that are neither cached nor
    /// kept, all at once (up to [`READ_AHEAD_WINDOWS_IN_FLIGHT_MAX`] in flight), from the
    /// first such record on, in that record's segment: the records then come from the
    /// kept windows. Without it each window was read when the record reaching into it came up,
    /// one read in flight per pull. Only windows holding the pull's records are read (bounded
    /// by its byte and count limits); what else they hold, records of other queues written in
    /// between, stays kept for those queues' pulls.
    async fn read_ahead(&self, chosen: &[CqEntry]) -> Result<(), StoreError> {
        let cold: Vec<&CqEntry> = {
            let log = self.log.borrow();
            chosen
                .iter()
                .filter(|entry| {
                    let size = to_index(u64::from(entry.size));
                    entry.physical.log_id() == self.config.log_id
                        && log.read_cached(entry.physical.position(), size).is_none()
                })
                .collect()
        };
        let Some(first) = cold.first() else {
            return Ok(());
        };
        let Ok(source) = self.disk_source(first.physical) else {
            return Ok(());
        };
        let mut ranges = cold
            .iter()
            .map(|entry| {
                let position = entry.physical.position();
                (position, position + u64::from(entry.size))
            })
            .filter(|(from, to)| source.segment_start <= *from && *to <= source.limit)
            .collect::<Vec<_>>();
        if ranges.windows(2).any(|pair| pair[1].0 < pair[0].0) {
            // Not in log order (records of a queue always are): left to read one by one.
            return Ok(());
        }
        // And the windows just past the pull's last record: the queue's next pull (and its
        // neighbours' in the log) will want them, and reading them with these keeps the
        // disk's queue deep instead of one pull's worth at a time.
        if let Some(&(_, last_end)) = ranges.last() {
            let ahead_end = (last_end + READ_PAST_PULL_BYTES).min(source.limit);
            if last_end < ahead_end {
                ranges.push((last_end, ahead_end));
            }
        }
        // Half the kept windows at most, so the pulls of the queues draining together do not
        // push out each other's windows before they are used.
        let windows_max = self.config.read_window_cache_bytes / READ_AHEAD_BYTES / 2;
        if windows_max > 1 {
            self.windows_under(&source, ranges.into_iter(), windows_max)
                .await?;
        }
        Ok(())
    }

    async fn choose_entries(
        &self,
        (topic, queue_id): (&str, i32),
        offset: QueueOffset,
        max_count: usize,
        max_bytes: usize,
        filter: MessageFilter<'_>,
    ) -> Result<(Vec<CqEntry>, QueueOffset), StoreError> {
        let max_count = max_count.clamp(1, PULL_RECORDS_MAX);
        let (mut chosen, mut bytes, mut next) = (Vec::new(), 0usize, offset.0);
        let scan_end = offset.0 + PULL_SCAN_ENTRIES_MAX as u64;
        'scan: while next < scan_end {
            let limit = (scan_end - next).min(CQ_BLOCK_ENTRIES);
            let Some(run) = self.entries(topic, queue_id, next, limit).await? else {
                break;
            };
            for entry in run {
                let size = to_index(u64::from(entry.size));
                if entry.is_placeholder() || !filter.accepts(&entry) {
                    next += 1;
                    continue;
                }
                if !chosen.is_empty() && (chosen.len() >= max_count || bytes + size > max_bytes) {
                    break 'scan;
                }
                bytes += size;
                chosen.push(entry);
                next += 1;
            }
        }
        Ok((chosen, QueueOffset(next)))
    }

    /// Reads `size` bytes of the record at `physical`: cache, this pull's window, a window
    /// kept from an earlier pull, or disk (read-ahead, then kept for later pulls).
    async fn read_span(
        &self,
        physical: PhysicalOffset,
        size: usize,
        window: &mut Option<ReadWindow>,
    ) -> Result<Bytes, StoreError> {
        let position = physical.position();
        if physical.log_id() != self.config.log_id {
            return self.read_foreign(physical, size).await;
        }
        if let Some(bytes) = self.log.borrow().read_cached(position, size) {
            return Ok(bytes);
        }
        if let Some(window) = window.as_ref() {
            let end = window.position + window.bytes.len() as u64;
            if position >= window.position && position + size as u64 <= end {
                let from = to_index(position - window.position);
                return verified(window.bytes.slice(from..from + size), physical);
            }
        }
        if let Some(bytes) = self.kept_window(position, size) {
            let record = bytes.slice(..size);
            *window = Some(ReadWindow { position, bytes });
            return verified(record, physical);
        }
        let source = self.disk_source(physical)?;
        let end = position + size as u64;
        if end > source.limit {
            return Err(missing(physical));
        }
        let windows = self.windows_covering(&source, position, end).await?;
        let record = join_windows(&windows, position, size).ok_or_else(|| missing(physical))?;
        let record = verified(record, physical)?;
        if let Some((start, bytes)) = windows.last() {
            *window = Some(ReadWindow {
                position: *start,
                bytes: bytes.clone(),
            });
        }
        Ok(record)
    }

    /// The windows of the grid (see [`window_bounds`]) that cover `from..to` of `source`'s
    /// segment, in order: those kept, and the others read from disk, up to
    /// [`READ_AHEAD_WINDOWS_IN_FLIGHT_MAX`] at once, and kept for later pulls.
    async fn windows_covering(
        &self,
        source: &DiskSource,
        from: u64,
        to: u64,
    ) -> Result<Vec<(u64, Bytes)>, StoreError> {
        self.windows_under(source, std::iter::once((from, to)), usize::MAX)
            .await
    }

    /// The windows of the grid under any of `ranges` (ascending `from..to` of durable bytes
    /// of `source`'s segment), in order, each once, at most `windows_max` of them: those
    /// kept, the others read from disk together (see [`ReadPath::windows_covering`]).
    async fn windows_under(
        &self,
        source: &DiskSource,
        ranges: impl Iterator<Item = (u64, u64)>,
        windows_max: usize,
    ) -> Result<Vec<(u64, Bytes)>, StoreError> {
        let mut windows: Vec<(u64, u64, Option<Bytes>)> = Vec::new();
        for (from, to) in ranges {
            if windows.len() >= windows_max {
                break;
            }
            assert!(
                source.segment_start <= from && from < to && to <= source.limit,
                "a range of durable bytes of one segment"
            );
            let mut start = from;
            while start < to {
                let (window_start, window_end) = window_bounds(source, start);
                start = window_end;
                if windows
                    .last()
                    .is_some_and(|(last, _, _)| *last >= window_start)
                {
                    continue;
                }
                if windows.len() >= windows_max {
                    break;
                }
                let length = to_index(window_end - window_start);
                let kept = self
                    .log
                    .borrow_mut()
                    .read_windows
                    .get_at(window_start, length);
                if kept.is_some() {
                    self.count_window(true);
                }
                windows.push((window_start, window_end, kept));
            }
        }
        // Windows another pull is reading now are waited for, not read again.
        let mut awaited = Vec::new();
        let mut guards = Vec::new();
        for (index, (start, _, kept)) in windows.iter().enumerate() {
            if kept.is_none() {
                match ReadingGuard::begin(*self, *start) {
                    Some(guard) => guards.push((index, guard)),
                    None => awaited.push(index),
                }
            }
        }
        let read: RefCell<Vec<(usize, Bytes)>> = RefCell::new(Vec::new());
        let reads = guards.into_iter().map(|(index, guard)| {
            let (start, end, _) = &windows[index];
            let read = &read;
            async move {
                let bytes = self
                    .read_window(source, *start, to_index(end - start))
                    .await?;
                drop(guard);
                read.borrow_mut().push((index, bytes));
                Ok::<(), StoreError>(())
            }
        });
        run_bounded(reads, READ_AHEAD_WINDOWS_IN_FLIGHT_MAX).await?;
        for (index, bytes) in read.into_inner() {
            windows[index].2 = Some(bytes);
        }
        for index in awaited {
            let (start, end, slot) = &mut windows[index];
            let length = to_index(*end - *start);
            let start = *start;
            self.window_read
                .until(|| !self.log.borrow().read_windows.is_reading(start))
                .await;
            let kept = self.log.borrow_mut().read_windows.get_at(start, length);
            let bytes = match kept {
                Some(bytes) => {
                    self.count_window(true);
                    bytes
                }
                // That read failed, or its window was already pushed out: read it here.
                None => self.read_window(source, start, length).await?,
            };
            *slot = Some(bytes);
        }
        Ok(windows
            .into_iter()
            .map(|(start, _, bytes)| (start, bytes.expect("every window kept or read")))
            .collect())
    }

    /// Reads the window of `length` bytes at `start` from disk and keeps it for later pulls.
    async fn read_window(
        &self,
        source: &DiskSource,
        start: u64,
        length: usize,
    ) -> Result<Bytes, StoreError> {
        let bytes = self.read_disk(source, start, length).await?;
        if bytes.len() != length {
            let physical = PhysicalOffset::new(self.config.log_id, start);
            return Err(corrupt(physical, "a read of durable bytes came back short"));
        }
        self.log
            .borrow_mut()
            .read_windows
            .keep(source.generation, start, bytes.clone());
        Ok(bytes)
    }

    /// Reads a record of another commit log (queues whose owner moved, see
    /// [`remap`](crate::remap)): the durable segments of any log are readable from any shard.
    async fn read_foreign(
        &self,
        physical: PhysicalOffset,
        size: usize,
    ) -> Result<Bytes, StoreError> {
        let bytes = self.read_foreign_raw(physical, size).await?;
        verified(Bytes::from(bytes), physical)
    }

    /// The record at `physical` (view by offset message id), if it is durable and still
    /// stored.
    pub(crate) async fn read_record(
        &self,
        physical: PhysicalOffset,
    ) -> Result<Option<Bytes>, StoreError> {
        let position = physical.position();
        if physical.log_id() == self.config.log_id {
            let log = self.log.borrow();
            if position < log.min_position() || position >= log.dispatched {
                return Ok(None);
            }
        }
        let mut window = None;
        let head = self.read_span_prefix(physical, &mut window).await?;
        let Some((size, _)) = comet_proto::message::peek_total_size_and_magic(&head) else {
            return Ok(None);
        };
        let Ok(size) = usize::try_from(size) else {
            return Ok(None);
        };
        if !(comet_proto::message::RECORD_BYTES_MIN..=crate::limits::RECORD_BYTES_MAX)
            .contains(&size)
        {
            return Ok(None);
        }
        match self.read_span(physical, size, &mut window).await {
            Ok(bytes) => Ok(Some(bytes)),
            Err(StoreError::Corrupt { .. }) => Ok(None),
            Err(error) => Err(error),
        }
    }

    async fn read_span_prefix(
        &self,
        physical: PhysicalOffset,
        window: &mut Option<ReadWindow>,
    ) -> Result<Bytes, StoreError> {
        if physical.log_id() != self.config.log_id {
            return Ok(Bytes::from(self.read_foreign_raw(physical, 8).await?));
        }
        let position = physical.position();
        if let Some(bytes) = self.log.borrow().read_cached(position, 8) {
            return Ok(bytes);
        }
        if let Some(bytes) = self.kept_window(position, 8) {
            *window = Some(ReadWindow {
                position,
                bytes: bytes.clone(),
            });
            return Ok(bytes);
        }
        let source = self.disk_source(physical)?;
        if position >= source.limit {
            return Err(missing(physical));
        }
        // Durable bytes only: the window is kept for later reads.
        let windows = self
            .windows_covering(&source, position, position + 1)
            .await?;
        let (start, bytes) = windows
            .into_iter()
            .next()
            .expect("one window covers a byte");
        let from = to_index(position - start);
        *window = Some(ReadWindow {
            position: start,
            bytes: bytes.clone(),
        });
        Ok(bytes.slice(from..))
    }

    async fn read_foreign_raw(
        &self,
        physical: PhysicalOffset,
        size: usize,
    ) -> Result<Vec<u8>, StoreError> {
        let segment_bytes = self.config.segment_bytes;
        let position = physical.position();
        let start = position - position % segment_bytes;
        let dir = self
            .config
            .other_logs
            .get(&physical.log_id())
            .ok_or_else(|| missing(physical))?;
        let path = dir.join(file_name(start));
        if !path.exists() {
            // Deleted by that log's retention.
            return Err(missing(physical));
        }
        self.count_disk_read();
        let file = DirectFile::open(&path, OpenMode::Read, None).await?;
        let length = size.min(to_index(segment_bytes - (position - start)));
        let bytes = file.read_at(position - start, length).await;
        file.close().await?;
        Ok(bytes?)
    }

    /// Store time of the record an entry points at.
    async fn store_time_of(&self, entry: CqEntry) -> Result<i64, StoreError> {
        let mut window = None;
        let bytes = self
            .read_span(entry.physical, to_index(u64::from(entry.size)), &mut window)
            .await?;
        let view = RecordView::parse(&bytes).map_err(|error| corrupt(entry.physical, error))?;
        Ok(view.store_timestamp())
    }

    /// The queue offset of the first (`Lower`) or last (`Upper`) record of (topic, queue_id)
    /// stored at `timestamp_ms`, by binary search; if no record has exactly that time,
    /// `Lower` gives the first later record and `Upper` the last earlier one (clamped to
    /// the queue's min and max).
    pub(crate) async fn offset_by_timestamp(
        &self,
        topic: &str,
        queue_id: i32,
        timestamp_ms: i64,
        boundary: TimeBoundary,
    ) -> Result<QueueOffset, StoreError> {
        let min = self.min_offset(topic, queue_id).0;
        let max = self.max_offset(topic, queue_id).0;
        // Find the first offset whose time is > t (Upper) or >= t (Lower).
        let (mut low, mut high) = (min, max);
        while low < high {
            let middle = low + (high - low) / 2;
            let Some(entry) = self.entry_at(topic, queue_id, middle).await? else {
                break;
            };
            let time = self.store_time_of(entry).await?;
            let before = match boundary {
                TimeBoundary::Lower => time < timestamp_ms,
                TimeBoundary::Upper => time <= timestamp_ms,
            };
            if before {
                low = middle + 1;
            } else {
                high = middle;
            }
        }
        let offset = match boundary {
            TimeBoundary::Lower => low,
            TimeBoundary::Upper => low.saturating_sub(1).max(min),
        };
        Ok(QueueOffset(offset.min(max)))
    }

    /// The entry at `offset` when it has a record.
    async fn entry_at(
        &self,
        topic: &str,
        queue_id: i32,
        offset: u64,
    ) -> Result<Option<CqEntry>, StoreError> {
        let run = self.entries(topic, queue_id, offset, 1).await?;
        let entry = run.and_then(|run| run.first().copied());
        Ok(entry.filter(|entry| !entry.is_placeholder()))
    }

    /// Store time of the oldest record of (topic, queue_id), or `None` when it is empty.
    pub(crate) async fn earliest_store_time(
        &self,
        topic: &str,
        queue_id: i32,
    ) -> Result<Option<i64>, StoreError> {
        let min = self.min_offset(topic, queue_id).0;
        match self.entry_at(topic, queue_id, min).await? {
            Some(entry) => Ok(Some(self.store_time_of(entry).await?)),
            None => Ok(None),
        }
    }

    /// Store time of the record at queue offset `offset` of (topic, queue_id), or `None`
    /// when the queue holds no record there (below its min, at or past its max, unknown
    /// queue). What RocketMQ's `getMessageStoreTimeStamp` answers, with `None` for its -1.
    pub(crate) async fn store_time_at(
        &self,
        topic: &str,
        queue_id: i32,
        offset: QueueOffset,
    ) -> Result<Option<i64>, StoreError> {
        if offset < self.min_offset(topic, queue_id) {
            return Ok(None);
        }
        match self.entry_at(topic, queue_id, offset.0).await? {
            Some(entry) => Ok(Some(self.store_time_of(entry).await?)),
            None => Ok(None),
        }
    }

    /// True when the store holds a consume queue for (topic, queue_id) (one was written to,
    /// recovered, or waited on).
    pub(crate) fn queue_list(&self) -> Vec<(String, i32)> {
        let queues = self.queues.borrow();
        let mut list: Vec<(String, i32)> = queues
            .iter()
            .flat_map(|(topic, ids)| ids.keys().map(move |id| (topic.clone(), *id)))
            .collect();
        list.sort();
        list
    }

    pub(crate) fn has_queue(&self, topic: &str, queue_id: i32) -> bool {
        let queues = self.queues.borrow();
        queues
            .get(topic)
            .is_some_and(|queues| queues.contains_key(&queue_id))
    }

    /// The consume-queue entries of (topic, queue_id) at queue offsets
    /// `[from, from + count)` that hold a record, each with its offset, in queue order;
    /// `count` is capped at [`CQ_INSPECT_ENTRIES_MAX`]. Entries below the queue's min (their
    /// records deleted) and past its max are not returned.
    pub(crate) fn consume_queue_entries(
        &self,
        topic: &str,
        queue_id: i32,
        from: QueueOffset,
        count: usize,
    ) -> Vec<(QueueOffset, CqEntry)> {
        let count = count.min(CQ_INSPECT_ENTRIES_MAX);
        let queues = self.queues.borrow();
        let Some(queue) = queues
            .get(topic)
            .and_then(|queues| queues.get(&queue_id))
            .map(|queue| &queue.consume_queue)
        else {
            return Vec::new();
        };
        let start = from.0.max(queue.min_offset());
        let end = from.0.saturating_add(count as u64).min(queue.max_offset());
        let entries = collect_entries(queue, &mut self.cq_cache.borrow_mut(), start, end);
        assert!(entries.len() <= count, "at most {count} entries");
        entries
    }

    /// Records of `topic` whose `UNIQ_KEY` or one of whose `KEYS` equals `key`, stored within
    /// `[begin_ms, end_ms]`, newest first, at most `max`, from this log's key index.
    pub(crate) async fn query_by_key(
        &self,
        topic: &str,
        key: &str,
        max: usize,
        (begin_ms, end_ms): (i64, i64),
    ) -> Result<Vec<Bytes>, StoreError> {
        let plan = self
            .index
            .borrow()
            .plan_lookup(topic, key, max, begin_ms, end_ms);
        let found = plan.finish().await?;
        let mut records = Vec::new();
        for physical in found {
            let Some(bytes) = self.read_record(physical).await? else {
                continue;
            };
            let view = RecordView::parse(&bytes).map_err(|error| corrupt(physical, error))?;
            if view.topic() == topic && record_has_key(&view, key) {
                records.push(bytes);
            }
        }
        Ok(records)
    }

    /// Resolves once (topic, queue_id) has an entry at or past `offset` (its max offset is
    /// above `offset`), or the store shuts down. Long polling races it with its timeout.
    pub(crate) fn wait_for_message(
        &self,
        topic: &str,
        queue_id: i32,
        offset: QueueOffset,
    ) -> MessageWait<'s> {
        MessageWait {
            reader: *self,
            topic: topic.to_string(),
            queue_id,
            offset,
        }
    }
}

/// Future of [`Store::wait_for_message`](crate::Store::wait_for_message).
pub struct MessageWait<'s> {
    reader: ReadPath<'s>,
    topic: String,
    queue_id: i32,
    offset: QueueOffset,
}

impl Future for MessageWait<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let reader = self.reader;
        if reader.closed.get() || reader.max_offset(&self.topic, self.queue_id) > self.offset {
            return Poll::Ready(());
        }
        let mut queues = reader.queues.borrow_mut();
        let queue = queue_state(&mut queues, reader.config, &self.topic, self.queue_id);
        queue.arrivals.register(cx.waker());
        Poll::Pending
    }
}

/// The entries of `[start, end)` that hold a record. Cold blocks are read with blocking
/// reads (the caller cannot await; at most [`CQ_INSPECT_ENTRIES_MAX`] entries, 5 blocks);
/// a failed read ends the answer there, logged.
fn collect_entries(
    queue: &ConsumeQueue,
    cache: &mut CqCache,
    start: u64,
    end: u64,
) -> Vec<(QueueOffset, CqEntry)> {
    assert!(end <= queue.max_offset(), "range ends inside the queue");
    let mut entries = Vec::new();
    let mut at = start;
    while at < end {
        match read_entries_blocking(queue, cache, at, end - at) {
            Ok(Some(run)) => {
                for entry in run {
                    if !entry.is_placeholder() {
                        entries.push((QueueOffset(at), entry));
                    }
                    at += 1;
                }
            }
            Ok(None) => break,
            Err(error) => {
                log::warn!("consume-queue entries from {at} not read: {error}");
                break;
            }
        }
    }
    entries
}

pub(crate) fn record_has_key(view: &RecordView<'_>, key: &str) -> bool {
    use comet_proto::properties::names;
    view.property(names::UNIQ_KEY) == Some(key)
        || view
            .property(names::KEYS)
            .is_some_and(|keys| keys.split(' ').any(|word| word == key))
}

fn offset_status(
    offset: QueueOffset,
    min: QueueOffset,
    max: QueueOffset,
) -> Option<(GetStatus, QueueOffset)> {
    if max.0 == 0 || max == min && offset <= max {
        return Some((
            GetStatus::NoMessageInQueue,
            QueueOffset(max.0.min(offset.0).max(min.0)),
        ));
    }
    if offset < min {
        return Some((GetStatus::OffsetTooSmall, min));
    }
    if offset == max {
        return Some((GetStatus::OffsetOverflowOne, offset));
    }
    if offset > max {
        return Some((GetStatus::OffsetOverflowBadly, max));
    }
    None
}

/// A window being read from disk (see `ReadWindows::begin_read`): dropping it, when the read
/// ended or when the pull reading it was dropped mid-read, ends the mark and wakes the pulls
/// waiting for that window.
struct ReadingGuard<'s> {
    path: ReadPath<'s>,
    start: u64,
}

impl<'s> ReadingGuard<'s> {
    /// Marks the window at `start` as being read by the caller; `None` when another pull
    /// already reads it.
    fn begin(path: ReadPath<'s>, start: u64) -> Option<ReadingGuard<'s>> {
        let began = path.log.borrow_mut().read_windows.begin_read(start);
        // Built only when the mark was set: a guard built and dropped would end another's.
        began.then(|| ReadingGuard { path, start })
    }
}

impl Drop for ReadingGuard<'_> {
    fn drop(&mut self) {
        self.path.log.borrow_mut().read_windows.end_read(self.start);
        self.path.window_read.wake_all();
    }
}

/// The window of the read grid holding `position` (below `source.limit`): its aligned
/// [`READ_AHEAD_BYTES`] clipped to the segment's start and to the durable end, so a window
/// never spans segments and never holds bytes a crash could take back.
fn window_bounds(source: &DiskSource, position: u64) -> (u64, u64) {
    assert!(position < source.limit, "a durable position");
    let grid = READ_AHEAD_BYTES as u64;
    let aligned = position - position % grid;
    let start = aligned.max(source.segment_start);
    let end = (aligned + grid).min(source.limit);
    (start, end)
}

/// `size` bytes from `position` out of consecutive `windows` (start, bytes) that cover them:
/// a slice of one window without copying, or the pieces of several joined.
fn join_windows(windows: &[(u64, Bytes)], position: u64, size: usize) -> Option<Bytes> {
    let end = position + size as u64;
    let first = windows
        .iter()
        .position(|(start, bytes)| *start <= position && position < start + bytes.len() as u64)?;
    let (start, bytes) = &windows[first];
    if end <= start + bytes.len() as u64 {
        let from = to_index(position - start);
        return Some(bytes.slice(from..from + size));
    }
    let mut joined = Vec::with_capacity(size);
    let mut at = position;
    for (start, bytes) in &windows[first..] {
        if at >= end {
            break;
        }
        if at < *start || at >= start + bytes.len() as u64 {
            return None;
        }
        let from = to_index(at - start);
        let to = to_index((end - start).min(bytes.len() as u64));
        joined.extend_from_slice(&bytes[from..to]);
        at = start + to as u64;
    }
    (joined.len() == size).then(|| Bytes::from(joined))
}

fn missing(physical: PhysicalOffset) -> StoreError {
    StoreError::Corrupt {
        path: std::path::PathBuf::from(format!("commitlog/{}", physical.log_id())),
        reason: format!("record at {physical} is not stored"),
    }
}

fn corrupt(physical: PhysicalOffset, error: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt {
        path: std::path::PathBuf::from(format!("commitlog/{}", physical.log_id())),
        reason: format!("record at {physical}: {error}"),
    }
}

/// Checks a record read from disk before it is handed out (docs/style.md#paired-record-checks).
fn verified(bytes: Bytes, physical: PhysicalOffset) -> Result<Bytes, StoreError> {
    let view = RecordView::parse(&bytes).map_err(|error| corrupt(physical, error))?;
    if view.total_size() != bytes.len() || !view.body_crc_matches() {
        return Err(corrupt(physical, "length or body CRC mismatch"));
    }
    Ok(bytes)
}
