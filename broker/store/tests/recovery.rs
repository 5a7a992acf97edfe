//! Crash-recovery tests without a child process: the store is dropped without shutdown (its
//! executor ends, as in a crash; `abort` stays), the files are damaged, and the reopened store
//! must end at the last valid record, keep everything before it, and continue offsets.

mod common;

use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::time::Duration;

use comet_proto::message::RecordView;
use comet_store::{AppendedRecord, GetStatus, MessageFilter, QueueOffset, Store, StoreConfig};
use common::{body, poll_until_async, properties, record, small_config, TempDir};

const RECORDS: u64 = 100;

/// Appends RECORDS records of ~400 bytes to queue 0 of `store`.
async fn append_records(store: &Store) -> Vec<AppendedRecord> {
    let mut appended = Vec::new();
    for index in 0..RECORDS {
        let one = record("Crash", 0, &body(index, 300), "");
        appended.push(store.append(&[one]).await.expect("append")[0]);
    }
    appended
}

/// Appends RECORDS records of ~400 bytes to queue 0 and "crashes".
fn write_and_crash(config: &StoreConfig) -> Vec<AppendedRecord> {
    comet_rt::local::run_local("recovery-writer", async {
        let store = Store::open(config.clone()).await.expect("open");
        append_records(&store).await
    })
}

/// Zero-fills the page holding the last record; returns how many records end before it.
fn zero_last_page(root: &Path, appended: &[AppendedRecord]) -> u64 {
    let last = appended.last().expect("records").physical_offset.position();
    let page = last - last % 4096;
    damage(root, page, &[0u8; 4096]);
    appended
        .iter()
        .filter(|a| a.physical_offset.position() + u64::from(a.size_bytes) <= page)
        .count() as u64
}

fn segment_path(root: &Path) -> std::path::PathBuf {
    root.join("commitlog/3/00000000000000000000")
}

fn damage(root: &Path, position: u64, bytes: &[u8]) {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(segment_path(root))
        .expect("segment");
    file.seek(SeekFrom::Start(position)).expect("seek");
    file.write_all(bytes).expect("write");
    file.sync_all().expect("sync");
}

/// Reopens, checks records 0..expected are intact and nothing else is, appends one more.
fn reopen_and_check(config: &StoreConfig, expected: u64) {
    assert!(
        config.root.join("abort").exists(),
        "crash leaves abort behind"
    );
    comet_rt::local::run_local("recovery-reader", async {
        let store = Store::open(config.clone()).await.expect("reopen");
        assert_eq!(store.max_offset("Crash", 0), QueueOffset(expected));
        let got = store
            .get_messages(
                "Crash",
                0,
                QueueOffset(0),
                1000,
                1 << 20,
                MessageFilter::All,
            )
            .await
            .expect("get");
        assert_eq!(got.records.len() as u64, expected);
        for (offset, bytes) in got.records.iter().enumerate() {
            let view = RecordView::parse(bytes).expect("parse");
            assert!(view.body_crc_matches());
            assert_eq!(view.queue_offset(), offset as i64);
            assert_eq!(&view.body()[..8], &(offset as u64).to_be_bytes());
        }
        let next = store
            .append(&[record("Crash", 0, b"after-recovery", "")])
            .await;
        assert_eq!(next.expect("append")[0].queue_offset, QueueOffset(expected));
        let after = store
            .get_messages(
                "Crash",
                0,
                QueueOffset(expected),
                10,
                1 << 20,
                MessageFilter::All,
            )
            .await
            .expect("get");
        assert_eq!(after.status, GetStatus::Found);
        assert_eq!(
            after.records.len(),
            1,
            "no stale record reappears after the new one"
        );
        store.shutdown().await.expect("shutdown");
    });
}

// Proves a crash with nothing damaged loses no acknowledged record.
#[test]
fn clean_crash_keeps_everything() {
    let dir = TempDir::new("crash-clean");
    let config = small_config(dir.path());
    write_and_crash(&config);
    reopen_and_check(&config, RECORDS);
}

