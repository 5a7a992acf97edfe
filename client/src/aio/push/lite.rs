//! The async lite pull consumer (Java `DefaultLitePullConsumer`): the push consumer's
//! machinery (rebalance or a fixed assignment, a pull task per queue with flow control,
//! offsets) pulling with LITE_PULL_MESSAGE (subscription in the request), and the
//! application taking messages with [`AsyncLitePullConsumer::poll`] or
//! [`AsyncLitePullConsumer::next`], both futures.
//!
//! Offsets: a poll marks its messages consumed. With auto commit (the default) consumed
//! offsets go to the in-memory offsets at once and are persisted every 5 s and at
//! shutdown; without it they are held until [`AsyncLitePullConsumer::commit`].
//!
//! Cancellation-safe: a poll takes messages out of the buffer only in the step that returns
//! them, so dropping a poll future loses nothing; messages polled and not committed
//! (manual commit) are delivered again after a restart.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use comet_proto::message::MessageExt;
use futures_core::Stream;
use tokio::sync::Notify;

use super::{AsyncPushConsumerConfig, Inner, Mode, Owner, QueueState};
use crate::consumer::core::Subscription;
use crate::consumer::process_queue::ProcessQueue;
use crate::consumer::LitePullConfig;
use crate::error::{ClientError, Result};
use crate::message::MessageQueue;
use crate::util::lock;

struct Buffered {
    state: Arc<QueueState>,
    messages: VecDeque<MessageExt>,
}

/// Pulled messages waiting for `poll`, and the lite consumer's own state.
pub(in crate::aio) struct LiteBuffer {
    auto_commit: bool,
    poll_batch_max: usize,
    buffer: Mutex<VecDeque<Buffered>>,
    ready: Notify,
    /// Manual commit: consumed offsets not committed yet.
    consumed: Mutex<HashMap<MessageQueue, i64>>,
    assigned: Mutex<Option<BTreeSet<MessageQueue>>>,
}

impl LiteBuffer {
    pub(super) fn deliver(&self, state: &Arc<QueueState>, messages: Vec<MessageExt>) {
        lock(&self.buffer).push_back(Buffered {
            state: state.clone(),
            messages: messages.into(),
        });
        self.ready.notify_waiters();
    }

    pub(super) fn assigned(&self) -> Option<BTreeSet<MessageQueue>> {
        lock(&self.assigned).clone()
    }
}

/// An async lite pull consumer. Cheap to clone; clones share one consumer. Dropping the last
/// clone of a started consumer shuts it down on its runtime, as the push consumer.
///
/// It is also a [`Stream`] of message batches: each item is what [`next`] resolves to (at
/// most `poll_batch_max` messages of one queue), and the stream ends once the consumer is
/// shut down. A batch is taken from the buffer only in the step that yields it, so dropping
/// the stream (or a `StreamExt::next` future) loses nothing. Each handle streams on its own;
/// clones share the messages.
///
/// [`next`]: AsyncLitePullConsumer::next
pub struct AsyncLitePullConsumer {
    owner: Arc<Owner>,
    /// The `next` this handle's stream is waiting on. In a mutex only so the handle stays
    /// `Sync`; only `poll_next`, which has the handle exclusively, touches it.
    streaming: Mutex<Option<NextBatch>>,
}

/// The future of one stream item.
type NextBatch = Pin<Box<dyn Future<Output = Option<Vec<MessageExt>>> + Send>>;

impl Clone for AsyncLitePullConsumer {
    fn clone(&self) -> AsyncLitePullConsumer {
        AsyncLitePullConsumer {
            owner: self.owner.clone(),
            streaming: Mutex::new(None),
        }
    }
}

impl Stream for AsyncLitePullConsumer {
    type Item = Vec<MessageExt>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Vec<MessageExt>>> {
        let this = self.get_mut();
        let streaming = this
            .streaming
            .get_mut()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let next = streaming.get_or_insert_with(|| {
            // A handle of its own (not this one, which holds the future).
            let consumer = AsyncLitePullConsumer {
                owner: this.owner.clone(),
                streaming: Mutex::new(None),
            };
            Box::pin(async move { consumer.next().await }) as NextBatch
        });
        let item = std::task::ready!(next.as_mut().poll(cx));
        *streaming = None;
        Poll::Ready(item)
    }
}

impl AsyncLitePullConsumer {
    /// A consumer (the blocking one's settings: 10 messages per pull and per poll, auto
    /// commit); subscribe or assign, then start. Needs no runtime yet.
    pub fn new(config: LitePullConfig) -> Result<AsyncLitePullConsumer> {
        if config.poll_batch_max == 0 {
            return Err(ClientError::Invalid("poll batch must be positive".into()));
        }
        let push = AsyncPushConsumerConfig::new(config.consumer.clone());
        push.check()?;
        let buffer = LiteBuffer {
            auto_commit: config.auto_commit,
            poll_batch_max: config.poll_batch_max,
            buffer: Mutex::new(VecDeque::new()),
            ready: Notify::new(),
            consumed: Mutex::new(HashMap::new()),
            assigned: Mutex::new(None),
        };
        let inner = Inner::create(push, Mode::Lite(buffer))?;
        Ok(AsyncLitePullConsumer {
            owner: Arc::new(Owner { inner }),
            streaming: Mutex::new(None),
        })
    }

