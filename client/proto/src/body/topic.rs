//! Topic configuration bodies: TopicConfig, DataVersion, the topic-config wrapper (the
//! `topics.json` shape, GET_ALL_TOPIC_CONFIG's body) and RegisterBrokerBody in both its JSON
//! and its compressed binary form (docs/protocol.md#json-body-shapes,
//! docs/protocol.md#config-json-files).
//!
//! Compressed register body: one zlib (RFC 1950) stream holding, all integers i32
//! big-endian,
//!
//! ```text
//! +-----+------------------+-------+-----------------------------+-----+-------------+
//! | len | DataVersion JSON | count | count x (len, topic line)   | len | filter JSON |
//! +-----+------------------+-------+-----------------------------+-----+-------------+
//! then (5.x, absent from 4.x bodies) | count | count x (len, TopicQueueMappingInfo JSON) |
//! topic line = "topicName readQueueNums writeQueueNums perm topicFilterType [attributesJson]"
//! ```
//!
//! The topic line carries neither `order` nor `topicSysFlag`; they decode as their defaults,
//! as in Java. Decoding bounds the inflated size by [`REGISTER_BODY_INFLATED_BYTES_MAX`] and
//! never trusts a length or count before the bytes behind it have arrived.

use std::collections::BTreeMap;
use std::io::{Read, Write};

use bytes::Bytes;
use flate2::read::ZlibDecoder;
use flate2::write::ZlibEncoder;
use flate2::Compression;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{json_bodies, BodyError, JsonBody};
use crate::json::{self, json_enum, lenient};

/// Largest inflated compressed register body accepted: 64 MiB holds about a million topic
/// lines, far beyond any broker, and caps what a hostile zlib bomb can make us allocate.
pub const REGISTER_BODY_INFLATED_BYTES_MAX: u64 = 64 * 1024 * 1024;

/// Java `TopicConfig`'s default queue counts.
const DEFAULT_QUEUE_NUMS: i32 = 16;

json_enum! {
    /// How tags are filtered on a topic.
    pub enum TopicFilterType {
        /// One tag per message (the default).
        SINGLE_TAG = 0,
        /// Several tags per message.
        MULTI_TAG = 1,
    }
    default SINGLE_TAG
}

/// A topic's configuration on one broker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TopicConfig {
    /// 5.x topic attributes (`message.type`, ...).
    pub attributes: BTreeMap<String, String>,
    /// Ordered topic.
    #[serde(deserialize_with = "lenient::bool")]
    pub order: bool,
    /// Permission bits.
    #[serde(deserialize_with = "lenient::i32")]
    pub perm: i32,
    /// Readable queue count.
    #[serde(rename = "readQueueNums", deserialize_with = "lenient::i32")]
    pub read_queue_nums: i32,
    /// Tag filter type.
    #[serde(rename = "topicFilterType")]
    pub topic_filter_type: TopicFilterType,
    /// Topic name.
    #[serde(rename = "topicName")]
    pub topic_name: String,
    /// Topic system flag bits.
    #[serde(rename = "topicSysFlag", deserialize_with = "lenient::i32")]
    pub topic_sys_flag: i32,
    /// Writable queue count.
    #[serde(rename = "writeQueueNums", deserialize_with = "lenient::i32")]
    pub write_queue_nums: i32,
}

impl Default for TopicConfig {
    fn default() -> TopicConfig {
        TopicConfig {
            attributes: BTreeMap::new(),
            order: false,
            perm: crate::flags::perm::READ_WRITE,
            read_queue_nums: DEFAULT_QUEUE_NUMS,
            topic_filter_type: TopicFilterType::SINGLE_TAG,
            topic_name: String::new(),
            topic_sys_flag: 0,
            write_queue_nums: DEFAULT_QUEUE_NUMS,
        }
    }
}

impl TopicConfig {
    /// A topic with Java's defaults (16/16 queues, read-write).
    pub fn new(topic_name: impl Into<String>) -> TopicConfig {
        TopicConfig {
            topic_name: topic_name.into(),
            ..TopicConfig::default()
        }
    }

    /// The space-separated text form used by the compressed register body. The attributes
    /// field is written only when there are attributes: 4.x name servers accept exactly five
    /// fields, 5.x ones five or six.
    pub fn to_line(&self) -> String {
        let mut line = format!(
            "{} {} {} {} {}",
            self.topic_name,
            self.read_queue_nums,
            self.write_queue_nums,
            self.perm,
            self.topic_filter_type.name(),
        );
        if !self.attributes.is_empty() {
            line.push(' ');
            line.push_str(&String::from_utf8_lossy(&json::to_bytes(&self.attributes)));
        }
        line
    }

