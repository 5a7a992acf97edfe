//! Bodies of the broker-to-client diagnostic requests the Java client answers
//! (docs/protocol.md#broker-to-client-requests) and of the admin requests relayed to them:
//! ConsumerRunningInfo (307), ConsumeMessageDirectlyResult (309), GetConsumerStatusBody (221, 223)
//! and QueryConsumeTimeSpanBody (303).
//!
//! Java's admin tool keys these by MessageQueue objects (J2); they are written in fastjson's
//! object-key form. Property names follow fastjson's getter rule (first letter lowered only),
//! hence `pullRT`, `consumeOKTPS`, `cachedMsgSizeInMiB`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{json_bodies, MessageQueue, SubscriptionData};
use crate::json::{json_enum, lenient, object_key_map};

/// `properties` key of [`ConsumerRunningInfo`]: name-server addresses.
pub const PROP_NAMESERVER_ADDR: &str = "PROP_NAMESERVER_ADDR";
/// `properties` key: consume thread pool core size.
pub const PROP_THREADPOOL_CORE_SIZE: &str = "PROP_THREADPOOL_CORE_SIZE";
/// `properties` key: `"true"` for orderly consumers (the Java constant's text).
pub const PROP_CONSUME_ORDERLY: &str = "PROP_CONSUMEORDERLY";
/// `properties` key: the ConsumeType name; admin tools require it.
pub const PROP_CONSUME_TYPE: &str = "PROP_CONSUME_TYPE";
/// `properties` key: client version.
pub const PROP_CLIENT_VERSION: &str = "PROP_CLIENT_VERSION";
/// `properties` key: consumer start time, ms; admin tools parse it as a long.
pub const PROP_CONSUMER_START_TIMESTAMP: &str = "PROP_CONSUMER_START_TIMESTAMP";

/// A push consumer's view of one queue it processes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ProcessQueueInfo {
    /// Largest offset of a cached message.
    #[serde(deserialize_with = "lenient::i64")]
    pub cached_msg_max_offset: i64,
    /// Smallest offset of a cached message.
    #[serde(deserialize_with = "lenient::i64")]
    pub cached_msg_min_offset: i64,
    /// Cached messages.
    #[serde(deserialize_with = "lenient::i32")]
    pub cached_msg_count: i32,
    /// Cached bytes, MiB.
    #[serde(rename = "cachedMsgSizeInMiB", deserialize_with = "lenient::i32")]
    pub cached_msg_size_in_mib: i32,
    /// Offset the consumer will commit.
    #[serde(deserialize_with = "lenient::i64")]
    pub commit_offset: i64,
    /// The queue was dropped by a rebalance.
    #[serde(deserialize_with = "lenient::bool")]
    pub dropped: bool,
    /// Last consume time, ms.
    #[serde(deserialize_with = "lenient::i64")]
    pub last_consume_timestamp: i64,
    /// Last lock time, ms (orderly).
    #[serde(deserialize_with = "lenient::i64")]
    pub last_lock_timestamp: i64,
    /// Last pull time, ms.
    #[serde(deserialize_with = "lenient::i64")]
    pub last_pull_timestamp: i64,
    /// Holds the broker lock (orderly).
    #[serde(deserialize_with = "lenient::bool")]
    pub locked: bool,
    /// Messages in an orderly transaction.
    #[serde(deserialize_with = "lenient::i32")]
    pub transaction_msg_count: i32,
    /// Largest offset in the transaction.
    #[serde(deserialize_with = "lenient::i64")]
    pub transaction_msg_max_offset: i64,
    /// Smallest offset in the transaction.
    #[serde(deserialize_with = "lenient::i64")]
    pub transaction_msg_min_offset: i64,
    /// Failed unlock attempts.
    #[serde(deserialize_with = "lenient::i64")]
    pub try_unlock_times: i64,
}

/// A pop consumer's view of one queue.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PopProcessQueueInfo {
    /// The queue was dropped.
    #[serde(deserialize_with = "lenient::bool")]
    pub dropped: bool,
    /// Last pop time, ms.
    #[serde(deserialize_with = "lenient::i64")]
    pub last_pop_timestamp: i64,
    /// Messages awaiting ack.
    #[serde(deserialize_with = "lenient::i32")]
    pub wait_ack_count: i32,
}

/// Per-topic rates of a consumer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConsumeStatus {
    /// Failed messages in the last hour.
    #[serde(rename = "consumeFailedMsgs", deserialize_with = "lenient::i64")]
    pub consume_failed_msgs: i64,
    /// Failed consumptions per second.
    #[serde(rename = "consumeFailedTPS")]
    pub consume_failed_tps: f64,
    /// Successful consumptions per second.
    #[serde(rename = "consumeOKTPS")]
    pub consume_ok_tps: f64,
    /// Consume latency, ms.
    #[serde(rename = "consumeRT")]
    pub consume_rt: f64,
    /// Pull latency, ms.
    #[serde(rename = "pullRT")]
    pub pull_rt: f64,
    /// Pulls per second.
    #[serde(rename = "pullTPS")]
    pub pull_tps: f64,
}

