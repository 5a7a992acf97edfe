//! The message properties string (docs/protocol.md#properties-string,
//! docs/protocol.md#properties-string-separators).
//!
//! ```text
//! name 0x01 value 0x02 name 0x01 value 0x02 ...
//! ```
//!
//! Encoding writes every entry, the last included, followed by `0x02`. Decoding follows Java's
//! `MessageDecoder.string2messageProperties` exactly: split on `0x02`; in each segment the name
//! ends at the first `0x01` searched from the segment start, and that separator must be
//! neither the segment's first nor its last character (so names and values are non-empty and
//! the segment has at least 3 characters); other segments are ignored; a trailing segment
//! without `0x02` is still parsed; a repeated name replaces the earlier value (last wins).
//!
//! [`iter`] and [`get`] work on a borrowed string with no allocation (the broker reads `TAGS`,
//! `KEYS` and `UNIQ_KEY` this way); [`Properties`] is the owned map.

use std::fmt;

use crate::pairs::TextPairs;

/// Separates a name from its value (`MessageDecoder.NAME_VALUE_SEPARATOR`).
pub const NAME_VALUE_SEPARATOR: char = '\u{1}';
/// Ends every entry (`MessageDecoder.PROPERTY_SEPARATOR`).
pub const PROPERTY_SEPARATOR: char = '\u{2}';
/// Separates several values inside one property, e.g. keys in `KEYS`.
pub const KEY_SEPARATOR: char = ' ';

