//! End-to-end tests of the metrics endpoint (`metricsExporterType=PROM`) against a real
//! `comet-broker --standalone` process: after known traffic, a scrape over TCP carries
//! RocketMQ's names and labels with the exact counts; bad HTTP gets 400; the keys refuse what
//! Comet cannot do.

mod common;
mod sched_common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::time::Duration;

use comet_proto::batch::{encode_batch, BatchEntry};
use comet_proto::body::{ConsumeType, ConsumerData, HeartbeatData, JsonBody, SubscriptionData};
use comet_proto::bytes::BytesMut;
use comet_proto::headers::{ConsumerSendMsgBackRequestHeader, SendMessageRequestHeaderV2};
use comet_proto::message::{decode_records, MessageExt};
use comet_proto::properties::{names, Properties};
use comet_proto::{RemotingCommand, RequestCode, ResponseCode};
use comet_test_support::{free_port, wait_for, wait_for_port, LOOPBACK};
use common::{create_topic, pull_request, send_request, send_request_with, Broker, TempDir};

/// Exit status of a configuration that cannot be used (`FatalReason::Config`).
const EXIT_CONFIG: i32 = 72;
/// Exit status of a listener that could not bind (`FatalReason::Bind`).
const EXIT_BIND: i32 = 73;

const TOPIC: &str = "MetricsTopic";
const GROUP: &str = "MetricsGroup";

/// One sample of the text format: its labels and value.
#[derive(Debug)]
struct Sample {
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Samples by metric name, parsed from Prometheus text (comments skipped; label values here
/// hold no escapes, which the parser refuses rather than misreads).
fn parse_text(text: &str) -> BTreeMap<String, Vec<Sample>> {
    let mut samples: BTreeMap<String, Vec<Sample>> = BTreeMap::new();
    for line in text.lines().filter(|line| !line.starts_with('#')) {
        let (series, value) = line.rsplit_once(' ').expect("a sample line has a value");
        let value: f64 = value.parse().expect("a numeric value");
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => (name, rest.strip_suffix('}').expect("labels end in }")),
            None => (series, ""),
        };
        assert!(!labels.contains('\\'), "unexpected escape in {line}");
        let labels = labels
            .split("\",")
            .filter(|pair| !pair.is_empty())
            .map(|pair| {
                let (key, value) = pair.split_once("=\"").expect("key=\"value\"");
                (key.to_owned(), value.trim_end_matches('"').to_owned())
            })
            .collect();
        samples
            .entry(name.to_owned())
            .or_default()
            .push(Sample { labels, value });
    }
    samples
}

/// The value of `name` whose labels include every one of `labels`, summed over the series
/// that match (0 when none does).
fn value(samples: &BTreeMap<String, Vec<Sample>>, name: &str, labels: &[(&str, &str)]) -> f64 {
    samples
        .get(name)
        .into_iter()
        .flatten()
        .filter(|sample| {
            labels
                .iter()
                .all(|(key, value)| sample.labels.get(*key).map(String::as_str) == Some(*value))
        })
        .map(|sample| sample.value)
        .sum()
}

/// Sends `request` bytes to the endpoint and reads the whole answer (it closes after one).
fn http_exchange(addr: SocketAddr, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).expect("connect to the metrics endpoint");
    stream
        .set_read_timeout(Some(Duration::from_secs(15)))
        .expect("read timeout");
    stream.write_all(request).expect("send the request");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).expect("read the answer");
    String::from_utf8(answer).expect("a UTF-8 answer")
}

/// GET /metrics: the body of a 200 answer whose head states its type and length.
fn scrape_text(addr: SocketAddr) -> String {
    let answer = http_exchange(addr, b"GET /metrics HTTP/1.1\r\nHost: broker\r\n\r\n");
    let (head, body) = answer.split_once("\r\n\r\n").expect("a head and a body");
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(
        head.contains("Content-Type: text/plain; version=0.0.4"),
        "{head}"
    );
    assert!(
        head.contains(&format!("Content-Length: {}", body.len())),
        "{head}"
    );
    body.to_owned()
}

/// GET /metrics, parsed.
fn scrape(addr: SocketAddr) -> BTreeMap<String, Vec<Sample>> {
    parse_text(&scrape_text(addr))
}

/// Every sample name a text declares (`# TYPE` lines), series or not: a histogram's
/// `_bucket`, `_sum` and `_count` included.
fn declared_names(text: &str) -> BTreeSet<String> {
    let mut declared = BTreeSet::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let (name, kind) = rest.split_once(' ').expect("# TYPE name type");
        if kind == "histogram" {
            for suffix in ["_bucket", "_sum", "_count"] {
                declared.insert(format!("{name}{suffix}"));
            }
        } else {
            declared.insert(name.to_owned());
        }
    }
    declared
}

