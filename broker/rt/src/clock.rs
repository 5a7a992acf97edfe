//! Time. Code outside this module asks the clock, never the system directly, so that a
//! simulation can drive time.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch: RocketMQ's timestamps (born, store, due times).
pub fn wall_clock_ms() -> i64 {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX)
}

/// A monotonic instant, for timeouts and intervals.
pub fn monotonic_now() -> Instant {
    Instant::now()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the wall clock is in milliseconds of this century, not seconds or micros.
    #[test]
    fn wall_clock_is_milliseconds() {
        let now = wall_clock_ms();
        assert!(now > 1_600_000_000_000 && now < 4_100_000_000_000, "{now}");
    }
}
