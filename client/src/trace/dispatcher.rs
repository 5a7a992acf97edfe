//! Sends trace records off the send and consume paths: [`TraceDispatcher::append`] never
//! blocks; a thread of its own batches records (at most [`BATCH_RECORDS_MAX`], or what
//! arrived within [`BATCH_WAIT`]) into trace messages of at most [`TRACE_BODY_BYTES_MAX`]
//! and sends them with a producer of its own (group [`super::TRACE_PRODUCER_GROUP_PREFIX`] +
//! the traced group), as Java's `AsyncTraceDispatcher` does. When the queue is full a record
//! is dropped and counted: tracing must never slow or fail the traced application.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{encode, TraceRecord, TRACE_PRODUCER_GROUP_PREFIX};
use crate::config::ClientConfig;
use crate::error::Result;
use crate::message::Message;
use crate::producer::{Producer, ProducerConfig};
use crate::util::lock;

/// Records waiting to be sent; more are dropped (Java's `queueSize`, 2048).
pub const QUEUED_RECORDS_MAX: usize = 2048;
/// Records per batch (Java's `batchSize`, 100).
pub const BATCH_RECORDS_MAX: usize = 100;
/// How long a batch waits for more records after its first.
pub const BATCH_WAIT: Duration = Duration::from_millis(5);
/// Largest trace message body (Java's trace producer `maxMessageSize`, 128 KiB).
pub const TRACE_BODY_BYTES_MAX: usize = 128 * 1024;
/// Time given to one trace message's send.
pub const TRACE_SEND_TIMEOUT: Duration = Duration::from_secs(5);

/// A traced client's dispatcher; [`TraceDispatcher::shutdown`] sends what is queued and
/// stops its thread.
pub struct TraceDispatcher {
    sender: Mutex<Option<SyncSender<TraceRecord>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    dropped: AtomicU64,
    sent_messages: Arc<AtomicU64>,
}

impl TraceDispatcher {
    /// Starts the dispatcher of `traced_group`, writing to `trace_topic` through the name
    /// servers of `client`.
    pub fn start(
        client: &ClientConfig,
        traced_group: &str,
        trace_topic: &str,
    ) -> Result<Arc<TraceDispatcher>> {
        crate::validate::check_topic(trace_topic)?;
        let group = format!("{TRACE_PRODUCER_GROUP_PREFIX}{traced_group}");
        // The trace topic is named as is: a system topic is never in a namespace, and a
        // customized one is written as configured.
        let mut client = client.clone();
        client.namespace = None;
        let mut config = ProducerConfig::new(&group, client);
        config.send_timeout = TRACE_SEND_TIMEOUT;
        config.enable_msg_trace = false;
        let producer = Producer::new(config)?;
        producer.start()?;
        let (sender, receiver) = sync_channel(QUEUED_RECORDS_MAX);
        let sent_messages = Arc::new(AtomicU64::new(0));
        let sent = sent_messages.clone();
        let topic = trace_topic.to_owned();
        let thread = std::thread::Builder::new()
            .name("comet-trace".into())
            .spawn(move || run(&receiver, &producer, &topic, &sent))
            .expect("spawning the trace thread");
        Ok(Arc::new(TraceDispatcher {
            sender: Mutex::new(Some(sender)),
            thread: Mutex::new(Some(thread)),
            dropped: AtomicU64::new(0),
            sent_messages,
        }))
    }

    /// Queues `record`; drops it (and counts it) when the queue is full or the dispatcher
    /// was shut down.
    pub fn append(&self, record: TraceRecord) {
        let sender = lock(&self.sender).clone();
        let queued = match sender {
            Some(sender) => match sender.try_send(record) {
                Ok(()) => true,
                Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
            },
            None => false,
        };
        if !queued {
            let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if dropped.is_power_of_two() {
                log::warn!("trace records dropped so far: {dropped} (the trace queue is full)");
            }
        }
    }

    /// Records dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Trace messages stored so far.
    pub fn sent_messages(&self) -> u64 {
        self.sent_messages.load(Ordering::Relaxed)
    }

    /// Lets the thread send what is queued and stop, without waiting for it; later records
    /// are dropped. Idempotent.
    pub fn close(&self) {
        lock(&self.sender).take();
    }

