//! Progress lines of a long start-up step (store recovery, queue loading, shard start,
//! waiting for the controller): nothing for the first second, then one line a second at
//! most saying which step, how far through its range, how long so far and about how long
//! is left.
//!
//! Sans-I/O: the caller passes the time (`comet_rt::clock::monotonic_now()` in the server
//! crates), so the rule is tested with made-up instants.

use std::fmt;
use std::time::{Duration, Instant};

/// A step logs its progress once it has run this long, then this often.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// One running step.
#[derive(Debug)]
pub struct Progress {
    step: String,
    /// What the range counts ("log position", "queue", "shard"); empty for a wait.
    unit: &'static str,
    from: u64,
    to: u64,
    started: Instant,
    logged: Instant,
}

impl Progress {
    /// A step called `step` (naming its store or shard) going through `[from, to)` of
    /// `unit`s, started at `now`.
    pub fn new(
        step: impl Into<String>,
        unit: &'static str,
        from: u64,
        to: u64,
        now: Instant,
    ) -> Self {
        Progress {
            step: step.into(),
            unit,
            from,
            to,
            started: now,
            logged: now,
        }
    }

    /// A step with no range (a wait, a step that cannot count its work): its lines give
    /// the time so far.
    pub fn waiting(step: impl Into<String>, now: Instant) -> Progress {
        Progress::new(step, "", 0, 0, now)
    }

    /// The line due now that the step reached `position`, if a second has passed since the
    /// start or the last line.
    pub fn at(&mut self, position: u64, now: Instant) -> Option<ProgressLine<'_>> {
        if now.saturating_duration_since(self.logged) < PROGRESS_EVERY {
            return None;
        }
        self.logged = now;
        Some(ProgressLine {
            progress: self,
            position,
            elapsed: now.saturating_duration_since(self.started),
        })
    }

    /// Logs (at info) the line due now, if any; see [`Progress::at`].
    pub fn report(&mut self, position: u64, now: Instant) {
        if let Some(line) = self.at(position, now) {
            line.log();
        }
    }
}

/// One progress line: its text is the message, its figures the line's fields.
#[derive(Debug)]
pub struct ProgressLine<'a> {
    progress: &'a Progress,
    position: u64,
    elapsed: Duration,
}

impl ProgressLine<'_> {
    /// How much of the range is done (`position - from`).
    pub fn done(&self) -> u64 {
        self.position.saturating_sub(self.progress.from)
    }

    /// The range's size.
    pub fn total(&self) -> u64 {
        self.progress.to.saturating_sub(self.progress.from)
    }

    /// Time since the step started.
    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }

    /// About how long is left at the rate so far; `None` before anything is done, or for a
    /// wait.
    pub fn left(&self) -> Option<Duration> {
        let done = self.done();
        if done == 0 || self.total() == 0 {
            return None;
        }
        let left = self.progress.to.saturating_sub(self.position);
        // Precision loss is irrelevant for an estimate.
        #[allow(clippy::cast_precision_loss)]
        let seconds = self.elapsed.as_secs_f64() * left as f64 / done as f64;
        Some(Duration::from_secs_f64(seconds))
    }

    /// Logs the line at info, its figures as fields (`step`, `done`, `total`, `unit`,
    /// `elapsedMs`).
    pub fn log(&self) {
        let elapsed_ms = u64::try_from(self.elapsed.as_millis()).unwrap_or(u64::MAX);
        log::info!(
            step = self.progress.step.as_str(),
            done = self.done(),
            total = self.total(),
            unit = self.progress.unit,
            elapsedMs = elapsed_ms;
            "{self}"
        );
    }
}

impl fmt::Display for ProgressLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let progress = self.progress;
        let elapsed = self.elapsed.as_secs_f64();
        if progress.unit.is_empty() {
            return write!(f, "{}: {elapsed:.1} s so far", progress.step);
        }
        // Precision loss is irrelevant for a share.
        #[allow(clippy::cast_precision_loss)]
        let share = self.done() as f64 * 100.0 / self.total().max(1) as f64;
        write!(
            f,
            "{}: at {} {} of {}..{} ({share:.1}%), {elapsed:.1} s so far",
            progress.step, progress.unit, self.position, progress.from, progress.to
        )?;
        match self.left() {
            Some(left) => write!(f, ", about {:.1} s left", left.as_secs_f64()),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the rule: silent for the first second, then at most one line a second (never
    // two within one), each with the figures reached and an estimate from the rate so far.
    #[test]
    fn lines_come_after_a_second_then_once_a_second() {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let mut progress = Progress::new(
            "store /s log 0: recovery scan",
            "log position",
            100,
            1100,
            start,
        );
        assert!(progress.at(150, at(10)).is_none());
        assert!(progress.at(300, at(999)).is_none());
        let line = progress.at(350, at(1000)).expect("due after a second");
        assert_eq!(line.done(), 250);
        assert_eq!(line.total(), 1000);
        assert_eq!(line.elapsed(), Duration::from_secs(1));
        assert_eq!(line.left(), Some(Duration::from_secs(3)));
        assert_eq!(
            line.to_string(),
            "store /s log 0: recovery scan: at log position 350 of 100..1100 (25.0%), \
             1.0 s so far, about 3.0 s left"
        );
        assert!(progress.at(400, at(1500)).is_none());
        assert!(progress.at(500, at(1999)).is_none());
        let line = progress
            .at(600, at(2000))
            .expect("due a second after the last line");
        assert_eq!(line.done(), 500);
        // A clock that went backwards logs nothing rather than panicking.
        assert!(progress.at(700, at(100)).is_none());
    }

    // Proves a wait says how long it has waited and estimates nothing.
    #[test]
    fn a_wait_reports_the_time_waited() {
        let start = Instant::now();
        let mut progress = Progress::waiting("waiting for the controller", start);
        let line = progress.at(0, start + Duration::from_millis(2500)).unwrap();
        assert_eq!(line.left(), None);
        assert_eq!(line.to_string(), "waiting for the controller: 2.5 s so far");
    }

    // Proves nothing done yet gives no estimate instead of a division by zero.
    #[test]
    fn no_estimate_before_progress() {
        let start = Instant::now();
        let mut progress = Progress::new("opening", "queue", 0, 10, start);
        let line = progress.at(0, start + PROGRESS_EVERY).unwrap();
        assert_eq!(line.left(), None);
        assert!(line.to_string().ends_with("1.0 s so far"), "{line}");
    }
}
