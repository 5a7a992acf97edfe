//! Topic and group names: the rules a name must follow, and the reserved names and prefixes
//! of system topics and groups. The broker and the client both check names here, so they
//! accept exactly the same names.
//!
//! The rules are those of Java's `TopicValidator` (5.x): a name is not blank, uses only
//! `[%|a-zA-Z0-9_-]`, and is at most [`TOPIC_BYTES_MAX_V1`] characters long for a topic,
//! [`TOPIC_BYTES_MAX`] for a retry or dead-letter topic (`%RETRY%<group>`, and pop retry
//! topics `%RETRY%<group>_<topic>`, which a 127-character limit would refuse), and
//! [`GROUP_BYTES_MAX`] for a group, short enough that `%RETRY%<group>` is an ordinary topic.
//! The characters are ASCII, so characters and bytes count the same.

use crate::limits::{GROUP_BYTES_MAX, TOPIC_BYTES_MAX, TOPIC_BYTES_MAX_V1};

/// Prefix of a consumer group's retry topic (`%RETRY%<group>`), Java's
/// `MixAll.RETRY_GROUP_TOPIC_PREFIX`.
pub const RETRY_TOPIC_PREFIX: &str = "%RETRY%";
/// Prefix of a consumer group's dead-letter topic (`%DLQ%<group>`), Java's
/// `MixAll.DLQ_GROUP_TOPIC_PREFIX`.
pub const DLQ_TOPIC_PREFIX: &str = "%DLQ%";
/// Prefix of system topics created by the broker itself (`TopicValidator.SYSTEM_TOPIC_PREFIX`).
pub const SYSTEM_TOPIC_PREFIX: &str = "rmq_sys_";
/// Prefix of the broker's own consumer groups (`MixAll.CID_RMQ_SYS_PREFIX`).
pub const SYSTEM_GROUP_PREFIX: &str = "CID_RMQ_SYS_";
/// Suffix of a cluster's request-reply topic (`<cluster>_REPLY_TOPIC`, `MixAll.getReplyTopic`).
pub const REPLY_TOPIC_SUFFIX: &str = "_REPLY_TOPIC";

/// The template topic auto-created topics copy their settings from.
pub const AUTO_CREATE_TOPIC_KEY: &str = "TBW102";
/// Where delayed messages wait for their delay level to pass.
pub const SCHEDULE_TOPIC: &str = "SCHEDULE_TOPIC_XXXX";
/// Where transactional half messages wait for their commit or rollback.
pub const TRANS_HALF_TOPIC: &str = "RMQ_SYS_TRANS_HALF_TOPIC";
/// Where the commit or rollback (op) of each half message is recorded.
pub const TRANS_OP_HALF_TOPIC: &str = "RMQ_SYS_TRANS_OP_HALF_TOPIC";
/// Where half messages checked too often are parked.
pub const TRANS_CHECK_MAX_TIME_TOPIC: &str = "TRANS_CHECK_MAX_TIME_TOPIC";
/// The broker's self-test topic.
pub const SELF_TEST_TOPIC: &str = "SELF_TEST_TOPIC";
/// Where offset-moved events are recorded.
pub const OFFSET_MOVED_EVENT_TOPIC: &str = "OFFSET_MOVED_EVENT";
/// The benchmark topic brokers create.
pub const BENCHMARK_TOPIC: &str = "BenchmarkTest";
/// The default message trace topic.
pub const TRACE_TOPIC: &str = "RMQ_SYS_TRACE_TOPIC";

/// Topics producers may never send to (`TopicValidator`'s not-allowed-send set).
pub const NOT_ALLOWED_SEND_TOPICS: &[&str] = &[
    SCHEDULE_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    TRANS_CHECK_MAX_TIME_TOPIC,
    SELF_TEST_TOPIC,
    OFFSET_MOVED_EVENT_TOPIC,
];

/// Topics the broker reserves for itself (`TopicValidator`'s system topic set); see also
/// [`is_system_topic`].
pub const SYSTEM_TOPICS: &[&str] = &[
    AUTO_CREATE_TOPIC_KEY,
    SCHEDULE_TOPIC,
    BENCHMARK_TOPIC,
    TRANS_HALF_TOPIC,
    TRACE_TOPIC,
    TRANS_OP_HALF_TOPIC,
    TRANS_CHECK_MAX_TIME_TOPIC,
    SELF_TEST_TOPIC,
    OFFSET_MOVED_EVENT_TOPIC,
];

