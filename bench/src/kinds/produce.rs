//! `produce`: sync sender threads or an async window, closed or open loop.
//!
//! * Sync senders (`--threads N`): each thread claims messages from the finish condition,
//!   waits for its slot when a rate is set, sends (one message or a batch) and records the
//!   latency.
//! * Async window (`--inflight N`): one driver thread keeps up to N sends in flight; the
//!   client's callback thread records each outcome and frees its place in the window.
//! * Async client (`--async-client`): one task on a current-thread tokio runtime keeps up
//!   to `--inflight` (else `--threads`) sends of an `AsyncProducer` in flight and records
//!   each outcome as it completes; the client adds no thread of its own.
//! * Transactions (`--transactional`): sync sender threads with a `TransactionProducer`;
//!   each message is a half message whose local transaction commits at once, so its latency
//!   is the half's round trip plus writing the one-way END_TRANSACTION (as Java's
//!   `TransactionMQProducer`, the client never waits for the decision's effect). The
//!   check-back listener answers COMMIT and counts the halves the broker asked about
//!   (`tx_check_backs_total`): a decision lost on the way shows there once the broker's
//!   check interval has passed.
//! * Latency is measured from the intended time in open loop (`--rate`), from the moment
//!   the request is issued otherwise. A send answered with a non-OK status (such as
//!   FLUSH_DISK_TIMEOUT) counts as an error: the message was not durable in time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use comet_client::{
    AsyncProducer, ClientConfig, ClientError, LocalTransactionState, Message, Producer,
    ProducerConfig, SendResult, SendStatus, TransactionProducer, TransactionProducerConfig,
    TransactionSendResult,
};
use futures::stream::{FuturesUnordered, StreamExt};

use crate::args::{Cli, ProduceArgs, SendArgs};
use crate::error::{BenchError, Result};
use crate::finish_condition::FinishCondition;
use crate::limits::DRAIN_GRACE;
use crate::payload::{self, Stamp, WallClock};
use crate::rate_limiter::{sleep_until, RateLimiter};
use crate::report::Outcome;
use crate::stats::{Collector, Stats};
use crate::summary::{LatencySummary, PhaseSummary};
use crate::topic;

/// Runs `produce`.
pub fn run(cli: &Cli, args: &ProduceArgs) -> Result<Outcome> {
    args.validate()?;
    let duration = args.finish.duration()?;
    let topics = args.send.topic_names();
    if let Some(queues) = args.send.queues {
        topic::ensure_topics(&cli.client_config()?, &topics, queues)?;
    }
    if args.transactional {
        return run_transactional(cli, args, duration, &topics);
    }
    if args.send.async_client {
        return run_async_client(cli, args, duration, &topics);
    }
    let producer = start_producer(&cli.client_config()?, &args.send)?;
    let run_id = payload::new_run_id();
    for topic in &topics {
        warm_up(&producer, &args.send, topic, run_id)?;
    }
    let started = Instant::now();
    let stats = Stats::new()?;
    let context = SendContext::new(&producer, &args.send, run_id, started, stats.clone())?;
    let finish = FinishCondition::new(started, duration, args.finish.messages);
    let mut phases = [("send", Collector::new(stats, started)?)];
    with_progress_send(&mut phases, cli.quiet, &context, &finish)?;
    let ended = Instant::now();
    producer.shutdown();
    let [(_, collector)] = phases;
    let main = send_summary(collector, started, ended)?;
    Ok(Outcome {
        main,
        others: Vec::new(),
        extra: serde_json::Map::new(),
    })
}

fn with_progress_send(
    phases: &mut [(&str, Collector)],
    quiet: bool,
    context: &SendContext<'_>,
    finish: &FinishCondition,
) -> Result<()> {
    super::with_progress(phases, quiet, || send_all(context, finish))?
}

/// The summary of a sending phase that ran from `started` to `ended`.
pub fn send_summary(
    collector: Collector,
    started: Instant,
    ended: Instant,
) -> Result<PhaseSummary> {
    let (counters, histogram, first_error) = collector.finish(ended)?;
    Ok(PhaseSummary {
        name: "send",
        elapsed: ended - started,
        counters,
        latency: LatencySummary::of(&histogram),
        latency_meaning: "send (request to acknowledgement)",
        first_error,
    })
}

