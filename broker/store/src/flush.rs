//! The flusher: flush lanes that write what is dirty, at most `flushes_in_flight_max` (2)
//! flushes in flight, never two writes to the same page at once
//! (docs/style.md#commit-log-write-rules: writes to one page complete in the order they were issued
//! because the second waits for the first).
//!
//! SYNC_FLUSH: as soon as anything is dirty, write it; appends arriving meanwhile go in the
//! next flush (group commit without lingering). ASYNC_FLUSH: flush when `flush_least_bytes`
//! are pending, else after `flush_interval_ms`.
//!
//! A flush writes the aligned range from the page of its start to the write position
//! (capped per flush) and makes every file it wrote durable (segments are opened O_DSYNC, so
//! their writes already are; others get an fdatasync).
//!
//! Two flushes in flight: a second flush may start while one is in flight only if the first
//! ends on a page boundary, so that they share no page. The first ends there when the log was
//! padded to the page before it was planned ([`CommitLog::pad_to_page`]), which a lane does
//! when another flush is in flight or the previous flush found the next one already waiting
//! (appends keep arriving while flushes run: a broker under load), and only when the padding
//! is at most 1/[`PADDING_SHARE_MAX`] of what the flush carries, so padding never grows the
//! log by more than that share. A lone appender, or appenders that all wait for the same
//! flush, never pad, nor does a slave's copy of its master's log (its bytes must stay where
//! the master put them). Flushes may complete in any order; `durable` moves to a flush's target
//! only once every flush before it completed ([`Flights`]), then the dispatcher
//! ([`dispatch_durable`]) runs and the covered appends wake. On failure the store stops
//! writing and every waiter fails.
//!
//! [`CommitLog::pad_to_page`]: crate::commit_log::CommitLog::pad_to_page
//! [`Flights`]: crate::flights::Flights

use std::rc::Rc;
use std::time::Duration;

use comet_proto::message::{RecordView, BLANK_MAGIC};

use crate::commit_log::{align_down, align_up, to_index, FlushPlan, BLANK_BYTES};
use crate::config::FlushPolicy;
use crate::error::StoreError;
use crate::histogram::{COMMIT_BYTES_BOUNDS, COMMIT_RECORDS_BOUNDS, SYNC_LATENCY_BOUNDS_US};
use crate::limits::{FLUSH_BYTES_MAX, PADDING_SHARE_MAX, RECORD_BYTES_MAX};
use crate::queues::dispatch_record;
use crate::shard::Shared;
use crate::warm::meets_zero_write;

/// One flush lane; the store runs `flushes_in_flight_max` of them. Each runs until the store
/// is closed and nothing is left to plan (or writes failed).
pub(crate) async fn run_flush_lane(shared: Rc<Shared>) {
    loop {
        // Something to plan, the store closing, or writes failed.
        shared
            .flush_wanted
            .until(|| may_plan(&shared) || shared.closed.get() || shared.failure.borrow().is_some())
            .await;
        if shared.failure.borrow().is_some() || shared.abandoned.get() {
            return;
        }
        if !may_plan(&shared) {
            if shared.closed.get() {
                if nothing_unplanned(&shared) {
                    return;
                }
                // Closing, with bytes only another lane's flight in progress lets us plan:
                // wait for it (a flight's end wakes `flush_wanted`). The wait above returns
                // at once once closed, so looping back to it would never yield, and the
                // other lane's flight, on this same thread, would never finish.
                shared
                    .flush_wanted
                    .until(|| {
                        may_plan(&shared)
                            || nothing_unplanned(&shared)
                            || shared.failure.borrow().is_some()
                            || shared.abandoned.get()
                    })
                    .await;
            }
            continue;
        }
        if shared.config.flush_policy == FlushPolicy::Async && !shared.closed.get() {
            let pending = {
                let write = shared.log.borrow().write;
                shared.flights.borrow().unplanned_bytes(write)
            };
            if pending < shared.config.flush_least_bytes as u64 {
                comet_rt::local::sleep(Duration::from_millis(shared.config.flush_interval_ms))
                    .await;
            }
        }
        flush_once(&shared).await;
    }
}

fn may_plan(shared: &Shared) -> bool {
    let write = shared.log.borrow().write;
    shared.flights.borrow().next_start(write).is_some()
}

fn nothing_unplanned(shared: &Shared) -> bool {
    let write = shared.log.borrow().write;
    shared.flights.borrow().unplanned_bytes(write) == 0
}

