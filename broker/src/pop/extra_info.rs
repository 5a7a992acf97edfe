//! The strings a pop answer carries (Java's `ExtraInfoUtil`) and the pop retry topic names
//! (Java's `KeyBuilder`).
//!
//! A popped message's `POP_CK` property (its receipt handle) is
//! `<startOffset> <popTime> <invisibleTime> <reviveQid> <retryFlag> <brokerName> <queueId>
//! <queueOffset>`, space separated; the consumer sends it back with its ack or
//! invisible-time change. `startOffset` is where the pop of that queue started (or the
//! message's own offset after an invisible-time change), and with the topic, group, queue
//! and pop time names the checkpoint the ack belongs to. The retry flag is `0` for the topic
//! itself, `1` for its pop retry topic `%RETRY%<group>_<topic>` (Java's v1 name, the one 5.x
//! uses while `enableRetryTopicV2` is false, its default) and `2` for the v2 name
//! `%RETRY%<group>+<topic>`.

use comet_proto::names::RETRY_TOPIC_PREFIX;

/// Separator of the v1 pop retry topic name.
const RETRY_SEPARATOR_V1: char = '_';
/// Separator of the v2 pop retry topic name.
const RETRY_SEPARATOR_V2: char = '+';

/// Why a `POP_CK` string does not parse.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ExtraInfoError {
    /// Fewer fields than needed.
    #[error("extraInfo has {found} fields, at least 7 are needed")]
    TooShort {
        /// Fields found.
        found: usize,
    },
    /// A numeric field is not a number.
    #[error("extraInfo field {index} ({value:?}) is not a number")]
    NotANumber {
        /// Field position.
        index: usize,
        /// Its text.
        value: String,
    },
    /// The retry flag is none of 0, 1, 2.
    #[error("extraInfo retry flag {0:?} is not 0, 1 or 2")]
    RetryFlag(String),
}

/// A parsed `POP_CK` string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtraInfo {
    /// Start offset of the checkpoint.
    pub ck_queue_offset: i64,
    /// Pop time, ms.
    pub pop_time: i64,
    /// Invisible time, ms.
    pub invisible_time: i64,
    /// Revive queue id.
    pub revive_qid: i32,
    /// `0`, `1` or `2` (see the module docs).
    pub retry_flag: String,
    /// Broker name.
    pub broker_name: String,
    /// Queue id.
    pub queue_id: i32,
    /// The message's queue offset, when present (8 fields).
    pub queue_offset: Option<i64>,
}

impl ExtraInfo {
    /// Parses `text` as Java's `ExtraInfoUtil` reads it.
    pub fn parse(text: &str) -> Result<ExtraInfo, ExtraInfoError> {
        let fields: Vec<&str> = text.split(' ').collect();
        if fields.len() < 7 {
            return Err(ExtraInfoError::TooShort {
                found: fields.len(),
            });
        }
        let number = |index: usize| -> Result<i64, ExtraInfoError> {
            fields[index]
                .parse::<i64>()
                .map_err(|_| ExtraInfoError::NotANumber {
                    index,
                    value: fields[index].to_owned(),
                })
        };
        let small = |index: usize| -> Result<i32, ExtraInfoError> {
            i32::try_from(number(index)?).map_err(|_| ExtraInfoError::NotANumber {
                index,
                value: fields[index].to_owned(),
            })
        };
        let retry_flag = fields[4].to_owned();
        if !matches!(retry_flag.as_str(), "0" | "1" | "2") {
            return Err(ExtraInfoError::RetryFlag(retry_flag));
        }
        Ok(ExtraInfo {
            ck_queue_offset: number(0)?,
            pop_time: number(1)?,
            invisible_time: number(2)?,
            revive_qid: small(3)?,
            retry_flag,
            broker_name: fields[5].to_owned(),
            queue_id: small(6)?,
            queue_offset: if fields.len() > 7 {
                Some(number(7)?)
            } else {
                None
            },
        })
    }

