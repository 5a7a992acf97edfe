//! Orderly (FIFO) pop's book of what is in flight per queue (Java's
//! `ConsumerOrderInfoManager`), sans I/O: the caller passes the time.
//!
//! An orderly pop reads a queue from the group's consume offset, which stays at the first
//! message not acked yet. While any message of the queue's last pop is unacked and still
//! invisible, the queue is blocked: no pop of the group gets its next messages, so a queue's
//! messages are consumed one batch after the other, in order. When the invisible time of an
//! unacked message passes, the next pop reads from the consume offset again and hands the
//! same messages out once more, counting the deliveries (`orderCountInfo`, from which the
//! clients set the reconsume times). Each ack moves the consume offset to the first message
//! still unacked.
//!
//! Java hands an acked message out again when an earlier one of its batch was not acked in
//! time. Here a queue remembers the offsets acked above its consume offset, and pops skip
//! them, so nothing acked comes back; the book is bounded by [`ACKED_AHEAD_MAX`] per queue
//! (past it an ack still counts for the consume offset, but its message may be delivered
//! again, which at-least-once allows).

use std::collections::{BTreeSet, HashMap};

/// Offsets acked above the consume offset a queue remembers at most.
pub const ACKED_AHEAD_MAX: usize = 4096;
/// How long a queue nobody popped or acked keeps its entry, ms (Java's
/// `CLEAN_SPAN_FROM_LAST`).
pub const IDLE_FORGET_MS: i64 = 24 * 3600 * 1000;

/// One (topic, group, queue id).
pub type OrderKey = (String, String, i32);

/// The last pop of one queue and the acks since.
#[derive(Debug, Default)]
struct InFlight {
    /// The pop's attempt id: a pop repeating it is not blocked (its client retries a pop
    /// whose answer it never got).
    attempt_id: Option<String>,
    pop_time_ms: i64,
    invisible_time_ms: i64,
    /// Queue offsets the pop handed out, ascending.
    offsets: Vec<i64>,
    /// Per offset, when it becomes visible again if not acked (an invisible-time change).
    visible_at_ms: HashMap<i64, i64>,
    /// Per offset handed out before, how many times (deliveries before this one).
    delivered_before: HashMap<i64, u32>,
    /// The consume offset as the book last knew it: every offset below is acked.
    committed: i64,
    /// Offsets acked at or above `committed`.
    acked: BTreeSet<i64>,
    last_used_ms: i64,
}

impl InFlight {
    fn unacked(&self) -> impl Iterator<Item = i64> + '_ {
        self.offsets
            .iter()
            .copied()
            .filter(|offset| *offset >= self.committed && !self.acked.contains(offset))
    }

    /// The consume offset: the first handed-out offset not acked, else the first offset
    /// past the pop that is not acked either.
    fn next_offset(&self) -> Option<i64> {
        if let Some(first) = self.unacked().next() {
            return Some(first);
        }
        let mut next = self.offsets.last()? + 1;
        while self.acked.contains(&next) {
            next += 1;
        }
        Some(next)
    }

    /// Moves the consume offset up to `offset` (never down), forgetting the acks below it.
    fn commit(&mut self, offset: i64) {
        self.committed = self.committed.max(offset);
        self.acked = self.acked.split_off(&self.committed);
    }
}

/// What a pop's delivery counts are (`orderCountInfo`).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Deliveries {
    /// Offsets handed out before, with how many times.
    pub by_offset: Vec<(i64, u32)>,
    /// The smallest count of the pop's messages (0 when one of them is new).
    pub min: u32,
}

/// What an ack did to the consume offset.
#[derive(Debug, PartialEq, Eq)]
pub enum Commit {
    /// Move the consume offset here.
    Next(i64),
    /// The ack names an older pop than the queue's last: nothing changes (Java's -2).
    Stale,
    /// The ack names no message of the last pop (Java's -1, MESSAGE_ILLEGAL).
    Illegal,
    /// Remembered as acked ahead of the consume offset, which stays.
    Ahead,
    /// Nothing to do: the message is below the consume offset or acked already (or the
    /// queue remembers [`ACKED_AHEAD_MAX`] acks already, and this one may come back).
    Done,
}

/// This shard's orderly pops, per queue.
#[derive(Debug, Default)]
pub struct OrderBook {
    queues: HashMap<OrderKey, InFlight>,
}

