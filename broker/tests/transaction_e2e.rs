//! Transactional messages end to end (issue 9, point 4): commit, rollback, unknown then
//! check-back, and a producer that restarts between its half message and its decision.

mod common;
mod sched_common;

use std::time::Duration;

use comet_store::offset::POSITION_BITS;

use comet_proto::message::decode_records;
use comet_proto::properties::names;
use comet_proto::{RemotingCommand, ResponseCode};
use common::{Broker, Client, TempDir};
use sched_common::transaction::{end_transaction, end_transaction_request, Half, Producer, COMMIT};
use sched_common::{collect, drain};

const GROUP: &str = "tx_pg";
const ROLLBACK: i32 = 12;
const UNKNOWN: i32 = 0;

fn send_half(client: &mut Client, topic: &str, body: &str) -> Half {
    sched_common::transaction::send_half(client, topic, GROUP, body)
}

fn end(client: &mut Client, topic: &str, half: &Half, decision: i32, from_check: bool) {
    end_transaction(client, topic, GROUP, half, decision, from_check);
}

/// END_TRANSACTION as a two-way request (as non-Java clients may send it); its answer.
fn end_two_way(client: &mut Client, topic: &str, half: &Half, decision: i32) -> RemotingCommand {
    client.call(end_transaction_request(topic, GROUP, half, decision, false))
}

/// Asserts that a decision for an already resolved half is refused as Apache refuses a half
/// it cannot find.
fn assert_refused(response: &RemotingCommand) {
    assert_eq!(response.response_code(), ResponseCode::SYSTEM_ERROR);
    assert_eq!(
        response.remark.as_deref(),
        Some("Find prepared transaction message failed")
    );
}

fn check_broker(directory: &TempDir) -> Broker {
    Broker::start(
        &directory.0,
        2,
        &[
            "-o",
            "transactionCheckInterval=300",
            "-o",
            "transactionTimeOut=1000",
        ],
    )
}

// Proves commit and rollback: a half message is invisible until END_TRANSACTION commits it;
// the committed message carries the COMMIT type, the half's offset and no TRAN_MSG; a rolled
// back half never appears; neither is checked back later.
#[test]
fn commit_and_rollback() {
    let directory = TempDir::new("e2e-tx-commit");
    let broker = check_broker(&directory);
    let mut producer = Producer::connect(broker.client(), "127.0.0.1@tx-commit", GROUP);
    let committed = send_half(&mut producer.client, "TxTopic", "yes");
    let rolled_back = send_half(&mut producer.client, "TxTopic", "no");
    // What is checked is that the halves stay invisible: a window is the only way.
    std::thread::sleep(Duration::from_millis(300));
    let mut reader = broker.client();
    assert!(
        drain(&mut reader, "TxTopic", 0).is_empty(),
        "a half message is visible"
    );
    end(&mut producer.client, "TxTopic", &committed, COMMIT, false);
    end(
        &mut producer.client,
        "TxTopic",
        &rolled_back,
        ROLLBACK,
        false,
    );
    let seen = collect(&mut reader, "TxTopic", 0, 1, Duration::from_secs(5));
    assert_eq!(seen.len(), 1);
    let message = &seen[0].0;
    assert_eq!(message.body.as_ref(), b"yes");
    assert_eq!(message.sysflag & 0xC, COMMIT);
    assert_eq!(
        message.prepared_transaction_offset,
        committed.commit_log_offset
    );
    assert_eq!(message.property(names::TRAN_MSG), None);
    assert_eq!(message.uniq_key(), Some(committed.unique_key.as_str()));
    // Past the timeout, nothing is pending: no check-back, and still one message.
    assert!(producer.next_check(Duration::from_millis(2500)).is_none());
    end(&mut producer.client, "TxTopic", &committed, COMMIT, false);
    // Two-way decisions for resolved halves are answered with an error and change nothing.
    assert_refused(&end_two_way(&mut reader, "TxTopic", &committed, COMMIT));
    assert_refused(&end_two_way(&mut reader, "TxTopic", &committed, ROLLBACK));
    assert_refused(&end_two_way(&mut reader, "TxTopic", &rolled_back, COMMIT));
    // What is checked is that no second commit appears: a window is the only way.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        drain(&mut reader, "TxTopic", 0).len(),
        1,
        "a commit was applied twice"
    );
}