/// One flush: plan under a short borrow, write and sync without holding any borrow. Returns
/// at once when another lane took the work first.
pub(crate) async fn flush_once(shared: &Shared) {
    let Some((plan, low, size)) = plan(shared) else {
        return;
    };
    let target = plan.target;
    // A zero write already in flight over this range must land first (see `warm`); the
    // warmer issues nothing new while this flush is in flight.
    shared
        .zero_done
        .until(|| !meets_zero_write(shared, low, align_up(target)))
        .await;
    match write_plan(plan, size, shared).await {
        // After a failure (of the other lane's flush) nothing more becomes durable.
        Ok(()) if shared.failure.borrow().is_some() => {}
        Ok(()) => complete(shared, target),
        Err(error) => fail(shared, error.to_string()),
    }
}

/// A group commit's size: records and log bytes it makes durable.
#[derive(Clone, Copy)]
struct CommitSize {
    records: u64,
    bytes: u64,
}

/// Pads the log if a second flush may follow this one, plans the flush and records it in
/// flight; returns it, the first position it writes and its size.
fn plan(shared: &Shared) -> Option<(FlushPlan, u64, CommitSize)> {
    let mut log = shared.log.borrow_mut();
    let mut flights = shared.flights.borrow_mut();
    let start = flights.next_start(log.write)?;
    let mut stats = shared.stats.get();
    let may_pad = flights.max > 1 && !shared.replica.get();
    if may_pad && (flights.busy() || shared.next_flush_waited.get()) {
        let unplanned = flights.unplanned_bytes(log.write);
        stats.padding_bytes += log.pad_to_page(unplanned / PADDING_SHARE_MAX);
    }
    let plan = log.plan_flush(start, FLUSH_BYTES_MAX)?;
    if flights.busy() {
        stats.pipelined_flushes += 1;
    }
    shared.stats.set(stats);
    flights.begin(plan.target);
    let size = commit_size(
        shared,
        start,
        plan.target,
        log.write,
        stats.appended_records,
    );
    Some((plan, align_down(start), size))
}

/// The size of a flush of `[start, target)` while the log is written to `write` and
/// `appended` records were appended since open: the records not yet given to a flush, or
/// their share by bytes when the flush stops short of `write` (the rest go to the next).
fn commit_size(shared: &Shared, start: u64, target: u64, write: u64, appended: u64) -> CommitSize {
    let pending = appended.saturating_sub(shared.planned_records.get());
    let records = if target >= write || write <= start {
        pending
    } else {
        let share = u128::from(pending) * u128::from(target - start) / u128::from(write - start);
        u64::try_from(share).unwrap_or(pending).min(pending)
    };
    shared
        .planned_records
        .set(shared.planned_records.get() + records);
    CommitSize {
        records,
        bytes: target.saturating_sub(start),
    }
}

/// Folds a completed flush into `durable`, dispatches, wakes the covered appends and the
/// lanes (a place is free).
fn complete(shared: &Shared, target: u64) {
    let durable = shared.flights.borrow_mut().complete(target);
    {
        let log = shared.log.borrow();
        // Appends arrived while this flush ran: the next flush is already waiting.
        let unplanned = shared.flights.borrow().unplanned_bytes(log.write);
        shared.next_flush_waited.set(unplanned > 0);
    }
    if let Some(durable) = durable {
        {
            let mut log = shared.log.borrow_mut();
            assert!(durable > log.durable, "durable only moves forward");
            log.durable = durable;
        }
        dispatch_durable(shared);
        shared.durable_waiters.wake_up_to(durable);
    }
    // The warmer first: it then runs before the next flush is planned, in the same pass as
    // the appends it woke, so a zero write can go out beside that flush (see `warm`).
    shared.warm_wanted.wake_all();
    shared.flush_wanted.wake_all();
}

