//! One shard's replication state, kept with the shard: the epochs of its log and the
//! slaves following it (a master), or the stream it follows (a slave). The replication
//! feature (`crate::replication`) runs the links and writes it; the SYNC_MASTER waits and
//! the admin figures read it. It sits below the shard context so that `ShardBroker` can hold
//! it without naming a feature.

use std::cell::{Cell, OnceCell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use comet_replication::ack_set::{Coverage, Joining};
use comet_replication::controller::{AckRequirement, BrokerControllerId};
use comet_replication::epoch::EpochHistory;
use comet_replication::sync_wait::{in_sync, SyncOutcome, SyncWaiters};
use comet_rt::shutdown::{Gate, StopSignal};
use comet_rt::sync::{Notify, WakerList};

/// What a master learns of one slave following one of its logs (one session).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FollowerProgress {
    /// The slave's `brokerId`.
    pub broker_id: u64,
    /// Where its connection comes from.
    pub peer: SocketAddr,
    /// Its acknowledged written end of the log.
    pub written: u64,
    /// Its acknowledged durable end of the log.
    pub durable: u64,
    /// When its last Ack was accepted (or the session started).
    pub last_ack_at: Instant,
}

/// One SYNC_MASTER send waiting for a slave: its answer, once known, and the wake-up of the
/// task that waits for it.
#[derive(Default)]
pub struct SyncSlot {
    /// The answer, once a slave Ack or the deadline decided it.
    pub outcome: Cell<Option<SyncOutcome>>,
    /// Woken when `outcome` is set.
    pub woken: Notify,
}

/// What a slave's log knows of its master's stream.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FollowState {
    /// Whether a session is up (Welcome applied).
    pub connected: bool,
    /// The master's HA address last used.
    pub master: Option<String>,
    /// Written end of this log here.
    pub written: u64,
    /// Durable end of this log here.
    pub durable: u64,
    /// The master's confirm position, as last heard.
    pub confirm: u64,
    /// Why replication of this log stopped for good (a restart is needed), if it did.
    pub stopped: Option<String>,
}

/// The master's addresses as a slave learns them: the HA address streams the logs, the
/// broker address serves the metadata sync. Shared by every shard of a slave.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MasterAddresses {
    /// `haServerAddr` from the name server (`haMasterAddress` takes precedence).
    pub ha_addr: Option<String>,
    /// `masterAddr` from the name server.
    pub broker_addr: Option<String>,
}

/// Controller mode on a master: what the sync-state set asks of this log's writes
/// (comet_replication's `ack_set`, docs/architecture.md#failover).
#[derive(Debug)]
pub struct ControlledAcks {
    /// The change number of `requirement` (`ControllerRole::ack_requirement`).
    pub generation: u64,
    /// What the controller session requires of a replicated write.
    pub requirement: AckRequirement,
    /// This broker's controller id.
    pub own: Option<BrokerControllerId>,
    /// Slaves joining the sync-state set through this log.
    pub joining: Joining,
}

impl ControlledAcks {
    /// The slaves a write waits for now.
    pub fn coverage(&self) -> Coverage {
        Coverage::from_requirement(&self.requirement, self.own, self.joining.waited())
    }
}

/// Replication state shared by a broker's shards.
#[derive(Debug, Default)]
pub struct SharedReplication {
    master: Mutex<MasterAddresses>,
}

impl SharedReplication {
    /// Nothing learned yet.
    pub fn new() -> SharedReplication {
        SharedReplication::default()
    }

