//! The lite pull consumer (Java `DefaultLitePullConsumer`): the core pulls in the
//! background (LITE_PULL_MESSAGE, subscription in the request), the application takes
//! messages with [`LitePullConsumer::poll`].
//!
//! Offsets: a poll marks its messages consumed. With auto commit (the default) consumed
//! offsets go to the offset store at once and are persisted every 5 s and at shutdown;
//! without it they are held until [`LitePullConsumer::commit`].
//!
//! Seeking replaces the queue's process queue with a fresh one at the new offset, so
//! messages buffered from before the seek are discarded by `poll`.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use comet_proto::message::MessageExt;

use super::core::{ConsumerCore, Delivery};
use super::process_queue::ProcessQueue;
use super::ConsumerConfig;
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

struct Buffered {
    queue: Arc<ProcessQueue>,
    messages: VecDeque<MessageExt>,
}

struct LiteInner {
    config: LitePullConfig,
    core: Arc<ConsumerCore>,
    buffer: Mutex<VecDeque<Buffered>>,
    ready: Condvar,
    consumed: Mutex<HashMap<MessageQueue, i64>>,
}

/// A lite pull consumer. Thread-safe; clones share one consumer.
#[derive(Clone)]
pub struct LitePullConsumer {
    inner: Arc<LiteInner>,
}

impl Delivery for LiteInner {
    fn deliver(&self, queue: &Arc<ProcessQueue>, messages: Vec<MessageExt>) {
        lock(&self.buffer).push_back(Buffered {
            queue: queue.clone(),
            messages: messages.into(),
        });
        self.ready.notify_all();
    }
}

impl LitePullConsumer {
    /// A consumer; subscribe or assign, then start.
    pub fn new(config: LitePullConfig) -> Result<LitePullConsumer> {
        if config.poll_batch_max == 0 {
            return Err(ClientError::Invalid("poll batch must be positive".into()));
        }
        let core = ConsumerCore::new(config.consumer.clone(), false, true)?;
        let inner = Arc::new(LiteInner {
            config,
            core,
            buffer: Mutex::new(VecDeque::new()),
            ready: Condvar::new(),
            consumed: Mutex::new(HashMap::new()),
        });
        let delivery: Arc<dyn Delivery> = inner.clone();
        inner.core.set_delivery(Arc::downgrade(&delivery));
        Ok(LitePullConsumer { inner })
    }

    /// Subscribes to `topic`; queues come from rebalance within the group.
    pub fn subscribe(&self, topic: &str, expression: &str) -> Result<()> {
        self.inner.core.subscribe(topic, expression)
    }

    /// Takes exactly these queues, without group rebalance. On a started consumer they are
    /// in place when this returns (Java's `assign` too), so `seek` may follow at once.
    pub fn assign(&self, queues: Vec<MessageQueue>) {
        self.inner.core.assign(queues);
    }

    /// The readable queues of `topic`.
    pub fn fetch_message_queues(&self, topic: &str) -> Result<Vec<MessageQueue>> {
        let client = &self.inner.core.config.client;
        let route = self.inner.core.instance.route(&client.wrap_name(topic))?;
        Ok(crate::message::unwrap_queues(client, &route.subscribe))
    }

    /// Starts rebalancing and pulling.
    pub fn start(&self) -> Result<()> {
        self.inner.core.start()
    }