/// GET_CONSUMER_RUNNING_INFO response body.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConsumerRunningInfo {
    /// Thread dump, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jstack: Option<String>,
    /// Pop queues.
    #[serde(rename = "mqPopTable", with = "object_key_map")]
    pub mq_pop_table: BTreeMap<MessageQueue, PopProcessQueueInfo>,
    /// Push queues.
    #[serde(rename = "mqTable", with = "object_key_map")]
    pub mq_table: BTreeMap<MessageQueue, ProcessQueueInfo>,
    /// Java `Properties`: the `PROP_*` keys; values are usually strings, kept as JSON.
    pub properties: BTreeMap<String, Value>,
    /// Topic to rates.
    #[serde(rename = "statusTable")]
    pub status_table: BTreeMap<String, ConsumeStatus>,
    /// Subscriptions.
    #[serde(rename = "subscriptionSet")]
    pub subscription_set: Vec<SubscriptionData>,
    /// Application-provided extra information.
    #[serde(rename = "userConsumerInfo")]
    pub user_consumer_info: BTreeMap<String, String>,
}

json_enum! {
    /// Outcome of CONSUME_MESSAGE_DIRECTLY.
    pub enum CMResult {
        /// Consumed.
        CR_SUCCESS = 0,
        /// Asked to retry later.
        CR_LATER = 1,
        /// Orderly: rolled back.
        CR_ROLLBACK = 2,
        /// Orderly: committed.
        CR_COMMIT = 3,
        /// The listener threw.
        CR_THROW_EXCEPTION = 4,
        /// The listener returned null.
        CR_RETURN_NULL = 5,
    }
    default CR_SUCCESS
}

/// CONSUME_MESSAGE_DIRECTLY response body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConsumeMessageDirectlyResult {
    /// Auto-commit (orderly).
    #[serde(rename = "autoCommit", deserialize_with = "lenient::bool")]
    pub auto_commit: bool,
    /// The outcome.
    #[serde(rename = "consumeResult", skip_serializing_if = "Option::is_none")]
    pub consume_result: Option<CMResult>,
    /// Orderly listener.
    #[serde(deserialize_with = "lenient::bool")]
    pub order: bool,
    /// Explanation (exception text).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remark: Option<String>,
    /// Time spent, ms (the Java key's spelling).
    #[serde(rename = "spentTimeMills", deserialize_with = "lenient::i64")]
    pub spent_time_mills: i64,
}

impl Default for ConsumeMessageDirectlyResult {
    fn default() -> ConsumeMessageDirectlyResult {
        ConsumeMessageDirectlyResult {
            auto_commit: true,
            consume_result: None,
            order: false,
            remark: None,
            spent_time_mills: 0,
        }
    }
}

/// GET_CONSUMER_STATUS_FROM_CLIENT / INVOKE_BROKER_TO_GET_CONSUMER_STATUS response body.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct GetConsumerStatusBody {
    /// Client id to its queue offsets (broker answer).
    #[serde(rename = "consumerTable")]
    pub consumer_table: BTreeMap<String, QueueOffsets>,
    /// Queue offsets (client answer).
    #[serde(rename = "messageQueueTable", with = "object_key_map")]
    pub message_queue_table: BTreeMap<MessageQueue, i64>,
}

/// A MessageQueue-keyed offset map as a standalone value (used inside
/// [`GetConsumerStatusBody::consumer_table`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct QueueOffsets(#[serde(with = "object_key_map")] pub BTreeMap<MessageQueue, i64>);

/// One queue's time span for QUERY_CONSUME_TIME_SPAN.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct QueueTimeSpan {
    /// Store time of the message at the group's offset, ms.
    #[serde(deserialize_with = "lenient::i64")]
    pub consume_time_stamp: i64,
    /// Consumption delay, ms.
    #[serde(deserialize_with = "lenient::i64")]
    pub delay_time: i64,
    /// Store time of the last message, ms.
    #[serde(deserialize_with = "lenient::i64")]
    pub max_time_stamp: i64,
    /// The queue.
    pub message_queue: MessageQueue,
    /// Store time of the first message, ms.
    #[serde(deserialize_with = "lenient::i64")]
    pub min_time_stamp: i64,
}

/// QUERY_CONSUME_TIME_SPAN response body.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct QueryConsumeTimeSpanBody {
    /// One entry per queue.
    #[serde(rename = "consumeTimeSpanSet")]
    pub consume_time_span_set: Vec<QueueTimeSpan>,
}

json_bodies!(
    ProcessQueueInfo,
    PopProcessQueueInfo,
    ConsumeStatus,
    ConsumerRunningInfo,
    ConsumeMessageDirectlyResult,
    GetConsumerStatusBody,
    QueueTimeSpan,
    QueryConsumeTimeSpanBody
);
