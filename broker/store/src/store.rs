//! The store facade: one instance per shard, driven by that shard's executor.
//!
//! Appends are copied into the commit log's open chunk synchronously (queue offsets assigned,
//! QUEUEOFFSET / PHYSICALOFFSET / STORETIMESTAMP patched in place), then the flush lanes
//! write what is dirty to segments opened O_DSYNC, durable when the write completes (group
//! commit: whatever piles up while a flush is in flight joins the next one, or starts a
//! second flush beside it when the first ends on a page, see `flush`; a flush never waits
//! for company). When a flush completes the dispatcher turns the newly durable
//! records into consume-queue and index entries, so readers only ever see durable records,
//! and appends waiting under SYNC_FLUSH resolve.
//!
//! A failed write or fdatasync fails every waiting append and stops all later writes
//! ([`StoreError::WriteFailed`]) until a restart recovers from disk.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use comet_proto::message::{RecordView, BLANK_MAGIC};
use comet_rt::io::{DirectFile, OpenMode};
use comet_rt::local::LocalTask;

use crate::checkpoint::CheckpointFile;
use crate::commit_log::{CommitLog, NeedSpare, BLANK_BYTES};
use crate::config::{FlushPolicy, StoreConfig};
use crate::consume_queue::{tag_code, ConsumeQueue, CqEntry};
use crate::error::StoreError;
use crate::index::KeyIndex;
use crate::offset::{PhysicalOffset, QueueOffset};
use crate::sync::{PositionWaiters, WakerList};

/// Name of the topic holding delayed messages (docs/protocol.md#delay-levels).
pub const SCHEDULE_TOPIC: &str = "SCHEDULE_TOPIC_XXXX";

/// MessageSysFlag transaction bits (docs/protocol.md#flag-words).
const TRANSACTION_TYPE_MASK: i32 = 0x3 << 2;
const TRANSACTION_PREPARED: i32 = 0x1 << 2;
const TRANSACTION_ROLLBACK: i32 = 0x3 << 2;

/// Where one appended record went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendedRecord {
    /// Its commit-log offset (with the log id).
    pub physical_offset: PhysicalOffset,
    /// Its offset in its consume queue (0 for prepared and rollback transaction records,
    /// which get no consume-queue entry).
    pub queue_offset: QueueOffset,
    /// STORETIMESTAMP written into it.
    pub store_timestamp_ms: i64,
    /// Its TOTALSIZE.
    pub size_bytes: u32,
}

/// Counters for benchmarks and metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Records appended.
    pub appended_records: u64,
    /// Bytes of records appended.
    pub appended_bytes: u64,
    /// Flushes completed (each ends with every file it wrote durable).
    pub flushes: u64,
    /// Syncs of commit-log segments: fdatasync calls and O_DSYNC writes (each makes the
    /// segment durable up to its end).
    pub fdatasyncs: u64,
    /// Bytes written to commit-log segments (tail pages count each time).
    pub written_bytes: u64,
    /// Reads of commit-log data from disk (cache misses of the read path).
    pub disk_reads: u64,
    /// Bytes of zeros the warmer wrote ahead of the write position (see `warm`).
    pub zeroed_bytes: u64,
    /// Bytes of padding that put a flush's end on a page, so the next could start while it
    /// was in flight (see `flush`).
    pub padding_bytes: u64,
    /// Flushes that started while another was in flight.
    pub pipelined_flushes: u64,
}

/// State of one queue owned by this store.
pub(crate) struct QueueState {
    /// Next queue offset to assign (includes records not yet durable).
    pub(crate) next_offset: u64,
    pub(crate) consume_queue: ConsumeQueue,
    /// Readers waiting for a new entry.
    pub(crate) arrivals: WakerList,
}

pub(crate) type Queues = HashMap<String, HashMap<i32, QueueState>>;

