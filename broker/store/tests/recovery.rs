//! Crash-recovery tests without a child process: the store is dropped without shutdown (its
//! executor ends, as in a crash; `abort` stays), the files are damaged, and the reopened store
//! must end at the last valid record, keep everything before it, and continue offsets.

mod common;

use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

use comet_proto::message::RecordView;
use comet_store::{AppendedRecord, GetStatus, MessageFilter, QueueOffset, Store, StoreConfig};
use common::{body, record, small_config, TestDir};

const RECORDS: u64 = 100;

/// Appends RECORDS records of ~400 bytes to queue 0 and "crashes".
fn write_and_crash(config: &StoreConfig) -> Vec<AppendedRecord> {
    comet_rt::local::run_local("recovery-writer", async {
        let store = Store::open(config.clone()).await.expect("open");
        let mut appended = Vec::new();
        for index in 0..RECORDS {
            let one = record("Crash", 0, &body(index, 300), "");
            appended.push(store.append(&[one]).await.expect("append")[0]);
        }
        appended
    })
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
    let dir = TestDir::new("crash-clean");
    let config = small_config(&dir.path);
    write_and_crash(&config);
    reopen_and_check(&config, RECORDS);
}

// Proves a torn last record (its second half never reached the disk) is cut off.
#[test]
fn truncated_tail_record() {
    let dir = TestDir::new("crash-torn");
    let config = small_config(&dir.path);
    let appended = write_and_crash(&config);
    let last = appended.last().expect("records");
    let half = u64::from(last.size_bytes) / 2;
    let zeros = vec![0u8; usize::try_from(half + 1).expect("small")];
    damage(&dir.path, last.physical_offset.position() + half, &zeros);
    reopen_and_check(&config, RECORDS - 1);
}

// Proves a flipped byte in the body of one of the last records ends the log before it
// (body CRC), and flipped header bytes too.
#[test]
fn flipped_bytes_in_last_records() {
    let dir = TestDir::new("crash-flip");
    let config = small_config(&dir.path);
    let appended = write_and_crash(&config);
    let victim = appended[usize::try_from(RECORDS - 3).expect("small")];
    damage(
        &dir.path,
        victim.physical_offset.position() + 120,
        &[0xFF, 0x00, 0xAA],
    );
    reopen_and_check(&config, RECORDS - 3);
    let dir = TestDir::new("crash-flip-header");
    let config = small_config(&dir.path);
    let appended = write_and_crash(&config);
    let victim = appended[usize::try_from(RECORDS - 2).expect("small")];
    damage(&dir.path, victim.physical_offset.position() + 5, &[0x11]);
    reopen_and_check(&config, RECORDS - 2);
}

// Proves a zero-filled tail page ends the log at the first record touching that page.
#[test]
fn zero_filled_tail_page() {
    let dir = TestDir::new("crash-zero");
    let config = small_config(&dir.path);
    let appended = write_and_crash(&config);
    let last = appended.last().expect("records").physical_offset.position();
    let page = last - last % 4096;
    damage(&dir.path, page, &[0u8; 4096]);
    let survivors = appended
        .iter()
        .filter(|a| a.physical_offset.position() + u64::from(a.size_bytes) <= page)
        .count() as u64;
    reopen_and_check(&config, survivors);
}

// Proves a torn checkpoint slot (garbage in the newest copy) falls back to the other copy
// and recovery still finds every record.
#[test]
fn torn_checkpoint_copy() {
    let dir = TestDir::new("crash-checkpoint");
    let config = small_config(&dir.path);
    write_and_crash(&config);
    let path = dir.path.join("checkpoint/3");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("checkpoint");
    file.write_all(&[0xEE; 64]).expect("write");
    file.sync_all().expect("sync");
    reopen_and_check(&config, RECORDS);
}
