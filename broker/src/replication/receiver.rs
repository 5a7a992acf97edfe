//! A slave's receiver: one task per log a shard hosts (see `hosting`), following the
//! master's log of the same id over its own connection.
//!
//! Each session: connect to the master's HA address (`haMasterAddress`, else the
//! `haServerAddr` the name server returned to REGISTER_BROKER), send a Hello built from the
//! recovered store (written, durable, the persisted epoch history), carry out the Welcome's
//! answer, then append each Data frame with `Store::append_replicated` and ack the written
//! and durable positions (durability through the store's own group commit,
//! `Store::wait_durable`). A dropped link is retried with backoff doubling from
//! [`BACKOFF_MIN`] to [`BACKOFF_MAX`].
//!
//! The store shows its readers only what the master confirmed (the confirm position of
//! Data frames and heartbeats: durable on the master and on a slave), because the master
//! streams bytes before they are durable on it. A master that crashed and restarted may
//! lack a tail this slave holds; its answer then truncates that tail, which no reader can
//! have seen, on the open store (`Store::truncate_unconfirmed`); a restarted slave's store
//! holds back what was not visible before (`StoreConfig::hold_unconfirmed_at_open`), so
//! that stays true across restarts, an old master restarted as a slave included. A
//! truncation into bytes readers may have seen (an ASYNC_MASTER's, or a master that lost
//! durable bytes), or a fresh copy, cannot be applied to an open store: it is persisted
//! (see `epochs`), replication of the log stops with an error saying a restart applies it,
//! and the next start opens the store with `truncate_log_to` or `reset_log_to` before
//! anything is served. A log reset that way starts empty at the master's oldest
//! retained segment, so the master's next answer (a full copy from there) needs nothing
//! more and the copy streams in.
//! Answers that no retry can change (another cluster or broker name, a refused broker id, a
//! store format that differs, a master older than this log) stop the log's replication with
//! an error naming the fix. A master with another log count than this slave hosts is
//! recorded (`hosting`) and the error says a restart hosts its logs.

use std::cell::RefCell;
use std::net::{SocketAddr, ToSocketAddrs};
use std::rc::Rc;
use std::time::Duration;

use comet_replication::slave::{Instruction, Receiver};
use comet_replication::wire::{Close, CloseReason, Frame, Hello, LogRefusal};
use comet_rt::clock::monotonic_now;
use comet_rt::net::Stream;
use comet_rt::shutdown::{Gate, StopSignal};
use comet_rt::sync::{race, Either, Notify};
use comet_rt::task_class::{run_blocking, sleep, timeout, TaskClass};
use comet_store::StoreError;
use thiserror::Error;

use super::epochs::{self, EpochFileError, LogEpochs};
use super::link::{self, FrameReader, LinkError};
use super::{highest, store_format, FollowState};
use crate::shard::{HostedLog, ShardBroker};

/// First pause before reconnecting.
pub const BACKOFF_MIN: Duration = Duration::from_millis(100);
/// Longest pause before reconnecting.
pub const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// Longest wait for a connection to the master.
const CONNECT_WAIT_MAX: Duration = Duration::from_secs(3);
/// Longest wait for the Welcome.
const WELCOME_WAIT_MAX: Duration = Duration::from_secs(10);

