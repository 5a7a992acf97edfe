//! Requests the client sends and the response fields it reads, one function per request
//! (docs/protocol.md#requests, with the keys
//! of docs/protocol.md#producer-conversation and docs/protocol.md#push-consumer-conversation),
//! built on the typed headers of [`comet_proto::headers`] and the JSON bodies of
//! [`comet_proto::body`].
//!
//! Keeping every request the client sends in this one file makes its wire vocabulary easy to
//! audit against the reference (which optional keys it fills, e.g. `bname`, `committed`).

use std::time::Duration;

use comet_proto::body::JsonBody;
use comet_proto::headers::{
    ConsumerSendMsgBackRequestHeader, GetConsumerListByGroupRequestHeader,
    GetMaxOffsetRequestHeader, GetMinOffsetRequestHeader, GetRouteInfoRequestHeader,
    PullMessageRequestHeader, PullMessageResponseHeader, QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader, SendMessageRequestHeaderV2, UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
};
use comet_proto::{CommandHeader, ExtFields, RemotingCommand, RequestCode, ResponseCode};

pub use comet_proto::body::{
    ConsumeFromWhere as WireConsumeFromWhere, ConsumeType, ConsumerData,
    GetConsumerListByGroupResponseBody, HeartbeatData, LockBatchRequestBody, LockBatchResponseBody,
    MessageModel as WireMessageModel, ProducerData, SubscriptionData, UnlockBatchRequestBody,
};

use crate::error::{ClientError, Result};
use crate::message::MessageQueue;

/// A request carrying a typed header.
pub fn request<H: CommandHeader>(code: RequestCode, header: &H) -> RemotingCommand {
    RemotingCommand::request(code, 0).with_header(header)
}

/// Fails unless `response` has one of the `accepted` codes.
pub fn expect(
    addr: &str,
    response: RemotingCommand,
    accepted: &[ResponseCode],
) -> Result<RemotingCommand> {
    crate::remoting::expect_code(addr, response, accepted)
}

/// Parses a JSON body the way Java peers write it (lenient), naming the body in errors.
pub fn decode_body<T: JsonBody>(what: &'static str, body: &[u8]) -> Result<T> {
    T::decode(body).map_err(|error| ClientError::Json {
        what,
        reason: error.to_string(),
    })
}

/// Parses a strict JSON body with serde (for shapes with no typed body).
pub fn decode_json<T: for<'de> serde::Deserialize<'de>>(
    what: &'static str,
    body: &[u8],
) -> Result<T> {
    serde_json::from_slice(body).map_err(|error| ClientError::Json {
        what,
        reason: error.to_string(),
    })
}

/// Encodes a strict JSON body (the local offset file).
pub fn encode_json<T: serde::Serialize>(value: &T) -> Vec<u8> {
    // Serializing plain structs of strings, numbers and collections cannot fail.
    serde_json::to_vec(value).expect("JSON encoding of a plain struct")
}

/// The `offset` response field of the offset requests.
pub fn offset_field(ext: &ExtFields) -> Result<i64> {
    Ok(ext.required_i64("offset")?)
}

/// GET_ROUTEINFO_BY_TOPIC.
pub fn get_route_info(topic: &str) -> RemotingCommand {
    let header = GetRouteInfoRequestHeader {
        topic: topic.to_owned(),
        ..GetRouteInfoRequestHeader::default()
    };
    request(RequestCode::GET_ROUTEINFO_BY_TOPIC, &header)
}

/// QUERY_CONSUMER_OFFSET.
pub fn query_consumer_offset(group: &str, queue: &MessageQueue) -> RemotingCommand {
    let header = QueryConsumerOffsetRequestHeader {
        consumer_group: group.to_owned(),
        topic: queue.topic.clone(),
        queue_id: queue.queue_id,
        set_zero_if_not_found: None,
        broker_name: Some(queue.broker_name.clone()),
    };
    request(RequestCode::QUERY_CONSUMER_OFFSET, &header)
}

