//! fastjson-compatible JSON: a tolerant reader for what Java peers write, and a writer that
//! writes what Java peers read (docs/protocol.md#json-body-shapes,
//! docs/protocol.md#fastjson-quirks, docs/protocol.md#fastjson-map-keys,
//! docs/protocol.md#route-json-quoting-depends-on-the-requester-version,
//! docs/protocol.md#derived-getters-in-json).
//!
//! # Reading
//!
//! fastjson output is not always RFC 8259 JSON. [`normalize`] is a single bounded pass that
//! rewrites it into standard JSON, which serde_json then decodes ([`from_slice`]):
//!
//! ```text
//! fastjson                        standard JSON after normalize
//! {0:"127.0.0.1:10911"}           {"0":"127.0.0.1:10911"}
//! {{"queueId":0,"topic":"T"}:10}  {"{\"queueId\":0,\"topic\":\"T\"}":10}
//! {groupName:"g"}                 {"groupName":"g"}
//! [1,2,]  {"a":1,}                [1,2]  {"a":1}
//! {"a":1}\n                                       {"a":1}
//! ```
//!
//! Object keys become strings holding their own (normalized) JSON text; maps keyed by objects
//! read them back with [`object_key_map`]. Invariants of the pass: it never panics on any
//! input, nesting is bounded by [`JSON_DEPTH_MAX`] (object keys inside object keys by
//! [`OBJECT_KEY_DEPTH_MAX`]), raw control characters inside strings are refused (JSON forbids
//! them and fastjson escapes them), so the output is at most
//! `2^OBJECT_KEY_DEPTH_MAX` times the input plus a constant and is checked against that.
//!
//! # Writing
//!
//! [`to_bytes`] writes compact JSON with object keys sorted (fastjson sorts bean properties),
//! null members omitted, and strings escaped as the header codec does. A map field marked
//! `#[serde(with = "json::object_key_map")]` is written in fastjson's object-key form
//! `{{"brokerName":"b","queueId":0,"topic":"T"}:10}`, the only form the Java tools and the Go
//! client parse for ConsumeStats, TopicStatsTable and ResetOffsetBody. Maps with integer keys
//! (route data `brokerAddrs`) are written with quoted keys `{"0":"..."}`, which every client
//! accepts (docs/protocol.md#route-json-quoting-depends-on-the-requester-version).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};
use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;

use crate::header::put_json_string;

/// Deepest nesting of arrays and objects accepted by the reader. Java bodies nest five levels
/// at most (ClusterInfo → BrokerData → brokerAddrs); the bound keeps recursion small.
pub const JSON_DEPTH_MAX: usize = 64;

/// Deepest nesting of object-valued keys inside object-valued keys. fastjson only writes a
/// flat MessageQueue as a key; two levels leave slack and bound the escaping growth to 4x.
pub const OBJECT_KEY_DEPTH_MAX: usize = 2;

/// Normalized output may be at most this many times the input (plus
/// [`NORMALIZED_SLACK_BYTES`]): each object-key level at most doubles the text by escaping.
pub const NORMALIZED_GROWTH_MAX: usize = 1 << OBJECT_KEY_DEPTH_MAX;

/// Constant allowance on top of [`NORMALIZED_GROWTH_MAX`] for the quotes added to bare keys.
pub const NORMALIZED_SLACK_BYTES: usize = 64;

/// Map key that marks an object-keyed map in the value tree given to the writer. A private-use
/// code point: it never appears in topic, group or broker names.
pub const OBJECT_KEY_MARKER: &str = "\u{F8FF}objectKeyMap";

/// JSON that cannot be read.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum JsonError {
    /// The input is not UTF-8.
    #[error("JSON body is not UTF-8 (valid up to byte {valid_up_to})")]
    Utf8 {
        /// Length of the valid prefix.
        valid_up_to: usize,
    },
    /// The input does not have JSON structure.
    #[error("JSON syntax error at byte {offset}: expected {expected}")]
    Syntax {
        /// Byte offset of the problem.
        offset: usize,
        /// What was expected there.
        expected: &'static str,
    },
    /// Arrays and objects nest deeper than [`JSON_DEPTH_MAX`], or object keys deeper than
    /// [`OBJECT_KEY_DEPTH_MAX`].
    #[error("JSON nesting deeper than {max} at byte {offset}")]
    TooDeep {
        /// Byte offset where the limit was passed.
        offset: usize,
        /// The limit.
        max: usize,
    },
    /// The normalized text outgrew its bound.
    #[error("normalized JSON of {bytes} bytes exceeds its bound of {max} bytes")]
    TooLarge {
        /// Size reached.
        bytes: usize,
        /// The bound.
        max: usize,
    },
    /// The JSON is well formed but does not have the expected shape.
    #[error("JSON body does not match {target}: {message}")]
    Shape {
        /// The Rust type being decoded.
        target: &'static str,
        /// serde_json's explanation, with line and column.
        message: String,
    },
}

