//! Pop consumption headers and the batch-ack body (5.x, docs/protocol.md#pop-requests). The
//! codes exceed 16 bits, so these only travel in JSON headers
//! (docs/protocol.md#16-bit-code-and-version-in-binary-headers).
//!
//! The offset-info strings of the pop response are kept as text; their entries are
//! `<retryFlag> <queueId> <value>` joined with `;`.

use super::command_header;

command_header! {
    /// POP_MESSAGE (200050) request.
    pub struct PopMessageRequestHeader {
        /// Consumer group.
        consumer_group: String => "consumerGroup",
        /// Topic.
        topic: String => "topic",
        /// Queue id; -1 = any queue of this broker.
        queue_id: i32 => "queueId",
        /// Most messages to return.
        max_msg_nums: i32 => "maxMsgNums",
        /// How long popped messages stay invisible, ms.
        invisible_time: i64 => "invisibleTime",
        /// Long-poll time, ms.
        poll_time: i64 => "pollTime",
        /// Client clock, ms.
        born_time: i64 => "bornTime",
        /// 0 = start from min offset, 1 = from max, when the group has no offset.
        init_mode: i32 => "initMode",
        /// `TAG` or `SQL92`.
        exp_type: Option<String> => "expType",
        /// Filter expression.
        exp: Option<String> => "exp",
        /// Orderly pop.
        order: Option<bool> => "order",
        /// Idempotent retry id.
        attempt_id: Option<String> => "attemptId",
        /// Target broker name.
        broker_name: Option<String> => "bname",
    }
}

command_header! {
    /// POP_MESSAGE response.
    pub struct PopMessageResponseHeader {
        /// Pop time, ms.
        pop_time: i64 => "popTime",
        /// Invisible time granted, ms.
        invisible_time: i64 => "invisibleTime",
        /// Revive queue id (999 marks an orderly pop).
        revive_qid: i32 => "reviveQid",
        /// Messages left.
        rest_num: i64 => "restNum",
        /// `<retryFlag> <queueId> <startOffset>;...`
        start_offset_info: Option<String> => "startOffsetInfo",
        /// `<retryFlag> <queueId> <off1>,<off2>,...;...`
        msg_offset_info: Option<String> => "msgOffsetInfo",
        /// `<retryFlag> <queueId> <count>;...`
        order_count_info: Option<String> => "orderCountInfo",
    }
}

command_header! {
    /// PEEK_MESSAGE (200052) request.
    pub struct PeekMessageRequestHeader {
        /// Consumer group.
        consumer_group: String => "consumerGroup",
        /// Topic.
        topic: String => "topic",
        /// Queue id.
        queue_id: i32 => "queueId",
        /// Most messages to return.
        max_msg_nums: i32 => "maxMsgNums",
    }
}

command_header! {
    /// ACK_MESSAGE (200051) request.
    pub struct AckMessageRequestHeader {
        /// Consumer group.
        consumer_group: String => "consumerGroup",
        /// Real topic.
        topic: String => "topic",
        /// Queue id.
        queue_id: i32 => "queueId",
        /// The message's `POP_CK` string.
        extra_info: String => "extraInfo",
        /// Message queue offset.
        offset: i64 => "offset",
        /// Target broker name.
        broker_name: Option<String> => "bname",
    }
}

command_header! {
    /// CHANGE_MESSAGE_INVISIBLETIME (200053) request.
    pub struct ChangeInvisibleTimeRequestHeader {
        /// Consumer group.
        consumer_group: String => "consumerGroup",
        /// Real topic.
        topic: String => "topic",
        /// Queue id.
        queue_id: i32 => "queueId",
        /// The message's `POP_CK` string.
        extra_info: String => "extraInfo",
        /// Message queue offset.
        offset: i64 => "offset",
        /// New invisible time, ms.
        invisible_time: i64 => "invisibleTime",
        /// Target broker name.
        broker_name: Option<String> => "bname",
    }
}

command_header! {
    /// CHANGE_MESSAGE_INVISIBLETIME response: the parts of the new `POP_CK`.
    pub struct ChangeInvisibleTimeResponseHeader {
        /// Pop time, ms.
        pop_time: i64 => "popTime",
        /// Invisible time, ms.
        invisible_time: i64 => "invisibleTime",
        /// Revive queue id.
        revive_qid: i32 => "reviveQid",
    }
}

command_header! {
    /// NOTIFICATION (200054) request.
    pub struct NotificationRequestHeader {
        /// Consumer group.
        consumer_group: String => "consumerGroup",
        /// Topic.
        topic: String => "topic",
        /// Queue id.
        queue_id: i32 => "queueId",
        /// Long-poll time, ms.
        poll_time: i64 => "pollTime",
        /// Client clock, ms.
        born_time: i64 => "bornTime",
        /// Orderly.
        order: Option<bool> => "order",
        /// Idempotent retry id.
        attempt_id: Option<String> => "attemptId",
        /// Target broker name.
        broker_name: Option<String> => "bname",
    }
}

