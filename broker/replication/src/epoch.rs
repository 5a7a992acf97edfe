//! Epoch histories and the divergence rule.
//!
//! An epoch is one reign of one master over a log. Whenever a log starts serving as a
//! master (a start-up or a promotion) it begins a new epoch, numbered above every epoch it
//! has heard of (a slave's `Receiver::highest_epoch_seen`), at its written end; a slave
//! records an epoch when the first Data frame of it arrives. A log's history is the list
//! of `(epoch, start position)` of the epochs it holds bytes of, both strictly increasing:
//! epoch `e` covers `[start(e), start(next))`, and the last one runs to the written end.
//!
//! Two logs that both hold bytes of epoch `e` got them from the same master, so they agree
//! on every byte up to the smaller of their two ends of `e`. That gives the divergence rule
//! ([`reconcile`]), as Kafka's leader epochs and RocketMQ 5's `EpochFileCache` do: take the largest
//! epoch both histories know; the slave keeps its log up to the smaller of the two ends of
//! that epoch and truncates the rest. A slave that shares no epoch with the master (or has
//! bytes but no history) cannot prove any byte, and is copied afresh from the master's
//! oldest retained segment. A slave that knows an epoch newer than every epoch of the master
//! is not behind: the master is the stale one, and must not serve it.

use thiserror::Error;

use crate::limits::{EPOCHS_MAX, POSITION_MAX};

/// A master's reign over a log. Epochs only grow; one log never reuses a number.
pub type Epoch = u32;

/// One entry of an [`EpochHistory`]: the epoch and the log position its bytes start at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EpochStart {
    /// The epoch.
    pub epoch: Epoch,
    /// Log position of its first byte.
    pub start: u64,
}

/// A history that breaks its invariants (see the module docs).
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum EpochError {
    /// Entry `index` does not follow its predecessor in both epoch and start.
    #[error("epoch entry {index} ({entry:?}) does not follow {previous:?}")]
    NotIncreasing {
        /// Index of the offending entry.
        index: usize,
        /// The entry before it.
        previous: EpochStart,
        /// The offending entry.
        entry: EpochStart,
    },
    /// More entries than [`EPOCHS_MAX`].
    #[error("{count} epochs, at most {max}")]
    TooMany {
        /// Entries given.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// A start beyond [`POSITION_MAX`].
    #[error("epoch {epoch} starts at {start}, beyond the largest position")]
    PositionTooLarge {
        /// The epoch.
        epoch: Epoch,
        /// Its start.
        start: u64,
    },
    /// A new epoch that is not above the latest one.
    #[error("epoch {epoch} is not newer than the latest epoch {latest}")]
    NotNewer {
        /// The epoch asked for.
        epoch: Epoch,
        /// The latest epoch of the history.
        latest: Epoch,
    },
    /// A new epoch that would start before the latest one.
    #[error(
        "epoch {epoch} would start at {start}, before the latest epoch's start {latest_start}"
    )]
    StartsBeforeLatest {
        /// The epoch asked for.
        epoch: Epoch,
        /// Its start.
        start: u64,
        /// Start of the latest epoch.
        latest_start: u64,
    },
}

/// The epochs a log holds bytes of, oldest first (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct EpochHistory {
    entries: Vec<EpochStart>,
}

impl EpochHistory {
    /// An empty history (a log with no bytes, or whose bytes no epoch vouches for).
    pub fn new() -> EpochHistory {
        EpochHistory::default()
    }

    /// A history from stored or received entries, checked: epochs and starts strictly
    /// increasing, starts within positions, at most [`EPOCHS_MAX`] entries.
    pub fn from_entries(entries: Vec<EpochStart>) -> Result<EpochHistory, EpochError> {
        if entries.len() > EPOCHS_MAX {
            return Err(EpochError::TooMany {
                count: entries.len(),
                max: EPOCHS_MAX,
            });
        }
        for (index, entry) in entries.iter().enumerate() {
            if entry.start > POSITION_MAX {
                return Err(EpochError::PositionTooLarge {
                    epoch: entry.epoch,
                    start: entry.start,
                });
            }
            if let Some(previous) = index.checked_sub(1).map(|before| entries[before]) {
                if entry.epoch <= previous.epoch || entry.start <= previous.start {
                    return Err(EpochError::NotIncreasing {
                        index,
                        previous,
                        entry: *entry,
                    });
                }
            }
        }
        Ok(EpochHistory { entries })
    }

