//! `produce --transactional` against a real `comet-broker --standalone` on loopback: every
//! message a half committed at once, and nothing but the committed messages delivered.
//!
//! The broker comes from comet-test-support (the workspace's own build or
//! `COMET_BROKER_BIN`); when it is missing the test fails and says how to build it.

mod common;

use std::process::{Command, Stdio};

use comet_test_support::{run_to_exit, Broker, TempDir};

use common::{bench, number, RUN_LIMIT};

/// Messages the transactional run sends (the warm-up adds one to the topic).
const TRANSACTIONS: u64 = 400;

// Proves that `produce --transactional` commits every transaction it counts on a broker of
// two shards (the halves spread over both): the run reports exactly the messages asked for
// with zero errors, and a consumer from the first message then receives each of them (and
// the warm-up's) once: a half left uncommitted or committed twice would change the count.
#[test]
fn transactional_produce_commits_every_message() {
    let dir = TempDir::new("bench-transactional");
    let broker = Broker::start(&dir.path().join("store"), 2, &[]);
    let messages = TRANSACTIONS.to_string();
    let sent = bench(
        &broker,
        dir.path(),
        "transactional",
        &[
            "produce",
            "--transactional",
            "--topic",
            "BenchTx",
            "--queues",
            "4",
            "--threads",
            "8",
            "--messages",
            &messages,
        ],
    );
    assert_eq!(number(&sent, "messages_total"), TRANSACTIONS, "{sent}");
    assert_eq!(number(&sent, "errors_total"), 0, "{sent}");
    assert_eq!(sent["params"]["command"]["transactional"], true, "{sent}");
    assert!(number(&sent, "latency_us_p99") >= number(&sent, "latency_us_p50"));
    number(&sent, "tx_check_backs_total");

    let drained = bench(
        &broker,
        dir.path(),
        "drain",
        &[
            "consume",
            "--topic",
            "BenchTx",
            "--group",
            "bench_tx_drain",
            "--from",
            "first",
            "--idle-exit",
            "2",
            "--duration",
            "30",
        ],
    );
    assert_eq!(
        number(&drained, "messages_total"),
        TRANSACTIONS + 1,
        "every committed message once, the warm-up's included: {drained}"
    );
}

// Proves the binary refuses --transactional with an async window before touching any
// broker, exiting non-zero with the reason.
#[test]
fn transactional_refuses_an_async_window() {
    let mut command = Command::new(env!("CARGO_BIN_EXE_comet-bench"));
    command
        .args(["--namesrv", "127.0.0.1:1", "--quiet"])
        .args(["produce", "--transactional", "--inflight", "16"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let output = run_to_exit("comet-bench refused", &mut command, RUN_LIMIT);
    assert!(!output.status.success(), "accepted: {:?}", output.status);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--inflight"), "{stderr}");
}
