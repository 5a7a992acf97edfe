//! The store facade: one instance per shard, driven by that shard's executor. It owns the
//! shard state (`shard`) and the adopted logs (`orphan`), opens the store through `recovery`,
//! starts the background tasks and answers the public API by handing each call to the part
//! that does the work: `append`, `read`, `retention`, `maintenance`. It is the only module
//! that knows all of them (the layers are listed in the crate docs).
//!
//! Appends are copied into the commit log's open chunk synchronously, then the flush lanes
//! write what is dirty to segments opened O_DSYNC, durable when the write completes (group
//! commit: whatever piles up while a flush is in flight joins the next one, or starts a
//! second flush beside it when the first ends on a page, see `flush`; a flush never waits
//! for company). When a flush completes the dispatcher turns the newly durable
//! records into consume-queue and index entries, so readers only ever see durable records,
//! and appends waiting under SYNC_FLUSH resolve.
//!
//! A failed write or fdatasync fails every waiting append and stops all later writes
//! ([`StoreError::WriteFailed`]) until a restart recovers from disk.

use std::cell::RefCell;
use std::rc::Rc;

use bytes::Bytes;
use comet_proto::message::RecordView;
use comet_rt::local::spawn;

use crate::append::Appender;
use crate::config::StoreConfig;
use crate::consume_queue::CqEntry;
use crate::error::StoreError;
use crate::flush::{run_disk_dispatcher, run_flush_lane};
use crate::limits::QUERY_RESULTS_MAX;
use crate::maintenance::write_maintenance_checkpoint;
use crate::maintenance::{drop_gone_entries, run_index_linker, run_maintenance};
use crate::offset::{PhysicalOffset, QueueOffset};
use crate::orphan::{AdoptedLogs, Orphans};
use crate::read::{GetResult, MessageFilter, MessageWait, ReadPath, TimeBoundary};
use crate::replica::{LogBeyond, LogChunk, Replica};
use crate::retention::{run_retention, Retention};
use crate::shard::Shared;
use crate::warm::run_warmer;

pub use crate::append::AppendedRecord;
pub use crate::queues::SCHEDULE_TOPIC;
pub use crate::shard::StoreStats;

/// What the consume queues of a store hold in memory ([`Store::consume_queue_memory`]):
/// the hot tails of its queues and the block cache, neither growing with the entries
/// retained.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConsumeQueueMemory {
    /// Queues the store holds.
    pub queues: usize,
    /// Entry slots the queues' hot tails hold allocated (24 bytes each).
    pub resident_entries: usize,
    /// Bytes of blocks in the cache now.
    pub cache_bytes: usize,
    /// Most bytes the cache held since open.
    pub cache_peak_bytes: usize,
    /// The cache's bound (`StoreConfig::cq_cache_bytes`).
    pub cache_bound_bytes: usize,
    /// Consume-queue files open now (queues hold none: flushes borrow them from a pool).
    pub open_files: usize,
    /// Most consume-queue files open at once since open.
    pub open_files_peak: usize,
    /// The pool's bound (`StoreConfig::cq_open_files_max`).
    pub open_files_bound: usize,
}

/// What the read windows kept across pulls hold ([`Store::read_window_memory`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadWindowMemory {
    /// Bytes of windows kept now.
    pub held_bytes: usize,
    /// Most bytes kept at once since open.
    pub peak_bytes: usize,
    /// The bound (`StoreConfig::read_window_cache_bytes`).
    pub bound_bytes: usize,
}

/// What the store's structures hold in memory now, by part ([`Store::memory`]): each is
/// bounded by configuration, none by the messages retained. Allocation sizes, not what the
/// allocator or the kernel add.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreMemory {
    /// The commit log's chunks: the one appends go to and the flushed ones kept for tailing
    /// reads (`StoreConfig::read_cache_bytes` plus the chunks not yet durable).
    pub log_chunks_bytes: u64,
    /// Windows of the log read from disk, kept across pulls
    /// (`StoreConfig::read_window_cache_bytes`).
    pub read_windows_bytes: u64,
    /// Consume-queue blocks cached for cold reads (`StoreConfig::cq_cache_bytes`).
    pub cq_cache_bytes: u64,
    /// The consume queues' hot tails (at most a few hundred entries per queue).
    pub cq_tails_bytes: u64,
    /// The key index of the log not sealed to disk yet: entries, chains and key heads
    /// (`StoreConfig::index_span_bytes` of log at most, plus entries not linked yet).
    pub key_index_bytes: u64,
}