/// Why a name is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// Empty or only whitespace.
    #[error("the {what} name is blank")]
    Blank {
        /// `"topic"` or `"group"`.
        what: &'static str,
    },
    /// Longer than allowed.
    #[error("the {what} name {name:?} is {length} characters long, the maximum is {max}")]
    TooLong {
        /// `"topic"` or `"group"`.
        what: &'static str,
        /// The name.
        name: String,
        /// Its length.
        length: usize,
        /// The limit that applies to it.
        max: usize,
    },
    /// A character outside `%|a-zA-Z0-9_-`.
    #[error("the {what} name {name:?} contains illegal characters; allowed: ^[%|a-zA-Z0-9_-]+$")]
    IllegalCharacters {
        /// `"topic"` or `"group"`.
        what: &'static str,
        /// The name.
        name: String,
    },
}

/// The longest a topic named `topic` may be: longer for retry and dead-letter topics.
pub fn topic_length_max(topic: &str) -> usize {
    if is_retry_topic(topic) || is_dlq_topic(topic) {
        TOPIC_BYTES_MAX
    } else {
        TOPIC_BYTES_MAX_V1
    }
}

/// Checks a topic name (see the module docs).
pub fn check_topic(topic: &str) -> Result<(), NameError> {
    check_name("topic", topic, topic_length_max(topic))
}

/// Checks a producer or consumer group name (see the module docs).
pub fn check_group(group: &str) -> Result<(), NameError> {
    check_name("group", group, GROUP_BYTES_MAX)
}

/// True for a retry topic, `%RETRY%<group>`.
pub fn is_retry_topic(topic: &str) -> bool {
    topic.starts_with(RETRY_TOPIC_PREFIX)
}

/// True for a dead-letter topic, `%DLQ%<group>`.
pub fn is_dlq_topic(topic: &str) -> bool {
    topic.starts_with(DLQ_TOPIC_PREFIX)
}

/// True for the topics producers may not send to.
pub fn is_send_forbidden(topic: &str) -> bool {
    NOT_ALLOWED_SEND_TOPICS.contains(&topic)
}

/// True for a topic the broker reserves for itself (`TopicValidator.isSystemTopic`).
pub fn is_system_topic(topic: &str) -> bool {
    SYSTEM_TOPICS.contains(&topic) || topic.starts_with(SYSTEM_TOPIC_PREFIX)
}

/// Groups every broker has (docs/protocol.md#system-topics-and-groups).
pub const BUILT_IN_GROUPS: &[&str] = &[
    "TOOLS_CONSUMER",
    "FILTERSRV_CONSUMER",
    "SELF_TEST_C_GROUP",
    "CID_ONS-HTTP-PROXY",
    "CID_ONSAPI_PULL",
    "CID_ONSAPI_PERMISSION",
    "CID_ONSAPI_OWNER",
    "CID_RMQ_SYS_TRANS",
];

/// True for one of the broker's own consumer groups (`MixAll.isSysConsumerGroup`).
pub fn is_system_group(group: &str) -> bool {
    group.starts_with(SYSTEM_GROUP_PREFIX)
}

/// The retry topic of `group`, `%RETRY%<group>`.
pub fn retry_topic(group: &str) -> String {
    format!("{RETRY_TOPIC_PREFIX}{group}")
}

/// The dead-letter topic of `group`, `%DLQ%<group>`.
pub fn dlq_topic(group: &str) -> String {
    format!("{DLQ_TOPIC_PREFIX}{group}")
}

/// The request-reply topic of `cluster`, `<cluster>_REPLY_TOPIC`.
pub fn reply_topic(cluster: &str) -> String {
    format!("{cluster}{REPLY_TOPIC_SUFFIX}")
}

/// Separates a namespace from the name it wraps (`NamespaceUtil.NAMESPACE_SEPARATOR`).
pub const NAMESPACE_SEPARATOR: char = '%';

/// A system topic or group, which a namespace never wraps (`NamespaceUtil.isSystemResource`).
fn is_system_resource(name: &str) -> bool {
    is_system_topic(name) || is_system_group(name)
}

/// `name` without a leading retry or dead-letter prefix (`NamespaceUtil.withOutRetryAndDLQ`).
pub fn without_retry_and_dlq(name: &str) -> &str {
    name.strip_prefix(RETRY_TOPIC_PREFIX)
        .or_else(|| name.strip_prefix(DLQ_TOPIC_PREFIX))
        .unwrap_or(name)
}

/// The retry or dead-letter prefix `name` starts with, or `""`.
fn retry_or_dlq_prefix(name: &str) -> &'static str {
    if is_retry_topic(name) {
        RETRY_TOPIC_PREFIX
    } else if is_dlq_topic(name) {
        DLQ_TOPIC_PREFIX
    } else {
        ""
    }
}

