//! How far a store's open has got, readable from any thread while it runs: the metrics
//! endpoint serves it from shard 0 while every shard opens its stores (a long recovery is
//! otherwise visible only in the log's progress lines).
//!
//! The store writes it from its own shard: at the start of [`crate::Store::open`], once per
//! read of the recovery scan (every [`crate::limits::RECOVERY_READ_BYTES`]), and once when
//! the store is servable. Readers see each figure atomically, not the three as one snapshot;
//! a gauge a read older than another is harmless.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use crate::histogram::RecoveryFigures;

/// One store's open, as far as it has got (see the module docs). Shared by the store and
/// its readers through an `Arc` in [`crate::StoreConfig::recovery_progress`].
#[derive(Debug, Default)]
pub struct RecoveryProgress {
    in_progress: AtomicBool,
    scanned_bytes: AtomicU64,
    target_bytes: AtomicU64,
    duration_ms: AtomicU64,
    started: Mutex<Option<Instant>>,
}

/// What [`RecoveryProgress::status`] reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecoveryStatus {
    /// The store is opening: not yet servable.
    pub in_progress: bool,
    /// Log bytes the recovery scan has read and checked so far; once done, all it checked
    /// (equal to [`RecoveryFigures::scanned_bytes`]).
    pub scanned_bytes: u64,
    /// While scanning, the log bytes from the scan start to the end of the last segment (an
    /// upper bound: valid data usually ends before); 0 before the scan starts; once done,
    /// the bytes scanned.
    pub target_bytes: u64,
    /// The open's time so far while it runs; once done, [`RecoveryFigures::duration_ms`].
    pub duration_ms: u64,
}

impl RecoveryProgress {
    /// What the open has done so far.
    pub fn status(&self) -> RecoveryStatus {
        let in_progress = self.in_progress.load(Ordering::Acquire);
        let duration_ms = if in_progress {
            let started = *self.started.lock().unwrap_or_else(|e| e.into_inner());
            started.map_or(0, |started| {
                let elapsed = comet_rt::clock::monotonic_now().saturating_duration_since(started);
                u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
            })
        } else {
            self.duration_ms.load(Ordering::Relaxed)
        };
        RecoveryStatus {
            in_progress,
            scanned_bytes: self.scanned_bytes.load(Ordering::Relaxed),
            target_bytes: self.target_bytes.load(Ordering::Relaxed),
            duration_ms,
        }
    }

    /// The open started at `now`.
    pub(crate) fn begin(&self, now: Instant) {
        *self.started.lock().unwrap_or_else(|e| e.into_inner()) = Some(now);
        self.scanned_bytes.store(0, Ordering::Relaxed);
        self.target_bytes.store(0, Ordering::Relaxed);
        self.duration_ms.store(0, Ordering::Relaxed);
        self.in_progress.store(true, Ordering::Release);
    }

    /// The scan goes through at most `target_bytes` of log.
    pub(crate) fn scan_target(&self, target_bytes: u64) {
        self.target_bytes.store(target_bytes, Ordering::Relaxed);
    }

    /// The scan has read and checked `scanned_bytes` of log.
    pub(crate) fn scanned(&self, scanned_bytes: u64) {
        self.scanned_bytes.store(scanned_bytes, Ordering::Relaxed);
    }

    /// The store is servable, after the recovery `figures` describe.
    pub(crate) fn finish(&self, figures: &RecoveryFigures) {
        self.scanned_bytes
            .store(figures.scanned_bytes, Ordering::Relaxed);
        self.target_bytes
            .store(figures.scanned_bytes, Ordering::Relaxed);
        self.duration_ms
            .store(figures.duration_ms, Ordering::Relaxed);
        self.in_progress.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the status follows the open: nothing before, in progress with a target and the
    // bytes so far while scanning, and the recovery's own figures once done.
    #[test]
    fn status_follows_the_open() {
        let progress = RecoveryProgress::default();
        assert_eq!(progress.status(), RecoveryStatus::default());
        progress.begin(comet_rt::clock::monotonic_now());
        progress.scan_target(1000);
        progress.scanned(400);
        let status = progress.status();
        assert!(status.in_progress);
        assert_eq!((status.scanned_bytes, status.target_bytes), (400, 1000));
        progress.finish(&RecoveryFigures {
            duration_ms: 7,
            scanned_bytes: 600,
            crashed: false,
        });
        let done = RecoveryStatus {
            in_progress: false,
            scanned_bytes: 600,
            target_bytes: 600,
            duration_ms: 7,
        };
        assert_eq!(progress.status(), done);
    }
}
