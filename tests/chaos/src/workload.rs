//! The workload: several comet-client producers send to one topic with sharding keys
//! (`send_orderly`: a key always goes to the same queue). Each key's messages are numbered;
//! a producer sends one key's next number only after the previous one was answered SEND_OK,
//! retrying a failed send (same key, same number) until it is, so every key's acknowledged
//! order is its numbering. Every SEND_OK and every failed attempt is recorded for the
//! checker.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use comet_client::{ClientConfig, Message, Producer, ProducerConfig, SendStatus};

use crate::ChaosError;

/// The topic probe sends go to, so they never mix with the workload's messages.
pub const PROBE_TOPIC: &str = "ChaosProbe";
/// Queues of every topic.
pub const QUEUES: i32 = 4;
/// Sharding keys per producer.
pub const KEYS_PER_PRODUCER: usize = 3;
/// How long a producer waits after a failed attempt before the next one.
const RETRY_PAUSE: Duration = Duration::from_millis(50);

/// A message's identity: its body is `"<key> <seq>"`.
pub fn body_of(key: &str, seq: u64) -> String {
    format!("{key} {seq}")
}

/// A body's key and number, if it is one of the workload's.
pub fn parse_body(body: &[u8]) -> Option<(String, u64)> {
    let text = std::str::from_utf8(body).ok()?;
    let (key, seq) = text.split_once(' ')?;
    Some((key.to_owned(), seq.parse().ok()?))
}

/// One send answered SEND_OK.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acked {
    /// The sharding key.
    pub key: String,
    /// The key's message number.
    pub seq: u64,
    /// The queue it went to.
    pub queue: i32,
    /// Its queue offset.
    pub offset: i64,
}

/// One attempt that was not answered SEND_OK (it may still have been stored).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failed {
    /// The sharding key.
    pub key: String,
    /// The key's message number.
    pub seq: u64,
    /// The error or the non-OK status.
    pub reason: String,
}

/// What the producers recorded.
#[derive(Clone, Debug, Default)]
pub struct History {
    /// Every SEND_OK, in the order each producer received them.
    pub acked: Vec<Acked>,
    /// Every failed attempt.
    pub failed: Vec<Failed>,
}

/// Running producers.
pub struct Workload {
    stop: Arc<AtomicBool>,
    acked: Arc<AtomicUsize>,
    failed: Arc<AtomicUsize>,
    last_failure: Arc<Mutex<String>>,
    producers: Vec<JoinHandle<Result<History, ChaosError>>>,
}

impl Workload {
    /// Starts `producers` producers sending to `topic` through `namesrv`; `label` makes
    /// their keys unique to the round.
    pub fn start(namesrv: &str, topic: &str, producers: usize, label: &str) -> Workload {
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(AtomicUsize::new(0));
        let failed = Arc::new(AtomicUsize::new(0));
        let last_failure = Arc::new(Mutex::new(String::new()));
        let producers = (0..producers)
            .map(|index| {
                let (stop, acked, failed) = (stop.clone(), acked.clone(), failed.clone());
                let last_failure = last_failure.clone();
                let (namesrv, topic) = (namesrv.to_owned(), topic.to_owned());
                let name = format!("{label}p{index}");
                std::thread::spawn(move || {
                    let counters = Counters {
                        stop: &stop,
                        acked: &acked,
                        failed: &failed,
                        last_failure: &last_failure,
                    };
                    produce(&namesrv, &topic, &name, &counters)
                })
            })
            .collect();
        Workload {
            stop,
            acked,
            failed,
            last_failure,
            producers,
        }
    }

    /// SEND_OKs so far.
    pub fn acked(&self) -> usize {
        self.acked.load(Ordering::SeqCst)
    }

    /// Failed attempts so far.
    pub fn failed(&self) -> usize {
        self.failed.load(Ordering::SeqCst)
    }

    /// The latest failed attempt's reason, empty when none failed.
    pub fn last_failure(&self) -> String {
        self.last_failure
            .lock()
            .map(|reason| reason.clone())
            .unwrap_or_default()
    }

    /// Stops the producers and returns what they recorded.
    pub fn stop(mut self) -> Result<History, ChaosError> {
        self.stop.store(true, Ordering::SeqCst);
        let mut history = History::default();
        for producer in std::mem::take(&mut self.producers) {
            let part = producer
                .join()
                .map_err(|_| ChaosError::Check("a producer thread panicked".into()))??;
            history.acked.extend(part.acked);
            history.failed.extend(part.failed);
        }
        Ok(history)
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// What producers share with the round.
struct Counters<'a> {
    stop: &'a AtomicBool,
    acked: &'a AtomicUsize,
    failed: &'a AtomicUsize,
    last_failure: &'a Mutex<String>,
}

fn produce(
    namesrv: &str,
    topic: &str,
    name: &str,
    counters: &Counters,
) -> Result<History, ChaosError> {
    let client = ClientConfig {
        instance_name: name.to_owned(),
        // A new master's route reaches the producer within a second.
        poll_name_server_interval: Duration::from_secs(1),
        ..ClientConfig::with_namesrv(namesrv)
    };
    let mut config = ProducerConfig::new("chaos_pg", client);
    // Retries are the workload's own, so each attempt is recorded.
    config.retry_times_when_send_failed = 0;
    config.send_latency_fault_enable = false;
    let started = Producer::new(config).and_then(|producer| {
        producer.start()?;
        Ok(producer)
    });
    let producer = started
        .map_err(|error| ChaosError::Check(format!("producer {name} did not start: {error}")))?;
    let keys: Vec<String> = (0..KEYS_PER_PRODUCER)
        .map(|key| format!("{name}k{key}"))
        .collect();
    let mut next_seq = vec![0u64; keys.len()];
    let mut history = History::default();
    'keys: for turn in 0.. {
        let slot = turn % keys.len();
        let (key, seq) = (&keys[slot], next_seq[slot]);
        loop {
            if counters.stop.load(Ordering::SeqCst) {
                break 'keys;
            }
            let message = Message::new(topic, body_of(key, seq).into_bytes());
            let reason = match producer.send_orderly(message, key) {
                Ok(result) if result.status == SendStatus::SendOk => {
                    history.acked.push(Acked {
                        key: key.clone(),
                        seq,
                        queue: result.queue.queue_id,
                        offset: result.queue_offset,
                    });
                    counters.acked.fetch_add(1, Ordering::SeqCst);
                    next_seq[slot] += 1;
                    continue 'keys;
                }
                Ok(result) => format!("{:?}", result.status),
                Err(error) => error.to_string(),
            };
            if let Ok(mut last) = counters.last_failure.lock() {
                last.clone_from(&reason);
            }
            history.failed.push(Failed {
                key: key.clone(),
                seq,
                reason,
            });
            counters.failed.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(RETRY_PAUSE);
        }
    }
    producer.shutdown();
    Ok(history)
}
