//! Functional tests of the store on a real file system: appends, batches, rolls at small
//! segment sizes, reads from memory and disk, lookups, reopen, retention, async flush.

mod common;

use std::time::Duration;

use comet_proto::message::RecordView;
use comet_store::{
    FlushPolicy, GetStatus, MessageFilter, PhysicalOffset, QueueOffset, Store, StoreConfig,
    TimeBoundary,
};
use common::{body, body_tag, properties, record, small_config, TempDir};

fn run<T>(future: impl std::future::Future<Output = T>) -> T {
    comet_rt::local::run_local("store-test", future)
}

async fn read_all(store: &Store, topic: &str, queue_id: i32) -> Vec<bytes::Bytes> {
    let mut records = Vec::new();
    let mut offset = store.min_offset(topic, queue_id);
    loop {
        let got = store
            .get_messages(topic, queue_id, offset, 64, 1 << 20, MessageFilter::All)
            .await
            .expect("get");
        if got.status != GetStatus::Found {
            return records;
        }
        records.extend(got.records);
        offset = got.next_offset;
    }
}

// Proves offsets are dense per queue across many appends that roll several 256 KiB segments,
// that every record reads back intact (some from memory, most from disk after eviction), and
// that a clean reopen keeps everything and continues the offsets.
#[test]
fn rolls_reads_and_reopen() {
    let dir = TempDir::new("rolls");
    let config = small_config(dir.path());
    run(async {
        let store = Store::open(config.clone()).await.expect("open");
        for index in 0..1200u64 {
            let queue_id = (index % 3) as i32;
            let one = record("Rolls", queue_id, &body(index, 700), "");
            let appended = store.append(&[one]).await.expect("append");
            assert_eq!(appended[0].queue_offset, QueueOffset(index / 3));
        }
        let segments = std::fs::read_dir(dir.path().join("commitlog/3"))
            .expect("ls")
            .count();
        assert!(
            segments >= 4,
            "1200 x ~800 bytes roll 256 KiB segments: {segments}"
        );
        for queue_id in 0..3 {
            let records = read_all(&store, "Rolls", queue_id).await;
            assert_eq!(records.len(), 400);
            for (offset, bytes) in records.iter().enumerate() {
                assert_eq!(body_tag(bytes), offset as u64 * 3 + queue_id as u64);
                let view = RecordView::parse(bytes).expect("parse");
                assert_eq!(view.queue_offset(), offset as i64);
            }
        }
        store.shutdown().await.expect("shutdown");
    });
    assert!(
        !dir.path().join("abort").exists(),
        "clean shutdown removes abort"
    );
    run(async {
        let store = Store::open(config).await.expect("reopen");
        assert_eq!(store.max_offset("Rolls", 2), QueueOffset(400));
        let appended = store
            .append(&[record("Rolls", 2, &body(9999, 10), "")])
            .await;
        assert_eq!(appended.expect("append")[0].queue_offset, QueueOffset(400));
        assert_eq!(read_all(&store, "Rolls", 1).await.len(), 400);
        store.shutdown().await.expect("shutdown");
    });
}

// Proves a batch gets consecutive offsets and one result per record, and that many
// concurrent appenders all get distinct dense offsets.
#[test]
fn batches_and_concurrent_appenders() {
    let dir = TempDir::new("batch");
    run(async {
        let store = Store::open(small_config(dir.path())).await.expect("open");
        let batch: Vec<_> = (0..10)
            .map(|i| record("Batch", 0, &body(i, 50), ""))
            .collect();
        let appended = store.append(&batch).await.expect("batch");
        let offsets: Vec<u64> = appended.iter().map(|a| a.queue_offset.0).collect();
        assert_eq!(offsets, (0..10).collect::<Vec<_>>());
        let mut tasks = Vec::new();
        for task in 0..64u64 {
            let store = store.clone();
            tasks.push(comet_rt::local::spawn(async move {
                let mut offsets = Vec::new();
                for step in 0..10 {
                    let one = record("Batch", 1, &body(task * 100 + step, 200), "");
                    offsets.push(
                        store.append(&[one]).await.expect("append")[0]
                            .queue_offset
                            .0,
                    );
                }
                offsets
            }));
        }
        let mut all = Vec::new();
        for task in tasks {
            all.extend(task.await);
        }
        all.sort_unstable();
        assert_eq!(all, (0..640).collect::<Vec<_>>());
        let stats = store.stats();
        assert!(
            stats.fdatasyncs < stats.appended_records,
            "group commit shares syncs"
        );
        store.shutdown().await.expect("shutdown");
    });
}

