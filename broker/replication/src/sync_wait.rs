//! SYNC_MASTER: sends waiting for the slave, and the confirm position.
//!
//! A SYNC_MASTER send is answered once its message is durable on the master and on a slave.
//! The broker appends, waits for its own group commit, then registers the message's end
//! position here. One slave Ack releases every waiter at or below its durable position, as
//! one flush releases a whole group commit. Java's answers are kept:
//!
//! - [`SyncOutcome::SendOk`]: a slave holds the message durably.
//! - [`SyncOutcome::FlushSlaveTimeout`]: no slave ack covered it within `syncFlushTimeout`.
//! - [`SyncOutcome::SlaveNotAvailable`]: no slave was in sync when the send arrived (none
//!   connected, or more than `haMaxGapNotInSync` behind, see [`in_sync`]).
//!
//! The message stays stored in every case; the status tells the producer how safe it is.
//!
//! The confirm position ([`ConfirmPosition`]) is what consumers of a SYNC_MASTER may see:
//! bytes durable on the master and a slave. It never moves backwards, so a failover to that
//! slave can never take back a message someone consumed.

use std::collections::BTreeMap;
use std::time::Instant;

/// The answer to a SYNC_MASTER send (the broker maps it to RocketMQ's wire codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SyncOutcome {
    /// SEND_OK: durable on the master and a slave.
    SendOk,
    /// FLUSH_SLAVE_TIMEOUT: no slave confirmed it in time.
    FlushSlaveTimeout,
    /// SLAVE_NOT_AVAILABLE: no slave was in sync.
    SlaveNotAvailable,
}

/// Whether a slave counts as in sync: one is connected (`slave_durable` is its acknowledged
/// durable end) and it is less than `gap_max_bytes` behind `master_written`, as Java's
/// `HAService.isSlaveOK` decides with `haMaxGapNotInSync`.
pub fn in_sync(master_written: u64, slave_durable: Option<u64>, gap_max_bytes: u64) -> bool {
    slave_durable.is_some_and(|durable| master_written.saturating_sub(durable) < gap_max_bytes)
}

/// The SYNC_MASTER waiters of one log; `T` is whatever answers a send (a channel, an id).
#[derive(Debug)]
pub struct SyncWaiters<T> {
    /// By (end position, arrival): release takes them in position order.
    by_end: BTreeMap<(u64, u64), (Instant, T)>,
    /// By (deadline, arrival) -> end position: expiry takes them in deadline order.
    by_deadline: BTreeMap<(Instant, u64), u64>,
    next_arrival: u64,
    slave_durable: u64,
}

impl<T> Default for SyncWaiters<T> {
    fn default() -> Self {
        SyncWaiters {
            by_end: BTreeMap::new(),
            by_deadline: BTreeMap::new(),
            next_arrival: 0,
            slave_durable: 0,
        }
    }
}

impl<T> SyncWaiters<T> {
    /// No waiters, and no slave durability known.
    pub fn new() -> SyncWaiters<T> {
        SyncWaiters::default()
    }

    /// Waits for a message ending at `end` (already durable on the master) until
    /// `deadline`. Answers at once when no slave is in sync (`slave_in_sync`, from
    /// [`in_sync`]) or a slave already holds it; otherwise returns `None` and the answer
    /// comes from [`SyncWaiters::on_slave_durable`] or [`SyncWaiters::expire`].
    pub fn register(
        &mut self,
        end: u64,
        deadline: Instant,
        slave_in_sync: bool,
        token: T,
    ) -> Option<(T, SyncOutcome)> {
        if end <= self.slave_durable {
            return Some((token, SyncOutcome::SendOk));
        }
        if !slave_in_sync {
            return Some((token, SyncOutcome::SlaveNotAvailable));
        }
        let arrival = self.next_arrival;
        self.next_arrival += 1;
        self.by_end.insert((end, arrival), (deadline, token));
        self.by_deadline.insert((deadline, arrival), end);
        None
    }

