//! The transactional producer against a real Comet broker (issue 9 point 4): commit,
//! rollback, unknown then check-back, and a producer that restarts between its half message
//! and its decision. The broker checks undecided halves every 300 ms once they are 1 s old,
//! so check-backs come within seconds.

mod live;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use comet_client::{
    LocalTransactionState, Message, Producer, ProducerConfig, TransactionProducer,
    TransactionProducerConfig,
};
use comet_test_support::wait_until;
use live::{consumer_config, distinct_bodies, recording_consumer, unique, Live};

/// Broker settings that make check-backs quick.
const QUICK_CHECKS: [&str; 4] = [
    "-o",
    "transactionCheckInterval=300",
    "-o",
    "transactionTimeOut=1000",
];

/// Check-backs a listener answered: (UNIQ_KEY, body) each.
type Checked = Arc<Mutex<Vec<(String, String)>>>;

/// A started transactional producer of `group` whose check-back listener records what it is
/// asked about and answers `answer`.
fn transaction_producer(
    live: &Live,
    group: &str,
    topics: &[&str],
    answer: LocalTransactionState,
) -> (TransactionProducer, Checked) {
    let mut config = TransactionProducerConfig::new(ProducerConfig::new(group, live.client()));
    config.topics = topics.iter().map(|topic| topic.to_string()).collect();
    let checked: Checked = Arc::default();
    let sink = checked.clone();
    let producer = TransactionProducer::new(config, move |half| {
        let body = String::from_utf8_lossy(&half.body).into_owned();
        let mut sink = sink.lock().unwrap();
        sink.push((half.client_msg_id().to_owned(), body));
        answer
    })
    .unwrap();
    producer.start().unwrap();
    (producer, checked)
}

/// A plain producer, for markers sent after the transactional messages.
fn plain_producer(live: &Live) -> Producer {
    let producer = Producer::new(ProducerConfig::new(&unique("tx_plain"), live.client())).unwrap();
    producer.start().unwrap();
    producer
}

// Proves a committed transaction delivers its message once, with the id the send returned,
// and that the local transaction ran exactly once after the half was stored.
#[test]
fn commit_delivers_the_message() {
    let live = Live::start("client-tx-commit", &QUICK_CHECKS);
    let topic = unique("TxCommit");
    let (producer, checked) = transaction_producer(
        &live,
        &unique("tx_pg"),
        &[],
        LocalTransactionState::RollbackMessage,
    );
    let runs = AtomicUsize::new(0);
    let result = producer
        .send_in_transaction(
            Message::new(topic.as_str(), "committed"),
            |message, sent| {
                runs.fetch_add(1, Ordering::SeqCst);
                assert_eq!(message.uniq_key(), Some(sent.msg_id.as_str()));
                LocalTransactionState::CommitMessage
            },
        )
        .unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(
        result.local_transaction_state,
        LocalTransactionState::CommitMessage
    );
    let (consumer, seen) = recording_consumer(consumer_config(&live, &unique("tx_cg")), &topic);
    wait_until("the committed message", Duration::from_secs(30), || {
        !seen.lock().unwrap().is_empty()
    });
    // Long enough for a wrongly pending half to be checked back (1 s timeout, 300 ms scans).
    thread::sleep(Duration::from_secs(2));
    consumer.shutdown();
    producer.shutdown();
    let seen = seen.lock().unwrap();
    assert_eq!(
        *seen,
        [(result.send_result.msg_id.clone(), "committed".into())]
    );
    assert!(
        checked.lock().unwrap().is_empty(),
        "a decided half was checked"
    );
}