/// `produce --async-client`: [`run`] with an [`AsyncProducer`] driven from one task.
fn run_async_client(
    cli: &Cli,
    args: &ProduceArgs,
    duration: Option<Duration>,
    topics: &[String],
) -> Result<Outcome> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| BenchError::Thread(error.to_string()))?;
    let producer = AsyncProducer::new(producer_config(&cli.client_config()?, &args.send))?;
    let run_id = payload::new_run_id();
    for topic in topics {
        runtime.block_on(warm_up_async(&producer, &args.send, topic, run_id))?;
    }
    let started = Instant::now();
    let stats = Stats::new()?;
    let context = SendContext::new(&producer, &args.send, run_id, started, stats.clone())?;
    let finish = FinishCondition::new(started, duration, args.finish.messages);
    let mut phases = [("send", Collector::new(stats, started)?)];
    let window = args.send.async_client_window();
    super::with_progress(&mut phases, cli.quiet, || {
        runtime.block_on(async_client_driver(&context, &finish, window))
    })?;
    let ended = Instant::now();
    producer.shutdown();
    let [(_, collector)] = phases;
    let main = send_summary(collector, started, ended)?;
    Ok(Outcome {
        main,
        others: Vec::new(),
        extra: serde_json::Map::new(),
    })
}

/// `produce --transactional`: [`run`] with a [`TransactionProducer`] on sync sender threads,
/// each message a transaction committed as soon as its half is stored.
fn run_transactional(
    cli: &Cli,
    args: &ProduceArgs,
    duration: Option<Duration>,
    topics: &[String],
) -> Result<Outcome> {
    let mut config =
        TransactionProducerConfig::new(producer_config(&cli.client_config()?, &args.send));
    // Listed so that start heartbeats the brokers at once: a check-back can reach this
    // producer from its first half on.
    config.topics = topics.to_vec();
    let checks_answered = Arc::new(AtomicU64::new(0));
    let counter = checks_answered.clone();
    let producer = TransactionProducer::new(config, move |_half| {
        // Every local transaction of the run committed, so a half the broker asks about
        // (its END_TRANSACTION lost or late) is committed too.
        counter.fetch_add(1, Ordering::Relaxed);
        LocalTransactionState::CommitMessage
    })?;
    producer.start()?;
    let run_id = payload::new_run_id();
    for topic in topics {
        warm_up_transactional(&producer, &args.send, topic, run_id)?;
    }
    // Check-backs of the warm-up's halves are not the run's.
    let checks_before = checks_answered.load(Ordering::Relaxed);
    let started = Instant::now();
    let stats = Stats::new()?;
    let context = SendContext::new(&producer, &args.send, run_id, started, stats.clone())?;
    let finish = FinishCondition::new(started, duration, args.finish.messages);
    let mut phases = [("send", Collector::new(stats, started)?)];
    super::with_progress(&mut phases, cli.quiet, || {
        transactional_send_all(&context, &finish)
    })??;
    let ended = Instant::now();
    let checks = checks_answered.load(Ordering::Relaxed) - checks_before;
    producer.shutdown();
    let [(_, collector)] = phases;
    let mut main = send_summary(collector, started, ended)?;
    main.latency_meaning = "transaction (half sent to acknowledgement, then COMMIT written; \
        END_TRANSACTION is one-way)";
    let mut extra = serde_json::Map::new();
    extra.insert("tx_check_backs_total".into(), checks.into());
    Ok(Outcome {
        main,
        others: Vec::new(),
        extra,
    })
}

/// One unmeasured transaction to `topic` ([`warm_up`] for transactional runs), so that
/// route lookup and topic auto-creation are not in the figures.
fn warm_up_transactional(
    producer: &TransactionProducer,
    args: &SendArgs,
    topic: &str,
    run_id: u64,
) -> Result<()> {
    let stamp = Stamp {
        run_id: run_id ^ 1,
        intended_unix_ns: payload::unix_ns_now(),
    };
    let message = Message::new(topic, payload::body(args.size_bytes, stamp));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match producer.send_in_transaction(message.clone(), commit) {
            Ok(_) => return Ok(()),
            Err(error) if Instant::now() >= deadline => return Err(BenchError::Client(error)),
            Err(error) => {
                log::warn!("warm-up transaction failed, retrying: {error}");
                std::thread::sleep(Duration::from_millis(500));
            }
        }
    }
}

