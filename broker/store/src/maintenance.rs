//! Background upkeep of the shard state besides the flusher: the lazy flush of consume
//! queues and the index followed by a checkpoint, sealing and linking the key index, the
//! maintenance lock that serializes this file I/O with retention's deletes, and moving queue
//! min offsets past records that are gone.

use std::cell::{Cell, RefMut};
use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use comet_rt::io::IoError;
use comet_rt::sync::sleep_unless;

use crate::checkpoint::Checkpoint;
use crate::cq_files::{
    close_files, create_file, flush_queue, run_bounded, write_and_sync, FlushFiles,
};
use crate::error::{setup_error, StoreError};
use crate::flush::fail;
use crate::limits::{
    CQ_BLOCK_ENTRIES, INDEX_LINK_BATCH, INDEX_LINK_BUSY_BATCH, INDEX_LINK_BUSY_PAUSE_MS,
    INDEX_UNLINKED_MAX,
};
use crate::offset::{parse_file_name, LogId, PhysicalOffset};
use crate::queue_table::{self, QueueRecord};
use crate::queues::read_entries;
use crate::sealed_index::{self, sealed_path, SealedIndex};
use crate::shard::Shared;

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

/// Runs the lazy flush and checkpoint every `cq_flush_interval_ms`, then seals what the
/// checkpoint covers, until the store closes or writes fail.
pub(crate) async fn run_maintenance(shared: Rc<Shared>) {
    let shared = &*shared;
    let interval = Duration::from_millis(shared.config.cq_flush_interval_ms);
    let mut sealing = true;
    while !shared.closed.get() {
        sleep_unless_closed(shared, interval).await;
        if shared.closed.get() || shared.failure.borrow().is_some() {
            return;
        }
        let checkpointed = match write_maintenance_checkpoint(shared).await {
            Ok(checkpointed) => checkpointed,
            Err(error) => {
                fail(shared, error.to_string());
                return;
            }
        };
        // Every span the checkpoint covers, not one per cycle: a shard appending more than
        // a span per cycle would otherwise hold ever more of them in memory.
        while sealing && !shared.closed.get() {
            match seal_index_segment(shared, checkpointed).await {
                Ok(true) => {}
                Ok(false) => break,
                Err(error) => {
                    // The index stays in memory, where lookups still find it.
                    log::error!("key-index sealing stops until restart: {error}");
                    sealing = false;
                }
            }
        }
    }
}

/// Seals the key index of the oldest segment held in memory if the checkpoint covers it
/// (see `sealed_index`): sorted and written on the blocking thread, then swapped in
/// under the maintenance lock. Says whether there was one to seal.
async fn seal_index_segment(shared: &Shared, checkpointed: u64) -> Result<bool, StoreError> {
    let (start, entries, dir) = {
        let index = shared.index.borrow();
        let Some((start, entries)) = index.sealable(checkpointed) else {
            return Ok(false);
        };
        (start, entries, index.dir().to_path_buf())
    };
    let count = entries.len();
    let started = comet_rt::clock::monotonic_now();
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
        return Ok(false);
    }
    let gone = shared.index.borrow_mut().complete_seal(start, sealed);
    for path in gone {
        comet_rt::io::remove_file(&path).await?;
    }
    log::info!(
        "sealed the key index of segment {start}: {count} keys in {} ms",
        started.elapsed().as_millis()
    );
    Ok(true)
}

