//! The async API on tokio: the transport, the producer,
//! the pop consumer and the push consumer.
//!
//! * [`transport`]: [`AsyncTransport`], one connection per peer address served by a reader
//!   task and a writer task, answers matched by opaque, request timeouts, an in-flight limit
//!   per connection, and cancellation-safe request futures.
//! * [`producer`]: [`AsyncProducer`], `send`, `send_batch`, `send_to_queue`,
//!   `send_with_selector` / `send_orderly`, `send_oneway` and request-reply (`request`) as
//!   futures, with the producer's route lookup, queue choice, fault tolerance and retries
//!   (`producer::SendRules`), and `register` / `unregister` of its group.
//! * [`transaction`]: [`AsyncTransactionProducer`], half message, an async local
//!   transaction, END_TRANSACTION, and the broker's check-backs answered by an async or a
//!   blocking checker.
//! * [`pop`]: [`AsyncPopConsumer`], RocketMQ 5.x pop consumption: `receive` (long-polling),
//!   `ack`, `change_invisible_time`, with an in-flight limit and no rebalance.
//! * [`push`]: [`AsyncPushConsumer`], Java's push consumer with listeners returning futures:
//!   rebalance, a pull task per queue, flow control, consume permits, orderly locks; and
//!   [`AsyncLitePullConsumer`] on the same machinery, whose `poll` and `next` are futures
//!   and which is a `futures_core::Stream` of message batches.
//!
//! The blocking `Producer`, `TransactionProducer`, `PushConsumer`, `LitePullConsumer` and
//! `PopConsumer` are faces of these types on runtimes they own.
//!
//! Threads: none. Everything runs as tasks on the runtime of the caller (two tasks per
//! connection, and for the push consumer a pull task per assigned queue and a task per
//! listener call), so the thread count stays whatever the caller's runtime has, however many
//! sends, queues or brokers there are. Any tokio runtime works (current-thread too) as long
//! as its I/O and time drivers are enabled (`Builder::enable_all`, or `#[tokio::main]`).
//!
//! Subscriptions take a tag expression (`subscribe`) or a SQL92 selector (`subscribe_sql`,
//! filtered by the broker only; it needs `enablePropertyFilter=true` there).

pub mod pop;
pub mod producer;
pub mod push;
mod routes;
pub mod transaction;
pub mod transport;

pub use pop::{AsyncPopConsumer, PopConsumerConfig, PopInitMode, PopMessage};
pub use producer::AsyncProducer;
pub use push::lite::AsyncLitePullConsumer;
pub use push::{AsyncMessageListener, AsyncPushConsumer, AsyncPushConsumerConfig, QueueStats};
pub use transaction::{AsyncCheckListener, AsyncTransactionProducer, CheckFuture};
pub use transport::{AsyncTransport, AsyncTransportConfig, HookAnswer, RequestHook};
