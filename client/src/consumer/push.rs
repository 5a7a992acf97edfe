//! The push consumer (Java `DefaultMQPushConsumer`): the core pulls, a pool of consume
//! threads runs the application's listener.
//!
//! * Concurrent listener: each pulled batch is split into chunks of `consume_batch_max`
//!   messages, consumed on any pool thread. Success removes the chunk from its process
//!   queue and moves the offset to the oldest unfinished message. `ReconsumeLater` (or a
//!   panicking listener) sends each message back with CONSUMER_SEND_MSG_BACK in clustering
//!   mode (the broker redelivers through `%RETRY%<group>`,
//!   docs/protocol.md#retry-and-dead-letter-queues); when the broker
//!   refuses, the message is sent to `%RETRY%<group>` by an internal producer (the Java
//!   fallback of
//!   docs/protocol.md#consumer-send-back); if that fails too it stays in the queue and is consumed
//!   again locally after 5 s.
//!   Broadcasting drops failed messages, as Java does.
//! * Orderly listener: one task per queue at a time, in offset order, only while the broker
//!   lock is held (clustering). `SuspendCurrentQueueAMoment` puts the batch back and retries
//!   after `suspend_current_queue_time`; past `max_reconsume_times` the message is sent to
//!   the DLQ and consumption moves on.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex, Weak};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use comet_proto::body::{CMResult, ConsumeMessageDirectlyResult};
use comet_proto::headers::ConsumerSendMsgBackRequestHeader;
use comet_proto::message::MessageExt;
use comet_proto::properties::names;
use comet_proto::ResponseCode;

use super::core::{ConsumerCore, Delivery};
use super::process_queue::ProcessQueue;
use super::{ConsumerConfig, MessageModel};
use crate::error::{ClientError, Result};
use crate::message::{Message, MessageQueue};
use crate::producer::{Producer, ProducerConfig};
use crate::protocol;
use crate::trace::{ConsumeReturnType, ConsumeTracer, TraceDispatcher};

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
    /// One thread per queue at a time, in queue order.
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
    /// Shared consumer settings.
    pub consumer: ConsumerConfig,
    /// Threads running the listener (`consumeThreadMin`/`Max`, 20).
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
}

type Task = Box<dyn FnOnce() + Send + 'static>;

/// A push consumer. Thread-safe; clones share one consumer.
#[derive(Clone)]
pub struct PushConsumer {
    inner: Arc<PushInner>,
}

struct PushInner {
    config: PushConsumerConfig,
    core: Arc<ConsumerCore>,
    listener: MessageListener,
    tasks: Mutex<Option<SyncSender<Task>>>,
    workers: Mutex<Vec<JoinHandle<()>>>,
    started: Mutex<bool>,
    weak_self: Weak<PushInner>,
    retry_producer: Mutex<Option<Producer>>,
    /// With `enable_msg_trace`: writes the consume trace records.
    tracer: Option<ConsumeTracer>,
}

/// Queued consume tasks; beyond this, delivering pull threads wait (flow control already
/// bounds each queue, so this is only reached with thousands of queues).
const TASKS_QUEUED_MAX: usize = 65_536;
/// Orderly consumption hands its thread back after this long on one queue.
const ORDERLY_SLICE: Duration = Duration::from_secs(60);
/// Local redelivery delay when a send-back failed.
const LOCAL_RETRY_DELAY: Duration = Duration::from_secs(5);

impl PushConsumer {
    /// A consumer with `listener`; subscribe, then start.
    pub fn new(config: PushConsumerConfig, listener: MessageListener) -> Result<PushConsumer> {
        if config.consume_threads == 0 || config.consume_batch_max == 0 {
            return Err(ClientError::Invalid(
                "consume threads and batch size must be positive".into(),
            ));
        }
        let orderly = matches!(listener, MessageListener::Orderly(_));
        let core = ConsumerCore::new(config.consumer.clone(), orderly, false)?;
        let tracer = if config.consumer.enable_msg_trace {
            let (group, trace_topic) = (&config.consumer.group, &config.consumer.trace_topic);
            let dispatcher = TraceDispatcher::start(&config.consumer.client, group, trace_topic)?;
            let client_id = core.instance.client_id();
            Some(ConsumeTracer::new(
                dispatcher,
                group,
                trace_topic,
                client_id,
            ))
        } else {
            None
        };
        let inner = Arc::new_cyclic(|weak_self| PushInner {
            config,
            core,
            listener,
            tasks: Mutex::new(None),
            workers: Mutex::new(Vec::new()),
            started: Mutex::new(false),
            weak_self: weak_self.clone(),
            retry_producer: Mutex::new(None),
            tracer,
        });
        let delivery: Arc<dyn Delivery> = inner.clone();
        inner.core.set_delivery(Arc::downgrade(&delivery));
        Ok(PushConsumer { inner })
    }

