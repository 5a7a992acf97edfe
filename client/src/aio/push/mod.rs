//! The async push consumer (Java `DefaultMQPushConsumer`) on the caller's tokio runtime.
//!
//! What runs, all as tasks (no thread of its own, whatever the number of queues):
//! * one service task: rebalance (at start, every `rebalance_interval`, at once on
//!   NOTIFY_CONSUMER_IDS_CHANGED, 1 s after an unbalanced pass), offset persistence (every
//!   `persist_consumer_offset_interval`, first after 10 s), heartbeats (every
//!   `heartbeat_broker_interval`), broker lock renewal every 20 s (orderly);
//! * one pull task per assigned queue ([`pull`]): long polling, with Java's flow control;
//! * consumption ([`consume`]): a task per pulled batch (concurrent) or per queue with
//!   messages (orderly), running the listener's future once it holds one of the consume
//!   permits (`consume_thread_min` of them, Java's consume pool size);
//! * two tasks per broker or name server connection ([`AsyncTransport`]).
//!
//! Broker requests it answers (through the transport's request hook):
//! NOTIFY_CONSUMER_IDS_CHANGED (a rebalance now), GET_CONSUMER_RUNNING_INFO,
//! RESET_CONSUMER_CLIENT_OFFSET, GET_CONSUMER_STATUS_FROM_CLIENT and CONSUME_MESSAGE_DIRECTLY
//! (the listener runs on the message as a task; the answer follows).
//!
//! Rebalance follows the blocking consumer's rules (the allocation strategies of
//! [`crate::rebalance`], queues and client ids sorted as Java sorts them, retry topic
//! subscribed in clustering mode, `subVersion` bumped and a heartbeat sent when an assignment
//! changes, orderly queues locked at the broker before they are taken).
//!
//! Offsets are Java's: a queue's offset is its lowest unconsumed message (its process
//! queue's oldest unfinished offset), kept in memory, sent with each pull (the commit bit)
//! and persisted with UPDATE_CONSUMER_OFFSET every `persist_consumer_offset_interval`, when a
//! queue is taken away and at shutdown. Delivery is at least once.
//!
//! Cancellation: dropping every handle of a started consumer shuts it down as
//! [`AsyncPushConsumer::shutdown`] does, on the runtime it was started on: listeners still
//! running are cancelled (their futures dropped) after `await_termination_when_shutdown`,
//! their messages stay unconsumed (the committed offset does not pass them, so they are
//! delivered again), offsets are persisted and orderly queues unlocked at the broker. If
//! that runtime is gone too, nothing can be sent: the broker frees the locks after its lock
//! expiry (60 s).
//!
//! Broadcasting: every member takes every queue, with no broker locks, offsets in the
//! blocking consumer's local file (`local_offset_dir`), failed messages dropped (as Java).
//!
//! [`lite`] runs the same machinery for the lite pull consumer: pulled messages wait in a
//! buffer for its `poll` instead of going to a listener.

mod broker;
mod consume;
pub mod lite;
mod pull;
mod rebalance;

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use comet_proto::message::MessageExt;
use tokio::sync::{watch, Notify, Semaphore};
use tokio::task::JoinHandle;

use super::producer::AsyncProducer;
use super::routes::AsyncRoutes;
use super::transport::{AsyncTransport, AsyncTransportConfig, HookAnswer};
use crate::consumer::core::Subscription;
use crate::consumer::process_queue::ProcessQueue;
use crate::consumer::{
    ConsumeConcurrentlyStatus, ConsumeOrderlyStatus, ConsumerConfig, MessageModel,
};
use crate::error::{ClientError, Result};
use crate::message::MessageQueue;
use crate::util::lock;

/// The future a listener returns.
pub type ListenerFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

