//! The frames of the replication stream, their encoder and an incremental decoder.
//!
//! Every frame is a 16-byte header and a body; integers are big-endian:
//!
//! ```text
//!  offset  bytes  field
//!       0      4  magic 0x434D5452 ("CMTR")
//!       4      1  version (1)
//!       5      1  kind: 1 Hello, 2 Welcome, 3 Data, 4 Ack, 5 Heartbeat, 6 Close
//!       6      2  reserved, zero
//!       8      4  body length (at most limits::FRAME_BODY_BYTES_MAX)
//!      12      4  CRC-32 (IEEE) of header bytes 0..12 followed by the body
//!      16      …  body
//! ```
//!
//! Bodies (`str` = u16 length + UTF-8, `history` = u16 count + count × (epoch u32, start u64)):
//!
//! ```text
//!  Hello      str cluster, str broker name, u64 broker id,
//!             u32 store format version, u64 segment bytes,
//!             u16 n, n × (u8 log, u64 written, u64 durable, history)
//!  Welcome    u16 m, m × u8 log (every log the master has),
//!             u16 n, n × (u8 log, u8 answer, …): answer 1 Continue / 2 Truncate /
//!             3 FullCopy: u64 position, history (the master's); 4 Refused: u16 refusal
//!             (1 unknown log; 2 slave has a newer epoch: u32 slave epoch,
//!             u8 has master epoch, u32 master epoch)
//!  Data       u8 log, u32 epoch, u64 start, u64 confirm, u32 payload CRC, payload (the rest)
//!  Ack        u8 log, u64 written, u64 durable, u64 confirm (the highest received)
//!  Heartbeat  u8 log, u32 epoch, u64 written, u64 confirm
//!  Close      u16 reason, str detail
//! ```
//!
//! Decoding first asks [`buffered`] whether a whole frame is there (a short buffer is not an
//! error, and a wrong magic, version, kind or length is found from the header alone), then
//! checks the CRC and parses. Every count, length and position is checked against
//! [`crate::limits`] before it is used; decoding arbitrary bytes returns an error, never
//! panics, and never allocates more than the frame's own length.

use bytes::{BufMut, Bytes, BytesMut};
use thiserror::Error;

use crate::epoch::{Epoch, EpochError, EpochHistory, EpochStart, ResumePlan};
use crate::limits::{
    CLOSE_DETAIL_BYTES_MAX, DATA_FIXED_BYTES, DATA_PAYLOAD_BYTES_MAX, EPOCHS_MAX,
    FRAME_BODY_BYTES_MAX, FRAME_HEADER_BYTES, LOGS_MAX, LOG_ID_MAX, NAME_BYTES_MAX, POSITION_MAX,
};

/// First four bytes of every frame: "CMTR".
pub const MAGIC: u32 = 0x434D_5452;
/// The protocol version this crate speaks.
pub const VERSION: u8 = 2;

const KIND_HELLO: u8 = 1;
const KIND_WELCOME: u8 = 2;
const KIND_DATA: u8 = 3;
const KIND_ACK: u8 = 4;
const KIND_HEARTBEAT: u8 = 5;
const KIND_CLOSE: u8 = 6;

const ANSWER_CONTINUE: u8 = 1;
const ANSWER_TRUNCATE: u8 = 2;
const ANSWER_FULL_COPY: u8 = 3;
const ANSWER_REFUSED: u8 = 4;

const REFUSAL_UNKNOWN_LOG: u16 = 1;
const REFUSAL_SLAVE_NEWER_EPOCH: u16 = 2;

/// What a store's bytes depend on beyond the records themselves; master and slave must
/// agree on it, or the same bytes would mean different things (a segment end marker at a
/// different place, another layout).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StoreFormat {
    /// Version of the on-disk layout.
    pub format_version: u32,
    /// Bytes of one commit-log segment.
    pub segment_bytes: u64,
}

/// One log as a slave holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogState {
    /// The log's id.
    pub log_id: u8,
    /// The slave's written end of it.
    pub written: u64,
    /// The slave's durable end of it (at most `written`).
    pub durable: u64,
    /// The slave's epoch history of it.
    pub epochs: EpochHistory,
}

/// Slave to master, first frame of a session: who the slave is and what it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    /// `brokerClusterName`.
    pub cluster_name: String,
    /// `brokerName` (a slave follows the master of its own name).
    pub broker_name: String,
    /// `brokerId` (at least 1 for a slave).
    pub broker_id: u64,
    /// The slave's store format.
    pub format: StoreFormat,
    /// The logs the slave asks to follow (at most [`LOGS_MAX`], each once).
    pub logs: Vec<LogState>,
}

/// Why the master will not stream one log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogRefusal {
    /// The master has no log of that id.
    UnknownLog,
    /// The slave knows a newer epoch than the master: the master is stale.
    SlaveNewerEpoch {
        /// The slave's latest epoch.
        slave_epoch: Epoch,
        /// The master's latest epoch, if any.
        master_epoch: Option<Epoch>,
    },
}

/// The master's answer for one log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogAnswer {
    /// Follow from where the plan says, after carrying it out.
    Follow {
        /// Where to resume, and what to drop first.
        plan: ResumePlan,
        /// The master's epoch history of the log.
        epochs: EpochHistory,
    },
    /// Nothing will be streamed for this log.
    Refused(LogRefusal),
}

/// The master's answer for one log of a Hello.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogWelcome {
    /// The log's id.
    pub log_id: u8,
    /// The answer.
    pub answer: LogAnswer,
}

/// Master to slave, answer to a Hello the master accepts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Welcome {
    /// Every log the master has, so a fresh slave learns which logs to open.
    pub master_logs: Vec<u8>,
    /// One answer per log of the Hello, in its order.
    pub logs: Vec<LogWelcome>,
}

/// Master to slave: whole records of one log, to append at `start`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Data {
    /// The log.
    pub log_id: u8,
    /// The master epoch the bytes were written in (a frame never spans two).
    pub epoch: Epoch,
    /// Log position of the first byte; equal to the slave's written end.
    pub start: u64,
    /// The master's confirm position: what consumers may see (see `sync_wait`).
    pub confirm: u64,
    /// CRC-32 (IEEE) of `payload`, computed where the bytes were read from the log and
    /// checked where they are appended.
    pub payload_crc: u32,
    /// The records (see `records` for the one abbreviation a segment end marker takes).
    pub payload: Bytes,
}

impl Data {
    /// A Data frame with the CRC of `payload` computed.
    pub fn new(log_id: u8, epoch: Epoch, start: u64, confirm: u64, payload: Bytes) -> Data {
        Data {
            log_id,
            epoch,
            start,
            confirm,
            payload_crc: crc32fast::hash(&payload),
            payload,
        }
    }
}