// Proves a torn last record (its second half never reached the disk) is cut off.
#[test]
fn truncated_tail_record() {
    let dir = TempDir::new("crash-torn");
    let config = small_config(dir.path());
    let appended = write_and_crash(&config);
    let last = appended.last().expect("records");
    let half = u64::from(last.size_bytes) / 2;
    let zeros = vec![0u8; usize::try_from(half + 1).expect("small")];
    damage(dir.path(), last.physical_offset.position() + half, &zeros);
    reopen_and_check(&config, RECORDS - 1);
}

// Proves a flipped byte in the body of one of the last records ends the log before it
// (body CRC), and flipped header bytes too.
#[test]
fn flipped_bytes_in_last_records() {
    let dir = TempDir::new("crash-flip");
    let config = small_config(dir.path());
    let appended = write_and_crash(&config);
    let victim = appended[usize::try_from(RECORDS - 3).expect("small")];
    damage(
        dir.path(),
        victim.physical_offset.position() + 120,
        &[0xFF, 0x00, 0xAA],
    );
    reopen_and_check(&config, RECORDS - 3);
    let dir = TempDir::new("crash-flip-header");
    let config = small_config(dir.path());
    let appended = write_and_crash(&config);
    let victim = appended[usize::try_from(RECORDS - 2).expect("small")];
    damage(dir.path(), victim.physical_offset.position() + 5, &[0x11]);
    reopen_and_check(&config, RECORDS - 2);
}

// Proves a zero-filled tail page ends the log at the first record touching that page.
#[test]
fn zero_filled_tail_page() {
    let dir = TempDir::new("crash-zero");
    let config = small_config(dir.path());
    let appended = write_and_crash(&config);
    let survivors = zero_last_page(dir.path(), &appended);
    reopen_and_check(&config, survivors);
}

// Proves the zero-filled tail page is found even when the checkpoint already covers part of
// it and the spare segment exists (recovery once started at the last segment file, the empty
// spare, and served zeroed records below the checkpoint as valid).
#[test]
fn zero_filled_tail_page_below_the_checkpoint_with_spare_ready() {
    let dir = TempDir::new("crash-zero-spare");
    let config = small_config(dir.path());
    let appended = comet_rt::local::run_local("recovery-writer", async {
        let store = Store::open(config.clone()).await.expect("open");
        let appended = append_records(&store).await;
        // Wait for the spare segment and a checkpoint covering every record.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let segments = dir.path().join("commitlog/3");
        while std::fs::read_dir(&segments).expect("segments").count() < 2
            || !checkpoint_covers(dir.path(), appended.last().expect("records"))
        {
            assert!(
                std::time::Instant::now() < deadline,
                "no spare or checkpoint"
            );
            comet_rt::local::sleep(std::time::Duration::from_millis(20)).await;
        }
        appended
    });
    let survivors = zero_last_page(dir.path(), &appended);
    reopen_and_check(&config, survivors);
}

/// The newest checkpoint slot's sequence (0 when none is valid-looking).
fn checkpoint_sequence(root: &Path) -> u64 {
    let Ok(bytes) = std::fs::read(root.join("checkpoint/3")) else {
        return 0;
    };
    bytes
        .chunks(4096)
        .filter(|slot| slot.len() >= 16 && &slot[0..4] == b"CMCK")
        .map(|slot| u64::from_be_bytes(slot[8..16].try_into().expect("8")))
        .max()
        .unwrap_or(0)
}

/// True when the newest checkpoint slot's log position is past `record`.
fn checkpoint_covers(root: &Path, record: &AppendedRecord) -> bool {
    let Ok(bytes) = std::fs::read(root.join("checkpoint/3")) else {
        return false;
    };
    let end = record.physical_offset.position() + u64::from(record.size_bytes);
    // Two 4 KiB slots: sequence at byte 8, log durable position at byte 16 (checkpoint.rs).
    let slots: Vec<(u64, u64)> = bytes
        .chunks(4096)
        .filter(|slot| slot.len() >= 24 && &slot[0..4] == b"CMCK")
        .map(|slot| {
            let word = |at: usize| u64::from_be_bytes(slot[at..at + 8].try_into().expect("8"));
            (word(8), word(16))
        })
        .collect();
    slots
        .iter()
        .max()
        .is_some_and(|(_, position)| *position >= end)
}

