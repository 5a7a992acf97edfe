//! Logs of shards that no longer run (adopted logs): retention deletes their segments under
//! the own log's rules, queues of the adopting store drop entries pointing into them, a fully
//! deleted log's store directory goes, and queries by key search their index.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, SystemTime};

use comet_proto::message::RecordView;
use comet_store::{remap, GetStatus, LogId, MessageFilter, QueueOffset, Store, StoreConfig};
use common::{body, properties, record, small_config, TempDir};

const TOPIC: &str = "Moved";

fn log_id(index: u8) -> LogId {
    LogId::new(index).expect("log id")
}

fn segments_dir(root: &Path, index: u8) -> PathBuf {
    remap::store_root(root, usize::from(index))
        .join("commitlog")
        .join(index.to_string())
}

/// Store `index` (0 or 1) under `root`. Store 1 owns the topic until it is handed over;
/// store 0 owns everything and, with `adopt`, adopts log 1.
fn config(root: &Path, index: u8, adopt: bool) -> StoreConfig {
    let mut config = small_config(&remap::store_root(root, usize::from(index)));
    config.log_id = log_id(index);
    config.retention_check_interval_ms = 3_600_000;
    // The background pass at open must not be at the delete hour: only the test's passes
    // delete by age.
    let hour_now = comet_store::local_hour(comet_rt::clock::wall_clock_ms());
    config.delete_when_hours = vec![(hour_now + 12) % 24];
    let other = 1 - index;
    config.other_logs = BTreeMap::from([(log_id(other), segments_dir(root, other))]);
    if adopt {
        config.adopted_logs = BTreeSet::from([log_id(1)]);
    }
    config.owns_queue = Some(Rc::new(move |_: &str, _| index == 0 || !adopt));
    config
}

/// A record of the topic's queue 0 whose body carries `tag` and whose KEYS is `key-<tag>`
/// (plus `shared` for every record).
fn keyed(tag: u64) -> bytes::BytesMut {
    let key = format!("key-{tag} shared");
    record(
        TOPIC,
        0,
        &body(tag, 500),
        &properties(&[("KEYS", key.as_str())]),
    )
}

async fn append_tags(store: &Store, tags: std::ops::Range<u64>) {
    for tag in tags {
        store.append(&[keyed(tag)]).await.expect("append");
    }
}

/// Body tags of the queue from its min offset on.
async fn read_tags(store: &Store) -> Vec<u64> {
    let mut tags = Vec::new();
    let mut offset = store.min_offset(TOPIC, 0);
    loop {
        let got = store
            .get_messages(TOPIC, 0, offset, 100, 1 << 20, MessageFilter::All)
            .await
            .expect("get");
        if got.status != GetStatus::Found {
            return tags;
        }
        for bytes in &got.records {
            let view = RecordView::parse(bytes).expect("record");
            tags.push(u64::from_be_bytes(view.body()[..8].try_into().expect("8")));
        }
        offset = got.next_offset;
    }
}

async fn query_tags(store: &Store, key: &str) -> Vec<u64> {
    let records = store
        .query_by_key(TOPIC, key, 64, 0, i64::MAX)
        .await
        .expect("query");
    records
        .iter()
        .map(|bytes| {
            let view = RecordView::parse(bytes).expect("record");
            u64::from_be_bytes(view.body()[..8].try_into().expect("8"))
        })
        .collect()
}

/// Writes records `0..count` into log 1 (store 1 owning the queue), waits until the key
/// index of `sealed` segments is sealed, then hands the queue to store 0, as a broker going
/// from two shards to one does. Returns log 1's segment starts.
fn orphan_log(root: &Path, count: u64, sealed: usize) -> Vec<u64> {
    comet_rt::local::run_local("orphan-writer", async {
        let store = Store::open(config(root, 1, false)).await.expect("open");
        append_tags(&store, 0..count).await;
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while store.index_sealed_segments() < sealed {
            assert!(std::time::Instant::now() < deadline, "maintenance seals");
            comet_rt::local::sleep(Duration::from_millis(10)).await;
        }
        store.shutdown().await.expect("shutdown");
    });
    let stores = [remap::store_root(root, 0), remap::store_root(root, 1)];
    assert_eq!(
        remap::hand_over_queues(&stores, |_, _| 0).expect("hand over"),
        1
    );
    segment_starts(root)
}

fn segment_starts(root: &Path) -> Vec<u64> {
    let mut starts: Vec<u64> = std::fs::read_dir(segments_dir(root, 1))
        .expect("ls")
        .flatten()
        .filter_map(|item| item.file_name().to_str()?.parse().ok())
        .collect();
    starts.sort_unstable();
    starts
}

fn set_modified(path: &Path, time: SystemTime) {
    let file = std::fs::File::options()
        .write(true)
        .open(path)
        .expect("open segment");
    file.set_modified(time).expect("set mtime");
}