/// Slave to master: how far one log is written and durable on the slave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ack {
    /// The log.
    pub log_id: u8,
    /// The slave's written end.
    pub written: u64,
    /// The slave's durable end.
    pub durable: u64,
    /// The highest confirm position the slave has received (from Data or Heartbeat): a
    /// SYNC_MASTER send is answered only once its slave can show it to consumers.
    pub confirm: u64,
}

/// Master to slave while there is nothing to send: the master is alive and where it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Heartbeat {
    /// The log.
    pub log_id: u8,
    /// The master's current epoch of the log.
    pub epoch: Epoch,
    /// The master's written end.
    pub written: u64,
    /// The master's confirm position.
    pub confirm: u64,
}

/// Why a stream ends (either direction).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// The sender is shutting down.
    Shutdown,
    /// The Hello names another cluster.
    WrongCluster,
    /// The Hello names another broker.
    WrongBrokerName,
    /// The Hello's broker id is the master's (0, or the master's own).
    BrokerIdRefused,
    /// The store formats differ.
    FormatMismatch,
    /// A frame could not be decoded, or came out of order.
    Malformed,
    /// An Ack the master cannot accept (past what was sent, backwards, durable > written).
    AckInvalid,
    /// A Data or Heartbeat frame the slave cannot accept.
    DataInvalid,
    /// The master is stale (the slave knows a newer epoch).
    StaleMaster,
    /// The peer was silent too long.
    Timeout,
    /// The master cannot go on from where this session is (retention removed the bytes,
    /// or its own log is damaged there): reconnect, and the handshake decides afresh.
    Resync,
    /// A reason this version does not know (sent by a newer peer).
    Unknown(u16),
}

impl CloseReason {
    /// The wire code.
    pub fn code(self) -> u16 {
        match self {
            CloseReason::Shutdown => 1,
            CloseReason::WrongCluster => 2,
            CloseReason::WrongBrokerName => 3,
            CloseReason::BrokerIdRefused => 4,
            CloseReason::FormatMismatch => 5,
            CloseReason::Malformed => 6,
            CloseReason::AckInvalid => 7,
            CloseReason::DataInvalid => 8,
            CloseReason::StaleMaster => 9,
            CloseReason::Timeout => 10,
            CloseReason::Resync => 11,
            CloseReason::Unknown(code) => code,
        }
    }

    /// The reason of a wire code.
    pub fn from_code(code: u16) -> CloseReason {
        match code {
            1 => CloseReason::Shutdown,
            2 => CloseReason::WrongCluster,
            3 => CloseReason::WrongBrokerName,
            4 => CloseReason::BrokerIdRefused,
            5 => CloseReason::FormatMismatch,
            6 => CloseReason::Malformed,
            7 => CloseReason::AckInvalid,
            8 => CloseReason::DataInvalid,
            9 => CloseReason::StaleMaster,
            10 => CloseReason::Timeout,
            11 => CloseReason::Resync,
            other => CloseReason::Unknown(other),
        }
    }
}

/// Either direction, last frame of a stream: why it ends. Also the refusal of a Hello.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Close {
    /// Why.
    pub reason: CloseReason,
    /// For the log of the peer: at most [`CLOSE_DETAIL_BYTES_MAX`] bytes.
    pub detail: String,
}

impl Close {
    /// A Close frame; `detail` is cut to [`CLOSE_DETAIL_BYTES_MAX`] bytes on a character
    /// boundary, so building one never fails.
    pub fn new(reason: CloseReason, detail: impl Into<String>) -> Close {
        let mut detail = detail.into();
        if detail.len() > CLOSE_DETAIL_BYTES_MAX {
            let mut cut = CLOSE_DETAIL_BYTES_MAX;
            while !detail.is_char_boundary(cut) {
                cut -= 1;
            }
            detail.truncate(cut);
        }
        Close { reason, detail }
    }
}

/// One frame of the stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    /// See [`Hello`].
    Hello(Hello),
    /// See [`Welcome`].
    Welcome(Welcome),
    /// See [`Data`].
    Data(Data),
    /// See [`Ack`].
    Ack(Ack),
    /// See [`Heartbeat`].
    Heartbeat(Heartbeat),
    /// See [`Close`].
    Close(Close),
}

/// A frame that cannot be encoded: some field is beyond [`crate::limits`]. Any frame that
/// encodes also decodes.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum EncodeError {
    /// A string field longer than its limit.
    #[error("{field} is {bytes} bytes, at most {max}")]
    TooLong {
        /// The field.
        field: &'static str,
        /// Its length.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// More logs than [`LOGS_MAX`], or a log named twice.
    #[error("{field}: {count} logs or a log named twice, at most {max} distinct")]
    Logs {
        /// The field.
        field: &'static str,
        /// Entries given.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// A log id beyond [`LOG_ID_MAX`].
    #[error("log id {log_id} beyond {max}", max = LOG_ID_MAX)]
    LogId {
        /// The id.
        log_id: u8,
    },
    /// A position beyond [`POSITION_MAX`].
    #[error("{field} {value} beyond the largest position")]
    Position {
        /// The field.
        field: &'static str,
        /// Its value.
        value: u64,
    },
    /// A Data payload beyond [`DATA_PAYLOAD_BYTES_MAX`].
    #[error("payload of {bytes} bytes, at most {max}", max = DATA_PAYLOAD_BYTES_MAX)]
    Payload {
        /// Its length.
        bytes: usize,
    },
    /// A log's durable end beyond its written end, or an epoch starting past it.
    #[error("log {log_id}: {reason}")]
    LogState {
        /// The log.
        log_id: u8,
        /// What is wrong.
        reason: &'static str,
    },
}

/// Bytes that are not a valid frame. Offsets count from the frame's first byte.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// The first bytes are not [`MAGIC`] (a stranger, or a lost frame boundary).
    #[error("bad magic at offset 0: {found:02x?}")]
    Magic {
        /// The bytes found (up to four).
        found: Vec<u8>,
    },
    /// A version this crate does not speak.
    #[error("unsupported version {found} at offset 4")]
    Version {
        /// The version found.
        found: u8,
    },
    /// An unknown frame kind.
    #[error("unknown frame kind {found} at offset 5")]
    Kind {
        /// The kind found.
        found: u8,
    },
    /// Reserved header bits set.
    #[error("reserved bits {found:#06x} set at offset 6")]
    Reserved {
        /// The reserved field.
        found: u16,
    },
    /// A body longer than [`FRAME_BODY_BYTES_MAX`].
    #[error("body of {body_bytes} bytes at offset 8, at most {max}", max = FRAME_BODY_BYTES_MAX)]
    TooLong {
        /// The length claimed.
        body_bytes: u64,
    },
    /// The frame CRC does not match its bytes.
    #[error("frame CRC {expected:#010x} at offset 12, computed {computed:#010x}")]
    Crc {
        /// The CRC the frame carries.
        expected: u32,
        /// The CRC of its bytes.
        computed: u32,
    },
    /// The input is shorter than the frame it must hold (only from [`decode_frame`]; the
    /// incremental [`decode`] waits for more bytes instead), or a field runs past its body.
    #[error("{field} at offset {offset}: need {needed} bytes, {available} available")]
    Truncated {
        /// The field.
        field: &'static str,
        /// Where it starts.
        offset: usize,
        /// Bytes it needs.
        needed: usize,
        /// Bytes left.
        available: usize,
    },
    /// Bytes left in the body after its last field.
    #[error("{count} bytes after the last field at offset {offset}")]
    Trailing {
        /// Where they start.
        offset: usize,
        /// How many.
        count: usize,
    },
    /// A number beyond its limit.
    #[error("{field} at offset {offset} is {value}, at most {max}")]
    OutOfRange {
        /// The field.
        field: &'static str,
        /// Where it starts.
        offset: usize,
        /// Its value.
        value: u64,
        /// The limit.
        max: u64,
    },
    /// A code this version does not know.
    #[error("{field} at offset {offset}: unknown code {value}")]
    Code {
        /// The field.
        field: &'static str,
        /// Where it starts.
        offset: usize,
        /// The code.
        value: u64,
    },
    /// A string that is not UTF-8.
    #[error("{field} at offset {offset} is not UTF-8")]
    Utf8 {
        /// The field.
        field: &'static str,
        /// Where it starts.
        offset: usize,
    },
    /// An epoch history that breaks its invariants.
    #[error("epoch history at offset {offset}: {source}")]
    History {
        /// Where it starts.
        offset: usize,
        /// What is wrong.
        source: EpochError,
    },
    /// Fields that contradict each other.
    #[error("{field} at offset {offset}: {reason}")]
    Inconsistent {
        /// The field.
        field: &'static str,
        /// Where it starts.
        offset: usize,
        /// What is wrong.
        reason: &'static str,
    },
}