/// Flushes consume queues and the index (every file written is synced), writes the queue
/// table if a queue moved, then writes a checkpoint saying everything dispatched before the
/// flush began is durable in them; returns that position.
pub(crate) async fn write_maintenance_checkpoint(shared: &Shared) -> Result<u64, StoreError> {
    let _guard = MaintenanceLock { shared }.await;
    let (dispatched, durable) = {
        let log = shared.log.borrow();
        (log.dispatched, log.durable)
    };
    flush_derived(shared).await?;
    write_queue_table(shared).await?;
    let checkpoint = Checkpoint {
        sequence: 0,
        log_durable_position: durable,
        dispatch_durable_position: dispatched,
        last_store_timestamp_ms: shared.last_store_timestamp_ms.get(),
        verify_from: shared.verify_boundaries.borrow_mut().choose(dispatched),
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

/// Writes every dirty consume queue through the store's pool of open files, several at once
/// (see `cq_files`), then the key index. Returns once every queue's files are synced.
async fn flush_derived(shared: &Shared) -> Result<(), StoreError> {
    let dirty: Vec<(String, i32)> = shared
        .queues
        .borrow()
        .iter()
        .flat_map(|(topic, queues)| {
            queues
                .iter()
                .filter(|(_, queue)| queue.consume_queue.is_dirty())
                .map(|(queue_id, _)| (topic.clone(), *queue_id))
        })
        .collect();
    let started = comet_rt::clock::monotonic_now();
    let files = FlushFiles {
        pool: Some(&shared.cq_files),
        faults: &shared.config.faults,
        opened: Cell::new(0),
    };
    let flushes = dirty.iter().map(|(topic, queue_id)| {
        let access = move || {
            RefMut::map(shared.queues.borrow_mut(), |queues| {
                &mut queues
                    .get_mut(topic)
                    .and_then(|queues| queues.get_mut(queue_id))
                    .expect("queues are never removed")
                    .consume_queue
            })
        };
        flush_queue(access, &files, Some(&shared.cq_cache))
    });
    run_bounded(flushes, files.flushes_in_flight_max()).await?;
    let mut stats = shared.stats.get();
    stats.cq_flushes += 1;
    stats.cq_flush_us += u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
    stats.cq_file_opens += files.opened.get();
    shared.stats.set(stats);
    let missing = shared.index.borrow().missing_files();
    for (start, path) in missing {
        let file = create_file(&path, &shared.config.faults).await?;
        shared.index.borrow_mut().attach_file(start, Rc::new(file));
    }
    let writes = shared.index.borrow_mut().plan_flush();
    write_and_sync(writes).await
}

/// The queue table for the queues as their files hold them now (see `queue_table`), in a
/// fixed order so an unchanged table has the same bytes.
fn queue_table_records(shared: &Shared) -> Vec<QueueRecord> {
    let mut records = Vec::new();
    for (topic, queues) in shared.queues.borrow().iter() {
        for (queue_id, queue) in queues {
            let queue = &queue.consume_queue;
            let (min, flushed) = (queue.min_offset(), queue.written_offset());
            // A queue with nothing written, or starting over past what is written, has
            // nothing the files must hold yet.
            if flushed == 0 || min > flushed {
                continue;
            }
            records.push(QueueRecord {
                topic: topic.clone(),
                queue_id: *queue_id,
                min,
                max: flushed,
                min_physical: queue.min_physical(),
            });
        }
    }
    records.sort_unstable_by(|a, b| (&a.topic, a.queue_id).cmp(&(&b.topic, b.queue_id)));
    records
}

/// Replaces the queue table when a queue moved since it was last written. Runs under the
/// maintenance lock, after the flush that wrote the queue files it describes was synced.
pub(crate) async fn write_queue_table(shared: &Shared) -> Result<(), StoreError> {
    let bytes = queue_table::encode(&queue_table_records(shared));
    if *shared.queue_table_bytes.borrow() == bytes {
        return Ok(());
    }
    let path = queue_table::table_path(&shared.config.root, shared.config.log_id);
    queue_table::write(&path, bytes.clone()).await?;
    *shared.queue_table_bytes.borrow_mut() = bytes;
    Ok(())
}

/// Sleeps for `duration`, or until the store closes.
pub(crate) async fn sleep_unless_closed(shared: &Shared, duration: Duration) {
    sleep_unless(&shared.closing, || shared.closed.get(), duration).await;
}

/// Moves queue min offsets past entries whose records are gone: below the first segment
/// of this log, or of another log the queues point into (handed-over queues; that log's
/// own retention, or its adopter's, deletes its segments); every entry of another log
/// whose directory holds no segment or is gone (fully deleted, see
/// module `orphan`), or of a log no store holds. Deletes consume-queue files
/// left with nothing.
pub(crate) async fn drop_gone_entries(shared: &Shared) -> Result<(), StoreError> {
    let config = &shared.config;
    let mut first_positions = BTreeMap::new();
    first_positions.insert(config.log_id, shared.log.borrow().min_position());
    for (log_id, dir) in &config.other_logs {
        match list_segments(dir) {
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
    let known = |log_id: LogId| log_id == config.log_id || config.other_logs.contains_key(&log_id);
    let gone = |physical: PhysicalOffset| match first_positions.get(&physical.log_id()) {
        Some(first) => physical.position() < *first,
        None => !known(physical.log_id()),
    };
    let names: Vec<(String, i32)> = shared
        .queues
        .borrow()
        .iter()
        .flat_map(|(topic, queues)| queues.keys().map(|queue_id| (topic.clone(), *queue_id)))
        .collect();
    let mut dropped = Vec::new();
    for (topic, queue_id) in names {
        dropped.extend(advance_queue_min(shared, (&topic, queue_id), &gone).await?);
    }
    if dropped.is_empty() {
        return Ok(());
    }
    // The table moves min first: a crash before the deletes then finds files below min,
    // never a min below the oldest file (which recovery would take for a lost file).
    write_queue_table(shared).await?;
    for path in dropped {
        // An open descriptor would keep the deleted file's blocks allocated.
        let open = shared.cq_files.borrow_mut().forget(&path);
        close_files(open.into_iter().collect()).await;
        if path.exists() {
            comet_rt::io::remove_file(&path).await?;
        }
    }
    Ok(())
}

/// Moves the min offset of every queue of `topic` to its max (see
/// `Store::drop_topic_entries`) under the maintenance lock; returns how many queues held
/// entries.
pub(crate) async fn drop_topic_entries(shared: &Shared, topic: &str) -> Result<usize, StoreError> {
    // The topic's records stay in the log, so a recovery that re-dispatched them would serve
    // them again: a checkpoint first puts every record dispatched so far behind the point
    // recovery starts from, with the queue files holding their entries up to max.
    write_maintenance_checkpoint(shared).await?;
    let _guard = MaintenanceLock { shared }.await;
    let mut emptied = 0;
    let mut dropped = Vec::new();
    {
        let mut queues = shared.queues.borrow_mut();
        let mut cache = shared.cq_cache.borrow_mut();
        if let Some(per_queue) = queues.get_mut(topic) {
            for state in per_queue.values_mut() {
                let queue = &mut state.consume_queue;
                let max = queue.max_offset();
                if queue.min_offset() < max {
                    emptied += 1;
                    dropped.extend(queue.advance_min(max, None, &mut cache));
                }
            }
        }
    }
    if emptied == 0 {
        return Ok(0);
    }
    // As in `drop_gone_entries`: the table first, so a crash finds files below min, never
    // a min below the oldest file.
    write_queue_table(shared).await?;
    for path in dropped {
        let open = shared.cq_files.borrow_mut().forget(&path);
        close_files(open.into_iter().collect()).await;
        if path.exists() {
            comet_rt::io::remove_file(&path).await?;
        }
    }
    Ok(emptied)
}

/// Moves the min offset of (topic, queue_id) past entries whose records are `gone`, reading
/// them through the hot tail, the block cache or the files; returns the queue files left
/// wholly below it. A queue whose record at min is known to be stored reads nothing.
async fn advance_queue_min(
    shared: &Shared,
    (topic, queue_id): (&str, i32),
    gone: &impl Fn(PhysicalOffset) -> bool,
) -> Result<Vec<PathBuf>, StoreError> {
    let (start, known) = {
        let queues = shared.queues.borrow();
        let queue = &queues[topic][&queue_id].consume_queue;
        (queue.min_offset(), queue.min_physical())
    };
    if known.is_some_and(|physical| !gone(physical)) {
        return Ok(Vec::new());
    }
    let (mut at, mut physical) = (start, None);
    'walk: loop {
        let queue = (topic, queue_id);
        let (run, _) = read_entries(
            &shared.queues,
            &shared.cq_cache,
            queue,
            at,
            CQ_BLOCK_ENTRIES,
        )
        .await?;
        let Some(run) = run else {
            break;
        };
        for entry in run {
            if !entry.is_placeholder() && !gone(entry.physical) {
                physical = Some(entry.physical);
                break 'walk;
            }
            at += 1;
        }
    }
    let mut queues = shared.queues.borrow_mut();
    let queue = &mut queues
        .get_mut(topic)
        .and_then(|queues| queues.get_mut(&queue_id))
        .expect("queues are never removed")
        .consume_queue;
    if queue.min_offset() != start || at > queue.max_offset() {
        // A first record arrived meanwhile: the next pass looks again.
        return Ok(Vec::new());
    }
    let mut cache = shared.cq_cache.borrow_mut();
    Ok(queue.advance_min(at, physical, &mut cache))
}

/// Segment starts of a log directory, oldest first; `None` when the directory is gone.
pub(crate) fn list_segments(dir: &Path) -> Result<Option<Vec<u64>>, StoreError> {
    let listing = match std::fs::read_dir(dir) {
        Ok(listing) => listing,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(setup_error(dir, error)),
    };
    let mut starts = Vec::new();
    for item in listing {
        let item = item.map_err(|error| setup_error(dir, error))?;
        if let Some(start) = item.file_name().to_str().and_then(parse_file_name) {
            starts.push(start);
        }
    }
    starts.sort_unstable();
    Ok(Some(starts))
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
pub(crate) async fn run_index_linker(shared: Rc<Shared>) {
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
