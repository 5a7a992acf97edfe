//! Task classes: every glommio task queue Comet uses, with its shares and latency class, and
//! the spawn, sleep and timeout functions the rest of the workspace calls.
//!
//! On one core the scheduler is ours. Without classes a long-poll burst, a retention sweep or
//! a name-server table rebuild could starve request handling; with them each class gets CPU in
//! proportion to its shares whenever several are runnable. Queues are created lazily, once per
//! executor thread, the first time a class is used on it.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use glommio::{Latency, Shares, TaskQueueHandle};

/// A named scheduling class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TaskClass {
    /// Connection readers and writers and request processors: the front door. High shares and
    /// a latency bound, because every client request waits on them.
    Request,
    /// Commit-log appends: producers wait on these; as important as requests.
    Produce,
    /// Pull and long-poll reads: its own queue (as in Redpanda) so that a burst of consumers
    /// catching up cannot starve appends.
    Pull,
    /// Master to slave streaming: must keep up, but a lagging slave is not a client error.
    Replication,
    /// Flush and fdatasync: short, latency-bound, gate acknowledgements under SYNC_FLUSH.
    Flush,
    /// Building consume-queue and index entries from the commit log: throughput work that
    /// only has to keep pace with appends.
    Dispatch,
    /// Deleting expired segments: background, may take long, must never be in the way.
    Retention,
    /// Admin and metadata requests, registration with name servers: rare, not latency bound.
    Admin,
    /// The name server's route table when embedded in a broker: small, answers route queries.
    NameServer,
    /// Periodic scans (liveness, idle connections, stats): cheap and unhurried.
    Housekeeping,
}

impl TaskClass {
    /// Every class, in table order.
    pub const ALL: [TaskClass; 10] = [
        TaskClass::Request,
        TaskClass::Produce,
        TaskClass::Pull,
        TaskClass::Replication,
        TaskClass::Flush,
        TaskClass::Dispatch,
        TaskClass::Retention,
        TaskClass::Admin,
        TaskClass::NameServer,
        TaskClass::Housekeeping,
    ];

    /// CPU shares when several classes are runnable (relative weights).
    pub const fn shares(self) -> usize {
        match self {
            TaskClass::Request | TaskClass::Produce => 1000,
            TaskClass::Flush => 800,
            TaskClass::Pull => 600,
            TaskClass::Replication | TaskClass::Dispatch => 400,
            TaskClass::NameServer => 300,
            TaskClass::Admin => 200,
            TaskClass::Retention | TaskClass::Housekeeping => 50,
        }
    }

    /// The latency bound of the class, if it has one: glommio preempts other queues at least
    /// this often while the class has work.
    pub const fn latency_bound(self) -> Option<Duration> {
        match self {
            TaskClass::Request | TaskClass::Produce | TaskClass::Flush => {
                Some(Duration::from_millis(1))
            }
            TaskClass::Pull | TaskClass::Replication | TaskClass::NameServer => {
                Some(Duration::from_millis(5))
            }
            TaskClass::Dispatch
            | TaskClass::Retention
            | TaskClass::Admin
            | TaskClass::Housekeeping => None,
        }
    }

    /// The queue's name in glommio statistics.
    pub const fn name(self) -> &'static str {
        match self {
            TaskClass::Request => "request",
            TaskClass::Produce => "produce",
            TaskClass::Pull => "pull",
            TaskClass::Replication => "replication",
            TaskClass::Flush => "flush",
            TaskClass::Dispatch => "dispatch",
            TaskClass::Retention => "retention",
            TaskClass::Admin => "admin",
            TaskClass::NameServer => "nameserver",
            TaskClass::Housekeeping => "housekeeping",
        }
    }

    fn index(self) -> usize {
        let index = TaskClass::ALL.iter().position(|class| *class == self);
        index.expect("every class is in ALL")
    }
}

thread_local! {
    static QUEUES: RefCell<Option<Vec<TaskQueueHandle>>> = const { RefCell::new(None) };
}

/// True when the calling task runs in `class`'s queue (on an executor thread): what tests of
/// the code that picks classes check.
pub fn runs_in(class: TaskClass) -> bool {
    glommio::executor().current_task_queue() == queue_of(class)
}

