//! Request, response and language codes of the RocketMQ remoting protocol.
//!
//! Codes are wire API: a number is never reused for another meaning, and an unknown value is
//! preserved (`Unknown(n)`) so that a peer newer than us round-trips unchanged. Conversions are
//! total: no value from the network can make them panic.

macro_rules! code_enum {
    (
        $(#[$meta:meta])*
        $name:ident : $repr:ty {
            $( $(#[$vmeta:meta])* $variant:ident = $value:expr ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
            /// A value this build does not know, kept as it arrived.
            Unknown($repr),
        }

        impl $name {
            /// Every named variant, in declaration order.
            pub const ALL: &'static [$name] = &[ $( $name::$variant, )+ ];

            /// The wire value.
            pub const fn value(self) -> $repr {
                match self {
                    $( $name::$variant => $value, )+
                    $name::Unknown(value) => value,
                }
            }

            /// The Java constant name, or `None` for unknown values.
            pub const fn name(self) -> Option<&'static str> {
                match self {
                    $( $name::$variant => Some(stringify!($variant)), )+
                    $name::Unknown(_) => None,
                }
            }

            /// Looks a variant up by its Java constant name.
            pub fn from_name(name: &str) -> Option<$name> {
                match name {
                    $( stringify!($variant) => Some($name::$variant), )+
                    _ => None,
                }
            }
        }

        impl From<$repr> for $name {
            fn from(value: $repr) -> $name {
                match value {
                    $( v if v == $value => $name::$variant, )+
                    other => $name::Unknown(other),
                }
            }
        }

        impl From<$name> for $repr {
            fn from(code: $name) -> $repr {
                code.value()
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                match self.name() {
                    Some(name) => write!(f, "{}({})", name, self.value()),
                    None => write!(f, "UNKNOWN({})", self.value()),
                }
            }
        }
    };
}

code_enum! {
    /// Request codes (docs/protocol.md#request-codes).
    #[allow(non_camel_case_types, missing_docs)]
    RequestCode: i32 {
        SEND_MESSAGE = 10,
        PULL_MESSAGE = 11,
        QUERY_MESSAGE = 12,
        QUERY_BROKER_OFFSET = 13,
        QUERY_CONSUMER_OFFSET = 14,
        UPDATE_CONSUMER_OFFSET = 15,
        UPDATE_AND_CREATE_TOPIC = 17,
        UPDATE_AND_CREATE_TOPIC_LIST = 18,
        GET_ALL_TOPIC_CONFIG = 21,
        GET_TOPIC_CONFIG_LIST = 22,
        GET_TOPIC_NAME_LIST = 23,
        UPDATE_BROKER_CONFIG = 25,
        GET_BROKER_CONFIG = 26,
        TRIGGER_DELETE_FILES = 27,
        GET_BROKER_RUNTIME_INFO = 28,
        SEARCH_OFFSET_BY_TIMESTAMP = 29,
        GET_MAX_OFFSET = 30,
        GET_MIN_OFFSET = 31,
        GET_EARLIEST_MSG_STORETIME = 32,
        VIEW_MESSAGE_BY_ID = 33,
        HEART_BEAT = 34,
        UNREGISTER_CLIENT = 35,
        CONSUMER_SEND_MSG_BACK = 36,
        END_TRANSACTION = 37,
        GET_CONSUMER_LIST_BY_GROUP = 38,
        CHECK_TRANSACTION_STATE = 39,
        NOTIFY_CONSUMER_IDS_CHANGED = 40,
        LOCK_BATCH_MQ = 41,
        UNLOCK_BATCH_MQ = 42,
        GET_ALL_CONSUMER_OFFSET = 43,
        GET_ALL_DELAY_OFFSET = 45,
        CHECK_CLIENT_CONFIG = 46,
        GET_CLIENT_CONFIG = 47,
        UPDATE_AND_CREATE_ACL_CONFIG = 50,
        DELETE_ACL_CONFIG = 51,
        GET_BROKER_CLUSTER_ACL_INFO = 52,
        UPDATE_GLOBAL_WHITE_ADDRS_CONFIG = 53,
        GET_TIMER_CHECK_POINT = 60,
        GET_TIMER_METRICS = 61,
        PUT_KV_CONFIG = 100,
        GET_KV_CONFIG = 101,
        DELETE_KV_CONFIG = 102,
        REGISTER_BROKER = 103,
        UNREGISTER_BROKER = 104,
        GET_ROUTEINFO_BY_TOPIC = 105,
        GET_BROKER_CLUSTER_INFO = 106,
        UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200,
        GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201,
        GET_TOPIC_STATS_INFO = 202,
        GET_CONSUMER_CONNECTION_LIST = 203,
        GET_PRODUCER_CONNECTION_LIST = 204,
        WIPE_WRITE_PERM_OF_BROKER = 205,
        GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206,
        DELETE_SUBSCRIPTIONGROUP = 207,
        GET_CONSUME_STATS = 208,
        SUSPEND_CONSUMER = 209,
        RESUME_CONSUMER = 210,
        RESET_CONSUMER_OFFSET_IN_CONSUMER = 211,
        RESET_CONSUMER_OFFSET_IN_BROKER = 212,
        ADJUST_CONSUMER_THREAD_POOL = 213,
        WHO_CONSUME_THE_MESSAGE = 214,
        DELETE_TOPIC_IN_BROKER = 215,
        DELETE_TOPIC_IN_NAMESRV = 216,
        REGISTER_TOPIC_IN_NAMESRV = 217,
        GET_KVLIST_BY_NAMESPACE = 219,
        RESET_CONSUMER_CLIENT_OFFSET = 220,
        GET_CONSUMER_STATUS_FROM_CLIENT = 221,
        INVOKE_BROKER_TO_RESET_OFFSET = 222,
        INVOKE_BROKER_TO_GET_CONSUMER_STATUS = 223,
        GET_TOPICS_BY_CLUSTER = 224,
        UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST = 225,
        QUERY_TOPIC_CONSUME_BY_WHO = 300,
        REGISTER_FILTER_SERVER = 301,
        REGISTER_MESSAGE_FILTER_CLASS = 302,
        QUERY_CONSUME_TIME_SPAN = 303,
        GET_SYSTEM_TOPIC_LIST_FROM_NS = 304,
        GET_SYSTEM_TOPIC_LIST_FROM_BROKER = 305,
        CLEAN_EXPIRED_CONSUMEQUEUE = 306,
        GET_CONSUMER_RUNNING_INFO = 307,
        QUERY_CORRECTION_OFFSET = 308,
        CONSUME_MESSAGE_DIRECTLY = 309,
        SEND_MESSAGE_V2 = 310,
        GET_UNIT_TOPIC_LIST = 311,
        GET_HAS_UNIT_SUB_TOPIC_LIST = 312,
        GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST = 313,
        CLONE_GROUP_OFFSET = 314,
        VIEW_BROKER_STATS_DATA = 315,
        CLEAN_UNUSED_TOPIC = 316,
        GET_BROKER_CONSUME_STATS = 317,
        UPDATE_NAMESRV_CONFIG = 318,
        GET_NAMESRV_CONFIG = 319,
        SEND_BATCH_MESSAGE = 320,
        QUERY_CONSUME_QUEUE = 321,
        QUERY_DATA_VERSION = 322,
        RESUME_CHECK_HALF_MESSAGE = 323,
        SEND_REPLY_MESSAGE = 324,
        SEND_REPLY_MESSAGE_V2 = 325,
        PUSH_REPLY_MESSAGE_TO_CLIENT = 326,
        ADD_WRITE_PERM_OF_BROKER = 327,
        GET_ALL_PRODUCER_INFO = 328,
        DELETE_EXPIRED_COMMITLOG = 329,
        QUERY_TOPICS_BY_CONSUMER = 343,
        QUERY_SUBSCRIPTION_BY_CONSUMER = 345,
        GET_TOPIC_CONFIG = 351,
        GET_SUBSCRIPTIONGROUP_CONFIG = 352,
        UPDATE_AND_GET_GROUP_FORBIDDEN = 353,
        CHECK_ROCKSDB_CQ_WRITE_PROGRESS = 354,
        EXPORT_ROCKSDB_CONFIG_TO_JSON = 355,
        LITE_PULL_MESSAGE = 361,
        RECALL_MESSAGE = 370,
        QUERY_ASSIGNMENT = 400,
        SET_MESSAGE_REQUEST_MODE = 401,
        GET_ALL_MESSAGE_REQUEST_MODE = 402,
        UPDATE_AND_CREATE_STATIC_TOPIC = 513,
        GET_BROKER_MEMBER_GROUP = 901,
        ADD_BROKER = 902,
        REMOVE_BROKER = 903,
        BROKER_HEARTBEAT = 904,
        NOTIFY_MIN_BROKER_ID_CHANGE = 905,
        EXCHANGE_BROKER_HA_INFO = 906,
        GET_BROKER_HA_STATUS = 907,
        RESET_MASTER_FLUSH_OFFSET = 908,
        CONTROLLER_ALTER_SYNC_STATE_SET = 1001,
        CONTROLLER_ELECT_MASTER = 1002,
        CONTROLLER_REGISTER_BROKER = 1003,
        CONTROLLER_GET_REPLICA_INFO = 1004,
        CONTROLLER_GET_METADATA_INFO = 1005,
        CONTROLLER_GET_SYNC_STATE_DATA = 1006,
        GET_BROKER_EPOCH_CACHE = 1007,
        NOTIFY_BROKER_ROLE_CHANGED = 1008,
        UPDATE_CONTROLLER_CONFIG = 1009,
        GET_CONTROLLER_CONFIG = 1010,
        CLEAN_BROKER_DATA = 1011,
        CONTROLLER_GET_NEXT_BROKER_ID = 1012,
        CONTROLLER_APPLY_BROKER_ID = 1013,
        BROKER_CLOSE_CHANNEL_REQUEST = 1014,
        CHECK_NOT_ACTIVE_BROKER_REQUEST = 1015,
        GET_BROKER_LIVE_INFO_REQUEST = 1016,
        GET_SYNC_STATE_DATA_REQUEST = 1017,
        RAFT_BROKER_HEART_BEAT_EVENT_REQUEST = 1018,
        UPDATE_COLD_DATA_FLOW_CTR_CONFIG = 2001,
        REMOVE_COLD_DATA_FLOW_CTR_CONFIG = 2002,
        GET_COLD_DATA_FLOW_CTR_INFO = 2003,
        SET_COMMITLOG_READ_MODE = 2004,
        AUTH_CREATE_USER = 3001,
        AUTH_UPDATE_USER = 3002,
        AUTH_DELETE_USER = 3003,
        AUTH_GET_USER = 3004,
        AUTH_LIST_USER = 3005,
        AUTH_CREATE_ACL = 3006,
        AUTH_UPDATE_ACL = 3007,
        AUTH_DELETE_ACL = 3008,
        AUTH_GET_ACL = 3009,
        AUTH_LIST_ACL = 3010,
        POP_MESSAGE = 200050,
        ACK_MESSAGE = 200051,
        PEEK_MESSAGE = 200052,
        CHANGE_MESSAGE_INVISIBLETIME = 200053,
        NOTIFICATION = 200054,
        POLLING_INFO = 200055,
        POP_ROLLBACK = 200056,
        // 5.5 lite topics (docs/protocol.md#requests-from-apache-rocketmqs-proxy).
        POP_LITE_MESSAGE = 200070,
        LITE_SUBSCRIPTION_CTL = 200071,
        ACK_LITE_MESSAGE = 200072,
        NOTIFY_UNSUBSCRIBE_LITE = 200073,
        GET_BROKER_LITE_INFO = 200074,
        GET_PARENT_TOPIC_INFO = 200075,
        GET_LITE_TOPIC_INFO = 200076,
        GET_LITE_CLIENT_INFO = 200077,
        GET_LITE_GROUP_INFO = 200078,
        TRIGGER_LITE_DISPATCH = 200079,
        BATCH_ACK_MESSAGE = 200151,
    }
}

code_enum! {
    /// Response codes (docs/protocol.md#response-codes). Codes 209 to 211 carry 5.x meanings; 4.x
    /// used them for ACL failures (docs/protocol.md#codes-209-to-211-differ-between-4x-and-5x).
    #[allow(non_camel_case_types, missing_docs)]
    ResponseCode: i32 {
        SUCCESS = 0,
        SYSTEM_ERROR = 1,
        SYSTEM_BUSY = 2,
        REQUEST_CODE_NOT_SUPPORTED = 3,
        TRANSACTION_FAILED = 4,
        FLUSH_DISK_TIMEOUT = 10,
        SLAVE_NOT_AVAILABLE = 11,
        FLUSH_SLAVE_TIMEOUT = 12,
        MESSAGE_ILLEGAL = 13,
        SERVICE_NOT_AVAILABLE = 14,
        VERSION_NOT_SUPPORTED = 15,
        NO_PERMISSION = 16,
        TOPIC_NOT_EXIST = 17,
        TOPIC_EXIST_ALREADY = 18,
        PULL_NOT_FOUND = 19,
        PULL_RETRY_IMMEDIATELY = 20,
        PULL_OFFSET_MOVED = 21,
        QUERY_NOT_FOUND = 22,
        SUBSCRIPTION_PARSE_FAILED = 23,
        SUBSCRIPTION_NOT_EXIST = 24,
        SUBSCRIPTION_NOT_LATEST = 25,
        SUBSCRIPTION_GROUP_NOT_EXIST = 26,
        FILTER_DATA_NOT_EXIST = 27,
        FILTER_DATA_NOT_LATEST = 28,
        INVALID_PARAMETER = 29,
        TRANSACTION_SHOULD_COMMIT = 200,
        TRANSACTION_SHOULD_ROLLBACK = 201,
        TRANSACTION_STATE_UNKNOW = 202,
        TRANSACTION_STATE_GROUP_WRONG = 203,
        NO_BUYER_ID = 204,
        NOT_IN_CURRENT_UNIT = 205,
        CONSUMER_NOT_ONLINE = 206,
        CONSUME_MSG_TIMEOUT = 207,
        NO_MESSAGE = 208,
        POLLING_FULL = 209,
        POLLING_TIMEOUT = 210,
        BROKER_NOT_EXIST = 211,
        BROKER_DISPATCH_NOT_COMPLETE = 212,
        BROADCAST_CONSUMPTION = 213,
        FLOW_CONTROL = 215,
        NOT_LEADER_FOR_QUEUE = 501,
        ILLEGAL_OPERATION = 604,
        RPC_UNKNOWN = -1000,
        RPC_ADDR_IS_NULL = -1002,
        RPC_SEND_TO_CHANNEL_FAILED = -1004,
        RPC_TIME_OUT = -1006,
        GO_AWAY = 1500,
        CONTROLLER_FENCED_MASTER_EPOCH = 2000,
        CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH = 2001,
        CONTROLLER_INVALID_MASTER = 2002,
        CONTROLLER_INVALID_REPLICAS = 2003,
        CONTROLLER_MASTER_NOT_AVAILABLE = 2004,
        CONTROLLER_INVALID_REQUEST = 2005,
        CONTROLLER_BROKER_NOT_ALIVE = 2006,
        CONTROLLER_NOT_LEADER = 2007,
        CONTROLLER_BROKER_METADATA_NOT_EXIST = 2008,
        CONTROLLER_INVALID_CLEAN_BROKER_METADATA = 2009,
        CONTROLLER_BROKER_NEED_TO_BE_REGISTERED = 2010,
        CONTROLLER_MASTER_STILL_EXIST = 2011,
        CONTROLLER_ELECT_MASTER_FAILED = 2012,
        CONTROLLER_ALTER_SYNC_STATE_SET_FAILED = 2013,
        CONTROLLER_BROKER_ID_INVALID = 2014,
        CONTROLLER_JRAFT_INTERNAL_ERROR = 2015,
        CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS = 2016,
        USER_NOT_EXIST = 3001,
        POLICY_NOT_EXIST = 3002,
    }
}

code_enum! {
    /// The language of the sender
    /// (docs/protocol.md#language-codes-and-versions). JSON headers carry the name, the
    /// binary header carries the byte.
    #[allow(non_camel_case_types, missing_docs)]
    LanguageCode: u8 {
        JAVA = 0,
        CPP = 1,
        DOTNET = 2,
        PYTHON = 3,
        DELPHI = 4,
        ERLANG = 5,
        RUBY = 6,
        OTHER = 7,
        HTTP = 8,
        GO = 9,
        PHP = 10,
        OMS = 11,
        RUST = 12,
        NODE_JS = 13,
    }
}

impl ResponseCode {
    /// True for the four codes that mean "stored" on a send
    /// (docs/protocol.md#response-codes).
    pub fn is_stored(self) -> bool {
        matches!(
            self,
            ResponseCode::SUCCESS
                | ResponseCode::FLUSH_DISK_TIMEOUT
                | ResponseCode::FLUSH_SLAVE_TIMEOUT
                | ResponseCode::SLAVE_NOT_AVAILABLE
        )
    }
}

/// Version ordinals of Java's `MQVersion.Version` that change behaviour
/// (docs/protocol.md#language-codes-and-versions).
pub mod version {
    /// V3_4_9: broker honours `maxReconsumeTimes` from clients at or above it.
    pub const V3_4_9: i32 = 121;
    /// V4_1_0_SNAPSHOT: Java clients refuse SQL92 against brokers below it.
    pub const V4_1_0_SNAPSHOT: i32 = 232;
    /// V4_9_4: name servers send standard JSON route data to requesters at or above it.
    pub const V4_9_4: i32 = 401;
    /// V4_9_8: the last 4.x release.
    pub const V4_9_8: i32 = 409;
    /// V5_0_0: compressed register bodies carry a topic-queue-mapping section from here on.
    pub const V5_0_0: i32 = 413;
    /// V5_3_3: the version Comet announces in its responses.
    pub const V5_3_3: i32 = 479;
    /// What Comet puts in the `version` field of everything it sends.
    pub const CURRENT: i32 = V5_3_3;
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves that every named code round-trips through its number and its name, and that an
    // unknown number survives unchanged.
    #[test]
    fn codes_round_trip() {
        for code in RequestCode::ALL {
            assert_eq!(RequestCode::from(code.value()), *code);
            assert_eq!(RequestCode::from_name(code.name().unwrap()), Some(*code));
        }
        for code in ResponseCode::ALL {
            assert_eq!(ResponseCode::from(code.value()), *code);
        }
        for code in LanguageCode::ALL {
            assert_eq!(LanguageCode::from(code.value()), *code);
        }
        assert_eq!(RequestCode::from(99_999), RequestCode::Unknown(99_999));
        assert_eq!(RequestCode::Unknown(99_999).value(), 99_999);
        assert_eq!(LanguageCode::from(200u8), LanguageCode::Unknown(200));
        assert_eq!(
            RequestCode::SEND_MESSAGE_V2.to_string(),
            "SEND_MESSAGE_V2(310)"
        );
    }

    // Proves that no two variants share a number (a typo in the tables would alias them).
    #[test]
    fn codes_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for code in RequestCode::ALL {
            assert!(
                seen.insert(code.value()),
                "duplicate request code {}",
                code.value()
            );
        }
        let mut seen = std::collections::HashSet::new();
        for code in ResponseCode::ALL {
            assert!(
                seen.insert(code.value()),
                "duplicate response code {}",
                code.value()
            );
        }
    }
}
