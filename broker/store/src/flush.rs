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
//! flush, never pad. Flushes may complete in any order; `durable` moves to a flush's target
//! only once every flush before it completed ([`Flights`]), then the dispatcher runs and the
//! covered appends wake. On failure the store stops writing and every waiter fails.
//!
//! [`CommitLog::pad_to_page`]: crate::commit_log::CommitLog::pad_to_page

use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;

use crate::commit_log::{align_down, align_up, FlushPlan};
use crate::config::FlushPolicy;
use crate::limits::{FLUSH_BYTES_MAX, PADDING_SHARE_MAX, PAGE_BYTES};
use crate::store::{dispatch_durable, Shared};
use crate::warm::meets_zero_write;

/// The flushes planned and not yet folded into `durable`.
pub(crate) struct Flights {
    /// End of the last planned flush: `durable <= planned <= write`.
    planned: u64,
    /// Targets of the flushes in flight, oldest first, and whether each has completed.
    in_flight: VecDeque<(u64, bool)>,
    /// Most flushes in flight at once (1 or 2).
    max: usize,
}

impl Flights {
    /// No flush in flight, the log durable up to `durable`.
    pub(crate) fn new(durable: u64, max: usize) -> Flights {
        assert!((1..=2).contains(&max), "one or two flushes in flight");
        Flights {
            planned: durable,
            in_flight: VecDeque::with_capacity(max),
            max,
        }
    }

    /// Where the next flush starts, if one may be planned now with the log written up to
    /// `write`: something is dirty past the last planned flush, and either nothing is in
    /// flight or the flushes in flight end on a page boundary and leave a place.
    pub(crate) fn next_start(&self, write: u64) -> Option<u64> {
        if write <= self.planned {
            return None;
        }
        let free = self.in_flight.is_empty()
            || (self.in_flight.len() < self.max && self.planned % PAGE_BYTES == 0);
        free.then_some(self.planned)
    }

    /// Bytes appended that no planned flush covers.
    pub(crate) fn unplanned_bytes(&self, write: u64) -> u64 {
        write.saturating_sub(self.planned)
    }

    /// Whether a flush is planned or in flight (the warmer writes only when none is).
    pub(crate) fn busy(&self) -> bool {
        !self.in_flight.is_empty()
    }

    /// Records a flush planned up to `target`.
    pub(crate) fn begin(&mut self, target: u64) {
        assert!(target > self.planned, "flushes are planned in log order");
        assert!(self.in_flight.len() < self.max, "a place was free");
        self.planned = target;
        self.in_flight.push_back((target, false));
    }

    /// Records the flush up to `target` completed; returns the new durable position when this
    /// completes the oldest flushes in flight (the log is durable up to the last of them).
    pub(crate) fn complete(&mut self, target: u64) -> Option<u64> {
        let flight = self
            .in_flight
            .iter_mut()
            .find(|(known, _)| *known == target)
            .expect("a completed flush was in flight");
        assert!(!flight.1, "a flush completes once");
        flight.1 = true;
        let mut durable = None;
        while let Some(&(oldest, true)) = self.in_flight.front() {
            durable = Some(oldest);
            self.in_flight.pop_front();
        }
        durable
    }
}

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
            if shared.closed.get() && nothing_unplanned(&shared) {
                return;
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
    let Some((plan, low)) = plan(shared) else {
        return;
    };
    let target = plan.target;
    // A zero write already in flight over this range must land first (see `warm`); the
    // warmer issues nothing new while this flush is in flight.
    shared
        .zero_done
        .until(|| !meets_zero_write(shared, low, align_up(target)))
        .await;
    match write_plan(plan, shared).await {
        // After a failure (of the other lane's flush) nothing more becomes durable.
        Ok(()) if shared.failure.borrow().is_some() => {}
        Ok(()) => complete(shared, target),
        Err(error) => fail(shared, error.to_string()),
    }
}

/// Pads the log if a second flush may follow this one, plans the flush and records it in
/// flight; returns it and the first position it writes.
fn plan(shared: &Shared) -> Option<(FlushPlan, u64)> {
    let mut log = shared.log.borrow_mut();
    let mut flights = shared.flights.borrow_mut();
    let start = flights.next_start(log.write)?;
    let mut stats = shared.stats.get();
    if flights.max > 1 && (flights.busy() || shared.next_flush_waited.get()) {
        let unplanned = flights.unplanned_bytes(log.write);
        stats.padding_bytes += log.pad_to_page(unplanned / PADDING_SHARE_MAX);
    }
    let plan = log.plan_flush(start, FLUSH_BYTES_MAX)?;
    if flights.busy() {
        stats.pipelined_flushes += 1;
    }
    shared.stats.set(stats);
    flights.begin(plan.target);
    Some((plan, align_down(start)))
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

#[cfg(test)]
mod tests {
    use super::*;

    // Proves durable moves only over completed flushes in log order, whatever order they
    // complete in, and a second flush starts only behind a flush ending on a page.
    #[test]
    fn flights_fold_in_order_and_share_no_page() {
        let mut flights = Flights::new(100, 2);
        assert_eq!(flights.next_start(100), None, "nothing dirty");
        assert_eq!(flights.next_start(5000), Some(100));
        flights.begin(5000);
        assert_eq!(flights.next_start(9000), None, "5000 is mid-page");

        let mut flights = Flights::new(100, 2);
        flights.begin(8192);
        assert_eq!(flights.next_start(9000), Some(8192));
        flights.begin(9000);
        assert_eq!(flights.next_start(20_000), None, "two in flight");
        assert_eq!(
            flights.complete(9000),
            None,
            "the older flush is still in flight"
        );
        assert_eq!(flights.next_start(20_000), None, "9000 is mid-page");
        assert_eq!(flights.complete(8192), Some(9000));
        assert!(!flights.busy());
        assert_eq!(flights.next_start(20_000), Some(9000));

        let mut single = Flights::new(0, 1);
        single.begin(4096);
        assert_eq!(single.next_start(9000), None, "one flush at a time");
        assert_eq!(single.complete(4096), Some(4096));
        assert_eq!(single.unplanned_bytes(9000), 9000 - 4096);
    }
}