/// Whether a whole frame is buffered (see [`buffered`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Buffered {
    /// Not yet: at least `needed` bytes must be buffered in all.
    Incomplete {
        /// Bytes the frame (or its header) needs.
        needed: usize,
        /// Bytes buffered.
        available: usize,
    },
    /// The first `frame_bytes` bytes are one whole frame (its CRC not yet checked).
    Complete {
        /// Bytes of the frame, header included.
        frame_bytes: usize,
    },
}

/// Whether `buffer` starts with a whole frame. Checks what the header alone can tell (magic,
/// as soon as its bytes arrive; version, kind, reserved bits, body length), so a stranger is
/// refused without waiting for a body it announces.
pub fn buffered(buffer: &[u8]) -> Result<Buffered, DecodeError> {
    let magic = MAGIC.to_be_bytes();
    let seen = buffer.len().min(magic.len());
    if buffer[..seen] != magic[..seen] {
        return Err(DecodeError::Magic {
            found: buffer[..seen].to_vec(),
        });
    }
    // Each header field is checked as soon as its bytes are in, so a stranger that sends
    // a few bytes and waits is refused as early as one that sends many.
    if let Some(&version) = buffer.get(4) {
        if version != VERSION {
            return Err(DecodeError::Version { found: version });
        }
    }
    if let Some(&kind) = buffer.get(5) {
        if !(KIND_HELLO..=KIND_CLOSE).contains(&kind) {
            return Err(DecodeError::Kind { found: kind });
        }
    }
    if let Some(&[high, low]) = buffer.get(6..8) {
        let reserved = u16::from_be_bytes([high, low]);
        if reserved != 0 {
            return Err(DecodeError::Reserved { found: reserved });
        }
    }
    let Some(&[b0, b1, b2, b3]) = buffer.get(8..12) else {
        return Ok(Buffered::Incomplete {
            needed: FRAME_HEADER_BYTES,
            available: buffer.len(),
        });
    };
    let body_bytes = u32::from_be_bytes([b0, b1, b2, b3]);
    let body_bytes = usize::try_from(body_bytes)
        .ok()
        .filter(|bytes| *bytes <= FRAME_BODY_BYTES_MAX)
        .ok_or(DecodeError::TooLong {
            body_bytes: u64::from(body_bytes),
        })?;
    let frame_bytes = FRAME_HEADER_BYTES + body_bytes;
    if buffer.len() < frame_bytes {
        return Ok(Buffered::Incomplete {
            needed: frame_bytes,
            available: buffer.len(),
        });
    }
    Ok(Buffered::Complete { frame_bytes })
}

/// Takes the first frame off `buffer` if it is whole: `Ok(None)` asks for more bytes. The
/// Data payload is a zero-copy slice of the buffer.
pub fn decode(buffer: &mut BytesMut) -> Result<Option<Frame>, DecodeError> {
    match buffered(buffer)? {
        Buffered::Incomplete { .. } => Ok(None),
        Buffered::Complete { frame_bytes } => {
            decode_frame(buffer.split_to(frame_bytes).freeze()).map(Some)
        }
    }
}

/// Decodes `frame`, which must be exactly one frame.
pub fn decode_frame(frame: Bytes) -> Result<Frame, DecodeError> {
    let frame_bytes = match buffered(&frame)? {
        Buffered::Incomplete { needed, available } => {
            return Err(DecodeError::Truncated {
                field: "frame",
                offset: 0,
                needed,
                available,
            })
        }
        Buffered::Complete { frame_bytes } => frame_bytes,
    };
    if frame_bytes != frame.len() {
        return Err(DecodeError::Trailing {
            offset: frame_bytes,
            count: frame.len() - frame_bytes,
        });
    }
    let expected = u32::from_be_bytes([frame[12], frame[13], frame[14], frame[15]]);
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&frame[..12]);
    hasher.update(&frame[FRAME_HEADER_BYTES..]);
    let computed = hasher.finalize();
    if computed != expected {
        return Err(DecodeError::Crc { expected, computed });
    }
    let mut body = Reader {
        frame: &frame,
        at: FRAME_HEADER_BYTES,
    };
    let decoded = match frame[5] {
        KIND_HELLO => Frame::Hello(body.hello()?),
        KIND_WELCOME => Frame::Welcome(body.welcome()?),
        KIND_DATA => {
            let log_id = body.log_id("data log")?;
            let epoch = body.u32("data epoch")?;
            let start = body.position("data start")?;
            let confirm = body.position("data confirm")?;
            let payload_crc = body.u32("data payload crc")?;
            let payload = frame.slice(body.at..);
            body.at = frame.len();
            Frame::Data(Data {
                log_id,
                epoch,
                start,
                confirm,
                payload_crc,
                payload,
            })
        }
        KIND_ACK => Frame::Ack(Ack {
            log_id: body.log_id("ack log")?,
            written: body.position("ack written")?,
            durable: body.position("ack durable")?,
            confirm: body.position("ack confirm")?,
        }),
        KIND_HEARTBEAT => Frame::Heartbeat(Heartbeat {
            log_id: body.log_id("heartbeat log")?,
            epoch: body.u32("heartbeat epoch")?,
            written: body.position("heartbeat written")?,
            confirm: body.position("heartbeat confirm")?,
        }),
        KIND_CLOSE => Frame::Close(Close {
            reason: CloseReason::from_code(body.u16("close reason")?),
            detail: body.string("close detail", CLOSE_DETAIL_BYTES_MAX)?,
        }),
        other => return Err(DecodeError::Kind { found: other }),
    };
    body.finish()?;
    Ok(decoded)
}