// Proves a torn checkpoint slot (garbage in the newest copy) falls back to the other copy
// and recovery still finds every record.
#[test]
fn torn_checkpoint_copy() {
    let dir = TempDir::new("crash-checkpoint");
    let config = small_config(dir.path());
    write_and_crash(&config);
    let path = dir.path().join("checkpoint/3");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("checkpoint");
    file.write_all(&[0xEE; 64]).expect("write");
    file.sync_all().expect("sync");
    reopen_and_check(&config, RECORDS);
}

// Proves the crash-test loss (acknowledged records gone, queue max 0) cannot recur: a
// consume-queue flush that created a queue's first two files and was killed before writing
// either leaves both empty; loading them must not start the queue at the second file (which
// made recovery call every record below it "stale" and end the commit log at the first one).
#[test]
fn empty_consume_queue_files_from_a_killed_flush() {
    let dir = TempDir::new("crash-empty-cq");
    let mut config = small_config(dir.path());
    // No lazy flush after the one at open: the files below stand for the only flush.
    config.cq_flush_interval_ms = 3_600_000;
    let records: u64 = 1100;
    assert!(
        records > config.cq_entries_per_file,
        "entries reach the second file"
    );
    comet_rt::local::run_local("empty-cq-writer", async {
        let store = Store::open(config.clone()).await.expect("open");
        for index in 0..records {
            let one = record("Crash", 0, &body(index, 100), "");
            store.append(&[one]).await.expect("append");
        }
    });
    let queue_dir = dir.path().join("consumequeue/Crash/0");
    std::fs::create_dir_all(&queue_dir).expect("queue dir");
    let second_file_byte = config.cq_entries_per_file * 20;
    for start_byte in [0, second_file_byte] {
        std::fs::File::create(queue_dir.join(format!("{start_byte:020}"))).expect("file");
    }
    reopen_and_read_all(&config, records);
}

// Proves recovery does not hide acknowledged records behind placeholders when a consume
// queue on disk holds fewer entries than the checkpoint promises (here its file lost the
// entries from 500 on): the scan meets a record that skips offsets and rebuilds every queue
// from the oldest segment.
#[test]
fn short_consume_queue_is_rebuilt_from_the_log() {
    let dir = TempDir::new("crash-short-cq");
    let mut config = small_config(dir.path());
    let (first_run, second_run): (u64, u64) = (1000, 100);
    let append_range = |config: &StoreConfig, range: std::ops::Range<u64>, crash: bool| {
        comet_rt::local::run_local("short-cq-writer", async move {
            let store = Store::open(config.clone()).await.expect("open");
            for index in range {
                let unique = format!("U{index}");
                let props = properties(&[("UNIQ_KEY", &unique)]);
                let one = record("Crash", 0, &body(index, 300), &props);
                store.append(&[one]).await.expect("append");
            }
            if !crash {
                // The first segment's key index is sealed, so the rebuild must replace it.
                let deadline = std::time::Instant::now() + Duration::from_secs(20);
                while store.index_sealed_segments() == 0 {
                    assert!(std::time::Instant::now() < deadline, "maintenance seals");
                    comet_rt::local::sleep(Duration::from_millis(10)).await;
                }
                store.shutdown().await.expect("shutdown");
            }
        })
    };
    // A clean run: queue files and checkpoint cover every record.
    append_range(&config, 0..first_run, false);
    // A crashed run with no lazy flush: its records lie past the checkpoint.
    config.cq_flush_interval_ms = 3_600_000;
    append_range(&config, first_run..first_run + second_run, true);
    let queue_file = dir.path().join("consumequeue/Crash/0/00000000000000000000");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(queue_file)
        .expect("queue file");
    file.seek(SeekFrom::Start(500 * 20)).expect("seek");
    file.write_all(&[0u8; 524 * 20]).expect("zero");
    file.sync_all().expect("sync");
    reopen_and_read_all(&config, first_run + second_run);
    comet_rt::local::run_local("rebuilt-keys", async {
        let store = Store::open(config.clone()).await.expect("reopen");
        for index in [0u64, 7, 499, 999, 1000, 1099] {
            let found = store
                .query_by_key("Crash", &format!("U{index}"), 8, 0, i64::MAX)
                .await
                .expect("query");
            assert_eq!(found.len(), 1, "U{index} indexed once after the rebuild");
            let view = RecordView::parse(&found[0]).expect("parse");
            assert_eq!(&view.body()[..8], &index.to_be_bytes());
        }
        store.shutdown().await.expect("shutdown");
    });
}