/// True when `name` (past a retry or dead-letter prefix) already starts with
/// `<namespace>%` (`NamespaceUtil.isAlreadyWithNamespace`).
pub fn is_already_with_namespace(name: &str, namespace: &str) -> bool {
    !namespace.is_empty()
        && !name.is_empty()
        && !is_system_resource(name)
        && without_retry_and_dlq(name)
            .strip_prefix(namespace)
            .is_some_and(|rest| rest.starts_with(NAMESPACE_SEPARATOR))
}

/// The broker-side name of a topic or group in `namespace`, as Java's
/// `NamespaceUtil.wrapNamespace` writes it: `<ns>%<name>`, a retry or dead-letter prefix kept
/// in front (`%RETRY%<ns>%<group>`); an empty namespace or name, a system topic or group, and
/// a name already in the namespace are returned as they are.
pub fn wrap_namespace(namespace: &str, name: &str) -> String {
    if namespace.is_empty()
        || name.is_empty()
        || is_system_resource(name)
        || is_already_with_namespace(name, namespace)
    {
        return name.to_owned();
    }
    format!(
        "{}{namespace}{NAMESPACE_SEPARATOR}{}",
        retry_or_dlq_prefix(name),
        without_retry_and_dlq(name)
    )
}

/// The name the application knows a broker-side name by, as Java's
/// `NamespaceUtil.withoutNamespace(resource)` reads it: whatever precedes the first `%` past
/// a retry or dead-letter prefix is taken for a namespace and removed; system names and
/// names without one are returned as they are.
pub fn without_namespace(name: &str) -> String {
    if name.is_empty() || is_system_resource(name) {
        return name.to_owned();
    }
    let bare = without_retry_and_dlq(name);
    match bare.find(NAMESPACE_SEPARATOR) {
        Some(index) if index > 0 => format!("{}{}", retry_or_dlq_prefix(name), &bare[index + 1..]),
        _ => name.to_owned(),
    }
}

/// `name` without `namespace` when it is in that namespace, else as it is (Java's
/// `NamespaceUtil.withoutNamespace(resource, namespace)`).
pub fn without_namespace_of(name: &str, namespace: &str) -> String {
    if name.is_empty() || namespace.is_empty() {
        return name.to_owned();
    }
    let in_namespace = without_retry_and_dlq(name)
        .strip_prefix(namespace)
        .is_some_and(|rest| rest.starts_with(NAMESPACE_SEPARATOR));
    if in_namespace {
        without_namespace(name)
    } else {
        name.to_owned()
    }
}

fn legal_character(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'%' | b'|' | b'_' | b'-')
}