/// UPDATE_CONSUMER_OFFSET.
pub fn update_consumer_offset(group: &str, queue: &MessageQueue, offset: i64) -> RemotingCommand {
    let header = UpdateConsumerOffsetRequestHeader {
        consumer_group: group.to_owned(),
        topic: queue.topic.clone(),
        queue_id: queue.queue_id,
        commit_offset: offset,
        broker_name: Some(queue.broker_name.clone()),
    };
    request(RequestCode::UPDATE_CONSUMER_OFFSET, &header)
}

/// GET_MAX_OFFSET (committed = true, as 5.x clients send).
pub fn get_max_offset(queue: &MessageQueue) -> RemotingCommand {
    let header = GetMaxOffsetRequestHeader {
        topic: queue.topic.clone(),
        queue_id: queue.queue_id,
        committed: Some(true),
        broker_name: Some(queue.broker_name.clone()),
        logical: None,
    };
    request(RequestCode::GET_MAX_OFFSET, &header)
}

/// GET_MIN_OFFSET.
pub fn get_min_offset(queue: &MessageQueue) -> RemotingCommand {
    let header = GetMinOffsetRequestHeader {
        topic: queue.topic.clone(),
        queue_id: queue.queue_id,
        broker_name: Some(queue.broker_name.clone()),
        logical: None,
    };
    request(RequestCode::GET_MIN_OFFSET, &header)
}

/// SEARCH_OFFSET_BY_TIMESTAMP (default LOWER boundary: first offset stored at or after).
pub fn search_offset(queue: &MessageQueue, timestamp_ms: i64) -> RemotingCommand {
    let header = SearchOffsetRequestHeader {
        topic: queue.topic.clone(),
        queue_id: queue.queue_id,
        timestamp: timestamp_ms,
        boundary_type: None,
        broker_name: Some(queue.broker_name.clone()),
        logical: None,
    };
    request(RequestCode::SEARCH_OFFSET_BY_TIMESTAMP, &header)
}

/// GET_CONSUMER_LIST_BY_GROUP.
pub fn get_consumer_list(group: &str) -> RemotingCommand {
    let header = GetConsumerListByGroupRequestHeader {
        consumer_group: group.to_owned(),
        broker_name: None,
    };
    request(RequestCode::GET_CONSUMER_LIST_BY_GROUP, &header)
}

/// UNREGISTER_CLIENT for one producer or consumer group.
pub fn unregister_client(
    client_id: &str,
    producer_group: Option<&str>,
    consumer_group: Option<&str>,
) -> RemotingCommand {
    let header = UnregisterClientRequestHeader {
        client_id: client_id.to_owned(),
        producer_group: producer_group.map(str::to_owned),
        consumer_group: consumer_group.map(str::to_owned),
    };
    request(RequestCode::UNREGISTER_CLIENT, &header)
}

/// Fields of PULL_MESSAGE / LITE_PULL_MESSAGE (docs/protocol.md#pull-message).
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
    /// The expression's type: `TAG` or `SQL92` (`expressionType`).
    pub expression_type: &'static str,
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
    let header = PullMessageRequestHeader {
        consumer_group: pull.group.clone(),
        topic: pull.queue.topic.clone(),
        queue_id: pull.queue.queue_id,
        queue_offset: pull.offset,
        max_msg_nums: pull.max_messages,
        sys_flag: pull.sys_flag,
        commit_offset: pull.commit_offset,
        suspend_timeout_millis: i64::try_from(pull.suspend.as_millis()).unwrap_or(i64::MAX),
        subscription: pull.subscription.clone(),
        sub_version: pull.sub_version,
        expression_type: Some(pull.expression_type.into()),
        max_msg_bytes: Some(pull.max_bytes),
        broker_name: Some(pull.queue.broker_name.clone()),
        ..PullMessageRequestHeader::default()
    };
    request(code, &header)
}

/// The header of a pull response (all four offsets are always present,
/// docs/protocol.md#pull-responses-always-carry-their-offsets).
pub type PullResponseHeader = PullMessageResponseHeader;

/// Reads a pull response header.
pub fn pull_response_header(ext: &ExtFields) -> Result<PullResponseHeader> {
    Ok(PullMessageResponseHeader::from_ext_fields(ext)?)
}