// Proves a crash recovery that rebuilds more entries of one queue than it flushes at once
// finishes and serves every record: the first mid-scan flush finds the queue's files holding
// stale entries over many files past its end, more than one flush step opens, and each step
// must go on where the previous one stopped zeroing (it used to start over at the queue's
// end forever, rewriting the same two files).
#[test]
fn crash_rebuild_of_a_long_queue_finishes() {
    let dir = TempDir::new("crash-long-queue");
    // One segment holds everything, so the crash rescan rebuilds every entry (the config is
    // made on each thread: it is not Send).
    let long_queue_config = |root: &Path| {
        let mut config = small_config(root);
        config.segment_bytes = 16 * 1024 * 1024;
        config
    };
    let config = long_queue_config(dir.path());
    // More than recovery dispatches before it flushes (64 Ki entries), and the stale rest
    // spans far more than the two files one flush step opens.
    let records: u64 = 80_000;
    comet_rt::local::run_local("long-queue-writer", {
        let config = config.clone();
        async move {
            let store = Store::open(config).await.expect("open");
            let mut index = 0;
            while index < records {
                let batch: Vec<_> = (index..(index + 500).min(records))
                    .map(|tag| record("Crash", 0, &body(tag, 16), ""))
                    .collect();
                index += batch.len() as u64;
                store.append(&batch).await.expect("append");
            }
            store.shutdown().await.expect("shutdown");
        }
    });
    // The queue files hold every entry; `abort` makes the next open a crash recovery.
    std::fs::write(dir.path().join("abort"), "1").expect("abort");
    let (done, finished) = std::sync::mpsc::channel();
    let reader = {
        let root = dir.path().to_path_buf();
        std::thread::spawn(move || {
            reopen_and_read_all(&long_queue_config(&root), records);
            done.send(()).expect("send");
        })
    };
    finished
        .recv_timeout(Duration::from_secs(60))
        .expect("the crash recovery finishes and every record reads back");
    reader.join().expect("reader");
}