/// Log 1's segment starting at `start`.
fn segment_path(root: &Path, start: u64) -> PathBuf {
    segments_dir(root, 1).join(format!("{start:020}"))
}

/// A coming delete hour (local) of `config`, in ms since the epoch.
fn next_delete_hour(config: &StoreConfig) -> i64 {
    common::at_local_hour(config.delete_when_hours[0])
}

// Proves the store adopting a closed log deletes its expired segments oldest first (with
// their index files) and keeps the rest, that the handed-over queue's min offset moves past
// the deleted records while later ones stay readable and queryable, and that once the last
// segment goes the log's store directory is removed and restarts (with or without the log
// listed) keep the queue consistent.
#[test]
fn adopted_log_is_deleted_segment_by_segment_then_retired() {
    let dir = TempDir::new("orphan-retention");
    let root = dir.path().to_path_buf();
    let starts = orphan_log(&root, 1500, 2);
    assert!(starts.len() >= 3, "history spans segments: {starts:?}");
    let old = SystemTime::now() - Duration::from_secs(100 * 86_400);
    for start in &starts[..2] {
        set_modified(&segment_path(&root, *start), old);
    }
    let config = config(&root, 0, true);
    let at_delete_hour = next_delete_hour(&config);
    comet_rt::local::run_local("orphan-adopter", async {
        let store = Store::open(config.clone()).await.expect("open");
        append_tags(&store, 1500..1600).await;
        assert_eq!(query_tags(&store, "key-3").await, vec![3]);
        let deleted = store
            .run_retention_once(at_delete_hour)
            .await
            .expect("retention");
        assert_eq!(deleted, 2, "only the two expired segments go");
        assert_eq!(segment_starts(&root), starts[2..].to_vec());
        let index_dir = remap::store_root(&root, 1).join("index/1");
        assert!(!index_dir.join(format!("{:020}", starts[0])).exists());
        let tags = read_tags(&store).await;
        let first_kept = tags[0];
        assert!(
            first_kept > 0 && first_kept < 1500,
            "min moved: {first_kept}"
        );
        assert_eq!(tags, (first_kept..1600).collect::<Vec<_>>());
        assert_eq!(store.min_offset(TOPIC, 0), QueueOffset(first_kept));
        assert!(query_tags(&store, "key-3").await.is_empty(), "deleted key");
        assert_eq!(query_tags(&store, "key-1499").await, vec![1499]);

        for start in &starts[2..] {
            set_modified(&segment_path(&root, *start), old);
        }
        let deleted = store
            .run_retention_once(at_delete_hour)
            .await
            .expect("retention");
        assert_eq!(deleted as usize, starts.len() - 2);
        assert!(!remap::store_root(&root, 1).exists(), "store 1 removed");
        assert!(!root.join("shard-1.retired").exists(), "nothing left over");
        assert_eq!(remap::existing_store_count(&root).expect("count"), 1);
        assert_eq!(read_tags(&store).await, (1500..1600).collect::<Vec<_>>());
        assert_eq!(store.min_offset(TOPIC, 0), QueueOffset(1500));
        assert!(query_tags(&store, "key-1499").await.is_empty());
        assert_eq!(query_tags(&store, "key-1500").await, vec![1500]);
        store.shutdown().await.expect("shutdown");
    });
    // Restart as the broker would now (no store 1 any more), and with the stale listing.
    for adopt in [false, true] {
        let mut config = config.clone();
        if !adopt {
            config.other_logs.clear();
            config.adopted_logs.clear();
        }
        comet_rt::local::run_local("orphan-restart", async {
            let store = Store::open(config).await.expect("reopen");
            assert_eq!(store.min_offset(TOPIC, 0), QueueOffset(1500));
            assert_eq!(read_tags(&store).await, (1500..1600).collect::<Vec<_>>());
            store.shutdown().await.expect("shutdown");
        });
    }
    assert!(!remap::store_root(&root, 1).exists());
}

