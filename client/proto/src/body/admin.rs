//! Admin bodies
//! (docs/protocol.md#admin-requests, docs/protocol.md#json-body-shapes,
//! docs/protocol.md#config-json-files): consume and topic statistics (per group and
//! broker-wide), connection lists, group lists, subscription-group configs with their wrapper
//! (`subscriptionGroup.json`, GET_ALL_SUBSCRIPTIONGROUP_CONFIG), consume-queue inspection
//! and the delay-offset table (`delayOffset.json`, GET_ALL_DELAY_OFFSET).
//!
//! ConsumeStats and TopicStatsTable are keyed by MessageQueue objects and are written in
//! fastjson's object-key form (J2), the only form Java's admin tools parse.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

use super::{json_bodies, ConsumeFromWhere, ConsumeType, DataVersion, MessageModel};
use super::{MessageQueue, SubscriptionData, TopicConfig};
use crate::code::LanguageCode;
use crate::json::{lenient, object_key_map};

/// Offsets of one queue for one consumer group.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct OffsetWrapper {
    /// Queue max offset.
    #[serde(rename = "brokerOffset", deserialize_with = "lenient::i64")]
    pub broker_offset: i64,
    /// Committed offset (0 if none).
    #[serde(rename = "consumerOffset", deserialize_with = "lenient::i64")]
    pub consumer_offset: i64,
    /// Store time of the message at `consumerOffset - 1`, ms (0 if unknown).
    #[serde(rename = "lastTimestamp", deserialize_with = "lenient::i64")]
    pub last_timestamp: i64,
    /// max(committed, last pulled).
    #[serde(rename = "pullOffset", deserialize_with = "lenient::i64")]
    pub pull_offset: i64,
}

/// GET_CONSUME_STATS response body.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConsumeStats {
    /// Consumption rate, messages per second.
    #[serde(rename = "consumeTps")]
    pub consume_tps: f64,
    /// Per-queue offsets.
    #[serde(rename = "offsetTable", with = "object_key_map")]
    pub offset_table: BTreeMap<MessageQueue, OffsetWrapper>,
}

/// Offsets of one queue of a topic.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TopicOffset {
    /// Store time of the last message, ms.
    #[serde(rename = "lastUpdateTimestamp", deserialize_with = "lenient::i64")]
    pub last_update_timestamp: i64,
    /// One past the last entry.
    #[serde(rename = "maxOffset", deserialize_with = "lenient::i64")]
    pub max_offset: i64,
    /// First entry.
    #[serde(rename = "minOffset", deserialize_with = "lenient::i64")]
    pub min_offset: i64,
}

/// GET_TOPIC_STATS_INFO response body.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TopicStatsTable {
    /// Per-queue offsets.
    #[serde(rename = "offsetTable", with = "object_key_map")]
    pub offset_table: BTreeMap<MessageQueue, TopicOffset>,
    /// Put rate, messages per second.
    #[serde(rename = "topicPutTps")]
    pub topic_put_tps: f64,
}

/// One client connection, as the broker sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Connection {
    /// Remote address, `ip:port`.
    #[serde(rename = "clientAddr")]
    pub client_addr: String,
    /// Client id.
    #[serde(rename = "clientId")]
    pub client_id: String,
    /// Client language, written by name.
    #[serde(with = "language_name")]
    pub language: LanguageCode,
    /// Client version ordinal.
    #[serde(deserialize_with = "lenient::i32")]
    pub version: i32,
}

impl Default for Connection {
    fn default() -> Connection {
        Connection {
            client_addr: String::new(),
            client_id: String::new(),
            language: LanguageCode::JAVA,
            version: 0,
        }
    }
}

/// GET_CONSUMER_CONNECTION_LIST response body.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConsumerConnection {
    /// Live connections of the group.
    #[serde(rename = "connectionSet")]
    pub connection_set: Vec<Connection>,
    /// The group's start position.
    #[serde(rename = "consumeFromWhere", skip_serializing_if = "Option::is_none")]
    pub consume_from_where: Option<ConsumeFromWhere>,
    /// Pull, push or pop.
    #[serde(rename = "consumeType", skip_serializing_if = "Option::is_none")]
    pub consume_type: Option<ConsumeType>,
    /// Clustering or broadcasting.
    #[serde(rename = "messageModel", skip_serializing_if = "Option::is_none")]
    pub message_model: Option<MessageModel>,
    /// Topic to subscription.
    #[serde(rename = "subscriptionTable")]
    pub subscription_table: BTreeMap<String, SubscriptionData>,
}

/// GET_PRODUCER_CONNECTION_LIST response body.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProducerConnection {
    /// Live connections of the group.
    #[serde(rename = "connectionSet")]
    pub connection_set: Vec<Connection>,
}

/// QUERY_TOPIC_CONSUME_BY_WHO response body.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct GroupList {
    /// Group names.
    #[serde(rename = "groupList")]
    pub group_list: BTreeSet<String>,
}

