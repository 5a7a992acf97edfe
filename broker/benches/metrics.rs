//! What the metrics cost the request path: counting one send request (`rpc_timer`,
//! `record_put`, `record_rpc`) into a shard's slot holding 1,000 topics, with metrics on and
//! off, and encoding a scrape of those topics.
//!
//! Run: `cargo bench -p comet-broker --bench metrics -- --warm-up-time 1 --measurement-time 3`.

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use std::hint::black_box;

use comet_broker::metrics::{encode, BrokerFigures, BrokerLabels, Metrics, Snapshot};
use comet_proto::properties::push_entry;
use criterion::{criterion_group, criterion_main, Criterion};

/// SEND_MESSAGE_V2 and SUCCESS.
const SEND_CODE: i32 = 310;

fn populated(enabled: bool) -> (Metrics, Vec<String>, String) {
    let metrics = Metrics::new(2, enabled);
    let topics: Vec<String> = (0..1000)
        .map(|index| format!("BenchTopic{index}"))
        .collect();
    // The properties a Java producer sends with a keyed, tagged message.
    let mut properties = String::new();
    push_entry(&mut properties, "KEYS", "order-12345");
    push_entry(&mut properties, "TAGS", "TagA");
    push_entry(
        &mut properties,
        "UNIQ_KEY",
        "7F000001A1B218B4AAC2470E5C3B0000",
    );
    push_entry(&mut properties, "WAIT", "true");
    for topic in &topics {
        metrics.record_put(0, topic, &properties, 1, 1100);
        metrics.record_rpc(0, metrics.rpc_timer(), SEND_CODE, Some(0));
    }
    (metrics, topics, properties)
}

fn one_send(metrics: &Metrics, topic: &str, properties: &str) {
    let started = metrics.rpc_timer();
    metrics.record_put(0, topic, properties, 1, 1100);
    metrics.record_rpc(0, started, SEND_CODE, Some(0));
}

fn counting(c: &mut Criterion) {
    for enabled in [true, false] {
        let (metrics, topics, properties) = populated(enabled);
        let mut next = 0;
        let name = format!("metrics one send (on: {enabled})");
        c.bench_function(&name, |b| {
            b.iter(|| {
                next = (next + 1) % topics.len();
                one_send(&metrics, black_box(&topics[next]), black_box(&properties));
            })
        });
    }
    let (metrics, _, _) = populated(true);
    c.bench_function("metrics scrape (1,000 topics, 2 shards)", |b| {
        b.iter(|| {
            let snapshot = Snapshot {
                labels: BrokerLabels {
                    cluster: "DefaultCluster".to_owned(),
                    node_id: "broker-a".to_owned(),
                },
                shards: metrics.shards(),
                consumers: comet_broker::metrics::consumer::ConsumerFigures::default(),
                wall_clock_ms: 0,
                broker: BrokerFigures::default(),
                recovery: Vec::new(),
            };
            black_box(encode::encode(snapshot).map(|text| text.len()))
        })
    });
}

criterion_group!(benches, counting);
criterion_main!(benches);
