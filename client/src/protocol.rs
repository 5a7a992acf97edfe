//! Requests the client sends and the response fields it reads, one function per request
//! (reference 3.1-3.9, with the keys of 8.2 and 8.3).
//!
//! Each builder writes the Java field names as ext keys; each reader takes the response
//! fields with Java's parsing rules through [`ExtFields`]. Keeping every key in this one file
//! makes the client's wire vocabulary easy to audit against the reference.
//!
//! The JSON bodies the client needs besides the route (heartbeat, consumer list, lock batch,
//! consume stats, connections) are small serde structs here as well.

use std::collections::BTreeMap;
use std::time::Duration;

use comet_proto::{ExtFields, RemotingCommand, RequestCode, ResponseCode};
use serde::{Deserialize, Serialize};

use crate::error::{ClientError, Result};
use crate::message::MessageQueue;

/// A request with ext fields.
pub fn request(code: RequestCode, fields: &[(&str, String)]) -> RemotingCommand {
    let mut command = RemotingCommand::request(code, 0);
    for (key, value) in fields {
        command.ext_fields.insert(*key, value.clone());
    }
    command
}

/// Fails unless `response` has one of the `accepted` codes.
pub fn expect(
    addr: &str,
    response: RemotingCommand,
    accepted: &[ResponseCode],
) -> Result<RemotingCommand> {
    crate::remoting::expect_code(addr, response, accepted)
}

/// Parses a JSON body with serde, naming the body in the error.
pub fn decode_json<T: for<'de> Deserialize<'de>>(what: &'static str, body: &[u8]) -> Result<T> {
    serde_json::from_slice(body).map_err(|error| ClientError::Json {
        what,
        reason: error.to_string(),
    })
}

/// Encodes a JSON body.
pub fn encode_json<T: Serialize>(value: &T) -> Vec<u8> {
    // Serializing plain structs of strings, numbers and collections cannot fail.
    serde_json::to_vec(value).expect("JSON encoding of a plain struct")
}

/// The `offset` response field of the offset requests.
pub fn offset_field(ext: &ExtFields) -> Result<i64> {
    Ok(ext.required_i64("offset")?)
}

/// GET_ROUTEINFO_BY_TOPIC.
pub fn get_route_info(topic: &str) -> RemotingCommand {
    request(
        RequestCode::GET_ROUTEINFO_BY_TOPIC,
        &[("topic", topic.to_owned())],
    )
}

/// QUERY_CONSUMER_OFFSET.
pub fn query_consumer_offset(group: &str, queue: &MessageQueue) -> RemotingCommand {
    let mut command = request(
        RequestCode::QUERY_CONSUMER_OFFSET,
        &[
            ("consumerGroup", group.to_owned()),
            ("topic", queue.topic.clone()),
            ("queueId", queue.queue_id.to_string()),
        ],
    );
    command
        .ext_fields
        .insert("bname", queue.broker_name.clone());
    command
}

/// UPDATE_CONSUMER_OFFSET.
pub fn update_consumer_offset(group: &str, queue: &MessageQueue, offset: i64) -> RemotingCommand {
    request(
        RequestCode::UPDATE_CONSUMER_OFFSET,
        &[
            ("consumerGroup", group.to_owned()),
            ("topic", queue.topic.clone()),
            ("queueId", queue.queue_id.to_string()),
            ("commitOffset", offset.to_string()),
            ("bname", queue.broker_name.clone()),
        ],
    )
}

/// GET_MAX_OFFSET (committed = true, as 5.x clients send).
pub fn get_max_offset(queue: &MessageQueue) -> RemotingCommand {
    request(
        RequestCode::GET_MAX_OFFSET,
        &[
            ("topic", queue.topic.clone()),
            ("queueId", queue.queue_id.to_string()),
            ("committed", "true".into()),
            ("bname", queue.broker_name.clone()),
        ],
    )
}

/// GET_MIN_OFFSET.
pub fn get_min_offset(queue: &MessageQueue) -> RemotingCommand {
    request(
        RequestCode::GET_MIN_OFFSET,
        &[
            ("topic", queue.topic.clone()),
            ("queueId", queue.queue_id.to_string()),
            ("bname", queue.broker_name.clone()),
        ],
    )
}

/// SEARCH_OFFSET_BY_TIMESTAMP (LOWER boundary: first offset stored at or after).
pub fn search_offset(queue: &MessageQueue, timestamp_ms: i64) -> RemotingCommand {
    request(
        RequestCode::SEARCH_OFFSET_BY_TIMESTAMP,
        &[
            ("topic", queue.topic.clone()),
            ("queueId", queue.queue_id.to_string()),
            ("timestamp", timestamp_ms.to_string()),
            ("bname", queue.broker_name.clone()),
        ],
    )
}

