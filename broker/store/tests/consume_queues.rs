//! Consume queues on disk with a bounded cache (docs/architecture.md#consume-queues): queue
//! files that are cut short, deleted or zeroed are repaired alone at open; cold ranges far
//! behind the tail and beyond the cache read back exactly what was written, across the
//! queue's files; a store dropped without shutdown with a cache far smaller than its
//! queues loses nothing acknowledged; memory stays within the cache bound and the hot tails
//! while the retained entries grow.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use comet_proto::message::RecordView;
use comet_store::{GetStatus, MessageFilter, QueueOffset, Store, StoreConfig, TimeBoundary};
use common::{body, body_tag, poll_until_async, record, small_config, TempDir};

/// Entries per queue file in these tests (the smallest allowed): queues span many files.
const ENTRIES_PER_FILE: u64 = 1024;

/// Most hot entry slots a queue keeps allocated once its entries are written: at most 205
/// entries (the page the next flush rewrites, or the last 128) in at most 512 slots.
const HOT_ENTRIES_MAX: usize = 512;

fn config(root: &Path) -> StoreConfig {
    let mut config = small_config(root);
    config.cq_entries_per_file = ENTRIES_PER_FILE;
    config
}

/// The tag a test record carries: its queue and its index in that queue.
fn tag(queue_id: i32, index: u64) -> u64 {
    (u64::try_from(queue_id).expect("queue ids are small") << 32) | index
}

/// Appends `count` records to each of `queues` of `topic` (starting at index `from`), a
/// batch per index, and returns when all are acknowledged (SYNC_FLUSH).
async fn append_queues(store: &Store, topic: &str, queues: i32, (from, count): (u64, u64)) {
    for index in from..from + count {
        let batch: Vec<_> = (0..queues)
            .map(|queue_id| record(topic, queue_id, &body(tag(queue_id, index), 24), ""))
            .collect();
        let appended = store.append(&batch).await.expect("append");
        for (queue_id, one) in (0..queues).zip(&appended) {
            assert_eq!(one.queue_offset, QueueOffset(index), "queue {queue_id}");
        }
    }
}

/// Every record of (topic, queue_id) from `from`, in pulls of `per_pull`.
async fn read_from(
    store: &Store,
    topic: &str,
    queue_id: i32,
    from: u64,
    per_pull: usize,
) -> Vec<Bytes> {
    let mut records = Vec::new();
    let mut offset = QueueOffset(from);
    loop {
        let got = store
            .get_messages(
                topic,
                queue_id,
                offset,
                per_pull,
                1 << 20,
                MessageFilter::All,
            )
            .await
            .expect("get");
        if got.status != GetStatus::Found {
            return records;
        }
        records.extend(got.records);
        offset = got.next_offset;
    }
}

/// Checks (topic, queue_id) holds exactly the records `0..count` written by `append_queues`.
async fn check_queue(store: &Store, topic: &str, queue_id: i32, count: u64) {
    assert_eq!(store.min_offset(topic, queue_id), QueueOffset(0));
    assert_eq!(store.max_offset(topic, queue_id), QueueOffset(count));
    let records = read_from(store, topic, queue_id, 0, 32).await;
    assert_eq!(records.len() as u64, count, "{topic}/{queue_id}");
    for (index, bytes) in (0..count).zip(&records) {
        let view = RecordView::parse(bytes).expect("parse");
        assert_eq!(view.queue_offset(), QueueOffset(index).as_i64());
        assert_eq!(
            body_tag(bytes),
            tag(queue_id, index),
            "{topic}/{queue_id} at {index}"
        );
    }
}

fn queue_file(root: &Path, topic: &str, queue_id: i32, file: u64) -> PathBuf {
    let start_byte = file * ENTRIES_PER_FILE * 20;
    root.join("consumequeue")
        .join(topic)
        .join(queue_id.to_string())
        .join(format!("{start_byte:020}"))
}

#[derive(Clone, Copy, Debug)]
enum Damage {
    /// The last file loses most of its entries.
    CutShort,
    /// A file in the middle is gone.
    FileDeleted,
    /// The first file is gone.
    FirstFileDeleted,
    /// The queue's directory is gone.
    DirectoryDeleted,
    /// The first file holds only zeros.
    Zeroed,
}

