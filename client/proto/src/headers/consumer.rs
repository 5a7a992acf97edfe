//! Consumer-side headers (docs/protocol.md#requests, from
//! docs/protocol.md#pull-message to docs/protocol.md#queue-locks): pull, offsets, message lookup,
//! client registration and group membership, send-back and transactions.
//!
//! Requests that target one broker carry the optional 5.x base key `bname` as
//! `broker_name`; the 5.x Java client fills it, older clients leave it out.

use super::{command_header, header_enum};

/// Ext key a 5.x broker adds to HEART_BEAT responses: `"true"` when it supports heartbeat V2.
pub const EXT_IS_SUPPORT_HEART_BEAT_V2: &str = "IS_SUPPORT_HEART_BEAT_V2";
/// Ext key a 5.x broker adds to HEART_BEAT responses: `"true"` when the subscriptions were
/// (re)registered, asking a V2 client to keep sending full heartbeats.
pub const EXT_IS_SUB_CHANGE: &str = "IS_SUB_CHANGE";

command_header! {
    /// PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361) request.
    pub struct PullMessageRequestHeader {
        /// Consumer group.
        consumer_group: String => "consumerGroup",
        /// Topic.
        topic: String => "topic",
        /// Queue id.
        queue_id: i32 => "queueId",
        /// Logical offset to start from.
        queue_offset: i64 => "queueOffset",
        /// Most messages to return.
        max_msg_nums: i32 => "maxMsgNums",
        /// PullSysFlag bits.
        sys_flag: i32 => "sysFlag",
        /// Consumer's offset to commit (sysFlag bit 0).
        commit_offset: i64 => "commitOffset",
        /// Long-poll hold time, ms.
        suspend_timeout_millis: i64 => "suspendTimeoutMillis",
        /// Subscription expression (sysFlag bit 2).
        subscription: Option<String> => "subscription",
        /// Subscription version, ms timestamp.
        sub_version: i64 => "subVersion",
        /// `TAG` or `SQL92`.
        expression_type: Option<String> => "expressionType",
        /// 5.x byte budget.
        max_msg_bytes: Option<i32> => "maxMsgBytes",
        /// 5.x proxy marker.
        request_source: Option<i32> => "requestSource",
        /// 5.x proxy client id (the misspelling is the real key,
        /// docs/protocol.md#misspelled-keys-are-real).
        proxy_froward_client_id: Option<String> => "proxyFrowardClientId",
        /// 5.x target broker name.
        broker_name: Option<String> => "bname",
        /// 5.x logical-queue (static topic) hint.
        logical: Option<bool> => "lo",
    }
}

command_header! {
    /// PULL_MESSAGE response; the four offsets are always present
    /// (docs/protocol.md#pull-responses-always-carry-their-offsets).
    pub struct PullMessageResponseHeader {
        /// Broker id to pull from next (0 = master).
        suggest_which_broker_id: i64 => "suggestWhichBrokerId",
        /// Offset for the next pull.
        next_begin_offset: i64 => "nextBeginOffset",
        /// Queue min offset.
        min_offset: i64 => "minOffset",
        /// Queue max offset (one past the last entry).
        max_offset: i64 => "maxOffset",
        /// 5.x static topics: added to each message's queue offset.
        offset_delta: Option<i64> => "offsetDelta",
        /// 5.x topic sys flag.
        topic_sys_flag: Option<i32> => "topicSysFlag",
        /// 5.x group sys flag.
        group_sys_flag: Option<i32> => "groupSysFlag",
        /// 5.x reason for NO_PERMISSION.
        forbidden_type: Option<i32> => "forbiddenType",
    }
}

command_header! {
    /// QUERY_CONSUMER_OFFSET (14) request.
    pub struct QueryConsumerOffsetRequestHeader {
        /// Consumer group.
        consumer_group: String => "consumerGroup",
        /// Topic.
        topic: String => "topic",
        /// Queue id.
        queue_id: i32 => "queueId",
        /// `false` asks for QUERY_NOT_FOUND instead of the young-queue 0.
        set_zero_if_not_found: Option<bool> => "setZeroIfNotFound",
        /// 5.x target broker name.
        broker_name: Option<String> => "bname",
    }
}

command_header! {
    /// QUERY_CONSUMER_OFFSET response.
    pub struct QueryConsumerOffsetResponseHeader {
        /// Committed offset.
        offset: i64 => "offset",
    }
}

