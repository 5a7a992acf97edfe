//! The store's side of replication on a real file system: raw log reads on the master,
//! checked appends of those bytes on the slave, the confirmed position that limits
//! visibility, truncation at open, and a whole log streamed across a slave restart.

mod common;

use std::time::Duration;

use bytes::Bytes;
use comet_proto::message::{RecordView, PHYSICAL_OFFSET_POSITION, QUEUE_OFFSET_POSITION};
use comet_store::{
    GetStatus, LogChunk, MessageFilter, QueueOffset, ReplicaFault, Store, StoreError, TruncateFault,
};
use common::{body, body_tag, properties, record, small_config, TempDir};

fn run<T>(future: impl std::future::Future<Output = T>) -> T {
    comet_rt::local::run_local("replication-test", future)
}

const SEGMENT_BYTES: u64 = 256 * 1024;

/// Appends `count` records of about `size` bytes round-robin over `queues` queues of
/// `topic`, in batches of `batch`, each with a key `k<tag>`.
async fn fill(store: &Store, topic: &str, queues: i32, tags: std::ops::Range<u64>, size: usize) {
    let tags: Vec<u64> = tags.collect();
    for group in tags.chunks(5) {
        let records: Vec<_> = group
            .iter()
            .map(|&tag| {
                let keys = properties(&[("KEYS", &format!("k{tag}"))]);
                let queue_id =
                    i32::try_from(tag % u64::try_from(queues).expect("positive")).expect("small");
                record(topic, queue_id, &body(tag, size), &keys)
            })
            .collect();
        store.append(&records).await.expect("append");
    }
}

/// Every chunk of `store`'s durable log from `from`, read `max_bytes` at a time.
async fn read_chunks(store: &Store, from: u64, max_bytes: usize) -> Vec<LogChunk> {
    let mut chunks = Vec::new();
    let mut position = from;
    while position < store.durable_position() {
        let chunk = store.read_log(position, max_bytes).await.expect("read_log");
        assert_eq!(chunk.position, position);
        assert!(chunk.bytes.len() <= max_bytes, "at most max_bytes");
        assert!(!chunk.bytes.is_empty(), "progress at {position}");
        position = chunk.end;
        chunks.push(chunk);
    }
    chunks
}

/// Copies `master`'s durable log from `from` into `slave`; returns where it stopped.
async fn copy_log(master: &Store, slave: &Store, from: u64, max_bytes: usize) -> u64 {
    let mut position = from;
    for chunk in read_chunks(master, from, max_bytes).await {
        let end = slave
            .append_replicated(position, &chunk.bytes)
            .await
            .expect("append_replicated");
        assert_eq!(
            end, chunk.end,
            "the slave's log ends where the master's chunk does"
        );
        position = end;
    }
    position
}

/// The log bytes of `store` from its start, as one run per segment (end markers as 8).
async fn log_bytes(store: &Store) -> Vec<u8> {
    let mut bytes = Vec::new();
    for chunk in read_chunks(store, store.min_position(), 100_000).await {
        bytes.extend_from_slice(&chunk.bytes);
    }
    bytes
}

// Proves read_log returns whole records cut at boundaries within `max_bytes`, a segment's
// end marker as its 8 bytes with the chunk ending at the segment's end, never a chunk across
// a segment end, the size of a record larger than `max_bytes`, and the same bytes from
// disk (after a reopen) as from the read cache.
#[test]
fn read_log_returns_whole_records_from_cache_and_disk() {
    let dir = TempDir::new("repl-read");
    let config = small_config(dir.path());
    run(async {
        let store = Store::open(config.clone()).await.expect("open");
        fill(&store, "Read", 3, 0..600, 900).await;
        assert!(store.durable_position() > 2 * SEGMENT_BYTES, "rolls twice");
        let cached = read_chunks(&store, 0, 10_000).await;
        let mut ends_at_segment = 0;
        for chunk in &cached {
            let segment_end = chunk.position - chunk.position % SEGMENT_BYTES + SEGMENT_BYTES;
            assert!(chunk.end <= segment_end, "never across a segment end");
            if chunk.end == segment_end {
                ends_at_segment += 1;
                let marker = &chunk.bytes[chunk.bytes.len() - 8..];
                assert_eq!(
                    &marker[4..],
                    &comet_proto::message::BLANK_MAGIC.to_be_bytes()
                );
            } else {
                assert_eq!(chunk.end, chunk.position + chunk.bytes.len() as u64);
            }
        }
        assert!(ends_at_segment >= 2, "two end markers");
        let small = store.read_log(0, 100).await.expect("read");
        assert!(small.bytes.is_empty());
        let first_size = RecordView::parse(&cached[0].bytes)
            .expect("record")
            .total_size();
        assert_eq!(small.next_record_bytes, Some(first_size));
        let one = store.read_log(0, first_size).await.expect("read");
        assert_eq!((one.bytes.len(), one.end), (first_size, first_size as u64));
        let durable = store.durable_position();
        let at_end = store.read_log(durable, 1 << 20).await.expect("read");
        assert!(at_end.bytes.is_empty() && at_end.end == durable);
        store.shutdown().await.expect("shutdown");

        let store = Store::open(config).await.expect("reopen");
        let reads_before = store.stats().disk_reads;
        let from_disk = read_chunks(&store, 0, 10_000).await;
        assert!(store.stats().disk_reads > reads_before, "read from disk");
        let joined = |chunks: &[LogChunk]| chunks.iter().flat_map(|c| c.bytes.to_vec()).collect();
        let (cached, from_disk): (Vec<u8>, Vec<u8>) = (joined(&cached), joined(&from_disk));
        assert_eq!(cached, from_disk, "the same bytes from cache and disk");
        store.shutdown().await.expect("shutdown");
    });
}

