//! The async producer: the producer's send rules (`producer::SendRules`) over the async
//! transport. It is the one implementation of sending: the blocking
//! [`Producer`](crate::Producer) is its face on a runtime of its own.
//!
//! Message preparation (ids, compression, batches), queue choice, latency fault tolerance,
//! request building, answer handling and the retry decisions are `SendRules`' functions.
//! Sends retry on another broker (`retry_times_when_send_failed`) within one overall
//! `send_timeout`; the blocking producer's `send_async` retries
//! `retry_times_when_send_async_failed` times, on failures only.
//!
//! Routes come from the name servers through the async transport (`AsyncRoutes`, shared
//! with the async consumers), with the same fail-over walk as the blocking client. No thread
//! refreshes them: a route older
//! than `poll_name_server_interval` is fetched again by the next send that needs it (one
//! fetch per topic at a time; the others wait for it), and a failed refresh keeps the cached
//! route. A transport failure refreshes the route before the retry, once for all the sends
//! that failed together.
//!
//! Besides `send` and `send_batch`: sends to a given queue or to the queue a selector picks
//! (ordered messages, `send_orderly` by sharding key), one-way sends, and request-reply
//! (`request`; the `registration` module says how the reply finds its way back).
//!
//! Cancellation: every call is a future; dropping it withdraws the request in flight (the
//! transport removes its waiter) and, for a request-reply call, its reply waiter, so nothing
//! waits on behalf of a dropped future and the connection stays usable.
//!
//! Registration: brokers accept sends from producers they never heard of, so plain sends
//! need no heartbeat. A request-reply call and a transactional producer
//! ([`crate::aio::AsyncTransactionProducer`]) need the broker to find this client (to push a
//! reply, to check a transaction back): they register the producer group by heartbeat
//! (the `registration` module).

pub(crate) mod registration;

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use comet_proto::message::MessageExt;
use comet_proto::message_id::UniqueKeyGenerator;
use comet_proto::{RemotingCommand, RequestCode};

use self::registration::Registration;
use super::routes::AsyncRoutes;
use super::transport::{AsyncTransport, AsyncTransportConfig, HookAnswer};
use crate::config::now_ms;
use crate::error::{ClientError, Result};
use crate::message::{Message, MessageQueue, SendResult};
use crate::producer::fault::LatencyFaultTolerance;
use crate::producer::request::{self, Replies};
use crate::producer::{
    id_generator, no_queue, process_response, sharding_selector, AfterAttempt, Mode, Prepared,
    ProducerConfig, SendRules,
};
use crate::route::{self, TopicRoute};
use crate::trace::TraceDispatcher;
use crate::validate;

/// An async producer (Java `DefaultMQProducer`'s sends, awaited).
///
/// Runs on the caller's tokio runtime and starts no thread of its own: each broker or name
/// server it talks to costs two tasks (one reading, one writing), whatever the number of
/// queues or sends in flight, and once registered (request-reply) one heartbeat task.
/// Cheap to clone; clones share one producer. Needs no `start`.
///
/// It answers what brokers send it through its transport's request hook (set when the
/// producer is made, so a transport shared with [`AsyncProducer::with_transport`] gets this
/// producer's hook): replies pushed to its requests, and check-backs of its transactions.
#[derive(Clone)]
pub struct AsyncProducer {
    inner: Arc<Inner>,
}

pub(in crate::aio) struct Inner {
    config: ProducerConfig,
    /// The id brokers know this client by (`REPLY_TO_CLIENT` of its requests).
    client_id: String,
    /// Requests waiting for their replies.
    replies: Replies,
    /// Heartbeats of the group, once something needs the brokers to find this client.
    registration: Registration,
    /// The transactional producer's check-back service, when this producer is one.
    checks: OnceLock<Arc<dyn CheckBacks>>,
    transport: AsyncTransport,
    routes: AsyncRoutes,
    faults: LatencyFaultTolerance,
    counter: AtomicUsize,
    ids: UniqueKeyGenerator,
    stopped: AtomicBool,
    /// When `enable_msg_trace` is set: its own thread and blocking producer, so a trace
    /// record costs a send only a queue push.
    tracer: Option<Arc<TraceDispatcher>>,
}

