//! The producer (Java `DefaultMQProducer`, conversation of
//! docs/protocol.md#producer-conversation).
//!
//! * Queue selection rotates over the topic's publish queues, skipping the broker that just
//!   failed and, with latency fault tolerance on, brokers sidelined for being slow or down
//!   ([`fault`]).
//! * Sync sends retry on another broker (2 retries by default) for transport errors and the
//!   Java retry codes (docs/protocol.md#response-codes), within one overall `send_timeout`.
//! * Async sends follow the same retry rules; callbacks and retries run on the producer's
//!   callback thread, never on a transport reader.
//! * Bodies of 4 KiB and more are zlib-compressed (level 5); batches never are.
//! * Every message gets a `UNIQ_KEY` (the id the application sees) before its first attempt,
//!   so retries of one message keep one id.
//! * An unknown topic is sent through the `TBW102` route so the broker auto-creates it.

pub mod fault;
pub mod request;
pub mod transaction;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use comet_proto::batch::{encode_batch, BatchEntry};
use comet_proto::compression::{compress, CompressionType};
use comet_proto::flags::message as message_sys_flag;
use comet_proto::message::MessageExt;
use comet_proto::message_id::UniqueKeyGenerator;
use comet_proto::properties::names;
use comet_proto::{RemotingCommand, ResponseCode};

use self::fault::{select_queue, LatencyFaultTolerance};
use crate::config::{now_ms, ClientConfig};
use crate::error::{ClientError, Result};
use crate::instance::ClientInstance;
use crate::limits::{BATCH_BODY_BYTES_MAX, CALLBACKS_QUEUED_MAX, MESSAGE_BODY_BYTES_MAX};
use crate::message::{Message, MessageQueue, SendResult, SendStatus};
use crate::protocol;
use crate::route::{self, TopicRoute};
use crate::trace::{PubTrace, TraceDispatcher, TraceMessageType, TraceRecord};
use crate::util::{Executor, Oneshot};
use crate::validate;
use comet_proto::body::TopicRouteData;
use comet_proto::headers::send::{EXT_MSG_REGION, EXT_TRACE_ON};
use comet_proto::headers::SendMessageRequestHeaderV2;

/// Producer settings (Java defaults, docs/protocol.md#client-timings).
#[derive(Clone, Debug)]
pub struct ProducerConfig {
    /// Producer group.
    pub group: String,
    /// Client settings.
    pub client: ClientConfig,
    /// Budget of one send, retries included (`sendMsgTimeout`).
    pub send_timeout: Duration,
    /// Extra attempts of a sync send (`retryTimesWhenSendFailed`).
    pub retry_times_when_send_failed: u32,
    /// Extra attempts of an async send (`retryTimesWhenSendAsyncFailed`).
    pub retry_times_when_send_async_failed: u32,
    /// Bodies of at least this many bytes are compressed (`compressMsgBodyOverHowmuch`).
    pub compress_over_bytes: usize,
    /// The algorithm (`compressType`: ZLIB, the Java default, LZ4 or ZSTD).
    pub compress_type: CompressionType,
    /// The level (`rocketmq.message.compressLevel`): 0-9 for zlib, 1-22 for Zstandard;
    /// LZ4 has none and ignores it.
    pub compress_level: u32,
    /// Largest body accepted.
    pub max_message_bytes: usize,
    /// Queues of an auto-created topic (header `d`).
    pub default_topic_queue_nums: i32,
    /// Auto-create template topic (header `c`).
    pub create_topic_key: String,
    /// Sideline slow or failed brokers.
    pub send_latency_fault_enable: bool,
    /// Retry on another broker when the broker stored but answered a non-OK status.
    pub retry_another_broker_when_not_store_ok: bool,
    /// Write a trace record of every send to [`ProducerConfig::trace_topic`]
    /// (`enableMsgTrace`; see [`crate::trace`]).
    pub enable_msg_trace: bool,
    /// The trace topic (`customizedTraceTopic`).
    pub trace_topic: String,
}

impl ProducerConfig {
    /// Defaults for `group` with the given client settings.
    pub fn new(group: &str, client: ClientConfig) -> ProducerConfig {
        ProducerConfig {
            group: group.to_owned(),
            client,
            send_timeout: Duration::from_secs(3),
            retry_times_when_send_failed: 2,
            retry_times_when_send_async_failed: 2,
            compress_over_bytes: comet_proto::compression::COMPRESS_THRESHOLD_BYTES_DEFAULT,
            compress_type: CompressionType::Zlib,
            compress_level: comet_proto::compression::ZLIB_LEVEL_DEFAULT,
            max_message_bytes: MESSAGE_BODY_BYTES_MAX,
            default_topic_queue_nums: 4,
            create_topic_key: String::from(comet_proto::names::AUTO_CREATE_TOPIC_KEY),
            send_latency_fault_enable: true,
            retry_another_broker_when_not_store_ok: false,
            enable_msg_trace: false,
            trace_topic: crate::trace::TRACE_TOPIC_DEFAULT.to_owned(),
        }
    }
}

/// How a request travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    Sync,
    Oneway,
}

/// A message ready for the wire: id assigned, body possibly compressed, properties encoded.
#[derive(Clone)]
pub(crate) struct Prepared {
    /// The broker-side topic (in the client's namespace, if any).
    pub(crate) topic: String,
    /// The topic as the application names it (without the namespace): what the send
    /// result and the trace record show.
    user_topic: String,
    body: Bytes,
    sys_flag: i32,
    flag: i32,
    properties: String,
    msg_id: String,
    batch: bool,
    /// A responder's reply (request-reply): sent with SEND_REPLY_MESSAGE_V2.
    reply: bool,
    reconsume_times: i32,
    max_reconsume_times: Option<i32>,
    /// What a trace record of this send needs; `None` when tracing is off or the message is
    /// itself a trace.
    trace: Option<TracedMessage>,
}

/// The parts of a sent message its trace record names.
#[derive(Clone)]
struct TracedMessage {
    tags: Option<String>,
    keys: Option<String>,
    msg_type: TraceMessageType,
}

/// A message producer. Thread-safe; clones share one producer.
#[derive(Clone)]
pub struct Producer {
    inner: Arc<ProducerInner>,
}

