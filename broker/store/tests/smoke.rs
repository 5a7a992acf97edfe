//! Smoke test: the store opens on a real file system, appends, and reads back.

mod common;

use comet_store::{MessageFilter, QueueOffset, Store};
use common::{body, record, small_config, TempDir};

// Proves one append under SYNC_FLUSH is acknowledged, readable at queue offset 0, and
// carries the patched offsets.
#[test]
fn append_and_read_one() {
    let dir = TempDir::new("smoke");
    comet_rt::local::run_local("smoke", async {
        let store = Store::open(small_config(dir.path())).await.expect("open");
        let one = record("TopicA", 1, &body(7, 100), "");
        let appended = store.append(&[one]).await.expect("append");
        assert_eq!(appended[0].queue_offset, QueueOffset(0));
        let got = store
            .get_messages("TopicA", 1, QueueOffset(0), 32, 1 << 20, MessageFilter::All)
            .await
            .expect("get");
        assert_eq!(got.records.len(), 1);
        let view = comet_proto::message::RecordView::parse(&got.records[0]).expect("parse");
        assert_eq!(view.physical_offset(), appended[0].physical_offset.as_i64());
        assert_eq!(&view.body()[..8], &7u64.to_be_bytes());
        store.shutdown().await.expect("shutdown");
    });
}
