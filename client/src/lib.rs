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

pub mod config;
pub mod consumer;
pub mod error;
pub mod instance;
pub mod limits;
pub mod message;
pub mod producer;
pub mod protocol;
pub mod rebalance;
pub mod remoting;
pub mod route;
pub mod util;
pub mod validate;

pub use config::ClientConfig;
pub use consumer::{
    ConsumeConcurrentlyStatus, ConsumeFromWhere, ConsumeOrderlyStatus, ConsumerConfig,
    LitePullConfig, LitePullConsumer, MessageExt, MessageListener, MessageModel, PushConsumer,
    PushConsumerConfig,
};
pub use error::{ClientError, Result};
pub use message::{Message, MessageQueue, SendResult, SendStatus};
pub use producer::{Producer, ProducerConfig, SendFuture};
pub use remoting::{Handled, RemotingClient, RequestHandler, ResponseFuture, TransportConfig};