struct ProducerInner {
    config: ProducerConfig,
    instance: Arc<ClientInstance>,
    faults: LatencyFaultTolerance,
    counter: AtomicUsize,
    ids: UniqueKeyGenerator,
    callbacks: Arc<Executor>,
    state: Mutex<State>,
    /// Started with the producer when `enable_msg_trace` is set.
    tracer: std::sync::OnceLock<Arc<TraceDispatcher>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Created,
    Running,
    Stopped,
}

/// A waitable handle on an asynchronous send.
pub struct SendFuture {
    outcome: Arc<Oneshot<Result<SendResult>>>,
    timeout: Duration,
}

impl SendFuture {
    /// Blocks until the send finished (success, failure after retries, or timeout).
    pub fn wait(self) -> Result<SendResult> {
        // Every attempt is bounded by the send timeout; the margin covers the scanner tick
        // and the callback thread.
        match self
            .outcome
            .take_timeout(self.timeout + Duration::from_secs(5))
        {
            Some(outcome) => outcome,
            None => Err(ClientError::State("waiting past the send timeout")),
        }
    }
}

impl Producer {
    /// A producer; call [`Producer::start`] before sending.
    pub fn new(mut config: ProducerConfig) -> Result<Producer> {
        config.group = config.client.wrap_name(&config.group);
        validate::check_producer(&config)?;
        let instance = ClientInstance::new(config.client.clone());
        let ids = id_generator(instance.client_id());
        Ok(Producer {
            inner: Arc::new(ProducerInner {
                config,
                instance,
                faults: LatencyFaultTolerance::default(),
                counter: AtomicUsize::new(route::random_index(usize::MAX)),
                ids,
                callbacks: Executor::new("comet-callbacks", CALLBACKS_QUEUED_MAX),
                state: Mutex::new(State::Created),
                tracer: std::sync::OnceLock::new(),
            }),
        })
    }

    /// Registers the group and starts background tasks (no network traffic yet, as 5.x).
    pub fn start(&self) -> Result<()> {
        let mut state = self.inner.lock_state();
        match *state {
            State::Created => {
                let config = &self.inner.config;
                if config.enable_msg_trace {
                    let tracer = TraceDispatcher::start(
                        &config.client,
                        &config.client.unwrap_name(&config.group),
                        &config.trace_topic,
                    )?;
                    let _ = self.inner.tracer.set(tracer);
                }
                self.inner
                    .instance
                    .register_producer(&self.inner.config.group);
                self.inner.instance.start();
                *state = State::Running;
                Ok(())
            }
            State::Running => Ok(()),
            State::Stopped => Err(ClientError::State("shut down")),
        }
    }

    /// Unregisters from every broker and stops all threads. Idempotent.
    pub fn shutdown(&self) {
        {
            let mut state = self.inner.lock_state();
            if *state != State::Running {
                *state = State::Stopped;
                return;
            }
            *state = State::Stopped;
        }
        let group = self.inner.config.group.as_str();
        self.inner.instance.unregister(Some(group), None);
        self.inner
            .instance
            .unregister(Some(crate::instance::CLIENT_INNER_PRODUCER_GROUP), None);
        self.inner.callbacks.shutdown();
        if let Some(tracer) = self.inner.tracer.get() {
            tracer.shutdown();
        }
        self.inner.instance.shutdown();
    }

    /// The trace dispatcher, when `enable_msg_trace` is set and the producer started.
    pub fn tracer(&self) -> Option<&Arc<TraceDispatcher>> {
        self.inner.tracer.get()
    }

    /// The client id this producer registers under.
    pub fn client_id(&self) -> &str {
        self.inner.instance.client_id()
    }

    /// The publish queues of `topic` (fetching its route if needed).
    pub fn fetch_publish_queues(&self, topic: &str) -> Result<Vec<MessageQueue>> {
        let client = &self.inner.config.client;
        let route = self.inner.publish_route(&client.wrap_name(topic))?;
        Ok(crate::message::unwrap_queues(client, &route.publish))
    }

    /// Sends and waits for the broker's answer, retrying on another broker on failure.
    pub fn send(&self, message: Message) -> Result<SendResult> {
        self.inner.check_running()?;
        let prepared = self.inner.prepare(message)?;
        self.inner
            .send_with_retries(&prepared, Mode::Sync)
            .map(|result| result.expect("sync sends return a result"))
    }

    /// Sends `message` as a request and waits up to `timeout` for its reply (Java's
    /// `DefaultMQProducer.request`; see [`request`]): a consumer of the topic answers with
    /// [`Message::reply_to`], which the broker pushes back to this client. Fails with
    /// [`ClientError::NoReply`] when no reply comes in time.
    pub fn request(&self, mut message: Message, timeout: Duration) -> Result<MessageExt> {
        self.inner.check_running()?;
        let instance = &self.inner.instance;
        let correlation_id = self.inner.ids.next(now_ms());
        request::mark_request(&mut message, &correlation_id, instance.client_id(), timeout);
        let slot = instance.replies().register(&correlation_id)?;
        let started = Instant::now();
        if let Err(error) = self.send(message) {
            instance.replies().forget(&correlation_id);
            return Err(error);
        }
        let reply = slot.take_timeout(timeout.saturating_sub(started.elapsed()));
        instance.replies().forget(&correlation_id);
        reply.ok_or(ClientError::NoReply {
            correlation_id,
            after: timeout,
        })
    }

    /// Sends without waiting for an answer (no retry, no result).
    pub fn send_oneway(&self, message: Message) -> Result<()> {
        self.inner.check_running()?;
        let prepared = self.inner.prepare(message)?;
        self.inner
            .send_with_retries(&prepared, Mode::Oneway)
            .map(|_| ())
    }

    /// Sends to one given queue (no retry on another queue).
    pub fn send_to_queue(&self, message: Message, queue: &MessageQueue) -> Result<SendResult> {
        self.inner.check_running()?;
        let (prepared, queue) = self.inner.rules().prepare_for_queue(message, queue)?;
        let timeout = self.inner.config.send_timeout;
        self.inner
            .send_once(&prepared, &queue, Mode::Sync, timeout)
            .map(|result| result.expect("sync sends return a result"))
    }

