//! The flusher: one task per store, at most one flush in flight (STYLE B2: writes to the
//! same page complete in order because there is only ever one).
//!
//! SYNC_FLUSH: as soon as anything is dirty, write it and fdatasync; appends arriving
//! meanwhile pile up and go in the next flush (group commit without lingering). ASYNC_FLUSH:
//! flush when `flush_least_bytes` are pending, else after `flush_interval_ms`.
//!
//! A flush writes the aligned range `[align_down(durable), write)` (capped per flush), makes
//! every file it wrote durable (segments are opened O_DSYNC, so their writes already are;
//! others get an fdatasync), then moves `durable` forward, dispatches, and wakes the appends
//! it covered. On failure the store stops writing and every waiter fails.

use std::rc::Rc;
use std::time::Duration;

use crate::commit_log::{align_down, align_up, FlushPlan};
use crate::config::FlushPolicy;
use crate::limits::FLUSH_BYTES_MAX;
use crate::store::{dispatch_durable, Shared};
use crate::warm::meets_zero_write;

/// Runs until the store is closed and everything appended is durable (or writes failed).
pub(crate) async fn run_flusher(shared: Rc<Shared>) {
    loop {
        // Something to flush, the store closing, or writes failed.
        shared
            .flush_wanted
            .until(|| {
                let log = shared.log.borrow();
                log.durable < log.write || shared.closed.get() || shared.failure.borrow().is_some()
            })
            .await;
        if shared.failure.borrow().is_some() || shared.abandoned.get() {
            return;
        }
        let (durable, write) = {
            let log = shared.log.borrow();
            (log.durable, log.write)
        };
        if durable == write {
            if shared.closed.get() {
                return;
            }
            continue;
        }
        if shared.config.flush_policy == FlushPolicy::Async && !shared.closed.get() {
            let pending = usize::try_from(write - durable).unwrap_or(usize::MAX);
            if pending < shared.config.flush_least_bytes {
                comet_rt::local::sleep(Duration::from_millis(shared.config.flush_interval_ms))
                    .await;
            }
        }
        flush_once(&shared).await;
    }
}

/// One flush: plan under a short borrow, write and sync without holding any borrow.
pub(crate) async fn flush_once(shared: &Shared) {
    let (plan, low) = {
        let log = shared.log.borrow();
        let Some(plan) = log.plan_flush(FLUSH_BYTES_MAX) else {
            return;
        };
        (plan, align_down(log.durable))
    };
    let target = plan.target;
    // From here until the write ends the warmer issues nothing; a zero write already in
    // flight over this range must land first (see `warm`).
    shared.flush_in_flight.set(true);
    shared
        .zero_done
        .until(|| !meets_zero_write(shared, low, align_up(target)))
        .await;
    let written = write_plan(plan, shared).await;
    shared.flush_in_flight.set(false);
    match written {
        Ok(()) => {
            {
                let mut log = shared.log.borrow_mut();
                assert!(target > log.durable, "durable only moves forward");
                log.durable = target;
            }
            dispatch_durable(shared);
            shared.durable_waiters.wake_up_to(target);
            shared.warm_wanted.wake_all();
        }
        Err(error) => fail(shared, error.to_string()),
    }
}

async fn write_plan(plan: FlushPlan, shared: &Shared) -> Result<(), comet_rt::io::IoError> {
    let mut files = Vec::with_capacity(plan.writes.len());
    let mut written = 0u64;
    for write in plan.writes {
        written += write.buffer.len() as u64;
        write
            .file
            .write_at(write.buffer, write.file_position)
            .await?;
        files.push(write.file);
    }
    // Segments are opened O_DSYNC (one round trip per flush instead of two: 1.6× the
    // durable appends per second with one appender); any other file gets an fdatasync.
    for file in files.iter().filter(|file| !file.writes_are_durable()) {
        file.fdatasync().await?;
    }
    let mut stats = shared.stats.get();
    stats.flushes += 1;
    stats.fdatasyncs += files.len() as u64;
    stats.written_bytes += written;
    shared.stats.set(stats);
    shared.last_flush_bytes.set(written);
    Ok(())
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