impl AsyncProducer {
    /// An async producer. Needs no runtime; sends must run on a tokio runtime with its
    /// I/O and time drivers enabled.
    pub fn new(config: ProducerConfig) -> Result<AsyncProducer> {
        let transport = AsyncTransport::new(AsyncTransportConfig::from_client(&config.client)?)?;
        AsyncProducer::with_transport(config, transport)
    }

    /// An async producer over a given transport (to set its in-flight limit, or to share it).
    pub fn with_transport(
        mut config: ProducerConfig,
        transport: AsyncTransport,
    ) -> Result<AsyncProducer> {
        config.group = config.client.wrap_name(&config.group);
        validate::check_producer(&config)?;
        let client_id = config.client.build_client_id();
        let ids = id_generator(&client_id);
        let tracer = if config.enable_msg_trace {
            Some(TraceDispatcher::start(
                &config.client,
                &config.client.unwrap_name(&config.group),
                &config.trace_topic,
            )?)
        } else {
            None
        };
        let inner = Arc::new(Inner {
            client_id,
            replies: Replies::default(),
            registration: Registration::default(),
            checks: OnceLock::new(),
            routes: AsyncRoutes::new(
                transport.clone(),
                config.client.namesrv_addrs.clone(),
                config.client.api_timeout,
                config.client.poll_name_server_interval,
            ),
            config,
            transport,
            faults: LatencyFaultTolerance::default(),
            counter: AtomicUsize::new(route::random_index(usize::MAX)),
            ids,
            stopped: AtomicBool::new(false),
            tracer,
        });
        // Weak: the transport (held by the producer) holds the hook.
        let weak = Arc::downgrade(&inner);
        inner
            .transport
            .set_request_hook(Arc::new(move |addr, request| match weak.upgrade() {
                Some(inner) => inner.handle_request(addr, request),
                None => HookAnswer::NotSupported,
            }));
        Ok(AsyncProducer { inner })
    }

    /// The producer's settings (its group in the client's namespace).
    pub(crate) fn config(&self) -> &ProducerConfig {
        &self.inner.config
    }

    /// The transport (for its counters, or to close a connection).
    pub fn transport(&self) -> &AsyncTransport {
        &self.inner.transport
    }

    /// Sends `message` and resolves once the broker stored it (or every attempt failed).
    ///
    /// The message is checked and given its id before this returns, so a bad message fails
    /// the future at its first poll without any traffic. Dropping the future withdraws the
    /// attempt in flight: the message may or may not have been stored, as with a timeout.
    pub fn send(&self, message: Message) -> impl Future<Output = Result<SendResult>> + Send {
        let inner = self.inner.clone();
        let prepared = inner
            .check_running()
            .and_then(|()| inner.rules().prepare(message));
        async move { inner.send_retrying(&prepared?).await }
    }

    /// Sends messages of one topic as batches of at most 4 MiB of body each, one after the
    /// other, and resolves to one result per batch request.
    pub fn send_batch(
        &self,
        messages: Vec<Message>,
    ) -> impl Future<Output = Result<Vec<SendResult>>> + Send {
        let inner = self.inner.clone();
        let batches = inner
            .check_running()
            .and_then(|()| inner.rules().prepare_batches(messages));
        async move {
            let mut results = Vec::new();
            for batch in batches? {
                results.push(inner.send_retrying(&batch).await?);
            }
            Ok(results)
        }
    }

    /// Sends `message` to `queue` (its topic must be the message's), once: no retry on
    /// another queue, as the blocking [`crate::Producer::send_to_queue`].
    pub fn send_to_queue(
        &self,
        message: Message,
        queue: &MessageQueue,
    ) -> impl Future<Output = Result<SendResult>> + Send {
        let inner = self.inner.clone();
        let prepared = inner
            .check_running()
            .and_then(|()| inner.rules().prepare_for_queue(message, queue));
        async move {
            let (prepared, queue) = prepared?;
            inner.send_to(&prepared, &queue).await
        }
    }

