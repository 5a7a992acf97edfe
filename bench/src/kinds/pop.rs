//! `pop`: RocketMQ 5.x pop consumption with comet-client's `AsyncPopConsumer`; rate and
//! end-to-end latency.
//!
//! `--consumers N` pop consumers of one group (each its own client and connection, all
//! tasks of one current-thread tokio runtime on one bench thread) loop: receive up to
//! `--pop-batch` messages invisible for `--invisible-time-ms`, record them, ack each (all of
//! a batch at once) unless `--no-ack`. Every receive asks for queue id -1 (the broker picks
//! the queue), so more consumers than queues share them.
//!
//! Two modes:
//! * drain (no `--rate`): pop what the topic holds, from `--from` (first by default), until
//!   `--messages` were received, `--duration` passed, or nothing came for `--idle-exit`
//!   seconds. The figure is the receive rate (first to last receipt).
//! * end-to-end (`--rate R`): send at R msgs/s (open loop, like `e2e`) while the consumers
//!   pop from the queues' end (the group's offsets are committed there first); latency is
//!   intended send time to receipt, only this run's messages are measured, and messages not
//!   received within a grace period after the last send are `e2e_missing_total`.
//!
//! A receive or ack that fails counts as an error of the `pop` phase.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use comet_client::{AsyncPopConsumer, ClientConfig, PopConsumerConfig, PopInitMode};

use crate::args::{Cli, PopArgs, StartFrom};
use crate::error::{BenchError, Result};
use crate::finish_condition::FinishCondition;
use crate::kinds::consume::{receive_summary, wait_until_done, Receiver};
use crate::kinds::produce::{send_all, send_summary, start_producer, warm_up, SendContext};
use crate::limits::{ASSIGN_WAIT, DRAIN_GRACE};
use crate::payload;
use crate::report::Outcome;
use crate::stats::{Collector, Stats};
use crate::topic;

/// Longest one receive waits at the broker: short, so stopping takes at most this long.
const POLL_TIME: Duration = Duration::from_secs(1);
/// Pause after a failed receive.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// What the consumers count besides the receiver's figures.
#[derive(Default)]
struct Totals {
    /// Receives answered (with or without messages).
    receives: AtomicU64,
    /// Messages delivered again (reconsume count above 0).
    redelivered: AtomicU64,
    /// Acks the broker confirmed.
    acked: AtomicU64,
}

/// Running pop consumers: their thread, stop flag and counters.
struct Consumers {
    thread: std::thread::JoinHandle<Result<()>>,
    stop: Arc<AtomicBool>,
    totals: Arc<Totals>,
}