// Proves read_log refuses a position that is not a record boundary, one past the written
// end, and one below the oldest retained segment with the segment start to copy from.
#[test]
fn read_log_refuses_bad_positions() {
    let dir = TempDir::new("repl-refuse");
    let mut config = small_config(dir.path());
    config.file_reserved_hours = 0;
    config.retention_check_interval_ms = 3_600_000;
    run(async {
        let store = Store::open(config.clone()).await.expect("open");
        fill(&store, "Refuse", 2, 0..1200, 700).await;
        let inside = store.read_log(13, 1 << 20).await;
        assert!(matches!(
            inside,
            Err(StoreError::NotRecordBoundary { position: 13 })
        ));
        let written = store.written_position();
        let past = store.read_log(written + 1, 1 << 20).await;
        assert!(matches!(past, Err(StoreError::NotWritten { .. })));

        let at_delete_hour = common::at_local_hour(config.delete_when_hours[0]);
        let deleted = store
            .run_retention_once(at_delete_hour)
            .await
            .expect("retention");
        assert!(deleted >= 1, "deleted {deleted}");
        let oldest = store.min_position();
        assert_eq!(oldest % SEGMENT_BYTES, 0);
        match store.read_log(0, 1 << 20).await {
            Err(StoreError::BelowRetention {
                position: 0,
                oldest: told,
            }) => {
                assert_eq!(told, oldest);
            }
            other => panic!("expected BelowRetention, got {other:?}"),
        }
        let from_oldest = store.read_log(oldest, 1 << 20).await.expect("read");
        assert!(!from_oldest.bytes.is_empty());
        store.shutdown().await.expect("shutdown");
    });
}

/// `bytes` with the record at `at` changed by `spoil`.
fn spoiled(bytes: &Bytes, at: usize, spoil: impl FnOnce(&mut [u8])) -> Vec<u8> {
    let mut copy = bytes.to_vec();
    spoil(&mut copy[at..]);
    copy
}

// Proves append_replicated refuses, with a typed fault and without changing anything, a
// wrong position, a broken body CRC, a PHYSICALOFFSET that is not where the record lands, a
// queue offset that skips or reuses one, and a cut record; and that the same call with
// the right bytes then succeeds, returns the written end, and becomes durable and visible.
#[test]
fn append_replicated_checks_every_record() {
    let dir = TempDir::new("repl-check");
    run(async {
        let master = Store::open(small_config(&dir.path().join("m")))
            .await
            .expect("m");
        let slave = Store::open(small_config(&dir.path().join("s")))
            .await
            .expect("s");
        fill(&master, "Check", 1, 0..4, 300).await;
        let chunk = master.read_log(0, 1 << 20).await.expect("read");
        let second = RecordView::parse(&chunk.bytes)
            .expect("record")
            .total_size();
        let refused = |result: Result<u64, StoreError>| match result {
            Err(StoreError::ReplicaInvalid { position, fault }) => (position, fault),
            other => panic!("expected ReplicaInvalid, got {other:?}"),
        };
        let wrong_place = slave.append_replicated(1, &chunk.bytes).await;
        assert!(matches!(
            wrong_place,
            Err(StoreError::ReplicaPosition {
                position: 1,
                written: 0
            })
        ));
        let body_at = second
            + RecordView::parse(&chunk.bytes[second..])
                .expect("r")
                .body_range()
                .start;
        let bad_crc = spoiled(&chunk.bytes, body_at, |bytes| bytes[0] ^= 1);
        let (position, fault) = refused(slave.append_replicated(0, &bad_crc).await);
        assert_eq!((position, fault), (second as u64, ReplicaFault::BodyCrc));
        let moved = spoiled(&chunk.bytes, second + PHYSICAL_OFFSET_POSITION, |bytes| {
            bytes[7] ^= 1;
        });
        let fault = refused(slave.append_replicated(0, &moved).await).1;
        assert!(
            matches!(fault, ReplicaFault::PhysicalOffset { .. }),
            "{fault:?}"
        );
        for offset in [0i64, 2] {
            let renumbered = spoiled(&chunk.bytes, second + QUEUE_OFFSET_POSITION, |bytes| {
                bytes[..8].copy_from_slice(&offset.to_be_bytes());
            });
            let fault = refused(slave.append_replicated(0, &renumbered).await).1;
            let expected = matches!(fault, ReplicaFault::QueueOffset { found, expected: 1, .. }
                if found == offset);
            assert!(expected, "{fault:?}");
        }
        let cut = &chunk.bytes[..chunk.bytes.len() - 1];
        let fault = refused(slave.append_replicated(0, cut).await).1;
        assert!(matches!(fault, ReplicaFault::Cut { .. }), "{fault:?}");
        assert_eq!(
            slave.written_position(),
            0,
            "nothing of a refused call stays"
        );
        assert_eq!(slave.max_offset("Check", 0), QueueOffset(0));

        let end = slave
            .append_replicated(0, &chunk.bytes)
            .await
            .expect("append");
        assert_eq!(end, chunk.end);
        assert!(matches!(
            slave.wait_durable(end + 1).await,
            Err(StoreError::NotWritten { .. })
        ));
        slave.wait_durable(end).await.expect("durable");
        assert!(slave.durable_position() >= end);
        assert_eq!(slave.max_offset("Check", 0), QueueOffset(4));
        let again = slave.append_replicated(end, &chunk.bytes).await;
        assert!(matches!(
            refused(again).1,
            ReplicaFault::PhysicalOffset { .. }
        ));
        master.shutdown().await.expect("shutdown");
        slave.shutdown().await.expect("shutdown");
    });
}

