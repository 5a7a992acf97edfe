//! Per-topic and per-group statistics, the figures RocketMQ's tools read by name and key with
//! VIEW_BROKER_STATS_DATA (`mqadmin statsAll`, the dashboard) and that GET_TOPIC_STATS_INFO and
//! GET_CONSUME_STATS report as rates (docs/protocol.md#admin-requests; Java's
//! `BrokerStatsManager`):
//!
//! | name | key | value added | per call |
//! |---|---|---|---|
//! | `TOPIC_PUT_NUMS` | topic | messages stored | send request |
//! | `TOPIC_PUT_SIZE` | topic | bytes stored | send request |
//! | `GROUP_GET_NUMS` | `topic@group` | messages delivered to pulls | pull that found messages |
//! | `GROUP_GET_SIZE` | `topic@group` | bytes delivered to pulls | pull that found messages |
//! | `SNDBCK_PUT_NUMS` | `topic@group` | messages sent back for retry | send-back request |
//! | `BROKER_PUT_NUMS` | cluster name | messages stored | send request |
//! | `BROKER_GET_NUMS` | cluster name | messages delivered to pulls | pull that found messages |
//!
//! **Counting.** Each shard adds to its own slot, a mutex only that shard writes through: it is
//! uncontended except for the sampler's visit every 10 s and admin reads, each a short walk.
//! Items are found by `&str` (first key → second key → a count per name), so counting
//! allocates only when an item first appears, and one lookup serves every name under a key.
//! A slot holds at most [`STATS_ITEMS_PER_SHARD_MAX`] items; past that, new items are not
//! counted (logged once), so a flood of topic names cannot grow it unbounded.
//!
//! **Windows**, as RocketMQ's `StatsItem` computes them: snapshots every 10 s (the last 7: one
//! minute), every 10 min (the last 7: one hour) and every hour (the last 25: one day). A
//! window's figures run from its oldest snapshot to now, so they include what was counted since
//! the last snapshot (Java stops at the last snapshot, up to one period old): `sum`, `sum` per
//! second, and `sum` per call (`avgpt`). An item that appeared after a series' last snapshot
//! was zero at that snapshot, which is where its window starts.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};

use comet_proto::body::{BrokerStatsData, BrokerStatsItem};

/// Items one shard's slot holds at most.
pub const STATS_ITEMS_PER_SHARD_MAX: usize = 100_000;

/// How often the minute series is sampled (and the sampler runs).
pub const SAMPLE_INTERVAL_MS: i64 = 10_000;

/// The statistics kept, by RocketMQ's names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StatsName {
    /// Messages stored per topic.
    TopicPutNums,
    /// Bytes stored per topic.
    TopicPutSize,
    /// Messages delivered per topic and group.
    GroupGetNums,
    /// Bytes delivered per topic and group.
    GroupGetSize,
    /// Messages sent back per topic and group.
    SendBackPutNums,
    /// Messages stored, broker-wide (keyed by cluster name).
    BrokerPutNums,
    /// Messages delivered, broker-wide (keyed by cluster name).
    BrokerGetNums,
}

const NAME_COUNT: usize = 7;

impl StatsName {
    /// Every name, in table order.
    pub const ALL: [StatsName; NAME_COUNT] = [
        StatsName::TopicPutNums,
        StatsName::TopicPutSize,
        StatsName::GroupGetNums,
        StatsName::GroupGetSize,
        StatsName::SendBackPutNums,
        StatsName::BrokerPutNums,
        StatsName::BrokerGetNums,
    ];