    /// Sends to the queue `selector` picks from the topic's publish queues (ordered
    /// messages: the same selector input always picks the same queue while the queue count
    /// stays the same). The selector sees the queues as the application names their topic;
    /// its index is taken modulo their count. No retry on another queue.
    pub fn send_with_selector<S>(
        &self,
        message: Message,
        selector: S,
    ) -> impl Future<Output = Result<SendResult>> + Send
    where
        S: FnOnce(&[MessageQueue], &Message) -> usize + Send + 'static,
    {
        self.send_selected(message, selector)
    }

    /// [`AsyncProducer::send_with_selector`] for a selector that may be neither `Send` nor
    /// `'static` (the blocking producer's, run on the calling thread).
    pub(crate) fn send_selected<S>(
        &self,
        message: Message,
        selector: S,
    ) -> impl Future<Output = Result<SendResult>>
    where
        S: FnOnce(&[MessageQueue], &Message) -> usize,
    {
        let inner = self.inner.clone();
        async move {
            inner.check_running()?;
            let topic = inner.config.client.wrap_name(&message.topic);
            let route = inner.publish_route(&topic).await?;
            let queue = inner
                .rules()
                .select_with(&topic, &route, &message, selector)?;
            let (prepared, queue) = inner.rules().prepare_for_queue(message, &queue)?;
            inner.send_to(&prepared, &queue).await
        }
    }

    /// Ordered send by sharding key (Java's `SelectMessageQueueByHash`): every message with
    /// the same key goes to the same queue while the topic's queue count stays the same.
    pub fn send_orderly(
        &self,
        message: Message,
        sharding_key: &str,
    ) -> impl Future<Output = Result<SendResult>> + Send {
        self.send_with_selector(message, sharding_selector(sharding_key))
    }

