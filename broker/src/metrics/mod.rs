//! The broker's metrics under Apache RocketMQ's names (Java's `BrokerMetricsConstant`,
//! `RemotingMetricsConstant`, `DefaultStoreMetricsConstant`), so dashboards made for a Java
//! broker's PROM exporter read Comet, plus Comet's own per-shard figures
//! (docs/operations.md#metrics).
//!
//! **Counting.** Each shard counts into its own slot, a mutex only that shard takes on the
//! request path: uncontended but for a scrape's short visit. A send adds one topic lookup
//! (no allocation once the topic has been seen) and a request one lookup by its codes; with
//! metrics off nothing is counted and no clock is read. Figures the broker keeps anyway
//! (messages delivered per topic and group, traffic across shards, the stores' statistics,
//! the tables) are read at scrape time, not counted twice; the per-shard ones a scrape cannot
//! reach from another core (the store, replication, the mesh) are published by each shard
//! once a second ([`Metrics::publish`]). Figures computed from the queues a shard owns
//! (consumer lag and in-flight messages, pending halves, the logs' oldest record) are
//! computed by that shard when a scrape asks it, one mesh call per shard per scrape
//! ([`consumer`], [`half`], [`Metrics::publish_consumers`]).
//!
//! **Serving.** `encode` writes a [`Snapshot`] in the Prometheus text format with the
//! `prometheus-client` crate; `http` reads the scrape requests; the endpoint itself, on
//! shard 0, is `crate::metrics_server`.

pub mod consumer;
pub mod encode;
pub mod half;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use comet_proto::properties::{self, names};
use comet_store::{RecoveryProgress, RecoveryStatus};

/// Topics one shard counts sends for at most; past that a new topic is not counted (logged
/// once), so a flood of topic names cannot grow the slot without bound (Java caps each
/// metric's series, `metricsOtelCardinalityLimit`).
pub const TOPICS_PER_SHARD_MAX: usize = 50_000;

/// Upper bounds of `rocketmq_message_size`'s buckets, in bytes (Java's view: 1 KiB, 4 KiB,
/// 512 KiB, 1 MiB, 2 MiB, 4 MiB).
pub const MESSAGE_SIZE_BOUNDS: [u64; 6] = [
    1024,
    4 * 1024,
    512 * 1024,
    1024 * 1024,
    2 * 1024 * 1024,
    4 * 1024 * 1024,
];

/// Upper bounds of `rocketmq_rpc_latency`'s buckets, in milliseconds (Java's
/// `RemotingMetricsManager` view).
pub const RPC_LATENCY_BOUNDS_MS: [u64; 9] = [1, 3, 5, 7, 10, 100, 1000, 2000, 3000];

pub use comet_store::histogram::{Histogram, StoreHistograms};

/// Upper bounds of `rocketmq_finish_message_latency`'s buckets, in seconds (Java's view: 5 s,
/// 1 min, 10 min, 1 h, 12 h, 24 h).
pub const FINISH_LATENCY_BOUNDS_S: [u64; 6] = [5, 60, 600, 3600, 12 * 3600, 24 * 3600];

/// Java's `TopicMessageType` as its metrics label (`message_type`) gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MessageType {
    /// None of the others.
    Normal,
    /// Carries a sharding key (`__SHARDINGKEY`).
    Fifo,
    /// Delivered later: a delay level, a timer or `__STARTDELIVERTIME`.
    Delay,
    /// A half (prepared) transaction message.
    Transaction,
}

impl MessageType {
    /// Every type, in label order.
    pub const ALL: [MessageType; 4] = [
        MessageType::Normal,
        MessageType::Fifo,
        MessageType::Delay,
        MessageType::Transaction,
    ];