/// Reserved property names (`MessageConst`).
pub mod names {
    /// Business keys, space separated.
    pub const KEYS: &str = "KEYS";
    /// The tag string; its Java hash is the consume-queue tag code.
    pub const TAGS: &str = "TAGS";
    /// `"true"`/`"false"`: wait for flush/replication before answering.
    pub const WAIT: &str = "WAIT";
    /// Delay level.
    pub const DELAY: &str = "DELAY";
    /// Original topic of a message in a retry topic.
    pub const RETRY_TOPIC: &str = "RETRY_TOPIC";
    /// Original topic of a delayed, timer or half message.
    pub const REAL_TOPIC: &str = "REAL_TOPIC";
    /// Original queue id of a delayed, timer or half message.
    pub const REAL_QID: &str = "REAL_QID";
    /// `"true"` on transactional half messages.
    pub const TRAN_MSG: &str = "TRAN_MSG";
    /// Producer group of a transactional message.
    pub const PGROUP: &str = "PGROUP";
    /// Queue minimum offset at pull time (client side).
    pub const MIN_OFFSET: &str = "MIN_OFFSET";
    /// Queue maximum offset at pull time (client side).
    pub const MAX_OFFSET: &str = "MAX_OFFSET";
    /// Legacy.
    pub const BUYER_ID: &str = "BUYER_ID";
    /// Offset message id of the first delivery.
    pub const ORIGIN_MESSAGE_ID: &str = "ORIGIN_MESSAGE_ID";
    /// Legacy.
    pub const TRANSFER_FLAG: &str = "TRANSFER_FLAG";
    /// Legacy.
    pub const CORRECTION_FLAG: &str = "CORRECTION_FLAG";
    /// Legacy.
    pub const MQ2_FLAG: &str = "MQ2_FLAG";
    /// Reconsume count carrier for retry sends.
    pub const RECONSUME_TIME: &str = "RECONSUME_TIME";
    /// Region id.
    pub const MSG_REGION: &str = "MSG_REGION";
    /// Trace switch.
    pub const TRACE_ON: &str = "TRACE_ON";
    /// Client-generated unique id, the user-visible message id.
    pub const UNIQ_KEY: &str = "UNIQ_KEY";
    /// Extra uniqueness info (5.x).
    pub const EXTEND_UNIQ_INFO: &str = "EXTEND_UNIQ_INFO";
    /// Client's max reconsume count for retry sends.
    pub const MAX_RECONSUME_TIMES: &str = "MAX_RECONSUME_TIMES";
    /// Consumption start time (client side, ms).
    pub const CONSUME_START_TIME: &str = "CONSUME_START_TIME";
    /// 5.x inner-batch message count.
    pub const INNER_NUM: &str = "INNER_NUM";
    /// 5.x inner-batch base offset.
    pub const INNER_BASE: &str = "INNER_BASE";
    /// Duplication info.
    pub const DUP_INFO: &str = "DUP_INFO";
    /// Delay before the first transaction check-back, seconds.
    pub const CHECK_IMMUNITY_TIME_IN_SECONDS: &str = "CHECK_IMMUNITY_TIME_IN_SECONDS";
    /// Original half-queue offset of a re-appended half message.
    pub const TRAN_PREPARED_QUEUE_OFFSET: &str = "TRAN_PREPARED_QUEUE_OFFSET";
    /// Transaction id copy on half messages.
    pub const TRANSACTION_ID: &str = "__transactionId__";
    /// Check-back counter on half messages.
    pub const TRANSACTION_CHECK_TIMES: &str = "TRANSACTION_CHECK_TIMES";
    /// Namespace instance id.
    pub const INSTANCE_ID: &str = "INSTANCE_ID";
    /// Request-reply correlation id.
    pub const CORRELATION_ID: &str = "CORRELATION_ID";
    /// Request-reply: the requesting client.
    pub const REPLY_TO_CLIENT: &str = "REPLY_TO_CLIENT";
    /// Request-reply time to live.
    pub const TTL: &str = "TTL";
    /// Request-reply arrival time.
    pub const ARRIVE_TIME: &str = "ARRIVE_TIME";
    /// Request-reply push time.
    pub const PUSH_REPLY_TIME: &str = "PUSH_REPLY_TIME";
    /// Cluster name, added by the broker on every send.
    pub const CLUSTER: &str = "CLUSTER";
    /// Message type; `reply` marks replies.
    pub const MSG_TYPE: &str = "MSG_TYPE";
    /// Pop checkpoint.
    pub const POP_CK: &str = "POP_CK";
    /// Pop checkpoint offset.
    pub const POP_CK_OFFSET: &str = "POP_CK_OFFSET";
    /// First pop time.
    pub const FIRST_POP_TIME: &str = "1ST_POP_TIME";
    /// Sharding key for ordered sends.
    pub const SHARDING_KEY: &str = "__SHARDINGKEY";
    /// 5.x forward queue id.
    pub const FORWARD_QUEUE_ID: &str = "PROPERTY_FORWARD_QUEUE_ID";
    /// 5.x redirect marker.
    pub const REDIRECT: &str = "REDIRECT";
    /// 5.x light message queue dispatch list.
    pub const INNER_MULTI_DISPATCH: &str = "INNER_MULTI_DISPATCH";
    /// 5.x light message queue offsets.
    pub const INNER_MULTI_QUEUE_OFFSET: &str = "INNER_MULTI_QUEUE_OFFSET";
    /// Tracing context.
    pub const TRACE_CONTEXT: &str = "TRACE_CONTEXT";
    /// 5.x arbitrary delay, seconds.
    pub const TIMER_DELAY_SEC: &str = "TIMER_DELAY_SEC";
    /// 5.x arbitrary delay, milliseconds.
    pub const TIMER_DELAY_MS: &str = "TIMER_DELAY_MS";
    /// 5.x absolute delivery time, milliseconds.
    pub const TIMER_DELIVER_MS: &str = "TIMER_DELIVER_MS";
    /// 5.x timer wheel: enqueue time.
    pub const TIMER_ENQUEUE_MS: &str = "TIMER_ENQUEUE_MS";
    /// 5.x timer wheel: dequeue time.
    pub const TIMER_DEQUEUE_MS: &str = "TIMER_DEQUEUE_MS";
    /// 5.x timer wheel: roll count.
    pub const TIMER_ROLL_TIMES: &str = "TIMER_ROLL_TIMES";
    /// 5.x timer wheel: out time.
    pub const TIMER_OUT_MS: &str = "TIMER_OUT_MS";
    /// 5.x timer wheel: deleted unique key.
    pub const TIMER_DEL_UNIQKEY: &str = "TIMER_DEL_UNIQKEY";
    /// 5.x timer wheel: delay level.
    pub const TIMER_DELAY_LEVEL: &str = "TIMER_DELAY_LEVEL";
    /// 5.x proxy-supplied born host.
    pub const BORN_HOST: &str = "__BORNHOST";
    /// 5.x proxy-supplied born time.
    pub const BORN_TIMESTAMP: &str = "BORN_TIMESTAMP";
    /// Optional per-record CRC tail.
    pub const CRC32: &str = "__CRC32#";
    /// 5.x DLQ origin topic.
    pub const DLQ_ORIGIN_TOPIC: &str = "DLQ_ORIGIN_TOPIC";
    /// 5.x DLQ origin message id.
    pub const DLQ_ORIGIN_MESSAGE_ID: &str = "DLQ_ORIGIN_MESSAGE_ID";
    /// Client-side only topic sysflag, never stored.
    pub const TRANSIENT_TOPIC_SYS_FLAG: &str = "__RMQ.TRANSIENT.TOPIC_SYS_FLAG";
    /// Client-side only group sysflag, never stored.
    pub const TRANSIENT_GROUP_SYS_FLAG: &str = "__RMQ.TRANSIENT.GROUP_SYS_FLAG";
    /// Prefix of names that are never stored.
    pub const TRANSIENT_PREFIX: &str = "__RMQ.TRANSIENT.";
    /// Delay marker some producers use (not a `MessageConst` entry).
    pub const START_DELIVER_TIME: &str = "__STARTDELIVERTIME";

