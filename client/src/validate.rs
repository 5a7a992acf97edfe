//! Client-side validation with clear errors, as the Java `Validators` does before anything
//! goes on the wire. Names follow `comet_proto::names`, the rules the broker applies too.

use comet_proto::names;

use crate::error::{ClientError, Result};
use crate::limits::MESSAGE_BODY_BYTES_MAX;
use crate::message::Message;
use crate::producer::ProducerConfig;
use crate::rebalance::allocate::CONSISTENT_HASH_VIRTUAL_NODES_MAX;
use crate::rebalance::AllocateStrategy;

/// A topic name: not blank, `[%|a-zA-Z0-9_-]`, at most 127 characters (255 for retry and
/// dead-letter topics).
pub fn check_topic(topic: &str) -> Result<()> {
    names::check_topic(topic).map_err(ClientError::from)
}

/// A producer or consumer group name: same characters, at most 120 characters.
pub fn check_group(group: &str) -> Result<()> {
    names::check_group(group).map_err(ClientError::from)
}

/// A producer's settings before it is built: its group, at least one name server, and a
/// compression level its algorithm has.
pub fn check_producer(config: &ProducerConfig) -> Result<()> {
    check_group(&config.group)?;
    if config.client.namesrv_addrs.is_empty() {
        return Err(ClientError::NameServer(
            "no name server address configured".into(),
        ));
    }
    comet_proto::compression::check_level(config.compress_type, config.compress_level)
        .map_err(|error| ClientError::Invalid(error.to_string()))
}

/// A queue allocation strategy: the consistent-hash ring holds at most
/// [`CONSISTENT_HASH_VIRTUAL_NODES_MAX`] points per consumer (Java refuses only negative counts;
/// a ring of millions of points rebuilt at every rebalance is a configuration error here).
pub fn check_allocate(strategy: &AllocateStrategy) -> Result<()> {
    match strategy {
        AllocateStrategy::ConsistentHash { virtual_nodes }
            if *virtual_nodes > CONSISTENT_HASH_VIRTUAL_NODES_MAX =>
        {
            Err(ClientError::Invalid(format!(
                "consistent-hash allocation with {virtual_nodes} virtual nodes per consumer; \
                 at most {CONSISTENT_HASH_VIRTUAL_NODES_MAX}"
            )))
        }
        _ => Ok(()),
    }
}

/// A message before sending: valid topic the application may use, a body of 1 byte to
/// 4 MiB.
pub fn check_message(message: &Message) -> Result<()> {
    check_topic(&message.topic)?;
    if names::is_send_forbidden(&message.topic) {
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
    use comet_proto::names::NameError;

    // Proves a consistent-hash ring past its bound is refused and the bound itself accepted.
    #[test]
    fn allocate_strategy_bounds() {
        let at = |virtual_nodes| AllocateStrategy::ConsistentHash { virtual_nodes };
        assert!(check_allocate(&at(CONSISTENT_HASH_VIRTUAL_NODES_MAX)).is_ok());
        assert!(matches!(
            check_allocate(&at(CONSISTENT_HASH_VIRTUAL_NODES_MAX + 1)),
            Err(ClientError::Invalid(_))
        ));
        assert!(check_allocate(&AllocateStrategy::ByConfig(Vec::new())).is_ok());
    }

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
        assert!(matches!(
            check_topic(&"t".repeat(128)),
            Err(ClientError::Name(NameError::TooLong { max: 127, .. }))
        ));
        assert!(check_topic(&format!("%RETRY%{}", "g".repeat(248))).is_ok());
        assert!(check_topic(&format!("%RETRY%{}", "g".repeat(249))).is_err());
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
