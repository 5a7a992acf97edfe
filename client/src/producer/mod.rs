//! The producer (Java `DefaultMQProducer`, conversation of
//! docs/protocol.md#producer-conversation): its settings and send rules, and [`Producer`],
//! the blocking face of [`AsyncProducer`].
//!
//! One implementation sends: [`AsyncProducer`] (`crate::aio::producer`) applies the rules
//! of this module ([`SendRules`]) over the async transport; [`Producer`] runs it on a tokio
//! runtime the producer owns, and the transactional producers do the same.
//!
//! * Queue selection rotates over the topic's publish queues, skipping the broker that just
//!   failed and, with latency fault tolerance on, brokers sidelined for being slow or down
//!   ([`fault`]).
//! * Sync sends retry on another broker (2 retries by default) for transport errors and the
//!   Java retry codes (docs/protocol.md#response-codes), within one overall `send_timeout`;
//!   with `retry_another_broker_when_not_store_ok`, also when the broker stored the message
//!   with a non-OK status.
//! * Async sends (`send_async`) retry on failures only, `retry_times_when_send_async_failed`
//!   times; their callbacks run on the producer's callback thread, never on a thread that
//!   serves connections.
//! * Bodies of 4 KiB and more are zlib-compressed (level 5); batches never are.
//! * Every message gets a `UNIQ_KEY` (the id the application sees) before its first attempt,
//!   so retries of one message keep one id.
//! * An unknown topic is sent through the `TBW102` route so the broker auto-creates it.
//!
//! Threads of a [`Producer`]: its runtime's [`PRODUCER_IO_THREADS`] workers (`comet-producer`,
//! serving every connection as tasks, and running background sends), at most one blocking-pool
//! thread (host name lookups), and the callback thread (`comet-callbacks`): the same count
//! however many brokers, queues or sends in flight. A sync call runs its send on the calling
//! thread (`block_on`). With `enable_msg_trace`, the trace dispatcher adds its thread and its
//! own producer's.

pub mod fault;
pub mod request;
pub mod transaction;

use std::future::Future;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use comet_proto::batch::{encode_batch, BatchEntry};
use comet_proto::compression::{compress, CompressionType};
use comet_proto::flags::message as message_sys_flag;
use comet_proto::message::MessageExt;
use comet_proto::message_id::UniqueKeyGenerator;
use comet_proto::properties::names;
use comet_proto::{RemotingCommand, ResponseCode};

use tokio::runtime::{Handle, Runtime};

use self::fault::{select_queue, LatencyFaultTolerance};
use crate::aio::AsyncProducer;
use crate::config::{now_ms, ClientConfig};
use crate::error::{ClientError, Result};
use crate::limits::{
    BATCH_BODY_BYTES_MAX, CALLBACKS_QUEUED_MAX, MESSAGE_BODY_BYTES_MAX, PRODUCER_IO_THREADS,
};
use crate::message::{Message, MessageQueue, SendResult, SendStatus};
use crate::protocol;
use crate::route::{self, TopicRoute};
use crate::trace::{PubTrace, TraceDispatcher, TraceMessageType, TraceRecord};
use crate::util::{lock, Executor, Oneshot};
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
    /// Waited for: `retry_times_when_send_failed` retries.
    Sync,
    /// Answered to a callback (Java's async send): `retry_times_when_send_async_failed`
    /// retries, on failures only.
    Async,
    /// No answer, one attempt.
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

/// A message producer for programs without an async runtime: a face of
/// [`AsyncProducer`] on a tokio runtime of its own (see the module docs). Thread-safe; clones
/// share one producer. Not for use inside an async runtime (a call would block that
/// runtime's thread; use [`AsyncProducer`] there).
#[derive(Clone)]
pub struct Producer {
    inner: Arc<ProducerInner>,
}

struct ProducerInner {
    producer: AsyncProducer,
    /// Runs calls while the runtime lives.
    handle: Handle,
    /// The runtime the connections and background sends run on; taken by shutdown.
    runtime: Mutex<Option<Runtime>>,
    /// `CREATED`, `RUNNING` or `STOPPED`: read by every call, so an atomic.
    state: AtomicU8,
    /// The callback thread of `send_async`.
    callbacks: Arc<Executor>,
    /// Background sends whose callback has not started yet.
    owed: Arc<Owed>,
    send_timeout: Duration,
    /// Bounds each broker's answer to UNREGISTER_CLIENT.
    api_timeout: Duration,
}

/// The producer's states: made, started, shut down.
const CREATED: u8 = 0;
const RUNNING: u8 = 1;
const STOPPED: u8 = 2;

/// A waitable handle on an asynchronous send.
pub struct SendFuture {
    outcome: Arc<Oneshot<Result<SendResult>>>,
    timeout: Duration,
}

