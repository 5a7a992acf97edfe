//! The route table: what the name server knows about topics, brokers and clusters.
//!
//! Lives on the name server's one shard, owned by one task (shared as `Rc<RefCell<_>>`
//! between that shard's request processors, never borrowed across an await), so every answer
//! is built directly from it and no read waits behind a writer. All maps are `BTreeMap`, so
//! answers and tests are deterministic. Time comes in as `now_ms`; nothing here reads a clock.
//!
//! Tables (as RocketMQ's `RouteInfoManager`):
//!
//! ```text
//! topic_queue   topic       -> brokerName -> QueueData (queue counts, perm, sys flag)
//! broker_addr   brokerName  -> BrokerData  (cluster, brokerId -> "ip:port", zone)
//! cluster_addr  cluster     -> {brokerName}
//! broker_live   (cluster, brokerAddr) -> BrokerLive (last registration, timeout, version)
//! filter_server (cluster, brokerAddr) -> [filter server addr]
//! ```
//!
//! Invariants (checked by [`RouteTable::check_invariants`], exercised by a property test):
//! * every broker name of a cluster has a BrokerData of that cluster with at least one
//!   address, and every BrokerData is listed under its cluster;
//! * every live broker is an address of its BrokerData under its id, and every address of a
//!   BrokerData is live: members come and go together;
//! * every topic has at least one QueueData, and each names a broker that exists;
//! * an address appears under one id only within a BrokerData.
//!
//! Only a master (id 0), or the lowest-id member when no master is present (5.x "prime
//! slave"), updates the topic table; slaves only add their address. When a master goes, the
//! topic's queue data stays while any member remains, so clients keep reading from slaves.

use std::collections::{BTreeMap, BTreeSet};

use comet_net::ConnectionId;
use comet_proto::body::{
    BrokerData, ClusterInfo, DataVersion, QueueData, TopicConfig, TopicConfigSerializeWrapper,
    TopicList, TopicRouteData, MASTER_BROKER_ID,
};

/// Write permission bit of a queue's `perm`.
pub const PERM_WRITE: i32 = 2;
/// Topic sys flag bit: unit topic.
const TOPIC_SYS_FLAG_UNIT: i32 = 1;
/// Topic sys flag bit: has unit subscription.
const TOPIC_SYS_FLAG_UNIT_SUB: i32 = 2;

/// A broker member's identity in the live table: (cluster, address).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BrokerKey {
    /// Cluster name.
    pub cluster: String,
    /// `ip:port`.
    pub addr: String,
}

/// What the name server remembers of a live broker member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerLive {
    /// Logical broker name.
    pub broker_name: String,
    /// Member id (0 = master).
    pub broker_id: i64,
    /// When it last registered (or was otherwise heard from).
    pub last_update_ms: i64,
    /// Dropped when silent this long.
    pub timeout_ms: i64,
    /// Version of the topic configs it last registered.
    pub data_version: DataVersion,
    /// Its HA address.
    pub ha_server_addr: String,
    /// The connection it registered on, to drop it at once when that closes.
    pub connection: Option<ConnectionId>,
}

/// One REGISTER_BROKER, decoded.
#[derive(Clone, Debug, Default)]
pub struct Registration {
    /// Cluster name.
    pub cluster: String,
    /// `ip:port`.
    pub addr: String,
    /// Logical broker name.
    pub broker_name: String,
    /// Member id (0 = master).
    pub broker_id: i64,
    /// HA address.
    pub ha_server_addr: String,
    /// 5.x zone.
    pub zone_name: Option<String>,
    /// Liveness timeout.
    pub timeout_ms: i64,
    /// `None` for brokers too old to send the flag.
    pub enable_acting_master: Option<bool>,
    /// The broker's topics and their version.
    pub topics: TopicConfigSerializeWrapper,
    /// Filter servers (legacy).
    pub filter_servers: Vec<String>,
    /// The connection it arrived on.
    pub connection: Option<ConnectionId>,
}