/// A cursor over one frame's body; every read is bounds-checked.
struct Reader<'a> {
    frame: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, needed: usize, field: &'static str) -> Result<&'a [u8], DecodeError> {
        let available = self.frame.len() - self.at;
        if needed > available {
            return Err(DecodeError::Truncated {
                field,
                offset: self.at,
                needed,
                available,
            });
        }
        let bytes = &self.frame[self.at..self.at + needed];
        self.at += needed;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], DecodeError> {
        let bytes = self.take(N, field)?;
        Ok(bytes.try_into().expect("take returns N bytes"))
    }

    fn u8(&mut self, field: &'static str) -> Result<u8, DecodeError> {
        Ok(self.array::<1>(field)?[0])
    }

    fn u16(&mut self, field: &'static str) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array(field)?))
    }

    fn u32(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array(field)?))
    }

    fn u64(&mut self, field: &'static str) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.array(field)?))
    }

    fn bounded(&self, field: &'static str, offset: usize, value: u64, max: u64) -> DecodeError {
        DecodeError::OutOfRange {
            field,
            offset,
            value,
            max,
        }
    }

    fn position(&mut self, field: &'static str) -> Result<u64, DecodeError> {
        let offset = self.at;
        let value = self.u64(field)?;
        if value > POSITION_MAX {
            return Err(self.bounded(field, offset, value, POSITION_MAX));
        }
        Ok(value)
    }

    fn log_id(&mut self, field: &'static str) -> Result<u8, DecodeError> {
        let offset = self.at;
        let value = self.u8(field)?;
        if value > LOG_ID_MAX {
            return Err(self.bounded(field, offset, value.into(), LOG_ID_MAX.into()));
        }
        Ok(value)
    }

    fn count(&mut self, field: &'static str, max: usize) -> Result<usize, DecodeError> {
        let offset = self.at;
        let value = usize::from(self.u16(field)?);
        if value > max {
            return Err(self.bounded(field, offset, value as u64, max as u64));
        }
        Ok(value)
    }

    fn string(&mut self, field: &'static str, max: usize) -> Result<String, DecodeError> {
        let length = self.count(field, max)?;
        let offset = self.at;
        let bytes = self.take(length, field)?;
        match std::str::from_utf8(bytes) {
            Ok(text) => Ok(text.to_owned()),
            Err(_) => Err(DecodeError::Utf8 { field, offset }),
        }
    }

    fn history(&mut self, field: &'static str) -> Result<EpochHistory, DecodeError> {
        let offset = self.at;
        let count = self.count(field, EPOCHS_MAX)?;
        let mut entries = Vec::with_capacity(count);
        for _ in 0..count {
            let epoch = self.u32(field)?;
            let start = self.u64(field)?;
            entries.push(EpochStart { epoch, start });
        }
        EpochHistory::from_entries(entries)
            .map_err(|source| DecodeError::History { offset, source })
    }

    /// A list of distinct log ids, as `ids` yields them.
    fn distinct(
        field: &'static str,
        offset: usize,
        ids: impl Iterator<Item = u8>,
    ) -> Result<(), DecodeError> {
        let mut seen = [false; LOGS_MAX];
        for id in ids {
            let slot = &mut seen[usize::from(id)];
            if *slot {
                return Err(DecodeError::Inconsistent {
                    field,
                    offset,
                    reason: "a log is named twice",
                });
            }
            *slot = true;
        }
        Ok(())
    }

    fn hello(&mut self) -> Result<Hello, DecodeError> {
        let cluster_name = self.string("cluster name", NAME_BYTES_MAX)?;
        let broker_name = self.string("broker name", NAME_BYTES_MAX)?;
        let broker_id = self.u64("broker id")?;
        let format = StoreFormat {
            format_version: self.u32("format version")?,
            segment_bytes: self.u64("segment bytes")?,
        };
        let logs_at = self.at;
        let count = self.count("hello logs", LOGS_MAX)?;
        let mut logs = Vec::with_capacity(count);
        for _ in 0..count {
            let offset = self.at;
            let log = LogState {
                log_id: self.log_id("hello log")?,
                written: self.position("hello written")?,
                durable: self.position("hello durable")?,
                epochs: self.history("hello epochs")?,
            };
            if let Err(reason) = check_log_state(&log) {
                return Err(DecodeError::Inconsistent {
                    field: "hello log",
                    offset,
                    reason,
                });
            }
            logs.push(log);
        }
        Self::distinct("hello logs", logs_at, logs.iter().map(|log| log.log_id))?;
        Ok(Hello {
            cluster_name,
            broker_name,
            broker_id,
            format,
            logs,
        })
    }

    fn welcome(&mut self) -> Result<Welcome, DecodeError> {
        let master_logs_at = self.at;
        let count = self.count("master logs", LOGS_MAX)?;
        let mut master_logs = Vec::with_capacity(count);
        for _ in 0..count {
            master_logs.push(self.log_id("master log")?);
        }
        Self::distinct("master logs", master_logs_at, master_logs.iter().copied())?;
        let logs_at = self.at;
        let count = self.count("welcome logs", LOGS_MAX)?;
        let mut logs = Vec::with_capacity(count);
        for _ in 0..count {
            let log_id = self.log_id("welcome log")?;
            let kind_at = self.at;
            let answer = match self.u8("welcome answer")? {
                kind @ ANSWER_CONTINUE..=ANSWER_FULL_COPY => {
                    let position = self.position("welcome position")?;
                    let plan = match kind {
                        ANSWER_CONTINUE => ResumePlan::Continue { from: position },
                        ANSWER_TRUNCATE => ResumePlan::Truncate { to: position },
                        _ => ResumePlan::FullCopy { from: position },
                    };
                    let epochs = self.history("welcome epochs")?;
                    LogAnswer::Follow { plan, epochs }
                }
                ANSWER_REFUSED => LogAnswer::Refused(self.refusal()?),
                other => {
                    return Err(DecodeError::Code {
                        field: "welcome answer",
                        offset: kind_at,
                        value: other.into(),
                    })
                }
            };
            logs.push(LogWelcome { log_id, answer });
        }
        Self::distinct("welcome logs", logs_at, logs.iter().map(|log| log.log_id))?;
        Ok(Welcome { master_logs, logs })
    }

    fn refusal(&mut self) -> Result<LogRefusal, DecodeError> {
        let offset = self.at;
        match self.u16("refusal")? {
            REFUSAL_UNKNOWN_LOG => Ok(LogRefusal::UnknownLog),
            REFUSAL_SLAVE_NEWER_EPOCH => {
                let slave_epoch = self.u32("refusal slave epoch")?;
                let has_master_at = self.at;
                let has_master = self.u8("refusal has master epoch")?;
                let master_epoch = self.u32("refusal master epoch")?;
                let master_epoch = match has_master {
                    0 => None,
                    1 => Some(master_epoch),
                    other => {
                        return Err(DecodeError::Code {
                            field: "refusal has master epoch",
                            offset: has_master_at,
                            value: other.into(),
                        })
                    }
                };
                Ok(LogRefusal::SlaveNewerEpoch {
                    slave_epoch,
                    master_epoch,
                })
            }
            other => Err(DecodeError::Code {
                field: "refusal",
                offset,
                value: other.into(),
            }),
        }
    }

    fn finish(&self) -> Result<(), DecodeError> {
        if self.at != self.frame.len() {
            return Err(DecodeError::Trailing {
                offset: self.at,
                count: self.frame.len() - self.at,
            });
        }
        Ok(())
    }
}