// Proves a rolled-back transaction never delivers its message (a plain message sent after
// it arrives alone) and is never checked back.
#[test]
fn rollback_drops_the_message() {
    let live = Live::start("client-tx-rollback", &QUICK_CHECKS);
    let topic = unique("TxRollback");
    let (producer, checked) = transaction_producer(
        &live,
        &unique("tx_pg"),
        &[],
        LocalTransactionState::CommitMessage,
    );
    let result = producer
        .send_in_transaction(Message::new(topic.as_str(), "rolled back"), |_, _| {
            LocalTransactionState::RollbackMessage
        })
        .unwrap();
    assert_eq!(
        result.local_transaction_state,
        LocalTransactionState::RollbackMessage
    );
    let plain = plain_producer(&live);
    plain.send(Message::new(topic.as_str(), "marker")).unwrap();
    let (consumer, seen) = recording_consumer(consumer_config(&live, &unique("tx_cg")), &topic);
    wait_until("the marker", Duration::from_secs(30), || {
        !seen.lock().unwrap().is_empty()
    });
    // A wrongly pending half would be checked back, and committed, within this time.
    thread::sleep(Duration::from_secs(3));
    consumer.shutdown();
    plain.shutdown();
    producer.shutdown();
    assert_eq!(distinct_bodies(&seen), ["marker".to_string()].into());
    assert!(
        checked.lock().unwrap().is_empty(),
        "a decided half was checked"
    );
}

// Proves an Unknown decision leaves the half pending until the broker checks it back: the
// check-back listener sees the half (its id and body) and its Commit answer delivers it.
#[test]
fn unknown_then_check_back_commits() {
    let live = Live::start("client-tx-unknown", &QUICK_CHECKS);
    let topic = unique("TxUnknown");
    let (producer, checked) = transaction_producer(
        &live,
        &unique("tx_pg"),
        &[],
        LocalTransactionState::CommitMessage,
    );
    let message = Message::new(topic.as_str(), "decided later")
        .with_property("order", "42")
        .unwrap();
    let result = producer
        .send_in_transaction(message, |_, _| LocalTransactionState::Unknown)
        .unwrap();
    assert_eq!(
        result.local_transaction_state,
        LocalTransactionState::Unknown
    );
    let (consumer, seen) = recording_consumer(consumer_config(&live, &unique("tx_cg")), &topic);
    wait_until(
        "the message committed by the check-back",
        Duration::from_secs(40),
        || !seen.lock().unwrap().is_empty(),
    );
    consumer.shutdown();
    producer.shutdown();
    let msg_id = result.send_result.msg_id.clone();
    assert_eq!(
        *seen.lock().unwrap(),
        [(msg_id.clone(), "decided later".into())]
    );
    let checked = checked.lock().unwrap();
    assert!(!checked.is_empty());
    assert!(
        checked
            .iter()
            .all(|entry| *entry == (msg_id.clone(), "decided later".into())),
        "{checked:?}"
    );
}

// Proves a producer that goes away between its half message and its decision loses
// nothing: a new instance of the same group (listing the topic so it heartbeats at start)
// answers the broker's check-back, and its Commit delivers the message once.
#[test]
fn a_restarted_producer_answers_the_check_back() {
    let live = Live::start("client-tx-restart", &QUICK_CHECKS);
    let topic = unique("TxRestart");
    let group = unique("tx_pg");
    // The first instance answers any check-back with Unknown, which decides nothing.
    let (first, _) = transaction_producer(&live, &group, &[], LocalTransactionState::Unknown);
    let result = first
        .send_in_transaction(Message::new(topic.as_str(), "survives"), |_, _| {
            LocalTransactionState::Unknown
        })
        .unwrap();
    first.shutdown();
    let (second, second_checked) = transaction_producer(
        &live,
        &group,
        &[topic.as_str()],
        LocalTransactionState::CommitMessage,
    );
    let (consumer, seen) = recording_consumer(consumer_config(&live, &unique("tx_cg")), &topic);
    wait_until(
        "the message committed by the new instance",
        Duration::from_secs(40),
        || !seen.lock().unwrap().is_empty(),
    );
    // Room for a duplicate commit to show up, if there were one.
    thread::sleep(Duration::from_secs(2));
    consumer.shutdown();
    second.shutdown();
    let msg_id = result.send_result.msg_id.clone();
    assert_eq!(*seen.lock().unwrap(), [(msg_id.clone(), "survives".into())]);
    assert!(second_checked
        .lock()
        .unwrap()
        .iter()
        .any(|(id, _)| *id == msg_id));
}