/// The REGISTER_BROKER answer: the master's addresses, for slaves.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegisterResult {
    /// The master's HA address.
    pub ha_server_addr: Option<String>,
    /// The master's address.
    pub master_addr: Option<String>,
}

/// The route registry. See the module docs.
#[derive(Clone, Debug, Default)]
pub struct RouteTable {
    topic_queue: BTreeMap<String, BTreeMap<String, QueueData>>,
    broker_addr: BTreeMap<String, BrokerData>,
    cluster_addr: BTreeMap<String, BTreeSet<String>>,
    broker_live: BTreeMap<BrokerKey, BrokerLive>,
    filter_server: BTreeMap<BrokerKey, Vec<String>>,
}

fn queue_data_of(broker_name: &str, config: &TopicConfig, perm: i32) -> QueueData {
    QueueData {
        broker_name: broker_name.to_owned(),
        read_queue_nums: config.read_queue_nums,
        write_queue_nums: config.write_queue_nums,
        perm,
        topic_sys_flag: config.topic_sys_flag,
    }
}

impl RouteTable {
    /// An empty table.
    pub fn new() -> RouteTable {
        RouteTable::default()
    }

    /// Applies a registration (RocketMQ `registerBroker`). Returns `None` when it is refused
    /// as stale (an older state version than the member already registered under that id).
    pub fn register(&mut self, registration: Registration, now_ms: i64) -> Option<RegisterResult> {
        assert!(!registration.addr.is_empty() && !registration.broker_name.is_empty());
        let key = BrokerKey {
            cluster: registration.cluster.clone(),
            addr: registration.addr.clone(),
        };
        if self.is_stale(&registration) {
            log::warn!(
                "refusing stale registration of {} ({}, id {})",
                registration.addr,
                registration.broker_name,
                registration.broker_id
            );
            self.unregister(&key);
            return None;
        }
        let register_first = self.add_member(&registration);
        self.update_topics(&registration, register_first);
        let live = BrokerLive {
            broker_name: registration.broker_name.clone(),
            broker_id: registration.broker_id,
            last_update_ms: now_ms,
            timeout_ms: registration.timeout_ms,
            data_version: registration.topics.data_version.clone(),
            ha_server_addr: registration.ha_server_addr.clone(),
            connection: registration.connection,
        };
        if self.broker_live.insert(key.clone(), live).is_none() {
            log::info!(
                "new broker registered: {} {} id {} in {}",
                registration.broker_name,
                registration.addr,
                registration.broker_id,
                registration.cluster
            );
        }
        if registration.filter_servers.is_empty() {
            self.filter_server.remove(&key);
        } else {
            self.filter_server
                .insert(key, registration.filter_servers.clone());
        }
        Some(self.master_of(&registration))
    }

    fn is_stale(&self, registration: &Registration) -> bool {
        let Some(broker) = self.broker_addr.get(&registration.broker_name) else {
            return false;
        };
        let Some(old_addr) = broker.broker_addrs.get(&registration.broker_id) else {
            return false;
        };
        if *old_addr == registration.addr {
            return false;
        }
        let old_key = BrokerKey {
            cluster: registration.cluster.clone(),
            addr: old_addr.clone(),
        };
        self.broker_live.get(&old_key).is_some_and(|old| {
            old.data_version.state_version > registration.topics.data_version.state_version
        })
    }

