//! Subscription groups: per-group consumption settings (retry counts, retry queues, whether
//! consumption is allowed), auto-created on first use when `autoCreateSubscriptionGroup` is
//! on (docs/protocol.md#system-topics-and-groups). Persisted as `config/subscriptionGroup.json`.
//!
//! Also the compiled SQL92 selectors of consumers' subscriptions
//! (docs/protocol.md#sql92-property-filters), so that a pull never parses one again.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use comet_proto::body::{DataVersion, SubscriptionGroupConfig, SubscriptionGroupWrapper};
use comet_proto::sql92::{Selector, SqlError};

/// Groups every broker has (docs/protocol.md#system-topics-and-groups).
pub use comet_proto::names::BUILT_IN_GROUPS;

/// Group name → config, with a version.
#[derive(Clone, Debug)]
pub struct GroupTable {
    groups: BTreeMap<String, SubscriptionGroupConfig>,
    data_version: DataVersion,
    changed: bool,
}

impl GroupTable {
    /// The built-in groups plus what `loaded` holds from a previous run.
    pub fn new(loaded: Option<SubscriptionGroupWrapper>) -> GroupTable {
        let mut groups: BTreeMap<String, SubscriptionGroupConfig> = BUILT_IN_GROUPS
            .iter()
            .map(|name| (name.to_string(), SubscriptionGroupConfig::new(*name)))
            .collect();
        let mut data_version = DataVersion::default();
        if let Some(loaded) = loaded {
            groups.extend(loaded.subscription_group_table);
            data_version = loaded.data_version;
        }
        GroupTable {
            groups,
            data_version,
            changed: false,
        }
    }

    /// Every group name, sorted.
    pub fn names(&self) -> Vec<String> {
        self.groups.keys().cloned().collect()
    }

    /// The config of `group`.
    pub fn get(&self, group: &str) -> Option<&SubscriptionGroupConfig> {
        self.groups.get(group)
    }

    /// The config of `group`, created with defaults when `auto_create` allows.
    pub fn get_or_create(
        &mut self,
        group: &str,
        auto_create: bool,
    ) -> Option<SubscriptionGroupConfig> {
        if let Some(existing) = self.groups.get(group) {
            return Some(existing.clone());
        }
        if !auto_create {
            return None;
        }
        let config = SubscriptionGroupConfig::new(group);
        self.upsert(config.clone());
        Some(config)
    }

    /// Creates or replaces a group (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP).
    pub fn upsert(&mut self, config: SubscriptionGroupConfig) {
        assert!(!config.group_name.is_empty());
        self.groups.insert(config.group_name.clone(), config);
        self.data_version.counter += 1;
        self.data_version.timestamp = comet_rt::clock::wall_clock_ms();
        self.changed = true;
    }

    /// Deletes a group; true if it existed.
    pub fn delete(&mut self, group: &str) -> bool {
        let existed = self.groups.remove(group).is_some();
        if existed {
            self.data_version.counter += 1;
            self.changed = true;
        }
        existed
    }

    /// True when something changed since the last snapshot.
    pub fn is_changed(&self) -> bool {
        self.changed
    }

    /// The persisted and GET_ALL_SUBSCRIPTIONGROUP_CONFIG form; clears the changed mark.
    pub fn take_snapshot(&mut self) -> SubscriptionGroupWrapper {
        self.changed = false;
        self.to_wrapper()
    }

    /// The table as a wrapper.
    pub fn to_wrapper(&self) -> SubscriptionGroupWrapper {
        SubscriptionGroupWrapper {
            data_version: self.data_version.clone(),
            forbidden_table: BTreeMap::new(),
            subscription_group_table: self.groups.clone(),
        }
    }
}

/// Most (group, topic) selectors one shard keeps; past it the cache starts over, so groups
/// that went away cannot grow it without bound.
pub const SELECTOR_CACHE_ENTRIES_MAX: usize = 4096;

/// A compiled selector or why it does not compile, shared with pulls in flight.
pub type CompiledSelector = Result<Rc<Selector>, SqlError>;

/// One subscription's text and what it compiled to.
struct CacheEntry {
    expression: String,
    compiled: CompiledSelector,
}

/// The compiled SQL92 selectors of one shard, by group and topic: Java's
/// `ConsumerFilterManager` without its bloom filter data.
#[derive(Default)]
pub struct SelectorCache {
    by_group: HashMap<String, HashMap<String, CacheEntry>>,
    entries: usize,
    compilations: u64,
}

