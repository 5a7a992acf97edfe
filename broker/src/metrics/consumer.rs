//! Consumer lag, in-flight and ready messages per group and topic, as Java's
//! `ConsumerLagCalculator` computes them for `rocketmq_consumer_lag_messages`,
//! `rocketmq_consumer_lag_latency`, `rocketmq_consumer_inflight_messages`,
//! `rocketmq_consumer_queueing_latency` and `rocketmq_consumer_ready_messages`.
//!
//! **Where.** A queue's consume queue, committed offsets and pull offsets live on its owner
//! shard, so each shard computes the figures of the queues it owns from its own state
//! ([`compute`], run when a scrape asks: one mesh call per shard per scrape, none per client
//! request) and the scrape sums them over the shards ([`merge`]).
//!
//! **What.** The groups are Java's: every subscription group with consumers online, with
//! the topics they subscribe to (retry topics left out, topics readable or writable under
//! the broker's permission). For one queue, with `max` the queue's max offset:
//! - lag = `max - committed` (no committed offset: none), latency from the store time of the
//!   message at `committed` (the first unconsumed);
//! - in flight = `pulled - committed`, with `pulled` the next offset of the group's last pull
//!   of the queue (none yet: the committed offset), queueing latency from the store time of
//!   the message at `pulled` (the first not yet pulled);
//! - ready = `max - pulled`.
//!
//! A pop group's in-flight messages are not counted by Comet (Java's
//! `PopInflightMessageCounter`), so a pop group gets only its ready messages (from its pop
//! position, the committed offset), not a lag or in-flight figure that would leave them out.
//!
//! **Bound.** One computation examines at most [`QUEUES_PER_SCRAPE_MAX`] queues and reads at
//! most [`STORE_TIME_READS_PER_SCRAPE_MAX`] store times on a shard; a (group, topic) that
//! would pass either is skipped whole on that shard, left out of the scrape (a partial sum
//! would understate it) and counted in `comet_consumer_lag_skipped_series`.

use std::collections::BTreeMap;

/// The series one figure is reported under.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LagKey {
    /// `consumer_group`.
    pub group: String,
    /// `topic`.
    pub topic: String,
    /// `is_retry`: a pop group's retry topic (Comet reports none yet, see the module docs).
    pub is_retry: bool,
}

/// One (group, topic)'s figures over the queues summed so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LagFigures {
    /// Messages not yet consumed (committed), `None` for a pop group.
    pub lag_messages: Option<u64>,
    /// Store time (wall clock, ms) of the earliest unconsumed message.
    pub earliest_unconsumed_ms: Option<i64>,
    /// Messages pulled and not committed, `None` for a pop group.
    pub inflight_messages: Option<u64>,
    /// Store time (wall clock, ms) of the earliest message not yet pulled.
    pub earliest_unpulled_ms: Option<i64>,
    /// Messages not yet pulled.
    pub ready_messages: u64,
}

impl LagFigures {
    /// Adds `other`'s figures of the same series: counts summed, the earliest time kept.
    pub fn add(&mut self, other: &LagFigures) {
        let sum = |mine: Option<u64>, theirs: Option<u64>| match (mine, theirs) {
            (None, None) => None,
            (mine, theirs) => Some(mine.unwrap_or(0) + theirs.unwrap_or(0)),
        };
        let earliest = |mine: Option<i64>, theirs: Option<i64>| match (mine, theirs) {
            (Some(mine), Some(theirs)) => Some(mine.min(theirs)),
            (mine, theirs) => mine.or(theirs),
        };
        self.lag_messages = sum(self.lag_messages, other.lag_messages);
        self.inflight_messages = sum(self.inflight_messages, other.inflight_messages);
        self.ready_messages += other.ready_messages;
        self.earliest_unconsumed_ms =
            earliest(self.earliest_unconsumed_ms, other.earliest_unconsumed_ms);
        self.earliest_unpulled_ms = earliest(self.earliest_unpulled_ms, other.earliest_unpulled_ms);
    }
}

/// One shard's figures, for the queues it owns.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShardConsumerFigures {
    /// Figures by series.
    pub series: BTreeMap<LagKey, LagFigures>,
    /// Series this shard skipped (over the bound): they are left out of the scrape.
    pub skipped: Vec<LagKey>,
    /// Store time (wall clock, ms) of the oldest record this shard's logs hold, read at the
    /// same time (for `rocketmq_storage_message_reserve_time`).
    pub earliest_store_time_ms: Option<i64>,
    /// Halves without a decision by real topic, read at the same time (`super::half`).
    pub half_messages: Option<BTreeMap<String, u64>>,
}