// Proves a slave whose segments are larger than the master's refuses the master's end
// marker (its segment would end elsewhere), and a slave whose segments are smaller refuses
// the records that run into its segment's end.
#[test]
fn append_replicated_refuses_another_segment_size() {
    let dir = TempDir::new("repl-segments");
    run(async {
        let master = Store::open(small_config(&dir.path().join("m")))
            .await
            .expect("m");
        fill(&master, "Seg", 2, 0..500, 900).await;
        let chunks = read_chunks(&master, 0, 64 * 1024).await;
        for (segment_bytes, name) in [(2 * SEGMENT_BYTES, "large"), (SEGMENT_BYTES / 4, "small")] {
            let mut config = small_config(&dir.path().join(name));
            config.segment_bytes = segment_bytes;
            let slave = Store::open(config).await.expect("slave");
            let mut position = 0;
            let mut refusal = None;
            for chunk in &chunks {
                match slave.append_replicated(position, &chunk.bytes).await {
                    Ok(end) => position = end,
                    Err(error) => {
                        refusal = Some(error);
                        break;
                    }
                }
            }
            match refusal {
                Some(StoreError::ReplicaInvalid {
                    fault: ReplicaFault::SegmentSize { segment_end },
                    ..
                }) => assert_eq!(segment_end % segment_bytes, 0, "{name}"),
                other => panic!("{name}: expected SegmentSize, got {other:?}"),
            }
            slave.shutdown().await.expect("shutdown");
        }
        master.shutdown().await.expect("shutdown");
    });
}

// Proves that under visible_after_confirm a durable record stays invisible (no queue entry,
// no key lookup) until confirm covers it, that a long-polling waiter wakes when confirm
// moves, and that confirm never moves back.
#[test]
fn visibility_waits_for_confirm() {
    let dir = TempDir::new("repl-confirm");
    let mut config = small_config(dir.path());
    config.visible_after_confirm = true;
    run(async {
        let store = Store::open(config).await.expect("open");
        fill(&store, "Sync", 1, 0..3, 200).await;
        let durable = store.durable_position();
        assert_eq!(
            store.max_offset("Sync", 0),
            QueueOffset(0),
            "durable, not confirmed"
        );
        let found = store
            .query_by_key("Sync", "k1", 10, 0, i64::MAX)
            .await
            .expect("query");
        assert!(found.is_empty(), "no key lookup either");
        let waiting = std::rc::Rc::new(std::cell::Cell::new(false));
        let waiter = {
            let (store, waiting) = (store.clone(), std::rc::Rc::clone(&waiting));
            comet_rt::local::spawn(async move {
                // Set in the same poll that registers the wait below.
                waiting.set(true);
                store.wait_for_message("Sync", 0, QueueOffset(0)).await;
                store.max_offset("Sync", 0)
            })
        };
        for _ in 0..1000 {
            if waiting.get() {
                break;
            }
            comet_rt::local::yield_now().await;
        }
        assert!(waiting.get(), "the waiter waits before the confirm");
        let first_end = store.read_log(0, 1).await.expect("read").next_record_bytes;
        let first_end = first_end.expect("size") as u64;
        store.confirm(first_end);
        let woken = comet_rt::task_class::timeout(Duration::from_secs(10), waiter).await;
        assert_eq!(woken.ok(), Some(QueueOffset(1)), "woken by the confirm");
        store.confirm(0);
        assert_eq!(store.confirmed_position(), first_end, "never back");
        store.confirm(durable + 1000);
        assert_eq!(
            store.max_offset("Sync", 0),
            QueueOffset(3),
            "visible up to durable"
        );
        let found = store
            .query_by_key("Sync", "k1", 10, 0, i64::MAX)
            .await
            .expect("query");
        assert_eq!(found.len(), 1);

        // More than the read cache holds waits for confirm: it leaves memory and is
        // dispatched from disk once confirmed.
        fill(&store, "Sync", 1, 3..603, 1000).await;
        assert_eq!(store.max_offset("Sync", 0), QueueOffset(3));
        let reads_before = store.stats().disk_reads;
        store.confirm(store.durable_position());
        let last = store.wait_for_message("Sync", 0, QueueOffset(602));
        let waited = comet_rt::task_class::timeout(Duration::from_secs(10), last).await;
        assert!(waited.is_ok(), "all visible");
        assert_eq!(store.max_offset("Sync", 0), QueueOffset(603));
        assert!(
            store.stats().disk_reads > reads_before,
            "dispatched from disk"
        );
        let records = store
            .get_messages("Sync", 0, QueueOffset(0), 1000, 1 << 30, MessageFilter::All)
            .await
            .expect("get");
        let tags: Vec<u64> = records.records.iter().map(|r| body_tag(r)).collect();
        assert_eq!(tags, (0..603).collect::<Vec<_>>());
        store.shutdown().await.expect("shutdown");
    });
}