/// GET_CONSUMER_LIST_BY_GROUP.
pub fn get_consumer_list(group: &str) -> RemotingCommand {
    request(
        RequestCode::GET_CONSUMER_LIST_BY_GROUP,
        &[("consumerGroup", group.to_owned())],
    )
}

/// UNREGISTER_CLIENT for one producer or consumer group.
pub fn unregister_client(
    client_id: &str,
    producer_group: Option<&str>,
    consumer_group: Option<&str>,
) -> RemotingCommand {
    let mut command = request(
        RequestCode::UNREGISTER_CLIENT,
        &[("clientID", client_id.to_owned())],
    );
    command
        .ext_fields
        .insert_opt("producerGroup", producer_group);
    command
        .ext_fields
        .insert_opt("consumerGroup", consumer_group);
    command
}

/// Fields of PULL_MESSAGE / LITE_PULL_MESSAGE (reference 3.2).
#[derive(Clone, Debug)]
pub struct PullRequest {
    /// Consumer group.
    pub group: String,
    /// Queue to pull.
    pub queue: MessageQueue,
    /// Offset to start from.
    pub offset: i64,
    /// Most messages to return.
    pub max_messages: i32,
    /// Most bytes to return.
    pub max_bytes: i32,
    /// PullSysFlag bits.
    pub sys_flag: i32,
    /// Offset to commit when the commit bit is set.
    pub commit_offset: i64,
    /// Long-poll hold.
    pub suspend: Duration,
    /// Expression, sent when the subscription bit is set.
    pub subscription: Option<String>,
    /// Subscription version.
    pub sub_version: i64,
    /// True for LITE_PULL_MESSAGE.
    pub lite: bool,
}

/// PULL_MESSAGE or LITE_PULL_MESSAGE.
pub fn pull_message(pull: &PullRequest) -> RemotingCommand {
    let code = if pull.lite {
        RequestCode::LITE_PULL_MESSAGE
    } else {
        RequestCode::PULL_MESSAGE
    };
    let suspend_ms = i64::try_from(pull.suspend.as_millis()).unwrap_or(i64::MAX);
    let mut command = request(
        code,
        &[
            ("consumerGroup", pull.group.clone()),
            ("topic", pull.queue.topic.clone()),
            ("queueId", pull.queue.queue_id.to_string()),
            ("queueOffset", pull.offset.to_string()),
            ("maxMsgNums", pull.max_messages.to_string()),
            ("sysFlag", pull.sys_flag.to_string()),
            ("commitOffset", pull.commit_offset.to_string()),
            ("suspendTimeoutMillis", suspend_ms.to_string()),
            ("subVersion", pull.sub_version.to_string()),
            ("expressionType", "TAG".into()),
            ("maxMsgBytes", pull.max_bytes.to_string()),
            ("bname", pull.queue.broker_name.clone()),
        ],
    );
    command
        .ext_fields
        .insert_opt("subscription", pull.subscription.as_deref());
    command
}

/// The header of a pull response (all four fields are always present, trap T6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PullResponseHeader {
    /// Broker id to pull from next.
    pub suggest_which_broker_id: i64,
    /// Offset for the next pull.
    pub next_begin_offset: i64,
    /// Queue minimum.
    pub min_offset: i64,
    /// Queue maximum (one past the last).
    pub max_offset: i64,
}

impl PullResponseHeader {
    /// Reads the header.
    pub fn decode(ext: &ExtFields) -> Result<PullResponseHeader> {
        Ok(PullResponseHeader {
            suggest_which_broker_id: ext.optional_i64("suggestWhichBrokerId")?.unwrap_or(0),
            next_begin_offset: ext.required_i64("nextBeginOffset")?,
            min_offset: ext.required_i64("minOffset")?,
            max_offset: ext.required_i64("maxOffset")?,
        })
    }
}

/// CONSUMER_SEND_MSG_BACK.
pub fn consumer_send_msg_back(
    group: &str,
    commit_log_offset: i64,
    origin_msg_id: &str,
    origin_topic: &str,
    delay_level: i32,
    max_reconsume_times: i32,
    broker_name: &str,
) -> RemotingCommand {
    request(
        RequestCode::CONSUMER_SEND_MSG_BACK,
        &[
            ("offset", commit_log_offset.to_string()),
            ("group", group.to_owned()),
            ("delayLevel", delay_level.to_string()),
            ("originMsgId", origin_msg_id.to_owned()),
            ("originTopic", origin_topic.to_owned()),
            ("unitMode", "false".into()),
            ("maxReconsumeTimes", max_reconsume_times.to_string()),
            ("bname", broker_name.to_owned()),
        ],
    )
}

