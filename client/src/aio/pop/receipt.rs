//! A popped message's receipt handle (its `POP_CK` property) and the offset-info strings of
//! a pop answer, as Java's `ExtraInfoUtil` writes and reads them (docs/protocol.md#pop-requests).
//!
//! The receipt is `<ckQueueOffset> <popTime> <invisibleTime> <reviveQid> <retryFlag>
//! <brokerName> <queueId> <queueOffset>`. The retry flag says which queue the message was
//! popped from: `0` the subscribed topic, `1` the group's pop retry topic
//! `%RETRY%<group>_<topic>`, `2` its v2 name `%RETRY%<group>+<topic>`; acks and invisible-time
//! changes go to that queue.

use std::collections::HashMap;

use comet_proto::names::RETRY_TOPIC_PREFIX;

use crate::error::{ClientError, Result};

/// Which queue a popped message came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RetryFlag {
    /// The subscribed topic itself (`0`).
    Topic,
    /// The pop retry topic `%RETRY%<group>_<topic>` (`1`).
    RetryV1,
    /// The pop retry topic `%RETRY%<group>+<topic>` (`2`).
    RetryV2,
}

impl RetryFlag {
    /// The flag of a queue's topic as a stored record names it (Java's
    /// `ExtraInfoUtil.getRetry`).
    pub fn of_topic(topic: &str) -> RetryFlag {
        if !topic.starts_with(RETRY_TOPIC_PREFIX) {
            RetryFlag::Topic
        } else if topic.contains('+') {
            RetryFlag::RetryV2
        } else {
            RetryFlag::RetryV1
        }
    }

    /// The flag's text in receipts and offset-info strings.
    pub fn text(self) -> &'static str {
        match self {
            RetryFlag::Topic => "0",
            RetryFlag::RetryV1 => "1",
            RetryFlag::RetryV2 => "2",
        }
    }

    fn parse(text: &str) -> Result<RetryFlag> {
        match text {
            "0" => Ok(RetryFlag::Topic),
            "1" => Ok(RetryFlag::RetryV1),
            "2" => Ok(RetryFlag::RetryV2),
            other => Err(ClientError::Invalid(format!(
                "receipt retry flag {other:?} is not 0, 1 or 2"
            ))),
        }
    }

    /// The topic of the queue this flag names, for a message of `topic` popped by `group`
    /// (Java's `ExtraInfoUtil.getRealTopic`): where its ack goes.
    pub fn queue_topic(self, topic: &str, group: &str) -> String {
        match self {
            RetryFlag::Topic => topic.to_owned(),
            RetryFlag::RetryV1 => format!("{RETRY_TOPIC_PREFIX}{group}_{topic}"),
            RetryFlag::RetryV2 => format!("{RETRY_TOPIC_PREFIX}{group}+{topic}"),
        }
    }
}

/// A parsed receipt handle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Receipt {
    /// Queue offset where the checkpoint this message belongs to starts.
    pub ck_queue_offset: i64,
    /// When the broker handed the message out (or last changed its invisible time), ms.
    pub pop_time_ms: i64,
    /// The invisible time granted, ms.
    pub invisible_time_ms: i64,
    /// The broker's revive queue holding the checkpoint.
    pub revive_queue_id: i32,
    /// Which queue the message came from.
    pub retry: RetryFlag,
    /// Broker name.
    pub broker_name: String,
    /// Queue id.
    pub queue_id: i32,
    /// The message's own queue offset.
    pub queue_offset: i64,
}

impl Receipt {
    /// Parses a `POP_CK` string; `message_offset` stands in for the queue offset of the
    /// older seven-field form.
    pub fn parse(text: &str, message_offset: i64) -> Result<Receipt> {
        let fields: Vec<&str> = text.split(' ').collect();
        if fields.len() < 7 {
            return Err(ClientError::Invalid(format!(
                "receipt {text:?} has {} fields, at least 7 are needed",
                fields.len()
            )));
        }
        let number = |index: usize| -> Result<i64> {
            fields[index].parse::<i64>().map_err(|_| {
                ClientError::Invalid(format!(
                    "receipt {text:?}: field {index} ({:?}) is not a number",
                    fields[index]
                ))
            })
        };
        let small = |index: usize| -> Result<i32> {
            i32::try_from(number(index)?).map_err(|_| {
                ClientError::Invalid(format!("receipt {text:?}: field {index} is out of range"))
            })
        };
        Ok(Receipt {
            ck_queue_offset: number(0)?,
            pop_time_ms: number(1)?,
            invisible_time_ms: number(2)?,
            revive_queue_id: small(3)?,
            retry: RetryFlag::parse(fields[4])?,
            broker_name: fields[5].to_owned(),
            queue_id: small(6)?,
            queue_offset: if fields.len() > 7 {
                number(7)?
            } else {
                message_offset
            },
        })
    }

    /// The `POP_CK` string (Java's `ExtraInfoUtil.buildExtraInfo` plus the queue offset).
    pub fn text(&self) -> String {
        format!(
            "{} {} {} {} {} {} {} {}",
            self.ck_queue_offset,
            self.pop_time_ms,
            self.invisible_time_ms,
            self.revive_queue_id,
            self.retry.text(),
            self.broker_name,
            self.queue_id,
            self.queue_offset
        )
    }
}

