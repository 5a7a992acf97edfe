//! A [`Snapshot`] in the Prometheus text format (version 0.0.4), written by the
//! `prometheus-client` crate: each scrape registers the snapshot as a collector and the crate
//! encodes it, so names, escaping, `_total` and bucket lines are the crate's.
//!
//! Names and labels are Java's as its OpenTelemetry PROM exporter shows them: counters end in
//! `_total`, histograms have `_bucket`/`_sum`/`_count`, and every series carries `cluster`,
//! `node_type="broker"` and `node_id` (the broker name). Comet's own figures start with
//! `comet_` and carry `shard` and, for a log's figures, `log`.

use std::collections::BTreeMap;
use std::fmt::Error as FmtError;

use comet_proto::names::{is_retry_topic, is_system_group, is_system_topic};
use comet_proto::{RequestCode, ResponseCode};
use comet_rt::io_count::IoOp;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use comet_store::histogram::{COMMIT_BYTES_BOUNDS, COMMIT_RECORDS_BOUNDS, SYNC_LATENCY_BOUNDS_US};
use comet_store::RecoveryStatus;

use super::consumer::{LagFigures, LagKey};
use super::{
    BrokerLabels, Histogram, InCounts, MessageType, RecoveryLine, RpcKey, Snapshot,
    StartingSnapshot, TransactionCounts, FINISH_LATENCY_BOUNDS_S, MESSAGE_SIZE_BOUNDS,
    RPC_LATENCY_BOUNDS_MS,
};

/// The Content-Type of [`encode`]'s text.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// One series' labels, in the order written.
type Labels = Vec<(&'static str, String)>;

/// The snapshot as Prometheus text.
pub fn encode(snapshot: Snapshot) -> Result<String, FmtError> {
    encode_collector(Box::new(snapshot))
}

/// What a scrape reports before the broker serves, as Prometheus text.
pub fn encode_starting(snapshot: StartingSnapshot) -> Result<String, FmtError> {
    encode_collector(Box::new(snapshot))
}

fn encode_collector(collector: Box<dyn Collector>) -> Result<String, FmtError> {
    let mut registry = Registry::default();
    registry.register_collector(collector);
    let mut text = String::new();
    prometheus_client::encoding::prometheus_text::encode(&mut text, &registry)?;
    Ok(text)
}

/// The labels every series carries.
fn common_labels(labels: &BrokerLabels) -> Labels {
    vec![
        ("cluster", labels.cluster.clone()),
        ("node_type", "broker".to_owned()),
        ("node_id", labels.node_id.clone()),
    ]
}

/// The stores' opens: one series per store and figure, by the shard opening it and its log.
fn encode_recovery(recovery: &[RecoveryLine], writer: &mut Writer<'_>) -> Result<(), FmtError> {
    type Field = fn(&RecoveryStatus) -> u64;
    let families: [(&str, &str, Field); 4] = [
        (
            "comet_store_recovery_in_progress",
            "1 while the log's store is opening (recovering), 0 once it is servable",
            |status| u64::from(status.in_progress),
        ),
        (
            "comet_store_recovery_scanned_bytes",
            "Log bytes the start-up recovery has read and checked (so far, while it runs)",
            |status| status.scanned_bytes,
        ),
        (
            "comet_store_recovery_target_bytes",
            "Log bytes the running recovery scan goes through at most (scan start to the end \
             of the last segment); once done, the bytes scanned",
            |status| status.target_bytes,
        ),
        (
            "comet_store_recovery_duration_milliseconds",
            "How long the log's store took to open at start-up, recovery included (so far, \
             while it runs)",
            |status| status.duration_ms,
        ),
    ];
    for (name, help, field) in families {
        writer.family(name, help, MetricType::Gauge, |emit| {
            for line in recovery {
                let labels = vec![
                    ("shard", line.shard.to_string()),
                    ("log", line.log_id.to_string()),
                ];
                emit(labels, gauge(field(&line.status)))?;
            }
            Ok(())
        })?;
    }
    Ok(())
}

impl Collector for StartingSnapshot {
    fn encode(&self, encoder: DescriptorEncoder) -> Result<(), FmtError> {
        let common = common_labels(&self.labels);
        let mut writer = Writer { encoder, common };
        encode_recovery(&self.recovery, &mut writer)
    }
}

/// A request or response code as Java's `RemotingHelper` names it: the constant's name in
/// lower case, or the number for a code it has no name for.
fn code_label(name: Option<&'static str>, value: i32) -> String {
    name.map_or_else(|| value.to_string(), str::to_ascii_lowercase)
}

/// Writes one series of the family being written: its own labels and its value.
type Emit<'a> = dyn FnMut(Labels, Value) -> Result<(), FmtError> + 'a;

/// Writes families one after another against one descriptor encoder.
struct Writer<'a> {
    encoder: DescriptorEncoder<'a>,
    common: Labels,
}