/// A log's state must be possible: durable within written, every epoch starting within it.
fn check_log_state(log: &LogState) -> Result<(), &'static str> {
    if log.durable > log.written {
        return Err("durable end beyond written end");
    }
    if log
        .epochs
        .latest()
        .is_some_and(|latest| latest.start > log.written)
    {
        return Err("an epoch starts beyond the written end");
    }
    Ok(())
}

/// Appends `frame` to `dst`.
pub fn encode(frame: &Frame, dst: &mut BytesMut) -> Result<(), EncodeError> {
    if let Frame::Data(data) = frame {
        let head_at = dst.len();
        encode_data_head(data, dst)?;
        dst.extend_from_slice(&data.payload);
        debug_assert_eq!(dst.len() - head_at, data_frame_bytes(data));
        return Ok(());
    }
    let start = dst.len();
    dst.put_bytes(0, FRAME_HEADER_BYTES);
    let kind = match frame {
        Frame::Hello(hello) => {
            encode_hello(hello, dst)?;
            KIND_HELLO
        }
        Frame::Welcome(welcome) => {
            encode_welcome(welcome, dst)?;
            KIND_WELCOME
        }
        Frame::Data(_) => unreachable!("encoded above"),
        Frame::Ack(ack) => {
            put_log_id(dst, ack.log_id)?;
            put_position(dst, "ack written", ack.written)?;
            put_position(dst, "ack durable", ack.durable)?;
            put_position(dst, "ack confirm", ack.confirm)?;
            KIND_ACK
        }
        Frame::Heartbeat(heartbeat) => {
            put_log_id(dst, heartbeat.log_id)?;
            dst.put_u32(heartbeat.epoch);
            put_position(dst, "heartbeat written", heartbeat.written)?;
            put_position(dst, "heartbeat confirm", heartbeat.confirm)?;
            KIND_HEARTBEAT
        }
        Frame::Close(close) => {
            dst.put_u16(close.reason.code());
            put_string(dst, "close detail", &close.detail, CLOSE_DETAIL_BYTES_MAX)?;
            KIND_CLOSE
        }
    };
    let body_bytes = dst.len() - start - FRAME_HEADER_BYTES;
    assert!(
        body_bytes <= FRAME_BODY_BYTES_MAX,
        "limits keep every frame small"
    );
    let header = header(kind, body_bytes, &dst[start + FRAME_HEADER_BYTES..]);
    dst[start..start + FRAME_HEADER_BYTES].copy_from_slice(&header);
    Ok(())
}

/// Bytes of the whole Data frame for `data`.
pub fn data_frame_bytes(data: &Data) -> usize {
    FRAME_HEADER_BYTES + DATA_FIXED_BYTES + data.payload.len()
}

/// Appends everything of a Data frame but its payload to `dst`: the caller writes
/// `data.payload` right after it (a vectored write, no copy of the payload). The frame CRC
/// covers the payload, so this reads it once.
pub fn encode_data_head(data: &Data, dst: &mut BytesMut) -> Result<(), EncodeError> {
    if data.payload.len() > DATA_PAYLOAD_BYTES_MAX {
        return Err(EncodeError::Payload {
            bytes: data.payload.len(),
        });
    }
    check_log_id(data.log_id)?;
    check_position("data start", data.start)?;
    check_position("data confirm", data.confirm)?;
    let mut fixed = [0u8; DATA_FIXED_BYTES];
    fixed[0] = data.log_id;
    fixed[1..5].copy_from_slice(&data.epoch.to_be_bytes());
    fixed[5..13].copy_from_slice(&data.start.to_be_bytes());
    fixed[13..21].copy_from_slice(&data.confirm.to_be_bytes());
    fixed[21..25].copy_from_slice(&data.payload_crc.to_be_bytes());
    let body_bytes = DATA_FIXED_BYTES + data.payload.len();
    let mut header = header_without_crc(KIND_DATA, body_bytes);
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&header[..12]);
    hasher.update(&fixed);
    hasher.update(&data.payload);
    header[12..].copy_from_slice(&hasher.finalize().to_be_bytes());
    dst.extend_from_slice(&header);
    dst.extend_from_slice(&fixed);
    Ok(())
}

fn header_without_crc(kind: u8, body_bytes: usize) -> [u8; FRAME_HEADER_BYTES] {
    let mut header = [0u8; FRAME_HEADER_BYTES];
    header[..4].copy_from_slice(&MAGIC.to_be_bytes());
    header[4] = VERSION;
    header[5] = kind;
    let length = u32::try_from(body_bytes).expect("bodies are below FRAME_BODY_BYTES_MAX");
    header[8..12].copy_from_slice(&length.to_be_bytes());
    header
}

