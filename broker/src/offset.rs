//! Consumer offsets: (topic, group, queue id) → next offset to consume.
//!
//! Each shard holds the offsets of the queues it owns (offsets are committed on the pull path,
//! which already runs on the owner). Persisted as `config/consumerOffset-<shard>.json` in
//! RocketMQ's `consumerOffset.json` shape (`offsetTable` keyed `topic@group`); at start-up
//! every file is read and each shard keeps what it owns, so a changed core count loses no
//! offset.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

/// Offsets of one shard.
#[derive(Clone, Debug, Default)]
pub struct OffsetTable {
    offsets: HashMap<(String, String), BTreeMap<i32, i64>>,
    /// One-shot reset markers (5.x server-side reset): the next pull of the queue by the
    /// group is answered PULL_OFFSET_MOVED to this offset.
    resets: HashMap<(String, String, i32), i64>,
    /// The next offset of each group's last pull of a queue (Java's `pullOffsetTable`): what
    /// was pulled and not yet committed is in flight (`crate::metrics::consumer`). In
    /// memory only, and recorded only with metrics on.
    /// Topic, then group, then queue id: looked up by `&str` without allocating on the pull
    /// path.
    pulls: HashMap<String, HashMap<String, BTreeMap<i32, i64>>>,
    changed: bool,
}

/// The persisted shape (`consumerOffset.json`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct OffsetFile {
    /// `topic@group` → queue id → offset.
    #[serde(rename = "offsetTable")]
    pub offset_table: BTreeMap<String, BTreeMap<i32, i64>>,
}

impl OffsetTable {
    /// An empty table.
    pub fn new() -> OffsetTable {
        OffsetTable::default()
    }

    /// Stores an offset (UPDATE_CONSUMER_OFFSET, or a pull with the commit flag).
    pub fn commit(&mut self, group: &str, topic: &str, queue_id: i32, offset: i64) {
        assert!(queue_id >= 0, "negative queue id {queue_id}");
        let queues = self
            .offsets
            .entry((topic.to_owned(), group.to_owned()))
            .or_default();
        if queues.insert(queue_id, offset) != Some(offset) {
            self.changed = true;
        }
    }

    /// Resets a group's offset (INVOKE_BROKER_TO_RESET_OFFSET): commits `offset` and marks
    /// the queue so its next pull tells the consumer to move there.
    pub fn reset(&mut self, group: &str, topic: &str, queue_id: i32, offset: i64) {
        self.commit(group, topic, queue_id, offset);
        self.resets
            .insert((topic.to_owned(), group.to_owned(), queue_id), offset);
    }

    /// Takes the pending reset of a queue for a group, if any.
    pub fn take_reset(&mut self, group: &str, topic: &str, queue_id: i32) -> Option<i64> {
        self.resets
            .remove(&(topic.to_owned(), group.to_owned(), queue_id))
    }

    /// The committed offset, if any.
    pub fn query(&self, group: &str, topic: &str, queue_id: i32) -> Option<i64> {
        self.offsets
            .get(&(topic.to_owned(), group.to_owned()))
            .and_then(|queues| queues.get(&queue_id).copied())
    }

    /// Records where a group's pull of a queue left off (its answer's next begin offset).
    pub fn record_pull(&mut self, group: &str, topic: &str, queue_id: i32, next_offset: i64) {
        let groups = match self.pulls.get_mut(topic) {
            Some(groups) => groups,
            None => self.pulls.entry(topic.to_owned()).or_default(),
        };
        let queues = match groups.get_mut(group) {
            Some(queues) => queues,
            None => groups.entry(group.to_owned()).or_default(),
        };
        // Replacing the value of a queue already in the map allocates nothing.
        queues.insert(queue_id, next_offset);
    }

    /// Where the group's last pull of the queue left off, if it pulled since start-up.
    pub fn query_pull(&self, group: &str, topic: &str, queue_id: i32) -> Option<i64> {
        self.pulls
            .get(topic)
            .and_then(|groups| groups.get(group))
            .and_then(|queues| queues.get(&queue_id).copied())
    }

