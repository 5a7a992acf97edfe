//! The Raft glue: one member of the controller group, a tikv `raft` node driven without I/O.
//!
//! The caller owns time, the network and the disk. It calls [`Replica::tick`] every
//! [`TICK_MS`], hands peers' messages to [`Replica::step`] and proposes the events of a
//! checked request with [`Replica::propose`]. [`Replica::ready`] then says what to do, in
//! Raft's order: send [`ReadyWork::send`] at once, make [`ReadyWork::entries`] and
//! [`ReadyWork::hard_state`] durable ([`super::raft_store::RaftStore::append`]), and only then
//! call [`Replica::persisted`], which returns the messages that needed the write (votes,
//! acknowledgements) and the committed records to apply, in log order, on every member alike.
//!
//! The log is compacted by [`Replica::compact`]: a snapshot of the caller's state at an
//! applied index replaces the entries up to it, and is what the leader sends a member whose
//! missing entries are gone; [`ReadyWork::snapshot`] hands such a received snapshot to the
//! caller to make durable and [`Persisted::restored`] gives its state back to install.
//!
//! A record carries a tag besides its events, so that the member that proposed it can match
//! the committed record to the request waiting for it. Entries without data are the no-op
//! a new leader commits to learn its commit point.

use std::cell::RefCell;

use raft::eraftpb::{Entry, EntryType, HardState, Message, Snapshot};
use raft::storage::MemStorage;
use raft::{Config, GetEntriesContext, RaftState, RawNode, StateRole, Storage};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::raft_store::Recovered;
use super::Event;

/// How often the caller ticks the node, in ms.
pub const TICK_MS: u64 = 100;
/// Ticks without a leader's heartbeat before a follower campaigns (randomised up to twice).
pub const ELECTION_TICKS: usize = 10;
/// Ticks between a leader's heartbeats.
pub const HEARTBEAT_TICKS: usize = 2;

/// One log record: the events of one checked request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Chosen by the proposer to recognise its record when it commits.
    pub tag: u64,
    /// The events, applied in order.
    pub events: Vec<Event>,
}

/// A committed log position handed to the caller to apply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Committed {
    /// The entry's index.
    pub index: u64,
    /// The entry's term.
    pub term: u64,
    /// The record, or `None` for a leader's empty entry.
    pub record: Option<Record>,
}