    /// Every reserved name; applications must not set these as user properties.
    pub const RESERVED: &[&str] = &[
        KEYS,
        TAGS,
        WAIT,
        DELAY,
        RETRY_TOPIC,
        REAL_TOPIC,
        REAL_QID,
        TRAN_MSG,
        PGROUP,
        MIN_OFFSET,
        MAX_OFFSET,
        BUYER_ID,
        ORIGIN_MESSAGE_ID,
        TRANSFER_FLAG,
        CORRECTION_FLAG,
        MQ2_FLAG,
        RECONSUME_TIME,
        MSG_REGION,
        TRACE_ON,
        UNIQ_KEY,
        EXTEND_UNIQ_INFO,
        MAX_RECONSUME_TIMES,
        CONSUME_START_TIME,
        INNER_NUM,
        INNER_BASE,
        DUP_INFO,
        CHECK_IMMUNITY_TIME_IN_SECONDS,
        TRAN_PREPARED_QUEUE_OFFSET,
        TRANSACTION_ID,
        TRANSACTION_CHECK_TIMES,
        INSTANCE_ID,
        CORRELATION_ID,
        REPLY_TO_CLIENT,
        TTL,
        ARRIVE_TIME,
        PUSH_REPLY_TIME,
        CLUSTER,
        MSG_TYPE,
        POP_CK,
        POP_CK_OFFSET,
        FIRST_POP_TIME,
        SHARDING_KEY,
        FORWARD_QUEUE_ID,
        REDIRECT,
        INNER_MULTI_DISPATCH,
        INNER_MULTI_QUEUE_OFFSET,
        TRACE_CONTEXT,
        TIMER_DELAY_SEC,
        TIMER_DELAY_MS,
        TIMER_DELIVER_MS,
        TIMER_ENQUEUE_MS,
        TIMER_DEQUEUE_MS,
        TIMER_ROLL_TIMES,
        TIMER_OUT_MS,
        TIMER_DEL_UNIQKEY,
        TIMER_DELAY_LEVEL,
        BORN_HOST,
        BORN_TIMESTAMP,
        CRC32,
        DLQ_ORIGIN_TOPIC,
        DLQ_ORIGIN_MESSAGE_ID,
        TRANSIENT_TOPIC_SYS_FLAG,
        TRANSIENT_GROUP_SYS_FLAG,
    ];

