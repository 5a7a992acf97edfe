//! Latency-based fault tolerance for the producer, as the Java `MQFaultStrategy`.
//!
//! After every send the producer reports the broker's latency. A slow or failed broker is
//! sidelined for a while; queue selection skips sidelined brokers and the broker that just
//! failed, and falls back to any queue when nothing else is left (a single-broker cluster
//! keeps sending through its own hiccups).
//!
//! | send latency at least (ms) | 50 | 100 | 550 | 1000 | 2000 | 3000 | 15000 |
//! |----------------------------|----|-----|-----|------|------|------|-------|
//! | sidelined for (ms)         | 0  | 0   | 30000 | 60000 | 120000 | 180000 | 600000 |
//!
//! A failed send (isolation) counts as a 10,000 ms latency, so it sidelines the broker for
//! 180 s, as the 5.x client does. Time is passed in by the caller, so the rules are pure and
//! testable.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Latency thresholds in ms, ascending.
pub const LATENCY_MAX_MS: [u64; 7] = [50, 100, 550, 1000, 2000, 3000, 15000];
/// How long a broker is sidelined for each threshold, in ms.
pub const NOT_AVAILABLE_DURATION_MS: [u64; 7] = [0, 0, 30000, 60000, 120000, 180000, 600000];
/// The latency a failed send counts as.
pub const ISOLATION_LATENCY_MS: u64 = 10_000;

/// How long a send of `latency_ms` sidelines its broker.
pub fn not_available_duration(latency_ms: u64) -> Duration {
    let index = LATENCY_MAX_MS
        .iter()
        .rposition(|threshold| latency_ms >= *threshold);
    Duration::from_millis(index.map_or(0, |index| NOT_AVAILABLE_DURATION_MS[index]))
}

#[derive(Clone, Copy, Debug)]
struct FaultItem {
    latency_ms: u64,
    available_at: Instant,
}

/// Per-broker fault records. Thread-safe.
#[derive(Default)]
pub struct LatencyFaultTolerance {
    items: Mutex<HashMap<String, FaultItem>>,
}

impl LatencyFaultTolerance {
    /// Records a send to `broker_name` that took `latency_ms` (or failed, `isolation`).
    pub fn update(&self, broker_name: &str, latency_ms: u64, isolation: bool, now: Instant) {
        let latency_ms = if isolation {
            ISOLATION_LATENCY_MS
        } else {
            latency_ms
        };
        let item = FaultItem {
            latency_ms,
            available_at: now + not_available_duration(latency_ms),
        };
        self.lock().insert(broker_name.to_owned(), item);
    }

    /// True unless `broker_name` is sidelined at `now`.
    pub fn is_available(&self, broker_name: &str, now: Instant) -> bool {
        self.lock()
            .get(broker_name)
            .is_none_or(|item| now >= item.available_at)
    }

    /// The broker with the lowest latency among the sidelined ones, a last resort.
    pub fn least_bad(&self) -> Option<String> {
        self.lock()
            .iter()
            .min_by_key(|(_, item)| (item.available_at, item.latency_ms))
            .map(|(name, _)| name.clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, FaultItem>> {
        self.items
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }
}

/// Picks one queue index out of `len`, starting at `counter`, preferring queues whose
/// broker passes `available` and is not `avoid`; then any queue not on `avoid`; then the
/// next queue. `broker_of(i)` names the broker of queue `i`. Returns `None` only when
/// `len == 0`.
pub fn select_queue(
    len: usize,
    counter: usize,
    broker_of: impl Fn(usize) -> String,
    avoid: Option<&str>,
    available: impl Fn(&str) -> bool,
) -> Option<usize> {
    if len == 0 {
        return None;
    }
    let not_avoided = |broker: &str| avoid != Some(broker);
    let scan = |accept: &dyn Fn(&str) -> bool| {
        (0..len)
            .map(|step| counter.wrapping_add(step) % len)
            .find(|index| accept(&broker_of(*index)))
    };
    scan(&|broker| not_avoided(broker) && available(broker))
        .or_else(|| scan(&|broker| available(broker)))
        .or_else(|| scan(&not_avoided))
        .or(Some(counter % len))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the latency table: below 550 ms nothing is sidelined, thresholds are inclusive,
    // and a failure sidelines for 180 s.
    #[test]
    fn durations_follow_the_table() {
        assert_eq!(not_available_duration(0), Duration::ZERO);
        assert_eq!(not_available_duration(549), Duration::ZERO);
        assert_eq!(not_available_duration(550), Duration::from_secs(30));
        assert_eq!(not_available_duration(2999), Duration::from_secs(120));
        assert_eq!(not_available_duration(20_000), Duration::from_secs(600));
        let faults = LatencyFaultTolerance::default();
        let now = Instant::now();
        faults.update("a", 0, true, now);
        assert!(!faults.is_available("a", now + Duration::from_secs(179)));
        assert!(faults.is_available("a", now + Duration::from_secs(180)));
        assert!(faults.is_available("never-seen", now));
    }

    // Proves selection skips the sidelined broker and the one that just failed, rotates with
    // the counter, and falls back when every broker is excluded.
    #[test]
    fn selection_skips_bad_brokers_and_falls_back() {
        let brokers = ["a", "a", "b", "b", "c", "c"];
        let broker_of = |i: usize| brokers[i].to_owned();
        let sidelined_b = |broker: &str| broker != "b";
        let picked = select_queue(6, 2, broker_of, None, sidelined_b).unwrap();
        assert_eq!(brokers[picked], "c");
        let picked = select_queue(6, 4, broker_of, Some("c"), sidelined_b).unwrap();
        assert_eq!(brokers[picked], "a");
        // Everything sidelined and the only broker just failed: still a queue.
        let single = |_: usize| "a".to_owned();
        assert_eq!(select_queue(4, 5, single, Some("a"), |_| false), Some(1));
        assert_eq!(select_queue(0, 5, single, None, |_| true), None);
        // Round robin over healthy queues.
        let picks: Vec<usize> = (0..6)
            .map(|counter| select_queue(6, counter, broker_of, None, |_| true).unwrap())
            .collect();
        assert_eq!(picks, vec![0, 1, 2, 3, 4, 5]);
    }
}
