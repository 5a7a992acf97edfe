//! Recording: counters and latency histograms filled by many threads, collected once per
//! progress interval.
//!
//! Recording threads write into one of [`RECORDER_STRIPES`] histograms, chosen per thread,
//! each behind its own mutex; the only other party taking that mutex is the collector, once
//! a second. So a record is an uncontended lock and an array increment, which keeps the
//! bench's own cost per message far below the broker's.
//!
//! The collector moves the stripes' samples into an *interval* histogram (the progress
//! line's p50/p99 of the last second), then adds the interval into the run's *total*
//! histogram and resets it. No sample is lost or counted twice: a sample lives in exactly
//! one stripe until a collection moves it.

use std::cell::Cell;
use std::fmt::Display;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::error::{BenchError, Result};
use crate::limits::{HISTOGRAM_SIGNIFICANT_DIGITS, LATENCY_US_MAX, RECORDER_STRIPES};

/// A histogram of latencies in microseconds with the bench's bounds.
pub fn new_histogram() -> Result<Histogram<u64>> {
    Histogram::new_with_bounds(1, LATENCY_US_MAX, HISTOGRAM_SIGNIFICANT_DIGITS)
        .map_err(|error| BenchError::Histogram(error.to_string()))
}

/// Whole microseconds of `duration`, saturating.
pub fn duration_us(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

/// Totals of a phase at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Messages that succeeded (sent and acknowledged, or received).
    pub messages: u64,
    /// Requests that succeeded (a batch is one request).
    pub requests: u64,
    /// Body bytes of the successful messages.
    pub bytes: u64,
    /// Failed requests.
    pub errors: u64,
}

/// The shared recording target of one phase (sending or receiving).
pub struct Stats {
    stripes: Vec<Mutex<Histogram<u64>>>,
    messages: AtomicU64,
    requests: AtomicU64,
    bytes: AtomicU64,
    errors: AtomicU64,
    first_error: Mutex<Option<String>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

thread_local! {
    static STRIPE: Cell<Option<usize>> = const { Cell::new(None) };
}
static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);

/// This thread's stripe: assigned round-robin on first use, then fixed.
fn stripe_index() -> usize {
    STRIPE.with(|cell| match cell.get() {
        Some(index) => index,
        None => {
            let index = NEXT_STRIPE.fetch_add(1, Ordering::Relaxed) % RECORDER_STRIPES;
            cell.set(Some(index));
            index
        }
    })
}

impl Stats {
    /// Empty counters and histograms.
    pub fn new() -> Result<Arc<Stats>> {
        let stripes = (0..RECORDER_STRIPES)
            .map(|_| new_histogram().map(Mutex::new))
            .collect::<Result<Vec<_>>>()?;
        Ok(Arc::new(Stats {
            stripes,
            messages: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            first_error: Mutex::new(None),
        }))
    }

