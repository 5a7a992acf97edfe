//! A master's HA listener, run by shard 0 on `bindAddress:haListenPort`.
//!
//! Each connection must open with a Hello within [`HELLO_WAIT_MAX`]. Anything else (bytes
//! that are not a frame, another frame, silence) and any Hello that is not from a slave of
//! this broker (`comet_replication::master::check_peer`: cluster, broker name, broker id,
//! store format) gets a Close frame and nothing else. A Hello names exactly one log; the
//! connection then goes to the shard owning that log as a raw socket (`ShardCall::Replica`),
//! which answers and streams it, so no log byte crosses shards.

use std::rc::Rc;
use std::time::Duration;

use comet_replication::master::{check_peer, MasterIdentity};
use comet_replication::wire::{
    Close, CloseReason, Frame, Hello, LogAnswer, LogRefusal, LogWelcome, Welcome,
};
use comet_rt::net::{Listener, Stream};
use comet_rt::shutdown::{Gate, StopSignal};
use comet_rt::sync::{race, Either};
use comet_rt::task_class::{sleep, timeout, TaskClass};
use comet_rt::ShardId;

use super::link::{self, FrameReader, LinkError};
use super::{log_id_of, store_format, ReplicationError};
use crate::shard::{ShardBroker, ShardCall};

/// How long a new connection may take to send its Hello.
pub const HELLO_WAIT_MAX: Duration = Duration::from_secs(5);

/// Pause after a failed accept (out of descriptors, say), so the loop does not spin.
const ACCEPT_RETRY_PAUSE: Duration = Duration::from_millis(100);

/// Binds the HA port and starts accepting (shard 0 of a master).
pub fn spawn(
    broker: &Rc<ShardBroker>,
    tasks: &Gate,
    stop: &StopSignal,
) -> Result<(), ReplicationError> {
    let addr = broker.config.load().ha_listen_addr();
    let listener =
        Listener::bind(addr).map_err(|source| ReplicationError::Bind { addr, source })?;
    log::info!("listening for slaves on {}", listener.local_addr());
    let (broker, stop, gate) = (broker.clone(), stop.clone(), tasks.clone());
    let accepting = accept_loop(broker, listener, stop, gate);
    if tasks
        .spawn("ha-listener", TaskClass::Replication, accepting)
        .is_err()
    {
        log::warn!("replication is stopping: the HA listener does not start");
    }
    Ok(())
}

async fn accept_loop(broker: Rc<ShardBroker>, listener: Listener, stop: StopSignal, gate: Gate) {
    loop {
        let stream = match race(stop.wait(), listener.accept()).await {
            Either::Left(()) => return,
            Either::Right(Ok(stream)) => {
                // Without it Nagle holds a small Data frame back until the slave's delayed
                // TCP ack (tens of ms), and every SYNC_MASTER send waits that long. The
                // option stays on the socket when it is handed to the log's shard.
                if let Err(error) = stream.set_nodelay(true) {
                    log::warn!("HA listener: cannot set TCP_NODELAY: {error}");
                }
                stream
            }
            Either::Right(Err(error)) => {
                log::warn!("HA listener: accept failed: {error}");
                sleep(ACCEPT_RETRY_PAUSE).await;
                continue;
            }
        };
        let handshake = handshake(broker.clone(), stream.clone(), stop.clone());
        if gate
            .spawn("ha-handshake", TaskClass::Replication, handshake)
            .is_err()
        {
            stream.shutdown();
        }
    }
}

/// Reads and checks the Hello, then hands the connection to its log's shard.
async fn handshake(broker: Rc<ShardBroker>, stream: Stream, stop: StopSignal) {
    let peer = stream.peer_addr();
    let mut reader = FrameReader::new(stream.clone(), &[]);
    let first = match race(stop.wait(), timeout(HELLO_WAIT_MAX, reader.next())).await {
        Either::Left(()) => return link::close(&stream, shutdown()).await,
        Either::Right(first) => first,
    };
    let hello = match first {
        Ok(Ok(Frame::Hello(hello))) => hello,
        Ok(Ok(other)) => {
            let detail = format!("expected a Hello, got a {} frame", link::kind(&other));
            return refuse(&stream, Close::new(CloseReason::Malformed, detail)).await;
        }
        Ok(Err(error @ LinkError::Decode { .. })) => {
            let close = Close::new(CloseReason::Malformed, error.to_string());
            return refuse(&stream, close).await;
        }
        Ok(Err(error)) => return log::debug!("HA link from {peer} ended: {error}"),
        Err(_) => {
            let detail = format!("no Hello within {HELLO_WAIT_MAX:?}");
            return refuse(&stream, Close::new(CloseReason::Timeout, detail)).await;
        }
    };
    let config = broker.config.snapshot();
    let identity = MasterIdentity {
        cluster_name: config.cluster_name.clone(),
        broker_name: config.broker_name.clone(),
        broker_id: u64::try_from(config.broker_id).unwrap_or(0),
        format: store_format(&config),
    };
    if let Err(refusal) = check_peer(&identity, &hello) {
        return refuse(&stream, refusal.close()).await;
    }
    let [slave_log] = hello.logs.as_slice() else {
        let detail = format!("a Hello names one log, this one {}", hello.logs.len());
        return refuse(&stream, Close::new(CloseReason::Malformed, detail)).await;
    };
    let log_id = slave_log.log_id;
    if usize::from(log_id) >= broker.shard_count {
        return unknown_log(&broker, &stream, log_id).await;
    }
    let buffered = reader.into_buffered().to_vec();
    hand_over(&broker, stream, hello, buffered).await;
}

/// The log's shard takes the connection (this shard's own log is served here).
async fn hand_over(broker: &Rc<ShardBroker>, stream: Stream, hello: Hello, buffered: Vec<u8>) {
    let peer = stream.peer_addr();
    let target = ShardId(u16::from(hello.logs[0].log_id));
    if target == broker.shard {
        return super::sender::spawn(broker, stream, hello, buffered);
    }
    let socket = match stream.into_std() {
        Ok(socket) => socket,
        Err(error) => return log::warn!("HA link from {peer}: cannot hand over: {error}"),
    };
    let call = ShardCall::Replica {
        stream: socket,
        hello,
        buffered,
    };
    if let Err(error) = broker.mesh().call(target, call).await {
        log::warn!("HA link from {peer}: {target} did not take it: {error}");
    }
}

/// A slave naming a log this master does not have: a Welcome refusing it, listing the
/// master's logs, so the slave can say that its shard count differs.
async fn unknown_log(broker: &ShardBroker, stream: &Stream, log_id: u8) {
    let welcome = Welcome {
        master_logs: (0..broker.shard_count).map(log_id_of).collect(),
        logs: vec![LogWelcome {
            log_id,
            answer: LogAnswer::Refused(LogRefusal::UnknownLog),
        }],
    };
    if let Err(error) = link::write_frame(stream, &Frame::Welcome(welcome)).await {
        log::debug!("HA link: {error}");
    }
    stream.shutdown();
}

async fn refuse(stream: &Stream, close: Close) {
    log::warn!(
        "HA connection from {} refused: {:?} {}",
        stream.peer_addr(),
        close.reason,
        close.detail
    );
    link::close(stream, close).await;
}

fn shutdown() -> Close {
    Close::new(CloseReason::Shutdown, "the master is stopping")
}