fn queue_of(class: TaskClass) -> TaskQueueHandle {
    QUEUES.with(|queues| {
        let mut queues = queues.borrow_mut();
        let handles = queues.get_or_insert_with(|| {
            TaskClass::ALL
                .iter()
                .map(|class| {
                    let latency = match class.latency_bound() {
                        Some(bound) => Latency::Matters(bound),
                        None => Latency::NotImportant,
                    };
                    glommio::executor().create_task_queue(
                        Shares::Static(class.shares()),
                        latency,
                        class.name(),
                    )
                })
                .collect()
        });
        handles[class.index()]
    })
}

/// A spawned task; await it for its output. Dropping it cancels the task, unless detached.
pub struct TaskHandle<T> {
    task: glommio::Task<T>,
}

impl<T> TaskHandle<T> {
    /// Lets the task run to completion on its own.
    pub fn detach(self) {
        self.task.detach();
    }
}

impl<T> Future for TaskHandle<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        Pin::new(&mut self.task).poll(cx)
    }
}

/// Spawns `future` on the current executor in `class`'s queue.
///
/// Must be called from inside an executor started by [`crate::pool`].
pub fn spawn<F, T>(class: TaskClass, future: F) -> TaskHandle<T>
where
    F: Future<Output = T> + 'static,
    T: 'static,
{
    let queue = queue_of(class);
    let task = glommio::spawn_local_into(future, queue)
        .expect("task queues created on this executor exist");
    TaskHandle { task }
}

/// Spawns `future` in `class`'s queue and lets it run on its own.
pub fn spawn_detached<F>(class: TaskClass, future: F)
where
    F: Future<Output = ()> + 'static,
{
    spawn(class, future).detach();
}

/// Waits `duration` on the executor's timer.
pub async fn sleep(duration: Duration) {
    glommio::timer::sleep(duration).await;
}

/// Yields to other tasks if this one has run past its preemption budget (long loops call
/// this each iteration).
pub async fn yield_if_needed() {
    glommio::yield_if_needed().await;
}

/// Runs blocking work (small file writes such as a persisted config) on the executor's
/// blocking thread, so the shard keeps serving while it runs.
pub async fn run_blocking<F, R>(work: F) -> R
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    glommio::executor().spawn_blocking(work).await
}

/// A timeout expired before the future finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("timed out after {after:?}")]
pub struct TimedOut {
    /// The limit that passed.
    pub after: Duration,
}

/// Runs `future` for at most `limit`; the future is dropped when the limit passes.
pub async fn timeout<F, T>(limit: Duration, future: F) -> Result<T, TimedOut>
where
    F: Future<Output = T>,
{
    let guarded = async { Ok::<T, glommio::GlommioError<()>>(future.await) };
    glommio::timer::timeout(limit, guarded)
        .await
        .map_err(|_| TimedOut { after: limit })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::{run_on_current_thread, ExecutorOptions};

    // Proves every class has positive shares, a unique name, and that spawning into each class
    // runs the task (queues are created lazily on first use).
    #[test]
    fn every_class_spawns() {
        let names: std::collections::HashSet<_> =
            TaskClass::ALL.iter().map(|class| class.name()).collect();
        assert_eq!(names.len(), TaskClass::ALL.len());
        let total = run_on_current_thread(&ExecutorOptions::default(), async {
            let mut total = 0;
            for (index, class) in TaskClass::ALL.iter().enumerate() {
                assert!(class.shares() > 0);
                total += spawn(*class, async move { index }).await;
            }
            total
        })
        .unwrap();
        assert_eq!(total, (0..TaskClass::ALL.len()).sum::<usize>());
    }

    // Proves timeout returns the value in time and TimedOut when the limit passes.
    #[test]
    fn timeout_limits_a_future() {
        run_on_current_thread(&ExecutorOptions::default(), async {
            assert_eq!(timeout(Duration::from_secs(1), async { 5 }).await, Ok(5));
            assert_eq!(run_blocking(|| 6).await, 6);
            let late = timeout(Duration::from_millis(5), sleep(Duration::from_secs(5))).await;
            assert_eq!(
                late,
                Err(TimedOut {
                    after: Duration::from_millis(5)
                })
            );
        })
        .unwrap();
    }
}