    /// A slave is durable up to `durable`: answers SEND_OK to every waiter at or below it.
    /// A smaller position than one seen before (another, slower slave) changes nothing.
    pub fn on_slave_durable(&mut self, durable: u64) -> Vec<(T, SyncOutcome)> {
        self.slave_durable = self.slave_durable.max(durable);
        let mut released = Vec::new();
        while let Some(entry) = self.by_end.first_entry() {
            let (end, arrival) = *entry.key();
            if end > self.slave_durable {
                break;
            }
            let (deadline, token) = entry.remove();
            self.by_deadline.remove(&(deadline, arrival));
            released.push((token, SyncOutcome::SendOk));
        }
        released
    }

    /// Controller mode: the slaves the sync-state set requires hold the log up to `covered`
    /// ([`crate::ack_set::Coverage::covered`]). Unlike [`Self::on_slave_durable`] it may move
    /// back (a new member joined): a waiter above it waits on. Answers SEND_OK to every
    /// waiter at or below it.
    pub fn set_covered(&mut self, covered: u64) -> Vec<(T, SyncOutcome)> {
        self.slave_durable = covered;
        self.on_slave_durable(covered)
    }

    /// Answers FLUSH_SLAVE_TIMEOUT to every waiter whose deadline is at or before `now`.
    pub fn expire(&mut self, now: Instant) -> Vec<(T, SyncOutcome)> {
        let mut expired = Vec::new();
        while let Some(entry) = self.by_deadline.first_entry() {
            let (deadline, arrival) = *entry.key();
            if deadline > now {
                break;
            }
            let end = entry.remove();
            let (_, token) = self
                .by_end
                .remove(&(end, arrival))
                .expect("both maps hold every waiter");
            expired.push((token, SyncOutcome::FlushSlaveTimeout));
        }
        expired
    }

    /// The earliest deadline, for the caller's timer.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.by_deadline
            .keys()
            .next()
            .map(|(deadline, _)| *deadline)
    }

    /// Waiters not yet answered.
    pub fn len(&self) -> usize {
        self.by_end.len()
    }

    /// Whether no waiter is left.
    pub fn is_empty(&self) -> bool {
        self.by_end.is_empty()
    }

    /// The highest slave durable position seen.
    pub fn slave_durable(&self) -> u64 {
        self.slave_durable
    }
}

/// What consumers of a SYNC_MASTER log may see: durable on the master and a slave, never
/// moving backwards (a slave that reconnects behind, or a second slower slave, cannot hide
/// a message someone may already have consumed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConfirmPosition {
    position: u64,
}

impl ConfirmPosition {
    /// Starts at `position`: what was confirmed before (for example everything the log held
    /// at start-up, which recovery found durable and earlier consumers may have seen).
    pub fn new(position: u64) -> ConfirmPosition {
        ConfirmPosition { position }
    }

    /// The confirm position.
    pub fn get(self) -> u64 {
        self.position
    }

