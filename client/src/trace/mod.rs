//! Message trace in Java's format (docs/protocol.md#message-trace): what a producer sent and
//! what a consumer consumed, written as messages to the trace topic (`RMQ_SYS_TRACE_TOPIC`
//! unless configured), so traces written by comet-client and by Java clients read alike
//! (`mqadmin queryMsgTraceById`, the dashboard).
//!
//! A trace message's body is a run of records, each ended by [`FIELD_SEPARATOR`] (U+0002),
//! its fields separated by [`CONTENT_SEPARATOR`] (U+0001), in the order of Java's
//! `TraceDataEncoder`; its keys are the traced messages' ids and keys, so a trace is found by
//! querying the trace topic by message id. [`encode`] writes records, [`decode`] reads them
//! as Java's decoder does; [`dispatcher`] batches and sends them off the send path.

pub mod consume;
pub mod dispatcher;

use std::fmt::Write as _;

use thiserror::Error;

pub use consume::{ConsumeReturnType, ConsumeTracer};
pub use dispatcher::TraceDispatcher;

/// The trace topic when none is configured (`TopicValidator.RMQ_SYS_TRACE_TOPIC`).
pub const TRACE_TOPIC_DEFAULT: &str = comet_proto::names::TRACE_TOPIC;
/// Separates the fields of one record (`TraceConstants.CONTENT_SPLITOR`).
pub const CONTENT_SEPARATOR: char = '\u{1}';
/// Ends each record (`TraceConstants.FIELD_SPLITOR`).
pub const FIELD_SEPARATOR: char = '\u{2}';
/// The group of the producer that sends a client's traces: this prefix and the traced
/// group (`TraceConstants.GROUP_NAME_PREFIX`).
pub const TRACE_PRODUCER_GROUP_PREFIX: &str = "_INNER_TRACE_PRODUCER-";
/// The region written when the broker named none (Java's `DefaultRegion`).
pub const REGION_DEFAULT: &str = "DefaultRegion";

/// Java's `MessageType`, written as its ordinal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceMessageType {
    /// `Normal_Msg`.
    Normal = 0,
    /// `Trans_Msg_Half`: a transactional half message.
    TransactionHalf = 1,
    /// `Trans_msg_Commit`.
    TransactionCommit = 2,
    /// `Delay_Msg`: a delay level or a timer.
    Delay = 3,
    /// `Order_Msg`.
    Order = 4,
}

impl TraceMessageType {
    fn from_ordinal(ordinal: i64) -> Option<TraceMessageType> {
        Some(match ordinal {
            0 => TraceMessageType::Normal,
            1 => TraceMessageType::TransactionHalf,
            2 => TraceMessageType::TransactionCommit,
            3 => TraceMessageType::Delay,
            4 => TraceMessageType::Order,
            _ => return None,
        })
    }
}

/// A send, as Java's `SendMessageTraceHookImpl` records it (`Pub`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PubTrace {
    /// When the send started, ms since the epoch.
    pub timestamp_ms: i64,
    /// The broker's region (`MSG_REGION` of the answer).
    pub region_id: String,
    /// The producer group.
    pub group: String,
    /// The message's topic.
    pub topic: String,
    /// The message id (`UNIQ_KEY`).
    pub msg_id: String,
    /// Its tags; Java writes `null` for none.
    pub tags: Option<String>,
    /// Its keys, space separated; Java writes `null` for none.
    pub keys: Option<String>,
    /// The broker address the message went to.
    pub store_host: String,
    /// The body's length as sent (after compression).
    pub body_length: i64,
    /// The send's duration in ms.
    pub cost_ms: i64,
    /// The message's kind.
    pub msg_type: TraceMessageType,
    /// The broker's offset message id.
    pub offset_msg_id: String,
    /// Stored with SEND_OK.
    pub success: bool,
}

/// A message handed to a listener (`SubBefore`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubBeforeTrace {
    /// When the listener was called, ms since the epoch.
    pub timestamp_ms: i64,
    /// The broker's region.
    pub region_id: String,
    /// The consumer group.
    pub group: String,
    /// Ties the before and after records of one listener call.
    pub request_id: String,
    /// The message id.
    pub msg_id: String,
    /// Its reconsume count.
    pub retry_times: i64,
    /// Its keys.
    pub keys: Option<String>,
}

