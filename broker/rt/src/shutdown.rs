//! Ordered, gated shutdown with hard wait maxima.
//!
//! * [`StopSignal`]: a shard-local "stop now" broadcast that long-running loops select on.
//! * [`RemoteStop`]: the `Send` side another thread (a signal handler thread, a test) uses to
//!   trip a shard's signal; the shard polls it (every [`REMOTE_STOP_POLL`]) because a glommio
//!   executor cannot be woken from a foreign thread without a shared channel.
//! * [`Gate`]: every background task enters the gate under a name; closing the gate refuses
//!   new entries and waits for the named tasks to leave, at most a given time, and reports
//!   which ones did not.
//! * [`StopSequence`]: phases run in order (stop accepting, drain, unregister, flush, ...),
//!   each with its own maximum wait, so one wedged phase cannot block exit.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;

use crate::mesh::LocalBoxFuture;
use crate::sync::WakerList;
use crate::task_class::{sleep, spawn_detached, timeout, TaskClass};

/// How often a shard checks its [`RemoteStop`].
pub const REMOTE_STOP_POLL: Duration = Duration::from_millis(10);

#[derive(Default)]
struct SignalState {
    stopped: Cell<bool>,
    waiters: WakerList,
}

/// A shard-local stop broadcast; clones share it.
#[derive(Clone, Default)]
pub struct StopSignal {
    state: Rc<SignalState>,
}

impl StopSignal {
    /// A signal not yet triggered.
    pub fn new() -> StopSignal {
        StopSignal::default()
    }

    /// Triggers the signal and wakes every waiter. Idempotent.
    pub fn trigger(&self) {
        self.state.stopped.set(true);
        self.state.waiters.wake_all();
    }

    /// True once triggered.
    pub fn is_triggered(&self) -> bool {
        self.state.stopped.get()
    }

    /// Completes when the signal is triggered.
    pub async fn wait(&self) {
        let state = &self.state;
        state.waiters.until(|| state.stopped.get()).await;
    }

    /// Trips this signal when `remote` is requested (polled in a housekeeping task that ends
    /// with the signal).
    pub fn follow(&self, remote: RemoteStop) {
        let signal = self.clone();
        spawn_detached(TaskClass::Housekeeping, async move {
            while !signal.is_triggered() {
                if remote.is_requested() {
                    signal.trigger();
                    break;
                }
                sleep(REMOTE_STOP_POLL).await;
            }
        });
    }
}

/// A stop request that can cross threads.
#[derive(Clone, Default, Debug)]
pub struct RemoteStop {
    requested: Arc<AtomicBool>,
}

impl RemoteStop {
    /// Not yet requested.
    pub fn new() -> RemoteStop {
        RemoteStop::default()
    }

    /// Asks the shards following this handle to stop.
    pub fn request(&self) {
        self.requested.store(true, Ordering::Release);
    }

    /// True once requested.
    pub fn is_requested(&self) -> bool {
        self.requested.load(Ordering::Acquire)
    }

    /// Requests a stop when the process receives SIGTERM or SIGINT (what systemd, Docker and a
    /// terminal send), so a binary's shutdown runs through its normal stop sequence and it
    /// exits with status 0.
    ///
    /// A dedicated thread waits for the signals with sigwait, so no shard ever sees one. Call
    /// it on the main thread before any other thread starts: the signals are blocked there
    /// and every later thread inherits the blocked mask.
    pub fn on_termination_signals(&self) -> std::io::Result<()> {
        let stop = self.clone();
        // SAFETY: sigset manipulation on a local set, and pthread_sigmask of the calling
        // thread only.
        let set = unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGTERM);
            libc::sigaddset(&mut set, libc::SIGINT);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            set
        };
        std::thread::Builder::new()
            .name("comet-signals".to_owned())
            .spawn(move || {
                let mut signal: libc::c_int = 0;
                // SAFETY: waits on the set built above, blocked in every thread.
                unsafe { libc::sigwait(&set, &mut signal) };
                log::info!("signal {signal} received: stopping");
                stop.request();
            })
            .map(drop)
    }
}

/// Why a gate or stop phase did not finish cleanly.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ShutdownError {
    /// The gate is closed; no new task may start.
    #[error("gate closed")]
    GateClosed,
    /// Tasks still inside the gate when its maximum wait passed.
    #[error("still running after {after:?}: {still_running:?}")]
    Timeout {
        /// The maximum that passed.
        after: Duration,
        /// Names of the tasks that did not leave.
        still_running: Vec<String>,
    },
}

#[derive(Default)]
struct GateState {
    closed: bool,
    next_id: u64,
    inside: BTreeMap<u64, String>,
}

/// Tracks named tasks so shutdown can wait for them; clones share the gate.
#[derive(Clone, Default)]
pub struct Gate {
    state: Rc<RefCell<GateState>>,
    left: Rc<WakerList>,
}

/// Proof of being inside a gate; leaving happens on drop.
pub struct GatePass {
    gate: Gate,
    id: u64,
}

impl Drop for GatePass {
    fn drop(&mut self) {
        let removed = self.gate.state.borrow_mut().inside.remove(&self.id);
        assert!(removed.is_some(), "a pass leaves its gate once");
        self.gate.left.wake_all();
    }
}

impl Gate {
    /// An open gate.
    pub fn new() -> Gate {
        Gate::default()
    }