/// Rewrites fastjson output (bare numeric or identifier keys, object keys, trailing commas,
/// surrounding whitespace) into standard JSON. See the module docs for the rules and bounds.
pub fn normalize(input: &[u8]) -> Result<String, JsonError> {
    let text = std::str::from_utf8(input).map_err(|error| JsonError::Utf8 {
        valid_up_to: error.valid_up_to(),
    })?;
    // A byte-order mark from a file written by another tool is not part of the value.
    let text = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    let max = text
        .len()
        .saturating_mul(NORMALIZED_GROWTH_MAX)
        .saturating_add(NORMALIZED_SLACK_BYTES);
    let mut normalizer = Normalizer {
        text,
        position: 0,
        depth: 0,
        key_depth: 0,
    };
    let mut out = String::with_capacity(text.len() + 16);
    normalizer.value(&mut out)?;
    normalizer.skip_whitespace();
    if normalizer.position != text.len() {
        return Err(normalizer.syntax("end of input after the value"));
    }
    assert_eq!(normalizer.depth, 0, "normalizer depth must unwind to zero");
    if out.len() > max {
        return Err(JsonError::TooLarge {
            bytes: out.len(),
            max,
        });
    }
    Ok(out)
}

/// Decodes a body written by fastjson (or any standard JSON writer) into `T`.
///
/// ```
/// use std::collections::BTreeMap;
/// let addrs: BTreeMap<i64, String> =
///     comet_proto::json::from_slice(b"{0:\"127.0.0.1:10911\"}\n").unwrap();
/// assert_eq!(addrs[&0], "127.0.0.1:10911");
/// ```
pub fn from_slice<T: DeserializeOwned>(input: &[u8]) -> Result<T, JsonError> {
    let normalized = normalize(input)?;
    serde_json::from_str(&normalized).map_err(|error| JsonError::Shape {
        target: std::any::type_name::<T>(),
        message: error.to_string(),
    })
}

/// Writes `value` as fastjson would: compact, keys sorted, object-keyed maps in object-key
/// form.
///
/// ```
/// #[derive(serde::Serialize)]
/// struct Body { zeta: i32, alpha: Option<String> }
/// let bytes = comet_proto::json::to_bytes(&Body { zeta: 1, alpha: Some("a".into()) });
/// assert_eq!(&bytes[..], br#"{"alpha":"a","zeta":1}"#);
/// ```
///
/// Panics only if `T`'s `Serialize` cannot be represented as JSON at all (a map with
/// keys that are neither strings nor numbers outside [`object_key_map`]), which is a bug in
/// the type, not something input can cause.
pub fn to_bytes<T: Serialize + ?Sized>(value: &T) -> Bytes {
    let tree = match serde_json::to_value(value) {
        Ok(tree) => tree,
        Err(error) => panic!(
            "{} cannot be written as JSON: {error}",
            std::any::type_name::<T>()
        ),
    };
    let mut out = BytesMut::with_capacity(256);
    write_value(&tree, &mut out);
    out.freeze()
}

/// Writes a JSON value tree compactly with sorted object keys and the object-key form for
/// maps marked with [`OBJECT_KEY_MARKER`].
pub fn write_value(value: &Value, out: &mut BytesMut) {
    match value {
        Value::Null => out.put_slice(b"null"),
        Value::Bool(flag) => out.put_slice(if *flag { b"true" } else { b"false" }),
        Value::Number(number) => out.put_slice(number.to_string().as_bytes()),
        Value::String(text) => put_json_string(out, text),
        Value::Array(items) => write_array(items, out),
        Value::Object(members) => match object_key_pairs(members) {
            Some(pairs) => write_object_key_map(pairs, out),
            None => write_object(members, out),
        },
    }
}