    /// The send of a blocking producer's `send_async` (Java's async send): `message` is
    /// checked and given its id now, so a bad one fails here; the future then makes at most
    /// `1 + retry_times_when_send_async_failed` attempts within the send timeout, retrying
    /// on failures only (a stored message with a non-OK status is its result).
    pub(crate) fn send_in_background(
        &self,
        message: Message,
    ) -> Result<impl Future<Output = Result<SendResult>> + Send + 'static> {
        let inner = self.inner.clone();
        inner.check_running()?;
        let prepared = inner.rules().prepare(message)?;
        Ok(async move {
            inner
                .send_with_retries(&prepared, Mode::Async)
                .await
                .map(|result| result.expect("async sends return a result"))
        })
    }

    /// Sends without waiting for an answer (one attempt, no result): resolves once the
    /// request is queued on the broker's connection.
    pub fn send_oneway(&self, message: Message) -> impl Future<Output = Result<()>> + Send {
        let inner = self.inner.clone();
        let prepared = inner
            .check_running()
            .and_then(|()| inner.rules().prepare(message));
        async move {
            inner
                .send_with_retries(&prepared?, Mode::Oneway)
                .await
                .map(|_| ())
        }
    }

    /// Sends `message` as a request and resolves to its reply (Java's
    /// `DefaultMQProducer.request`; see [`crate::producer::request`]): a consumer of the
    /// topic answers with [`Message::reply_to`], which the broker pushes back to this client.
    /// `timeout` covers the send and the wait; past it the future fails with
    /// [`ClientError::NoReply`].
    ///
    /// The first request registers the producer with the brokers of its routes (a heartbeat,
    /// then every `heartbeat_broker_interval`), so they can push the reply to it.
    /// Dropping the future removes its reply waiter: a reply that comes later is
    /// acknowledged and dropped.
    pub fn request(
        &self,
        mut message: Message,
        timeout: Duration,
    ) -> impl Future<Output = Result<MessageExt>> + Send {
        let inner = self.inner.clone();
        async move {
            inner.check_running()?;
            let started = Instant::now();
            let correlation_id = inner.ids.next(now_ms());
            request::mark_request(&mut message, &correlation_id, &inner.client_id, timeout);
            let prepared = inner.rules().prepare(message)?;
            let (sender, receiver) = tokio::sync::oneshot::channel();
            inner.replies.register_with(
                &correlation_id,
                Box::new(move |reply| {
                    // The receiver is gone only when the request gave up.
                    let _ = sender.send(reply);
                }),
            )?;
            // Removes the waiter however this future ends: answered, failed or dropped.
            let _waiting = ReplyWaiter {
                replies: &inner.replies,
                correlation_id: &correlation_id,
            };
            inner.register(Some(prepared.topic.as_str())).await;
            inner.send_with_retries(&prepared, Mode::Sync).await?;
            let remaining = timeout.saturating_sub(started.elapsed());
            match tokio::time::timeout(remaining, receiver).await {
                Ok(Ok(reply)) => Ok(reply),
                _ => Err(ClientError::NoReply {
                    correlation_id: correlation_id.clone(),
                    after: timeout,
                }),
            }
        }
    }

    /// Registers the producer group with the brokers, as Java's producer `start` does (plain
    /// sends need no registration: request-reply and transactions register by themselves).
    /// Every master broker the routes know gets a heartbeat now; from then on all of them
    /// get one every `heartbeat_broker_interval`, and right after a send that opened a new
    /// connection, so a broker lists this client among the group's producers
    /// (`producerConnection`) from its first send on. A failed heartbeat is logged.
    pub async fn register(&self) -> Result<()> {
        self.inner.check_running()?;
        self.inner.register_up_front().await;
        Ok(())
    }

    /// Tells every broker the routes know that this client left the group
    /// (UNREGISTER_CLIENT, as Java's producer `shutdown`), when it was registered; a
    /// failure is logged. Call it before [`AsyncProducer::shutdown`].
    pub async fn unregister(&self) {
        self.inner.unregister().await;
    }

    /// Requests waiting for their replies now.
    pub fn requests_waiting(&self) -> usize {
        self.inner.replies.waiting()
    }

    /// The client id brokers know this producer by.
    pub fn client_id(&self) -> &str {
        &self.inner.client_id
    }

    /// The publish queues of `topic` (fetching its route if needed).
    pub async fn fetch_publish_queues(&self, topic: &str) -> Result<Vec<MessageQueue>> {
        self.inner.check_running()?;
        let client = &self.inner.config.client;
        let route = self.inner.publish_route(&client.wrap_name(topic)).await?;
        Ok(crate::message::unwrap_queues(client, &route.publish))
    }

    /// Closes every connection, failing the sends in flight; later sends fail with
    /// `State("shut down")`. Idempotent.
    pub fn shutdown(&self) {
        self.inner.stopped.store(true, Ordering::SeqCst);
        self.inner.registration.stop();
        self.inner.transport.shutdown();
        if let Some(tracer) = &self.inner.tracer {
            // Not joined: this may run on a runtime thread; the dispatcher sends what is
            // queued and stops by itself.
            tracer.close();
        }
    }

    /// The trace dispatcher, when `enable_msg_trace` is set.
    pub fn tracer(&self) -> Option<&Arc<TraceDispatcher>> {
        self.inner.tracer.as_ref()
    }

    /// The shared state, for the transactional producer built on this one.
    pub(in crate::aio) fn shared(&self) -> &Arc<Inner> {
        &self.inner
    }
}

/// What answers the broker's CHECK_TRANSACTION_STATE for a producer: the async
/// transactional producer's check service. Runs on a connection's reader task, so it only
/// starts the work.
pub(in crate::aio) trait CheckBacks: Send + Sync {
    /// The group's answer to the check-back `request` from `addr` about `half`.
    fn check(&self, addr: &str, request: &RemotingCommand, half: MessageExt) -> HookAnswer;
}

/// Removes a request's reply waiter when the request's future ends or is dropped.
struct ReplyWaiter<'a> {
    replies: &'a Replies,
    correlation_id: &'a str,
}