// Proves tag filtering by code, lookups by key and unique key, by physical offset, by time,
// and the earliest store time.
#[test]
fn filters_and_lookups() {
    let dir = TempDir::new("lookups");
    run(async {
        let store = Store::open(small_config(dir.path())).await.expect("open");
        let mut physical = Vec::new();
        for index in 0..20u64 {
            let tag = if index % 2 == 0 { "TagA" } else { "TagB" };
            let unique = format!("UNIQ{index}");
            let keys = format!("order{index} shared");
            let props = properties(&[("TAGS", tag), ("UNIQ_KEY", &unique), ("KEYS", &keys)]);
            let one = record("Look", 0, &body(index, 64), &props);
            physical.push(store.append(&[one]).await.expect("append")[0]);
            if index == 9 {
                // A gap in store times between the two halves, which the lookup by time
                // below tells apart; the pause is the input, not a wait for anything.
                comet_rt::local::sleep(Duration::from_millis(20)).await;
            }
        }
        let codes = [comet_store::consume_queue::tag_code("TagB")];
        let got = store
            .get_messages(
                "Look",
                0,
                QueueOffset(0),
                100,
                1 << 20,
                MessageFilter::TagCodes(&codes),
            )
            .await
            .expect("get");
        assert_eq!(got.records.len(), 10);
        assert!(got.records.iter().all(|r| body_tag(r) % 2 == 1));
        assert_eq!(got.next_offset, QueueOffset(20));
        let found = store
            .query_by_key("Look", "UNIQ7", 10, 0, i64::MAX)
            .await
            .expect("q");
        assert_eq!(found.len(), 1);
        assert_eq!(body_tag(&found[0]), 7);
        let shared = store
            .query_by_key("Look", "shared", 5, 0, i64::MAX)
            .await
            .expect("q");
        assert_eq!(shared.len(), 5);
        let by_id = store
            .read_record(physical[4].physical_offset)
            .await
            .expect("read");
        assert_eq!(body_tag(&by_id.expect("stored")), 4);
        let split_time = physical[10].store_timestamp_ms;
        let lower = store
            .offset_by_timestamp("Look", 0, split_time, TimeBoundary::Lower)
            .await
            .expect("time");
        assert!(lower.0 <= 10 && lower.0 >= 1, "lower {lower:?}");
        let upper = store
            .offset_by_timestamp("Look", 0, split_time, TimeBoundary::Upper)
            .await
            .expect("time");
        assert!(upper.0 >= 10, "upper {upper:?}");
        let earliest = store
            .earliest_store_time("Look", 0)
            .await
            .expect("earliest");
        assert_eq!(earliest, Some(physical[0].store_timestamp_ms));
        store.shutdown().await.expect("shutdown");
    });
}

// Proves pull statuses for an empty queue and offsets below, at and past the max, and that
// a waiter for new data wakes when a record for its queue becomes durable.
#[test]
fn statuses_and_long_poll_wake() {
    let dir = TempDir::new("wake");
    run(async {
        let store = Store::open(small_config(dir.path())).await.expect("open");
        let empty = store
            .get_messages("Wake", 0, QueueOffset(0), 1, 1024, MessageFilter::All)
            .await
            .expect("get");
        assert_eq!(empty.status, GetStatus::NoMessageInQueue);
        let waiter = {
            let store = store.clone();
            comet_rt::local::spawn(async move {
                store.wait_for_message("Wake", 0, QueueOffset(0)).await;
                store.max_offset("Wake", 0)
            })
        };
        // One executor thread: while this task yields, the waiter runs until it parks in
        // wait_for_message, so the append below must wake it.
        comet_rt::local::yield_now().await;
        store
            .append(&[record("Wake", 0, b"hello-wake", "")])
            .await
            .expect("append");
        assert_eq!(waiter.await, QueueOffset(1));
        let at_max = store
            .get_messages("Wake", 0, QueueOffset(1), 1, 1024, MessageFilter::All)
            .await
            .expect("get");
        assert_eq!(at_max.status, GetStatus::OffsetOverflowOne);
        let past = store
            .get_messages("Wake", 0, QueueOffset(5), 1, 1024, MessageFilter::All)
            .await
            .expect("get");
        assert_eq!(past.status, GetStatus::OffsetOverflowBadly);
        assert_eq!(past.next_offset, QueueOffset(1));
        store.shutdown().await.expect("shutdown");
    });
}

// Proves ASYNC_FLUSH acknowledges before the flush and makes records visible only after
// the interval flush, never before.
#[test]
fn async_flush_visibility() {
    let dir = TempDir::new("async");
    let mut config = small_config(dir.path());
    config.flush_policy = FlushPolicy::Async;
    config.flush_interval_ms = 100;
    run(async {
        let store = Store::open(config).await.expect("open");
        store
            .append(&[record("Async", 0, b"x-async-body", "")])
            .await
            .expect("append");
        assert_eq!(
            store.max_offset("Async", 0),
            QueueOffset(0),
            "not durable yet"
        );
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while store.max_offset("Async", 0) != QueueOffset(1) {
            assert!(
                std::time::Instant::now() < deadline,
                "the interval flush never came"
            );
            comet_rt::local::sleep(Duration::from_millis(10)).await;
        }
        store.shutdown().await.expect("shutdown");
    });
}

// Proves ASYNC_FLUSH bounds memory: a producer that never yields on its own still cannot
// get more than `async_dirty_bytes_max` ahead of the disk, and every record becomes visible.
#[test]
fn async_flush_back_pressure() {
    let dir = TempDir::new("async-pressure");
    let mut config = small_config(dir.path());
    config.flush_policy = FlushPolicy::Async;
    config.flush_interval_ms = 5;
    config.async_dirty_bytes_max = 64 * 1024;
    run(async {
        let store = Store::open(config).await.expect("open");
        for index in 0..3000u64 {
            store
                .append(&[record("Pressure", 0, &body(index, 1000), "")])
                .await
                .expect("append");
            assert!(
                store.unflushed_bytes() <= 64 * 1024 + 1200,
                "{}",
                store.unflushed_bytes()
            );
        }
        store
            .wait_for_message("Pressure", 0, QueueOffset(2999))
            .await;
        assert_eq!(store.max_offset("Pressure", 0), QueueOffset(3000));
        store.shutdown().await.expect("shutdown");
    });
}