async fn write_plan(
    plan: FlushPlan,
    size: CommitSize,
    shared: &Shared,
) -> Result<(), comet_rt::io::IoError> {
    let mut files = Vec::with_capacity(plan.writes.len());
    let mut written = 0u64;
    // One sync latency per file, as `fdatasyncs` counts them: an O_DSYNC write is its sync.
    let mut sync_latencies_us = [0u64; 4];
    let mut syncs = 0usize;
    let mut note_sync = |started: std::time::Instant| {
        if let Some(slot) = sync_latencies_us.get_mut(syncs) {
            *slot = elapsed_us(started);
        }
        syncs += 1;
    };
    for write in plan.writes {
        written += write.buffer.len() as u64;
        let started = comet_rt::clock::monotonic_now();
        write
            .file
            .write_at(write.buffer, write.file_position)
            .await?;
        if write.file.writes_are_durable() {
            note_sync(started);
        }
        files.push(write.file);
    }
    // Segments are opened O_DSYNC (one round trip per flush instead of two: 1.6× the
    // durable appends per second with one appender); any other file gets an fdatasync.
    for file in files.iter().filter(|file| !file.writes_are_durable()) {
        let started = comet_rt::clock::monotonic_now();
        file.fdatasync().await?;
        note_sync(started);
    }
    {
        let mut histograms = shared.histograms.borrow_mut();
        histograms
            .commit_records
            .observe(&COMMIT_RECORDS_BOUNDS, size.records);
        histograms
            .commit_bytes
            .observe(&COMMIT_BYTES_BOUNDS, size.bytes);
        // A flush writes a segment or two; more (never seen) are counted at the first ones'
        // mean so the count still matches `fdatasyncs`.
        let measured = syncs.min(sync_latencies_us.len());
        let mean = sync_latencies_us[..measured].iter().sum::<u64>() / measured.max(1) as u64;
        for index in 0..files.len() {
            let latency = sync_latencies_us.get(index).filter(|_| index < measured);
            histograms
                .sync_latency_us
                .observe(&SYNC_LATENCY_BOUNDS_US, latency.copied().unwrap_or(mean));
        }
    }
    let mut stats = shared.stats.get();
    stats.flushes += 1;
    stats.fdatasyncs += files.len() as u64;
    stats.written_bytes += written;
    shared.stats.set(stats);
    shared.last_flush_bytes.set(written);
    Ok(())
}

fn elapsed_us(started: std::time::Instant) -> u64 {
    let elapsed = comet_rt::clock::monotonic_now().saturating_duration_since(started);
    u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX)
}

/// Stops all writes: records the failure and fails every waiting append.
pub(crate) fn fail(shared: &Shared, reason: String) {
    log::error!("store stops writing after an i/o failure: {reason}");
    let mut failure = shared.failure.borrow_mut();
    if failure.is_none() {
        *failure = Some(reason);
    }
    drop(failure);
    shared.durable_waiters.wake_all();
    shared.spare_ready.wake_all();
    shared.flush_wanted.wake_all();
    shared.warm_wanted.wake_all();
    shared.zero_done.wake_all();
}

/// How far records may become visible: the durable end, and under
/// `StoreConfig::visible_after_confirm` (SYNC_MASTER) no further than the confirmed
/// position, so consumers never read what a failover to the slave could take back.
pub(crate) fn visible_end(shared: &Shared, durable: u64) -> u64 {
    if shared.config.visible_after_confirm {
        durable.min(shared.confirmed.get())
    } else {
        durable
    }
}

/// Dispatches every visible record not yet dispatched (waking readers of their queues).
pub(crate) fn dispatch_durable(shared: &Shared) {
    let mut log = shared.log.borrow_mut();
    let limit = visible_end(shared, log.durable);
    while log.dispatched < limit {
        let position = log.dispatched;
        let segment_end = log.segment_start(position) + log.segment_bytes;
        let Some(bytes) = log.cached_from(position) else {
            // Evicted while it waited for confirm (see `CommitLog::evict`): the disk
            // dispatcher reads it back.
            assert!(
                shared.config.visible_after_confirm,
                "undispatched bytes stay cached"
            );
            shared.dispatch_lagging.wake_all();
            break;
        };
        let reached = dispatch_pieces(shared, bytes, (position, segment_end), limit)
            .expect("appended records were validated");
        if reached == position {
            break;
        }
        log.dispatched = reached;
    }
    // Under the confirm limit undispatched bytes may leave the cache, so a lagging confirm
    // (a slave away) costs disk reads later instead of memory now.
    log.evict(!shared.config.visible_after_confirm);
    if shared.index.borrow().unlinked() > 0 {
        shared.index_pushed.wake_all();
    }
}