/// Fields of SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE (reference 3.1, single-letter keys).
#[derive(Clone, Debug)]
pub struct SendHeader {
    /// Producer group (`a`).
    pub producer_group: String,
    /// Topic (`b`).
    pub topic: String,
    /// Auto-create template topic (`c`).
    pub default_topic: String,
    /// Queues when auto-creating (`d`).
    pub default_topic_queue_nums: i32,
    /// Queue id (`e`).
    pub queue_id: i32,
    /// MessageSysFlag (`f`).
    pub sys_flag: i32,
    /// Born time ms (`g`).
    pub born_timestamp: i64,
    /// Application flag (`h`).
    pub flag: i32,
    /// Properties string (`i`).
    pub properties: String,
    /// Reconsume times (`j`).
    pub reconsume_times: i32,
    /// Max reconsume times, retry topics only (`l`).
    pub max_reconsume_times: Option<i32>,
    /// Batch (`m`).
    pub batch: bool,
    /// Target broker name (`n`).
    pub broker_name: String,
}

/// SEND_MESSAGE_V2 or, for batches, SEND_BATCH_MESSAGE.
pub fn send_message(header: &SendHeader, body: bytes::Bytes) -> RemotingCommand {
    let code = if header.batch {
        RequestCode::SEND_BATCH_MESSAGE
    } else {
        RequestCode::SEND_MESSAGE_V2
    };
    let mut command = request(
        code,
        &[
            ("a", header.producer_group.clone()),
            ("b", header.topic.clone()),
            ("c", header.default_topic.clone()),
            ("d", header.default_topic_queue_nums.to_string()),
            ("e", header.queue_id.to_string()),
            ("f", header.sys_flag.to_string()),
            ("g", header.born_timestamp.to_string()),
            ("h", header.flag.to_string()),
            ("i", header.properties.clone()),
            ("j", header.reconsume_times.to_string()),
            ("k", "false".into()),
            ("m", header.batch.to_string()),
            ("n", header.broker_name.clone()),
        ],
    );
    command
        .ext_fields
        .insert_opt("l", header.max_reconsume_times);
    command.body = body;
    command
}

/// HEART_BEAT body (reference 3.15).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HeartbeatData {
    /// `<ip>@<instance>`.
    #[serde(rename = "clientID")]
    pub client_id: String,
    /// Producer groups of this client.
    #[serde(rename = "producerDataSet")]
    pub producer_data_set: Vec<ProducerData>,
    /// Consumer groups of this client.
    #[serde(rename = "consumerDataSet")]
    pub consumer_data_set: Vec<ConsumerData>,
    /// Heartbeat V2 fingerprint; 0 = full heartbeat.
    #[serde(rename = "heartbeatFingerprint")]
    pub heartbeat_fingerprint: i32,
    /// Heartbeat V2 flag.
    #[serde(rename = "withoutSub")]
    pub without_sub: bool,
}

/// One producer group in a heartbeat.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerData {
    /// Group name.
    #[serde(rename = "groupName")]
    pub group_name: String,
}

/// One consumer group in a heartbeat.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ConsumerData {
    /// Group name.
    #[serde(rename = "groupName")]
    pub group_name: String,
    /// `CONSUME_ACTIVELY` (pull) or `CONSUME_PASSIVELY` (push).
    #[serde(rename = "consumeType")]
    pub consume_type: String,
    /// `CLUSTERING` or `BROADCASTING`.
    #[serde(rename = "messageModel")]
    pub message_model: String,
    /// `CONSUME_FROM_*`.
    #[serde(rename = "consumeFromWhere")]
    pub consume_from_where: String,
    /// Subscriptions.
    #[serde(rename = "subscriptionDataSet")]
    pub subscription_data_set: Vec<SubscriptionData>,
    /// Unit mode (always false).
    #[serde(rename = "unitMode")]
    pub unit_mode: bool,
}