    /// The master's addresses as last learned.
    pub fn master(&self) -> MasterAddresses {
        self.master
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replaces both addresses (controller mode: the controller names the master).
    pub fn set_master(&self, ha_addr: Option<String>, broker_addr: Option<String>) {
        *self.master.lock().unwrap_or_else(PoisonError::into_inner) = MasterAddresses {
            ha_addr,
            broker_addr,
        };
    }

    /// Takes what a name server answered to REGISTER_BROKER (empty answers keep what was
    /// known: a name server that has not seen the master yet says nothing).
    pub fn learn(&self, ha_addr: Option<String>, broker_addr: Option<String>) {
        let mut master = self.master.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(ha_addr) = ha_addr.filter(|addr| !addr.is_empty()) {
            if master.ha_addr.as_deref() != Some(ha_addr.as_str()) {
                log::info!("the master's HA address is {ha_addr}");
            }
            master.ha_addr = Some(ha_addr);
        }
        if let Some(broker_addr) = broker_addr.filter(|addr| !addr.is_empty()) {
            master.broker_addr = Some(broker_addr);
        }
    }
}

/// One shard's replication state: its log's epochs, the slaves following it (master), or
/// the stream it follows (slave). Read by the SYNC_MASTER waits and the admin figures.
pub struct ReplicationState {
    /// This shard's log.
    pub log_id: u8,
    /// The master log's epoch history (empty on a slave: its receiver holds it).
    pub epochs: RefCell<EpochHistory>,
    /// Master: each session's slave progress, by session number.
    pub followers: RefCell<BTreeMap<u64, FollowerProgress>>,
    /// Master: woken whenever a slave's Ack moves its progress (SYNC_MASTER waiters wait
    /// on it) and when a session ends.
    pub acks: WakerList,
    /// Master: (when, written end) as sampled at each accepted Ack, oldest first, so the
    /// admin figures can tell how long the master has held bytes a slave lacks.
    written_samples: RefCell<VecDeque<(Instant, u64)>>,
    /// Master (SYNC_MASTER): sends waiting for a slave to hold their message durably.
    pub sync_waiters: RefCell<SyncWaiters<Rc<SyncSlot>>>,
    /// Master in controller mode: which slaves its SYNC_MASTER writes wait for (`None`
    /// outside controller mode: any one slave in sync, Java's classic rule).
    pub controlled: RefCell<Option<ControlledAcks>>,
    /// Slave: the state of this log's stream.
    pub follow: RefCell<FollowState>,
    /// Shared by every shard.
    pub shared: Arc<SharedReplication>,
    next_session: Cell<u64>,
    /// Set once the log's epoch for this start is in place: a slave arriving earlier is
    /// asked to come back.
    ready: Cell<bool>,
    stop: StopSignal,
    tasks: Gate,
    store_root: OnceCell<PathBuf>,
}

impl ReplicationState {
    /// The state of the shard whose log is `log_id`.
    pub fn new(log_id: u8, shared: Arc<SharedReplication>) -> ReplicationState {
        ReplicationState {
            log_id,
            epochs: RefCell::new(EpochHistory::new()),
            followers: RefCell::new(BTreeMap::new()),
            acks: WakerList::default(),
            sync_waiters: RefCell::new(SyncWaiters::new()),
            controlled: RefCell::new(None),
            written_samples: RefCell::new(VecDeque::new()),
            follow: RefCell::new(FollowState::default()),
            shared,
            next_session: Cell::new(1),
            ready: Cell::new(false),
            stop: StopSignal::new(),
            tasks: Gate::new(),
            store_root: OnceCell::new(),
        }
    }

    /// The furthest durable position any slave following this log acknowledged (what a
    /// SYNC_MASTER wait compares with), or `None` while no slave follows it.
    pub fn best_slave_durable(&self) -> Option<u64> {
        self.followers
            .borrow()
            .values()
            .map(|progress| progress.durable)
            .max()
    }

    /// Whether a slave is in sync for a message ending at `master_end`: one follows this
    /// log and is less than `gap_max_bytes` behind it (Java's `HAService.isSlaveOK`).
    pub fn slave_in_sync(&self, master_end: u64, gap_max_bytes: u64) -> bool {
        in_sync(master_end, self.best_slave_durable(), gap_max_bytes)
    }

    /// What consumers of a SYNC_MASTER may see: the smallest durable end of the in-sync
    /// set, the master (`master_durable`) and every slave less than `gap_max_bytes` behind
    /// `master_written`; with no slave in sync, the master's alone (Kafka's ISR rule: a
    /// master without a slave still serves its consumers).
    pub fn confirm_target(&self, master_durable: u64, master_written: u64, gap_max: u64) -> u64 {
        self.followers
            .borrow()
            .values()
            .filter(|slave| in_sync(master_written, Some(slave.durable), gap_max))
            .map(|slave| slave.durable)
            .fold(master_durable, u64::min)
    }

    /// Per slave (controller id), the furthest durable end any of its sessions acknowledged.
    pub fn slave_durables(&self) -> BTreeMap<BrokerControllerId, u64> {
        let mut durables = BTreeMap::new();
        for follower in self.followers.borrow().values() {
            if let Ok(id) = BrokerControllerId::try_from(follower.broker_id) {
                let durable = durables.entry(id).or_insert(0);
                *durable = follower.durable.max(*durable);
            }
        }
        durables
    }