/// A listener's outcome for a message (`SubAfter`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubAfterTrace {
    /// The [`SubBeforeTrace::request_id`] of the same call.
    pub request_id: String,
    /// The message id.
    pub msg_id: String,
    /// The call's duration in ms, shared out over its messages as Java does.
    pub cost_ms: i64,
    /// The listener consumed it.
    pub success: bool,
    /// Its keys.
    pub keys: Option<String>,
    /// Java's `ConsumeReturnType` ordinal (0 success, 1 timeout, 2 exception, 3 return null,
    /// 4 failed).
    pub context_code: i64,
    /// When the call ended, ms since the epoch.
    pub timestamp_ms: i64,
}

/// One trace record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceRecord {
    /// A send.
    Pub(PubTrace),
    /// Before a listener call.
    SubBefore(SubBeforeTrace),
    /// After a listener call.
    SubAfter(SubAfterTrace),
}

impl TraceRecord {
    /// The topic whose traces travel together: the traced message's (empty for consume
    /// records, which Java groups under their context's first message topic too; here they
    /// go together).
    pub fn topic(&self) -> &str {
        match self {
            TraceRecord::Pub(record) => &record.topic,
            TraceRecord::SubBefore(_) | TraceRecord::SubAfter(_) => "",
        }
    }

    /// The keys the trace message carries for this record: the message id, and its keys
    /// when it has any (Java's `TraceTransferBean.transKey`).
    pub fn keys(&self) -> Vec<String> {
        let (msg_id, keys) = match self {
            TraceRecord::Pub(record) => (&record.msg_id, &record.keys),
            TraceRecord::SubBefore(record) => (&record.msg_id, &record.keys),
            TraceRecord::SubAfter(record) => (&record.msg_id, &record.keys),
        };
        let mut out = vec![msg_id.clone()];
        if let Some(keys) = keys.as_ref().filter(|keys| !keys.is_empty()) {
            out.push(keys.clone());
        }
        out
    }
}

/// Appends `record` to `out` in Java's layout (fields in its order, `null` for an absent
/// tag or key, as Java's `StringBuilder` writes a null).
pub fn encode(record: &TraceRecord, out: &mut String) {
    fn text(value: &Option<String>) -> &str {
        value.as_deref().unwrap_or("null")
    }
    let fields: Vec<String> = match record {
        TraceRecord::Pub(r) => vec![
            "Pub".into(),
            r.timestamp_ms.to_string(),
            r.region_id.clone(),
            r.group.clone(),
            r.topic.clone(),
            r.msg_id.clone(),
            text(&r.tags).into(),
            text(&r.keys).into(),
            r.store_host.clone(),
            r.body_length.to_string(),
            r.cost_ms.to_string(),
            (r.msg_type as i64).to_string(),
            r.offset_msg_id.clone(),
            r.success.to_string(),
        ],
        TraceRecord::SubBefore(r) => vec![
            "SubBefore".into(),
            r.timestamp_ms.to_string(),
            r.region_id.clone(),
            r.group.clone(),
            r.request_id.clone(),
            r.msg_id.clone(),
            r.retry_times.to_string(),
            text(&r.keys).into(),
        ],
        TraceRecord::SubAfter(r) => vec![
            "SubAfter".into(),
            r.request_id.clone(),
            r.msg_id.clone(),
            r.cost_ms.to_string(),
            r.success.to_string(),
            text(&r.keys).into(),
            r.context_code.to_string(),
            r.timestamp_ms.to_string(),
        ],
    };
    for (index, field) in fields.iter().enumerate() {
        if index > 0 {
            out.push(CONTENT_SEPARATOR);
        }
        // A separator inside a field would split it on reading; Java writes it as is, which
        // corrupts the record, so it is replaced by a space here.
        for c in field.chars() {
            let _ = out.write_char(if c == CONTENT_SEPARATOR || c == FIELD_SEPARATOR {
                ' '
            } else {
                c
            });
        }
    }
    out.push(FIELD_SEPARATOR);
}

