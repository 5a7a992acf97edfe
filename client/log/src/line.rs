//! The `kv` (logfmt) and `json` lines, written from a `log::Record` and what the logger
//! adds (time, thread tag), with no I/O so they are tested as plain strings.
//!
//! ```text
//! kv:   ts=2026-12-02T05:30:01.123Z level=warn shard=3 target=comet_broker::processor
//!       msg="topic[T] not exist" code=10 opaque=42 topic=T queueId=1 group=G
//! json: {"ts":"2026-12-02T05:30:01.123Z","level":"warn","shard":3,"target":"...",
//!        "msg":"...","code":10,"opaque":42,"topic":"T","queueId":1,"group":"G"}
//! ```
//!
//! A logfmt value is written bare unless it is empty or holds a blank, `"`, `=`, `\` or a
//! control character; then it is quoted, with `\"`, `\\`, `\n`, `\r`, `\t` and `\u{..}`
//! escapes. The record's fields follow the fixed ones in the order the statement gave them;
//! one named like a fixed field (`ts`, `level`, `shard`, `thread`, `target`, `msg`) is
//! written as `field.<name>` so no key appears twice.

use std::fmt::Write as _;
use std::io;

use log::kv::{Error, Key, Source, Value, VisitSource, VisitValue};
use log::{Level, Record};

use crate::context::ThreadTag;

/// Keys every line writes itself, which a record's own fields may not take.
const FIXED_KEYS: [&str; 6] = ["ts", "level", "shard", "thread", "target", "msg"];

/// What a line says before the record's message and fields.
#[derive(Clone, Copy, Debug)]
pub struct LineHead<'a> {
    /// RFC 3339 UTC time, milliseconds.
    pub ts: &'a str,
    /// The record's level.
    pub level: Level,
    /// The record's target (its module unless the statement names one).
    pub target: &'a str,
    /// Who logged.
    pub tag: &'a ThreadTag,
}

impl<'a> LineHead<'a> {
    /// The head of `record` logged at `ts` by `tag`.
    pub fn of(ts: &'a str, record: &'a Record<'a>, tag: &'a ThreadTag) -> LineHead<'a> {
        LineHead {
            ts,
            level: record.level(),
            target: record.target(),
            tag,
        }
    }
}

fn level_name(level: Level) -> &'static str {
    match level {
        Level::Error => "error",
        Level::Warn => "warn",
        Level::Info => "info",
        Level::Debug => "debug",
        Level::Trace => "trace",
    }
}

fn field_key(key: &str) -> std::borrow::Cow<'_, str> {
    if FIXED_KEYS.contains(&key) {
        format!("field.{key}").into()
    } else {
        key.into()
    }
}

/// Appends `value` as a logfmt value: bare when it can be, else quoted and escaped.
fn push_kv_value(out: &mut String, value: &str) {
    let bare = !value.is_empty()
        && !value
            .chars()
            .any(|c| c == ' ' || c == '"' || c == '=' || c == '\\' || c.is_control());
    if bare {
        out.push_str(value);
        return;
    }
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Appends ` key=value` for each field of `source` (the text format's tail).
struct KvPairs<'a>(&'a mut String);

impl<'kvs> VisitSource<'kvs> for KvPairs<'_> {
    fn visit_pair(&mut self, key: Key<'kvs>, value: Value<'kvs>) -> Result<(), Error> {
        self.0.push(' ');
        self.0.push_str(&field_key(key.as_str()));
        self.0.push('=');
        push_kv_value(self.0, &value.to_string());
        Ok(())
    }
}

/// Writes the fields of `source` as ` key=value` pairs (each preceded by a blank), as the
/// `text` format appends them after the message.
pub fn write_kv_pairs(out: &mut impl io::Write, source: &dyn Source) -> io::Result<()> {
    let mut pairs = String::new();
    source
        .visit(&mut KvPairs(&mut pairs))
        .map_err(io::Error::other)?;
    out.write_all(pairs.as_bytes())
}

/// Appends one logfmt line for `record` (newline included).
pub fn write_kv_line(out: &mut String, head: &LineHead<'_>, record: &Record<'_>) {
    out.push_str("ts=");
    push_kv_value(out, head.ts);
    out.push_str(" level=");
    out.push_str(level_name(head.level));
    match head.tag {
        ThreadTag::Shard(index) => {
            let _ = write!(out, " shard={index}");
        }
        ThreadTag::Named(name) => {
            out.push_str(" thread=");
            push_kv_value(out, name);
        }
        ThreadTag::Unnamed => {}
    }
    out.push_str(" target=");
    push_kv_value(out, head.target);
    out.push_str(" msg=");
    push_kv_value(out, &record.args().to_string());
    // Visiting a slice or map of fields cannot fail; a failing custom source loses its
    // fields, not the line.
    let _ = record.key_values().visit(&mut KvPairs(out));
    out.push('\n');
}