    /// Parses the text form; fewer than five fields is an error, the sixth (attributes JSON,
    /// which may itself hold spaces) is optional.
    pub fn from_line(line: &str) -> Result<TopicConfig, BodyError> {
        let bad = |reason: &'static str| BodyError::TopicLine {
            line: line.chars().take(200).collect(),
            reason,
        };
        let parts: Vec<&str> = line.splitn(6, ' ').collect();
        let [name, read, write, perm, filter, rest @ ..] = parts.as_slice() else {
            return Err(bad("fewer than five fields"));
        };
        let number = |text: &str| {
            text.parse::<i32>()
                .map_err(|_| bad("a count is not a number"))
        };
        let mut config = TopicConfig::new(*name);
        config.read_queue_nums = number(read)?;
        config.write_queue_nums = number(write)?;
        config.perm = number(perm)?;
        config.topic_filter_type =
            TopicFilterType::from_name(filter).ok_or_else(|| bad("unknown topicFilterType"))?;
        if let Some(attributes) = rest.first().filter(|text| !text.trim().is_empty()) {
            config.attributes = json::from_slice(attributes.as_bytes())?;
        }
        Ok(config)
    }
}

/// A version stamp of a broker's metadata: bumped on every change.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DataVersion {
    /// Change counter.
    #[serde(deserialize_with = "lenient::i64")]
    pub counter: i64,
    /// 5.x controller state version.
    #[serde(rename = "stateVersion", deserialize_with = "lenient::i64")]
    pub state_version: i64,
    /// Wall clock of the last change, ms.
    #[serde(deserialize_with = "lenient::i64")]
    pub timestamp: i64,
}

/// All topic configs of a broker with their version: `topics.json`, the REGISTER_BROKER
/// wrapper and the GET_ALL_TOPIC_CONFIG body (Java's TopicConfigSerializeWrapper and its 5.x
/// subclass TopicConfigAndMappingSerializeWrapper, whose extra members are optional here).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TopicConfigSerializeWrapper {
    /// Version of the table.
    #[serde(rename = "dataVersion")]
    pub data_version: DataVersion,
    /// Topic name to config.
    #[serde(rename = "topicConfigTable")]
    pub topic_config_table: BTreeMap<String, TopicConfig>,
    /// 5.x: version of the static-topic mapping.
    #[serde(rename = "mappingDataVersion", skip_serializing_if = "Option::is_none")]
    pub mapping_data_version: Option<DataVersion>,
    /// 5.x static topics: topic to mapping detail, kept opaque.
    #[serde(
        rename = "topicQueueMappingDetailMap",
        skip_serializing_if = "Option::is_none"
    )]
    pub topic_queue_mapping_detail_map: Option<BTreeMap<String, Value>>,
    /// 5.x static topics: topic to mapping info, kept opaque.
    #[serde(
        rename = "topicQueueMappingInfoMap",
        skip_serializing_if = "Option::is_none"
    )]
    pub topic_queue_mapping_info_map: Option<BTreeMap<String, Value>>,
}

/// The 5.x name of the wrapper with static-topic mappings; same shape.
pub type TopicConfigAndMappingSerializeWrapper = TopicConfigSerializeWrapper;

/// REGISTER_BROKER request body.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RegisterBrokerBody {
    /// Filter-server addresses (legacy, normally empty).
    #[serde(rename = "filterServerList")]
    pub filter_server_list: Vec<String>,
    /// The broker's topics.
    #[serde(rename = "topicConfigSerializeWrapper")]
    pub topic_config_serialize_wrapper: TopicConfigSerializeWrapper,
}

json_bodies!(
    TopicConfig,
    DataVersion,
    TopicConfigSerializeWrapper,
    RegisterBrokerBody
);

impl RegisterBrokerBody {
    /// Decodes the body as the header's `compressed` flag says.
    pub fn decode_with(bytes: &[u8], compressed: bool) -> Result<RegisterBrokerBody, BodyError> {
        if compressed {
            RegisterBrokerBody::decode_compressed(bytes)
        } else {
            Ok(RegisterBrokerBody::decode(bytes)?)
        }
    }

    /// Encodes the body, JSON or compressed.
    pub fn encode_with(&self, compressed: bool) -> Bytes {
        if compressed {
            self.encode_compressed()
        } else {
            self.encode()
        }
    }