    /// The entries, oldest first.
    pub fn entries(&self) -> &[EpochStart] {
        &self.entries
    }

    /// Whether no epoch is recorded.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The newest entry.
    pub fn latest(&self) -> Option<EpochStart> {
        self.entries.last().copied()
    }

    /// Records that `epoch` starts at `start`. The epoch must be newer than the latest and
    /// start no earlier; starting where the latest does replaces it (it holds no bytes, so
    /// nothing can diverge inside it). At [`EPOCHS_MAX`] entries the oldest is forgotten
    /// (see [`EPOCHS_MAX`] for why that is safe).
    pub fn begin(&mut self, epoch: Epoch, start: u64) -> Result<(), EpochError> {
        if start > POSITION_MAX {
            return Err(EpochError::PositionTooLarge { epoch, start });
        }
        if let Some(latest) = self.latest() {
            if epoch <= latest.epoch {
                return Err(EpochError::NotNewer {
                    epoch,
                    latest: latest.epoch,
                });
            }
            if start < latest.start {
                return Err(EpochError::StartsBeforeLatest {
                    epoch,
                    start,
                    latest_start: latest.start,
                });
            }
            if start == latest.start {
                self.entries.pop();
            }
        }
        if self.entries.len() == EPOCHS_MAX {
            self.entries.remove(0);
        }
        self.entries.push(EpochStart { epoch, start });
        Ok(())
    }

    /// The epoch whose bytes include `position`, if the history covers it (a position at or
    /// past the written end belongs to the latest epoch: the next byte written there does).
    pub fn epoch_at(&self, position: u64) -> Option<Epoch> {
        let index = self
            .entries
            .partition_point(|entry| entry.start <= position);
        Some(self.entries.get(index.checked_sub(1)?)?.epoch)
    }

    /// Where the bytes of `epoch` end: the next entry's start, or `log_end` for the latest
    /// epoch. `None` when the history does not hold `epoch`.
    pub fn end_of(&self, epoch: Epoch, log_end: u64) -> Option<u64> {
        let index = self
            .entries
            .binary_search_by_key(&epoch, |entry| entry.epoch)
            .ok()?;
        Some(
            self.entries
                .get(index + 1)
                .map_or(log_end, |next| next.start),
        )
    }

    /// Where the bytes of `epoch` start, if the history holds it.
    pub fn start_of(&self, epoch: Epoch) -> Option<u64> {
        let index = self
            .entries
            .binary_search_by_key(&epoch, |entry| entry.epoch)
            .ok()?;
        Some(self.entries[index].start)
    }

    /// Where the epoch after the one holding `position` starts: the first position a Data
    /// frame starting at `position` must not cross. `None` when no later epoch exists.
    pub fn next_start_after(&self, position: u64) -> Option<u64> {
        let index = self
            .entries
            .partition_point(|entry| entry.start <= position);
        self.entries.get(index).map(|entry| entry.start)
    }

    /// Forgets every epoch holding no byte below `end` (the log was truncated to `end`).
    pub fn truncate_to(&mut self, end: u64) {
        let keep = self.entries.partition_point(|entry| entry.start < end);
        self.entries.truncate(keep);
    }

    /// Forgets the epochs whose bytes all lie below `oldest` (retention removed them) and
    /// moves the start of the epoch holding `oldest` up to it, as the log now starts there.
    pub fn truncate_from_start(&mut self, oldest: u64) {
        let first_kept = self
            .entries
            .partition_point(|entry| entry.start <= oldest)
            .saturating_sub(1);
        self.entries.drain(..first_kept);
        if let Some(first) = self.entries.first_mut() {
            first.start = first.start.max(oldest);
        }
    }

    /// Forgets everything (the log was wiped).
    pub fn clear(&mut self) {
        self.entries.clear();
    }
}

