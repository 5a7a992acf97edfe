//! Length-prefixed frames (docs/protocol.md#frame-layout).
//!
//! ```text
//! +--------------+-------------------------------+--------+------+
//! | total_length | header_word                   | header | body |
//! | i32 BE       | type << 24 | header_length    |        |      |
//! +--------------+-------------------------------+--------+------+
//! total_length = 4 + header_length + body_length (it does not count itself)
//! ```
//!
//! Decoding is two steps: a cheap completeness check on the buffered bytes, then the parse of
//! one whole frame. A short buffer is an expected state (`Ok(None)`), not an error. The length
//! is checked against the configured maximum before anything is reserved. The body is a
//! zero-copy slice of the frame.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::command::{RemotingCommand, SerializeType};
use crate::error::ProtoError;
use crate::header::{decode_header, effective_serialize_type, encode_header};
use crate::limits::{FRAME_BYTES_MAX_DEFAULT, FRAME_TOTAL_LENGTH_MIN, HEADER_BYTES_MAX};

/// Bytes of the length prefix.
pub const LENGTH_PREFIX_BYTES: usize = 4;

/// Incremental frame decoder with a maximum frame size.
#[derive(Clone, Copy, Debug)]
pub struct FrameDecoder {
    frame_bytes_max: usize,
}

impl Default for FrameDecoder {
    fn default() -> FrameDecoder {
        FrameDecoder::new(FRAME_BYTES_MAX_DEFAULT)
    }
}

/// What a decode step produced.
#[derive(Debug)]
pub enum Decoded {
    /// A whole command.
    Command(RemotingCommand),
    /// A whole frame was consumed but its header is malformed. The frame boundary is intact,
    /// so the connection may go on; the opaque is unknown, so no response can be matched.
    Malformed(ProtoError),
}

impl FrameDecoder {
    /// A decoder refusing frames whose total length exceeds `frame_bytes_max`.
    pub fn new(frame_bytes_max: usize) -> FrameDecoder {
        assert!(frame_bytes_max >= FRAME_TOTAL_LENGTH_MIN);
        assert!(frame_bytes_max <= i32::MAX as usize);
        FrameDecoder { frame_bytes_max }
    }

    /// The configured maximum.
    pub fn frame_bytes_max(&self) -> usize {
        self.frame_bytes_max
    }

    /// Returns the number of bytes the next frame occupies (prefix included) once it is fully
    /// buffered, `Ok(None)` while it is not, or an error for an impossible length. On
    /// `Ok(None)` the caller may use [`FrameDecoder::bytes_wanted`] to reserve.
    pub fn frame_length(&self, buffer: &[u8]) -> Result<Option<usize>, ProtoError> {
        let Some(total_length) = self.total_length(buffer)? else {
            return Ok(None);
        };
        let frame_length = LENGTH_PREFIX_BYTES + total_length;
        Ok((buffer.len() >= frame_length).then_some(frame_length))
    }

    /// How many bytes the buffer needs in total to hold the next frame, when known.
    pub fn bytes_wanted(&self, buffer: &[u8]) -> Result<Option<usize>, ProtoError> {
        Ok(self
            .total_length(buffer)?
            .map(|total| LENGTH_PREFIX_BYTES + total))
    }

    fn total_length(&self, buffer: &[u8]) -> Result<Option<usize>, ProtoError> {
        if buffer.len() < LENGTH_PREFIX_BYTES {
            return Ok(None);
        }
        let announced = i32::from_be_bytes([buffer[0], buffer[1], buffer[2], buffer[3]]);
        let Ok(total_length) = usize::try_from(announced) else {
            return Err(ProtoError::FrameTooSmall { length: 0 });
        };
        if total_length < FRAME_TOTAL_LENGTH_MIN {
            return Err(ProtoError::FrameTooSmall {
                length: total_length,
            });
        }
        if total_length > self.frame_bytes_max {
            return Err(ProtoError::FrameTooLarge {
                length: total_length,
                max: self.frame_bytes_max,
            });
        }
        Ok(Some(total_length))
    }

    /// Takes one frame off the front of `buffer` when it is complete.
    ///
    /// `Err` means the stream itself is broken (impossible length) and the connection must be
    /// closed; `Ok(Some(Decoded::Malformed))` means one frame was skipped.
    pub fn decode(&self, buffer: &mut BytesMut) -> Result<Option<Decoded>, ProtoError> {
        let Some(frame_length) = self.frame_length(buffer)? else {
            return Ok(None);
        };
        let mut frame = buffer.split_to(frame_length).freeze();
        frame.advance(LENGTH_PREFIX_BYTES);
        Ok(Some(match decode_frame_payload(frame) {
            Ok(command) => Decoded::Command(command),
            Err(error) => Decoded::Malformed(error),
        }))
    }
}

/// Parses a frame without its length prefix: header word, header, body. The body shares the
/// frame's memory.
pub fn decode_frame_payload(mut frame: Bytes) -> Result<RemotingCommand, ProtoError> {
    if frame.len() < 4 {
        return Err(ProtoError::FrameTooSmall {
            length: frame.len(),
        });
    }
    let header_word = frame.get_u32();
    let type_byte = (header_word >> 24) as u8;
    let header_length = (header_word & 0x00FF_FFFF) as usize;
    let serialize_type =
        SerializeType::from_byte(type_byte).ok_or(ProtoError::SerializeTypeUnknown(type_byte))?;
    if header_length > frame.len() {
        return Err(ProtoError::HeaderLengthInvalid {
            header_length,
            available: frame.len(),
        });
    }
    let header_bytes = frame.split_to(header_length);
    let fields = decode_header(serialize_type, &header_bytes)?;
    Ok(RemotingCommand {
        code: fields.code,
        language: fields.language,
        version: fields.version,
        opaque: fields.opaque,
        flag: fields.flag,
        remark: fields.remark,
        ext_fields: fields.ext_fields,
        body: frame,
        serialize_type,
    })
}