    /// Every (topic, queue id, offset) committed by `group`.
    pub fn group_offsets(&self, group: &str) -> Vec<(String, i32, i64)> {
        let mut result = Vec::new();
        for ((topic, owner), queues) in &self.offsets {
            if owner == group {
                result.extend(
                    queues
                        .iter()
                        .map(|(queue, offset)| (topic.clone(), *queue, *offset)),
                );
            }
        }
        result.sort();
        result
    }

    /// Groups that committed offsets for `topic`.
    pub fn groups_of_topic(&self, topic: &str) -> Vec<String> {
        let mut groups: Vec<String> = self
            .offsets
            .keys()
            .filter(|(owner_topic, _)| owner_topic == topic)
            .map(|(_, group)| group.clone())
            .collect();
        groups.sort();
        groups.dedup();
        groups
    }

    /// Copies `source`'s offsets of `topic` held here to `target` (CLONE_GROUP_OFFSET),
    /// replacing what `target` had for the topic, as RocketMQ replaces the whole
    /// `topic@target` entry. Run on every shard, so a shard where `source` holds nothing for
    /// the topic drops `target`'s entries there. Returns how many queue offsets `target` now
    /// has here.
    pub fn clone_topic(&mut self, source: &str, target: &str, topic: &str) -> usize {
        assert!(source != target, "cloning {source} onto itself");
        let queues = self
            .offsets
            .get(&(topic.to_owned(), source.to_owned()))
            .cloned()
            .unwrap_or_default();
        let copied = queues.len();
        let key = (topic.to_owned(), target.to_owned());
        let previous = if queues.is_empty() {
            self.offsets.remove(&key)
        } else {
            self.offsets.insert(key, queues.clone())
        };
        if previous.unwrap_or_default() != queues {
            self.changed = true;
        }
        copied
    }

    /// Forgets a group's offsets (DELETE_SUBSCRIPTIONGROUP with cleanOffset).
    pub fn remove_group(&mut self, group: &str) {
        let before = self.offsets.len();
        self.offsets.retain(|(_, owner), _| owner != group);
        for groups in self.pulls.values_mut() {
            groups.remove(group);
        }
        self.changed |= self.offsets.len() != before;
    }

    /// Forgets a topic's offsets (DELETE_TOPIC_IN_BROKER).
    pub fn remove_topic(&mut self, topic: &str) {
        let before = self.offsets.len();
        self.offsets
            .retain(|(owner_topic, _), _| owner_topic != topic);
        self.pulls.remove(topic);
        self.changed |= self.offsets.len() != before;
    }

    /// True when something changed since the last [`OffsetTable::take_snapshot`].
    pub fn is_changed(&self) -> bool {
        self.changed
    }

    /// The persisted form; clears the changed mark.
    pub fn take_snapshot(&mut self) -> OffsetFile {
        self.changed = false;
        self.snapshot()
    }

    /// The persisted form, leaving the changed mark alone (GET_ALL_CONSUMER_OFFSET).
    pub fn snapshot(&self) -> OffsetFile {
        let offset_table = self
            .offsets
            .iter()
            .map(|((topic, group), queues)| (format!("{topic}@{group}"), queues.clone()))
            .collect();
        OffsetFile { offset_table }
    }

