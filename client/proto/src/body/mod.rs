//! JSON bodies: the `RemotingSerializable` classes that travel as a command's body
//! (docs/protocol.md#json-body-shapes), plus the zlib binary form of the register-broker body.
//!
//! Every body type is a serde struct with Rust snake_case fields renamed to the Java keys,
//! implementing [`JsonBody`]:
//!
//! * [`JsonBody::decode`] reads what Java (fastjson), Go, C++, JS and Rust peers send, through
//!   the tolerant reader of [`crate::json`]: bare numeric keys, object keys, unknown keys
//!   (derived getters,
//!   docs/protocol.md#derived-getters-in-json), missing members (Java field defaults apply), and
//!   for the heartbeat also numbers as strings and enums as ordinals.
//! * [`JsonBody::encode`] writes what Java peers parse: compact, keys sorted, nulls omitted,
//!   enums by name, MessageQueue-keyed maps in fastjson's object-key form, integer-keyed maps
//!   with quoted keys.
//!
//! Maps are `BTreeMap` and sets `BTreeSet` so encoding is deterministic.

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::Serialize;

use thiserror::Error;

use crate::json::{self, JsonError};

pub mod admin;
pub mod assignment;
pub mod client;
pub mod consumer;
pub mod controller;
pub mod heartbeat;
pub mod route;
pub mod stats;
pub mod topic;

pub use admin::*;
pub use assignment::*;
pub use client::*;
pub use consumer::*;
pub use controller::*;
pub use heartbeat::*;
pub use route::*;
pub use stats::*;
pub use topic::*;

/// A body that travels as fastjson-compatible JSON.
pub trait JsonBody: Serialize + DeserializeOwned {
    /// Reads a body as any supported peer writes it.
    fn decode(bytes: &[u8]) -> Result<Self, JsonError> {
        json::from_slice(bytes)
    }

    /// Writes the body as Java peers read it.
    fn encode(&self) -> Bytes {
        json::to_bytes(self)
    }
}

/// A body (JSON, or the compressed register body), that cannot be decoded.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum BodyError {
    /// An embedded JSON part is malformed.
    #[error(transparent)]
    Json(#[from] JsonError),
    /// The zlib stream is corrupt.
    #[error("compressed register body: {0}")]
    Zlib(String),
    /// The inflated stream ended inside a field.
    #[error("compressed register body truncated in {what}: need {need} bytes, have {have}")]
    Truncated {
        /// The field being read.
        what: &'static str,
        /// Bytes required.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// A length or count is negative.
    #[error("compressed register body: negative {what} {value}")]
    Negative {
        /// The field.
        what: &'static str,
        /// Its value.
        value: i32,
    },
    /// The inflated stream exceeds [`topic::REGISTER_BODY_INFLATED_BYTES_MAX`].
    #[error("compressed register body inflates past {max} bytes")]
    TooLarge {
        /// The limit.
        max: u64,
    },
    /// A topic line does not parse.
    #[error("topic config line {line:?}: {reason}")]
    TopicLine {
        /// The line (first 200 characters).
        line: String,
        /// What is wrong.
        reason: &'static str,
    },
}

/// Implements [`JsonBody`] with its default methods for each listed type.
macro_rules! json_bodies {
    ($($name:ty),+ $(,)?) => {
        $( impl $crate::body::JsonBody for $name {} )+
    };
}

pub(crate) use json_bodies;
