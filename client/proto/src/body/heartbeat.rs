//! HEART_BEAT bodies (docs/protocol.md#client-registration,
//! docs/protocol.md#json-body-shapes): HeartbeatData with its consumer, producer and
//! subscription entries, and CHECK_CLIENT_CONFIG's CheckClientRequestBody.
//!
//! Clients disagree on the heartbeat's JSON, so reading is lenient:
//!
//! | Client | Enums | `subVersion` |
//! | --- | --- | --- |
//! | Java, Go, Rust, ali-ons | names (`"CONSUME_PASSIVELY"`) | number |
//! | C++ 1.x-3.x | Java ordinals (`"consumeType":1`) | string (`"1795960958067"`) |
//!
//! The Go client writes tag codes as strings (`"codeSet":["2598919"]`); any collection
//! may arrive as `null`. C++ clients leave out `classFilterMode`, `tagsSet`, `codeSet`,
//! `expressionType`, `unitMode` and `producerDataSet`; missing members take Java's field
//! defaults.
//!
//! Ordinals map to the Java enums: ConsumeType CONSUME_ACTIVELY=0, CONSUME_PASSIVELY=1,
//! CONSUME_POP=2; MessageModel BROADCASTING=0, CLUSTERING=1; ConsumeFromWhere by its Java
//! ordinal, deprecated variants included. A body may end with a newline (C++).
//!
//! Writing always uses names, since fastjson cannot read ordinals (J7).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::json_bodies;
use crate::json::{json_enum, lenient};

json_enum! {
    /// How a consumer gets messages.
    pub enum ConsumeType {
        /// Pull consumer (the application pulls).
        CONSUME_ACTIVELY = 0,
        /// Push consumer (long-polling pulls driven by the client).
        CONSUME_PASSIVELY = 1,
        /// 5.x pop consumer.
        CONSUME_POP = 2,
    }
    default CONSUME_PASSIVELY
}

json_enum! {
    /// How a group shares messages.
    pub enum MessageModel {
        /// Every consumer gets every message.
        BROADCASTING = 0,
        /// Each message goes to one consumer of the group.
        CLUSTERING = 1,
    }
    default CLUSTERING
}

json_enum! {
    /// Where a new group starts consuming (Java ordinals; three variants are deprecated in
    /// Java but keep their ordinals).
    pub enum ConsumeFromWhere {
        /// From the queue's max offset (the default).
        CONSUME_FROM_LAST_OFFSET = 0,
        /// Deprecated: last offset, but min offset on first boot.
        CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = 1,
        /// Deprecated: from the min offset.
        CONSUME_FROM_MIN_OFFSET = 2,
        /// Deprecated: from the max offset.
        CONSUME_FROM_MAX_OFFSET = 3,
        /// From the queue's min offset.
        CONSUME_FROM_FIRST_OFFSET = 4,
        /// From the consumer's configured timestamp.
        CONSUME_FROM_TIMESTAMP = 5,
    }
    default CONSUME_FROM_LAST_OFFSET
}

/// The `expressionType` of a TAG subscription, Java's default.
pub const EXPRESSION_TYPE_TAG: &str = "TAG";
/// The `expressionType` of an SQL92 subscription.
pub const EXPRESSION_TYPE_SQL92: &str = "SQL92";

fn tag_expression_type() -> String {
    EXPRESSION_TYPE_TAG.to_owned()
}

/// One topic subscription of a consumer group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SubscriptionData {
    /// Legacy class filter mode.
    #[serde(rename = "classFilterMode", deserialize_with = "lenient::bool")]
    pub class_filter_mode: bool,
    /// Tag hash codes (Java `String.hashCode` of each tag).
    #[serde(rename = "codeSet", deserialize_with = "lenient::i32_set")]
    pub code_set: BTreeSet<i32>,
    /// `TAG` or `SQL92`.
    #[serde(rename = "expressionType", deserialize_with = "lenient::string")]
    pub expression_type: String,
    /// The expression as written (`TagA || TagB`, `*`).
    #[serde(rename = "subString", deserialize_with = "lenient::string")]
    pub sub_string: String,
    /// Subscription version, ms timestamp (a string from C++ clients).
    #[serde(rename = "subVersion", deserialize_with = "lenient::i64")]
    pub sub_version: i64,
    /// The tags of the expression.
    #[serde(rename = "tagsSet", deserialize_with = "lenient::or_default")]
    pub tags_set: BTreeSet<String>,
    /// Subscribed topic.
    #[serde(deserialize_with = "lenient::string")]
    pub topic: String,
}

impl Default for SubscriptionData {
    fn default() -> SubscriptionData {
        SubscriptionData {
            class_filter_mode: false,
            code_set: BTreeSet::new(),
            expression_type: tag_expression_type(),
            sub_string: String::new(),
            sub_version: 0,
            tags_set: BTreeSet::new(),
            topic: String::new(),
        }
    }
}

/// One consumer group a client belongs to.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConsumerData {
    /// Where a new group starts.
    #[serde(rename = "consumeFromWhere")]
    pub consume_from_where: ConsumeFromWhere,
    /// Pull, push or pop.
    #[serde(rename = "consumeType")]
    pub consume_type: ConsumeType,
    /// Consumer group.
    #[serde(rename = "groupName", deserialize_with = "lenient::string")]
    pub group_name: String,
    /// Clustering or broadcasting.
    #[serde(rename = "messageModel")]
    pub message_model: MessageModel,
    /// Subscriptions, one per topic.
    #[serde(
        rename = "subscriptionDataSet",
        deserialize_with = "lenient::or_default"
    )]
    pub subscription_data_set: Vec<SubscriptionData>,
    /// Unit mode.
    #[serde(rename = "unitMode", deserialize_with = "lenient::bool")]
    pub unit_mode: bool,
}

/// One producer group a client belongs to.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(default)]
pub struct ProducerData {
    /// Producer group.
    #[serde(rename = "groupName", deserialize_with = "lenient::string")]
    pub group_name: String,
}

/// HEART_BEAT request body.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct HeartbeatData {
    /// `<clientIP>@<instanceName>[@unitName]` (Java adds `#<nanoTime>` in 5.x).
    #[serde(rename = "clientID", deserialize_with = "lenient::string")]
    pub client_id: String,
    /// Consumer groups of this client.
    #[serde(rename = "consumerDataSet", deserialize_with = "lenient::or_default")]
    pub consumer_data_set: Vec<ConsumerData>,
    /// 5.x heartbeat V2 fingerprint; 0 for a full heartbeat.
    #[serde(rename = "heartbeatFingerprint", deserialize_with = "lenient::i32")]
    pub heartbeat_fingerprint: i32,
    /// Producer groups of this client.
    #[serde(rename = "producerDataSet", deserialize_with = "lenient::or_default")]
    pub producer_data_set: Vec<ProducerData>,
    /// 5.x heartbeat V2: subscriptions omitted (Java getter `isWithoutSub`).
    #[serde(
        rename = "withoutSub",
        alias = "isWithoutSub",
        deserialize_with = "lenient::bool"
    )]
    pub without_sub: bool,
}

/// CHECK_CLIENT_CONFIG request body: a subscription the broker should validate.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CheckClientRequestBody {
    /// Client id.
    #[serde(rename = "clientId")]
    pub client_id: String,
    /// Consumer group.
    pub group: String,
    /// 5.x namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The subscription to check.
    #[serde(rename = "subscriptionData")]
    pub subscription_data: SubscriptionData,
}

json_bodies!(
    SubscriptionData,
    ConsumerData,
    ProducerData,
    HeartbeatData,
    CheckClientRequestBody
);