/// Everything the store's tasks share (single shard, so `Rc` + `RefCell`; no borrow is held
/// across an await).
pub(crate) struct Shared {
    pub(crate) config: StoreConfig,
    pub(crate) log: RefCell<CommitLog>,
    pub(crate) queues: RefCell<Queues>,
    pub(crate) index: RefCell<KeyIndex>,
    pub(crate) orphans: RefCell<crate::orphan::Orphans>,
    pub(crate) checkpoint: RefCell<Option<CheckpointFile>>,
    pub(crate) failure: RefCell<Option<String>>,
    pub(crate) spare_failure: RefCell<Option<String>>,
    pub(crate) disk_full: Cell<Option<(u32, u32)>>,
    pub(crate) closed: Cell<bool>,
    /// Dropped without shutdown (see [`Store`]).
    pub(crate) abandoned: Cell<bool>,
    /// Live user handles.
    pub(crate) handles: Cell<usize>,
    pub(crate) durable_waiters: PositionWaiters,
    pub(crate) flush_wanted: WakerList,
    /// The index linker, waiting for unlinked entries.
    pub(crate) index_pushed: WakerList,
    pub(crate) spare_ready: WakerList,
    /// Flushes planned and in flight (the warmer waits while any is, see `warm`).
    pub(crate) flights: RefCell<crate::flush::Flights>,
    /// The last flush to complete found appends waiting for the next one (see `flush`).
    pub(crate) next_flush_waited: Cell<bool>,
    /// Bytes the last flush wrote (the warmer only runs behind small flushes).
    pub(crate) last_flush_bytes: Cell<u64>,
    /// The zero write in flight, `[low, high)` log positions.
    pub(crate) zero_in_flight: Cell<Option<(u64, u64)>>,
    /// Everything below this (and below the write position) is written on disk.
    pub(crate) warmed_to: Cell<u64>,
    /// The warmer, waiting for a flush to end, the spare, or room ahead.
    pub(crate) warm_wanted: WakerList,
    /// A flush waiting for the zero write it meets.
    pub(crate) zero_done: WakerList,
    /// Background tasks sleeping until their next pass, woken when the store closes.
    pub(crate) closing: WakerList,
    pub(crate) maintenance_busy: Cell<bool>,
    pub(crate) maintenance_free: WakerList,
    pub(crate) last_store_timestamp_ms: Cell<i64>,
    pub(crate) stats: Cell<StoreStats>,
    pub(crate) tasks: RefCell<Vec<LocalTask<()>>>,
    pub(crate) lock_file: RefCell<Option<std::fs::File>>,
}

/// A shard's store. Cloning gives another handle to the same store (same shard only).
///
/// When the last handle is dropped without [`Store::shutdown`] the store is abandoned as in a
/// crash: background tasks stop, nothing more is flushed, the lock is released and `abort`
/// stays, so the next open recovers.
pub struct Store {
    pub(crate) shared: Rc<Shared>,
    /// False for the store's own background tasks, which must not keep it alive.
    pub(crate) counted: bool,
}

impl Clone for Store {
    fn clone(&self) -> Store {
        self.shared.handles.set(self.shared.handles.get() + 1);
        Store {
            shared: Rc::clone(&self.shared),
            counted: true,
        }
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        if !self.counted {
            return;
        }
        let handles = self.shared.handles.get() - 1;
        self.shared.handles.set(handles);
        if handles == 0 && !self.shared.closed.get() {
            self.shared.abandon();
        }
    }
}

impl Shared {
    /// The last user handle went away without shutdown: stop like a crash would.
    fn abandon(&self) {
        self.closed.set(true);
        self.abandoned.set(true);
        self.lock_file.borrow_mut().take();
        self.durable_waiters.wake_all();
        self.flush_wanted.wake_all();
        self.index_pushed.wake_all();
        self.spare_ready.wake_all();
        self.warm_wanted.wake_all();
        self.zero_done.wake_all();
        self.closing.wake_all();
        self.arrivals_wake_all();
        self.tasks.borrow_mut().clear();
    }
}

/// A record validated before append, with what the appender needs from it.
struct Incoming<'a> {
    bytes: &'a [u8],
    topic: &'a str,
    queue_id: i32,
    store_timestamp_position: usize,
    gets_queue_offset: bool,
}

impl Store {
    /// The store's configuration.
    pub fn config(&self) -> &StoreConfig {
        &self.shared.config
    }

    /// Key-index entries dispatched but not yet linked into their key chains: background
    /// work a burst of appends leaves behind (lookups see these entries all the same).
    pub fn index_unlinked_entries(&self) -> u64 {
        self.shared.index.borrow().unlinked()
    }

    /// Key-index entries held in memory: those of segments whose index is not sealed yet.
    pub fn index_entries_in_memory(&self) -> usize {
        self.shared.index.borrow().entries_in_memory()
    }

    /// Segments whose key index is sealed (sorted on disk, see `sealed_index`).
    pub fn index_sealed_segments(&self) -> usize {
        self.shared.index.borrow().sealed_segments()
    }