/// A field value as JSON: numbers and booleans as themselves, everything else as text.
struct JsonValue(Option<serde_json::Value>);

impl<'v> VisitValue<'v> for JsonValue {
    fn visit_any(&mut self, value: Value<'_>) -> Result<(), Error> {
        self.0 = Some(serde_json::Value::String(value.to_string()));
        Ok(())
    }
    fn visit_null(&mut self) -> Result<(), Error> {
        self.0 = Some(serde_json::Value::Null);
        Ok(())
    }
    fn visit_u64(&mut self, value: u64) -> Result<(), Error> {
        self.0 = Some(value.into());
        Ok(())
    }
    fn visit_i64(&mut self, value: i64) -> Result<(), Error> {
        self.0 = Some(value.into());
        Ok(())
    }
    fn visit_f64(&mut self, value: f64) -> Result<(), Error> {
        // NaN and infinities have no JSON number: null, as serde_json writes them.
        self.0 = Some(value.into());
        Ok(())
    }
    fn visit_bool(&mut self, value: bool) -> Result<(), Error> {
        self.0 = Some(value.into());
        Ok(())
    }
    fn visit_str(&mut self, value: &str) -> Result<(), Error> {
        self.0 = Some(value.into());
        Ok(())
    }
}

fn push_json_string(out: &mut String, text: &str) {
    out.push_str(&serde_json::Value::from(text).to_string());
}

/// Appends `,"key":value` for each field of a record.
struct JsonPairs<'a>(&'a mut String);

impl<'kvs> VisitSource<'kvs> for JsonPairs<'_> {
    fn visit_pair(&mut self, key: Key<'kvs>, value: Value<'kvs>) -> Result<(), Error> {
        let mut json = JsonValue(None);
        value.visit(&mut json)?;
        let json = json
            .0
            .unwrap_or_else(|| serde_json::Value::String(value.to_string()));
        self.0.push(',');
        push_json_string(self.0, &field_key(key.as_str()));
        self.0.push(':');
        self.0.push_str(&json.to_string());
        Ok(())
    }
}

