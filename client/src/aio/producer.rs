//! The async producer: the blocking [`Producer`](crate::Producer)'s send rules over the async
//! transport.
//!
//! Message preparation (ids, compression, batches), queue choice, latency fault tolerance,
//! request building, answer handling and the retry decisions are the blocking producer's own
//! functions (`producer::SendRules`); only the waiting differs. Sends retry on another broker
//! (`retry_times_when_send_failed`) within one overall `send_timeout`, as sync sends do.
//!
//! Routes come from the name servers through the async transport (`AsyncRoutes`, shared
//! with the async consumers), with the same fail-over walk as the blocking client. No thread
//! refreshes them: a route older
//! than `poll_name_server_interval` is fetched again by the next send that needs it (one
//! fetch per topic at a time; the others wait for it), and a failed refresh keeps the cached
//! route. A transport failure refreshes the route before the retry, once for all the sends
//! that failed together.
//!
//! The producer sends no heartbeats: brokers accept sends from unregistered producers, and
//! nothing it sends needs a check-back (transactional sends are not here yet).

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use comet_proto::message_id::UniqueKeyGenerator;

use super::routes::AsyncRoutes;
use super::transport::{AsyncTransport, AsyncTransportConfig};
use crate::config::now_ms;
use crate::error::{ClientError, Result};
use crate::message::{Message, MessageQueue, SendResult};
use crate::producer::fault::LatencyFaultTolerance;
use crate::producer::{
    id_generator, no_queue, process_response, AfterAttempt, Prepared, ProducerConfig, SendRules,
};
use crate::route::{self, TopicRoute};
use crate::trace::TraceDispatcher;
use crate::validate;

/// An async producer (Java `DefaultMQProducer`'s sends, awaited).
///
/// Runs on the caller's tokio runtime and starts no thread of its own: each broker or name
/// server it talks to costs two tasks (one reading, one writing), whatever the number of
/// queues or sends in flight. Cheap to clone; clones share one producer. Needs no `start`.
#[derive(Clone)]
pub struct AsyncProducer {
    inner: Arc<Inner>,
}

struct Inner {
    config: ProducerConfig,
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
        let ids = id_generator(&config.client.build_client_id());
        let tracer = if config.enable_msg_trace {
            Some(TraceDispatcher::start(
                &config.client,
                &config.client.unwrap_name(&config.group),
                &config.trace_topic,
            )?)
        } else {
            None
        };
        Ok(AsyncProducer {
            inner: Arc::new(Inner {
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
            }),
        })
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
        async move { inner.send_with_retries(&prepared?).await }
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
                results.push(inner.send_with_retries(&batch).await?);
            }
            Ok(results)
        }
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
}

impl Inner {
    fn rules(&self) -> SendRules<'_> {
        SendRules {
            config: &self.config,
            faults: &self.faults,
            counter: &self.counter,
            ids: &self.ids,
        }
    }

    fn check_running(&self) -> Result<()> {
        if self.stopped.load(Ordering::SeqCst) {
            return Err(ClientError::State("shut down"));
        }
        Ok(())
    }

    /// The sync send loop of the blocking producer, awaited.
    async fn send_with_retries(&self, prepared: &Prepared) -> Result<SendResult> {
        let started = Instant::now();
        let attempts = 1 + self.config.retry_times_when_send_failed;
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
            let outcome = self.send_once(prepared, &queue, remaining).await;
            let latency_ms =
                u64::try_from(attempt_started.elapsed().as_millis()).unwrap_or(u64::MAX);
            let isolation = outcome
                .as_ref()
                .err()
                .is_some_and(ClientError::is_transport);
            self.rules()
                .record_latency(&queue.broker_name, latency_ms, isolation);
            match self
                .rules()
                .after_attempt(attempt, attempts, outcome.as_ref().map(Some))
            {
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

    async fn send_once(
        &self,
        prepared: &Prepared,
        queue: &MessageQueue,
        timeout: Duration,
    ) -> Result<SendResult> {
        let addr = self
            .routes
            .master_addr(&queue.broker_name, &queue.topic)
            .await?;
        let request = self.rules().build_request(prepared, queue);
        let (started_ms, started) = (now_ms(), Instant::now());
        let response = self.transport.invoke(&addr, request, timeout).await?;
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
        Ok(result)
    }

    fn usable_route(&self, topic: &str) -> Option<Arc<TopicRoute>> {
        self.routes
            .cache()
            .get(topic)
            .filter(|route| !route.publish.is_empty())
    }

    /// The route to publish `topic` through, as the blocking producer's `publish_route`:
    /// its own, or the auto-create template's with `min(default_topic_queue_nums,
    /// readQueueNums)` queues per broker.
    async fn publish_route(&self, topic: &str) -> Result<Arc<TopicRoute>> {
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