// Proves a slave never pads its copy of the log: chunks appended while its flushes are in
// flight (where a store pads to pipeline its flushes) land exactly where the master's
// bytes are, and the copy ends where the master's log does.
#[test]
fn a_slave_does_not_pad_while_its_flushes_are_in_flight() {
    let dir_master = TempDir::new("repl-nopad-master");
    let dir_slave = TempDir::new("repl-nopad-slave");
    run(async {
        let master = Store::open(small_config(dir_master.path()))
            .await
            .expect("master");
        fill(&master, "NoPad", 2, 0..200, 700).await;
        let slave = Store::open(small_config(dir_slave.path()))
            .await
            .expect("slave");
        let mut position = 0;
        for chunk in read_chunks(&master, 0, 3000).await {
            let end = slave
                .append_replicated(position, &chunk.bytes)
                .await
                .expect("lands at the master's position");
            assert_eq!(end, chunk.end);
            position = end;
            // Let a flush start, so the next one is planned while it is in flight.
            comet_rt::local::yield_now().await;
        }
        slave.wait_durable(position).await.expect("durable");
        assert_eq!(position, master.durable_position());
        assert_eq!(slave.stats().padding_bytes, 0, "no padding of its own");
        master.shutdown().await.expect("shutdown");
        slave.shutdown().await.expect("shutdown");
    });
}

// Proves wait_durable_beyond stays pending while the durable end is at the position, resolves
// once a group commit moves it past, resolves at once when it already is past, and resolves
// when the store shuts down (a sender asleep on it is not stuck).
#[test]
fn wait_durable_beyond_resolves_when_the_durable_end_moves() {
    let dir = TempDir::new("repl-durable-beyond");
    run(async {
        let store = Store::open(small_config(dir.path())).await.expect("open");
        let start = store.durable_position();
        let done = std::rc::Rc::new(std::cell::Cell::new(false));
        let waiter = {
            let (store, done) = (store.clone(), std::rc::Rc::clone(&done));
            comet_rt::local::spawn(async move {
                store.wait_durable_beyond(start).await;
                done.set(true);
                store.durable_position()
            })
        };
        for _ in 0..100 {
            comet_rt::local::yield_now().await;
        }
        assert!(!done.get(), "nothing new is durable yet");
        fill(&store, "Beyond", 1, 0..1, 100).await;
        let woken = comet_rt::task_class::timeout(Duration::from_secs(10), waiter).await;
        assert!(
            woken.is_ok_and(|durable| durable > start),
            "woken by the flush"
        );
        let past = comet_rt::task_class::timeout(
            Duration::from_secs(10),
            store.wait_durable_beyond(start),
        );
        assert!(past.await.is_ok(), "already past: at once");
        let end = store.durable_position();
        let idle = {
            let store = store.clone();
            comet_rt::local::spawn(async move { store.wait_durable_beyond(end).await })
        };
        for _ in 0..100 {
            comet_rt::local::yield_now().await;
        }
        store.shutdown().await.expect("shutdown");
        let ended = comet_rt::task_class::timeout(Duration::from_secs(10), idle).await;
        assert!(ended.is_ok(), "a closed store ends the wait");
    });
}

// Proves a slave that appended a master's chunk ending with the segment's end marker, and
// nothing after it, becomes durable up to the segment's end (the rest of the segment holds
// nothing), keeps that end across a restart and continues in the next segment.
#[test]
fn replica_is_durable_at_a_segment_end() {
    let dir = TempDir::new("repl-roll");
    let slave_config = small_config(&dir.path().join("s"));
    run(async {
        let master = Store::open(small_config(&dir.path().join("m")))
            .await
            .expect("m");
        fill(&master, "Roll", 2, 0..400, 900).await;
        let slave = Store::open(slave_config.clone()).await.expect("s");
        let mut position = 0;
        for chunk in read_chunks(&master, 0, 20_000).await {
            position = slave
                .append_replicated(position, &chunk.bytes)
                .await
                .expect("append");
            if position % SEGMENT_BYTES == 0 {
                break;
            }
        }
        assert_eq!(
            position, SEGMENT_BYTES,
            "stopped at the first segment's end"
        );
        let waited =
            comet_rt::task_class::timeout(Duration::from_secs(10), slave.wait_durable(position))
                .await;
        assert!(matches!(waited, Ok(Ok(()))), "durable at the segment end");
        assert_eq!(slave.durable_position(), SEGMENT_BYTES);
        let marker = slave.read_log(SEGMENT_BYTES - 1, 8).await;
        assert!(matches!(marker, Err(StoreError::NotRecordBoundary { .. })));
        slave.shutdown().await.expect("shutdown");

        let slave = Store::open(slave_config).await.expect("reopen");
        assert_eq!(slave.written_position(), SEGMENT_BYTES);
        let end = copy_log(&master, &slave, SEGMENT_BYTES, 20_000).await;
        slave.wait_durable(end).await.expect("durable");
        assert_eq!(log_bytes(&master).await, log_bytes(&slave).await);
        master.shutdown().await.expect("shutdown");
        slave.shutdown().await.expect("shutdown");
    });
}