// Proves the schedule topic's consume-queue tag is the due time and that prepared
// transaction records take no queue offset.
#[test]
fn schedule_due_time_and_prepared_records() {
    let dir = TempDir::new("schedule");
    run(async {
        let store = Store::open(small_config(dir.path())).await.expect("open");
        let props = properties(&[("DELAY", "3")]);
        let delayed = record("SCHEDULE_TOPIC_XXXX", 2, b"later", &props);
        let appended = store.append(&[delayed]).await.expect("append");
        let mut prepared = record("Tx", 0, b"half", "");
        prepared[36..40].copy_from_slice(&(1i32 << 2).to_be_bytes());
        let half = store.append(&[prepared]).await.expect("append prepared");
        assert_eq!(half[0].queue_offset, QueueOffset(0));
        assert_eq!(store.max_offset("Tx", 0), QueueOffset(0));
        store.shutdown().await.expect("shutdown");
        drop(store);
        let due = appended[0].store_timestamp_ms + 10_000;
        let queue = dir
            .path()
            .join("consumequeue/SCHEDULE_TOPIC_XXXX/2/00000000000000000000");
        let bytes = std::fs::read(queue).expect("cq file");
        assert_eq!(
            i64::from_be_bytes(bytes[12..20].try_into().expect("8")),
            due
        );
    });
}

// Proves a second open of a locked store fails with Locked, and that retention deletes
// expired segments (and consume-queue files pointing only into them), moving min offsets.
#[test]
fn lock_and_retention() {
    let dir = TempDir::new("retention");
    let mut config = small_config(dir.path());
    config.file_reserved_hours = 0;
    config.retention_check_interval_ms = 3_600_000;
    run(async {
        let store = Store::open(config.clone()).await.expect("open");
        let second = Store::open(config.clone()).await;
        assert!(matches!(
            second,
            Err(comet_store::StoreError::Locked { .. })
        ));
        for index in 0..2400u64 {
            store
                .append(&[record("Old", 0, &body(index, 700), "")])
                .await
                .expect("append");
        }
        // Lets the consume-queue flush (every 50 ms) write the files retention must then
        // delete; the store offers no signal for "this queue's files are on disk", so this
        // is a margin of two intervals, not a condition.
        comet_rt::local::sleep(Duration::from_millis(120)).await;
        let at_delete_hour = common::at_local_hour(config.delete_when_hours[0]);
        let deleted = store
            .run_retention_once(at_delete_hour)
            .await
            .expect("retention");
        assert!(deleted >= 5, "deleted {deleted}");
        let min = store.min_offset("Old", 0);
        assert!(min.0 > 1024, "min moved: {min:?}");
        let got = store
            .get_messages("Old", 0, QueueOffset(0), 1, 1 << 20, MessageFilter::All)
            .await
            .expect("get");
        assert_eq!(got.status, GetStatus::OffsetTooSmall);
        assert_eq!(read_all(&store, "Old", 0).await.len() as u64, 2400 - min.0);
        let cq_dir = dir.path().join("consumequeue/Old/0");
        assert!(
            !cq_dir.join("00000000000000000000").exists(),
            "first cq file deleted"
        );
        store.shutdown().await.expect("shutdown");
    });
}

// Proves invalid input is refused with a typed error and writes nothing.
#[test]
fn invalid_records_are_refused() {
    let dir = TempDir::new("invalid");
    run(async {
        let store = Store::open(small_config(dir.path())).await.expect("open");
        let mut bad_crc = record("Bad", 0, b"payload", "");
        bad_crc[8] ^= 0x01;
        let refused = store.append(&[bad_crc]).await;
        assert!(matches!(
            refused,
            Err(comet_store::StoreError::RecordInvalid { .. })
        ));
        let refused = store.append(&[&b"short"[..]]).await;
        assert!(matches!(
            refused,
            Err(comet_store::StoreError::RecordInvalid { .. })
        ));
        let huge = record("Bad", 0, &vec![0u8; 200 * 1024], "");
        let refused = store.append(&[huge]).await;
        assert!(matches!(
            refused,
            Err(comet_store::StoreError::RecordTooLarge { .. })
        ));
        assert_eq!(store.max_offset("Bad", 0), QueueOffset(0));
        store.shutdown().await.expect("shutdown");
    });
}

// Proves tailing reads (a consumer reading what was just written) are served from memory
// with no disk read, and that older data, evicted from the cache, is read from disk.
#[test]
fn tailing_reads_cost_no_disk_io() {
    let dir = TempDir::new("tailing");
    let config: StoreConfig = small_config(dir.path());
    run(async {
        let store = Store::open(config).await.expect("open");
        let mut next = QueueOffset(0);
        for index in 0..600u64 {
            store
                .append(&[record("Tail", 0, &body(index, 900), "")])
                .await
                .expect("append");
            let got = store
                .get_messages("Tail", 0, next, 32, 1 << 20, MessageFilter::All)
                .await
                .expect("get");
            assert_eq!(got.records.len(), 1);
            next = got.next_offset;
        }
        assert_eq!(store.stats().disk_reads, 0, "tailing reads stay in memory");
        let old = store
            .get_messages("Tail", 0, QueueOffset(0), 4, 1 << 20, MessageFilter::All)
            .await
            .expect("get");
        assert_eq!(old.records.len(), 4);
        assert!(
            store.stats().disk_reads >= 1,
            "evicted data comes from disk: {:?}",
            store.stats()
        );
        store.shutdown().await.expect("shutdown");
    });
}

/// Queues of the interleaved log the read-window tests drain, and records per queue.
const DRAIN_QUEUES: i32 = 8;
const DRAIN_RECORDS: u64 = 200;

/// Writes `DRAIN_RECORDS` records into each of `DRAIN_QUEUES` queues of "Drain", one record
/// per queue in turn (their bytes interleave in the log), bodies of 600 to 1,400 bytes so
/// records end at every place of a segment; returns the physical offsets by tag.
async fn fill_interleaved(store: &Store) -> Vec<PhysicalOffset> {
    let mut physical = Vec::new();
    for round in 0..DRAIN_RECORDS {
        let batch: Vec<_> = (0..DRAIN_QUEUES)
            .map(|queue_id| {
                let tag = round * DRAIN_QUEUES as u64 + queue_id as u64;
                let length = 600 + (tag * 337 % 800) as usize;
                record("Drain", queue_id, &body(tag, length), "")
            })
            .collect();
        let appended = store.append(&batch).await.expect("append");
        physical.extend(appended.iter().map(|one| one.physical_offset));
    }
    physical
}

