//! `e2e`: produce at a fixed rate (open loop) while one consumer group consumes; reports
//! end-to-end latency (intended send time to delivery) and send latency.
//!
//! Order of a run: create the topic, start the producer and send one warm-up message, commit
//! the new group's offsets at the queues' end and start the consumer there, wait until it
//! holds queues, then start the send schedule. After the last send, the run waits (bounded)
//! for the consumer to catch up; messages not delivered by then are reported as
//! `e2e_missing_total`. Only messages stamped with this run's id are measured, so an old
//! backlog on the topic cannot skew the figures.

use std::time::{Duration, Instant};

use crate::args::{check_threads, Cli, E2eArgs, StartFrom};
use crate::error::{BenchError, Result};
use crate::finish_condition::FinishCondition;
use crate::kinds::consume::{receive_summary, start_consumer, Consumer, ConsumerPlan, Receiver};
use crate::kinds::produce::{send_all, send_summary, start_producer, warm_up, SendContext};
use crate::limits::{ASSIGN_WAIT, DRAIN_GRACE};
use crate::payload;
use crate::report::Outcome;
use crate::stats::{Collector, Stats};
use crate::topic;

/// Default rate of an end-to-end run.
const DEFAULT_RATE_MSGS_PER_S: f64 = 1000.0;
/// Default queues of the topic an end-to-end run creates.
const DEFAULT_QUEUES: i32 = 8;

/// Runs `e2e`.
pub fn run(cli: &Cli, args: &E2eArgs) -> Result<Outcome> {
    args.send.validate()?;
    if args.send.topics > 1 {
        return Err(crate::error::BenchError::Args(
            "--topics is for produce only: e2e consumes one topic".into(),
        ));
    }
    args.receive.validate()?;
    check_threads("--consume-threads", args.consume_threads)?;
    let duration = args.finish.duration()?;
    let mut send = args.send.clone();
    send.rate_msgs_per_s.get_or_insert(DEFAULT_RATE_MSGS_PER_S);
    let client = cli.client_config()?;
    topic::ensure_topic(&client, &send.topic, send.queues.unwrap_or(DEFAULT_QUEUES))?;
    let producer = start_producer(&client, &send)?;
    let run_id = payload::new_run_id();
    warm_up(&producer, &send, &send.topic, run_id)?;
    let group = args
        .group
        .clone()
        .unwrap_or_else(|| format!("comet_bench_e2e_{:06x}", run_id & 0xff_ffff));
    // The topic outlives runs (a sitting warms up and measures on the same broker), and a
    // new group would read a young queue from offset 0: the group starts at the end.
    topic::commit_group_at_end(&client, &group, &send.topic)?;
    let receive_stats = Stats::new()?;
    let receiver = Receiver::new(receive_stats.clone(), Some(run_id));
    let plan = ConsumerPlan {
        client: &client,
        topic: &send.topic,
        group: &group,
        threads: args.consume_threads,
        from: StartFrom::Last,
        receive: &args.receive,
    };
    let consumer = start_consumer(&plan, &receiver)?;
    if let Err(error) = wait_for_assignment(&consumer) {
        consumer.shutdown();
        producer.shutdown();
        return Err(error);
    }
    let started = Instant::now();
    let send_stats = Stats::new()?;
    let context = SendContext::new(&producer, &send, run_id, started, send_stats.clone())?;
    let finish = FinishCondition::new(started, duration, args.finish.messages);
    let mut phases = [
        ("send", Collector::new(send_stats.clone(), started)?),
        ("e2e", Collector::new(receive_stats, started)?),
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
    consumer.shutdown();
    producer.shutdown();
    let [(_, send_collector), (_, receive_collector)] = phases;
    let send_phase = send_summary(send_collector, started, send_ended)?;
    let main = receive_summary(receive_collector, &receiver, started, ended)?;
    let missing = send_phase
        .counters
        .messages
        .saturating_sub(main.counters.messages);
    let mut extra = serde_json::Map::new();
    extra.insert("e2e_missing_total".into(), missing.into());
    extra.insert("foreign_messages_total".into(), receiver.foreign().into());
    extra.insert("consumer_group".into(), group.into());
    Ok(Outcome {
        main,
        others: vec![("send_", send_phase)],
        extra,
    })
}

/// Waits until the consumer holds queues, then a little longer so that its pull threads have
/// resolved their start offsets before the first measured send.
fn wait_for_assignment(consumer: &Consumer) -> Result<()> {
    let deadline = Instant::now() + ASSIGN_WAIT;
    while !consumer.has_queues() {
        if Instant::now() >= deadline {
            return Err(BenchError::Args(format!(
                "the consumer was assigned no queue within {ASSIGN_WAIT:?}"
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(1));
    Ok(())
}
