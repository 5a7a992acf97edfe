//! The broker's topic table: system topics, auto-creation on send, admin updates, and the
//! data version name servers use to detect change
//! (docs/protocol.md#system-topics-and-groups, docs/protocol.md#queue-counts-and-permissions).
//!
//! Lives in the broker-wide metadata (see `metadata.rs`); every change bumps the data
//! version, and callers persist `config/topics.json` and re-register with name servers.

use std::collections::{BTreeMap, BTreeSet};

use comet_proto::body::{DataVersion, TopicConfig, TopicConfigSerializeWrapper, TopicFilterType};
use comet_proto::names;

use crate::config::BrokerConfig;

/// The system topic timed messages wait in (Apache's `TimerMessageStore.TIMER_TOPIC`); the
/// timer wheel (`crate::timer_wheel`) reads it, the table here creates it.
pub const TIMER_TOPIC: &str = "rmq_sys_wheel_timer";

/// Queues of the timer topic. A timed send is stored in a queue owned by its real queue's
/// owner, so every shard's wheel gets the share of the real queues it owns; with at least as
/// many queues as shards every shard owns one. Apache uses one queue; nobody consumes this
/// topic, so the count is internal.
pub const TIMER_QUEUES: i32 = 32;

const _: () = assert!(TIMER_QUEUES > 0);

/// Queues of the transaction half and op topics: with at least as many queues as shards,
/// every shard owns a half queue of its own and stores the halves it receives there
/// (`crate::transaction`). Java uses one queue; nobody consumes these topics, so the count
/// is internal.
pub const HALF_QUEUES: i32 = 32;

const _: () = assert!(HALF_QUEUES > 0);

/// Permission bits (docs/protocol.md#flag-words).
pub mod perm {
    /// Readable.
    pub const READ: i32 = 4;
    /// Writable.
    pub const WRITE: i32 = 2;
    /// Template topics: new topics inherit from them.
    pub const INHERIT: i32 = 1;
    /// Read and write.
    pub const READ_WRITE: i32 = READ | WRITE;

    /// True when `perm` allows reads.
    pub fn is_readable(perm: i32) -> bool {
        perm & READ != 0
    }
    /// True when `perm` allows writes.
    pub fn is_writable(perm: i32) -> bool {
        perm & WRITE != 0
    }
}

/// Why a topic could not be auto-created on send.
#[derive(Debug, PartialEq, Eq)]
pub enum AutoCreateError {
    /// No template, or the template may not be inherited from.
    TopicNotExist,
}

/// Topic name → config, with a version.
#[derive(Clone, Debug)]
pub struct TopicTable {
    topics: BTreeMap<String, TopicConfig>,
    data_version: DataVersion,
    /// Topics created in this run from the queues a store held (`adopt_stored_queues`).
    adopted: BTreeSet<String>,
}

fn topic(name: &str, queues: i32, perm: i32) -> TopicConfig {
    TopicConfig {
        read_queue_nums: queues,
        write_queue_nums: queues,
        perm,
        ..TopicConfig::new(name)
    }
}