    /// Sends what is queued, then stops the thread and its producer. Idempotent.
    pub fn shutdown(&self) {
        self.close();
        if let Some(thread) = lock(&self.thread).take() {
            if thread.join().is_err() {
                log::error!("the trace thread panicked");
            }
        }
    }
}

impl Drop for TraceDispatcher {
    fn drop(&mut self) {
        // The thread holds no reference to the dispatcher: closing lets it finish.
        self.close();
    }
}

/// The dispatcher thread: batches until every sender is gone, then sends the rest.
fn run(receiver: &Receiver<TraceRecord>, producer: &Producer, topic: &str, sent: &AtomicU64) {
    while let Ok(first) = receiver.recv() {
        let mut batch = vec![first];
        let deadline = Instant::now() + BATCH_WAIT;
        while batch.len() < BATCH_RECORDS_MAX {
            match receiver.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(record) => batch.push(record),
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
            }
        }
        for message in trace_messages(topic, &batch) {
            match producer.send(message) {
                Ok(_) => {
                    sent.fetch_add(1, Ordering::Relaxed);
                }
                Err(error) => log::info!("a trace message to {topic} was not sent: {error}"),
            }
        }
    }
    producer.shutdown();
}

/// The trace messages of `batch`: records of one traced topic travel together, each body at
/// most [`TRACE_BODY_BYTES_MAX`] (a body is cut after the record that reaches it, as Java
/// does), keyed by every record's message id and keys.
pub fn trace_messages(trace_topic: &str, batch: &[TraceRecord]) -> Vec<Message> {
    let mut by_topic: BTreeMap<&str, Vec<&TraceRecord>> = BTreeMap::new();
    for record in batch {
        by_topic.entry(record.topic()).or_default().push(record);
    }
    let mut messages = Vec::new();
    for records in by_topic.values() {
        let mut body = String::new();
        let mut keys = BTreeSet::new();
        for record in records {
            encode(record, &mut body);
            keys.extend(record.keys());
            if body.len() >= TRACE_BODY_BYTES_MAX {
                messages.push(trace_message(trace_topic, &mut body, &mut keys));
            }
        }
        if !body.is_empty() {
            messages.push(trace_message(trace_topic, &mut body, &mut keys));
        }
    }
    messages
}

fn trace_message(topic: &str, body: &mut String, keys: &mut BTreeSet<String>) -> Message {
    Message::new(topic, std::mem::take(body)).with_keys(std::mem::take(keys))
}

#[cfg(test)]
mod tests {
    use super::super::{decode, PubTrace, TraceMessageType};
    use super::*;

    fn record(topic: &str, msg_id: &str, keys: Option<&str>) -> TraceRecord {
        TraceRecord::Pub(PubTrace {
            timestamp_ms: 1,
            region_id: "r".into(),
            group: "g".into(),
            topic: topic.into(),
            msg_id: msg_id.into(),
            tags: None,
            keys: keys.map(str::to_owned),
            store_host: "h".into(),
            body_length: 1,
            cost_ms: 1,
            msg_type: TraceMessageType::Normal,
            offset_msg_id: "o".into(),
            success: true,
        })
    }

    // Proves a batch becomes one message per traced topic, keyed by its ids and keys, whose
    // body reads back as the records in order.
    #[test]
    fn batches_group_by_topic_and_carry_keys() {
        let batch = [
            record("A", "id1", Some("k1")),
            record("B", "id2", None),
            record("A", "id3", None),
        ];
        let messages = trace_messages("RMQ_SYS_TRACE_TOPIC", &batch);
        assert_eq!(messages.len(), 2);
        let first = &messages[0];
        assert_eq!(first.topic, "RMQ_SYS_TRACE_TOPIC");
        assert_eq!(first.keys(), Some("id1 id3 k1"));
        let body = std::str::from_utf8(&first.body).unwrap();
        assert_eq!(
            decode(body).unwrap(),
            vec![batch[0].clone(), batch[2].clone()]
        );
    }

    // Proves no trace body grows far past the limit: a batch of large records splits.
    #[test]
    fn bodies_are_bounded() {
        let long_id = "x".repeat(40 * 1024);
        let batch: Vec<TraceRecord> = (0..8).map(|_| record("A", &long_id, None)).collect();
        let messages = trace_messages("T", &batch);
        assert!(messages.len() > 1);
        for message in &messages {
            assert!(message.body.len() < TRACE_BODY_BYTES_MAX + 41 * 1024);
        }
    }
}
