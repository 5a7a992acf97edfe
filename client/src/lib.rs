//! `comet-client`: a RocketMQ client speaking the remoting protocol, with a blocking API and
//! an async one on tokio.
//!
//! The crate forces no async runtime on the application: every public type is `Send + Sync`
//! and blocking calls block the calling thread only. Background work runs on named threads
//! the client owns (`comet-*`), all stopped by the owning object's `shutdown`. The blocking
//! types are faces of the async ones ([`aio`]), each on a tokio runtime of its own, so their
//! thread count does not grow with brokers, queues or sends in flight:
//!
//! * [`Producer`] over [`AsyncProducer`], [`TransactionProducer`] over
//!   [`AsyncTransactionProducer`]: [`limits::PRODUCER_IO_THREADS`] runtime workers (2), the
//!   `send_async` callback thread, and at most one blocking-pool thread (check-backs, host
//!   name lookups); a sync call runs its send on the calling thread;
//! * [`PushConsumer`] over [`AsyncPushConsumer`], [`LitePullConsumer`] over
//!   [`AsyncLitePullConsumer`]: `pull_thread_nums` workers (2) plus, for the push consumer, a
//!   listener pool of at most `consume_threads`;
//! * [`PopConsumer`] over [`AsyncPopConsumer`]: none, a current-thread runtime driven by the
//!   calling thread.
//!
//! Only [`Admin`] keeps the blocking transport ([`RemotingClient`]: a reader thread per
//! connection, a route and heartbeat thread). The async types start no thread.
//!
//! * [`remoting`]: the blocking transport (connections, pipelining by opaque, timeouts,
//!   one-way, broker → client requests), under [`Admin`].
//! * [`producer`]: the send rules, and [`Producer`], sync/async/oneway/ordered/batch sends
//!   with fault tolerance; [`TransactionProducer`], half messages, local transactions and
//!   check-backs; request-reply ([`Producer::request`] waits for the reply a responder builds
//!   with [`Message::reply_to`]).
//! * [`consumer`]: [`PushConsumer`] (concurrent and orderly listeners) and
//!   [`LitePullConsumer`] (poll, commit, seek), blocking faces of the async consumers.
//! * [`admin`]: [`Admin`], topics, cluster, runtime info, consumer progress, traffic statistics,
//!   message lookup.
//! * [`route`], [`instance`]: route cache, name-server fail-over, heartbeats.
//! * [`rebalance`]: allocation strategies.
//! * [`error`]: the crate's error type.
//! * [`aio`]: the async API on the caller's tokio runtime, starting no thread of its own:
//!   `AsyncProducer` over `AsyncTransport` (sends, batches, ordered and one-way sends,
//!   request-reply), whose blocking face is `Producer`, `AsyncTransactionProducer`, whose
//!   blocking face is `TransactionProducer`, `AsyncPopConsumer` (RocketMQ 5.x pop:
//!   receive, ack, change invisible time), whose blocking face is `consumer::PopConsumer`, and
//!   `AsyncPushConsumer` / `AsyncLitePullConsumer` (rebalance, a pull task per queue, Java's
//!   flow control; the lite one is also a `Stream` of batches), whose blocking faces are
//!   `PushConsumer` / `LitePullConsumer`.

#![forbid(unsafe_code)]

pub mod admin;
pub mod aio;
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
pub mod trace;
pub mod util;
pub mod validate;

pub use admin::{Admin, GroupTraffic, QueueSelector, TopicSpec, TopicTraffic};
pub use aio::{
    AsyncCheckListener, AsyncLitePullConsumer, AsyncMessageListener, AsyncPopConsumer,
    AsyncProducer, AsyncPushConsumer, AsyncPushConsumerConfig, AsyncTransactionProducer,
    AsyncTransport, AsyncTransportConfig, PopConsumerConfig, PopInitMode, PopMessage,
};
/// The body compression a producer applies (`ProducerConfig::compress_type`).
pub use comet_proto::compression::CompressionType;
pub use config::{ClientConfig, Credentials};
pub use consumer::PopConsumer;
pub use consumer::{
    ConsumeConcurrentlyStatus, ConsumeFromWhere, ConsumeOrderlyStatus, ConsumerConfig,
    LitePullConfig, LitePullConsumer, MessageExt, MessageListener, MessageModel, PushConsumer,
    PushConsumerConfig,
};
pub use error::{ClientError, Result};
pub use message::{Message, MessageQueue, SendResult, SendStatus};
pub use producer::transaction::{
    LocalTransactionState, TransactionProducer, TransactionProducerConfig, TransactionSendResult,
};
pub use producer::{Producer, ProducerConfig, SendFuture};
pub use remoting::{Handled, RemotingClient, RequestHandler, ResponseFuture, TransportConfig};

#[cfg(test)]
mod tests {
    fn assert_send_sync<T: Send + Sync + 'static>() {}

    // Proves at compile time that every public handle can be shared across threads.
    #[test]
    fn public_handles_are_send_and_sync() {
        assert_send_sync::<crate::Producer>();
        assert_send_sync::<crate::TransactionProducer>();
        assert_send_sync::<crate::PushConsumer>();
        assert_send_sync::<crate::LitePullConsumer>();
        assert_send_sync::<crate::Admin>();
        assert_send_sync::<crate::RemotingClient>();
        assert_send_sync::<crate::SendFuture>();
        assert_send_sync::<crate::ResponseFuture>();
        assert_send_sync::<crate::AsyncProducer>();
        assert_send_sync::<crate::AsyncPopConsumer>();
        assert_send_sync::<crate::PopConsumer>();
        assert_send_sync::<crate::AsyncPushConsumer>();
        assert_send_sync::<crate::AsyncLitePullConsumer>();
        assert_send_sync::<crate::AsyncTransactionProducer>();
    }
}
