//! The messages of one assigned queue between pull and commit (Java `ProcessQueue`).
//!
//! Invariants:
//! * `messages` holds pulled, not yet finished messages keyed by queue offset; `consuming`
//!   holds those an orderly listener is working on. Their counts and bytes are what flow
//!   control compares with the per-queue limits.
//! * The commit offset is the smallest unfinished offset, or one past the largest offset
//!   ever put when nothing is unfinished; so a committed offset never skips a message that
//!   was not consumed (at-least-once).
//! * Once `dropped` is set (rebalance took the queue away, or shutdown) nothing new is put
//!   and consumption results no longer move the offset.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Mutex, MutexGuard};

use comet_proto::message::MessageExt;

use crate::config::now_ms;
use crate::message::MessageQueue;

/// How long the client trusts a broker lock after the last successful lock (30 s).
pub const LOCK_EXPIRY_MS: i64 = 30_000;

#[derive(Default)]
struct Inner {
    messages: BTreeMap<i64, MessageExt>,
    consuming: BTreeMap<i64, MessageExt>,
    bytes: usize,
    max_offset_put: i64,
}

/// One assigned queue.
pub struct ProcessQueue {
    /// The queue.
    pub queue: MessageQueue,
    inner: Mutex<Inner>,
    dropped: AtomicBool,
    locked: AtomicBool,
    last_lock_ms: AtomicI64,
    /// Orderly consumption: one consumer at a time per queue.
    pub consume_lock: Mutex<()>,
    /// True while an orderly consume task is queued or running.
    pub consume_scheduled: AtomicBool,
    /// Next offset to pull.
    pub next_offset: AtomicI64,
}

