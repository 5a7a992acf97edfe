//! The two header serializations (docs/protocol.md#json-header and
//! docs/protocol.md#rocketmq-binary-header).
//!
//! JSON (type 0) is what Java sends by default. Decoding is lenient the way real clients need
//! it to be: unknown keys are ignored, missing keys keep defaults (code 0, flag 0, language
//! JAVA, version 0), ext values may arrive as numbers or booleans (C++ and JS clients) and are
//! kept as their decimal text, `null` values are dropped, and trailing whitespace (the C++
//! client's newline) is accepted. Encoding writes keys in fastjson's sorted order and escapes
//! control characters as `\u00XX`, so the properties separators look exactly as Java's.
//!
//! ROCKETMQ binary (type 1):
//!
//! ```text
//! +------+------+---------+--------+------+------------+--------+------------+-----------+
//! | code | lang | version | opaque | flag | remark_len | remark | ext_length | ext items |
//! | i16  | u8   | i16     | i32    | i32  | i32        | bytes  | i32        | ...       |
//! +------+------+---------+--------+------+------------+--------+------------+-----------+
//! ext item = key_len i16 | key | value_len i32 | value
//! ```
//!
//! `code` and `version` are 16 bits wide
//! (docs/protocol.md#16-bit-code-and-version-in-binary-headers): a command whose code or version
//! does not fit is encoded as JSON instead, so nothing is silently truncated.

use std::fmt;

use bytes::{BufMut, BytesMut};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use crate::code::LanguageCode;
use crate::command::{RemotingCommand, SerializeType};
use crate::error::ProtoError;
use crate::ext::ExtFields;
use crate::limits::BINARY_HEADER_FIXED_BYTES;
use crate::pairs::push_display;

/// The parts of a command that live in its header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeaderFields {
    /// Request or response code.
    pub code: i32,
    /// Sender language.
    pub language: LanguageCode,
    /// Sender version ordinal.
    pub version: i32,
    /// Request id.
    pub opaque: i32,
    /// Flag bits.
    pub flag: i32,
    /// Optional remark.
    pub remark: Option<String>,
    /// Ext fields.
    pub ext_fields: ExtFields,
}

/// The serialization a command will actually use: binary falls back to JSON when the code
/// or version does not fit in 16 bits.
pub fn effective_serialize_type(command: &RemotingCommand) -> SerializeType {
    let fits = i16::try_from(command.code).is_ok() && i16::try_from(command.version).is_ok();
    match command.serialize_type {
        SerializeType::RocketMq if fits => SerializeType::RocketMq,
        _ => SerializeType::Json,
    }
}

/// Appends the serialized header of `command` to `dst` in `serialize_type`.
pub fn encode_header(command: &RemotingCommand, serialize_type: SerializeType, dst: &mut BytesMut) {
    match serialize_type {
        SerializeType::Json => encode_json(command, dst),
        SerializeType::RocketMq => encode_binary(command, dst),
    }
}

/// Decodes a header of the given type.
pub fn decode_header(
    serialize_type: SerializeType,
    bytes: &[u8],
) -> Result<HeaderFields, ProtoError> {
    match serialize_type {
        SerializeType::Json => decode_json(bytes),
        SerializeType::RocketMq => decode_binary(bytes),
    }
}