    /// Subscribes to `topic` with a tag expression (`*`, `TagA || TagB`).
    pub fn subscribe(&self, topic: &str, expression: &str) -> Result<()> {
        self.inner.core.subscribe(topic, expression)
    }

    /// Removes a subscription.
    pub fn unsubscribe(&self, topic: &str) {
        self.inner.core.unsubscribe(topic);
    }

    /// Starts the consume threads, then rebalancing and pulling.
    pub fn start(&self) -> Result<()> {
        let mut started = self.inner.started.lock().unwrap_or_else(|p| p.into_inner());
        if *started {
            return Ok(());
        }
        let (sender, receiver) = mpsc::sync_channel::<Task>(TASKS_QUEUED_MAX);
        let receiver = Arc::new(Mutex::new(receiver));
        let mut workers = self.inner.workers.lock().unwrap_or_else(|p| p.into_inner());
        for index in 0..self.inner.config.consume_threads {
            let receiver = receiver.clone();
            let handle = thread::Builder::new()
                .name(format!("comet-consume-{index}"))
                .spawn(move || worker_main(&receiver))
                .map_err(|_| ClientError::State("unable to start consume threads"))?;
            workers.push(handle);
        }
        *self.inner.tasks.lock().unwrap_or_else(|p| p.into_inner()) = Some(sender);
        self.inner.core.start()?;
        *started = true;
        Ok(())
    }

    /// Stops pulling, lets running listeners finish, persists offsets, leaves the group.
    pub fn shutdown(&self) {
        let inner = self.inner.clone();
        self.inner.core.shutdown(move || {
            inner.tasks.lock().unwrap_or_else(|p| p.into_inner()).take();
            let workers: Vec<JoinHandle<()>> = inner
                .workers
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .drain(..)
                .collect();
            for worker in workers {
                let _ = worker.join();
            }
        });
        let retry_producer = self
            .inner
            .retry_producer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(producer) = retry_producer {
            producer.shutdown();
        }
        if let Some(tracer) = &self.inner.tracer {
            tracer.dispatcher().shutdown();
        }
    }

    /// The trace dispatcher, when `enable_msg_trace` is set.
    pub fn tracer(&self) -> Option<&Arc<TraceDispatcher>> {
        self.inner.tracer.as_ref().map(ConsumeTracer::dispatcher)
    }

    /// The client id this consumer registers under.
    pub fn client_id(&self) -> &str {
        self.inner.core.instance.client_id()
    }

    /// Queues currently assigned to this consumer.
    pub fn assigned_queues(&self) -> Vec<MessageQueue> {
        let mut queues: Vec<MessageQueue> = self
            .inner
            .core
            .process_queues()
            .iter()
            .map(|pq| crate::message::unwrap_queue(&self.inner.config.consumer.client, &pq.queue))
            .collect();
        queues.sort();
        queues
    }

    /// Asks for a rebalance now.
    pub fn rebalance_now(&self) {
        self.inner.core.request_rebalance();
    }
}

fn worker_main(receiver: &Mutex<Receiver<Task>>) {
    loop {
        let task = receiver.lock().unwrap_or_else(|p| p.into_inner()).recv();
        match task {
            Ok(task) => task(),
            Err(_) => return,
        }
    }
}

impl Delivery for PushInner {
    fn deliver(&self, queue: &Arc<ProcessQueue>, messages: Vec<MessageExt>) {
        let Some(inner) = self.self_arc() else { return };
        match &self.listener {
            MessageListener::Concurrently(_) => {
                for chunk in messages.chunks(self.config.consume_batch_max) {
                    let (inner, queue, chunk) = (inner.clone(), queue.clone(), chunk.to_vec());
                    self.submit(Box::new(move || inner.consume_concurrently(&queue, chunk)));
                }
            }
            MessageListener::Orderly(_) => inner.schedule_orderly(queue),
        }
    }