    /// Sends to the queue chosen by `selector` from the topic's publish queues (ordered
    /// messages: the same selector input always picks the same queue).
    pub fn send_with_selector(
        &self,
        message: Message,
        selector: impl Fn(&[MessageQueue], &Message) -> usize,
    ) -> Result<SendResult> {
        self.inner.check_running()?;
        let topic = self.inner.config.client.wrap_name(&message.topic);
        let route = self.inner.publish_route(&topic)?;
        let queue = self
            .inner
            .rules()
            .select_with(&topic, &route, &message, selector)?;
        self.send_to_queue(message, &queue)
    }

    /// Ordered send by sharding key: every message with the same key goes to the same queue
    /// while the topic's queue count stays the same.
    pub fn send_orderly(&self, message: Message, sharding_key: &str) -> Result<SendResult> {
        self.send_with_selector(message, sharding_selector(sharding_key))
    }

    /// Sends in the background and calls `callback` once with the outcome, on the producer's
    /// callback thread. Retries follow the sync rules.
    pub fn send_async(
        &self,
        message: Message,
        callback: impl FnOnce(Result<SendResult>) + Send + 'static,
    ) -> Result<()> {
        self.inner.check_running()?;
        let prepared = self.inner.prepare(message)?;
        let attempts = 1 + self.inner.config.retry_times_when_send_async_failed;
        let deadline = Instant::now() + self.inner.config.send_timeout;
        let send = AsyncSend {
            producer: self.inner.clone(),
            prepared,
            attempts_left: attempts,
            avoid: None,
            deadline,
            callback: Box::new(callback),
        };
        send.attempt();
        Ok(())
    }

    /// Sends in the background and returns a handle to wait on (for windows of in-flight
    /// sends).
    pub fn send_async_future(&self, message: Message) -> Result<SendFuture> {
        let outcome = Arc::new(Oneshot::default());
        let completer = outcome.clone();
        self.send_async(message, move |result| completer.complete(result))?;
        Ok(SendFuture {
            outcome,
            timeout: self.inner.config.send_timeout,
        })
    }

    /// Sends messages of one topic as batches, split so that each request body stays within
    /// 4 MiB. Returns one result per batch request.
    pub fn send_batch(&self, messages: Vec<Message>) -> Result<Vec<SendResult>> {
        self.inner.check_running()?;
        let batches = self.inner.prepare_batches(messages)?;
        batches
            .iter()
            .map(|batch| self.inner.send_with_retries(batch, Mode::Sync))
            .map(|result| result.map(|r| r.expect("sync sends return a result")))
            .collect()
    }
}

/// The selector of an ordered send by `sharding_key` (Java's `SelectMessageQueueByHash`):
/// the key's Java string hash, made non-negative, modulo the queue count.
pub(crate) fn sharding_selector(
    sharding_key: &str,
) -> impl Fn(&[MessageQueue], &Message) -> usize + Send + 'static {
    let hash = comet_proto::filter::java_string_hash(sharding_key);
    let hash = usize::try_from(hash.unsigned_abs()).unwrap_or(0);
    move |queues: &[MessageQueue], _: &Message| hash % queues.len().max(1)
}

/// The generator of message ids (`UNIQ_KEY`) of a producer whose client id is `client_id`.
pub(crate) fn id_generator(client_id: &str) -> UniqueKeyGenerator {
    let ip = client_id
        .split('@')
        .next()
        .and_then(|ip| ip.parse().ok())
        .unwrap_or(std::net::IpAddr::from([127, 0, 0, 1]));
    let random = i32::from_ne_bytes(
        route::random_u64().to_ne_bytes()[..4]
            .try_into()
            .expect("4 bytes"),
    );
    UniqueKeyGenerator::new(ip, std::process::id(), random)
}

pub(crate) fn no_queue(topic: &str) -> ClientError {
    ClientError::NoRoute {
        topic: topic.to_owned(),
        reason: "the route has no writable queue".into(),
    }
}

type SendCallback = Box<dyn FnOnce(Result<SendResult>) + Send + 'static>;

struct AsyncSend {
    producer: Arc<ProducerInner>,
    prepared: Prepared,
    attempts_left: u32,
    avoid: Option<String>,
    deadline: Instant,
    callback: SendCallback,
}

impl AsyncSend {
    /// Starts one attempt; its outcome comes back through the callback thread.
    fn attempt(mut self) {
        assert!(self.attempts_left > 0);
        self.attempts_left -= 1;
        let remaining = self.deadline.saturating_duration_since(Instant::now());
        let producer = self.producer.clone();
        let queue = match producer.select(&self.prepared.topic, self.avoid.as_deref()) {
            Ok(queue) => queue,
            Err(error) => return self.finish(Err(error)),
        };
        let addr = match producer
            .instance
            .master_addr(&queue.broker_name, &queue.topic)
        {
            Ok(addr) => addr,
            Err(error) => return self.on_outcome(queue, Instant::now(), Err(error)),
        };
        let request = producer.build_request(&self.prepared, &queue);
        let (started_ms, started) = (now_ms(), Instant::now());
        let executor = producer.callbacks.clone();
        // The send moves into the transport callback; if the request never leaves, it is
        // taken back from here.
        let pending = Arc::new(Mutex::new(Some((self, queue))));
        let resume = pending.clone();
        let callback_addr = addr.clone();
        let transport_callback = Box::new(move |outcome: Result<RemotingCommand>| {
            let job = Box::new(move || {
                let taken = resume.lock().unwrap_or_else(|p| p.into_inner()).take();
                if let Some((send, queue)) = taken {
                    let outcome = outcome.and_then(|response| {
                        process_response(&callback_addr, &send.prepared, &queue, response)
                    });
                    if let Ok(result) = &outcome {
                        let producer = &send.producer;
                        producer.trace(&send.prepared, &callback_addr, started_ms, started, result);
                    }
                    send.on_outcome(queue, started, outcome);
                }
            });
            if let Err(job) = executor.submit(job) {
                job();
            }
        });
        let sent = producer.instance.remoting().invoke_async(
            &addr,
            request,
            remaining,
            transport_callback,
        );
        if let Err(error) = sent {
            let taken = pending.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some((send, queue)) = taken {
                send.on_outcome(queue, started, Err(error));
            }
        }
    }