    /// A successful request of `messages` messages and `bytes` body bytes.
    pub fn record_ok(&self, latency: Duration, messages: u64, bytes: u64) {
        lock(&self.stripes[stripe_index()]).saturating_record(duration_us(latency).max(1));
        self.messages.fetch_add(messages, Ordering::Relaxed);
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// One latency sample without counting a request (a received message of a batch).
    pub fn record_latency(&self, latency_us: u64) {
        lock(&self.stripes[stripe_index()]).saturating_record(latency_us.max(1));
    }

    /// Counts received messages without latency samples.
    pub fn count_received(&self, messages: u64, bytes: u64) {
        self.messages.fetch_add(messages, Ordering::Relaxed);
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// A failed request; the first error's text is kept for the report.
    pub fn record_error(&self, error: &dyn Display) {
        let previous = self.errors.fetch_add(1, Ordering::Relaxed);
        if previous == 0 {
            let mut first = lock(&self.first_error);
            first.get_or_insert_with(|| error.to_string());
        }
    }

    /// The counters now.
    pub fn counters(&self) -> Counters {
        Counters {
            messages: self.messages.load(Ordering::Relaxed),
            requests: self.requests.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
        }
    }

    /// The first error seen, if any.
    pub fn first_error(&self) -> Option<String> {
        lock(&self.first_error).clone()
    }

    /// Moves every recorded sample into `target`.
    fn drain_into(&self, target: &mut Histogram<u64>) -> Result<()> {
        for stripe in &self.stripes {
            let mut stripe = lock(stripe);
            target
                .add(&*stripe)
                .map_err(|error| BenchError::Histogram(format!("{error:?}")))?;
            stripe.reset();
        }
        Ok(())
    }
}

/// One progress interval of one phase.
#[derive(Clone, Debug, PartialEq)]
pub struct Interval {
    /// Seconds since the phase started.
    pub elapsed_s: f64,
    /// Messages per second over the interval.
    pub msgs_per_s: f64,
    /// Body MB (10^6 bytes) per second over the interval.
    pub mb_per_s: f64,
    /// Errors during the interval.
    pub errors: u64,
    /// Median latency of the interval's samples (0 when none).
    pub p50_us: u64,
    /// 99th percentile of the interval's samples (0 when none).
    pub p99_us: u64,
}

/// Collects a phase's [`Stats`] into interval and total histograms.
pub struct Collector {
    stats: Arc<Stats>,
    started: Instant,
    total: Histogram<u64>,
    interval: Histogram<u64>,
    last: Counters,
    last_at: Instant,
}

impl Collector {
    /// A collector of `stats` for a phase that started at `started`.
    pub fn new(stats: Arc<Stats>, started: Instant) -> Result<Collector> {
        Ok(Collector {
            stats,
            started,
            total: new_histogram()?,
            interval: new_histogram()?,
            last: Counters::default(),
            last_at: started,
        })
    }

    /// Closes the interval ending at `now`: moves its samples into the total and returns
    /// its figures.
    pub fn tick(&mut self, now: Instant) -> Result<Interval> {
        self.stats.drain_into(&mut self.interval)?;
        let counters = self.stats.counters();
        let seconds = now.saturating_duration_since(self.last_at).as_secs_f64();
        let rate = |delta: u64| {
            if seconds > 0.0 {
                delta as f64 / seconds
            } else {
                0.0
            }
        };
        let (p50_us, p99_us) = if self.interval.is_empty() {
            (0, 0)
        } else {
            (
                self.interval.value_at_quantile(0.5),
                self.interval.value_at_quantile(0.99),
            )
        };
        let interval = Interval {
            elapsed_s: now.saturating_duration_since(self.started).as_secs_f64(),
            msgs_per_s: rate(counters.messages - self.last.messages),
            mb_per_s: rate(counters.bytes - self.last.bytes) / 1e6,
            errors: counters.errors - self.last.errors,
            p50_us,
            p99_us,
        };
        self.total
            .add(&self.interval)
            .map_err(|error| BenchError::Histogram(format!("{error:?}")))?;
        self.interval.reset();
        self.last = counters;
        self.last_at = now;
        Ok(interval)
    }

    /// Collects what is left and returns the phase's totals and histogram.
    pub fn finish(mut self, now: Instant) -> Result<(Counters, Histogram<u64>, Option<String>)> {
        self.tick(now)?;
        Ok((self.last, self.total, self.stats.first_error()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves that samples recorded from many threads all reach the total exactly once,
    // across several collections, and that intervals report only their own samples.
    #[test]
    fn collection_moves_each_sample_once() {
        let stats = Stats::new().unwrap();
        let start = Instant::now();
        let mut collector = Collector::new(stats.clone(), start).unwrap();
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let stats = stats.clone();
                std::thread::spawn(move || {
                    for us in 1..=1000u64 {
                        stats.record_ok(Duration::from_micros(us), 1, 100);
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        let first = collector.tick(start + Duration::from_secs(1)).unwrap();
        assert_eq!(first.msgs_per_s, 4000.0);
        assert_eq!(first.mb_per_s, 0.4);
        assert_eq!(first.p50_us, 500);
        stats.record_ok(Duration::from_millis(7), 1, 100);
        stats.record_error(&"boom");
        stats.record_error(&"later");
        let second = collector.tick(start + Duration::from_secs(2)).unwrap();
        assert_eq!(
            (second.errors, second.p50_us, second.p99_us),
            (2, 7003, 7003)
        );
        let (counters, total, first_error) =
            collector.finish(start + Duration::from_secs(3)).unwrap();
        assert_eq!(total.len(), 4001);
        assert_eq!(counters.messages, 4001);
        assert_eq!(counters.bytes, 400_100);
        assert_eq!(counters.errors, 2);
        assert_eq!(first_error.as_deref(), Some("boom"));
    }

    // Proves that latencies beyond the histogram's bound saturate instead of being dropped
    // or panicking, and that zero becomes the 1 µs floor.
    #[test]
    fn extreme_latencies_saturate() {
        let stats = Stats::new().unwrap();
        let collector = Collector::new(stats.clone(), Instant::now()).unwrap();
        stats.record_ok(Duration::from_secs(100_000), 1, 1);
        stats.record_ok(Duration::ZERO, 1, 1);
        let (_, total, _) = collector.finish(Instant::now()).unwrap();
        assert_eq!(total.len(), 2);
        assert!(total.max() >= LATENCY_US_MAX - LATENCY_US_MAX / 1000);
        assert_eq!(total.min(), 1);
    }
}