/// The local transaction of every benchmark message: it commits at once.
fn commit(_message: &Message, _half: &SendResult) -> LocalTransactionState {
    LocalTransactionState::CommitMessage
}

/// A transaction counts when its half was stored (SEND_OK) and COMMIT was its decision.
fn check_transaction(sent: &TransactionSendResult) -> std::result::Result<(), SendFailure> {
    check_statuses(std::slice::from_ref(&sent.send_result))?;
    match sent.local_transaction_state {
        LocalTransactionState::CommitMessage => Ok(()),
        other => Err(SendFailure::NotCommitted(other)),
    }
}

/// [`send_all`] for transactions: `--threads` sync senders, one transaction at a time each.
fn transactional_send_all(
    context: &SendContext<'_, TransactionProducer>,
    finish: &FinishCondition,
) -> Result<()> {
    std::thread::scope(|scope| {
        for thread in 0..context.args.threads {
            std::thread::Builder::new()
                .name(format!("bench-tx-{thread}"))
                .spawn_scoped(scope, move || transactional_sender(context, finish, thread))
                .map_err(|error| BenchError::Thread(error.to_string()))?;
        }
        Ok(())
    })
}

fn transactional_sender(
    context: &SendContext<'_, TransactionProducer>,
    finish: &FinishCondition,
    thread: usize,
) {
    let bytes = context.args.size_bytes as u64;
    let mut sequence = 0u64;
    while finish.claim(1).is_some() {
        let start = context.next_start();
        let message = context.message(start, thread, sequence);
        sequence += 1;
        let outcome = context
            .producer
            .send_in_transaction(message, commit)
            .map_err(SendFailure::from)
            .and_then(|sent| check_transaction(&sent));
        match outcome {
            Ok(()) => context.stats.record_ok(start.elapsed(), 1, bytes),
            Err(error) => context.stats.record_error(&error),
        }
    }
}

/// The producer settings of the flags.
fn producer_config(client: &ClientConfig, args: &SendArgs) -> ProducerConfig {
    let mut config = ProducerConfig::new(&args.producer_group, client.clone());
    config.send_timeout = Duration::from_millis(args.send_timeout_ms);
    // The client compresses bodies at or above this size; without --compress never.
    config.compress_over_bytes = if args.compress { 0 } else { usize::MAX };
    if let Some(queues) = args.queues {
        config.default_topic_queue_nums = queues;
    }
    config
}

/// A started producer configured from the flags.
pub fn start_producer(client: &ClientConfig, args: &SendArgs) -> Result<Producer> {
    let producer = Producer::new(producer_config(client, args))?;
    producer.start()?;
    Ok(producer)
}

/// One unmeasured send to `topic`, so that route lookup and topic auto-creation are not in
/// the figures.
pub fn warm_up(producer: &Producer, args: &SendArgs, topic: &str, run_id: u64) -> Result<()> {
    let stamp = Stamp {
        run_id: run_id ^ 1,
        intended_unix_ns: payload::unix_ns_now(),
    };
    let message = Message::new(topic, payload::body(args.size_bytes, stamp));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match producer.send(message.clone()) {
            Ok(_) => return Ok(()),
            Err(error) if Instant::now() >= deadline => return Err(BenchError::Client(error)),
            Err(error) => {
                log::warn!("warm-up send failed, retrying: {error}");
                std::thread::sleep(Duration::from_millis(500));
            }
        }
    }
}