    /// Writes the zlib binary form (level 9, as Java's `Deflater.BEST_COMPRESSION`).
    pub fn encode_compressed(&self) -> Bytes {
        let wrapper = &self.topic_config_serialize_wrapper;
        let mut plain = Vec::with_capacity(256);
        put_part(&mut plain, &json::to_bytes(&wrapper.data_version));
        put_count(&mut plain, wrapper.topic_config_table.len());
        for config in wrapper.topic_config_table.values() {
            put_part(&mut plain, config.to_line().as_bytes());
        }
        put_part(&mut plain, &json::to_bytes(&self.filter_server_list));
        let mappings = wrapper.topic_queue_mapping_info_map.as_ref();
        put_count(&mut plain, mappings.map_or(0, BTreeMap::len));
        for info in mappings.into_iter().flat_map(BTreeMap::values) {
            put_part(&mut plain, &json::to_bytes(info));
        }
        let mut encoder =
            ZlibEncoder::new(Vec::with_capacity(plain.len() / 2), Compression::best());
        // Writing into a Vec cannot fail; an error here would be a flate2 bug.
        let written = encoder.write_all(&plain).and_then(|()| encoder.finish());
        match written {
            Ok(compressed) => Bytes::from(compressed),
            Err(error) => panic!("zlib into memory failed: {error}"),
        }
    }

    /// Reads the zlib binary form, 4.x (no mapping section) or 5.x.
    pub fn decode_compressed(bytes: &[u8]) -> Result<RegisterBrokerBody, BodyError> {
        let mut inflated = Vec::new();
        ZlibDecoder::new(bytes)
            .take(REGISTER_BODY_INFLATED_BYTES_MAX + 1)
            .read_to_end(&mut inflated)
            .map_err(|error| BodyError::Zlib(error.to_string()))?;
        if inflated.len() as u64 > REGISTER_BODY_INFLATED_BYTES_MAX {
            return Err(BodyError::TooLarge {
                max: REGISTER_BODY_INFLATED_BYTES_MAX,
            });
        }
        let mut reader = PartReader {
            bytes: &inflated,
            position: 0,
        };
        let mut body = RegisterBrokerBody::default();
        let wrapper = &mut body.topic_config_serialize_wrapper;
        wrapper.data_version = json::from_slice(reader.part("dataVersion")?)?;
        let topic_count = reader.count("topic count")?;
        for _ in 0..topic_count {
            let line = reader.part("topic config")?;
            let config = TopicConfig::from_line(&String::from_utf8_lossy(line))?;
            wrapper
                .topic_config_table
                .insert(config.topic_name.clone(), config);
        }
        body.filter_server_list = json::from_slice(reader.part("filter server list")?)?;
        if reader.remaining() > 0 {
            let mapping_count = reader.count("topic queue mapping count")?;
            let mut mappings = BTreeMap::new();
            for _ in 0..mapping_count {
                let info: Value = json::from_slice(reader.part("topic queue mapping")?)?;
                let topic = info
                    .get("topic")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                mappings.insert(topic.to_owned(), info);
            }
            wrapper.topic_queue_mapping_info_map = Some(mappings);
        }
        Ok(body)
    }
}

fn put_count(out: &mut Vec<u8>, count: usize) {
    let count = i32::try_from(count).expect("count of a register body part fits in i32");
    out.extend_from_slice(&count.to_be_bytes());
}

fn put_part(out: &mut Vec<u8>, part: &[u8]) {
    put_count(out, part.len());
    out.extend_from_slice(part);
}

/// Reads length-prefixed parts of the inflated register body.
struct PartReader<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> PartReader<'a> {
    fn remaining(&self) -> usize {
        self.bytes.len() - self.position
    }

    fn take(&mut self, count: usize, what: &'static str) -> Result<&'a [u8], BodyError> {
        if count > self.remaining() {
            return Err(BodyError::Truncated {
                what,
                need: count,
                have: self.remaining(),
            });
        }
        let part = &self.bytes[self.position..self.position + count];
        self.position += count;
        Ok(part)
    }

    fn count(&mut self, what: &'static str) -> Result<usize, BodyError> {
        let word = self.take(4, what)?;
        let value = i32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        usize::try_from(value).map_err(|_| BodyError::Negative { what, value })
    }

    fn part(&mut self, what: &'static str) -> Result<&'a [u8], BodyError> {
        let length = self.count(what)?;
        self.take(length, what)
    }
}
