//! Background work besides the flusher: the lazy flush of consume queues and the index
//! followed by a checkpoint, linking index entries into their key chains, retention
//! (expired segments, disk-use marks), and shutdown.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use comet_rt::io::{DirectFile, IoError, OpenMode};

use crate::checkpoint::Checkpoint;
use crate::consume_queue::FileWrite;
use crate::error::StoreError;
use crate::flush::{fail, run_flush_lane};
use crate::limits::{
    INDEX_LINK_BATCH, INDEX_LINK_BUSY_BATCH, INDEX_LINK_BUSY_PAUSE_MS, INDEX_UNLINKED_MAX,
};
use crate::offset::{LogId, PhysicalOffset};
use crate::sealed_index::{self, sealed_path, SealedIndex};
use crate::store::{Shared, Store};
use crate::sync::sleep_unless;

/// Exclusive right to run maintenance I/O (checkpoint, derived-file flushes, deletes).
pub(crate) struct MaintenanceGuard<'s> {
    shared: &'s Shared,
}

impl Drop for MaintenanceGuard<'_> {
    fn drop(&mut self) {
        self.shared.maintenance_busy.set(false);
        self.shared.maintenance_free.wake_all();
    }
}

pub(crate) struct MaintenanceLock<'s> {
    pub(crate) shared: &'s Shared,
}

impl<'s> Future for MaintenanceLock<'s> {
    type Output = MaintenanceGuard<'s>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<MaintenanceGuard<'s>> {
        if !self.shared.maintenance_busy.get() {
            self.shared.maintenance_busy.set(true);
            return Poll::Ready(MaintenanceGuard {
                shared: self.shared,
            });
        }
        self.shared.maintenance_free.register(cx.waker());
        Poll::Pending
    }
}

impl Store {
    pub(crate) fn start_tasks(&self) {
        // Every task ends once it sees `closed` (woken through `closing` and the lists it
        // waits on); shutdown waits for them all, so none keeps the store's files open after
        // it, then writes its own checkpoint. The flush lanes come first: they write what
        // is left before the store closes.
        let mut tasks = self.shared.tasks.borrow_mut();
        for _ in 0..self.shared.config.flushes_in_flight_max {
            tasks.push(comet_rt::local::spawn(run_flush_lane(Rc::clone(
                &self.shared,
            ))));
        }
        let store = self.internal();
        tasks.push(comet_rt::local::spawn(async move {
            store.run_maintenance().await
        }));
        let store = self.internal();
        tasks.push(comet_rt::local::spawn(async move {
            store.run_retention().await
        }));
        let store = self.internal();
        tasks.push(comet_rt::local::spawn(async move {
            store.load_orphan_indexes().await
        }));
        tasks.push(comet_rt::local::spawn(run_index_linker(Rc::clone(
            &self.shared,
        ))));
        tasks.push(comet_rt::local::spawn(crate::warm::run_warmer(Rc::clone(
            &self.shared,
        ))));
    }

    /// A handle for the store's own tasks, which does not keep the store open.
    pub(crate) fn internal(&self) -> Store {
        Store {
            shared: Rc::clone(&self.shared),
            counted: false,
        }
    }

    async fn run_maintenance(&self) {
        let interval = Duration::from_millis(self.shared.config.cq_flush_interval_ms);
        let mut sealing = true;
        while !self.shared.closed.get() {
            self.sleep_unless_closed(interval).await;
            if self.shared.closed.get() || self.shared.failure.borrow().is_some() {
                return;
            }
            let checkpointed = match self.write_maintenance_checkpoint().await {
                Ok(checkpointed) => checkpointed,
                Err(error) => {
                    fail(&self.shared, error.to_string());
                    return;
                }
            };
            if sealing {
                if let Err(error) = self.seal_index_segment(checkpointed).await {
                    // The index stays in memory, where lookups still find it.
                    log::error!("key-index sealing stops until restart: {error}");
                    sealing = false;
                }
            }
        }
    }

