//! `RemotingCommand`: one request or response of the remoting protocol
//! (docs/protocol.md#remoting-command-semantics).

use bytes::Bytes;

use crate::code::{version, LanguageCode, RequestCode, ResponseCode};
use crate::error::HeaderError;
use crate::ext::ExtFields;

/// Flag bit 0: the command is a response.
pub const FLAG_RESPONSE: i32 = 1;
/// Flag bit 1: the request is one-way and must not be answered.
pub const FLAG_ONEWAY: i32 = 2;

/// How a command's header is serialized (the high byte of the header word).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum SerializeType {
    /// A fastjson-style JSON object (type 0), the Java default.
    #[default]
    Json,
    /// The compact binary form (type 1).
    RocketMq,
}

impl SerializeType {
    /// The type byte on the wire.
    pub const fn byte(self) -> u8 {
        match self {
            SerializeType::Json => 0,
            SerializeType::RocketMq => 1,
        }
    }

    /// Decodes a type byte; anything but 0 and 1 is `None`.
    pub const fn from_byte(byte: u8) -> Option<SerializeType> {
        match byte {
            0 => Some(SerializeType::Json),
            1 => Some(SerializeType::RocketMq),
            _ => None,
        }
    }
}

/// One request or response.
///
/// `code` is kept as the raw number: for a request it is a [`RequestCode`], for a response a
/// [`ResponseCode`], and the accessors give the typed view. Unknown numbers survive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemotingCommand {
    /// Request code (requests) or response code (responses).
    pub code: i32,
    /// The sender's language.
    pub language: LanguageCode,
    /// The sender's version ordinal.
    pub version: i32,
    /// Request id; a response copies its request's.
    pub opaque: i32,
    /// Bit flags: [`FLAG_RESPONSE`], [`FLAG_ONEWAY`].
    pub flag: i32,
    /// Optional human-readable text, mostly on errors.
    pub remark: Option<String>,
    /// The typed header flattened to strings.
    pub ext_fields: ExtFields,
    /// Opaque payload; empty when absent.
    pub body: Bytes,
    /// How the header travelled (decode) or will travel (encode).
    pub serialize_type: SerializeType,
}

impl RemotingCommand {
    /// A new request with the given code and opaque, sent as Rust at Comet's version.
    pub fn request(code: RequestCode, opaque: i32) -> RemotingCommand {
        RemotingCommand {
            code: code.value(),
            language: LanguageCode::RUST,
            version: version::CURRENT,
            opaque,
            flag: 0,
            remark: None,
            ext_fields: ExtFields::new(),
            body: Bytes::new(),
            serialize_type: SerializeType::Json,
        }
    }

    /// A response to `request`: same opaque and serialization, response flag set.
    pub fn response_to(request: &RemotingCommand, code: ResponseCode) -> RemotingCommand {
        RemotingCommand {
            code: code.value(),
            language: LanguageCode::JAVA,
            version: version::CURRENT,
            opaque: request.opaque,
            flag: FLAG_RESPONSE,
            remark: None,
            ext_fields: ExtFields::new(),
            body: Bytes::new(),
            serialize_type: request.serialize_type,
        }
    }

    /// An error response to `request` with a remark.
    pub fn error_to(
        request: &RemotingCommand,
        code: ResponseCode,
        remark: impl Into<String>,
    ) -> RemotingCommand {
        let mut response = RemotingCommand::response_to(request, code);
        response.remark = Some(remark.into());
        response
    }

    /// The Java server's answer to an unknown request code
    /// (docs/protocol.md#remoting-command-semantics).
    pub fn not_supported_to(request: &RemotingCommand) -> RemotingCommand {
        let remark = format!(" request type {} not supported", request.code);
        RemotingCommand::error_to(request, ResponseCode::REQUEST_CODE_NOT_SUPPORTED, remark)
    }

    /// True for responses (flag bit 0).
    pub fn is_response(&self) -> bool {
        self.flag & FLAG_RESPONSE != 0
    }

    /// True for one-way requests (flag bit 1).
    pub fn is_oneway(&self) -> bool {
        self.flag & FLAG_ONEWAY != 0
    }

    /// Marks this request one-way.
    pub fn set_oneway(&mut self) {
        self.flag |= FLAG_ONEWAY;
    }

    /// The typed request code.
    pub fn request_code(&self) -> RequestCode {
        RequestCode::from(self.code)
    }

    /// The typed response code.
    pub fn response_code(&self) -> ResponseCode {
        ResponseCode::from(self.code)
    }

    /// Builds a typed header from the ext fields.
    pub fn decode_header<H: CommandHeader>(&self) -> Result<H, HeaderError> {
        H::from_ext_fields(&self.ext_fields)
    }

    /// Writes a typed header into the ext fields (keeping entries it does not name).
    pub fn encode_header<H: CommandHeader>(&mut self, header: &H) {
        header.to_ext_fields(&mut self.ext_fields);
    }

    /// Builder form of [`RemotingCommand::encode_header`].
    pub fn with_header<H: CommandHeader>(mut self, header: &H) -> RemotingCommand {
        self.encode_header(header);
        self
    }

    /// Builder form for the body.
    pub fn with_body(mut self, body: impl Into<Bytes>) -> RemotingCommand {
        self.body = body.into();
        self
    }

    /// Builder form for the remark.
    pub fn with_remark(mut self, remark: impl Into<String>) -> RemotingCommand {
        self.remark = Some(remark.into());
        self
    }
}

/// A typed header that travels as ext fields: the Java "custom header" classes.
pub trait CommandHeader: Sized {
    /// Writes every non-null field under its Java field name.
    fn to_ext_fields(&self, ext: &mut ExtFields);
    /// Reads the fields; a missing required field or a malformed value is a typed error.
    fn from_ext_fields(ext: &ExtFields) -> Result<Self, HeaderError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the flag helpers and that a response keeps the request's opaque and
    // serialization.
    #[test]
    fn flags_and_responses() {
        let mut request = RemotingCommand::request(RequestCode::HEART_BEAT, 42);
        request.serialize_type = SerializeType::RocketMq;
        assert!(!request.is_response());
        assert!(!request.is_oneway());
        request.set_oneway();
        assert!(request.is_oneway());
        let response = RemotingCommand::response_to(&request, ResponseCode::SUCCESS);
        assert!(response.is_response());
        assert_eq!(response.opaque, 42);
        assert_eq!(response.serialize_type, SerializeType::RocketMq);
        let unknown = RemotingCommand {
            code: 777,
            ..request
        };
        let answer = RemotingCommand::not_supported_to(&unknown);
        assert_eq!(
            answer.response_code(),
            ResponseCode::REQUEST_CODE_NOT_SUPPORTED
        );
        assert_eq!(
            answer.remark.as_deref(),
            Some(" request type 777 not supported")
        );
    }
}