    /// The string Java's `ExtraInfoUtil.buildExtraInfo` writes for a message of `topic` (the
    /// queue's topic: a pop retry topic gives its flag).
    pub fn build(&self) -> String {
        let mut text = format!(
            "{} {} {} {} {} {} {}",
            self.ck_queue_offset,
            self.pop_time,
            self.invisible_time,
            self.revive_qid,
            self.retry_flag,
            self.broker_name,
            self.queue_id
        );
        if let Some(offset) = self.queue_offset {
            text.push(' ');
            text.push_str(&offset.to_string());
        }
        text
    }
}

/// The retry flag of a queue's topic (Java's `ExtraInfoUtil.getRetry`).
pub fn retry_flag(topic: &str) -> &'static str {
    if is_pop_retry_topic_v2(topic) {
        "2"
    } else if topic.starts_with(RETRY_TOPIC_PREFIX) {
        "1"
    } else {
        "0"
    }
}

/// True for a v2 pop retry topic name (`%RETRY%<group>+<topic>`).
fn is_pop_retry_topic_v2(topic: &str) -> bool {
    topic.starts_with(RETRY_TOPIC_PREFIX) && topic.contains(RETRY_SEPARATOR_V2)
}

/// The group's pop retry topic for `topic` under Java 5.x's default naming (v1):
/// `%RETRY%<group>_<topic>`.
pub fn pop_retry_topic(topic: &str, group: &str) -> String {
    format!("{RETRY_TOPIC_PREFIX}{group}{RETRY_SEPARATOR_V1}{topic}")
}

/// The v2 pop retry topic name: `%RETRY%<group>+<topic>`.
pub fn pop_retry_topic_v2(topic: &str, group: &str) -> String {
    format!("{RETRY_TOPIC_PREFIX}{group}{RETRY_SEPARATOR_V2}{topic}")
}

/// The topic a queue's messages are answered under: the subscribed topic for a pop retry
/// topic of `group` (Java's `KeyBuilder.parseNormalTopic`), else `topic` itself.
pub fn normal_topic<'t>(topic: &'t str, group: &str) -> &'t str {
    let Some(rest) = topic.strip_prefix(RETRY_TOPIC_PREFIX) else {
        return topic;
    };
    let Some(rest) = rest.strip_prefix(group) else {
        return topic;
    };
    rest.strip_prefix(RETRY_SEPARATOR_V2)
        .or_else(|| rest.strip_prefix(RETRY_SEPARATOR_V1))
        .unwrap_or(topic)
}

/// The queue topic a retry flag names (Java's `ExtraInfoUtil.getRealTopic`); `None` for an
/// unknown flag.
pub fn real_topic(topic: &str, group: &str, retry_flag: &str) -> Option<String> {
    match retry_flag {
        "0" => Some(topic.to_owned()),
        "1" => Some(pop_retry_topic(topic, group)),
        "2" => Some(pop_retry_topic_v2(topic, group)),
        _ => None,
    }
}

/// Appends `<retryFlag> <queueId> <value>` to a `;`-joined offset-info string.
pub fn push_info(info: &mut String, topic: &str, queue_id: i32, value: &str) {
    if !info.is_empty() {
        info.push(';');
    }
    info.push_str(retry_flag(topic));
    info.push(' ');
    info.push_str(&queue_id.to_string());
    info.push(' ');
    info.push_str(value);
}

/// Appends an orderly pop's delivery counts for one queue to `info` (its
/// `orderCountInfo`), as Java writes them: `<retryFlag> qo<queueId>%<offset> <count>` for
/// each message delivered before, then `<retryFlag> <queueId> <smallest count>` (which
/// older clients read).
pub fn push_order_count_info(
    info: &mut String,
    topic: &str,
    queue_id: i32,
    deliveries: &super::order::Deliveries,
) {
    for (offset, count) in &deliveries.by_offset {
        if !info.is_empty() {
            info.push(';');
        }
        info.push_str(&format!(
            "{} qo{queue_id}%{offset} {count}",
            retry_flag(topic)
        ));
    }
    push_info(info, topic, queue_id, &deliveries.min.to_string());
}