impl Writer<'_> {
    /// One family: `series` calls its argument once per series with the series' own labels.
    fn family(
        &mut self,
        name: &str,
        help: &str,
        metric_type: MetricType,
        series: impl FnOnce(&mut Emit<'_>) -> Result<(), FmtError>,
    ) -> Result<(), FmtError> {
        let common = self.common.clone();
        let mut family = self
            .encoder
            .encode_descriptor(name, help, None, metric_type)?;
        series(&mut |own: Labels, value: Value| {
            let mut labels = common.clone();
            labels.extend(own);
            let encoder = family.encode_family(&labels)?;
            value.encode(encoder)
        })
    }
}

/// One series' value.
enum Value {
    Counter(u64),
    Gauge(i64),
    /// Counts per bucket (not cumulative), then every value's count and sum.
    Histogram {
        buckets: Vec<(f64, u64)>,
        count: u64,
        sum: u64,
    },
}

impl Value {
    fn histogram<const N: usize>(bounds: &[u64; N], histogram: &Histogram<N>) -> Value {
        let buckets = bounds
            .iter()
            .zip(histogram.in_bucket)
            .map(|(bound, count)| (*bound as f64, count))
            .collect();
        Value::Histogram {
            buckets,
            count: histogram.count,
            sum: histogram.sum,
        }
    }

    fn encode(self, mut encoder: MetricEncoder<'_>) -> Result<(), FmtError> {
        match self {
            Value::Counter(value) => ConstCounter::new(value).encode(encoder),
            Value::Gauge(value) => ConstGauge::new(value).encode(encoder),
            Value::Histogram {
                buckets,
                count,
                sum,
            } => encoder.encode_histogram::<NoLabelSet>(sum as f64, count, &buckets, None),
        }
    }
}

fn gauge(value: u64) -> Value {
    Value::Gauge(i64::try_from(value).unwrap_or(i64::MAX))
}

impl Collector for Snapshot {
    fn encode(&self, encoder: DescriptorEncoder) -> Result<(), FmtError> {
        let common = common_labels(&self.labels);
        let mut writer = Writer { encoder, common };
        self.encode_requests(&mut writer)?;
        self.encode_tables(&mut writer)?;
        self.encode_consumers(&mut writer)?;
        self.encode_dlq_and_transactions(&mut writer)?;
        self.encode_storage(&mut writer)?;
        self.encode_shards(&mut writer)?;
        self.encode_store_histograms(&mut writer)?;
        encode_recovery(&self.recovery, &mut writer)
    }
}

impl Snapshot {
    /// Sends merged over shards, by topic and type.
    fn messages_in(&self) -> BTreeMap<(&str, MessageType), InCounts> {
        let mut merged: BTreeMap<(&str, MessageType), InCounts> = BTreeMap::new();
        for (counts, _) in &self.shards {
            for (topic, typed) in &counts.messages_in {
                for message_type in MessageType::ALL {
                    let mine = &typed[message_type as usize];
                    if mine.messages == 0 {
                        continue;
                    }
                    let total = merged.entry((topic.as_str(), message_type)).or_default();
                    total.messages += mine.messages;
                    total.bytes += mine.bytes;
                    total.size.merge(&mine.size);
                }
            }
        }
        merged
    }

    fn rpc(&self) -> BTreeMap<RpcKey, Histogram<9>> {
        let mut merged: BTreeMap<RpcKey, Histogram<9>> = BTreeMap::new();
        for (counts, _) in &self.shards {
            for (key, histogram) in &counts.rpc {
                merged.entry(*key).or_default().merge(histogram);
            }
        }
        merged
    }