impl SendFuture {
    /// Blocks until the send finished (success, failure after retries, or timeout).
    pub fn wait(self) -> Result<SendResult> {
        // Every attempt is bounded by the send timeout; the margin covers a busy runtime.
        match self
            .outcome
            .take_timeout(self.timeout + Duration::from_secs(5))
        {
            Some(outcome) => outcome,
            None => Err(ClientError::State("waiting past the send timeout")),
        }
    }
}

/// Counts background sends whose callback has not started, at most the callback queue's
/// room: a finished send then always finds room for its callback, so no runtime thread
/// ever waits for the callback thread, and `send_async` waits instead while the count is
/// at its maximum (back-pressure on whoever produces the work). Atomic on the way: the
/// lock and the condition variable serve only a caller that waits.
#[derive(Default)]
struct Owed {
    count: AtomicUsize,
    waiting: Mutex<()>,
    freed: Condvar,
}

/// How long a `send_async` at the limit sleeps between looks at the count.
const OWED_WAIT_SLICE: Duration = Duration::from_millis(10);

impl Owed {
    fn acquire(&self) {
        loop {
            let count = self.count.load(Ordering::Acquire);
            if count < CALLBACKS_QUEUED_MAX {
                if self
                    .count
                    .compare_exchange_weak(count, count + 1, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
                {
                    return;
                }
                continue;
            }
            let waiting = lock(&self.waiting);
            // Looked at again under the lock, which a release at the limit takes to notify.
            if self.count.load(Ordering::Acquire) >= CALLBACKS_QUEUED_MAX {
                drop(self.freed.wait_timeout(waiting, OWED_WAIT_SLICE));
            }
        }
    }

    fn release(&self) {
        if self.count.fetch_sub(1, Ordering::AcqRel) >= CALLBACKS_QUEUED_MAX {
            let _waiting = lock(&self.waiting);
            self.freed.notify_all();
        }
    }

    /// Waits until nothing is owed, at most `limit`; false on time-out.
    fn wait_none(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while self.count.load(Ordering::Acquire) > 0 {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        true
    }
}

/// A `send_async` callback, called exactly once: with the outcome on the callback thread,
/// or, when the producer shut down before the send ended, with `State("shut down")` where
/// it is dropped.
struct Callback {
    callback: Option<SendCallback>,
    owed: Arc<Owed>,
}

impl Callback {
    fn call(mut self, outcome: Result<SendResult>) {
        if let Some(callback) = self.callback.take() {
            self.owed.release();
            callback(outcome);
        }
    }
}

impl Drop for Callback {
    fn drop(&mut self) {
        if let Some(callback) = self.callback.take() {
            self.owed.release();
            callback(Err(ClientError::State("shut down")));
        }
    }
}

type SendCallback = Box<dyn FnOnce(Result<SendResult>) + Send + 'static>;

/// The runtime of a blocking producer: [`PRODUCER_IO_THREADS`] workers for the connections'
/// tasks and background sends, and one blocking-pool thread at most (tokio resolves host
/// names there).
fn producer_runtime() -> Result<Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(PRODUCER_IO_THREADS)
        .max_blocking_threads(1)
        .thread_name("comet-producer")
        .enable_all()
        .build()
        .map_err(|error| ClientError::Runtime(error.to_string()))
}

impl ProducerInner {
    fn check_running(&self) -> Result<()> {
        match self.state.load(Ordering::Acquire) {
            RUNNING => Ok(()),
            CREATED => Err(ClientError::State("not started")),
            _ => Err(ClientError::State("shut down")),
        }
    }

    /// Runs `call` to its end on the calling thread, the runtime serving its connections.
    fn run<T>(&self, call: impl Future<Output = Result<T>>) -> Result<T> {
        self.check_running()?;
        self.handle.block_on(call)
    }

    /// The background send of `message`, checked (and the message given its id) now.
    fn background_send(
        &self,
        message: Message,
    ) -> Result<impl Future<Output = Result<SendResult>> + Send + 'static> {
        self.check_running()?;
        self.producer.send_in_background(message)
    }
}

impl Drop for ProducerInner {
    fn drop(&mut self) {
        // Never shut down: stop the runtime without waiting, which works on any thread
        // (waiting for it panics inside an async context).
        if let Some(runtime) = lock(&self.runtime).take() {
            runtime.shutdown_background();
        }
        self.callbacks.shutdown();
    }
}

impl Producer {
    /// A producer; call [`Producer::start`] before sending.
    pub fn new(config: ProducerConfig) -> Result<Producer> {
        Producer::over(AsyncProducer::new(config)?)
    }