// Proves recovery after a crash reads about the configured margin plus what the checkpoint
// does not cover, not the whole segment the checkpoint points into, and still serves every
// record; and that a torn page just below the checkpoint is still found from there.
#[test]
fn crash_recovery_reads_a_bounded_range_below_the_checkpoint() {
    let dir = TempDir::new("crash-bounded");
    let behind: u64 = 256 * 1024;
    let bounded_config = |root: &Path| {
        let mut config = small_config(root);
        config.segment_bytes = 16 * 1024 * 1024;
        config.crash_verify_behind_bytes = 256 * 1024;
        config.cq_flush_interval_ms = 20;
        config
    };
    let config = bounded_config(dir.path());
    // About 8 MiB in one segment, in steps, so checkpoints name boundaries along the way.
    let records: u64 = 16_000;
    let appended = comet_rt::local::run_local("bounded-writer", {
        let config = config.clone();
        let root = dir.path().to_path_buf();
        async move {
            let store = Store::open(config).await.expect("open");
            let mut appended = Vec::new();
            for step in 0..16u64 {
                let batch: Vec<_> = (step * 1000..(step + 1) * 1000)
                    .map(|tag| record("Crash", 0, &body(tag, 400), ""))
                    .collect();
                let before = checkpoint_sequence(&root);
                appended.extend(store.append(&batch).await.expect("append"));
                // A checkpoint per step, so later ones can name this step's boundaries.
                let checkpointed = || checkpoint_sequence(&root) != before;
                assert!(poll_until_async(CHECKPOINT_WAIT, checkpointed).await);
            }
            let last = appended.last().expect("records");
            let covered = || checkpoint_covers(&root, last);
            assert!(
                poll_until_async(CHECKPOINT_WAIT, covered).await,
                "no checkpoint"
            );
            // Crash: the executor ends without shutdown.
            appended
        }
    });
    assert_eq!(appended.len() as u64, records);
    let log_bytes: u64 = appended.iter().map(|a| u64::from(a.size_bytes)).sum();
    assert!(log_bytes > 6 * 1024 * 1024 && log_bytes < config.segment_bytes);
    let figures = reopen_for_figures(&bounded_config(dir.path()));
    assert!(figures.crashed);
    assert!(
        figures.scanned_bytes < 4 * behind,
        "scanned {} of {log_bytes} log bytes",
        figures.scanned_bytes
    );
    assert!(figures.scanned_bytes >= behind, "{figures:?}");
    reopen_and_read_all(&config, records);
    // A clean open that writes nothing new, then a crash once it has written a checkpoint:
    // that checkpoint must still name a boundary below it (the open knows the older ones).
    comet_rt::local::run_local("idle-then-crash", async {
        let store = Store::open(bounded_config(dir.path()))
            .await
            .expect("reopen");
        let before = checkpoint_sequence(dir.path());
        let checkpointed = || checkpoint_sequence(dir.path()) != before;
        assert!(poll_until_async(CHECKPOINT_WAIT, checkpointed).await);
        drop(store);
    });
    let figures = reopen_for_figures(&bounded_config(dir.path()));
    assert!(figures.crashed);
    assert!(figures.scanned_bytes < 4 * behind, "{figures:?}");
    // Damage just below the checkpoint's page: found, the log ends before it.
    std::fs::write(dir.path().join("abort"), "1").expect("abort");
    let survivors = zero_last_page(dir.path(), &appended);
    assert!(survivors < records);
    reopen_and_check_queue(&bounded_config(dir.path()), survivors);
}

/// How long a test waits for the store's maintenance to write a checkpoint.
const CHECKPOINT_WAIT: Duration = Duration::from_secs(20);

/// Reopens the store and shuts it down again; what its recovery did.
fn reopen_for_figures(config: &StoreConfig) -> comet_store::RecoveryFigures {
    comet_rt::local::run_local("figures", async {
        let store = Store::open(config.clone()).await.expect("reopen");
        let figures = store.recovery();
        store.shutdown().await.expect("shutdown");
        figures
    })
}

/// Reopens and checks queue Crash/0 ends at `expected` with every record before it readable.
fn reopen_and_check_queue(config: &StoreConfig, expected: u64) {
    comet_rt::local::run_local("recheck", async {
        let store = Store::open(config.clone()).await.expect("reopen");
        assert_eq!(store.max_offset("Crash", 0), QueueOffset(expected));
        store.shutdown().await.expect("shutdown");
    });
    reopen_and_read_all(config, expected);
}

/// Reopens and reads queue Crash/0 back, checking each of `records` records at its offset.
fn reopen_and_read_all(config: &StoreConfig, records: u64) {
    comet_rt::local::run_local("reread", async {
        let store = Store::open(config.clone()).await.expect("reopen");
        assert_eq!(store.max_offset("Crash", 0), QueueOffset(records));
        assert_eq!(store.min_offset("Crash", 0), QueueOffset(0));
        let mut offset = QueueOffset(0);
        while offset.0 < records {
            let got = store
                .get_messages("Crash", 0, offset, 1000, 1 << 20, MessageFilter::All)
                .await
                .expect("get");
            assert_eq!(got.status, GetStatus::Found, "at {offset:?}");
            for bytes in &got.records {
                let view = RecordView::parse(bytes).expect("parse");
                assert_eq!(view.queue_offset(), offset.as_i64());
                assert_eq!(&view.body()[..8], &offset.0.to_be_bytes());
                offset.0 += 1;
            }
        }
        store.shutdown().await.expect("shutdown");
    });
}
