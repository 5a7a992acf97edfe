//! Admin headers (docs/protocol.md#admin-requests,
//! docs/protocol.md#broker-to-client-requests, docs/protocol.md#master-slave-metadata-sync,
//! docs/protocol.md#other-request-headers): topic and group management, statistics,
//! offset resets, and the broker-to-client diagnostic requests.

use super::command_header;

command_header! {
    /// UPDATE_AND_CREATE_TOPIC (17) request.
    pub struct CreateTopicRequestHeader {
        /// Topic to create or update.
        topic: String => "topic",
        /// Template topic (normally `TBW102`).
        default_topic: String => "defaultTopic",
        /// Readable queue count.
        read_queue_nums: i32 => "readQueueNums",
        /// Writable queue count.
        write_queue_nums: i32 => "writeQueueNums",
        /// Permission bits.
        perm: i32 => "perm",
        /// `SINGLE_TAG` or `MULTI_TAG`.
        topic_filter_type: String => "topicFilterType",
        /// Topic system flag bits.
        topic_sys_flag: Option<i32> => "topicSysFlag",
        /// Ordered topic.
        order: bool => "order",
        /// 5.x attribute changes, `+k1=v1,+k2=v2,-k3`.
        attributes: Option<String> => "attributes",
        /// 5.x: apply even if attributes conflict.
        force: Option<bool> => "force",
    }
}

command_header! {
    /// DELETE_TOPIC_IN_BROKER (215) request.
    pub struct DeleteTopicRequestHeader {
        /// Topic to delete.
        topic: String => "topic",
    }
}

command_header! {
    /// GET_ALL_TOPIC_CONFIG (21) request: 5.x paging keys, all optional.
    pub struct GetAllTopicConfigRequestHeader {
        /// Index of the first topic of the page.
        topic_seq: Option<i32> => "topicSeq",
        /// DataVersion JSON the pages must belong to.
        data_version: Option<String> => "dataVersion",
        /// Page size.
        max_topic_num: Option<i32> => "maxTopicNum",
    }
}

command_header! {
    /// GET_ALL_TOPIC_CONFIG (21) response.
    pub struct GetAllTopicConfigResponseHeader {
        /// 5.x: total topics when paging.
        total_topic_num: Option<i32> => "totalTopicNum",
    }
}

command_header! {
    /// GET_TOPIC_STATS_INFO (202) request.
    pub struct GetTopicStatsInfoRequestHeader {
        /// Topic.
        topic: String => "topic",
        /// 5.x target broker name.
        broker_name: Option<String> => "bname",
    }
}

command_header! {
    /// GET_CONSUME_STATS (208) request.
    pub struct GetConsumeStatsRequestHeader {
        /// Consumer group.
        consumer_group: String => "consumerGroup",
        /// One topic; blank or absent means every topic of the group.
        topic: Option<String> => "topic",
        /// 5.x `;`-separated topics.
        topic_list: Option<String> => "topicList",
        /// 5.x target broker name.
        broker_name: Option<String> => "bname",
    }
}

command_header! {
    /// GET_CONSUMER_CONNECTION_LIST (203) request.
    pub struct GetConsumerConnectionListRequestHeader {
        /// Consumer group.
        consumer_group: String => "consumerGroup",
    }
}

command_header! {
    /// GET_PRODUCER_CONNECTION_LIST (204) request.
    pub struct GetProducerConnectionListRequestHeader {
        /// Producer group.
        producer_group: String => "producerGroup",
    }
}

command_header! {
    /// INVOKE_BROKER_TO_RESET_OFFSET (222) and RESET_CONSUMER_CLIENT_OFFSET (220) request.
    pub struct ResetOffsetRequestHeader {
        /// Topic.
        topic: String => "topic",
        /// Consumer group.
        group: String => "group",
        /// 5.x: one queue, -1 or absent for all.
        queue_id: Option<i32> => "queueId",
        /// 5.x: explicit target offset.
        offset: Option<i64> => "offset",
        /// Store time to reset to, ms; -1 = max offset.
        timestamp: i64 => "timestamp",
        /// Also move offsets forward (note the key name,
        /// docs/protocol.md#misspelled-keys-are-real).
        is_force: bool => "isForce",
    }
}

command_header! {
    /// GET_SUBSCRIPTIONGROUP_CONFIG (352) request.
    pub struct GetSubscriptionGroupConfigRequestHeader {
        /// The consumer group.
        group: String => "group",
    }
}

command_header! {
    /// DELETE_SUBSCRIPTIONGROUP (207) request.
    pub struct DeleteSubscriptionGroupRequestHeader {
        /// Group to delete.
        group_name: String => "groupName",
        /// Also delete its offsets.
        clean_offset: Option<bool> => "cleanOffset",
    }
}