/// Drains every queue of "Drain" from its first record, as a consumer group of one pulling
/// consumer per queue would: 32 records per pull, the queues in turn. Checks every record
/// is the one written at its queue offset.
async fn drain_interleaved(store: &Store) {
    let mut next = vec![QueueOffset(0); DRAIN_QUEUES as usize];
    let mut pulls = 0;
    while next.iter().any(|offset| offset.0 < DRAIN_RECORDS) {
        for queue_id in 0..DRAIN_QUEUES {
            let offset = next[queue_id as usize];
            if offset.0 == DRAIN_RECORDS {
                continue;
            }
            let got = store
                .get_messages("Drain", queue_id, offset, 32, 1 << 20, MessageFilter::All)
                .await
                .expect("get");
            assert_eq!(got.status, GetStatus::Found);
            for (index, bytes) in got.records.iter().enumerate() {
                let queue_offset = offset.0 + index as u64;
                let tag = queue_offset * DRAIN_QUEUES as u64 + queue_id as u64;
                assert_eq!(
                    body_tag(bytes),
                    tag,
                    "queue {queue_id} offset {queue_offset}"
                );
                let view = RecordView::parse(bytes).expect("parse");
                assert_eq!(view.queue_offset(), queue_offset as i64);
                assert_eq!(view.body().len(), 600 + (tag * 337 % 800) as usize);
            }
            next[queue_id as usize] = got.next_offset;
            pulls += 1;
        }
    }
    assert!(
        pulls >= DRAIN_QUEUES * 7,
        "32 records at most per pull: {pulls}"
    );
}

/// A store of `DRAIN_QUEUES` interleaved queues, written and closed (so every read after
/// a reopen is cold), with `read_window_cache_bytes` set to `window_bytes`; the physical
/// offsets of its records by tag.
fn interleaved_store(
    name: &str,
    window_bytes: usize,
) -> (TempDir, StoreConfig, Vec<PhysicalOffset>) {
    let dir = TempDir::new(name);
    let mut config = small_config(dir.path());
    config.read_window_cache_bytes = window_bytes;
    let physical = run(async {
        let store = Store::open(config.clone()).await.expect("open");
        let physical = fill_interleaved(&store).await;
        store.shutdown().await.expect("shutdown");
        physical
    });
    (dir, config, physical)
}

// Proves cold reads through the read windows kept across pulls return exactly the records
// written (8 interleaved queues over several 256 KiB segments, records ending at every place
// of a segment; records read by offset, head first, too), and that the windows never hold
// more than their bound, here two read-aheads.
#[test]
fn kept_read_windows_return_what_was_written() {
    let bound = 2 * comet_store::limits::READ_AHEAD_BYTES;
    let (_dir, config, physical) = interleaved_store("windows-exact", bound);
    run(async {
        let store = Store::open(config.clone()).await.expect("reopen");
        assert!(
            store.written_position() > 6 * 256 * 1024,
            "several segments"
        );
        drain_interleaved(&store).await;
        let stats = store.stats();
        assert!(stats.read_window_hits > 0, "{stats:?}");
        let memory = store.read_window_memory();
        assert_eq!(memory.bound_bytes, bound);
        assert!(memory.peak_bytes > bound / 2, "{memory:?}");
        assert!(memory.peak_bytes <= bound, "{memory:?}");
        assert!(memory.held_bytes <= bound, "{memory:?}");
        store.shutdown().await.expect("shutdown");
    });
    run(async {
        let store = Store::open(config).await.expect("reopen");
        for (tag, at) in physical.iter().enumerate().step_by(3) {
            let bytes = store.read_record(*at).await.expect("read").expect("stored");
            assert_eq!(body_tag(&bytes), tag as u64, "at {at}");
        }
        let stats = store.stats();
        assert!(
            stats.read_window_hits > 0,
            "heads read through kept windows: {stats:?}"
        );
        assert!(store.read_window_memory().peak_bytes <= bound);
        store.shutdown().await.expect("shutdown");
    });
}

// Proves a drain like the backlog workload (a group draining 8 interleaved queues from
// their first record) reads the disk far less often with the read windows kept across
// pulls than without, where each pull read its ranges again.
#[test]
fn kept_read_windows_save_disk_reads() {
    let reads = |window_bytes: usize| {
        let (_dir, config, _) = interleaved_store("windows-saved", window_bytes);
        run(async {
            let store = Store::open(config).await.expect("reopen");
            drain_interleaved(&store).await;
            let stats = store.stats();
            store.shutdown().await.expect("shutdown");
            stats
        })
    };
    let without = reads(0);
    let with = reads(comet_store::limits::READ_WINDOW_CACHE_BYTES_DEFAULT);
    assert_eq!(without.read_window_hits, 0, "{without:?}");
    assert!(with.read_window_misses <= with.disk_reads, "{with:?}");
    assert!(
        with.disk_reads * 3 <= without.disk_reads,
        "with windows {with:?}, without {without:?}"
    );
}