// Proves past the disk high mark each pass deletes one segment at once, the adopted log's
// oldest before the adopter's newer ones, regardless of the reserved time.
#[test]
fn high_mark_deletes_adopted_segments_first() {
    let dir = TempDir::new("orphan-forced");
    let root = dir.path().to_path_buf();
    let starts = orphan_log(&root, 1200, 2);
    let old = SystemTime::now() - Duration::from_secs(3600);
    for start in &starts {
        set_modified(&segment_path(&root, *start), old);
    }
    let mut config = config(&root, 0, true);
    config.disk_high_ratio = 0.0;
    comet_rt::local::run_local("orphan-forced", async {
        let store = Store::open(config).await.expect("open");
        append_tags(&store, 1200..2200).await;
        // Never the delete hour: only the high mark deletes.
        let hour = common::off_local_hours(&store.config().delete_when_hours);
        for done in 1..=starts.len() {
            assert_eq!(store.run_retention_once(hour).await.expect("retention"), 1);
            let left = if remap::store_root(&root, 1).exists() {
                segment_starts(&root)
            } else {
                Vec::new()
            };
            assert_eq!(left, starts[done..].to_vec(), "pass {done}");
        }
        assert!(!remap::store_root(&root, 1).exists());
        let own_first = store.min_physical_offset();
        assert_eq!(store.run_retention_once(hour).await.expect("retention"), 1);
        assert!(
            store.min_physical_offset() > own_first,
            "then the own log's oldest"
        );
        assert_eq!(read_tags(&store).await.last(), Some(&2199));
        store.shutdown().await.expect("shutdown");
    });
}

// Proves a key query finds records of the adopted log (its index loaded from disk) merged
// with the adopter's own, newest first, and that a log whose store did not shut down cleanly
// is never deleted.
#[test]
fn adopted_log_keys_are_found_and_unclean_logs_kept() {
    let dir = TempDir::new("orphan-query");
    let root = dir.path().to_path_buf();
    // Two of the adopted log's segments have sealed key indexes, the third its entries.
    let starts = orphan_log(&root, 1000, 2);
    let config = config(&root, 0, true);
    comet_rt::local::run_local("orphan-query", async {
        let store = Store::open(config.clone()).await.expect("open");
        append_tags(&store, 1000..1010).await;
        assert_eq!(query_tags(&store, "key-7").await, vec![7]);
        assert_eq!(query_tags(&store, "key-999").await, vec![999]);
        assert_eq!(query_tags(&store, "key-1005").await, vec![1005]);
        let shared: Vec<u64> = query_tags(&store, "shared").await;
        assert_eq!(shared.len(), 64, "capped at the asked maximum");
        assert_eq!(shared[..10], (1000..1010).rev().collect::<Vec<_>>()[..]);
        assert_eq!(shared[10..], (946..1000).rev().collect::<Vec<_>>()[..]);
        store.shutdown().await.expect("shutdown");
    });
    std::fs::write(remap::store_root(&root, 1).join("abort"), b"1").expect("abort");
    let old = SystemTime::now() - Duration::from_secs(100 * 86_400);
    for start in &starts {
        set_modified(&segment_path(&root, *start), old);
    }
    let at_delete_hour = next_delete_hour(&config);
    comet_rt::local::run_local("orphan-unclean", async {
        let store = Store::open(config).await.expect("open");
        assert_eq!(
            store
                .run_retention_once(at_delete_hour)
                .await
                .expect("retention"),
            0
        );
        assert_eq!(segment_starts(&root), starts);
        assert_eq!(query_tags(&store, "key-7").await, vec![7]);
        store.shutdown().await.expect("shutdown");
    });
}

// Proves entries of a fully deleted log stay deleted on disk: when a new commit log later
// takes the same log id (the core count grew again) and holds other records at the same
// positions, the queue's min offset does not go back and none of those records is served.
#[test]
fn deleted_entries_stay_gone_when_the_log_id_returns() {
    let dir = TempDir::new("orphan-reuse");
    let root = dir.path().to_path_buf();
    let starts = orphan_log(&root, 300, 0);
    let old = SystemTime::now() - Duration::from_secs(100 * 86_400);
    for start in &starts {
        set_modified(&segment_path(&root, *start), old);
    }
    let adopter = config(&root, 0, true);
    let at_delete_hour = next_delete_hour(&adopter);
    comet_rt::local::run_local("orphan-reuse-retire", async {
        let store = Store::open(adopter.clone()).await.expect("open");
        append_tags(&store, 300..400).await;
        store
            .run_retention_once(at_delete_hour)
            .await
            .expect("retention");
        assert!(!remap::store_root(&root, 1).exists(), "log 1 retired");
        assert_eq!(store.min_offset(TOPIC, 0), QueueOffset(300));
        store.shutdown().await.expect("shutdown");
    });
    comet_rt::local::run_local("orphan-reuse-new-log", async {
        let store = Store::open(config(&root, 1, false)).await.expect("open");
        for tag in 0..300 {
            let other = record("Other", 0, &body(10_000 + tag, 500), "");
            store.append(&[other]).await.expect("append");
        }
        store.shutdown().await.expect("shutdown");
    });
    comet_rt::local::run_local("orphan-reuse-reopen", async {
        let store = Store::open(config(&root, 0, false)).await.expect("reopen");
        assert_eq!(store.min_offset(TOPIC, 0), QueueOffset(300));
        assert_eq!(read_tags(&store).await, (300..400).collect::<Vec<_>>());
        store.shutdown().await.expect("shutdown");
    });
}