impl OrderBook {
    /// True while the queue's last pop has a message unacked and invisible at `now_ms` (a
    /// pop repeating that pop's attempt id is let through).
    pub fn is_blocked(&self, key: &OrderKey, attempt_id: Option<&str>, now_ms: i64) -> bool {
        let Some(flight) = self.queues.get(key) else {
            return false;
        };
        if attempt_id.is_some() && flight.attempt_id.as_deref() == attempt_id {
            return false;
        }
        flight.unacked().any(|offset| {
            let visible_at = flight
                .visible_at_ms
                .get(&offset)
                .copied()
                .unwrap_or(flight.pop_time_ms.saturating_add(flight.invisible_time_ms));
            now_ms < visible_at
        })
    }

    /// True when `offset` was acked above the consume offset (a pop skips it).
    pub fn is_acked(&self, key: &OrderKey, offset: i64) -> bool {
        self.queues
            .get(key)
            .is_some_and(|flight| flight.acked.contains(&offset))
    }

    /// Records a pop that handed out `offsets` (ascending) from consume offset `position`;
    /// answers how often each was delivered before.
    pub fn record_pop(
        &mut self,
        key: &OrderKey,
        attempt_id: Option<&str>,
        times: PopTimes,
        position: i64,
        offsets: Vec<i64>,
    ) -> Deliveries {
        assert!(offsets.windows(2).all(|pair| pair[0] < pair[1]));
        let flight = self.queues.entry(key.clone()).or_default();
        // The consume offset may have moved either way (an offset reset moves it back).
        flight.committed = position;
        flight.commit(position);
        let same_attempt = attempt_id.is_some() && flight.attempt_id.as_deref() == attempt_id;
        let delivered_before = if same_attempt {
            std::mem::take(&mut flight.delivered_before)
        } else {
            offsets
                .iter()
                .filter(|offset| flight.offsets.contains(offset))
                .map(|offset| {
                    let before = flight.delivered_before.get(offset).copied().unwrap_or(0);
                    (*offset, before + 1)
                })
                .collect()
        };
        flight.attempt_id = attempt_id.map(str::to_owned);
        flight.pop_time_ms = times.pop_time_ms;
        flight.invisible_time_ms = times.invisible_time_ms;
        flight.visible_at_ms.clear();
        flight.last_used_ms = times.pop_time_ms;
        let mut by_offset: Vec<(i64, u32)> = delivered_before
            .iter()
            .map(|(offset, count)| (*offset, *count))
            .collect();
        by_offset.sort_unstable();
        let min = if by_offset.len() == offsets.len() {
            by_offset.iter().map(|(_, count)| *count).min().unwrap_or(0)
        } else {
            0
        };
        flight.delivered_before = delivered_before;
        flight.offsets = offsets;
        Deliveries { by_offset, min }
    }

    /// An ack of `offset` from the pop at `pop_time_ms`, the consume offset being
    /// `position` (Java's `commitAndNext`, which keeps no acks ahead).
    pub fn ack(
        &mut self,
        key: &OrderKey,
        offset: i64,
        pop_time_ms: i64,
        position: i64,
        now_ms: i64,
    ) -> Commit {
        let Some(flight) = self.queues.get_mut(key) else {
            // Nothing in flight (a restart forgot it): only the first unacked message moves
            // the consume offset; a later one is remembered, so none is skipped.
            let flight = self.queues.entry(key.clone()).or_default();
            flight.last_used_ms = now_ms;
            return remember_ahead(flight, offset, position);
        };
        flight.last_used_ms = now_ms;
        if offset < position {
            return Commit::Done;
        }
        if flight.offsets.is_empty() {
            return remember_ahead(flight, offset, position);
        }
        if pop_time_ms != flight.pop_time_ms {
            return Commit::Stale;
        }
        if !flight.offsets.contains(&offset) {
            return Commit::Illegal;
        }
        if offset < flight.committed || flight.acked.contains(&offset) {
            return Commit::Done;
        }
        let first_unacked = flight.unacked().next() == Some(offset);
        if flight.acked.len() >= ACKED_AHEAD_MAX && !first_unacked {
            return Commit::Done;
        }
        flight.acked.insert(offset);
        let next = flight.next_offset().expect("offsets not empty");
        flight.commit(next);
        Commit::Next(next)
    }

