//! When a run stops sending: after a duration, after an exact number of messages, or at
//! whichever of the two comes first.
//!
//! Senders *claim* messages before sending them, so with `--messages N` exactly N are
//! attempted, however many threads race for the last ones. A claim may be cut short: a
//! batch of 32 with 10 messages left becomes a batch of 10.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The shared stop rule of one run.
#[derive(Debug)]
pub struct FinishCondition {
    deadline: Option<Instant>,
    messages: Option<u64>,
    claimed: AtomicU64,
    stopped: AtomicBool,
}

impl FinishCondition {
    /// Stops at `start + duration` and/or after `messages` messages; with neither, the run
    /// lasts until [`FinishCondition::stop`].
    pub fn new(start: Instant, duration: Option<Duration>, messages: Option<u64>) -> Self {
        FinishCondition {
            deadline: duration.map(|duration| start + duration),
            messages,
            claimed: AtomicU64::new(0),
            stopped: AtomicBool::new(false),
        }
    }

    /// Claims up to `wanted` messages (at least 1 is asked); returns how many the caller
    /// may send, or `None` when the run is over.
    pub fn claim(&self, wanted: u64) -> Option<u64> {
        assert!(wanted > 0, "a claim asks for at least one message");
        if self.is_over_at(Instant::now()) {
            return None;
        }
        let Some(limit) = self.messages else {
            self.claimed.fetch_add(wanted, Ordering::Relaxed);
            return Some(wanted);
        };
        let mut current = self.claimed.load(Ordering::Relaxed);
        loop {
            if current >= limit {
                return None;
            }
            let granted = wanted.min(limit - current);
            match self.claimed.compare_exchange_weak(
                current,
                current + granted,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(granted),
                Err(actual) => current = actual,
            }
        }
    }

    /// True once the deadline passed, the message budget is spent, or `stop` was called.
    pub fn is_over_at(&self, now: Instant) -> bool {
        self.stopped.load(Ordering::Relaxed)
            || self.deadline.is_some_and(|deadline| now >= deadline)
            || self
                .messages
                .is_some_and(|limit| self.claimed.load(Ordering::Relaxed) >= limit)
    }

    /// Ends the run early (Ctrl-C, a fatal error).
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
    }

    /// The message budget, if any.
    pub fn messages(&self) -> Option<u64> {
        self.messages
    }

    /// Messages claimed so far.
    pub fn claimed(&self) -> u64 {
        self.claimed.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    // Proves that a message budget is honoured exactly under concurrent claims, including a
    // final partial batch.
    #[test]
    fn message_budget_is_exact() {
        let finish = Arc::new(FinishCondition::new(Instant::now(), None, Some(10_007)));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let finish = finish.clone();
                std::thread::spawn(move || {
                    let mut total = 0;
                    while let Some(granted) = finish.claim(32) {
                        assert!((1..=32).contains(&granted));
                        total += granted;
                    }
                    total
                })
            })
            .collect();
        let total: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(total, 10_007);
        assert_eq!(finish.claim(1), None);
        assert!(finish.is_over_at(Instant::now()));
    }

    // Proves that a deadline ends the run and that `stop` ends it early.
    #[test]
    fn deadline_and_stop_end_the_run() {
        let start = Instant::now();
        let finish = FinishCondition::new(start, Some(Duration::from_millis(30)), None);
        assert_eq!(finish.claim(4), Some(4));
        assert!(!finish.is_over_at(start + Duration::from_millis(29)));
        assert!(finish.is_over_at(start + Duration::from_millis(30)));
        std::thread::sleep(Duration::from_millis(35));
        assert_eq!(finish.claim(1), None);
        let open = FinishCondition::new(start, None, None);
        assert_eq!(open.claim(1), Some(1));
        open.stop();
        assert_eq!(open.claim(1), None);
    }
}