    /// Adds the member to the cluster and broker tables; true when it is new there (the
    /// broker name, or this id of it).
    fn add_member(&mut self, registration: &Registration) -> bool {
        self.cluster_addr
            .entry(registration.cluster.clone())
            .or_default()
            .insert(registration.broker_name.clone());
        let broker_is_new = !self.broker_addr.contains_key(&registration.broker_name);
        let broker = self
            .broker_addr
            .entry(registration.broker_name.clone())
            .or_insert_with(|| BrokerData {
                cluster: registration.cluster.clone(),
                broker_name: registration.broker_name.clone(),
                ..BrokerData::default()
            });
        broker.enable_acting_master = registration.enable_acting_master.unwrap_or(false);
        if registration.zone_name.is_some() {
            broker.zone_name.clone_from(&registration.zone_name);
        }
        // One address has one id: a slave switched to master leaves its old id.
        broker
            .broker_addrs
            .retain(|id, addr| *addr != registration.addr || *id == registration.broker_id);
        let old_addr = broker
            .broker_addrs
            .insert(registration.broker_id, registration.addr.clone());
        // A previous holder of this id at another address is replaced: it leaves the live
        // table too, so members and live entries stay in step.
        if let Some(old_addr) = old_addr.as_ref().filter(|old| **old != registration.addr) {
            let old_key = BrokerKey {
                cluster: registration.cluster.clone(),
                addr: old_addr.clone(),
            };
            self.broker_live.remove(&old_key);
            self.filter_server.remove(&old_key);
        }
        broker_is_new || old_addr.is_none()
    }

    /// Updates the topic table from a master's (or prime slave's) registration.
    fn update_topics(&mut self, registration: &Registration, register_first: bool) {
        let broker = &self.broker_addr[&registration.broker_name];
        let is_master = registration.broker_id == MASTER_BROKER_ID;
        let lowest_id = broker.broker_addrs.keys().next().copied();
        let is_prime_slave = registration.enable_acting_master.is_some()
            && !is_master
            && lowest_id == Some(registration.broker_id);
        if !is_master && !is_prime_slave {
            return;
        }
        let wipe_write = is_prime_slave && broker.enable_acting_master;
        let key = BrokerKey {
            cluster: registration.cluster.clone(),
            addr: registration.addr.clone(),
        };
        let version = &registration.topics.data_version;
        let broker_changed = self.is_broker_topic_config_changed(&key, version);
        let name = &registration.broker_name;
        for config in registration.topics.topic_config_table.values() {
            let topic_missing = self
                .topic_queue
                .get(&config.topic_name)
                .is_none_or(|queues| !queues.contains_key(name));
            if !(register_first || broker_changed || topic_missing) {
                continue;
            }
            let perm = if wipe_write {
                config.perm & !PERM_WRITE
            } else {
                config.perm
            };
            let queue_data = queue_data_of(name, config, perm);
            self.topic_queue
                .entry(config.topic_name.clone())
                .or_default()
                .insert(name.clone(), queue_data);
        }
    }

    /// Removes the topics `broker_name` no longer has (RocketMQ's
    /// `deleteTopicWithBrokerRegistration`): called after a registration when enabled.
    pub fn drop_topics_not_in(&mut self, broker_name: &str, topics: &TopicConfigSerializeWrapper) {
        let stale: Vec<String> = self
            .topic_queue
            .iter()
            .filter(|(topic, queues)| {
                queues.contains_key(broker_name) && !topics.topic_config_table.contains_key(*topic)
            })
            .map(|(topic, _)| topic.clone())
            .collect();
        for topic in stale {
            self.remove_queue_data(&topic, broker_name);
        }
    }

    fn remove_queue_data(&mut self, topic: &str, broker_name: &str) {
        if let Some(queues) = self.topic_queue.get_mut(topic) {
            queues.remove(broker_name);
            if queues.is_empty() {
                self.topic_queue.remove(topic);
            }
        }
    }

    fn master_of(&self, registration: &Registration) -> RegisterResult {
        if registration.broker_id == MASTER_BROKER_ID {
            return RegisterResult::default();
        }
        let broker = &self.broker_addr[&registration.broker_name];
        let Some(master_addr) = broker.master_addr() else {
            return RegisterResult::default();
        };
        let key = BrokerKey {
            cluster: registration.cluster.clone(),
            addr: master_addr.to_owned(),
        };
        match self.broker_live.get(&key) {
            Some(master) => RegisterResult {
                ha_server_addr: Some(master.ha_server_addr.clone()),
                master_addr: Some(master_addr.to_owned()),
            },
            None => RegisterResult::default(),
        }
    }