    fn on_outcome(mut self, queue: MessageQueue, started: Instant, outcome: Result<SendResult>) {
        let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let failed = outcome.as_ref().err();
        self.producer.record_latency(
            &queue.broker_name,
            latency_ms,
            failed.is_some_and(ClientError::is_transport),
        );
        match outcome {
            Err(error)
                if is_retryable(&error)
                    && self.attempts_left > 0
                    && Instant::now() < self.deadline =>
            {
                log::debug!("async send to {queue:?} failed, retrying: {error}");
                self.avoid = Some(queue.broker_name);
                self.attempt();
            }
            outcome => self.finish(outcome),
        }
    }

    fn finish(self, outcome: Result<SendResult>) {
        (self.callback)(outcome);
    }
}

/// The Java producer's retry set (docs/protocol.md#response-codes), plus every transport failure.
fn is_retryable(error: &ClientError) -> bool {
    if error.is_transport() {
        return true;
    }
    matches!(
        error.response_code(),
        Some(
            ResponseCode::TOPIC_NOT_EXIST
                | ResponseCode::SERVICE_NOT_AVAILABLE
                | ResponseCode::SYSTEM_ERROR
                | ResponseCode::SYSTEM_BUSY
                | ResponseCode::NO_PERMISSION
                | ResponseCode::NO_BUYER_ID
                | ResponseCode::NOT_IN_CURRENT_UNIT
                | ResponseCode::GO_AWAY
        )
    )
}

/// Turns a send response into a result (docs/protocol.md#send-message).
/// The kind Java's send hook records: a delay level or timer makes a delayed message, the
/// transaction flag a half message.
fn trace_message_type(message: &Message) -> TraceMessageType {
    let properties = &message.properties;
    if [
        names::DELAY,
        names::TIMER_DELAY_SEC,
        names::TIMER_DELIVER_MS,
        names::TIMER_DELAY_MS,
    ]
    .iter()
    .any(|name| properties.get(name).is_some())
    {
        TraceMessageType::Delay
    } else if properties.get(names::TRAN_MSG) == Some("true") {
        TraceMessageType::TransactionHalf
    } else {
        TraceMessageType::Normal
    }
}

pub(crate) fn process_response(
    addr: &str,
    prepared: &Prepared,
    queue: &MessageQueue,
    response: RemotingCommand,
) -> Result<SendResult> {
    let status = match response.response_code() {
        ResponseCode::SUCCESS => SendStatus::SendOk,
        ResponseCode::FLUSH_DISK_TIMEOUT => SendStatus::FlushDiskTimeout,
        ResponseCode::FLUSH_SLAVE_TIMEOUT => SendStatus::FlushSlaveTimeout,
        ResponseCode::SLAVE_NOT_AVAILABLE => SendStatus::SlaveNotAvailable,
        code => {
            return Err(ClientError::Response {
                addr: addr.to_owned(),
                code,
                remark: response.remark.unwrap_or_default(),
            })
        }
    };
    let ext = &response.ext_fields;
    let queue_id = ext.optional_i32("queueId")?.unwrap_or(queue.queue_id);
    Ok(SendResult {
        status,
        msg_id: prepared.msg_id.clone(),
        offset_msg_id: ext.optional_string("msgId").unwrap_or_default(),
        queue: MessageQueue::new(&prepared.user_topic, &queue.broker_name, queue_id),
        queue_offset: ext.optional_i64("queueOffset")?.unwrap_or(-1),
        transaction_id: ext.optional_string("transactionId"),
        region_id: ext.optional_string(EXT_MSG_REGION),
        // Java counts anything but "false" as on.
        trace_on: ext.optional_string(EXT_TRACE_ON).as_deref() != Some("false"),
    })
}

impl ProducerInner {
    /// Hands the trace record of an answered send to the tracer, if tracing.
    fn trace(
        &self,
        prepared: &Prepared,
        addr: &str,
        started_ms: i64,
        started: Instant,
        result: &SendResult,
    ) {
        let Some(tracer) = self.tracer.get() else {
            return;
        };
        if let Some(record) =
            self.rules()
                .pub_trace(prepared, addr, started_ms, started.elapsed(), result)
        {
            tracer.append(record);
        }
    }

    fn lock_state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn check_running(&self) -> Result<()> {
        match *self.lock_state() {
            State::Running => Ok(()),
            State::Created => Err(ClientError::State("not started")),
            State::Stopped => Err(ClientError::State("shut down")),
        }
    }

    /// The route to publish `topic` through: its own, or the auto-create template's with
    /// `min(default_topic_queue_nums, readQueueNums)` queues per broker.
    fn publish_route(&self, topic: &str) -> Result<Arc<TopicRoute>> {
        self.instance.add_publish_topic(topic);
        if let Some(route) = self.instance.routes().get(topic) {
            if !route.publish.is_empty() {
                return Ok(route);
            }
        }
        if let Some(route) = self.instance.update_route(topic)? {
            if !route.publish.is_empty() {
                return Ok(route);
            }
        }
        let template = self.instance.update_route(&self.config.create_topic_key)?;
        let Some(template) = template else {
            return Err(ClientError::NoRoute {
                topic: topic.to_owned(),
                reason: format!(
                    "unknown to the name servers, and so is the template {}",
                    self.config.create_topic_key
                ),
            });
        };
        let data = self.rules().template_route(&template.data);
        self.instance.routes().put(topic, data);
        self.instance
            .routes()
            .get(topic)
            .filter(|route| !route.publish.is_empty())
            .ok_or_else(|| no_queue(topic))
    }

    /// Picks the next queue, skipping `avoid` and sidelined brokers when possible.
    fn select(&self, topic: &str, avoid: Option<&str>) -> Result<MessageQueue> {
        let route = self.publish_route(topic)?;
        self.rules().select_in(topic, &route, avoid)
    }