command_header! {
    /// QUERY_TOPIC_CONSUME_BY_WHO (300) request.
    pub struct QueryTopicConsumeByWhoRequestHeader {
        /// Topic.
        topic: String => "topic",
    }
}

command_header! {
    /// GET_CONSUMER_RUNNING_INFO (307) request (admin to broker, broker to client).
    pub struct GetConsumerRunningInfoRequestHeader {
        /// Consumer group.
        consumer_group: String => "consumerGroup",
        /// Client to ask.
        client_id: String => "clientId",
        /// Include a thread dump.
        jstack_enable: Option<bool> => "jstackEnable",
    }
}

command_header! {
    /// CONSUME_MESSAGE_DIRECTLY (309) request.
    pub struct ConsumeMessageDirectlyResultRequestHeader {
        /// Consumer group.
        consumer_group: String => "consumerGroup",
        /// Client to ask.
        client_id: Option<String> => "clientId",
        /// Message id.
        msg_id: Option<String> => "msgId",
        /// Broker holding the message.
        broker_name: Option<String> => "brokerName",
        /// 5.x topic.
        topic: Option<String> => "topic",
        /// 5.x topic sys flag.
        topic_sys_flag: Option<i32> => "topicSysFlag",
        /// 5.x group sys flag.
        group_sys_flag: Option<i32> => "groupSysFlag",
    }
}

command_header! {
    /// GET_CONSUMER_STATUS_FROM_CLIENT (221) and INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223)
    /// request.
    pub struct GetConsumerStatusRequestHeader {
        /// Topic.
        topic: String => "topic",
        /// Consumer group.
        group: String => "group",
        /// Restricts to one client address.
        client_addr: Option<String> => "clientAddr",
    }
}

command_header! {
    /// GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) request: 5.x paging keys, all optional.
    pub struct GetAllSubscriptionGroupRequestHeader {
        /// Index of the first group of the page.
        group_seq: Option<i32> => "groupSeq",
        /// DataVersion JSON the pages must belong to.
        data_version: Option<String> => "dataVersion",
        /// Page size.
        max_group_num: Option<i32> => "maxGroupNum",
    }
}

command_header! {
    /// GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) response.
    pub struct GetAllSubscriptionGroupResponseHeader {
        /// 5.x: total groups when paging.
        total_group_num: Option<i32> => "totalGroupNum",
    }
}

command_header! {
    /// QUERY_CONSUME_TIME_SPAN (303) request.
    pub struct QueryConsumeTimeSpanRequestHeader {
        /// Topic.
        topic: String => "topic",
        /// Consumer group.
        group: String => "group",
    }
}

command_header! {
    /// QUERY_CONSUME_QUEUE (321) request: `count` consume-queue entries of one queue from
    /// queue offset `index`. Java sends every key but `consumerGroup` (primitive fields).
    pub struct QueryConsumeQueueRequestHeader {
        /// Topic.
        topic: String => "topic",
        /// Queue id.
        queue_id: i32 => "queueId",
        /// First queue offset.
        index: i64 => "index",
        /// Number of entries.
        count: i32 => "count",
        /// Consumer group whose subscription the answer shows.
        consumer_group: Option<String> => "consumerGroup",
    }
}

command_header! {
    /// GET_BROKER_CONSUME_STATS (317) request. Java's field is `isOrder` (a primitive with
    /// `@CFNotNull`, so it is always sent and required); the client's timeout is not sent.
    pub struct GetConsumeStatsInBrokerHeader {
        /// Only topics configured as ordered.
        is_order: bool => "isOrder",
    }
}

command_header! {
    /// CLONE_GROUP_OFFSET (314) request.
    pub struct CloneGroupOffsetRequestHeader {
        /// Group whose offsets are copied.
        src_group: String => "srcGroup",
        /// Group that receives them.
        dest_group: String => "destGroup",
        /// One topic; blank or absent means every topic the source has offsets for.
        topic: Option<String> => "topic",
        /// True when the source group is offline: its live subscriptions are not consulted.
        offline: Option<bool> => "offline",
    }
}

command_header! {
    /// EXCHANGE_BROKER_HA_INFO (906, 5.x) request; every key optional.
    pub struct ExchangeHAInfoRequestHeader {
        /// The master's HA address.
        master_ha_address: Option<String> => "masterHaAddress",
        /// The master's flushed commit-log offset.
        master_flush_offset: Option<i64> => "masterFlushOffset",
        /// The master's broker address.
        master_address: Option<String> => "masterAddress",
    }
}

command_header! {
    /// EXCHANGE_BROKER_HA_INFO (906, 5.x) response; every key optional.
    pub struct ExchangeHAInfoResponseHeader {
        /// The master's HA address.
        master_ha_address: Option<String> => "masterHaAddress",
        /// The master's flushed commit-log offset.
        master_flush_offset: Option<i64> => "masterFlushOffset",
        /// The master's broker address.
        master_address: Option<String> => "masterAddress",
    }
}