    /// Bytes appended but not yet durable.
    pub fn unflushed_bytes(&self) -> u64 {
        let log = self.shared.log.borrow();
        log.write - log.durable
    }

    /// One past the last durable byte of this store's commit log, as a physical offset
    /// (RocketMQ's `commitLogMaxOffset`).
    pub fn durable_end_offset(&self) -> PhysicalOffset {
        let log = self.shared.log.borrow();
        log.physical(log.durable)
    }

    /// The first byte still held by this store's commit log (`commitLogMinOffset`).
    pub fn min_physical_offset(&self) -> PhysicalOffset {
        let log = self.shared.log.borrow();
        log.physical(log.min_position())
    }

    /// Counters since open.
    pub fn stats(&self) -> StoreStats {
        self.shared.stats.get()
    }

    /// Appends encoded records (each as produced by `comet_proto::message::encode_record`,
    /// offsets and store time left zero) for any queues. Each record gets the next offset of
    /// its queue; a batch of records for one queue gets consecutive offsets and one durability
    /// wait. Resolves under SYNC_FLUSH after the fdatasync covering the last record, under
    /// ASYNC_FLUSH after the in-memory append.
    pub async fn append<R: AsRef<[u8]>>(
        &self,
        records: &[R],
    ) -> Result<Vec<AppendedRecord>, StoreError> {
        self.check_writable()?;
        let incoming = validate(records, self.shared.config.record_bytes_max())?;
        let (appended, end) = loop {
            match self.try_append(&incoming) {
                Ok(done) => break done,
                Err(NeedSpare) => self.wait_for_spare().await?,
            }
        };
        self.shared.flush_wanted.wake_all();
        let wait_until = match self.shared.config.flush_policy {
            FlushPolicy::Sync => end,
            // Back-pressure: an ASYNC append waits only when more than
            // `async_dirty_bytes_max` would be waiting for the disk, so memory stays bounded.
            FlushPolicy::Async => end.saturating_sub(self.shared.config.async_dirty_bytes_max),
        };
        if self.shared.log.borrow().durable < wait_until {
            DurableWait {
                shared: &self.shared,
                end: wait_until,
            }
            .await?;
        } else if self.shared.config.flush_policy == FlushPolicy::Async {
            // An ASYNC append completes without suspending; let the flusher and other tasks
            // run when this task has used its time slice.
            comet_rt::local::yield_if_needed().await;
        }
        Ok(appended)
    }

    fn check_writable(&self) -> Result<(), StoreError> {
        let shared = &self.shared;
        if shared.closed.get() {
            return Err(StoreError::Closed);
        }
        if let Some(reason) = shared.failure.borrow().as_ref() {
            return Err(StoreError::WriteFailed {
                reason: reason.clone(),
            });
        }
        if let Some((used_percent, hard_percent)) = shared.disk_full.get() {
            return Err(StoreError::DiskFull {
                used_percent,
                hard_percent,
            });
        }
        Ok(())
    }