/// Joins two `;`-joined offset-info strings.
pub fn join_info(info: &mut String, more: &str) {
    if more.is_empty() {
        return;
    }
    if !info.is_empty() {
        info.push(';');
    }
    info.push_str(more);
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the delivery counts are written in the shape Java's `parseOrderCountInfo`
    // reads: three fields per entry, offset entries keyed `qo<queue>%<offset>`.
    #[test]
    fn order_count_info_has_javas_shape() {
        let mut info = String::new();
        let deliveries = crate::pop::order::Deliveries {
            by_offset: vec![(4, 2), (5, 1)],
            min: 1,
        };
        push_order_count_info(&mut info, "T", 3, &deliveries);
        assert_eq!(info, "0 qo3%4 2;0 qo3%5 1;0 3 1");
        let mut fresh = String::new();
        push_order_count_info(&mut fresh, "T", 0, &Default::default());
        assert_eq!(fresh, "0 0 0");
    }

    // Proves a receipt handle round-trips in Java's field order, with and without the
    // message offset, and that malformed ones are refused rather than misread.
    #[test]
    fn extra_info_round_trips_and_refuses_garbage() {
        let text = "40 1700000000000 60000 3 1 broker-a 2 41";
        let info = ExtraInfo::parse(text).unwrap();
        assert_eq!(info.ck_queue_offset, 40);
        assert_eq!(info.pop_time, 1_700_000_000_000);
        assert_eq!(info.invisible_time, 60_000);
        assert_eq!(info.revive_qid, 3);
        assert_eq!(info.retry_flag, "1");
        assert_eq!(info.broker_name, "broker-a");
        assert_eq!(info.queue_id, 2);
        assert_eq!(info.queue_offset, Some(41));
        assert_eq!(info.build(), text);
        let short = ExtraInfo::parse("40 1 2 3 0 b 2").unwrap();
        assert_eq!(short.queue_offset, None);
        assert_eq!(short.build(), "40 1 2 3 0 b 2");
        assert_eq!(
            ExtraInfo::parse("40 1 2"),
            Err(ExtraInfoError::TooShort { found: 3 })
        );
        assert!(matches!(
            ExtraInfo::parse("x 1 2 3 0 b 2"),
            Err(ExtraInfoError::NotANumber { index: 0, .. })
        ));
        assert!(matches!(
            ExtraInfo::parse("1 1 2 3 7 b 2"),
            Err(ExtraInfoError::RetryFlag(_))
        ));
    }

    // Proves the retry topic names and flags follow Java's KeyBuilder and ExtraInfoUtil:
    // v1 `_`, v2 `+`, and the subscribed topic recovered from either.
    #[test]
    fn retry_topic_names_and_flags() {
        assert_eq!(pop_retry_topic("T", "g"), "%RETRY%g_T");
        assert_eq!(pop_retry_topic_v2("T", "g"), "%RETRY%g+T");
        assert_eq!(retry_flag("T"), "0");
        assert_eq!(retry_flag("%RETRY%g_T"), "1");
        assert_eq!(retry_flag("%RETRY%g+T"), "2");
        assert_eq!(normal_topic("%RETRY%g_T", "g"), "T");
        assert_eq!(normal_topic("%RETRY%g+T", "g"), "T");
        assert_eq!(normal_topic("T", "g"), "T");
        assert_eq!(real_topic("T", "g", "1").unwrap(), "%RETRY%g_T");
        assert_eq!(real_topic("T", "g", "9"), None);
        let mut info = String::new();
        push_info(&mut info, "T", 0, "5");
        push_info(&mut info, "%RETRY%g_T", 0, "7,8");
        assert_eq!(info, "0 0 5;1 0 7,8");
        join_info(&mut info, "");
        join_info(&mut info, "0 1 3");
        assert_eq!(info, "0 0 5;1 0 7,8;0 1 3");
    }
}
