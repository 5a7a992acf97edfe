//! What a SQL92 selector costs a pull against a tag filter
//! (docs/protocol.md#sql92-property-filters): one broker (one shard, release build,
//! `enablePropertyFilter=true`) holds one queue of messages with a few properties each; the
//! queue is pulled to its end, 32 messages a pull, under each filter in turn, alternating, and
//! each filter's wall time per pull and the broker's CPU time per stored message scanned are
//! reported (CPU from `/proc/<pid>/stat`).
//!
//! Run: `cargo bench -p comet-broker --bench sql_pull` (`SQL_PULL_MESSAGES`, default 50,000,
//! and `SQL_PULL_ROUNDS`, default 5, change the size).

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use comet_proto::headers::{PullMessageRequestHeader, PullMessageResponseHeader};
use comet_proto::message::decode_records;
use comet_proto::properties::{names, Properties};
use comet_proto::{CommandHeader, RemotingCommand, RequestCode, ResponseCode};

use common::{create_topic, send_request_with, Broker, Client, TempDir};

const TOPIC: &str = "SqlPullBench";
const PULL_BATCH: i32 = 32;

/// The filters compared: name, expression type, expression. Each keeps half the messages.
const FILTERS: &[(&str, &str, &str)] = &[
    ("TAG *", "TAG", "*"),
    ("TAG TagA", "TAG", "TagA"),
    ("SQL TAGS = 'TagA'", "SQL92", "TAGS = 'TagA'"),
    (
        "SQL color/size/region",
        "SQL92",
        "color = 'red' AND size >= 0 AND region IN ('eu', 'us', 'ap')",
    ),
];

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

/// The broker process's user + system CPU time.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces): utime is the 12th, stime 13th.
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<u64> = after_name
        .split_whitespace()
        .map(|field| field.parse().unwrap_or(0))
        .collect();
    let ticks = fields.get(11).copied().unwrap_or(0) + fields.get(12).copied().unwrap_or(0);
    // USER_HZ is 100 on Linux.
    Duration::from_millis(ticks * 10)
}

fn send_messages(client: &mut Client, count: u64) {
    create_topic(client, TOPIC, 1);
    let body = vec![b'x'; 256];
    let regions = ["eu", "us", "ap", "sa"];
    for i in 0..count {
        let mut properties = Properties::new();
        properties.insert(names::TAGS, if i % 2 == 0 { "TagA" } else { "TagB" });
        properties.insert(names::KEYS, format!("key-{i}"));
        properties.insert("color", if i % 2 == 0 { "red" } else { "blue" });
        properties.insert("size", i.to_string());
        properties.insert("region", regions[usize::try_from(i % 3).unwrap_or(0)]);
        properties.insert("tenant", "tenant-0042");
        // Pipelined sends: the queue fills quickly; answers are read in batches.
        client.send(send_request_with(TOPIC, 0, &body, &properties));
        if i % 64 == 63 || i + 1 == count {
            let pending = i % 64 + 1;
            for _ in 0..pending {
                let response = client.receive();
                assert_eq!(response.response_code(), ResponseCode::SUCCESS);
            }
        }
    }
}

/// Pulls the queue to its end under one filter; the messages delivered and pulls made.
fn pull_all(client: &mut Client, kind: &str, expression: &str) -> (u64, u64) {
    let (mut offset, mut delivered, mut pulls) = (0i64, 0u64, 0u64);
    loop {
        let header = PullMessageRequestHeader {
            consumer_group: "sql_pull_bench".into(),
            topic: TOPIC.into(),
            queue_id: 0,
            queue_offset: offset,
            max_msg_nums: PULL_BATCH,
            sys_flag: 4,
            commit_offset: 0,
            suspend_timeout_millis: 0,
            subscription: Some(expression.into()),
            sub_version: 0,
            expression_type: Some(kind.into()),
            max_msg_bytes: None,
            request_source: None,
            proxy_froward_client_id: None,
            broker_name: None,
            logical: None,
        };
        let response = client
            .call(RemotingCommand::request(RequestCode::PULL_MESSAGE, 0).with_header(&header));
        pulls += 1;
        match response.response_code() {
            ResponseCode::SUCCESS | ResponseCode::PULL_RETRY_IMMEDIATELY => {
                delivered += decode_records(response.body.clone()).len() as u64;
                let answer = PullMessageResponseHeader::from_ext_fields(&response.ext_fields)
                    .expect("pull answer header");
                offset = answer.next_begin_offset;
            }
            ResponseCode::PULL_NOT_FOUND => return (delivered, pulls),
            other => panic!("pull answered {other:?}: {:?}", response.remark),
        }
    }
}

fn main() {
    let messages = env_number("SQL_PULL_MESSAGES", 50_000);
    let rounds = env_number("SQL_PULL_ROUNDS", 5);
    let directory = TempDir::new("sql-pull-bench");
    let broker = Broker::start(&directory.0, 1, &["-o", "enablePropertyFilter=true"]);
    let pid = broker
        .child
        .as_ref()
        .map(std::process::Child::id)
        .expect("broker runs");
    let mut client = broker.client();
    send_messages(&mut client, messages);
    // One pass each to warm the caches and compile the selectors.
    for (_, kind, expression) in FILTERS {
        pull_all(&mut client, kind, expression);
    }
    let mut wall = vec![Duration::ZERO; FILTERS.len()];
    let mut cpu = vec![Duration::ZERO; FILTERS.len()];
    let mut counts = vec![(0, 0); FILTERS.len()];
    for _ in 0..rounds {
        for (index, (_, kind, expression)) in FILTERS.iter().enumerate() {
            let (cpu_before, started) = (cpu_time(pid), Instant::now());
            counts[index] = pull_all(&mut client, kind, expression);
            wall[index] += started.elapsed();
            cpu[index] += cpu_time(pid).saturating_sub(cpu_before);
        }
    }
    println!("{messages} messages of 256 B with 6 properties, one queue, {PULL_BATCH} per pull");
    println!("| filter | delivered | pulls | wall µs/pull | broker CPU ns/message scanned |");
    println!("|---|---|---|---|---|");
    for (index, (name, _, _)) in FILTERS.iter().enumerate() {
        let (delivered, pulls) = counts[index];
        let wall_us = wall[index].as_secs_f64() * 1e6 / (pulls * rounds) as f64;
        let cpu_ns = cpu[index].as_secs_f64() * 1e9 / (messages * rounds) as f64;
        println!("| {name} | {delivered} | {pulls} | {wall_us:.1} | {cpu_ns:.0} |");
    }
}
