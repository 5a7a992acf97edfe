//! Injected I/O failures (test-only fault injector in the io seam; no special file system
//! needed): a full disk or a failed fdatasync fails every covered append with a clear error,
//! stops further writes, and loses nothing that was acknowledged.

mod common;

use std::cell::RefCell;
use std::rc::Rc;

use comet_rt::io::FaultInjector;
use comet_store::{AppendedRecord, MessageFilter, QueueOffset, Store, StoreError};
use common::{body, record, small_config, TempDir};

/// Runs `appenders` tasks appending until the store refuses; returns acknowledged records
/// (with the tag in their body) and the errors seen.
async fn append_until_failure(
    store: &Store,
    appenders: u64,
) -> (Vec<(u64, AppendedRecord)>, Vec<String>) {
    let acked = Rc::new(RefCell::new(Vec::new()));
    let errors = Rc::new(RefCell::new(Vec::new()));
    let mut tasks = Vec::new();
    for appender in 0..appenders {
        let (store, acked, errors) = (store.clone(), acked.clone(), errors.clone());
        tasks.push(comet_rt::local::spawn(async move {
            for step in 0..10_000u64 {
                let tag = appender * 1_000_000 + step;
                match store
                    .append(&[record("Full", 0, &body(tag, 500), "")])
                    .await
                {
                    Ok(done) => acked.borrow_mut().push((tag, done[0])),
                    Err(error) => {
                        errors.borrow_mut().push(error.to_string());
                        return;
                    }
                }
            }
        }));
    }
    for task in tasks {
        task.await;
    }
    let acked = acked.borrow().clone();
    let errors = errors.borrow().clone();
    (acked, errors)
}

/// Reopens without faults and checks every acknowledged record is at its offset, intact.
fn verify_acked(config: &comet_store::StoreConfig, acked: &[(u64, AppendedRecord)]) {
    let mut config = config.clone();
    config.faults = None;
    comet_rt::local::run_local("faults-verify", async {
        let store = Store::open(config).await.expect("reopen");
        for (tag, appended) in acked {
            let got = store
                .get_messages(
                    "Full",
                    0,
                    appended.queue_offset,
                    1,
                    1 << 20,
                    MessageFilter::All,
                )
                .await
                .expect("get");
            assert_eq!(
                got.records.len(),
                1,
                "acked offset {:?}",
                appended.queue_offset
            );
            let view = comet_proto::message::RecordView::parse(&got.records[0]).expect("parse");
            assert_eq!(&view.body()[..8], &tag.to_be_bytes());
            assert_eq!(view.physical_offset(), appended.physical_offset.as_i64());
        }
        let max = store.max_offset("Full", 0);
        assert!(max.0 >= acked.len() as u64);
        store.shutdown().await.expect("shutdown");
    });
}

// Proves ENOSPC on a commit-log write fails the covered appends with a clear "No space"
// error, refuses every later append, and that every acknowledged record survives a restart.
#[test]
fn disk_full_on_write() {
    let dir = TempDir::new("enospc");
    let mut config = small_config(dir.path());
    let faults = FaultInjector::new();
    config.faults = Some(faults.clone());
    let acked = comet_rt::local::run_local("enospc", async {
        let store = Store::open(config.clone()).await.expect("open");
        faults.fail_writes_after_bytes(600 * 1024);
        let (acked, errors) = append_until_failure(&store, 32).await;
        assert!(
            !acked.is_empty(),
            "some appends succeed before the disk fills"
        );
        assert_eq!(errors.len(), 32, "every appender sees the failure");
        assert!(
            errors.iter().any(|e| e.contains("No space left")),
            "{errors:?}"
        );
        let later = store.append(&[record("Full", 0, b"after-full", "")]).await;
        assert!(
            matches!(later, Err(StoreError::WriteFailed { .. })),
            "{later:?}"
        );
        acked
    });
    verify_acked(&config, &acked);
}

// Proves a failed fdatasync fails the appends waiting on it and stops writes.
#[test]
fn failed_fdatasync() {
    let dir = TempDir::new("fsync-fail");
    let mut config = small_config(dir.path());
    let faults = FaultInjector::new();
    config.faults = Some(faults.clone());
    let acked = comet_rt::local::run_local("fsync-fail", async {
        let store = Store::open(config.clone()).await.expect("open");
        let first = store
            .append(&[record("Full", 0, &body(1, 100), "")])
            .await
            .expect("ok");
        faults.fail_fdatasync();
        let failed = store.append(&[record("Full", 0, &body(2, 100), "")]).await;
        let message = failed.expect_err("sync failed").to_string();
        assert!(message.contains("fdatasync"), "{message}");
        assert!(store
            .append(&[record("Full", 0, b"later-record", "")])
            .await
            .is_err());
        assert_eq!(
            store.max_offset("Full", 0),
            QueueOffset(1),
            "failed record invisible"
        );
        vec![(1u64, first[0])]
    });
    verify_acked(&config, &acked);
}

// Proves a failed preallocation of the next segment refuses the append that needs it with
// SegmentUnavailable without stopping the store, which continues once space is back.
#[test]
fn failed_preallocation_is_not_fatal() {
    let dir = TempDir::new("prealloc-fail");
    let mut config = small_config(dir.path());
    let faults = FaultInjector::new();
    config.faults = Some(faults.clone());
    comet_rt::local::run_local("prealloc-fail", async {
        let store = Store::open(config.clone()).await.expect("open");
        faults.fail_preallocate();
        let mut refused = None;
        for index in 0..1000u64 {
            if let Err(error) = store
                .append(&[record("Full", 0, &body(index, 2000), "")])
                .await
            {
                refused = Some(error);
                break;
            }
        }
        let refused = refused.expect("a roll needs the failed segment");
        assert!(
            matches!(refused, StoreError::SegmentUnavailable { .. }),
            "{refused:?}"
        );
        faults.clear();
        let max = store.max_offset("Full", 0);
        let next = store
            .append(&[record("Full", 0, &body(7, 2000), "")])
            .await
            .expect("ok");
        assert_eq!(next[0].queue_offset, max);
        store.shutdown().await.expect("shutdown");
    });
}