    fn record_latency(&self, broker_name: &str, latency_ms: u64, isolation: bool) {
        self.rules()
            .record_latency(broker_name, latency_ms, isolation);
    }

    fn build_request(&self, prepared: &Prepared, queue: &MessageQueue) -> RemotingCommand {
        self.rules().build_request(prepared, queue)
    }

    fn prepare(&self, message: Message) -> Result<Prepared> {
        self.rules().prepare(message)
    }

    fn prepare_batches(&self, messages: Vec<Message>) -> Result<Vec<Prepared>> {
        self.rules().prepare_batches(messages)
    }

    /// The pure send rules over this producer's settings and state.
    fn rules(&self) -> SendRules<'_> {
        SendRules {
            config: &self.config,
            faults: &self.faults,
            counter: &self.counter,
            ids: &self.ids,
        }
    }

    /// One attempt to one queue. `Ok(None)` for one-way sends.
    fn send_once(
        &self,
        prepared: &Prepared,
        queue: &MessageQueue,
        mode: Mode,
        timeout: Duration,
    ) -> Result<Option<SendResult>> {
        let addr = self
            .instance
            .master_addr(&queue.broker_name, &queue.topic)?;
        let request = self.build_request(prepared, queue);
        match mode {
            Mode::Oneway => {
                self.instance.remoting().invoke_oneway(&addr, request)?;
                Ok(None)
            }
            Mode::Sync => {
                let (started_ms, started) = (now_ms(), Instant::now());
                let response = self.instance.remoting().invoke(&addr, request, timeout)?;
                let result = process_response(&addr, prepared, queue, response)?;
                self.trace(prepared, &addr, started_ms, started, &result);
                Ok(Some(result))
            }
        }
    }

    /// Sync or one-way send with the retry and fault rules of the module docs.
    fn send_with_retries(&self, prepared: &Prepared, mode: Mode) -> Result<Option<SendResult>> {
        let started = Instant::now();
        let attempts = match mode {
            Mode::Sync => 1 + self.config.retry_times_when_send_failed,
            Mode::Oneway => 1,
        };
        let mut avoid: Option<String> = None;
        let mut last_error = None;
        for attempt in 0..attempts {
            let remaining = self.config.send_timeout.saturating_sub(started.elapsed());
            if remaining.is_zero() {
                break;
            }
            let queue = self.select(&prepared.topic, avoid.as_deref())?;
            let attempt_started = Instant::now();
            let outcome = self.send_once(prepared, &queue, mode, remaining);
            let latency_ms =
                u64::try_from(attempt_started.elapsed().as_millis()).unwrap_or(u64::MAX);
            let isolation = outcome
                .as_ref()
                .err()
                .is_some_and(ClientError::is_transport);
            self.record_latency(&queue.broker_name, latency_ms, isolation);
            match self.rules().after_attempt(
                attempt,
                attempts,
                outcome.as_ref().map(Option::as_ref),
            ) {
                AfterAttempt::Finish => return outcome,
                AfterAttempt::Retry { refresh_route } => {
                    if let Err(error) = outcome {
                        log::debug!(
                            "send to {queue:?} failed (attempt {}): {error}",
                            attempt + 1
                        );
                        last_error = Some(error);
                    }
                    if refresh_route {
                        let _ = self.instance.update_route(&prepared.topic);
                    }
                    avoid = Some(queue.broker_name.clone());
                }
            }
        }
        Err(last_error.unwrap_or_else(|| self.rules().budget_spent()))
    }
}

/// What a sync send does after one attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AfterAttempt {
    /// The outcome is final.
    Finish,
    /// Try again on another broker, first refreshing the topic's route when asked.
    Retry {
        /// The failure was the transport's.
        refresh_route: bool,
    },
}

/// The producer's pure send rules (message preparation, queue choice, fault records, request
/// building, retry decisions) over borrowed settings and state, so that the blocking
/// [`Producer`] and the async one (`crate::aio::AsyncProducer`) follow one set of rules.
pub(crate) struct SendRules<'a> {
    pub(crate) config: &'a ProducerConfig,
    pub(crate) faults: &'a LatencyFaultTolerance,
    pub(crate) counter: &'a AtomicUsize,
    pub(crate) ids: &'a UniqueKeyGenerator,
}