    /// RocketMQ's name.
    pub fn as_str(self) -> &'static str {
        match self {
            StatsName::TopicPutNums => "TOPIC_PUT_NUMS",
            StatsName::TopicPutSize => "TOPIC_PUT_SIZE",
            StatsName::GroupGetNums => "GROUP_GET_NUMS",
            StatsName::GroupGetSize => "GROUP_GET_SIZE",
            StatsName::SendBackPutNums => "SNDBCK_PUT_NUMS",
            StatsName::BrokerPutNums => "BROKER_PUT_NUMS",
            StatsName::BrokerGetNums => "BROKER_GET_NUMS",
        }
    }

    /// The name RocketMQ calls `name`, if kept here.
    pub fn parse(name: &str) -> Option<StatsName> {
        StatsName::ALL
            .into_iter()
            .find(|known| known.as_str() == name)
    }

    /// True when the key is `topic@group` rather than one name.
    fn keyed_by_group(self) -> bool {
        matches!(
            self,
            StatsName::GroupGetNums | StatsName::GroupGetSize | StatsName::SendBackPutNums
        )
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Splits a key as `name` uses it: `topic@group` for group items, the whole key otherwise.
/// `None` when a group item's key has no `@`.
pub fn split_key(name: StatsName, key: &str) -> Option<(&str, &str)> {
    if name.keyed_by_group() {
        key.split_once('@')
    } else {
        Some((key, ""))
    }
}

/// A running count: the sum of added values and the number of calls that added them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Count {
    /// Sum of added values.
    pub value: u64,
    /// Calls that added.
    pub times: u64,
}

impl Count {
    fn add(&mut self, other: Count) {
        self.value = self.value.wrapping_add(other.value);
        self.times = self.times.wrapping_add(other.times);
    }
}

/// One key's count under each name: `None` where that name never counted the key.
type Counts = [Option<Count>; NAME_COUNT];

/// What one first key (a topic, or the cluster name) holds: its own counts and its groups'.
#[derive(Debug, Default)]
struct Entry {
    own: Counts,
    groups: HashMap<String, Counts>,
}

impl Entry {
    fn counts_mut(&mut self, second: &str) -> Option<&mut Counts> {
        if second.is_empty() {
            Some(&mut self.own)
        } else {
            self.groups.get_mut(second)
        }
    }
}

/// One shard's counts. One lookup by first key finds every name counted under it, so a
/// send (topic and cluster) costs two lookups and a pull three.
#[derive(Debug, Default)]
struct Slot {
    entries: HashMap<String, Entry>,
    /// Counts held (`Some`s).
    items: usize,
    full_logged: bool,
}

impl Slot {
    /// Adds each `(name, count)` to item (`name`, `first`, `second`).
    fn add(&mut self, first: &str, second: &str, adds: &[(StatsName, Count)]) {
        if let Some(counts) = self
            .entries
            .get_mut(first)
            .and_then(|entry| entry.counts_mut(second))
        {
            if adds.iter().all(|(name, _)| counts[name.index()].is_some()) {
                for (name, count) in adds {
                    if let Some(existing) = &mut counts[name.index()] {
                        existing.add(*count);
                    }
                }
                return;
            }
        }
        for (name, count) in adds {
            self.add_new(*name, first, second, *count);
        }
    }

    /// The slow path: creates what is missing (within the limit) and adds to what exists.
    fn add_new(&mut self, name: StatsName, first: &str, second: &str, count: Count) {
        if let Some(Some(existing)) = self
            .entries
            .get_mut(first)
            .and_then(|entry| entry.counts_mut(second))
            .map(|counts| counts[name.index()].as_mut())
        {
            existing.add(count);
            return;
        }
        if self.items >= STATS_ITEMS_PER_SHARD_MAX {
            if !self.full_logged {
                self.full_logged = true;
                log::warn!(
                    "statistics hold {STATS_ITEMS_PER_SHARD_MAX} items on a shard; new topics \
                     and groups are not counted"
                );
            }
            return;
        }
        self.items += 1;
        let entry = self.entries.entry(first.to_owned()).or_default();
        let counts = if second.is_empty() {
            &mut entry.own
        } else {
            entry.groups.entry(second.to_owned()).or_default()
        };
        assert!(
            counts[name.index()].is_none(),
            "an existing count is added to"
        );
        counts[name.index()] = Some(count);
    }