    fn consume_directly(
        &self,
        mut message: MessageExt,
        broker_name: &str,
    ) -> Option<ConsumeMessageDirectlyResult> {
        // As Java's resetRetryAndNamespace: a redelivery shows its original topic.
        if message.topic == super::retry_topic(&self.config.consumer.group) {
            if let Some(original) = message.property(names::RETRY_TOPIC) {
                message.topic = original.to_owned();
            }
        }
        message.topic = self.config.consumer.client.unwrap_name(&message.topic);
        let queue = MessageQueue::new(message.topic.clone(), broker_name, message.queue_id);
        let messages = [message];
        let started = Instant::now();
        let outcome = catch_unwind(AssertUnwindSafe(|| match &self.listener {
            MessageListener::Concurrently(listener) => match listener(&messages, &queue) {
                ConsumeConcurrentlyStatus::ConsumeSuccess => CMResult::CR_SUCCESS,
                ConsumeConcurrentlyStatus::ReconsumeLater => CMResult::CR_LATER,
            },
            MessageListener::Orderly(listener) => match listener(&messages, &queue) {
                ConsumeOrderlyStatus::Success => CMResult::CR_SUCCESS,
                ConsumeOrderlyStatus::SuspendCurrentQueueAMoment => CMResult::CR_LATER,
            },
        }));
        let spent_time_mills = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
        let (consume_result, remark) = match outcome {
            Ok(result) => (result, None),
            Err(panic) => (
                CMResult::CR_THROW_EXCEPTION,
                Some(panic_text(panic.as_ref())),
            ),
        };
        Some(ConsumeMessageDirectlyResult {
            order: matches!(self.listener, MessageListener::Orderly(_)),
            // Orderly listeners here always commit on success (no manual-commit context).
            auto_commit: true,
            consume_result: Some(consume_result),
            remark,
            spent_time_mills,
        })
    }
}

/// The message of a listener's panic (Java reports the exception's text).
fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        format!("listener panicked: {text}")
    } else if let Some(text) = panic.downcast_ref::<String>() {
        format!("listener panicked: {text}")
    } else {
        "listener panicked".to_owned()
    }
}

impl PushInner {
    /// An owning handle for tasks that outlive the call.
    fn self_arc(&self) -> Option<Arc<PushInner>> {
        self.weak_self.upgrade()
    }

    fn submit(&self, task: Task) {
        let sender = self.tasks.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(sender) = sender {
            // Fails only after shutdown dropped the receivers; the messages will be
            // redelivered from the committed offset.
            let _ = sender.send(task);
        }
    }

    fn submit_later(self: &Arc<Self>, delay: Duration, task: Task) {
        let inner = self.clone();
        let spawned = thread::Builder::new()
            .name("comet-consume-later".into())
            .spawn(move || {
                inner.core.pause(delay);
                if !inner.core.is_stopped() {
                    inner.submit(task);
                }
            });
        if let Err(error) = spawned {
            log::error!("cannot schedule a delayed consume task: {error}");
        }
    }

    /// `messages` and their `queue` as the listener sees them: topics without the client's
    /// namespace (the process queue keeps the broker-side names, which send-back needs).
    fn shown(
        &self,
        messages: &[MessageExt],
        queue: &MessageQueue,
    ) -> (Vec<MessageExt>, MessageQueue) {
        let client = &self.config.consumer.client;
        (
            crate::message::unwrap_messages(client, messages.to_vec()),
            crate::message::unwrap_queue(client, queue),
        )
    }

