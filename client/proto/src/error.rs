//! Errors of the codec. Decode errors say where in the input they happened and never come
//! from a panic: everything here can be produced by a peer's bytes.

use thiserror::Error;

/// A frame or header that cannot be decoded.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ProtoError {
    /// The total-length field exceeds the configured maximum frame size.
    #[error("frame of {length} bytes exceeds the maximum of {max} bytes")]
    FrameTooLarge {
        /// Length announced by the peer.
        length: usize,
        /// Configured maximum.
        max: usize,
    },
    /// The total-length field is below the minimum (the header word alone).
    #[error("frame length {length} is below the minimum of 4 bytes")]
    FrameTooSmall {
        /// Length announced by the peer.
        length: usize,
    },
    /// The header length does not fit in the frame.
    #[error("header length {header_length} exceeds the frame's {available} bytes")]
    HeaderLengthInvalid {
        /// Header length from the header word.
        header_length: usize,
        /// Bytes left in the frame after the header word.
        available: usize,
    },
    /// The serialize type byte is neither JSON (0) nor ROCKETMQ (1).
    #[error("unknown header serialize type {0}")]
    SerializeTypeUnknown(u8),
    /// A JSON header that does not parse.
    #[error("malformed JSON header: {0}")]
    JsonHeader(String),
    /// A binary header or record field runs past the end of its input.
    #[error("truncated {what} at offset {offset}: need {need} bytes, have {have}")]
    Truncated {
        /// What was being decoded.
        what: &'static str,
        /// Offset within the decoded unit.
        offset: usize,
        /// Bytes required.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// A length field is negative or otherwise impossible.
    #[error("invalid {what} length {length} at offset {offset}")]
    LengthInvalid {
        /// What the length describes.
        what: &'static str,
        /// Offset within the decoded unit.
        offset: usize,
        /// Value read.
        length: i64,
    },
    /// Bytes that should be UTF-8 are not.
    #[error("{what} is not valid UTF-8")]
    Utf8 {
        /// What was being decoded.
        what: &'static str,
    },
}

/// A typed header that cannot be built from a command's ext fields.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum HeaderError {
    /// A required field is absent.
    #[error("missing required header field `{field}`")]
    Missing {
        /// The ext-field key, as it travels.
        field: &'static str,
    },
    /// A field is present but does not parse as its type.
    #[error("header field `{field}` has invalid value {value:?}: expected {expected}")]
    Invalid {
        /// The ext-field key, as it travels.
        field: &'static str,
        /// The value that arrived.
        value: String,
        /// What the field should hold.
        expected: &'static str,
    },
}
