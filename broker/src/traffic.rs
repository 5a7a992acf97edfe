//! Broker-wide traffic figures: messages stored and delivered, and how many requests crossed
//! cores. They feed GET_BROKER_RUNTIME_INFO, which `mqadmin brokerStatus` prints and
//! `mqadmin clusterList` turns into its InTPS / OutTPS / InTotal columns.
//!
//! Each shard writes only its own slot (a cache-line-aligned group of counters), so counting
//! costs a plain load and store with no cross-core traffic; readers sum the slots. Rates need
//! history: once a second shard 0 records the broker-wide totals into a ring of the last
//! [`HISTORY_SECONDS`] samples, from which the 10 s / 60 s / 600 s rates RocketMQ reports are
//! computed, and remembers the totals at the last two local midnights (RocketMQ's "today
//! morning" and "yesterday morning" figures).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Samples kept: enough for the longest rate window (600 s) plus one.
pub const HISTORY_SECONDS: usize = 601;

/// Rate windows RocketMQ reports, in seconds.
pub const RATE_WINDOWS_S: [u64; 3] = [10, 60, 600];

/// One shard's counters. Written only by that shard.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct ShardTraffic {
    /// Records this shard's store appended (published once a second from the store's stats).
    messages_put: AtomicU64,
    /// Messages this shard returned to pulls.
    messages_got: AtomicU64,
    /// Requests handled on the shard whose connection carried them.
    requests_in_place: AtomicU64,
    /// Requests handed to the shard owning their queue.
    requests_forwarded: AtomicU64,
}

/// Adds to a counter that only one thread writes: a plain load and store, no locked
/// instruction (readers on other cores may see a slightly old value, which is fine).
fn bump(counter: &AtomicU64, amount: u64) {
    counter.store(
        counter.load(Ordering::Relaxed).wrapping_add(amount),
        Ordering::Relaxed,
    );
}

impl ShardTraffic {
    /// Counts messages returned by a pull.
    pub fn add_got(&self, messages: u64) {
        bump(&self.messages_got, messages);
    }

    /// Counts a request handled where it arrived.
    pub fn add_in_place(&self) {
        bump(&self.requests_in_place, 1);
    }

    /// Counts a request handed to another shard.
    pub fn add_forwarded(&self) {
        bump(&self.requests_forwarded, 1);
    }

    /// Publishes the store's running total of appended records.
    pub fn set_put(&self, total: u64) {
        self.messages_put.store(total, Ordering::Relaxed);
    }

    /// Requests handled in place and forwarded, as counted so far.
    pub fn requests(&self) -> (u64, u64) {
        (
            self.requests_in_place.load(Ordering::Relaxed),
            self.requests_forwarded.load(Ordering::Relaxed),
        )
    }
}

/// Broker-wide totals at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Messages stored.
    pub put: u64,
    /// Messages delivered to pulls.
    pub got: u64,
    /// Requests handled on the shard they arrived at.
    pub in_place: u64,
    /// Requests that crossed to another shard.
    pub forwarded: u64,
}

#[derive(Clone, Copy, Debug)]
struct Sample {
    at_ms: i64,
    totals: Totals,
}

#[derive(Debug, Default)]
struct History {
    samples: VecDeque<Sample>,
    /// Local day number of the latest sample.
    day: Option<i64>,
    today_morning: Totals,
    yesterday_morning: Totals,
}

/// What GET_BROKER_RUNTIME_INFO reports.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    /// Totals now.
    pub now: Totals,
    /// Totals at the last local midnight (zero if the broker started since).
    pub today_morning: Totals,
    /// Totals at the local midnight before that.
    pub yesterday_morning: Totals,
    /// Stored messages per second over [`RATE_WINDOWS_S`].
    pub put_tps: [f64; 3],
    /// Delivered messages per second over [`RATE_WINDOWS_S`].
    pub got_tps: [f64; 3],
}

/// Every shard's counters and the sampled history.
#[derive(Debug)]
pub struct Traffic {
    slots: Box<[ShardTraffic]>,
    history: Mutex<History>,
}

impl Traffic {
    /// Counters for `shard_count` shards, all zero.
    pub fn new(shard_count: usize) -> Traffic {
        assert!(shard_count >= 1);
        Traffic {
            slots: (0..shard_count).map(|_| ShardTraffic::default()).collect(),
            history: Mutex::new(History::default()),
        }
    }

    /// Shard `index`'s counters.
    pub fn shard(&self, index: usize) -> &ShardTraffic {
        &self.slots[index]
    }