type ConcurrentlyFuture = ListenerFuture<ConsumeConcurrentlyStatus>;
type ConcurrentlyFn = dyn Fn(Vec<MessageExt>, MessageQueue) -> ConcurrentlyFuture + Send + Sync;
type OrderlyFn =
    dyn Fn(Vec<MessageExt>, MessageQueue) -> ListenerFuture<ConsumeOrderlyStatus> + Send + Sync;

/// The application's listener: a function returning a future, run as a task of the runtime.
/// A panic in it counts as `ReconsumeLater` (concurrent) or `SuspendCurrentQueueAMoment`
/// (orderly).
#[derive(Clone)]
pub enum AsyncMessageListener {
    /// Any batch at any time, up to the consume permits at once.
    Concurrently(Arc<ConcurrentlyFn>),
    /// One batch per queue at a time, in queue order, while the broker lock is held.
    Orderly(Arc<OrderlyFn>),
}

impl AsyncMessageListener {
    /// A concurrent listener from an async function or a closure returning a future.
    pub fn concurrently<F, Fut>(listener: F) -> AsyncMessageListener
    where
        F: Fn(Vec<MessageExt>, MessageQueue) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ConsumeConcurrentlyStatus> + Send + 'static,
    {
        AsyncMessageListener::Concurrently(Arc::new(move |messages, queue| {
            Box::pin(listener(messages, queue))
        }))
    }

    /// An orderly listener from an async function or a closure returning a future.
    pub fn orderly<F, Fut>(listener: F) -> AsyncMessageListener
    where
        F: Fn(Vec<MessageExt>, MessageQueue) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ConsumeOrderlyStatus> + Send + 'static,
    {
        AsyncMessageListener::Orderly(Arc::new(move |messages, queue| {
            Box::pin(listener(messages, queue))
        }))
    }
}

/// Settings of the async push consumer (Java's names and defaults).
#[derive(Clone, Debug)]
pub struct AsyncPushConsumerConfig {
    /// Shared consumer settings; `pull_threshold_messages_per_queue` (1000) and
    /// `pull_threshold_bytes_per_queue` (100 MiB) are Java's `pullThresholdForQueue` and
    /// `pullThresholdSizeForQueue`, `flow_control_delay` (50 ms) its
    /// `PULL_TIME_DELAY_MILLS_WHEN_CACHE_FLOW_CONTROL`.
    pub consumer: ConsumerConfig,
    /// Listener calls running at once (`consumeThreadMin`, 20). Java's consume pool is a
    /// thread pool over an unbounded queue, which never grows past its core size, so this is
    /// the bound that holds; 1 to 1000.
    pub consume_thread_min: usize,
    /// `consumeThreadMax` (20): checked as Java checks it (at least `consume_thread_min`, at
    /// most 1000).
    pub consume_thread_max: usize,
    /// Messages handed to one listener call (`consumeMessageBatchMaxSize`, 1).
    pub consume_batch_max: usize,
    /// Concurrent consumption: pulling a queue pauses while the offsets between its oldest
    /// and newest cached message span more than this (`consumeConcurrentlyMaxSpan`, 2000).
    pub consume_concurrently_max_span: i64,
    /// When set, the per-queue message threshold becomes `max(1, this / queues assigned of
    /// the topic)` (`pullThresholdForTopic`; unset: -1 in Java).
    pub pull_threshold_messages_per_topic: Option<usize>,
    /// When set, the per-queue byte threshold becomes `max(1 MiB, this / queues assigned of
    /// the topic)` (`pullThresholdSizeForTopic`, in bytes here).
    pub pull_threshold_bytes_per_topic: Option<usize>,
    /// Deliveries before a message goes to the DLQ (16).
    pub max_reconsume_times: i32,
    /// Orderly: pause after `SuspendCurrentQueueAMoment` (1 s).
    pub suspend_current_queue_time: Duration,
    /// How long shutdown lets running listeners finish before cancelling them
    /// (`awaitTerminationMillisWhenShutdown`, 0).
    pub await_termination_when_shutdown: Duration,
}