/// What the master knows of its own log, for [`reconcile`].
#[derive(Clone, Copy, Debug)]
pub struct MasterLogView<'a> {
    /// The master's history of the log.
    pub history: &'a EpochHistory,
    /// The master's written end.
    pub written: u64,
    /// Start of the master's oldest retained segment: nothing below it can be sent.
    pub oldest: u64,
}

/// What a slave says of its log, for [`reconcile`].
#[derive(Clone, Copy, Debug)]
pub struct SlaveLogView<'a> {
    /// The slave's history of the log.
    pub history: &'a EpochHistory,
    /// The slave's written end.
    pub written: u64,
}

/// Where a slave's log resumes, as the divergence rule decides. Replication continues at
/// [`ResumePlan::position`] in every case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ResumePlan {
    /// The slave's log is a prefix of the master's: keep it all, continue at its end.
    Continue {
        /// The slave's written end.
        from: u64,
    },
    /// The slave holds bytes the master does not: drop every byte from `to` on.
    Truncate {
        /// The new end of the slave's log.
        to: u64,
    },
    /// No byte of the slave's log can be proven, or the master no longer retains where it
    /// ends: drop the whole log and start it afresh at `from`, the start of the master's
    /// oldest retained segment (never only its newest, which left Java's HA slaves with
    /// a hole).
    FullCopy {
        /// Where the slave's new log starts.
        from: u64,
    },
}

impl ResumePlan {
    /// The position replication continues from.
    pub fn position(&self) -> u64 {
        match *self {
            ResumePlan::Continue { from } => from,
            ResumePlan::Truncate { to } => to,
            ResumePlan::FullCopy { from } => from,
        }
    }
}

/// The slave knows an epoch newer than every epoch of the master: the master is stale (it
/// was replaced while away) and must serve nothing.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
#[error("slave knows epoch {slave_epoch}, newer than the master's latest {master_epoch:?}")]
pub struct SlaveNewerEpoch {
    /// The slave's latest epoch.
    pub slave_epoch: Epoch,
    /// The master's latest epoch, if it has any.
    pub master_epoch: Option<Epoch>,
}