    /// Controller mode: the position up to which the slaves the sync-state set requires
    /// hold this log (`None` outside controller mode).
    pub fn controlled_covered(&self) -> Option<u64> {
        let controlled = self.controlled.borrow();
        let coverage = controlled.as_ref()?.coverage();
        Some(coverage.covered(&self.slave_durables()))
    }

    /// A slave's progress changed, or what the writes wait for did: answers every
    /// SYNC_MASTER send now held as required.
    pub fn on_progress(&self, slave_durable: u64) {
        match self.controlled_covered() {
            Some(covered) => {
                let released = self.sync_waiters.borrow_mut().set_covered(covered);
                answer(released);
            }
            None => self.on_slave_durable(slave_durable),
        }
    }

    /// Controller mode: whether the sync-state set is below `minInSyncReplicas`, so sends
    /// that would wait for slaves are refused before they are stored.
    pub fn too_few_in_sync(&self) -> bool {
        self.controlled.borrow().as_ref().is_some_and(|controlled| {
            matches!(controlled.requirement, AckRequirement::TooFewInSync { .. })
        })
    }

    /// A slave holds this log durably up to `durable`: every SYNC_MASTER send it covers is
    /// answered SEND_OK (one Ack releases them all, as one flush releases a group commit).
    pub fn on_slave_durable(&self, durable: u64) {
        let released = self.sync_waiters.borrow_mut().on_slave_durable(durable);
        answer(released);
    }

    /// Answers FLUSH_SLAVE_TIMEOUT to every SYNC_MASTER send whose deadline is past.
    pub fn expire_sync_waiters(&self, now: Instant) {
        let expired = self.sync_waiters.borrow_mut().expire(now);
        answer(expired);
    }

    /// Notes that the log's written end was `written` at `now` (master, at each Ack).
    pub fn sample_written(&self, now: Instant, written: u64) {
        let mut samples = self.written_samples.borrow_mut();
        if samples.back().is_some_and(|(_, last)| *last >= written) {
            return;
        }
        if samples.len() == WRITTEN_SAMPLES_MAX {
            samples.pop_front();
        }
        samples.push_back((now, written));
    }

    /// How long the master has held bytes beyond a slave's `durable` end, as of `now`: since
    /// the first sample past it (zero when none is; at Ack granularity).
    pub fn lag_behind(&self, durable: u64, now: Instant) -> Duration {
        self.written_samples
            .borrow()
            .iter()
            .find(|(_, written)| *written > durable)
            .map_or(Duration::ZERO, |(at, _)| now.saturating_duration_since(*at))
    }

    /// A number for a new slave session (master).
    pub fn new_session(&self) -> u64 {
        let session = self.next_session.get();
        self.next_session.set(session + 1);
        session
    }

    /// Whether the log's epoch for this start is in place (master).
    pub fn is_ready(&self) -> bool {
        self.ready.get()
    }

    /// Marks the log's epoch for this start as in place.
    pub fn set_ready(&self) {
        self.ready.set(true);
    }

    /// Trips when this shard's replication tasks must end.
    pub fn stop(&self) -> &StopSignal {
        &self.stop
    }

    /// The gate this shard's replication tasks run in (shutdown waits for it).
    pub fn tasks(&self) -> &Gate {
        &self.tasks
    }

    /// The shard's store root, where the log's replication file lives (set at start).
    pub fn store_root(&self) -> Option<&Path> {
        self.store_root.get().map(PathBuf::as_path)
    }

    /// Records the shard's store root (once; later calls keep the first).
    pub fn set_store_root(&self, root: PathBuf) {
        let _ = self.store_root.set(root);
    }
}

/// Written-end samples kept per log: at one Ack per group commit, enough to cover the lag
/// of a slave seconds behind; older samples only matter to a slave so far behind that the
/// oldest kept one already shows it.
const WRITTEN_SAMPLES_MAX: usize = 4096;

/// Gives each released waiter its answer (after the waiters' borrow ended).
pub fn answer(released: Vec<(Rc<SyncSlot>, SyncOutcome)>) {
    for (slot, outcome) in released {
        slot.outcome.set(Some(outcome));
        slot.woken.notify();
    }
}
