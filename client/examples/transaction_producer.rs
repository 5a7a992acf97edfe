//! Sends transactional messages: each one's local transaction is decided by its index
//! (commit, rollback, or unknown, which the broker later resolves through the check-back
//! listener). The example keeps running for `--seconds` so check-backs can arrive; the
//! broker checks a half once it is `transactionTimeOut` old (6 s by default) at its next
//! `transactionCheckInterval` (60 s by default).
//!
//! ```text
//! cargo run -p comet-client --example transaction_producer -- --namesrv 127.0.0.1:9876
//! ```

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use comet_client::{
    ClientConfig, LocalTransactionState, Message, ProducerConfig, TransactionProducer,
    TransactionProducerConfig,
};

const USAGE: &str = "transaction_producer [--namesrv 127.0.0.1:9876] [--topic TopicTest] \
[--group example_tx_producer] [--count 9] [--seconds 90]";

/// What the application's own store says about each transaction (here: in memory).
type Ledger = Arc<Mutex<HashMap<String, LocalTransactionState>>>;

fn main() -> Result<(), comet_client::ClientError> {
    env_logger::init();
    let args = common::Args::parse(USAGE);
    let topic = args.get("topic", "TopicTest");
    let client = ClientConfig::with_namesrv(&args.get("namesrv", "127.0.0.1:9876"));
    let mut config = TransactionProducerConfig::new(ProducerConfig::new(
        &args.get("group", "example_tx_producer"),
        client,
    ));
    config.topics = vec![topic.clone()];
    let ledger: Ledger = Arc::default();
    let checks = ledger.clone();
    // The check-back listener answers from the ledger: a transaction that was "unknown"
    // when it ran has committed by the time the broker asks.
    let producer = TransactionProducer::new(config, move |half| {
        let known = checks.lock().unwrap().get(half.client_msg_id()).copied();
        let answer = match known {
            Some(LocalTransactionState::RollbackMessage) => LocalTransactionState::RollbackMessage,
            _ => LocalTransactionState::CommitMessage,
        };
        println!(
            "check-back msgId={} -> {}",
            half.client_msg_id(),
            answer.name()
        );
        answer
    })?;
    producer.start()?;
    for index in 0..args.number("count", 9) {
        let message = Message::new(topic.as_str(), format!("Hello transaction {index}"))
            .with_keys([format!("tx-{index}")]);
        let result = producer.send_in_transaction(message, |_, sent| {
            let state = match index % 3 {
                0 => LocalTransactionState::CommitMessage,
                1 => LocalTransactionState::RollbackMessage,
                _ => LocalTransactionState::Unknown,
            };
            ledger.lock().unwrap().insert(sent.msg_id.clone(), state);
            state
        });
        match result {
            Ok(result) => println!(
                "{} msgId={} local={}",
                result.send_result.status.name(),
                result.send_result.msg_id,
                result.local_transaction_state.name()
            ),
            Err(error) => eprintln!("transaction {index} failed: {error}"),
        }
    }
    std::thread::sleep(Duration::from_secs(args.number("seconds", 90)));
    producer.shutdown();
    Ok(())
}
