//! Controller mode: which slaves a SYNC_MASTER write of one log waits for, and when a slave
//! outside the sync-state set may be reported in sync so the master proposes it.
//!
//! The controller elects a new master only from the sync-state set, so every write answered
//! SEND_OK must be held by every member of the set the controller holds. Two rules keep that
//! true (Java's `allAckInSyncStateSet`, which Comet turns on by default):
//!
//! - **Waiting.** A write waits for every member of the accepted set and of a proposal not
//!   yet answered ([`crate::controller::Session::ack_requirement`]): a shrink frees writes
//!   only once the controller accepted it.
//! - **Joining.** A slave outside the set must hold every write answered without it before
//!   the master proposes it, or a failover to it would lose them. Once a slave in sync by
//!   `haMaxGapNotInSync` is at most `join_lag_max` behind, the log starts waiting for it
//!   too (writes stall for at most that much of its catching up) and notes the master's
//!   durable end then, the *join point*: everything answered earlier ends there or before.
//!   The slave is reported in sync once it holds the log durably up to the join point.
//!   Java's `maybeExpandInSyncStateSet` asks the slave to reach the confirm offset instead,
//!   a target that moves while writes go on, so under steady load a slave may never join.
//! - **Leaving.** A joining slave that was reported in sync and then disconnects or falls
//!   behind is still waited for until the controller driver has looked at the broker's
//!   figures again since (its passes, [`Joining::review`]'s `driver_pass`): by then the
//!   requirement the log reads names the slave if any proposal does, so no write is
//!   answered without a slave the controller may be about to accept.
//!
//! Everything here is pure: positions and pass numbers come in as arguments.

use std::collections::{BTreeMap, BTreeSet};

use crate::controller::{AckRequirement, BrokerControllerId};

/// The slaves a write must reach before it is answered SEND_OK (the master's own copy is
/// its durable append, which comes first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Coverage {
    /// No write may be answered SEND_OK (not master, or too few in sync).
    Never,
    /// Every listed slave.
    AllOf(BTreeSet<BrokerControllerId>),
    /// This many slaves, whichever (`inSyncReplicas` - 1 without `allAckInSyncStateSet`).
    AnyOf(usize),
}

impl Coverage {
    /// The coverage `requirement` asks of the slaves of the master `own` (excluded from
    /// the members), plus the slaves that are joining.
    pub fn from_requirement(
        requirement: &AckRequirement,
        own: Option<BrokerControllerId>,
        joining: impl IntoIterator<Item = BrokerControllerId>,
    ) -> Coverage {
        match requirement {
            AckRequirement::NotMaster | AckRequirement::TooFewInSync { .. } => Coverage::Never,
            AckRequirement::AllOf(members) => Coverage::AllOf(
                members
                    .iter()
                    .copied()
                    .chain(joining)
                    .filter(|member| Some(*member) != own)
                    .collect(),
            ),
            AckRequirement::Copies(copies) => Coverage::AnyOf(copies.saturating_sub(1)),
        }
    }

    /// The log position up to which every write is held as required, given each connected
    /// slave's acknowledged durable end (`u64::MAX` when no slave is needed; 0 when a
    /// needed slave is not connected).
    pub fn covered(&self, durable: &BTreeMap<BrokerControllerId, u64>) -> u64 {
        match self {
            Coverage::Never => 0,
            Coverage::AllOf(members) => members
                .iter()
                .map(|member| durable.get(member).copied().unwrap_or(0))
                .min()
                .unwrap_or(u64::MAX),
            Coverage::AnyOf(0) => u64::MAX,
            Coverage::AnyOf(count) => {
                let mut ends: Vec<u64> = durable.values().copied().collect();
                ends.sort_unstable_by(|a, b| b.cmp(a));
                ends.get(count - 1).copied().unwrap_or(0)
            }
        }
    }

    /// Whether `slave` is one of the listed members.
    pub fn requires(&self, slave: BrokerControllerId) -> bool {
        matches!(self, Coverage::AllOf(members) if members.contains(&slave))
    }
}

/// What the master's log knows of one connected slave at a review.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlaveView {
    /// Its acknowledged durable end of the log.
    pub durable: u64,
    /// In sync by `haMaxGapNotInSync`.
    pub gap_in_sync: bool,
    /// A member of the set or proposal the log waits for (not as a joiner).
    pub member: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    join_point: u64,
    reported: bool,
    withdrawn_at_pass: Option<u64>,
}