    fn inner(&self) -> &Arc<Inner> {
        &self.owner.inner
    }

    fn buffer(&self) -> &LiteBuffer {
        match &self.inner().mode {
            Mode::Lite(buffer) => buffer,
            Mode::Push(_) => unreachable!("a lite consumer in push mode"),
        }
    }

    /// Subscribes to `topic` with a tag expression (`*`, `TagA || TagB`); queues come from
    /// rebalance within the group.
    pub fn subscribe(&self, topic: &str, expression: &str) -> Result<()> {
        self.inner()
            .add_subscription(topic, Subscription::tag(expression))
    }

    /// Subscribes to `topic` with a SQL92 selector over message properties (Java's
    /// `MessageSelector.bySql`), which the broker evaluates (it needs
    /// `enablePropertyFilter=true`; a broker without it refuses the pulls). An expression
    /// that does not compile is refused here.
    pub fn subscribe_sql(&self, topic: &str, expression: &str) -> Result<()> {
        self.inner()
            .add_subscription(topic, Subscription::sql92(expression)?)
    }

    /// Takes exactly these queues, without group rebalance. On a started consumer they are
    /// in place when this resolves, so `seek` may follow at once.
    pub async fn assign(&self, queues: Vec<MessageQueue>) {
        let inner = self.inner();
        let queues: Vec<MessageQueue> = queues.iter().map(|queue| self.wrap_queue(queue)).collect();
        {
            let mut subscriptions = lock(&inner.subscriptions);
            for queue in &queues {
                subscriptions
                    .entry(queue.topic.clone())
                    .or_insert_with(Subscription::all);
            }
        }
        *lock(&self.buffer().assigned) = Some(queues.into_iter().collect());
        if inner.started.load(Ordering::Acquire) && !inner.is_stopping() {
            inner.rebalance().await;
        }
    }

    /// The readable queues of `topic`.
    pub async fn fetch_message_queues(&self, topic: &str) -> Result<Vec<MessageQueue>> {
        let client = &self.inner().config.consumer.client;
        let route = self.inner().routes.route(&client.wrap_name(topic)).await?;
        Ok(crate::message::unwrap_queues(client, &route.subscribe))
    }

    /// Registers, runs a first rebalance and starts pulling, on the current tokio runtime.
    pub async fn start(&self) -> Result<()> {
        self.inner().start_once().await
    }