fn write_array(items: &[Value], out: &mut BytesMut) {
    out.put_u8(b'[');
    for (index, item) in items.iter().enumerate() {
        if index > 0 {
            out.put_u8(b',');
        }
        write_value(item, out);
    }
    out.put_u8(b']');
}

fn write_object(members: &serde_json::Map<String, Value>, out: &mut BytesMut) {
    let mut keys: Vec<&String> = members
        .iter()
        .filter(|(_, value)| !value.is_null())
        .map(|(key, _)| key)
        .collect();
    keys.sort_unstable();
    out.put_u8(b'{');
    for (index, key) in keys.into_iter().enumerate() {
        if index > 0 {
            out.put_u8(b',');
        }
        put_json_string(out, key);
        out.put_u8(b':');
        write_value(&members[key.as_str()], out);
    }
    out.put_u8(b'}');
}

/// The `[key, value]` pairs of a marked object-keyed map, or `None` for an ordinary object.
fn object_key_pairs(members: &serde_json::Map<String, Value>) -> Option<Vec<(&Value, &Value)>> {
    if members.len() != 1 {
        return None;
    }
    let Value::Array(items) = members.get(OBJECT_KEY_MARKER)? else {
        return None;
    };
    items
        .iter()
        .map(|item| match item.as_array().map(Vec::as_slice) {
            Some([key, value]) => Some((key, value)),
            _ => None,
        })
        .collect()
}

fn write_object_key_map(pairs: Vec<(&Value, &Value)>, out: &mut BytesMut) {
    let mut rendered: Vec<(BytesMut, &Value)> = pairs
        .into_iter()
        .map(|(key, value)| {
            let mut key_text = BytesMut::new();
            write_value(key, &mut key_text);
            (key_text, value)
        })
        .collect();
    rendered.sort_by(|left, right| left.0.cmp(&right.0));
    out.put_u8(b'{');
    for (index, (key_text, value)) in rendered.iter().enumerate() {
        if index > 0 {
            out.put_u8(b',');
        }
        out.put_slice(key_text);
        out.put_u8(b':');
        write_value(value, out);
    }
    out.put_u8(b'}');
}

/// The bounded rewriting pass behind [`normalize`].
struct Normalizer<'a> {
    text: &'a str,
    position: usize,
    depth: usize,
    key_depth: usize,
}

