//! Server-side assignment bodies (docs/protocol.md#server-side-assignment): the
//! QUERY_ASSIGNMENT request and response, the SET_MESSAGE_REQUEST_MODE request, and the
//! broker's `messageRequestMode.json` table that keeps the modes set.
//!
//! Shapes are those of Java's `QueryAssignmentRequestBody`, `QueryAssignmentResponseBody`,
//! `MessageQueueAssignment`, `SetMessageRequestModeRequestBody` and
//! `MessageRequestModeManager` as fastjson writes them: keys sorted, enums by name, a null
//! set or map left out.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::{json_bodies, MessageModel, MessageQueue};
use crate::json::{json_enum, lenient};

json_enum! {
    /// How a consumer reads the queues assigned to it (Java's `MessageRequestMode`).
    pub enum MessageRequestMode {
        /// PULL_MESSAGE on one queue at a time, offsets kept per queue.
        PULL = 0,
        /// POP_MESSAGE: queues may be shared, each message is acknowledged on its own.
        POP = 1,
    }
    default PULL
}

/// QUERY_ASSIGNMENT request body: who asks for which topic's queues, under which strategy.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct QueryAssignmentRequestBody {
    /// The topic (a group's retry topic too).
    #[serde(deserialize_with = "lenient::string")]
    pub topic: String,
    /// The consumer group.
    #[serde(rename = "consumerGroup", deserialize_with = "lenient::string")]
    pub consumer_group: String,
    /// The asking client's id, as its heartbeat names it.
    #[serde(rename = "clientId", deserialize_with = "lenient::string")]
    pub client_id: String,
    /// The allocation strategy's name (`AVG`, `AVG_BY_CIRCLE`, ...).
    #[serde(rename = "strategyName", deserialize_with = "lenient::string")]
    pub strategy_name: String,
    /// Clustering or broadcasting. Java leaves it null when unset; the broker then has no
    /// model to balance for.
    #[serde(rename = "messageModel", skip_serializing_if = "Option::is_none")]
    pub message_model: Option<MessageModel>,
}

/// One queue given to a client, with the mode to read it in. Java's `equals` compares the
/// queue only, so a set holds each queue once; ordering here follows the queue for the same
/// reason.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct MessageQueueAssignment {
    /// The queue; queue id -1 in POP mode means "every queue of that broker".
    #[serde(rename = "messageQueue", skip_serializing_if = "Option::is_none")]
    pub message_queue: Option<MessageQueue>,
    /// How to read it.
    pub mode: MessageRequestMode,
    /// Free-form extras (Java never sets them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attachments: Option<BTreeMap<String, String>>,
}

impl PartialEq for MessageQueueAssignment {
    fn eq(&self, other: &Self) -> bool {
        self.message_queue == other.message_queue
    }
}

impl Eq for MessageQueueAssignment {}

impl PartialOrd for MessageQueueAssignment {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for MessageQueueAssignment {
    fn cmp(&self, other: &Self) -> Ordering {
        self.message_queue.cmp(&other.message_queue)
    }
}

/// QUERY_ASSIGNMENT response body. `None` (the key left out) tells the client the answer is
/// not usable and its current queues stay; an empty set tells it to drop them all.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct QueryAssignmentResponseBody {
    /// The queues given to the asking client.
    #[serde(
        rename = "messageQueueAssignments",
        skip_serializing_if = "Option::is_none"
    )]
    pub message_queue_assignments: Option<BTreeSet<MessageQueueAssignment>>,
}

/// SET_MESSAGE_REQUEST_MODE request body, and one entry of the broker's mode table.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SetMessageRequestModeRequestBody {
    /// The topic.
    #[serde(deserialize_with = "lenient::string")]
    pub topic: String,
    /// The consumer group.
    #[serde(rename = "consumerGroup", deserialize_with = "lenient::string")]
    pub consumer_group: String,
    /// The mode its consumers are told to use (Java's default: PULL).
    pub mode: MessageRequestMode,
    /// In POP mode, how many following consumers' queues each consumer also pops from;
    /// zero or less: every consumer pops every queue (Java's default: 0).
    #[serde(rename = "popShareQueueNum", deserialize_with = "lenient::i32")]
    pub pop_share_queue_num: i32,
}

/// `config/messageRequestMode.json`: topic to group to the mode set for it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct MessageRequestModeSerializeWrapper {
    /// Topic to consumer group to its entry.
    #[serde(rename = "messageRequestModeMap")]
    pub message_request_mode_map:
        BTreeMap<String, BTreeMap<String, SetMessageRequestModeRequestBody>>,
}

json_bodies!(
    QueryAssignmentRequestBody,
    MessageQueueAssignment,
    QueryAssignmentResponseBody,
    SetMessageRequestModeRequestBody,
    MessageRequestModeSerializeWrapper
);