/// One subscription in a heartbeat or consumer connection.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SubscriptionData {
    /// Legacy class filter.
    #[serde(rename = "classFilterMode")]
    pub class_filter_mode: bool,
    /// Topic.
    pub topic: String,
    /// Expression as written.
    #[serde(rename = "subString")]
    pub sub_string: String,
    /// Tags of the expression.
    #[serde(rename = "tagsSet")]
    pub tags_set: Vec<String>,
    /// Java hash codes of the tags.
    #[serde(rename = "codeSet")]
    pub code_set: Vec<i32>,
    /// Version (ms timestamp).
    #[serde(rename = "subVersion")]
    pub sub_version: i64,
    /// `TAG`.
    #[serde(rename = "expressionType")]
    pub expression_type: String,
}

/// GET_CONSUMER_LIST_BY_GROUP response body.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct ConsumerIdList {
    /// Client ids.
    #[serde(rename = "consumerIdList")]
    pub consumer_id_list: Vec<String>,
}

/// LOCK_BATCH_MQ / UNLOCK_BATCH_MQ request body.
#[derive(Clone, Debug, Serialize)]
pub struct LockBatchRequestBody {
    /// Owner.
    #[serde(rename = "clientId")]
    pub client_id: String,
    /// Group.
    #[serde(rename = "consumerGroup")]
    pub consumer_group: String,
    /// Queues.
    #[serde(rename = "mqSet")]
    pub mq_set: Vec<MessageQueue>,
    /// Only queues of the receiving broker.
    #[serde(rename = "onlyThisBroker")]
    pub only_this_broker: bool,
}

/// LOCK_BATCH_MQ response body.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct LockBatchResponseBody {
    /// Queues now locked by the requester.
    #[serde(rename = "lockOKMQSet")]
    pub lock_ok_mq_set: Vec<MessageQueue>,
}

/// LOCK_BATCH_MQ.
pub fn lock_batch(body: &LockBatchRequestBody) -> RemotingCommand {
    RemotingCommand::request(RequestCode::LOCK_BATCH_MQ, 0).with_body(encode_json(body))
}

/// UNLOCK_BATCH_MQ.
pub fn unlock_batch(body: &LockBatchRequestBody) -> RemotingCommand {
    RemotingCommand::request(RequestCode::UNLOCK_BATCH_MQ, 0).with_body(encode_json(body))
}

/// The name of a `MessageQueue` map key in fastjson's object-key form, read back.
pub type QueueOffsets = BTreeMap<MessageQueue, i64>;

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the send request carries the single-letter keys of reference 8.2, omits `l`
    // when unset and picks the batch code for batches.
    #[test]
    fn send_request_keys() {
        let header = SendHeader {
            producer_group: "pg".into(),
            topic: "TopicTest".into(),
            default_topic: "TBW102".into(),
            default_topic_queue_nums: 4,
            queue_id: 2,
            sys_flag: 0,
            born_timestamp: 1_700_000_000_000,
            flag: 0,
            properties: "WAIT\u{1}true\u{2}".into(),
            reconsume_times: 0,
            max_reconsume_times: None,
            batch: false,
            broker_name: "broker-a".into(),
        };
        let command = send_message(&header, bytes::Bytes::from_static(b"hi"));
        assert_eq!(command.request_code(), RequestCode::SEND_MESSAGE_V2);
        for (key, value) in [("a", "pg"), ("b", "TopicTest"), ("c", "TBW102"), ("d", "4")] {
            assert_eq!(command.ext_fields.get(key), Some(value));
        }
        assert_eq!(command.ext_fields.get("e"), Some("2"));
        assert_eq!(command.ext_fields.get("m"), Some("false"));
        assert_eq!(command.ext_fields.get("n"), Some("broker-a"));
        assert_eq!(command.ext_fields.get("l"), None);
        let batch = send_message(
            &SendHeader {
                batch: true,
                ..header
            },
            bytes::Bytes::new(),
        );
        assert_eq!(batch.request_code(), RequestCode::SEND_BATCH_MESSAGE);
    }

    // Proves the heartbeat body uses the Java keys (clientID, withoutSub, ...).
    #[test]
    fn heartbeat_keys() {
        let data = HeartbeatData {
            client_id: "127.0.0.1@1#2".into(),
            producer_data_set: vec![ProducerData {
                group_name: "pg".into(),
            }],
            ..HeartbeatData::default()
        };
        let text = String::from_utf8(encode_json(&data)).unwrap();
        assert!(text.contains("\"clientID\":\"127.0.0.1@1#2\""));
        assert!(text.contains("\"producerDataSet\":[{\"groupName\":\"pg\"}]"));
        assert!(text.contains("\"withoutSub\":false"));
    }
}
