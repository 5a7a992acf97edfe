//! Smoke test of every bench mode against a real `comet-broker --standalone` on loopback.
//!
//! The broker is started and stopped by comet-test-support: the workspace's own build
//! (`target/<profile>/comet-broker`) or `COMET_BROKER_BIN`. `cargo test --workspace` builds
//! it; when it is missing the test fails and says how to build it, it never skips.

mod common;

use comet_test_support::{Broker, TempDir};

use common::{bench, number};

// Proves that produce (sync, async window, async client in closed and open loop), consume
// (push drain and lite pull) and e2e each move messages through a real broker with zero
// errors, and that the reports carry the unit-suffixed percentile fields.
#[test]
fn every_mode_moves_messages_without_errors() {
    let dir = TempDir::new("bench-smoke");
    let store = dir.path().join("store");
    let broker = Broker::start(&store, 1, &[]);
    let topic = ["--topic", "BenchSmoke"];

    let sync = [
        &topic[..],
        &["--queues", "4", "--threads", "8", "--duration", "2"],
    ]
    .concat();
    let produced = bench(
        &broker,
        dir.path(),
        "produce",
        &[&["produce"], &sync[..]].concat(),
    );
    assert!(number(&produced, "messages_total") > 0, "{produced}");
    assert_eq!(number(&produced, "errors_total"), 0, "{produced}");
    assert!(number(&produced, "latency_us_p99") >= number(&produced, "latency_us_p50"));
    assert!(produced["throughput_msgs_per_s"].as_f64().unwrap() > 0.0);

    let window = [&topic[..], &["--inflight", "32", "--messages", "500"]].concat();
    let windowed = bench(
        &broker,
        dir.path(),
        "window",
        &[&["produce"], &window[..]].concat(),
    );
    assert_eq!(number(&windowed, "messages_total"), 500, "{windowed}");
    assert_eq!(number(&windowed, "errors_total"), 0, "{windowed}");

    let async_window = [
        &topic[..],
        &["--async-client", "--inflight", "32", "--messages", "500"],
    ]
    .concat();
    let async_windowed = bench(
        &broker,
        dir.path(),
        "async-window",
        &[&["produce"], &async_window[..]].concat(),
    );
    assert_eq!(
        number(&async_windowed, "messages_total"),
        500,
        "{async_windowed}"
    );
    assert_eq!(
        number(&async_windowed, "errors_total"),
        0,
        "{async_windowed}"
    );
    let async_rate = [
        &topic[..],
        &["--async-client", "--rate", "400", "--messages", "200"],
    ]
    .concat();
    let async_paced = bench(
        &broker,
        dir.path(),
        "async-rate",
        &[&["produce"], &async_rate[..]].concat(),
    );
    assert_eq!(number(&async_paced, "messages_total"), 200, "{async_paced}");
    assert_eq!(number(&async_paced, "errors_total"), 0, "{async_paced}");

    let total = number(&produced, "messages_total") + 500 + 500 + 200;
    let drain = [
        &topic[..],
        &["--from", "first", "--idle-exit", "1", "--duration", "20"],
    ]
    .concat();
    let pushed = bench(
        &broker,
        dir.path(),
        "push",
        &[&["consume", "--group", "smoke_push"], &drain[..]].concat(),
    );
    assert!(
        number(&pushed, "messages_total") >= total,
        "push drained too few: {pushed}"
    );
    assert_eq!(number(&pushed, "errors_total"), 0, "{pushed}");
    let lite = [
        &["consume", "--group", "smoke_lite", "--mode", "lite"],
        &drain[..],
    ]
    .concat();
    let pulled = bench(&broker, dir.path(), "lite", &lite);
    assert!(
        number(&pulled, "messages_total") >= total,
        "lite drained too few: {pulled}"
    );

    let e2e = [
        &["e2e"],
        &topic[..],
        &["--rate", "200", "--threads", "4", "--duration", "2"],
    ]
    .concat();
    let end_to_end = bench(&broker, dir.path(), "e2e", &e2e);
    assert!(number(&end_to_end, "messages_total") > 0, "{end_to_end}");
    assert_eq!(number(&end_to_end, "send_errors_total"), 0, "{end_to_end}");
    assert_eq!(number(&end_to_end, "e2e_missing_total"), 0, "{end_to_end}");
    assert!(number(&end_to_end, "latency_us_p999") > 0, "{end_to_end}");
}