    /// Seals the key index of the oldest segment held in memory if the checkpoint covers it
    /// (see `sealed_index`): sorted and written on the blocking thread, then swapped in
    /// under the maintenance lock.
    async fn seal_index_segment(&self, checkpointed: u64) -> Result<(), StoreError> {
        let shared = &self.shared;
        let (start, entries, dir) = {
            let index = shared.index.borrow();
            let Some((start, entries)) = index.sealable(checkpointed) else {
                return Ok(());
            };
            (start, entries, index.dir().to_path_buf())
        };
        let count = entries.len();
        let started = std::time::Instant::now();
        let target = sealed_path(&dir, start);
        let written = comet_rt::task_class::run_blocking({
            let dir = dir.clone();
            move || sealed_index::write_file(&dir, start, &sealed_index::encode(entries))
        })
        .await;
        written.map_err(|error| IoError::new("seal index", &target, 0, error))?;
        let sealed = SealedIndex::open(&target, &shared.config.faults).await?;
        let _guard = MaintenanceLock { shared }.await;
        if shared.closed.get() {
            return Ok(());
        }
        let gone = shared.index.borrow_mut().complete_seal(start, sealed);
        for path in gone {
            comet_rt::io::remove_file(&path).await?;
        }
        log::info!(
            "sealed the key index of segment {start}: {count} keys in {} ms",
            started.elapsed().as_millis()
        );
        Ok(())
    }

    /// Flushes consume queues and the index, then writes a checkpoint saying everything
    /// dispatched before the flush began is durable in them; returns that position.
    pub(crate) async fn write_maintenance_checkpoint(&self) -> Result<u64, StoreError> {
        let shared = &self.shared;
        let _guard = MaintenanceLock { shared }.await;
        let (dispatched, durable) = {
            let log = shared.log.borrow();
            (log.dispatched, log.durable)
        };
        self.flush_derived().await?;
        let checkpoint = Checkpoint {
            sequence: 0,
            log_durable_position: durable,
            dispatch_durable_position: dispatched,
            last_store_timestamp_ms: shared.last_store_timestamp_ms.get(),
        };
        let mut file = shared
            .checkpoint
            .borrow_mut()
            .take()
            .ok_or(StoreError::Closed)?;
        let written = file.write(checkpoint).await;
        *shared.checkpoint.borrow_mut() = Some(file);
        written.map(|()| dispatched)
    }

    async fn flush_derived(&self) -> Result<(), StoreError> {
        let shared = &self.shared;
        let faults = shared.config.faults.clone();
        let missing = self.missing_derived_files();
        for (kind, topic, queue_id, start, path) in missing {
            let file = create_derived_file(&path, &faults).await?;
            let file = Rc::new(file);
            if kind == DerivedKind::Queue {
                let mut queues = shared.queues.borrow_mut();
                let queue = queues
                    .get_mut(&topic)
                    .and_then(|queues| queues.get_mut(&queue_id))
                    .expect("queues are never removed");
                queue.consume_queue.attach_file(start, file);
            } else {
                shared.index.borrow_mut().attach_file(start, file);
            }
        }
        let writes = self.plan_derived_writes();
        write_and_sync(writes).await
    }

    fn missing_derived_files(&self) -> Vec<(DerivedKind, String, i32, u64, PathBuf)> {
        let mut missing = Vec::new();
        for (topic, queues) in self.shared.queues.borrow().iter() {
            for (queue_id, queue) in queues {
                for (start, path) in queue.consume_queue.missing_files() {
                    missing.push((DerivedKind::Queue, topic.clone(), *queue_id, start, path));
                }
            }
        }
        for (start, path) in self.shared.index.borrow().missing_files() {
            missing.push((DerivedKind::Index, String::new(), 0, start, path));
        }
        missing
    }

    fn plan_derived_writes(&self) -> Vec<FileWrite> {
        let mut writes = Vec::new();
        for queues in self.shared.queues.borrow_mut().values_mut() {
            for queue in queues.values_mut() {
                if queue.consume_queue.is_dirty() {
                    writes.extend(queue.consume_queue.plan_flush());
                }
            }
        }
        writes.extend(self.shared.index.borrow_mut().plan_flush());
        writes
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
        shared.warm_wanted.wake_all();
        shared.closing.wake_all();
        let tasks: Vec<_> = shared.tasks.borrow_mut().drain(..).collect();
        for task in tasks {
            task.await;
        }
        if let Some(reason) = shared.failure.borrow().clone() {
            return Err(StoreError::WriteFailed { reason });
        }
        self.write_maintenance_checkpoint().await?;
        let abort = shared.config.root.join("abort");
        std::fs::remove_file(&abort).map_err(|error| crate::error::setup_error(&abort, error))?;
        shared.lock_file.borrow_mut().take();
        shared.arrivals_wake_all();
        Ok(())
    }
}

