//! Transactions whose memory and restart cost do not grow with the decisions retained
//! (issue 25): the checker's progress on each half queue and its offset on the op queue are
//! persisted together, the decision set holds only halves at or above the progress, and a
//! restart reads op records only from the persisted op queue offset. Observed through the
//! broker's metrics (`comet_transaction_*`, docs/operations.md#metrics), never through
//! timing.

mod common;
mod sched_common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use comet_proto::{RemotingCommand, ResponseCode};
use comet_test_support::{free_port, poll_until, wait_for_port, LOOPBACK};
use common::{metric_values, metrics_options, Broker, Client, TempDir};
use sched_common::transaction::{end_transaction, end_transaction_request, Half, Producer, COMMIT};
use sched_common::{collect, drain};

const GROUP: &str = "tx_bound_pg";
const CORES: usize = 2;

/// A broker checking halves every 300 ms after 1 s, serving metrics; its metrics address.
fn start(directory: &TempDir) -> (Broker, SocketAddr) {
    let port = free_port();
    let mut options: Vec<String> = ["transactionCheckInterval=300", "transactionTimeOut=1000"]
        .iter()
        .flat_map(|setting| ["-o".to_owned(), (*setting).to_owned()])
        .collect();
    options.extend(metrics_options(port));
    let options: Vec<&str> = options.iter().map(String::as_str).collect();
    let broker = Broker::start(&directory.0, CORES, &options);
    let addr = SocketAddr::new(LOOPBACK.into(), port);
    wait_for_port(addr, Duration::from_secs(10));
    (broker, addr)
}

/// The sum over the shards of metric `name` (counts: exact in an f64).
fn metric(addr: SocketAddr, name: &str) -> f64 {
    metric_values(addr, name).iter().sum()
}

const OPS_READ: &str = "comet_transaction_op_records_read_total";
const PASSES: &str = "comet_transaction_check_passes_total";
const RESOLVED: &str = "comet_transaction_resolved_halves";

fn send_half(client: &mut Client, topic: &str, body: &str) -> Half {
    sched_common::transaction::send_half(client, topic, GROUP, body)
}

/// Sends and commits `count` transactions on one connection; their halves.
fn commit_many(client: &mut Client, topic: &str, first: usize, count: usize) -> Vec<Half> {
    let halves: Vec<Half> = (first..first + count)
        .map(|index| send_half(client, topic, &format!("tx-{index}")))
        .collect();
    for half in &halves {
        end_transaction(client, topic, GROUP, half, COMMIT, false);
    }
    halves
}

/// A second decision for `half`, two-way: refused as Apache refuses a half it cannot find.
fn assert_refused(client: &mut Client, topic: &str, half: &Half) {
    let response: RemotingCommand =
        client.call(end_transaction_request(topic, GROUP, half, COMMIT, false));
    assert_eq!(response.response_code(), ResponseCode::SYSTEM_ERROR);
    assert_eq!(
        response.remark.as_deref(),
        Some("Find prepared transaction message failed")
    );
}

/// Waits until the checker has read back `decisions` op records since its start and moved
/// its progress past them all (no decision held in memory).
fn wait_pruned(metrics: SocketAddr, decisions: u32, what: &str) {
    let pruned = poll_until(Duration::from_secs(20), || {
        metric(metrics, OPS_READ) >= f64::from(decisions) && metric(metrics, RESOLVED) == 0.0
    });
    assert!(
        pruned,
        "{what}: {} op records read of {decisions}, {} decisions still held",
        metric(metrics, OPS_READ),
        metric(metrics, RESOLVED)
    );
}

/// Waits until a whole pass of the checker (op records read to the end, halves walked)
/// completed since now: two passes counted.
fn wait_passes(metrics: SocketAddr) {
    let start = metric(metrics, PASSES);
    assert!(
        poll_until(Duration::from_secs(20), || metric(metrics, PASSES)
            >= start + 2.0 * CORES as f64),
        "the checker stopped passing"
    );
}

// Proves the decision set stays bounded while many transactions are committed: after each
// wave of 50 commits it drops back to nothing once the checker moved its progress past
// them, whatever the waves before left in the op queue; and a decision for a pruned half
// (below the progress) is still refused, so pruning never lets a half be committed twice.
#[test]
fn decisions_are_pruned_as_the_progress_moves() {
    let directory = TempDir::new("e2e-tx-bound-prune");
    let (broker, metrics) = start(&directory);
    let mut client = broker.client();
    let mut all = Vec::new();
    for wave in 0..4u32 {
        all.extend(commit_many(&mut client, "TxPrune", wave as usize * 50, 50));
        wait_pruned(metrics, (wave + 1) * 50, &format!("wave {wave}"));
    }
    assert_refused(&mut client, "TxPrune", &all[0]);
    assert_refused(&mut client, "TxPrune", &all[199]);
    let mut reader = broker.client();
    let seen = collect(&mut reader, "TxPrune", 0, 200, Duration::from_secs(10));
    assert_eq!(seen.len(), 200);
    wait_passes(metrics);
    assert_eq!(
        drain(&mut reader, "TxPrune", 0).len(),
        200,
        "a half committed twice"
    );
}

