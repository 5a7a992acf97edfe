//! A master's sender: one task per slave session of this shard's log, on this shard.
//!
//! It answers the Hello by the divergence rule (`comet_replication::master::answer_log`),
//! then streams the written log from where the slave resumes (`Store::read_log`), at most a
//! window of unacknowledged bytes, with a heartbeat on an idle link. Written, not durable:
//! the slave's group commit then runs while the master's does, and a send waits for the
//! slower of the two instead of both in turn (docs/architecture.md#replication). A reader
//! task takes the slave's Acks; each goes through `Sender::on_ack`, which closes the stream
//! on an ack beyond what was sent, and updates the session's [`FollowerProgress`] in the
//! shard's [`ReplicationState`](super::ReplicationState), where the confirm task and the
//! admin figures read it. A slave silent for `haHousekeepingInterval` is dropped.
//!
//! Every frame carries the master's durable end as the confirm position: the slave shows
//! its consumers what both hold durably. A SYNC_MASTER send is answered SEND_OK once an
//! Ack says the slave shows it (durable there and a confirm received that covers it), so a
//! slave that outlives its master shows every message a producer was told SEND_OK for.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use comet_replication::master::{answer_log, MasterLog, Prepared, Sender, SenderConfig};
use comet_replication::wire::{
    Close, CloseReason, Frame, Hello, LogAnswer, LogState, LogWelcome, Welcome,
};
use comet_rt::clock::monotonic_now;
use comet_rt::net::Stream;
use comet_rt::sync::{race, Notify};
use comet_rt::task_class::{sleep, TaskClass};
use comet_store::StoreError;
use thiserror::Error;

use super::link::{self, FrameReader, LinkError};
use super::{log_id_of, FollowerProgress};
use crate::shard::ShardBroker;

/// Longest wait for the Welcome to leave (the slave is waiting for it).
const WRITE_WAIT_MAX: Duration = Duration::from_secs(5);