impl AsyncPushConsumerConfig {
    /// Java's defaults around shared consumer settings.
    pub fn new(consumer: ConsumerConfig) -> AsyncPushConsumerConfig {
        AsyncPushConsumerConfig {
            consumer,
            consume_thread_min: 20,
            consume_thread_max: 20,
            consume_batch_max: 1,
            consume_concurrently_max_span: 2000,
            pull_threshold_messages_per_topic: None,
            pull_threshold_bytes_per_topic: None,
            max_reconsume_times: 16,
            suspend_current_queue_time: Duration::from_secs(1),
            await_termination_when_shutdown: Duration::ZERO,
        }
    }

    fn check(&self) -> Result<()> {
        let invalid = |reason: String| Err(ClientError::Invalid(reason));
        let (min, max) = (self.consume_thread_min, self.consume_thread_max);
        if !(1..=CONSUME_THREADS_MAX).contains(&min) || !(1..=CONSUME_THREADS_MAX).contains(&max) {
            return invalid(format!(
                "consume_thread_min ({min}) and consume_thread_max ({max}) must be 1 to \
                 {CONSUME_THREADS_MAX}"
            ));
        }
        if min > max {
            return invalid(format!(
                "consume_thread_min ({min}) is above consume_thread_max ({max})"
            ));
        }
        if self.consume_batch_max == 0 || self.consume_batch_max > CONSUME_BATCH_MAX {
            return invalid(format!(
                "consume_batch_max is {}, it must be 1 to {CONSUME_BATCH_MAX}",
                self.consume_batch_max
            ));
        }
        if self.consume_concurrently_max_span < 1 {
            return invalid("consume_concurrently_max_span must be positive".into());
        }
        let consumer = &self.consumer;
        if consumer.pull_threshold_messages_per_queue == 0
            || consumer.pull_threshold_bytes_per_queue == 0
        {
            return invalid("the pull thresholds per queue must be positive".into());
        }
        if consumer.pull_batch_size < 1 || consumer.pull_batch_size > PULL_BATCH_MAX {
            return invalid(format!(
                "pull_batch_size is {}, it must be 1 to {PULL_BATCH_MAX}",
                consumer.pull_batch_size
            ));
        }
        Ok(())
    }
}

/// Java's bound on `consumeThreadMin`/`Max`.
const CONSUME_THREADS_MAX: usize = 1000;
/// Java's bound on `consumeMessageBatchMaxSize`.
const CONSUME_BATCH_MAX: usize = 1024;
/// Java's bound on `pullBatchSize`.
const PULL_BATCH_MAX: i32 = 1024;

/// What one assigned queue holds now (GET_CONSUMER_RUNNING_INFO's figures, and the peak).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueStats {
    /// The queue.
    pub queue: MessageQueue,
    /// Messages pulled and not consumed yet (Java `msgCount`).
    pub cached_messages: usize,
    /// Their body bytes (Java `msgSize`).
    pub cached_bytes: usize,
    /// The most messages it ever held at once.
    pub cached_messages_peak: usize,
    /// Offsets between the oldest and newest cached message.
    pub max_span: i64,
    /// Next offset to pull.
    pub next_offset: i64,
    /// The offset to commit (in memory), if any.
    pub commit_offset: Option<i64>,
    /// Orderly: the broker lock is held.
    pub locked: bool,
}

/// One assigned queue: its process queue and the tasks working on it.
pub(super) struct QueueState {
    pq: Arc<ProcessQueue>,
    /// Orderly: held while a batch of this queue is consumed, so a queue taken away is
    /// unlocked at the broker only once no listener works on it.
    consume_lock: tokio::sync::Mutex<()>,
    pull_task: Mutex<Option<JoinHandle<()>>>,
    cached_peak: AtomicUsize,
}

impl QueueState {
    fn new(pq: ProcessQueue) -> QueueState {
        QueueState {
            pq: Arc::new(pq),
            consume_lock: tokio::sync::Mutex::new(()),
            pull_task: Mutex::new(None),
            cached_peak: AtomicUsize::new(0),
        }
    }