/// A shard's store. Cloning gives another handle to the same store (same shard only).
///
/// When the last handle is dropped without [`Store::shutdown`] the store is abandoned as in a
/// crash: background tasks stop, nothing more is flushed, the lock is released and `abort`
/// stays, so the next open recovers.
pub struct Store {
    shared: Rc<Shared>,
    /// The logs this store adopted (see `orphan`).
    orphans: Rc<RefCell<Orphans>>,
}

impl Clone for Store {
    fn clone(&self) -> Store {
        self.shared.handles.set(self.shared.handles.get() + 1);
        Store {
            shared: Rc::clone(&self.shared),
            orphans: Rc::clone(&self.orphans),
        }
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        let handles = self.shared.handles.get() - 1;
        self.shared.handles.set(handles);
        if handles == 0 && !self.shared.closed.get() {
            self.shared.abandon();
        }
    }
}

impl Store {
    /// Opens (creating if needed) the store, recovering after a crash, and starts its
    /// flusher, maintenance and retention tasks. Must run on the shard that will own it.
    ///
    /// Start-up uses blocking file-system calls (directory listings, the lock) before the
    /// store serves anything.
    pub async fn open(config: StoreConfig) -> Result<Store, StoreError> {
        config.validate()?;
        let started = comet_rt::clock::monotonic_now();
        let progress = config.recovery_progress.clone();
        progress.begin(started);
        crate::recovery::create_dirs(&config)?;
        let orphans = Orphans::new(&config)?;
        let (recovered, lock_file) = crate::recovery::recover_locked(&config, started).await?;
        let store = Store {
            shared: Rc::new(Shared::new(config, recovered, lock_file)),
            orphans: Rc::new(RefCell::new(orphans)),
        };
        write_maintenance_checkpoint(&store.shared).await?;
        // Min offsets skip entries of records deleted meanwhile (other logs' retention, a
        // fully deleted log) before anything is served.
        drop_gone_entries(&store.shared).await?;
        store.start_tasks();
        progress.finish(&store.recovery());
        Ok(store)
    }

    fn start_tasks(&self) {
        // Every task ends once it sees `closed` (woken through `closing` and the lists it
        // waits on); shutdown waits for them all, so none keeps the store's files open after
        // it, then writes its own checkpoint. The flush lanes come first: they write what
        // is left before the store closes.
        let mut tasks = self.shared.tasks.borrow_mut();
        for _ in 0..self.shared.config.flushes_in_flight_max {
            tasks.push(spawn(run_flush_lane(Rc::clone(&self.shared))));
        }
        tasks.push(spawn(run_maintenance(Rc::clone(&self.shared))));
        let (shared, orphans) = (Rc::clone(&self.shared), Rc::clone(&self.orphans));
        tasks.push(spawn(run_retention(shared, orphans)));
        let (shared, orphans) = (Rc::clone(&self.shared), Rc::clone(&self.orphans));
        tasks.push(spawn(async move {
            AdoptedLogs::new(&orphans, &shared).load_indexes().await
        }));
        tasks.push(spawn(run_index_linker(Rc::clone(&self.shared))));
        tasks.push(spawn(run_warmer(Rc::clone(&self.shared))));
        if self.shared.config.visible_after_confirm {
            tasks.push(spawn(run_disk_dispatcher(Rc::clone(&self.shared))));
        }
    }