    fn encode_requests(&self, writer: &mut Writer<'_>) -> Result<(), FmtError> {
        let messages_in = self.messages_in();
        let in_labels = |topic: &str, message_type: MessageType| -> Labels {
            vec![
                ("topic", topic.to_owned()),
                ("message_type", message_type.label().to_owned()),
                ("is_system", is_system_topic(topic).to_string()),
            ]
        };
        writer.family(
            "rocketmq_messages_in",
            "Total number of incoming messages",
            MetricType::Counter,
            |emit| {
                for ((topic, message_type), counts) in &messages_in {
                    emit(
                        in_labels(topic, *message_type),
                        Value::Counter(counts.messages),
                    )?;
                }
                Ok(())
            },
        )?;
        writer.family(
            "rocketmq_throughput_in",
            "Total traffic of incoming messages",
            MetricType::Counter,
            |emit| {
                for ((topic, message_type), counts) in &messages_in {
                    emit(
                        in_labels(topic, *message_type),
                        Value::Counter(counts.bytes),
                    )?;
                }
                Ok(())
            },
        )?;
        writer.family(
            "rocketmq_message_size",
            "Incoming messages size",
            MetricType::Histogram,
            |emit| {
                for ((topic, message_type), counts) in &messages_in {
                    let value = Value::histogram(&MESSAGE_SIZE_BOUNDS, &counts.size);
                    emit(in_labels(topic, *message_type), value)?;
                }
                Ok(())
            },
        )?;
        let out = &self.broker.messages_out;
        let out_labels = |topic: &str, group: &str| -> Labels {
            vec![
                ("topic", topic.to_owned()),
                ("consumer_group", group.to_owned()),
                ("is_retry", is_retry_topic(topic).to_string()),
                (
                    "is_system",
                    (is_system_topic(topic) || is_system_group(group)).to_string(),
                ),
            ]
        };
        writer.family(
            "rocketmq_messages_out",
            "Total number of outgoing messages",
            MetricType::Counter,
            |emit| {
                for counts in out {
                    let labels = out_labels(&counts.topic, &counts.group);
                    emit(labels, Value::Counter(counts.messages))?;
                }
                Ok(())
            },
        )?;
        writer.family(
            "rocketmq_throughput_out",
            "Total traffic of outgoing messages",
            MetricType::Counter,
            |emit| {
                for counts in out {
                    emit(
                        out_labels(&counts.topic, &counts.group),
                        Value::Counter(counts.bytes),
                    )?;
                }
                Ok(())
            },
        )?;
        let rpc = self.rpc();
        writer.family(
            "rocketmq_rpc_latency",
            "Rpc latency",
            MetricType::Histogram,
            |emit| {
                for (key, histogram) in &rpc {
                    let request = RequestCode::from(key.request_code);
                    let response = ResponseCode::from(key.response_code);
                    let mut labels = vec![
                        ("protocol_type", "remoting".to_owned()),
                        ("request_code", code_label(request.name(), key.request_code)),
                    ];
                    // A one-way request gets no response, so it has no response code.
                    if key.oneway {
                        labels.push(("result", "oneway".to_owned()));
                    } else {
                        let code = code_label(response.name(), key.response_code);
                        labels.push(("response_code", code));
                        labels.push(("result", "success".to_owned()));
                    }
                    emit(labels, Value::histogram(&RPC_LATENCY_BOUNDS_MS, histogram))?;
                }
                Ok(())
            },
        )
    }

    fn encode_tables(&self, writer: &mut Writer<'_>) -> Result<(), FmtError> {
        let broker = &self.broker;
        writer.family(
            "rocketmq_topic_number",
            "Active topic number",
            MetricType::Gauge,
            |emit| emit(Vec::new(), gauge(broker.topics)),
        )?;
        writer.family(
            "rocketmq_consumer_group_number",
            "Active subscription group number",
            MetricType::Gauge,
            |emit| emit(Vec::new(), gauge(broker.groups)),
        )?;
        writer.family(
            "rocketmq_broker_permission",
            "Broker permission",
            MetricType::Gauge,
            |emit| emit(Vec::new(), Value::Gauge(broker.permission)),
        )?;
        writer.family(
            "rocketmq_producer_connections",
            "Producer connections",
            MetricType::Gauge,
            |emit| {
                for connections in &broker.producers {
                    let labels = vec![
                        ("language", connections.language.clone()),
                        ("version", connections.version.clone()),
                        ("protocol_type", "remoting".to_owned()),
                    ];
                    emit(labels, gauge(connections.count))?;
                }
                Ok(())
            },
        )?;
        writer.family(
            "rocketmq_consumer_connections",
            "Consumer connections",
            MetricType::Gauge,
            |emit| {
                for connections in &broker.consumers {
                    let labels = vec![
                        ("consumer_group", connections.group.clone()),
                        ("language", connections.language.clone()),
                        ("version", connections.version.clone()),
                        ("consume_mode", connections.consume_mode.clone()),
                        ("protocol_type", "remoting".to_owned()),
                        ("is_system", is_system_group(&connections.group).to_string()),
                    ];
                    emit(labels, gauge(connections.count))?;
                }
                Ok(())
            },
        )
    }