    /// Stops pulling: marks the queue dropped and cancels its pull task.
    fn stop_pulling(&self) {
        self.pq.set_dropped();
        if let Some(task) = lock(&self.pull_task).take() {
            task.abort();
        }
    }
}

/// What a consumer does with pulled messages.
pub(super) enum Mode {
    /// A push consumer: its listener consumes them.
    Push(AsyncMessageListener),
    /// A lite pull consumer: they wait in its buffer for `poll`.
    Lite(lite::LiteBuffer),
}

/// Shared state of one consumer.
pub(super) struct Inner {
    config: AsyncPushConsumerConfig,
    mode: Mode,
    orderly: bool,
    client_id: String,
    transport: AsyncTransport,
    routes: AsyncRoutes,
    subscriptions: Mutex<BTreeMap<String, Subscription>>,
    table: Mutex<HashMap<MessageQueue, Arc<QueueState>>>,
    /// Offsets to commit, in memory (what pulls carry and persistence sends).
    offsets: Mutex<HashMap<MessageQueue, i64>>,
    /// Per-queue thresholds derived from the per-topic ones: (messages, bytes) by topic.
    topic_thresholds: Mutex<HashMap<String, (usize, usize)>>,
    permits: Arc<Semaphore>,
    /// Set by start; the runtime the consumer runs on (for the cleanup of a dropped one).
    runtime: Mutex<Option<tokio::runtime::Handle>>,
    service: Mutex<Option<JoinHandle<()>>>,
    started: AtomicBool,
    /// No new listener call starts once set.
    stopping: AtomicBool,
    /// Set to true to cancel running listeners and every task.
    cancel: watch::Sender<bool>,
    /// Asks the service task for a rebalance now.
    wake: Notify,
    /// Held for one rebalance pass.
    rebalancing: tokio::sync::Mutex<()>,
    /// Broker addresses a heartbeat went to: a broker the routes name later (a topic
    /// created after the start) gets one at the next rebalance, not a heartbeat period later,
    /// since until then it lists no consumer of the group.
    heartbeated: Mutex<std::collections::BTreeSet<String>>,
    /// Held by shutdown, so two shutdowns (a drop and a call) do not interleave.
    shutting_down: tokio::sync::Mutex<bool>,
    retry_producer: Mutex<Option<AsyncProducer>>,
    /// Orderly queues a rebalance took away, being released once their listener is done.
    releasing: Mutex<Vec<JoinHandle<()>>>,
    /// Wall clock at start, ms (GET_CONSUMER_RUNNING_INFO reports it).
    started_ms: AtomicI64,
    /// Broadcasting: the local offsets file.
    local_offsets: Option<std::path::PathBuf>,
    /// Push consumers with `enable_msg_trace`: its own thread and blocking producer.
    tracer: Option<crate::trace::ConsumeTracer>,
}

/// An async push consumer. Cheap to clone; clones share one consumer. Dropping the last
/// clone of a started consumer shuts it down (see the module docs).
#[derive(Clone)]
pub struct AsyncPushConsumer {
    owner: Arc<Owner>,
}

/// Shuts the consumer down when the last handle goes.
struct Owner {
    inner: Arc<Inner>,
}

impl Drop for Owner {
    fn drop(&mut self) {
        let inner = self.inner.clone();
        if !inner.started.load(Ordering::Acquire) {
            return;
        }
        let runtime = lock(&inner.runtime).clone();
        if let Some(runtime) = runtime {
            // A runtime shutting down drops the task unrun; then the broker frees the locks
            // after its expiry.
            runtime.spawn(async move { inner.shutdown().await });
        }
    }
}

impl AsyncPushConsumer {
    /// A consumer with `listener`: subscribe, then start. Needs no runtime yet.
    pub fn new(
        config: AsyncPushConsumerConfig,
        listener: AsyncMessageListener,
    ) -> Result<AsyncPushConsumer> {
        config.check()?;
        let inner = Inner::create(config, Mode::Push(listener))?;
        Ok(AsyncPushConsumer {
            owner: Arc::new(Owner { inner }),
        })
    }

