//! Master/slave replication, wired to the shards: the sans-I/O core is the
//! `comet-replication` crate (frames, epochs and the divergence rule, the per-log `Sender`
//! and `Receiver`); this module runs it over sockets and the store.
//!
//! The unit of replication is a shard's log. A master's log `i` streams to the slave's log
//! `i`, which the slave's shard `i % shards` hosts (`hosting`: a slave with fewer shards
//! hosts several logs, one with more leaves shards idle; the master's log count is learned
//! from its Welcome and applied at a restart). One connection carries one log:
//!
//! - `listener`: shard 0 of a master accepts on `haListenPort`, reads the Hello within a
//!   deadline, refuses a stranger (a Close frame and nothing else), and hands the socket to
//!   the shard owning the named log (`ShardCall::Replica`); that shard adopts it, so data
//!   never crosses shards.
//! - `sender`: the owning shard answers the Hello (the divergence rule), then streams its
//!   durable log, sends heartbeats, and checks each Ack (one beyond what was sent closes
//!   the stream); the slave's progress is published in [`ReplicationState`].
//! - `hosting`: the master's log count a slave keeps, and which shard hosts which log.
//! - `receiver`: for each log a slave shard hosts, connects to the master's HA address,
//!   says where the log is, carries out the answer, appends what arrives, and acks written
//!   and durable positions; a dropped link is retried with bounded backoff.
//! - `epochs`: each log's epoch history, persisted next to the log. A master begins a new
//!   epoch at every start.
//! - `sync_master`: a SYNC_MASTER's sends wait for a slave Ack (or answer at once that no
//!   slave is in sync), and its confirm task moves the position up to which consumers see
//!   records.
//! - `controller_figures`: in controller mode, what each log holds and which slaves are in
//!   sync, for the controller driver.
//! - `controlled_acks`: in controller mode, which slaves a master log's SYNC_MASTER writes
//!   wait for (the sync-state set, and slaves joining it).
//! - `metadata_sync`: a slave copies topics, groups and delay cursors from its master every
//!   10 s, as Java's `SlaveSynchronize` does, and consumer offsets every second.
//!
//! Every wait is bounded (the handshake deadline, `haHousekeepingInterval` of silence,
//! backoff) and no task blocks its shard.

pub mod controlled_acks;
pub mod controller_figures;
pub mod epochs;
pub mod hosting;
pub mod link;
pub mod listener;
pub mod metadata_sync;
pub mod receiver;
pub mod sender;
pub mod sync_master;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use comet_replication::epoch::{Epoch, EpochHistory};
use comet_replication::wire::{Hello, StoreFormat};
use comet_rt::shutdown::StopSignal;
use comet_rt::task_class::{spawn_detached, TaskClass};
use thiserror::Error;

use crate::config::BrokerConfig;
use crate::shard::ShardBroker;

pub use crate::replication_state::{
    FollowState, FollowerProgress, MasterAddresses, ReplicationState, SharedReplication, SyncSlot,
};
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

/// The replication state of a shard's log (see `crate::replication_state`).
fn epochs_path(state: &ReplicationState) -> PathBuf {
    epochs::path(state.store_root().unwrap_or(Path::new("")))
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

/// What a slave's store must do at open, as its master asked in an earlier run (see
/// `epochs`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PendingStoreChange {
    /// For `StoreConfig::truncate_log_to`.
    pub truncate_log_to: Option<u64>,
    /// For `StoreConfig::reset_log_to`.
    pub reset_log_to: Option<u64>,
}

/// Before a slave's store opens: a truncation or a fresh copy its master asked for in an
/// earlier run. Blocking (start-up).
pub fn pending_store_change(
    store_root: &std::path::Path,
) -> Result<PendingStoreChange, EpochFileError> {
    let kept = epochs::load(&epochs::path(store_root))?;
    Ok(PendingStoreChange {
        truncate_log_to: kept.pending_truncate,
        reset_log_to: kept.pending_reset,
    })
}

/// Starts this shard's replication for its role: a master begins a new epoch of its log
/// (persisted) and shard 0 listens for slaves; a slave's shard follows its log, and every
/// slave shard copies its master's metadata. The tasks end with `stop` (then [`finish`]).
pub async fn start(broker: &Rc<ShardBroker>, stop: &StopSignal) -> Result<(), ReplicationError> {
    let state = &broker.replication;
    state.set_store_root(broker.store.config().root.clone());
    let follower = state.stop().clone();
    let shard_stop = stop.clone();
    spawn_detached(TaskClass::Housekeeping, async move {
        shard_stop.wait().await;
        follower.trigger();
    });
    let config = broker.config.snapshot();
    if !config.broker_role.is_master() {
        spawn_controller_figures(broker, state);
        let own = (broker.shard.index() < broker.queue_logs()).then(|| broker.own_log());
        for log in own.into_iter().chain(broker.hosted_logs().iter().cloned()) {
            log.replication
                .set_store_root(log.store.config().root.clone());
            receiver::spawn(broker, log, state.tasks(), state.stop());
        }
        metadata_sync::spawn(broker, state.tasks(), state.stop());
        return Ok(());
    }
    let path = epochs_path(state);
    let mut kept = comet_rt::task_class::run_blocking({
        let path = path.clone();
        move || epochs::load(&path)
    })
    .await?;
    // A slave promoted by hand may still hold a truncation or a reset it never applied; as a
    // master its log is the reference, so they no longer apply.
    kept.pending_truncate = None;
    kept.pending_reset = None;
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
    state.set_ready();
    if config.broker_role == crate::config::BrokerRole::SyncMaster {
        sync_master::spawn_confirm(broker, state.tasks(), state.stop());
    }
    if broker.shard.0 == 0 {
        listener::spawn(broker, state.tasks(), state.stop())?;
    }
    // Only now: a master's figures make its heartbeats, and a master whose start stopped
    // short of serving its slaves must not look alive to the controller.
    spawn_controller_figures(broker, state);
    Ok(())
}

/// In controller mode, starts publishing this shard's figures for the driver.
fn spawn_controller_figures(broker: &Rc<ShardBroker>, state: &ReplicationState) {
    if let Some(role) = broker.controller() {
        controller_figures::spawn(broker, role.clone(), state.tasks(), state.stop());
    }
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
    state.stop().trigger();
    if let Err(error) = state.tasks().close(STOP_WAIT_MAX).await {
        log::warn!("{}: replication tasks did not end: {error}", broker.shard);
    }
}

/// The epochs a restart of a slave log must know it heard of.
fn highest(history: &EpochHistory, heard: Option<Epoch>) -> Option<Epoch> {
    history.latest().map(|latest| latest.epoch).max(heard)
}