fn damage(root: &Path, kind: Damage) {
    let path = |file| queue_file(root, "Hit", 1, file);
    match kind {
        Damage::CutShort => {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(path(2))
                .expect("last file");
            file.set_len(100 * 20).expect("cut");
            file.sync_all().expect("sync");
        }
        Damage::FileDeleted => std::fs::remove_file(path(1)).expect("middle file"),
        Damage::FirstFileDeleted => std::fs::remove_file(path(0)).expect("first file"),
        Damage::DirectoryDeleted => {
            let dir = path(0).parent().expect("dir").to_path_buf();
            std::fs::remove_dir_all(dir).expect("queue directory");
        }
        Damage::Zeroed => {
            let length = std::fs::metadata(path(0)).expect("first file").len();
            let zeros = vec![0u8; usize::try_from(length).expect("small file")];
            std::fs::write(path(0), zeros).expect("zero");
        }
    }
}

// Proves a queue whose file was cut short, deleted (one file or the whole directory) or
// zeroed is repaired alone from the commit log (no other queue is rebuilt), serves every
// message, and stays repaired after another restart: after a clean stop, where no record
// past the checkpoint reveals the gap and the queue table does, and after a crash with
// records of every queue past the checkpoint, where the first of the damaged queue's
// records that skips offsets does.
#[test]
fn damaged_queue_files_are_repaired_alone() {
    for crashed in [false, true] {
        for kind in [
            Damage::CutShort,
            Damage::FileDeleted,
            Damage::FirstFileDeleted,
            Damage::DirectoryDeleted,
            Damage::Zeroed,
        ] {
            repair_after(kind, crashed);
        }
    }
}

fn repair_after(kind: Damage, crashed: bool) {
    let records: u64 = 2500;
    let after_crash: u64 = if crashed { 300 } else { 0 };
    let dir = TempDir::new("cq-damage");
    let config = config(dir.path());
    comet_rt::local::run_local("cq-damage-write", async {
        let store = Store::open(config.clone()).await.expect("open");
        append_queues(&store, "Hit", 3, (0, records)).await;
        store.shutdown().await.expect("shutdown");
    });
    if crashed {
        let mut no_flush = config.clone();
        no_flush.cq_flush_interval_ms = 3_600_000;
        comet_rt::local::run_local("cq-damage-crash", async {
            let store = Store::open(no_flush).await.expect("open");
            append_queues(&store, "Hit", 3, (records, after_crash)).await;
            // Dropped without shutdown: these records lie past the checkpoint.
        });
    }
    damage(dir.path(), kind);
    let total = records + after_crash;
    let case = format!("{kind:?}, crashed: {crashed}");
    comet_rt::local::run_local("cq-damage-repair", async {
        let store = Store::open(config.clone()).await.expect("reopen");
        let repaired = store.repaired_queues();
        assert_eq!(repaired, vec![("Hit".to_string(), 1)], "{case}");
        for queue_id in 0..3 {
            check_queue(&store, "Hit", queue_id, total).await;
        }
        store.shutdown().await.expect("shutdown");
    });
    comet_rt::local::run_local("cq-damage-again", async {
        let store = Store::open(config.clone()).await.expect("reopen");
        assert!(
            store.repaired_queues().is_empty(),
            "{case}: repaired for good"
        );
        check_queue(&store, "Hit", 1, total).await;
        store.shutdown().await.expect("shutdown");
    });
}

/// Reads every record of Cold/0 one by one through its entry (`consume_queue_entries`),
/// returning (offset, store time, physical offset, bytes).
async fn all_records(store: &Store, count: u64) -> Vec<(u64, i64, i64, Bytes)> {
    let records = read_from(store, "Cold", 0, 0, 1000).await;
    assert_eq!(records.len() as u64, count);
    records
        .into_iter()
        .map(|bytes| {
            let view = RecordView::parse(&bytes).expect("parse");
            let offset = u64::try_from(view.queue_offset()).expect("offset");
            (
                offset,
                view.store_timestamp(),
                view.physical_offset(),
                bytes.clone(),
            )
        })
        .collect()
}

