//! The kinds of run, and what they share: the progress loop.
//!
//! Each kind prepares clients, then hands its work to [`with_progress`], which runs it on a
//! scoped thread while the calling thread prints one progress line per second from the
//! phases' [`Collector`]s. A kind returns an [`Outcome`] for the report.

pub mod consume;
pub mod e2e;
pub mod pop;
pub mod produce;

use std::sync::mpsc;
use std::time::Instant;

use crate::args::{Cli, Command};
use crate::error::Result;
use crate::limits::PROGRESS_INTERVAL;
use crate::report::Outcome;
use crate::stats::{Collector, Interval};
use crate::summary::format_us;

/// Runs the command of `cli` (the canonical workload when there is none).
pub fn run(cli: &Cli) -> Result<Outcome> {
    let command = cli.command.clone().unwrap_or_else(Command::canonical);
    match &command {
        Command::Produce(args) => produce::run(cli, args),
        Command::Consume(args) => consume::run(cli, args),
        Command::E2e(args) => e2e::run(cli, args),
        Command::Pop(args) => pop::run(cli, args),
    }
}

/// Runs `work` on its own thread and prints a progress line per second for `phases` (label
/// and collector) until it returns.
pub fn with_progress<R: Send>(
    phases: &mut [(&str, Collector)],
    quiet: bool,
    work: impl FnOnce() -> R + Send,
) -> Result<R> {
    std::thread::scope(|scope| {
        let (done_sender, done_receiver) = mpsc::channel::<()>();
        let worker = scope.spawn(move || {
            let outcome = work();
            let _ = done_sender.send(());
            outcome
        });
        let mut next_tick = Instant::now() + PROGRESS_INTERVAL;
        loop {
            let wait = next_tick.saturating_duration_since(Instant::now());
            match done_receiver.recv_timeout(wait) {
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
            let now = Instant::now();
            let mut line = String::new();
            for (label, collector) in phases.iter_mut() {
                let interval = collector.tick(now)?;
                line.push_str(&progress_part(label, &interval));
            }
            if !quiet {
                println!("{line}");
            }
            next_tick += PROGRESS_INTERVAL;
        }
        match worker.join() {
            Ok(outcome) => Ok(outcome),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

/// `[  3.0s] send 10234 msg/s 10.5 MB/s err 0 p50 1.20 ms p99 4.10 ms `
fn progress_part(label: &str, interval: &Interval) -> String {
    format!(
        "[{:6.1}s] {label} {:8.0} msg/s {:7.2} MB/s err {} p50 {} p99 {}  ",
        interval.elapsed_s,
        interval.msgs_per_s,
        interval.mb_per_s,
        interval.errors,
        format_us(interval.p50_us),
        format_us(interval.p99_us)
    )
}