/// Why a session ended.
#[derive(Debug, Error)]
pub enum SessionError {
    /// The connection failed or the slave misbehaved on it.
    #[error(transparent)]
    Link(#[from] LinkError),
    /// The stream was closed for a reason this end found.
    #[error("closed the stream: {reason:?} {detail}")]
    Closed {
        /// The reason sent.
        reason: CloseReason,
        /// Its words.
        detail: String,
    },
    /// The log could not be read.
    #[error("reading the log: {0}")]
    Store(#[from] StoreError),
}

impl SessionError {
    fn closed(close: &Close) -> SessionError {
        SessionError::Closed {
            reason: close.reason,
            detail: close.detail.clone(),
        }
    }
}

/// What the session's writer and its ack reader share.
struct Session {
    id: u64,
    sender: RefCell<Sender>,
    /// Set by the reader when the session must end, with the Close to send if any.
    ended: RefCell<Option<(Option<Close>, SessionError)>>,
    /// Woken by every accepted Ack and by the end of the reader.
    woken: Notify,
}

/// Serves a connection whose Hello named this shard's log (already checked by the
/// listener). The task lives in the shard's replication gate.
pub fn spawn(broker: &Rc<ShardBroker>, stream: Stream, hello: Hello, buffered: Vec<u8>) {
    let state = &broker.replication;
    let id = state.new_session();
    let serving = run(broker.clone(), stream.clone(), hello, buffered, id);
    if state
        .tasks()
        .spawn("ha-sender", TaskClass::Replication, serving)
        .is_err()
    {
        stream.shutdown();
    }
}

async fn run(broker: Rc<ShardBroker>, stream: Stream, hello: Hello, buffered: Vec<u8>, id: u64) {
    let peer = stream.peer_addr();
    let log_id = broker.replication.log_id;
    match serve(&broker, &stream, &hello, &buffered, id).await {
        Ok(()) => log::info!("log {log_id}: replication to {peer} ended"),
        Err(
            error @ SessionError::Link(LinkError::PeerClosed {
                reason: CloseReason::Shutdown,
                ..
            }),
        ) => log::info!("log {log_id}: replication to {peer} ended: {error}"),
        Err(error) => log::warn!("log {log_id}: replication to {peer} ended: {error}"),
    }
    broker.replication.followers.borrow_mut().remove(&id);
    broker.replication.on_progress(0);
    broker.replication.acks.wake_all();
    stream.shutdown();
}

/// The master's view of its log now: every written byte may be sent.
fn with_master_log<T>(broker: &ShardBroker, work: impl FnOnce(&MasterLog<'_>) -> T) -> T {
    let epochs = broker.replication.epochs.borrow();
    let view = MasterLog {
        log_id: broker.replication.log_id,
        epochs: &epochs,
        written: broker.store.written_position(),
        oldest: broker.store.min_position(),
    };
    work(&view)
}

async fn serve(
    broker: &Rc<ShardBroker>,
    stream: &Stream,
    hello: &Hello,
    buffered: &[u8],
    id: u64,
) -> Result<(), SessionError> {
    let slave: &LogState = &hello.logs[0];
    if !broker.replication.is_ready() {
        let close = Close::new(CloseReason::Resync, "the master's log is still starting");
        return close_for(stream, close).await;
    }
    let answer = with_master_log(broker, |view| answer_log(view, slave));
    let welcome = Welcome {
        master_logs: (0..broker.shard_count).map(log_id_of).collect(),
        logs: vec![LogWelcome {
            log_id: slave.log_id,
            answer: answer.clone(),
        }],
    };
    link::write_frame_within(stream, &Frame::Welcome(welcome), WRITE_WAIT_MAX).await?;
    let plan = match answer {
        LogAnswer::Follow { plan, .. } => plan,
        LogAnswer::Refused(refusal) => {
            log::warn!(
                "log {}: slave {} refused: {refusal:?}",
                slave.log_id,
                stream.peer_addr()
            );
            return Ok(());
        }
    };
    log::info!(
        "log {}: slave {} (brokerId {}) follows from {plan:?}",
        slave.log_id,
        stream.peer_addr(),
        hello.broker_id
    );
    let now = monotonic_now();
    let segment_bytes = broker.config.load().commit_log_segment_bytes;
    let sender = Sender::start(slave, plan, SenderConfig::new(segment_bytes), now);
    broker.replication.followers.borrow_mut().insert(
        id,
        FollowerProgress {
            broker_id: hello.broker_id,
            peer: stream.peer_addr(),
            written: sender.acked_written(),
            durable: sender.acked_durable(),
            last_ack_at: now,
        },
    );
    let session = Rc::new(Session {
        id,
        sender: RefCell::new(sender),
        ended: RefCell::new(None),
        woken: Notify::default(),
    });
    let reader = FrameReader::new(stream.clone(), buffered);
    let reading = read_acks(broker.clone(), reader, session.clone());
    if broker
        .replication
        .tasks()
        .spawn("ha-ack-reader", TaskClass::Replication, reading)
        .is_err()
    {
        return Ok(());
    }
    stream_log(broker, stream, &session).await
}

/// The writer: Data while there is something to send and room in the window, heartbeats
/// when idle, until the session ends.
async fn stream_log(
    broker: &ShardBroker,
    stream: &Stream,
    session: &Session,
) -> Result<(), SessionError> {
    let config = broker.config.snapshot();
    let heartbeat_interval = config.ha_heartbeat_interval();
    let slave_timeout = config.ha_slave_timeout();
    loop {
        let ended = session.ended.borrow_mut().take();
        if let Some((close, error)) = ended {
            if let Some(close) = close {
                link::close(stream, close).await;
            }
            return Err(error);
        }
        if broker.replication.stop().is_triggered() {
            let close = Close::new(CloseReason::Shutdown, "the master is stopping");
            link::close(stream, close).await;
            return Ok(());
        }
        let now = monotonic_now();
        let silent_for = session.sender.borrow().silent_for(now);
        if silent_for > slave_timeout {
            let detail = format!("no Ack for {silent_for:?} (haHousekeepingInterval)");
            let close = Close::new(CloseReason::Timeout, detail);
            link::close(stream, close.clone()).await;
            return Err(SessionError::closed(&close));
        }
        let confirmed = broker.store.durable_position();
        let next = with_master_log(broker, |view| session.sender.borrow().next_send(view));
        let range = match next {
            Err(error) => return close_for(stream, error.close()).await,
            Ok(Some(range)) => range,
            Ok(None) => {
                let due = session
                    .sender
                    .borrow()
                    .heartbeat_due(now, heartbeat_interval, confirmed);
                if due {
                    let heartbeat = with_master_log(broker, |view| {
                        session.sender.borrow_mut().heartbeat(view, confirmed, now)
                    });
                    link::write_frame_within(stream, &Frame::Heartbeat(heartbeat), slave_timeout)
                        .await?;
                } else {
                    wait_for_work(broker, session, heartbeat_interval).await;
                }
                continue;
            }
        };
        let mut chunk = broker
            .store
            .read_log(range.position, range.max_bytes)
            .await?;
        if let (true, Some(record_bytes)) = (chunk.bytes.is_empty(), chunk.next_record_bytes) {
            // One record larger than asked for: read it whole; the Sender sends it alone
            // once the window is empty.
            chunk = broker.store.read_log(range.position, record_bytes).await?;
        }
        let prepared = with_master_log(broker, |view| {
            session
                .sender
                .borrow_mut()
                .prepare(chunk.bytes, view, confirmed, now)
        });
        match prepared {
            Ok(Prepared::Data(data)) => {
                link::write_frame_within(stream, &Frame::Data(data), slave_timeout).await?;
            }
            Ok(Prepared::NeedMore { .. }) => {}
            Ok(Prepared::Wait) => wait_for_work(broker, session, heartbeat_interval).await,
            Err(error) => return close_for(stream, error.close()).await,
        }
    }
}

async fn close_for(stream: &Stream, close: Close) -> Result<(), SessionError> {
    let error = SessionError::closed(&close);
    link::close(stream, close).await;
    Err(error)
}

/// Waits for an Ack (the window may open), for an append (bytes to send), for a group
/// commit (the confirm position may move), or at most until a heartbeat may be due.
async fn wait_for_work(broker: &ShardBroker, session: &Session, heartbeat_interval: Duration) {
    let store = &broker.store;
    let durable = store.durable_position();
    let written = store.written_position();
    let next = session.sender.borrow().next_position();
    let limit = heartbeat_interval.min(Duration::from_millis(100));
    let flushed = store.wait_durable_beyond(durable);
    if next < written {
        // Bytes to send, but the window is full: an Ack opens it.
        race(session.woken.notified(), race(flushed, sleep(limit))).await;
        return;
    }
    let appended = store.wait_written_beyond(written);
    race(
        session.woken.notified(),
        race(appended, race(flushed, sleep(limit))),
    )
    .await;
}

/// The ack reader: every Ack goes through the Sender; the session's progress is published.
async fn read_acks(broker: Rc<ShardBroker>, mut reader: FrameReader, session: Rc<Session>) {
    let end = loop {
        let frame = match reader.next().await {
            Ok(frame) => frame,
            Err(error @ LinkError::Decode { .. }) => {
                let close = Close::new(CloseReason::Malformed, error.to_string());
                break (Some(close), error.into());
            }
            Err(error) => break (None, error.into()),
        };
        let ack = match frame {
            Frame::Ack(ack) => ack,
            Frame::Close(close) => {
                break (None, LinkError::peer_closed(reader.peer(), close).into());
            }
            other => {
                let detail = format!("a slave sends Acks, not a {} frame", link::kind(&other));
                let close = Close::new(CloseReason::Malformed, detail);
                let error = SessionError::closed(&close);
                break (Some(close), error);
            }
        };
        let now = monotonic_now();
        let accepted = session.sender.borrow_mut().on_ack(&ack, now);
        match accepted {
            Ok(progress) => {
                if let Some(follower) = broker
                    .replication
                    .followers
                    .borrow_mut()
                    .get_mut(&session.id)
                {
                    follower.written = progress.written;
                    follower.durable = progress.durable;
                    follower.last_ack_at = now;
                }
                broker
                    .replication
                    .sample_written(now, broker.store.written_position());
                broker.replication.on_progress(progress.visible);
                broker.replication.acks.wake_all();
                session.woken.notify();
            }
            Err(error) => {
                let close = error.close();
                let ended = SessionError::closed(&close);
                break (Some(close), ended);
            }
        }
    };
    *session.ended.borrow_mut() = Some(end);
    session.woken.notify();
}