// Proves reads far behind the tail, beyond a cache of two blocks, return exactly what was
// written, across the queue's files: pulls of any size from any offset, entries for admin
// inspection, lookups by time (binary search over entries on disk) and store times, with
// the cache never above its bound.
#[test]
fn cold_reads_return_what_was_written() {
    let dir = TempDir::new("cq-cold");
    let mut config = config(dir.path());
    config.cq_cache_bytes = 2 * 1024 * 20;
    let count: u64 = 6000;
    comet_rt::local::run_local("cq-cold-write", async {
        let store = Store::open(config.clone()).await.expect("open");
        for burst in 0..12 {
            append_queues(&store, "Cold", 2, (burst * count / 12, count / 12)).await;
            // Distinct store times between bursts, for the lookups by time.
            comet_rt::local::sleep(Duration::from_millis(3)).await;
        }
        store.shutdown().await.expect("shutdown");
    });
    comet_rt::local::run_local("cq-cold-read", async {
        let store = Store::open(config.clone()).await.expect("reopen");
        check_queue(&store, "Cold", 0, count).await;
        let all = all_records(&store, count).await;
        check_random_pulls(&store, &all).await;
        check_entries(&store, &all);
        check_times(&store, &all).await;
        let memory = store.consume_queue_memory();
        assert!(
            store.stats().cq_disk_reads > 0,
            "cold blocks came from the files"
        );
        assert!(
            memory.cache_peak_bytes <= memory.cache_bound_bytes,
            "{memory:?}"
        );
        assert_eq!(memory.cache_bound_bytes, config.cq_cache_bytes);
        store.shutdown().await.expect("shutdown");
    });
}

async fn check_random_pulls(store: &Store, all: &[(u64, i64, i64, Bytes)]) {
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    for _ in 0..200 {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        let from = (seed >> 33) % all.len() as u64;
        let wanted = usize::try_from((seed >> 20) % 100).expect("small") + 1;
        let got = store
            .get_messages(
                "Cold",
                0,
                QueueOffset(from),
                wanted,
                1 << 20,
                MessageFilter::All,
            )
            .await
            .expect("get");
        assert_eq!(got.status, GetStatus::Found);
        let expected = &all[usize::try_from(from).expect("index")..];
        assert_eq!(got.records.len(), wanted.min(expected.len()), "from {from}");
        for (bytes, (_, _, _, written)) in got.records.iter().zip(expected) {
            assert_eq!(bytes, written, "from {from}");
        }
    }
}

fn check_entries(store: &Store, all: &[(u64, i64, i64, Bytes)]) {
    let entries = store.consume_queue_entries("Cold", 0, QueueOffset(1500), 3000);
    assert_eq!(entries.len(), 3000);
    for ((offset, entry), (written_offset, _, physical, bytes)) in entries.iter().zip(&all[1500..])
    {
        assert_eq!(offset.0, *written_offset);
        assert_eq!(entry.physical.as_i64(), *physical);
        assert_eq!(entry.size as usize, bytes.len());
    }
}

async fn check_times(store: &Store, all: &[(u64, i64, i64, Bytes)]) {
    let mut times: Vec<i64> = all.iter().map(|record| record.1).collect();
    times.dedup();
    assert!(times.len() >= 4, "bursts have distinct store times");
    // Some 40 times spread over the queue, the first and the last among them.
    let step = (times.len() / 40).max(1);
    let last_time = times[times.len() - 1];
    let sampled = times.iter().copied().step_by(step).chain([last_time]);
    for time in sampled {
        let first = all
            .iter()
            .position(|record| record.1 >= time)
            .expect("some");
        let last = all
            .iter()
            .rposition(|record| record.1 <= time)
            .expect("some");
        let lower = store
            .offset_by_timestamp("Cold", 0, time, TimeBoundary::Lower)
            .await
            .expect("lower");
        let upper = store
            .offset_by_timestamp("Cold", 0, time, TimeBoundary::Upper)
            .await
            .expect("upper");
        assert_eq!(lower, QueueOffset(first as u64), "lower {time}");
        assert_eq!(upper, QueueOffset(last as u64), "upper {time}");
        let at = store
            .store_time_at("Cold", 0, QueueOffset(first as u64))
            .await
            .expect("time");
        assert_eq!(at, Some(all[first].1));
    }
    let earliest = store
        .earliest_store_time("Cold", 0)
        .await
        .expect("earliest");
    assert_eq!(earliest, Some(all[0].1));
}