// Proves a half is stored by the shard its connection landed on (its own half queue, so
// transactional load spreads over every shard instead of one), and that halves of either
// shard are committed and stored once.
#[test]
fn halves_are_stored_where_they_arrive() {
    let directory = TempDir::new("e2e-tx-spread");
    let broker = check_broker(&directory);
    let mut by_log: std::collections::BTreeMap<i64, (Client, Half)> = Default::default();
    // Connections spread over the shards by the kernel's hash; 2 of 64 landing on the same
    // one is all but certain to end within a few.
    for attempt in 0..64 {
        let mut client = broker.client();
        let half = send_half(&mut client, "TxSpread", &format!("spread-{attempt}"));
        let log_id = half.commit_log_offset >> POSITION_BITS;
        by_log.entry(log_id).or_insert((client, half));
        if by_log.len() == 2 {
            break;
        }
    }
    assert_eq!(
        by_log.len(),
        2,
        "every half went to one log: {:?}",
        by_log.keys().collect::<Vec<_>>()
    );
    for (client, half) in by_log.values_mut() {
        end(client, "TxSpread", half, COMMIT, false);
    }
    let mut reader = broker.client();
    let seen = collect(&mut reader, "TxSpread", 0, 2, Duration::from_secs(5));
    let mut keys: Vec<String> = seen
        .iter()
        .filter_map(|(message, _)| message.uniq_key().map(str::to_owned))
        .collect();
    keys.sort();
    let mut expected: Vec<String> = by_log
        .values()
        .map(|(_, half)| half.unique_key.clone())
        .collect();
    expected.sort();
    assert_eq!(keys, expected);
}

fn answer_check(producer: &mut Producer, check: &RemotingCommand, decision: i32) -> String {
    let messages = decode_records(check.body.clone());
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].topic, "TxCheck");
    assert_eq!(messages[0].property(names::PGROUP), Some(GROUP));
    let half = Half::from_check(check);
    end(&mut producer.client, "TxCheck", &half, decision, true);
    String::from_utf8(messages[0].body.to_vec()).unwrap()
}

// Proves an UNKNOWN decision leaves the half pending, the broker checks it back on the
// producer's connection after transactionTimeOut, and the COMMIT answer stores it once.
#[test]
fn unknown_then_check_back_commits() {
    let directory = TempDir::new("e2e-tx-check");
    let broker = check_broker(&directory);
    let mut producer = Producer::connect(broker.client(), "127.0.0.1@tx-check", GROUP);
    let half = send_half(&mut producer.client, "TxCheck", "checked");
    end(&mut producer.client, "TxCheck", &half, UNKNOWN, false);
    let check = producer
        .next_check(Duration::from_secs(10))
        .expect("a check-back");
    assert_eq!(answer_check(&mut producer, &check, COMMIT), "checked");
    let mut reader = broker.client();
    let seen = collect(&mut reader, "TxCheck", 0, 1, Duration::from_secs(5));
    assert_eq!(seen.len(), 1);
    assert!(producer.next_check(Duration::from_millis(2500)).is_none());
    assert_eq!(drain(&mut reader, "TxCheck", 0).len(), 1);
}

// Proves a producer that goes away between its half message and its decision is asked
// again on its new connection (same group) and its answer commits the message exactly
// once, also across a broker restart with the half pending.
#[test]
fn producer_restart_between_half_and_decision() {
    let directory = TempDir::new("e2e-tx-restart");
    let mut broker = check_broker(&directory);
    let first = Producer::connect(broker.client(), "127.0.0.1@tx-first", GROUP);
    let mut first = first;
    send_half(&mut first.client, "TxCheck", "survivor");
    drop(first);
    broker.stop();
    broker.restart(2);
    let mut second = Producer::connect(broker.client(), "127.0.0.1@tx-second", GROUP);
    let check = second
        .next_check(Duration::from_secs(10))
        .expect("a check-back on the new connection");
    assert_eq!(answer_check(&mut second, &check, COMMIT), "survivor");
    let mut reader = broker.client();
    let seen = collect(&mut reader, "TxCheck", 0, 1, Duration::from_secs(5));
    assert_eq!(seen.len(), 1);
    assert!(second.next_check(Duration::from_millis(2500)).is_none());
    assert_eq!(drain(&mut reader, "TxCheck", 0).len(), 1);
}

// Proves a half never resolved is checked transactionCheckMax times and then discarded to
// TRANS_CHECK_MAX_TIME_TOPIC, never reaching its topic, and that a commit arriving after the
// discard is refused.
#[test]
fn unanswered_half_is_discarded_after_check_max() {
    let directory = TempDir::new("e2e-tx-max");
    let broker = Broker::start(
        &directory.0,
        2,
        &[
            "-o",
            "transactionCheckInterval=200",
            "-o",
            "transactionTimeOut=300",
            "-o",
            "transactionCheckMax=2",
        ],
    );
    let mut producer = Producer::connect(broker.client(), "127.0.0.1@tx-max", GROUP);
    let half = send_half(&mut producer.client, "TxMax", "abandoned");
    let mut checks = 0;
    while producer.next_check(Duration::from_secs(3)).is_some() {
        checks += 1;
        assert!(checks <= 2, "checked more than transactionCheckMax times");
    }
    assert_eq!(checks, 2);
    let mut reader = broker.client();
    let discarded = drain(&mut reader, "TRANS_CHECK_MAX_TIME_TOPIC", 0);
    assert_eq!(discarded.len(), 1);
    assert_refused(&end_two_way(&mut reader, "TxMax", &half, COMMIT));
    // What is checked is that the discarded half never appears: a window is the only way.
    std::thread::sleep(Duration::from_millis(300));
    assert!(drain(&mut reader, "TxMax", 0).is_empty());
}