/// The metric names the shipped Grafana dashboard queries.
fn dashboard_names() -> BTreeSet<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/grafana/comet.json");
    let text = std::fs::read_to_string(&path).expect("read the dashboard");
    let dashboard: serde_json::Value = serde_json::from_str(&text).expect("dashboard JSON");
    let mut names = BTreeSet::new();
    let mut pending = vec![&dashboard];
    while let Some(value) = pending.pop() {
        match value {
            serde_json::Value::Object(map) => {
                for (key, inner) in map {
                    match (key.as_str(), inner) {
                        ("expr" | "definition", serde_json::Value::String(expr)) => {
                            names.extend(metric_names(expr));
                        }
                        _ => pending.push(inner),
                    }
                }
            }
            serde_json::Value::Array(items) => pending.extend(items),
            _ => {}
        }
    }
    names
}

/// The `rocketmq_*` and `comet_*` names in a PromQL expression.
fn metric_names(expr: &str) -> Vec<String> {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    expr.split(|c: char| !word(c))
        .filter(|token| token.starts_with("rocketmq_") || token.starts_with("comet_"))
        .map(str::to_owned)
        .collect()
}

fn metrics_options(port: u16) -> Vec<String> {
    [
        "metricsExporterType=PROM".to_owned(),
        "metricsPromExporterHost=127.0.0.1".to_owned(),
        format!("metricsPromExporterPort={port}"),
    ]
    .into_iter()
    .flat_map(|setting| ["-o".to_owned(), setting])
    .collect()
}

/// A `--standalone` broker of `shards` shards serving metrics in a fresh store named after
/// `name`: its store directory (kept alive by the caller), the broker, and the metrics
/// endpoint, which answers once this returns.
fn start_with_metrics(name: &str, shards: usize) -> (TempDir, Broker, SocketAddr) {
    let directory = TempDir::new(name);
    let port = free_port();
    let options = metrics_options(port);
    let options: Vec<&str> = options.iter().map(String::as_str).collect();
    let broker = Broker::start(&directory.0, shards, &options);
    let addr = SocketAddr::new(LOOPBACK.into(), port);
    wait_for_port(addr, Duration::from_secs(10));
    (directory, broker, addr)
}

