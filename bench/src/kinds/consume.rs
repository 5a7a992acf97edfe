//! `consume`: a push or lite-pull consumer; rate and end-to-end latency.
//!
//! End-to-end latency of a message is "received now" minus the stamp in its body (the
//! intended send time, µs precision) or, for bodies without a stamp, minus the broker's
//! `bornTimestamp` (ms precision). The receive rate is computed from the first to the last
//! received message, so time spent waiting for a rebalance or an idle tail is not counted.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use comet_client::{
    AsyncMessageListener, AsyncPushConsumer, AsyncPushConsumerConfig, ClientConfig,
    ConsumeConcurrentlyStatus, ConsumeFromWhere, ConsumerConfig, LitePullConfig, LitePullConsumer,
    MessageExt, MessageListener, PushConsumer, PushConsumerConfig,
};

use crate::args::{check_threads, Cli, ConsumeArgs, ConsumeMode, ReceiveArgs, StartFrom};
use crate::error::{BenchError, Result};
use crate::finish_condition::FinishCondition;
use crate::payload;
use crate::report::Outcome;
use crate::stats::{Collector, Stats};
use crate::summary::{LatencySummary, PhaseSummary};

/// Counts and times what consumers hand over.
pub struct Receiver {
    stats: Arc<Stats>,
    only_run: Option<u64>,
    foreign: AtomicU64,
    window: Mutex<Option<(Instant, Instant)>>,
}

impl Receiver {
    /// A receiver recording into `stats`; with `only_run`, messages stamped by another run
    /// are counted apart and not measured.
    pub fn new(stats: Arc<Stats>, only_run: Option<u64>) -> Arc<Receiver> {
        Arc::new(Receiver {
            stats,
            only_run,
            foreign: AtomicU64::new(0),
            window: Mutex::new(None),
        })
    }