fn encode_json(command: &RemotingCommand, dst: &mut BytesMut) {
    dst.reserve(64 + command.ext_fields.len() * 32);
    dst.put_slice(b"{\"code\":");
    put_decimal(dst, i64::from(command.code));
    if !command.ext_fields.is_empty() {
        dst.put_slice(b",\"extFields\":{");
        for (index, (key, value)) in command.ext_fields.iter().enumerate() {
            if index > 0 {
                dst.put_u8(b',');
            }
            put_json_string(dst, key);
            dst.put_u8(b':');
            put_json_string(dst, value);
        }
        dst.put_u8(b'}');
    }
    dst.put_slice(b",\"flag\":");
    put_decimal(dst, i64::from(command.flag));
    dst.put_slice(b",\"language\":");
    put_json_string(dst, command.language.name().unwrap_or("OTHER"));
    dst.put_slice(b",\"opaque\":");
    put_decimal(dst, i64::from(command.opaque));
    if let Some(remark) = &command.remark {
        dst.put_slice(b",\"remark\":");
        put_json_string(dst, remark);
    }
    dst.put_slice(b",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":");
    put_decimal(dst, i64::from(command.version));
    dst.put_u8(b'}');
}

fn put_decimal(dst: &mut BytesMut, value: i64) {
    let mut buffer = itoa_buffer();
    dst.put_slice(format_decimal(&mut buffer, value));
}

fn itoa_buffer() -> [u8; 20] {
    [0u8; 20]
}

fn format_decimal(buffer: &mut [u8; 20], value: i64) -> &[u8] {
    let mut magnitude = value.unsigned_abs();
    let mut position = buffer.len();
    loop {
        position -= 1;
        buffer[position] = b'0' + (magnitude % 10) as u8;
        magnitude /= 10;
        if magnitude == 0 {
            break;
        }
    }
    if value < 0 {
        position -= 1;
        buffer[position] = b'-';
    }
    &buffer[position..]
}

/// Writes `text` as a JSON string: quotes, backslashes and control characters escaped,
/// everything else (including non-ASCII) as raw UTF-8.
pub fn put_json_string(dst: &mut BytesMut, text: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    dst.reserve(text.len() + 2);
    dst.put_u8(b'"');
    let bytes = text.as_bytes();
    let mut start = 0;
    for (index, &byte) in bytes.iter().enumerate() {
        let escape: Option<&[u8]> = match byte {
            b'"' => Some(b"\\\""),
            b'\\' => Some(b"\\\\"),
            b'\n' => Some(b"\\n"),
            b'\r' => Some(b"\\r"),
            b'\t' => Some(b"\\t"),
            0x00..=0x1F => None,
            _ => continue,
        };
        dst.put_slice(&bytes[start..index]);
        match escape {
            Some(sequence) => dst.put_slice(sequence),
            None => {
                dst.put_slice(b"\\u00");
                dst.put_u8(HEX[usize::from(byte >> 4)]);
                dst.put_u8(HEX[usize::from(byte & 0xF)]);
            }
        }
        start = index + 1;
    }
    dst.put_slice(&bytes[start..]);
    dst.put_u8(b'"');
}

fn decode_json(bytes: &[u8]) -> Result<HeaderFields, ProtoError> {
    let header: JsonHeader =
        serde_json::from_slice(bytes).map_err(|error| ProtoError::JsonHeader(error.to_string()))?;
    Ok(HeaderFields {
        code: header.code,
        language: header.language.0,
        version: header.version,
        opaque: header.opaque,
        flag: header.flag,
        remark: header.remark,
        ext_fields: header.ext_fields,
    })
}

#[derive(Deserialize)]
struct JsonHeader {
    #[serde(default, deserialize_with = "lenient_i32")]
    code: i32,
    #[serde(default)]
    language: JsonLanguage,
    #[serde(default, deserialize_with = "lenient_i32")]
    version: i32,
    #[serde(default, deserialize_with = "lenient_i32")]
    opaque: i32,
    #[serde(default, deserialize_with = "lenient_i32")]
    flag: i32,
    #[serde(default, deserialize_with = "lenient_optional_string")]
    remark: Option<String>,
    #[serde(default, rename = "extFields", deserialize_with = "lenient_ext_fields")]
    ext_fields: ExtFields,
}

struct JsonLanguage(LanguageCode);

impl Default for JsonLanguage {
    fn default() -> JsonLanguage {
        JsonLanguage(LanguageCode::JAVA)
    }
}

impl<'de> Deserialize<'de> for JsonLanguage {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<JsonLanguage, D::Error> {
        let scalar = Scalar::deserialize(deserializer)?;
        let language = match scalar {
            Scalar::Text(name) => LanguageCode::from_name(&name).unwrap_or(LanguageCode::OTHER),
            Scalar::Integer(number) => u8::try_from(number)
                .map(LanguageCode::from)
                .unwrap_or(LanguageCode::OTHER),
            _ => LanguageCode::OTHER,
        };
        Ok(JsonLanguage(language))
    }
}

/// A JSON scalar as clients actually send it in places where Java expects one type.
enum Scalar {
    Text(String),
    Integer(i128),
    Float(f64),
    Bool(bool),
    Null,
}

impl Scalar {
    fn into_text(self) -> Option<String> {
        match self {
            Scalar::Text(text) => Some(text),
            Scalar::Integer(number) => Some(number.to_string()),
            Scalar::Float(number) => Some(number.to_string()),
            Scalar::Bool(value) => Some(value.to_string()),
            Scalar::Null => None,
        }
    }
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Scalar, D::Error> {
        deserializer.deserialize_any(ScalarVisitor)
    }
}

struct ScalarVisitor;

impl<'de> Visitor<'de> for ScalarVisitor {
    type Value = Scalar;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string, number, boolean or null")
    }
    fn visit_str<E: de::Error>(self, value: &str) -> Result<Scalar, E> {
        Ok(Scalar::Text(value.to_owned()))
    }
    fn visit_string<E: de::Error>(self, value: String) -> Result<Scalar, E> {
        Ok(Scalar::Text(value))
    }
    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Scalar, E> {
        Ok(Scalar::Integer(i128::from(value)))
    }
    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Scalar, E> {
        Ok(Scalar::Integer(i128::from(value)))
    }
    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Scalar, E> {
        Ok(Scalar::Float(value))
    }
    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Scalar, E> {
        Ok(Scalar::Bool(value))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Scalar, E> {
        Ok(Scalar::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Scalar, E> {
        Ok(Scalar::Null)
    }
}

fn lenient_i32<'de, D: Deserializer<'de>>(deserializer: D) -> Result<i32, D::Error> {
    match Scalar::deserialize(deserializer)? {
        Scalar::Integer(number) => i32::try_from(number)
            .map_err(|_| de::Error::custom(format!("{number} does not fit in 32 bits"))),
        Scalar::Text(text) => text
            .trim()
            .parse::<i32>()
            .map_err(|_| de::Error::custom(format!("{text:?} is not a 32-bit integer"))),
        Scalar::Null => Ok(0),
        _ => Err(de::Error::custom("expected an integer")),
    }
}

fn lenient_optional_string<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<String>, D::Error> {
    Ok(Scalar::deserialize(deserializer)?.into_text())
}

fn lenient_ext_fields<'de, D: Deserializer<'de>>(deserializer: D) -> Result<ExtFields, D::Error> {
    struct ExtVisitor;
    impl<'de> Visitor<'de> for ExtVisitor {
        type Value = ExtFields;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object of scalar values")
        }
        fn visit_unit<E: de::Error>(self) -> Result<ExtFields, E> {
            Ok(ExtFields::new())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ExtFields, A::Error> {
            let mut fields = ExtFields::with_capacity(map.size_hint().unwrap_or(16).min(64));
            // Keys and values are written straight into the map's text: no allocation per
            // field (see `pairs`).
            let pairs = fields.pairs_mut();
            loop {
                let key_start = pairs.text_len();
                if map.next_key_seed(AppendText(pairs.text_mut()))?.is_none() {
                    return Ok(fields);
                }
                let key_end = pairs.text_len();
                if map.next_value_seed(AppendScalar(pairs.text_mut()))? {
                    pairs.commit_appended(key_start, key_end);
                } else {
                    // Null: Java leaves the field out.
                    pairs.truncate_text(key_start);
                }
            }
        }
    }
    deserializer.deserialize_any(ExtVisitor)
}

/// Appends a JSON string (an ext-field key) to the text it holds.
struct AppendText<'t>(&'t mut String);

impl<'de> DeserializeSeed<'de> for AppendText<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for AppendText<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E: de::Error>(self, value: &str) -> Result<(), E> {
        self.0.push_str(value);
        Ok(())
    }
}

/// Appends a JSON scalar (an ext-field value) to the text it holds as Java's `toString` would
/// give it; `false` for null, which appends nothing.
struct AppendScalar<'t>(&'t mut String);

