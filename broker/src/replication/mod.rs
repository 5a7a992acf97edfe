//! Master/slave replication, wired to the shards: the sans-I/O core is the
//! `comet-replication` crate (frames, epochs and the divergence rule, the per-log `Sender`
//! and `Receiver`); this module runs it over sockets and the store.
//!
//! The unit of replication is a shard's log. A master's log `i` streams to the slave's log
//! `i`, so the slave must run as many shards as the master has logs (a mismatch is refused
//! at the handshake, naming `--cores`). One connection carries one log:
//!
//! - `listener`: shard 0 of a master accepts on `haListenPort`, reads the Hello within a
//!   deadline, refuses a stranger (a Close frame and nothing else), and hands the socket to
//!   the shard owning the named log (`ShardCall::Replica`); that shard adopts it, so data
//!   never crosses shards.
//! - `sender`: the owning shard answers the Hello (the divergence rule), then streams its
//!   durable log, sends heartbeats, and checks each Ack (one beyond what was sent closes
//!   the stream); the slave's progress is published in [`ReplicationState`].
//! - `receiver`: each slave shard connects to the master's HA address, says where its log
//!   is, carries out the answer, appends what arrives, and acks written and durable
//!   positions; a dropped link is retried with bounded backoff.
//! - `epochs`: each log's epoch history, persisted next to the log. A master begins a new
//!   epoch at every start.
//! - `metadata_sync`: a slave copies topics, groups, consumer offsets and delay cursors from
//!   its master every 10 s, as Java's `SlaveSynchronize` does.
//!
//! Every wait is bounded (the handshake deadline, `haHousekeepingInterval` of silence,
//! backoff) and no task blocks its shard.

pub mod epochs;
pub mod link;
pub mod listener;
pub mod metadata_sync;
pub mod receiver;
pub mod sender;

use std::cell::{Cell, OnceCell, RefCell};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use comet_replication::epoch::{Epoch, EpochHistory};
use comet_replication::wire::{Hello, StoreFormat};
use comet_rt::shutdown::{Gate, StopSignal};
use comet_rt::sync::WakerList;
use comet_rt::task_class::{spawn_detached, TaskClass};
use thiserror::Error;

use crate::config::BrokerConfig;
use crate::shard::ShardBroker;

pub use epochs::{EpochFileError, LogEpochs};

/// The record layout version master and slave must share (`StoreFormat::format_version`):
/// a change to the record or segment layout bumps it.
pub const STORE_FORMAT_VERSION: u32 = 1;

/// How long shutdown waits for this shard's replication tasks.
pub const STOP_WAIT_MAX: Duration = Duration::from_secs(5);

/// Why replication could not start on a shard.
#[derive(Debug, Error)]
pub enum ReplicationError {
    /// The epoch file could not be read or written.
    #[error(transparent)]
    Epochs(#[from] EpochFileError),
    /// The new epoch could not begin (an epoch history that cannot grow).
    #[error("log {log_id}: cannot begin a new epoch: {source}")]
    Epoch {
        /// The log.
        log_id: u8,
        /// The rule broken.
        #[source]
        source: comet_replication::epoch::EpochError,
    },
    /// The HA port could not be bound.
    #[error("cannot listen for slaves on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

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
            stop: StopSignal::new(),
            tasks: Gate::new(),
            store_root: OnceCell::new(),
        }
    }

    /// The slowest in-sync figure a SYNC_MASTER wait needs: the highest durable position
    /// any slave acknowledged for this log, if a slave follows it.
    pub fn best_slave_durable(&self) -> Option<u64> {
        self.followers
            .borrow()
            .values()
            .map(|progress| progress.durable)
            .max()
    }

    fn new_session(&self) -> u64 {
        let session = self.next_session.get();
        self.next_session.set(session + 1);
        session
    }

    fn epochs_path(&self) -> PathBuf {
        epochs::path(self.store_root.get().map_or(&PathBuf::new(), |root| root))
    }
}

