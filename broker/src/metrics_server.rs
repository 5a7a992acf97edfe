//! The metrics endpoint (`metricsExporterType=PROM`): an HTTP/1.1 responder on shard 0 at
//! `metricsPromExporterHost:metricsPromExporterPort` that answers `GET /metrics` with every
//! shard's figures (docs/operations.md#metrics), and the once-a-second publication of the
//! figures only a shard itself can read (its stores, its slaves' progress, its I/O counts).
//!
//! The endpoint starts first thing on shard 0, before any store opens: until the broker
//! serves (shard 0 has joined the mesh), a scrape gets the stores' opens only (how far each
//! recovery has got, `crate::metrics::RecoveryLine`), read from the progress each store
//! reports as it opens. A long recovery is then visible to Prometheus while it runs.
//!
//! A scrape reads the shared tables and statistics and every shard's slot of
//! `crate::metrics` from shard 0, after asking each shard once across the mesh to compute
//! the figures of the queues it owns (`crate::metrics::consumer`); no client request pays
//! for it. Connections are bounded in number, in request size and in time: a client that
//! sends garbage gets 400, one that sends nothing for [`REQUEST_TIMEOUT`] is dropped.

use std::cell::OnceCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use comet_net::http::{self, Method, Request, Response, ServeLimits};
use comet_proto::body::ConsumeType;
use comet_rt::net::Listener;
use comet_rt::shutdown::StopSignal;
use comet_rt::task_class::timeout;

use crate::metrics::{
    encode, BrokerFigures, BrokerLabels, Connections, FollowerLag, LogFigures, Metrics, OutCounts,
    ShardFigures, Snapshot, StartingSnapshot,
};
use crate::shard::{ShardBroker, ShardCall};
use crate::stats::StatsName;

/// How long a connection may take to send its request head, and then to take the answer.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Scrape connections open at once; more are closed at once.
pub const CONNECTIONS_MAX: usize = 16;

/// Publishes this shard's store and replication figures for the next scrape (called once a
/// second with the traffic sample; nothing with metrics off).
pub fn publish(broker: &ShardBroker) {
    if !broker.metrics().enabled() {
        return;
    }
    let now = comet_rt::clock::monotonic_now();
    let mut figures = ShardFigures::default();
    let master = broker.config().broker_role.is_master();
    let logs = std::iter::once(broker.own_log()).chain(broker.hosted_logs().iter().cloned());
    for log in logs {
        let stats = log.store.stats();
        let written = log.store.written_position();
        figures.logs.push(LogFigures {
            log_id: log.replication.log_id,
            appended_records: stats.appended_records,
            appended_bytes: stats.appended_bytes,
            flushes: stats.flushes,
            fdatasyncs: stats.fdatasyncs,
            written_bytes: stats.written_bytes,
            disk_reads: stats.disk_reads,
            read_window_hits: stats.read_window_hits,
            read_window_misses: stats.read_window_misses,
            unflushed_bytes: log.store.unflushed_bytes(),
            held_bytes: written.saturating_sub(log.store.min_physical_offset().position()),
            dispatch_behind_bytes: log.store.dispatch_behind_bytes(),
            histograms: log.store.histograms(),
            memory: log.store.memory(),
        });
        if master {
            for slave in log.replication.followers.borrow().values() {
                figures.followers.push(FollowerLag {
                    log_id: log.replication.log_id,
                    broker_id: slave.broker_id,
                    lag_bytes: written.saturating_sub(slave.durable),
                    lag: log.replication.lag_behind(slave.durable, now),
                });
            }
        }
    }
    figures.mesh_calls_pending = broker.mesh().pending_calls();
    figures.transactions = crate::transaction::checker_figures();
    figures.revive_checkpoints = crate::pop::revive::checkpoints_in_memory();
    figures.io_completions = comet_rt::io_count::completions();
    broker.metrics().publish(broker.shard().index(), figures);
}

/// How long a scrape waits for the shards' consumer figures; a shard that has not answered
/// by then is reported with the figures it computed for an earlier scrape.
pub const CONSUMER_FIGURES_TIMEOUT: Duration = Duration::from_secs(5);

/// Asks every shard in turn to compute its consumer figures (one mesh call each) and waits
/// for them, at most [`CONSUMER_FIGURES_TIMEOUT`] in all.
async fn refresh_consumer_figures(broker: &ShardBroker) {
    let all = async {
        for shard in 0..broker.shard_count() {
            let target = comet_rt::shard_id::ShardId(u16::try_from(shard).expect("bounded"));
            if let Err(error) = broker.mesh().call(target, ShardCall::ConsumerMetrics).await {
                log::debug!("metrics: consumer figures of shard {shard}: {error}");
            }
        }
    };
    if timeout(CONSUMER_FIGURES_TIMEOUT, all).await.is_err() {
        log::warn!(
            "metrics: a shard did not compute its consumer figures within {:?}; its last \
             ones are reported",
            CONSUMER_FIGURES_TIMEOUT
        );
    }
}