impl<'de> DeserializeSeed<'de> for AppendScalar<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl AppendScalar<'_> {
    fn display(self, value: impl fmt::Display) -> bool {
        push_display(self.0, value);
        true
    }
}

impl<'de> Visitor<'de> for AppendScalar<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string, number, boolean or null")
    }
    fn visit_str<E: de::Error>(self, value: &str) -> Result<bool, E> {
        self.0.push_str(value);
        Ok(true)
    }
    fn visit_i64<E: de::Error>(self, value: i64) -> Result<bool, E> {
        Ok(self.display(value))
    }
    fn visit_u64<E: de::Error>(self, value: u64) -> Result<bool, E> {
        Ok(self.display(value))
    }
    fn visit_f64<E: de::Error>(self, value: f64) -> Result<bool, E> {
        Ok(self.display(value))
    }
    fn visit_bool<E: de::Error>(self, value: bool) -> Result<bool, E> {
        Ok(self.display(value))
    }
    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_none<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
}

fn encode_binary(command: &RemotingCommand, dst: &mut BytesMut) {
    let code = i16::try_from(command.code);
    let version = i16::try_from(command.version);
    assert!(
        code.is_ok() && version.is_ok(),
        "binary header needs 16-bit code and version"
    );
    let remark = command.remark.as_deref().unwrap_or("");
    let ext_length: usize = command
        .ext_fields
        .iter()
        .filter(|(key, value)| !key.is_empty() && !value.is_empty())
        .map(|(key, value)| 2 + key.len() + 4 + value.len())
        .sum();
    dst.reserve(BINARY_HEADER_FIXED_BYTES + remark.len() + ext_length);
    dst.put_i16(code.unwrap_or_default());
    dst.put_u8(command.language.value());
    dst.put_i16(version.unwrap_or_default());
    dst.put_i32(command.opaque);
    dst.put_i32(command.flag);
    put_length(dst, remark.len());
    dst.put_slice(remark.as_bytes());
    put_length(dst, ext_length);
    for (key, value) in command.ext_fields.iter() {
        // Empty keys or values decode as null on the Java side; Java skips nulls on encode.
        if key.is_empty() || value.is_empty() {
            continue;
        }
        let key_length = i16::try_from(key.len()).unwrap_or(i16::MAX);
        dst.put_i16(key_length);
        dst.put_slice(&key.as_bytes()[..key_length as usize]);
        put_length(dst, value.len());
        dst.put_slice(value.as_bytes());
    }
}

