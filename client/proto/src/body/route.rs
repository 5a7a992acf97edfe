//! Route bodies served by the name server: TopicRouteData (GET_ROUTEINFO_BY_TOPIC, also the
//! REGISTER_TOPIC_IN_NAMESRV request), ClusterInfo, TopicList and KVTable.
//!
//! `brokerAddrs` is keyed by broker id (0 = master). Java writes the keys bare (`{0:"..."}`)
//! or quoted (`{"0":"..."}`) depending on the requester's version
//! (docs/protocol.md#route-json-quoting-depends-on-the-requester-version); both are read,
//! and quoted keys are written, which every client accepts.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::json_bodies;
use crate::json::lenient;

/// Broker id of a master in `brokerAddrs`.
pub const MASTER_BROKER_ID: i64 = 0;

/// Where a topic lives: its queues per broker and the brokers' addresses.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TopicRouteData {
    /// `"brokerName:queueNums;..."` for ordered topics, from the name server's KV config.
    #[serde(rename = "orderTopicConf", skip_serializing_if = "Option::is_none")]
    pub order_topic_conf: Option<String>,
    /// One entry per broker serving the topic.
    #[serde(rename = "queueDatas")]
    pub queue_datas: Vec<QueueData>,
    /// Addresses of those brokers.
    #[serde(rename = "brokerDatas")]
    pub broker_datas: Vec<BrokerData>,
    /// Broker address to filter-server addresses (legacy, normally empty).
    #[serde(rename = "filterServerTable")]
    pub filter_server_table: BTreeMap<String, Vec<String>>,
    /// 5.x static topics: broker name to mapping info, kept opaque.
    #[serde(
        rename = "topicQueueMappingByBroker",
        skip_serializing_if = "Option::is_none"
    )]
    pub topic_queue_mapping_by_broker: Option<BTreeMap<String, Value>>,
}

/// A topic's queues on one broker.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct QueueData {
    /// Logical broker name.
    #[serde(rename = "brokerName")]
    pub broker_name: String,
    /// Readable queue count.
    #[serde(rename = "readQueueNums", deserialize_with = "lenient::i32")]
    pub read_queue_nums: i32,
    /// Writable queue count.
    #[serde(rename = "writeQueueNums", deserialize_with = "lenient::i32")]
    pub write_queue_nums: i32,
    /// Permission bits: 4 read, 2 write, 1 inherit, 8 priority.
    #[serde(deserialize_with = "lenient::i32")]
    pub perm: i32,
    /// Topic system flag bits (4.x spelled the key `topicSynFlag`).
    #[serde(
        rename = "topicSysFlag",
        alias = "topicSynFlag",
        deserialize_with = "lenient::i32"
    )]
    pub topic_sys_flag: i32,
}

/// One logical broker: its cluster and the address of each member (master and slaves).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BrokerData {
    /// Cluster name.
    pub cluster: String,
    /// Logical broker name.
    #[serde(rename = "brokerName")]
    pub broker_name: String,
    /// Broker id (0 = master) to `ip:port`.
    #[serde(rename = "brokerAddrs")]
    pub broker_addrs: BTreeMap<i64, String>,
    /// 5.x acting-master mode.
    #[serde(rename = "enableActingMaster", deserialize_with = "lenient::bool")]
    pub enable_acting_master: bool,
    /// 5.x zone name.
    #[serde(rename = "zoneName", skip_serializing_if = "Option::is_none")]
    pub zone_name: Option<String>,
}

impl BrokerData {
    /// The master's address, if the broker has a live master.
    pub fn master_addr(&self) -> Option<&str> {
        self.broker_addrs.get(&MASTER_BROKER_ID).map(String::as_str)
    }
}

/// GET_BROKER_CLUSTER_INFO response.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClusterInfo {
    /// Broker name to its data.
    #[serde(rename = "brokerAddrTable")]
    pub broker_addr_table: BTreeMap<String, BrokerData>,
    /// Cluster name to its broker names.
    #[serde(rename = "clusterAddrTable")]
    pub cluster_addr_table: BTreeMap<String, BTreeSet<String>>,
}

/// A set of topic names (GET_ALL_TOPIC_LIST_FROM_NAMESERVER, GET_TOPICS_BY_CLUSTER, ...).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TopicList {
    /// Topic names.
    #[serde(rename = "topicList")]
    pub topic_list: BTreeSet<String>,
    /// Broker that answered, when a broker answers.
    #[serde(rename = "brokerAddr", skip_serializing_if = "Option::is_none")]
    pub broker_addr: Option<String>,
}

/// A string-to-string table (GET_KVLIST_BY_NAMESPACE, GET_BROKER_RUNTIME_INFO, the
/// REGISTER_BROKER response).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct KVTable {
    /// The entries.
    pub table: BTreeMap<String, String>,
}

/// The members (master and slaves) of one logical broker, as the name server knows them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BrokerMemberGroup {
    /// Broker id to `ip:port`.
    #[serde(rename = "brokerAddrs")]
    pub broker_addrs: BTreeMap<i64, String>,
    /// Logical broker name.
    #[serde(rename = "brokerName")]
    pub broker_name: String,
    /// Cluster name.
    pub cluster: String,
}

/// GET_BROKER_MEMBER_GROUP (901, 5.x) response body.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct GetBrokerMemberGroupResponseBody {
    /// The group; absent when the broker name is unknown.
    #[serde(rename = "brokerMemberGroup", skip_serializing_if = "Option::is_none")]
    pub broker_member_group: Option<BrokerMemberGroup>,
}

json_bodies!(
    TopicRouteData,
    QueueData,
    BrokerData,
    ClusterInfo,
    TopicList,
    KVTable,
    BrokerMemberGroup,
    GetBrokerMemberGroupResponseBody
);