    fn get(&self, name: StatsName, first: &str, second: &str) -> Option<Count> {
        let entry = self.entries.get(first)?;
        let counts = if second.is_empty() {
            &entry.own
        } else {
            entry.groups.get(second)?
        };
        counts[name.index()]
    }

    /// Every item: (name, first key, second key, count).
    fn for_each(&self, mut visit: impl FnMut(StatsName, &str, &str, Count)) {
        for (first, entry) in &self.entries {
            let groups = entry.groups.iter().map(|(g, c)| (g.as_str(), c));
            for (second, counts) in std::iter::once(("", &entry.own)).chain(groups) {
                for name in StatsName::ALL {
                    if let Some(count) = counts[name.index()] {
                        visit(name, first, second, count);
                    }
                }
            }
        }
    }

    /// Drops every item for which `doomed(name, first, second)` holds.
    fn remove(&mut self, doomed: impl Fn(StatsName, &str, &str) -> bool) {
        let mut removed = 0;
        let mut clear = |first: &str, second: &str, counts: &mut Counts| {
            for name in StatsName::ALL {
                if counts[name.index()].is_some() && doomed(name, first, second) {
                    counts[name.index()] = None;
                    removed += 1;
                }
            }
            counts.iter().any(Option::is_some)
        };
        self.entries.retain(|first, entry| {
            let own_left = clear(first, "", &mut entry.own);
            entry
                .groups
                .retain(|second, counts| clear(first, second, counts));
            own_left || !entry.groups.is_empty()
        });
        self.items -= removed;
    }
}

type ItemKey = (StatsName, String, String);

#[derive(Clone, Copy, Debug)]
struct Point {
    at_ms: i64,
    count: Count,
}

/// Snapshots of every item every `period_ms`, the last `keep` of each.
#[derive(Debug)]
struct Series {
    period_ms: i64,
    keep: usize,
    last_at_ms: i64,
    points: HashMap<ItemKey, VecDeque<Point>>,
}

impl Series {
    fn new(period_ms: i64, keep: usize, now_ms: i64) -> Series {
        Series {
            period_ms,
            keep,
            last_at_ms: now_ms,
            points: HashMap::new(),
        }
    }

    fn due(&self, now_ms: i64) -> bool {
        now_ms - self.last_at_ms >= self.period_ms
    }

    fn record(&mut self, now_ms: i64, totals: &BTreeMap<ItemKey, Count>) {
        self.points.retain(|key, _| totals.contains_key(key));
        for (key, count) in totals {
            let since = self.last_at_ms;
            let points = self.points.entry(key.clone()).or_insert_with(|| {
                // New since the last snapshot: it was zero then.
                VecDeque::from([Point {
                    at_ms: since,
                    count: Count::default(),
                }])
            });
            points.push_back(Point {
                at_ms: now_ms,
                count: *count,
            });
            while points.len() > self.keep {
                points.pop_front();
            }
        }
        self.last_at_ms = now_ms;
    }

    /// The window from the item's oldest snapshot to `now` (where it counts `current`).
    fn window(&self, key: &ItemKey, current: Count, now_ms: i64) -> BrokerStatsItem {
        let first = self
            .points
            .get(key)
            .and_then(|points| points.front().copied())
            .unwrap_or(Point {
                at_ms: self.last_at_ms,
                count: Count::default(),
            });
        let sum = current.value.saturating_sub(first.count.value);
        let calls = current.times.saturating_sub(first.count.times);
        let elapsed_ms = now_ms - first.at_ms;
        BrokerStatsItem {
            sum: i64::try_from(sum).unwrap_or(i64::MAX),
            tps: if elapsed_ms > 0 {
                sum as f64 * 1000.0 / elapsed_ms as f64
            } else {
                0.0
            },
            avgpt: if calls > 0 {
                sum as f64 / calls as f64
            } else {
                0.0
            },
        }
    }
}

#[derive(Debug)]
struct History {
    minute: Series,
    hour: Series,
    day: Series,
}

/// Every shard's counts and the sampled history.
#[derive(Debug)]
pub struct ItemStats {
    slots: Box<[Mutex<Slot>]>,
    history: Mutex<History>,
}

