//! The warmer: keeps the commit log written (with zeros) a little ahead of its write
//! position, so the flusher's durable writes land on blocks that are already written.
//!
//! Why: segments are preallocated with `fallocate`, which leaves unwritten extents. A durable
//! (O_DSYNC) write into an unwritten extent must also make the extent's conversion durable: a
//! file-system journal commit on every flush. fio on the same disk, durable sequential
//! writes at queue depth 1, fallocated file against one already written: 4 KiB 181 µs
//! against 79 µs (p50), 256 KiB 744 MB/s against 1,126 MB/s (perf/README.md). RocketMQ's
//! `warmMapedFileEnable` writes its mapped files ahead of use for a similar reason.
//!
//! Rules, so that zeros never land on data:
//! - a zero write starts at or past `align_up(write)` and is issued only while no flush is
//!   planned or in flight, so it never meets a page a flush wrote or is writing;
//! - a flush whose range meets the zero write in flight waits for it (`flush`), so data is
//!   always written after the zeros under it;
//! - one zero write of [`WARM_WRITE_BYTES`] at a time, at most `warm_ahead_bytes` ahead,
//!   and only behind flushes of at most [`WARM_FLUSH_BYTES_MAX`]: large flushes amortize the
//!   journal commit, and zeros competing with them for the disk cost more than they save;
//!   after large flushes it resumes once [`WARM_QUIET_MS`] pass without a flush.
//!
//! Cost: each commit-log block is written twice. The zeros are not synced on their own; a
//! crash that loses some only means those blocks get converted by the flush that writes
//! them, as without the warmer. Recovery already reads zeros as the end of the log.

use std::rc::Rc;
use std::time::Duration;

use comet_rt::io::DirectFile;

use crate::commit_log::align_up;
use crate::limits::{WARM_FLUSH_BYTES_MAX, WARM_QUIET_MS, WARM_WRITE_BYTES};
use crate::shard::Shared;

/// Runs until the store closes or writes fail; returns at once when warming is off.
pub(crate) async fn run_warmer(shared: Rc<Shared>) {
    if shared.config.warm_ahead_bytes == 0 {
        return;
    }
    loop {
        shared
            .warm_wanted
            .until(|| {
                stopping(&shared)
                    || (!shared.flights.borrow().busy() && next_zero_write(&shared).is_some())
            })
            .await;
        if stopping(&shared) {
            return;
        }
        if shared.last_flush_bytes.get() > WARM_FLUSH_BYTES_MAX {
            // Zeros would compete with large flushes; warm again once the store is quiet.
            let flushes = shared.stats.get().flushes;
            comet_rt::local::sleep(Duration::from_millis(WARM_QUIET_MS)).await;
            if shared.stats.get().flushes == flushes {
                shared.last_flush_bytes.set(0);
            }
            continue;
        }
        let Some(ZeroWrite {
            file,
            position,
            file_position,
            len,
        }) = next_zero_write(&shared)
        else {
            continue;
        };
        let end = position + len as u64;
        shared.zero_in_flight.set(Some((position, end)));
        let result = file.write_zeros_at(len, file_position).await;
        shared.zero_in_flight.set(None);
        shared.zero_done.wake_all();
        match result {
            Ok(()) => {
                shared.warmed_to.set(end);
                let mut stats = shared.stats.get();
                stats.zeroed_bytes += len as u64;
                shared.stats.set(stats);
            }
            Err(error) => {
                // Not a data write: nothing acknowledged depends on it, and the flusher
                // reports a failing disk on its own writes.
                log::warn!("commit-log warming stops: {error}");
                return;
            }
        }
    }
}

/// Whether `[low, high)` meets the zero write in flight.
pub(crate) fn meets_zero_write(shared: &Shared, low: u64, high: u64) -> bool {
    shared
        .zero_in_flight
        .get()
        .is_some_and(|(zero_low, zero_high)| zero_low < high && low < zero_high)
}

fn stopping(shared: &Shared) -> bool {
    shared.closed.get() || shared.abandoned.get() || shared.failure.borrow().is_some()
}

struct ZeroWrite {
    file: Rc<DirectFile>,
    /// Log position of the first zero.
    position: u64,
    /// The same place in its segment's file.
    file_position: u64,
    len: usize,
}

/// The next range to zero, if it lies within `warm_ahead_bytes` of the write position and
/// its segment file exists (the active one or the spare).
fn next_zero_write(shared: &Shared) -> Option<ZeroWrite> {
    let log = shared.log.borrow();
    let position = shared.warmed_to.get().max(align_up(log.write));
    let limit = log.write + shared.config.warm_ahead_bytes;
    if position >= limit {
        return None;
    }
    let segment = log.segment_start(position);
    let file = match log.segments.get(&segment) {
        Some(file) => Rc::clone(file),
        None if segment == log.spare_start() => Rc::clone(log.spare.as_ref()?),
        None => return None,
    };
    let end = (position + WARM_WRITE_BYTES).min(segment + log.segment_bytes);
    let len = usize::try_from(end - position).expect("one zero write fits memory");
    Some(ZeroWrite {
        file,
        position,
        file_position: position - segment,
        len,
    })
}
