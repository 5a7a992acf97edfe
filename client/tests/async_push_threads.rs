//! The async push consumer's thread budget, alone in its test binary so that no other test's
//! threads blur the count of `/proc/self/task`. Runs against a real Comet broker (`live`);
//! build it first (`cargo build -p comet-broker`) or set `COMET_BROKER_BIN`.

mod live;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use comet_client::{
    AsyncMessageListener, AsyncProducer, AsyncPushConsumer, AsyncPushConsumerConfig,
    ConsumeConcurrentlyStatus, Message, ProducerConfig,
};
use live::{consumer_config, threads, unique, Live};

/// Longest a step of the test may take.
const STEP_LIMIT: Duration = Duration::from_secs(120);

/// Consumes `count` messages sent to `topic` (of `queues` queues) with a fresh consumer
/// and returns the most threads the process had meanwhile.
async fn consume_all(live: &Live, topic: &str, queues: usize, count: usize) -> usize {
    let producer = AsyncProducer::new(ProducerConfig::new(
        &unique("apush_threads_pg"),
        live.client(),
    ))
    .unwrap();
    let sent: BTreeSet<String> = (0..count).map(|i| i.to_string()).collect();
    let sends = sent
        .iter()
        .map(|body| producer.send(Message::new(topic, body.clone().into_bytes())));
    for result in futures::future::join_all(sends).await {
        result.expect("a send");
    }
    producer.shutdown();

    let seen: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let sink = seen.clone();
    let listener = AsyncMessageListener::concurrently(move |messages, _queue| {
        let sink = sink.clone();
        async move {
            let mut sink = sink.lock().unwrap();
            sink.extend(
                messages
                    .iter()
                    .map(|m| String::from_utf8_lossy(&m.body).into_owned()),
            );
            ConsumeConcurrentlyStatus::ConsumeSuccess
        }
    });
    let config = AsyncPushConsumerConfig::new(consumer_config(live, &unique("apush_threads")));
    let consumer = AsyncPushConsumer::new(config, listener).unwrap();
    consumer.subscribe(topic, "*").unwrap();
    let done = AtomicBool::new(false);
    let work = async {
        consumer.start().await.unwrap();
        while *seen.lock().unwrap() != sent {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let held = consumer
            .assigned_queues()
            .iter()
            .filter(|queue| queue.topic == topic)
            .count();
        assert_eq!(held, queues, "the consumer holds every queue");
        consumer.shutdown().await;
        done.store(true, Ordering::Release);
    };
    let sampler = async {
        let mut peak = threads();
        while !done.load(Ordering::Acquire) {
            peak = peak.max(threads());
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        peak
    };
    let ((), peak) = tokio::time::timeout(STEP_LIMIT, futures::future::join(work, sampler))
        .await
        .expect("consumed in time");
    peak
}

// Proves the consumer's thread count does not grow with its queues: consuming every
// message of an 8-queue topic and then of a 1,024-queue topic (each queue holding messages,
// each with its pull task long-polling), the process never has more threads than before the
// first consumer started (the runtime's two workers and the test's own), in either case.
#[test]
fn a_consumer_of_1024_queues_has_the_threads_of_one_of_8() {
    let live = Live::start("client-apush-threads", &[]);
    let small = live.create_topic("apush_threads_8", 8);
    let large = live.create_topic("apush_threads_1024", 1024);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let before = threads();
    let (peak_small, peak_large) = runtime.block_on(async {
        let peak_small = consume_all(&live, &small, 8, 64).await;
        let peak_large = consume_all(&live, &large, 1024, 4096).await;
        (peak_small, peak_large)
    });
    assert_eq!(
        peak_small, before,
        "8 queues: {peak_small} threads, {before} before"
    );
    assert_eq!(
        peak_large, before,
        "1,024 queues: {peak_large} threads, {before} before"
    );
    assert_eq!(peak_small, peak_large);
}