impl SelectorCache {
    /// The compiled form of `expression` for (`group`, `topic`): the cached one (or the
    /// cached refusal) while the subscription's text is unchanged, since a new `subVersion`
    /// with the same text compiles to the same selector; else compiled now and kept.
    pub fn get_or_compile(
        &mut self,
        group: &str,
        topic: &str,
        expression: &str,
    ) -> CompiledSelector {
        let cached = self
            .by_group
            .get(group)
            .and_then(|topics| topics.get(topic))
            .filter(|entry| entry.expression == expression);
        if let Some(entry) = cached {
            return entry.compiled.clone();
        }
        let compiled = Selector::compile(expression).map(Rc::new);
        self.compilations += 1;
        if self.entries >= SELECTOR_CACHE_ENTRIES_MAX {
            self.by_group.clear();
            self.entries = 0;
        }
        let entry = CacheEntry {
            expression: expression.to_owned(),
            compiled: compiled.clone(),
        };
        let previous = self
            .by_group
            .entry(group.to_owned())
            .or_default()
            .insert(topic.to_owned(), entry);
        if previous.is_none() {
            self.entries += 1;
        }
        compiled
    }

    /// How many selectors this cache compiled (a pull that reuses one adds nothing).
    pub fn compilations(&self) -> u64 {
        self.compilations
    }
}

thread_local! {
    /// Each shard runs on its own thread, so this is the shard's cache; kept here rather
    /// than in the shard state because only pulls use it.
    static SELECTORS: RefCell<SelectorCache> = RefCell::new(SelectorCache::default());
}

/// [`SelectorCache::get_or_compile`] on this shard's cache.
pub fn shard_selector(group: &str, topic: &str, expression: &str) -> CompiledSelector {
    SELECTORS.with(|cache| cache.borrow_mut().get_or_compile(group, topic, expression))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a selector is compiled once per (group, topic, text): pulls reuse it (and a
    // refusal), and a changed text compiles anew.
    #[test]
    fn selectors_compile_once_per_subscription_text() {
        let mut cache = SelectorCache::default();
        let first = cache.get_or_compile("g", "t", "a > 1").unwrap();
        let again = cache.get_or_compile("g", "t", "a > 1").unwrap();
        assert!(Rc::ptr_eq(&first, &again));
        assert_eq!(cache.compilations(), 1);
        let other_topic = cache.get_or_compile("g", "u", "a > 1").unwrap();
        assert!(!Rc::ptr_eq(&first, &other_topic));
        let changed = cache.get_or_compile("g", "t", "a > 2").unwrap();
        assert_eq!(changed.expression(), "a > 2");
        assert_eq!(cache.compilations(), 3);
        assert!(cache.get_or_compile("g", "t", "a >").is_err());
        assert!(cache.get_or_compile("g", "t", "a >").is_err());
        assert_eq!(cache.compilations(), 4);
        let back = cache.get_or_compile("g", "t", "a > 2").unwrap();
        assert!(!Rc::ptr_eq(&changed, &back));
        assert_eq!(cache.compilations(), 5);
    }

    // Proves the cache cannot grow past its bound.
    #[test]
    fn selector_cache_is_bounded() {
        let mut cache = SelectorCache::default();
        for group in 0..=SELECTOR_CACHE_ENTRIES_MAX {
            cache
                .get_or_compile(&format!("g{group}"), "t", "a = 1")
                .unwrap();
        }
        assert!(cache.entries <= SELECTOR_CACHE_ENTRIES_MAX);
        assert_eq!(cache.entries, 1);
    }

    // Proves built-in groups, auto-creation only when allowed, and change tracking.
    #[test]
    fn groups_auto_create_and_persist() {
        let mut table = GroupTable::new(None);
        assert!(table.get("CID_RMQ_SYS_TRANS").is_some());
        assert!(table.get_or_create("cg", false).is_none());
        assert!(!table.is_changed());
        let created = table.get_or_create("cg", true).unwrap();
        assert_eq!(created.retry_max_times, 16);
        assert!(table.is_changed());
        let snapshot = table.take_snapshot();
        let reloaded = GroupTable::new(Some(snapshot));
        assert!(reloaded.get("cg").is_some());
        assert!(!reloaded.is_changed());
    }
}