/// [`warm_up`] with the async client.
async fn warm_up_async(
    producer: &AsyncProducer,
    args: &SendArgs,
    topic: &str,
    run_id: u64,
) -> Result<()> {
    let stamp = Stamp {
        run_id: run_id ^ 1,
        intended_unix_ns: payload::unix_ns_now(),
    };
    let message = Message::new(topic, payload::body(args.size_bytes, stamp));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match producer.send(message.clone()).await {
            Ok(_) => return Ok(()),
            Err(error) if Instant::now() >= deadline => return Err(BenchError::Client(error)),
            Err(error) => {
                log::warn!("warm-up send failed, retrying: {error}");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

/// What every sender of a run shares; `P` is the producer they send with.
pub struct SendContext<'a, P = Producer> {
    producer: &'a P,
    args: &'a SendArgs,
    run_id: u64,
    wall: WallClock,
    limiter: Option<RateLimiter>,
    stats: Arc<Stats>,
    /// Where messages go (see [`SendArgs::topic_names`]).
    topics: Vec<String>,
}

impl<'a, P> SendContext<'a, P> {
    /// A context whose schedule (when `--rate` is set) starts at `started`.
    pub fn new(
        producer: &'a P,
        args: &'a SendArgs,
        run_id: u64,
        started: Instant,
        stats: Arc<Stats>,
    ) -> Result<SendContext<'a, P>> {
        let limiter = match args.rate_msgs_per_s {
            // One slot per request: a batch of 32 takes one slot of rate/32.
            Some(rate) => Some(RateLimiter::new(started, rate / args.batch as f64)?),
            None => None,
        };
        Ok(SendContext {
            producer,
            args,
            run_id,
            wall: WallClock::new(),
            limiter,
            stats,
            topics: args.topic_names(),
        })
    }

    /// Waits for the next slot (open loop) and returns the time latency is measured from.
    fn next_start(&self) -> Instant {
        match &self.limiter {
            Some(limiter) => {
                let intended = limiter.claim();
                sleep_until(intended);
                intended
            }
            None => Instant::now(),
        }
    }

    fn message(&self, intended: Instant, thread: usize, sequence: u64) -> Message {
        let stamp = Stamp {
            run_id: self.run_id,
            intended_unix_ns: self.wall.unix_ns(intended),
        };
        let body = payload::body(self.args.size_bytes, stamp);
        let topic = &self.topics[self.args.topic_index(thread, sequence)];
        let mut message = Message::new(topic.as_str(), body);
        if let Some(tags) = &self.args.tags {
            message = message.with_tags(tags.as_str());
        }
        if self.args.keys {
            message = message.with_keys([format!("{:x}-{thread}-{sequence}", self.run_id)]);
        }
        message
    }
}

/// Sends until `finish` says stop, with the configured senders.
pub fn send_all(context: &SendContext<'_>, finish: &FinishCondition) -> Result<()> {
    match context.args.inflight {
        Some(window) => async_driver(context, finish, window),
        None => std::thread::scope(|scope| {
            for thread in 0..context.args.threads {
                std::thread::Builder::new()
                    .name(format!("bench-send-{thread}"))
                    .spawn_scoped(scope, move || sync_sender(context, finish, thread))
                    .map_err(|error| BenchError::Thread(error.to_string()))?;
            }
            Ok(())
        }),
    }
}

/// Why one send counts as an error.
#[derive(Debug, thiserror::Error)]
enum SendFailure {
    /// The client call failed.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The broker answered, but not SEND_OK.
    #[error("broker answered {}", .0.name())]
    NotOk(SendStatus),
    /// A transaction ended with another decision than COMMIT.
    #[error("transaction ended {}, not COMMIT_MESSAGE", .0.name())]
    NotCommitted(LocalTransactionState),
}

fn check_statuses(results: &[SendResult]) -> std::result::Result<(), SendFailure> {
    match results
        .iter()
        .find(|result| result.status != SendStatus::SendOk)
    {
        Some(result) => Err(SendFailure::NotOk(result.status)),
        None => Ok(()),
    }
}

fn sync_sender(context: &SendContext<'_>, finish: &FinishCondition, thread: usize) {
    let batch = context.args.batch as u64;
    let mut sequence = 0u64;
    while let Some(count) = finish.claim(batch) {
        let start = context.next_start();
        let messages: Vec<Message> = (0..count)
            .map(|index| context.message(start, thread, sequence + index))
            .collect();
        sequence += count;
        let outcome = if batch == 1 {
            let message = messages
                .into_iter()
                .next()
                .expect("a claim grants one message");
            context.producer.send(message).map(|result| vec![result])
        } else {
            context.producer.send_batch(messages)
        };
        let bytes = count * context.args.size_bytes as u64;
        match outcome
            .map_err(SendFailure::from)
            .and_then(|r| check_statuses(&r))
        {
            Ok(()) => context.stats.record_ok(start.elapsed(), count, bytes),
            Err(error) => context.stats.record_error(&error),
        }
    }
}

/// Places in an async window: acquire before a send, release in its callback.
struct Window {
    free: Mutex<usize>,
    changed: Condvar,
    size: usize,
}

impl Window {
    fn acquire(&self) {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        while *free == 0 {
            free = self.changed.wait(free).unwrap_or_else(|p| p.into_inner());
        }
        *free -= 1;
    }

    fn release(&self) {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        assert!(
            *free < self.size,
            "released more places than the window has"
        );
        *free += 1;
        self.changed.notify_all();
    }

    /// Waits until every place is free again, at most `limit`; false on time-out.
    fn wait_empty(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        while *free < self.size {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            free = self
                .changed
                .wait_timeout(free, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        true
    }
}

fn async_driver(context: &SendContext<'_>, finish: &FinishCondition, size: usize) -> Result<()> {
    let window = Arc::new(Window {
        free: Mutex::new(size),
        changed: Condvar::new(),
        size,
    });
    let bytes = context.args.size_bytes as u64;
    let mut sequence = 0u64;
    while finish.claim(1).is_some() {
        let intended = context.next_start();
        window.acquire();
        let start = if context.limiter.is_some() {
            intended
        } else {
            Instant::now()
        };
        let message = context.message(intended, 0, sequence);
        sequence += 1;
        let (stats, place) = (context.stats.clone(), window.clone());
        let sent = context.producer.send_async(message, move |outcome| {
            let checked = outcome
                .map_err(SendFailure::from)
                .and_then(|result| check_statuses(std::slice::from_ref(&result)));
            match checked {
                Ok(()) => stats.record_ok(start.elapsed(), 1, bytes),
                Err(error) => stats.record_error(&error),
            }
            place.release();
        });
        if let Err(error) = sent {
            context.stats.record_error(&error);
            window.release();
        }
    }
    let limit = Duration::from_millis(context.args.send_timeout_ms) + DRAIN_GRACE;
    if !window.wait_empty(limit) {
        log::warn!("async sends still unanswered {limit:?} after the run ended");
    }
    Ok(())
}

/// Records the outcome of one async-client send issued at `start`.
fn record_send(
    stats: &Stats,
    start: Instant,
    bytes: u64,
    outcome: comet_client::Result<SendResult>,
) {
    let checked = outcome
        .map_err(SendFailure::from)
        .and_then(|result| check_statuses(std::slice::from_ref(&result)));
    match checked {
        Ok(()) => stats.record_ok(start.elapsed(), 1, bytes),
        Err(error) => stats.record_error(&error),
    }
}

/// Keeps up to `window` async-client sends in flight until `finish` says stop, then waits
/// for the last ones. Sends record themselves as they complete, so their latency ends when
/// the answer is handled, not when the driver next looks.
async fn async_client_driver(
    context: &SendContext<'_, AsyncProducer>,
    finish: &FinishCondition,
    window: usize,
) {
    let bytes = context.args.size_bytes as u64;
    let mut in_flight = FuturesUnordered::new();
    let mut sequence = 0u64;
    while finish.claim(1).is_some() {
        let intended = match &context.limiter {
            Some(limiter) => {
                let intended = limiter.claim();
                // Sends keep completing while the driver waits for the next slot.
                let slot = tokio::time::sleep_until(intended.into());
                let mut slot = std::pin::pin!(slot);
                loop {
                    tokio::select! {
                        biased;
                        () = &mut slot => break,
                        Some(()) = in_flight.next(), if !in_flight.is_empty() => {}
                    }
                }
                intended
            }
            None => Instant::now(),
        };
        while in_flight.len() >= window {
            in_flight.next().await;
        }
        let start = if context.limiter.is_some() {
            intended
        } else {
            Instant::now()
        };
        let message = context.message(intended, 0, sequence);
        sequence += 1;
        let send = context.producer.send(message);
        let stats = context.stats.clone();
        in_flight.push(async move { record_send(&stats, start, bytes, send.await) });
    }
    let limit = Duration::from_millis(context.args.send_timeout_ms) + DRAIN_GRACE;
    let drain = async { while in_flight.next().await.is_some() {} };
    if tokio::time::timeout(limit, drain).await.is_err() {
        log::warn!("async sends still unanswered {limit:?} after the run ended");
    }
}