    /// Puts back an ack replayed from its durable record after a restart.
    pub fn replay_ack(&mut self, key: &OrderKey, offset: i64, position: i64) {
        if offset < position {
            return;
        }
        let flight = self.queues.entry(key.clone()).or_default();
        flight.commit(position);
        if flight.acked.len() < ACKED_AHEAD_MAX {
            flight.acked.insert(offset);
        }
    }

    /// Makes `offset` of the pop at `pop_time_ms` visible again at `visible_at_ms` (Java's
    /// `updateNextVisibleTime`); false when the queue's last pop is another one.
    pub fn change_visibility(
        &mut self,
        key: &OrderKey,
        offset: i64,
        pop_time_ms: i64,
        visible_at_ms: i64,
    ) -> bool {
        let Some(flight) = self.queues.get_mut(key) else {
            return false;
        };
        if flight.pop_time_ms != pop_time_ms || !flight.offsets.contains(&offset) {
            return false;
        }
        flight.visible_at_ms.insert(offset, visible_at_ms);
        flight.last_used_ms = flight.last_used_ms.max(pop_time_ms);
        true
    }

    /// Forgets a queue (its consume offset was reset: what was in flight no longer counts).
    pub fn clear(&mut self, key: &OrderKey) {
        self.queues.remove(key);
    }

    /// Forgets queues nobody popped or acked for [`IDLE_FORGET_MS`] (what they had in flight
    /// is visible again long since; only its delivery counts go).
    pub fn forget_idle(&mut self, now_ms: i64) {
        self.queues
            .retain(|_, flight| now_ms.saturating_sub(flight.last_used_ms) < IDLE_FORGET_MS);
    }

    /// Queues with an entry.
    pub fn len(&self) -> usize {
        self.queues.len()
    }

    /// True when no queue has an entry.
    pub fn is_empty(&self) -> bool {
        self.queues.is_empty()
    }
}

/// The times of one pop.
#[derive(Clone, Copy, Debug)]
pub struct PopTimes {
    /// When it popped, ms.
    pub pop_time_ms: i64,
    /// How long its messages stay invisible, ms.
    pub invisible_time_ms: i64,
}