// Proves a restart reads op records only from the checkpoint: after 100 decisions read
// back and a clean stop, the restarted checker completes passes reading no op record at
// all (from offset 0 it would read 100), holds no decision, still refuses a second decision
// for the first half, and commits nothing twice.
#[test]
fn restart_reads_op_records_only_from_the_checkpoint() {
    let directory = TempDir::new("e2e-tx-bound-restart");
    let (mut broker, metrics) = start(&directory);
    let mut client = broker.client();
    let halves = commit_many(&mut client, "TxRestart", 0, 100);
    wait_pruned(metrics, 100, "before the restart");
    drop(client);
    broker.stop();
    broker.restart(CORES);
    wait_for_port(metrics, Duration::from_secs(10));
    wait_passes(metrics);
    assert_eq!(
        metric(metrics, OPS_READ),
        0.0,
        "op records below the checkpoint were read again"
    );
    assert_eq!(metric(metrics, RESOLVED), 0.0);
    let mut client = broker.client();
    assert_refused(&mut client, "TxRestart", &halves[0]);
    assert_refused(&mut client, "TxRestart", &halves[99]);
    wait_passes(metrics);
    assert_eq!(drain(&mut client, "TxRestart", 0).len(), 100);
}

/// True once a shard's offsets file holds the checker's op queue offset at `at_least`.
fn op_offset_persisted(store: &Path, at_least: i64) -> bool {
    let Ok(entries) = std::fs::read_dir(store.join("config")) else {
        return false;
    };
    entries.flatten().any(|entry| {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !(name.starts_with("consumerOffset-") && name.ends_with(".json")) {
            return false;
        }
        let Ok(text) = std::fs::read_to_string(entry.path()) else {
            return false;
        };
        let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) else {
            return false;
        };
        json["offsetTable"]["RMQ_SYS_TRANS_OP_HALF_TOPIC@CID_RMQ_SYS_TRANS"]
            .as_object()
            .is_some_and(|queues| {
                queues
                    .values()
                    .any(|offset| offset.as_i64().unwrap_or(0) >= at_least)
            })
    })
}

// Proves a half left without a decision across a SIGKILL, after a checkpoint past 50
// earlier decisions was persisted, is still checked back on the producer's new connection
// after the restart and its answer commits it exactly once; the restarted checker reads
// only the op records written since (its own and that commit's), not the 50 before.
#[test]
fn pending_half_is_checked_back_after_sigkill_past_a_checkpoint() {
    let directory = TempDir::new("e2e-tx-bound-kill");
    let (mut broker, metrics) = start(&directory);
    let mut client = broker.client();
    commit_many(&mut client, "TxKill", 0, 50);
    wait_pruned(metrics, 50, "before the kill");
    assert!(
        poll_until(Duration::from_secs(10), || op_offset_persisted(
            &directory.0,
            50
        )),
        "the op queue offset was never persisted"
    );
    let producer = Producer::connect(broker.client(), "127.0.0.1@tx-bound-first", GROUP);
    let mut producer = producer;
    send_half(&mut producer.client, "TxKill", "survivor");
    broker.kill();
    drop(producer);
    broker.restart(CORES);
    wait_for_port(metrics, Duration::from_secs(10));
    let mut second = Producer::connect(broker.client(), "127.0.0.1@tx-bound-second", GROUP);
    let check = second
        .next_check(Duration::from_secs(15))
        .expect("a check-back of the pending half after the restart");
    let half = Half::from_check(&check);
    end_transaction(&mut second.client, "TxKill", GROUP, &half, COMMIT, true);
    let mut reader = broker.client();
    let seen = collect(&mut reader, "TxKill", 0, 51, Duration::from_secs(10));
    assert_eq!(seen.len(), 51);
    assert_eq!(
        seen.iter()
            .filter(|(message, _)| message.body.as_ref() == b"survivor")
            .count(),
        1
    );
    wait_pruned(metrics, 1, "after the check-back");
    assert!(second.next_check(Duration::from_millis(2500)).is_none());
    let read = metric(metrics, OPS_READ);
    assert!(
        read < 50.0,
        "the restarted checker read {read} op records: the 50 before the checkpoint again"
    );
    assert_eq!(drain(&mut reader, "TxKill", 0).len(), 51);
}