// Proves a scrape after known traffic reports it under RocketMQ's names and labels with
// exact counts: 10 normal and 2 FIFO sends over two shards, one pull of 4, every request's
// latency by its codes, the tables' sizes, and the stores' bytes matching what was sent.
#[test]
fn scrape_reports_known_traffic() {
    let (_directory, broker, addr) = start_with_metrics("e2e-metrics", 2);
    let mut client = broker.client();
    create_topic(&mut client, TOPIC, 4);
    for index in 0..10 {
        let response = client.call(send_request(TOPIC, index % 4, &[b'n'; 100], None, None));
        assert_eq!(response.response_code(), ResponseCode::SUCCESS);
    }
    let mut fifo = Properties::new();
    fifo.insert(names::SHARDING_KEY, "order-1");
    for _ in 0..2 {
        let response = client.call(send_request_with(TOPIC, 1, &[b'f'; 300], &fifo));
        assert_eq!(response.response_code(), ResponseCode::SUCCESS);
    }
    let pulled = client.call(pull_request(GROUP, TOPIC, 0, 0, 32, 0));
    assert_eq!(pulled.response_code(), ResponseCode::SUCCESS);
    let pulled_bytes = pulled.body.len() as f64;
    assert_eq!(decode_records(pulled.body.clone()).len(), 3);

    let common = [
        ("cluster", "DefaultCluster"),
        ("node_type", "broker"),
        ("node_id", "broker-a"),
    ];
    let with = |own: &[(&'static str, &'static str)]| {
        let mut labels = common.to_vec();
        labels.extend_from_slice(own);
        labels
    };
    let normal = with(&[
        ("topic", TOPIC),
        ("message_type", "normal"),
        ("is_system", "false"),
    ]);
    let fifo = with(&[("topic", TOPIC), ("message_type", "fifo")]);
    // The stores publish once a second: wait until they hold what the sends counted.
    let samples = wait_for("the stores' figures", Duration::from_secs(10), || {
        let samples = scrape(addr);
        let sent = value(
            &samples,
            "rocketmq_throughput_in_total",
            &[("topic", TOPIC)],
        );
        let stored = value(&samples, "comet_store_appended_bytes_total", &[]);
        (sent > 0.0 && sent == stored).then_some(samples)
    });
    assert_eq!(value(&samples, "rocketmq_messages_in_total", &normal), 10.0);
    assert_eq!(value(&samples, "rocketmq_messages_in_total", &fifo), 2.0);
    let normal_bytes = value(&samples, "rocketmq_throughput_in_total", &normal);
    let fifo_bytes = value(&samples, "rocketmq_throughput_in_total", &fifo);
    // Each record is its body plus the same header and properties within a type.
    assert_eq!(normal_bytes % 10.0, 0.0, "{normal_bytes}");
    assert!(normal_bytes > 1000.0, "{normal_bytes}");
    assert!(fifo_bytes > 600.0, "{fifo_bytes}");
    let size_count = value(&samples, "rocketmq_message_size_count", &normal);
    assert_eq!(size_count, 10.0);
    let mut small = normal.clone();
    small.push(("le", "1024"));
    assert_eq!(
        value(&samples, "rocketmq_message_size_bucket", &small),
        10.0
    );
    assert_eq!(
        value(&samples, "rocketmq_message_size_sum", &normal),
        normal_bytes
    );

    let out = with(&[
        ("topic", TOPIC),
        ("consumer_group", GROUP),
        ("is_retry", "false"),
        ("is_system", "false"),
    ]);
    assert_eq!(value(&samples, "rocketmq_messages_out_total", &out), 3.0);
    let delivered_bytes = value(&samples, "rocketmq_throughput_out_total", &out);
    assert_eq!(delivered_bytes, pulled_bytes);

    let sends = with(&[
        ("protocol_type", "remoting"),
        ("request_code", "send_message_v2"),
        ("response_code", "success"),
        ("result", "success"),
    ]);
    assert_eq!(value(&samples, "rocketmq_rpc_latency_count", &sends), 12.0);
    let mut within_limit = sends.clone();
    within_limit.push(("le", "+Inf"));
    assert_eq!(
        value(&samples, "rocketmq_rpc_latency_bucket", &within_limit),
        12.0
    );
    let pulls = [
        ("request_code", "pull_message"),
        ("response_code", "success"),
    ];
    assert_eq!(value(&samples, "rocketmq_rpc_latency_count", &pulls), 1.0);

    assert!(value(&samples, "rocketmq_topic_number", &common) >= 1.0);
    assert_eq!(value(&samples, "rocketmq_broker_permission", &common), 6.0);
    assert!(samples.contains_key("rocketmq_consumer_group_number"));
    let storage = with(&[("storage_type", "local"), ("storage_medium", "disk")]);
    assert!(value(&samples, "rocketmq_storage_size", &storage) >= normal_bytes + fifo_bytes);
    // Every request counted once, where it arrived or where it was handed to.
    let in_place = value(&samples, "comet_requests_in_place_total", &[]);
    let forwarded = value(&samples, "comet_requests_forwarded_total", &[]);
    assert!(in_place + forwarded >= 13.0, "{in_place} + {forwarded}");
    let records = value(&samples, "comet_store_appended_records_total", &[]);
    assert_eq!(records, 12.0);
    for shard in ["0", "1"] {
        let labels = [("shard", shard), ("log", shard)];
        assert!(
            samples["comet_store_group_commits_total"]
                .iter()
                .any(|sample| labels.iter().all(|(k, v)| sample.labels[*k] == *v)),
            "no group commits of shard {shard}"
        );
    }
}