/// Appends the whole frame of `command` (prefix, header word, header, body) to `dst`.
pub fn encode(command: &RemotingCommand, dst: &mut BytesMut) {
    encode_prefix_and_header(command, dst);
    dst.put_slice(&command.body);
}

/// Appends the prefix, header word and header of `command`, with the length prefix counting
/// `command.body`, but not the body itself: for writers that send the body as a separate
/// buffer (vectored I/O over stored records).
pub fn encode_prefix_and_header(command: &RemotingCommand, dst: &mut BytesMut) {
    let serialize_type = effective_serialize_type(command);
    let start = dst.len();
    dst.put_u32(0);
    dst.put_u32(0);
    encode_header(command, serialize_type, dst);
    let header_length = dst.len() - start - 8;
    assert!(
        header_length <= HEADER_BYTES_MAX,
        "header of {header_length} bytes"
    );
    let total_length = 4 + header_length + command.body.len();
    let total_length = u32::try_from(total_length).expect("frame longer than 4 GiB");
    let header_length = u32::try_from(header_length).expect("header checked against its limit");
    let header_word = (u32::from(serialize_type.byte()) << 24) | header_length;
    dst[start..start + 4].copy_from_slice(&total_length.to_be_bytes());
    dst[start + 4..start + 8].copy_from_slice(&header_word.to_be_bytes());
}

/// Encodes a command into a fresh buffer.
pub fn encode_to_bytes(command: &RemotingCommand) -> Bytes {
    let mut dst = BytesMut::with_capacity(256 + command.body.len());
    encode(command, &mut dst);
    dst.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::code::RequestCode;

    fn command(serialize_type: SerializeType) -> RemotingCommand {
        let mut command = RemotingCommand::request(RequestCode::SEND_MESSAGE_V2, 99);
        command.ext_fields.insert("b", "TopicTest");
        command.body = Bytes::from_static(b"Hello RocketMQ");
        command.serialize_type = serialize_type;
        command
    }

    // Proves that a frame fed one byte at a time decodes exactly once, at the last byte, and
    // consumes exactly its own bytes.
    #[test]
    fn incremental_decoding() {
        for serialize_type in [SerializeType::Json, SerializeType::RocketMq] {
            let original = command(serialize_type);
            let mut wire = BytesMut::new();
            encode(&original, &mut wire);
            encode(&original, &mut wire);
            let one_frame = wire.len() / 2;
            let decoder = FrameDecoder::default();
            let mut buffer = BytesMut::new();
            for (index, byte) in wire.iter().enumerate() {
                buffer.put_u8(*byte);
                let result = decoder.decode(&mut buffer).unwrap();
                if index + 1 == one_frame || index + 1 == 2 * one_frame {
                    let Some(Decoded::Command(decoded)) = result else {
                        panic!("no frame")
                    };
                    assert_eq!(decoded, original);
                    assert!(buffer.is_empty());
                } else {
                    assert!(result.is_none(), "early frame at byte {index}");
                }
            }
        }
    }

    // Proves the maximum is enforced from the length field alone, before the bytes arrive.
    #[test]
    fn oversized_and_undersized_lengths() {
        let decoder = FrameDecoder::new(1024);
        let mut buffer = BytesMut::from(&1025u32.to_be_bytes()[..]);
        assert_eq!(
            decoder.decode(&mut buffer).unwrap_err(),
            ProtoError::FrameTooLarge {
                length: 1025,
                max: 1024
            }
        );
        let mut buffer = BytesMut::from(&3u32.to_be_bytes()[..]);
        assert!(matches!(
            decoder.decode(&mut buffer),
            Err(ProtoError::FrameTooSmall { .. })
        ));
        let mut buffer = BytesMut::from(&(-1i32).to_be_bytes()[..]);
        assert!(decoder.decode(&mut buffer).is_err());
    }

    // Proves a complete frame with a broken header is skipped as Malformed, leaving the next
    // frame decodable.
    #[test]
    fn malformed_header_keeps_the_stream() {
        let mut buffer = BytesMut::new();
        buffer.put_u32(4 + 3);
        buffer.put_u32(3);
        buffer.put_slice(b"{x}");
        buffer.put_u32(4 + 2);
        buffer.put_u32((7 << 24) | 2);
        buffer.put_slice(b"{}");
        encode(&command(SerializeType::Json), &mut buffer);
        let decoder = FrameDecoder::default();
        assert!(matches!(
            decoder.decode(&mut buffer),
            Ok(Some(Decoded::Malformed(_)))
        ));
        assert!(matches!(
            decoder.decode(&mut buffer),
            Ok(Some(Decoded::Malformed(ProtoError::SerializeTypeUnknown(
                7
            ))))
        ));
        assert!(matches!(
            decoder.decode(&mut buffer),
            Ok(Some(Decoded::Command(_)))
        ));
    }

    // Proves a header length larger than the frame is refused.
    #[test]
    fn header_longer_than_frame() {
        let mut frame = BytesMut::new();
        frame.put_u32(100);
        frame.put_slice(b"{}");
        assert!(matches!(
            decode_frame_payload(frame.freeze()),
            Err(ProtoError::HeaderLengthInvalid { .. })
        ));
    }
}