    /// Enters under `name`; refused once the gate is closing.
    pub fn enter(&self, name: &str) -> Result<GatePass, ShutdownError> {
        let mut state = self.state.borrow_mut();
        if state.closed {
            return Err(ShutdownError::GateClosed);
        }
        let id = state.next_id;
        state.next_id += 1;
        state.inside.insert(id, name.to_owned());
        Ok(GatePass {
            gate: self.clone(),
            id,
        })
    }

    /// Spawns `future` in `class` inside the gate under `name`.
    pub fn spawn<F>(&self, name: &str, class: TaskClass, future: F) -> Result<(), ShutdownError>
    where
        F: Future<Output = ()> + 'static,
    {
        let pass = self.enter(name)?;
        spawn_detached(class, async move {
            future.await;
            drop(pass);
        });
        Ok(())
    }

    /// Number of tasks inside.
    pub fn inside_count(&self) -> usize {
        self.state.borrow().inside.len()
    }

    /// Closes the gate and waits up to `max_wait` for every task inside to leave.
    pub async fn close(&self, max_wait: Duration) -> Result<(), ShutdownError> {
        self.state.borrow_mut().closed = true;
        let drained = self.left.until(|| self.state.borrow().inside.is_empty());
        match timeout(max_wait, drained).await {
            Ok(()) => Ok(()),
            Err(_) => Err(ShutdownError::Timeout {
                after: max_wait,
                still_running: self.state.borrow().inside.values().cloned().collect(),
            }),
        }
    }
}

type PhaseAction = Box<dyn FnOnce() -> LocalBoxFuture<()>>;

struct Phase {
    name: String,
    max_wait: Duration,
    action: PhaseAction,
}

/// What one stop phase did.
#[derive(Debug, PartialEq, Eq)]
pub struct PhaseOutcome {
    /// The phase's name.
    pub name: String,
    /// True when it finished within its maximum.
    pub finished: bool,
}

/// Stop phases run in the order they were added.
#[derive(Default)]
pub struct StopSequence {
    phases: Vec<Phase>,
}

impl StopSequence {
    /// An empty sequence.
    pub fn new() -> StopSequence {
        StopSequence::default()
    }

    /// Appends a phase that may take at most `max_wait`.
    pub fn then<F, Fut>(mut self, name: &str, max_wait: Duration, action: F) -> StopSequence
    where
        F: FnOnce() -> Fut + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        self.phases.push(Phase {
            name: name.to_owned(),
            max_wait,
            action: Box::new(move || Box::pin(action())),
        });
        self
    }

    /// Runs every phase in order; a phase past its maximum is abandoned (logged) and the next
    /// one starts.
    pub async fn run(self) -> Vec<PhaseOutcome> {
        let mut outcomes = Vec::with_capacity(self.phases.len());
        for phase in self.phases {
            let finished = timeout(phase.max_wait, (phase.action)()).await.is_ok();
            if !finished {
                log::warn!(
                    "stop phase {} abandoned after {:?}",
                    phase.name,
                    phase.max_wait
                );
            }
            outcomes.push(PhaseOutcome {
                name: phase.name,
                finished,
            });
        }
        outcomes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::{run_on_current_thread, ExecutorOptions};

    // Proves a gate waits for its tasks, refuses entries once closing, and names the tasks
    // that outlive the maximum wait.
    #[test]
    fn gate_waits_and_reports_stragglers() {
        run_on_current_thread(&ExecutorOptions::default(), async {
            let gate = Gate::new();
            gate.spawn("quick", TaskClass::Admin, sleep(Duration::from_millis(5)))
                .unwrap();
            assert_eq!(gate.inside_count(), 1);
            assert_eq!(gate.close(Duration::from_secs(2)).await, Ok(()));
            assert_eq!(gate.enter("late").err(), Some(ShutdownError::GateClosed));

            let gate = Gate::new();
            gate.spawn("wedged", TaskClass::Admin, sleep(Duration::from_secs(60)))
                .unwrap();
            let error = gate.close(Duration::from_millis(20)).await.unwrap_err();
            assert_eq!(
                error,
                ShutdownError::Timeout {
                    after: Duration::from_millis(20),
                    still_running: vec!["wedged".to_owned()]
                }
            );
        })
        .unwrap();
    }

    // Proves phases run in order, a slow phase is abandoned at its maximum, and a remote stop
    // request reaches a shard-local signal.
    #[test]
    fn phases_in_order_and_remote_stop() {
        run_on_current_thread(&ExecutorOptions::default(), async {
            let order = Rc::new(RefCell::new(Vec::new()));
            let (first, third) = (order.clone(), order.clone());
            let outcomes = StopSequence::new()
                .then("accept", Duration::from_secs(1), move || async move {
                    first.borrow_mut().push(1);
                })
                .then("drain", Duration::from_millis(10), || {
                    sleep(Duration::from_secs(60))
                })
                .then("flush", Duration::from_secs(1), move || async move {
                    third.borrow_mut().push(3);
                })
                .run()
                .await;
            assert_eq!(*order.borrow(), vec![1, 3]);
            let finished: Vec<bool> = outcomes.iter().map(|o| o.finished).collect();
            assert_eq!(finished, vec![true, false, true]);

            let signal = StopSignal::new();
            let remote = RemoteStop::new();
            signal.follow(remote.clone());
            let requester = std::thread::spawn(move || remote.request());
            timeout(Duration::from_secs(5), signal.wait())
                .await
                .unwrap();
            requester.join().unwrap();
            assert!(signal.is_triggered());
        })
        .unwrap();
    }
}