impl Drop for ReplyWaiter<'_> {
    fn drop(&mut self) {
        self.replies.forget(self.correlation_id);
    }
}

impl Inner {
    /// The producer's settings.
    pub(in crate::aio) fn config(&self) -> &ProducerConfig {
        &self.config
    }

    /// The transport.
    pub(in crate::aio) fn transport(&self) -> &AsyncTransport {
        &self.transport
    }

    /// The routes.
    pub(in crate::aio) fn routes(&self) -> &AsyncRoutes {
        &self.routes
    }

    /// Makes this producer answer check-backs with `checks`; false if it already does.
    pub(in crate::aio) fn set_checks(&self, checks: Arc<dyn CheckBacks>) -> bool {
        self.checks.set(checks).is_ok()
    }

    /// Answers what a broker asks (docs/protocol.md#broker-to-client-requests): a reply to
    /// one of this client's requests goes to its waiter, a check-back of this group's half
    /// to the check service; the rest is not supported. Nothing here waits.
    fn handle_request(&self, addr: &str, request: &RemotingCommand) -> HookAnswer {
        match request.request_code() {
            RequestCode::PUSH_REPLY_MESSAGE_TO_CLIENT => {
                HookAnswer::Now(self.replies.receive_push(addr, request))
            }
            RequestCode::CHECK_TRANSACTION_STATE => {
                let Some((group, half)) = crate::producer::transaction::checked_half(addr, request)
                else {
                    return HookAnswer::NotSupported;
                };
                match self.checks.get() {
                    Some(checks) if group == self.config.group => checks.check(addr, request, half),
                    _ => {
                        log::debug!("check-back from {addr}: no transactional producer of {group}");
                        HookAnswer::NotSupported
                    }
                }
            }
            _ => HookAnswer::NotSupported,
        }
    }