    /// Records a delivery.
    pub fn on_messages<'m>(&self, messages: impl IntoIterator<Item = &'m MessageExt>) {
        let now_ns = payload::unix_ns_now();
        let (mut counted, mut bytes) = (0u64, 0u64);
        for message in messages {
            let stamp = payload::read_stamp(&message.body);
            let sent_ns = match (stamp, self.only_run) {
                (Some(stamp), Some(run)) if stamp.run_id != run => {
                    self.foreign.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                (None, Some(_)) => {
                    self.foreign.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                (Some(stamp), _) => stamp.intended_unix_ns,
                (None, None) => u64::try_from(message.born_timestamp)
                    .unwrap_or(0)
                    .saturating_mul(1_000_000),
            };
            self.stats
                .record_latency(payload::latency_us(sent_ns, now_ns));
            counted += 1;
            bytes += message.body.len() as u64;
        }
        if counted > 0 {
            self.stats.count_received(counted, bytes);
            let now = Instant::now();
            let mut window = self.window.lock().unwrap_or_else(|p| p.into_inner());
            let first = window.map_or(now, |(first, _)| first);
            *window = Some((first, now));
        }
    }

    /// Messages of other runs seen (only with `only_run`).
    pub fn foreign(&self) -> u64 {
        self.foreign.load(Ordering::Relaxed)
    }

    /// First and last receipt.
    pub fn window(&self) -> Option<(Instant, Instant)> {
        *self.window.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Messages counted so far.
    pub fn received(&self) -> u64 {
        self.stats.counters().messages
    }
}

/// A running consumer of either kind.
pub enum Consumer {
    /// Push consumer.
    Push(PushConsumer),
    /// Lite pull consumer with its polling threads and their stop flag.
    Lite(
        LitePullConsumer,
        Vec<std::thread::JoinHandle<()>>,
        Arc<AtomicBool>,
    ),
    /// Push consumers of many groups on one runtime (`--topics`).
    Groups(Groups),
}

/// One async push consumer per (topic, group), all on one runtime: a thousand groups cost
/// a thousand consumers' tasks and connections, not a thousand consumers' threads.
pub struct Groups {
    runtime: tokio::runtime::Runtime,
    consumers: Vec<AsyncPushConsumer>,
}

impl Consumer {
    /// Stops the consumer (and its polling threads).
    pub fn shutdown(self) {
        match self {
            Consumer::Push(consumer) => consumer.shutdown(),
            Consumer::Lite(consumer, threads, stop) => {
                stop.store(true, Ordering::Relaxed);
                for thread in threads {
                    let _ = thread.join();
                }
                consumer.shutdown();
            }
            Consumer::Groups(groups) => {
                let stops = groups.consumers.iter().map(AsyncPushConsumer::shutdown);
                groups.runtime.block_on(futures::future::join_all(stops));
                groups.runtime.shutdown_timeout(Duration::from_secs(1));
            }
        }
    }

    /// Whether the consumer holds at least one queue (push) or has a subscription (lite).
    pub fn has_queues(&self) -> bool {
        match self {
            Consumer::Push(consumer) => !consumer.assigned_queues().is_empty(),
            Consumer::Lite(consumer, _, _) => !consumer.assignment().is_empty(),
            Consumer::Groups(groups) => groups
                .consumers
                .iter()
                .all(|consumer| !consumer.assigned_queues().is_empty()),
        }
    }
}

/// What a consumer is started with.
pub struct ConsumerPlan<'a> {
    /// Client settings (name servers, credentials).
    pub client: &'a ClientConfig,
    /// Topic.
    pub topic: &'a str,
    /// Group.
    pub group: &'a str,
    /// Consume threads.
    pub threads: usize,
    /// Start position of a group without offsets.
    pub from: StartFrom,
    /// Pull and consume settings.
    pub receive: &'a ReceiveArgs,
}

/// The consumer settings of `plan` for `group`.
fn consumer_config(plan: &ConsumerPlan<'_>, group: &str) -> ConsumerConfig {
    let mut config = ConsumerConfig::new(group, plan.client.clone());
    config.consume_from_where = match plan.from {
        StartFrom::First => ConsumeFromWhere::FirstOffset,
        StartFrom::Last => ConsumeFromWhere::LastOffset,
    };
    config.pull_batch_size = plan.receive.pull_batch;
    // Short long-polls keep shutdown quick; the broker still answers at once when data is
    // there.
    config.suspend = Duration::from_secs(2);
    config.pull_timeout = Duration::from_secs(5);
    config
}

/// Starts a consumer delivering into `receiver`.
pub fn start_consumer(plan: &ConsumerPlan<'_>, receiver: &Arc<Receiver>) -> Result<Consumer> {
    let config = consumer_config(plan, plan.group);
    match plan.receive.mode {
        ConsumeMode::Push => {
            let mut push = PushConsumerConfig::new(config);
            push.consume_threads = plan.threads;
            push.consume_batch_max = plan.receive.consume_batch;
            let target = receiver.clone();
            let listener = MessageListener::concurrently(move |messages, _queue| {
                target.on_messages(messages);
                ConsumeConcurrentlyStatus::ConsumeSuccess
            });
            let consumer = PushConsumer::new(push, listener)?;
            consumer.subscribe(plan.topic, "*")?;
            consumer.start()?;
            Ok(Consumer::Push(consumer))
        }
        ConsumeMode::Lite => start_lite(plan, config, receiver),
    }
}

/// Starts a push consumer for each (topic, group) of `pairs` on one runtime of
/// `plan.threads` workers, each delivering into `receiver`.
pub fn start_groups(
    plan: &ConsumerPlan<'_>,
    pairs: &[(String, String)],
    receiver: &Arc<Receiver>,
) -> Result<Consumer> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(plan.threads)
        .thread_name("bench-groups")
        .enable_all()
        .build()
        .map_err(|error| BenchError::Thread(format!("tokio runtime: {error}")))?;
    let mut consumers = Vec::with_capacity(pairs.len());
    for (topic, group) in pairs {
        let mut config = consumer_config(plan, group);
        // Java's long poll (15 s held, 30 s timeout) rather than the short one: with
        // thousands of queues the short one would be most of what the broker serves.
        config.suspend = Duration::from_secs(15);
        config.pull_timeout = Duration::from_secs(30);
        let mut push = AsyncPushConsumerConfig::new(config);
        push.consume_batch_max = plan.receive.consume_batch;
        let target = receiver.clone();
        let listener = AsyncMessageListener::concurrently(move |messages, _queue| {
            target.on_messages(&messages);
            std::future::ready(ConsumeConcurrentlyStatus::ConsumeSuccess)
        });
        let consumer = AsyncPushConsumer::new(push, listener)?;
        consumer.subscribe(topic, "*")?;
        consumers.push(consumer);
    }
    let starts = consumers.iter().map(AsyncPushConsumer::start);
    let started = runtime.block_on(futures::future::join_all(starts));
    let groups = Consumer::Groups(Groups { runtime, consumers });
    if let Some(Err(error)) = started.into_iter().find(Result::is_err) {
        groups.shutdown();
        return Err(error.into());
    }
    Ok(groups)
}