/// A trace body that does not read as Java's layout.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum TraceDecodeError {
    /// A record of a known type with too few fields.
    #[error("a {kind} record has {fields} fields, at least {needed} are needed")]
    TooFewFields {
        /// The record type.
        kind: &'static str,
        /// Fields found.
        fields: usize,
        /// Fields needed.
        needed: usize,
    },
    /// A number or boolean field that does not parse.
    #[error("field {index} of a {kind} record is not a valid value: {value:?}")]
    BadField {
        /// The record type.
        kind: &'static str,
        /// The field's index.
        index: usize,
        /// Its text.
        value: String,
    },
}

/// Reads a trace body as Java's `TraceDataEncoder.decoderFromTraceDataString` does: records
/// of unknown types are skipped; a known one that does not parse is an error.
pub fn decode(body: &str) -> Result<Vec<TraceRecord>, TraceDecodeError> {
    let mut records = Vec::new();
    for record in body.split(FIELD_SEPARATOR).filter(|r| !r.is_empty()) {
        let fields: Vec<&str> = record.split(CONTENT_SEPARATOR).collect();
        let kind: &'static str = match fields[0] {
            "Pub" => "Pub",
            "SubBefore" => "SubBefore",
            "SubAfter" => "SubAfter",
            _ => continue,
        };
        let fields = Fields { kind, fields };
        records.push(match kind {
            "Pub" => {
                fields.need(13)?;
                // 13 fields: an old layout without the offset message id.
                let (offset_msg_id, success_at) = if fields.len() >= 14 {
                    (fields.text(12), 13)
                } else {
                    (String::new(), 12)
                };
                let ordinal = fields.number(11)?;
                TraceRecord::Pub(PubTrace {
                    timestamp_ms: fields.number(1)?,
                    region_id: fields.text(2),
                    group: fields.text(3),
                    topic: fields.text(4),
                    msg_id: fields.text(5),
                    tags: fields.optional(6),
                    keys: fields.optional(7),
                    store_host: fields.text(8),
                    body_length: fields.number(9)?,
                    cost_ms: fields.number(10)?,
                    msg_type: TraceMessageType::from_ordinal(ordinal)
                        .ok_or_else(|| fields.bad(11))?,
                    offset_msg_id,
                    success: fields.boolean(success_at)?,
                })
            }
            "SubBefore" => {
                fields.need(8)?;
                TraceRecord::SubBefore(SubBeforeTrace {
                    timestamp_ms: fields.number(1)?,
                    region_id: fields.text(2),
                    group: fields.text(3),
                    request_id: fields.text(4),
                    msg_id: fields.text(5),
                    retry_times: fields.number(6)?,
                    keys: fields.optional(7),
                })
            }
            _ => {
                fields.need(6)?;
                TraceRecord::SubAfter(SubAfterTrace {
                    request_id: fields.text(1),
                    msg_id: fields.text(2),
                    cost_ms: fields.number(3)?,
                    success: fields.boolean(4)?,
                    keys: fields.optional(5),
                    context_code: if fields.len() > 6 {
                        fields.number(6)?
                    } else {
                        0
                    },
                    timestamp_ms: if fields.len() > 7 {
                        fields.number(7)?
                    } else {
                        0
                    },
                })
            }
        });
    }
    Ok(records)
}

/// The fields of one record being decoded.
struct Fields<'a> {
    kind: &'static str,
    fields: Vec<&'a str>,
}

