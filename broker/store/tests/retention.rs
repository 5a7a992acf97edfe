//! Retention as Java's `CleanCommitLogService` does it: expired segments go at any of the
//! `deleteWhen` hours, at any hour past `diskMaxUsedSpaceRatio` or after a manual request;
//! past `diskSpaceWarningLevelRatio` appends get Java's disk-full refusal; and a deleted
//! topic's consume queues are emptied for good.

mod common;

use comet_store::{GetStatus, MessageFilter, QueueOffset, Store, StoreConfig, StoreError};
use common::{at_local_hour, body, off_local_hours, record, small_config, TempDir};

fn run<T>(future: impl std::future::Future<Output = T>) -> T {
    comet_rt::local::run_local("retention-test", future)
}

/// A small store whose segments expire at once and whose background pass never runs
/// during a test (the test's own passes decide).
fn expiring_config(dir: &TempDir) -> StoreConfig {
    let mut config = small_config(dir.path());
    config.file_reserved_hours = 0;
    config.retention_check_interval_ms = 3_600_000;
    config
}

/// Appends enough ~800-byte records to `topic` to roll several 256 KiB segments.
async fn fill(store: &Store, topic: &str) {
    for index in 0..2400u64 {
        let queue_id = i32::try_from(index % 2).expect("small");
        store
            .append(&[record(topic, queue_id, &body(index, 700), "")])
            .await
            .expect("append");
    }
}

// Proves expired segments go at the second of two delete hours and not at an hour outside
// them (Java's `deleteWhen=04;16`).
#[test]
fn several_delete_hours() {
    let dir = TempDir::new("ret-hours");
    let mut config = expiring_config(&dir);
    config.delete_when_hours = vec![4, 16];
    run(async {
        let store = Store::open(config.clone()).await.expect("open");
        fill(&store, "Hours").await;
        let off_hour = off_local_hours(&config.delete_when_hours);
        let deleted = store.run_retention_once(off_hour).await.expect("pass");
        assert_eq!(deleted, 0, "nothing goes outside the delete hours");
        let deleted = store
            .run_retention_once(at_local_hour(16))
            .await
            .expect("pass");
        assert!(deleted >= 4, "expired segments go at 16: {deleted}");
        store.shutdown().await.expect("shutdown");
    });
}

// Proves a manual request (DELETE_EXPIRED_COMMITLOG) makes the next passes delete expired
// segments outside the delete hours, for Java's 20 passes, and never unexpired ones.
#[test]
fn manual_delete_ignores_the_hour() {
    let dir = TempDir::new("ret-manual");
    let mut config = expiring_config(&dir);
    config.file_reserved_hours = 1;
    run(async {
        let store = Store::open(config.clone()).await.expect("open");
        fill(&store, "Manual").await;
        let off_hour = off_local_hours(&config.delete_when_hours);
        store.delete_expired_manually();
        assert_eq!(store.manual_delete_passes(), 20);
        // The segments were written now: an hour's reservation keeps them.
        let now = comet_rt::clock::wall_clock_ms();
        assert_eq!(store.run_retention_once(now).await.expect("pass"), 0);
        assert_eq!(store.manual_delete_passes(), 19);
        // Two hours on they have expired, and the manual passes delete them at any hour.
        let later = off_hour.max(now + 2 * 3_600_000);
        let later = if config
            .delete_when_hours
            .contains(&comet_store::local_hour(later))
        {
            later + 3_600_000
        } else {
            later
        };
        let deleted = store.run_retention_once(later).await.expect("pass");
        assert!(deleted >= 4, "manual pass deleted {deleted}");
        assert_eq!(store.manual_delete_passes(), 18);
        store.shutdown().await.expect("shutdown");
    });
}

// Proves disk use past `diskMaxUsedSpaceRatio` deletes expired segments at any hour but
// keeps unexpired ones (only the clean-forcibly mark deletes those).
#[test]
fn max_used_ratio_deletes_expired_only() {
    let dir = TempDir::new("ret-ratio");
    let mut config = expiring_config(&dir);
    config.disk_max_used_ratio = 0.0;
    run(async {
        let store = Store::open(config.clone()).await.expect("open");
        fill(&store, "Crowded").await;
        let off_hour = off_local_hours(&config.delete_when_hours);
        let deleted = store.run_retention_once(off_hour).await.expect("pass");
        assert!(
            deleted >= 4,
            "past the ratio expired segments go: {deleted}"
        );
        store.shutdown().await.expect("shutdown");
    });
    let dir = TempDir::new("ret-ratio-kept");
    let mut config = expiring_config(&dir);
    config.disk_max_used_ratio = 0.0;
    config.file_reserved_hours = 72;
    run(async {
        let store = Store::open(config.clone()).await.expect("open");
        fill(&store, "Crowded").await;
        let off_hour = off_local_hours(&config.delete_when_hours);
        let deleted = store.run_retention_once(off_hour).await.expect("pass");
        assert_eq!(
            deleted, 0,
            "unexpired segments stay below the forcible mark"
        );
        store.shutdown().await.expect("shutdown");
    });
}