fn header(kind: u8, body_bytes: usize, body: &[u8]) -> [u8; FRAME_HEADER_BYTES] {
    let mut header = header_without_crc(kind, body_bytes);
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&header[..12]);
    hasher.update(body);
    header[12..].copy_from_slice(&hasher.finalize().to_be_bytes());
    header
}

fn check_log_id(log_id: u8) -> Result<(), EncodeError> {
    if log_id > LOG_ID_MAX {
        return Err(EncodeError::LogId { log_id });
    }
    Ok(())
}

fn check_position(field: &'static str, value: u64) -> Result<(), EncodeError> {
    if value > POSITION_MAX {
        return Err(EncodeError::Position { field, value });
    }
    Ok(())
}

fn put_log_id(dst: &mut BytesMut, log_id: u8) -> Result<(), EncodeError> {
    check_log_id(log_id)?;
    dst.put_u8(log_id);
    Ok(())
}

fn put_position(dst: &mut BytesMut, field: &'static str, value: u64) -> Result<(), EncodeError> {
    check_position(field, value)?;
    dst.put_u64(value);
    Ok(())
}

fn put_string(
    dst: &mut BytesMut,
    field: &'static str,
    text: &str,
    max: usize,
) -> Result<(), EncodeError> {
    if text.len() > max {
        return Err(EncodeError::TooLong {
            field,
            bytes: text.len(),
            max,
        });
    }
    dst.put_u16(u16::try_from(text.len()).expect("limits are below 64 KiB"));
    dst.put_slice(text.as_bytes());
    Ok(())
}

fn put_history(dst: &mut BytesMut, history: &EpochHistory) {
    let entries = history.entries();
    dst.put_u16(u16::try_from(entries.len()).expect("EPOCHS_MAX is below 64 Ki"));
    for entry in entries {
        dst.put_u32(entry.epoch);
        dst.put_u64(entry.start);
    }
}

fn put_log_count(
    dst: &mut BytesMut,
    field: &'static str,
    ids: impl Iterator<Item = u8> + Clone,
) -> Result<(), EncodeError> {
    let count = ids.clone().count();
    let mut seen = [false; LOGS_MAX];
    let distinct = ids.into_iter().all(|id| {
        let slot = seen.get_mut(usize::from(id));
        slot.is_some_and(|slot| !std::mem::replace(slot, true))
    });
    if count > LOGS_MAX || !distinct {
        return Err(EncodeError::Logs {
            field,
            count,
            max: LOGS_MAX,
        });
    }
    dst.put_u16(u16::try_from(count).expect("at most LOGS_MAX"));
    Ok(())
}

fn encode_hello(hello: &Hello, dst: &mut BytesMut) -> Result<(), EncodeError> {
    put_string(dst, "cluster name", &hello.cluster_name, NAME_BYTES_MAX)?;
    put_string(dst, "broker name", &hello.broker_name, NAME_BYTES_MAX)?;
    dst.put_u64(hello.broker_id);
    dst.put_u32(hello.format.format_version);
    dst.put_u64(hello.format.segment_bytes);
    put_log_count(dst, "hello logs", hello.logs.iter().map(|log| log.log_id))?;
    for log in &hello.logs {
        put_log_id(dst, log.log_id)?;
        put_position(dst, "hello written", log.written)?;
        put_position(dst, "hello durable", log.durable)?;
        check_log_state(log).map_err(|reason| EncodeError::LogState {
            log_id: log.log_id,
            reason,
        })?;
        put_history(dst, &log.epochs);
    }
    Ok(())
}