// Proves a full copy: a slave whose position retention deleted on the master is told the
// oldest retained segment start, reopens with its log reset to it (old records, queues and
// keys gone), and a copy from there gives the same log and queues, which start at the
// master's min offsets.
#[test]
fn full_copy_from_the_oldest_retained_segment() {
    let dir = TempDir::new("repl-full");
    let mut master_config = small_config(&dir.path().join("m"));
    master_config.file_reserved_hours = 0;
    master_config.retention_check_interval_ms = 3_600_000;
    let slave_config = small_config(&dir.path().join("s"));
    run(async {
        let master = Store::open(master_config.clone()).await.expect("m");
        let slave = Store::open(slave_config.clone()).await.expect("s");
        fill(&master, "Full", 3, 0..300, 700).await;
        let copied = copy_log(&master, &slave, 0, 32 * 1024).await;
        slave.wait_durable(copied).await.expect("durable");
        slave.shutdown().await.expect("shutdown");

        fill(&master, "Full", 3, 300..1500, 700).await;
        let at_delete_hour = common::at_local_hour(master_config.delete_when_hours[0]);
        let deleted = master.run_retention_once(at_delete_hour).await;
        assert!(deleted.expect("retention") >= 2);
        let oldest = match master.read_log(copied, 1 << 20).await {
            Err(StoreError::BelowRetention { oldest, .. }) => oldest,
            other => panic!("expected BelowRetention, got {other:?}"),
        };
        assert!(oldest > copied);

        let mut reset = slave_config.clone();
        reset.reset_log_to = Some(oldest);
        let slave = Store::open(reset).await.expect("reset");
        assert_eq!(slave.written_position(), oldest);
        assert_eq!(slave.min_position(), oldest);
        assert_eq!(
            slave.max_offset("Full", 0),
            QueueOffset(0),
            "old queues gone"
        );
        let keyed = slave.query_by_key("Full", "k0", 10, 0, i64::MAX).await;
        assert!(keyed.expect("query").is_empty(), "old keys gone");
        let end = copy_log(&master, &slave, oldest, 32 * 1024).await;
        slave.wait_durable(end).await.expect("durable");
        assert_eq!(log_bytes(&master).await, log_bytes(&slave).await);
        for queue_id in 0..3 {
            let min = master.min_offset("Full", queue_id);
            assert!(min.0 > 0, "the master deleted some of queue {queue_id}");
            assert_eq!(slave.min_offset("Full", queue_id), min);
            assert_eq!(
                slave.max_offset("Full", queue_id),
                master.max_offset("Full", queue_id)
            );
            let get = |store: Store| async move {
                let got =
                    store.get_messages("Full", queue_id, min, 64, 1 << 20, MessageFilter::All);
                got.await.expect("get").records
            };
            assert_eq!(get(master.clone()).await, get(slave.clone()).await);
        }
        master.shutdown().await.expect("shutdown");
        slave.shutdown().await.expect("shutdown");
    });
}

/// Position of the record with queue offset `offset` of (topic, 0).
fn position_of(store: &Store, topic: &str, offset: u64) -> u64 {
    let entries = store.consume_queue_entries(topic, 0, QueueOffset(offset), 1);
    entries[0].1.physical.position()
}

// Proves truncate_log_to: a position inside a record or past the end is refused with the
// reason; truncation to B's start drops B and C from reads, queue offsets continue from
// B's, a crash right after does not bring them back, and a master's other bytes append
// at that position.
#[test]
fn truncate_at_open() {
    let dir = TempDir::new("repl-truncate");
    let config = small_config(&dir.path().join("s"));
    run(async {
        let store = Store::open(config.clone()).await.expect("open");
        for tag in 0..3 {
            let one = record("Cut", 0, &body(tag, 500), &properties(&[("KEYS", "same")]));
            store.append(&[one]).await.expect("append");
        }
        store.shutdown().await.expect("shutdown");
    });
    let b_start = run(async {
        let store = Store::open(config.clone()).await.expect("open");
        let b_start = position_of(&store, "Cut", 1);
        store.shutdown().await.expect("shutdown");
        b_start
    });
    let end_before = b_start * 3;
    for (to, expected) in [(b_start + 5, "boundary"), (end_before + 1, "end")] {
        let mut bad = config.clone();
        bad.truncate_log_to = Some(to);
        let refused = run(async { Store::open(bad).await.err() });
        match (refused, expected) {
            (
                Some(StoreError::TruncateRefused {
                    fault: TruncateFault::NotBoundary { record_start, .. },
                    ..
                }),
                "boundary",
            ) => {
                assert_eq!(record_start, b_start);
            }
            (
                Some(StoreError::TruncateRefused {
                    fault: TruncateFault::BeyondEnd { .. },
                    ..
                }),
                "end",
            ) => {}
            (other, _) => panic!("{expected}: {other:?}"),
        }
    }
    let mut truncating = config.clone();
    truncating.truncate_log_to = Some(b_start);
    run(async {
        let store = Store::open(truncating).await.expect("open truncating");
        assert_eq!(store.written_position(), b_start);
        assert_eq!(store.max_offset("Cut", 0), QueueOffset(1));
        drop(store); // a crash right after the truncation
    });
    let dir_master = dir.path().join("m");
    run(async {
        let store = Store::open(config.clone()).await.expect("reopen");
        assert_eq!(
            store.max_offset("Cut", 0),
            QueueOffset(1),
            "B and C stay gone"
        );
        let keyed = store
            .query_by_key("Cut", "same", 10, 0, i64::MAX)
            .await
            .expect("query");
        assert_eq!(keyed.len(), 1, "their index entries went too");
        // Another master's log: the same A, then a different B.
        let master = Store::open(small_config(&dir_master))
            .await
            .expect("master");
        let a = record("Cut", 0, &body(0, 500), &properties(&[("KEYS", "same")]));
        let other_b = record("Cut", 0, &body(77, 900), "");
        master.append(&[a]).await.expect("append");
        master.append(&[other_b]).await.expect("append");
        let chunk = master.read_log(b_start, 1 << 20).await.expect("read");
        let end = store
            .append_replicated(b_start, &chunk.bytes)
            .await
            .expect("append");
        store.wait_durable(end).await.expect("durable");
        let got = store
            .get_messages("Cut", 0, QueueOffset(1), 10, 1 << 20, MessageFilter::All)
            .await
            .expect("get");
        assert_eq!(got.records.len(), 1);
        assert_eq!(body_tag(&got.records[0]), 77);
        master.shutdown().await.expect("shutdown");
        store.shutdown().await.expect("shutdown");
    });
}