    fn inner(&self) -> &Arc<Inner> {
        &self.owner.inner
    }

    /// Subscribes to `topic` with a tag expression (`*`, `TagA || TagB`).
    pub fn subscribe(&self, topic: &str, expression: &str) -> Result<()> {
        self.inner()
            .add_subscription(topic, Subscription::tag(expression))
    }

    /// Subscribes to `topic` with a SQL92 selector over message properties (Java's
    /// `MessageSelector.bySql`, e.g. `color = 'red' AND size > 10`), which the broker
    /// evaluates: it needs `enablePropertyFilter=true` there (a broker without it refuses
    /// the heartbeat's subscription and the pulls). The client never filters such a
    /// subscription by tag. An expression that does not compile is refused here.
    pub fn subscribe_sql(&self, topic: &str, expression: &str) -> Result<()> {
        self.inner()
            .add_subscription(topic, Subscription::sql92(expression)?)
    }

    /// Removes a subscription (its queues are dropped at the next rebalance).
    pub fn unsubscribe(&self, topic: &str) {
        let topic = self.inner().config.consumer.client.wrap_name(topic);
        lock(&self.inner().subscriptions).remove(&topic);
        self.inner().wake.notify_one();
    }

    /// Registers with the brokers, runs a first rebalance and starts the service task, on
    /// the current tokio runtime (I/O and time drivers enabled). Once only.
    pub async fn start(&self) -> Result<()> {
        self.inner().start_once().await
    }

    /// Stops pulling, lets running listeners finish for `await_termination_when_shutdown`
    /// then cancels them, persists offsets, unlocks orderly queues, leaves the group and
    /// closes the connections. Idempotent.
    pub async fn shutdown(&self) {
        self.inner().shutdown().await;
    }

    /// The client id this consumer registers under.
    pub fn client_id(&self) -> &str {
        &self.inner().client_id
    }

    /// Queues currently assigned, sorted.
    pub fn assigned_queues(&self) -> Vec<MessageQueue> {
        let client = &self.inner().config.consumer.client;
        let mut queues: Vec<MessageQueue> = lock(&self.inner().table)
            .keys()
            .map(|queue| crate::message::unwrap_queue(client, queue))
            .collect();
        queues.sort();
        queues
    }

    /// The trace dispatcher, when `enable_msg_trace` is set.
    pub fn tracer(&self) -> Option<&Arc<crate::trace::TraceDispatcher>> {
        self.inner()
            .tracer
            .as_ref()
            .map(crate::trace::ConsumeTracer::dispatcher)
    }

    /// What each assigned queue holds now, sorted by queue.
    pub fn queue_stats(&self) -> Vec<QueueStats> {
        let inner = self.inner();
        let states: Vec<Arc<QueueState>> = lock(&inner.table).values().cloned().collect();
        let offsets = lock(&inner.offsets).clone();
        let mut stats: Vec<QueueStats> = states
            .iter()
            .map(|state| {
                let (cached_messages, cached_bytes) = state.pq.held();
                QueueStats {
                    queue: crate::message::unwrap_queue(
                        &inner.config.consumer.client,
                        &state.pq.queue,
                    ),
                    cached_messages,
                    cached_bytes,
                    cached_messages_peak: state.cached_peak.load(Ordering::Relaxed),
                    max_span: state.pq.max_span(),
                    next_offset: state.pq.next_offset.load(Ordering::Acquire),
                    commit_offset: offsets.get(&state.pq.queue).copied(),
                    locked: state.pq.is_locked(),
                }
            })
            .collect();
        stats.sort_by(|a, b| a.queue.cmp(&b.queue));
        stats
    }

    /// Asks for a rebalance now.
    pub fn rebalance_now(&self) {
        self.inner().wake.notify_one();
    }