    /// Flushes everything, writes the checkpoint, removes `abort` and releases the lock.
    /// Appends after this fail with [`StoreError::Closed`].
    pub async fn shutdown(&self) -> Result<(), StoreError> {
        let shared = &self.shared;
        if shared.closed.replace(true) {
            return Ok(());
        }
        shared.flush_wanted.wake_all();
        shared.index_pushed.wake_all();
        shared.dispatch_lagging.wake_all();
        shared.warm_wanted.wake_all();
        shared.closing.wake_all();
        let tasks: Vec<_> = shared.tasks.borrow_mut().drain(..).collect();
        for task in tasks {
            task.await;
        }
        if let Some(reason) = shared.failure.borrow().clone() {
            return Err(StoreError::WriteFailed { reason });
        }
        write_maintenance_checkpoint(shared).await?;
        let open = shared.cq_files.borrow_mut().drain();
        crate::cq_files::close_files(open).await;
        let abort = shared.config.root.join("abort");
        std::fs::remove_file(&abort).map_err(|error| crate::error::setup_error(&abort, error))?;
        shared.lock_file.borrow_mut().take();
        shared.arrivals_wake_all();
        Ok(())
    }

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

    /// What consume queues hold in memory now (see [`ConsumeQueueMemory`]).
    pub fn consume_queue_memory(&self) -> ConsumeQueueMemory {
        let mut memory = ConsumeQueueMemory::default();
        for queues in self.shared.queues.borrow().values() {
            for queue in queues.values() {
                memory.queues += 1;
                memory.resident_entries += queue.consume_queue.resident_entries();
            }
        }
        let cache = self.shared.cq_cache.borrow();
        memory.cache_bytes = cache.held_bytes();
        memory.cache_peak_bytes = cache.peak_bytes();
        memory.cache_bound_bytes = cache.bound_bytes();
        let files = self.shared.cq_files.borrow();
        memory.open_files = files.len();
        memory.open_files_peak = files.peak();
        memory.open_files_bound = files.bound();
        memory
    }

    /// What the store's structures hold in memory now (see [`StoreMemory`]).
    pub fn memory(&self) -> StoreMemory {
        let consume_queues = self.consume_queue_memory();
        let tail_entry_bytes = std::mem::size_of::<crate::consume_queue::CqEntry>();
        let log = self.shared.log.borrow();
        StoreMemory {
            log_chunks_bytes: log.chunk_bytes_held() as u64,
            read_windows_bytes: log.read_windows.held_and_peak_bytes().0 as u64,
            cq_cache_bytes: consume_queues.cache_bytes as u64,
            cq_tails_bytes: (consume_queues.resident_entries * tail_entry_bytes) as u64,
            key_index_bytes: self.shared.index.borrow().held_bytes() as u64,
        }
    }

    /// What the read windows kept across pulls hold now (see [`ReadWindowMemory`]).
    pub fn read_window_memory(&self) -> ReadWindowMemory {
        let log = self.shared.log.borrow();
        let (held_bytes, peak_bytes) = log.read_windows.held_and_peak_bytes();
        ReadWindowMemory {
            held_bytes,
            peak_bytes,
            bound_bytes: self.shared.config.read_window_cache_bytes,
        }
    }