    /// True when `name` is reserved by the protocol.
    pub fn is_reserved(name: &str) -> bool {
        RESERVED.contains(&name)
    }
}

/// Iterates the entries of a properties string in order, duplicates included, as Java's
/// decoder visits them. No allocation.
pub fn iter(text: &str) -> Iter<'_> {
    Iter { rest: Some(text) }
}

/// The value of `name` in a properties string (the last occurrence wins), with no allocation.
pub fn get<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    iter(text)
        .filter(|(key, _)| *key == name)
        .last()
        .map(|(_, value)| value)
}

/// Iterator over `(name, value)` pairs of a properties string; see [`iter`].
#[derive(Clone, Debug)]
pub struct Iter<'a> {
    rest: Option<&'a str>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<(&'a str, &'a str)> {
        loop {
            let rest = self.rest?;
            if rest.is_empty() {
                self.rest = None;
                return None;
            }
            let (segment, after) = match split_once_ascii(rest, PROPERTY_SEPARATOR) {
                Some((segment, after)) => (segment, Some(after)),
                None => (rest, None),
            };
            self.rest = after;
            if let Some(pair) = split_segment(segment) {
                return Some(pair);
            }
        }
    }
}

/// Java accepts a segment when its first `0x01` is neither the first nor the last character.
/// Java searches for `0x01` from the segment start through the whole string, so a segment
/// with no `0x01` of its own is ignored, which `split_once` on the segment reproduces.
fn split_segment(segment: &str) -> Option<(&str, &str)> {
    let (name, value) = split_once_ascii(segment, NAME_VALUE_SEPARATOR)?;
    if name.is_empty() || value.is_empty() {
        return None;
    }
    Some((name, value))
}

/// `text.split_once(separator)` for an ASCII separator, by a plain byte scan: the generic
/// `char` searcher (memchr of the last UTF-8 byte, then a memcmp per candidate) cost a tenth
/// of a timer storm's dispatch on properties of a few hundred bytes.
fn split_once_ascii(text: &str, separator: char) -> Option<(&str, &str)> {
    assert!(separator.is_ascii(), "separators are single bytes");
    let separator = separator as u8;
    let at = text.bytes().position(|byte| byte == separator)?;
    // An ASCII byte is a whole character, so both halves stay on character boundaries.
    Some((&text[..at], &text[at + 1..]))
}

/// Most entries [`Properties::decode`] reserves before parsing.
const PROPERTIES_CAPACITY_MAX: usize = 16;

/// Appends one encoded entry: `name 0x01 value 0x02`.
pub fn push_entry(dst: &mut String, name: &str, value: &str) {
    dst.push_str(name);
    dst.push(NAME_VALUE_SEPARATOR);
    dst.push_str(value);
    dst.push(PROPERTY_SEPARATOR);
}

/// An owned property map: insertion order kept, a repeated name replaces the earlier value.
///
/// A message carries a dozen properties at most, so entries sit back to back in one string
/// with linear lookup (see `pairs`): decoding a message's properties costs two allocations,
/// and encodings are deterministic.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Properties {
    pairs: TextPairs,
}

impl Properties {
    /// An empty map.
    pub fn new() -> Properties {
        Properties::default()
    }

    /// Decodes a properties string with Java's rules.
    pub fn decode(text: &str) -> Properties {
        // Capped so a string of bare separators cannot reserve more than a typical message's
        // worth of entries up front; the text is never longer than the input.
        let separators = text.bytes().filter(|byte| *byte == 2).count();
        let capacity = (separators + 1).min(PROPERTIES_CAPACITY_MAX);
        let mut properties = Properties {
            pairs: TextPairs::with_capacity(capacity, text.len()),
        };
        for (name, value) in iter(text) {
            properties.insert(name, value);
        }
        properties
    }