impl SendRules<'_> {
    /// Validates, assigns the id and compresses.
    pub(crate) fn prepare(&self, mut message: Message) -> Result<Prepared> {
        message.topic = self.config.client.wrap_name(&message.topic);
        validate::check_message(&message)?;
        if message.body.len() > self.config.max_message_bytes {
            return Err(ClientError::Invalid(format!(
                "the message body is {} bytes, the maximum is {}",
                message.body.len(),
                self.config.max_message_bytes
            )));
        }
        let msg_id = match message.uniq_key() {
            Some(key) => key.to_owned(),
            None => {
                let key = self.ids.next(now_ms());
                message.properties.insert(names::UNIQ_KEY, key.clone());
                key
            }
        };
        let mut sys_flag = 0;
        if message.properties.get(names::TRAN_MSG) == Some("true") {
            // A half message: the broker stores it in the half topic
            // (docs/protocol.md#transactional-messages).
            sys_flag |= message_sys_flag::TRANSACTION_PREPARED_TYPE;
        }
        let mut body = message.body.clone();
        if body.len() >= self.config.compress_over_bytes {
            let kind = self.config.compress_type;
            body = Bytes::from(compress(kind, &body, self.config.compress_level));
            sys_flag |= kind.sysflag_bits();
        }
        let retry_topic = comet_proto::names::is_retry_topic(&message.topic);
        let mut reconsume_times = 0;
        let mut max_reconsume_times = None;
        if retry_topic {
            // Retry sends carry these two in header fields j and l
            // (docs/protocol.md#consumer-send-back).
            if let Some(value) = message.properties.remove(names::RECONSUME_TIME) {
                reconsume_times = value.parse().unwrap_or(0);
            }
            if let Some(value) = message.properties.remove(names::MAX_RECONSUME_TIMES) {
                max_reconsume_times = value.parse().ok();
            }
        }
        let reply = message.is_reply();
        let trace = self.traces(&message.topic).then(|| TracedMessage {
            tags: message.tags().map(str::to_owned),
            keys: message.keys().map(str::to_owned),
            msg_type: trace_message_type(&message),
        });
        let properties = message.properties.encode();
        if properties.len() > crate::limits::PROPERTIES_BYTES_MAX {
            return Err(ClientError::Invalid(format!(
                "the properties take {} bytes, the maximum is {}",
                properties.len(),
                crate::limits::PROPERTIES_BYTES_MAX
            )));
        }
        Ok(Prepared {
            user_topic: self.config.client.unwrap_name(&message.topic),
            topic: message.topic,
            body,
            sys_flag,
            flag: message.flag,
            properties,
            msg_id,
            batch: false,
            reply,
            reconsume_times,
            max_reconsume_times,
            trace,
        })
    }

    /// Whether a send to `topic` is traced: tracing is on and it is not the trace topic.
    fn traces(&self, topic: &str) -> bool {
        self.config.enable_msg_trace && !topic.starts_with(&self.config.trace_topic)
    }

    /// The trace record of an answered send that started at `started_ms` (wall clock) and
    /// took `cost`, as Java's send hook writes it: only when the broker named its region and
    /// did not turn tracing off.
    pub(crate) fn pub_trace(
        &self,
        prepared: &Prepared,
        addr: &str,
        started_ms: i64,
        cost: Duration,
        result: &SendResult,
    ) -> Option<TraceRecord> {
        let traced = prepared.trace.as_ref()?;
        let region_id = result.region_id.clone().filter(|_| result.trace_on)?;
        Some(TraceRecord::Pub(PubTrace {
            timestamp_ms: started_ms,
            region_id,
            group: self.config.client.unwrap_name(&self.config.group),
            topic: prepared.user_topic.clone(),
            msg_id: result.msg_id.clone(),
            tags: traced.tags.clone(),
            keys: traced.keys.clone(),
            store_host: addr.to_owned(),
            body_length: i64::try_from(prepared.body.len()).unwrap_or(i64::MAX),
            cost_ms: i64::try_from(cost.as_millis()).unwrap_or(i64::MAX),
            msg_type: traced.msg_type,
            offset_msg_id: result.offset_msg_id.clone(),
            success: result.status == SendStatus::SendOk,
        }))
    }

    /// Validates a batch and splits it into requests of at most 4 MiB of body each.
    pub(crate) fn prepare_batches(&self, mut messages: Vec<Message>) -> Result<Vec<Prepared>> {
        for message in &mut messages {
            message.topic = self.config.client.wrap_name(&message.topic);
        }
        let Some(first) = messages.first() else {
            return Err(ClientError::Invalid(
                "a batch needs at least one message".into(),
            ));
        };
        let topic = first.topic.clone();
        let wait = first.wait_store_msg_ok();
        for message in &messages {
            validate::check_message(message)?;
            if message.topic != topic {
                return Err(ClientError::Invalid(
                    "every message of a batch needs one topic".into(),
                ));
            }
            if message.delay_level() > 0 {
                return Err(ClientError::Invalid(
                    "delayed messages cannot be batched".into(),
                ));
            }
            if comet_proto::names::is_retry_topic(&message.topic) {
                return Err(ClientError::Invalid(
                    "retry topics cannot take batches".into(),
                ));
            }
            if message.wait_store_msg_ok() != wait {
                return Err(ClientError::Invalid("a batch must agree on WAIT".into()));
            }
        }
        let mut entries: Vec<(i32, Bytes, String, String)> = Vec::with_capacity(messages.len());
        for mut message in messages {
            let key = match message.uniq_key() {
                Some(key) => key.to_owned(),
                None => {
                    let key = self.ids.next(now_ms());
                    message.properties.insert(names::UNIQ_KEY, key.clone());
                    key
                }
            };
            entries.push((message.flag, message.body, message.properties.encode(), key));
        }
        split_batches(&entries, BATCH_BODY_BYTES_MAX)?
            .into_iter()
            .map(|range| self.encode_batch(&topic, wait, &entries[range]))
            .collect()
    }

    fn encode_batch(
        &self,
        topic: &str,
        wait: bool,
        entries: &[(i32, Bytes, String, String)],
    ) -> Result<Prepared> {
        let batch_entries: Vec<BatchEntry<'_>> = entries
            .iter()
            .map(|(flag, body, properties, _)| BatchEntry {
                flag: *flag,
                body,
                properties,
            })
            .collect();
        let mut body = BytesMut::new();
        encode_batch(&batch_entries, &mut body)
            .map_err(|error| ClientError::Invalid(format!("cannot encode the batch: {error}")))?;
        let ids: Vec<&str> = entries.iter().map(|entry| entry.3.as_str()).collect();
        let mut header_properties = comet_proto::properties::Properties::new();
        header_properties.insert(names::UNIQ_KEY, self.ids.next(now_ms()));
        header_properties.insert(names::WAIT, wait.to_string());
        Ok(Prepared {
            user_topic: self.config.client.unwrap_name(topic),
            topic: topic.to_owned(),
            body: body.freeze(),
            sys_flag: 0,
            flag: 0,
            properties: header_properties.encode(),
            msg_id: ids.join(","),
            batch: true,
            reply: false,
            reconsume_times: 0,
            max_reconsume_times: None,
            trace: self.traces(topic).then_some(TracedMessage {
                tags: None,
                keys: None,
                msg_type: TraceMessageType::Normal,
            }),
        })
    }

    /// `message` prepared to go to exactly `queue`: both in the client's namespace, and
    /// their topics must agree.
    pub(crate) fn prepare_for_queue(
        &self,
        mut message: Message,
        queue: &MessageQueue,
    ) -> Result<(Prepared, MessageQueue)> {
        let client = &self.config.client;
        message.topic = client.wrap_name(&message.topic);
        let queue = MessageQueue::new(
            client.wrap_name(&queue.topic),
            &queue.broker_name,
            queue.queue_id,
        );
        if queue.topic != message.topic {
            return Err(ClientError::Invalid(format!(
                "message topic {} differs from the queue's topic {}",
                message.topic, queue.topic
            )));
        }
        Ok((self.prepare(message)?, queue))
    }

    /// The publish queue of `route` that `selector` picks; the selector sees the queues as
    /// the application names their topic, and its index is taken modulo their count.
    pub(crate) fn select_with(
        &self,
        topic: &str,
        route: &TopicRoute,
        message: &Message,
        selector: impl FnOnce(&[MessageQueue], &Message) -> usize,
    ) -> Result<MessageQueue> {
        if route.publish.is_empty() {
            return Err(no_queue(topic));
        }
        let client = &self.config.client;
        let shown: Vec<MessageQueue> = route
            .publish
            .iter()
            .map(|queue| {
                MessageQueue::new(
                    client.unwrap_name(&queue.topic),
                    &queue.broker_name,
                    queue.queue_id,
                )
            })
            .collect();
        let index = selector(&shown, message) % route.publish.len();
        Ok(route.publish[index].clone())
    }

    /// Picks the next queue of `route`, skipping `avoid` and sidelined brokers when
    /// possible.
    pub(crate) fn select_in(
        &self,
        topic: &str,
        route: &TopicRoute,
        avoid: Option<&str>,
    ) -> Result<MessageQueue> {
        let queues = &route.publish;
        let counter = self.counter.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let fault_enable = self.config.send_latency_fault_enable;
        let index = select_queue(
            queues.len(),
            counter,
            |index| queues[index].broker_name.clone(),
            avoid,
            |broker| !fault_enable || self.faults.is_available(broker, now),
        )
        .ok_or_else(|| no_queue(topic))?;
        Ok(queues[index].clone())
    }

    /// The route of a topic unknown to the name servers, derived from the auto-create
    /// template's: `min(default_topic_queue_nums, readQueueNums)` queues per broker.
    pub(crate) fn template_route(&self, template: &TopicRouteData) -> TopicRouteData {
        let mut data = template.clone();
        for queue_data in &mut data.queue_datas {
            let count = self
                .config
                .default_topic_queue_nums
                .min(queue_data.read_queue_nums);
            queue_data.read_queue_nums = count;
            queue_data.write_queue_nums = count;
        }
        data
    }

    /// What the sync retry rules of the module docs do after attempt `attempt` (from 0) of
    /// `attempts` ended with `outcome`.
    pub(crate) fn after_attempt(
        &self,
        attempt: u32,
        attempts: u32,
        outcome: std::result::Result<Option<&SendResult>, &ClientError>,
    ) -> AfterAttempt {
        match outcome {
            Ok(Some(result))
                if result.status != SendStatus::SendOk
                    && self.config.retry_another_broker_when_not_store_ok
                    && attempt + 1 < attempts =>
            {
                AfterAttempt::Retry {
                    refresh_route: false,
                }
            }
            Ok(_) => AfterAttempt::Finish,
            // The broker may be gone from the route after a transport failure: refresh it.
            Err(error) if is_retryable(error) => AfterAttempt::Retry {
                refresh_route: error.is_transport(),
            },
            Err(_) => AfterAttempt::Finish,
        }
    }

    /// The error of a sync send whose attempts or budget ran out with no failure to report.
    pub(crate) fn budget_spent(&self) -> ClientError {
        ClientError::Timeout {
            addr: String::new(),
            code: 310,
            opaque: 0,
            timeout: self.config.send_timeout,
        }
    }

    /// Reports a send's latency (or failure) to the fault tolerance.
    pub(crate) fn record_latency(&self, broker_name: &str, latency_ms: u64, isolation: bool) {
        if self.config.send_latency_fault_enable {
            self.faults
                .update(broker_name, latency_ms, isolation, Instant::now());
        }
    }

    /// The SEND_MESSAGE_V2 (or SEND_REPLY_MESSAGE_V2) request of `prepared` to `queue`.
    pub(crate) fn build_request(
        &self,
        prepared: &Prepared,
        queue: &MessageQueue,
    ) -> RemotingCommand {
        let header = SendMessageRequestHeaderV2 {
            producer_group: self.config.group.clone(),
            topic: prepared.topic.clone(),
            default_topic: self.config.create_topic_key.clone(),
            default_topic_queue_nums: self.config.default_topic_queue_nums,
            queue_id: queue.queue_id,
            sys_flag: prepared.sys_flag,
            born_timestamp: now_ms(),
            flag: prepared.flag,
            properties: Some(prepared.properties.clone()),
            reconsume_times: Some(prepared.reconsume_times),
            unit_mode: Some(false),
            max_reconsume_times: prepared.max_reconsume_times,
            batch: Some(prepared.batch),
            broker_name: Some(queue.broker_name.clone()),
        };
        if prepared.reply {
            protocol::send_reply_message(&header, prepared.body.clone())
        } else {
            protocol::send_message(&header, prepared.body.clone())
        }
    }
}