// Proves the endpoint answers bad HTTP with 400 (malformed, binary, oversized), other paths
// with 404 and other methods with 405, and keeps serving scrapes afterwards.
#[test]
fn bad_requests_get_400() {
    let (_directory, _broker, addr) = start_with_metrics("e2e-metrics-http", 1);
    let oversized = format!("GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(20_000));
    let cases: [(&[u8], &str); 6] = [
        (b"garbage\r\n\r\n", "HTTP/1.1 400 "),
        (b"GET /metrics HTTP/9\r\n", "HTTP/1.1 400 "),
        (
            b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\r\n",
            "HTTP/1.1 400 ",
        ),
        (oversized.as_bytes(), "HTTP/1.1 400 "),
        (b"GET /other HTTP/1.1\r\n\r\n", "HTTP/1.1 404 "),
        (b"DELETE /metrics HTTP/1.1\r\n\r\n", "HTTP/1.1 405 "),
    ];
    for (request, status) in cases {
        let answer = http_exchange(addr, request);
        assert!(answer.starts_with(status), "{status}: {answer}");
    }
    let samples = scrape(addr);
    assert!(samples.contains_key("rocketmq_topic_number"));
}

// Proves every metric the shipped Grafana dashboard queries is one the endpoint declares, so
// the dashboard cannot drift from the names.
#[test]
fn dashboard_queries_declared_names() {
    let (_directory, _broker, addr) = start_with_metrics("e2e-metrics-dashboard", 1);
    let declared = declared_names(&scrape_text(addr));
    let queried = dashboard_names();
    assert!(queried.len() >= 15, "{queried:?}");
    let missing: Vec<&String> = queried.difference(&declared).collect();
    assert!(
        missing.is_empty(),
        "not declared: {missing:?}\ndeclared: {declared:?}"
    );
}

// Proves the exporter keys refuse what Comet cannot serve: OTLP_GRPC and LOG stop the start
// with the config status naming the key, and a metrics port already taken with the bind
// status naming the port.
#[test]
fn refused_exporter_settings_stop_the_start() {
    let store = TempDir::new("e2e-metrics-refused");
    let namesrv = format!("127.0.0.1:{}", free_port());
    for exporter in ["OTLP_GRPC", "LOG", "prom"] {
        let setting = format!("metricsExporterType={exporter}");
        let args = ["-o", &setting, "--namesrv", &namesrv];
        let (code, stderr) = common::run_to_exit(&args, store.path());
        assert_eq!(code, Some(EXIT_CONFIG), "{exporter}: {stderr}");
        assert!(stderr.contains("metricsExporterType"), "{stderr}");
    }
    let taken = TcpListener::bind((LOOPBACK, 0)).expect("bind a port to occupy");
    let port = taken.local_addr().expect("address").port().to_string();
    let listen_port = free_port().to_string();
    // The slaves' port named too: listenPort + 1 is nobody's reservation, and a bind error
    // there (another test's port) is not the one this test is about.
    let ha_port = format!("haListenPort={}", free_port());
    let options = metrics_options(port.parse().expect("a port"));
    let mut args: Vec<&str> = options.iter().map(String::as_str).collect();
    args.extend(["--bind-address", "127.0.0.1", "--listen-port", &listen_port]);
    args.extend(["-o", &ha_port]);
    args.extend(["--namesrv", &namesrv]);
    let (code, stderr) = common::run_to_exit(&args, store.path());
    assert_eq!(code, Some(EXIT_BIND), "stderr: {stderr}");
    assert!(stderr.contains(&port), "stderr: {stderr}");
    drop(taken);
}

// Proves a master reports replication lag per log and slave: no lag series before a slave
// follows; once the slave holds every log, each log has a series for slave 1 at no lag.
#[test]
fn replication_lag_is_reported_per_log_and_slave() {
    use common::replication::{
        self, send_messages, slave_options, wait_for_same_queues, Node, CONVERGE_LIMIT, SHARDS,
    };
    const REPLICATED: &str = "MetricsRepl";
    let master_dir = TempDir::new("metrics-repl-master");
    let slave_dir = TempDir::new("metrics-repl-slave");
    let port = free_port();
    let port_setting = format!("metricsPromExporterPort={port}");
    let master = replication::start_master(
        master_dir.path(),
        &[
            "brokerRole=ASYNC_MASTER",
            "metricsExporterType=PROM",
            "metricsPromExporterHost=127.0.0.1",
            &port_setting,
        ],
    );
    let addr = SocketAddr::new(LOOPBACK.into(), port);
    wait_for_port(addr, Duration::from_secs(30));
    let mut client = master.client();
    create_topic(&mut client, REPLICATED, 4);
    send_messages(&mut client, REPLICATED, 4, 0, 20);
    let before = scrape(addr);
    assert!(
        before
            .get("comet_replication_lag_bytes")
            .is_none_or(Vec::is_empty),
        "no slave, no lag series"
    );
    let slave = Node::start(slave_dir.path(), &master.namesrv(), slave_options());
    let mut slave_client = slave.client();
    wait_for_same_queues(&mut client, &mut slave_client, REPLICATED, 20);
    let caught_up = |samples: &BTreeMap<String, Vec<Sample>>, log: usize| {
        samples
            .get("comet_replication_lag_bytes")
            .into_iter()
            .flatten()
            .any(|sample| {
                sample.labels.get("log") == Some(&log.to_string())
                    && sample.labels.get("slave_id").map(String::as_str) == Some("1")
                    && sample.value == 0.0
            })
    };
    let reported = comet_test_support::poll_until(CONVERGE_LIMIT, || {
        let samples = scrape(addr);
        (0..SHARDS).all(|log| caught_up(&samples, log))
    });
    assert!(reported, "{}", scrape_text(addr));
}

/// A HEART_BEAT of `group` (push consumer) subscribing `topic` with `*`.
fn consumer_heartbeat(group: &str, topic: &str) -> RemotingCommand {
    let data = HeartbeatData {
        client_id: "127.0.0.1@metrics".into(),
        consumer_data_set: vec![ConsumerData {
            group_name: group.into(),
            consume_type: ConsumeType::CONSUME_PASSIVELY,
            subscription_data_set: vec![SubscriptionData {
                topic: topic.into(),
                sub_string: "*".into(),
                ..SubscriptionData::default()
            }],
            ..ConsumerData::default()
        }],
        ..HeartbeatData::default()
    };
    RemotingCommand::request(RequestCode::HEART_BEAT, 0).with_body(data.encode())
}

/// CONSUMER_SEND_MSG_BACK of `message` for `group` with `maxReconsumeTimes` 0: the message
/// has been consumed 0 times, which already is the limit, so it goes to the DLQ.
fn send_back_to_dlq(client: &mut common::Client, message: &MessageExt, group: &str) {
    let header = ConsumerSendMsgBackRequestHeader {
        offset: message.commit_log_offset,
        group: group.into(),
        delay_level: 0,
        origin_msg_id: None,
        origin_topic: Some(message.topic.clone()),
        unit_mode: Some(false),
        max_reconsume_times: Some(0),
        broker_name: None,
    };
    client.call_ok(
        RemotingCommand::request(RequestCode::CONSUMER_SEND_MSG_BACK, 0).with_header(&header),
    );
}

// Proves the consumer figures are Apache's after known traffic over two shards: 5 messages
// in each of 4 queues; the online group committed 2, 5 and 0 on queues 0-2 and nothing on 3
// (which Apache counts as caught up), so its lag is 3 + 0 + 5 = 8; it pulled 3 from queue 2
// without committing, so 3 are in flight and 3 + 0 + 2 + 0 = 5 are ready; the latencies are
// measured from stored messages. One message sent back past its limit counts one DLQ send.
#[test]
fn consumer_lag_in_flight_and_dlq_are_exact() {
    const LAG_TOPIC: &str = "MetricsLagTopic";
    const LAG_GROUP: &str = "MetricsLagGroup";
    let (_directory, broker, addr) = start_with_metrics("e2e-metrics-lag", 2);
    let mut client = broker.client();
    create_topic(&mut client, LAG_TOPIC, 4);
    for queue_id in 0..4 {
        for _ in 0..5 {
            let response = client.call(send_request(LAG_TOPIC, queue_id, b"lag", None, None));
            assert_eq!(response.response_code(), ResponseCode::SUCCESS);
        }
    }
    client.call_ok(consumer_heartbeat(LAG_GROUP, LAG_TOPIC));
    common::commit_offset(&mut client, LAG_GROUP, LAG_TOPIC, 0, 2);
    common::commit_offset(&mut client, LAG_GROUP, LAG_TOPIC, 1, 5);
    common::commit_offset(&mut client, LAG_GROUP, LAG_TOPIC, 2, 0);
    let pulled = client.call(pull_request(LAG_GROUP, LAG_TOPIC, 2, 0, 3, 0));
    assert_eq!(pulled.response_code(), ResponseCode::SUCCESS);
    let messages = decode_records(pulled.body.clone());
    assert_eq!(messages.len(), 3);
    send_back_to_dlq(&mut client, &messages[0], LAG_GROUP);

    let series = [
        ("consumer_group", LAG_GROUP),
        ("topic", LAG_TOPIC),
        ("is_retry", "false"),
        ("is_system", "false"),
    ];
    let samples = scrape(addr);
    let text = scrape_text(addr);
    assert_eq!(
        value(&samples, "rocketmq_consumer_lag_messages", &series),
        8.0,
        "{text}"
    );
    assert_eq!(
        value(&samples, "rocketmq_consumer_inflight_messages", &series),
        3.0
    );
    assert_eq!(
        value(&samples, "rocketmq_consumer_ready_messages", &series),
        5.0
    );
    for latency in [
        "rocketmq_consumer_lag_latency",
        "rocketmq_consumer_queueing_latency",
    ] {
        let millis = value(&samples, latency, &series);
        assert!((0.0..60_000.0).contains(&millis), "{latency} {millis}");
        assert_eq!(samples[latency].len(), 1, "{latency}: one series");
    }
    assert_eq!(
        value(&samples, "comet_consumer_lag_skipped_series", &[]),
        0.0
    );
    let storage = [("storage_type", "local"), ("storage_medium", "disk")];
    let reserve_ms = value(&samples, "rocketmq_storage_message_reserve_time", &storage);
    assert!((0.0..60_000.0).contains(&reserve_ms), "{reserve_ms}");
    assert_eq!(samples["rocketmq_storage_message_reserve_time"].len(), 1);
    let dlq = [
        ("consumer_group", LAG_GROUP),
        ("topic", LAG_TOPIC),
        ("is_system", "false"),
    ];
    assert_eq!(
        value(&samples, "rocketmq_send_to_dlq_messages_total", &dlq),
        1.0
    );

    // Consuming the rest drops the lag to zero.
    for queue_id in 0..4 {
        common::commit_offset(&mut client, LAG_GROUP, LAG_TOPIC, queue_id, 5);
    }
    let samples = scrape(addr);
    assert_eq!(
        value(&samples, "rocketmq_consumer_lag_messages", &series),
        0.0
    );
    assert_eq!(
        value(&samples, "rocketmq_consumer_lag_latency", &series),
        0.0
    );
}

// Proves the store histograms agree with the store counters: per log, the group-commit
// histograms count one observation per group commit and the sync latency histogram one per
// sync, and once everything is durable the records per group commit add up to every record
// appended; every log reports its recovery.
#[test]
fn store_histograms_match_the_counters() {
    let (_directory, broker, addr) = start_with_metrics("e2e-metrics-histograms", 2);
    let mut client = broker.client();
    create_topic(&mut client, TOPIC, 4);
    for index in 0..40 {
        let response = client.call(send_request(TOPIC, index % 4, &[b'h'; 500], None, None));
        assert_eq!(response.response_code(), ResponseCode::SUCCESS);
    }
    let storage = [("storage_type", "local"), ("storage_medium", "disk")];
    // The stores publish once a second: wait for a publication with everything durable.
    let samples = wait_for("every record flushed", Duration::from_secs(10), || {
        let samples = scrape(addr);
        let records = value(&samples, "comet_store_appended_records_total", &[]);
        let behind = value(&samples, "rocketmq_storage_flush_behind_bytes", &storage);
        let committed = value(&samples, "comet_store_group_commit_records_sum", &[]);
        (records == 40.0 && behind == 0.0 && committed == records).then_some(samples)
    });
    for shard in ["0", "1"] {
        let log = [("shard", shard), ("log", shard)];
        let commits = value(&samples, "comet_store_group_commits_total", &log);
        let syncs = value(&samples, "comet_store_fdatasyncs_total", &log);
        assert!(commits >= 1.0, "shard {shard}: {commits}");
        for name in [
            "comet_store_group_commit_records_count",
            "comet_store_group_commit_bytes_count",
        ] {
            assert_eq!(value(&samples, name, &log), commits, "{name} of {shard}");
        }
        assert_eq!(
            value(
                &samples,
                "comet_store_sync_latency_microseconds_count",
                &log
            ),
            syncs
        );
        let mut all = log.to_vec();
        all.push(("le", "+Inf"));
        assert_eq!(
            value(&samples, "comet_store_group_commit_records_bucket", &all),
            commits
        );
        assert!(samples["comet_store_recovery_duration_milliseconds"]
            .iter()
            .any(|sample| sample.labels.get("log").map(String::as_str) == Some(shard)));
    }
    let mesh = samples
        .get("comet_mesh_calls_pending")
        .expect("mesh calls pending");
    assert_eq!(mesh.len(), 2, "one series per ordered pair of shards");
}

// Proves transaction decisions are counted under the half's real topic: one commit and one
// rollback (two-way END_TRANSACTION, answered before the scrape) give one of each, the
// commit's finish latency is in seconds from the half's birth (the test sends are born in
// 2023, past the last bucket of 24 h), and the third half, still undecided, is the one half
// message reported.
#[test]
fn transaction_decisions_are_counted() {
    use sched_common::transaction::{end_transaction_request, Half, COMMIT, PREPARED};
    const TX_TOPIC: &str = "MetricsTxTopic";
    const TX_GROUP: &str = "metrics_tx_pg";
    const ROLLBACK: i32 = 12;
    let (_directory, broker, addr) = start_with_metrics("e2e-metrics-tx", 2);
    let mut client = broker.client();
    create_topic(&mut client, TX_TOPIC, 4);
    let mut halves = Vec::new();
    for body in ["commit me", "roll me back", "wait"] {
        let mut properties = Properties::new();
        properties.insert(names::TRAN_MSG, "true");
        properties.insert(names::PGROUP, TX_GROUP);
        let send = sched_common::send_with(
            TX_TOPIC,
            0,
            body.as_bytes(),
            &properties,
            PREPARED,
            TX_GROUP,
        );
        halves.push(Half::from_send(&client.call_ok(send)));
    }
    for (half, decision) in halves.iter().zip([COMMIT, ROLLBACK]) {
        let end = end_transaction_request(TX_TOPIC, TX_GROUP, half, decision, false);
        assert_eq!(client.call(end).response_code(), ResponseCode::SUCCESS);
    }
    let samples = scrape(addr);
    let topic = [("topic", TX_TOPIC)];
    assert_eq!(
        value(&samples, "rocketmq_commit_messages_total", &topic),
        1.0
    );
    assert_eq!(
        value(&samples, "rocketmq_rollback_messages_total", &topic),
        1.0
    );
    assert_eq!(
        value(&samples, "rocketmq_finish_message_latency_count", &topic),
        1.0
    );
    let mut within_a_day = topic.to_vec();
    within_a_day.push(("le", "86400"));
    assert_eq!(
        value(
            &samples,
            "rocketmq_finish_message_latency_bucket",
            &within_a_day
        ),
        0.0
    );
}

/// The value of the one series of `name` with exactly the labels `labels` among its own
/// (besides the common three); panics when there is none.
fn one(samples: &BTreeMap<String, Vec<Sample>>, name: &str, labels: &[(&str, &str)]) -> f64 {
    let found: Vec<f64> = samples
        .get(name)
        .into_iter()
        .flatten()
        .filter(|sample| {
            labels
                .iter()
                .all(|(key, value)| sample.labels.get(*key).map(String::as_str) == Some(*value))
        })
        .map(|sample| sample.value)
        .collect();
    assert_eq!(found.len(), 1, "{name} {labels:?}: {found:?}");
    found[0]
}

// Proves the I/O completions follow known traffic: between two scrapes, 40 synchronous
// sends over one connection complete at least 40 socket reads and 40 socket writes, and on
// every shard at least one file write per commit-log sync the store counted (a segment sync
// is an O_DSYNC write); every kind has a series per shard.
#[test]
fn io_completions_follow_the_traffic() {
    const SENDS: usize = 40;
    let (_directory, broker, addr) = start_with_metrics("e2e-metrics-io", 2);
    let mut client = broker.client();
    create_topic(&mut client, TOPIC, 4);
    let storage = [("storage_type", "local"), ("storage_medium", "disk")];
    let settled = |samples: &BTreeMap<String, Vec<Sample>>, records: f64| {
        value(samples, "comet_store_appended_records_total", &[]) == records
            && value(samples, "rocketmq_storage_flush_behind_bytes", &storage) == 0.0
    };
    let before = wait_for(
        "a publication of both shards",
        Duration::from_secs(10),
        || {
            let samples = scrape(addr);
            let shards = samples
                .get("comet_io_completions_total")
                .into_iter()
                .flatten()
                .filter(|sample| sample.labels["op"] == "file_write")
                .count();
            (shards == 2 && settled(&samples, 0.0)).then_some(samples)
        },
    );
    for index in 0..SENDS {
        let queue_id = i32::try_from(index % 4).expect("small");
        let response = client.call(send_request(TOPIC, queue_id, &[b'i'; 200], None, None));
        assert_eq!(response.response_code(), ResponseCode::SUCCESS);
    }
    let ops = |samples: &BTreeMap<String, Vec<Sample>>, op: &str| {
        value(samples, "comet_io_completions_total", &[("op", op)])
    };
    // The shards publish once a second: wait for one after every answer went out.
    let after = wait_for(
        "a publication after the sends",
        Duration::from_secs(10),
        || {
            let samples = scrape(addr);
            let sent = ops(&samples, "socket_send") - ops(&before, "socket_send");
            (settled(&samples, SENDS as f64) && sent >= SENDS as f64).then_some(samples)
        },
    );
    let received = ops(&after, "socket_recv") - ops(&before, "socket_recv");
    assert!(received >= SENDS as f64, "{received} socket reads");
    for shard in ["0", "1"] {
        let log = [("shard", shard), ("log", shard)];
        let syncs = value(&after, "comet_store_fdatasyncs_total", &log)
            - value(&before, "comet_store_fdatasyncs_total", &log);
        let writes = [("shard", shard), ("op", "file_write")];
        let written = one(&after, "comet_io_completions_total", &writes)
            - one(&before, "comet_io_completions_total", &writes);
        assert!(syncs >= 1.0, "shard {shard}: {syncs} syncs");
        assert!(
            written >= syncs,
            "shard {shard}: {written} writes, {syncs} syncs"
        );
        for op in [
            "file_open",
            "file_close",
            "file_read",
            "file_sync",
            "file_allocate",
            "file_stat",
            "file_truncate",
            "file_remove",
            "socket_accept",
            "socket_connect",
            "socket_recv",
            "socket_send",
        ] {
            one(
                &after,
                "comet_io_completions_total",
                &[("shard", shard), ("op", op)],
            );
        }
        let opened = one(
            &after,
            "comet_io_completions_total",
            &[("shard", shard), ("op", "file_open")],
        );
        assert!(opened >= 1.0, "shard {shard} opened its segments");
    }
}

/// Sends `batches` SEND_BATCH_MESSAGE requests of `per_batch` messages of `body` to queue 0
/// of `topic`.
fn send_batches(client: &mut common::Client, topic: &str, batches: usize, per_batch: usize) {
    let entry = BatchEntry {
        flag: 0,
        body: b"recover me",
        properties: "",
    };
    let entries = vec![entry; per_batch];
    let mut body = BytesMut::new();
    encode_batch(&entries, &mut body).expect("a batch within the limits");
    let body = body.freeze();
    for _ in 0..batches {
        let header = SendMessageRequestHeaderV2 {
            producer_group: "metrics_pg".into(),
            topic: topic.into(),
            default_topic: "TBW102".into(),
            default_topic_queue_nums: 4,
            queue_id: 0,
            sys_flag: 0,
            born_timestamp: 1_700_000_000_000,
            flag: 0,
            properties: None,
            reconsume_times: Some(0),
            unit_mode: Some(false),
            max_reconsume_times: None,
            batch: Some(true),
            broker_name: None,
        };
        let request = RemotingCommand::request(RequestCode::SEND_BATCH_MESSAGE, 0)
            .with_header(&header)
            .with_body(body.clone());
        assert_eq!(client.call(request).response_code(), ResponseCode::SUCCESS);
    }
}

/// A one-shard broker serving metrics with `batches` batches of `per_batch` messages stored
/// and durable: its store directory, the broker and the endpoint, and the log's end position
/// (`rocketmq_storage_size`: log 0 starts at 0 and nothing has been deleted).
fn one_shard_with_log(
    name: &str,
    batches: usize,
    per_batch: usize,
) -> (TempDir, Broker, SocketAddr, f64) {
    let (directory, broker, addr) = start_with_metrics(name, 1);
    let mut client = broker.client();
    create_topic(&mut client, TOPIC, 1);
    send_batches(&mut client, TOPIC, batches, per_batch);
    let storage = [("storage_type", "local"), ("storage_medium", "disk")];
    let records = (batches * per_batch) as f64;
    let end = wait_for("every record durable", Duration::from_secs(30), || {
        let samples = scrape(addr);
        let appended = value(&samples, "comet_store_appended_records_total", &[]);
        let behind = value(&samples, "rocketmq_storage_flush_behind_bytes", &storage);
        let held = value(&samples, "rocketmq_storage_size", &storage);
        (appended == records && behind == 0.0 && held > 0.0).then_some(held)
    });
    (directory, broker, addr, end)
}

// Proves the recovery gauges after a crash: the restarted store re-verified its whole first
// segment, so the bytes scanned are the log's end position before the crash, the target
// equals them, and no store is still opening.
#[test]
fn recovery_gauges_after_a_crash_are_the_bytes_recovered() {
    let (_directory, mut broker, addr, end) = one_shard_with_log("e2e-metrics-crash", 4, 500);
    broker.kill();
    broker.restart(1);
    let samples = scrape(addr);
    let log = [("shard", "0"), ("log", "0")];
    assert_eq!(
        one(&samples, "comet_store_recovery_scanned_bytes", &log),
        end
    );
    assert_eq!(
        one(&samples, "comet_store_recovery_target_bytes", &log),
        end
    );
    assert_eq!(one(&samples, "comet_store_recovery_in_progress", &log), 0.0);
    one(&samples, "comet_store_recovery_duration_milliseconds", &log);
}

/// Removes every store checkpoint under `store` (a lost checkpoint makes recovery scan the
/// whole log); returns how many there were.
fn remove_checkpoints(store: &Path) -> usize {
    let mut removed = 0;
    let mut pending = vec![store.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("list the store").flatten() {
            let path = entry.path();
            if !path.is_dir() {
                continue;
            }
            if entry.file_name() == "checkpoint" {
                // The store's: one file per log, named by the log id.
                for file in std::fs::read_dir(&path)
                    .expect("list checkpoints")
                    .flatten()
                {
                    let name = file.file_name();
                    if name.to_str().is_some_and(|name| name.parse::<u8>().is_ok()) {
                        std::fs::remove_file(file.path()).expect("remove a checkpoint");
                        removed += 1;
                    }
                }
            } else {
                pending.push(path);
            }
        }
    }
    removed
}

// Proves the endpoint answers while the store is still opening: with its checkpoint lost,
// the restarted store scans its whole log (a few hundred thousand records), and a scrape
// during the scan reports the store in progress, the bytes scanned so far within the
// target, and none of the broker's figures; once the broker serves, the gauges are the
// whole log and the full figures are back.
#[test]
fn endpoint_reports_a_running_recovery() {
    let (directory, mut broker, addr, end) =
        one_shard_with_log("e2e-metrics-recovering", 160, 2 * 1024);
    broker.stop();
    assert_eq!(remove_checkpoints(directory.path()), 1);
    let restarting = std::thread::spawn(move || {
        broker.restart(1);
        broker
    });
    let log = [("shard", "0"), ("log", "0")];
    let during = wait_for(
        "a scrape during the recovery",
        Duration::from_secs(60),
        || {
            let stream = TcpStream::connect_timeout(&addr, Duration::from_millis(100)).ok()?;
            drop(stream);
            let samples = scrape(addr);
            let opening = samples
                .get("comet_store_recovery_in_progress")
                .is_some_and(|series| series.iter().any(|sample| sample.value == 1.0));
            if opening || restarting.is_finished() {
                return Some(samples);
            }
            None
        },
    );
    assert_eq!(one(&during, "comet_store_recovery_in_progress", &log), 1.0);
    let scanned = one(&during, "comet_store_recovery_scanned_bytes", &log);
    let target = one(&during, "comet_store_recovery_target_bytes", &log);
    assert!(scanned <= target, "{scanned} of {target}");
    assert!(!during.contains_key("rocketmq_topic_number"));
    let _broker = restarting.join().expect("the broker restarted");
    let after = scrape(addr);
    assert_eq!(one(&after, "comet_store_recovery_in_progress", &log), 0.0);
    assert_eq!(one(&after, "comet_store_recovery_scanned_bytes", &log), end);
    assert_eq!(one(&after, "comet_store_recovery_target_bytes", &log), end);
    assert!(after.contains_key("rocketmq_topic_number"));
}