impl Shared {
    /// Wakes every reader waiting for new data (shutdown).
    pub(crate) fn arrivals_wake_all(&self) {
        for queues in self.queues.borrow().values() {
            for queue in queues.values() {
                queue.arrivals.wake_all();
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum DerivedKind {
    Queue,
    Index,
}

async fn create_derived_file(
    path: &std::path::Path,
    faults: &Option<Rc<comet_rt::io::FaultInjector>>,
) -> Result<DirectFile, StoreError> {
    let dir = path.parent().expect("derived files live in a directory");
    std::fs::create_dir_all(dir).map_err(|error| crate::error::setup_error(dir, error))?;
    let file = DirectFile::open(path, OpenMode::CreateReadWrite, faults.clone()).await?;
    comet_rt::io::sync_directory(dir).await?;
    Ok(file)
}

async fn write_and_sync(writes: Vec<FileWrite>) -> Result<(), StoreError> {
    let mut files: Vec<Rc<DirectFile>> = Vec::new();
    for write in writes {
        write.file.write_at(write.buffer, write.position).await?;
        if !files.iter().any(|file| Rc::ptr_eq(file, &write.file)) {
            files.push(write.file);
        }
    }
    for file in files {
        file.fdatasync().await?;
    }
    Ok(())
}

impl Store {
    async fn run_retention(&self) {
        let interval = Duration::from_millis(self.shared.config.retention_check_interval_ms);
        while !self.shared.closed.get() {
            if let Err(error) = self
                .run_retention_once(comet_rt::clock::wall_clock_ms())
                .await
            {
                log::error!("retention pass failed: {error}");
            }
            self.sleep_unless_closed(interval).await;
        }
    }

    async fn sleep_unless_closed(&self, duration: Duration) {
        let shared = &self.shared;
        sleep_unless(&shared.closing, || shared.closed.get(), duration).await;
    }

    /// One retention pass as of `now_ms`: updates the disk-full state, then deletes expired
    /// segments at `delete_when_hour` (UTC), of this log and of the logs it adopted
    /// (module `orphan`), or the oldest one of them at once above the high mark.
    /// Returns how many segments went.
    pub async fn run_retention_once(&self, now_ms: i64) -> Result<u32, StoreError> {
        let config = &self.shared.config;
        let used = comet_rt::io::disk_used_ratio(&config.root)?;
        let percent = |ratio: f64| (ratio * 100.0).round() as u32;
        let full = (used >= config.disk_hard_ratio)
            .then(|| (percent(used), percent(config.disk_hard_ratio)));
        if full.is_some() && self.shared.disk_full.get().is_none() {
            log::error!(
                "disk use {:.1}% past the hard mark; refusing writes",
                used * 100.0
            );
        }
        self.shared.disk_full.set(full);
        {
            let _guard = MaintenanceLock {
                shared: &self.shared,
            }
            .await;
            self.drop_gone_entries().await?;
        }
        let forced = used >= config.disk_high_ratio;
        let hour = u32::try_from(now_ms.div_euclid(3_600_000).rem_euclid(24)).expect("hour");
        let reserved_ms = i64::try_from(config.file_reserved_hours * 3_600_000).unwrap_or(i64::MAX);
        let expiry_ms = now_ms.saturating_sub(reserved_ms);
        let at_delete_hour = hour == config.delete_when_hour;
        let expired = |path: &std::path::Path| {
            at_delete_hour && modified_ms(path).unwrap_or(i64::MAX) <= expiry_ms
        };
        let mut deleted = 0;
        for (start, path) in self.deletable_segments() {
            if !expired(&path) {
                break;
            }
            self.delete_segment(start).await?;
            deleted += 1;
        }
        deleted += self.delete_expired_orphan_segments(&expired).await?;
        if forced && deleted == 0 && self.delete_oldest_segment().await? {
            deleted = 1;
        }
        Ok(deleted)
    }

    /// Deletes the oldest segment (by modification time) of this log's deletable ones and
    /// the adopted logs' (disk past the high mark). Returns whether one went.
    async fn delete_oldest_segment(&self) -> Result<bool, StoreError> {
        let own = self
            .deletable_segments()
            .into_iter()
            .next()
            .map(|(start, path)| (start, modified_ms(&path).unwrap_or(i64::MAX)));
        let orphan = self.oldest_orphan_segment()?;
        let orphan_older = match (own, orphan) {
            (Some((_, own_ms)), Some((_, _, orphan_ms))) => orphan_ms <= own_ms,
            (None, _) => true,
            (Some(_), None) => false,
        };
        match (own, orphan) {
            (_, Some((log_id, start, _))) if orphan_older => {
                self.force_delete_orphan_segment(log_id, start).await
            }
            (Some((start, _)), _) => {
                self.delete_segment(start).await?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Sealed segments, oldest first, whose records are all durable and dispatched.
    fn deletable_segments(&self) -> Vec<(u64, PathBuf)> {
        let log = self.shared.log.borrow();
        let done = log.dispatched.min(log.durable);
        log.segments
            .iter()
            .filter(|(start, _)| **start + log.segment_bytes <= done)
            .map(|(start, file)| (*start, file.path().to_path_buf()))
            .collect()
    }

    /// Deletes the oldest segment (which starts at `start`) with its index file, and the
    /// consume-queue entries and files pointing into it; min offsets move.
    async fn delete_segment(&self, start: u64) -> Result<(), StoreError> {
        let shared = &self.shared;
        let _guard = MaintenanceLock { shared }.await;
        let (file, new_min) = {
            let mut log = shared.log.borrow_mut();
            assert_eq!(log.min_position(), start, "segments go oldest first");
            let file = log.segments.remove(&start).expect("listed segment");
            (file, start + log.segment_bytes)
        };
        log::info!("retention deletes segment {}", file.path().display());
        comet_rt::io::remove_file(file.path()).await?;
        let dropped = shared.index.borrow_mut().drop_below(new_min);
        for path in dropped {
            comet_rt::io::remove_file(&path).await?;
        }
        self.drop_gone_entries().await
    }

    /// Moves queue min offsets past entries whose records are gone: below the first segment
    /// of this log, or of another log the queues point into (handed-over queues; that log's
    /// own retention, or its adopter's, deletes its segments); every entry of another log
    /// whose directory holds no segment or is gone (fully deleted, see
    /// module `orphan`), or of a log no store holds. Deletes consume-queue files
    /// left with nothing.
    pub(crate) async fn drop_gone_entries(&self) -> Result<(), StoreError> {
        let shared = &self.shared;
        let config = &shared.config;
        let mut first_positions = BTreeMap::new();
        first_positions.insert(config.log_id, shared.log.borrow().min_position());
        for (log_id, dir) in &config.other_logs {
            match crate::orphan::list_segments(dir) {
                Ok(Some(starts)) => {
                    let first = starts.first().copied().unwrap_or(u64::MAX);
                    first_positions.insert(*log_id, first);
                }
                Ok(None) => {
                    first_positions.insert(*log_id, u64::MAX);
                }
                // Unreadable for now: keep its entries until a later pass can tell.
                Err(error) => log::warn!("cannot list log {log_id}: {error}"),
            }
        }
        let known =
            |log_id: LogId| log_id == config.log_id || config.other_logs.contains_key(&log_id);
        let gone = |physical: PhysicalOffset| match first_positions.get(&physical.log_id()) {
            Some(first) => physical.position() < *first,
            None => !known(physical.log_id()),
        };
        let mut dropped = Vec::new();
        for queues in shared.queues.borrow_mut().values_mut() {
            for queue in queues.values_mut() {
                dropped.extend(queue.consume_queue.drop_below(gone));
            }
        }
        for file in dropped {
            comet_rt::io::remove_file(file.path()).await?;
        }
        Ok(())
    }
}

/// Last modification time of `path`, ms since the epoch (a metadata-only syscall).
pub(crate) fn modified_ms(path: &std::path::Path) -> Option<i64> {
    let modified = std::fs::metadata(path).ok()?.modified().ok()?;
    let since_epoch = modified.duration_since(std::time::UNIX_EPOCH).ok()?;
    i64::try_from(since_epoch.as_millis()).ok()
}

/// Links key-index entries into their chains (see `index`) behind dispatch: a few per cent
/// of the shard while appends keep coming, as fast as it can once they stop or when the
/// backlog reaches [`INDEX_UNLINKED_MAX`]. Stops with the store.
async fn run_index_linker(shared: Rc<Shared>) {
    let mut end_seen = 0;
    loop {
        shared
            .index_pushed
            .until(|| {
                shared.index.borrow().unlinked() > 0
                    || shared.closed.get()
                    || shared.abandoned.get()
            })
            .await;
        if shared.closed.get() || shared.abandoned.get() {
            return;
        }
        let (busy, backlog) = {
            let index = shared.index.borrow();
            (index.end() != end_seen, index.unlinked())
        };
        let busy = busy && backlog <= INDEX_UNLINKED_MAX;
        end_seen = {
            let mut index = shared.index.borrow_mut();
            index.link(if busy {
                INDEX_LINK_BUSY_BATCH
            } else {
                INDEX_LINK_BATCH
            });
            index.end()
        };
        if busy {
            comet_rt::local::sleep(Duration::from_millis(INDEX_LINK_BUSY_PAUSE_MS)).await;
        } else {
            comet_rt::local::yield_if_needed().await;
        }
    }
}
