//! Log lines about one request, carrying its wire fields as the line's key-values
//! (docs/operations.md#logs): `code` and `opaque` always, and `topic`, `queueId` and `group`
//! when the request names them. The names are RocketMQ's wire names (docs/style.md), so a
//! log line and a packet capture are searched with the same words.
//!
//! A processor logs about a request in one call, [`warn_request!`] (or [`log_request!`] at
//! any level), instead of repeating the fields:
//!
//! ```text
//! comet_net::warn_request!(&request, "topic[{topic}] not exist");
//! // kv: ... level=warn shard=1 target=comet_broker::processor::send
//! //     msg="topic[T] not exist" code=310 opaque=42 topic=T queueId=1 group=G
//! ```
//!
//! The fields are read through the typed headers' keys: the send family through its typed
//! header (whose V2 form uses one-letter keys), every other request by the Java names its
//! typed header gives them (`topic`, `queueId`, `consumerGroup`, `producerGroup`, `group`).
//! A header too malformed to decode still yields the fields it has: a malformed request is
//! what such a line is most often about.

use std::fmt;

use comet_proto::headers::{decode_send_request, uses_send_header_v2};
use comet_proto::{RemotingCommand, RequestCode};
use log::kv::{Error, Key, Source, Value, VisitSource};
/// The level a [`log_request!`] line is written at (re-exported so callers need not name
/// the `log` crate).
pub use log::Level;

/// The wire fields of a request, as a log line's key-values.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestFields {
    /// The request code.
    pub code: i32,
    /// The request id.
    pub opaque: i32,
    /// The topic the request names.
    pub topic: Option<String>,
    /// The queue the request names.
    pub queue_id: Option<i32>,
    /// The producer or consumer group the request names.
    pub group: Option<String>,
}

/// The keys a group travels under in the typed headers, in the order they are looked for.
const GROUP_KEYS: [&str; 3] = ["consumerGroup", "producerGroup", "group"];

fn is_send(code: RequestCode) -> bool {
    matches!(
        code,
        RequestCode::SEND_MESSAGE
            | RequestCode::SEND_MESSAGE_V2
            | RequestCode::SEND_BATCH_MESSAGE
            | RequestCode::SEND_REPLY_MESSAGE
            | RequestCode::SEND_REPLY_MESSAGE_V2
    )
}

impl RequestFields {
    /// The fields of `request` (see the module docs).
    pub fn of(request: &RemotingCommand) -> RequestFields {
        let code = request.request_code();
        let mut fields = RequestFields {
            code: request.code,
            opaque: request.opaque,
            ..RequestFields::default()
        };
        if is_send(code) {
            if let Ok(header) = decode_send_request(request) {
                fields.topic = Some(header.topic);
                fields.queue_id = Some(header.queue_id);
                fields.group = Some(header.producer_group);
                return fields;
            }
            if uses_send_header_v2(code) {
                // SendMessageRequestHeaderV2's keys: a producerGroup, b topic, e queueId.
                let ext = &request.ext_fields;
                fields.group = ext.get("a").map(str::to_owned);
                fields.topic = ext.get("b").map(str::to_owned);
                fields.queue_id = ext.optional_i32("e").ok().flatten();
                return fields;
            }
        }
        let ext = &request.ext_fields;
        fields.topic = ext.get("topic").map(str::to_owned);
        fields.queue_id = ext.optional_i32("queueId").ok().flatten();
        fields.group = GROUP_KEYS
            .iter()
            .find_map(|key| ext.get(key))
            .map(str::to_owned);
        fields
    }

    /// These fields with `topic` in place of the header's (a request whose topic travels in
    /// its body).
    pub fn with_topic(mut self, topic: &str) -> RequestFields {
        self.topic = Some(topic.to_owned());
        self
    }

    /// These fields with `group` in place of the header's.
    pub fn with_group(mut self, group: &str) -> RequestFields {
        self.group = Some(group.to_owned());
        self
    }
}

impl From<&RemotingCommand> for RequestFields {
    fn from(request: &RemotingCommand) -> RequestFields {
        RequestFields::of(request)
    }
}

impl Source for RequestFields {
    fn visit<'kvs>(&'kvs self, visitor: &mut dyn VisitSource<'kvs>) -> Result<(), Error> {
        visitor.visit_pair(Key::from("code"), Value::from(self.code))?;
        visitor.visit_pair(Key::from("opaque"), Value::from(self.opaque))?;
        if let Some(topic) = &self.topic {
            visitor.visit_pair(Key::from("topic"), Value::from(topic.as_str()))?;
        }
        if let Some(queue_id) = self.queue_id {
            visitor.visit_pair(Key::from("queueId"), Value::from(queue_id))?;
        }
        if let Some(group) = &self.group {
            visitor.visit_pair(Key::from("group"), Value::from(group.as_str()))?;
        }
        Ok(())
    }
}