    /// Removes one member (UNREGISTER_BROKER, expiry, closed connection). When it was the
    /// broker name's last member, the name leaves its cluster and every topic.
    pub fn unregister(&mut self, key: &BrokerKey) -> bool {
        let Some(live) = self.broker_live.remove(key) else {
            return false;
        };
        self.filter_server.remove(key);
        let mut name_gone = false;
        if let Some(broker) = self.broker_addr.get_mut(&live.broker_name) {
            if broker.broker_addrs.get(&live.broker_id) == Some(&key.addr) {
                broker.broker_addrs.remove(&live.broker_id);
            }
            if broker.broker_addrs.is_empty() {
                self.broker_addr.remove(&live.broker_name);
                name_gone = true;
            }
        }
        if name_gone {
            if let Some(names) = self.cluster_addr.get_mut(&key.cluster) {
                names.remove(&live.broker_name);
                if names.is_empty() {
                    self.cluster_addr.remove(&key.cluster);
                }
            }
            let topics: Vec<String> = self.topic_queue.keys().cloned().collect();
            for topic in topics {
                self.remove_queue_data(&topic, &live.broker_name);
            }
        }
        log::info!(
            "broker unregistered: {} {} id {} (name gone: {name_gone})",
            live.broker_name,
            key.addr,
            live.broker_id
        );
        true
    }

    /// The live entry of a member.
    pub fn live(&self, key: &BrokerKey) -> Option<&BrokerLive> {
        self.broker_live.get(key)
    }

    /// Marks a member as heard from now.
    pub fn touch(&mut self, key: &BrokerKey, now_ms: i64) {
        if let Some(live) = self.broker_live.get_mut(key) {
            live.last_update_ms = now_ms;
        }
    }

    /// True when the member is unknown or registered a different topic-config version.
    pub fn is_broker_topic_config_changed(&self, key: &BrokerKey, version: &DataVersion) -> bool {
        self.broker_live
            .get(key)
            .is_none_or(|live| live.data_version != *version)
    }

    /// Members silent past their timeout at `now_ms`.
    pub fn expired(&self, now_ms: i64) -> Vec<BrokerKey> {
        self.broker_live
            .iter()
            .filter(|(_, live)| live.last_update_ms.saturating_add(live.timeout_ms) < now_ms)
            .map(|(key, _)| key.clone())
            .collect()
    }

    /// Members registered over `connection`.
    pub fn registered_on(&self, connection: ConnectionId) -> Vec<BrokerKey> {
        self.broker_live
            .iter()
            .filter(|(_, live)| live.connection == Some(connection))
            .map(|(key, _)| key.clone())
            .collect()
    }

    /// The route of `topic` (RocketMQ `pickupTopicRouteData`), `None` when unknown or when
    /// none of its brokers is known.
    pub fn route(&self, topic: &str) -> Option<TopicRouteData> {
        let queues = self.topic_queue.get(topic)?;
        let mut route = TopicRouteData {
            queue_datas: queues.values().cloned().collect(),
            ..TopicRouteData::default()
        };
        for broker_name in queues.keys() {
            let Some(broker) = self.broker_addr.get(broker_name) else {
                continue;
            };
            route.broker_datas.push(broker.clone());
            for addr in broker.broker_addrs.values() {
                let key = BrokerKey {
                    cluster: broker.cluster.clone(),
                    addr: addr.clone(),
                };
                if let Some(servers) = self.filter_server.get(&key) {
                    route
                        .filter_server_table
                        .insert(addr.clone(), servers.clone());
                }
            }
        }
        (!route.broker_datas.is_empty()).then_some(route)
    }

    /// GET_BROKER_CLUSTER_INFO.
    pub fn cluster_info(&self) -> ClusterInfo {
        ClusterInfo {
            broker_addr_table: self.broker_addr.clone(),
            cluster_addr_table: self.cluster_addr.clone(),
        }
    }

    /// Every topic name.
    pub fn all_topics(&self) -> TopicList {
        TopicList {
            topic_list: self.topic_queue.keys().cloned().collect(),
            broker_addr: None,
        }
    }