    /// Copies the records into the log (all or none) and returns where they went and the
    /// log position the append is durable at.
    fn try_append(
        &self,
        incoming: &[Incoming<'_>],
    ) -> Result<(Vec<AppendedRecord>, u64), NeedSpare> {
        let shared = &self.shared;
        let mut log = shared.log.borrow_mut();
        let rolls = log.rolls_needed(incoming.iter().map(|record| record.bytes.len()));
        assert!(
            rolls <= 1,
            "append size limit keeps a call within two segments"
        );
        if rolls == 1 && log.spare.is_none() {
            drop(log);
            self.request_spare();
            return Err(NeedSpare);
        }
        let mut queues = shared.queues.borrow_mut();
        let store_timestamp_ms = comet_rt::clock::wall_clock_ms();
        let mut appended = Vec::with_capacity(incoming.len());
        for record in incoming {
            let queue = queue_state(&mut queues, &shared.config, record.topic, record.queue_id);
            let queue_offset = if record.gets_queue_offset {
                queue.next_offset
            } else {
                0
            };
            let log_id = log.log_id;
            let patch = |bytes: &mut [u8], position: u64| {
                let physical = PhysicalOffset::new(log_id, position).as_i64();
                patch_record(bytes, record, queue_offset, physical, store_timestamp_ms);
            };
            let position = log
                .append_record(record.bytes, patch)
                .expect("spare checked");
            if record.gets_queue_offset {
                queue.next_offset += 1;
            }
            appended.push(AppendedRecord {
                physical_offset: log.physical(position),
                queue_offset: QueueOffset(queue_offset),
                store_timestamp_ms,
                size_bytes: u32::try_from(record.bytes.len()).expect("record size limit"),
            });
        }
        let end = log.write;
        let needs_spare = log.spare.is_none();
        drop(queues);
        drop(log);
        self.count_appended(incoming);
        if needs_spare {
            self.request_spare();
        }
        Ok((appended, end))
    }

    pub(crate) fn count_disk_read(&self) {
        let mut stats = self.shared.stats.get();
        stats.disk_reads += 1;
        self.shared.stats.set(stats);
    }

    fn count_appended(&self, incoming: &[Incoming<'_>]) {
        let mut stats = self.shared.stats.get();
        stats.appended_records += incoming.len() as u64;
        stats.appended_bytes += incoming.iter().map(|r| r.bytes.len() as u64).sum::<u64>();
        self.shared.stats.set(stats);
    }

    /// Starts creating the spare segment in the background unless it exists or is underway.
    fn request_spare(&self) {
        let (start, dir, segment_bytes) = {
            let mut log = self.shared.log.borrow_mut();
            if log.spare.is_some() || log.spare_creating {
                return;
            }
            log.spare_creating = true;
            (log.spare_start(), log.dir.clone(), log.segment_bytes)
        };
        let shared = Rc::clone(&self.shared);
        comet_rt::local::spawn(async move {
            let path = dir.join(crate::offset::file_name(start));
            let created = create_segment(&path, segment_bytes, &shared).await;
            let mut log = shared.log.borrow_mut();
            log.spare_creating = false;
            match created {
                Ok(file) if log.spare_start() == start => {
                    log.spare = Some(Rc::new(file));
                    *shared.spare_failure.borrow_mut() = None;
                }
                Ok(_) => log::warn!("spare segment {} no longer needed", path.display()),
                Err(error) => {
                    log::error!("cannot create segment {}: {error}", path.display());
                    *shared.spare_failure.borrow_mut() = Some(error.to_string());
                }
            }
            drop(log);
            shared.spare_ready.wake_all();
            shared.warm_wanted.wake_all();
        })
        .detach();
    }

    async fn wait_for_spare(&self) -> Result<(), StoreError> {
        SpareWait { store: self }.await
    }
}

/// Creates, preallocates and syncs a segment file (and its directory entry).
pub(crate) async fn create_segment(
    path: &std::path::Path,
    segment_bytes: u64,
    shared: &Shared,
) -> Result<DirectFile, StoreError> {
    let file = DirectFile::open_data_sync(
        path,
        OpenMode::CreateReadWrite,
        shared.config.faults.clone(),
    )
    .await?;
    file.preallocate(segment_bytes).await?;
    file.fdatasync().await?;
    if let Some(parent) = path.parent() {
        comet_rt::io::sync_directory(parent).await?;
    }
    Ok(file)
}

fn validate<R: AsRef<[u8]>>(
    records: &[R],
    record_bytes_max: usize,
) -> Result<Vec<Incoming<'_>>, StoreError> {
    let total: usize = records.iter().map(|record| record.as_ref().len()).sum();
    if total > record_bytes_max {
        return Err(StoreError::RecordTooLarge {
            length: total,
            max: record_bytes_max,
        });
    }
    let mut incoming = Vec::with_capacity(records.len());
    for (index, record) in records.iter().enumerate() {
        let bytes = record.as_ref();
        let invalid = |reason: String| StoreError::RecordInvalid { index, reason };
        let view = RecordView::parse(bytes).map_err(|error| invalid(error.to_string()))?;
        if view.total_size() != bytes.len() {
            return Err(invalid(format!(
                "{} trailing bytes",
                bytes.len() - view.total_size()
            )));
        }
        if !view.body_crc_matches() {
            return Err(invalid("body CRC does not match the body".to_string()));
        }
        let transaction = view.sysflag() & TRANSACTION_TYPE_MASK;
        incoming.push(Incoming {
            bytes,
            topic: view.topic(),
            queue_id: view.queue_id(),
            store_timestamp_position: comet_proto::message::store_timestamp_position(
                view.sysflag(),
            ),
            gets_queue_offset: transaction != TRANSACTION_PREPARED
                && transaction != TRANSACTION_ROLLBACK,
        });
    }
    Ok(incoming)
}

fn patch_record(
    bytes: &mut [u8],
    record: &Incoming<'_>,
    queue_offset: u64,
    physical: i64,
    store_timestamp_ms: i64,
) {
    use comet_proto::message::{PHYSICAL_OFFSET_POSITION, QUEUE_OFFSET_POSITION};
    let queue_offset = i64::try_from(queue_offset).expect("queue offsets below 2^63");
    bytes[QUEUE_OFFSET_POSITION..QUEUE_OFFSET_POSITION + 8]
        .copy_from_slice(&queue_offset.to_be_bytes());
    bytes[PHYSICAL_OFFSET_POSITION..PHYSICAL_OFFSET_POSITION + 8]
        .copy_from_slice(&physical.to_be_bytes());
    let at = record.store_timestamp_position;
    bytes[at..at + 8].copy_from_slice(&store_timestamp_ms.to_be_bytes());
}

/// The state of (topic, queue_id), created empty on first use.
pub(crate) fn queue_state<'q>(
    queues: &'q mut Queues,
    config: &StoreConfig,
    topic: &str,
    queue_id: i32,
) -> &'q mut QueueState {
    if !queues.contains_key(topic) {
        queues.insert(topic.to_string(), HashMap::new());
    }
    let topic_queues = queues.get_mut(topic).expect("just inserted");
    topic_queues.entry(queue_id).or_insert_with(|| {
        let dir = queue_dir(config, topic, queue_id);
        QueueState {
            next_offset: 0,
            consume_queue: ConsumeQueue::new(dir, config.cq_entries_per_file),
            arrivals: WakerList::default(),
        }
    })
}