/// Where a request line was written, as the `log` macros record it.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct Site {
    /// The calling module (also the line's target).
    pub module_path: &'static str,
    /// The calling file.
    pub file: &'static str,
    /// The calling line.
    pub line: u32,
}

/// Whether a line at `level` from `target` would be written (the macros' guard, so a
/// filtered-out line costs no header lookup).
#[doc(hidden)]
pub fn enabled(level: Level, target: &str) -> bool {
    log::log_enabled!(target: target, level)
}

/// Writes one line about a request; the macros call it.
#[doc(hidden)]
pub fn emit(level: Level, site: Site, fields: impl Into<RequestFields>, args: fmt::Arguments<'_>) {
    let fields = fields.into();
    log::logger().log(
        &log::Record::builder()
            .level(level)
            .target(site.module_path)
            .module_path_static(Some(site.module_path))
            .file_static(Some(site.file))
            .line(Some(site.line))
            .key_values(&fields)
            .args(args)
            .build(),
    );
}

/// Logs a line about a request at `level`, with the request's wire fields:
/// `log_request!(log::Level::Info, &request, "format {}", args)`. In place of the request, a
/// [`RequestFields`] gives fields the header does not hold
/// (`RequestFields::of(&request).with_topic(&body.topic)`).
#[macro_export]
macro_rules! log_request {
    ($level:expr, $request:expr, $($arg:tt)+) => {{
        let level: $crate::request_log::Level = $level;
        if $crate::request_log::enabled(level, ::std::module_path!()) {
            $crate::request_log::emit(
                level,
                $crate::request_log::Site {
                    module_path: ::std::module_path!(),
                    file: ::std::file!(),
                    line: ::std::line!(),
                },
                $request,
                ::std::format_args!($($arg)+),
            );
        }
    }};
}

/// Logs a warning about a request, with its wire fields (see [`log_request!`]).
#[macro_export]
macro_rules! warn_request {
    ($request:expr, $($arg:tt)+) => {
        $crate::log_request!($crate::request_log::Level::Warn, $request, $($arg)+)
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use comet_proto::headers::{PullMessageRequestHeader, SendMessageRequestHeader};
    use comet_proto::CommandHeader;

    fn pairs(fields: &RequestFields) -> Vec<(String, String)> {
        struct Collect(Vec<(String, String)>);
        impl<'kvs> VisitSource<'kvs> for Collect {
            fn visit_pair(&mut self, key: Key<'kvs>, value: Value<'kvs>) -> Result<(), Error> {
                self.0.push((key.as_str().to_owned(), value.to_string()));
                Ok(())
            }
        }
        let mut collect = Collect(Vec::new());
        fields.visit(&mut collect).unwrap();
        collect.0
    }

    fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    // Proves a V2 send (one-letter keys) and a pull give code, opaque, topic, queueId and
    // group under the wire names, read through their typed headers.
    #[test]
    fn sends_and_pulls_give_every_field() {
        let header = SendMessageRequestHeader {
            producer_group: "PG".into(),
            topic: "T".into(),
            queue_id: 3,
            ..SendMessageRequestHeader::default()
        };
        let v2: comet_proto::headers::SendMessageRequestHeaderV2 = header.into();
        let send = RemotingCommand::request(RequestCode::SEND_MESSAGE_V2, 42).with_header(&v2);
        assert_eq!(
            pairs(&RequestFields::of(&send)),
            owned(&[
                ("code", "310"),
                ("opaque", "42"),
                ("topic", "T"),
                ("queueId", "3"),
                ("group", "PG"),
            ])
        );
        let pull = PullMessageRequestHeader {
            consumer_group: "CG".into(),
            topic: "T".into(),
            queue_id: 1,
            ..PullMessageRequestHeader::default()
        };
        let mut request = RemotingCommand::request(RequestCode::PULL_MESSAGE, 7);
        pull.to_ext_fields(&mut request.ext_fields);
        let fields = RequestFields::of(&request);
        assert_eq!(fields.group.as_deref(), Some("CG"));
        assert_eq!(fields.queue_id, Some(1));
        assert_eq!(fields.topic.as_deref(), Some("T"));
    }

    // Proves a request naming no topic gives only code and opaque, and a malformed send
    // header (no queue id) still gives the fields it has.
    #[test]
    fn absent_fields_are_left_out() {
        let heartbeat = RemotingCommand::request(RequestCode::HEART_BEAT, 9);
        assert_eq!(
            pairs(&RequestFields::of(&heartbeat)),
            owned(&[("code", "34"), ("opaque", "9")])
        );
        let mut send = RemotingCommand::request(RequestCode::SEND_MESSAGE_V2, 5);
        send.ext_fields.insert("b", "T");
        let fields = RequestFields::of(&send);
        assert_eq!(fields.topic.as_deref(), Some("T"));
        assert_eq!(fields.queue_id, None);
    }
}
