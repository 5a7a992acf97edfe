//! `rocketmq_half_messages`: transactional half messages without a decision, per real topic,
//! counted when a scrape asks (Java keeps a running count per topic, `TransactionMetrics`).
//!
//! Each shard walks the half queues it owns from the checker's cursor (everything below it is
//! decided) to their end, and counts the halves the shard's decision set does not hold, by
//! their `REAL_TOPIC` (`crate::transaction`). The walk reads at most
//! [`HALF_RECORDS_PER_SCRAPE_MAX`] records; past that the shard's count is left out of the
//! scrape (`None`) rather than reported short. Only a master decides halves, so a slave
//! reports none; right after a master's start, until its checker has replayed the op records,
//! halves decided before the restart may still count.

use std::collections::BTreeMap;

use comet_proto::message::RecordView;
use comet_proto::names::TRANS_HALF_TOPIC;
use comet_proto::properties::names;
use comet_store::{GetStatus, MessageFilter, QueueOffset};

use crate::shard::ShardBroker;
use crate::transaction::{is_resolved, owned_half_queues, SYSTEM_GROUP};

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
        let cursor = broker
            .offsets()
            .borrow()
            .query(SYSTEM_GROUP, TRANS_HALF_TOPIC, queue_id)
            .unwrap_or(0);
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

/// Sums the shards' counts; `None` when a shard's is missing (over its bound).
pub fn merge(shards: &[Option<BTreeMap<String, u64>>]) -> Option<BTreeMap<String, u64>> {
    let mut total: BTreeMap<String, u64> = BTreeMap::new();
    for shard in shards {
        for (topic, count) in shard.as_ref()? {
            *total.entry(topic.clone()).or_default() += count;
        }
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the shards' counts add up by topic, and one shard over its bound leaves the
    // whole figure out rather than reporting it short.
    #[test]
    fn merge_adds_by_topic_or_leaves_out() {
        let shard = |pairs: &[(&str, u64)]| {
            Some(
                pairs
                    .iter()
                    .map(|(topic, count)| ((*topic).to_owned(), *count))
                    .collect::<BTreeMap<_, _>>(),
            )
        };
        let merged = merge(&[shard(&[("A", 2), ("B", 1)]), shard(&[("A", 3)])]).unwrap();
        assert_eq!(merged["A"], 5);
        assert_eq!(merged["B"], 1);
        assert_eq!(merge(&[shard(&[("A", 2)]), None]), None);
    }
}