impl TopicTable {
    /// The system topics a fresh broker has (docs/protocol.md#system-topics-and-groups), plus what
    /// `loaded` holds from a previous run (loaded entries win, so an operator's changes survive
    /// restarts).
    pub fn new(config: &BrokerConfig, loaded: Option<TopicConfigSerializeWrapper>) -> TopicTable {
        let mut topics = BTreeMap::new();
        let mut add = |config: TopicConfig| {
            topics.insert(config.topic_name.clone(), config);
        };
        add(topic(names::SELF_TEST_TOPIC, 1, perm::READ_WRITE));
        if config.auto_create_topic {
            let queues = config.default_topic_queue_nums;
            add(topic(
                names::AUTO_CREATE_TOPIC_KEY,
                queues,
                perm::READ_WRITE | perm::INHERIT,
            ));
        }
        add(topic(names::BENCHMARK_TOPIC, 1024, perm::READ_WRITE));
        let cluster_perm = if config.cluster_topic_enable {
            perm::READ_WRITE | perm::INHERIT
        } else {
            perm::INHERIT
        };
        add(topic(&config.cluster_name, 16, cluster_perm));
        let broker_perm = if config.broker_topic_enable {
            perm::READ_WRITE | perm::INHERIT
        } else {
            perm::INHERIT
        };
        add(topic(&config.broker_name, 1, broker_perm));
        add(topic(names::OFFSET_MOVED_EVENT_TOPIC, 1, perm::READ_WRITE));
        add(topic(names::SCHEDULE_TOPIC, 18, perm::READ_WRITE));
        add(topic(TIMER_TOPIC, TIMER_QUEUES, perm::READ_WRITE));
        if config.trace_topic_enable {
            add(topic(names::TRACE_TOPIC, 1, perm::READ_WRITE));
        }
        add(topic(
            &names::reply_topic(&config.cluster_name),
            1,
            perm::READ_WRITE,
        ));
        let half_queues = HALF_QUEUES;
        add(topic(
            names::TRANS_HALF_TOPIC,
            half_queues,
            perm::READ_WRITE,
        ));
        add(topic(
            names::TRANS_OP_HALF_TOPIC,
            half_queues,
            perm::READ_WRITE,
        ));
        let mut data_version = DataVersion::default();
        if let Some(loaded) = loaded {
            topics.extend(loaded.topic_config_table);
            data_version = loaded.data_version;
        }
        // A table written when the half topics had one queue (as Java's) gets every shard's:
        // the halves already stored stay in queue 0, which is still checked.
        for name in [names::TRANS_HALF_TOPIC, names::TRANS_OP_HALF_TOPIC] {
            if let Some(config) = topics.get_mut(name) {
                config.read_queue_nums = config.read_queue_nums.max(half_queues);
                config.write_queue_nums = config.write_queue_nums.max(half_queues);
            }
        }
        let mut table = TopicTable {
            topics,
            data_version,
            adopted: BTreeSet::new(),
        };
        table.bump_version();
        table
    }

    /// The config of `topic`.
    pub fn get(&self, topic: &str) -> Option<&TopicConfig> {
        self.topics.get(topic)
    }

    /// Every topic, by name.
    pub fn iter(&self) -> impl Iterator<Item = &TopicConfig> {
        self.topics.values()
    }

    /// Number of topics.
    pub fn len(&self) -> usize {
        self.topics.len()
    }

    /// True when there are no topics (never after `new`).
    pub fn is_empty(&self) -> bool {
        self.topics.is_empty()
    }

    /// The current data version.
    pub fn data_version(&self) -> &DataVersion {
        &self.data_version
    }

    fn bump_version(&mut self) {
        self.data_version.counter += 1;
        self.data_version.timestamp = comet_rt::clock::wall_clock_ms();
    }

    /// Creates or replaces a topic (UPDATE_AND_CREATE_TOPIC).
    pub fn upsert(&mut self, config: TopicConfig) {
        assert!(!config.topic_name.is_empty());
        self.topics.insert(config.topic_name.clone(), config);
        self.bump_version();
    }

    /// A master found consume queues of `topic` up to `queue_count - 1` in its store: a topic
    /// the table lacks is created read-write with that many queues, and one created so
    /// earlier in this run grows to cover them (a promoted slave holds the messages of a
    /// topic its master created after the last metadata copy). True when the table changed.
    pub fn adopt_stored_queues(&mut self, topic: &str, queue_count: i32) -> bool {
        assert!(queue_count >= 1);
        match self.topics.get(topic) {
            None => {
                self.upsert(self::topic(topic, queue_count, perm::READ_WRITE));
                self.adopted.insert(topic.to_owned());
                true
            }
            Some(existing)
                if self.adopted.contains(topic)
                    && existing.write_queue_nums.max(existing.read_queue_nums) < queue_count =>
            {
                self.upsert(self::topic(topic, queue_count, perm::READ_WRITE));
                true
            }
            Some(_) => false,
        }
    }

    /// Deletes a topic; true if it existed.
    pub fn delete(&mut self, topic: &str) -> bool {
        let existed = self.topics.remove(topic).is_some();
        if existed {
            self.bump_version();
        }
        existed
    }