    /// The label value.
    pub fn label(self) -> &'static str {
        match self {
            MessageType::Normal => "normal",
            MessageType::Fifo => "fifo",
            MessageType::Delay => "delay",
            MessageType::Transaction => "transaction",
        }
    }

    /// The type of a send whose properties string is `raw`, decided as Java's
    /// `BrokerMetricsManager.getMessageType` does: transaction first, then FIFO, then delay.
    pub fn of(raw: &str) -> MessageType {
        let mut fifo = false;
        let mut delay = false;
        for (name, value) in properties::iter(raw) {
            match name {
                names::TRAN_MSG if value.eq_ignore_ascii_case("true") => {
                    return MessageType::Transaction;
                }
                names::SHARDING_KEY => fifo = true,
                names::START_DELIVER_TIME
                | names::DELAY
                | names::TIMER_DELIVER_MS
                | names::TIMER_DELAY_SEC
                | names::TIMER_DELAY_MS => delay = true,
                _ => {}
            }
        }
        match (fifo, delay) {
            (true, _) => MessageType::Fifo,
            (false, true) => MessageType::Delay,
            (false, false) => MessageType::Normal,
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The topic a send is counted under: the one the producer named. A delayed or half message
/// is stored under a system topic with its own in `REAL_TOPIC`, and Java counts it under its
/// own. `None` for retry and dead-letter topics, which Java's `messages_in` leaves out.
pub fn counted_topic<'a>(stored_topic: &'a str, raw_properties: &'a str) -> Option<&'a str> {
    let topic = properties::get(raw_properties, names::REAL_TOPIC).unwrap_or(stored_topic);
    let retry_or_dead =
        comet_proto::names::is_retry_topic(topic) || comet_proto::names::is_dlq_topic(topic);
    (!retry_or_dead).then_some(topic)
}

/// Sends stored under one topic and message type.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InCounts {
    /// Messages stored.
    pub messages: u64,
    /// Bytes stored (whole records, as Java's `wroteBytes`).
    pub bytes: u64,
    /// Per send request: its bytes over its messages (Java records the mean of a batch).
    pub size: Histogram<6>,
}

/// What one request is counted under in `rocketmq_rpc_latency`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RpcKey {
    /// The request code.
    pub request_code: i32,
    /// The response code (0 for a one-way request, which gets none).
    pub response_code: i32,
    /// True for a one-way request (`result="oneway"`).
    pub oneway: bool,
}

/// Transaction decisions for one topic (the half's real topic).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TransactionCounts {
    /// Halves committed (Java's `rocketmq_commit_messages_total`).
    pub commits: u64,
    /// Halves rolled back (`rocketmq_rollback_messages_total`).
    pub rollbacks: u64,
    /// Seconds from the half's birth to its commit (`rocketmq_finish_message_latency`).
    pub finish_latency_s: Histogram<6>,
}

/// One shard's counts, written on its request path.
#[derive(Clone, Debug, Default)]
pub struct ShardCounts {
    /// Sends by topic, then by [`MessageType`].
    pub messages_in: HashMap<String, [InCounts; 4]>,
    /// Request latencies in milliseconds.
    pub rpc: HashMap<RpcKey, Histogram<9>>,
    /// Messages sent to a dead-letter queue, by (group, original topic).
    pub dlq: HashMap<(String, String), u64>,
    /// Transaction decisions by topic.
    pub transactions: HashMap<String, TransactionCounts>,
    full_logged: bool,
}

/// One log's store figures, as its shard published them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogFigures {
    /// The log's id.
    pub log_id: u8,
    /// Records appended since start-up.
    pub appended_records: u64,
    /// Bytes of records appended since start-up.
    pub appended_bytes: u64,
    /// Group commits (flushes) completed since start-up.
    pub flushes: u64,
    /// Syncs of commit-log segments since start-up.
    pub fdatasyncs: u64,
    /// Bytes written to commit-log segments since start-up.
    pub written_bytes: u64,
    /// Reads of commit-log data from disk since start-up (the store's `disk_reads`).
    pub disk_reads: u64,
    /// Cold reads served by a read window kept from an earlier pull since start-up.
    pub read_window_hits: u64,
    /// Cold reads that found no kept read window and read the disk since start-up.
    pub read_window_misses: u64,
    /// Bytes appended but not yet durable (Java's `flush_behind_bytes`).
    pub unflushed_bytes: u64,
    /// Bytes of commit log held, from the oldest kept record to the write position.
    pub held_bytes: u64,
    /// Durable bytes not yet in consume queues (Java's `dispatch_behind_bytes`).
    pub dispatch_behind_bytes: u64,
    /// Group-commit sizes and sync latencies.
    pub histograms: StoreHistograms,
    /// What the log's store holds in memory, by part.
    pub memory: comet_store::StoreMemory,
}