    fn encode_storage(&self, writer: &mut Writer<'_>) -> Result<(), FmtError> {
        let logs = || {
            self.shards
                .iter()
                .flat_map(|(_, figures)| figures.logs.iter())
        };
        let held: u64 = logs().map(|log| log.held_bytes).sum();
        let unflushed: u64 = logs().map(|log| log.unflushed_bytes).sum();
        let storage = || {
            vec![
                ("storage_type", "local".to_owned()),
                ("storage_medium", "disk".to_owned()),
            ]
        };
        writer.family(
            "rocketmq_storage_size",
            "Broker storage size",
            MetricType::Gauge,
            |emit| emit(storage(), gauge(held)),
        )?;
        writer.family(
            "rocketmq_storage_flush_behind_bytes",
            "Broker flush behind bytes",
            MetricType::Gauge,
            |emit| emit(storage(), gauge(unflushed)),
        )?;
        let dispatch_behind: u64 = logs().map(|log| log.dispatch_behind_bytes).sum();
        writer.family(
            "rocketmq_storage_dispatch_behind_bytes",
            "Broker dispatch behind bytes",
            MetricType::Gauge,
            |emit| emit(storage(), gauge(dispatch_behind)),
        )?;
        let earliest = self.consumers.earliest_store_time_ms;
        let now_ms = self.wall_clock_ms;
        writer.family(
            "rocketmq_storage_message_reserve_time",
            "Broker message reserve time (milliseconds since the oldest record held was stored)",
            MetricType::Gauge,
            // Java reports nothing while no record is held.
            |emit| match earliest {
                Some(earliest) => emit(
                    storage(),
                    Value::Gauge(now_ms.saturating_sub(earliest).max(0)),
                ),
                None => Ok(()),
            },
        )
    }

    fn encode_consumers(&self, writer: &mut Writer<'_>) -> Result<(), FmtError> {
        let series = &self.consumers.series;
        let now_ms = self.wall_clock_ms;
        let labels = |key: &LagKey| -> Labels {
            vec![
                ("consumer_group", key.group.clone()),
                ("topic", key.topic.clone()),
                ("is_retry", key.is_retry.to_string()),
                (
                    "is_system",
                    (is_system_topic(&key.topic) || is_system_group(&key.group)).to_string(),
                ),
            ]
        };
        // Java reports 0 when no message is waiting.
        let since = |earliest: Option<i64>| {
            earliest.map_or(Value::Gauge(0), |earliest| {
                Value::Gauge(now_ms.saturating_sub(earliest).max(0))
            })
        };
        type Pick = fn(&LagFigures, &dyn Fn(Option<i64>) -> Value) -> Option<Value>;
        let families: [(&str, &str, Pick); 5] = [
            (
                "rocketmq_consumer_lag_messages",
                "Consumer lag messages",
                |figures, _| figures.lag_messages.map(gauge),
            ),
            (
                "rocketmq_consumer_lag_latency",
                "Consumer lag time (milliseconds)",
                |figures, since| {
                    figures
                        .lag_messages
                        .map(|_| since(figures.earliest_unconsumed_ms))
                },
            ),
            (
                "rocketmq_consumer_inflight_messages",
                "Consumer inflight messages",
                |figures, _| figures.inflight_messages.map(gauge),
            ),
            (
                "rocketmq_consumer_queueing_latency",
                "Consumer queueing time (milliseconds)",
                |figures, since| {
                    figures
                        .inflight_messages
                        .map(|_| since(figures.earliest_unpulled_ms))
                },
            ),
            (
                "rocketmq_consumer_ready_messages",
                "Consumer ready messages",
                |figures, _| Some(gauge(figures.ready_messages)),
            ),
        ];
        for (name, help, pick) in families {
            writer.family(name, help, MetricType::Gauge, |emit| {
                for (key, figures) in series {
                    if let Some(value) = pick(figures, &since) {
                        emit(labels(key), value)?;
                    }
                }
                Ok(())
            })?;
        }
        let skipped = self.consumers.skipped_series;
        writer.family(
            "comet_consumer_lag_skipped_series",
            "Group and topic series left out of the consumer figures because a shard reached \
             its per-scrape bound",
            MetricType::Gauge,
            |emit| emit(Vec::new(), gauge(skipped)),
        )
    }

    fn transactions(&self) -> BTreeMap<&str, TransactionCounts> {
        let mut merged: BTreeMap<&str, TransactionCounts> = BTreeMap::new();
        for (counts, _) in &self.shards {
            for (topic, mine) in &counts.transactions {
                let total = merged.entry(topic.as_str()).or_default();
                total.commits += mine.commits;
                total.rollbacks += mine.rollbacks;
                total.finish_latency_s.merge(&mine.finish_latency_s);
            }
        }
        merged
    }