impl Normalizer<'_> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.position).copied()
    }

    fn syntax(&self, expected: &'static str) -> JsonError {
        JsonError::Syntax {
            offset: self.position,
            expected,
        }
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.position += 1;
        }
    }

    fn enter(&mut self) -> Result<(), JsonError> {
        if self.depth >= JSON_DEPTH_MAX {
            return Err(JsonError::TooDeep {
                offset: self.position,
                max: JSON_DEPTH_MAX,
            });
        }
        self.depth += 1;
        Ok(())
    }

    fn leave(&mut self) {
        assert!(self.depth > 0, "leave without enter");
        self.depth -= 1;
    }

    fn value(&mut self, out: &mut String) -> Result<(), JsonError> {
        self.skip_whitespace();
        match self.peek() {
            Some(b'{') => self.object(out),
            Some(b'[') => self.array(out),
            Some(b'"') => self.string(out),
            Some(b'-' | b'0'..=b'9') => {
                let token = self.token(is_number_byte);
                out.push_str(token);
                Ok(())
            }
            Some(byte) if is_identifier_start(byte) => {
                let token = self.token(is_identifier_byte);
                out.push_str(token);
                Ok(())
            }
            _ => Err(self.syntax("a JSON value")),
        }
    }

    /// Consumes the run of bytes accepted by `accept` (at least the current one).
    fn token(&mut self, accept: fn(u8) -> bool) -> &str {
        let start = self.position;
        while self.peek().is_some_and(accept) {
            self.position += 1;
        }
        assert!(self.position > start, "token called on a non-token byte");
        &self.text[start..self.position]
    }

    /// Copies a double-quoted string verbatim; serde_json validates its escapes later.
    fn string(&mut self, out: &mut String) -> Result<(), JsonError> {
        let bytes = self.text.as_bytes();
        assert_eq!(bytes.get(self.position), Some(&b'"'));
        let start = self.position;
        let mut index = start + 1;
        loop {
            match bytes.get(index) {
                None => {
                    self.position = index;
                    return Err(self.syntax("a closing quote"));
                }
                Some(b'"') => break,
                Some(b'\\') => index += 2,
                Some(0x00..=0x1F) => {
                    self.position = index;
                    return Err(self.syntax("an escaped control character"));
                }
                Some(_) => index += 1,
            }
        }
        self.position = index + 1;
        out.push_str(&self.text[start..self.position]);
        Ok(())
    }

    fn array(&mut self, out: &mut String) -> Result<(), JsonError> {
        self.enter()?;
        self.position += 1;
        out.push('[');
        let mut first = true;
        loop {
            self.skip_whitespace();
            if self.peek() == Some(b']') {
                self.position += 1;
                break;
            }
            if !first {
                out.push(',');
            }
            self.value(out)?;
            first = false;
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.position += 1,
                Some(b']') => {
                    self.position += 1;
                    break;
                }
                _ => return Err(self.syntax("',' or ']'")),
            }
        }
        out.push(']');
        self.leave();
        Ok(())
    }

    fn object(&mut self, out: &mut String) -> Result<(), JsonError> {
        self.enter()?;
        self.position += 1;
        out.push('{');
        let mut first = true;
        loop {
            self.skip_whitespace();
            if self.peek() == Some(b'}') {
                self.position += 1;
                break;
            }
            if !first {
                out.push(',');
            }
            self.key(out)?;
            self.skip_whitespace();
            if self.peek() != Some(b':') {
                return Err(self.syntax("':' after an object key"));
            }
            self.position += 1;
            out.push(':');
            self.value(out)?;
            first = false;
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.position += 1,
                Some(b'}') => {
                    self.position += 1;
                    break;
                }
                _ => return Err(self.syntax("',' or '}'")),
            }
        }
        out.push('}');
        self.leave();
        Ok(())
    }

    /// Writes an object key as a JSON string, quoting bare keys and turning object or array
    /// keys into strings holding their normalized text.
    fn key(&mut self, out: &mut String) -> Result<(), JsonError> {
        match self.peek() {
            Some(b'"') => self.string(out),
            Some(b'{' | b'[') => self.composite_key(out),
            Some(b'-' | b'0'..=b'9') => {
                let token = self.token(is_number_byte);
                push_quoted_plain(out, token);
                Ok(())
            }
            Some(byte) if is_identifier_start(byte) => {
                let token = self.token(is_identifier_byte);
                push_quoted_plain(out, token);
                Ok(())
            }
            _ => Err(self.syntax("an object key")),
        }
    }

    fn composite_key(&mut self, out: &mut String) -> Result<(), JsonError> {
        if self.key_depth >= OBJECT_KEY_DEPTH_MAX {
            return Err(JsonError::TooDeep {
                offset: self.position,
                max: OBJECT_KEY_DEPTH_MAX,
            });
        }
        self.key_depth += 1;
        let mut inner = String::new();
        let result = self.value(&mut inner);
        self.key_depth -= 1;
        result?;
        let mut escaped = BytesMut::with_capacity(inner.len() + 8);
        put_json_string(&mut escaped, &inner);
        // put_json_string only escapes ASCII bytes of valid UTF-8, so nothing is replaced.
        out.push_str(&String::from_utf8_lossy(&escaped));
        Ok(())
    }
}

/// Bare keys hold only ASCII token bytes, so quoting needs no escaping.
fn push_quoted_plain(out: &mut String, token: &str) {
    debug_assert!(token.bytes().all(|b| b != b'"' && b != b'\\'));
    out.push('"');
    out.push_str(token);
    out.push('"');
}

fn is_number_byte(byte: u8) -> bool {
    matches!(byte, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
}

fn is_identifier_start(byte: u8) -> bool {
    byte.is_ascii_alphabetic() || byte == b'_' || byte == b'$'
}

fn is_identifier_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'$'
}

/// `#[serde(with = "json::object_key_map")]` for `BTreeMap<K, V>` fields whose Java type is a
/// `Map` keyed by an object (MessageQueue).
///
/// Reads the fastjson object-key form (after [`normalize`], a string key holding JSON), the
/// browser-compatible form (a string key holding escaped JSON, the same thing), gson's
/// array of `[key, value]` pairs, and the marker form produced by [`serialize`]. Writes the
/// marker form, which [`to_bytes`] renders as fastjson's object-key form.
pub mod object_key_map {
    use super::*;