impl Fields<'_> {
    fn len(&self) -> usize {
        self.fields.len()
    }

    fn need(&self, needed: usize) -> Result<(), TraceDecodeError> {
        if self.fields.len() < needed {
            return Err(TraceDecodeError::TooFewFields {
                kind: self.kind,
                fields: self.fields.len(),
                needed,
            });
        }
        Ok(())
    }

    fn text(&self, index: usize) -> String {
        self.fields[index].to_owned()
    }

    fn optional(&self, index: usize) -> Option<String> {
        Some(self.fields[index])
            .filter(|value| *value != "null")
            .map(str::to_owned)
    }

    fn bad(&self, index: usize) -> TraceDecodeError {
        TraceDecodeError::BadField {
            kind: self.kind,
            index,
            value: self.fields[index].to_owned(),
        }
    }

    fn number(&self, index: usize) -> Result<i64, TraceDecodeError> {
        self.fields[index].parse().map_err(|_| self.bad(index))
    }

    /// Java's `Boolean.parseBoolean`: `true` in any case is true, anything else false.
    fn boolean(&self, index: usize) -> Result<bool, TraceDecodeError> {
        Ok(self.fields[index].eq_ignore_ascii_case("true"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pub_record() -> PubTrace {
        PubTrace {
            timestamp_ms: 1_700_000_000_000,
            region_id: REGION_DEFAULT.into(),
            group: "pg".into(),
            topic: "T".into(),
            msg_id: "7F0000010001".into(),
            tags: Some("TagA".into()),
            keys: None,
            store_host: "127.0.0.1:10911".into(),
            body_length: 11,
            cost_ms: 3,
            msg_type: TraceMessageType::Normal,
            offset_msg_id: "7F00000100002A9F0000000000000000".into(),
            success: true,
        }
    }

    // Proves a Pub record is written field for field as Java's encoder writes it (a null key
    // as "null"), and that a run of records reads back as written.
    #[test]
    fn records_round_trip_in_javas_layout() {
        let mut body = String::new();
        encode(&TraceRecord::Pub(pub_record()), &mut body);
        assert_eq!(
            body,
            "Pub\u{1}1700000000000\u{1}DefaultRegion\u{1}pg\u{1}T\u{1}7F0000010001\u{1}TagA\
             \u{1}null\u{1}127.0.0.1:10911\u{1}11\u{1}3\u{1}0\u{1}\
             7F00000100002A9F0000000000000000\u{1}true\u{2}"
        );
        let before = SubBeforeTrace {
            timestamp_ms: 5,
            region_id: REGION_DEFAULT.into(),
            group: "cg".into(),
            request_id: "r1".into(),
            msg_id: "m1".into(),
            retry_times: 2,
            keys: Some("k1 k2".into()),
        };
        let after = SubAfterTrace {
            request_id: "r1".into(),
            msg_id: "m1".into(),
            cost_ms: 7,
            success: false,
            keys: Some("k1 k2".into()),
            context_code: 4,
            timestamp_ms: 12,
        };
        encode(&TraceRecord::SubBefore(before.clone()), &mut body);
        encode(&TraceRecord::SubAfter(after.clone()), &mut body);
        assert_eq!(
            decode(&body).unwrap(),
            vec![
                TraceRecord::Pub(pub_record()),
                TraceRecord::SubBefore(before),
                TraceRecord::SubAfter(after)
            ]
        );
    }

    // Proves the reader takes Java's older 13-field Pub layout, skips unknown record types,
    // and refuses a known record it cannot read instead of inventing values.
    #[test]
    fn decoding_follows_javas_reader() {
        let old = "Pub\u{1}1\u{1}r\u{1}g\u{1}T\u{1}id\u{1}null\u{1}null\u{1}h\u{1}4\u{1}2\u{1}3\
                   \u{1}TRUE\u{2}";
        let records = decode(&format!("EndTransaction\u{1}x\u{2}{old}")).unwrap();
        let TraceRecord::Pub(record) = &records[0] else {
            panic!("{records:?}")
        };
        assert!(record.success && record.offset_msg_id.is_empty());
        assert_eq!(record.msg_type, TraceMessageType::Delay);
        assert_eq!(record.tags, None);
        assert!(matches!(
            decode("Pub\u{1}1\u{2}"),
            Err(TraceDecodeError::TooFewFields { .. })
        ));
        assert!(matches!(
            decode(&old.replace("\u{1}4\u{1}", "\u{1}four\u{1}")),
            Err(TraceDecodeError::BadField { index: 9, .. })
        ));
    }

    // Proves a separator inside a field cannot split the record.
    #[test]
    fn separators_inside_fields_are_neutralised() {
        let mut record = pub_record();
        record.keys = Some("a\u{1}b\u{2}c".into());
        let mut body = String::new();
        encode(&TraceRecord::Pub(record), &mut body);
        let TraceRecord::Pub(read) = &decode(&body).unwrap()[0] else {
            panic!()
        };
        assert_eq!(read.keys.as_deref(), Some("a b c"));
    }
}
