//! The console's requests to brokers: one short-lived remoting connection per call, from the
//! name server's shard, bounded in time and in number.
//!
//! A console page asks each broker a handful of questions every few seconds at most, so a
//! connection per call costs nothing that matters and never leaves a half-dead link behind;
//! a broker that does not answer costs its call [`BROKER_CALL_TIMEOUT`] and the page shows
//! that broker's error. At most [`BROKER_CALLS_MAX`] calls are open at once: more are refused
//! at once ([`BrokerCallError::Busy`]) rather than queued behind a slow broker.

use std::cell::Cell;
use std::net::SocketAddr;
use std::time::Duration;

use comet_proto::bytes::BytesMut;
use comet_proto::frame::encode;
use comet_proto::{Decoded, FrameDecoder, RemotingCommand, ResponseCode};
use comet_rt::net::Stream;
use comet_rt::task_class::timeout;
use thiserror::Error;

/// How long one call (connect, request, answer) may take.
pub const BROKER_CALL_TIMEOUT: Duration = Duration::from_secs(3);

/// Calls open at once over every console request.
pub const BROKER_CALLS_MAX: usize = 64;

/// Largest answer frame accepted: a key query returns up to 64 whole messages.
pub const ANSWER_FRAME_BYTES_MAX: usize = 64 * 1024 * 1024;

/// Bytes asked of the socket per read.
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// A call that produced no usable answer.
#[derive(Debug, Error)]
pub enum BrokerCallError {
    /// The broker's address does not parse.
    #[error("bad broker address {0:?}")]
    Address(String),
    /// [`BROKER_CALLS_MAX`] calls are already open.
    #[error("{0} broker calls already open; try again")]
    Busy(usize),
    /// Connecting, writing or reading failed.
    #[error("broker {addr}: {source}")]
    Io {
        /// The broker.
        addr: SocketAddr,
        /// What failed.
        source: std::io::Error,
    },
    /// No answer within [`BROKER_CALL_TIMEOUT`].
    #[error("broker {addr} did not answer within {after:?}")]
    Timeout {
        /// The broker.
        addr: SocketAddr,
        /// The limit.
        after: Duration,
    },
    /// The answer frame is malformed.
    #[error("broker {addr} sent a malformed answer: {reason}")]
    Malformed {
        /// The broker.
        addr: SocketAddr,
        /// What was wrong.
        reason: String,
    },
    /// The answer's body does not parse as what the request returns.
    #[error("broker {addr} sent an unreadable {what}: {reason}")]
    BadBody {
        /// The broker.
        addr: String,
        /// The body expected.
        what: &'static str,
        /// Why it does not parse.
        reason: String,
    },
    /// The broker answered with a code the caller does not accept.
    #[error("broker {addr} answered {code:?}: {remark}")]
    Refused {
        /// The broker.
        addr: SocketAddr,
        /// Its response code.
        code: ResponseCode,
        /// Its remark.
        remark: String,
    },
}

/// Counts the open calls; one per console.
#[derive(Debug, Default)]
pub struct BrokerCalls {
    open: Cell<usize>,
}

/// Releases a call's slot when dropped (an abandoned call included).
struct Slot<'a>(&'a Cell<usize>);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

impl BrokerCalls {
    /// Sends `request` to the broker at `addr` and returns its answer if its code is one of
    /// `accepted`.
    pub async fn call(
        &self,
        addr: &str,
        request: RemotingCommand,
        accepted: &[ResponseCode],
    ) -> Result<RemotingCommand, BrokerCallError> {
        let addr: SocketAddr = addr
            .trim()
            .parse()
            .map_err(|_| BrokerCallError::Address(addr.to_owned()))?;
        let open = self.open.get();
        if open >= BROKER_CALLS_MAX {
            return Err(BrokerCallError::Busy(open));
        }
        self.open.set(open + 1);
        let _slot = Slot(&self.open);
        let answer = match timeout(BROKER_CALL_TIMEOUT, exchange(addr, &request)).await {
            Ok(answer) => answer?,
            Err(_) => {
                return Err(BrokerCallError::Timeout {
                    addr,
                    after: BROKER_CALL_TIMEOUT,
                })
            }
        };
        let code = answer.response_code();
        if !accepted.contains(&code) {
            return Err(BrokerCallError::Refused {
                addr,
                code,
                remark: answer.remark.clone().unwrap_or_default(),
            });
        }
        Ok(answer)
    }
}

/// Connects, sends `request` and reads frames until the answer with its opaque.
async fn exchange(
    addr: SocketAddr,
    request: &RemotingCommand,
) -> Result<RemotingCommand, BrokerCallError> {
    let io = |source| BrokerCallError::Io { addr, source };
    let stream = Stream::connect(addr).await.map_err(io)?;
    let answer = converse(&stream, addr, request).await;
    stream.shutdown();
    answer
}

async fn converse(
    stream: &Stream,
    addr: SocketAddr,
    request: &RemotingCommand,
) -> Result<RemotingCommand, BrokerCallError> {
    let io = |source| BrokerCallError::Io { addr, source };
    let malformed = |reason: String| BrokerCallError::Malformed { addr, reason };
    let mut frame = BytesMut::new();
    encode(request, &mut frame);
    stream.write_all(&frame).await.map_err(io)?;
    let decoder = FrameDecoder::new(ANSWER_FRAME_BYTES_MAX);
    let mut buffer = BytesMut::new();
    let mut chunk = vec![0u8; READ_CHUNK_BYTES];
    loop {
        while let Some(decoded) = decoder
            .decode(&mut buffer)
            .map_err(|error| malformed(error.to_string()))?
        {
            match decoded {
                Decoded::Command(answer)
                    if answer.is_response() && answer.opaque == request.opaque =>
                {
                    return Ok(answer);
                }
                // A broker-to-client request or a stray answer: not ours.
                Decoded::Command(_) => continue,
                Decoded::Malformed(error) => return Err(malformed(error.to_string())),
            }
        }
        let read = stream.read(&mut chunk).await.map_err(io)?;
        if read == 0 {
            return Err(io(std::io::ErrorKind::UnexpectedEof.into()));
        }
        buffer.extend_from_slice(&chunk[..read]);
    }
}