    /// The blocking face of `producer`, on a runtime of its own.
    pub(crate) fn over(producer: AsyncProducer) -> Result<Producer> {
        let config = producer.config();
        let (send_timeout, api_timeout) = (config.send_timeout, config.client.api_timeout);
        let runtime = producer_runtime()?;
        Ok(Producer {
            inner: Arc::new(ProducerInner {
                producer,
                handle: runtime.handle().clone(),
                runtime: Mutex::new(Some(runtime)),
                state: AtomicU8::new(CREATED),
                callbacks: Executor::new("comet-callbacks", CALLBACKS_QUEUED_MAX),
                owed: Arc::default(),
                send_timeout,
                api_timeout,
            }),
        })
    }

    /// Registers the group with the brokers ([`AsyncProducer::register`]: a heartbeat to
    /// each broker the producer meets, then every `heartbeat_broker_interval`). Returns at
    /// once: the heartbeats go in the background.
    pub fn start(&self) -> Result<()> {
        let state = &self.inner.state;
        match state.compare_exchange(CREATED, RUNNING, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => {
                let producer = self.inner.producer.clone();
                self.inner.handle.spawn(async move {
                    if let Err(error) = producer.register().await {
                        log::debug!("producer registration: {error}");
                    }
                });
                Ok(())
            }
            Err(RUNNING) => Ok(()),
            Err(_) => Err(ClientError::State("shut down")),
        }
    }

    /// Unregisters from every broker, fails the sends still in flight, runs the callbacks
    /// owed, sends the queued trace records and stops the producer's threads. Idempotent.
    pub fn shutdown(&self) {
        let was_running = self.inner.state.swap(STOPPED, Ordering::AcqRel) == RUNNING;
        let Some(runtime) = lock(&self.inner.runtime).take() else {
            return;
        };
        let producer = &self.inner.producer;
        if was_running {
            // On the runtime and waited for here, so this works on any thread.
            let unregistered = Arc::new(Oneshot::default());
            let done = unregistered.clone();
            let leaving = producer.clone();
            runtime.spawn(async move {
                leaving.unregister().await;
                done.complete(());
            });
            let limit = self.inner.api_timeout * 2;
            if unregistered.take_timeout(limit).is_none() {
                log::debug!("unregistering took more than {limit:?}: going on");
            }
        }
        producer.shutdown();
        // Closing the connections failed every send in flight: their callbacks are queued
        // at once, then run before the callback thread stops.
        let limit = self.inner.send_timeout + Duration::from_secs(1);
        if !self.inner.owed.wait_none(limit) {
            log::warn!("async sends still unanswered {limit:?} after shutdown");
        }
        self.inner.callbacks.shutdown();
        if let Some(tracer) = producer.tracer() {
            tracer.shutdown();
        }
        if Handle::try_current().is_ok() {
            runtime.shutdown_background();
        } else {
            runtime.shutdown_timeout(Duration::from_secs(1));
        }
    }

    /// The trace dispatcher, when `enable_msg_trace` is set.
    pub fn tracer(&self) -> Option<&Arc<TraceDispatcher>> {
        self.inner.producer.tracer()
    }

    /// The client id this producer registers under.
    pub fn client_id(&self) -> &str {
        self.inner.producer.client_id()
    }

    /// The async producer underneath (shares routes, connections and fault records).
    pub fn as_async(&self) -> &AsyncProducer {
        &self.inner.producer
    }

    /// The publish queues of `topic` (fetching its route if needed).
    pub fn fetch_publish_queues(&self, topic: &str) -> Result<Vec<MessageQueue>> {
        self.inner
            .run(self.inner.producer.fetch_publish_queues(topic))
    }

    /// Sends and waits for the broker's answer, retrying on another broker on failure
    /// ([`AsyncProducer::send`]).
    pub fn send(&self, message: Message) -> Result<SendResult> {
        self.inner.run(self.inner.producer.send(message))
    }

    /// Sends `message` as a request and waits up to `timeout` for its reply (Java's
    /// `DefaultMQProducer.request`; see [`request`]): a consumer of the topic answers with
    /// [`Message::reply_to`], which the broker pushes back to this client. Fails with
    /// [`ClientError::NoReply`] when no reply comes in time.
    pub fn request(&self, message: Message, timeout: Duration) -> Result<MessageExt> {
        self.inner
            .run(self.inner.producer.request(message, timeout))
    }

    /// Sends without waiting for an answer (no retry, no result).
    pub fn send_oneway(&self, message: Message) -> Result<()> {
        self.inner.run(self.inner.producer.send_oneway(message))
    }

    /// Sends to one given queue (no retry on another queue).
    pub fn send_to_queue(&self, message: Message, queue: &MessageQueue) -> Result<SendResult> {
        self.inner
            .run(self.inner.producer.send_to_queue(message, queue))
    }

    /// Sends to the queue chosen by `selector` from the topic's publish queues (ordered
    /// messages: the same selector input always picks the same queue). The selector runs
    /// on the calling thread.
    pub fn send_with_selector(
        &self,
        message: Message,
        selector: impl Fn(&[MessageQueue], &Message) -> usize,
    ) -> Result<SendResult> {
        self.inner
            .run(self.inner.producer.send_selected(message, selector))
    }

