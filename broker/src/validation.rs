//! Topic and group name rules, checked before anything is created. The broker and the client
//! share one validator and one set of reserved names, `comet_proto::names`; the processors
//! reach them through this module.

pub use comet_proto::names::{
    check_group, check_topic, dlq_topic, is_retry_topic, is_send_forbidden, retry_topic,
    RETRY_TOPIC_PREFIX as RETRY_PREFIX,
};