fn encode_welcome(welcome: &Welcome, dst: &mut BytesMut) -> Result<(), EncodeError> {
    put_log_count(dst, "master logs", welcome.master_logs.iter().copied())?;
    for &log_id in &welcome.master_logs {
        put_log_id(dst, log_id)?;
    }
    put_log_count(
        dst,
        "welcome logs",
        welcome.logs.iter().map(|log| log.log_id),
    )?;
    for log in &welcome.logs {
        put_log_id(dst, log.log_id)?;
        match &log.answer {
            LogAnswer::Follow { plan, epochs } => {
                let kind = match plan {
                    ResumePlan::Continue { .. } => ANSWER_CONTINUE,
                    ResumePlan::Truncate { .. } => ANSWER_TRUNCATE,
                    ResumePlan::FullCopy { .. } => ANSWER_FULL_COPY,
                };
                dst.put_u8(kind);
                put_position(dst, "welcome position", plan.position())?;
                put_history(dst, epochs);
            }
            LogAnswer::Refused(refusal) => {
                dst.put_u8(ANSWER_REFUSED);
                match *refusal {
                    LogRefusal::UnknownLog => dst.put_u16(REFUSAL_UNKNOWN_LOG),
                    LogRefusal::SlaveNewerEpoch {
                        slave_epoch,
                        master_epoch,
                    } => {
                        dst.put_u16(REFUSAL_SLAVE_NEWER_EPOCH);
                        dst.put_u32(slave_epoch);
                        dst.put_u8(u8::from(master_epoch.is_some()));
                        dst.put_u32(master_epoch.unwrap_or(0));
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn encoded(frame: &Frame) -> BytesMut {
        let mut dst = BytesMut::new();
        encode(frame, &mut dst).expect("encodable");
        dst
    }

    fn sample_hello() -> Hello {
        let mut epochs = EpochHistory::new();
        epochs.begin(1, 0).expect("first");
        epochs.begin(3, 4096).expect("second");
        Hello {
            cluster_name: "DefaultCluster".into(),
            broker_name: "broker-a".into(),
            broker_id: 1,
            format: StoreFormat {
                format_version: 1,
                segment_bytes: 1 << 30,
            },
            logs: vec![LogState {
                log_id: 2,
                written: 5000,
                durable: 4500,
                epochs,
            }],
        }
    }

    // Proves the header layout byte for byte, so the README's table stays true.
    #[test]
    fn header_layout() {
        let frame = encoded(&Frame::Ack(Ack {
            log_id: 3,
            written: 10,
            durable: 9,
            confirm: 8,
        }));
        assert_eq!(&frame[..4], b"CMTR");
        assert_eq!(frame[4], VERSION);
        assert_eq!(frame[5], KIND_ACK);
        assert_eq!(&frame[6..8], &[0, 0]);
        assert_eq!(&frame[8..12], &25u32.to_be_bytes());
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(&frame[..12]);
        hasher.update(&frame[16..]);
        assert_eq!(&frame[12..16], &hasher.finalize().to_be_bytes());
        assert_eq!(frame[16], 3);
        assert_eq!(frame.len(), 16 + 25);
    }

    // Proves the incremental decoder waits on every short prefix, then yields the frame
    // and leaves the next frame's bytes in the buffer.
    #[test]
    fn incremental_decoding() {
        let hello = Frame::Hello(sample_hello());
        let mut stream = encoded(&hello);
        let first_len = stream.len();
        stream.extend_from_slice(&encoded(&Frame::Close(Close::new(
            CloseReason::Shutdown,
            "bye",
        ))));
        for cut in 0..first_len {
            assert!(
                matches!(buffered(&stream[..cut]), Ok(Buffered::Incomplete { .. })),
                "prefix of {cut} bytes"
            );
            let mut partial = BytesMut::from(&stream[..cut]);
            assert_eq!(decode(&mut partial), Ok(None));
            assert_eq!(partial.len(), cut, "nothing consumed");
        }
        assert_eq!(decode(&mut stream), Ok(Some(hello)));
        assert!(matches!(decode(&mut stream), Ok(Some(Frame::Close(_)))));
        assert!(stream.is_empty());
    }

    // Proves a stranger's bytes are refused from the first byte that differs, and each
    // header field is checked before any body is awaited.
    #[test]
    fn header_refusals() {
        assert!(matches!(
            buffered(b"GET / HTTP/1.1"),
            Err(DecodeError::Magic { .. })
        ));
        assert!(matches!(buffered(b"CX"), Err(DecodeError::Magic { .. })));
        assert_eq!(
            buffered(b"CMTR\x09"),
            Err(DecodeError::Version { found: 9 })
        );
        assert_eq!(
            buffered(b"CMTR\x02\x07"),
            Err(DecodeError::Kind { found: 7 })
        );
        assert!(matches!(
            buffered(b"CMTR\x02\x03\x00\x00\xff\xff\xff\xff"),
            Err(DecodeError::TooLong { .. })
        ));
        assert_eq!(
            buffered(b"CM"),
            Ok(Buffered::Incomplete {
                needed: 16,
                available: 2
            })
        );
        let good = encoded(&Frame::Ack(Ack {
            log_id: 0,
            written: 0,
            durable: 0,
            confirm: 0,
        }));
        let mut bad = good.clone();
        bad[4] = 1;
        assert_eq!(buffered(&bad), Err(DecodeError::Version { found: 1 }));
        let mut bad = good.clone();
        bad[5] = 9;
        assert_eq!(buffered(&bad), Err(DecodeError::Kind { found: 9 }));
        let mut bad = good.clone();
        bad[7] = 1;
        assert_eq!(buffered(&bad), Err(DecodeError::Reserved { found: 1 }));
        let mut bad = good.clone();
        bad[8..12].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(matches!(
            buffered(&bad[..16]),
            Err(DecodeError::TooLong { .. })
        ));
        let mut bad = good.clone();
        bad[20] ^= 1;
        assert!(matches!(
            decode_frame(bad.freeze()),
            Err(DecodeError::Crc { .. })
        ));
    }

    /// Re-frames `body` as a frame of `kind` with a correct CRC, to test body checks.
    fn framed(kind: u8, body: &[u8]) -> Bytes {
        let mut frame = BytesMut::from(&header(kind, body.len(), body)[..]);
        frame.extend_from_slice(body);
        frame.freeze()
    }

    // Proves body checks: positions and log ids within limits, histories valid, durable not
    // past written, no log twice, no trailing bytes, a short field says where and how much.
    #[test]
    fn body_refusals() {
        let mut body = vec![3u8];
        body.extend((POSITION_MAX + 1).to_be_bytes());
        body.extend(0u64.to_be_bytes());
        assert!(matches!(
            decode_frame(framed(KIND_ACK, &body)),
            Err(DecodeError::OutOfRange {
                field: "ack written",
                offset: 17,
                ..
            })
        ));
        let mut body = vec![200u8];
        body.extend([0u8; 16]);
        assert!(matches!(
            decode_frame(framed(KIND_ACK, &body)),
            Err(DecodeError::OutOfRange {
                field: "ack log",
                ..
            })
        ));
        assert_eq!(
            decode_frame(framed(KIND_ACK, &[1, 0, 0])),
            Err(DecodeError::Truncated {
                field: "ack written",
                offset: 17,
                needed: 8,
                available: 2
            })
        );
        let mut body = vec![1u8];
        body.extend([0u8; 25]);
        assert!(matches!(
            decode_frame(framed(KIND_ACK, &body)),
            Err(DecodeError::Trailing {
                offset: 41,
                count: 1
            })
        ));

        let mut hello = sample_hello();
        hello.logs[0].durable = 6000;
        let mut dst = BytesMut::new();
        assert!(matches!(
            encode(&Frame::Hello(hello.clone()), &mut dst),
            Err(EncodeError::LogState { .. })
        ));
        // The same state forged past the encoder's check.
        let honest = encoded(&Frame::Hello(sample_hello()));
        let mut body = honest[16..].to_vec();
        let durable_at = body.len() - 2 - 2 * 12 - 8;
        body[durable_at..durable_at + 8].copy_from_slice(&6000u64.to_be_bytes());
        assert!(matches!(
            decode_frame(framed(KIND_HELLO, &body)),
            Err(DecodeError::Inconsistent {
                field: "hello log",
                ..
            })
        ));
        let mut body = honest[16..].to_vec();
        let second_epoch_at = body.len() - 12;
        body[second_epoch_at..second_epoch_at + 4].copy_from_slice(&1u32.to_be_bytes());
        assert!(matches!(
            decode_frame(framed(KIND_HELLO, &body)),
            Err(DecodeError::History { .. })
        ));
        let mut twice = sample_hello();
        twice.logs.push(twice.logs[0].clone());
        assert!(matches!(
            encode(&Frame::Hello(twice), &mut dst),
            Err(EncodeError::Logs { .. })
        ));
        let mut bad_utf8 = vec![0u8, 2, 0xFF, 0xFE];
        bad_utf8.extend([0u8; 40]);
        assert!(matches!(
            decode_frame(framed(KIND_HELLO, &bad_utf8)),
            Err(DecodeError::Utf8 { .. })
        ));
    }

    // Proves a Data frame's head plus its payload written separately is the same frame as
    // the one-piece encoding, and that decoding gives the payload back without a copy.
    #[test]
    fn data_head_and_payload() {
        let data = Data::new(5, 2, 4096, 4000, Bytes::from_static(b"records"));
        let whole = encoded(&Frame::Data(data.clone()));
        let mut head = BytesMut::new();
        encode_data_head(&data, &mut head).expect("encodable");
        head.extend_from_slice(&data.payload);
        assert_eq!(whole, head);
        assert_eq!(whole.len(), data_frame_bytes(&data));
        let frame = whole.freeze();
        let Ok(Frame::Data(decoded)) = decode_frame(frame.clone()) else {
            panic!("a data frame");
        };
        assert_eq!(decoded, data);
        assert_eq!(decoded.payload.as_ptr(), frame[41..].as_ptr());
        let too_big = Data::new(
            0,
            0,
            0,
            0,
            Bytes::from(vec![0u8; DATA_PAYLOAD_BYTES_MAX + 1]),
        );
        assert!(matches!(
            encode_data_head(&too_big, &mut BytesMut::new()),
            Err(EncodeError::Payload { .. })
        ));
    }

    // Proves Close details are cut on a character boundary and unknown reasons survive.
    #[test]
    fn close_detail_and_reasons() {
        let close = Close::new(CloseReason::Malformed, "é".repeat(CLOSE_DETAIL_BYTES_MAX));
        assert!(close.detail.len() <= CLOSE_DETAIL_BYTES_MAX);
        let frame = Frame::Close(close);
        assert_eq!(decode_frame(encoded(&frame).freeze()), Ok(frame));
        for code in 0..20 {
            assert_eq!(CloseReason::from_code(code).code(), code);
        }
    }

    fn history_strategy() -> impl Strategy<Value = EpochHistory> {
        proptest::collection::btree_map(any::<u32>(), 0..POSITION_MAX, 0..5).prop_map(|map| {
            let mut starts: Vec<u64> = map.values().copied().collect();
            starts.sort_unstable();
            starts.dedup();
            let entries = map
                .keys()
                .zip(starts)
                .map(|(&epoch, start)| EpochStart { epoch, start })
                .collect();
            EpochHistory::from_entries(entries).expect("increasing")
        })
    }

    fn log_ids() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::btree_set(0..=LOG_ID_MAX, 0..4)
            .prop_map(|ids| ids.into_iter().collect())
    }

    fn plan_strategy() -> impl Strategy<Value = ResumePlan> {
        (0u8..3, 0..=POSITION_MAX).prop_map(|(kind, position)| match kind {
            0 => ResumePlan::Continue { from: position },
            1 => ResumePlan::Truncate { to: position },
            _ => ResumePlan::FullCopy { from: position },
        })
    }

    fn answer_strategy() -> impl Strategy<Value = LogAnswer> {
        prop_oneof![
            (plan_strategy(), history_strategy())
                .prop_map(|(plan, epochs)| LogAnswer::Follow { plan, epochs }),
            Just(LogAnswer::Refused(LogRefusal::UnknownLog)),
            (any::<u32>(), any::<Option<u32>>()).prop_map(|(slave_epoch, master_epoch)| {
                LogAnswer::Refused(LogRefusal::SlaveNewerEpoch {
                    slave_epoch,
                    master_epoch,
                })
            }),
        ]
    }

    fn frame_strategy() -> impl Strategy<Value = Frame> {
        let position = 0..=POSITION_MAX;
        let log = 0..=LOG_ID_MAX;
        prop_oneof![
            (
                "[a-zA-Z0-9_-]{0,20}",
                "\\PC{0,20}",
                any::<u64>(),
                any::<u32>(),
                any::<u64>(),
                log_ids(),
                proptest::collection::vec((position.clone(), history_strategy()), 4),
                any::<u64>(),
            )
                .prop_map(
                    |(cluster, broker, id, version, segment, ids, states, durable_seed)| {
                        let logs = ids
                            .into_iter()
                            .zip(states)
                            .map(|(log_id, (written, epochs))| {
                                let written =
                                    written.max(epochs.latest().map_or(0, |latest| latest.start));
                                LogState {
                                    log_id,
                                    written,
                                    durable: durable_seed % (written + 1),
                                    epochs,
                                }
                            })
                            .collect();
                        Frame::Hello(Hello {
                            cluster_name: cluster,
                            broker_name: broker,
                            broker_id: id,
                            format: StoreFormat {
                                format_version: version,
                                segment_bytes: segment,
                            },
                            logs,
                        })
                    }
                ),
            (
                log_ids(),
                log_ids(),
                proptest::collection::vec(answer_strategy(), 4)
            )
                .prop_map(|(master_logs, ids, answers)| Frame::Welcome(Welcome {
                    master_logs,
                    logs: ids
                        .into_iter()
                        .zip(answers)
                        .map(|(log_id, answer)| LogWelcome { log_id, answer })
                        .collect(),
                })),
            (
                log.clone(),
                any::<u32>(),
                position.clone(),
                position.clone(),
                proptest::collection::vec(any::<u8>(), 0..300)
            )
                .prop_map(|(log_id, epoch, start, confirm, payload)| {
                    Frame::Data(Data::new(log_id, epoch, start, confirm, payload.into()))
                }),
            (
                log.clone(),
                position.clone(),
                position.clone(),
                position.clone()
            )
                .prop_map(|(log_id, written, durable, confirm)| Frame::Ack(Ack {
                    log_id,
                    written,
                    durable,
                    confirm,
                })),
            (log, any::<u32>(), position.clone(), position).prop_map(
                |(log_id, epoch, written, confirm)| Frame::Heartbeat(Heartbeat {
                    log_id,
                    epoch,
                    written,
                    confirm
                })
            ),
            (any::<u16>(), "\\PC{0,40}").prop_map(|(code, detail)| Frame::Close(Close::new(
                CloseReason::from_code(code),
                detail
            ))),
        ]
    }

    proptest! {
        // Proves any valid frame survives encode then decode unchanged.
        #[test]
        fn round_trip(frame in frame_strategy()) {
            let mut dst = encoded(&frame);
            prop_assert_eq!(decode(&mut dst), Ok(Some(frame)));
            prop_assert!(dst.is_empty());
        }

        // Proves decoding arbitrary bytes never panics, whether they start like a frame or
        // not, and that an answer other than "wait" consumes only what it reports.
        #[test]
        fn arbitrary_bytes_never_panic(
            noise in proptest::collection::vec(any::<u8>(), 0..400),
            kind in 0u8..8,
            with_header in any::<bool>(),
        ) {
            let bytes = if with_header {
                // A valid header (right CRC) over a random body exercises the body parsers.
                framed(kind, &noise).to_vec()
            } else {
                noise
            };
            let mut buffer = BytesMut::from(&bytes[..]);
            let _ = decode(&mut buffer);
            let _ = decode_frame(Bytes::from(bytes));
        }

        // Proves flipping any one byte of a valid frame is caught (CRC or header checks).
        #[test]
        fn any_flip_is_caught(frame in frame_strategy(), at in any::<prop::sample::Index>(),
                              flip in 1u8..=255) {
            let mut bytes = encoded(&frame);
            let at = at.index(bytes.len());
            bytes[at] ^= flip;
            if let Ok(Some(decoded)) = decode(&mut bytes) {
                prop_assert!(false, "flip at {} decoded: {:?}", at, decoded);
            }
        }
    }
}