// Proves the windows lie on one grid of the log: a drain of interleaved queues whose windows
// all fit the bound reads each window of the log from disk once (windows that started at a
// record overlapped, and each queue read the log again).
#[test]
fn a_drain_reads_each_window_once() {
    let (_dir, config, _) = interleaved_store(
        "windows-once",
        comet_store::limits::READ_WINDOW_CACHE_BYTES_DEFAULT,
    );
    run(async {
        let store = Store::open(config.clone()).await.expect("reopen");
        let window = comet_store::limits::READ_AHEAD_BYTES as u64;
        let windows = store.written_position().div_ceil(window);
        drain_interleaved(&store).await;
        let stats = store.stats();
        assert!(stats.read_window_hits > 0, "{stats:?}");
        assert!(
            stats.disk_reads <= windows,
            "{windows} windows in the log: {stats:?}"
        );
        let memory = store.memory();
        let bound = comet_store::limits::READ_WINDOW_CACHE_BYTES_DEFAULT as u64;
        assert!(memory.read_windows_bytes > 0, "{memory:?}");
        assert!(memory.read_windows_bytes <= bound, "{memory:?}");
        assert!(
            memory.log_chunks_bytes <= (config.read_cache_bytes + config.chunk_bytes) as u64,
            "{memory:?}"
        );
        store.shutdown().await.expect("shutdown");
    });
}

// Proves pulls that miss the same window at the same moment read it from disk once: the
// queues of a drain move in step, and each read every window itself before (four times the
// log for four queues).
#[test]
fn pulls_missing_one_window_together_read_it_once() {
    let (_dir, config, _) = interleaved_store(
        "windows-together",
        comet_store::limits::READ_WINDOW_CACHE_BYTES_DEFAULT,
    );
    run(async {
        let store = Store::open(config.clone()).await.expect("reopen");
        let window = comet_store::limits::READ_AHEAD_BYTES as u64;
        let windows = store.written_position().div_ceil(window);
        let pulls = (0..DRAIN_QUEUES).map(|queue_id| {
            store.get_messages(
                "Drain",
                queue_id,
                QueueOffset(0),
                32,
                1 << 20,
                MessageFilter::All,
            )
        });
        for got in futures::future::join_all(pulls).await {
            assert_eq!(got.expect("get").status, GetStatus::Found);
        }
        let stats = store.stats();
        assert!(
            stats.disk_reads <= windows,
            "{windows} windows in the log: {stats:?}"
        );
        store.shutdown().await.expect("shutdown");
    });
}

// Proves a cold pull reads ahead past its last record: the windows it keeps reach
// `READ_PAST_PULL_BYTES` beyond the records it returned, and the queue's next pull finds
// its records there.
#[test]
fn a_cold_pull_reads_ahead_for_the_next() {
    let dir = TempDir::new("windows-ahead");
    let mut config = small_config(dir.path());
    config.segment_bytes = 4 * 1024 * 1024;
    run(async {
        let store = Store::open(config.clone()).await.expect("open");
        fill_interleaved(&store).await;
        store.shutdown().await.expect("shutdown");
    });
    run(async {
        let store = Store::open(config.clone()).await.expect("reopen");
        let pull = |offset| {
            store.get_messages(
                "Drain",
                0,
                QueueOffset(offset),
                32,
                1 << 20,
                MessageFilter::All,
            )
        };
        let first = pull(0).await.expect("get");
        assert_eq!(first.records.len(), 32);
        let ahead = comet_store::limits::READ_PAST_PULL_BYTES;
        let kept = store.memory().read_windows_bytes;
        assert!(kept > ahead, "kept {kept} bytes, read ahead {ahead}");
        let hits = store.stats().read_window_hits;
        let second = pull(first.next_offset.0).await.expect("get");
        assert_eq!(second.records.len(), 32);
        assert!(
            store.stats().read_window_hits > hits,
            "the next pull hit kept windows"
        );
        store.shutdown().await.expect("shutdown");
    });
}

/// The body tag of the one record of topic "Linked" found under `key`.
async fn only_tag(store: &Store, key: &str) -> u64 {
    let found = store
        .query_by_key("Linked", key, 4, 0, i64::MAX)
        .await
        .expect("query");
    assert_eq!(found.len(), 1, "one record under {key}");
    body_tag(&found[0])
}