impl ItemStats {
    /// Empty statistics for `shard_count` shards; windows start at `now_ms`.
    pub fn new(shard_count: usize, now_ms: i64) -> ItemStats {
        assert!(shard_count >= 1);
        ItemStats {
            slots: (0..shard_count)
                .map(|_| Mutex::new(Slot::default()))
                .collect(),
            history: Mutex::new(History {
                minute: Series::new(SAMPLE_INTERVAL_MS, 7, now_ms),
                hour: Series::new(10 * 60_000, 7, now_ms),
                day: Series::new(60 * 60_000, 25, now_ms),
            }),
        }
    }

    /// Adds `value` in one call to item (`name`, `first`, `second`) in `shard`'s slot.
    pub fn add(&self, shard: usize, name: StatsName, first: &str, second: &str, value: u64) {
        let count = Count { value, times: 1 };
        lock(&self.slots[shard]).add(first, second, &[(name, count)]);
    }

    /// Counts one send request that stored `messages` records of `bytes` bytes in `topic`.
    pub fn record_put(&self, shard: usize, topic: &str, cluster: &str, messages: u64, bytes: u64) {
        let one = |value| Count { value, times: 1 };
        let mut slot = lock(&self.slots[shard]);
        let puts = [
            (StatsName::TopicPutNums, one(messages)),
            (StatsName::TopicPutSize, one(bytes)),
        ];
        slot.add(topic, "", &puts);
        slot.add(cluster, "", &[(StatsName::BrokerPutNums, one(messages))]);
    }

    /// Counts one pull of `group` that delivered `messages` records of `bytes` bytes.
    pub fn record_get(&self, shard: usize, get: Delivery<'_>, messages: u64, bytes: u64) {
        let one = |value| Count { value, times: 1 };
        let mut slot = lock(&self.slots[shard]);
        let gets = [
            (StatsName::GroupGetNums, one(messages)),
            (StatsName::GroupGetSize, one(bytes)),
        ];
        slot.add(get.topic, get.group, &gets);
        slot.add(
            get.cluster,
            "",
            &[(StatsName::BrokerGetNums, one(messages))],
        );
    }

    /// The sum over shards of one item, `None` if no shard has counted it.
    fn current(&self, name: StatsName, first: &str, second: &str) -> Option<Count> {
        let mut total: Option<Count> = None;
        for slot in self.slots.iter() {
            if let Some(count) = lock(slot).get(name, first, second) {
                total.get_or_insert_with(Count::default).add(count);
            }
        }
        total
    }

    fn totals(&self) -> BTreeMap<ItemKey, Count> {
        let mut totals: BTreeMap<ItemKey, Count> = BTreeMap::new();
        for slot in self.slots.iter() {
            lock(slot).for_each(|name, first, second, count| {
                let key = (name, first.to_owned(), second.to_owned());
                totals.entry(key).or_default().add(count);
            });
        }
        totals
    }

    /// Every item counted under `name`, summed over shards: (first key, second key, value).
    /// The metrics endpoint reads the delivery counts this way.
    pub fn sums(&self, name: StatsName) -> Vec<(String, String, u64)> {
        let mut sums: BTreeMap<(String, String), u64> = BTreeMap::new();
        for slot in self.slots.iter() {
            lock(slot).for_each(|counted, first, second, count| {
                if counted == name {
                    let key = (first.to_owned(), second.to_owned());
                    let sum = sums.entry(key).or_default();
                    *sum = sum.wrapping_add(count.value);
                }
            });
        }
        sums.into_iter()
            .map(|((first, second), value)| (first, second, value))
            .collect()
    }

    /// Takes the snapshots due at `now_ms` (none if the minute series' period has not passed).
    /// Called by one task, at least every [`SAMPLE_INTERVAL_MS`].
    pub fn sample(&self, now_ms: i64) {
        if !lock(&self.history).minute.due(now_ms) {
            return;
        }
        let totals = self.totals();
        let mut history = lock(&self.history);
        history.minute.record(now_ms, &totals);
        if history.hour.due(now_ms) {
            history.hour.record(now_ms, &totals);
        }
        if history.day.due(now_ms) {
            history.day.record(now_ms, &totals);
        }
    }

