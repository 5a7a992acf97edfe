//! This shard's pop state (one executor thread per shard, so thread-local and unlocked):
//! which queues a pop is working on, and whether the revive scanner has read its revive
//! queue to the end since start-up, which puts back the pop positions the last persisted
//! offsets may lack; pops wait for that. It also counts the pops polling here, for
//! POLLING_INFO, and holds the book of orderly pops ([`super::order`]).

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};

use super::order::OrderBook;

/// One (topic, group, queue) a pop is reading.
type QueueKey = (String, String, i32);

#[derive(Default)]
struct PopState {
    busy: RefCell<HashSet<QueueKey>>,
    order: RefCell<OrderBook>,
    polling: RefCell<HashMap<QueueKey, u32>>,
    recovered: Cell<bool>,
    random: Cell<u64>,
}

thread_local! {
    static STATE: PopState = PopState::default();
}

/// A pop's hold on one queue of a group: released on drop.
pub struct QueueHold {
    key: QueueKey,
}

impl Drop for QueueHold {
    fn drop(&mut self) {
        STATE.with(|state| state.busy.borrow_mut().remove(&self.key));
    }
}

/// Holds (topic, group, queue) for one pop, or `None` while another pop holds it (Java's
/// `QueueLockManager.tryLock`: the second pop skips the queue rather than wait).
pub fn try_hold(topic: &str, group: &str, queue_id: i32) -> Option<QueueHold> {
    let key = (topic.to_owned(), group.to_owned(), queue_id);
    let inserted = STATE.with(|state| state.busy.borrow_mut().insert(key.clone()));
    // Not `then_some`: it would build (and drop, releasing the holder's key) a hold even
    // when the insert failed.
    if inserted {
        Some(QueueHold { key })
    } else {
        None
    }
}

/// A polling pop's entry in this shard's count of waiting pops: removed on drop.
pub struct PollingHold {
    key: QueueKey,
}

impl Drop for PollingHold {
    fn drop(&mut self) {
        STATE.with(|state| {
            let mut polling = state.polling.borrow_mut();
            if let Some(count) = polling.get_mut(&self.key) {
                *count -= 1;
                if *count == 0 {
                    polling.remove(&self.key);
                }
            }
        });
    }
}

/// Counts a pop of (topic, group, queue id as asked, -1 for every queue) as polling here
/// until the hold drops (Java's pop polling map, keyed the same way).
pub fn hold_polling(topic: &str, group: &str, queue_id: i32) -> PollingHold {
    let key = (topic.to_owned(), group.to_owned(), queue_id);
    STATE.with(|state| *state.polling.borrow_mut().entry(key.clone()).or_insert(0) += 1);
    PollingHold { key }
}

/// How many pops of (topic, group, queue id as asked) poll on this shard now.
pub fn polling_count(topic: &str, group: &str, queue_id: i32) -> u32 {
    let key = (topic.to_owned(), group.to_owned(), queue_id);
    STATE.with(|state| state.polling.borrow().get(&key).copied().unwrap_or(0))
}

/// Runs `action` on this shard's book of orderly pops (no await inside: the book is
/// borrowed for the call).
pub fn with_order_book<T>(action: impl FnOnce(&mut OrderBook) -> T) -> T {
    STATE.with(|state| action(&mut state.order.borrow_mut()))
}

/// True once the revive scanner has replayed this shard's revive queue since start-up.
pub fn recovered() -> bool {
    STATE.with(|state| state.recovered.get())
}

/// Marks the replay done.
pub fn set_recovered() {
    STATE.with(|state| state.recovered.set(true));
}

/// A number in `0..bound` (xorshift seeded from the clock; spreads which queue a pop reads
/// first, as Java's random start does).
pub fn random_below(bound: u32) -> u32 {
    assert!(bound > 0);
    STATE.with(|state| {
        let mut x = state.random.get();
        if x == 0 {
            x = comet_rt::clock::wall_clock_ms().unsigned_abs() | 1;
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        state.random.set(x);
        u32::try_from(x % u64::from(bound)).expect("below a u32 bound")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a queue is held by one pop at a time and free again once that pop is done.
    #[test]
    fn a_queue_is_held_once() {
        let first = try_hold("T", "g", 0).expect("free");
        assert!(try_hold("T", "g", 0).is_none());
        assert!(
            try_hold("T", "g", 0).is_none(),
            "a refused hold releases nothing"
        );
        assert!(try_hold("T", "g", 1).is_some());
        drop(first);
        assert!(try_hold("T", "g", 0).is_some());
        assert!((0..100).all(|_| random_below(7) < 7));
    }

    // Proves the polling count follows the holds of one key, and only that key.
    #[test]
    fn polling_pops_are_counted_while_held() {
        assert_eq!(polling_count("T", "g", -1), 0);
        let first = hold_polling("T", "g", -1);
        let second = hold_polling("T", "g", -1);
        assert_eq!(polling_count("T", "g", -1), 2);
        assert_eq!(polling_count("T", "g", 0), 0);
        assert_eq!(polling_count("T", "h", -1), 0);
        drop(first);
        assert_eq!(polling_count("T", "g", -1), 1);
        drop(second);
        assert_eq!(polling_count("T", "g", -1), 0);
    }
}
