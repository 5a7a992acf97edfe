//! Small threading helpers: a one-shot cell to wait on, a single-thread executor for
//! application callbacks, and locking that survives a panicked holder.

use std::sync::mpsc::{self, SyncSender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Locks `mutex`, taking the data of a holder that panicked: the client's tables stay
/// usable, and no caller of the client is made to panic by another thread's panic.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poison| poison.into_inner())
}

/// A value delivered once, waited for by any number of threads.
pub struct Oneshot<T> {
    value: Mutex<Option<T>>,
    ready: Condvar,
}

impl<T> Default for Oneshot<T> {
    fn default() -> Oneshot<T> {
        Oneshot {
            value: Mutex::new(None),
            ready: Condvar::new(),
        }
    }
}

impl<T> Oneshot<T> {
    /// Stores the value (a second one is ignored) and wakes waiters.
    pub fn complete(&self, value: T) {
        let mut slot = self.value.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(value);
            self.ready.notify_all();
        }
    }

    /// Takes the value, waiting up to `timeout`.
    pub fn take_timeout(&self, timeout: Duration) -> Option<T> {
        let deadline = Instant::now() + timeout;
        let mut slot = self.value.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(value) = slot.take() {
                return Some(value);
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            slot = self
                .ready
                .wait_timeout(slot, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

type Job = Box<dyn FnOnce() + Send + 'static>;

/// Runs jobs in order on one named thread. Submitting blocks when the bounded queue is full,
/// which pushes back on whoever produces the work.
pub struct Executor {
    sender: Mutex<Option<SyncSender<Job>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Executor {
    /// Starts the thread.
    pub fn new(name: &str, queued_max: usize) -> Arc<Executor> {
        let (sender, receiver) = mpsc::sync_channel::<Job>(queued_max);
        let thread = thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                while let Ok(job) = receiver.recv() {
                    job();
                }
            })
            .expect("spawning an executor thread");
        Arc::new(Executor {
            sender: Mutex::new(Some(sender)),
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Queues a job; returns it back when the executor is stopped.
    pub fn submit(&self, job: Job) -> Result<(), Job> {
        let sender = self
            .sender
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        match sender {
            Some(sender) => sender.send(job).map_err(|error| error.0),
            None => Err(job),
        }
    }

    /// Queues a job without blocking; returns it back when the queue is full or the
    /// executor is stopped (for callers that must never wait, like transport threads).
    pub fn try_submit(&self, job: Job) -> Result<(), Job> {
        let sender = self
            .sender
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        match sender {
            Some(sender) => sender.try_send(job).map_err(|error| match error {
                mpsc::TrySendError::Full(job) | mpsc::TrySendError::Disconnected(job) => job,
            }),
            None => Err(job),
        }
    }

    /// Runs what is queued, then stops the thread (unless called from it).
    pub fn shutdown(&self) {
        self.sender.lock().unwrap_or_else(|p| p.into_inner()).take();
        let handle = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(handle) = handle {
            if handle.thread().id() != thread::current().id() {
                let _ = handle.join();
            }
        }
    }
}