/// Dispatches the whole records (and skips the blanks) at the start of `bytes`, the log
/// from `position` in the segment ending at `segment_end`, that end at or below `limit`;
/// returns the position past them.
fn dispatch_pieces(
    shared: &Shared,
    bytes: &[u8],
    (position, segment_end): (u64, u64),
    limit: u64,
) -> Result<u64, StoreError> {
    let mut queues = shared.queues.borrow_mut();
    let mut index = shared.index.borrow_mut();
    let mut at = position;
    let damaged = |at: u64, reason: String| {
        let log_id = shared.config.log_id.to_string();
        let dir = shared.config.root.join("commitlog").join(log_id);
        StoreError::corrupt(dir, format!("log position {at}: {reason}"))
    };
    loop {
        // Padding skipped past the end of `bytes` ends them too.
        let Some(rest) = bytes.get(to_index(at - position)..) else {
            return Ok(at);
        };
        let Some((size, magic)) = comet_proto::message::peek_total_size_and_magic(rest) else {
            return Ok(at);
        };
        let size = u64::try_from(size).map_err(|_| damaged(at, format!("size {size}")))?;
        if magic == BLANK_MAGIC {
            // The segment's end marker (the rest of the segment holds nothing) or padding.
            let end = at + size;
            let needed = if end == segment_end {
                at + BLANK_BYTES
            } else {
                end
            };
            if needed > limit {
                return Ok(at);
            }
            at = end;
            if at == segment_end {
                return Ok(at);
            }
            continue;
        }
        if at + size > limit || (rest.len() as u64) < size {
            return Ok(at);
        }
        let view = RecordView::parse(&rest[..to_index(size)])
            .map_err(|error| damaged(at, error.to_string()))?;
        let dispatched = dispatch_record(&view, at, &mut queues, &mut index, &shared.config);
        assert!(dispatched, "live records continue their queue");
        shared.last_store_timestamp_ms.set(view.store_timestamp());
        at += size;
    }
}

/// Under `StoreConfig::visible_after_confirm`: dispatches from disk what left the cache
/// before confirm made it visible, until the store closes or writes fail.
pub(crate) async fn run_disk_dispatcher(shared: Rc<Shared>) {
    // The (dispatched, visible end) of a read that made no progress: no whole record is
    // visible there yet, so nothing is read again until one of them moves.
    let mut stalled: Option<(u64, u64)> = None;
    loop {
        shared
            .dispatch_lagging
            .until(|| {
                lagging(&shared).is_some_and(|state| Some(state) != stalled)
                    || shared.closed.get()
                    || shared.failure.borrow().is_some()
            })
            .await;
        if shared.closed.get() || shared.failure.borrow().is_some() {
            return;
        }
        match dispatch_from_disk(&shared).await {
            Ok(progress) => stalled = (!progress).then(|| lagging(&shared)).flatten(),
            Err(error) => {
                fail(&shared, error.to_string());
                return;
            }
        }
    }
}

/// `(dispatched, visible end)` when visible records wait that the cache no longer holds.
fn lagging(shared: &Shared) -> Option<(u64, u64)> {
    let log = shared.log.borrow();
    let limit = visible_end(shared, log.durable);
    (log.dispatched < limit && log.cached_from(log.dispatched).is_none())
        .then_some((log.dispatched, limit))
}

/// Reads the segment from the dispatch position and dispatches what is visible of it;
/// returns whether the dispatch position moved.
async fn dispatch_from_disk(shared: &Shared) -> Result<bool, StoreError> {
    let (position, segment_end, segment_start, file, length) = {
        let log = shared.log.borrow();
        let position = log.dispatched;
        let limit = visible_end(shared, log.durable);
        let (start, file) = log
            .segment_of(position)
            .ok_or_else(|| StoreError::corrupt(&log.dir, format!("no segment at {position}")))?;
        let segment_end = start + log.segment_bytes;
        // A window holds the largest record, so every step dispatches at least one.
        let length = (limit.min(segment_end) - position).min(RECORD_BYTES_MAX as u64);
        (position, segment_end, start, file, to_index(length))
    };
    let mut stats = shared.stats.get();
    stats.disk_reads += 1;
    shared.stats.set(stats);
    let window = file.read_at(position - segment_start, length).await?;
    if shared.log.borrow().dispatched != position {
        return Ok(true);
    }
    let limit = visible_end(shared, shared.log.borrow().durable);
    let reached = dispatch_pieces(shared, &window, (position, segment_end), limit)?;
    shared.log.borrow_mut().dispatched = reached;
    // Continues from the cache where it holds the rest, wakes the linker.
    dispatch_durable(shared);
    Ok(reached > position)
}