    /// Topics served by any broker of `cluster`.
    pub fn topics_by_cluster(&self, cluster: &str) -> TopicList {
        let names = self.cluster_addr.get(cluster);
        let topic_list = self
            .topic_queue
            .iter()
            .filter(|(_, queues)| {
                names.is_some_and(|names| queues.keys().any(|name| names.contains(name)))
            })
            .map(|(topic, _)| topic.clone())
            .collect();
        TopicList {
            topic_list,
            broker_addr: None,
        }
    }

    /// GET_SYSTEM_TOPIC_LIST_FROM_NS: cluster names and broker names (each is a system topic),
    /// plus one broker address to ask for the rest.
    pub fn system_topics(&self) -> TopicList {
        let mut topic_list = BTreeSet::new();
        for (cluster, names) in &self.cluster_addr {
            topic_list.insert(cluster.clone());
            topic_list.extend(names.iter().cloned());
        }
        let broker_addr = self
            .broker_addr
            .values()
            .find_map(|broker| broker.broker_addrs.values().next().cloned());
        TopicList {
            topic_list,
            broker_addr,
        }
    }

    /// Topics whose queue data matches `predicate` on the topic sys flag (unit topic lists).
    fn topics_with_flag(&self, predicate: impl Fn(i32) -> bool) -> TopicList {
        let topic_list = self
            .topic_queue
            .iter()
            .filter(|(_, queues)| {
                queues
                    .values()
                    .next()
                    .is_some_and(|queue| predicate(queue.topic_sys_flag))
            })
            .map(|(topic, _)| topic.clone())
            .collect();
        TopicList {
            topic_list,
            broker_addr: None,
        }
    }

    /// GET_UNIT_TOPIC_LIST.
    pub fn unit_topics(&self) -> TopicList {
        self.topics_with_flag(|flag| flag & TOPIC_SYS_FLAG_UNIT != 0)
    }

    /// GET_HAS_UNIT_SUB_TOPIC_LIST.
    pub fn has_unit_sub_topics(&self) -> TopicList {
        self.topics_with_flag(|flag| flag & TOPIC_SYS_FLAG_UNIT_SUB != 0)
    }

    /// GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST.
    pub fn has_unit_sub_ununit_topics(&self) -> TopicList {
        self.topics_with_flag(|flag| {
            flag & TOPIC_SYS_FLAG_UNIT == 0 && flag & TOPIC_SYS_FLAG_UNIT_SUB != 0
        })
    }

    /// DELETE_TOPIC_IN_NAMESRV: the whole topic, or only its queues on `cluster`'s brokers.
    pub fn delete_topic(&mut self, topic: &str, cluster: Option<&str>) {
        let Some(cluster) = cluster.filter(|cluster| !cluster.is_empty()) else {
            self.topic_queue.remove(topic);
            return;
        };
        let names: Vec<String> = self
            .cluster_addr
            .get(cluster)
            .map(|names| names.iter().cloned().collect())
            .unwrap_or_default();
        for name in names {
            self.remove_queue_data(topic, &name);
        }
    }

    /// REGISTER_TOPIC_IN_NAMESRV: adds queue datas of known brokers to `topic`.
    pub fn register_topic(&mut self, topic: &str, queue_datas: &[QueueData]) {
        for queue in queue_datas {
            if self.broker_addr.contains_key(&queue.broker_name) {
                self.topic_queue
                    .entry(topic.to_owned())
                    .or_default()
                    .insert(queue.broker_name.clone(), queue.clone());
            }
        }
    }

    /// Clears (`grant == false`) or sets the write bit of every queue of `broker_name`;
    /// returns how many queue datas it touched.
    pub fn set_write_perm(&mut self, broker_name: &str, grant: bool) -> i32 {
        let mut count = 0i32;
        for queues in self.topic_queue.values_mut() {
            if let Some(queue) = queues.get_mut(broker_name) {
                queue.perm = if grant {
                    queue.perm | PERM_WRITE
                } else {
                    queue.perm & !PERM_WRITE
                };
                count = count.saturating_add(1);
            }
        }
        count
    }