/// The store format both ends must share, from the config.
pub fn store_format(config: &BrokerConfig) -> StoreFormat {
    StoreFormat {
        format_version: STORE_FORMAT_VERSION,
        segment_bytes: config.commit_log_segment_bytes,
    }
}

/// The log id of a shard's own log.
pub fn log_id_of(shard_index: usize) -> u8 {
    u8::try_from(shard_index).unwrap_or(u8::MAX)
}

/// Before a slave's store opens: a truncation its master asked for in an earlier run (see
/// `epochs`), for `StoreConfig::truncate_log_to`. Blocking (start-up).
pub fn pending_truncation(store_root: &std::path::Path) -> Result<Option<u64>, EpochFileError> {
    Ok(epochs::load(&epochs::path(store_root))?.pending_truncate)
}

/// Starts this shard's replication for its role: a master begins a new epoch of its log
/// (persisted) and shard 0 listens for slaves; a slave's shard follows its log, and every
/// slave shard copies its master's metadata. The tasks end with `stop` (then [`finish`]).
pub async fn start(broker: &Rc<ShardBroker>, stop: &StopSignal) -> Result<(), ReplicationError> {
    let state = &broker.replication;
    let store_root = broker.store.config().root.clone();
    let _ = state.store_root.set(store_root);
    let follower = state.stop.clone();
    let shard_stop = stop.clone();
    spawn_detached(TaskClass::Housekeeping, async move {
        shard_stop.wait().await;
        follower.trigger();
    });
    let config = broker.config.snapshot();
    if !config.broker_role.is_master() {
        receiver::spawn(broker, &state.tasks, &state.stop);
        metadata_sync::spawn(broker, &state.tasks, &state.stop);
        return Ok(());
    }
    let path = state.epochs_path();
    let mut kept = comet_rt::task_class::run_blocking({
        let path = path.clone();
        move || epochs::load(&path)
    })
    .await?;
    // A slave promoted by hand may still hold a truncation it never applied; as a master
    // its log is the reference, so the truncation no longer applies.
    kept.pending_truncate = None;
    let epoch = epochs::begin_master_epoch(
        &mut kept,
        broker.store.written_position(),
        broker.store.min_position(),
    )
    .map_err(|source| ReplicationError::Epoch {
        log_id: state.log_id,
        source,
    })?;
    epochs::store_off_shard(path, kept.clone()).await?;
    log::info!(
        "{}: log {} serves as master in epoch {epoch} from position {}",
        broker.shard,
        state.log_id,
        broker.store.written_position()
    );
    *state.epochs.borrow_mut() = kept.history;
    if broker.shard.0 == 0 {
        listener::spawn(broker, &state.tasks, &state.stop)?;
    }
    Ok(())
}

/// A connection the HA listener accepted for this shard's log: answer and stream it.
pub fn adopt(
    broker: &Rc<ShardBroker>,
    stream: std::net::TcpStream,
    hello: Hello,
    buffered: Vec<u8>,
) {
    let stream = match comet_rt::net::Stream::adopt(stream) {
        Ok(stream) => stream,
        Err(error) => {
            return log::warn!("{}: cannot adopt a replication link: {error}", broker.shard)
        }
    };
    sender::spawn(broker, stream, hello, buffered);
}

/// Ends this shard's replication tasks (shutdown, before the store closes).
pub async fn finish(broker: &ShardBroker) {
    let state = &broker.replication;
    state.stop.trigger();
    if let Err(error) = state.tasks.close(STOP_WAIT_MAX).await {
        log::warn!("{}: replication tasks did not end: {error}", broker.shard);
    }
}

/// The epochs a restart of a slave log must know it heard of.
fn highest(history: &EpochHistory, heard: Option<Epoch>) -> Option<Epoch> {
    history.latest().map(|latest| latest.epoch).max(heard)
}
