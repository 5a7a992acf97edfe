//! `comet-client`: a RocketMQ client speaking the remoting protocol, on plain std threads.
//!
//! The crate forces no async runtime on the application: every public type is `Send + Sync`
//! and blocking calls block the calling thread only. Background work runs on named threads
//! the client owns (`comet-*`), all stopped by the owning object's `shutdown`.
//!
//! * [`remoting`]: the transport (connections, pipelining by opaque, timeouts, one-way,
//!   broker → client requests).
//! * [`error`]: the crate's error type.

#![forbid(unsafe_code)]

pub mod error;
pub mod limits;
pub mod remoting;

pub use error::{ClientError, Result};
pub use remoting::{Handled, RemotingClient, RequestHandler, ResponseFuture, TransportConfig};
