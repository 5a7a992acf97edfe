//! Pop consumption headers (5.x, docs/protocol.md#pop-requests). The codes exceed 16 bits, so these
//! only travel in JSON headers (docs/protocol.md#16-bit-code-and-version-in-binary-headers).
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