/// How far one slave is behind one of this master's logs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FollowerLag {
    /// The log's id.
    pub log_id: u8,
    /// The slave's `brokerId`.
    pub broker_id: u64,
    /// Bytes the master has written that the slave has not acknowledged as durable.
    pub lag_bytes: u64,
    /// How long the master has held bytes the slave lacks.
    pub lag: Duration,
}

/// What one shard's transaction checker did since start-up (`crate::transaction`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckerFigures {
    /// Op records read back from the op queues.
    pub op_records_read: u64,
    /// Passes over the half queues completed.
    pub check_passes: u64,
    /// Decisions held in memory (halves at or above their queue's progress).
    pub resolved_halves: u64,
}

/// What a shard publishes once a second: figures only it can read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShardFigures {
    /// Its own log, then the logs it hosts for a master with more shards.
    pub logs: Vec<LogFigures>,
    /// The slaves following its logs (a master).
    pub followers: Vec<FollowerLag>,
    /// Per other shard: calls this shard has sent it that await a reply (queued between
    /// the shards or running there), index = target shard.
    pub mesh_calls_pending: Vec<u64>,
    /// Its transaction checker (zeros on a shard owning no half queue, and on a slave).
    pub transactions: CheckerFigures,
    /// Its revive scanner: checkpoints held in memory (zero on a slave).
    pub revive_checkpoints: u64,
    /// I/O operations its executor completed since start-up, by kind
    /// (`comet_rt::io_count`).
    pub io_completions: comet_rt::io_count::IoCompletions,
    /// False until the shard first published.
    pub published: bool,
}

#[derive(Debug, Default)]
#[repr(align(128))]
struct Slot {
    counts: Mutex<ShardCounts>,
    figures: Mutex<ShardFigures>,
    consumers: Mutex<consumer::ShardConsumerFigures>,
}

/// One store's open as the metrics endpoint watches it, from before the broker serves.
#[derive(Clone, Debug)]
struct RecoveryWatch {
    shard: usize,
    log_id: u8,
    progress: Arc<RecoveryProgress>,
}

/// How far one store's open has got, as a scrape reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecoveryLine {
    /// The shard opening the store.
    pub shard: usize,
    /// The store's log.
    pub log_id: u8,
    /// Its progress.
    pub status: RecoveryStatus,
}

/// Every shard's counts and published figures.
#[derive(Debug)]
pub struct Metrics {
    enabled: bool,
    slots: Box<[Slot]>,
    /// The stores' opens, registered by the shards as they start (start-up only, so a lock
    /// no request path takes).
    recoveries: Mutex<Vec<RecoveryWatch>>,
}

impl Metrics {
    /// Slots for `shard_count` shards; `enabled` false counts nothing.
    pub fn new(shard_count: usize, enabled: bool) -> Metrics {
        assert!(shard_count >= 1);
        Metrics {
            enabled,
            slots: (0..shard_count).map(|_| Slot::default()).collect(),
            recoveries: Mutex::new(Vec::new()),
        }
    }

    /// The progress the store of log `log_id`, opened on shard `shard`, reports its open
    /// into (`StoreConfig::recovery_progress`); scrapes read it from then on, also before
    /// the broker serves. Not watched with metrics off.
    pub fn watch_recovery(&self, shard: usize, log_id: u8) -> Arc<RecoveryProgress> {
        let progress = Arc::new(RecoveryProgress::default());
        if self.enabled {
            let mut recoveries = lock(&self.recoveries);
            recoveries.retain(|watch| (watch.shard, watch.log_id) != (shard, log_id));
            recoveries.push(RecoveryWatch {
                shard,
                log_id,
                progress: progress.clone(),
            });
        }
        progress
    }

