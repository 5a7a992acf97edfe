//! The lite pull consumer (Java `DefaultLitePullConsumer`) for programs without an async
//! runtime: a thin layer over [`AsyncLitePullConsumer`] (rebalance or a fixed assignment, a
//! pull task per queue with flow control, offsets; see `crate::aio::push::lite`).
//!
//! Threads: the consumer owns a tokio runtime of [`ConsumerConfig::pull_thread_nums`]
//! worker threads (2) running every queue's pulls, the rebalance and the connections as
//! tasks, whatever the number of queues. Each call blocks the calling thread on it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use comet_proto::message::MessageExt;
use tokio::runtime::{Handle, Runtime};

use super::push::consumer_runtime;
use super::ConsumerConfig;
use crate::aio::push::lite::AsyncLitePullConsumer;
use crate::error::{ClientError, Result};
use crate::message::MessageQueue;
use crate::util::lock;

/// Lite pull consumer settings.
#[derive(Clone, Debug)]
pub struct LitePullConfig {
    /// Shared consumer settings.
    pub consumer: ConsumerConfig,
    /// Commit consumed offsets automatically.
    pub auto_commit: bool,
    /// Most messages one `poll` returns.
    pub poll_batch_max: usize,
}

impl LitePullConfig {
    /// Defaults around shared consumer settings (Java: 10 messages per pull and poll).
    pub fn new(mut consumer: ConsumerConfig) -> LitePullConfig {
        consumer.pull_batch_size = 10;
        LitePullConfig {
            consumer,
            auto_commit: true,
            poll_batch_max: 10,
        }
    }
}

/// A lite pull consumer. Thread-safe; clones share one consumer. Not for use inside an async
/// runtime (every call blocks; use [`AsyncLitePullConsumer`] there).
#[derive(Clone)]
pub struct LitePullConsumer {
    inner: Arc<LiteInner>,
}

struct LiteInner {
    consumer: AsyncLitePullConsumer,
    /// Runs calls while the runtime lives.
    handle: Handle,
    /// The runtime everything runs on; taken by shutdown.
    runtime: Mutex<Option<Runtime>>,
}

impl LiteInner {
    /// Runs `call` on the consumer's runtime; `None` once it is shut down.
    fn run<T>(&self, call: impl std::future::Future<Output = T>) -> Option<T> {
        // A clone of the handle outlives the check; a shutdown racing a call ends it
        // with the consumer's own stop (the async calls all end on shutdown).
        lock(&self.runtime).as_ref()?;
        Some(self.handle.block_on(call))
    }
}

const SHUT_DOWN: ClientError = ClientError::State("shut down");

impl LitePullConsumer {
    /// A consumer; subscribe or assign, then start.
    pub fn new(config: LitePullConfig) -> Result<LitePullConsumer> {
        let threads = config.consumer.pull_thread_nums;
        let consumer = AsyncLitePullConsumer::new(config)?;
        // No listener runs on its blocking pool: one thread suffices for what tokio puts there.
        let runtime = consumer_runtime(threads, 1)?;
        Ok(LitePullConsumer {
            inner: Arc::new(LiteInner {
                consumer,
                handle: runtime.handle().clone(),
                runtime: Mutex::new(Some(runtime)),
            }),
        })
    }

    /// Subscribes to `topic`; queues come from rebalance within the group.
    pub fn subscribe(&self, topic: &str, expression: &str) -> Result<()> {
        self.inner.consumer.subscribe(topic, expression)
    }

    /// Subscribes to `topic` with a SQL92 selector over message properties, which the
    /// broker evaluates (it needs `enablePropertyFilter=true`); see
    /// [`crate::AsyncLitePullConsumer::subscribe_sql`].
    pub fn subscribe_sql(&self, topic: &str, expression: &str) -> Result<()> {
        self.inner.consumer.subscribe_sql(topic, expression)
    }

    /// Takes exactly these queues, without group rebalance. On a started consumer they are
    /// in place when this returns (Java's `assign` too), so `seek` may follow at once.
    pub fn assign(&self, queues: Vec<MessageQueue>) {
        self.inner.run(self.inner.consumer.assign(queues));
    }

    /// The readable queues of `topic`.
    pub fn fetch_message_queues(&self, topic: &str) -> Result<Vec<MessageQueue>> {
        let consumer = &self.inner.consumer;
        self.inner
            .run(consumer.fetch_message_queues(topic))
            .unwrap_or(Err(SHUT_DOWN))
    }

    /// Starts rebalancing and pulling. Starting again does nothing.
    pub fn start(&self) -> Result<()> {
        match self.inner.run(self.inner.consumer.start()) {
            Some(Err(ClientError::State("already started"))) => Ok(()),
            Some(outcome) => outcome,
            None => Err(SHUT_DOWN),
        }
    }

    /// Waits up to `timeout` for messages; returns at most `poll_batch_max`, possibly none.
    pub fn poll(&self, timeout: Duration) -> Vec<MessageExt> {
        self.inner
            .run(self.inner.consumer.poll(timeout))
            .unwrap_or_default()
    }

    /// Commits what was polled so far and persists it now.
    pub fn commit(&self) -> Result<()> {
        self.inner
            .run(self.inner.consumer.commit())
            .ok_or(SHUT_DOWN)
    }

    /// The offset stored for `queue` (`None` when there is none).
    pub fn committed(&self, queue: &MessageQueue) -> Result<Option<i64>> {
        let consumer = &self.inner.consumer;
        self.inner
            .run(consumer.stored_offset(queue))
            .unwrap_or(Err(SHUT_DOWN))
    }

    /// Moves `queue` (which must be assigned) to `offset`, between its min and max offsets.
    pub fn seek(&self, queue: &MessageQueue, offset: i64) -> Result<()> {
        let consumer = &self.inner.consumer;
        self.inner
            .run(consumer.seek(queue, offset))
            .unwrap_or(Err(SHUT_DOWN))
    }

    /// Moves `queue` to the first message stored at or after `timestamp_ms`.
    pub fn seek_to_timestamp(&self, queue: &MessageQueue, timestamp_ms: i64) -> Result<()> {
        let consumer = &self.inner.consumer;
        self.inner
            .run(consumer.seek_to_timestamp(queue, timestamp_ms))
            .unwrap_or(Err(SHUT_DOWN))
    }

    /// Moves `queue` to its first message.
    pub fn seek_to_begin(&self, queue: &MessageQueue) -> Result<()> {
        let consumer = &self.inner.consumer;
        self.inner
            .run(consumer.seek_to_begin(queue))
            .unwrap_or(Err(SHUT_DOWN))
    }

    /// Moves `queue` past its last message.
    pub fn seek_to_end(&self, queue: &MessageQueue) -> Result<()> {
        let consumer = &self.inner.consumer;
        self.inner
            .run(consumer.seek_to_end(queue))
            .unwrap_or(Err(SHUT_DOWN))
    }

    /// Queues currently assigned.
    pub fn assignment(&self) -> Vec<MessageQueue> {
        self.inner.consumer.assignment()
    }

    /// The async consumer underneath.
    pub fn as_async(&self) -> &AsyncLitePullConsumer {
        &self.inner.consumer
    }

    /// Stops pulling, persists offsets (committed ones only without auto commit), leaves
    /// the group, then stops the consumer's threads. Idempotent.
    pub fn shutdown(&self) {
        let Some(runtime) = lock(&self.inner.runtime).take() else {
            return;
        };
        runtime.block_on(self.inner.consumer.shutdown());
        runtime.shutdown_timeout(Duration::from_secs(1));
    }
}
