//! The async API on tokio: the transport, the producer,
//! the pop consumer and the push consumer.
//!
//! * [`transport`]: [`AsyncTransport`], one connection per peer address served by a reader
//!   task and a writer task, answers matched by opaque, request timeouts, an in-flight limit
//!   per connection, and cancellation-safe request futures.
//! * [`producer`]: [`AsyncProducer`], `send` and `send_batch` as futures, with the blocking
//!   producer's route lookup, queue choice, fault tolerance and retries.
//! * [`pop`]: [`AsyncPopConsumer`], RocketMQ 5.x pop consumption: `receive` (long-polling),
//!   `ack`, `change_invisible_time`, with an in-flight limit and no rebalance.
//! * [`push`]: [`AsyncPushConsumer`], Java's push consumer with listeners returning futures:
//!   rebalance, a pull task per queue, flow control, consume permits, orderly locks; and
//!   [`AsyncLitePullConsumer`] on the same machinery, whose `poll` and `next` are futures.
//!
//! The blocking `PushConsumer`, `LitePullConsumer` and `PopConsumer` are faces of these
//! consumers on runtimes they own.
//!
//! Threads: none. Everything runs as tasks on the runtime of the caller (two tasks per
//! connection, and for the push consumer a pull task per assigned queue and a task per
//! listener call), so the thread count stays whatever the caller's runtime has, however many
//! sends, queues or brokers there are. Any tokio runtime works (current-thread too) as long
//! as its I/O and time drivers are enabled (`Builder::enable_all`, or `#[tokio::main]`).
//!
//! Not here yet: one-way, ordered and transactional sends, and request-reply.

pub mod pop;
pub mod producer;
pub mod push;
mod routes;
pub mod transport;

pub use pop::{AsyncPopConsumer, PopConsumerConfig, PopInitMode, PopMessage};
pub use producer::AsyncProducer;
pub use push::lite::AsyncLitePullConsumer;
pub use push::{AsyncMessageListener, AsyncPushConsumer, AsyncPushConsumerConfig, QueueStats};
pub use transport::{AsyncTransport, AsyncTransportConfig, HookAnswer, RequestHook};