    /// Auto-creates `topic` for a send naming `default_topic` as its template
    /// (docs/protocol.md#system-topics-and-groups): the template must carry INHERIT (treated as
    /// plain 6 when auto-creation is off); the new topic gets min(requested, template write queues)
    /// queues and the template's perm without INHERIT.
    pub fn create_on_send(
        &mut self,
        topic: &str,
        default_topic: &str,
        requested_queue_nums: i32,
        topic_sys_flag: i32,
        auto_create_enabled: bool,
    ) -> Result<(TopicConfig, bool), AutoCreateError> {
        if let Some(existing) = self.topics.get(topic) {
            return Ok((existing.clone(), false));
        }
        if names::is_retry_topic(topic) {
            return Ok((self.ensure_system_topic(topic, 1), true));
        }
        let template = self
            .topics
            .get(default_topic)
            .ok_or(AutoCreateError::TopicNotExist)?;
        let template_perm = if auto_create_enabled {
            template.perm
        } else {
            perm::READ_WRITE
        };
        if template_perm & perm::INHERIT == 0 {
            return Err(AutoCreateError::TopicNotExist);
        }
        let queues = requested_queue_nums.clamp(1, template.write_queue_nums.max(1));
        let config = TopicConfig {
            read_queue_nums: queues,
            write_queue_nums: queues,
            perm: template_perm & !perm::INHERIT,
            topic_filter_type: template.topic_filter_type,
            topic_sys_flag,
            ..TopicConfig::new(topic)
        };
        self.upsert(config.clone());
        Ok((config, true))
    }

    /// Returns `topic`, creating it read-write with `queue_nums` queues when missing (retry
    /// and dead-letter topics).
    pub fn ensure_system_topic(&mut self, topic: &str, queue_nums: i32) -> TopicConfig {
        if let Some(existing) = self.topics.get(topic) {
            return existing.clone();
        }
        let config = TopicConfig {
            topic_filter_type: TopicFilterType::SINGLE_TAG,
            ..self::topic(topic, queue_nums.max(1), perm::READ_WRITE)
        };
        self.upsert(config.clone());
        config
    }

    /// The table as `topics.json` / REGISTER_BROKER / GET_ALL_TOPIC_CONFIG carry it, with
    /// every perm masked by the broker permission.
    pub fn to_wrapper(&self, broker_permission: i32) -> TopicConfigSerializeWrapper {
        let topic_config_table = self
            .topics
            .iter()
            .map(|(name, config)| {
                let mut config = config.clone();
                config.perm &= broker_permission | perm::INHERIT;
                (name.clone(), config)
            })
            .collect();
        TopicConfigSerializeWrapper {
            data_version: self.data_version.clone(),
            topic_config_table,
            ..TopicConfigSerializeWrapper::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the system topics exist and auto-creation follows RocketMQ: inherit from TBW102,
    // min(requested, template) queues, perm without INHERIT, refused without a template.
    #[test]
    fn system_topics_and_auto_creation() {
        let config = BrokerConfig::default();
        let mut table = TopicTable::new(&config, None);
        assert_eq!(table.get(names::AUTO_CREATE_TOPIC_KEY).unwrap().perm, 7);
        assert_eq!(
            table.get(names::SCHEDULE_TOPIC).unwrap().read_queue_nums,
            18
        );
        assert!(table.get("DefaultCluster").is_some());
        let version = table.data_version().counter;
        let created = table
            .create_on_send("TopicTest", "TBW102", 4, 0, true)
            .unwrap();
        assert_eq!(created.0.write_queue_nums, 4);
        assert_eq!(created.0.perm, 6);
        assert!(created.1);
        assert!(table.data_version().counter > version);
        let (capped, _) = table.create_on_send("Wide", "TBW102", 64, 0, true).unwrap();
        assert_eq!(capped.write_queue_nums, 8);
        assert_eq!(
            table.create_on_send("X", "NoSuchTemplate", 4, 0, true),
            Err(AutoCreateError::TopicNotExist)
        );
        let retry = table
            .create_on_send("%RETRY%cg", "NoSuchTemplate", 4, 0, true)
            .unwrap();
        assert_eq!(retry.0.read_queue_nums, 1);
        assert!(table.delete("TopicTest"));
        assert!(table.get("TopicTest").is_none());
    }

    // Proves a wiped broker permission masks every topic in what goes to name servers.
    #[test]
    fn broker_permission_masks_registrations() {
        let table = TopicTable::new(&BrokerConfig::default(), None);
        let wrapper = table.to_wrapper(perm::READ);
        assert!(wrapper
            .topic_config_table
            .values()
            .all(|t| !perm::is_writable(t.perm)));
    }
}