/// Why a session ended.
#[derive(Debug, Error)]
pub enum ReceiveError {
    /// No master HA address is known yet.
    #[error("no master HA address yet (haMasterAddress unset and the name server named none)")]
    NoMaster,
    /// The master's address does not resolve.
    #[error("master HA address {addr:?} does not resolve: {reason}")]
    Address {
        /// The address.
        addr: String,
        /// Why.
        reason: String,
    },
    /// The connection failed or the master misbehaved on it.
    #[error(transparent)]
    Link(#[from] LinkError),
    /// This end closed the stream.
    #[error("closed the stream: {reason:?} {detail}")]
    Closed {
        /// The reason sent.
        reason: CloseReason,
        /// Its words.
        detail: String,
    },
    /// The store refused or failed.
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// The epoch file failed.
    #[error(transparent)]
    Epochs(#[from] EpochFileError),
    /// Retrying cannot help: the configuration, the data or a restart must change.
    #[error("{0}")]
    Fatal(String),
}

impl ReceiveError {
    fn closed(close: &Close) -> ReceiveError {
        ReceiveError::Closed {
            reason: close.reason,
            detail: close.detail.clone(),
        }
    }
}

/// How a session ended without an error.
enum Ended {
    /// The broker is stopping.
    Stopped,
}

/// Starts following `log`, one this shard hosts.
pub fn spawn(broker: &Rc<ShardBroker>, log: HostedLog, tasks: &Gate, stop: &StopSignal) {
    let log_id = log.replication.log_id;
    let following = follow(broker.clone(), log, stop.clone());
    if tasks
        .spawn("ha-receiver", TaskClass::Replication, following)
        .is_err()
    {
        log::warn!(
            "{}: replication is stopping: the receiver of log {log_id} does not start",
            broker.shard
        );
    }
}

async fn follow(broker: Rc<ShardBroker>, log: HostedLog, stop: StopSignal) {
    let log_id = log.replication.log_id;
    let mut kept = match prepare(&log).await {
        Ok(kept) => kept,
        Err(error) => return stop_for_good(&log, &error.to_string()),
    };
    let mut backoff = BACKOFF_MIN;
    while !stop.is_triggered() {
        let outcome = session(&broker, &log, &mut kept, &stop).await;
        let was_following = std::mem::take(&mut log.replication.follow.borrow_mut().connected);
        match outcome {
            Ok(Ended::Stopped) => return,
            Err(ReceiveError::Fatal(reason)) => return stop_for_good(&log, &reason),
            Err(error @ ReceiveError::NoMaster) => log::debug!("log {log_id}: {error}"),
            Err(error) => {
                log::warn!("log {log_id}: replication interrupted: {error}");
            }
        }
        if was_following {
            // The link worked: a drop now is news, so reconnect soon.
            backoff = BACKOFF_MIN;
        }
        race(stop.wait(), sleep(backoff)).await;
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

/// Loads the epoch file and settles a truncation applied at open (the runtime opened the
/// store with `truncate_log_to`).
async fn prepare(log: &HostedLog) -> Result<LogEpochs, ReceiveError> {
    let path = super::epochs_path(&log.replication);
    let load_path = path.clone();
    let mut kept = run_blocking(move || epochs::load(&load_path)).await?;
    if let Some(to) = kept.pending_truncate {
        let written = log.store.written_position();
        if written > to {
            return Err(ReceiveError::Fatal(format!(
                "log {} still ends at {written}, past the truncation to {to} its master asked \
                 for; the store did not apply it",
                log.replication.log_id
            )));
        }
        kept.pending_truncate = None;
        kept.history.truncate_to(written);
        epochs::store_off_shard(path.clone(), kept.clone()).await?;
        log::info!(
            "log {}: truncated to {written} as its master asked",
            log.replication.log_id
        );
    }
    if let Some(from) = kept.pending_reset {
        let store = &log.store;
        if !holds_nothing_from(store, from) {
            return Err(ReceiveError::Fatal(format!(
                "log {} was to start empty at {from}, as its master asked, but holds {}..{}; \
                 the store did not apply it",
                log.replication.log_id,
                store.min_position(),
                store.written_position()
            )));
        }
        kept.pending_reset = None;
        // Its bytes are gone, and their epochs with them: the copy's first Data frame
        // begins its history again.
        kept.history = comet_replication::epoch::EpochHistory::new();
        epochs::store_off_shard(path, kept.clone()).await?;
        log::info!(
            "log {}: dropped and started empty at {from} to copy its master afresh",
            log.replication.log_id
        );
    }
    Ok(kept)
}

fn stop_for_good(log: &HostedLog, reason: &str) {
    log::error!(
        "log {}: replication stopped: {reason}",
        log.replication.log_id
    );
    log.replication.follow.borrow_mut().stopped = Some(reason.to_owned());
}

/// The master's HA address, resolved.
async fn master_addr(broker: &ShardBroker) -> Result<(String, SocketAddr), ReceiveError> {
    let configured = broker.config.load().ha_master_address.clone();
    let text = if configured.is_empty() {
        broker
            .replication
            .shared
            .master()
            .ha_addr
            .ok_or(ReceiveError::NoMaster)?
    } else {
        configured
    };
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok((text, addr));
    }
    let lookup = text.clone();
    let resolved = run_blocking(move || lookup.to_socket_addrs().map(|mut all| all.next())).await;
    match resolved {
        Ok(Some(addr)) => Ok((text, addr)),
        Ok(None) => Err(ReceiveError::Address {
            addr: text,
            reason: "no address".to_owned(),
        }),
        Err(error) => Err(ReceiveError::Address {
            addr: text,
            reason: error.to_string(),
        }),
    }
}

/// One connection: handshake, then receive until it ends.
async fn session(
    broker: &ShardBroker,
    log: &HostedLog,
    kept: &mut LogEpochs,
    stop: &StopSignal,
) -> Result<Ended, ReceiveError> {
    let (text, addr) = master_addr(broker).await?;
    // The waits before the master answers race the stop: a frozen master accepts
    // connections in its kernel and answers nothing, and a role change must not wait for it.
    let connecting = timeout(CONNECT_WAIT_MAX, Stream::connect(addr));
    let connected = match race(stop.wait(), connecting).await {
        Either::Left(()) => return Ok(Ended::Stopped),
        Either::Right(connected) => connected,
    };
    let stream = match connected {
        Ok(connected) => connected.map_err(|source| LinkError::Io { peer: addr, source })?,
        Err(timed_out) => {
            let source = std::io::Error::new(std::io::ErrorKind::TimedOut, timed_out);
            return Err(LinkError::Io { peer: addr, source }.into());
        }
    };
    let _ = stream.set_nodelay(true);
    log.replication.follow.borrow_mut().master = Some(text);
    let outcome = handshake_and_receive(broker, log, &stream, kept, stop).await;
    stream.shutdown();
    outcome
}

async fn handshake_and_receive(
    broker: &ShardBroker,
    log: &HostedLog,
    stream: &Stream,
    kept: &mut LogEpochs,
    stop: &StopSignal,
) -> Result<Ended, ReceiveError> {
    let config = broker.config.snapshot();
    let log_id = log.replication.log_id;
    let store = &log.store;
    let mut receiver = Receiver::new(
        log_id,
        config.commit_log_segment_bytes,
        kept.history.clone(),
        store.written_position(),
        store.durable_position(),
    )
    .map_err(|error| ReceiveError::Fatal(format!("log {log_id}: {error}")))?;
    if let Some(heard) = kept.highest_seen {
        receiver.remember_epoch(heard);
    }
    let hello = Hello {
        cluster_name: config.cluster_name.clone(),
        broker_name: config.broker_name.clone(),
        broker_id: u64::try_from(config.broker_id).unwrap_or(0),
        format: store_format(&config),
        logs: vec![receiver.hello_state()],
    };
    link::write_frame_within(stream, &Frame::Hello(hello), WELCOME_WAIT_MAX).await?;
    let mut reader = FrameReader::new(stream.clone(), &[]);
    let answered = match race(stop.wait(), timeout(WELCOME_WAIT_MAX, reader.next())).await {
        Either::Left(()) => return Ok(Ended::Stopped),
        Either::Right(answered) => answered,
    };
    let welcome = match answered {
        Err(_) => {
            let detail = format!("no Welcome within {WELCOME_WAIT_MAX:?}");
            return Err(ReceiveError::closed(&Close::new(
                CloseReason::Timeout,
                detail,
            )));
        }
        Ok(Ok(Frame::Welcome(welcome))) => welcome,
        Ok(Ok(Frame::Close(close))) => return Err(refused_by_master(log, stream, close)),
        Ok(Ok(other)) => {
            return Err(LinkError::Unexpected {
                peer: stream.peer_addr(),
                what: link::kind(&other),
            }
            .into())
        }
        Ok(Err(error)) => return Err(error.into()),
    };
    let master_logs = welcome.master_logs.len();
    if master_logs != broker.queue_logs() {
        return Err(host_at_restart(broker, log, master_logs).await);
    }
    let Some(answer) = welcome.logs.iter().find(|log| log.log_id == log_id) else {
        return Err(LinkError::Unexpected {
            peer: stream.peer_addr(),
            what: "Welcome without this log's answer",
        }
        .into());
    };
    let instruction = receiver
        .on_answer(&answer.answer)
        .map_err(|error| ReceiveError::closed(&error.close()))?;
    match instruction {
        Instruction::Continue { .. } => {}
        Instruction::Truncate { to } => match store.truncate_unconfirmed(to).await {
            Ok(dropped) => log::warn!(
                "log {log_id}: took back {dropped} unconfirmed bytes from {to} on, which its \
                 master does not hold"
            ),
            Err(StoreError::TruncateRefused { fault, .. }) => {
                log::warn!("log {log_id}: cannot truncate to {to} while open: {fault}");
                return Err(truncate_at_restart(log, kept, to).await);
            }
            Err(error) => return Err(error.into()),
        },
        Instruction::Reset { from: 0 } => {
            return Err(truncate_at_restart(log, kept, 0).await);
        }
        // Reset at open to start here: the copy begins.
        Instruction::Reset { from } if holds_nothing_from(store, from) => {}
        Instruction::Reset { from } => return Err(reset_at_restart(log, kept, from).await),
        Instruction::Stop(LogRefusal::UnknownLog) => {
            return Err(ReceiveError::Fatal(format!(
                "the master has no log {log_id} though it lists {master_logs} logs"
            )));
        }
        Instruction::Stop(refusal @ LogRefusal::SlaveNewerEpoch { .. }) => {
            return Err(ReceiveError::Fatal(format!(
                "log {log_id} holds a newer epoch than its master ({refusal:?}): the master \
                 is stale and must not be followed"
            )));
        }
    }
    kept.history = receiver.epochs().clone();
    kept.highest_seen = highest(receiver.epochs(), receiver.highest_epoch_seen());
    epochs::store_off_shard(super::epochs_path(&log.replication), kept.clone()).await?;
    log::info!(
        "log {log_id}: following {} from {}",
        stream.peer_addr(),
        receiver.written()
    );
    publish(log, &receiver, true);
    let receiver = RefCell::new(receiver);
    let appended = Notify::default();
    let receiving = receive(broker, log, &mut reader, &receiver, kept, &appended, stop);
    let acking = ack(broker, log, stream, &receiver, &appended);
    let ended = match race(receiving, acking).await {
        Either::Left(received) => received,
        Either::Right(acked) => acked.map(|()| Ended::Stopped),
    };
    if let Err(ReceiveError::Closed { reason, detail }) = &ended {
        link::close(stream, Close::new(*reason, detail.clone())).await;
    }
    if let Ok(Ended::Stopped) = ended {
        link::close(
            stream,
            Close::new(CloseReason::Shutdown, "the slave is stopping"),
        )
        .await;
    }
    ended
}

/// The master refused the Hello: a configuration problem is for good, anything else is
/// retried.
fn refused_by_master(log: &HostedLog, stream: &Stream, close: Close) -> ReceiveError {
    match close.reason {
        CloseReason::WrongCluster
        | CloseReason::WrongBrokerName
        | CloseReason::BrokerIdRefused
        | CloseReason::FormatMismatch => ReceiveError::Fatal(format!(
            "the master at {} refused this slave of log {}: {:?} {}",
            stream.peer_addr(),
            log.replication.log_id,
            close.reason,
            close.detail
        )),
        _ => LinkError::peer_closed(stream.peer_addr(), close).into(),
    }
}

/// Persists a truncation for the next start and stops this log's replication.
async fn truncate_at_restart(log: &HostedLog, kept: &mut LogEpochs, to: u64) -> ReceiveError {
    kept.pending_truncate = Some(to);
    kept.pending_reset = None;
    if let Err(error) =
        epochs::store_off_shard(super::epochs_path(&log.replication), kept.clone()).await
    {
        return error.into();
    }
    ReceiveError::Fatal(format!(
        "log {} holds bytes from {to} on that its master does not (a diverged log): restart \
         the slave to truncate it there, then it follows again",
        log.replication.log_id
    ))
}

/// The master has `master_logs` logs and this slave hosts another count: log 0's receiver
/// records the master's count for the next start (every hosted log hears the same count; one
/// writer is enough), and this log's replication stops asking for a restart, which hosts
/// every master log (see `hosting`).
async fn host_at_restart(
    broker: &ShardBroker,
    log: &HostedLog,
    master_logs: usize,
) -> ReceiveError {
    if !(1..=super::hosting::LOGS_MAX).contains(&master_logs) {
        return ReceiveError::Fatal(format!(
            "the master lists {master_logs} logs; a master has 1 to {}",
            super::hosting::LOGS_MAX
        ));
    }
    if log.replication.log_id == 0 {
        let root = broker.config.load().store_root.clone();
        let recorded = run_blocking(move || super::hosting::record_master_logs(&root, master_logs));
        if let Err(error) = recorded.await {
            return ReceiveError::Fatal(format!("cannot record the master's log count: {error}"));
        }
    }
    ReceiveError::Fatal(format!(
        "the master has {master_logs} logs and this slave hosts {} on {} shards: it recorded \
         the master's count and hosts every master log after a restart (log l on shard l % {})",
        broker.queue_logs(),
        broker.shard_count,
        broker.shard_count
    ))
}

/// Whether the log is empty and starts at `from` (a reset to there was applied).
fn holds_nothing_from(store: &comet_store::Store, from: u64) -> bool {
    store.min_position() == from && store.written_position() == from
}

/// Persists a fresh copy from `from` for the next start and stops this log's replication.
async fn reset_at_restart(log: &HostedLog, kept: &mut LogEpochs, from: u64) -> ReceiveError {
    kept.pending_reset = Some(from);
    kept.pending_truncate = None;
    if let Err(error) =
        epochs::store_off_shard(super::epochs_path(&log.replication), kept.clone()).await
    {
        return error.into();
    }
    ReceiveError::Fatal(format!(
        "log {} shares no retained bytes with its master, whose log starts at {from}: \
         restart the slave to drop its log and copy the master's afresh from there",
        log.replication.log_id
    ))
}

fn publish(log: &HostedLog, receiver: &Receiver, connected: bool) {
    let mut follow = log.replication.follow.borrow_mut();
    *follow = FollowState {
        connected,
        master: follow.master.take(),
        written: receiver.written(),
        durable: receiver.durable(),
        confirm: receiver.confirm(),
        stopped: None,
    };
}

/// Takes Data and Heartbeat frames until the session ends.
async fn receive(
    broker: &ShardBroker,
    log: &HostedLog,
    reader: &mut FrameReader,
    receiver: &RefCell<Receiver>,
    kept: &mut LogEpochs,
    appended: &Notify,
    stop: &StopSignal,
) -> Result<Ended, ReceiveError> {
    let silence_max = broker.config.load().ha_slave_timeout();
    loop {
        // The master sends at least a heartbeat every haSendHeartbeatInterval: silence for
        // haHousekeepingInterval means the link is dead even if no FIN ever arrives.
        let next = timeout(silence_max, reader.next());
        let frame = match race(stop.wait(), next).await {
            Either::Left(()) => return Ok(Ended::Stopped),
            Either::Right(Ok(frame)) => frame?,
            Either::Right(Err(_)) => {
                let detail = format!("nothing from the master for {silence_max:?}");
                return Err(ReceiveError::closed(&Close::new(
                    CloseReason::Timeout,
                    detail,
                )));
            }
        };
        match frame {
            Frame::Data(data) => {
                let append = receiver
                    .borrow_mut()
                    .on_data(data)
                    .map_err(|error| ReceiveError::closed(&error.close()))?;
                if append.new_epoch.is_some() {
                    // Known before its bytes can be durable: a restart never holds bytes of
                    // an epoch it does not know.
                    kept.history = receiver.borrow().epochs().clone();
                    kept.highest_seen =
                        highest(&kept.history, receiver.borrow().highest_epoch_seen());
                    let path = super::epochs_path(&log.replication);
                    epochs::store_off_shard(path, kept.clone()).await?;
                }
                let end = log
                    .store
                    .append_replicated(append.position, &append.bytes)
                    .await?;
                if end != append.end {
                    let detail = format!(
                        "the store ended the append at {end}, the stream at {}",
                        append.end
                    );
                    let close = Close::new(CloseReason::DataInvalid, detail);
                    return Err(ReceiveError::closed(&close));
                }
                log.store.confirm(receiver.borrow().confirm());
                appended.notify();
            }
            Frame::Heartbeat(heartbeat) => {
                let before = receiver.borrow().highest_epoch_seen();
                receiver
                    .borrow_mut()
                    .on_heartbeat(&heartbeat)
                    .map_err(|error| ReceiveError::closed(&error.close()))?;
                log.store.confirm(receiver.borrow().confirm());
                let after = receiver.borrow().highest_epoch_seen();
                if after > before {
                    kept.highest_seen = highest(&kept.history, after);
                    let path = super::epochs_path(&log.replication);
                    epochs::store_off_shard(path, kept.clone()).await?;
                }
                appended.notify();
            }
            Frame::Close(close) => {
                return Err(LinkError::peer_closed(reader.peer(), close).into());
            }
            other => {
                let detail = format!(
                    "a master sends Data and Heartbeats, not {}",
                    link::kind(&other)
                );
                return Err(ReceiveError::closed(&Close::new(
                    CloseReason::Malformed,
                    detail,
                )));
            }
        }
        publish(log, &receiver.borrow(), true);
    }
}

/// Acks written and durable progress: after each append and each group commit, and at
/// least every `haSendHeartbeatInterval`.
async fn ack(
    broker: &ShardBroker,
    log: &HostedLog,
    stream: &Stream,
    receiver: &RefCell<Receiver>,
    appended: &Notify,
) -> Result<(), ReceiveError> {
    let config = broker.config.snapshot();
    let interval = config.ha_heartbeat_interval();
    let write_limit = config.ha_slave_timeout();
    let store = &log.store;
    loop {
        // The receiver counts a frame as written when it accepts it, the store once the
        // append is done: durability is awaited only for what the store holds.
        let target = receiver.borrow().written().min(store.written_position());
        if receiver.borrow().durable() < target {
            if store.durable_position() < target {
                match race(store.wait_durable(target), sleep(interval)).await {
                    Either::Left(waited) => waited?,
                    Either::Right(()) => {}
                }
            }
            let durable = store.durable_position().min(target);
            if durable > receiver.borrow().durable() {
                receiver
                    .borrow_mut()
                    .on_durable(durable)
                    .map_err(|error| ReceiveError::closed(&error.close()))?;
                publish(log, &receiver.borrow(), true);
            }
        }
        let now = monotonic_now();
        if receiver.borrow().ack_due(now, interval) {
            let ack = receiver.borrow_mut().ack(now);
            link::write_frame_within(stream, &Frame::Ack(ack), write_limit).await?;
            continue;
        }
        if receiver.borrow().durable() >= target {
            race(appended.notified(), sleep(interval)).await;
        }
    }
}