    /// One item's last minute, hour and day as of `now_ms`; `None` if it was never counted.
    pub fn view(
        &self,
        name: StatsName,
        first: &str,
        second: &str,
        now_ms: i64,
    ) -> Option<BrokerStatsData> {
        let current = self.current(name, first, second)?;
        let key = (name, first.to_owned(), second.to_owned());
        let history = lock(&self.history);
        Some(BrokerStatsData {
            stats_minute: history.minute.window(&key, current, now_ms),
            stats_hour: history.hour.window(&key, current, now_ms),
            stats_day: history.day.window(&key, current, now_ms),
        })
    }

    /// One item's rate over the last minute (0 if never counted), as RocketMQ's `tps*` figures.
    pub fn minute_tps(&self, name: StatsName, first: &str, second: &str, now_ms: i64) -> f64 {
        self.view(name, first, second, now_ms)
            .map_or(0.0, |data| data.stats_minute.tps)
    }

    /// Forgets a deleted topic's items (its own and those of every group on it).
    pub fn remove_topic(&self, topic: &str) {
        for slot in self.slots.iter() {
            lock(slot).remove(|name, first, _| {
                name != StatsName::BrokerPutNums
                    && name != StatsName::BrokerGetNums
                    && first == topic
            });
        }
    }

    /// Forgets a deleted group's items on every topic.
    pub fn remove_group(&self, group: &str) {
        for slot in self.slots.iter() {
            lock(slot).remove(|name, _, second| name.keyed_by_group() && second == group);
        }
    }
}

