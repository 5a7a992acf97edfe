//! Progress lines of the broker's start-up steps that take more than a second
//! (docs/operations.md#logs), using `comet_log::progress`:
//!
//! - [`BlockingStep`]: a step the main thread runs in one blocking call (moving queues to a
//!   new core count, loading the metadata files): a helper thread says once a second how long
//!   it has taken, until the step ends.
//! - [`ShardSteps`]: the steps of one shard's start (opening its stores, loading offsets,
//!   waiting for the other shards, starting replication): a task on the shard says once a
//!   second which step it is in. The store's recovery also logs its own figures (log
//!   positions scanned, queues opened).

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::mpsc;
use std::time::Duration;

use comet_log::progress::Progress;
use comet_rt::clock::monotonic_now;
use comet_rt::local::LocalTask;
use comet_rt::ShardId;

/// How often a watcher looks at its step: well under the one-second line interval, so a line
/// is late by at most this much.
const LOOK_EVERY: Duration = Duration::from_millis(200);

/// A blocking start-up step watched from a helper thread; dropping it ends the watch.
pub struct BlockingStep {
    done: Option<mpsc::Sender<()>>,
    watcher: Option<std::thread::JoinHandle<()>>,
}

impl BlockingStep {
    /// Starts watching the step called `step`. When the helper thread cannot be started the
    /// step simply runs unwatched: its progress lines are a convenience, not a requirement.
    pub fn start(step: String) -> BlockingStep {
        let (done, ended) = mpsc::channel::<()>();
        let watcher = std::thread::Builder::new()
            .name("comet-start".to_owned())
            .spawn(move || {
                let mut progress = Progress::waiting(step, monotonic_now());
                while let Err(mpsc::RecvTimeoutError::Timeout) = ended.recv_timeout(LOOK_EVERY) {
                    progress.report(0, monotonic_now());
                }
            });
        BlockingStep {
            done: Some(done),
            watcher: watcher.ok(),
        }
    }
}

impl Drop for BlockingStep {
    fn drop(&mut self) {
        drop(self.done.take());
        if let Some(watcher) = self.watcher.take() {
            let _ = watcher.join();
        }
    }
}

/// Runs `step` (named `name`) with a [`BlockingStep`] watching it.
pub fn watched<T>(name: impl Into<String>, step: impl FnOnce() -> T) -> T {
    let _watch = BlockingStep::start(name.into());
    step()
}

/// The start-up steps of one shard, said once a second after the first by a task on the
/// shard (it runs whenever the step yields); dropping it ends the task.
pub struct ShardSteps {
    shard: ShardId,
    current: Rc<RefCell<Progress>>,
    _ticker: LocalTask<()>,
}

impl ShardSteps {
    /// Starts watching shard `shard`'s start, in its first step `first`.
    pub fn start(shard: ShardId, first: &str) -> ShardSteps {
        let current = Rc::new(RefCell::new(Progress::waiting(
            step_name(shard, first),
            monotonic_now(),
        )));
        let ticker = comet_rt::local::spawn({
            let current = current.clone();
            async move {
                loop {
                    comet_rt::local::sleep(LOOK_EVERY).await;
                    current.borrow_mut().report(0, monotonic_now());
                }
            }
        });
        ShardSteps {
            shard,
            current,
            _ticker: ticker,
        }
    }

    /// The shard moved on to step `step`.
    pub fn step(&self, step: &str) {
        *self.current.borrow_mut() =
            Progress::waiting(step_name(self.shard, step), monotonic_now());
    }
}

fn step_name(shard: ShardId, step: &str) -> String {
    format!("{shard} starting: {step}")
}
