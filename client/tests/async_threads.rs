//! The async producer's thread budget, alone in its test binary so that no other test's
//! threads blur the count of `/proc/self/task`. Runs against a real Comet broker (`live`);
//! build it first (`cargo build -p comet-broker`) or set `COMET_BROKER_BIN`.

mod live;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use comet_client::{AsyncProducer, Message, ProducerConfig, SendStatus};
use live::{threads, unique, Live};

/// Longest the sends of the test may take.
const SENDS_LIMIT: Duration = Duration::from_secs(60);

// Proves 1,000 concurrent sends from one task, over connections to a name server and a
// broker, complete without the producer starting a single thread: the count taken before
// the first send (with the runtime's two workers already running) is never exceeded while
// the sends run, and is the count afterwards.
#[test]
fn a_thousand_concurrent_sends_start_no_thread() {
    let live = Live::start("client-async-threads", &[]);
    let topic = unique("AsyncThreads");
    let mut config = ProducerConfig::new(&unique("async_pg"), live.client());
    config.send_timeout = SENDS_LIMIT;
    let producer = AsyncProducer::new(config).expect("an async producer");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let before = threads();
    let (results, peak) = runtime.block_on(async {
        let first = producer.send(Message::new(topic.as_str(), "first"));
        let first = tokio::time::timeout(SENDS_LIMIT, first).await;
        assert_eq!(first.expect("in time").unwrap().status, SendStatus::SendOk);
        let done = AtomicBool::new(false);
        let sends = async {
            let sends =
                (0..1000).map(|i| producer.send(Message::new(topic.as_str(), i.to_string())));
            let results = futures::future::join_all(sends).await;
            done.store(true, Ordering::Release);
            results
        };
        let sampler = async {
            let mut peak = threads();
            while !done.load(Ordering::Acquire) {
                peak = peak.max(threads());
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            peak
        };
        let both = futures::future::join(sends, sampler);
        tokio::time::timeout(SENDS_LIMIT, both)
            .await
            .expect("1,000 sends in time")
    });
    let failed: Vec<_> = results.iter().filter(|result| result.is_err()).collect();
    assert!(
        failed.is_empty(),
        "{} failed, first {:?}",
        failed.len(),
        failed.first()
    );
    assert!(
        peak <= before,
        "{peak} threads while sending, {before} before"
    );
    assert!(
        threads() <= before,
        "{} threads after, {before} before",
        threads()
    );
    producer.shutdown();
}