    fn consume_concurrently(
        self: &Arc<Self>,
        queue: &Arc<ProcessQueue>,
        messages: Vec<MessageExt>,
    ) {
        let MessageListener::Concurrently(listener) = &self.listener else {
            unreachable!("concurrent task on an orderly consumer")
        };
        if queue.is_dropped() || self.core.is_stopped() {
            return;
        }
        let (shown, shown_queue) = self.shown(&messages, &queue.queue);
        let trace = self
            .tracer
            .as_ref()
            .and_then(|tracer| tracer.before(&messages));
        let started = Instant::now();
        let outcome = catch_unwind(AssertUnwindSafe(|| listener(&shown, &shown_queue))).ok();
        if let (Some(tracer), Some(call)) = (&self.tracer, trace) {
            let success = outcome.map(|status| status == ConsumeConcurrentlyStatus::ConsumeSuccess);
            let kind = ConsumeReturnType::classify(success, started.elapsed());
            tracer.after(call, success == Some(true), kind);
        }
        let status = outcome.unwrap_or(ConsumeConcurrentlyStatus::ReconsumeLater);
        let mut retry_locally = Vec::new();
        if status == ConsumeConcurrentlyStatus::ReconsumeLater
            && self.config.consumer.message_model == MessageModel::Clustering
        {
            for message in &messages {
                if let Err(error) = self.send_back(&queue.queue, message, 0) {
                    log::warn!(
                        "send-back of {} failed, retrying locally: {error}",
                        message.msg_id
                    );
                    retry_locally.push(message.clone());
                }
            }
        }
        let done = messages
            .iter()
            .filter(|m| {
                !retry_locally
                    .iter()
                    .any(|r| r.queue_offset == m.queue_offset)
            })
            .map(|m| m.queue_offset);
        let offset = queue.remove(done.collect::<Vec<_>>());
        if !queue.is_dropped() {
            self.core.offsets.update(&queue.queue, offset, true);
        }
        if !retry_locally.is_empty() {
            let (inner, queue) = (self.clone(), queue.clone());
            for message in &mut retry_locally {
                message.reconsume_times += 1;
            }
            self.submit_later(
                LOCAL_RETRY_DELAY,
                Box::new(move || inner.consume_concurrently(&queue, retry_locally)),
            );
        }
    }

    /// CONSUMER_SEND_MSG_BACK (docs/protocol.md#consumer-send-back); `delay_level` 0 lets the
    /// broker choose, -1 sends to the DLQ at once. When the broker refuses, a redelivery is sent to
    /// `%RETRY%<group>` directly, as the Java client's fallback does.
    fn send_back(
        &self,
        queue: &MessageQueue,
        message: &MessageExt,
        delay_level: i32,
    ) -> Result<()> {
        match self.send_back_to_broker(queue, message, delay_level) {
            Ok(()) => Ok(()),
            Err(error) if delay_level >= 0 => {
                log::debug!("send-back refused ({error}); sending to the retry topic");
                self.send_to_retry_topic(message)
            }
            Err(error) => Err(error),
        }
    }

    /// The fallback of docs/protocol.md#consumer-send-back: a normal send to `%RETRY%<group>`
    /// carrying the original topic and id, the next reconsume count and its delay level.
    fn send_to_retry_topic(&self, message: &MessageExt) -> Result<()> {
        let producer = self.retry_producer()?;
        let mut properties = message.properties.clone();
        if properties.get(names::RETRY_TOPIC).is_none() {
            properties.insert(names::RETRY_TOPIC, message.topic.clone());
        }
        if properties.get(names::ORIGIN_MESSAGE_ID).is_none() {
            properties.insert(names::ORIGIN_MESSAGE_ID, message.msg_id.clone());
        }
        let reconsume_times = message.reconsume_times + 1;
        properties.insert(names::RECONSUME_TIME, reconsume_times.to_string());
        let max = self.config.max_reconsume_times;
        properties.insert(names::MAX_RECONSUME_TIMES, max.to_string());
        properties.insert(names::DELAY, (3 + message.reconsume_times).to_string());
        properties.remove(names::TRAN_MSG);
        properties.remove(names::MIN_OFFSET);
        properties.remove(names::MAX_OFFSET);
        let retry = Message {
            topic: super::retry_topic(&self.core.config.group),
            flag: message.flag,
            body: message.body.clone(),
            properties,
        };
        producer.send(retry).map(|_| ())
    }

    /// The internal producer of the fallback, started on first use.
    fn retry_producer(&self) -> Result<Producer> {
        let mut slot = self
            .retry_producer
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(producer) = slot.as_ref() {
            return Ok(producer.clone());
        }
        let mut client = self.core.config.client.clone();
        client.instance_name =
            format!("{}-retry", self.core.instance.client_id().replace('@', "-"));
        let group = crate::instance::CLIENT_INNER_PRODUCER_GROUP;
        let producer = Producer::new(ProducerConfig::new(group, client))?;
        producer.start()?;
        *slot = Some(producer.clone());
        Ok(producer)
    }