fn remember_ahead(flight: &mut InFlight, offset: i64, position: i64) -> Commit {
    flight.commit(position);
    if offset < position || flight.acked.contains(&offset) {
        return Commit::Done;
    }
    if offset == position {
        let mut next = offset + 1;
        while flight.acked.contains(&next) {
            next += 1;
        }
        flight.commit(next);
        return Commit::Next(next);
    }
    if flight.acked.len() >= ACKED_AHEAD_MAX {
        return Commit::Done;
    }
    flight.acked.insert(offset);
    Commit::Ahead
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> OrderKey {
        ("T".into(), "g".into(), 0)
    }

    fn times(pop_time_ms: i64) -> PopTimes {
        PopTimes {
            pop_time_ms,
            invisible_time_ms: 100,
        }
    }

    // Proves a queue is blocked while a popped message is unacked and invisible, free once
    // it is acked or its invisible time passed, and that the pop's own attempt id passes.
    #[test]
    fn a_queue_blocks_until_acked_or_visible_again() {
        let mut book = OrderBook::default();
        assert!(!book.is_blocked(&key(), None, 0));
        book.record_pop(&key(), Some("a1"), times(1000), 4, vec![4, 5]);
        assert!(book.is_blocked(&key(), None, 1050));
        assert!(book.is_blocked(&key(), Some("a2"), 1050));
        assert!(!book.is_blocked(&key(), Some("a1"), 1050));
        assert!(!book.is_blocked(&key(), None, 1100), "visible again");
        assert_eq!(book.ack(&key(), 4, 1000, 4, 1060), Commit::Next(5));
        assert!(book.is_blocked(&key(), None, 1060));
        assert_eq!(book.ack(&key(), 5, 1000, 5, 1060), Commit::Next(6));
        assert!(!book.is_blocked(&key(), None, 1060));
    }

    // Proves an ack out of order keeps the consume offset at the first unacked message,
    // and a later pop from there skips what was acked (nothing acked comes back).
    #[test]
    fn acks_ahead_are_remembered_and_skipped() {
        let mut book = OrderBook::default();
        book.record_pop(&key(), None, times(1000), 4, vec![4, 5, 6]);
        assert_eq!(book.ack(&key(), 5, 1000, 4, 1010), Commit::Next(4));
        assert_eq!(book.ack(&key(), 6, 1000, 4, 1010), Commit::Next(4));
        assert!(book.is_acked(&key(), 5) && book.is_acked(&key(), 6));
        // The invisible time passes; the next pop from 4 hands out 4 alone (5, 6 skipped).
        let again = book.record_pop(&key(), None, times(1200), 4, vec![4]);
        assert_eq!(again.by_offset, [(4, 1)]);
        assert_eq!(again.min, 1);
        assert_eq!(book.ack(&key(), 4, 1200, 4, 1210), Commit::Next(7));
        assert!(
            !book.is_acked(&key(), 5),
            "forgotten below the consume offset"
        );
    }

    // Proves the delivery counts grow per redelivery, restart at a new attempt only for new
    // offsets, and stay as they were when the same attempt pops again.
    #[test]
    fn deliveries_are_counted_per_offset() {
        let mut book = OrderBook::default();
        let first = book.record_pop(&key(), Some("a"), times(1000), 0, vec![0, 1]);
        assert_eq!(first, Deliveries::default());
        let second = book.record_pop(&key(), Some("b"), times(1200), 0, vec![0, 1, 2]);
        assert_eq!(second.by_offset, [(0, 1), (1, 1)]);
        assert_eq!(second.min, 0, "offset 2 is new");
        let third = book.record_pop(&key(), Some("c"), times(1400), 0, vec![0, 1, 2]);
        assert_eq!(third.by_offset, [(0, 2), (1, 2), (2, 1)]);
        assert_eq!(third.min, 1);
        let repeated = book.record_pop(&key(), Some("c"), times(1400), 0, vec![0, 1, 2]);
        assert_eq!(repeated.by_offset, third.by_offset);
    }

    // Proves an ack of an older pop changes nothing, an offset outside the pop is illegal,
    // and an ack below the consume offset is a no-op.
    #[test]
    fn stale_and_illegal_acks() {
        let mut book = OrderBook::default();
        book.record_pop(&key(), None, times(1000), 4, vec![4, 5]);
        assert_eq!(book.ack(&key(), 4, 999, 4, 1001), Commit::Stale);
        assert_eq!(book.ack(&key(), 9, 1000, 4, 1001), Commit::Illegal);
        assert!(book.is_blocked(&key(), None, 1001));
    }

    // Proves that without an entry (after a restart) only the first unacked message moves
    // the consume offset, and an ack ahead of it is remembered rather than skipping it.
    #[test]
    fn acks_without_an_entry_never_skip_a_message() {
        let mut book = OrderBook::default();
        assert_eq!(book.ack(&key(), 6, 1000, 4, 1001), Commit::Ahead);
        assert_eq!(book.ack(&key(), 6, 1000, 4, 1001), Commit::Done);
        assert_eq!(book.ack(&key(), 2, 1000, 4, 1001), Commit::Done);
        assert_eq!(book.ack(&key(), 4, 1000, 4, 1001), Commit::Next(5));
        assert_eq!(book.ack(&key(), 5, 1000, 5, 1001), Commit::Next(7));
        book.replay_ack(&key(), 9, 7);
        assert!(book.is_acked(&key(), 9));
    }

    // Proves an invisible-time change moves one message's visibility, for its own pop only.
    #[test]
    fn visibility_changes_per_message() {
        let mut book = OrderBook::default();
        book.record_pop(&key(), None, times(1000), 4, vec![4, 5]);
        assert!(!book.change_visibility(&key(), 4, 999, 5000));
        assert!(book.change_visibility(&key(), 4, 1000, 5000));
        assert!(book.change_visibility(&key(), 5, 1000, 1010));
        assert!(book.is_blocked(&key(), None, 4000));
        assert_eq!(book.ack(&key(), 4, 1000, 4, 4001), Commit::Next(5));
        assert!(!book.is_blocked(&key(), None, 4001));
        book.forget_idle(4001 + IDLE_FORGET_MS);
        assert!(book.is_empty(), "idle for a day");
    }
}