/// Who a delivery was for.
#[derive(Clone, Copy, Debug)]
pub struct Delivery<'a> {
    /// The topic pulled.
    pub topic: &'a str,
    /// The consumer group that pulled.
    pub group: &'a str,
    /// The broker's cluster (the broker-wide item's key).
    pub cluster: &'a str,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_700_000_000_000;

    fn put(stats: &ItemStats, shard: usize, topic: &str, messages: u64) {
        stats.record_put(shard, topic, "DefaultCluster", messages, messages * 100);
    }

    // Proves a window sums every shard, runs to now (past the last snapshot), and divides by
    // its length and by the calls that added.
    #[test]
    fn windows_sum_shards_up_to_now() {
        let stats = ItemStats::new(2, T0);
        put(&stats, 0, "t", 10);
        put(&stats, 1, "t", 20);
        stats.sample(T0 + 10_000);
        put(&stats, 1, "t", 30);
        let data = stats
            .view(StatsName::TopicPutNums, "t", "", T0 + 15_000)
            .unwrap();
        assert_eq!(data.stats_minute.sum, 60);
        assert_eq!(data.stats_minute.tps, 4.0);
        assert_eq!(data.stats_minute.avgpt, 20.0);
        assert_eq!(data.stats_hour.sum, 60);
        assert_eq!(data.stats_day.sum, 60);
        let size = stats
            .view(StatsName::TopicPutSize, "t", "", T0 + 15_000)
            .unwrap();
        assert_eq!(size.stats_minute.sum, 6_000);
        let broker = stats
            .view(StatsName::BrokerPutNums, "DefaultCluster", "", T0 + 15_000)
            .unwrap();
        assert_eq!(broker.stats_minute.sum, 60);
    }

    // Proves the minute window keeps only its last seven snapshots while the hour and day
    // windows still cover everything counted in their span.
    #[test]
    fn minute_window_forgets_older_counts() {
        let stats = ItemStats::new(1, T0);
        for tick in 1..=12 {
            put(&stats, 0, "t", 5);
            stats.sample(T0 + tick * SAMPLE_INTERVAL_MS);
        }
        let now = T0 + 12 * SAMPLE_INTERVAL_MS;
        let data = stats.view(StatsName::TopicPutNums, "t", "", now).unwrap();
        // Snapshots at ticks 6..=12 remain: the window is 60 s, six ticks of 5 messages.
        assert_eq!(data.stats_minute.sum, 30);
        assert_eq!(data.stats_minute.tps, 0.5);
        assert_eq!(data.stats_hour.sum, 60);
        assert_eq!(data.stats_day.sum, 60);
    }

    // Proves group items are keyed `topic@group`, an unknown item is None, and deletions
    // forget a topic's and a group's items but not broker-wide ones.
    #[test]
    fn group_items_and_deletion() {
        let stats = ItemStats::new(1, T0);
        let get = |topic, group| Delivery {
            topic,
            group,
            cluster: "c",
        };
        stats.record_get(0, get("t", "g1"), 4, 400);
        stats.record_get(0, get("t", "g2"), 1, 100);
        stats.record_get(0, get("u", "g1"), 2, 200);
        let (topic, group) = split_key(StatsName::GroupGetNums, "t@g1").unwrap();
        let data = stats
            .view(StatsName::GroupGetNums, topic, group, T0 + 1_000)
            .unwrap();
        assert_eq!(data.stats_minute.sum, 4);
        assert!(split_key(StatsName::GroupGetNums, "no-at-sign").is_none());
        assert_eq!(split_key(StatsName::TopicPutNums, "a@b"), Some(("a@b", "")));
        assert!(stats.view(StatsName::GroupGetNums, "t", "g3", T0).is_none());
        stats.remove_group("g1");
        assert!(stats.view(StatsName::GroupGetNums, "t", "g1", T0).is_none());
        assert!(stats.view(StatsName::GroupGetNums, "u", "g1", T0).is_none());
        assert!(stats.view(StatsName::GroupGetNums, "t", "g2", T0).is_some());
        stats.remove_topic("t");
        assert!(stats.view(StatsName::GroupGetSize, "t", "g2", T0).is_none());
        let broker = stats.view(StatsName::BrokerGetNums, "c", "", T0 + 1_000);
        assert_eq!(broker.unwrap().stats_minute.sum, 7);
        assert_eq!(lock(&stats.slots[0]).items, 1);
    }

    // Proves adding under a key where only some of the names exist yet adds each once.
    #[test]
    fn partly_present_items_add_once() {
        let stats = ItemStats::new(1, T0);
        stats.add(0, StatsName::TopicPutNums, "t", "", 5);
        put(&stats, 0, "t", 2);
        let nums = stats.view(StatsName::TopicPutNums, "t", "", T0 + 1_000);
        assert_eq!(nums.unwrap().stats_day.sum, 7);
        let size = stats.view(StatsName::TopicPutSize, "t", "", T0 + 1_000);
        assert_eq!(size.unwrap().stats_day.sum, 200);
    }

    // Proves a shard's slot stops growing at its limit and keeps counting items it has.
    #[test]
    fn slot_is_bounded() {
        let stats = ItemStats::new(1, T0);
        for index in 0..STATS_ITEMS_PER_SHARD_MAX + 10 {
            stats.add(0, StatsName::TopicPutNums, &index.to_string(), "", 1);
        }
        assert_eq!(lock(&stats.slots[0]).items, STATS_ITEMS_PER_SHARD_MAX);
        stats.add(0, StatsName::TopicPutNums, "0", "", 1);
        let data = stats
            .view(StatsName::TopicPutNums, "0", "", T0 + 1_000)
            .unwrap();
        assert_eq!(data.stats_minute.sum, 2);
        let late = (STATS_ITEMS_PER_SHARD_MAX + 5).to_string();
        assert!(stats.view(StatsName::TopicPutNums, &late, "", T0).is_none());
    }

    // Proves every name round-trips through RocketMQ's spelling.
    #[test]
    fn names_parse() {
        for name in StatsName::ALL {
            assert_eq!(StatsName::parse(name.as_str()), Some(name));
        }
        assert_eq!(StatsName::parse("QUEUE_PUT_NUMS"), None);
    }
}