fn put_length(dst: &mut BytesMut, length: usize) {
    let length = i32::try_from(length).expect("header section longer than 2 GiB");
    dst.put_i32(length);
}

fn decode_binary(bytes: &[u8]) -> Result<HeaderFields, ProtoError> {
    let mut reader = Reader { bytes, offset: 0 };
    let code = i32::from(reader.i16()?);
    let language = LanguageCode::from(reader.u8()?);
    let version = i32::from(reader.i16()?);
    let opaque = reader.i32()?;
    let flag = reader.i32()?;
    let remark_length = reader.length("remark")?;
    let remark = reader.text(remark_length, "remark")?;
    let ext_length = reader.length("ext section")?;
    let ext_bytes = reader.take(ext_length, "ext section")?;
    let ext_fields = decode_binary_ext(ext_bytes)?;
    Ok(HeaderFields {
        code,
        language,
        version,
        opaque,
        flag,
        remark: remark.filter(|text| !text.is_empty()),
        ext_fields,
    })
}

fn decode_binary_ext(bytes: &[u8]) -> Result<ExtFields, ProtoError> {
    let mut reader = Reader { bytes, offset: 0 };
    let mut fields = ExtFields::with_capacity(16);
    while reader.remaining() > 0 {
        let key_length = reader.i16()?;
        let key_length = usize::try_from(key_length).map_err(|_| ProtoError::LengthInvalid {
            what: "ext key",
            offset: reader.offset - 2,
            length: i64::from(key_length),
        })?;
        let key = reader.str(key_length, "ext key")?;
        let value_length = reader.length("ext value")?;
        let value = reader.str(value_length, "ext value")?;
        // Empty keys or values are Java's null: left out.
        if !key.is_empty() && !value.is_empty() {
            fields.insert(key, value);
        }
    }
    Ok(fields)
}

