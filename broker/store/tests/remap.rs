//! Handing queues between stores (a changed shard count): a queue's directory moves to its
//! new owner, whose reads of older entries go to the old owner's commit log, and whose
//! recovery leaves queues it does not own alone.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use comet_proto::message::RecordView;
use comet_store::{remap, GetStatus, LogId, MessageFilter, QueueOffset, Store, StoreConfig};
use common::{body, record, small_config, TempDir};

/// Store `index` of two under `root`; it owns queue 0 of "Moved" only when `owns_moved`.
fn config(root: &Path, index: u8, owns_moved: bool) -> StoreConfig {
    let mut config = small_config(&remap::store_root(root, usize::from(index)));
    config.log_id = LogId::new(index).expect("log id");
    config.owns_queue = Some(Rc::new(move |topic: &str, _| {
        topic != "Moved" || owns_moved
    }));
    let other = 1 - index;
    let other_dir: PathBuf = remap::store_root(root, usize::from(other))
        .join("commitlog")
        .join(other.to_string());
    config.other_logs = BTreeMap::from([(LogId::new(other).expect("log id"), other_dir)]);
    config
}

/// Appends records `range` (body tags) to queue Moved/0 and returns their queue offsets.
async fn append_range(store: &Store, range: std::ops::Range<u64>) -> Vec<u64> {
    let mut offsets = Vec::new();
    for tag in range {
        let appended = store
            .append(&[record("Moved", 0, &body(tag, 500), "")])
            .await
            .expect("append");
        offsets.push(appended[0].queue_offset.0);
    }
    offsets
}

/// Body tags of queue Moved/0 from offset 0, checking each record's queue offset.
async fn read_tags(store: &Store) -> Vec<u64> {
    let mut tags = Vec::new();
    let mut offset = QueueOffset(0);
    loop {
        let got = store
            .get_messages("Moved", 0, offset, 100, 1 << 20, MessageFilter::All)
            .await
            .expect("get");
        if got.status != GetStatus::Found {
            return tags;
        }
        for bytes in &got.records {
            let view = RecordView::parse(bytes).expect("record");
            assert_eq!(view.queue_offset(), (tags.len()) as i64, "dense offsets");
            tags.push(u64::from_be_bytes(view.body()[..8].try_into().expect("8")));
        }
        offset = got.next_offset;
    }
}

// Proves a queue handed from store 1 to store 0 keeps its history at the same offsets (read
// from log 1, across several segments), continues its offsets in log 0, survives a crash of
// store 0, and that store 1's recovery, rescanning its whole log, does not take the queue back.
#[test]
fn handed_over_queue_reads_the_old_log() {
    let dir = TempDir::new("remap");
    let root = dir.path().to_path_buf();
    comet_rt::local::run_local("remap-old-owner", async {
        let store = Store::open(config(&root, 1, true)).await.expect("open");
        assert_eq!(
            append_range(&store, 0..600).await,
            (0..600).collect::<Vec<_>>()
        );
        store.shutdown().await.expect("shutdown");
    });
    let segments = std::fs::read_dir(root.join("shard-1/commitlog/1"))
        .expect("ls")
        .count();
    assert!(segments >= 2, "history spans segments: {segments}");
    let stores = [remap::store_root(&root, 0), remap::store_root(&root, 1)];
    let moved = remap::hand_over_queues(&stores, |topic, _| usize::from(topic == "Moved"));
    assert_eq!(moved.expect("hand over"), 0, "owner 1 keeps it");
    let moved = remap::hand_over_queues(&stores, |_, _| 0).expect("hand over");
    assert_eq!(moved, 1);
    comet_rt::local::run_local("remap-new-owner", async {
        let store = Store::open(config(&root, 0, true)).await.expect("open");
        assert_eq!(store.min_offset("Moved", 0), QueueOffset(0));
        assert_eq!(read_tags(&store).await, (0..600).collect::<Vec<_>>());
        assert_eq!(
            append_range(&store, 600..700).await,
            (600..700).collect::<Vec<_>>()
        );
        // Dropped without shutdown: a crash.
    });
    // Both checkpoint copies of store 1 unreadable: its recovery rescans all of log 1.
    std::fs::write(root.join("shard-1/checkpoint/1"), vec![0xEE; 8192]).expect("damage");
    comet_rt::local::run_local("remap-after-crash", async {
        let old_owner = Store::open(config(&root, 1, false)).await.expect("open");
        assert_eq!(old_owner.max_offset("Moved", 0), QueueOffset(0));
        old_owner.shutdown().await.expect("shutdown");
        let store = Store::open(config(&root, 0, true)).await.expect("reopen");
        assert_eq!(read_tags(&store).await, (0..700).collect::<Vec<_>>());
        store.shutdown().await.expect("shutdown");
    });
    assert!(
        !root.join("shard-1/consumequeue/Moved").join("0").exists(),
        "the old owner never recreates the queue"
    );
}