/// Every shard's figures summed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConsumerFigures {
    /// Figures by series, those some shard skipped left out.
    pub series: BTreeMap<LagKey, LagFigures>,
    /// Series left out because a shard skipped them.
    pub skipped_series: u64,
    /// Store time of the oldest record the broker holds (wall clock, ms).
    pub earliest_store_time_ms: Option<i64>,
    /// Halves without a decision by real topic; `None` when a shard was over its bound.
    pub half_messages: Option<BTreeMap<String, u64>>,
}

/// Sums the shards' figures; a series any shard skipped is left out.
pub fn merge(shards: &[ShardConsumerFigures]) -> ConsumerFigures {
    let mut series: BTreeMap<LagKey, LagFigures> = BTreeMap::new();
    for shard in shards {
        for (key, figures) in &shard.series {
            series.entry(key.clone()).or_default().add(figures);
        }
    }
    let mut skipped: Vec<&LagKey> = shards.iter().flat_map(|shard| &shard.skipped).collect();
    skipped.sort();
    skipped.dedup();
    for key in &skipped {
        series.remove(*key);
    }
    ConsumerFigures {
        series,
        skipped_series: skipped.len() as u64,
        earliest_store_time_ms: shards
            .iter()
            .filter_map(|shard| shard.earliest_store_time_ms)
            .min(),
        half_messages: super::half::merge(
            &shards
                .iter()
                .map(|shard| shard.half_messages.clone())
                .collect::<Vec<_>>(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(group: &str) -> LagKey {
        LagKey {
            group: group.to_owned(),
            topic: "T".to_owned(),
            is_retry: false,
        }
    }

    fn figures(lag: u64, earliest: Option<i64>) -> LagFigures {
        LagFigures {
            lag_messages: Some(lag),
            earliest_unconsumed_ms: earliest,
            inflight_messages: Some(1),
            earliest_unpulled_ms: None,
            ready_messages: lag,
        }
    }

    // Proves merging sums the counts of one series over shards, keeps the earliest store
    // time, and leaves out a series any shard skipped (counting it once).
    #[test]
    fn merge_sums_and_drops_skipped() {
        let shard0 = ShardConsumerFigures {
            series: [
                (key("A"), figures(3, Some(200))),
                (key("B"), figures(1, None)),
            ]
            .into(),
            skipped: vec![key("C")],
            earliest_store_time_ms: Some(50),
            half_messages: None,
        };
        let shard1 = ShardConsumerFigures {
            series: [
                (key("A"), figures(4, Some(100))),
                (key("C"), figures(9, None)),
            ]
            .into(),
            skipped: vec![key("C")],
            earliest_store_time_ms: None,
            half_messages: None,
        };
        let merged = merge(&[shard0, shard1]);
        assert_eq!(merged.skipped_series, 1);
        assert_eq!(merged.series.len(), 2);
        let a = &merged.series[&key("A")];
        assert_eq!(a.lag_messages, Some(7));
        assert_eq!(a.inflight_messages, Some(2));
        assert_eq!(a.ready_messages, 7);
        assert_eq!(a.earliest_unconsumed_ms, Some(100));
        assert_eq!(merged.series[&key("B")].earliest_unconsumed_ms, None);
        assert_eq!(merged.earliest_store_time_ms, Some(50));
    }

    // Proves a pop group's figures (no lag, no in-flight) stay absent when merged with
    // another shard's absent ones, not turned into zero.
    #[test]
    fn absent_figures_stay_absent() {
        let pop = LagFigures {
            ready_messages: 2,
            ..LagFigures::default()
        };
        let shards = [
            ShardConsumerFigures {
                series: [(key("P"), pop.clone())].into(),
                ..ShardConsumerFigures::default()
            },
            ShardConsumerFigures {
                series: [(key("P"), pop)].into(),
                ..ShardConsumerFigures::default()
            },
        ];
        let merged = merge(&shards);
        let p = &merged.series[&key("P")];
        assert_eq!(p.lag_messages, None);
        assert_eq!(p.inflight_messages, None);
        assert_eq!(p.ready_messages, 4);
    }
}
