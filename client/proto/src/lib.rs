//! `comet-proto`: the Apache RocketMQ remoting protocol as a pure codec.
//!
//! No sockets, no async, no runtime: bytes in, typed values out, and back. The broker, the
//! name server, the client, the bench tool and the admin tool all share it.
//!
//! * [`acl`]: ACL 1.0 request signatures (AccessKey, Signature ext fields).
//! * [`allocate`]: the queue allocation every member of a group computes alike.
//! * [`frame`]: length-prefixed frames, incremental decoding, size limits.
//! * [`header`]: the JSON and ROCKETMQ binary header serializations.
//! * [`command`]: `RemotingCommand` and the typed-header trait.
//! * [`code`]: request, response and language codes.
//! * [`ext`]: the ext-field map and Java's value parsing rules.
//! * [`message`]: the stored-message record (commit log, pull bodies) and client decoding.
//! * [`properties`]: the message properties string and reserved property names.
//! * [`message_id`]: offset message ids and the client unique key generator.
//! * [`names`]: topic and group name rules, reserved system topics and prefixes.
//! * [`compression`]: bounded zlib body compression and the sysflag type bits.
//! * [`batch`]: SEND_BATCH_MESSAGE bodies.
//! * [`filter`]: tag codes (Java string hash) and TAG subscription expressions.
//! * [`flags`]: message, pull and topic sysflags and permission bits.
//! * [`headers`]: typed custom headers, each mapped onto ext fields.
//! * [`body`]: JSON bodies (route data, heartbeats, stats, configs).
//! * [`json`]: fastjson-compatible reading and writing.
//! * [`config_table`]: declarative config key tables (broker and name server).
//! * [`java_properties`]: RocketMQ's `.properties` files.
//! * [`recall`]: recall handles of timed messages (RECALL_MESSAGE).

#![forbid(unsafe_code)]

pub mod acl;
pub mod allocate;
pub mod batch;
pub mod body;
pub mod code;
pub mod command;
pub mod compression;
pub mod config_table;
pub mod error;
pub mod ext;
pub mod filter;
pub mod flags;
pub mod frame;
pub mod header;
pub mod headers;
pub mod java_properties;
pub mod json;
pub mod limits;
pub mod message;
pub mod message_id;
pub mod names;
mod pairs;
pub mod properties;
pub mod recall;
pub mod sql92;

pub use bytes;
pub use code::{LanguageCode, RequestCode, ResponseCode};
pub use command::{CommandHeader, RemotingCommand, SerializeType};
pub use error::{HeaderError, ProtoError};
pub use ext::ExtFields;
pub use frame::{Decoded, FrameDecoder};
pub use message::{decode_records, MessageExt, RecordError, RecordSpec, RecordView};
pub use properties::Properties;
