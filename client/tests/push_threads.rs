//! The blocking push consumer's thread budget, alone in its test binary so that no other
//! test's threads blur the count of `/proc/self/task`. Runs against a real Comet broker
//! (`live`); build it first (`cargo build -p comet-broker`) or set `COMET_BROKER_BIN`.

mod live;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use comet_client::{
    AsyncProducer, ConsumeConcurrentlyStatus, Message, MessageListener, ProducerConfig,
    PushConsumer, PushConsumerConfig,
};
use comet_test_support::wait_until;
use live::{consumer_config, threads, unique, Live};

/// Longest a step of the test may take.
const STEP_LIMIT: Duration = Duration::from_secs(120);
/// The consumer's runtime workers (`pull_thread_nums`, its default).
const WORKER_THREADS: usize = 2;
/// The consumer's listener pool.
const CONSUME_THREADS: usize = 4;

/// Sends `count` messages to `topic` from a current-thread runtime (no thread of its own)
/// and returns their bodies.
fn send(live: &Live, topic: &str, count: usize) -> BTreeSet<String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let producer = AsyncProducer::new(ProducerConfig::new(
        &unique("push_threads_pg"),
        live.client(),
    ))
    .unwrap();
    let sent: BTreeSet<String> = (0..count).map(|i| i.to_string()).collect();
    runtime.block_on(async {
        let sends = sent
            .iter()
            .map(|body| producer.send(Message::new(topic, body.clone().into_bytes())));
        for result in futures::future::join_all(sends).await {
            result.expect("a send");
        }
    });
    producer.shutdown();
    sent
}

/// Consumes every message of `topic` (of `queues` queues) with a fresh blocking consumer and
/// returns the most threads the process had meanwhile, sampled by this thread.
fn consume_all(live: &Live, topic: &str, queues: usize, sent: &BTreeSet<String>) -> usize {
    let seen: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let sink = seen.clone();
    // A listener slow enough that every consume thread is busy at once in both runs.
    let listener = MessageListener::concurrently(move |messages, _queue| {
        std::thread::sleep(Duration::from_millis(5));
        let bodies = messages
            .iter()
            .map(|m| String::from_utf8_lossy(&m.body).into_owned());
        sink.lock().unwrap().extend(bodies);
        ConsumeConcurrentlyStatus::ConsumeSuccess
    });
    let mut config = PushConsumerConfig::new(consumer_config(live, &unique("push_threads")));
    config.consume_threads = CONSUME_THREADS;
    assert_eq!(config.consumer.pull_thread_nums, WORKER_THREADS);
    let consumer = PushConsumer::new(config, listener).unwrap();
    consumer.subscribe(topic, "*").unwrap();
    consumer.start().unwrap();
    let started = Instant::now();
    let mut peak = threads();
    while *seen.lock().unwrap() != *sent {
        assert!(started.elapsed() < STEP_LIMIT, "consumed in time");
        peak = peak.max(threads());
        std::thread::sleep(Duration::from_millis(2));
    }
    let held = consumer
        .assigned_queues()
        .iter()
        .filter(|queue| queue.topic == topic)
        .count();
    assert_eq!(held, queues, "the consumer holds every queue");
    peak = peak.max(threads());
    consumer.shutdown();
    peak
}

// Proves the blocking consumer's thread count does not grow with its queues: consuming
// every message of an 8-queue topic and then of a 1,024-queue topic (each queue holding
// messages, each with its pull task long-polling), the process peaks at the same thread
// count, at most its runtime's workers and its consume pool above what it had before.
#[test]
fn a_blocking_consumer_of_1024_queues_has_the_threads_of_one_of_8() {
    let live = Live::start("client-push-threads", &[]);
    let small = live.create_topic("push_threads_8", 8);
    let large = live.create_topic("push_threads_1024", 1024);
    let small_sent = send(&live, &small, 64);
    let large_sent = send(&live, &large, 4096);
    let before = threads();
    let peak_small = consume_all(&live, &small, 8, &small_sent);
    let peak_large = consume_all(&live, &large, 1024, &large_sent);
    assert_eq!(
        peak_small, peak_large,
        "8 queues: {peak_small} threads, 1,024 queues: {peak_large}"
    );
    assert!(
        peak_large <= before + WORKER_THREADS + CONSUME_THREADS,
        "{peak_large} threads, {before} before"
    );
    // The threads end with the consumer.
    wait_until("the consumer's threads gone", STEP_LIMIT, || {
        threads() == before
    });
}