    /// The queues recovery repaired from the commit log at open (their files were short,
    /// deleted or zeroed), as (topic, queue id), sorted.
    pub fn repaired_queues(&self) -> Vec<(String, i32)> {
        let mut repaired = Vec::new();
        for (topic, queues) in self.shared.queues.borrow().iter() {
            for (queue_id, queue) in queues {
                if queue.consume_queue.was_repaired() {
                    repaired.push((topic.clone(), *queue_id));
                }
            }
        }
        repaired.sort_unstable();
        repaired
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

    /// Start of the oldest retained segment of this store's commit log, as a log position
    /// (no log id in the top bits; [`Store::min_physical_offset`] is the same with it).
    pub fn min_position(&self) -> u64 {
        self.shared.log.borrow().min_position()
    }

    /// One past the last durable byte of this store's commit log, as a log position (no
    /// log id in the top bits; [`Store::durable_end_offset`] is the same with it).
    pub fn durable_position(&self) -> u64 {
        self.shared.log.borrow().durable
    }

    /// One past the last byte written (durable or not) to this store's commit log, as a
    /// log position: where [`Store::append_replicated`] continues.
    pub fn written_position(&self) -> u64 {
        self.shared.log.borrow().write
    }

    /// Master side of replication: raw bytes of this store's own commit log from
    /// `position` (a record boundary or a segment start), whole records of one segment, at
    /// most `max_bytes` of them, up to the written end (bytes not yet durable included: a
    /// slave's group commit then runs while this store's does; see
    /// docs/architecture.md#replication); a segment's end marker travels as its 8 bytes and
    /// the chunk then ends at the segment's end. Served from the read cache when it holds
    /// them, else read from disk and verified.
    /// [`StoreError::BelowRetention`] names the oldest retained segment start when
    /// `position` was deleted.
    pub async fn read_log(&self, position: u64, max_bytes: usize) -> Result<LogChunk, StoreError> {
        Replica::new(&self.shared)
            .read_log(position, max_bytes)
            .await
    }

    /// Slave side of replication: appends a master's log bytes (as [`Store::read_log`]
    /// returns them) unchanged at `position`, which must be the written end. Every record
    /// is checked first (magic, sizes, body CRC, PHYSICALOFFSET equal to where it lands,
    /// queue offset equal to its queue's next); one bad record refuses the whole call and
    /// changes nothing. Returns the new written end without waiting for durability (see
    /// [`Store::wait_durable`]); records become visible once durable, as appended ones do.
    pub async fn append_replicated(&self, position: u64, bytes: &[u8]) -> Result<u64, StoreError> {
        Replica::new(&self.shared)
            .append_replicated(position, bytes)
            .await
    }

    /// Resolves once this store's commit log is durable up to `position` (at most the
    /// written end), through the group commit that covers it.
    pub async fn wait_durable(&self, position: u64) -> Result<(), StoreError> {
        Replica::new(&self.shared).wait_durable(position).await
    }

    /// Resolves once this store's commit log is durable past `position` (a group commit
    /// moved its durable end beyond it), or the store failed or began to close: a master's
    /// idle replication sender sleeps on it instead of polling. Spurious completion is
    /// possible; callers re-check [`Store::durable_position`].
    pub fn wait_durable_beyond(&self, position: u64) -> LogBeyond {
        Replica::new(&self.shared).wait_durable_beyond(position)
    }

    /// Resolves once this store's commit log is written past `position` (an append), or the
    /// store failed or began to close: a master's replication sender streams written bytes.
    /// Spurious completion is possible; callers re-check [`Store::written_position`].
    pub fn wait_written_beyond(&self, position: u64) -> LogBeyond {
        Replica::new(&self.shared).wait_written_beyond(position)
    }

    /// Slave side of replication: takes back the written bytes past `to`, which no reader
    /// can have seen (a store opened with [`StoreConfig::visible_after_confirm`] shows only
    /// confirmed bytes), so a slave that holds bytes its restarted master lost follows
    /// again without a restart. Makes the written log durable first, checks that every
    /// record past `to` reads (so `to` is a record boundary), zeroes them on disk, and
    /// returns their queues' next offsets to the first offset they took. Refused with
    /// [`StoreError::TruncateRefused`] when bytes past `to` are visible or the tail reaches
    /// into another segment: a restart with [`StoreConfig::truncate_log_to`] does those.
    /// Returns the number of bytes taken back.
    pub async fn truncate_unconfirmed(&self, to: u64) -> Result<u64, StoreError> {
        Replica::new(&self.shared).truncate_unconfirmed(to).await
    }

    /// SYNC_MASTER: the slaves hold this store's log durably up to `position`. Under
    /// [`StoreConfig::visible_after_confirm`] records become visible only up to the
    /// confirmed position (and the durable end); this dispatches what it now covers and
    /// wakes long-polling readers. The confirmed position never moves back.
    pub fn confirm(&self, position: u64) {
        Replica::new(&self.shared).confirm(position);
    }

    /// The confirmed position (see [`Store::confirm`]).
    pub fn confirmed_position(&self) -> u64 {
        self.shared.confirmed.get()
    }

    /// Counters since open.
    pub fn stats(&self) -> StoreStats {
        self.shared.stats.get()
    }

    /// Group-commit sizes and sync latencies since open.
    pub fn histograms(&self) -> crate::histogram::StoreHistograms {
        self.shared.histograms.borrow().clone()
    }

    /// What the open's recovery did.
    pub fn recovery(&self) -> crate::histogram::RecoveryFigures {
        self.shared.recovery
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
        Appender::new(&self.shared).append(records).await
    }

    /// One retention pass as of `now_ms`: updates the disk-full state, then deletes the
    /// segments that are due, of this log and of the logs it adopted (module `orphan`; the
    /// rules are in module `retention`). Returns how many segments went.
    pub async fn run_retention_once(&self, now_ms: i64) -> Result<u32, StoreError> {
        Retention::new(&self.shared, &self.orphans)
            .run_once(now_ms)
            .await
    }

    /// A manual delete (Java's DELETE_EXPIRED_COMMITLOG): the next
    /// [`MANUAL_DELETE_PASSES`](crate::limits::MANUAL_DELETE_PASSES) retention passes delete
    /// expired segments whatever the hour.
    pub fn delete_expired_manually(&self) {
        crate::retention::request_manual_delete(&self.shared);
    }

    /// Retention passes left that delete expired segments whatever the hour.
    pub fn manual_delete_passes(&self) -> u32 {
        self.shared.manual_delete_passes.get()
    }

    /// Durable bytes of the commit log not yet in consume queues and the index (Java's
    /// `dispatchBehindBytes`).
    pub fn dispatch_behind_bytes(&self) -> u64 {
        let log = self.shared.log.borrow();
        log.durable.saturating_sub(log.dispatched)
    }

    /// Moves queue min offsets past entries whose records retention deleted, and deletes
    /// the consume-queue files left with nothing, now rather than at the next retention
    /// pass (Java's CLEAN_EXPIRED_CONSUMEQUEUE).
    pub async fn drop_gone_queue_entries(&self) -> Result<(), StoreError> {
        let shared = &*self.shared;
        let _guard = crate::maintenance::MaintenanceLock { shared }.await;
        crate::maintenance::drop_gone_entries(shared).await
    }

    /// Drops every entry of `topic`'s consume queues in this store (a deleted topic, as
    /// Java's `deleteTopics` destroys its queues): each queue's min moves to its max, the
    /// queue table records it before the files wholly below go. The records stay in the
    /// commit log until retention deletes their segments, so a checkpoint is written first:
    /// the recovery after a crash starts past them and cannot serve them again. Returns how
    /// many queues held entries.
    pub async fn drop_topic_entries(&self, topic: &str) -> Result<usize, StoreError> {
        crate::maintenance::drop_topic_entries(&self.shared, topic).await
    }

    fn reader(&self) -> ReadPath<'_> {
        ReadPath::new(&self.shared)
    }