/// Appends one JSON object line for `record` (newline included).
pub fn write_json_line(out: &mut String, head: &LineHead<'_>, record: &Record<'_>) {
    out.push_str("{\"ts\":");
    push_json_string(out, head.ts);
    out.push_str(",\"level\":\"");
    out.push_str(level_name(head.level));
    out.push('"');
    match head.tag {
        ThreadTag::Shard(index) => {
            let _ = write!(out, ",\"shard\":{index}");
        }
        ThreadTag::Named(name) => {
            out.push_str(",\"thread\":");
            push_json_string(out, name);
        }
        ThreadTag::Unnamed => {}
    }
    out.push_str(",\"target\":");
    push_json_string(out, head.target);
    out.push_str(",\"msg\":");
    push_json_string(out, &record.args().to_string());
    let _ = record.key_values().visit(&mut JsonPairs(out));
    out.push_str("}\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    const TS: &str = "2026-12-02T05:30:01.123Z";

    fn kv_line(tag: &ThreadTag, record: &Record<'_>) -> String {
        let mut out = String::new();
        write_kv_line(&mut out, &LineHead::of(TS, record, tag), record);
        out
    }

    fn json_line(tag: &ThreadTag, record: &Record<'_>) -> String {
        let mut out = String::new();
        write_json_line(&mut out, &LineHead::of(TS, record, tag), record);
        out
    }

    // Proves a logfmt line carries the fixed fields, the shard and the record's fields in
    // order, with bare values left bare.
    #[test]
    fn kv_line_has_every_field() {
        let fields: [(&str, Value<'_>); 5] = [
            ("code", Value::from(10)),
            ("opaque", Value::from(42)),
            ("topic", Value::from("T")),
            ("queueId", Value::from(1)),
            ("group", Value::from("G")),
        ];
        let record = Record::builder()
            .level(Level::Warn)
            .target("comet_broker::processor")
            .args(format_args!("topic not found"))
            .key_values(&fields)
            .build();
        assert_eq!(
            kv_line(&ThreadTag::Shard(3), &record),
            "ts=2026-12-02T05:30:01.123Z level=warn shard=3 target=comet_broker::processor \
             msg=\"topic not found\" code=10 opaque=42 topic=T queueId=1 group=G\n"
        );
    }

    // Proves values holding blanks, quotes, backslashes, `=`, newlines or other control
    // characters are quoted and escaped so one record stays one parseable line, and an empty
    // value still shows as `""`.
    #[test]
    fn kv_values_are_quoted_and_escaped() {
        let fields = [
            ("remark", "say \"hi\"\nnow"),
            ("path", "C:\\x"),
            ("pair", "a=b"),
            ("empty", ""),
            ("bell", "\u{7}"),
        ];
        let record = Record::builder()
            .level(Level::Info)
            .target("t")
            .args(format_args!("tab\there"))
            .key_values(&fields)
            .build();
        let line = kv_line(&ThreadTag::Named("comet-signals".into()), &record);
        assert_eq!(
            line,
            "ts=2026-12-02T05:30:01.123Z level=info thread=comet-signals target=t \
             msg=\"tab\\there\" remark=\"say \\\"hi\\\"\\nnow\" path=\"C:\\\\x\" \
             pair=\"a=b\" empty=\"\" bell=\"\\u{7}\"\n"
        );
        assert_eq!(line.matches('\n').count(), 1);
    }

    // Proves a JSON line is one valid object with every fixed field and every record field,
    // numbers as numbers, text escaped (quotes, newlines), and a field named like a fixed
    // one kept apart instead of overwriting it.
    #[test]
    fn json_line_is_valid_and_complete() {
        let fields: [(&str, Value<'_>); 5] = [
            ("code", Value::from(10)),
            ("opaque", Value::from(-42)),
            ("topic", Value::from("T \"x\"\n")),
            ("enabled", Value::from(true)),
            ("level", Value::from("mine")),
        ];
        let record = Record::builder()
            .level(Level::Error)
            .target("comet_net::connection")
            .args(format_args!("line one\nline \"two\""))
            .key_values(&fields)
            .build();
        let line = json_line(&ThreadTag::Shard(0), &record);
        assert!(
            line.ends_with("}\n") && line.matches('\n').count() == 1,
            "{line}"
        );
        let object: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(object["ts"], TS);
        assert_eq!(object["level"], "error");
        assert_eq!(object["shard"], 0);
        assert_eq!(object["target"], "comet_net::connection");
        assert_eq!(object["msg"], "line one\nline \"two\"");
        assert_eq!(object["code"], 10);
        assert_eq!(object["opaque"], -42);
        assert_eq!(object["topic"], "T \"x\"\n");
        assert_eq!(object["enabled"], true);
        assert_eq!(object["field.level"], "mine");
        assert!(object.get("thread").is_none());
    }

    // Proves a line from a named thread says `thread`, one from an unnamed thread neither
    // `thread` nor `shard`, and a record without fields is still a full object.
    #[test]
    fn json_line_names_the_thread_or_nothing() {
        let record = Record::builder()
            .level(Level::Info)
            .target("t")
            .args(format_args!("m"))
            .build();
        let named = json_line(&ThreadTag::Named("namesrv-0".into()), &record);
        let object: serde_json::Value = serde_json::from_str(&named).unwrap();
        assert_eq!(object["thread"], "namesrv-0");
        let unnamed = json_line(&ThreadTag::Unnamed, &record);
        let object: serde_json::Value = serde_json::from_str(&unnamed).unwrap();
        let keys: Vec<&String> = object.as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), 4, "{unnamed}");
        assert!(object.get("shard").is_none() && object.get("thread").is_none());
    }

    // Proves the text format's tail: each field as ` key=value`, quoted when needed, and
    // nothing at all for a record without fields (so such lines read as they always did).
    #[test]
    fn text_tail_is_logfmt_pairs() {
        let fields: [(&str, Value<'_>); 2] =
            [("code", Value::from(10)), ("topic", Value::from("a b"))];
        let mut out = Vec::new();
        write_kv_pairs(&mut out, &fields).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), " code=10 topic=\"a b\"");
        let none: [(&str, Value<'_>); 0] = [];
        let mut out = Vec::new();
        write_kv_pairs(&mut out, &none).unwrap();
        assert!(out.is_empty());
    }
}