    /// Encodes with `0x02` after every entry. Entries whose name or value contains a separator
    /// would not survive a round trip; Java writes them anyway, and so does this.
    pub fn encode(&self) -> String {
        let mut text = String::with_capacity(self.pairs.text_len() + 2 * self.pairs.len());
        for (name, value) in self.pairs.iter() {
            push_entry(&mut text, name, value);
        }
        text
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// The value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs.get(name)
    }

    /// Sets `name` to `value`, replacing an earlier value in place.
    pub fn insert(&mut self, name: impl AsRef<str>, value: impl AsRef<str>) {
        self.pairs.insert(name.as_ref(), value.as_ref());
    }

    /// Removes `name`, returning its value.
    pub fn remove(&mut self, name: &str) -> Option<String> {
        self.pairs.remove(name)
    }

    /// Entries in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pairs.iter()
    }

    /// Entries whose names are not reserved: what an application set itself.
    pub fn user_properties(&self) -> impl Iterator<Item = (&str, &str)> {
        self.iter().filter(|(name, _)| !names::is_reserved(name))
    }
}

impl fmt::Display for Properties {
    /// Renders `name=value` pairs separated by commas, for logs (the separators are control
    /// characters and would garble a terminal).
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, (name, value)) in self.iter().enumerate() {
            if index > 0 {
                formatter.write_str(", ")?;
            }
            write!(formatter, "{name}={value}")?;
        }
        Ok(())
    }
}

impl<K: AsRef<str>, V: AsRef<str>> FromIterator<(K, V)> for Properties {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(pairs: I) -> Properties {
        let mut properties = Properties::new();
        for (name, value) in pairs {
            properties.insert(name, value);
        }
        properties
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        // Proves the byte scan splits exactly where `str::split_once` does, for any text
        // (multi-byte characters included) and both separators.
        #[test]
        fn ascii_split_matches_str_split(text in "[a\u{1}\u{2}é名🚀 ]{0,24}") {
            for separator in [NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR] {
                proptest::prop_assert_eq!(
                    split_once_ascii(&text, separator),
                    text.split_once(separator)
                );
            }
        }
    }

    // Proves Java's rules: short/invalid segments dropped, last wins, trailing segment parsed.
    #[test]
    fn java_decoding_rules() {
        let text = "A\u{1}1\u{2}\u{2}x\u{2}\u{1}v\u{2}k\u{1}\u{2}A\u{1}2\u{2}TAGS\u{1}TagA";
        let pairs: Vec<_> = iter(text).collect();
        assert_eq!(pairs, vec![("A", "1"), ("A", "2"), ("TAGS", "TagA")]);
        let properties = Properties::decode(text);
        assert_eq!(properties.get("A"), Some("2"));
        assert_eq!(properties.get("TAGS"), Some("TagA"));
        assert_eq!(properties.len(), 2);
        assert_eq!(get(text, "A"), Some("2"));
        assert_eq!(get(text, "k"), None);
    }

    // Proves a value may contain 0x01 (only the first separator splits) and encode ends every
    // entry with 0x02.
    #[test]
    fn encode_and_inner_separator() {
        assert_eq!(
            iter("a\u{1}b\u{1}c").collect::<Vec<_>>(),
            vec![("a", "b\u{1}c")]
        );
        let properties: Properties = [("KEYS", "k1 k2"), ("WAIT", "true")].into_iter().collect();
        assert_eq!(properties.encode(), "KEYS\u{1}k1 k2\u{2}WAIT\u{1}true\u{2}");
        assert_eq!(Properties::decode(&properties.encode()), properties);
        assert_eq!(properties.to_string(), "KEYS=k1 k2, WAIT=true");
        assert!(names::is_reserved("UNIQ_KEY"));
        assert_eq!(properties.user_properties().count(), 0);
    }
}
