//! Typed errors of the client.
//!
//! One enum for the whole crate, because every public call can fail for transport reasons
//! (connect, timeout, closed connection), protocol reasons (a malformed answer) or broker
//! reasons (a non-success response code), and callers want to match on all three. Transport
//! errors name the peer address, broker errors carry the response code and remark exactly as
//! the broker sent them.

use std::time::Duration;

use comet_proto::{HeaderError, ProtoError, ResponseCode};
use thiserror::Error;

/// Everything a client call can fail with.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ClientError {
    /// The TCP connection to `addr` could not be opened.
    #[error("cannot connect to {addr}: {reason}")]
    Connect {
        /// Peer address, `host:port`.
        addr: String,
        /// The operating system's reason.
        reason: String,
    },
    /// No response arrived within the request timeout.
    #[error("request {opaque} (code {code}) to {addr} timed out after {timeout:?}")]
    Timeout {
        /// Peer address.
        addr: String,
        /// Request code.
        code: i32,
        /// Request id.
        opaque: i32,
        /// The timeout that expired.
        timeout: Duration,
    },
    /// The connection closed (or failed) before the response arrived.
    #[error("connection to {addr} closed: {reason}")]
    ConnectionClosed {
        /// Peer address.
        addr: String,
        /// Why it closed.
        reason: String,
    },
    /// Too many requests are waiting for responses on one connection.
    #[error("{pending} requests already pending on {addr}")]
    TooManyPending {
        /// Peer address.
        addr: String,
        /// Requests in flight.
        pending: usize,
    },
    /// The broker or name server answered with a non-success code.
    #[error("{addr} answered {code}: {remark}")]
    Response {
        /// Peer address.
        addr: String,
        /// The response code.
        code: ResponseCode,
        /// The remark, empty when absent.
        remark: String,
    },
    /// A frame or record could not be decoded.
    #[error("protocol error from {addr}: {source}")]
    Protocol {
        /// Peer address.
        addr: String,
        /// The codec error.
        source: ProtoError,
    },
    /// A response header lacks a field or holds a malformed one.
    #[error("bad response header: {0}")]
    Header(#[from] HeaderError),
    /// A JSON body could not be parsed or produced.
    #[error("bad JSON body ({what}): {reason}")]
    Json {
        /// Which body.
        what: &'static str,
        /// The parser's message.
        reason: String,
    },
    /// The application passed something the protocol cannot carry.
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// A topic or group name the broker would refuse.
    #[error("invalid name: {0}")]
    Name(#[from] comet_proto::names::NameError),
    /// No name server is configured or none answered.
    #[error("no name server available: {0}")]
    NameServer(String),
    /// The topic has no route (unknown at every name server, or no usable queue).
    #[error("no route for topic {topic}: {reason}")]
    NoRoute {
        /// Topic name.
        topic: String,
        /// Why no queue could be used.
        reason: String,
    },
    /// The broker named in a route has no known address.
    #[error("no address known for broker {0}")]
    BrokerNotFound(String),
    /// The object was used before `start` or after `shutdown`.
    #[error("client is {0}")]
    State(&'static str),
    /// A local file (broadcasting offsets) could not be read or written.
    #[error("local store {path}: {reason}")]
    LocalStore {
        /// File path.
        path: String,
        /// The operating system's reason.
        reason: String,
    },
    /// A request (request-reply) was sent but no reply came within its timeout.
    #[error("no reply to request {correlation_id} within {after:?}")]
    NoReply {
        /// The request's `CORRELATION_ID`.
        correlation_id: String,
        /// The time waited.
        after: Duration,
    },
    /// The runtime a blocking wrapper of the async API runs on could not be started.
    #[error("cannot start the client's runtime: {0}")]
    Runtime(String),
}

impl ClientError {
    /// The response code when the peer answered with an error, else `None`.
    pub fn response_code(&self) -> Option<ResponseCode> {
        match self {
            ClientError::Response { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// True for failures of the connection itself (as opposed to an answer from the peer).
    pub fn is_transport(&self) -> bool {
        matches!(
            self,
            ClientError::Connect { .. }
                | ClientError::Timeout { .. }
                | ClientError::ConnectionClosed { .. }
                | ClientError::TooManyPending { .. }
        )
    }
}

/// Shorthand used across the crate.
pub type Result<T, E = ClientError> = std::result::Result<T, E>;