/// Splits `entries` into consecutive ranges whose encoded batch body fits `max_bytes`.
/// A single entry larger than `max_bytes` is an error.
fn split_batches(
    entries: &[(i32, Bytes, String, String)],
    max_bytes: usize,
) -> Result<Vec<std::ops::Range<usize>>> {
    let sizes: Vec<usize> = entries
        .iter()
        .map(|(_, body, properties, _)| {
            comet_proto::batch::BATCH_ENTRY_FIXED_BYTES + body.len() + properties.len()
        })
        .collect();
    split_by_size(&sizes, max_bytes)
}

/// The pure splitting rule: greedy, in order, each range's sum at most `max_bytes`.
pub fn split_by_size(sizes: &[usize], max_bytes: usize) -> Result<Vec<std::ops::Range<usize>>> {
    let mut ranges = Vec::new();
    let (mut start, mut total) = (0, 0);
    for (index, size) in sizes.iter().enumerate() {
        if *size > max_bytes {
            return Err(ClientError::Invalid(format!(
                "batch message {index} takes {size} bytes, more than a batch may ({max_bytes})"
            )));
        }
        if total + size > max_bytes {
            ranges.push(start..index);
            (start, total) = (index, 0);
        }
        total += size;
    }
    if start < sizes.len() {
        ranges.push(start..sizes.len());
    }
    Ok(ranges)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves greedy splitting keeps order, never exceeds the limit, fills each batch as much
    // as possible and rejects a single oversized message.
    #[test]
    fn batch_splitting() {
        assert_eq!(split_by_size(&[3, 3, 3, 3], 6).unwrap(), vec![0..2, 2..4]);
        assert_eq!(
            split_by_size(&[5, 1, 6, 2], 6).unwrap(),
            vec![0..2, 2..3, 3..4]
        );
        assert_eq!(
            split_by_size(&[], 6).unwrap(),
            Vec::<std::ops::Range<usize>>::new()
        );
        assert_eq!(split_by_size(&[6], 6).unwrap(), vec![0..1]);
        assert!(split_by_size(&[1, 7], 6).is_err());
    }

    // Proves the retry set: transport failures and the Java codes retry, MESSAGE_ILLEGAL
    // does not.
    #[test]
    fn retryable_errors() {
        let response = |code| ClientError::Response {
            addr: "a".into(),
            code,
            remark: String::new(),
        };
        assert!(is_retryable(&response(ResponseCode::SYSTEM_BUSY)));
        assert!(is_retryable(&response(ResponseCode::TOPIC_NOT_EXIST)));
        assert!(!is_retryable(&response(ResponseCode::MESSAGE_ILLEGAL)));
        assert!(is_retryable(&ClientError::ConnectionClosed {
            addr: "a".into(),
            reason: "x".into()
        }));
        assert!(!is_retryable(&ClientError::Invalid("x".into())));
    }

    // Proves a body at the threshold is compressed with the configured algorithm and marked
    // with its sysflag type bits, decompresses to what was sent, and a smaller one is not.
    #[test]
    fn bodies_are_compressed_with_the_configured_type() {
        let (faults, counter) = (LatencyFaultTolerance::default(), AtomicUsize::new(0));
        let ids = id_generator("127.0.0.1@test");
        let body = "comet ".repeat(1_000);
        for (kind, level) in [
            (CompressionType::Zlib, 5),
            (CompressionType::Lz4, 0),
            (CompressionType::Zstd, 3),
        ] {
            let mut config = ProducerConfig::new("g", ClientConfig::default());
            config.compress_type = kind;
            config.compress_level = level;
            config.compress_over_bytes = body.len();
            let rules = SendRules {
                config: &config,
                faults: &faults,
                counter: &counter,
                ids: &ids,
            };
            let prepared = rules.prepare(Message::new("T", body.clone())).unwrap();
            assert_eq!(prepared.sys_flag, kind.sysflag_bits(), "{kind:?}");
            assert!(prepared.body.len() < body.len() / 4, "{kind:?}");
            let inflated =
                comet_proto::compression::decompress(prepared.sys_flag, &prepared.body, 1 << 20)
                    .unwrap();
            assert_eq!(inflated, body.as_bytes(), "{kind:?}");
            let small = rules.prepare(Message::new("T", "small")).unwrap();
            assert_eq!(small.sys_flag, 0);
        }
    }

    // Proves a level the algorithm lacks is refused when the producer is built.
    #[test]
    fn compression_levels_are_checked() {
        let mut config = ProducerConfig::new("g", ClientConfig::default());
        config.client.namesrv_addrs = vec!["127.0.0.1:9876".into()];
        for (kind, level, valid) in [
            (CompressionType::Zlib, 9, true),
            (CompressionType::Zlib, 10, false),
            (CompressionType::Zstd, 0, false),
            (CompressionType::Zstd, 22, true),
            (CompressionType::Lz4, 99, true),
        ] {
            config.compress_type = kind;
            config.compress_level = level;
            assert_eq!(
                Producer::new(config.clone()).is_ok(),
                valid,
                "{kind:?} {level}"
            );
        }
    }

    // Proves the retry decisions both producers share: a transport failure retries after a
    // route refresh, a retryable answer without one, a final error or a stored message
    // ends the send, and a non-OK store status moves on only with
    // retry_another_broker_when_not_store_ok and an attempt left.
    #[test]
    fn retry_decisions() {
        let mut config = ProducerConfig::new("g", ClientConfig::default());
        let (faults, counter) = (LatencyFaultTolerance::default(), AtomicUsize::new(0));
        let ids = id_generator("127.0.0.1@test");
        let closed = ClientError::ConnectionClosed {
            addr: "a".into(),
            reason: "x".into(),
        };
        let busy = ClientError::Response {
            addr: "a".into(),
            code: ResponseCode::SYSTEM_BUSY,
            remark: String::new(),
        };
        let stored = |status| SendResult {
            status,
            msg_id: String::new(),
            offset_msg_id: String::new(),
            queue: MessageQueue::new("T", "b", 0),
            queue_offset: 0,
            transaction_id: None,
            region_id: None,
            trace_on: true,
        };
        let (ok, flush_timeout) = (
            stored(SendStatus::SendOk),
            stored(SendStatus::FlushDiskTimeout),
        );
        for retry_not_ok in [false, true] {
            config.retry_another_broker_when_not_store_ok = retry_not_ok;
            let rules = SendRules {
                config: &config,
                faults: &faults,
                counter: &counter,
                ids: &ids,
            };
            let retry = |refresh_route| AfterAttempt::Retry { refresh_route };
            assert_eq!(rules.after_attempt(0, 3, Err(&closed)), retry(true));
            assert_eq!(rules.after_attempt(2, 3, Err(&closed)), retry(true));
            assert_eq!(rules.after_attempt(0, 3, Err(&busy)), retry(false));
            let invalid = ClientError::Invalid("x".into());
            assert_eq!(
                rules.after_attempt(0, 3, Err(&invalid)),
                AfterAttempt::Finish
            );
            assert_eq!(
                rules.after_attempt(0, 3, Ok(Some(&ok))),
                AfterAttempt::Finish
            );
            let not_ok = rules.after_attempt(0, 3, Ok(Some(&flush_timeout)));
            let expected = if retry_not_ok {
                retry(false)
            } else {
                AfterAttempt::Finish
            };
            assert_eq!(not_ok, expected);
            assert_eq!(
                rules.after_attempt(2, 3, Ok(Some(&flush_timeout))),
                AfterAttempt::Finish,
                "the last attempt keeps its result"
            );
        }
    }
}