command_header! {
    /// UPDATE_CONSUMER_OFFSET (15) request.
    pub struct UpdateConsumerOffsetRequestHeader {
        /// Consumer group.
        consumer_group: String => "consumerGroup",
        /// Topic.
        topic: String => "topic",
        /// Queue id.
        queue_id: i32 => "queueId",
        /// Offset to commit.
        commit_offset: i64 => "commitOffset",
        /// 5.x target broker name.
        broker_name: Option<String> => "bname",
    }
}

command_header! {
    /// UPDATE_CONSUMER_OFFSET response: no fields.
    pub struct UpdateConsumerOffsetResponseHeader {}
}

command_header! {
    /// GET_MAX_OFFSET (30) request.
    pub struct GetMaxOffsetRequestHeader {
        /// Topic.
        topic: String => "topic",
        /// Queue id.
        queue_id: i32 => "queueId",
        /// 5.x: only count committed (visible) messages; default true.
        committed: Option<bool> => "committed",
        /// 5.x target broker name.
        broker_name: Option<String> => "bname",
        /// 5.x logical-queue hint.
        logical: Option<bool> => "lo",
    }
}

command_header! {
    /// GET_MAX_OFFSET response.
    pub struct GetMaxOffsetResponseHeader {
        /// One past the last entry.
        offset: i64 => "offset",
    }
}

command_header! {
    /// GET_MIN_OFFSET (31) request.
    pub struct GetMinOffsetRequestHeader {
        /// Topic.
        topic: String => "topic",
        /// Queue id.
        queue_id: i32 => "queueId",
        /// 5.x target broker name.
        broker_name: Option<String> => "bname",
        /// 5.x logical-queue hint.
        logical: Option<bool> => "lo",
    }
}

command_header! {
    /// GET_MIN_OFFSET response.
    pub struct GetMinOffsetResponseHeader {
        /// Queue min offset.
        offset: i64 => "offset",
    }
}

header_enum! {
    /// SEARCH_OFFSET_BY_TIMESTAMP boundary (5.x).
    pub enum BoundaryType {
        /// First offset stored at or after the timestamp.
        Lower => "LOWER",
        /// Last offset stored at or before the timestamp.
        Upper => "UPPER",
    }
    default Lower
}

command_header! {
    /// SEARCH_OFFSET_BY_TIMESTAMP (29) request.
    pub struct SearchOffsetRequestHeader {
        /// Topic.
        topic: String => "topic",
        /// Queue id.
        queue_id: i32 => "queueId",
        /// Store timestamp to search for, ms.
        timestamp: i64 => "timestamp",
        /// 5.x boundary; LOWER when absent.
        boundary_type: Option<BoundaryType> => "boundaryType",
        /// 5.x target broker name.
        broker_name: Option<String> => "bname",
        /// 5.x logical-queue hint.
        logical: Option<bool> => "lo",
    }
}

command_header! {
    /// SEARCH_OFFSET_BY_TIMESTAMP response.
    pub struct SearchOffsetResponseHeader {
        /// The offset found.
        offset: i64 => "offset",
    }
}

command_header! {
    /// GET_EARLIEST_MSG_STORETIME (32) request.
    pub struct GetEarliestMsgStoretimeRequestHeader {
        /// Topic.
        topic: String => "topic",
        /// Queue id.
        queue_id: i32 => "queueId",
        /// 5.x target broker name.
        broker_name: Option<String> => "bname",
        /// 5.x logical-queue hint.
        logical: Option<bool> => "lo",
    }
}

command_header! {
    /// GET_EARLIEST_MSG_STORETIME response.
    pub struct GetEarliestMsgStoretimeResponseHeader {
        /// Store time of the message at the min offset, ms.
        timestamp: i64 => "timestamp",
    }
}

command_header! {
    /// QUERY_MESSAGE (12) request.
    pub struct QueryMessageRequestHeader {
        /// Topic.
        topic: String => "topic",
        /// Message key (or unique key).
        key: String => "key",
        /// Most messages to return.
        max_num: i32 => "maxNum",
        /// Range start, ms.
        begin_timestamp: i64 => "beginTimestamp",
        /// Range end, ms.
        end_timestamp: i64 => "endTimestamp",
        /// Ext key the client adds: `true` when querying by unique key.
        unique_key_query: Option<bool> => "_UNIQUE_KEY_QUERY",
        /// 5.x target broker name.
        broker_name: Option<String> => "bname",
    }
}