    /// One past the last entry of (topic, queue_id); 0 for an unknown queue.
    pub fn max_offset(&self, topic: &str, queue_id: i32) -> QueueOffset {
        self.reader().max_offset(topic, queue_id)
    }

    /// The first entry of (topic, queue_id) that has a record.
    pub fn min_offset(&self, topic: &str, queue_id: i32) -> QueueOffset {
        self.reader().min_offset(topic, queue_id)
    }

    /// Reads up to `max_count` records (at most `max_bytes`, but always at least one) from
    /// (topic, queue_id) starting at `offset`, keeping those `filter` accepts.
    pub async fn get_messages(
        &self,
        topic: &str,
        queue_id: i32,
        offset: QueueOffset,
        max_count: usize,
        max_bytes: usize,
        filter: MessageFilter<'_>,
    ) -> Result<GetResult, StoreError> {
        self.reader()
            .get_messages(topic, queue_id, offset, max_count, max_bytes, filter)
            .await
    }

    /// The record at `physical` (view by offset message id), if it is durable and still
    /// stored.
    pub async fn read_record(&self, physical: PhysicalOffset) -> Result<Option<Bytes>, StoreError> {
        self.reader().read_record(physical).await
    }

    /// The queue offset of the first (`Lower`) or last (`Upper`) record of (topic, queue_id)
    /// stored at `timestamp_ms`, by binary search; if no record has exactly that time,
    /// `Lower` gives the first later record and `Upper` the last earlier one (clamped to
    /// the queue's min and max).
    pub async fn offset_by_timestamp(
        &self,
        topic: &str,
        queue_id: i32,
        timestamp_ms: i64,
        boundary: TimeBoundary,
    ) -> Result<QueueOffset, StoreError> {
        self.reader()
            .offset_by_timestamp(topic, queue_id, timestamp_ms, boundary)
            .await
    }