    /// Serializes the map as `{OBJECT_KEY_MARKER: [[key, value], ...]}`.
    pub fn serialize<K, V, S>(map: &BTreeMap<K, V>, serializer: S) -> Result<S::Ok, S::Error>
    where
        K: Serialize,
        V: Serialize,
        S: Serializer,
    {
        struct Pairs<'a, K, V>(&'a BTreeMap<K, V>);
        impl<K: Serialize, V: Serialize> Serialize for Pairs<'_, K, V> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_seq(self.0.iter())
            }
        }
        let mut outer = serializer.serialize_map(Some(1))?;
        outer.serialize_entry(OBJECT_KEY_MARKER, &Pairs(map))?;
        outer.end()
    }

    /// Deserializes any of the accepted forms.
    pub fn deserialize<'de, K, V, D>(deserializer: D) -> Result<BTreeMap<K, V>, D::Error>
    where
        K: DeserializeOwned + Ord,
        V: Deserialize<'de>,
        D: Deserializer<'de>,
    {
        deserializer.deserialize_any(ObjectKeyMapVisitor(std::marker::PhantomData))
    }

    struct ObjectKeyMapVisitor<K, V>(std::marker::PhantomData<(K, V)>);

    impl<'de, K, V> Visitor<'de> for ObjectKeyMapVisitor<K, V>
    where
        K: DeserializeOwned + Ord,
        V: Deserialize<'de>,
    {
        type Value = BTreeMap<K, V>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a map keyed by JSON objects, or an array of [key, value] pairs")
        }

        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(BTreeMap::new())
        }

        fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
            let mut map = BTreeMap::new();
            while let Some(key_text) = access.next_key::<String>()? {
                if key_text == OBJECT_KEY_MARKER {
                    let pairs: Vec<(K, V)> = access.next_value()?;
                    map.extend(pairs);
                    continue;
                }
                let key: K = serde_json::from_str(&key_text).map_err(|error| {
                    de::Error::custom(format!("object key {key_text:?}: {error}"))
                })?;
                map.insert(key, access.next_value()?);
            }
            Ok(map)
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
            let mut map = BTreeMap::new();
            while let Some((key, value)) = access.next_element::<(K, V)>()? {
                map.insert(key, value);
            }
            Ok(map)
        }
    }
}

/// Lenient scalar readers for bodies sent by non-Java clients: numbers that arrive as
/// strings (the C++ client's `"subVersion":"1795960958067"`), booleans as strings or numbers,
/// and `null` read as the type's default. Use with `#[serde(default, deserialize_with = ...)]`.
pub mod lenient {
    use super::*;

    /// A Java `long` from a number, a numeric string, or null (0).
    pub fn i64<'de, D: Deserializer<'de>>(deserializer: D) -> Result<i64, D::Error> {
        deserializer.deserialize_any(IntegerVisitor)
    }

    /// A Java `int` from a number, a numeric string, or null (0).
    pub fn i32<'de, D: Deserializer<'de>>(deserializer: D) -> Result<i32, D::Error> {
        let wide = deserializer.deserialize_any(IntegerVisitor)?;
        ::core::primitive::i32::try_from(wide)
            .map_err(|_| de::Error::custom(format!("{wide} does not fit a 32-bit integer")))
    }