command_header! {
    /// NOTIFICATION response.
    pub struct NotificationResponseHeader {
        /// Messages are available.
        has_msg: bool => "hasMsg",
        /// The broker's polling slots are full.
        polling_full: Option<bool> => "pollingFull",
    }
}

command_header! {
    /// POLLING_INFO (200055) request.
    pub struct PollingInfoRequestHeader {
        /// Consumer group.
        consumer_group: String => "consumerGroup",
        /// Topic.
        topic: String => "topic",
        /// Queue id.
        queue_id: i32 => "queueId",
    }
}

command_header! {
    /// POLLING_INFO response.
    pub struct PollingInfoResponseHeader {
        /// Requests currently polling.
        polling_num: i32 => "pollingNum",
    }
}

/// One entry of a BATCH_ACK_MESSAGE body (Java's `BatchAck`): the acked messages of one
/// pop of one queue. Java's client writes the short keys; the long ones are accepted as
/// fastjson's alternate names.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BatchAck {
    /// Consumer group.
    #[serde(rename = "c", alias = "consumerGroup")]
    pub consumer_group: String,
    /// The topic the consumer subscribed (never a pop retry topic; see `retry`).
    #[serde(rename = "t", alias = "topic")]
    pub topic: String,
    /// `0` normal topic, `1` pop retry topic (`%RETRY%<group>_<topic>`), `2` its `+` form.
    #[serde(rename = "r", alias = "retry")]
    pub retry: String,
    /// The pop's start offset in the queue (the first field of the messages' `POP_CK`).
    #[serde(rename = "so", alias = "startOffset")]
    pub start_offset: i64,
    /// Queue id.
    #[serde(rename = "q", alias = "queueId")]
    pub queue_id: i32,
    /// Revive queue id.
    #[serde(rename = "rq", alias = "reviveQueueId")]
    pub revive_queue_id: i32,
    /// Pop time, ms.
    #[serde(rename = "pt", alias = "popTime")]
    pub pop_time: i64,
    /// Invisible time, ms.
    #[serde(rename = "it", alias = "invisibleTime")]
    pub invisible_time: i64,
    /// Bit `i` set: the message at queue offset `start_offset + i` is acked. Travels as
    /// Java's `BitSet.toByteArray()` (little-endian bytes) in base64, as fastjson writes a
    /// byte array.
    #[serde(rename = "b", alias = "bitSet", with = "bit_set")]
    pub bit_set: Vec<u8>,
}

impl BatchAck {
    /// The set bit indexes, ascending.
    pub fn set_bits(&self) -> impl Iterator<Item = usize> + '_ {
        self.bit_set
            .iter()
            .enumerate()
            .flat_map(|(byte_index, byte)| {
                (0..8usize)
                    .filter(move |bit| byte & (1 << bit) != 0)
                    .map(move |bit| byte_index * 8 + bit)
            })
    }

    /// The bit set with bits `indexes` set, as `BitSet.toByteArray()` gives it.
    pub fn bits_of(indexes: impl IntoIterator<Item = usize>) -> Vec<u8> {
        let mut bytes = Vec::new();
        for index in indexes {
            let byte = index / 8;
            if bytes.len() <= byte {
                bytes.resize(byte + 1, 0);
            }
            bytes[byte] |= 1 << (index % 8);
        }
        bytes
    }
}

/// BATCH_ACK_MESSAGE (200151) body (Java's `BatchAckMessageRequestBody`).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BatchAckMessageRequestBody {
    /// Target broker name.
    pub broker_name: Option<String>,
    /// The acks.
    pub acks: Vec<BatchAck>,
}

/// A byte array as fastjson writes it: a base64 string.
mod bit_set {
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(deserializer)?;
        base64::engine::general_purpose::STANDARD
            .decode(text.as_bytes())
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the bit set reads as Java's BitSet.valueOf of the base64 bytes fastjson writes
    // (bits 0, 2 and 9 set: bytes 0x05 0x02, "BQI="), and round-trips through the short keys.
    #[test]
    fn batch_ack_bit_set_is_javas() {
        let json = br#"{"acks":[{"b":"BQI=","c":"g","it":60000,"pt":17,"q":1,"r":"0","rq":3,
            "so":40,"t":"T"}],"brokerName":"b0"}"#;
        let body: BatchAckMessageRequestBody = crate::json::from_slice(json).unwrap();
        let ack = &body.acks[0];
        assert_eq!(ack.set_bits().collect::<Vec<_>>(), [0, 2, 9]);
        assert_eq!(BatchAck::bits_of([0, 2, 9]), ack.bit_set);
        assert_eq!(ack.start_offset, 40);
        let again: BatchAckMessageRequestBody =
            crate::json::from_slice(&crate::json::to_bytes(&body)).unwrap();
        assert_eq!(again, body);
    }
}