/// Checks that both stores hold the same log and the same queues, and that keys resolve.
async fn assert_same(master: &Store, slave: &Store, topic: &str, queues: i32, tags: u64) {
    assert_eq!(master.durable_position(), slave.durable_position());
    assert_eq!(
        log_bytes(master).await,
        log_bytes(slave).await,
        "same log bytes"
    );
    for queue_id in 0..queues {
        let max = master.max_offset(topic, queue_id);
        assert_eq!(slave.max_offset(topic, queue_id), max, "queue {queue_id}");
        let mut offset = QueueOffset(0);
        while offset < max {
            let get = |store: &Store| {
                let store = store.clone();
                async move {
                    store
                        .get_messages(topic, queue_id, offset, 32, 1 << 20, MessageFilter::All)
                        .await
                        .expect("get")
                }
            };
            let (from_master, from_slave) = (get(master).await, get(slave).await);
            assert_eq!(from_master.status, GetStatus::Found);
            assert_eq!(
                from_master.records, from_slave.records,
                "queue {queue_id} at {offset:?}"
            );
            assert_eq!(from_master.next_offset, from_slave.next_offset);
            offset = from_master.next_offset;
        }
    }
    for tag in [0, tags / 2, tags - 1] {
        let key = format!("k{tag}");
        let found = slave
            .query_by_key(topic, &key, 10, 0, i64::MAX)
            .await
            .expect("query");
        assert_eq!(found.len(), 1, "{key}");
        assert_eq!(body_tag(&found[0]), tag);
    }
}

// Proves a log streamed through read_log/append_replicated (small segments so it rolls,
// several queues, batches), with the slave killed mid-way and resumed from its recovered
// written end, gives the slave the same log bytes, the same consume queues at the same
// offsets and working key lookups.
#[test]
fn stream_a_log_across_a_slave_restart() {
    let dir = TempDir::new("repl-stream");
    let slave_root = dir.path().join("s");
    const QUEUES: i32 = 4;
    const TAGS: u64 = 1500;
    run(async {
        let master = Store::open(small_config(&dir.path().join("m")))
            .await
            .expect("m");
        fill(&master, "Stream", QUEUES, 0..TAGS / 2, 600).await;
        let slave = Store::open(small_config(&slave_root)).await.expect("s");
        let copied = copy_log(&master, &slave, 0, 48 * 1024).await;
        assert!(copied > SEGMENT_BYTES, "rolled at least once");
        // Some bytes beyond what the slave's group commit made durable may be lost.
        drop(slave);

        fill(&master, "Stream", QUEUES, TAGS / 2..TAGS, 600).await;
        let slave = Store::open(small_config(&slave_root))
            .await
            .expect("s reopen");
        let resume = slave.written_position();
        assert!(resume <= copied, "recovered {resume} of {copied}");
        let end = copy_log(&master, &slave, resume, 30 * 1024).await;
        assert_eq!(end, master.durable_position());
        slave.wait_durable(end).await.expect("durable");
        assert!(end > 3 * SEGMENT_BYTES, "several segments");
        assert_same(&master, &slave, "Stream", QUEUES, TAGS).await;
        master.shutdown().await.expect("shutdown");
        slave.shutdown().await.expect("shutdown");
    });
}

