//! Requests waiting for their response, keyed by opaque.
//!
//! Invariants:
//! * an opaque is in the map from just before its frame is written until exactly one of
//!   (response arrived, timeout, connection closed) removes it; whoever removes the entry
//!   completes its waiter, so every waiter completes exactly once;
//! * the map never holds more than [`PENDING_REQUESTS_PER_CONNECTION_MAX`] entries.
//!
//! A waiter is either a [`ResponseSlot`] (a blocked caller or a [`ResponseFuture`] holder) or
//! a callback. Callbacks run on whichever thread completes them (the reader thread, the
//! timeout scanner, or a writer that failed, or the async transport's reader task), so they
//! must be short.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use comet_proto::RemotingCommand;

use crate::error::{ClientError, Result};
use crate::limits::PENDING_REQUESTS_PER_CONNECTION_MAX;

/// A callback completed with the response or the failure.
pub type ResponseCallback = Box<dyn FnOnce(Result<RemotingCommand>) + Send + 'static>;

/// A one-shot cell a thread can wait on.
#[derive(Default)]
pub struct ResponseSlot {
    value: Mutex<Option<Result<RemotingCommand>>>,
    ready: Condvar,
}

impl ResponseSlot {
    fn lock(&self) -> MutexGuard<'_, Option<Result<RemotingCommand>>> {
        // A panic while holding this lock cannot leave the Option half-written.
        self.value
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Stores the outcome and wakes waiters; a second completion is ignored.
    pub fn complete(&self, outcome: Result<RemotingCommand>) {
        let mut value = self.lock();
        if value.is_none() {
            *value = Some(outcome);
            self.ready.notify_all();
        }
    }

    /// Waits up to `timeout` for the outcome; `None` if it did not arrive.
    pub fn wait(&self, timeout: Duration) -> Option<Result<RemotingCommand>> {
        let deadline = Instant::now() + timeout;
        let mut value = self.lock();
        loop {
            if let Some(outcome) = value.take() {
                return Some(outcome);
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            value = self
                .ready
                .wait_timeout(value, deadline - now)
                .unwrap_or_else(|poison| poison.into_inner())
                .0;
        }
    }

    /// The outcome if it already arrived, without waiting.
    pub fn try_take(&self) -> Option<Result<RemotingCommand>> {
        self.lock().take()
    }
}

/// A waitable handle on an asynchronous request.
///
/// The transport completes it with the response, a timeout or a connection failure; the
/// request's own timeout applies, so [`ResponseFuture::wait`] never blocks much longer than
/// the timeout given when the request was sent.
#[derive(Clone)]
pub struct ResponseFuture {
    slot: Arc<ResponseSlot>,
    timeout: Duration,
}

impl ResponseFuture {
    pub(crate) fn new(slot: Arc<ResponseSlot>, timeout: Duration) -> ResponseFuture {
        ResponseFuture { slot, timeout }
    }

    /// Blocks until the outcome is known. The transport's timeout scanner guarantees an
    /// outcome shortly after the request timeout; the extra second here only guards against
    /// a stopped scanner.
    pub fn wait(&self) -> Result<RemotingCommand> {
        match self.slot.wait(self.timeout + Duration::from_secs(1)) {
            Some(outcome) => outcome,
            None => Err(ClientError::State("waiting past the request timeout")),
        }
    }

    /// The outcome if it is already known.
    pub fn try_take(&self) -> Option<Result<RemotingCommand>> {
        self.slot.try_take()
    }
}

/// Who is told about the outcome.
pub enum Waiter {
    /// A slot someone waits on.
    Slot(Arc<ResponseSlot>),
    /// A callback.
    Callback(ResponseCallback),
}

impl Waiter {
    /// Delivers the outcome.
    pub fn complete(self, outcome: Result<RemotingCommand>) {
        match self {
            Waiter::Slot(slot) => slot.complete(outcome),
            Waiter::Callback(callback) => callback(outcome),
        }
    }
}

/// One request in flight.
pub struct Pending {
    /// Request code, for error messages.
    pub code: i32,
    /// When it is considered timed out.
    pub deadline: Instant,
    /// The timeout it was sent with.
    pub timeout: Duration,
    /// Who gets the outcome.
    pub waiter: Waiter,
}

/// The map of one connection.
#[derive(Default)]
pub struct PendingMap {
    entries: Mutex<HashMap<i32, Pending>>,
}

impl PendingMap {
    fn lock(&self) -> MutexGuard<'_, HashMap<i32, Pending>> {
        self.entries
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Registers `pending` under `opaque`. Fails when the map is full or the opaque is taken
    /// (an opaque counter that wrapped onto a request still in flight).
    pub fn insert(&self, addr: &str, opaque: i32, pending: Pending) -> Result<(), Pending> {
        let mut entries = self.lock();
        if entries.len() >= PENDING_REQUESTS_PER_CONNECTION_MAX || entries.contains_key(&opaque) {
            let count = entries.len();
            drop(entries);
            log::warn!("{addr}: cannot register opaque={opaque}, {count} pending");
            return Err(pending);
        }
        entries.insert(opaque, pending);
        Ok(())
    }

    /// Removes and returns the entry of `opaque`.
    pub fn remove(&self, opaque: i32) -> Option<Pending> {
        self.lock().remove(&opaque)
    }

    /// Number of requests in flight.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when nothing is in flight.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes every entry whose deadline is before `now`.
    pub fn take_expired(&self, now: Instant) -> Vec<(i32, Pending)> {
        let mut entries = self.lock();
        let expired: Vec<i32> = entries
            .iter()
            .filter(|(_, pending)| pending.deadline <= now)
            .map(|(opaque, _)| *opaque)
            .collect();
        expired
            .into_iter()
            .filter_map(|opaque| entries.remove(&opaque).map(|p| (opaque, p)))
            .collect()
    }

    /// Removes every entry (the connection is gone).
    pub fn take_all(&self) -> Vec<(i32, Pending)> {
        self.lock().drain().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use comet_proto::RequestCode;

    fn pending(deadline: Instant) -> (Arc<ResponseSlot>, Pending) {
        let slot = Arc::new(ResponseSlot::default());
        let pending = Pending {
            code: 34,
            deadline,
            timeout: Duration::from_millis(10),
            waiter: Waiter::Slot(slot.clone()),
        };
        (slot, pending)
    }

    // Proves that only expired entries are taken, that a duplicate opaque is refused, and
    // that a slot keeps the first completion.
    #[test]
    fn expiry_duplicates_and_single_completion() {
        let map = PendingMap::default();
        let now = Instant::now();
        let (_, early) = pending(now);
        let (_, late) = pending(now + Duration::from_secs(60));
        assert!(map.insert("a", 1, early).is_ok());
        assert!(map.insert("a", 2, late).is_ok());
        let (_, duplicate) = pending(now);
        assert!(map.insert("a", 2, duplicate).is_err());
        let expired = map.take_expired(now + Duration::from_millis(1));
        assert_eq!(expired.len(), 1);
        assert_eq!(expired[0].0, 1);
        assert_eq!(map.len(), 1);

        let slot = ResponseSlot::default();
        let first = RemotingCommand::request(RequestCode::HEART_BEAT, 7);
        slot.complete(Ok(first.clone()));
        slot.complete(Err(ClientError::State("late")));
        assert_eq!(slot.wait(Duration::ZERO), Some(Ok(first)));
        assert_eq!(slot.wait(Duration::from_millis(5)), None);
    }
}