    /// Waits up to `timeout` for messages; resolves to at most `poll_batch_max` of one
    /// queue, possibly none (also once shut down).
    pub async fn poll(&self, timeout: Duration) -> Vec<MessageExt> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let ready = self.buffer().ready.notified();
            tokio::pin!(ready);
            // Registered before looking, so a delivery right after the look wakes it.
            ready.as_mut().enable();
            if let Some(messages) = self.take() {
                let client = &self.inner().config.consumer.client;
                return crate::message::unwrap_messages(client, messages);
            }
            if self.inner().is_stopping() {
                return Vec::new();
            }
            tokio::select! {
                () = ready => {}
                () = tokio::time::sleep_until(deadline) => return Vec::new(),
            }
        }
    }

    /// The next messages (at most `poll_batch_max`, of one queue), waiting as long as it
    /// takes; `None` once the consumer is shut down.
    pub async fn next(&self) -> Option<Vec<MessageExt>> {
        /// Each wait is bounded only so a shutdown is noticed.
        const WAIT: Duration = Duration::from_secs(1);
        loop {
            if self.inner().is_stopping() {
                return None;
            }
            let messages = self.poll(WAIT).await;
            if !messages.is_empty() {
                return Some(messages);
            }
        }
    }

    /// Takes the next messages from the buffer and marks them consumed (one synchronous
    /// step: nothing is taken unless it is returned).
    fn take(&self) -> Option<Vec<MessageExt>> {
        let buffer = self.buffer();
        let mut queued = lock(&buffer.buffer);
        while let Some(front) = queued.front_mut() {
            if front.state.pq.is_dropped() || front.messages.is_empty() {
                queued.pop_front();
                continue;
            }
            let count = front.messages.len().min(buffer.poll_batch_max);
            let messages: Vec<MessageExt> = front.messages.drain(..count).collect();
            let state = front.state.clone();
            drop(queued);
            self.mark_consumed(&state.pq, &messages);
            return Some(messages);
        }
        None
    }

    fn mark_consumed(&self, pq: &ProcessQueue, messages: &[MessageExt]) {
        let offset = pq.remove(messages.iter().map(|m| m.queue_offset).collect::<Vec<_>>());
        if pq.is_dropped() {
            return;
        }
        if self.buffer().auto_commit {
            self.inner().update_offset(&pq.queue, offset);
        } else {
            lock(&self.buffer().consumed).insert(pq.queue.clone(), offset);
        }
    }

    /// Commits what was polled so far and persists it now.
    pub async fn commit(&self) {
        let inner = self.inner();
        let consumed: Vec<(MessageQueue, i64)> = lock(&self.buffer().consumed).drain().collect();
        {
            let mut offsets = lock(&inner.offsets);
            for (queue, offset) in consumed {
                offsets.insert(queue, offset);
            }
        }
        let queues: Vec<MessageQueue> = lock(&inner.table).keys().cloned().collect();
        inner.persist_offsets(&queues).await;
    }

    /// The offset committed in memory for `queue`, if any.
    pub fn committed(&self, queue: &MessageQueue) -> Option<i64> {
        lock(&self.inner().offsets)
            .get(&self.wrap_queue(queue))
            .copied()
    }

    /// `queue` as the broker names its topic (in the client's namespace, if any).
    fn wrap_queue(&self, queue: &MessageQueue) -> MessageQueue {
        let client = &self.inner().config.consumer.client;
        MessageQueue::new(
            client.wrap_name(&queue.topic),
            &queue.broker_name,
            queue.queue_id,
        )
    }

    /// Moves `queue` (which must be assigned) to `offset`, between its min and max offsets:
    /// messages buffered from before are discarded and pulling restarts there.
    pub async fn seek(&self, queue: &MessageQueue, offset: i64) -> Result<()> {
        let inner = self.inner();
        let queue = &self.wrap_queue(queue);
        let Some(old) = lock(&inner.table).get(queue).cloned() else {
            return Err(ClientError::Invalid(format!("{queue:?} is not assigned")));
        };
        let min = inner
            .offset_request(queue, crate::protocol::get_min_offset(queue))
            .await?;
        let max = inner
            .offset_request(queue, crate::protocol::get_max_offset(queue))
            .await?;
        if offset < min || offset > max {
            return Err(ClientError::Invalid(format!(
                "offset {offset} of {queue:?} is outside [{min}, {max}]"
            )));
        }
        if !inner.reset_queue(&old.pq.queue, offset) {
            return Err(ClientError::Invalid(format!("{queue:?} is not assigned")));
        }
        lock(&self.buffer().consumed).remove(queue);
        Ok(())
    }

    /// The offset stored for `queue` (on the broker; broadcasting: in the local file as
    /// loaded and updated), `None` when there is none.
    pub async fn stored_offset(&self, queue: &MessageQueue) -> Result<Option<i64>> {
        self.inner().stored_offset(&self.wrap_queue(queue)).await
    }

    /// Moves `queue` to the first message stored at or after `timestamp_ms`
    /// (SEARCH_OFFSET_BY_TIMESTAMP), as [`AsyncLitePullConsumer::seek`].
    pub async fn seek_to_timestamp(&self, queue: &MessageQueue, timestamp_ms: i64) -> Result<()> {
        let wrapped = &self.wrap_queue(queue);
        let request = crate::protocol::search_offset(wrapped, timestamp_ms);
        let offset = self.inner().offset_request(wrapped, request).await?;
        self.seek(queue, offset).await
    }

    /// Moves `queue` to its first message.
    pub async fn seek_to_begin(&self, queue: &MessageQueue) -> Result<()> {
        let wrapped = &self.wrap_queue(queue);
        let request = crate::protocol::get_min_offset(wrapped);
        let offset = self.inner().offset_request(wrapped, request).await?;
        self.seek(queue, offset).await
    }

    /// Moves `queue` past its last message.
    pub async fn seek_to_end(&self, queue: &MessageQueue) -> Result<()> {
        let wrapped = &self.wrap_queue(queue);
        let request = crate::protocol::get_max_offset(wrapped);
        let offset = self.inner().offset_request(wrapped, request).await?;
        self.seek(queue, offset).await
    }

    /// Queues currently assigned, sorted.
    pub fn assignment(&self) -> Vec<MessageQueue> {
        let client = &self.inner().config.consumer.client;
        let mut queues: Vec<MessageQueue> = lock(&self.inner().table)
            .keys()
            .map(|queue| crate::message::unwrap_queue(client, queue))
            .collect();
        queues.sort();
        queues
    }

    /// Stops pulling, persists offsets (committed ones only without auto commit), leaves
    /// the group (unless assigned) and closes the connections. Idempotent.
    pub async fn shutdown(&self) {
        self.inner().shutdown().await;
        self.buffer().ready.notify_waiters();
    }
}