impl ProcessQueue {
    /// A queue starting to pull at `next_offset`.
    pub fn new(queue: MessageQueue, next_offset: i64) -> ProcessQueue {
        ProcessQueue {
            queue,
            inner: Mutex::new(Inner {
                max_offset_put: next_offset - 1,
                ..Inner::default()
            }),
            dropped: AtomicBool::new(false),
            locked: AtomicBool::new(false),
            last_lock_ms: AtomicI64::new(0),
            consume_lock: Mutex::new(()),
            consume_scheduled: AtomicBool::new(false),
            next_offset: AtomicI64::new(next_offset),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds pulled messages (ignored once dropped).
    pub fn put(&self, messages: &[MessageExt]) {
        if self.is_dropped() {
            return;
        }
        let mut inner = self.lock();
        for message in messages {
            inner.max_offset_put = inner.max_offset_put.max(message.queue_offset);
            let size = message.body.len();
            if inner
                .messages
                .insert(message.queue_offset, message.clone())
                .is_none()
            {
                inner.bytes += size;
            }
        }
    }

    /// Removes finished messages and returns the offset to commit.
    pub fn remove(&self, offsets: impl IntoIterator<Item = i64>) -> i64 {
        let mut inner = self.lock();
        for offset in offsets {
            if let Some(message) = inner.messages.remove(&offset) {
                inner.bytes -= message.body.len();
            }
        }
        commit_offset(&inner)
    }

    /// Messages and bytes held (flow control).
    pub fn held(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.messages.len() + inner.consuming.len(), inner.bytes)
    }

    /// Offsets between the oldest and the newest message waiting for consumption (Java's
    /// `getMaxSpan`, which concurrent consumption compares with `consumeConcurrentlyMaxSpan`:
    /// one slow message holds the commit offset back, so pulling pauses past this span).
    pub fn max_span(&self) -> i64 {
        let inner = self.lock();
        match (
            inner.messages.first_key_value(),
            inner.messages.last_key_value(),
        ) {
            (Some((first, _)), Some((last, _))) => last - first,
            _ => 0,
        }
    }

    /// Orderly: moves up to `count` messages, in offset order, to the consuming set.
    pub fn take_in_order(&self, count: usize) -> Vec<MessageExt> {
        let mut inner = self.lock();
        let mut taken = Vec::with_capacity(count);
        while taken.len() < count {
            let Some((offset, message)) = inner.messages.pop_first() else {
                break;
            };
            inner.consuming.insert(offset, message.clone());
            taken.push(message);
        }
        taken
    }

    /// Orderly: the consuming set is done; returns the offset to commit.
    pub fn commit_consuming(&self) -> i64 {
        let mut inner = self.lock();
        let consumed: Vec<MessageExt> =
            std::mem::take(&mut inner.consuming).into_values().collect();
        for message in &consumed {
            inner.bytes -= message.body.len();
        }
        commit_offset(&inner)
    }

    /// Orderly: the consuming set goes back to be consumed again, with its reconsume count
    /// raised.
    pub fn rollback_consuming(&self) {
        let mut inner = self.lock();
        let consuming = std::mem::take(&mut inner.consuming);
        for (offset, mut message) in consuming {
            message.reconsume_times += 1;
            inner.messages.insert(offset, message);
        }
    }

    /// True when nothing waits for consumption.
    pub fn is_empty(&self) -> bool {
        self.lock().messages.is_empty()
    }

    /// Marks the queue dropped.
    pub fn set_dropped(&self) {
        self.dropped.store(true, Ordering::Release);
    }

    /// True once dropped.
    pub fn is_dropped(&self) -> bool {
        self.dropped.load(Ordering::Acquire)
    }

    /// Records the outcome of a lock attempt.
    pub fn set_locked(&self, locked: bool) {
        self.locked.store(locked, Ordering::Release);
        if locked {
            self.last_lock_ms.store(now_ms(), Ordering::Release);
        }
    }

    /// True while the broker lock is held and not expired.
    pub fn is_locked(&self) -> bool {
        self.locked.load(Ordering::Acquire)
            && now_ms() - self.last_lock_ms.load(Ordering::Acquire) < LOCK_EXPIRY_MS
    }
}

fn commit_offset(inner: &Inner) -> i64 {
    match (inner.consuming.keys().next(), inner.messages.keys().next()) {
        (Some(a), Some(b)) => *a.min(b),
        (Some(a), None) => *a,
        (None, Some(b)) => *b,
        (None, None) => inner.max_offset_put + 1,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use bytes::Bytes;
    use comet_proto::properties::Properties;

    /// A stored message of topic `T`, queue 0, at `offset`, without properties (the
    /// consumers' unit tests build on it).
    pub(crate) fn message(offset: i64) -> MessageExt {
        let host = "127.0.0.1:10911".parse().unwrap();
        MessageExt {
            topic: "T".into(),
            queue_id: 0,
            flag: 0,
            queue_offset: offset,
            commit_log_offset: offset * 100,
            sysflag: 0,
            born_timestamp: 0,
            born_host: host,
            store_timestamp: 0,
            store_host: host,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body_crc: 0,
            store_size: 100,
            body: Bytes::from_static(b"abcd"),
            body_compression: None,
            properties: Properties::new(),
            msg_id: String::new(),
        }
    }

    // Proves the commit offset never passes an unfinished message: finishing out of order
    // commits only up to the oldest unfinished one, and an empty queue commits past the
    // newest message put.
    #[test]
    fn commit_offset_is_the_oldest_unfinished() {
        let queue = ProcessQueue::new(MessageQueue::new("T", "b", 0), 10);
        queue.put(&[message(10), message(11), message(12)]);
        assert_eq!(queue.held(), (3, 12));
        assert_eq!(queue.max_span(), 2);
        assert_eq!(queue.remove([11, 12]), 10);
        assert_eq!(queue.remove([10]), 13);
        assert_eq!(queue.held(), (0, 0));
        queue.set_dropped();
        queue.put(&[message(13)]);
        assert!(queue.is_empty());
    }

    // Proves orderly take/rollback/commit: a rolled-back batch comes back first with its
    // reconsume count raised, and commit moves past it.
    #[test]
    fn orderly_take_rollback_commit() {
        let queue = ProcessQueue::new(MessageQueue::new("T", "b", 0), 0);
        queue.put(&[message(0), message(1), message(2)]);
        let taken = queue.take_in_order(2);
        assert_eq!(
            taken.iter().map(|m| m.queue_offset).collect::<Vec<_>>(),
            [0, 1]
        );
        queue.rollback_consuming();
        let again = queue.take_in_order(1);
        assert_eq!(again[0].queue_offset, 0);
        assert_eq!(again[0].reconsume_times, 1);
        assert_eq!(queue.commit_consuming(), 1);
        assert_eq!(queue.take_in_order(5).len(), 2);
        assert_eq!(queue.commit_consuming(), 3);
    }
}
