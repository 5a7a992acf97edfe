//! The revive scanner's window (issue 25): with `popCkMaxBufferSize` far below the pops left
//! unacked, each shard's scanner holds at most its share of checkpoints in memory, and still
//! every unacked message comes back once and no acked one does, across a SIGKILL too.
//! Memory is observed through `comet_pop_revive_checkpoints` (docs/operations.md#metrics).

mod common;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use comet_proto::message::MessageExt;
use comet_proto::ResponseCode;
use comet_test_support::{free_port, poll_until, wait_for_port, LOOPBACK};
use common::pop::{ack, body, pop_request, popped, send_bodies};
use common::{create_topic, metric_values, metrics_options, Broker, Client, TempDir};

const CORES: usize = 2;
/// `popCkMaxBufferSize`: 2 checkpoints per shard.
const BUFFER: usize = 4;
const WINDOW: f64 = (BUFFER / CORES) as f64;
const CHECKPOINTS: &str = "comet_pop_revive_checkpoints";
const GROUP: &str = "pop_bound_g";
const TOPIC: &str = "PopBound";
/// Pops of one message each, one checkpoint each: six times the window of a shard.
const POPS: usize = 12;
/// Long enough for the pops, acks and the kill to happen before any revive.
const INVISIBLE_MS: i64 = 6_000;

fn start(directory: &TempDir) -> (Broker, SocketAddr) {
    let port = free_port();
    let mut options = vec!["-o".to_owned(), format!("popCkMaxBufferSize={BUFFER}")];
    options.extend(metrics_options(port));
    let options: Vec<&str> = options.iter().map(String::as_str).collect();
    let broker = Broker::start(&directory.0, CORES, &options);
    let addr = SocketAddr::new(LOOPBACK.into(), port);
    wait_for_port(addr, Duration::from_secs(10));
    (broker, addr)
}

/// The most checkpoints one shard's scanner holds now.
fn most_held(metrics: SocketAddr) -> f64 {
    metric_values(metrics, CHECKPOINTS)
        .into_iter()
        .fold(0.0, f64::max)
}

/// Pops one message of queue 0 (one checkpoint per pop).
fn pop_one(client: &mut Client, invisible_ms: i64) -> Vec<MessageExt> {
    let answer = popped(client.call(pop_request(GROUP, TOPIC, 0, 1, invisible_ms, 0)));
    answer.messages
}

// Proves the bound: 12 one-message pops (12 checkpoints on the queue's shard) with half of
// them acked, then a SIGKILL and a restart that rebuilds from the revive queue; no shard's
// scanner ever holds more than its 2 checkpoints, it does hold 2 while the unacked ones wait
// (the window is what limits it), and every unacked message comes back exactly once while
// no acked one does, although most of them were beyond the window when acked or due.
#[test]
fn revive_window_bounds_memory_and_loses_nothing() {
    let directory = TempDir::new("e2e-pop-bound");
    let (mut broker, metrics) = start(&directory);
    let mut client = broker.client();
    create_topic(&mut client, TOPIC, 1);
    let sent: Vec<String> = (0..POPS).map(|i| format!("bound-{i}")).collect();
    send_bodies(&mut client, TOPIC, 1, &sent);
    let mut seen = Vec::new();
    for _ in 0..POPS {
        let messages = pop_one(&mut client, INVISIBLE_MS);
        assert_eq!(messages.len(), 1, "one message per pop");
        seen.extend(messages);
    }
    let (acked, unacked): (Vec<_>, Vec<_>) = seen
        .iter()
        .partition(|message| message.queue_offset % 2 == 0);
    for message in &acked {
        assert_eq!(
            ack(&mut client, GROUP, message).response_code(),
            ResponseCode::SUCCESS
        );
    }
    let full = poll_until(Duration::from_secs(5), || {
        let held = most_held(metrics);
        assert!(held <= WINDOW, "a scanner holds {held} checkpoints");
        held == WINDOW
    });
    assert!(
        full,
        "the window never filled: the test does not reach the bound"
    );
    broker.kill();
    broker.restart(CORES);
    wait_for_port(metrics, Duration::from_secs(10));
    let mut client = broker.client();
    let expected: BTreeSet<String> = unacked.iter().map(|message| body(message)).collect();
    let mut back: Vec<MessageExt> = Vec::new();
    let all_back = poll_until(Duration::from_secs(40), || {
        let held = most_held(metrics);
        assert!(held <= WINDOW, "a scanner holds {held} checkpoints");
        let answer = popped(client.call(pop_request(GROUP, TOPIC, -1, 32, 60_000, 0)));
        back.extend(answer.messages);
        back.iter().map(body).collect::<BTreeSet<_>>() == expected
    });
    let got: Vec<String> = back.iter().map(body).collect();
    assert!(
        all_back,
        "came back {got:?}, expected exactly the unacked {expected:?}"
    );
    assert_eq!(
        got.len(),
        expected.len(),
        "a message came back twice: {got:?}"
    );
    assert!(back.iter().all(|message| message.reconsume_times == 1));
    // Nothing else: the acked ones stay acked past their invisible time.
    let mut more = Vec::new();
    poll_until(Duration::from_secs(4), || {
        assert!(most_held(metrics) <= WINDOW);
        more.extend(popped(client.call(pop_request(GROUP, TOPIC, -1, 32, 60_000, 0))).messages);
        false
    });
    assert!(
        more.is_empty(),
        "acked messages came back: {:?}",
        more.iter().map(body).collect::<Vec<_>>()
    );
}