    /// Moves to the smaller of the master's and the slave's durable ends if that is ahead;
    /// returns the confirm position.
    pub fn advance(&mut self, master_durable: u64, slave_durable: u64) -> u64 {
        self.position = self.position.max(master_durable.min(slave_durable));
        self.position
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    // Proves Java's in-sync rule: a connected slave less than the gap behind.
    #[test]
    fn in_sync_rule() {
        assert!(!in_sync(1000, None, 256));
        assert!(in_sync(1000, Some(1000), 256));
        assert!(in_sync(1000, Some(745), 256));
        assert!(!in_sync(1000, Some(744), 256));
        assert!(
            in_sync(1000, Some(2000), 256),
            "a slave ahead is not behind"
        );
    }

    // Proves one slave ack releases every waiter at or below it, in one go, and none above.
    #[test]
    fn one_ack_releases_many() {
        let now = Instant::now();
        let deadline = now + Duration::from_secs(3);
        let mut waiters = SyncWaiters::new();
        for (token, end) in [(1, 100), (2, 300), (3, 200), (4, 200), (5, 400)] {
            assert!(waiters.register(end, deadline, true, token).is_none());
        }
        let mut released: Vec<i32> = waiters
            .on_slave_durable(300)
            .into_iter()
            .map(|(token, outcome)| {
                assert_eq!(outcome, SyncOutcome::SendOk);
                token
            })
            .collect();
        released.sort_unstable();
        assert_eq!(released, vec![1, 2, 3, 4]);
        assert_eq!(waiters.len(), 1);
        assert!(
            waiters.on_slave_durable(250).is_empty(),
            "a slower slave changes nothing"
        );
        assert_eq!(waiters.slave_durable(), 300);
        assert_eq!(
            waiters.on_slave_durable(400),
            vec![(5, SyncOutcome::SendOk)]
        );
        assert!(waiters.is_empty());
        assert_eq!(waiters.next_deadline(), None);
    }

    // Proves a covered position may move back: a waiter above it waits on.
    #[test]
    fn covered_moves_back_when_a_member_joins() {
        let now = Instant::now();
        let deadline = now + Duration::from_secs(3);
        let mut waiters = SyncWaiters::new();
        assert!(waiters.set_covered(500).is_empty());
        assert_eq!(
            waiters.register(400, deadline, true, 1),
            Some((1, SyncOutcome::SendOk))
        );
        assert!(waiters.set_covered(200).is_empty());
        assert!(waiters.register(400, deadline, true, 2).is_none());
        assert_eq!(waiters.set_covered(450), vec![(2, SyncOutcome::SendOk)]);
    }

    // Proves overdue waiters time out in deadline order, released ones never do, and the
    // next deadline is reported for the caller's timer.
    #[test]
    fn expiry() {
        let now = Instant::now();
        let mut waiters = SyncWaiters::new();
        let second = Duration::from_secs(1);
        assert!(waiters
            .register(500, now + 3 * second, true, "late")
            .is_none());
        assert!(waiters
            .register(100, now + 2 * second, true, "released")
            .is_none());
        assert!(waiters.register(600, now + second, true, "early").is_none());
        assert_eq!(waiters.next_deadline(), Some(now + second));
        assert_eq!(
            waiters.on_slave_durable(100),
            vec![("released", SyncOutcome::SendOk)]
        );
        assert!(waiters.expire(now).is_empty());
        assert_eq!(
            waiters.expire(now + 2 * second),
            vec![("early", SyncOutcome::FlushSlaveTimeout)]
        );
        assert_eq!(waiters.next_deadline(), Some(now + 3 * second));
        assert_eq!(
            waiters.expire(now + 10 * second),
            vec![("late", SyncOutcome::FlushSlaveTimeout)]
        );
        assert!(waiters.is_empty());
    }

    // Proves the immediate answers: already held by the slave, or no slave in sync.
    #[test]
    fn immediate_answers() {
        let now = Instant::now();
        let mut waiters = SyncWaiters::new();
        assert!(waiters.on_slave_durable(1000).is_empty());
        assert_eq!(
            waiters.register(900, now, false, 1),
            Some((1, SyncOutcome::SendOk))
        );
        assert_eq!(
            waiters.register(1100, now, false, 2),
            Some((2, SyncOutcome::SlaveNotAvailable))
        );
        assert!(waiters.is_empty());
    }

    // Proves the confirm position is the smaller durable end and never moves backwards.
    #[test]
    fn confirm_never_moves_back() {
        let mut confirm = ConfirmPosition::new(50);
        assert_eq!(confirm.advance(100, 80), 80);
        assert_eq!(confirm.advance(120, 60), 80, "a slave behind hides nothing");
        assert_eq!(confirm.advance(90, 200), 90);
        assert_eq!(confirm.get(), 90);
    }
}
