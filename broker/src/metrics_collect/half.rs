//! `rocketmq_half_messages` as one shard counts it when a scrape asks: the walk described in
//! `crate::metrics::half`.

use std::collections::BTreeMap;

use comet_proto::message::RecordView;
use comet_proto::names::TRANS_HALF_TOPIC;
use comet_proto::properties::names;
use comet_store::{GetStatus, MessageFilter, QueueOffset};

use crate::shard::ShardBroker;
use crate::transaction::{is_resolved, owned_half_queues};

/// Half records one shard reads per scrape at most.
pub const HALF_RECORDS_PER_SCRAPE_MAX: usize = 4096;

/// Records read per store read.
const READ_RECORDS_MAX: usize = 256;

/// Bytes read per store read at most.
const READ_BYTES_MAX: usize = 4 * 1024 * 1024;

/// Halves without a decision in the half queues this shard owns, by real topic; `None` when
/// they hold more than [`HALF_RECORDS_PER_SCRAPE_MAX`] records past the cursor, or a read
/// failed.
pub async fn pending_halves(broker: &ShardBroker) -> Option<BTreeMap<String, u64>> {
    let mut pending: BTreeMap<String, u64> = BTreeMap::new();
    if !broker.config().broker_role.is_master() {
        return Some(pending);
    }
    let mut budget = HALF_RECORDS_PER_SCRAPE_MAX;
    for queue_id in owned_half_queues(broker) {
        let store = broker.queue_store(TRANS_HALF_TOPIC, queue_id);
        let cursor = crate::transaction::progress(queue_id);
        let end = store.max_offset(TRANS_HALF_TOPIC, queue_id).as_i64();
        let mut offset = cursor.max(store.min_offset(TRANS_HALF_TOPIC, queue_id).as_i64());
        if usize::try_from(end - offset).unwrap_or(0) > budget {
            return None;
        }
        while offset < end {
            let at = QueueOffset(u64::try_from(offset).unwrap_or(0));
            let result = store
                .get_messages(
                    TRANS_HALF_TOPIC,
                    queue_id,
                    at,
                    READ_RECORDS_MAX,
                    READ_BYTES_MAX,
                    MessageFilter::All,
                )
                .await
                .ok()?;
            if result.status != GetStatus::Found || result.records.is_empty() {
                break;
            }
            budget = budget.saturating_sub(result.records.len());
            for bytes in &result.records {
                let view = RecordView::parse(bytes).ok()?;
                offset = view.queue_offset() + 1;
                if is_resolved((queue_id, view.queue_offset())) {
                    continue;
                }
                let topic = view.property(names::REAL_TOPIC).unwrap_or(view.topic());
                match pending.get_mut(topic) {
                    Some(count) => *count += 1,
                    None => {
                        pending.insert(topic.to_owned(), 1);
                    }
                }
            }
        }
    }
    Some(pending)
}
