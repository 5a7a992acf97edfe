//! Name-server headers (docs/protocol.md#name-server-requests and the
//! name-server rows of docs/protocol.md#other-request-headers): broker
//! registration and liveness, route lookups, permission changes and the KV config store.

use super::command_header;

/// Ext key carrying a 5.x broker's zone name on REGISTER_BROKER (not a header field).
pub const EXT_ZONE_NAME: &str = "__ZONE_NAME";

command_header! {
    /// REGISTER_BROKER (103) request.
    pub struct RegisterBrokerRequestHeader {
        /// Logical broker name (`broker-a`).
        broker_name: String => "brokerName",
        /// Address clients use, `ip:port`.
        broker_addr: String => "brokerAddr",
        /// Cluster the broker belongs to.
        cluster_name: String => "clusterName",
        /// HA listener address, `ip:haPort`.
        ha_server_addr: String => "haServerAddr",
        /// 0 for the master, >= 1 for slaves.
        broker_id: i64 => "brokerId",
        /// How long the name server keeps the broker without a new registration (default
        /// 120000 ms when absent).
        heartbeat_timeout_millis: Option<i64> => "heartbeatTimeoutMillis",
        /// 5.x acting-master mode.
        enable_acting_master: Option<bool> => "enableActingMaster",
        /// True when the body is the zlib binary form rather than JSON.
        compressed: bool => "compressed",
        /// Masked CRC-32 of the body
        /// (docs/protocol.md#masked-body-crc, `message::body_crc`); 0 means unchecked.
        body_crc32: Option<i32> => "bodyCrc32",
    }
}

command_header! {
    /// REGISTER_BROKER (103) response: the master's addresses, filled for slaves.
    pub struct RegisterBrokerResponseHeader {
        /// The master's HA address.
        ha_server_addr: Option<String> => "haServerAddr",
        /// The master's broker address.
        master_addr: Option<String> => "masterAddr",
    }
}

command_header! {
    /// UNREGISTER_BROKER (104) request.
    pub struct UnRegisterBrokerRequestHeader {
        /// Logical broker name.
        broker_name: String => "brokerName",
        /// Broker address `ip:port`.
        broker_addr: String => "brokerAddr",
        /// Cluster name.
        cluster_name: String => "clusterName",
        /// Broker id (0 = master).
        broker_id: i64 => "brokerId",
    }
}

command_header! {
    /// GET_ROUTEINFO_BY_TOPIC (105) request.
    pub struct GetRouteInfoRequestHeader {
        /// Topic whose route is wanted.
        topic: String => "topic",
        /// 5.x: ask for strictly standard JSON (quoted map keys).
        accept_standard_json_only: Option<bool> => "acceptStandardJsonOnly",
    }
}

command_header! {
    /// DELETE_TOPIC_IN_NAMESRV (216) request.
    pub struct DeleteTopicFromNamesrvRequestHeader {
        /// Topic to delete.
        topic: String => "topic",
        /// Restricts the deletion to one cluster.
        cluster_name: Option<String> => "clusterName",
    }
}

command_header! {
    /// WIPE_WRITE_PERM_OF_BROKER (205) request.
    pub struct WipeWritePermOfBrokerRequestHeader {
        /// Broker whose queues lose their write permission.
        broker_name: String => "brokerName",
    }
}

command_header! {
    /// WIPE_WRITE_PERM_OF_BROKER (205) response.
    pub struct WipeWritePermOfBrokerResponseHeader {
        /// Number of queue datas whose write bit was cleared.
        wipe_topic_count: i32 => "wipeTopicCount",
    }
}

command_header! {
    /// ADD_WRITE_PERM_OF_BROKER (327) request.
    pub struct AddWritePermOfBrokerRequestHeader {
        /// Broker whose queues regain their write permission.
        broker_name: String => "brokerName",
    }
}