    /// The transport (for its counters).
    pub fn transport(&self) -> &AsyncTransport {
        &self.inner().transport
    }
}

impl Inner {
    /// A consumer's shared state; needs no runtime.
    fn create(mut config: AsyncPushConsumerConfig, mode: Mode) -> Result<Arc<Inner>> {
        let consumer = &mut config.consumer;
        let user_group = std::mem::take(&mut consumer.group);
        consumer.group = consumer.client.wrap_name(&user_group);
        crate::validate::check_group(&config.consumer.group)?;
        let client = &config.consumer.client;
        if client.namesrv_addrs.is_empty() {
            return Err(ClientError::NameServer(
                "no name server address configured".into(),
            ));
        }
        let transport = AsyncTransport::new(AsyncTransportConfig::from_client(client)?)?;
        let routes = AsyncRoutes::new(
            transport.clone(),
            client.namesrv_addrs.clone(),
            client.api_timeout,
            client.poll_name_server_interval,
        );
        let orderly = matches!(mode, Mode::Push(AsyncMessageListener::Orderly(_)));
        let client_id = client.build_client_id();
        let local_offsets =
            (config.consumer.message_model == MessageModel::Broadcasting).then(|| {
                crate::consumer::offset_store::local_path(
                    &config.consumer.local_offset_dir,
                    &client_id,
                    &config.consumer.group,
                )
            });
        let tracer = match &mode {
            Mode::Push(_) if config.consumer.enable_msg_trace => {
                let trace_topic = &config.consumer.trace_topic;
                let dispatcher =
                    crate::trace::TraceDispatcher::start(client, &user_group, trace_topic)?;
                Some(crate::trace::ConsumeTracer::new(
                    dispatcher,
                    &user_group,
                    trace_topic,
                    &client_id,
                ))
            }
            _ => None,
        };
        let inner = Arc::new(Inner {
            tracer,
            local_offsets,
            client_id,
            permits: Arc::new(Semaphore::new(config.consume_thread_min)),
            config,
            mode,
            orderly,
            transport,
            routes,
            subscriptions: Mutex::new(BTreeMap::new()),
            table: Mutex::new(HashMap::new()),
            offsets: Mutex::new(HashMap::new()),
            topic_thresholds: Mutex::new(HashMap::new()),
            runtime: Mutex::new(None),
            service: Mutex::new(None),
            started: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            cancel: watch::Sender::new(false),
            wake: Notify::new(),
            rebalancing: tokio::sync::Mutex::new(()),
            heartbeated: Mutex::new(std::collections::BTreeSet::new()),
            shutting_down: tokio::sync::Mutex::new(false),
            retry_producer: Mutex::new(None),
            releasing: Mutex::new(Vec::new()),
            started_ms: AtomicI64::new(0),
        });
        let weak = Arc::downgrade(&inner);
        inner
            .transport
            .set_request_hook(Arc::new(move |_addr, request| match weak.upgrade() {
                Some(inner) => inner.handle_request(request),
                None => HookAnswer::NotSupported,
            }));
        Ok(inner)
    }

    /// Adds (or replaces) the subscription of `topic` (as the application names it) and
    /// asks for a rebalance.
    fn add_subscription(&self, topic: &str, subscription: Subscription) -> Result<()> {
        let topic = self.config.consumer.client.wrap_name(topic);
        crate::validate::check_topic(&topic)?;
        lock(&self.subscriptions).insert(topic, subscription);
        self.wake.notify_one();
        Ok(())
    }

    fn clustering(&self) -> bool {
        self.config.consumer.message_model == MessageModel::Clustering
    }

    /// Broadcasting: reads the local offsets file into the in-memory offsets.
    fn load_local_offsets(&self) -> Result<()> {
        if let Some(path) = &self.local_offsets {
            let loaded = crate::consumer::offset_store::load_local(path)?;
            lock(&self.offsets).extend(loaded);
        }
        Ok(())
    }