    fn encode_dlq_and_transactions(&self, writer: &mut Writer<'_>) -> Result<(), FmtError> {
        let mut dlq: BTreeMap<(&str, &str), u64> = BTreeMap::new();
        for (counts, _) in &self.shards {
            for ((group, topic), count) in &counts.dlq {
                *dlq.entry((group.as_str(), topic.as_str())).or_default() += count;
            }
        }
        writer.family(
            "rocketmq_send_to_dlq_messages",
            "Consumer send to DLQ messages",
            MetricType::Counter,
            |emit| {
                for ((group, topic), count) in &dlq {
                    let system = is_system_topic(topic) || is_system_group(group);
                    let labels = vec![
                        ("consumer_group", (*group).to_owned()),
                        ("topic", (*topic).to_owned()),
                        ("is_system", system.to_string()),
                    ];
                    emit(labels, Value::Counter(*count))?;
                }
                Ok(())
            },
        )?;
        writer.family(
            "rocketmq_half_messages",
            "Half messages of all topics",
            MetricType::Gauge,
            |emit| {
                for (name, count) in self.consumers.half_messages.iter().flatten() {
                    emit(vec![("topic", name.clone())], gauge(*count))?;
                }
                Ok(())
            },
        )?;
        let transactions = self.transactions();
        let topic = |topic: &str| vec![("topic", topic.to_owned())];
        writer.family(
            "rocketmq_commit_messages",
            "Total number of commit messages",
            MetricType::Counter,
            |emit| {
                for (name, counts) in transactions.iter().filter(|(_, c)| c.commits > 0) {
                    emit(topic(name), Value::Counter(counts.commits))?;
                }
                Ok(())
            },
        )?;
        writer.family(
            "rocketmq_rollback_messages",
            "Total number of rollback messages",
            MetricType::Counter,
            |emit| {
                for (name, counts) in transactions.iter().filter(|(_, c)| c.rollbacks > 0) {
                    emit(topic(name), Value::Counter(counts.rollbacks))?;
                }
                Ok(())
            },
        )?;
        writer.family(
            "rocketmq_finish_message_latency",
            "Transaction finish latency (seconds from the half's birth to its commit)",
            MetricType::Histogram,
            |emit| {
                for (name, counts) in transactions.iter().filter(|(_, c)| c.commits > 0) {
                    let value =
                        Value::histogram(&FINISH_LATENCY_BOUNDS_S, &counts.finish_latency_s);
                    emit(topic(name), value)?;
                }
                Ok(())
            },
        )
    }

    fn encode_store_histograms(&self, writer: &mut Writer<'_>) -> Result<(), FmtError> {
        let logs = || {
            self.shards
                .iter()
                .enumerate()
                .flat_map(|(shard, (_, figures))| {
                    figures.logs.iter().map(move |log| {
                        let labels = vec![
                            ("shard", shard.to_string()),
                            ("log", log.log_id.to_string()),
                        ];
                        (labels, log)
                    })
                })
        };
        writer.family(
            "comet_store_group_commit_records",
            "Records per group commit (one per group commit of comet_store_group_commits_total)",
            MetricType::Histogram,
            |emit| {
                for (labels, log) in logs() {
                    let histogram = &log.histograms.commit_records;
                    emit(labels, Value::histogram(&COMMIT_RECORDS_BOUNDS, histogram))?;
                }
                Ok(())
            },
        )?;
        writer.family(
            "comet_store_group_commit_bytes",
            "Log bytes per group commit, padding included",
            MetricType::Histogram,
            |emit| {
                for (labels, log) in logs() {
                    let histogram = &log.histograms.commit_bytes;
                    emit(labels, Value::histogram(&COMMIT_BYTES_BOUNDS, histogram))?;
                }
                Ok(())
            },
        )?;
        writer.family(
            "comet_store_sync_latency_microseconds",
            "Microseconds per commit-log segment sync (an O_DSYNC write or an fdatasync; one per \
             sync of comet_store_fdatasyncs_total)",
            MetricType::Histogram,
            |emit| {
                for (labels, log) in logs() {
                    let histogram = &log.histograms.sync_latency_us;
                    emit(labels, Value::histogram(&SYNC_LATENCY_BOUNDS_US, histogram))?;
                }
                Ok(())
            },
        )?;
        writer.family(
            "comet_mesh_calls_pending",
            "Calls a shard sent another that await their reply (queued between the shards or \
             running on the target)",
            MetricType::Gauge,
            |emit| {
                for (shard, (_, figures)) in self.shards.iter().enumerate() {
                    let targets = figures.mesh_calls_pending.iter().enumerate();
                    for (target, pending) in targets.filter(|(target, _)| *target != shard) {
                        let labels =
                            vec![("shard", shard.to_string()), ("target", target.to_string())];
                        emit(labels, gauge(*pending))?;
                    }
                }
                Ok(())
            },
        )
    }