// Proves a reader a few thousand entries behind the producer reads no queue file: entries
// leaving the hot tail join the block cache when they are written.
#[test]
fn lagging_reads_come_from_memory() {
    let dir = TempDir::new("cq-lagging");
    let config = config(dir.path());
    comet_rt::local::run_local("cq-lagging", async {
        let store = Store::open(config.clone()).await.expect("open");
        append_queues(&store, "Lag", 1, (0, 4000)).await;
        wait_for_written(&store, 1).await;
        let records = read_from(&store, "Lag", 0, 1000, 32).await;
        assert_eq!(records.len(), 3000);
        assert_eq!(body_tag(&records[0]), tag(0, 1000));
        assert_eq!(
            store.stats().cq_disk_reads,
            0,
            "served from the tail and the cache"
        );
        store.shutdown().await.expect("shutdown");
    });
}

/// Waits until the lazy flush wrote every queue's entries (the hot tails shrink to their
/// bound), failing after a deadline.
async fn wait_for_written(store: &Store, queues: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let memory = store.consume_queue_memory();
        if memory.resident_entries <= queues * HOT_ENTRIES_MAX {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "hot tails stay large: {memory:?}"
        );
        comet_rt::local::sleep(Duration::from_millis(10)).await;
    }
}

// Proves memory does not grow with retained entries: 200,000 entries over 100 queues with a
// cache bound of 3 blocks keep at most the hot tails resident (the same bound at 50,000 and
// at 200,000 entries, and after a restart), and cold reads spread over every queue keep the
// cache within its bound.
#[test]
fn memory_stays_within_its_bound() {
    let dir = TempDir::new("cq-memory");
    let mut config = config(dir.path());
    config.segment_bytes = 4 * 1024 * 1024;
    config.read_cache_bytes = 1024 * 1024;
    config.cq_cache_bytes = 3 * 1024 * 20;
    let queues: i32 = 100;
    let per_queue: u64 = 2000;
    let hot_bound = usize::try_from(queues).expect("small") * HOT_ENTRIES_MAX;
    comet_rt::local::run_local("cq-memory", async {
        let store = Store::open(config.clone()).await.expect("open");
        append_queues(&store, "Many", queues, (0, per_queue / 4)).await;
        wait_for_written(&store, 100).await;
        let early = store.consume_queue_memory();
        append_queues(&store, "Many", queues, (per_queue / 4, per_queue * 3 / 4)).await;
        wait_for_written(&store, 100).await;
        let late = store.consume_queue_memory();
        assert_eq!(late.queues, 100);
        assert!(late.resident_entries <= hot_bound, "{late:?}");
        assert!(early.resident_entries <= hot_bound, "{early:?}");
        let mut seed: u64 = 7;
        for queue_id in 0..queues {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let from = (seed >> 33) % (per_queue - 300);
            let got = store
                .get_messages(
                    "Many",
                    queue_id,
                    QueueOffset(from),
                    8,
                    1 << 20,
                    MessageFilter::All,
                )
                .await
                .expect("get");
            assert_eq!(body_tag(&got.records[0]), tag(queue_id, from));
        }
        let read = store.consume_queue_memory();
        assert!(store.stats().cq_disk_reads > 0);
        assert!(read.cache_peak_bytes <= config.cq_cache_bytes, "{read:?}");
        store.shutdown().await.expect("shutdown");
    });
    comet_rt::local::run_local("cq-memory-reopen", async {
        let store = Store::open(config.clone()).await.expect("reopen");
        let memory = store.consume_queue_memory();
        assert!(memory.resident_entries <= hot_bound, "{memory:?}");
        assert_eq!(store.max_offset("Many", 99), QueueOffset(per_queue));
        store.shutdown().await.expect("shutdown");
    });
}