    /// Waits up to `timeout` for messages; returns at most `poll_batch_max`, possibly none.
    pub fn poll(&self, timeout: Duration) -> Vec<MessageExt> {
        let deadline = Instant::now() + timeout;
        let mut buffer = lock(&self.inner.buffer);
        loop {
            while let Some(front) = buffer.front_mut() {
                if front.queue.is_dropped() || front.messages.is_empty() {
                    buffer.pop_front();
                    continue;
                }
                let take = front.messages.len().min(self.inner.config.poll_batch_max);
                let messages: Vec<MessageExt> = front.messages.drain(..take).collect();
                let queue = front.queue.clone();
                drop(buffer);
                self.mark_consumed(&queue, &messages);
                let client = &self.inner.core.config.client;
                return crate::message::unwrap_messages(client, messages);
            }
            let now = Instant::now();
            if now >= deadline || self.inner.core.is_stopped() {
                return Vec::new();
            }
            buffer = self
                .inner
                .ready
                .wait_timeout(buffer, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    fn mark_consumed(&self, queue: &ProcessQueue, messages: &[MessageExt]) {
        let offset = queue.remove(messages.iter().map(|m| m.queue_offset).collect::<Vec<_>>());
        if queue.is_dropped() {
            return;
        }
        if self.inner.config.auto_commit {
            self.inner.core.offsets.update(&queue.queue, offset, true);
        } else {
            lock(&self.inner.consumed).insert(queue.queue.clone(), offset);
        }
    }

    /// Commits what was polled so far and persists it now.
    pub fn commit(&self) -> Result<()> {
        let consumed: Vec<(MessageQueue, i64)> = lock(&self.inner.consumed).drain().collect();
        for (queue, offset) in &consumed {
            self.inner.core.offsets.update(queue, *offset, false);
        }
        let queues: Vec<MessageQueue> = self
            .inner
            .core
            .process_queues()
            .iter()
            .map(|pq| pq.queue.clone())
            .collect();
        self.inner.core.offsets.persist_all(&queues)
    }

    /// The offset stored for `queue` (`None` when there is none).
    pub fn committed(&self, queue: &MessageQueue) -> Result<Option<i64>> {
        self.inner.core.offsets.read_store(&self.wrap_queue(queue))
    }

    /// `queue` as the broker names its topic (in the client's namespace, if any).
    fn wrap_queue(&self, queue: &MessageQueue) -> MessageQueue {
        let client = &self.inner.core.config.client;
        MessageQueue::new(
            client.wrap_name(&queue.topic),
            &queue.broker_name,
            queue.queue_id,
        )
    }

    /// Moves `queue` (which must be assigned) to `offset`, between its min and max offsets.
    pub fn seek(&self, queue: &MessageQueue, offset: i64) -> Result<()> {
        let queue = &self.wrap_queue(queue);
        let core = &self.inner.core;
        let Some(old) = core.process_queue(queue) else {
            return Err(ClientError::Invalid(format!("{queue:?} is not assigned")));
        };
        let min = core.min_offset(queue)?;
        let max = core.max_offset(queue)?;
        if offset < min || offset > max {
            return Err(ClientError::Invalid(format!(
                "offset {offset} of {queue:?} is outside [{min}, {max}]"
            )));
        }
        core.reset_queue(&old, offset);
        lock(&self.inner.consumed).remove(queue);
        Ok(())
    }

    /// Moves `queue` to the first message stored at or after `timestamp_ms`.
    pub fn seek_to_timestamp(&self, queue: &MessageQueue, timestamp_ms: i64) -> Result<()> {
        let offset = self
            .inner
            .core
            .search_offset(&self.wrap_queue(queue), timestamp_ms)?;
        self.seek(queue, offset)
    }

    /// Moves `queue` to its first message.
    pub fn seek_to_begin(&self, queue: &MessageQueue) -> Result<()> {
        let offset = self.inner.core.min_offset(&self.wrap_queue(queue))?;
        self.seek(queue, offset)
    }

    /// Moves `queue` past its last message.
    pub fn seek_to_end(&self, queue: &MessageQueue) -> Result<()> {
        let offset = self.inner.core.max_offset(&self.wrap_queue(queue))?;
        self.seek(queue, offset)
    }

    /// Queues currently assigned.
    pub fn assignment(&self) -> Vec<MessageQueue> {
        let mut queues: Vec<MessageQueue> = self
            .inner
            .core
            .process_queues()
            .iter()
            .map(|pq| crate::message::unwrap_queue(&self.inner.core.config.client, &pq.queue))
            .collect();
        queues.sort();
        queues
    }

    /// Stops pulling, persists offsets (committed ones only without auto commit), leaves
    /// the group.
    pub fn shutdown(&self) {
        self.inner.ready.notify_all();
        self.inner.core.shutdown(|| {});
        self.inner.ready.notify_all();
    }
}
