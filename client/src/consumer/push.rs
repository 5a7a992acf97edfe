//! The push consumer (Java `DefaultMQPushConsumer`) for programs without an async runtime: a
//! thin layer over [`AsyncPushConsumer`], which does the rebalance, pulling, flow control,
//! send-back of failures, orderly locks and offsets (see `crate::aio::push`).
//!
//! Threads: the consumer owns a tokio runtime of [`ConsumerConfig::pull_thread_nums`]
//! worker threads (2), where every queue's pull task, the rebalance and the broker
//! connections run, whatever the number of queues; and it runs the application's blocking
//! listener on that runtime's blocking pool, bounded by `consume_threads` (Java's
//! `consumeThreadMin`/`Max` pool), so a slow listener never stalls the I/O. The calling
//! thread blocks in `start` and `shutdown` only.
//!
//! * Concurrent listener: batches of at most `consume_batch_max` messages on any pool
//!   thread. `ReconsumeLater` (or a panicking listener) sends each message back with
//!   CONSUMER_SEND_MSG_BACK in clustering mode (docs/protocol.md#consumer-send-back), with
//!   the retry topic as fallback; broadcasting drops failed messages, as Java does.
//! * Orderly listener: one batch per queue at a time, in offset order, only while the broker
//!   lock is held (clustering). `SuspendCurrentQueueAMoment` retries the batch after
//!   `suspend_current_queue_time`; past `max_reconsume_times` the message goes to the DLQ.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use comet_proto::message::MessageExt;

use super::ConsumerConfig;
use crate::aio::push::{AsyncMessageListener, AsyncPushConsumer, AsyncPushConsumerConfig};
use crate::error::{ClientError, Result};
use crate::message::MessageQueue;
use crate::util::lock;

/// Result of a concurrent listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConsumeConcurrentlyStatus {
    /// Done; commit.
    ConsumeSuccess,
    /// Failed; redeliver later through the retry topic.
    ReconsumeLater,
}

/// Result of an orderly listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConsumeOrderlyStatus {
    /// Done; commit.
    Success,
    /// Failed; retry the same messages after a pause, keeping order.
    SuspendCurrentQueueAMoment,
}

type ConcurrentlyFn =
    dyn Fn(&[MessageExt], &MessageQueue) -> ConsumeConcurrentlyStatus + Send + Sync;
type OrderlyFn = dyn Fn(&[MessageExt], &MessageQueue) -> ConsumeOrderlyStatus + Send + Sync;

/// The application's listener.
#[derive(Clone)]
pub enum MessageListener {
    /// Any thread, any order.
    Concurrently(Arc<ConcurrentlyFn>),
    /// One call per queue at a time, in queue order.
    Orderly(Arc<OrderlyFn>),
}

impl MessageListener {
    /// A concurrent listener from a closure.
    pub fn concurrently(
        listener: impl Fn(&[MessageExt], &MessageQueue) -> ConsumeConcurrentlyStatus
            + Send
            + Sync
            + 'static,
    ) -> MessageListener {
        MessageListener::Concurrently(Arc::new(listener))
    }

    /// An orderly listener from a closure.
    pub fn orderly<F>(listener: F) -> MessageListener
    where
        F: Fn(&[MessageExt], &MessageQueue) -> ConsumeOrderlyStatus + Send + Sync + 'static,
    {
        MessageListener::Orderly(Arc::new(listener))
    }
}

/// Push consumer settings.
#[derive(Clone, Debug)]
pub struct PushConsumerConfig {
    /// Shared consumer settings (`pull_thread_nums` sizes the runtime).
    pub consumer: ConsumerConfig,
    /// Listener calls running at once, each on a thread of the consume pool
    /// (`consumeThreadMin`/`Max`, 20; 1 to 1000).
    pub consume_threads: usize,
    /// Messages handed to one listener call (`consumeMessageBatchMaxSize`, 1).
    pub consume_batch_max: usize,
    /// Deliveries before a message goes to the DLQ (16).
    pub max_reconsume_times: i32,
    /// Orderly: pause after `SuspendCurrentQueueAMoment` (1 s).
    pub suspend_current_queue_time: Duration,
}

impl PushConsumerConfig {
    /// Defaults around shared consumer settings.
    pub fn new(consumer: ConsumerConfig) -> PushConsumerConfig {
        PushConsumerConfig {
            consumer,
            consume_threads: 20,
            consume_batch_max: 1,
            max_reconsume_times: 16,
            suspend_current_queue_time: Duration::from_secs(1),
        }
    }

    /// The async consumer's settings: `consume_threads` as both bounds of the pool.
    fn to_async(&self) -> AsyncPushConsumerConfig {
        let mut config = AsyncPushConsumerConfig::new(self.consumer.clone());
        config.consume_thread_min = self.consume_threads;
        config.consume_thread_max = self.consume_threads;
        config.consume_batch_max = self.consume_batch_max;
        config.max_reconsume_times = self.max_reconsume_times;
        config.suspend_current_queue_time = self.suspend_current_queue_time;
        // Shutdown lets running listeners finish, as the blocking consumer always did: a
        // listener on a pool thread cannot be cancelled anyway.
        config.await_termination_when_shutdown = LISTENERS_AWAITED_AT_SHUTDOWN;
        config
    }
}

/// How long shutdown waits for running listeners (in effect: until they finish).
const LISTENERS_AWAITED_AT_SHUTDOWN: Duration = Duration::from_secs(24 * 3600);