/// A 5.x subscription entry of a group config.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SimpleSubscriptionData {
    /// Expression.
    pub expression: String,
    /// `TAG` or `SQL92`.
    #[serde(rename = "expressionType")]
    pub expression_type: String,
    /// Topic.
    pub topic: String,
    /// Version.
    #[serde(deserialize_with = "lenient::i64")]
    pub version: i64,
}

fn yes() -> bool {
    true
}

/// A consumer group's configuration on a broker. Missing members take Java's defaults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SubscriptionGroupConfig {
    /// 5.x attributes.
    pub attributes: BTreeMap<String, String>,
    /// Broker id to consume from.
    #[serde(rename = "brokerId", deserialize_with = "lenient::i64")]
    pub broker_id: i64,
    /// Broadcasting allowed.
    #[serde(rename = "consumeBroadcastEnable", deserialize_with = "lenient::bool")]
    pub consume_broadcast_enable: bool,
    /// Consumption allowed.
    #[serde(rename = "consumeEnable", deserialize_with = "lenient::bool")]
    pub consume_enable: bool,
    /// Start from the min offset for new groups.
    #[serde(rename = "consumeFromMinEnable", deserialize_with = "lenient::bool")]
    pub consume_from_min_enable: bool,
    /// Orderly consumption.
    #[serde(rename = "consumeMessageOrderly", deserialize_with = "lenient::bool")]
    pub consume_message_orderly: bool,
    /// 5.x consume timeout, minutes.
    #[serde(rename = "consumeTimeoutMinute", deserialize_with = "lenient::i32")]
    pub consume_timeout_minute: i32,
    /// Group name.
    #[serde(rename = "groupName")]
    pub group_name: String,
    /// 5.x retry policy (`{"type":"CUSTOMIZED"}` by default), kept as JSON.
    #[serde(rename = "groupRetryPolicy", skip_serializing_if = "Option::is_none")]
    pub group_retry_policy: Option<Value>,
    /// 5.x group sys flag.
    #[serde(rename = "groupSysFlag", deserialize_with = "lenient::i32")]
    pub group_sys_flag: i32,
    /// Send NOTIFY_CONSUMER_IDS_CHANGED on membership changes.
    #[serde(
        rename = "notifyConsumerIdsChangedEnable",
        deserialize_with = "lenient::bool"
    )]
    pub notify_consumer_ids_changed_enable: bool,
    /// Retries before the dead-letter queue.
    #[serde(rename = "retryMaxTimes", deserialize_with = "lenient::i32")]
    pub retry_max_times: i32,
    /// Queues of `%RETRY%<group>`.
    #[serde(rename = "retryQueueNums", deserialize_with = "lenient::i32")]
    pub retry_queue_nums: i32,
    /// 5.x subscriptions.
    #[serde(
        rename = "subscriptionDataSet",
        skip_serializing_if = "Option::is_none"
    )]
    pub subscription_data_set: Option<Vec<SimpleSubscriptionData>>,
    /// Broker id to redirect slow consumers to.
    #[serde(
        rename = "whichBrokerWhenConsumeSlowly",
        deserialize_with = "lenient::i64"
    )]
    pub which_broker_when_consume_slowly: i64,
}

impl Default for SubscriptionGroupConfig {
    fn default() -> SubscriptionGroupConfig {
        SubscriptionGroupConfig {
            attributes: BTreeMap::new(),
            broker_id: 0,
            consume_broadcast_enable: yes(),
            consume_enable: yes(),
            consume_from_min_enable: yes(),
            consume_message_orderly: false,
            consume_timeout_minute: 15,
            group_name: String::new(),
            group_retry_policy: None,
            group_sys_flag: 0,
            notify_consumer_ids_changed_enable: yes(),
            retry_max_times: 16,
            retry_queue_nums: 1,
            subscription_data_set: None,
            which_broker_when_consume_slowly: 1,
        }
    }
}

impl SubscriptionGroupConfig {
    /// A group with Java's defaults.
    pub fn new(group_name: impl Into<String>) -> SubscriptionGroupConfig {
        SubscriptionGroupConfig {
            group_name: group_name.into(),
            ..SubscriptionGroupConfig::default()
        }
    }
}

/// `subscriptionGroup.json` and the GET_ALL_SUBSCRIPTIONGROUP_CONFIG body.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SubscriptionGroupWrapper {
    /// Version of the table.
    #[serde(rename = "dataVersion")]
    pub data_version: DataVersion,
    /// 5.x group to topic to forbidden bits.
    #[serde(rename = "forbiddenTable")]
    pub forbidden_table: BTreeMap<String, BTreeMap<String, i32>>,
    /// Group name to config.
    #[serde(rename = "subscriptionGroupTable")]
    pub subscription_group_table: BTreeMap<String, SubscriptionGroupConfig>,
}

/// UPDATE_AND_CREATE_TOPIC_LIST (18, 5.x) request body.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CreateTopicListRequestBody {
    /// Topics to create or update.
    #[serde(rename = "topicConfigList")]
    pub topic_config_list: Vec<TopicConfig>,
}

/// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST (225, 5.x) request body.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SubscriptionGroupList {
    /// Groups to create or update.
    #[serde(rename = "groupConfigList")]
    pub group_config_list: Vec<SubscriptionGroupConfig>,
}

json_bodies!(
    CreateTopicListRequestBody,
    SubscriptionGroupList,
    OffsetWrapper,
    ConsumeStats,
    TopicOffset,
    TopicStatsTable,
    Connection,
    ConsumerConnection,
    ProducerConnection,
    GroupList,
    SimpleSubscriptionData,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper
);

/// Serde for [`LanguageCode`] in bodies: written by name (fastjson cannot read numbers,
/// J7), read by name or by the binary header's byte.
mod language_name {
    use super::*;

    pub fn serialize<S: Serializer>(code: &LanguageCode, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(code.name().unwrap_or("OTHER"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<LanguageCode, D::Error> {
        deserializer.deserialize_any(LanguageVisitor)
    }

    struct LanguageVisitor;

    impl Visitor<'_> for LanguageVisitor {
        type Value = LanguageCode;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a LanguageCode name or byte")
        }
        fn visit_str<E: de::Error>(self, value: &str) -> Result<LanguageCode, E> {
            LanguageCode::from_name(value)
                .ok_or_else(|| E::custom(format!("unknown LanguageCode {value:?}")))
        }
        fn visit_u64<E: de::Error>(self, value: u64) -> Result<LanguageCode, E> {
            u8::try_from(value)
                .map(LanguageCode::from)
                .map_err(|_| E::custom(format!("LanguageCode byte {value} out of range")))
        }
        fn visit_unit<E: de::Error>(self) -> Result<LanguageCode, E> {
            Ok(LanguageCode::OTHER)
        }
    }
}

/// One consume-queue entry of a QUERY_CONSUME_QUEUE answer (Java's ConsumeQueueData). The
/// extension members (`extendDataJson`, `bitMap`, `eval`, `msg`) describe RocketMQ's
/// consume-queue extension file, which Comet does not write; they stay absent or false.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ConsumeQueueData {
    /// Commit-log offset of the record.
    #[serde(deserialize_with = "lenient::i64")]
    pub physic_offset: i64,
    /// Record size, bytes.
    #[serde(deserialize_with = "lenient::i32")]
    pub physic_size: i32,
    /// Tag hash code (the due time on the schedule topic).
    #[serde(deserialize_with = "lenient::i64")]
    pub tags_code: i64,
    /// Extension unit as JSON.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extend_data_json: Option<String>,
    /// Extension filter bit map.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bit_map: Option<String>,
    /// Whether the group's filter matched the extension unit.
    pub eval: bool,
    /// Diagnostic message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub msg: Option<String>,
}

/// QUERY_CONSUME_QUEUE response body.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct QueryConsumeQueueResponseBody {
    /// The group's live subscription to the topic, when a group was asked about and is
    /// subscribed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscription_data: Option<SubscriptionData>,
    /// Filter description (Java: the SQL92 filter data, or "<group>@<topic> is not online!").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter_data: Option<String>,
    /// The entries, first at the requested index; absent when the index is outside the
    /// queue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_data: Option<Vec<ConsumeQueueData>>,
    /// One past the last entry.
    #[serde(deserialize_with = "lenient::i64")]
    pub max_queue_index: i64,
    /// First entry with a record.
    #[serde(deserialize_with = "lenient::i64")]
    pub min_queue_index: i64,
}

/// GET_BROKER_CONSUME_STATS response body: for each subscription group, one ConsumeStats
/// per topic it has offsets for, each list in a one-entry map keyed by the group.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ConsumeStatsList {
    /// `[{group: [ConsumeStats, ...]}, ...]`.
    pub consume_stats_list: Vec<BTreeMap<String, Vec<ConsumeStats>>>,
    /// The broker's address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broker_addr: Option<String>,
    /// Sum of `brokerOffset - consumerOffset` over every queue listed.
    #[serde(deserialize_with = "lenient::i64")]
    pub total_diff: i64,
    /// 5.x: sum of `pullOffset - consumerOffset` over every queue listed.
    #[serde(deserialize_with = "lenient::i64")]
    pub total_inflight_diff: i64,
}

/// `delayOffset.json` and the GET_ALL_DELAY_OFFSET body: delay level (1-based) to the next
/// offset of schedule queue `level - 1` to deliver. Java writes the keys bare (`{1:5}`);
/// both forms are read, quoted keys are written.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DelayOffsetSerializeWrapper {
    /// 5.x version stamp (a 5.x slave reads it unconditionally).
    #[serde(rename = "dataVersion", skip_serializing_if = "Option::is_none")]
    pub data_version: Option<DataVersion>,
    /// Delay level to next offset.
    #[serde(rename = "offsetTable")]
    pub offset_table: BTreeMap<i32, i64>,
}

json_bodies!(
    ConsumeQueueData,
    QueryConsumeQueueResponseBody,
    ConsumeStatsList,
    DelayOffsetSerializeWrapper
);