/// `consumequeue/<topic>/<queueId>`.
pub(crate) fn queue_dir(config: &StoreConfig, topic: &str, queue_id: i32) -> PathBuf {
    config
        .root
        .join("consumequeue")
        .join(topic)
        .join(queue_id.to_string())
}

/// Dispatches one durable record into its consume queue (if this store owns the queue) and
/// the key index: the single place shared by the live dispatcher and recovery. Returns false (nothing changed) when the
/// record's queue offset does not continue its queue (a stale record, for recovery).
pub(crate) fn dispatch_record(
    view: &RecordView<'_>,
    position: u64,
    queues: &mut Queues,
    index: &mut KeyIndex,
    config: &StoreConfig,
) -> bool {
    let transaction = view.sysflag() & TRANSACTION_TYPE_MASK;
    let physical = PhysicalOffset::new(config.log_id, position);
    let found = DispatchProperties::scan(view);
    let owned = config.owns(view.topic(), view.queue_id());
    if owned && transaction != TRANSACTION_PREPARED && transaction != TRANSACTION_ROLLBACK {
        let queue = queue_state(queues, config, view.topic(), view.queue_id());
        let Ok(offset) = u64::try_from(view.queue_offset()) else {
            return false;
        };
        if offset < queue.consume_queue.max_offset() {
            // Recovery may rescan a record its queue already holds (a queue handed over and
            // back keeps entries of another log after it, so truncation stops above it).
            let held = queue.consume_queue.entry(offset);
            if held.is_none_or(|entry| entry.physical != physical) {
                return false;
            }
        } else {
            let entry = CqEntry {
                physical,
                size: u32::try_from(view.total_size()).expect("record size limit"),
                tag_code: consume_queue_tag(view, &found, config),
            };
            queue.consume_queue.push(offset, entry);
            queue.next_offset = queue.next_offset.max(offset + 1);
            // Wake long-polling readers of this queue (a no-op without waiters, as in
            // recovery).
            queue.arrivals.wake_all();
        }
    }
    if transaction != TRANSACTION_ROLLBACK {
        index_keys(view, &found, physical, index);
    }
    true
}

/// The properties dispatch reads, found in one pass over the properties string (each
/// `view.property` lookup is a full scan; dispatch cost three per record). The last
/// occurrence of a name wins, as in `properties::get`.
#[derive(Default)]
struct DispatchProperties<'a> {
    unique_key: Option<&'a str>,
    keys: Option<&'a str>,
    tags: Option<&'a str>,
    delay_level: Option<&'a str>,
}