    /// Ordered send by sharding key: every message with the same key goes to the same queue
    /// while the topic's queue count stays the same.
    pub fn send_orderly(&self, message: Message, sharding_key: &str) -> Result<SendResult> {
        self.send_with_selector(message, sharding_selector(sharding_key))
    }

    /// Sends in the background and calls `callback` once with the outcome, on the producer's
    /// callback thread (never on a thread serving connections). Retries follow Java's
    /// async sends: at most `retry_times_when_send_async_failed` more attempts, on
    /// failures. A message that cannot be sent (invalid, or the producer not running) fails
    /// here, without a callback. With [`CALLBACKS_QUEUED_MAX`] sends and callbacks pending,
    /// this waits for one to end.
    pub fn send_async(
        &self,
        message: Message,
        callback: impl FnOnce(Result<SendResult>) + Send + 'static,
    ) -> Result<()> {
        let send = self.inner.background_send(message)?;
        let owed = self.inner.owed.clone();
        owed.acquire();
        let callback = Callback {
            callback: Some(Box::new(callback)),
            owed,
        };
        let executor = self.inner.callbacks.clone();
        self.inner.handle.spawn(async move {
            let outcome = send.await;
            let job = Box::new(move || callback.call(outcome));
            if let Err(job) = executor.try_submit(job) {
                // Only once the callback thread stopped (shutdown): the blocking pool then.
                drop(tokio::task::spawn_blocking(job));
            }
        });
        Ok(())
    }

    /// Sends in the background and returns a handle to wait on (for windows of in-flight
    /// sends). Retries as [`Producer::send_async`].
    pub fn send_async_future(&self, message: Message) -> Result<SendFuture> {
        let send = self.inner.background_send(message)?;
        let outcome = Arc::new(Oneshot::default());
        let completer = outcome.clone();
        // No application code runs here: the outcome is handed over on the runtime thread.
        self.inner
            .handle
            .spawn(async move { completer.complete(send.await) });
        Ok(SendFuture {
            outcome,
            timeout: self.inner.send_timeout,
        })
    }

    /// Sends messages of one topic as batches, split so that each request body stays within
    /// 4 MiB. Returns one result per batch request.
    pub fn send_batch(&self, messages: Vec<Message>) -> Result<Vec<SendResult>> {
        self.inner.run(self.inner.producer.send_batch(messages))
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

    /// What the retry rules of the module docs do after attempt `attempt` (from 0) of
    /// `attempts` of a send in `mode` ended with `outcome`.
    pub(crate) fn after_attempt(
        &self,
        mode: Mode,
        attempt: u32,
        attempts: u32,
        outcome: std::result::Result<Option<&SendResult>, &ClientError>,
    ) -> AfterAttempt {
        match outcome {
            Ok(Some(result))
                if result.status != SendStatus::SendOk
                    && mode == Mode::Sync
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

    // Proves the retry decisions: a transport failure retries after a route refresh, a
    // retryable answer without one, a final error or a stored message ends the send, and a
    // non-OK store status moves on only for a sync send, with
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
            assert_eq!(
                rules.after_attempt(Mode::Sync, 0, 3, Err(&closed)),
                retry(true)
            );
            assert_eq!(
                rules.after_attempt(Mode::Sync, 2, 3, Err(&closed)),
                retry(true)
            );
            assert_eq!(
                rules.after_attempt(Mode::Sync, 0, 3, Err(&busy)),
                retry(false)
            );
            let invalid = ClientError::Invalid("x".into());
            assert_eq!(
                rules.after_attempt(Mode::Sync, 0, 3, Err(&invalid)),
                AfterAttempt::Finish
            );
            assert_eq!(
                rules.after_attempt(Mode::Sync, 0, 3, Ok(Some(&ok))),
                AfterAttempt::Finish
            );
            let not_ok = rules.after_attempt(Mode::Sync, 0, 3, Ok(Some(&flush_timeout)));
            let expected = if retry_not_ok {
                retry(false)
            } else {
                AfterAttempt::Finish
            };
            assert_eq!(not_ok, expected);
            assert_eq!(
                rules.after_attempt(Mode::Sync, 2, 3, Ok(Some(&flush_timeout))),
                AfterAttempt::Finish,
                "the last attempt keeps its result"
            );
            // Async sends (Java's) retry failures only: a stored message is their result.
            assert_eq!(
                rules.after_attempt(Mode::Async, 0, 3, Ok(Some(&flush_timeout))),
                AfterAttempt::Finish
            );
            assert_eq!(
                rules.after_attempt(Mode::Async, 0, 3, Err(&closed)),
                retry(true)
            );
        }
    }
}