    fn is_lite(&self) -> bool {
        matches!(self.mode, Mode::Lite(_))
    }

    /// The fixed assignment of a lite pull consumer's `assign`, if any.
    fn assigned(&self) -> Option<std::collections::BTreeSet<MessageQueue>> {
        match &self.mode {
            Mode::Lite(buffer) => buffer.assigned(),
            Mode::Push(_) => None,
        }
    }

    fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// The one start of a push or lite consumer, on the current tokio runtime: refused once
    /// stopping or when already started.
    pub(super) async fn start_once(self: &Arc<Self>) -> Result<()> {
        if self.is_stopping() {
            return Err(ClientError::State("shut down"));
        }
        if self.started.swap(true, Ordering::AcqRel) {
            return Err(ClientError::State("already started"));
        }
        *lock(&self.runtime) = Some(tokio::runtime::Handle::current());
        self.load_local_offsets()?;
        self.start().await;
        Ok(())
    }

    /// Resolves once the consumer is cancelled (shutdown past its grace time).
    async fn cancelled(&self) {
        let mut cancel = self.cancel.subscribe();
        let _ = cancel.wait_for(|cancelled| *cancelled).await;
    }

    /// Records consumption progress of `queue`, never moving it backwards.
    fn update_offset(&self, queue: &MessageQueue, offset: i64) {
        let mut offsets = lock(&self.offsets);
        let entry = offsets.entry(queue.clone()).or_insert(offset);
        if offset > *entry {
            *entry = offset;
        }
    }

    /// The per-queue (messages, bytes) thresholds of `topic`.
    fn thresholds(&self, topic: &str) -> (usize, usize) {
        let consumer = &self.config.consumer;
        lock(&self.topic_thresholds).get(topic).copied().unwrap_or((
            consumer.pull_threshold_messages_per_queue,
            consumer.pull_threshold_bytes_per_queue,
        ))
    }

    async fn shutdown(self: &Arc<Self>) {
        let mut done = self.shutting_down.lock().await;
        if *done {
            return;
        }
        *done = true;
        self.stopping.store(true, Ordering::Release);
        // A rebalance pass in progress ends at its next queue (it checks the flag); waiting
        // for it means no queue is locked or added after the table is drained below, and
        // none stays half set up by an abort in the middle of a pass.
        self.wake.notify_one();
        let _no_pass = self.rebalancing.lock().await;
        if let Some(service) = lock(&self.service).take() {
            service.abort();
        }
        let states: Vec<Arc<QueueState>> = lock(&self.table).values().cloned().collect();
        for state in &states {
            if let Some(task) = lock(&state.pull_task).take() {
                task.abort();
            }
        }
        // Running listeners get the grace time: holding every permit means none runs.
        let all = u32::try_from(self.config.consume_thread_min).unwrap_or(u32::MAX);
        let grace = self.config.await_termination_when_shutdown;
        let _all_permits =
            tokio::time::timeout(grace, self.permits.clone().acquire_many_owned(all)).await;
        self.cancel.send_replace(true);
        self.permits.close();
        if self.started.load(Ordering::Acquire) {
            // Queues taken away shortly before: their listeners are cancelled now, so these
            // unlock them soon, while the connections are still open.
            let releasing: Vec<JoinHandle<()>> = lock(&self.releasing).drain(..).collect();
            for task in releasing {
                let _ = task.await;
            }
            let states: Vec<Arc<QueueState>> =
                lock(&self.table).drain().map(|(_, state)| state).collect();
            self.release_queues(&states).await;
            if self.assigned().is_none() {
                self.unregister().await;
            }
        }
        self.transport.shutdown();
        if let Some(producer) = lock(&self.retry_producer).take() {
            producer.shutdown();
        }
        if let Some(tracer) = &self.tracer {
            // Its thread sends what is queued and stops; joining it would block the runtime.
            tracer.dispatcher().close();
        }
    }
}