/// CONSUMER_SEND_MSG_BACK.
pub fn consumer_send_msg_back(header: ConsumerSendMsgBackRequestHeader) -> RemotingCommand {
    request(RequestCode::CONSUMER_SEND_MSG_BACK, &header)
}

/// SEND_MESSAGE_V2 or, for batches, SEND_BATCH_MESSAGE.
pub fn send_message(header: &SendMessageRequestHeaderV2, body: bytes::Bytes) -> RemotingCommand {
    let code = if header.batch == Some(true) {
        RequestCode::SEND_BATCH_MESSAGE
    } else {
        RequestCode::SEND_MESSAGE_V2
    };
    request(code, header).with_body(body)
}

/// SEND_REPLY_MESSAGE_V2: a responder's reply (request-reply), which the broker pushes to the
/// requester.
pub fn send_reply_message(
    header: &SendMessageRequestHeaderV2,
    body: bytes::Bytes,
) -> RemotingCommand {
    request(RequestCode::SEND_REPLY_MESSAGE_V2, header).with_body(body)
}

/// LOCK_BATCH_MQ.
pub fn lock_batch(body: &LockBatchRequestBody) -> RemotingCommand {
    RemotingCommand::request(RequestCode::LOCK_BATCH_MQ, 0).with_body(body.encode())
}

/// UNLOCK_BATCH_MQ.
pub fn unlock_batch(body: &UnlockBatchRequestBody) -> RemotingCommand {
    RemotingCommand::request(RequestCode::UNLOCK_BATCH_MQ, 0).with_body(body.encode())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the send request carries the single-letter keys of
    // docs/protocol.md#producer-conversation, omits `l`
    // when unset and picks the batch code for batches.
    #[test]
    fn send_request_keys() {
        let header = SendMessageRequestHeaderV2 {
            producer_group: "pg".into(),
            topic: "TopicTest".into(),
            default_topic: "TBW102".into(),
            default_topic_queue_nums: 4,
            queue_id: 2,
            sys_flag: 0,
            born_timestamp: 1_700_000_000_000,
            flag: 0,
            properties: Some("WAIT\u{1}true\u{2}".into()),
            reconsume_times: Some(0),
            unit_mode: Some(false),
            max_reconsume_times: None,
            batch: Some(false),
            broker_name: Some("broker-a".into()),
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
            &SendMessageRequestHeaderV2 {
                batch: Some(true),
                ..header
            },
            bytes::Bytes::new(),
        );
        assert_eq!(batch.request_code(), RequestCode::SEND_BATCH_MESSAGE);
    }

    // Proves the pull request carries the keys of
    // docs/protocol.md#push-consumer-conversation step 7, without a
    // `subscription` key for the push consumer.
    #[test]
    fn pull_request_keys() {
        let command = pull_message(&PullRequest {
            group: "cg".into(),
            queue: MessageQueue::new("TopicTest", "broker-a", 3),
            offset: 7,
            max_messages: 32,
            max_bytes: 262_144,
            sys_flag: 2,
            commit_offset: 0,
            suspend: Duration::from_secs(15),
            subscription: None,
            sub_version: 5,
            expression_type: comet_proto::filter::EXPRESSION_TYPE_TAG,
            lite: false,
        });
        assert_eq!(command.request_code(), RequestCode::PULL_MESSAGE);
        let expected = [
            ("consumerGroup", "cg"),
            ("topic", "TopicTest"),
            ("queueId", "3"),
            ("queueOffset", "7"),
            ("maxMsgNums", "32"),
            ("sysFlag", "2"),
            ("commitOffset", "0"),
            ("suspendTimeoutMillis", "15000"),
            ("subVersion", "5"),
            ("expressionType", "TAG"),
            ("maxMsgBytes", "262144"),
            ("bname", "broker-a"),
        ];
        for (key, value) in expected {
            assert_eq!(command.ext_fields.get(key), Some(value), "{key}");
        }
        assert_eq!(command.ext_fields.get("subscription"), None);
    }
}