    /// The sum of every shard's counters now.
    pub fn totals(&self) -> Totals {
        let mut totals = Totals::default();
        for slot in self.slots.iter() {
            totals.put += slot.messages_put.load(Ordering::Relaxed);
            totals.got += slot.messages_got.load(Ordering::Relaxed);
            totals.in_place += slot.requests_in_place.load(Ordering::Relaxed);
            totals.forwarded += slot.requests_forwarded.load(Ordering::Relaxed);
        }
        totals
    }

    /// Records the totals at `now_ms`, on local day `day` (see [`local_day`]). Called once a
    /// second by one task.
    pub fn sample(&self, now_ms: i64, day: i64) {
        let totals = self.totals();
        let mut history = self.lock();
        match history.day {
            Some(previous) if previous != day => {
                history.yesterday_morning = history.today_morning;
                history.today_morning = totals;
            }
            _ => {}
        }
        history.day = Some(day);
        if history.samples.len() == HISTORY_SECONDS {
            history.samples.pop_front();
        }
        history.samples.push_back(Sample {
            at_ms: now_ms,
            totals,
        });
    }

    /// The figures as of the latest sample (rates) and now (totals).
    pub fn report(&self) -> Report {
        let history = self.lock();
        let mut report = Report {
            now: self.totals(),
            today_morning: history.today_morning,
            yesterday_morning: history.yesterday_morning,
            ..Report::default()
        };
        let Some(latest) = history.samples.back().copied() else {
            return report;
        };
        for (index, window_s) in RATE_WINDOWS_S.iter().enumerate() {
            let since_ms = latest.at_ms - i64::try_from(*window_s).unwrap_or(i64::MAX) * 1000;
            // The oldest sample inside the window (or the oldest there is, early on).
            let Some(first) = history.samples.iter().find(|s| s.at_ms >= since_ms) else {
                continue;
            };
            let elapsed_s = (latest.at_ms - first.at_ms) as f64 / 1000.0;
            if elapsed_s <= 0.0 {
                continue;
            }
            report.put_tps[index] =
                latest.totals.put.saturating_sub(first.totals.put) as f64 / elapsed_s;
            report.got_tps[index] =
                latest.totals.got.saturating_sub(first.totals.got) as f64 / elapsed_s;
        }
        report
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, History> {
        self.history
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The local calendar day of `epoch_ms` as a number that changes at local midnight.
pub fn local_day(epoch_ms: i64) -> i64 {
    let seconds: libc::time_t = epoch_ms.div_euclid(1000);
    // SAFETY: localtime_r writes only into the `tm` it is given; zeroed `tm` is a valid value.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let converted = unsafe { libc::localtime_r(&seconds, &mut tm) };
    if converted.is_null() {
        return epoch_ms.div_euclid(86_400_000);
    }
    i64::from(tm.tm_year) * 400 + i64::from(tm.tm_yday)
}

/// Formats rates as RocketMQ does: three figures with two decimals, space-separated.
pub fn format_tps(rates: &[f64; 3]) -> String {
    format!("{:.2} {:.2} {:.2}", rates[0], rates[1], rates[2])
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves totals sum every shard and rates come from the sampled history.
    #[test]
    fn rates_follow_the_samples() {
        let traffic = Traffic::new(2);
        traffic.sample(0, 1);
        traffic.shard(0).set_put(100);
        traffic.shard(1).set_put(100);
        traffic.shard(1).add_got(50);
        traffic.sample(10_000, 1);
        let report = traffic.report();
        assert_eq!(report.now.put, 200);
        assert_eq!(report.now.got, 50);
        assert_eq!(report.put_tps, [20.0, 20.0, 20.0]);
        assert_eq!(report.got_tps, [5.0, 5.0, 5.0]);
        assert_eq!(format_tps(&report.put_tps), "20.00 20.00 20.00");
    }

    // Proves the morning figures roll over at a day change.
    #[test]
    fn mornings_roll_at_midnight() {
        let traffic = Traffic::new(1);
        traffic.shard(0).set_put(10);
        traffic.sample(0, 1);
        traffic.shard(0).set_put(30);
        traffic.sample(1000, 2);
        traffic.shard(0).set_put(70);
        traffic.sample(2000, 3);
        let report = traffic.report();
        assert_eq!(report.today_morning.put, 70);
        assert_eq!(report.yesterday_morning.put, 30);
    }

    // Proves the history stays bounded.
    #[test]
    fn history_is_bounded() {
        let traffic = Traffic::new(1);
        for second in 0..(HISTORY_SECONDS as i64 * 2) {
            traffic.sample(second * 1000, 0);
        }
        assert_eq!(traffic.lock().samples.len(), HISTORY_SECONDS);
    }
}
