//! Many queues without a file descriptor per queue (docs/architecture.md#consume-queues): a
//! store with far more queues than its pool of open consume-queue files
//! (`StoreConfig::cq_open_files_max`) writes, flushes, serves and recovers every queue
//! after a drop without shutdown, while the process's open descriptors (counted in
//! /proc/self/fd) grow by at most the pool's bound. Alone in its test binary, so no other
//! test opens files meanwhile.

mod common;

use std::path::Path;
use std::time::Duration;

use comet_store::{GetStatus, MessageFilter, QueueOffset, Store, StoreConfig};
use common::{body, body_tag, poll_until_async, record, small_config, TempDir};

const TOPIC: &str = "Many";

/// Queues in the test: many more than the pool holds.
const QUEUES: i32 = 120;

/// The pool's bound in the test.
const OPEN_FILES_MAX: usize = 8;

/// Descriptors the store may open besides queue files while the test runs (a new
/// commit-log segment, its spare and its key-index file).
const OTHER_FILES_SLACK: usize = 4;

fn config(root: &Path) -> StoreConfig {
    let mut config = small_config(root);
    config.cq_open_files_max = OPEN_FILES_MAX;
    config
}

fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("list /proc/self/fd")
        .count()
}

fn tag(queue_id: i32, index: u64) -> u64 {
    (u64::try_from(queue_id).expect("queue ids are small") << 32) | index
}

/// Appends records `from..from + count` to each queue in `queues`, one batch per index.
async fn append(store: &Store, queues: std::ops::Range<i32>, from: u64, count: u64) {
    for index in from..from + count {
        let batch: Vec<_> = queues
            .clone()
            .map(|queue_id| record(TOPIC, queue_id, &body(tag(queue_id, index), 24), ""))
            .collect();
        let appended = store.append(&batch).await.expect("append");
        for (queue_id, one) in queues.clone().zip(&appended) {
            assert_eq!(one.queue_offset, QueueOffset(index), "queue {queue_id}");
        }
    }
}

/// Checks every queue holds exactly records `0..count`.
async fn check_all(store: &Store, count: u64) {
    for queue_id in 0..QUEUES {
        let got = store
            .get_messages(
                TOPIC,
                queue_id,
                QueueOffset(0),
                1024,
                1 << 20,
                MessageFilter::All,
            )
            .await
            .expect("get");
        assert_eq!(got.status, GetStatus::Found, "queue {queue_id}");
        let tags: Vec<u64> = got.records.iter().map(|one| body_tag(one)).collect();
        let expected: Vec<u64> = (0..count).map(|index| tag(queue_id, index)).collect();
        assert_eq!(tags, expected, "queue {queue_id}");
    }
}

/// Polls until every queue's first file holds `entries` entries written by a lazy flush.
async fn wait_flushed(root: &Path, entries: u64) {
    let written = |queue_id: i32| {
        let path = root
            .join("consumequeue")
            .join(TOPIC)
            .join(queue_id.to_string())
            .join("00000000000000000000");
        let Ok(bytes) = std::fs::read(path) else {
            return false;
        };
        let at = usize::try_from(entries - 1).expect("small") * 20;
        bytes.len() >= at + 20 && bytes[at..at + 20].iter().any(|byte| *byte != 0)
    };
    let flushed = poll_until_async(Duration::from_secs(30), || (0..QUEUES).all(written)).await;
    assert!(flushed, "queues not flushed in 30 s");
}

/// Polls until the process holds at most `bound` descriptors; returns the last count.
async fn wait_descriptors_within(bound: usize) -> usize {
    poll_until_async(Duration::from_secs(10), || open_descriptors() <= bound).await;
    open_descriptors()
}

// Proves that 120 queues with a pool of 8 open files are flushed, served and recovered
// after a drop without shutdown (the crash path), that the pool was used to its bound and
// never past it, and that the process's descriptors grow by at most the bound (one per
// queue would add 119).
#[test]
fn more_queues_than_open_files() {
    let dir = TempDir::new("many-queues");
    comet_rt::local::run_local("many-queues", async {
        let store = Store::open(config(dir.path())).await.expect("open");
        // One queue written and flushed: the store's own files are open.
        append(&store, 0..1, 0, 10).await;
        let flushed = poll_until_async(Duration::from_secs(30), || {
            store.consume_queue_memory().open_files_peak > 0
        })
        .await;
        assert!(flushed, "first queue not flushed");
        let baseline = open_descriptors();
        append(&store, 1..QUEUES, 0, 10).await;
        append(&store, 0..QUEUES, 10, 20).await;
        wait_flushed(dir.path(), 30).await;
        let memory = store.consume_queue_memory();
        assert_eq!(memory.queues, usize::try_from(QUEUES).expect("small"));
        assert_eq!(memory.open_files_bound, OPEN_FILES_MAX);
        assert_eq!(
            memory.open_files_peak, OPEN_FILES_MAX,
            "the pool was used whole"
        );
        assert!(memory.open_files <= OPEN_FILES_MAX);
        let open = open_descriptors();
        assert!(
            open <= baseline + OPEN_FILES_MAX + OTHER_FILES_SLACK,
            "{open} descriptors, {baseline} before {QUEUES} queues"
        );
        check_all(&store, 30).await;
        // More records after some files left the pool: reopened, not recreated over.
        append(&store, 0..QUEUES, 30, 5).await;
        wait_flushed(dir.path(), 35).await;
        check_all(&store, 35).await;
        drop(store);

        let store = Store::open(config(dir.path())).await.expect("reopen");
        assert!(
            store.repaired_queues().is_empty(),
            "no queue file was damaged: {:?}",
            store.repaired_queues()
        );
        check_all(&store, 35).await;
        append(&store, 0..QUEUES, 35, 5).await;
        wait_flushed(dir.path(), 40).await;
        check_all(&store, 40).await;
        let open = wait_descriptors_within(baseline + OPEN_FILES_MAX + OTHER_FILES_SLACK).await;
        assert!(
            open <= baseline + OPEN_FILES_MAX + OTHER_FILES_SLACK,
            "{open} descriptors after the restart, {baseline} before"
        );
        store.shutdown().await.expect("shutdown");
    });
}