    /// Number of live members.
    pub fn live_count(&self) -> usize {
        self.broker_live.len()
    }

    /// Checks the invariants of the module docs; `Err` names the first one broken.
    pub fn check_invariants(&self) -> Result<(), BrokenInvariant> {
        use BrokenInvariant::*;
        for (cluster, names) in &self.cluster_addr {
            for name in names {
                let broker = self.broker_addr.get(name).ok_or_else(|| UnknownMember {
                    cluster: cluster.clone(),
                    name: name.clone(),
                })?;
                if broker.broker_addrs.is_empty() {
                    return Err(NoAddress { name: name.clone() });
                }
            }
        }
        for (name, broker) in &self.broker_addr {
            let listed = self.cluster_addr.get(&broker.cluster);
            if !listed.is_some_and(|names| names.contains(name)) {
                return Err(NotInCluster {
                    name: name.clone(),
                    cluster: broker.cluster.clone(),
                });
            }
            let addrs: BTreeSet<&String> = broker.broker_addrs.values().collect();
            if addrs.len() != broker.broker_addrs.len() {
                return Err(AddressUnderTwoIds { name: name.clone() });
            }
            for addr in broker.broker_addrs.values() {
                let key = BrokerKey {
                    cluster: broker.cluster.clone(),
                    addr: addr.clone(),
                };
                if !self.broker_live.contains_key(&key) {
                    return Err(MemberNotLive {
                        name: name.clone(),
                        addr: addr.clone(),
                    });
                }
            }
        }
        for (key, live) in &self.broker_live {
            let broker = self.broker_addr.get(&live.broker_name);
            let addr = broker.and_then(|broker| broker.broker_addrs.get(&live.broker_id));
            if addr != Some(&key.addr) {
                return Err(LiveNotMember {
                    addr: key.addr.clone(),
                    id: live.broker_id,
                });
            }
        }
        for (topic, queues) in &self.topic_queue {
            if queues.is_empty() {
                return Err(TopicWithoutQueues {
                    topic: topic.clone(),
                });
            }
            for name in queues.keys() {
                if !self.broker_addr.contains_key(name) {
                    return Err(TopicOnUnknownBroker {
                        topic: topic.clone(),
                        name: name.clone(),
                    });
                }
            }
        }
        Ok(())
    }
}

/// An invariant of the route table (see the module docs) that does not hold.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BrokenInvariant {
    /// A cluster lists a broker name the table does not know.
    #[error("{cluster} lists unknown {name}")]
    UnknownMember {
        /// The cluster.
        cluster: String,
        /// The broker name.
        name: String,
    },
    /// A broker name without any member address.
    #[error("{name} has no address")]
    NoAddress {
        /// The broker name.
        name: String,
    },
    /// A broker name its cluster does not list.
    #[error("{name} missing from cluster {cluster}")]
    NotInCluster {
        /// The broker name.
        name: String,
        /// Its cluster.
        cluster: String,
    },
    /// One address registered under two broker ids.
    #[error("{name} has an address under two ids")]
    AddressUnderTwoIds {
        /// The broker name.
        name: String,
    },
    /// A member address without a liveness entry.
    #[error("{name} member {addr} is not live")]
    MemberNotLive {
        /// The broker name.
        name: String,
        /// The member's address.
        addr: String,
    },
    /// A liveness entry that is not a member address.
    #[error("live {addr} is not member {id}")]
    LiveNotMember {
        /// The live address.
        addr: String,
        /// The broker id it claims.
        id: i64,
    },
    /// A topic route without queues.
    #[error("{topic} has no queues")]
    TopicWithoutQueues {
        /// The topic.
        topic: String,
    },
    /// A topic route naming a broker the table does not know.
    #[error("{topic} names unknown broker {name}")]
    TopicOnUnknownBroker {
        /// The topic.
        topic: String,
        /// The broker name.
        name: String,
    },
}