/// A bounds-checked big-endian reader over a header; every read reports where it failed.
struct Reader<'a> {
    bytes: &'a [u8],
    offset: usize,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.bytes.len() - self.offset
    }

    fn take(&mut self, count: usize, what: &'static str) -> Result<&'a [u8], ProtoError> {
        if self.remaining() < count {
            return Err(ProtoError::Truncated {
                what,
                offset: self.offset,
                need: count,
                have: self.remaining(),
            });
        }
        let slice = &self.bytes[self.offset..self.offset + count];
        self.offset += count;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], ProtoError> {
        let slice = self.take(N, "binary header")?;
        let mut array = [0u8; N];
        array.copy_from_slice(slice);
        Ok(array)
    }

    fn u8(&mut self) -> Result<u8, ProtoError> {
        Ok(self.array::<1>()?[0])
    }
    fn i16(&mut self) -> Result<i16, ProtoError> {
        Ok(i16::from_be_bytes(self.array()?))
    }
    fn i32(&mut self) -> Result<i32, ProtoError> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    fn length(&mut self, what: &'static str) -> Result<usize, ProtoError> {
        let offset = self.offset;
        let length = self.i32()?;
        let length = usize::try_from(length).map_err(|_| ProtoError::LengthInvalid {
            what,
            offset,
            length: i64::from(length),
        })?;
        if length > self.remaining() {
            return Err(ProtoError::Truncated {
                what,
                offset: self.offset,
                need: length,
                have: self.remaining(),
            });
        }
        Ok(length)
    }

    /// Reads `length` bytes of UTF-8; zero length is Java's null.
    fn text(&mut self, length: usize, what: &'static str) -> Result<Option<String>, ProtoError> {
        let text = self.str(length, what)?;
        Ok((!text.is_empty()).then(|| text.to_owned()))
    }

    /// `length` bytes of UTF-8, borrowed.
    fn str(&mut self, length: usize, what: &'static str) -> Result<&'a str, ProtoError> {
        let slice = self.take(length, what)?;
        std::str::from_utf8(slice).map_err(|_| ProtoError::Utf8 { what })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> RemotingCommand {
        let mut command = RemotingCommand::request(crate::code::RequestCode::SEND_MESSAGE_V2, 7);
        command.ext_fields.insert("a", "group");
        command
            .ext_fields
            .insert("i", "KEYS\u{1}k1\u{2}TAGS\u{1}\"quoted\"\\\u{2}");
        command.remark = Some("héllo".to_owned());
        command
    }

    // Proves both serializations round-trip every header field, including control
    // characters, quotes and non-ASCII text.
    #[test]
    fn both_serializations_round_trip() {
        for serialize_type in [SerializeType::Json, SerializeType::RocketMq] {
            let command = sample();
            let mut bytes = BytesMut::new();
            encode_header(&command, serialize_type, &mut bytes);
            let decoded = decode_header(serialize_type, &bytes).unwrap();
            assert_eq!(decoded.code, command.code);
            assert_eq!(decoded.opaque, 7);
            assert_eq!(decoded.language, LanguageCode::RUST);
            assert_eq!(decoded.remark, command.remark);
            assert_eq!(decoded.ext_fields, command.ext_fields);
        }
    }

    // Proves the JSON escapes match fastjson's (control characters as \u00XX).
    #[test]
    fn json_escapes_like_fastjson() {
        let mut bytes = BytesMut::new();
        put_json_string(&mut bytes, "K\u{1}v\u{2}\n");
        assert_eq!(&bytes[..], b"\"K\\u0001v\\u0002\\n\"");
    }

    // Proves the lenient JSON reading real clients need: numbers and booleans as ext values,
    // null remark, unknown keys, a trailing newline, missing keys defaulting, repeated keys
    // (last value wins), escapes, nested values refused.
    #[test]
    fn json_is_lenient_like_java() {
        let text = br#"{"code":11,"extFields":{"maxMsgNums":32,"k":false,"n":null,"s":"x"},
            "language":"CPP","opaque":9,"remark":null,"serializeTypeCurrentRPC":"JSON",
            "unknown":[1,2],"version":63}
"#;
        let header = decode_json(text).unwrap();
        assert_eq!(header.code, 11);
        assert_eq!(header.language, LanguageCode::CPP);
        assert_eq!(header.ext_fields.get("maxMsgNums"), Some("32"));
        assert_eq!(header.ext_fields.get("k"), Some("false"));
        assert_eq!(header.ext_fields.get("n"), None);
        assert_eq!(header.remark, None);
        assert_eq!(header.ext_fields.len(), 3, "the null field is left out");
        let order: Vec<&str> = header.ext_fields.iter().map(|(key, _)| key).collect();
        assert_eq!(order, ["maxMsgNums", "k", "s"]);
        // A repeated key keeps its first place and takes the last value; escapes decode;
        // a nested value is an error, not a silent drop.
        let repeated = br#"{"extFields":{"a":"1","b\u0041":"x\"y","a":2.5,"c":null,"a":"3"}}"#;
        let header = decode_json(repeated).unwrap();
        let entries: Vec<(&str, &str)> = header.ext_fields.iter().collect();
        assert_eq!(entries, [("a", "3"), ("bA", "x\"y")]);
        assert!(decode_json(br#"{"extFields":{"a":{"b":1}}}"#).is_err());
        let minimal = decode_json(b"{}").unwrap();
        assert_eq!(minimal.language, LanguageCode::JAVA);
        assert_eq!(minimal.code, 0);
        assert!(decode_json(b"{\"code\":").is_err());
        assert!(decode_json(b"42").is_err());
    }

    // Proves truncated or lying binary headers give errors, not panics.
    #[test]
    fn binary_errors() {
        let mut bytes = BytesMut::new();
        encode_binary(&sample(), &mut bytes);
        for cut in 0..bytes.len() {
            assert!(
                decode_binary(&bytes[..cut]).is_err(),
                "cut at {cut} decoded"
            );
        }
        let mut lying = bytes.to_vec();
        lying[13..17].copy_from_slice(&(-5i32).to_be_bytes());
        assert!(matches!(
            decode_binary(&lying),
            Err(ProtoError::LengthInvalid { .. })
        ));
    }

    // Proves a code that does not fit 16 bits is sent as JSON rather than truncated.
    #[test]
    fn wide_codes_fall_back_to_json() {
        let mut command = RemotingCommand::request(crate::code::RequestCode::POP_MESSAGE, 1);
        command.serialize_type = SerializeType::RocketMq;
        assert_eq!(effective_serialize_type(&command), SerializeType::Json);
        command.code = 10;
        assert_eq!(effective_serialize_type(&command), SerializeType::RocketMq);
    }
}
