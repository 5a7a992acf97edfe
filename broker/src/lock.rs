//! Queue locks for orderly consumers (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ,
//! docs/protocol.md#queue-locks).
//!
//! A lock on (group, queue) belongs to one client id and expires 60 s after it was last
//! taken or renewed; Java clients renew every 20 s and consider their own lock stale after
//! 30 s, so a live client never loses a lock it renews.

use std::collections::HashMap;
use std::time::Duration;

/// How long a lock lives without renewal (`rocketmq.broker.rebalance.lockMaxLiveTime`).
pub const LOCK_LIFETIME: Duration = Duration::from_secs(60);

/// A message queue: (topic, broker name, queue id).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QueueKey {
    /// Topic.
    pub topic: String,
    /// Broker name.
    pub broker_name: String,
    /// Queue id.
    pub queue_id: i32,
}

#[derive(Clone, Debug)]
struct Lock {
    client_id: String,
    taken_ms: i64,
}

/// Every lock of the broker.
#[derive(Debug, Default)]
pub struct LockTable {
    locks: HashMap<(String, QueueKey), Lock>,
}

impl LockTable {
    /// An empty table.
    pub fn new() -> LockTable {
        LockTable::default()
    }

    fn is_live(lock: &Lock, now_ms: i64) -> bool {
        let lifetime_ms = i64::try_from(LOCK_LIFETIME.as_millis()).unwrap_or(i64::MAX);
        now_ms - lock.taken_ms < lifetime_ms
    }

    /// Locks (or renews) every queue in `queues` that is free, expired, or already held by
    /// `client_id`; returns the queues `client_id` now holds.
    pub fn lock_batch(
        &mut self,
        group: &str,
        client_id: &str,
        queues: &[QueueKey],
        now_ms: i64,
    ) -> Vec<QueueKey> {
        let mut granted = Vec::with_capacity(queues.len());
        for queue in queues {
            let key = (group.to_owned(), queue.clone());
            let lock = self.locks.get(&key);
            let free = match lock {
                None => true,
                Some(lock) => lock.client_id == client_id || !Self::is_live(lock, now_ms),
            };
            if free {
                self.locks.insert(
                    key,
                    Lock {
                        client_id: client_id.to_owned(),
                        taken_ms: now_ms,
                    },
                );
                granted.push(queue.clone());
            }
        }
        granted
    }

    /// Releases the queues `client_id` holds among `queues`.
    pub fn unlock_batch(&mut self, group: &str, client_id: &str, queues: &[QueueKey]) {
        for queue in queues {
            let key = (group.to_owned(), queue.clone());
            if self
                .locks
                .get(&key)
                .is_some_and(|lock| lock.client_id == client_id)
            {
                self.locks.remove(&key);
            }
        }
    }

    /// True when `group` holds any unexpired lock (retries then go to the DLQ,
    /// docs/protocol.md#retry-and-dead-letter-queues).
    pub fn group_holds_locks(&self, group: &str, now_ms: i64) -> bool {
        self.locks
            .iter()
            .any(|((owner, _), lock)| owner == group && Self::is_live(lock, now_ms))
    }

    /// Drops expired locks; returns how many went.
    pub fn expire(&mut self, now_ms: i64) -> usize {
        let before = self.locks.len();
        self.locks.retain(|_, lock| Self::is_live(lock, now_ms));
        before - self.locks.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(id: i32) -> QueueKey {
        QueueKey {
            topic: "t".into(),
            broker_name: "b".into(),
            queue_id: id,
        }
    }

    // Proves one holder per queue, renewal by the holder, takeover after expiry, and unlock
    // only by the holder.
    #[test]
    fn lock_ownership_and_expiry() {
        let mut table = LockTable::new();
        let queues = [queue(0), queue(1)];
        assert_eq!(table.lock_batch("g", "c1", &queues, 0).len(), 2);
        assert!(table.lock_batch("g", "c2", &queues, 1000).is_empty());
        assert_eq!(table.lock_batch("g", "c1", &queues[..1], 30_000).len(), 1);
        // queue 1 was last taken at 0 and expires at 60 s; queue 0 was renewed at 30 s.
        assert_eq!(table.lock_batch("g", "c2", &queues, 60_000), vec![queue(1)]);
        table.unlock_batch("g", "c2", &queues[..1]);
        assert!(table.lock_batch("g", "c2", &queues[..1], 61_000).is_empty());
        table.unlock_batch("g", "c1", &queues[..1]);
        assert_eq!(table.lock_batch("g", "c2", &queues[..1], 61_000).len(), 1);
        assert!(table.group_holds_locks("g", 61_000));
        assert!(!table.group_holds_locks("g", 200_000));
        assert_eq!(table.expire(200_000), 2);
    }
}