    pub(in crate::aio) fn rules(&self) -> SendRules<'_> {
        SendRules {
            config: &self.config,
            faults: &self.faults,
            counter: &self.counter,
            ids: &self.ids,
        }
    }

    pub(in crate::aio) fn check_running(&self) -> Result<()> {
        if self.stopped.load(Ordering::SeqCst) {
            return Err(ClientError::State("shut down"));
        }
        Ok(())
    }

    /// The sync send loop (the module docs).
    pub(in crate::aio) async fn send_retrying(&self, prepared: &Prepared) -> Result<SendResult> {
        self.send_with_retries(prepared, Mode::Sync)
            .await
            .map(|result| result.expect("sync sends return a result"))
    }

    /// The send loop of every send that may go to any queue (the module docs): `Ok(None)`
    /// for a one-way send, which makes one attempt.
    async fn send_with_retries(
        &self,
        prepared: &Prepared,
        mode: Mode,
    ) -> Result<Option<SendResult>> {
        let started = Instant::now();
        let attempts = match mode {
            Mode::Sync => 1 + self.config.retry_times_when_send_failed,
            Mode::Async => 1 + self.config.retry_times_when_send_async_failed,
            Mode::Oneway => 1,
        };
        let mut avoid: Option<String> = None;
        let mut last_error = None;
        for attempt in 0..attempts {
            let remaining = self.config.send_timeout.saturating_sub(started.elapsed());
            if remaining.is_zero() {
                break;
            }
            let route = self.publish_route(&prepared.topic).await?;
            let queue = self
                .rules()
                .select_in(&prepared.topic, &route, avoid.as_deref())?;
            let attempt_started = Instant::now();
            let outcome = self.send_once(prepared, &queue, mode, remaining).await;
            let latency_ms =
                u64::try_from(attempt_started.elapsed().as_millis()).unwrap_or(u64::MAX);
            let isolation = outcome
                .as_ref()
                .err()
                .is_some_and(ClientError::is_transport);
            self.rules()
                .record_latency(&queue.broker_name, latency_ms, isolation);
            match self.rules().after_attempt(
                mode,
                attempt,
                attempts,
                outcome.as_ref().map(Option::as_ref),
            ) {
                AfterAttempt::Finish => return outcome,
                AfterAttempt::Retry { refresh_route } => {
                    if let Err(error) = outcome {
                        log::debug!(
                            "async send to {queue:?} failed (attempt {}): {error}",
                            attempt + 1
                        );
                        last_error = Some(error);
                    }
                    if refresh_route {
                        self.routes
                            .refresh_after_failure(&prepared.topic, attempt_started)
                            .await;
                    }
                    avoid = Some(queue.broker_name.clone());
                }
            }
        }
        Err(last_error.unwrap_or_else(|| self.rules().budget_spent()))
    }

    /// One sync attempt to `queue` within the send timeout.
    async fn send_to(&self, prepared: &Prepared, queue: &MessageQueue) -> Result<SendResult> {
        self.send_once(prepared, queue, Mode::Sync, self.config.send_timeout)
            .await
            .map(|result| result.expect("sync sends return a result"))
    }

    /// One attempt to one queue. `Ok(None)` for one-way sends.
    async fn send_once(
        &self,
        prepared: &Prepared,
        queue: &MessageQueue,
        mode: Mode,
        timeout: Duration,
    ) -> Result<Option<SendResult>> {
        let addr = self
            .routes
            .master_addr(&queue.broker_name, &queue.topic)
            .await?;
        let request = self.rules().build_request(prepared, queue);
        if mode == Mode::Oneway {
            let sent = self.transport.invoke_oneway(&addr, request, timeout).await;
            self.registration.after_send(self.transport.connects());
            sent?;
            return Ok(None);
        }
        let (started_ms, started) = (now_ms(), Instant::now());
        let response = self.transport.invoke(&addr, request, timeout).await;
        self.registration.after_send(self.transport.connects());
        let response = response?;
        let result = process_response(&addr, prepared, queue, response)?;
        if let Some(tracer) = &self.tracer {
            let cost = started.elapsed();
            if let Some(record) = self
                .rules()
                .pub_trace(prepared, &addr, started_ms, cost, &result)
            {
                tracer.append(record);
            }
        }
        Ok(Some(result))
    }

    fn usable_route(&self, topic: &str) -> Option<Arc<TopicRoute>> {
        self.routes
            .cache()
            .get(topic)
            .filter(|route| !route.publish.is_empty())
    }

    /// The route to publish `topic` through: its own, or the auto-create template's with
    /// `min(default_topic_queue_nums, readQueueNums)` queues per broker.
    pub(in crate::aio) async fn publish_route(&self, topic: &str) -> Result<Arc<TopicRoute>> {
        let routes = &self.routes;
        if let Some(route) = self.usable_route(topic).filter(|_| routes.is_fresh(topic)) {
            return Ok(route);
        }
        let fetching = routes.fetch_lock(topic);
        let _fetching = fetching.lock().await;
        let cached = self.usable_route(topic);
        if let Some(route) = cached.clone().filter(|_| routes.is_fresh(topic)) {
            return Ok(route);
        }
        match routes.update(topic).await {
            Ok(Some(route)) if !route.publish.is_empty() => return Ok(route),
            Ok(_) => {}
            Err(error) => match cached {
                Some(route) => {
                    log::warn!("route refresh of {topic} failed, keeping the cached one: {error}");
                    // The next try waits an interval, so sends queued on this topic's lock
                    // behind a dead name server do not each wait out a timeout.
                    routes.mark_fetched(topic);
                    return Ok(route);
                }
                None => return Err(error),
            },
        }
        // Still unknown to the name servers (not auto-created yet): keep the derived route.
        if let Some(route) = cached {
            return Ok(route);
        }
        let template_key = &self.config.create_topic_key;
        let Some(template) = routes.update(template_key).await? else {
            return Err(ClientError::NoRoute {
                topic: topic.to_owned(),
                reason: format!(
                    "unknown to the name servers, and so is the template {template_key}"
                ),
            });
        };
        let data = self.rules().template_route(&template.data);
        routes.cache().put(topic, data);
        self.usable_route(topic).ok_or_else(|| no_queue(topic))
    }
}