command_header! {
    /// ADD_WRITE_PERM_OF_BROKER (327) response.
    pub struct AddWritePermOfBrokerResponseHeader {
        /// Number of queue datas whose write bit was set.
        add_topic_count: i32 => "addTopicCount",
    }
}

command_header! {
    /// QUERY_DATA_VERSION (322) request; the body is the broker's DataVersion.
    pub struct QueryDataVersionRequestHeader {
        /// Logical broker name.
        broker_name: String => "brokerName",
        /// Broker address.
        broker_addr: String => "brokerAddr",
        /// Cluster name.
        cluster_name: String => "clusterName",
        /// Broker id.
        broker_id: i64 => "brokerId",
    }
}

command_header! {
    /// QUERY_DATA_VERSION (322) response.
    pub struct QueryDataVersionResponseHeader {
        /// True when the name server's stored version differs from the broker's.
        changed: bool => "changed",
    }
}

command_header! {
    /// PUT_KV_CONFIG (100) request.
    pub struct PutKVConfigRequestHeader {
        /// Config namespace (`ORDER_TOPIC_CONFIG`, ...).
        namespace: String => "namespace",
        /// Key within the namespace.
        key: String => "key",
        /// Value to store.
        value: String => "value",
    }
}

command_header! {
    /// GET_KV_CONFIG (101) request.
    pub struct GetKVConfigRequestHeader {
        /// Config namespace.
        namespace: String => "namespace",
        /// Key within the namespace.
        key: String => "key",
    }
}

command_header! {
    /// GET_KV_CONFIG (101) response.
    pub struct GetKVConfigResponseHeader {
        /// The stored value; absent when not found.
        value: Option<String> => "value",
    }
}

command_header! {
    /// DELETE_KV_CONFIG (102) request.
    pub struct DeleteKVConfigRequestHeader {
        /// Config namespace.
        namespace: String => "namespace",
        /// Key within the namespace.
        key: String => "key",
    }
}

command_header! {
    /// GET_KVLIST_BY_NAMESPACE (219) request.
    pub struct GetKVListByNamespaceRequestHeader {
        /// Config namespace to list.
        namespace: String => "namespace",
    }
}

command_header! {
    /// GET_TOPICS_BY_CLUSTER (224) request.
    pub struct GetTopicsByClusterRequestHeader {
        /// Cluster name.
        cluster: String => "cluster",
    }
}

command_header! {
    /// REGISTER_TOPIC_IN_NAMESRV (217, 5.x) request; the body is a TopicRouteData.
    pub struct RegisterTopicRequestHeader {
        /// Topic being registered.
        topic: String => "topic",
    }
}

command_header! {
    /// BROKER_HEARTBEAT (904, 5.x) request. Note the real key `heartbeatTimeoutMills`
    /// (docs/protocol.md#misspelled-keys-are-real).
    pub struct BrokerHeartbeatRequestHeader {
        /// Cluster name.
        cluster_name: String => "clusterName",
        /// Broker address.
        broker_addr: String => "brokerAddr",
        /// Logical broker name.
        broker_name: String => "brokerName",
        /// Broker id.
        broker_id: Option<i64> => "brokerId",
        /// Controller epoch.
        epoch: Option<i32> => "epoch",
        /// Commit-log max offset.
        max_offset: Option<i64> => "maxOffset",
        /// Confirmed (replicated) offset.
        confirm_offset: Option<i64> => "confirmOffset",
        /// Liveness timeout the broker asks for, in ms.
        heartbeat_timeout_mills: Option<i64> => "heartbeatTimeoutMills",
        /// Election priority in controller mode.
        election_priority: Option<i32> => "electionPriority",
    }
}

command_header! {
    /// GET_BROKER_MEMBER_GROUP (901, 5.x) request.
    pub struct GetBrokerMemberGroupRequestHeader {
        /// Cluster name.
        cluster_name: String => "clusterName",
        /// Logical broker name.
        broker_name: String => "brokerName",
    }
}
