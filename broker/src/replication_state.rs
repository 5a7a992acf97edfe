//! One shard's replication state, kept with the shard: the epochs of its log and the
//! slaves following it (a master), or the stream it follows (a slave). The replication
//! feature (`crate::replication`) runs the links and writes it; the SYNC_MASTER waits and
//! the admin figures read it. It sits below the shard context so that `ShardBroker` can hold
//! it without naming a feature.

use std::cell::{Cell, OnceCell, RefCell};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use comet_replication::epoch::EpochHistory;
use comet_rt::shutdown::{Gate, StopSignal};
use comet_rt::sync::WakerList;

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
