//! Helpers shared by the store's integration tests: small store configs and record encoding.
//! Temporary stores are comet-test-support's [`TempDir`]s, on a real file system (direct I/O
//! needs one; tmpfs silently drops O_DIRECT).

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use comet_proto::message::{encode_record, RecordSpec};
use comet_store::{LogId, StoreConfig};
pub use comet_test_support::TempDir;

/// A small-store config: 256 KiB segments, 64 KiB chunks, no background noise.
pub fn small_config(root: &Path) -> StoreConfig {
    let mut config = StoreConfig::new(root, LogId::new(3).expect("log id"));
    config.segment_bytes = 256 * 1024;
    config.chunk_bytes = 64 * 1024;
    config.read_cache_bytes = 128 * 1024;
    config.cq_entries_per_file = 1024;
    config.cq_flush_interval_ms = 50;
    // Tests must not depend on how full the machine's disk is: no forced deletion, no refusal.
    config.disk_max_used_ratio = 1.0;
    config.disk_high_ratio = 1.0;
    config.disk_hard_ratio = 1.0;
    config
}

/// A time within the next two days, ms since the epoch, whose local hour is `hour`
/// (retention's `delete_when_hours` are local hours).
pub fn at_local_hour(hour: u32) -> i64 {
    const HOUR_MS: i64 = 3_600_000;
    let now = comet_rt::clock::wall_clock_ms();
    let next_hour = now - now.rem_euclid(HOUR_MS) + HOUR_MS + HOUR_MS / 2;
    (0..48)
        .map(|k| next_hour + k * HOUR_MS)
        .find(|at| comet_store::local_hour(*at) == hour)
        .expect("every hour of the day comes within two days")
}

/// A time within the next two days, ms since the epoch, whose local hour is none of `hours`.
pub fn off_local_hours(hours: &[u32]) -> i64 {
    let hour = (0..24)
        .find(|hour| !hours.contains(hour))
        .expect("a free hour");
    at_local_hour(hour)
}

/// Properties string from name/value pairs.
pub fn properties(pairs: &[(&str, &str)]) -> String {
    let mut text = String::new();
    for (name, value) in pairs {
        text.push_str(name);
        text.push('\u{1}');
        text.push_str(value);
        text.push('\u{2}');
    }
    text
}

/// One encoded record (offsets and store time zero, as a broker hands it to the store).
pub fn record(topic: &str, queue_id: i32, body: &[u8], properties: &str) -> BytesMut {
    let host: SocketAddr = "127.0.0.1:10911".parse().expect("addr");
    let spec = RecordSpec {
        topic,
        queue_id,
        flag: 0,
        sysflag: 0,
        born_timestamp: 1_700_000_000_000,
        born_host: host,
        store_host: host,
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body,
        properties,
    };
    let mut buffer = BytesMut::new();
    encode_record(&spec, 0, 0, 0, &mut buffer).expect("encodable");
    buffer
}

/// The tag a record's body starts with (see [`body`]).
pub fn body_tag(record: &[u8]) -> u64 {
    let view = comet_proto::message::RecordView::parse(record).expect("valid record");
    u64::from_be_bytes(view.body()[..8].try_into().expect("8 bytes"))
}

/// A body of `length` bytes that encodes `tag` so it can be checked after a read.
pub fn body(tag: u64, length: usize) -> Vec<u8> {
    let mut body = tag.to_be_bytes().to_vec();
    while body.len() < length {
        body.push((body.len() as u64 ^ tag).to_le_bytes()[0]);
    }
    body.truncate(length.max(8));
    body
}

/// Polls `condition` on the running shard until it holds or `limit` passes; whether it
/// held. Each poll that fails waits a few milliseconds without blocking the shard, so the
/// store's background tasks (flushes, maintenance) run in between.
pub async fn poll_until_async(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        comet_rt::local::sleep(Duration::from_millis(10)).await;
    }
}
