//! What per-topic statistics cost the request path: counting one send (`record_put`, three
//! items) and one pull (`record_get`) into a shard's slot holding 1,000 topics, and reading one
//! item's windows (`view`, what VIEW_BROKER_STATS_DATA does).
//!
//! Run: `cargo bench -p comet-broker --bench stats -- --warm-up-time 1 --measurement-time 3`.

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use std::hint::black_box;

use comet_broker::stats::{Delivery, ItemStats, StatsName};
use criterion::{criterion_group, criterion_main, Criterion};

const NOW_MS: i64 = 1_700_000_000_000;

fn populated() -> (ItemStats, Vec<String>) {
    let stats = ItemStats::new(2, NOW_MS);
    let topics: Vec<String> = (0..1000)
        .map(|index| format!("BenchTopic{index}"))
        .collect();
    for topic in &topics {
        stats.record_put(0, topic, "DefaultCluster", 1, 1100);
        let delivery = Delivery {
            topic,
            group: "bench_group",
            cluster: "DefaultCluster",
        };
        stats.record_get(0, delivery, 1, 1100);
    }
    stats.sample(NOW_MS + 10_000);
    (stats, topics)
}

fn counting(c: &mut Criterion) {
    let (stats, topics) = populated();
    let mut next = 0;
    c.bench_function("stats record_put (1 send, 3 items)", |b| {
        b.iter(|| {
            next = (next + 1) % topics.len();
            stats.record_put(0, black_box(&topics[next]), "DefaultCluster", 1, 1100);
        })
    });
    c.bench_function("stats record_get (1 pull, 3 items)", |b| {
        b.iter(|| {
            next = (next + 1) % topics.len();
            let delivery = Delivery {
                topic: black_box(&topics[next]),
                group: "bench_group",
                cluster: "DefaultCluster",
            };
            stats.record_get(0, delivery, 32, 35_200);
        })
    });
    c.bench_function("stats view (one item, 2 shards)", |b| {
        b.iter(|| {
            next = (next + 1) % topics.len();
            stats.view(
                StatsName::TopicPutNums,
                black_box(&topics[next]),
                "",
                NOW_MS + 15_000,
            )
        })
    });
}

criterion_group!(benches, counting);
criterion_main!(benches);