impl<'a> DispatchProperties<'a> {
    fn scan(view: &RecordView<'a>) -> DispatchProperties<'a> {
        use comet_proto::properties::{iter, names};
        let mut found = DispatchProperties::default();
        for (name, value) in iter(view.properties()) {
            match name {
                names::UNIQ_KEY => found.unique_key = Some(value),
                names::KEYS => found.keys = Some(value),
                names::TAGS => found.tags = Some(value),
                names::DELAY => found.delay_level = Some(value),
                _ => {}
            }
        }
        found
    }
}

fn index_keys(
    view: &RecordView<'_>,
    found: &DispatchProperties<'_>,
    physical: PhysicalOffset,
    index: &mut KeyIndex,
) {
    let time = view.store_timestamp();
    if let Some(unique) = found.unique_key {
        index.add(view.topic(), unique, physical, time);
    }
    if let Some(keys) = found.keys {
        for key in keys.split(' ').filter(|key| !key.is_empty()) {
            index.add(view.topic(), key, physical, time);
        }
    }
}

/// The tag field: the tag hash, or the due time on the schedule topic
/// (docs/protocol.md#delay-levels).
fn consume_queue_tag(
    view: &RecordView<'_>,
    found: &DispatchProperties<'_>,
    config: &StoreConfig,
) -> i64 {
    if view.topic() == SCHEDULE_TOPIC {
        let levels = config.delay_levels_ms.len();
        let level = found
            .delay_level
            .and_then(|level| level.trim().parse::<usize>().ok())
            .unwrap_or(1)
            .clamp(1, levels.max(1));
        let delay_ms = config.delay_levels_ms.get(level - 1).copied().unwrap_or(0);
        return view.store_timestamp().saturating_add(delay_ms);
    }
    found.tags.map_or(0, tag_code)
}

/// Dispatches every durable record not yet dispatched (waking readers of their queues).
pub(crate) fn dispatch_durable(shared: &Shared) {
    let mut log = shared.log.borrow_mut();
    let mut queues = shared.queues.borrow_mut();
    let mut index = shared.index.borrow_mut();
    while log.dispatched < log.durable {
        let position = log.dispatched;
        let bytes = log
            .cached_from(position)
            .expect("undispatched bytes stay cached");
        let (size, magic) =
            comet_proto::message::peek_total_size_and_magic(bytes).expect("whole header");
        if magic == BLANK_MAGIC {
            // The segment's end marker (the rest of the segment holds nothing) or padding.
            let end = position + u64::try_from(size).expect("appended blanks are positive");
            let segment_end = log.segment_start(position) + log.segment_bytes;
            let needed = if end == segment_end {
                position + BLANK_BYTES
            } else {
                end
            };
            if needed > log.durable {
                break;
            }
            log.dispatched = end;
            continue;
        }
        let size = u64::try_from(size).expect("appended records have positive sizes");
        if position + size > log.durable {
            break;
        }
        let view = RecordView::parse(bytes).expect("appended records were validated");
        let dispatched = dispatch_record(&view, position, &mut queues, &mut index, &shared.config);
        assert!(dispatched, "live records continue their queue");
        shared.last_store_timestamp_ms.set(view.store_timestamp());
        log.dispatched = position + size;
    }
    log.evict();
    if index.unlinked() > 0 {
        shared.index_pushed.wake_all();
    }
}

/// Resolves when the log is durable up to `end`, or fails with the store's failure.
struct DurableWait<'s> {
    shared: &'s Shared,
    end: u64,
}

impl Future for DurableWait<'_> {
    type Output = Result<(), StoreError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if self.shared.log.borrow().durable >= self.end {
            return Poll::Ready(Ok(()));
        }
        if let Some(reason) = self.shared.failure.borrow().as_ref() {
            return Poll::Ready(Err(StoreError::WriteFailed {
                reason: reason.clone(),
            }));
        }
        if self.shared.abandoned.get() {
            return Poll::Ready(Err(StoreError::Closed));
        }
        self.shared.durable_waiters.register(self.end, cx.waker());
        Poll::Pending
    }
}

/// Resolves when the spare segment is ready (or its creation failed).
struct SpareWait<'s> {
    store: &'s Store,
}

impl Future for SpareWait<'_> {
    type Output = Result<(), StoreError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let shared = &self.store.shared;
        if let Err(error) = self.store.check_writable() {
            return Poll::Ready(Err(error));
        }
        let (ready, creating) = {
            let log = shared.log.borrow();
            (log.spare.is_some(), log.spare_creating)
        };
        if ready {
            return Poll::Ready(Ok(()));
        }
        if !creating {
            if let Some(reason) = shared.spare_failure.borrow_mut().take() {
                return Poll::Ready(Err(StoreError::SegmentUnavailable { reason }));
            }
            self.store.request_spare();
        }
        shared.spare_ready.register(cx.waker());
        Poll::Pending
    }
}