// Proves disk use past the warning mark refuses appends with the remark Java's
// `SendMessageProcessor` gives (its disk-full answer), from the first pass on (the one the
// store runs at open).
#[test]
fn warning_mark_refuses_writes() {
    let dir = TempDir::new("ret-full");
    let mut config = expiring_config(&dir);
    config.disk_hard_ratio = 0.0;
    run(async {
        let store = Store::open(config.clone()).await.expect("open");
        store.run_retention_once(0).await.expect("pass");
        let refused = store
            .append(&[record("Full", 0, &body(2, 100), "")])
            .await
            .expect_err("refused past the mark");
        assert!(matches!(refused, StoreError::DiskFull { .. }), "{refused}");
        let remark = refused.to_string();
        assert!(
            remark.starts_with(
                "service not available now. It may be caused by one of the following \
                 reasons: the broker's disk is full [CL: "
            ),
            "{remark}"
        );
        assert_eq!(store.max_offset("Full", 0), QueueOffset(0));
        store.shutdown().await.expect("shutdown");
    });
}

// Proves dropping a topic's entries empties each of its queues (min = max, nothing to
// read), leaves other topics alone, lets new appends continue the offsets, and survives a
// reopen (the queue table records it).
#[test]
fn dropped_topic_stays_empty() {
    let dir = TempDir::new("ret-topic");
    let config = expiring_config(&dir);
    run(async {
        let store = Store::open(config.clone()).await.expect("open");
        fill(&store, "Gone").await;
        for index in 0..10u64 {
            store
                .append(&[record("Kept", 0, &body(index, 100), "")])
                .await
                .expect("append");
        }
        assert_eq!(store.drop_topic_entries("Gone").await.expect("drop"), 2);
        assert_eq!(store.drop_topic_entries("Gone").await.expect("again"), 0);
        for queue_id in 0..2 {
            assert_eq!(store.min_offset("Gone", queue_id), QueueOffset(1200));
            assert_eq!(store.max_offset("Gone", queue_id), QueueOffset(1200));
            let got = store
                .get_messages(
                    "Gone",
                    queue_id,
                    QueueOffset(0),
                    8,
                    1 << 20,
                    MessageFilter::All,
                )
                .await
                .expect("read");
            assert_ne!(got.status, GetStatus::Found, "queue {queue_id}");
        }
        assert_eq!(store.min_offset("Kept", 0), QueueOffset(0));
        assert_eq!(store.max_offset("Kept", 0), QueueOffset(10));
        store.shutdown().await.expect("shutdown");
    });
    run(async {
        let store = Store::open(config.clone()).await.expect("reopen");
        for queue_id in 0..2 {
            assert_eq!(store.min_offset("Gone", queue_id), QueueOffset(1200));
            assert_eq!(store.max_offset("Gone", queue_id), QueueOffset(1200));
        }
        let appended = store
            .append(&[record("Gone", 0, &body(7, 100), "")])
            .await
            .expect("append");
        assert_eq!(appended[0].queue_offset, QueueOffset(1200));
        assert_eq!(store.max_offset("Kept", 0), QueueOffset(10));
        store.shutdown().await.expect("shutdown");
    });
}

// Proves a topic's dropped entries stay dropped across a crash right after the drop: the
// recovery that re-dispatches the records after the checkpoint serves none of them again.
#[test]
fn dropped_topic_stays_empty_after_a_crash() {
    let dir = TempDir::new("ret-topic-crash");
    let config = expiring_config(&dir);
    run(async {
        let store = Store::open(config.clone()).await.expect("open");
        fill(&store, "Gone").await;
        assert_eq!(store.drop_topic_entries("Gone").await.expect("drop"), 2);
        // Dropped without shutdown: the next open recovers as after a crash.
        drop(store);
    });
    assert!(dir.path().join("abort").exists(), "crashed");
    run(async {
        let store = Store::open(config.clone()).await.expect("recover");
        for queue_id in 0..2 {
            assert_eq!(store.min_offset("Gone", queue_id), QueueOffset(1200));
            assert_eq!(store.max_offset("Gone", queue_id), QueueOffset(1200));
            let got = store
                .get_messages(
                    "Gone",
                    queue_id,
                    QueueOffset(0),
                    8,
                    1 << 20,
                    MessageFilter::All,
                )
                .await
                .expect("read");
            assert_ne!(got.status, GetStatus::Found, "queue {queue_id}");
        }
        store.shutdown().await.expect("shutdown");
    });
}

// Proves disk use past the refusal mark also deletes the oldest segment at once, expired or
// not, whatever the clean-forcibly mark (Java cleans immediately past its warning level).
#[test]
fn refusal_mark_cleans_at_once() {
    let dir = TempDir::new("ret-refusal-clean");
    let mut config = expiring_config(&dir);
    config.file_reserved_hours = 72;
    run(async {
        let store = Store::open(config.clone()).await.expect("open");
        fill(&store, "Refusal").await;
        store.shutdown().await.expect("shutdown");
    });
    config.disk_hard_ratio = 0.0;
    run(async {
        let store = Store::open(config.clone()).await.expect("reopen");
        let off_hour = off_local_hours(&config.delete_when_hours);
        let min_before = store.min_position();
        let deleted = store.run_retention_once(off_hour).await.expect("pass");
        assert!(
            deleted >= 1,
            "the oldest segment goes past the refusal mark"
        );
        assert!(store.min_position() > min_before);
        store.shutdown().await.expect("shutdown");
    });
}