/// A push consumer. Thread-safe; clones share one consumer. Not for use inside an async
/// runtime (`start` and `shutdown` block; use [`AsyncPushConsumer`] there).
#[derive(Clone)]
pub struct PushConsumer {
    inner: Arc<PushInner>,
}

struct PushInner {
    consumer: AsyncPushConsumer,
    /// The runtime everything runs on; taken by shutdown.
    runtime: Mutex<Option<tokio::runtime::Runtime>>,
    started: Mutex<bool>,
}

/// The runtime of a blocking consumer: `worker_threads` for the tasks, and a blocking pool of
/// at most `consume_threads` for the listener.
pub(crate) fn consumer_runtime(
    worker_threads: usize,
    consume_threads: usize,
) -> Result<tokio::runtime::Runtime> {
    if !(1..=PULL_THREADS_MAX).contains(&worker_threads) {
        return Err(ClientError::Invalid(format!(
            "pull_thread_nums is {worker_threads}, it must be 1 to {PULL_THREADS_MAX}"
        )));
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(worker_threads)
        .max_blocking_threads(consume_threads.max(1))
        .thread_name("comet-consumer")
        .enable_all()
        .build()
        .map_err(|error| ClientError::Runtime(error.to_string()))
}

/// Most runtime worker threads of one consumer.
const PULL_THREADS_MAX: usize = 64;

/// Runs a blocking listener call on the runtime's blocking pool. A panic in it goes on in the
/// calling task, so the async consumer treats it as a panicking async listener (a failed
/// call, and its text in a CONSUME_MESSAGE_DIRECTLY answer).
async fn on_pool<T: Send + 'static>(call: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(call).await {
        Ok(status) => status,
        Err(error) => match error.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            // Only a runtime shutting down cancels a blocking task; nobody awaits it then.
            Err(error) => panic!("a listener call was cancelled: {error}"),
        },
    }
}

fn async_listener(listener: MessageListener) -> AsyncMessageListener {
    match listener {
        MessageListener::Concurrently(listener) => {
            AsyncMessageListener::concurrently(move |messages, queue| {
                let listener = listener.clone();
                on_pool(move || listener(&messages, &queue))
            })
        }
        MessageListener::Orderly(listener) => {
            AsyncMessageListener::orderly(move |messages, queue| {
                let listener = listener.clone();
                on_pool(move || listener(&messages, &queue))
            })
        }
    }
}

impl PushConsumer {
    /// A consumer with `listener`; subscribe, then start.
    pub fn new(config: PushConsumerConfig, listener: MessageListener) -> Result<PushConsumer> {
        if config.consume_threads == 0 || config.consume_batch_max == 0 {
            return Err(ClientError::Invalid(
                "consume threads and batch size must be positive".into(),
            ));
        }
        let consumer = AsyncPushConsumer::new(config.to_async(), async_listener(listener))?;
        let runtime = consumer_runtime(config.consumer.pull_thread_nums, config.consume_threads)?;
        Ok(PushConsumer {
            inner: Arc::new(PushInner {
                consumer,
                runtime: Mutex::new(Some(runtime)),
                started: Mutex::new(false),
            }),
        })
    }

    /// Subscribes to `topic` with a tag expression (`*`, `TagA || TagB`).
    pub fn subscribe(&self, topic: &str, expression: &str) -> Result<()> {
        self.inner.consumer.subscribe(topic, expression)
    }

    /// Subscribes to `topic` with a SQL92 selector over message properties (Java's
    /// `MessageSelector.bySql`), which the broker evaluates (it needs
    /// `enablePropertyFilter=true`); see [`crate::AsyncPushConsumer::subscribe_sql`].
    pub fn subscribe_sql(&self, topic: &str, expression: &str) -> Result<()> {
        self.inner.consumer.subscribe_sql(topic, expression)
    }

    /// Removes a subscription.
    pub fn unsubscribe(&self, topic: &str) {
        self.inner.consumer.unsubscribe(topic);
    }

    /// Registers with the brokers, rebalances and starts pulling. Starting again does
    /// nothing.
    pub fn start(&self) -> Result<()> {
        let mut started = lock(&self.inner.started);
        if *started {
            return Ok(());
        }
        let runtime = lock(&self.inner.runtime);
        let runtime = runtime.as_ref().ok_or(ClientError::State("shut down"))?;
        runtime.block_on(self.inner.consumer.start())?;
        *started = true;
        Ok(())
    }

    /// Stops pulling, lets running listeners finish, persists offsets, leaves the group,
    /// then stops the consumer's threads. Idempotent.
    pub fn shutdown(&self) {
        let Some(runtime) = lock(&self.inner.runtime).take() else {
            return;
        };
        runtime.block_on(self.inner.consumer.shutdown());
        // Everything of the consumer ended with its shutdown; what is left (a connection's
        // tasks) is cancelled.
        runtime.shutdown_timeout(Duration::from_secs(1));
    }

    /// The client id this consumer registers under.
    pub fn client_id(&self) -> &str {
        self.inner.consumer.client_id()
    }

    /// Queues currently assigned to this consumer, sorted.
    pub fn assigned_queues(&self) -> Vec<MessageQueue> {
        self.inner.consumer.assigned_queues()
    }

    /// Asks for a rebalance now.
    pub fn rebalance_now(&self) {
        self.inner.consumer.rebalance_now();
    }

    /// The trace dispatcher, when `enable_msg_trace` is set.
    pub fn tracer(&self) -> Option<&Arc<crate::trace::TraceDispatcher>> {
        self.inner.consumer.tracer()
    }

    /// The async consumer underneath.
    pub fn as_async(&self) -> &AsyncPushConsumer {
        &self.inner.consumer
    }
}