// Proves a store dropped without shutdown (as a crash leaves it, see tests/crash.rs) with a
// cache of one block, far smaller than its queues, loses no acknowledged record: each round
// appends more, then reopens and reads every queue back from its files.
#[test]
fn dropped_store_with_a_tiny_cache_loses_nothing() {
    let dir = TempDir::new("cq-drop");
    let mut config = config(dir.path());
    config.cq_cache_bytes = 1024 * 20;
    config.cq_flush_interval_ms = 30;
    let per_round: u64 = 1500;
    for round in 0..3u64 {
        comet_rt::local::run_local("cq-drop-write", async {
            let store = Store::open(config.clone()).await.expect("open");
            append_queues(&store, "Drop", 4, (round * per_round, per_round)).await;
            // Dropped here without shutdown: abandoned as in a crash.
        });
        comet_rt::local::run_local("cq-drop-check", async {
            let store = Store::open(config.clone()).await.expect("reopen");
            for queue_id in 0..4 {
                check_queue(&store, "Drop", queue_id, (round + 1) * per_round).await;
            }
            let memory = store.consume_queue_memory();
            assert!(
                memory.cache_peak_bytes <= config.cq_cache_bytes,
                "{memory:?}"
            );
            // Dropped again: the next round starts after a crash too.
        });
    }
}

/// The newest checkpoint's dispatch position: every queue entry of a record below it is in
/// the queue files (checkpoint.rs: two 4 KiB slots, sequence at byte 8, dispatch position
/// at byte 24). None while no slot is valid.
fn checkpoint_dispatch_position(root: &Path) -> Option<u64> {
    let bytes = std::fs::read(root.join("checkpoint/3")).ok()?;
    bytes
        .chunks(4096)
        .filter(|slot| slot.len() >= 32 && &slot[0..4] == b"CMCK")
        .map(|slot| {
            let word = |at: usize| u64::from_be_bytes(slot[at..at + 8].try_into().expect("8"));
            (word(8), word(24))
        })
        .max()
        .map(|(_, position)| position)
}

/// How many leading entries of (topic, queue_id)'s first file are written (not zero).
fn entries_on_disk(root: &Path, topic: &str, queue_id: i32) -> usize {
    let Ok(bytes) = std::fs::read(queue_file(root, topic, queue_id, 0)) else {
        return 0;
    };
    bytes
        .chunks(20)
        .take_while(|entry| entry.iter().any(|byte| *byte != 0))
        .count()
}

// Proves the lazy flush of many dirty queues at once (more than the pool of open files, so
// flushes run side by side and files leave the pool while others are in use) lets the
// checkpoint pass every record only once every queue's files hold its entries, and that a
// store dropped without shutdown then reopens with every entry and no queue to repair.
#[test]
fn many_dirty_queues_flush_before_the_checkpoint_passes() {
    const QUEUES: i32 = 300;
    let dir = TempDir::new("cq-many-dirty");
    let mut config = config(dir.path());
    config.cq_open_files_max = 32;
    // Queue 0 spans two files: its flush takes more than one step.
    let long_queue: u64 = ENTRIES_PER_FILE + 200;
    comet_rt::local::run_local("cq-many-dirty-write", async {
        let store = Store::open(config.clone()).await.expect("open");
        append_queues(&store, "Dirty", QUEUES, (0, 3)).await;
        append_queues(&store, "Dirty", 1, (3, long_queue - 3)).await;
        let end = store.written_position();
        let passed = poll_until_async(Duration::from_secs(60), || {
            checkpoint_dispatch_position(dir.path()).is_some_and(|position| position >= end)
        })
        .await;
        assert!(passed, "checkpoint not past {end} in 60 s");
        // The checkpoint claims every entry: the files must already hold them.
        assert_eq!(
            entries_on_disk(dir.path(), "Dirty", 0),
            usize::try_from(ENTRIES_PER_FILE).expect("small"),
            "queue 0's first file is full"
        );
        for queue_id in 1..QUEUES {
            assert_eq!(
                entries_on_disk(dir.path(), "Dirty", queue_id),
                3,
                "queue {queue_id}"
            );
        }
        let memory = store.consume_queue_memory();
        assert!(memory.open_files_peak <= 32, "{memory:?}");
        // Dropped without shutdown: the reopen relies on the checkpoint and the files.
    });
    comet_rt::local::run_local("cq-many-dirty-check", async {
        let store = Store::open(config.clone()).await.expect("reopen");
        assert!(
            store.repaired_queues().is_empty(),
            "no queue file was short: {:?}",
            store.repaired_queues()
        );
        check_queue(&store, "Dirty", 0, long_queue).await;
        for queue_id in 1..QUEUES {
            check_queue(&store, "Dirty", queue_id, 3).await;
        }
        store.shutdown().await.expect("shutdown");
    });
}