    /// A Java `boolean` from a boolean, a string (`Boolean.parseBoolean`), a number (non-zero
    /// is true) or null (false).
    pub fn bool<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_any(BoolVisitor)
    }

    /// A string from a string, a number or boolean (their text), or null (empty).
    pub fn string<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
        deserializer.deserialize_any(StringVisitor)
    }

    /// A collection that may arrive as `null` (read as empty) instead of being omitted.
    pub fn or_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
    where
        D: Deserializer<'de>,
        T: Deserialize<'de> + Default,
    {
        Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
    }

    /// A set of Java `int`s whose elements may be numbers or numeric strings (the Go
    /// client writes tag codes as `"codeSet":["2598919"]`), or `null` (empty).
    pub fn i32_set<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<BTreeSet<::core::primitive::i32>, D::Error> {
        struct Element(::core::primitive::i32);
        impl<'de> Deserialize<'de> for Element {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Element, D::Error> {
                i32(deserializer).map(Element)
            }
        }
        let elements = Option::<Vec<Element>>::deserialize(deserializer)?.unwrap_or_default();
        Ok(elements.into_iter().map(|element| element.0).collect())
    }

    struct IntegerVisitor;

    impl Visitor<'_> for IntegerVisitor {
        type Value = i64;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an integer or a string holding one")
        }
        fn visit_i64<E: de::Error>(self, value: i64) -> Result<i64, E> {
            Ok(value)
        }
        fn visit_u64<E: de::Error>(self, value: u64) -> Result<i64, E> {
            ::core::primitive::i64::try_from(value)
                .map_err(|_| E::custom(format!("{value} does not fit a 64-bit integer")))
        }
        fn visit_f64<E: de::Error>(self, value: f64) -> Result<i64, E> {
            // i64::MAX as f64 rounds up to 2^63, so the upper bound is exclusive.
            if value.fract() == 0.0 && (-9.223_372_036_854_776e18..9.2e18).contains(&value) {
                #[allow(clippy::cast_possible_truncation)]
                return Ok(value as i64);
            }
            Err(E::custom(format!("{value} is not an integer")))
        }
        fn visit_str<E: de::Error>(self, value: &str) -> Result<i64, E> {
            crate::ext::parse_i64("number", value.trim()).map_err(E::custom)
        }
        fn visit_unit<E: de::Error>(self) -> Result<i64, E> {
            Ok(0)
        }
    }

    struct BoolVisitor;

    impl Visitor<'_> for BoolVisitor {
        type Value = bool;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a boolean, or a string or number holding one")
        }
        fn visit_bool<E: de::Error>(self, value: bool) -> Result<bool, E> {
            Ok(value)
        }
        fn visit_i64<E: de::Error>(self, value: i64) -> Result<bool, E> {
            Ok(value != 0)
        }
        fn visit_u64<E: de::Error>(self, value: u64) -> Result<bool, E> {
            Ok(value != 0)
        }
        fn visit_str<E: de::Error>(self, value: &str) -> Result<bool, E> {
            Ok(crate::ext::parse_bool(value.trim()))
        }
        fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
            Ok(false)
        }
    }

    struct StringVisitor;

    impl Visitor<'_> for StringVisitor {
        type Value = String;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a string")
        }
        fn visit_str<E: de::Error>(self, value: &str) -> Result<String, E> {
            Ok(value.to_owned())
        }
        fn visit_string<E: de::Error>(self, value: String) -> Result<String, E> {
            Ok(value)
        }
        fn visit_i64<E: de::Error>(self, value: i64) -> Result<String, E> {
            Ok(value.to_string())
        }
        fn visit_u64<E: de::Error>(self, value: u64) -> Result<String, E> {
            Ok(value.to_string())
        }
        fn visit_bool<E: de::Error>(self, value: bool) -> Result<String, E> {
            Ok(value.to_string())
        }
        fn visit_unit<E: de::Error>(self) -> Result<String, E> {
            Ok(String::new())
        }
    }
}

/// Declares a Java enum that travels in JSON bodies by constant name, and is also read from
/// its Java ordinal (the C++ client writes `"consumeType":1`, reference J7 notwithstanding).
macro_rules! json_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $ordinal:literal ),+ $(,)?
        }
        default $default:ident
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[allow(non_camel_case_types)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
        }

        impl $name {
            /// Every variant in Java ordinal order.
            pub const ALL: &'static [$name] = &[ $( $name::$variant, )+ ];

            /// The Java constant name.
            pub const fn name(self) -> &'static str {
                match self {
                    $( $name::$variant => stringify!($variant), )+
                }
            }

            /// The Java ordinal.
            pub const fn ordinal(self) -> u32 {
                match self {
                    $( $name::$variant => $ordinal, )+
                }
            }

            /// Looks a variant up by Java constant name.
            pub fn from_name(name: &str) -> Option<$name> {
                match name {
                    $( stringify!($variant) => Some($name::$variant), )+
                    _ => None,
                }
            }

            /// Looks a variant up by Java ordinal.
            pub fn from_ordinal(ordinal: u64) -> Option<$name> {
                match ordinal {
                    $( $ordinal => Some($name::$variant), )+
                    _ => None,
                }
            }
        }

        impl Default for $name {
            fn default() -> $name {
                $name::$default
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.name())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(
                deserializer: D,
            ) -> Result<$name, D::Error> {
                struct EnumVisitor;
                impl serde::de::Visitor<'_> for EnumVisitor {
                    type Value = $name;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str(concat!("a ", stringify!($name), " name or ordinal"))
                    }
                    fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<$name, E> {
                        $name::from_name(value).ok_or_else(|| {
                            E::custom(format!(
                                concat!("unknown ", stringify!($name), " {:?}"), value
                            ))
                        })
                    }
                    fn visit_u64<E: serde::de::Error>(self, value: u64) -> Result<$name, E> {
                        $name::from_ordinal(value).ok_or_else(|| {
                            E::custom(format!(
                                concat!("unknown ", stringify!($name), " ordinal {}"), value
                            ))
                        })
                    }
                    fn visit_i64<E: serde::de::Error>(self, value: i64) -> Result<$name, E> {
                        match u64::try_from(value) {
                            Ok(ordinal) => self.visit_u64(ordinal),
                            Err(_) => Err(E::custom(format!(
                                concat!("negative ", stringify!($name), " ordinal {}"), value
                            ))),
                        }
                    }
                }
                deserializer.deserialize_any(EnumVisitor)
            }
        }
    };
}

