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