command_header! {
    /// QUERY_MESSAGE response.
    pub struct QueryMessageResponseHeader {
        /// Last index update time, ms.
        index_last_update_timestamp: i64 => "indexLastUpdateTimestamp",
        /// Physical offset covered by the index.
        index_last_update_phyoffset: i64 => "indexLastUpdatePhyoffset",
    }
}

command_header! {
    /// VIEW_MESSAGE_BY_ID (33) request.
    pub struct ViewMessageRequestHeader {
        /// Commit-log physical offset.
        offset: i64 => "offset",
        /// 5.x topic.
        topic: Option<String> => "topic",
        /// 5.x target broker name.
        broker_name: Option<String> => "bname",
    }
}

command_header! {
    /// UNREGISTER_CLIENT (35) request.
    pub struct UnregisterClientRequestHeader {
        /// Client id (note the key's capital `ID`).
        client_id: String => "clientID",
        /// Producer group being left.
        producer_group: Option<String> => "producerGroup",
        /// Consumer group being left.
        consumer_group: Option<String> => "consumerGroup",
    }
}

command_header! {
    /// GET_CONSUMER_LIST_BY_GROUP (38) request.
    pub struct GetConsumerListByGroupRequestHeader {
        /// Consumer group.
        consumer_group: String => "consumerGroup",
        /// 5.x target broker name.
        broker_name: Option<String> => "bname",
    }
}

command_header! {
    /// NOTIFY_CONSUMER_IDS_CHANGED (40, broker to client, one-way) request.
    pub struct NotifyConsumerIdsChangedRequestHeader {
        /// Consumer group whose membership changed.
        consumer_group: String => "consumerGroup",
    }
}

command_header! {
    /// CONSUMER_SEND_MSG_BACK (36) request.
    pub struct ConsumerSendMsgBackRequestHeader {
        /// Commit-log physical offset of the failed message.
        offset: i64 => "offset",
        /// Consumer group.
        group: String => "group",
        /// 0 = broker chooses, > 0 explicit level, < 0 dead-letter now.
        delay_level: i32 => "delayLevel",
        /// Client's message id.
        origin_msg_id: Option<String> => "originMsgId",
        /// Original topic.
        origin_topic: Option<String> => "originTopic",
        /// Unit mode.
        unit_mode: Option<bool> => "unitMode",
        /// Client's reconsume limit.
        max_reconsume_times: Option<i32> => "maxReconsumeTimes",
        /// 5.x target broker name.
        broker_name: Option<String> => "bname",
    }
}

command_header! {
    /// END_TRANSACTION (37, one-way) request.
    pub struct EndTransactionRequestHeader {
        /// Original topic.
        topic: Option<String> => "topic",
        /// Must equal the half message's producer group.
        producer_group: String => "producerGroup",
        /// Half message's consume-queue offset.
        tran_state_table_offset: i64 => "tranStateTableOffset",
        /// Half message's physical offset.
        commit_log_offset: i64 => "commitLogOffset",
        /// 0 unknown, 8 commit, 12 rollback
        /// (docs/protocol.md#transaction-decisions-use-sysflag-values).
        commit_or_rollback: i32 => "commitOrRollback",
        /// True when answering a check-back.
        from_transaction_check: Option<bool> => "fromTransactionCheck",
        /// Message `UNIQ_KEY`.
        msg_id: String => "msgId",
        /// Transaction id (same value).
        transaction_id: Option<String> => "transactionId",
        /// 5.x target broker name.
        broker_name: Option<String> => "bname",
    }
}

command_header! {
    /// CHECK_TRANSACTION_STATE (39, broker to producer, one-way) request.
    pub struct CheckTransactionStateRequestHeader {
        /// Real topic.
        topic: Option<String> => "topic",
        /// Half message's queue offset in the half topic.
        tran_state_table_offset: i64 => "tranStateTableOffset",
        /// Half message's physical offset.
        commit_log_offset: i64 => "commitLogOffset",
        /// `UNIQ_KEY`.
        msg_id: Option<String> => "msgId",
        /// `UNIQ_KEY`.
        transaction_id: Option<String> => "transactionId",
        /// Broker offset message id of the half message.
        offset_msg_id: Option<String> => "offsetMsgId",
        /// 5.x broker name.
        broker_name: Option<String> => "bname",
    }
}