fn start_lite(
    plan: &ConsumerPlan<'_>,
    config: ConsumerConfig,
    receiver: &Arc<Receiver>,
) -> Result<Consumer> {
    let mut lite = LitePullConfig::new(config);
    lite.poll_batch_max = plan.receive.consume_batch;
    lite.consumer.pull_batch_size = plan.receive.pull_batch;
    let consumer = LitePullConsumer::new(lite)?;
    consumer.subscribe(plan.topic, "*")?;
    consumer.start()?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for index in 0..plan.threads {
        let (polled, receiver, stopped) = (consumer.clone(), receiver.clone(), stop.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("bench-poll-{index}"))
            .spawn(move || {
                while !stopped.load(Ordering::Relaxed) {
                    receiver.on_messages(&polled.poll(Duration::from_millis(100)));
                }
            });
        match spawned {
            Ok(thread) => threads.push(thread),
            Err(error) => {
                Consumer::Lite(consumer, threads, stop).shutdown();
                return Err(BenchError::Thread(error.to_string()));
            }
        }
    }
    Ok(Consumer::Lite(consumer, threads, stop))
}

/// Runs `consume`.
pub fn run(cli: &Cli, args: &ConsumeArgs) -> Result<Outcome> {
    check_threads("--threads", args.threads)?;
    args.validate()?;
    let duration = args.finish.duration()?;
    let idle_exit = args
        .idle_exit_s
        .filter(|seconds| seconds.is_finite() && *seconds > 0.0)
        .map(Duration::from_secs_f64);
    let started = Instant::now();
    let stats = Stats::new()?;
    let receiver = Receiver::new(stats.clone(), None);
    let client = cli.client_config()?;
    let plan = ConsumerPlan {
        client: &client,
        topic: &args.topic,
        group: &args.group,
        threads: args.threads,
        from: args.from,
        receive: &args.receive,
    };
    let consumer = if args.topics > 1 {
        start_groups(&plan, &args.topic_groups(), &receiver)?
    } else {
        start_consumer(&plan, &receiver)?
    };
    let finish = FinishCondition::new(started, duration, args.finish.messages);
    let mut phases = [("receive", Collector::new(stats, started)?)];
    super::with_progress(&mut phases, cli.quiet, || {
        wait_until_done(&receiver, &finish, idle_exit);
    })?;
    let ended = Instant::now();
    consumer.shutdown();
    let [(_, collector)] = phases;
    let main = receive_summary(collector, &receiver, started, ended)?;
    Ok(Outcome {
        main,
        others: Vec::new(),
        extra: serde_json::Map::new(),
    })
}

/// Polls the stop rules every 10 ms: deadline, message count, idleness.
pub fn wait_until_done(receiver: &Receiver, finish: &FinishCondition, idle_exit: Option<Duration>) {
    loop {
        let now = Instant::now();
        if finish.is_over_at(now) {
            return;
        }
        if finish
            .messages()
            .is_some_and(|limit| receiver.received() >= limit)
        {
            return;
        }
        if let (Some(idle), Some((_, last))) = (idle_exit, receiver.window()) {
            if now.saturating_duration_since(last) >= idle {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The summary of a receiving phase: rate over the first-to-last receipt window.
pub fn receive_summary(
    collector: Collector,
    receiver: &Receiver,
    started: Instant,
    ended: Instant,
) -> Result<PhaseSummary> {
    let (counters, histogram, first_error) = collector.finish(ended)?;
    let elapsed = match receiver.window() {
        Some((first, last)) if counters.messages > 1 && last > first => last - first,
        _ => ended - started,
    };
    Ok(PhaseSummary {
        name: "receive",
        elapsed,
        counters,
        latency: LatencySummary::of(&histogram),
        latency_meaning: "end-to-end (send to delivery)",
        first_error,
    })
}