    fn send_back_to_broker(
        &self,
        queue: &MessageQueue,
        message: &MessageExt,
        delay_level: i32,
    ) -> Result<()> {
        let core = &self.core;
        let addr = core
            .instance
            .master_addr(&queue.broker_name, &queue.topic)?;
        let origin_msg_id = message
            .property(names::ORIGIN_MESSAGE_ID)
            .unwrap_or(&message.msg_id)
            .to_owned();
        let request = protocol::consumer_send_msg_back(ConsumerSendMsgBackRequestHeader {
            offset: message.commit_log_offset,
            group: core.config.group.clone(),
            delay_level,
            origin_msg_id: Some(origin_msg_id),
            origin_topic: Some(message.topic.clone()),
            unit_mode: Some(false),
            max_reconsume_times: Some(self.config.max_reconsume_times),
            broker_name: Some(queue.broker_name.clone()),
        });
        core.instance
            .invoke_broker(&addr, request, &[ResponseCode::SUCCESS])
            .map(|_| ())
    }

    fn schedule_orderly(self: &Arc<Self>, queue: &Arc<ProcessQueue>) {
        if queue.consume_scheduled.swap(true, Ordering::AcqRel) {
            return;
        }
        let (inner, queue) = (self.clone(), queue.clone());
        self.submit(Box::new(move || inner.consume_orderly(&queue)));
    }

    fn consume_orderly(self: &Arc<Self>, queue: &Arc<ProcessQueue>) {
        let reschedule = {
            let _serial = queue.consume_lock.lock().unwrap_or_else(|p| p.into_inner());
            self.consume_orderly_slice(queue)
        };
        queue.consume_scheduled.store(false, Ordering::Release);
        if queue.is_dropped() || self.core.is_stopped() {
            return;
        }
        match reschedule {
            Some(delay) if !queue.consume_scheduled.swap(true, Ordering::AcqRel) => {
                let (inner, queue) = (self.clone(), queue.clone());
                self.submit_later(delay, Box::new(move || inner.consume_orderly(&queue)));
            }
            Some(_) => {}
            None if !queue.is_empty() => self.schedule_orderly(queue),
            None => {}
        }
    }

    /// Consumes in order until the queue is empty (`None`) or a pause is needed.
    fn consume_orderly_slice(&self, queue: &Arc<ProcessQueue>) -> Option<Duration> {
        let MessageListener::Orderly(listener) = &self.listener else {
            unreachable!("orderly task on a concurrent consumer")
        };
        let clustering = self.config.consumer.message_model == MessageModel::Clustering;
        let started = Instant::now();
        while !queue.is_dropped() && !self.core.is_stopped() {
            if clustering && !queue.is_locked() {
                return Some(Duration::from_millis(100));
            }
            if started.elapsed() > ORDERLY_SLICE {
                return Some(Duration::from_millis(10));
            }
            let messages = queue.take_in_order(self.config.consume_batch_max);
            if messages.is_empty() {
                return None;
            }
            let (shown, shown_queue) = self.shown(&messages, &queue.queue);
            let trace = self
                .tracer
                .as_ref()
                .and_then(|tracer| tracer.before(&messages));
            let call_started = Instant::now();
            let outcome = catch_unwind(AssertUnwindSafe(|| listener(&shown, &shown_queue))).ok();
            if let (Some(tracer), Some(call)) = (&self.tracer, trace) {
                let success = outcome.map(|status| status == ConsumeOrderlyStatus::Success);
                let kind = ConsumeReturnType::classify(success, call_started.elapsed());
                tracer.after(call, success == Some(true), kind);
            }
            let status = outcome.unwrap_or(ConsumeOrderlyStatus::SuspendCurrentQueueAMoment);
            let give_up = status == ConsumeOrderlyStatus::SuspendCurrentQueueAMoment
                && messages
                    .iter()
                    .any(|m| m.reconsume_times >= self.config.max_reconsume_times)
                && messages
                    .iter()
                    .all(|m| self.send_back(&queue.queue, m, -1).is_ok());
            if status == ConsumeOrderlyStatus::Success || give_up {
                let offset = queue.commit_consuming();
                if !queue.is_dropped() {
                    self.core.offsets.update(&queue.queue, offset, true);
                }
            } else {
                queue.rollback_consuming();
                return Some(self.config.suspend_current_queue_time);
            }
        }
        None
    }
}