    /// Every watched store's open now, by shard then log.
    pub fn recoveries(&self) -> Vec<RecoveryLine> {
        let mut lines: Vec<RecoveryLine> = lock(&self.recoveries)
            .iter()
            .map(|watch| RecoveryLine {
                shard: watch.shard,
                log_id: watch.log_id,
                status: watch.progress.status(),
            })
            .collect();
        lines.sort_by_key(|line| (line.shard, line.log_id));
        lines
    }

    /// Whether metrics are collected (`metricsExporterType=PROM`).
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Starts timing a request: `None` (and no clock read) with metrics off.
    pub fn rpc_timer(&self) -> Option<Instant> {
        self.enabled.then(comet_rt::clock::monotonic_now)
    }

    /// Counts a request shard `shard` served, timed from `started` (see [`Self::rpc_timer`]).
    /// `response_code` is `None` for a one-way request or one that got no answer.
    pub fn record_rpc(
        &self,
        shard: usize,
        started: Option<Instant>,
        request_code: i32,
        response_code: Option<i32>,
    ) {
        let Some(started) = started else {
            return;
        };
        let elapsed_ms = comet_rt::clock::monotonic_now()
            .saturating_duration_since(started)
            .as_millis();
        let key = RpcKey {
            request_code,
            response_code: response_code.unwrap_or(0),
            oneway: response_code.is_none(),
        };
        lock(&self.slots[shard].counts)
            .rpc
            .entry(key)
            .or_default()
            .observe(
                &RPC_LATENCY_BOUNDS_MS,
                u64::try_from(elapsed_ms).unwrap_or(u64::MAX),
            );
    }

    /// Counts a send request shard `shard` stored: `messages` records of `bytes` bytes under
    /// `stored_topic`, with the request's properties string `raw_properties`.
    pub fn record_put(
        &self,
        shard: usize,
        stored_topic: &str,
        raw_properties: &str,
        messages: u64,
        bytes: u64,
    ) {
        if !self.enabled || messages == 0 {
            return;
        }
        let Some(topic) = counted_topic(stored_topic, raw_properties) else {
            return;
        };
        let message_type = MessageType::of(raw_properties);
        let add = |entry: &mut [InCounts; 4]| {
            let typed = &mut entry[message_type.index()];
            typed.messages += messages;
            typed.bytes += bytes;
            typed.size.observe(&MESSAGE_SIZE_BOUNDS, bytes / messages);
        };
        let mut counts = lock(&self.slots[shard].counts);
        if let Some(entry) = counts.messages_in.get_mut(topic) {
            return add(entry);
        }
        if counts.messages_in.len() >= TOPICS_PER_SHARD_MAX {
            if !counts.full_logged {
                counts.full_logged = true;
                log::warn!(
                    "metrics count sends of {TOPICS_PER_SHARD_MAX} topics on a shard; new \
                     topics are not counted"
                );
            }
            return;
        }
        add(counts.messages_in.entry(topic.to_owned()).or_default());
    }

    /// Counts a message of `group` sent to its dead-letter queue from `origin_topic` (the
    /// topic it was consumed from), as Java's send-back paths count
    /// `rocketmq_send_to_dlq_messages_total`.
    pub fn record_dlq(&self, shard: usize, group: &str, origin_topic: &str) {
        if !self.enabled {
            return;
        }
        let mut counts = lock(&self.slots[shard].counts);
        let key = (group.to_owned(), origin_topic.to_owned());
        if let Some(count) = counts.dlq.get_mut(&key) {
            *count += 1;
        } else if counts.dlq.len() < TOPICS_PER_SHARD_MAX {
            counts.dlq.insert(key, 1);
        }
    }

    /// Counts a transaction decision for `topic`: a commit of a half born at `born_ms`
    /// (wall clock) when `commit`, else a rollback.
    pub fn record_transaction(&self, shard: usize, topic: &str, commit: bool, born_ms: i64) {
        if !self.enabled {
            return;
        }
        let mut counts = lock(&self.slots[shard].counts);
        let full = counts.transactions.len() >= TOPICS_PER_SHARD_MAX;
        let entry = match counts.transactions.get_mut(topic) {
            Some(entry) => entry,
            None if full => return,
            None => counts.transactions.entry(topic.to_owned()).or_default(),
        };
        if commit {
            entry.commits += 1;
            // Java records whole seconds from the half's birth.
            let now_ms = comet_rt::clock::wall_clock_ms();
            let seconds = u64::try_from(now_ms.saturating_sub(born_ms) / 1000).unwrap_or(0);
            entry
                .finish_latency_s
                .observe(&FINISH_LATENCY_BOUNDS_S, seconds);
        } else {
            entry.rollbacks += 1;
        }
    }