    /// Loads entries from a persisted file, keeping those `owns(topic, queue_id)` accepts.
    pub fn load(&mut self, file: OffsetFile, owns: impl Fn(&str, i32) -> bool) {
        for (key, queues) in file.offset_table {
            let Some((topic, group)) = key.split_once('@') else {
                log::warn!("ignoring malformed consumer offset key {key:?}");
                continue;
            };
            for (queue_id, offset) in queues {
                if queue_id >= 0 && owns(topic, queue_id) {
                    self.offsets
                        .entry((topic.to_owned(), group.to_owned()))
                        .or_default()
                        .insert(queue_id, offset);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves pull offsets are kept per group, topic and queue (the last pull wins), are not
    // persisted nor a change to persist, and go with their group or topic.
    #[test]
    fn pull_offsets_are_per_queue_and_in_memory() {
        let mut table = OffsetTable::new();
        table.record_pull("g", "t", 0, 3);
        table.record_pull("g", "t", 0, 7);
        table.record_pull("g", "t", 1, 2);
        table.record_pull("h", "t", 0, 1);
        table.record_pull("g", "u", 0, 4);
        assert_eq!(table.query_pull("g", "t", 0), Some(7));
        assert_eq!(table.query_pull("g", "t", 1), Some(2));
        assert_eq!(table.query_pull("g", "t", 2), None);
        assert_eq!(table.query_pull("g", "t", 0), Some(7));
        assert!(!table.is_changed(), "pull offsets are not persisted");
        assert!(table.snapshot().offset_table.is_empty());
        table.remove_group("g");
        assert_eq!(table.query_pull("g", "t", 1), None);
        assert_eq!(table.query_pull("h", "t", 0), Some(1));
        table.remove_topic("t");
        assert_eq!(table.query_pull("h", "t", 0), None);
    }

    // Proves a clone copies the source's queues of one topic only, replaces the target's
    // entry (queues the source lacks are dropped), marks the table changed only when
    // something changed, and leaves other topics and the source alone.
    #[test]
    fn clone_topic_replaces_the_target_entry() {
        let mut table = OffsetTable::new();
        table.commit("src", "t", 0, 5);
        table.commit("src", "t", 2, 9);
        table.commit("src", "u", 0, 1);
        table.commit("dst", "t", 1, 4);
        table.take_snapshot();
        assert_eq!(table.clone_topic("src", "dst", "t"), 2);
        assert!(table.is_changed());
        assert_eq!(table.query("dst", "t", 0), Some(5));
        assert_eq!(table.query("dst", "t", 2), Some(9));
        assert_eq!(table.query("dst", "t", 1), None, "replaced, not merged");
        assert_eq!(table.query("dst", "u", 0), None, "other topics untouched");
        assert_eq!(table.query("src", "t", 0), Some(5));
        table.take_snapshot();
        table.clone_topic("src", "dst", "t");
        assert!(
            !table.is_changed(),
            "a clone that changes nothing is not a change"
        );
        assert_eq!(table.clone_topic("nobody", "dst", "t"), 0);
        assert_eq!(
            table.query("dst", "t", 0),
            None,
            "no source here: target dropped"
        );
        assert!(table.is_changed());
        assert_eq!(
            table.snapshot().offset_table.len(),
            2,
            "snapshot keeps the mark"
        );
        assert!(table.is_changed());
    }

    // Proves commit/query, the change mark, and that a snapshot reloads with ownership
    // filtering (what a changed core count relies on).
    #[test]
    fn commit_snapshot_and_reload() {
        let mut table = OffsetTable::new();
        assert_eq!(table.query("g", "t", 0), None);
        table.commit("g", "t", 0, 12);
        table.commit("g", "t", 3, 7);
        table.commit("h", "t", 0, 1);
        assert!(table.is_changed());
        assert_eq!(table.query("g", "t", 0), Some(12));
        let snapshot = table.take_snapshot();
        assert!(!table.is_changed());
        table.commit("g", "t", 0, 12);
        assert!(!table.is_changed(), "an unchanged offset is not a change");
        let json = serde_json::to_string(&snapshot).unwrap();
        let file: OffsetFile = serde_json::from_str(&json).unwrap();
        let mut reloaded = OffsetTable::new();
        reloaded.load(file, |_, queue| queue == 0);
        assert_eq!(reloaded.query("g", "t", 0), Some(12));
        assert_eq!(reloaded.query("g", "t", 3), None);
        assert_eq!(
            reloaded.groups_of_topic("t"),
            vec!["g".to_owned(), "h".to_owned()]
        );
        reloaded.remove_group("g");
        assert_eq!(reloaded.query("g", "t", 0), None);
        reloaded.reset("g", "t", 1, 4);
        assert_eq!(reloaded.query("g", "t", 1), Some(4));
        assert_eq!(reloaded.take_reset("g", "t", 1), Some(4));
        assert_eq!(
            reloaded.take_reset("g", "t", 1),
            None,
            "a reset is taken once"
        );
    }
}