/// The start offsets of a pop answer's `startOffsetInfo` (`<retryFlag> <queueId>
/// <startOffset>;...`), keyed by (retry flag, queue id). Entries that do not parse are
/// skipped: a message whose entry is missing is reported when its receipt is built.
pub fn parse_start_offsets(info: &str) -> HashMap<(RetryFlag, i32), i64> {
    let mut offsets = HashMap::new();
    for entry in info.split(';').filter(|entry| !entry.is_empty()) {
        let fields: Vec<&str> = entry.split(' ').collect();
        let [flag, queue_id, offset] = fields.as_slice() else {
            continue;
        };
        let parsed = (
            RetryFlag::parse(flag),
            queue_id.parse::<i32>(),
            offset.parse::<i64>(),
        );
        if let (Ok(flag), Ok(queue_id), Ok(offset)) = parsed {
            offsets.insert((flag, queue_id), offset);
        }
    }
    offsets
}

/// An orderly pop answer's delivery counts (`orderCountInfo`): per message
/// (`<retryFlag> qo<queueId>%<queueOffset> <count>`) and per queue (`<retryFlag> <queueId>
/// <count>`, the smallest of the queue's messages, which older brokers send alone).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct OrderCounts {
    by_offset: HashMap<(i32, i64), i32>,
    by_queue: HashMap<i32, i32>,
}

impl OrderCounts {
    /// How often the message at (`queue_id`, `queue_offset`) was delivered before, if the
    /// answer says (Java's client reads the per-message entry first, then the queue's).
    pub fn of(&self, queue_id: i32, queue_offset: i64) -> Option<i32> {
        self.by_offset
            .get(&(queue_id, queue_offset))
            .or_else(|| self.by_queue.get(&queue_id))
            .copied()
    }
}

/// Reads `orderCountInfo`; entries that do not parse are skipped.
pub fn parse_order_counts(info: &str) -> OrderCounts {
    let mut counts = OrderCounts::default();
    for entry in info.split(';').filter(|entry| !entry.is_empty()) {
        let fields: Vec<&str> = entry.split(' ').collect();
        let [_flag, key, count] = fields.as_slice() else {
            continue;
        };
        let Ok(count) = count.parse::<i32>() else {
            continue;
        };
        if let Some((queue_id, offset)) =
            key.strip_prefix("qo").and_then(|rest| rest.split_once('%'))
        {
            if let (Ok(queue_id), Ok(offset)) = (queue_id.parse(), offset.parse()) {
                counts.by_offset.insert((queue_id, offset), count);
            }
        } else if let Ok(queue_id) = key.parse() {
            counts.by_queue.insert(queue_id, count);
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves orderCountInfo is read per message first, then per queue, and junk skipped.
    #[test]
    fn order_counts_per_message_then_per_queue() {
        let counts = parse_order_counts("0 qo3%4 2;0 qo3%5 1;0 3 1;junk;0 x 1;0 qo1%z 4");
        assert_eq!(counts.of(3, 4), Some(2));
        assert_eq!(counts.of(3, 5), Some(1));
        assert_eq!(counts.of(3, 9), Some(1), "the queue's smallest count");
        assert_eq!(counts.of(1, 0), None);
        assert_eq!(parse_order_counts(""), OrderCounts::default());
    }

    // Proves a receipt survives text → parse → text, and the seven-field form takes the
    // message's offset.
    #[test]
    fn receipts_round_trip() {
        let text = "5 1700000000000 60000 3 1 broker-a 2 7";
        let receipt = Receipt::parse(text, 99).unwrap();
        assert_eq!(receipt.retry, RetryFlag::RetryV1);
        assert_eq!(receipt.queue_offset, 7);
        assert_eq!(receipt.text(), text);
        let short = Receipt::parse("5 1700000000000 60000 3 0 broker-a 2", 9).unwrap();
        assert_eq!(short.queue_offset, 9);
        assert_eq!(short.retry, RetryFlag::Topic);
    }

    // Proves malformed receipts are refused with an error, never a panic.
    #[test]
    fn bad_receipts_are_errors() {
        for bad in [
            "",
            "1 2 3",
            "x 1 2 3 0 b 1",
            "1 2 3 4 7 b 1",
            "1 2 3 99999999999 0 b 1",
        ] {
            assert!(Receipt::parse(bad, 0).is_err(), "{bad:?} parsed");
        }
    }

    // Proves the flags follow the queue's topic name, and name the queue an ack goes to.
    #[test]
    fn retry_flags_and_queue_topics() {
        assert_eq!(RetryFlag::of_topic("T"), RetryFlag::Topic);
        assert_eq!(RetryFlag::of_topic("%RETRY%g_T"), RetryFlag::RetryV1);
        assert_eq!(RetryFlag::of_topic("%RETRY%g+T"), RetryFlag::RetryV2);
        assert_eq!(RetryFlag::RetryV1.queue_topic("T", "g"), "%RETRY%g_T");
        assert_eq!(RetryFlag::RetryV2.queue_topic("T", "g"), "%RETRY%g+T");
        assert_eq!(RetryFlag::Topic.queue_topic("T", "g"), "T");
    }

    // Proves the start offsets of a joined answer are read per flag and queue, skipping junk.
    #[test]
    fn start_offsets_parse() {
        let offsets = parse_start_offsets("0 1 10;1 0 3;junk;0 x 4");
        assert_eq!(offsets.len(), 2);
        assert_eq!(offsets[&(RetryFlag::Topic, 1)], 10);
        assert_eq!(offsets[&(RetryFlag::RetryV1, 0)], 3);
        assert!(parse_start_offsets("").is_empty());
    }
}
