//! Subscription groups: per-group consumption settings (retry counts, retry queues, whether
//! consumption is allowed), auto-created on first use when `autoCreateSubscriptionGroup` is
//! on (docs/protocol.md#system-topics-and-groups). Persisted as `config/subscriptionGroup.json`.

use std::collections::BTreeMap;

use comet_proto::body::{DataVersion, SubscriptionGroupConfig, SubscriptionGroupWrapper};

/// Groups every broker has (docs/protocol.md#system-topics-and-groups).
pub const BUILT_IN_GROUPS: &[&str] = &[
    "TOOLS_CONSUMER",
    "FILTERSRV_CONSUMER",
    "SELF_TEST_C_GROUP",
    "CID_ONS-HTTP-PROXY",
    "CID_ONSAPI_PULL",
    "CID_ONSAPI_PERMISSION",
    "CID_ONSAPI_OWNER",
    "CID_RMQ_SYS_TRANS",
];

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

#[cfg(test)]
mod tests {
    use super::*;

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