/// Why the Raft node refused or failed.
#[derive(Debug, Error)]
pub enum ReplicaError {
    /// raft-rs refused (bad configuration, a proposal without a leader, ...).
    #[error("raft: {0}")]
    Raft(#[from] raft::Error),
    /// A record does not encode, or a committed one does not decode.
    #[error("controller log record: {0}")]
    Record(#[from] serde_json::Error),
}

/// What one [`Replica::ready`] asks of the caller.
pub struct ReadyWork {
    /// Messages to send now, before the write.
    pub send: Vec<Message>,
    /// Entries to make durable.
    pub entries: Vec<Entry>,
    /// The hard state to make durable, when it changed (always set with a snapshot).
    pub hard_state: Option<HardState>,
    /// A snapshot received from the leader, to make durable as the member's snapshot (the
    /// log then holds only [`ReadyWork::entries`]).
    pub snapshot: Option<Snapshot>,
    ready: raft::Ready,
}

/// A compaction to make durable: the snapshot, the entries after it, the hard state.
#[derive(Debug)]
pub struct Compaction {
    /// The snapshot of the caller's state at the applied index.
    pub snapshot: Snapshot,
    /// The entries the log keeps.
    pub entries_after: Vec<Entry>,
    /// The current hard state.
    pub hard_state: HardState,
}

/// What [`Replica::persisted`] gives back.
#[derive(Debug, Default)]
pub struct Persisted {
    /// Messages to send now that the write is durable.
    pub send: Vec<Message>,
    /// Committed records to apply, in order.
    pub committed: Vec<Committed>,
    /// The state of a snapshot received from the leader, to install before applying
    /// `committed`.
    pub restored: Option<Vec<u8>>,
}

/// raft-rs's in-memory log, with the snapshot the caller's state was compacted into: raft-rs's
/// own `MemStorage` answers a snapshot request with metadata but no state.
pub struct LogStorage {
    memory: MemStorage,
    snapshot: RefCell<Snapshot>,
}

impl Storage for LogStorage {
    fn initial_state(&self) -> raft::Result<RaftState> {
        self.memory.initial_state()
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        self.memory.entries(low, high, max_size, context)
    }

    fn term(&self, index: u64) -> raft::Result<u64> {
        let snapshot = self.snapshot.borrow();
        let metadata = snapshot.get_metadata();
        if index != 0 && index == metadata.index {
            return Ok(metadata.term);
        }
        self.memory.term(index)
    }

    fn first_index(&self) -> raft::Result<u64> {
        self.memory.first_index()
    }

    fn last_index(&self) -> raft::Result<u64> {
        self.memory.last_index()
    }

    fn snapshot(&self, _request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        Ok(self.snapshot.borrow().clone())
    }
}

/// One member of the controller group.
pub struct Replica {
    node: RawNode<LogStorage>,
}

impl Replica {
    /// Starts member `id` of the group `voters` from what its log held.
    pub fn new(
        id: u64,
        voters: &[u64],
        recovered: Recovered,
        logger: &slog::Logger,
    ) -> Result<Replica, ReplicaError> {
        let memory = MemStorage::new_with_conf_state((voters.to_vec(), Vec::<u64>::new()));
        let snapshot = recovered.snapshot.unwrap_or_default();
        let snapshot_index = snapshot.get_metadata().index;
        {
            let mut core = memory.wl();
            if snapshot_index > 0 {
                core.apply_snapshot(snapshot.clone())?;
            }
            core.append(&recovered.entries)?;
            let mut hard_state = recovered.hard_state;
            // A commit point past the entries kept cannot be (it was written after them);
            // clamp rather than make raft-rs panic.
            let last = recovered
                .entries
                .last()
                .map_or(snapshot_index, |entry| entry.index);
            hard_state.commit = hard_state.commit.clamp(snapshot_index, last);
            core.set_hardstate(hard_state);
        }
        let storage = LogStorage {
            memory,
            snapshot: RefCell::new(snapshot),
        };
        let config = Config {
            id,
            // The caller installed the snapshot's state: replay only what follows it.
            applied: snapshot_index,
            election_tick: ELECTION_TICKS,
            heartbeat_tick: HEARTBEAT_TICKS,
            pre_vote: true,
            check_quorum: true,
            ..Config::default()
        };
        config.validate()?;
        let node = RawNode::new(&config, storage, logger)?;
        Ok(Replica { node })
    }

    /// This member's id.
    pub fn id(&self) -> u64 {
        self.node.raft.id
    }

    /// Advances the node's clock by one tick.
    pub fn tick(&mut self) {
        self.node.tick();
    }

    /// Takes a message from a peer. A message raft-rs rejects (a stale or unknown peer's)
    /// is dropped, as the network could have dropped it.
    pub fn step(&mut self, message: Message) {
        if let Err(error) = self.node.step(message) {
            log::debug!("controller raft {}: message dropped: {error}", self.id());
        }
    }

    /// Proposes a record. Fails when this member is not the leader.
    pub fn propose(&mut self, record: &Record) -> Result<(), ReplicaError> {
        let data = serde_json::to_vec(record)?;
        self.node.propose(Vec::new(), data)?;
        Ok(())
    }

    /// Whether this member leads.
    pub fn is_leader(&self) -> bool {
        self.node.raft.state == StateRole::Leader
    }

    /// The leader's id as this member knows it.
    pub fn leader_id(&self) -> Option<u64> {
        Some(self.node.raft.leader_id).filter(|id| *id != raft::INVALID_ID)
    }

    /// The current term.
    pub fn term(&self) -> u64 {
        self.node.raft.term
    }

    /// The highest index known committed.
    pub fn commit_index(&self) -> u64 {
        self.node.raft.raft_log.committed
    }

    /// Tells raft-rs a peer cannot be reached, so the leader probes it instead of streaming.
    pub fn report_unreachable(&mut self, id: u64) {
        self.node.report_unreachable(id);
    }

    /// What to do now, if anything.
    pub fn ready(&mut self) -> Option<ReadyWork> {
        if !self.node.has_ready() {
            return None;
        }
        let mut ready = self.node.ready();
        let send = ready.take_messages();
        let entries = ready.entries().clone();
        let snapshot = Some(ready.snapshot().clone()).filter(|s| !s.is_empty());
        let hard_state = match ready.hs() {
            Some(hard_state) => Some(hard_state.clone()),
            None if snapshot.is_some() => Some(self.node.raft.hard_state()),
            None => None,
        };
        Some(ReadyWork {
            send,
            entries,
            hard_state,
            snapshot,
            ready,
        })
    }

    /// Finishes a [`ReadyWork`] whose entries and hard state are now durable.
    pub fn persisted(&mut self, work: ReadyWork) -> Result<Persisted, ReplicaError> {
        let ReadyWork {
            entries,
            hard_state,
            snapshot,
            mut ready,
            ..
        } = work;
        let mut out = Persisted::default();
        let committed = ready.take_committed_entries();
        {
            let store = self.node.mut_store();
            let mut core = store.memory.wl();
            if let Some(snapshot) = snapshot {
                core.apply_snapshot(snapshot.clone())?;
                out.restored = Some(snapshot.data.to_vec());
                *store.snapshot.borrow_mut() = snapshot;
            }
            if !entries.is_empty() {
                core.append(&entries)?;
            }
            if let Some(hard_state) = hard_state {
                core.set_hardstate(hard_state);
            }
        }
        out.send.extend(ready.take_persisted_messages());
        decode_into(&mut out.committed, committed)?;
        let mut light = self.node.advance(ready);
        if let Some(commit) = light.commit_index() {
            self.node.mut_store().memory.wl().mut_hard_state().commit = commit;
        }
        out.send.extend(light.take_messages());
        decode_into(&mut out.committed, light.take_committed_entries())?;
        self.node.advance_apply();
        Ok(out)
    }

    /// The index of the snapshot the log starts after (0: none).
    pub fn snapshot_index(&self) -> u64 {
        self.node.store().snapshot.borrow().get_metadata().index
    }

    /// Replaces the entries up to `applied` (applied by the caller, whose state is then
    /// `data`) by a snapshot; the caller makes the returned compaction durable
    /// ([`super::raft_store::RaftStore::save_snapshot`]) before the next ready.
    pub fn compact(&mut self, applied: u64, data: Vec<u8>) -> Result<Compaction, ReplicaError> {
        let store = self.node.store();
        let term = store.term(applied)?;
        let mut snapshot = Snapshot {
            data: data.into(),
            ..Snapshot::default()
        };
        let metadata = snapshot.mut_metadata();
        metadata.index = applied;
        metadata.term = term;
        metadata.set_conf_state(store.initial_state()?.conf_state);
        let last = store.last_index()?;
        let entries_after =
            store.entries(applied + 1, last + 1, None, GetEntriesContext::empty(false))?;
        // The entry at `applied` stays in memory: raft-rs's in-memory log knows its last
        // index and term only from an entry or from a snapshot it applied itself.
        store.memory.wl().compact(applied)?;
        *store.snapshot.borrow_mut() = snapshot.clone();
        Ok(Compaction {
            snapshot,
            entries_after,
            hard_state: self.node.raft.hard_state(),
        })
    }
}

fn decode_into(out: &mut Vec<Committed>, entries: Vec<Entry>) -> Result<(), ReplicaError> {
    for entry in entries {
        // The group's membership is fixed by configuration: no configuration changes.
        if entry.get_entry_type() != EntryType::EntryNormal {
            continue;
        }
        let record = if entry.data.is_empty() {
            None
        } else {
            Some(serde_json::from_slice(&entry.data)?)
        };
        out.push(Committed {
            index: entry.index,
            term: entry.term,
            record,
        });
    }
    Ok(())
}

/// A slog logger that writes through the `log` crate, as the rest of the name server logs.
pub fn raft_logger() -> slog::Logger {
    use slog::Drain as _;
    slog::Logger::root(slog_stdlog::StdLog.fuse(), slog::o!())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::controller::{ControllerConfig, ControllerNode, ControllerState, Request};

    /// A member: its Raft node, its controller state and every event it applied.
    struct Member {
        replica: Replica,
        node: ControllerNode,
        applied: Vec<Event>,
        snapshots_installed: usize,
    }

    /// Three members whose messages the test delivers; a member in `cut` sends and
    /// receives nothing.
    struct Group {
        members: Vec<Member>,
        cut: BTreeSet<u64>,
        in_flight: Vec<Message>,
    }

    impl Group {
        fn new() -> Group {
            let voters = [1, 2, 3];
            let logger = raft_logger();
            let members = voters
                .iter()
                .map(|id| Member {
                    replica: Replica::new(*id, &voters, Recovered::default(), &logger).unwrap(),
                    node: ControllerNode::new(ControllerConfig::default()),
                    applied: Vec::new(),
                    snapshots_installed: 0,
                })
                .collect();
            Group {
                members,
                cut: BTreeSet::new(),
                in_flight: Vec::new(),
            }
        }

        fn member(&mut self, id: u64) -> &mut Member {
            &mut self.members[usize::try_from(id - 1).unwrap()]
        }

        fn route(&mut self, messages: Vec<Message>) {
            for message in messages {
                if !self.cut.contains(&message.from) && !self.cut.contains(&message.to) {
                    self.in_flight.push(message);
                }
            }
        }

        /// Handles every member's ready work and delivers messages until none are left.
        fn settle(&mut self) {
            for _ in 0..1_000 {
                for index in 0..self.members.len() {
                    while let Some(mut work) = self.members[index].replica.ready() {
                        let send = std::mem::take(&mut work.send);
                        self.route(send);
                        let member = &mut self.members[index];
                        let done = member.replica.persisted(work).unwrap();
                        if let Some(data) = &done.restored {
                            member.node.restore(serde_json::from_slice(data).unwrap());
                            member.snapshots_installed += 1;
                        }
                        for committed in &done.committed {
                            for event in committed.record.iter().flat_map(|r| &r.events) {
                                member.node.apply(event);
                                member.applied.push(event.clone());
                            }
                        }
                        self.route(done.send);
                    }
                }
                if self.in_flight.is_empty() {
                    return;
                }
                for message in std::mem::take(&mut self.in_flight) {
                    let to = message.to;
                    self.member(to).replica.step(message);
                }
            }
            panic!("messages never settled");
        }

        fn tick(&mut self, ticks: usize) {
            for _ in 0..ticks {
                for member in &mut self.members {
                    member.replica.tick();
                }
                self.settle();
            }
        }

        /// Ticks until a member outside `cut` leads; its id.
        fn leader(&mut self) -> u64 {
            for _ in 0..200 {
                let leader = self
                    .members
                    .iter()
                    .find(|m| m.replica.is_leader() && !self.cut.contains(&m.replica.id()));
                if let Some(leader) = leader {
                    return leader.replica.id();
                }
                self.tick(1);
            }
            panic!("no leader elected in 200 ticks");
        }

        fn propose_claim(&mut self, id: u64, broker_name: &str, tag: u64) {
            let request = Request::ApplyBrokerId {
                cluster_name: "c".to_owned(),
                broker_name: broker_name.to_owned(),
                broker_id: 1,
                register_check_code: "127.0.0.1:10911;1".to_owned(),
            };
            let member = self.member(id);
            let (events, _) = member.node.handle(&request, 0).unwrap();
            assert_eq!(events.len(), 1);
            member.replica.propose(&Record { tag, events }).unwrap();
        }

        fn states(&self) -> Vec<&ControllerState> {
            self.members.iter().map(|m| m.node.state()).collect()
        }
    }

    // Proves three members driven in memory elect one leader, and that records the leader
    // proposes commit and are applied, in the same order, by every member.
    #[test]
    fn three_members_elect_and_apply_the_same_events() {
        let mut group = Group::new();
        let leader = group.leader();
        group.propose_claim(leader, "b1", 1);
        group.propose_claim(leader, "b2", 2);
        group.tick(3);
        let states = group.states();
        assert!(states[0].broker_set("b1").is_some() && states[0].broker_set("b2").is_some());
        assert!(
            states.iter().all(|state| *state == states[0]),
            "{states:#?}"
        );
        let logs: Vec<_> = group.members.iter().map(|m| &m.applied).collect();
        assert_eq!(logs[0].len(), 2);
        assert!(logs.iter().all(|log| *log == logs[0]));
        let followers = group
            .members
            .iter()
            .filter(|m| !m.replica.is_leader())
            .count();
        assert_eq!(followers, 2, "one leader");
    }

    // Proves a member that missed entries the leader has since compacted into a snapshot
    // catches up by receiving the snapshot, then applies what follows like the others.
    #[test]
    fn a_member_behind_a_compacted_log_catches_up_by_snapshot() {
        let mut group = Group::new();
        let leader = group.leader();
        let behind = (1..=3).find(|id| *id != leader).unwrap();
        group.cut.insert(behind);
        group.propose_claim(leader, "a", 1);
        group.propose_claim(leader, "b", 2);
        group.tick(3);
        for id in (1..=3).filter(|id| *id != behind) {
            let member = group.member(id);
            let applied = member.replica.commit_index();
            let data = serde_json::to_vec(member.node.state()).unwrap();
            let compaction = member.replica.compact(applied, data).unwrap();
            assert!(compaction.entries_after.is_empty());
            assert_eq!(member.replica.snapshot_index(), applied);
        }
        assert!(group.member(behind).node.state().broker_set("a").is_none());

        group.cut.clear();
        group.tick(20);
        assert_eq!(
            group.member(behind).snapshots_installed,
            1,
            "caught up by snapshot"
        );
        let leader = group.leader();
        group.propose_claim(leader, "c", 3);
        group.tick(3);
        let states = group.states();
        assert!(
            states.iter().all(|state| *state == states[0]),
            "{states:#?}"
        );
        for name in ["a", "b", "c"] {
            assert!(states[0].broker_set(name).is_some(), "{name}");
        }
    }

    // Proves a leader cut off from the others commits nothing it proposes, while the
    // majority elects a new leader and commits; once the cut heals, the old leader's record
    // is discarded and all three hold the majority's state.
    #[test]
    fn a_partitioned_minority_commits_nothing() {
        let mut group = Group::new();
        let old = group.leader();
        group.propose_claim(old, "before", 1);
        group.tick(2);
        assert!(group
            .states()
            .iter()
            .all(|s| s.broker_set("before").is_some()));

        group.cut.insert(old);
        group.propose_claim(old, "lost", 2);
        group.tick(40);
        let minority = group.member(old);
        assert!(
            minority.node.state().broker_set("lost").is_none(),
            "minority committed"
        );
        assert!(
            !minority.replica.is_leader(),
            "check-quorum makes it step down"
        );
        let new = group.leader();
        assert_ne!(new, old);
        group.propose_claim(new, "after", 3);
        group.tick(3);
        assert!(group.member(new).node.state().broker_set("after").is_some());

        group.cut.clear();
        group.tick(30);
        let states = group.states();
        assert!(
            states.iter().all(|state| *state == states[0]),
            "{states:#?}"
        );
        assert!(states[0].broker_set("after").is_some());
        assert!(states[0].broker_set("lost").is_none());
    }
}
