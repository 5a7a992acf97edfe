//! Client-side validation with clear errors, as the Java `Validators` does before anything
//! goes on the wire (docs/protocol.md#names-and-sizes).

use crate::error::{ClientError, Result};
use crate::limits::{GROUP_CHARS_MAX, MESSAGE_BODY_BYTES_MAX, TOPIC_CHARS_MAX};
use crate::message::Message;

/// Topics applications may not send to (docs/protocol.md#system-topics-and-groups).
pub const NOT_ALLOWED_SEND_TOPICS: [&str; 6] = [
    "SCHEDULE_TOPIC_XXXX",
    "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "TRANS_CHECK_MAX_TIME_TOPIC",
    "SELF_TEST_TOPIC",
    "OFFSET_MOVED_EVENT",
];

fn valid_chars(name: &str) -> bool {
    name.bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'%' | b'|' | b'-' | b'_'))
}

/// A topic name: not blank, `[%|a-zA-Z0-9_-]`, at most 127 characters.
pub fn check_topic(topic: &str) -> Result<()> {
    if topic.trim().is_empty() {
        return Err(ClientError::Invalid("the topic name is blank".into()));
    }
    if !valid_chars(topic) {
        return Err(ClientError::Invalid(format!(
            "the topic name {topic:?} contains characters outside [%|a-zA-Z0-9_-]"
        )));
    }
    if topic.len() > TOPIC_CHARS_MAX {
        return Err(ClientError::Invalid(format!(
            "the topic name is {} characters long, the maximum is {TOPIC_CHARS_MAX}",
            topic.len()
        )));
    }
    Ok(())
}

/// A producer or consumer group name: same characters, at most 120 characters.
pub fn check_group(group: &str) -> Result<()> {
    if group.trim().is_empty() {
        return Err(ClientError::Invalid("the group name is blank".into()));
    }
    if !valid_chars(group) {
        return Err(ClientError::Invalid(format!(
            "the group name {group:?} contains characters outside [%|a-zA-Z0-9_-]"
        )));
    }
    if group.len() > GROUP_CHARS_MAX {
        return Err(ClientError::Invalid(format!(
            "the group name is {} characters long, the maximum is {GROUP_CHARS_MAX}",
            group.len()
        )));
    }
    Ok(())
}

/// A message before sending: valid topic the application may use, a body of 1 byte to
/// 4 MiB.
pub fn check_message(message: &Message) -> Result<()> {
    check_topic(&message.topic)?;
    if NOT_ALLOWED_SEND_TOPICS.contains(&message.topic.as_str()) {
        return Err(ClientError::Invalid(format!(
            "sending to the system topic {} is not allowed",
            message.topic
        )));
    }
    if message.body.is_empty() {
        return Err(ClientError::Invalid("the message body is empty".into()));
    }
    if message.body.len() > MESSAGE_BODY_BYTES_MAX {
        return Err(ClientError::Invalid(format!(
            "the message body is {} bytes, the maximum is {MESSAGE_BODY_BYTES_MAX}",
            message.body.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves each rule rejects with an error and accepts the edge that is still legal.
    #[test]
    fn names_and_messages() {
        assert!(check_topic("TopicTest").is_ok());
        assert!(check_topic("%RETRY%group_1|x-y").is_ok());
        assert!(check_topic("").is_err());
        assert!(check_topic("  ").is_err());
        assert!(check_topic("a b").is_err());
        assert!(check_topic("tópico").is_err());
        assert!(check_topic(&"t".repeat(127)).is_ok());
        assert!(check_topic(&"t".repeat(128)).is_err());
        assert!(check_group(&"g".repeat(120)).is_ok());
        assert!(check_group(&"g".repeat(121)).is_err());
        assert!(check_message(&Message::new("T", "x")).is_ok());
        assert!(check_message(&Message::new("T", "")).is_err());
        assert!(check_message(&Message::new("SCHEDULE_TOPIC_XXXX", "x")).is_err());
        let big = vec![0u8; MESSAGE_BODY_BYTES_MAX + 1];
        assert!(check_message(&Message::new("T", big)).is_err());
        let edge = vec![0u8; MESSAGE_BODY_BYTES_MAX];
        assert!(check_message(&Message::new("T", edge)).is_ok());
    }
}