// Proves a slave takes back a tail its readers never saw without a restart: the bytes past
// the confirmed position go, their queues' next offsets return, another master's bytes
// then land at the same positions, and neither a crash right after the truncation nor a
// clean reopen brings the old tail back. Visible bytes and a position inside a record are
// refused.
#[test]
fn truncate_unconfirmed_takes_back_an_unseen_tail() {
    let dir = TempDir::new("repl-live-truncate");
    let mut slave_config = small_config(&dir.path().join("s"));
    slave_config.visible_after_confirm = true;
    let first_master = small_config(&dir.path().join("m1"));
    let second_master = small_config(&dir.path().join("m2"));
    let kept_end = run(async {
        let master = Store::open(first_master).await.expect("master");
        let slave = Store::open(slave_config.clone()).await.expect("slave");
        fill(&master, "Live", 2, 0..10, 300).await;
        let kept_end = copy_log(&master, &slave, 0, 4096).await;
        slave.wait_durable(kept_end).await.expect("durable");
        slave.confirm(kept_end);
        fill(&master, "Live", 2, 10..30, 300).await;
        let tail_end = copy_log(&master, &slave, kept_end, 4096).await;
        slave.wait_durable(tail_end).await.expect("durable");
        assert_eq!(
            slave.max_offset("Live", 0),
            QueueOffset(5),
            "tail not confirmed"
        );

        let inside = slave.truncate_unconfirmed(kept_end + 5).await;
        assert!(
            matches!(
                inside,
                Err(StoreError::TruncateRefused {
                    fault: TruncateFault::Unreadable { .. },
                    ..
                })
            ),
            "{inside:?}"
        );
        let seen = slave.truncate_unconfirmed(kept_end - 1).await;
        assert!(
            matches!(
                seen,
                Err(StoreError::TruncateRefused {
                    fault: TruncateFault::Visible { .. },
                    ..
                })
            ),
            "{seen:?}"
        );
        assert_eq!(
            slave.written_position(),
            tail_end,
            "refusals change nothing"
        );
        let dropped = slave
            .truncate_unconfirmed(kept_end)
            .await
            .expect("truncate");
        assert_eq!(dropped, tail_end - kept_end);
        assert_eq!(slave.written_position(), kept_end);
        assert_eq!(slave.durable_position(), kept_end);
        master.shutdown().await.expect("shutdown");
        drop(slave); // a crash right after the truncation
        kept_end
    });
    run(async {
        let slave = Store::open(slave_config.clone()).await.expect("reopen");
        assert_eq!(
            slave.written_position(),
            kept_end,
            "the old tail stays gone"
        );
        // Another master with the same first ten records, then others: its bytes land.
        let master = Store::open(second_master).await.expect("master");
        fill(&master, "Live", 2, 0..10, 300).await;
        assert_eq!(master.written_position(), kept_end, "same shape");
        fill(&master, "Live", 2, 100..106, 700).await;
        let end = copy_log(&master, &slave, kept_end, 4096).await;
        slave.wait_durable(end).await.expect("durable");
        slave.confirm(end);
        let got = slave
            .get_messages("Live", 0, QueueOffset(5), 10, 1 << 20, MessageFilter::All)
            .await
            .expect("get");
        let tags: Vec<u64> = got.records.iter().map(|r| body_tag(r)).collect();
        assert_eq!(tags, vec![100, 102, 104], "the new master's records follow");
        master.shutdown().await.expect("shutdown");
        slave.shutdown().await.expect("shutdown");
    });
    run(async {
        let slave = Store::open(slave_config).await.expect("reopen");
        assert_eq!(slave.max_offset("Live", 0), QueueOffset(8));
        assert_eq!(slave.max_offset("Live", 1), QueueOffset(8));
        slave.shutdown().await.expect("shutdown");
    });
}

// Proves a read window kept from before a live truncation never answers for the bytes
// written at the same positions afterwards: a cold read of the first record keeps a window
// reaching into the unconfirmed tail, the tail is taken back and another master's records
// of the same sizes land at the same positions, and every record read back is the new one.
#[test]
fn truncation_drops_the_read_windows_past_it() {
    let dir = TempDir::new("repl-truncate-windows");
    // One segment holds everything: a live truncation stays in the segment being written.
    let shape = |name: &str| {
        let mut config = small_config(&dir.path().join(name));
        config.segment_bytes = 1 << 20;
        config
    };
    let mut slave_config = shape("s");
    slave_config.visible_after_confirm = true;
    run(async {
        let first = Store::open(shape("m1")).await.expect("master");
        let slave = Store::open(slave_config).await.expect("slave");
        fill(&first, "Cut", 2, 1000..1150, 1000).await;
        let kept_end = copy_log(&first, &slave, 0, 64 * 1024).await;
        slave.wait_durable(kept_end).await.expect("durable");
        slave.confirm(kept_end);
        fill(&first, "Cut", 2, 1150..1450, 1000).await;
        let tail_end = copy_log(&first, &slave, kept_end, 64 * 1024).await;
        slave.wait_durable(tail_end).await.expect("durable");
        let shown = common::poll_until_async(Duration::from_secs(10), || {
            slave.max_offset("Cut", 0) == QueueOffset(75)
        })
        .await;
        assert!(shown, "the confirmed records are visible");

        let cold = slave
            .get_messages("Cut", 0, QueueOffset(0), 1, 1 << 20, MessageFilter::All)
            .await
            .expect("get");
        assert_eq!(body_tag(&cold.records[0]), 1000);
        assert!(slave.stats().read_window_misses >= 1, "read from disk");
        let window = slave.read_window_memory().held_bytes as u64;
        assert!(
            window > kept_end + 16 * 1024,
            "the window reaches into the tail"
        );

        slave
            .truncate_unconfirmed(kept_end)
            .await
            .expect("truncate");
        let second = Store::open(shape("m2")).await.expect("master");
        fill(&second, "Cut", 2, 1000..1150, 1000).await;
        assert_eq!(second.written_position(), kept_end, "same shape");
        fill(&second, "Cut", 2, 2150..2450, 1000).await;
        let end = copy_log(&second, &slave, kept_end, 64 * 1024).await;
        assert_eq!(end, tail_end, "the same sizes at the same positions");
        slave.wait_durable(end).await.expect("durable");
        slave.confirm(end);
        let shown = common::poll_until_async(Duration::from_secs(10), || {
            slave.max_offset("Cut", 1) == QueueOffset(225)
        })
        .await;
        assert!(shown, "the new records are visible");
        for queue_id in 0..2i32 {
            let mut tags = Vec::new();
            let mut offset = QueueOffset(0);
            while tags.len() < 225 {
                let got = slave
                    .get_messages("Cut", queue_id, offset, 32, 1 << 20, MessageFilter::All)
                    .await
                    .expect("get");
                assert_eq!(got.status, GetStatus::Found);
                tags.extend(got.records.iter().map(|bytes| body_tag(bytes)));
                offset = got.next_offset;
            }
            let expected: Vec<u64> = (1000..1150)
                .chain(2150..2450)
                .filter(|tag| tag % 2 == u64::from(queue_id.unsigned_abs()))
                .collect();
            assert_eq!(tags, expected, "queue {queue_id}");
        }
        first.shutdown().await.expect("shutdown");
        second.shutdown().await.expect("shutdown");
        slave.shutdown().await.expect("shutdown");
    });
}