/// The divergence rule (see the module docs): where `slave` resumes following `master`.
pub fn reconcile(
    master: MasterLogView<'_>,
    slave: SlaveLogView<'_>,
) -> Result<ResumePlan, SlaveNewerEpoch> {
    if let Some(slave_latest) = slave.history.latest() {
        let master_epoch = master.history.latest().map(|entry| entry.epoch);
        if master_epoch.is_none_or(|epoch| slave_latest.epoch > epoch) {
            return Err(SlaveNewerEpoch {
                slave_epoch: slave_latest.epoch,
                master_epoch,
            });
        }
    }
    let slave_first = slave.history.entries().first().map(|entry| entry.start);
    let master_first = master.history.entries().first().map(|entry| entry.start);
    let common = slave.history.entries().iter().rev().find_map(|entry| {
        let master_start = master.history.start_of(entry.epoch)?;
        // One epoch starts at one position. Two copies of it may start apart only where a
        // log's oldest bytes were removed (retention, or a slave copied afresh): then the
        // clipped copy is its log's first entry. Any other claim proves nothing, and an
        // older epoch is tried instead.
        let slave_clipped = Some(entry.start) == slave_first && entry.start > master_start;
        let master_clipped = Some(master_start) == master_first
            && master_start <= master.oldest
            && entry.start < master_start;
        if entry.start != master_start && !slave_clipped && !master_clipped {
            return None;
        }
        let master_end = master.history.end_of(entry.epoch, master.written)?;
        let slave_end = slave.history.end_of(entry.epoch, slave.written)?;
        Some(master_end.min(slave_end))
    });
    let keep = match common {
        Some(end) => end.min(slave.written),
        None if slave.written == 0 => 0,
        None => {
            return Ok(ResumePlan::FullCopy {
                from: master.oldest,
            })
        }
    };
    // Keeping nothing of a log that starts later than 0 leaves no log to continue.
    let keeps_nothing = slave_first.is_some_and(|first| keep <= first) && keep < slave.written;
    if keeps_nothing {
        return Ok(ResumePlan::FullCopy {
            from: master.oldest,
        });
    }
    if keep < master.oldest {
        return Ok(ResumePlan::FullCopy {
            from: master.oldest,
        });
    }
    if keep < slave.written {
        Ok(ResumePlan::Truncate { to: keep })
    } else {
        Ok(ResumePlan::Continue { from: keep })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn history(entries: &[(Epoch, u64)]) -> EpochHistory {
        EpochHistory::from_entries(
            entries
                .iter()
                .map(|&(epoch, start)| EpochStart { epoch, start })
                .collect(),
        )
        .expect("valid history")
    }

    fn plan(
        master: &EpochHistory,
        master_written: u64,
        master_oldest: u64,
        slave: &EpochHistory,
        slave_written: u64,
    ) -> Result<ResumePlan, SlaveNewerEpoch> {
        reconcile(
            MasterLogView {
                history: master,
                written: master_written,
                oldest: master_oldest,
            },
            SlaveLogView {
                history: slave,
                written: slave_written,
            },
        )
    }

    // Proves histories must increase in both epoch and start and stay within limits.
    #[test]
    fn histories_are_checked() {
        let entry = |epoch, start| EpochStart { epoch, start };
        assert!(EpochHistory::from_entries(vec![entry(1, 0), entry(2, 10)]).is_ok());
        assert!(matches!(
            EpochHistory::from_entries(vec![entry(2, 0), entry(2, 10)]),
            Err(EpochError::NotIncreasing { index: 1, .. })
        ));
        assert!(matches!(
            EpochHistory::from_entries(vec![entry(1, 10), entry(2, 10)]),
            Err(EpochError::NotIncreasing { .. })
        ));
        assert!(matches!(
            EpochHistory::from_entries(vec![entry(1, POSITION_MAX + 1)]),
            Err(EpochError::PositionTooLarge { .. })
        ));
        let too_many = (0..=u32::try_from(EPOCHS_MAX).expect("small"))
            .map(|n| entry(n, u64::from(n)))
            .collect();
        assert!(matches!(
            EpochHistory::from_entries(too_many),
            Err(EpochError::TooMany { .. })
        ));
    }

    // Proves begin refuses old epochs and earlier starts, replaces an empty latest epoch and
    // forgets the oldest entry at the limit.
    #[test]
    fn begin_appends_and_replaces() {
        let mut epochs = EpochHistory::new();
        epochs.begin(1, 0).expect("first");
        epochs.begin(2, 100).expect("second");
        assert!(matches!(
            epochs.begin(2, 200),
            Err(EpochError::NotNewer { .. })
        ));
        assert!(matches!(
            epochs.begin(3, 50),
            Err(EpochError::StartsBeforeLatest { .. })
        ));
        epochs.begin(3, 100).expect("replaces the empty epoch 2");
        assert_eq!(epochs, history(&[(1, 0), (3, 100)]));

        let mut full = EpochHistory::new();
        for n in 0..u32::try_from(EPOCHS_MAX).expect("small") {
            full.begin(n, u64::from(n)).expect("fits");
        }
        full.begin(5000, 5000).expect("at the limit");
        assert_eq!(full.entries().len(), EPOCHS_MAX);
        assert_eq!(full.entries()[0].epoch, 1);
        assert_eq!(
            full.latest(),
            Some(EpochStart {
                epoch: 5000,
                start: 5000
            })
        );
    }

    // Proves the lookups: the epoch at a position, the end of an epoch, the next boundary.
    #[test]
    fn lookups() {
        let epochs = history(&[(1, 0), (4, 100), (7, 250)]);
        assert_eq!(epochs.epoch_at(0), Some(1));
        assert_eq!(epochs.epoch_at(99), Some(1));
        assert_eq!(epochs.epoch_at(100), Some(4));
        assert_eq!(epochs.epoch_at(10_000), Some(7));
        assert_eq!(history(&[(1, 10)]).epoch_at(5), None);
        assert_eq!(epochs.end_of(1, 300), Some(100));
        assert_eq!(epochs.end_of(4, 300), Some(250));
        assert_eq!(epochs.end_of(7, 300), Some(300));
        assert_eq!(epochs.end_of(5, 300), None);
        assert_eq!(epochs.next_start_after(50), Some(100));
        assert_eq!(epochs.next_start_after(100), Some(250));
        assert_eq!(epochs.next_start_after(250), None);
    }

    // Proves truncation from the end drops epochs with no byte left, and from the start
    // drops epochs wholly below the oldest position and clips the one holding it.
    #[test]
    fn truncation() {
        let mut epochs = history(&[(1, 0), (4, 100), (7, 250)]);
        epochs.truncate_to(251);
        assert_eq!(epochs, history(&[(1, 0), (4, 100), (7, 250)]));
        epochs.truncate_to(250);
        assert_eq!(epochs, history(&[(1, 0), (4, 100)]));
        let mut epochs = history(&[(1, 0), (4, 100), (7, 250)]);
        epochs.truncate_from_start(100);
        assert_eq!(epochs, history(&[(4, 100), (7, 250)]));
        epochs.truncate_from_start(180);
        assert_eq!(epochs, history(&[(4, 180), (7, 250)]));
        epochs.truncate_from_start(1000);
        assert_eq!(epochs, history(&[(7, 1000)]));
    }

    // Proves equal histories continue where the slave is.
    #[test]
    fn equal_histories_continue() {
        let epochs = history(&[(1, 0), (2, 500)]);
        assert_eq!(
            plan(&epochs, 900, 0, &epochs, 900),
            Ok(ResumePlan::Continue { from: 900 })
        );
    }

    // Proves a slave behind in the master's current or an older epoch continues.
    #[test]
    fn slave_behind_continues() {
        let master = history(&[(1, 0), (2, 500)]);
        assert_eq!(
            plan(&master, 900, 0, &master, 700),
            Ok(ResumePlan::Continue { from: 700 })
        );
        let slave = history(&[(1, 0)]);
        assert_eq!(
            plan(&master, 900, 0, &slave, 300),
            Ok(ResumePlan::Continue { from: 300 })
        );
        assert_eq!(
            plan(&master, 900, 0, &slave, 500),
            Ok(ResumePlan::Continue { from: 500 })
        );
    }

    // Proves a slave ahead in an old epoch (it had bytes the next master never got)
    // truncates to where the master's copy of that epoch ends, and a slave ahead of the
    // master in the master's own epoch (the master lost an unflushed tail) truncates too.
    #[test]
    fn slave_ahead_in_old_epoch_truncates() {
        let master = history(&[(1, 0), (2, 500)]);
        let slave = history(&[(1, 0)]);
        assert_eq!(
            plan(&master, 900, 0, &slave, 650),
            Ok(ResumePlan::Truncate { to: 500 })
        );
        assert_eq!(
            plan(&master, 900, 0, &master, 950),
            Ok(ResumePlan::Truncate { to: 900 })
        );
    }

    // Proves a slave holding an epoch the master never had is cut back to the largest
    // epoch both know, and that a slave knowing a newer epoch than the master is refused.
    #[test]
    fn slave_with_epoch_master_never_had() {
        let master = history(&[(1, 0), (3, 600)]);
        let slave = history(&[(1, 0), (2, 400)]);
        assert_eq!(
            plan(&master, 900, 0, &slave, 700),
            Ok(ResumePlan::Truncate { to: 400 })
        );
        let newer = history(&[(1, 0), (5, 400)]);
        assert_eq!(
            plan(&master, 900, 0, &newer, 700),
            Err(SlaveNewerEpoch {
                slave_epoch: 5,
                master_epoch: Some(3)
            })
        );
        assert!(plan(&EpochHistory::new(), 0, 0, &newer, 700).is_err());
    }

    // Proves an epoch the slave claims from before the master's start of it proves
    // nothing (one epoch starts at one position), unless the master's retention clipped it.
    #[test]
    fn epoch_claimed_too_early_proves_nothing() {
        let master = history(&[(1, 0), (3, 300)]);
        let slave = history(&[(1, 0), (3, 200)]);
        assert_eq!(
            plan(&master, 900, 0, &slave, 700),
            Ok(ResumePlan::Truncate { to: 200 })
        );
        let clipped = history(&[(3, 4096)]);
        assert_eq!(
            plan(&clipped, 9000, 4096, &slave, 5000),
            Ok(ResumePlan::Continue { from: 5000 })
        );
    }

    // Proves an empty slave starts at 0 when the master still has position 0, and copies
    // from the master's oldest retained segment otherwise.
    #[test]
    fn empty_slave() {
        let master = history(&[(1, 0)]);
        let empty = EpochHistory::new();
        assert_eq!(
            plan(&master, 900, 0, &empty, 0),
            Ok(ResumePlan::Continue { from: 0 })
        );
        let retained = history(&[(1, 4096)]);
        assert_eq!(
            plan(&retained, 9000, 4096, &empty, 0),
            Ok(ResumePlan::FullCopy { from: 4096 })
        );
    }

    // Proves a slave whose end the master no longer retains, or with bytes but no shared
    // epoch, is copied afresh from the master's oldest retained segment.
    #[test]
    fn master_oldest_beyond_slave_end_is_a_full_copy() {
        let master = history(&[(1, 8192), (2, 10_000)]);
        let slave = history(&[(1, 0)]);
        assert_eq!(
            plan(&master, 12_000, 8192, &slave, 5000),
            Ok(ResumePlan::FullCopy { from: 8192 })
        );
        assert_eq!(
            plan(&master, 12_000, 8192, &EpochHistory::new(), 5000),
            Ok(ResumePlan::FullCopy { from: 8192 })
        );
        let stranger = history(&[(0, 0)]);
        assert_eq!(
            plan(&history(&[(1, 0)]), 100, 0, &stranger, 50),
            Ok(ResumePlan::FullCopy { from: 0 })
        );
    }

    fn arbitrary_history() -> impl Strategy<Value = (EpochHistory, u64)> {
        proptest::collection::btree_map(0u32..20, 0u64..1000, 0..6).prop_map(|map| {
            let mut starts: Vec<u64> = map.values().copied().collect();
            starts.sort_unstable();
            starts.dedup();
            let entries: Vec<EpochStart> = map
                .keys()
                .zip(starts.iter())
                .map(|(&epoch, &start)| EpochStart { epoch, start })
                .collect();
            let end = entries.last().map_or(0, |entry| entry.start) + 200;
            (EpochHistory::from_entries(entries).expect("sorted"), end)
        })
    }

    proptest! {
        // Proves the rule's plan never resumes past either log's end, never keeps bytes of
        // the slave that lie in an epoch the master disagrees on, and that a slave that
        // follows the plan then reconciles to a plain Continue.
        #[test]
        fn plans_are_safe_and_converge(
            (master, master_written) in arbitrary_history(),
            (slave, slave_written) in arbitrary_history(),
            oldest_share in 0u64..4,
        ) {
            let oldest = master.entries().first().map_or(0, |entry| entry.start)
                .max(master_written * oldest_share / 8);
            let Ok(decided) = plan(&master, master_written, oldest, &slave, slave_written)
            else {
                return Ok(());
            };
            let position = decided.position();
            prop_assert!(position <= master_written);
            if let ResumePlan::Continue { from } | ResumePlan::Truncate { to: from } = decided {
                prop_assert!(from <= slave_written);
                prop_assert!(from >= oldest);
            } else {
                prop_assert_eq!(position, oldest);
            }
            let mut followed = slave.clone();
            match decided {
                ResumePlan::FullCopy { .. } => followed.clear(),
                _ => followed.truncate_to(position),
            }
            let again = plan(&master, master_written, oldest, &followed, position);
            if followed.is_empty() && position > 0 {
                // A log with bytes but no epoch proves nothing: copied afresh again.
                prop_assert_eq!(again, Ok(ResumePlan::FullCopy { from: oldest }));
            } else {
                prop_assert_eq!(again, Ok(ResumePlan::Continue { from: position }));
            }
        }
    }
}