/// Every figure a scrape reports: the consumer figures every shard computes now, the rest
/// read on the calling shard.
pub async fn snapshot(broker: &ShardBroker) -> Snapshot {
    refresh_consumer_figures(broker).await;
    let config = broker.config();
    let labels = BrokerLabels {
        cluster: config.cluster_name.clone(),
        node_id: config.broker_name.clone(),
    };
    let mut figures = BrokerFigures {
        topics: broker.topics().len() as u64,
        groups: broker.groups().names().len() as u64,
        permission: i64::from(config.broker_permission),
        ..BrokerFigures::default()
    };
    read_connections(broker, &mut figures);
    let mut bytes: HashMap<(String, String), u64> = broker
        .stats()
        .sums(StatsName::GroupGetSize)
        .into_iter()
        .map(|(topic, group, bytes)| ((topic, group), bytes))
        .collect();
    // An item created between the two reads counts zero bytes until the next scrape.
    figures.messages_out = broker
        .stats()
        .sums(StatsName::GroupGetNums)
        .into_iter()
        .map(|(topic, group, messages)| {
            let key = (topic, group);
            let bytes = bytes.remove(&key).unwrap_or(0);
            let (topic, group) = key;
            OutCounts {
                topic,
                group,
                messages,
                bytes,
            }
        })
        .collect();
    let traffic = broker.all_traffic();
    figures.requests_by_shard = (0..broker.shard_count())
        .map(|shard| traffic.shard(shard).requests())
        .collect();
    Snapshot {
        labels,
        shards: broker.metrics().shards(),
        consumers: crate::metrics::consumer::merge(&broker.metrics().consumers()),
        wall_clock_ms: comet_rt::clock::wall_clock_ms(),
        broker: figures,
        recovery: broker.metrics().recoveries(),
    }
}

/// Producer and consumer connections grouped as Java's gauges group them.
fn read_connections(broker: &ShardBroker, figures: &mut BrokerFigures) {
    let language = |channel: &crate::clients::ChannelRef| {
        channel
            .language
            .name()
            .map_or_else(|| "unknown".to_owned(), str::to_ascii_lowercase)
    };
    let clients = broker.clients();
    let mut producers: Vec<Connections> = Vec::new();
    for channel in clients.all_producer_channels() {
        let key = Connections {
            group: String::new(),
            language: language(channel),
            version: channel.version.to_string(),
            consume_mode: String::new(),
            count: 0,
        };
        add_connection(&mut producers, key);
    }
    let mut consumers: Vec<Connections> = Vec::new();
    for (group, members) in clients.consumer_groups() {
        let consume_mode = match members.consume_type {
            ConsumeType::CONSUME_ACTIVELY => "pull",
            ConsumeType::CONSUME_PASSIVELY => "push",
            ConsumeType::CONSUME_POP => "pop",
        };
        for (_, channel) in members.channels() {
            let key = Connections {
                group: group.to_owned(),
                language: language(&channel),
                version: channel.version.to_string(),
                consume_mode: consume_mode.to_owned(),
                count: 0,
            };
            add_connection(&mut consumers, key);
        }
    }
    producers.sort();
    consumers.sort();
    figures.producers = producers;
    figures.consumers = consumers;
}

fn add_connection(all: &mut Vec<Connections>, key: Connections) {
    let same = |other: &Connections| {
        other.group == key.group
            && other.language == key.language
            && other.version == key.version
            && other.consume_mode == key.consume_mode
    };
    match all.iter_mut().find(|other| same(other)) {
        Some(existing) => existing.count += 1,
        None => all.push(Connections { count: 1, ..key }),
    }
}

/// What the endpoint reads: the broker once it serves, the stores' opens before.
pub struct Endpoint {
    /// Every shard's figures, and the stores' opens.
    pub metrics: Arc<Metrics>,
    /// The labels of what a scrape reports before the broker serves.
    pub labels: BrokerLabels,
    /// Set by shard 0 once it has joined the mesh (a full scrape asks every shard).
    pub broker: Rc<OnceCell<Rc<ShardBroker>>>,
}

/// Serves scrapes on `listener` until `stop`.
pub async fn serve(endpoint: Endpoint, listener: Listener, stop: StopSignal) {
    log::info!("metrics on http://{}{METRICS_PATH}", listener.local_addr());
    let limits = ServeLimits {
        connections_max: CONNECTIONS_MAX,
        exchange_timeout: REQUEST_TIMEOUT,
    };
    let endpoint = Rc::new(endpoint);
    http::serve("metrics", listener, stop, limits, move |request| {
        let endpoint = endpoint.clone();
        async move { answer(&endpoint, &request).await }
    })
    .await;
}

/// The path served.
pub const METRICS_PATH: &str = "/metrics";

/// The answer to one request: the exposition for `GET` or `HEAD` of [`METRICS_PATH`].
async fn answer(endpoint: &Endpoint, request: &Request) -> Response {
    if request.path != METRICS_PATH {
        return Response::error(404, format!("only {METRICS_PATH} is served"));
    }
    if !matches!(request.method, Method::Get | Method::Head) {
        return Response::error(405, "only GET and HEAD");
    }
    let encoded = match endpoint.broker.get() {
        Some(broker) => encode::encode(snapshot(broker).await),
        None => encode::encode_starting(StartingSnapshot {
            labels: endpoint.labels.clone(),
            recovery: endpoint.metrics.recoveries(),
        }),
    };
    match encoded {
        Ok(text) => Response::ok(encode::CONTENT_TYPE, text),
        Err(error) => {
            log::error!("metrics: cannot encode: {error}");
            Response::error(500, "the figures could not be encoded")
        }
    }
}