// Proves keys are found by query right after their records are appended, whatever the
// index linker has done so far, and that the linker catches up in the background.
#[test]
fn key_queries_before_and_after_background_linking() {
    let dir = TempDir::new("index-linker");
    run(async {
        let store = Store::open(small_config(dir.path())).await.expect("open");
        const RECORDS: u64 = 3_000;
        let mut batch = Vec::new();
        for index in 0..RECORDS {
            let unique = format!("U{index}");
            let props = properties(&[("UNIQ_KEY", &unique), ("KEYS", "all")]);
            batch.push(record("Linked", 0, &body(index, 16), &props));
            if batch.len() == 500 {
                store.append(&batch).await.expect("append");
                batch.clear();
            }
        }
        // Usually some entries are still unlinked here (the index unit test covers lookups
        // at every link progress deterministically); the queries must not care.
        assert_eq!(only_tag(&store, "U2999").await, 2999);
        assert_eq!(only_tag(&store, "U0").await, 0);
        let newest = store
            .query_by_key("Linked", "all", 3, 0, i64::MAX)
            .await
            .expect("q");
        let tags: Vec<u64> = newest.iter().map(|record| body_tag(record)).collect();
        assert_eq!(tags, vec![2999, 2998, 2997]);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while store.index_unlinked_entries() > 0 {
            assert!(std::time::Instant::now() < deadline, "linker catches up");
            comet_rt::local::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(only_tag(&store, "U1500").await, 1500);
        let all = store
            .query_by_key("Linked", "all", 10_000, 0, i64::MAX)
            .await
            .expect("q");
        assert_eq!(all.len() as u64, RECORDS);
        assert_eq!(body_tag(&all[0]), RECORDS - 1);
        store.shutdown().await.expect("shutdown");
    });
}

// Proves the warmer writes zeros ahead of the log (when idle, and behind small flushes while
// concurrent appenders roll segments), that no zero ever lands on data: every record reads
// back intact from disk after a reopen, and that warming off writes no zeros.
#[test]
fn warming_ahead_never_touches_data() {
    let dir = TempDir::new("warm");
    let mut config = small_config(dir.path());
    config.warm_ahead_bytes = 512 * 1024;
    run(async {
        let store = Store::open(config.clone()).await.expect("open");
        // Idle: the warmer zeroes the active segment (the spare comes with the first append).
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while store.stats().zeroed_bytes < 256 * 1024 - 4096 {
            assert!(std::time::Instant::now() < deadline, "{:?}", store.stats());
            comet_rt::local::sleep(Duration::from_millis(5)).await;
        }
        let mut tasks = Vec::new();
        for task in 0..32u64 {
            let store = store.clone();
            tasks.push(comet_rt::local::spawn(async move {
                for step in 0..40 {
                    let one = record("Warm", (task % 4) as i32, &body(task * 100 + step, 700), "");
                    store.append(&[one]).await.expect("append");
                }
            }));
        }
        for task in tasks {
            task.await;
        }
        let stats = store.stats();
        assert!(
            stats.zeroed_bytes > stats.appended_bytes / 2,
            "the warmer keeps up with small flushes: {stats:?}"
        );
        // 300 appends at once, one large flush (~230 KiB): the warmer holds back, then
        // resumes once the store is quiet.
        let burst: Vec<_> = (0..300u64)
            .map(|step| {
                let store = store.clone();
                comet_rt::local::spawn(async move {
                    let one = record("Warm", 0, &body(10_000 + step, 700), "");
                    store.append(&[one]).await.expect("append");
                })
            })
            .collect();
        for task in burst {
            task.await;
        }
        let after_batch = store.stats().zeroed_bytes;
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while store.stats().zeroed_bytes == after_batch {
            assert!(std::time::Instant::now() < deadline, "{:?}", store.stats());
            comet_rt::local::sleep(Duration::from_millis(5)).await;
        }
        store.shutdown().await.expect("shutdown");
    });
    // Zeros land inside their own segment: past the first one, a log position is not its
    // file's position, and warming must not grow a file past the segment size.
    let segments: Vec<_> = std::fs::read_dir(dir.path().join("commitlog/3"))
        .expect("segments")
        .map(|entry| entry.expect("entry").metadata().expect("metadata").len())
        .collect();
    assert!(segments.len() >= 2, "the appends reach a second segment");
    assert!(
        segments.iter().all(|&len| len == config.segment_bytes),
        "every segment file is one segment long: {segments:?}"
    );
    run(async {
        let store = Store::open(config.clone()).await.expect("reopen");
        let mut tags = Vec::new();
        for queue_id in 0..4 {
            let records = read_all(&store, "Warm", queue_id).await;
            let batch = if queue_id == 0 { 300 } else { 0 };
            assert_eq!(records.len(), 320 + batch, "queue {queue_id}");
            tags.extend(records.iter().map(|bytes| body_tag(bytes)));
        }
        tags.sort_unstable();
        let expected: Vec<u64> = (0..32u64)
            .flat_map(|task| (0..40).map(move |step| task * 100 + step))
            .chain(10_000..10_300)
            .collect();
        let mut expected = expected;
        expected.sort_unstable();
        assert_eq!(tags, expected);
        assert!(store.stats().disk_reads > 0, "records came from disk");
        store.shutdown().await.expect("shutdown");
    });
    let off = TempDir::new("warm-off");
    let mut config = small_config(off.path());
    config.warm_ahead_bytes = 0;
    run(async {
        let store = Store::open(config).await.expect("open");
        for step in 0..50 {
            let one = record("Warm", 0, &body(step, 700), "");
            store.append(&[one]).await.expect("append");
        }
        assert_eq!(store.stats().zeroed_bytes, 0);
        store.shutdown().await.expect("shutdown");
    });
}

async fn tags_under(store: &Store, key: &str, max: usize) -> Vec<u64> {
    let found = store
        .query_by_key("Sealed", key, max, 0, i64::MAX)
        .await
        .expect("query");
    found.iter().map(|record| body_tag(record)).collect()
}

async fn append_keyed(store: &Store, tags: std::ops::Range<u64>) {
    let mut batch = Vec::new();
    for tag in tags {
        let unique = format!("U{tag}");
        let keys = format!("all k{}", tag % 10);
        let props = properties(&[("UNIQ_KEY", &unique), ("KEYS", &keys)]);
        batch.push(record("Sealed", (tag % 4) as i32, &body(tag, 200), &props));
        if batch.len() == 100 {
            store.append(&batch).await.expect("append");
            batch.clear();
        }
    }
    if !batch.is_empty() {
        store.append(&batch).await.expect("append");
    }
}

/// Checks every key of records `0..records` (sealed and in memory alike) is found once.
async fn check_keys(store: &Store, records: u64) {
    for tag in [0, 1, records / 2, records - 1] {
        assert_eq!(tags_under(store, &format!("U{tag}"), 4).await, vec![tag]);
    }
    let newest: Vec<u64> = (records - 3..records).rev().collect();
    assert_eq!(tags_under(store, "all", 3).await, newest);
    let all = tags_under(store, "all", 100_000).await;
    assert_eq!(
        all,
        (0..records).rev().collect::<Vec<_>>(),
        "once each, newest first"
    );
    let sevens = tags_under(store, "k7", 100_000).await;
    assert_eq!(sevens.len() as u64, records / 10);
    assert!(sevens.iter().all(|tag| tag % 10 == 7));
    assert!(tags_under(store, "U-absent", 4).await.is_empty());
}

// Proves the key index of sealed segments leaves memory (sorted to disk by maintenance),
// that queries find every key once, newest first, whether its segment is sealed or not,
// across a clean reopen and across a crash whose recovery re-dispatches records.
#[test]
fn sealed_key_indexes_leave_memory_and_answer_queries() {
    let dir = TempDir::new("index-seal");
    let config = small_config(dir.path());
    sealed_keys_scenario(&config);
    let span = std::fs::read_to_string(dir.path().join("index/3/span")).expect("span");
    assert_eq!(
        span.trim(),
        config.segment_bytes.to_string(),
        "one file per segment"
    );
}

// Proves the same with spans smaller than a segment (four to a segment): memory holds the
// newest spans only, whatever the segment size.
#[test]
fn key_index_spans_within_segments_seal_and_answer_queries() {
    let dir = TempDir::new("index-span");
    let mut config = small_config(dir.path());
    config.segment_bytes = 1024 * 1024;
    config.index_span_bytes = 256 * 1024;
    let index_files = sealed_keys_scenario(&config);
    let span = std::fs::read_to_string(dir.path().join("index/3/span")).expect("span");
    assert_eq!(span.trim(), "262144");
    let sealed: Vec<&String> = index_files
        .iter()
        .filter(|name| name.ends_with(".sorted"))
        .collect();
    assert!(
        sealed
            .iter()
            .any(|name| *name == "00000000000000262144.sorted"),
        "spans inside the first segment are sealed: {sealed:?}"
    );
}

// Proves one maintenance cycle seals every span its checkpoint covers: a burst of about 40
// spans has 30 sealed within four cycles (sealing one span per cycle, as before, sealed 3),
// and their keys are found.
#[test]
fn sealing_catches_up_with_every_span_the_checkpoint_covers() {
    let dir = TempDir::new("index-catch-up");
    let mut config = small_config(dir.path());
    config.segment_bytes = 1024 * 1024;
    config.index_span_bytes = 16 * 1024;
    config.cq_flush_interval_ms = 2_000;
    run(async {
        let store = Store::open(config.clone()).await.expect("open");
        // ~330 bytes a record: 2,000 records are about 40 spans of 16 KiB.
        append_keyed(&store, 0..2_000).await;
        let deadline = std::time::Instant::now() + Duration::from_millis(4 * 2_000);
        while store.index_sealed_segments() < 30 {
            assert!(
                std::time::Instant::now() < deadline,
                "{} spans sealed within four cycles",
                store.index_sealed_segments()
            );
            comet_rt::local::sleep(Duration::from_millis(20)).await;
        }
        check_keys(&store, 2_000).await;
        store.shutdown().await.expect("shutdown");
    });
}

// Proves an index written before spans were recorded (its files named by segment, no span
// record) keeps the segment as its span after an upgrade, whatever the configured span, and
// answers every query.
#[test]
fn key_index_without_a_span_record_keeps_segment_files() {
    let dir = TempDir::new("index-legacy");
    let config = small_config(dir.path());
    run(async {
        let store = Store::open(config.clone()).await.expect("open");
        append_keyed(&store, 0..600).await;
        store.shutdown().await.expect("shutdown");
    });
    std::fs::remove_file(dir.path().join("index/3/span")).expect("as an older version left it");
    let mut upgraded = config.clone();
    upgraded.index_span_bytes = 64 * 1024;
    run(async {
        let store = Store::open(upgraded.clone()).await.expect("reopen");
        check_keys(&store, 600).await;
        append_keyed(&store, 600..1200).await;
        check_keys(&store, 1200).await;
        store.shutdown().await.expect("shutdown");
    });
    let span = std::fs::read_to_string(dir.path().join("index/3/span")).expect("span");
    assert_eq!(span.trim(), config.segment_bytes.to_string());
}

/// Fills a store keyed (about three spans of 400-byte records), checks keys while sealed,
/// after a clean reopen and after a crash.
fn sealed_keys_scenario(config: &StoreConfig) -> Vec<String> {
    const RECORDS: u64 = 2_000;
    let wait_sealed = |store: Store, segments: usize| async move {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while store.index_sealed_segments() < segments {
            assert!(std::time::Instant::now() < deadline, "maintenance seals");
            comet_rt::local::sleep(Duration::from_millis(10)).await;
        }
    };
    run(async {
        let store = Store::open(config.clone()).await.expect("open");
        append_keyed(&store, 0..RECORDS).await;
        // ~400 bytes a record: 2,000 records fill three 256 KiB segments.
        wait_sealed(store.clone(), 2).await;
        let in_memory = store.index_entries_in_memory() as u64;
        assert!(
            in_memory < RECORDS * 3 / 2,
            "{in_memory} of {} entries in memory",
            RECORDS * 3
        );
        check_keys(&store, RECORDS).await;
        store.shutdown().await.expect("shutdown");
    });
    // Listed now: the crash below re-dispatches the log, and its spans are sealed again only
    // as the recovered store's checkpoints pass them.
    let index_files = std::fs::read_dir(config.root.join("index/3"))
        .expect("index dir")
        .map(|item| {
            item.expect("item")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    run(async {
        let store = Store::open(config.clone()).await.expect("reopen");
        assert!(store.index_sealed_segments() >= 2);
        assert!((store.index_entries_in_memory() as u64) < RECORDS * 3 / 2);
        check_keys(&store, RECORDS).await;
        // A crash: more records, then the store is dropped without shutdown.
        append_keyed(&store, RECORDS..RECORDS + 500).await;
        drop(store);
    });
    assert!(config.root.join("abort").exists(), "crashed");
    run(async {
        let store = Store::open(config.clone()).await.expect("recover");
        check_keys(&store, RECORDS + 500).await;
        store.shutdown().await.expect("shutdown");
    });
    index_files
}

// Proves that appends arriving while flushes run (appenders that pause between appends, as
// a broker's connections do) make the store pad the log and start flushes while another is
// in flight, and that every record reads back once, in dense queue order, after a crash
// (recovery skips the padding) and after a clean reopen.
#[test]
fn pipelined_flushes_pad_and_recover() {
    const TASKS: u64 = 48;
    const STEPS: u64 = 60;
    let dir = TempDir::new("pipelined");
    let mut config = small_config(dir.path());
    config.segment_bytes = 1024 * 1024;
    let check = |store: Store| async move {
        let mut tags = Vec::new();
        for queue_id in 0..4 {
            let records = read_all(&store, "Piped", queue_id).await;
            for (offset, bytes) in records.iter().enumerate() {
                let view = RecordView::parse(bytes).expect("valid");
                assert_eq!(view.queue_offset(), offset as i64, "dense queue {queue_id}");
            }
            tags.extend(records.iter().map(|bytes| body_tag(bytes)));
        }
        tags.sort_unstable();
        let expected: Vec<u64> = (0..TASKS)
            .flat_map(|task| (0..STEPS).map(move |step| task * 1000 + step))
            .collect();
        assert_eq!(tags.len(), expected.len(), "every record once");
        assert!(tags == expected, "every record once");
        store
    };
    run(async {
        let store = Store::open(config.clone()).await.expect("open");
        let tasks: Vec<_> = (0..TASKS)
            .map(|task| {
                let store = store.clone();
                comet_rt::local::spawn(async move {
                    for step in 0..STEPS {
                        let tag = task * 1000 + step;
                        let pause_us = (tag * 7919) % 400;
                        comet_rt::local::sleep(Duration::from_micros(pause_us)).await;
                        let size = 100 + (tag * 131 % 1500) as usize;
                        let one = record("Piped", (task % 4) as i32, &body(tag, size), "");
                        store.append(&[one]).await.expect("append");
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await;
        }
        let stats = store.stats();
        assert!(stats.padding_bytes > 0, "{stats:?}");
        assert!(stats.pipelined_flushes > 0, "{stats:?}");
        check(store).await;
        // Dropped without shutdown: the next open recovers as after a crash.
    });
    run(async {
        let store = Store::open(config.clone()).await.expect("recover");
        let store = check(store).await;
        store.shutdown().await.expect("shutdown");
    });
    run(async {
        let store = Store::open(config.clone()).await.expect("reopen");
        let store = check(store).await;
        store.shutdown().await.expect("shutdown");
    });
}

// Proves the inspection reads: consume-queue entries from an index for a count (clipped to
// the queue, physical offsets and sizes matching the appends, tag codes of the tags), store
// times by queue offset (None below the min, at the max, and for unknown queues), and that
// only queues the store holds are reported as present.
#[test]
fn consume_queue_entries_and_store_times() {
    let dir = TempDir::new("inspect");
    run(async {
        let store = Store::open(small_config(dir.path())).await.expect("open");
        assert!(!store.has_queue("Inspect", 0));
        let mut appended = Vec::new();
        for index in 0..8u64 {
            let tag = if index % 2 == 0 { "TagA" } else { "TagB" };
            let one = record(
                "Inspect",
                0,
                &body(index, 40),
                &properties(&[("TAGS", tag)]),
            );
            appended.push(store.append(&[one]).await.expect("append")[0]);
            // Distinct store times per record (the input of the time checks below).
            comet_rt::local::sleep(Duration::from_millis(2)).await;
        }
        assert!(store.has_queue("Inspect", 0));
        assert!(!store.has_queue("Inspect", 1));
        let entries = store.consume_queue_entries("Inspect", 0, QueueOffset(3), 4);
        let offsets: Vec<u64> = entries.iter().map(|(offset, _)| offset.0).collect();
        assert_eq!(offsets, vec![3, 4, 5, 6]);
        for (offset, entry) in &entries {
            let sent = appended[usize::try_from(offset.0).expect("a small offset")];
            assert_eq!(entry.physical, sent.physical_offset);
            assert_eq!(entry.size, sent.size_bytes);
            let tag = if offset.0 % 2 == 0 { "TagA" } else { "TagB" };
            assert_eq!(entry.tag_code, comet_store::consume_queue::tag_code(tag));
        }
        let tail = store.consume_queue_entries("Inspect", 0, QueueOffset(6), 100);
        assert_eq!(tail.len(), 2, "clipped at the max");
        assert!(store
            .consume_queue_entries("Inspect", 0, QueueOffset(8), 10)
            .is_empty());
        assert!(store
            .consume_queue_entries("Inspect", 0, QueueOffset(0), 0)
            .is_empty());
        assert!(store
            .consume_queue_entries("Nope", 0, QueueOffset(0), 10)
            .is_empty());
        let huge = store.consume_queue_entries("Inspect", 0, QueueOffset(u64::MAX - 1), 10);
        assert!(huge.is_empty(), "no overflow past the max");
        for (offset, sent) in appended.iter().enumerate() {
            let time = store
                .store_time_at("Inspect", 0, QueueOffset(offset as u64))
                .await
                .expect("time");
            assert_eq!(time, Some(sent.store_timestamp_ms));
        }
        let at_max = store.store_time_at("Inspect", 0, QueueOffset(8)).await;
        assert_eq!(at_max.expect("time"), None);
        let unknown = store.store_time_at("Nope", 3, QueueOffset(0)).await;
        assert_eq!(unknown.expect("time"), None);
        store.shutdown().await.expect("shutdown");
    });
}
