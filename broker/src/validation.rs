//! Topic and group name rules
//! (docs/protocol.md#system-topics-and-groups, docs/protocol.md#names-and-sizes), checked before
//! anything is created.

use comet_proto::limits::{GROUP_BYTES_MAX, TOPIC_BYTES_MAX, TOPIC_BYTES_MAX_V1};

/// Topics producers may never send to (docs/protocol.md#system-topics-and-groups).
pub const NOT_ALLOWED_SEND_TOPICS: &[&str] = &[
    "SCHEDULE_TOPIC_XXXX",
    "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "TRANS_CHECK_MAX_TIME_TOPIC",
    "SELF_TEST_TOPIC",
    "OFFSET_MOVED_EVENT",
];

/// Prefix of retry topics.
pub const RETRY_PREFIX: &str = "%RETRY%";
/// Prefix of dead-letter topics.
pub const DLQ_PREFIX: &str = "%DLQ%";

/// Why a name is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// Empty or blank.
    #[error("the {what} name is blank")]
    Blank {
        /// Topic or group.
        what: &'static str,
    },
    /// Longer than allowed.
    #[error("the {what} name {name:?} is longer than {max} characters")]
    TooLong {
        /// Topic or group.
        what: &'static str,
        /// The name.
        name: String,
        /// The limit.
        max: usize,
    },
    /// A character outside `%|a-zA-Z0-9_-`.
    #[error("the {what} name {name:?} contains illegal characters; allowed: ^[%|a-zA-Z0-9_-]+$")]
    IllegalCharacters {
        /// Topic or group.
        what: &'static str,
        /// The name.
        name: String,
    },
}

fn legal_character(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'%' | b'|' | b'_' | b'-')
}

fn check_name(what: &'static str, name: &str, max: usize) -> Result<(), NameError> {
    if name.trim().is_empty() {
        return Err(NameError::Blank { what });
    }
    if name.len() > max {
        return Err(NameError::TooLong {
            what,
            name: name.to_owned(),
            max,
        });
    }
    if !name.bytes().all(legal_character) {
        return Err(NameError::IllegalCharacters {
            what,
            name: name.to_owned(),
        });
    }
    Ok(())
}

/// Checks a topic name: 127 characters at most, 255 for retry and dead-letter topics.
pub fn check_topic(topic: &str) -> Result<(), NameError> {
    let max = if is_retry_topic(topic) || is_dlq_topic(topic) {
        TOPIC_BYTES_MAX
    } else {
        TOPIC_BYTES_MAX_V1
    };
    check_name("topic", topic, max)
}

/// Checks a consumer or producer group name.
pub fn check_group(group: &str) -> Result<(), NameError> {
    check_name("group", group, GROUP_BYTES_MAX)
}

/// True for `%RETRY%<group>`.
pub fn is_retry_topic(topic: &str) -> bool {
    topic.starts_with(RETRY_PREFIX)
}

/// True for `%DLQ%<group>`.
pub fn is_dlq_topic(topic: &str) -> bool {
    topic.starts_with(DLQ_PREFIX)
}

/// True for topics producers may not send to.
pub fn is_send_forbidden(topic: &str) -> bool {
    NOT_ALLOWED_SEND_TOPICS.contains(&topic)
}

/// `%RETRY%<group>`.
pub fn retry_topic(group: &str) -> String {
    format!("{RETRY_PREFIX}{group}")
}

/// `%DLQ%<group>`.
pub fn dlq_topic(group: &str) -> String {
    format!("{DLQ_PREFIX}{group}")
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the character set, the length limits (longer for retry topics) and blank names.
    #[test]
    fn topic_and_group_rules() {
        assert!(check_topic("TopicTest").is_ok());
        assert!(check_topic("a|b%c_d-9").is_ok());
        assert!(matches!(
            check_topic("bad topic"),
            Err(NameError::IllegalCharacters { .. })
        ));
        assert!(matches!(
            check_topic("é"),
            Err(NameError::IllegalCharacters { .. })
        ));
        assert!(matches!(check_topic(" "), Err(NameError::Blank { .. })));
        assert!(check_topic(&"t".repeat(127)).is_ok());
        assert!(matches!(
            check_topic(&"t".repeat(128)),
            Err(NameError::TooLong { .. })
        ));
        assert!(check_topic(&format!("%RETRY%{}", "g".repeat(200))).is_ok());
        assert!(check_group(&"g".repeat(120)).is_ok());
        assert!(check_group(&"g".repeat(121)).is_err());
        assert!(is_send_forbidden("SCHEDULE_TOPIC_XXXX"));
        assert!(!is_send_forbidden("TopicTest"));
        assert_eq!(retry_topic("cg"), "%RETRY%cg");
    }
}
