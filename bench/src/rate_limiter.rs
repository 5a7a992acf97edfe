//! Open-loop send schedule: the `i`-th send of a run is due at `start + i / rate`.
//!
//! Senders claim slots from one shared counter, so the schedule is global however many
//! threads share it, and every slot has an *intended* time fixed in advance. A sender that
//! falls behind (the broker stalled, every thread was busy) still gets the old intended
//! times of the slots it claims, never "now": latency measured from the intended time then
//! includes the time the send spent waiting to be issued. That is what keeps coordinated
//! omission out of the percentiles (a closed loop would send fewer messages during a stall
//! and so record fewer slow samples).
//!
//! Invariant: `intended(i) <= intended(i + 1)`, and `intended(0) == start`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::error::{BenchError, Result};

/// A fixed-rate schedule shared by all senders of a run.
#[derive(Debug)]
pub struct RateLimiter {
    start: Instant,
    interval_ns: f64,
    next_slot: AtomicU64,
}

impl RateLimiter {
    /// A schedule of `per_second` slots per second starting at `start`. The rate must be
    /// finite and positive.
    pub fn new(start: Instant, per_second: f64) -> Result<RateLimiter> {
        if !per_second.is_finite() || per_second <= 0.0 {
            return Err(BenchError::Args(format!(
                "rate must be a positive number of messages per second, not {per_second}"
            )));
        }
        let interval_ns = 1e9 / per_second;
        assert!(interval_ns.is_finite() && interval_ns > 0.0);
        Ok(RateLimiter {
            start,
            interval_ns,
            next_slot: AtomicU64::new(0),
        })
    }

    /// The intended time of slot `slot`.
    pub fn intended(&self, slot: u64) -> Instant {
        // f64 keeps integer nanoseconds exact up to 2^53 ns (104 days), far beyond a run.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let offset_ns = (slot as f64 * self.interval_ns).round() as u64;
        self.start + Duration::from_nanos(offset_ns)
    }

    /// Claims the next slot and returns its intended time, which may lie in the past when
    /// senders are behind schedule.
    pub fn claim(&self) -> Instant {
        let slot = self.next_slot.fetch_add(1, Ordering::Relaxed);
        self.intended(slot)
    }

    /// Slots claimed so far.
    pub fn claimed(&self) -> u64 {
        self.next_slot.load(Ordering::Relaxed)
    }
}

/// Sleeps until `deadline`; returns at once when it has passed.
pub fn sleep_until(deadline: Instant) {
    let now = Instant::now();
    if deadline > now {
        std::thread::sleep(deadline - now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::sync::Arc;

    // Proves the schedule: slot i is due exactly i/rate after the start, for whole and
    // fractional rates.
    #[test]
    fn slots_are_evenly_spaced_from_the_start() {
        let start = Instant::now();
        let limiter = RateLimiter::new(start, 1000.0).unwrap();
        assert_eq!(limiter.intended(0), start);
        assert_eq!(limiter.intended(1), start + Duration::from_millis(1));
        assert_eq!(limiter.intended(1000), start + Duration::from_secs(1));
        assert_eq!(
            limiter.intended(2_500_000),
            start + Duration::from_secs(2500)
        );
        let slow = RateLimiter::new(start, 0.5).unwrap();
        assert_eq!(slow.intended(3), start + Duration::from_secs(6));
        let odd = RateLimiter::new(start, 3.0).unwrap();
        assert_eq!(odd.intended(1), start + Duration::from_nanos(333_333_333));
        assert_eq!(odd.intended(3), start + Duration::from_secs(1));
    }

    // Proves that concurrent claims hand out every slot exactly once, so N threads together
    // keep one global schedule.
    #[test]
    fn concurrent_claims_take_distinct_slots() {
        let start = Instant::now();
        let limiter = Arc::new(RateLimiter::new(start, 1_000_000.0).unwrap());
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let limiter = limiter.clone();
                std::thread::spawn(move || (0..1000).map(|_| limiter.claim()).collect::<Vec<_>>())
            })
            .collect();
        let mut seen = BTreeSet::new();
        for thread in threads {
            for instant in thread.join().unwrap() {
                assert!(seen.insert(instant - start), "slot handed out twice");
            }
        }
        assert_eq!(seen.len(), 8000);
        assert_eq!(limiter.claimed(), 8000);
        assert_eq!(
            *seen.iter().next_back().unwrap(),
            Duration::from_nanos(7_999_000)
        );
    }

    // Proves the coordinated-omission property: a sender that falls behind gets the old
    // intended times (in the past), not the current time, so its latency includes the delay.
    #[test]
    fn late_claims_keep_their_intended_time() {
        let start = Instant::now();
        let limiter = RateLimiter::new(start, 10_000.0).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let now = Instant::now();
        let first = limiter.claim();
        let second = limiter.claim();
        assert_eq!(first, start);
        assert_eq!(second, start + Duration::from_micros(100));
        assert!(now - second >= Duration::from_millis(19));
        sleep_until(first);
        assert!(Instant::now() >= now);
    }

    // Proves that zero, negative, infinite and NaN rates are refused with a typed error.
    #[test]
    fn invalid_rates_are_refused() {
        for rate in [0.0, -1.0, f64::INFINITY, f64::NAN] {
            assert!(matches!(
                RateLimiter::new(Instant::now(), rate),
                Err(BenchError::Args(_))
            ));
        }
    }
}