    /// Replaces shard `shard`'s consumer figures (see [`consumer`]).
    pub fn publish_consumers(&self, shard: usize, figures: consumer::ShardConsumerFigures) {
        *lock(&self.slots[shard].consumers) = figures;
    }

    /// Every shard's consumer figures as last computed, shard 0 first.
    pub fn consumers(&self) -> Vec<consumer::ShardConsumerFigures> {
        self.slots
            .iter()
            .map(|slot| lock(&slot.consumers).clone())
            .collect()
    }

    /// Replaces shard `shard`'s published figures.
    pub fn publish(&self, shard: usize, figures: ShardFigures) {
        *lock(&self.slots[shard].figures) = ShardFigures {
            published: true,
            ..figures
        };
    }

    /// Every shard's counts and figures now, shard 0 first.
    pub fn shards(&self) -> Vec<(ShardCounts, ShardFigures)> {
        self.slots
            .iter()
            .map(|slot| (lock(&slot.counts).clone(), lock(&slot.figures).clone()))
            .collect()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The labels Java puts on every broker metric.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerLabels {
    /// `cluster`: `brokerClusterName`.
    pub cluster: String,
    /// `node_id`: `brokerName`, as Java's `BrokerMetricsManager` sets it.
    pub node_id: String,
}

/// Producers or consumers connected with one client language and version.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Connections {
    /// The consumer group (empty for producers: Java's producer gauge has no group).
    pub group: String,
    /// `language`, lower case as Java gives it.
    pub language: String,
    /// `version`, Java's `MQVersion` description in lower case (e.g. `v5_1_0`).
    pub version: String,
    /// `consume_mode` of a consumer group (`pull`, `push`, `pop`).
    pub consume_mode: String,
    /// How many.
    pub count: u64,
}

/// Messages delivered to one group from one topic since start-up (the per-topic statistics).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutCounts {
    /// The topic.
    pub topic: String,
    /// The consumer group.
    pub group: String,
    /// Messages delivered.
    pub messages: u64,
    /// Bytes delivered.
    pub bytes: u64,
}

/// Broker-wide figures read at scrape time from the tables and statistics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BrokerFigures {
    /// Topics in the topic table.
    pub topics: u64,
    /// Subscription groups.
    pub groups: u64,
    /// `brokerPermission`.
    pub permission: i64,
    /// Producer connections by language and version.
    pub producers: Vec<Connections>,
    /// Consumer connections by group, language, version and consume mode.
    pub consumers: Vec<Connections>,
    /// Deliveries by topic and group.
    pub messages_out: Vec<OutCounts>,
    /// Per shard: requests handled where they arrived, and requests handed to another shard.
    pub requests_by_shard: Vec<(u64, u64)>,
}

/// Everything one scrape encodes.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// Labels on every metric.
    pub labels: BrokerLabels,
    /// Per shard: counts and published figures, shard 0 first.
    pub shards: Vec<(ShardCounts, ShardFigures)>,
    /// Consumer lag and in-flight figures merged over the shards.
    pub consumers: consumer::ConsumerFigures,
    /// Wall clock of the scrape, ms (latencies are measured to it).
    pub wall_clock_ms: i64,
    /// Broker-wide figures.
    pub broker: BrokerFigures,
    /// The stores' opens (done, once the broker serves).
    pub recovery: Vec<RecoveryLine>,
}

/// What a scrape reports before the broker serves (the stores are opening): their opens.
#[derive(Clone, Debug)]
pub struct StartingSnapshot {
    /// Labels on every metric.
    pub labels: BrokerLabels,
    /// The stores' opens so far.
    pub recovery: Vec<RecoveryLine>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> String {
        let mut raw = String::new();
        for (name, value) in pairs {
            properties::push_entry(&mut raw, name, value);
        }
        raw
    }

