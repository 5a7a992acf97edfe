//! Queue-level consumer bodies
//! (docs/protocol.md#client-registration, docs/protocol.md#queue-locks,
//! docs/protocol.md#admin-requests, docs/protocol.md#config-json-files): MessageQueue, the consumer
//! list, batch lock and unlock, ResetOffsetBody and the `consumerOffset.json` wrapper.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::{json_bodies, DataVersion};
use crate::json::{lenient, object_key_map};

/// One queue of a topic on one broker: `{"brokerName":str,"queueId":int,"topic":str}`.
///
/// Ordered like Java's `MessageQueue.compareTo`: topic, then broker name, then queue id.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(default)]
pub struct MessageQueue {
    /// Topic.
    #[serde(deserialize_with = "lenient::string")]
    pub topic: String,
    /// Logical broker name.
    #[serde(rename = "brokerName", deserialize_with = "lenient::string")]
    pub broker_name: String,
    /// Queue id.
    #[serde(rename = "queueId", deserialize_with = "lenient::i32")]
    pub queue_id: i32,
}

impl MessageQueue {
    /// A queue from its parts.
    pub fn new(topic: impl Into<String>, broker_name: impl Into<String>, queue_id: i32) -> Self {
        MessageQueue {
            topic: topic.into(),
            broker_name: broker_name.into(),
            queue_id,
        }
    }
}

/// GET_CONSUMER_LIST_BY_GROUP response body.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct GetConsumerListByGroupResponseBody {
    /// Client ids of the group's live consumers.
    #[serde(rename = "consumerIdList")]
    pub consumer_id_list: Vec<String>,
}

/// LOCK_BATCH_MQ request body.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LockBatchRequestBody {
    /// Client asking for the locks.
    #[serde(rename = "clientId")]
    pub client_id: String,
    /// Consumer group.
    #[serde(rename = "consumerGroup")]
    pub consumer_group: String,
    /// Queues to lock.
    #[serde(rename = "mqSet")]
    pub mq_set: BTreeSet<MessageQueue>,
    /// 5.x: do not forward to the other replicas.
    #[serde(rename = "onlyThisBroker", deserialize_with = "lenient::bool")]
    pub only_this_broker: bool,
}

/// UNLOCK_BATCH_MQ request body; same shape as [`LockBatchRequestBody`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct UnlockBatchRequestBody {
    /// Client releasing the locks.
    #[serde(rename = "clientId")]
    pub client_id: String,
    /// Consumer group.
    #[serde(rename = "consumerGroup")]
    pub consumer_group: String,
    /// Queues to unlock.
    #[serde(rename = "mqSet")]
    pub mq_set: BTreeSet<MessageQueue>,
    /// 5.x: do not forward to the other replicas.
    #[serde(rename = "onlyThisBroker", deserialize_with = "lenient::bool")]
    pub only_this_broker: bool,
}

/// LOCK_BATCH_MQ response body: the queues now held by the requester (note the key's
/// capital `OKMQ`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LockBatchResponseBody {
    /// Queues locked by the requester.
    #[serde(rename = "lockOKMQSet")]
    pub lock_ok_mq_set: BTreeSet<MessageQueue>,
}

/// INVOKE_BROKER_TO_RESET_OFFSET response and RESET_CONSUMER_CLIENT_OFFSET request body:
/// target offset per queue, written with MessageQueue object keys (J2).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ResetOffsetBody {
    /// Queue to offset.
    #[serde(rename = "offsetTable", with = "object_key_map")]
    pub offset_table: BTreeMap<MessageQueue, i64>,
}

/// One entry of [`ResetOffsetBodyForC`]: a queue with its target offset.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct MessageQueueForC {
    /// Logical broker name.
    #[serde(rename = "brokerName")]
    pub broker_name: String,
    /// Target offset.
    #[serde(deserialize_with = "lenient::i64")]
    pub offset: i64,
    /// Queue id.
    #[serde(rename = "queueId", deserialize_with = "lenient::i32")]
    pub queue_id: i32,
    /// Topic.
    pub topic: String,
}

/// The list form of [`ResetOffsetBody`] a 4.x-style broker sends to C++ clients, which
/// cannot parse object keys: `{"offsetTable":[{"brokerName":..,"offset":..,...}]}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ResetOffsetBodyForC {
    /// One entry per queue.
    #[serde(rename = "offsetTable")]
    pub offset_table: Vec<MessageQueueForC>,
}

impl From<&ResetOffsetBody> for ResetOffsetBodyForC {
    fn from(body: &ResetOffsetBody) -> ResetOffsetBodyForC {
        let offset_table = body
            .offset_table
            .iter()
            .map(|(queue, offset)| MessageQueueForC {
                broker_name: queue.broker_name.clone(),
                offset: *offset,
                queue_id: queue.queue_id,
                topic: queue.topic.clone(),
            })
            .collect();
        ResetOffsetBodyForC { offset_table }
    }
}

impl From<ResetOffsetBodyForC> for ResetOffsetBody {
    fn from(body: ResetOffsetBodyForC) -> ResetOffsetBody {
        let offset_table = body
            .offset_table
            .into_iter()
            .map(|entry| {
                let queue = MessageQueue::new(entry.topic, entry.broker_name, entry.queue_id);
                (queue, entry.offset)
            })
            .collect();
        ResetOffsetBody { offset_table }
    }
}

/// `consumerOffset.json` and the GET_ALL_CONSUMER_OFFSET body: `<topic>@<group>` to
/// queue id to committed offset. Java writes the inner keys bare (`{0:12}`); both forms are
/// read, quoted keys are written. The derived `groupTopicMap` Java leaks is ignored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConsumerOffsetSerializeWrapper {
    /// 5.x version stamp.
    #[serde(rename = "dataVersion", skip_serializing_if = "Option::is_none")]
    pub data_version: Option<DataVersion>,
    /// `<topic>@<group>` to queue id to offset.
    #[serde(rename = "offsetTable")]
    pub offset_table: BTreeMap<String, BTreeMap<i32, i64>>,
}

/// The separator between topic and group in [`ConsumerOffsetSerializeWrapper`] keys.
pub const TOPIC_GROUP_SEPARATOR: char = '@';

impl ConsumerOffsetSerializeWrapper {
    /// The offset-table key for a topic and group.
    pub fn key(topic: &str, group: &str) -> String {
        format!("{topic}{TOPIC_GROUP_SEPARATOR}{group}")
    }

    /// Splits an offset-table key into topic and group. Topics cannot contain `@`, so the
    /// first separator ends the topic.
    pub fn split_key(key: &str) -> Option<(&str, &str)> {
        key.split_once(TOPIC_GROUP_SEPARATOR)
    }
}

json_bodies!(
    MessageQueue,
    GetConsumerListByGroupResponseBody,
    LockBatchRequestBody,
    UnlockBatchRequestBody,
    LockBatchResponseBody,
    ResetOffsetBody,
    MessageQueueForC,
    ResetOffsetBodyForC,
    ConsumerOffsetSerializeWrapper
);