    /// Store time of the oldest record of (topic, queue_id), or `None` when it is empty.
    pub async fn earliest_store_time(
        &self,
        topic: &str,
        queue_id: i32,
    ) -> Result<Option<i64>, StoreError> {
        self.reader().earliest_store_time(topic, queue_id).await
    }

    /// Store time of the record at queue offset `offset` of (topic, queue_id), or `None`
    /// when the queue holds no record there (below its min, at or past its max, unknown
    /// queue). What RocketMQ's `getMessageStoreTimeStamp` answers, with `None` for its -1.
    pub async fn store_time_at(
        &self,
        topic: &str,
        queue_id: i32,
        offset: QueueOffset,
    ) -> Result<Option<i64>, StoreError> {
        self.reader().store_time_at(topic, queue_id, offset).await
    }

    /// Every (topic, queue id) the store holds a consume queue for, sorted.
    pub fn queue_list(&self) -> Vec<(String, i32)> {
        self.reader().queue_list()
    }

    /// True when the store holds a consume queue for (topic, queue_id) (one was written to,
    /// recovered, or waited on).
    pub fn has_queue(&self, topic: &str, queue_id: i32) -> bool {
        self.reader().has_queue(topic, queue_id)
    }

    /// The consume-queue entries of (topic, queue_id) at queue offsets
    /// `[from, from + count)` that hold a record, each with its offset, in queue order
    /// (entries outside the hot tail and the block cache are read from the queue's files
    /// with a blocking read of at most 20 KiB each, see `consume_queue`);
    /// `count` is capped at [`CQ_INSPECT_ENTRIES_MAX`](crate::limits::CQ_INSPECT_ENTRIES_MAX).
    /// Entries below the queue's min (their records deleted) and past its max are not
    /// returned.
    pub fn consume_queue_entries(
        &self,
        topic: &str,
        queue_id: i32,
        from: QueueOffset,
        count: usize,
    ) -> Vec<(QueueOffset, CqEntry)> {
        self.reader()
            .consume_queue_entries(topic, queue_id, from, count)
    }

    /// Records of `topic` whose `UNIQ_KEY` or one of whose `KEYS` equals `key`, stored within
    /// `[begin_ms, end_ms]`, newest first, at most `max`: from this log's index and those of
    /// the logs it adopted (module `orphan`; waits for them to be loaded).
    pub async fn query_by_key(
        &self,
        topic: &str,
        key: &str,
        max: usize,
        begin_ms: i64,
        end_ms: i64,
    ) -> Result<Vec<Bytes>, StoreError> {
        let max = max.min(QUERY_RESULTS_MAX);
        let times = (begin_ms, end_ms);
        let mut records = self.reader().query_by_key(topic, key, max, times).await?;
        let orphans = AdoptedLogs::new(&self.orphans, &self.shared)
            .query(topic, key, max, times)
            .await?;
        if !orphans.is_empty() {
            records.extend(orphans);
            // Newest first across logs; every record was parsed by the queries.
            records.sort_by_cached_key(|bytes| {
                let time = RecordView::parse(bytes).map_or(i64::MIN, |view| view.store_timestamp());
                std::cmp::Reverse(time)
            });
            records.truncate(max);
        }
        Ok(records)
    }

    /// Resolves once (topic, queue_id) has an entry at or past `offset` (its max offset is
    /// above `offset`), or the store shuts down. Long polling races it with its timeout.
    pub fn wait_for_message(
        &self,
        topic: &str,
        queue_id: i32,
        offset: QueueOffset,
    ) -> MessageWait<'_> {
        self.reader().wait_for_message(topic, queue_id, offset)
    }
}