/// The slaves of one log joining the sync-state set (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Joining {
    entries: BTreeMap<BrokerControllerId, Entry>,
}

/// Driver passes a withdrawn joiner is still waited for. The pass count a review gets was
/// read before the log published its reports, so one pass may have read the figures before
/// the withdrawal and finished after that read; the third began after the publication, read
/// the withdrawal, and published a requirement naming the slave if any proposal (even one
/// made from older figures) does. The log reads the requirement after the pass count.
const WITHDRAWN_PASSES: u64 = 3;

impl Joining {
    /// No slave joining.
    pub fn new() -> Joining {
        Joining::default()
    }

    /// The joining slaves, which writes wait for as well.
    pub fn waited(&self) -> impl Iterator<Item = BrokerControllerId> + '_ {
        self.entries.keys().copied()
    }

    /// Looks at every connected slave (`slaves`) with the master's durable end and the
    /// controller driver's pass count, and returns, per slave, whether to report it in sync
    /// on this log. Members are reported by the gap rule alone.
    pub fn review(
        &mut self,
        master_durable: u64,
        slaves: &BTreeMap<BrokerControllerId, SlaveView>,
        join_lag_max: u64,
        driver_pass: u64,
    ) -> BTreeMap<BrokerControllerId, bool> {
        let mut reports = BTreeMap::new();
        for (slave, view) in slaves {
            let in_sync = if view.member {
                self.entries.remove(slave);
                view.gap_in_sync
            } else if let Some(entry) = self.entries.get_mut(slave) {
                if view.gap_in_sync {
                    entry.withdrawn_at_pass = None;
                    entry.reported |= view.durable >= entry.join_point;
                    entry.reported
                } else {
                    entry.withdrawn_at_pass.get_or_insert(driver_pass);
                    false
                }
            } else if view.gap_in_sync
                && master_durable.saturating_sub(view.durable) <= join_lag_max
            {
                let reported = view.durable >= master_durable;
                self.entries.insert(
                    *slave,
                    Entry {
                        join_point: master_durable,
                        reported,
                        withdrawn_at_pass: None,
                    },
                );
                reported
            } else {
                false
            };
            reports.insert(*slave, in_sync);
        }
        for (slave, entry) in &mut self.entries {
            if !slaves.contains_key(slave) {
                entry.withdrawn_at_pass.get_or_insert(driver_pass);
            }
        }
        // A joiner never reported can go at once: no proposal names it.
        self.entries
            .retain(|_, entry| match entry.withdrawn_at_pass {
                None => true,
                Some(_) if !entry.reported => false,
                Some(at) => driver_pass < at.saturating_add(WITHDRAWN_PASSES),
            });
        reports
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn durable(pairs: &[(i64, u64)]) -> BTreeMap<i64, u64> {
        pairs.iter().copied().collect()
    }

    // Proves the covered position: the slowest listed member (0 when one is missing), the
    // count-th best of any slaves, everything when no slave is needed, nothing when never.
    #[test]
    fn covered_positions() {
        let ends = durable(&[(2, 500), (3, 300)]);
        let all = Coverage::AllOf(BTreeSet::from([2, 3]));
        assert_eq!(all.covered(&ends), 300);
        assert_eq!(Coverage::AllOf(BTreeSet::from([2, 4])).covered(&ends), 0);
        assert_eq!(Coverage::AllOf(BTreeSet::new()).covered(&ends), u64::MAX);
        assert_eq!(Coverage::AnyOf(1).covered(&ends), 500);
        assert_eq!(Coverage::AnyOf(2).covered(&ends), 300);
        assert_eq!(Coverage::AnyOf(3).covered(&ends), 0);
        assert_eq!(Coverage::AnyOf(0).covered(&ends), u64::MAX);
        assert_eq!(Coverage::Never.covered(&ends), 0);
    }

    // Proves the requirement maps to coverage without the master itself, with the joiners.
    #[test]
    fn coverage_from_the_requirement() {
        let all = AckRequirement::AllOf(BTreeSet::from([1, 2]));
        assert_eq!(
            Coverage::from_requirement(&all, Some(1), [3]),
            Coverage::AllOf(BTreeSet::from([2, 3]))
        );
        assert_eq!(
            Coverage::from_requirement(&AckRequirement::Copies(2), Some(1), [3]),
            Coverage::AnyOf(1)
        );
        let too_few = AckRequirement::TooFewInSync { in_sync: 1, min: 2 };
        assert_eq!(
            Coverage::from_requirement(&too_few, Some(1), []),
            Coverage::Never
        );
    }

    fn view(durable: u64, gap_in_sync: bool, member: bool) -> SlaveView {
        SlaveView {
            durable,
            gap_in_sync,
            member,
        }
    }

    // Proves a slave joins only close behind, is waited for from then on, and is reported in
    // sync once it holds the master's durable end of the moment it joined.
    #[test]
    fn a_slave_joins_from_its_join_point() {
        let mut joining = Joining::new();
        let far = BTreeMap::from([(2, view(0, true, false))]);
        assert_eq!(
            joining.review(10_000, &far, 1_000, 0),
            BTreeMap::from([(2, false)])
        );
        assert_eq!(
            joining.waited().count(),
            0,
            "too far behind to be waited for"
        );
        let close = BTreeMap::from([(2, view(9_500, true, false))]);
        assert_eq!(
            joining.review(10_000, &close, 1_000, 1),
            BTreeMap::from([(2, false)])
        );
        assert_eq!(joining.waited().collect::<Vec<_>>(), vec![2]);
        // The master wrote on; the slave reached the join point, not the new end.
        let caught_up = BTreeMap::from([(2, view(10_000, true, false))]);
        assert_eq!(
            joining.review(12_000, &caught_up, 1_000, 2),
            BTreeMap::from([(2, true)])
        );
        // Once the controller's set holds it, it is a member, no longer a joiner.
        let member = BTreeMap::from([(2, view(12_000, true, true))]);
        assert_eq!(
            joining.review(12_000, &member, 1_000, 3),
            BTreeMap::from([(2, true)])
        );
        assert_eq!(joining.waited().count(), 0);
    }

    // Proves a reported joiner that disconnects is still waited for until three driver
    // passes went by, and one never reported is dropped at once.
    #[test]
    fn a_reported_joiner_is_waited_for_until_the_driver_saw_it_leave() {
        let mut joining = Joining::new();
        let held = BTreeMap::from([(2, view(100, true, false)), (3, view(50, true, false))]);
        let reports = joining.review(100, &held, 1_000, 5);
        assert_eq!(reports, BTreeMap::from([(2, true), (3, false)]));
        assert_eq!(joining.waited().collect::<Vec<_>>(), vec![2, 3]);
        let gone = BTreeMap::new();
        assert!(joining.review(200, &gone, 1_000, 6).is_empty());
        assert_eq!(joining.waited().collect::<Vec<_>>(), vec![2]);
        joining.review(200, &gone, 1_000, 8);
        assert_eq!(joining.waited().collect::<Vec<_>>(), vec![2]);
        joining.review(200, &gone, 1_000, 9);
        assert_eq!(joining.waited().count(), 0);
    }

    // Proves a reported joiner that falls out of sync is reported out at once, waited for
    // until the driver saw it, and resumes its join if it comes back in the meantime.
    #[test]
    fn a_joiner_falling_behind_is_reported_out() {
        let mut joining = Joining::new();
        let held = BTreeMap::from([(2, view(100, true, false))]);
        assert_eq!(
            joining.review(100, &held, 1_000, 1),
            BTreeMap::from([(2, true)])
        );
        let behind = BTreeMap::from([(2, view(100, false, false))]);
        assert_eq!(
            joining.review(900, &behind, 1_000, 2),
            BTreeMap::from([(2, false)])
        );
        assert_eq!(joining.waited().collect::<Vec<_>>(), vec![2]);
        assert_eq!(
            joining.review(900, &held, 1_000, 3),
            BTreeMap::from([(2, true)])
        );
        assert_eq!(
            joining.review(900, &behind, 1_000, 4),
            BTreeMap::from([(2, false)])
        );
        joining.review(900, &behind, 1_000, 6);
        assert_eq!(joining.waited().collect::<Vec<_>>(), vec![2]);
        joining.review(900, &behind, 1_000, 7);
        assert_eq!(joining.waited().count(), 0);
    }
}