pub(crate) use json_enum;

#[cfg(test)]
mod tests {
    use super::*;

    // Proves each fastjson quirk of the module table is rewritten to standard JSON.
    #[test]
    fn normalizes_fastjson_quirks() {
        let cases: &[(&str, &str)] = &[
            (r#"{0:"a",1:"b"}"#, r#"{"0":"a","1":"b"}"#),
            (
                r#"{{"brokerName":"b","queueId":0,"topic":"T"}:10}"#,
                r#"{"{\"brokerName\":\"b\",\"queueId\":0,\"topic\":\"T\"}":10}"#,
            ),
            (r#"{groupName:"g"}"#, r#"{"groupName":"g"}"#),
            ("[1,2,]", "[1,2]"),
            (" {\"a\" : [ ] , } \n", r#"{"a":[]}"#),
            (r#"{"s":"x\"}y"}"#, r#"{"s":"x\"}y"}"#),
            (r#"{-1:true}"#, r#"{"-1":true}"#),
            ("\u{FEFF}{\"a\":1}", r#"{"a":1}"#),
        ];
        for (input, expected) in cases {
            assert_eq!(normalize(input.as_bytes()).unwrap(), *expected, "{input}");
        }
    }

    // Proves malformed input gives typed errors with offsets rather than panics.
    #[test]
    fn rejects_garbage_with_offsets() {
        assert!(matches!(
            normalize(b""),
            Err(JsonError::Syntax { offset: 0, .. })
        ));
        assert!(matches!(
            normalize(b"{\"a\""),
            Err(JsonError::Syntax { offset: 4, .. })
        ));
        assert!(matches!(normalize(b"\"abc"), Err(JsonError::Syntax { .. })));
        assert!(matches!(
            normalize(b"{} x"),
            Err(JsonError::Syntax { offset: 3, .. })
        ));
        assert!(matches!(
            normalize(b"\xff"),
            Err(JsonError::Utf8 { valid_up_to: 0 })
        ));
        assert!(matches!(
            normalize(b"\"a\x01\""),
            Err(JsonError::Syntax { offset: 2, .. })
        ));
        let deep = "[".repeat(JSON_DEPTH_MAX + 1);
        assert!(matches!(
            normalize(deep.as_bytes()),
            Err(JsonError::TooDeep { .. })
        ));
        let deep_keys = "{{{{1:1}:1}:1}:1}";
        assert!(matches!(
            normalize(deep_keys.as_bytes()),
            Err(JsonError::TooDeep { .. })
        ));
    }

    // Proves the writer sorts keys, drops nulls and renders marked maps with object keys.
    #[test]
    fn writes_sorted_and_object_keys() {
        #[derive(Serialize)]
        struct Sample {
            zeta: i32,
            alpha: Option<String>,
            #[serde(with = "object_key_map")]
            table: BTreeMap<(i32, String), i64>,
        }
        let mut table = BTreeMap::new();
        table.insert((2, "b".to_owned()), 20);
        table.insert((1, "a".to_owned()), 10);
        let bytes = to_bytes(&Sample {
            zeta: 1,
            alpha: None,
            table,
        });
        assert_eq!(
            std::str::from_utf8(&bytes).unwrap(),
            r#"{"table":{[1,"a"]:10,[2,"b"]:20},"zeta":1}"#
        );
    }
}