    // Proves the message type follows Java's order: transaction, then FIFO, then delay.
    #[test]
    fn message_types_follow_java() {
        assert_eq!(MessageType::of(""), MessageType::Normal);
        assert_eq!(
            MessageType::of(&props(&[("TAGS", "a"), ("KEYS", "k")])),
            MessageType::Normal
        );
        let half = props(&[("TRAN_MSG", "true"), ("__SHARDINGKEY", "s"), ("DELAY", "3")]);
        assert_eq!(MessageType::of(&half), MessageType::Transaction);
        let fifo = props(&[("__SHARDINGKEY", "s"), ("DELAY", "3")]);
        assert_eq!(MessageType::of(&fifo), MessageType::Fifo);
        for name in [
            "DELAY",
            "TIMER_DELIVER_MS",
            "TIMER_DELAY_SEC",
            "TIMER_DELAY_MS",
        ] {
            assert_eq!(
                MessageType::of(&props(&[(name, "1")])),
                MessageType::Delay,
                "{name}"
            );
        }
        assert_eq!(
            MessageType::of(&props(&[("TRAN_MSG", "false")])),
            MessageType::Normal
        );
    }

    // Proves a rewritten send counts under the producer's topic and retry and dead-letter
    // topics are not counted.
    #[test]
    fn counted_topic_is_the_producers() {
        assert_eq!(counted_topic("T", ""), Some("T"));
        let delayed = props(&[("REAL_TOPIC", "Orders"), ("DELAY", "2")]);
        assert_eq!(
            counted_topic("SCHEDULE_TOPIC_XXXX", &delayed),
            Some("Orders")
        );
        assert_eq!(counted_topic("%RETRY%g", ""), None);
        assert_eq!(counted_topic("%DLQ%g", ""), None);
    }

    // Proves a histogram puts a value in the first bucket whose bound holds it, counts values
    // past the last bound only in the count and sum, and merges bucket by bucket.
    #[test]
    fn histogram_buckets() {
        let mut histogram = Histogram::<6>::default();
        for value in [0, 1024, 1025, 5 * 1024 * 1024] {
            histogram.observe(&MESSAGE_SIZE_BOUNDS, value);
        }
        assert_eq!(histogram.in_bucket, [2, 1, 0, 0, 0, 0]);
        assert_eq!(histogram.count, 4);
        assert_eq!(histogram.sum, 1024 + 1025 + 5 * 1024 * 1024);
        let mut merged = histogram.clone();
        merged.merge(&histogram);
        assert_eq!(merged.in_bucket, [4, 2, 0, 0, 0, 0]);
        assert_eq!(merged.count, 8);
    }

    // Proves sends are counted per shard, topic and type, a batch's size is its mean, and
    // nothing is counted with metrics off.
    #[test]
    fn sends_are_counted_per_topic_and_type() {
        let metrics = Metrics::new(2, true);
        metrics.record_put(0, "T", "", 1, 100);
        metrics.record_put(1, "T", "", 4, 8000);
        metrics.record_put(1, "%RETRY%g", "", 1, 100);
        let half = props(&[("TRAN_MSG", "true"), ("REAL_TOPIC", "T")]);
        metrics.record_put(1, "RMQ_SYS_TRANS_HALF_TOPIC", &half, 1, 300);
        let shards = metrics.shards();
        let first = &shards[0].0.messages_in["T"][0];
        assert_eq!((first.messages, first.bytes), (1, 100));
        let second = &shards[1].0.messages_in["T"];
        assert_eq!((second[0].messages, second[0].bytes), (4, 8000));
        assert_eq!(second[0].size.in_bucket, [0, 1, 0, 0, 0, 0]);
        assert_eq!(second[3].messages, 1);
        assert_eq!(shards[1].0.messages_in.len(), 1);
        let off = Metrics::new(1, false);
        off.record_put(0, "T", "", 1, 100);
        assert!(off.rpc_timer().is_none());
        off.record_rpc(0, None, 10, Some(0));
        assert!(off.shards()[0].0.messages_in.is_empty());
        assert!(off.shards()[0].0.rpc.is_empty());
    }
}