impl Consumers {
    fn shutdown(self) -> Result<Arc<Totals>> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.join() {
            Ok(outcome) => outcome.map(|()| self.totals),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}

/// Runs `pop`.
pub fn run(cli: &Cli, args: &PopArgs) -> Result<Outcome> {
    args.validate()?;
    let client = cli.client_config()?;
    if let Some(queues) = args.send.queues {
        topic::ensure_topic(&client, &args.send.topic, queues)?;
    }
    if args.send.rate_msgs_per_s.is_some() {
        run_end_to_end(cli, args, &client)
    } else {
        run_drain(cli, args, &client)
    }
}

fn run_drain(cli: &Cli, args: &PopArgs, client: &ClientConfig) -> Result<Outcome> {
    let duration = args.finish.duration()?;
    let idle_exit = args
        .idle_exit_s
        .filter(|seconds| seconds.is_finite() && *seconds > 0.0)
        .map(Duration::from_secs_f64);
    let group = args
        .group
        .clone()
        .unwrap_or_else(|| format!("comet_bench_pop_{:06x}", payload::new_run_id() & 0xff_ffff));
    let started = Instant::now();
    let stats = Stats::new()?;
    let receiver = Receiver::new(stats.clone(), None);
    let consumers = start_consumers(args, client, &group, args.from, &receiver, &stats)?;
    let finish = FinishCondition::new(started, duration, args.finish.messages);
    let mut phases = [("pop", Collector::new(stats, started)?)];
    super::with_progress(&mut phases, cli.quiet, || {
        wait_until_done(&receiver, &finish, idle_exit);
    })?;
    let ended = Instant::now();
    let totals = consumers.shutdown()?;
    let [(_, collector)] = phases;
    let mut main = receive_summary(collector, &receiver, started, ended)?;
    main.name = "pop";
    Ok(Outcome {
        main,
        others: Vec::new(),
        extra: extra(args, &group, &totals),
    })
}

fn run_end_to_end(cli: &Cli, args: &PopArgs, client: &ClientConfig) -> Result<Outcome> {
    let duration = args.finish.duration()?;
    let producer = start_producer(client, &args.send)?;
    let run_id = payload::new_run_id();
    warm_up(&producer, &args.send, &args.send.topic, run_id)?;
    let group = args
        .group
        .clone()
        .unwrap_or_else(|| format!("comet_bench_pop_{:06x}", run_id & 0xff_ffff));
    // The topic outlives runs (a sitting warms up and measures on the same broker), and a
    // pop group without a position reads a young queue from its first message whatever its
    // init mode (docs/protocol.md#max-offset-and-young-queues): every earlier run's messages
    // would come first. The group starts at the end of every queue, after the warm-up sends.
    if let Err(error) = topic::commit_group_at_end(client, &group, &args.send.topic) {
        producer.shutdown();
        return Err(error);
    }
    let receive_stats = Stats::new()?;
    let receiver = Receiver::new(receive_stats.clone(), Some(run_id));
    let consumers = match start_consumers(
        args,
        client,
        &group,
        StartFrom::Last,
        &receiver,
        &receive_stats,
    ) {
        Ok(consumers) => consumers,
        Err(error) => {
            producer.shutdown();
            return Err(error);
        }
    };
    // Sending starts once every consumer is polling, so the first messages do not wait for
    // the consumers' connections.
    let ready = wait_for_first_receives(&consumers, args.consumers);
    if let Err(error) = ready {
        let _ = consumers.shutdown();
        producer.shutdown();
        return Err(error);
    }
    let started = Instant::now();
    let send_stats = Stats::new()?;
    let context = SendContext::new(&producer, &args.send, run_id, started, send_stats.clone())?;
    let finish = FinishCondition::new(started, duration, args.finish.messages);
    let mut phases = [
        ("send", Collector::new(send_stats.clone(), started)?),
        ("pop", Collector::new(receive_stats, started)?),
    ];
    let send_ended = super::with_progress(&mut phases, cli.quiet, || {
        send_all(&context, &finish)?;
        let ended = Instant::now();
        let sent = send_stats.counters().messages;
        let deadline = ended + DRAIN_GRACE;
        while receiver.received() < sent && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok::<Instant, BenchError>(ended)
    })??;
    let ended = Instant::now();
    let totals = consumers.shutdown();
    producer.shutdown();
    let totals = totals?;
    let [(_, send_collector), (_, receive_collector)] = phases;
    let send_phase = send_summary(send_collector, started, send_ended)?;
    let mut main = receive_summary(receive_collector, &receiver, started, ended)?;
    main.name = "pop";
    let missing = send_phase
        .counters
        .messages
        .saturating_sub(main.counters.messages);
    let mut extra = extra(args, &group, &totals);
    extra.insert("e2e_missing_total".into(), missing.into());
    extra.insert("foreign_messages_total".into(), receiver.foreign().into());
    Ok(Outcome {
        main,
        others: vec![("send_", send_phase)],
        extra,
    })
}

fn extra(
    args: &PopArgs,
    group: &str,
    totals: &Totals,
) -> serde_json::Map<String, serde_json::Value> {
    let mut extra = serde_json::Map::new();
    extra.insert("consumer_group".into(), group.into());
    extra.insert("pop_consumers".into(), args.consumers.into());
    let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
    extra.insert("pop_receives_total".into(), load(&totals.receives).into());
    extra.insert(
        "pop_redelivered_total".into(),
        load(&totals.redelivered).into(),
    );
    extra.insert("pop_acked_total".into(), load(&totals.acked).into());
    extra
}

/// Waits until every consumer's first receive was answered.
fn wait_for_first_receives(consumers: &Consumers, count: usize) -> Result<()> {
    let deadline = Instant::now() + ASSIGN_WAIT;
    while consumers.totals.receives.load(Ordering::Relaxed) < count as u64 {
        if consumers.thread.is_finished() || Instant::now() >= deadline {
            return Err(BenchError::Args(format!(
                "the pop consumers did not all answer a first receive within {ASSIGN_WAIT:?}"
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// Starts `args.consumers` pop consumers of `group` on a thread of their own.
fn start_consumers(
    args: &PopArgs,
    client: &ClientConfig,
    group: &str,
    from: StartFrom,
    receiver: &Arc<Receiver>,
    stats: &Arc<Stats>,
) -> Result<Consumers> {
    let mut config = PopConsumerConfig::new(group, client.clone());
    config.poll_time = POLL_TIME;
    config.init_mode = match from {
        StartFrom::First => PopInitMode::First,
        StartFrom::Last => PopInitMode::Last,
    };
    let mut consumers = Vec::with_capacity(args.consumers);
    for _ in 0..args.consumers {
        let consumer = AsyncPopConsumer::new(config.clone())?;
        consumer.subscribe(&args.send.topic, "*")?;
        consumers.push(consumer);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let totals = Arc::new(Totals::default());
    let work = Loop {
        receiver: receiver.clone(),
        stats: stats.clone(),
        stop: stop.clone(),
        totals: totals.clone(),
        batch: args.pop_batch,
        invisible: Duration::from_millis(args.invisible_time_ms),
        ack: !args.no_ack,
    };
    let thread = std::thread::Builder::new()
        .name("bench-pop".into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|error| BenchError::Thread(format!("tokio runtime: {error}")))?;
            runtime.block_on(async {
                let loops = consumers.iter().map(|consumer| work.run(consumer));
                futures::future::join_all(loops).await;
            });
            for consumer in &consumers {
                consumer.shutdown();
            }
            Ok(())
        })
        .map_err(|error| BenchError::Thread(error.to_string()))?;
    Ok(Consumers {
        thread,
        stop,
        totals,
    })
}

/// What every consumer's loop shares.
struct Loop {
    receiver: Arc<Receiver>,
    stats: Arc<Stats>,
    stop: Arc<AtomicBool>,
    totals: Arc<Totals>,
    batch: usize,
    invisible: Duration,
    ack: bool,
}

impl Loop {
    /// Receives, records and acks until stopped.
    async fn run(&self, consumer: &AsyncPopConsumer) {
        while !self.stop.load(Ordering::Relaxed) {
            let messages = match consumer.receive(self.batch, self.invisible).await {
                Ok(messages) => messages,
                Err(error) => {
                    self.stats.record_error(&error);
                    tokio::time::sleep(RETRY_PAUSE).await;
                    continue;
                }
            };
            self.totals.receives.fetch_add(1, Ordering::Relaxed);
            if messages.is_empty() {
                continue;
            }
            self.receiver
                .on_messages(messages.iter().map(|popped| &popped.message));
            let again = messages.iter().filter(|m| m.reconsume_times() > 0).count();
            self.totals
                .redelivered
                .fetch_add(again as u64, Ordering::Relaxed);
            if !self.ack {
                continue;
            }
            let acks = messages.iter().map(|message| consumer.ack(message));
            for outcome in futures::future::join_all(acks).await {
                match outcome {
                    Ok(()) => {
                        self.totals.acked.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(error) => self.stats.record_error(&error),
                }
            }
        }
    }
}