// Proves a slave's store reopened with hold_unconfirmed_at_open shows only what was visible
// before (after a clean close and after a crash): the unconfirmed tail is kept, its queues'
// next offsets follow it, a later confirm shows it, and it can be taken back live instead.
#[test]
fn a_reopened_slave_holds_its_unconfirmed_tail() {
    let dir = TempDir::new("repl-hold");
    let mut slave_config = small_config(&dir.path().join("s"));
    slave_config.visible_after_confirm = true;
    slave_config.hold_unconfirmed_at_open = true;
    let master_config = small_config(&dir.path().join("m"));
    let (kept_end, tail_end) = run(async {
        let master = Store::open(master_config.clone()).await.expect("master");
        let slave = Store::open(slave_config.clone()).await.expect("slave");
        fill(&master, "Hold", 2, 0..10, 300).await;
        let kept_end = copy_log(&master, &slave, 0, 4096).await;
        slave.wait_durable(kept_end).await.expect("durable");
        slave.confirm(kept_end);
        fill(&master, "Hold", 2, 10..20, 300).await;
        let tail_end = copy_log(&master, &slave, kept_end, 4096).await;
        slave.wait_durable(tail_end).await.expect("durable");
        master.shutdown().await.expect("shutdown");
        slave.shutdown().await.expect("shutdown");
        (kept_end, tail_end)
    });
    for crash in [false, true] {
        run(async {
            let slave = Store::open(slave_config.clone()).await.expect("reopen");
            assert_eq!(slave.written_position(), tail_end, "the tail is kept");
            assert_eq!(slave.max_offset("Hold", 0), QueueOffset(5), "but not shown");
            assert_eq!(slave.confirmed_position(), kept_end);
            if crash {
                drop(slave);
            } else {
                slave.shutdown().await.expect("shutdown");
            }
        });
    }
    run(async {
        // The master's next records follow the held ones (their queues' next offsets
        // count them), and its confirm shows them all, the held ones read from disk.
        let slave = Store::open(slave_config.clone()).await.expect("reopen");
        let master = Store::open(master_config.clone()).await.expect("master");
        fill(&master, "Hold", 2, 20..24, 300).await;
        let end = copy_log(&master, &slave, tail_end, 4096).await;
        slave.wait_durable(end).await.expect("durable");
        slave.confirm(end);
        let last = slave.wait_for_message("Hold", 0, QueueOffset(11));
        let waited = comet_rt::task_class::timeout(Duration::from_secs(10), last).await;
        assert!(waited.is_ok(), "the tail becomes visible");
        assert_eq!(slave.max_offset("Hold", 0), QueueOffset(12));
        master.shutdown().await.expect("shutdown");
        slave.shutdown().await.expect("shutdown");
    });
    // The same shape again, and this time the master lost the tail: it is cut live and
    // another master's records take its queue offsets.
    let copy = TempDir::new("repl-hold-copy");
    run(async {
        let master = Store::open(master_config.clone()).await.expect("master");
        let mut held_config = small_config(copy.path());
        held_config.visible_after_confirm = true;
        let slave = Store::open(held_config.clone()).await.expect("slave");
        let copied_end = copy_log(&master, &slave, 0, 4096).await;
        slave.wait_durable(copied_end).await.expect("durable");
        slave.confirm(kept_end);
        slave.shutdown().await.expect("shutdown");
        master.shutdown().await.expect("shutdown");
        held_config.hold_unconfirmed_at_open = true;
        let slave = Store::open(held_config.clone()).await.expect("reopen");
        assert_eq!(slave.max_offset("Hold", 1), QueueOffset(5));
        let dropped = slave
            .truncate_unconfirmed(kept_end)
            .await
            .expect("live cut");
        assert_eq!(dropped, copied_end - kept_end);
        let other = Store::open(small_config(&copy.path().join("other")))
            .await
            .expect("other master");
        fill(&other, "Hold", 2, 0..10, 300).await;
        fill(&other, "Hold", 2, 50..52, 100).await;
        let end = copy_log(&other, &slave, kept_end, 4096).await;
        slave.wait_durable(end).await.expect("durable");
        slave.confirm(end);
        assert_eq!(slave.max_offset("Hold", 1), QueueOffset(6));
        other.shutdown().await.expect("shutdown");
        slave.shutdown().await.expect("shutdown");
    });
}