    fn encode_shards(&self, writer: &mut Writer<'_>) -> Result<(), FmtError> {
        let requests = &self.broker.requests_by_shard;
        let shard_label = |shard: usize| vec![("shard", shard.to_string())];
        writer.family(
            "comet_requests_in_place",
            "Requests served on the shard whose connection carried them",
            MetricType::Counter,
            |emit| {
                for (shard, (in_place, _)) in requests.iter().enumerate() {
                    emit(shard_label(shard), Value::Counter(*in_place))?;
                }
                Ok(())
            },
        )?;
        writer.family(
            "comet_requests_forwarded",
            "Requests handed across the mesh to the shard owning their queue",
            MetricType::Counter,
            |emit| {
                for (shard, (_, forwarded)) in requests.iter().enumerate() {
                    emit(shard_label(shard), Value::Counter(*forwarded))?;
                }
                Ok(())
            },
        )?;
        type CheckerField = fn(&super::CheckerFigures) -> u64;
        let checker_families: [(&str, &str, MetricType, CheckerField); 3] = [
            (
                "comet_transaction_op_records_read",
                "Op records the shard's transaction checker read back since start-up (a \
                 restart reads from its persisted op queue offset, not from the queue's start)",
                MetricType::Counter,
                |checker| checker.op_records_read,
            ),
            (
                "comet_transaction_check_passes",
                "Passes of the shard's transaction checker over its half queues",
                MetricType::Counter,
                |checker| checker.check_passes,
            ),
            (
                "comet_transaction_resolved_halves",
                "Transaction decisions the shard holds in memory: halves at or above their \
                 queue's checked progress",
                MetricType::Gauge,
                |checker| checker.resolved_halves,
            ),
        ];
        for (name, help, kind, field) in checker_families {
            writer.family(name, help, kind, |emit| {
                for (shard, (_, figures)) in self.shards.iter().enumerate() {
                    let value = field(&figures.transactions);
                    let value = match kind {
                        MetricType::Counter => Value::Counter(value),
                        _ => gauge(value),
                    };
                    emit(shard_label(shard), value)?;
                }
                Ok(())
            })?;
        }
        writer.family(
            "comet_io_completions",
            "I/O operations the shard handed to the runtime that completed, by kind \
             (docs/operations.md#metrics says which are counted)",
            MetricType::Counter,
            |emit| {
                for (shard, (_, figures)) in self.shards.iter().enumerate() {
                    if !figures.published {
                        continue;
                    }
                    for op in IoOp::ALL {
                        let labels =
                            vec![("shard", shard.to_string()), ("op", op.label().to_owned())];
                        emit(labels, Value::Counter(figures.io_completions.get(op)))?;
                    }
                }
                Ok(())
            },
        )?;
        writer.family(
            "comet_pop_revive_checkpoints",
            "Pop checkpoints the shard's revive scanner holds in memory (at most its share \
             of popCkMaxBufferSize; the others wait in the revive queue)",
            MetricType::Gauge,
            |emit| {
                for (shard, (_, figures)) in self.shards.iter().enumerate() {
                    emit(shard_label(shard), gauge(figures.revive_checkpoints))?;
                }
                Ok(())
            },
        )?;
        type LogField = fn(&super::LogFigures) -> u64;
        let log_counters: [(&str, &str, LogField); 8] = [
            (
                "comet_store_appended_records",
                "Records appended to the log",
                |log| log.appended_records,
            ),
            (
                "comet_store_appended_bytes",
                "Bytes of records appended to the log",
                |log| log.appended_bytes,
            ),
            (
                "comet_store_group_commits",
                "Group commits (flushes) of the log; appended records over group commits is \
                 the mean group-commit size",
                |log| log.flushes,
            ),
            (
                "comet_store_fdatasyncs",
                "Syncs of commit-log segments",
                |log| log.fdatasyncs,
            ),
            (
                "comet_store_written_bytes",
                "Bytes written to commit-log segments",
                |log| log.written_bytes,
            ),
            (
                "comet_store_disk_reads",
                "Reads of commit-log data from disk (cold reads, dispatch behind the cache, \
                 replication)",
                |log| log.disk_reads,
            ),
            (
                "comet_store_read_window_hits",
                "Cold reads served by a read window kept from an earlier pull",
                |log| log.read_window_hits,
            ),
            (
                "comet_store_read_window_misses",
                "Cold reads that found no kept read window and read the disk",
                |log| log.read_window_misses,
            ),
        ];
        for (name, help, field) in log_counters {
            writer.family(name, help, MetricType::Counter, |emit| {
                for (shard, (_, figures)) in self.shards.iter().enumerate() {
                    for log in &figures.logs {
                        let labels = vec![
                            ("shard", shard.to_string()),
                            ("log", log.log_id.to_string()),
                        ];
                        emit(labels, Value::Counter(field(log)))?;
                    }
                }
                Ok(())
            })?;
        }
        writer.family(
            "comet_store_memory_bytes",
            "Bytes a store's structures hold in memory, by part: log chunks (appends and the \
             tail cache), read windows, consume-queue block cache, consume-queue hot tails, \
             unsealed key index; each bounded by configuration",
            MetricType::Gauge,
            |emit| {
                for (shard, (_, figures)) in self.shards.iter().enumerate() {
                    for log in &figures.logs {
                        let memory = &log.memory;
                        let parts = [
                            ("log_chunks", memory.log_chunks_bytes),
                            ("read_windows", memory.read_windows_bytes),
                            ("cq_cache", memory.cq_cache_bytes),
                            ("cq_tails", memory.cq_tails_bytes),
                            ("key_index", memory.key_index_bytes),
                        ];
                        for (part, bytes) in parts {
                            let labels = vec![
                                ("shard", shard.to_string()),
                                ("log", log.log_id.to_string()),
                                ("part", part.to_owned()),
                            ];
                            emit(labels, gauge(bytes))?;
                        }
                    }
                }
                Ok(())
            },
        )?;
        let followers = || {
            self.shards
                .iter()
                .flat_map(|(_, figures)| figures.followers.iter())
        };
        let follower_labels = |log_id: u8, broker_id: u64| {
            vec![
                ("log", log_id.to_string()),
                ("slave_id", broker_id.to_string()),
            ]
        };
        writer.family(
            "comet_replication_lag_bytes",
            "Bytes of a log the master wrote that a slave has not acknowledged as durable",
            MetricType::Gauge,
            |emit| {
                for follower in followers() {
                    let labels = follower_labels(follower.log_id, follower.broker_id);
                    emit(labels, gauge(follower.lag_bytes))?;
                }
                Ok(())
            },
        )?;
        writer.family(
            "comet_replication_lag_milliseconds",
            "How long the master has held bytes of a log that a slave lacks",
            MetricType::Gauge,
            |emit| {
                for follower in followers() {
                    let millis = u64::try_from(follower.lag.as_millis()).unwrap_or(u64::MAX);
                    emit(
                        follower_labels(follower.log_id, follower.broker_id),
                        gauge(millis),
                    )?;
                }
                Ok(())
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::{
        BrokerFigures, BrokerLabels, Connections, LogFigures, Metrics, OutCounts, ShardFigures,
    };
    use super::*;

    fn snapshot(metrics: &Metrics) -> Snapshot {
        Snapshot {
            labels: BrokerLabels {
                cluster: "C1".to_owned(),
                node_id: "broker-a".to_owned(),
            },
            shards: metrics.shards(),
            consumers: super::super::consumer::ConsumerFigures::default(),
            wall_clock_ms: 0,
            recovery: Vec::new(),
            broker: BrokerFigures {
                topics: 7,
                groups: 2,
                permission: 6,
                consumers: vec![Connections {
                    group: "G".to_owned(),
                    language: "java".to_owned(),
                    version: "435".to_owned(),
                    consume_mode: "push".to_owned(),
                    count: 2,
                }],
                messages_out: vec![OutCounts {
                    topic: "%RETRY%G".to_owned(),
                    group: "G".to_owned(),
                    messages: 3,
                    bytes: 30,
                }],
                requests_by_shard: vec![(5, 1), (2, 0)],
                ..BrokerFigures::default()
            },
        }
    }

    // Proves the text carries Java's names, labels and values: counters with `_total`,
    // histograms with cumulative buckets, codes named as Java names them, and Comet's own
    // figures per shard and log.
    #[test]
    fn encodes_java_names_and_labels() {
        let metrics = Metrics::new(2, true);
        metrics.record_put(0, "T", "", 2, 3000);
        metrics.record_put(1, "T", "", 1, 100);
        metrics.record_rpc(1, metrics.rpc_timer(), 10, Some(0));
        metrics.record_rpc(0, metrics.rpc_timer(), 34, None);
        metrics.publish(
            1,
            ShardFigures {
                logs: vec![LogFigures {
                    log_id: 1,
                    appended_records: 9,
                    flushes: 3,
                    read_window_hits: 7,
                    unflushed_bytes: 5,
                    held_bytes: 4096,
                    memory: comet_store::StoreMemory {
                        key_index_bytes: 11,
                        ..comet_store::StoreMemory::default()
                    },
                    ..LogFigures::default()
                }],
                ..ShardFigures::default()
            },
        );
        let text = encode(snapshot(&metrics)).unwrap();
        // One sample line: the name, the common labels then `labels`, and the value.
        let line = |name: &str, labels: &[(&str, &str)], value: &str| {
            let mut all = vec![
                r#"cluster="C1""#.to_owned(),
                r#"node_type="broker""#.to_owned(),
                r#"node_id="broker-a""#.to_owned(),
            ];
            all.extend(
                labels
                    .iter()
                    .map(|(key, value)| format!("{key}=\"{value}\"")),
            );
            format!("{name}{{{}}} {value}", all.join(","))
        };
        let sent = [
            ("topic", "T"),
            ("message_type", "normal"),
            ("is_system", "false"),
        ];
        let bucket = |le| {
            let mut labels = sent.to_vec();
            labels.push(("le", le));
            labels
        };
        let out = [
            ("topic", "%RETRY%G"),
            ("consumer_group", "G"),
            ("is_retry", "true"),
            ("is_system", "false"),
        ];
        let send_rpc = [
            ("protocol_type", "remoting"),
            ("request_code", "send_message"),
            ("response_code", "success"),
            ("result", "success"),
        ];
        let heartbeat_rpc = [
            ("protocol_type", "remoting"),
            ("request_code", "heart_beat"),
            ("result", "oneway"),
        ];
        let consumers = [
            ("consumer_group", "G"),
            ("language", "java"),
            ("version", "435"),
            ("consume_mode", "push"),
            ("protocol_type", "remoting"),
            ("is_system", "false"),
        ];
        let storage = [("storage_type", "local"), ("storage_medium", "disk")];
        let expected = [
            "# TYPE rocketmq_messages_in_total counter".to_owned(),
            line("rocketmq_messages_in_total", &sent, "3"),
            line("rocketmq_throughput_in_total", &sent, "3100"),
            line("rocketmq_message_size_bucket", &bucket("1024"), "1"),
            line("rocketmq_message_size_bucket", &bucket("4096"), "2"),
            line("rocketmq_message_size_bucket", &bucket("+Inf"), "2"),
            line("rocketmq_message_size_count", &sent, "2"),
            line("rocketmq_messages_out_total", &out, "3"),
            line("rocketmq_throughput_out_total", &out, "30"),
            line("rocketmq_rpc_latency_count", &send_rpc, "1"),
            line("rocketmq_rpc_latency_count", &heartbeat_rpc, "1"),
            line("rocketmq_topic_number", &[], "7"),
            line("rocketmq_consumer_group_number", &[], "2"),
            line("rocketmq_broker_permission", &[], "6"),
            line("rocketmq_consumer_connections", &consumers, "2"),
            line("rocketmq_storage_size", &storage, "4096"),
            line("rocketmq_storage_flush_behind_bytes", &storage, "5"),
            line("comet_requests_forwarded_total", &[("shard", "0")], "1"),
            line("comet_requests_in_place_total", &[("shard", "1")], "2"),
            line(
                "comet_store_group_commits_total",
                &[("shard", "1"), ("log", "1")],
                "3",
            ),
            line(
                "comet_store_appended_records_total",
                &[("shard", "1"), ("log", "1")],
                "9",
            ),
            line(
                "comet_store_read_window_hits_total",
                &[("shard", "1"), ("log", "1")],
                "7",
            ),
            line(
                "comet_store_memory_bytes",
                &[("shard", "1"), ("log", "1"), ("part", "key_index")],
                "11",
            ),
        ];
        for line in &expected {
            assert!(text.lines().any(|l| l == line), "missing {line}\n{text}");
        }
    }

    // Proves the shards' I/O completions get a series per published shard and kind, and a
    // shard that has not published gets none.
    #[test]
    fn encodes_io_completions_per_shard_and_kind() {
        let metrics = Metrics::new(2, true);
        let mut io_completions = comet_rt::io_count::IoCompletions::default();
        io_completions.counts[IoOp::FileSync as usize] = 4;
        metrics.publish(
            1,
            ShardFigures {
                io_completions,
                ..ShardFigures::default()
            },
        );
        let text = encode(snapshot(&metrics)).unwrap();
        let series: Vec<&str> = text
            .lines()
            .filter(|line| line.starts_with("comet_io_completions_total{"))
            .collect();
        assert_eq!(series.len(), IoOp::ALL.len(), "{text}");
        assert!(series.iter().all(|line| line.contains(r#"shard="1""#)));
        let sync = r#"shard="1",op="file_sync"} 4"#;
        assert!(series.iter().any(|line| line.ends_with(sync)), "{text}");
    }

    // Proves a scrape before the broker serves reports the stores' opens and nothing else,
    // under the common labels.
    #[test]
    fn starting_snapshot_reports_the_opens_only() {
        let status = RecoveryStatus {
            in_progress: true,
            scanned_bytes: 4096,
            target_bytes: 16384,
            duration_ms: 12,
        };
        let text = encode_starting(StartingSnapshot {
            labels: BrokerLabels {
                cluster: "C1".to_owned(),
                node_id: "broker-a".to_owned(),
            },
            recovery: vec![RecoveryLine {
                shard: 1,
                log_id: 3,
                status,
            }],
        })
        .unwrap();
        let common = r#"cluster="C1",node_type="broker",node_id="broker-a",shard="1",log="3""#;
        for (name, value) in [
            ("comet_store_recovery_in_progress", 1),
            ("comet_store_recovery_scanned_bytes", 4096),
            ("comet_store_recovery_target_bytes", 16384),
            ("comet_store_recovery_duration_milliseconds", 12),
        ] {
            let line = format!("{name}{{{common}}} {value}");
            assert!(text.lines().any(|l| l == line), "missing {line}\n{text}");
        }
        let samples = text.lines().filter(|line| !line.starts_with('#')).count();
        assert_eq!(samples, 4, "{text}");
    }
}