fn check_name(what: &'static str, name: &str, max: usize) -> Result<(), NameError> {
    if name.trim().is_empty() {
        return Err(NameError::Blank { what });
    }
    // Characters first: a non-ASCII name is refused for its characters, not for a byte
    // length that differs from the length Java counts.
    if !name.bytes().all(legal_character) {
        return Err(NameError::IllegalCharacters {
            what,
            name: name.to_owned(),
        });
    }
    if name.len() > max {
        return Err(NameError::TooLong {
            what,
            name: name.to_owned(),
            length: name.len(),
            max,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn too_long(result: Result<(), NameError>) -> Option<usize> {
        match result {
            Err(NameError::TooLong { max, .. }) => Some(max),
            _ => None,
        }
    }

    // Proves the length limits at their boundaries: 127 for a topic, 255 for retry and
    // dead-letter topics, 120 for a group (so `%RETRY%<longest group>` is 127).
    #[test]
    fn length_boundaries() {
        assert_eq!(check_topic(&"t".repeat(127)), Ok(()));
        assert_eq!(too_long(check_topic(&"t".repeat(128))), Some(127));
        for prefix in [RETRY_TOPIC_PREFIX, DLQ_TOPIC_PREFIX] {
            let longest = format!("{prefix}{}", "g".repeat(255 - prefix.len()));
            assert_eq!(check_topic(&longest), Ok(()));
            assert_eq!(too_long(check_topic(&format!("{longest}g"))), Some(255));
        }
        assert_eq!(check_group(&"g".repeat(120)), Ok(()));
        assert_eq!(too_long(check_group(&"g".repeat(121))), Some(120));
        assert_eq!(retry_topic(&"g".repeat(120)).len(), 127);
        assert_eq!(check_topic(&retry_topic(&"g".repeat(120))), Ok(()));
    }

    // Proves the character set, blank names, and that a non-ASCII name is refused for its
    // characters even when its byte length is over the limit.
    #[test]
    fn characters_and_blanks() {
        assert_eq!(check_topic("a|b%c_d-9AZ"), Ok(()));
        assert_eq!(check_topic(""), Err(NameError::Blank { what: "topic" }));
        assert_eq!(check_group("  "), Err(NameError::Blank { what: "group" }));
        for bad in ["bad topic", "tópico", "a.b", "a/b", "a\tb"] {
            assert!(
                matches!(check_topic(bad), Err(NameError::IllegalCharacters { .. })),
                "{bad}"
            );
        }
        assert!(matches!(
            check_topic(&"é".repeat(100)),
            Err(NameError::IllegalCharacters { .. })
        ));
    }

    // Proves the reserved names: forbidden send targets, system topics and groups, and the
    // derived retry, dead-letter and reply topic names.
    #[test]
    fn reserved_names() {
        assert!(is_send_forbidden(SCHEDULE_TOPIC));
        assert!(is_send_forbidden(TRANS_HALF_TOPIC));
        assert!(!is_send_forbidden("TopicTest"));
        assert!(!is_send_forbidden(AUTO_CREATE_TOPIC_KEY));
        assert!(is_system_topic(AUTO_CREATE_TOPIC_KEY));
        assert!(is_system_topic("rmq_sys_wheel_timer"));
        assert!(!is_system_topic("TopicTest"));
        assert!(is_system_group("CID_RMQ_SYS_TRANS"));
        assert_eq!(retry_topic("cg"), "%RETRY%cg");
        assert_eq!(dlq_topic("cg"), "%DLQ%cg");
        assert_eq!(reply_topic("DefaultCluster"), "DefaultCluster_REPLY_TOPIC");
        assert!(is_retry_topic("%RETRY%cg") && !is_retry_topic("cg%RETRY%"));
        assert!(is_dlq_topic("%DLQ%cg"));
    }
    // Proves wrapping and unwrapping follow Java's NamespaceUtil cases: the retry and
    // dead-letter prefixes stay in front, system topics and groups are never wrapped, a name
    // already in the namespace is not wrapped twice, and unwrapping with a namespace leaves
    // names of other namespaces alone.
    #[test]
    fn namespace_wrapping() {
        assert_eq!(wrap_namespace("ns", "T"), "ns%T");
        assert_eq!(wrap_namespace("ns", "%RETRY%G"), "%RETRY%ns%G");
        assert_eq!(wrap_namespace("ns", "%DLQ%G"), "%DLQ%ns%G");
        assert_eq!(wrap_namespace("ns", "ns%T"), "ns%T");
        assert_eq!(wrap_namespace("ns", "%RETRY%ns%G"), "%RETRY%ns%G");
        assert_eq!(wrap_namespace("ns", "other%T"), "ns%other%T");
        assert_eq!(wrap_namespace("", "T"), "T");
        assert_eq!(wrap_namespace("ns", ""), "");
        for system in [
            TRACE_TOPIC,
            AUTO_CREATE_TOPIC_KEY,
            "rmq_sys_x",
            "CID_RMQ_SYS_TRANS",
        ] {
            assert_eq!(wrap_namespace("ns", system), system);
        }
        assert!(is_already_with_namespace("ns%T", "ns"));
        assert!(!is_already_with_namespace("nsx%T", "ns"));
        assert!(!is_already_with_namespace("ns", "ns"));

        assert_eq!(without_namespace("MQ_INST_XX%Topic_XXX"), "Topic_XXX");
        assert_eq!(
            without_namespace("%RETRY%MQ_INST_XX%GID_XXX"),
            "%RETRY%GID_XXX"
        );
        assert_eq!(without_namespace("%DLQ%ns%G"), "%DLQ%G");
        assert_eq!(without_namespace("T"), "T");
        assert_eq!(without_namespace("%RETRY%G"), "%RETRY%G");
        assert_eq!(without_namespace(TRACE_TOPIC), TRACE_TOPIC);
        assert_eq!(without_namespace_of("ns1%T", "ns1"), "T");
        assert_eq!(without_namespace_of("ns2%T", ""), "ns2%T");
        assert_eq!(without_namespace_of("%RETRY%ns1%G", "ns1"), "%RETRY%G");
        assert_eq!(without_namespace_of("%RETRY%ns2%G", "ns3"), "%RETRY%ns2%G");
        for name in ["T", "%RETRY%G", "%DLQ%G"] {
            assert_eq!(
                without_namespace_of(&wrap_namespace("ns", name), "ns"),
                name
            );
        }
    }
}
