//! The stored-message record (docs/protocol.md#stored-message-record): the commit-log format, also
//! the format of pull, query and view bodies.
//!
//! All integers big-endian. Positions below are for IPv4 hosts; each IPv6 host (sysflag bit 4
//! for the born host, bit 5 for the store host) takes 20 bytes instead of 8 and shifts every
//! later field by 12.
//!
//! ```text
//!  0 TOTALSIZE i32          whole record, this field included
//!  4 MAGICCODE i32          V1 0xDAA320A7 (1-byte topic length), V2 0xDAA320AB (2-byte)
//!  8 BODYCRC i32            CRC-32/IEEE of the stored body, & 0x7FFFFFFF
//! 12 QUEUEID i32
//! 16 FLAG i32               application flag
//! 20 QUEUEOFFSET i64        consume-queue offset  (patched: QUEUE_OFFSET_POSITION)
//! 28 PHYSICALOFFSET i64     commit-log offset     (patched: PHYSICAL_OFFSET_POSITION)
//! 36 SYSFLAG i32
//! 40 BORNTIMESTAMP i64
//! 48 BORNHOST               ip (4|16) + port i32
//! 56 STORETIMESTAMP i64     (store_timestamp_position)
//! 64 STOREHOST              ip (4|16) + port i32
//! 72 RECONSUMETIMES i32
//! 76 PREPAREDTRANSACTIONOFFSET i64
//! 84 BODYLENGTH i32
//! 88 BODY
//!    TOPICLENGTH            V1: i8 (so at most 127), V2: i16
//!    TOPIC                  UTF-8
//!    PROPERTIESLENGTH i16   at most 32767
//!    PROPERTIES             UTF-8 properties string
//! ```
//!
//! Invariants a [`RecordView`] guarantees once parsed: the magic is V1 or V2, TOTALSIZE fits
//! the input and equals [`record_length`] of the inner lengths, every length is non-negative
//! and its bytes lie inside the record, both ports are in 0..=65535, topic and properties are
//! UTF-8. Every accessor is then an in-bounds read: parsing allocates nothing.
//!
//! The 8-byte end-of-file marker of commit-log files (docs/protocol.md#commit-log-format) is
//! `maxBlank` then [`BLANK_MAGIC`]; scanners find it with [`peek_total_size_and_magic`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::ops::Range;

use bytes::{BufMut, Bytes, BytesMut};
use thiserror::Error;

use crate::compression::{self, CompressionError, CompressionType};
use crate::flags::message::{host_bytes, BORN_HOST_V6, COMPRESSED, STORE_HOST_V6};
use crate::limits::{
    DECOMPRESSED_BODY_BYTES_MAX_DEFAULT, PROPERTIES_BYTES_MAX, TOPIC_BYTES_MAX, TOPIC_BYTES_MAX_V1,
};
use crate::message_id::encode_offset_msg_id;
use crate::properties::{self, names, Properties};

/// Magic of a V1 record (1-byte topic length): `0xDAA320A7`.
pub const MAGIC_V1: i32 = 0xDAA3_20A7_u32 as i32;
/// Magic of a V2 record (2-byte topic length): `0xDAA320AB`.
pub const MAGIC_V2: i32 = 0xDAA3_20AB_u32 as i32;
/// Magic of the end-of-file blank marker: `0xCBD43194`.
pub const BLANK_MAGIC: i32 = 0xCBD4_3194_u32 as i32;
/// Bytes of the end-of-file blank marker (`maxBlank` i32 + magic).
pub const BLANK_MARKER_BYTES: usize = 8;

/// Position of QUEUEOFFSET, for patching at append time.
pub const QUEUE_OFFSET_POSITION: usize = 20;
/// Position of PHYSICALOFFSET, for patching at append time.
pub const PHYSICAL_OFFSET_POSITION: usize = 28;
/// Position of SYSFLAG.
pub const SYSFLAG_POSITION: usize = 36;
/// Position of BODYCRC.
pub const BODY_CRC_POSITION: usize = 8;
const BORN_TIMESTAMP_POSITION: usize = 40;
const BORN_HOST_POSITION: usize = 48;

/// Smallest possible record: IPv4 hosts, V1, empty body, topic and properties.
pub const RECORD_BYTES_MIN: usize = 91;

/// Position of STORETIMESTAMP, which follows the born host.
pub const fn store_timestamp_position(sysflag: i32) -> usize {
    BORN_HOST_POSITION + host_bytes(sysflag, BORN_HOST_V6)
}

const fn store_host_position(sysflag: i32) -> usize {
    store_timestamp_position(sysflag) + 8
}

const fn reconsume_times_position(sysflag: i32) -> usize {
    store_host_position(sysflag) + host_bytes(sysflag, STORE_HOST_V6)
}

/// Length of a record (Java `calMsgLength`); must equal its TOTALSIZE.
pub fn record_length(
    sysflag: i32,
    body_len: usize,
    topic_len: usize,
    properties_len: usize,
    magic_v2: bool,
) -> usize {
    let topic_length_bytes = if magic_v2 { 2 } else { 1 };
    reconsume_times_position(sysflag)
        + 4
        + 8
        + 4
        + body_len
        + topic_length_bytes
        + topic_len
        + 2
        + properties_len
}

/// The masked body CRC stored in BODYCRC (docs/protocol.md#masked-body-crc).
pub fn body_crc(body: &[u8]) -> i32 {
    let masked = crc32fast::hash(body) & 0x7FFF_FFFF;
    i32::try_from(masked).expect("masked CRC fits i32")
}

/// A record or batch that cannot be encoded or decoded.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum RecordError {
    /// A field runs past the end of the input or record.
    #[error("truncated {what} at offset {offset}: need {need} bytes, have {have}")]
    Truncated {
        /// The field being read.
        what: &'static str,
        /// Offset of the field within the record.
        offset: usize,
        /// Bytes the field needs from `offset`.
        need: usize,
        /// Bytes available from `offset`.
        have: usize,
    },
    /// A length field is negative or otherwise impossible.
    #[error("invalid {what} length {length} at offset {offset}")]
    LengthInvalid {
        /// The length's meaning.
        what: &'static str,
        /// Offset of the length field.
        offset: usize,
        /// The value read.
        length: i64,
    },
    /// Neither a V1 nor a V2 record magic.
    #[error("unknown record magic {magic:#010x}")]
    MagicUnknown {
        /// The value read (printed as its bit pattern).
        magic: i32,
    },
    /// The end-of-file blank marker: the rest of this commit-log file holds no record.
    #[error("end-of-file blank marker covering {blank_bytes} bytes")]
    Blank {
        /// The marker's `maxBlank` value.
        blank_bytes: i32,
    },
    /// TOTALSIZE disagrees with the sum of the inner lengths.
    #[error("total size {total_size} does not match the {computed} bytes of its fields")]
    TotalSizeMismatch {
        /// TOTALSIZE as stored.
        total_size: usize,
        /// What the inner lengths add up to.
        computed: usize,
    },
    /// A value exceeds what the format can carry.
    #[error("{what} of {length} bytes exceeds the maximum of {max}")]
    TooLong {
        /// The field.
        what: &'static str,
        /// Its length.
        length: usize,
        /// The maximum.
        max: usize,
    },
    /// A host port outside 0..=65535.
    #[error("{what} port {port} is out of range")]
    Port {
        /// Which host.
        what: &'static str,
        /// The value read.
        port: i32,
    },
    /// Topic or properties bytes that are not UTF-8.
    #[error("{what} at offset {offset} is not valid UTF-8")]
    Utf8 {
        /// The field.
        what: &'static str,
        /// Its offset within the record.
        offset: usize,
    },
    /// The body could not be decompressed.
    #[error("body: {0}")]
    Compression(#[from] CompressionError),
}

/// What a broker knows about a message before appending it.
#[derive(Clone, Copy, Debug)]
pub struct RecordSpec<'a> {
    /// Topic name, at most 255 bytes (more than 127 needs the V2 magic).
    pub topic: &'a str,
    /// Queue id.
    pub queue_id: i32,
    /// Application flag.
    pub flag: i32,
    /// Message sysflag; the IPv6 bits are recomputed from the addresses (see [`stored_ip`]).
    pub sysflag: i32,
    /// Producer wall clock, ms.
    pub born_timestamp: i64,
    /// The producer's address.
    pub born_host: SocketAddr,
    /// The broker's `brokerIP1:listenPort`.
    pub store_host: SocketAddr,
    /// Delivery attempts so far.
    pub reconsume_times: i32,
    /// Half-message commit-log offset for committed transaction messages, else 0.
    pub prepared_transaction_offset: i64,
    /// Stored body (possibly compressed).
    pub body: &'a [u8],
    /// Encoded properties string.
    pub properties: &'a str,
}

impl RecordSpec<'_> {
    /// The sysflag with the host bits set from the addresses, as it will be stored.
    pub fn stored_sysflag(&self) -> i32 {
        let mut sysflag = self.sysflag & !(BORN_HOST_V6 | STORE_HOST_V6);
        if stored_ip(self.born_host).is_ipv6() {
            sysflag |= BORN_HOST_V6;
        }
        if stored_ip(self.store_host).is_ipv6() {
            sysflag |= STORE_HOST_V6;
        }
        sysflag
    }

    /// True when the topic needs the V2 magic (more than 127 bytes).
    pub fn needs_magic_v2(&self) -> bool {
        self.topic.len() > TOPIC_BYTES_MAX_V1
    }

    /// The encoded length, or why this message cannot be encoded.
    pub fn encoded_length(&self) -> Result<usize, RecordError> {
        if self.topic.len() > TOPIC_BYTES_MAX {
            return Err(RecordError::TooLong {
                what: "topic",
                length: self.topic.len(),
                max: TOPIC_BYTES_MAX,
            });
        }
        if self.properties.len() > PROPERTIES_BYTES_MAX {
            return Err(RecordError::TooLong {
                what: "properties",
                length: self.properties.len(),
                max: PROPERTIES_BYTES_MAX,
            });
        }
        let length = record_length(
            self.stored_sysflag(),
            self.body.len(),
            self.topic.len(),
            self.properties.len(),
            self.needs_magic_v2(),
        );
        if length > i32::MAX as usize {
            return Err(RecordError::TooLong {
                what: "record",
                length,
                max: i32::MAX as usize,
            });
        }
        Ok(length)
    }
}

/// The address as a record stores it: an IPv4-mapped IPv6 address (what a dual-stack socket
/// reports for an IPv4 peer) is stored as IPv4, as Java's `InetAddress` would see it.
pub fn stored_ip(host: SocketAddr) -> IpAddr {
    host.ip().to_canonical()
}

fn put_host(dst: &mut BytesMut, host: SocketAddr) {
    match stored_ip(host) {
        IpAddr::V4(ip) => dst.put_slice(&ip.octets()),
        IpAddr::V6(ip) => dst.put_slice(&ip.octets()),
    }
    dst.put_i32(i32::from(host.port()));
}

/// Appends one record to `dst` and returns its length. The body CRC is computed here; the
/// offsets and store timestamp are written as given (a store may patch them in place later).
pub fn encode_record(
    spec: &RecordSpec<'_>,
    queue_offset: i64,
    physical_offset: i64,
    store_timestamp: i64,
    dst: &mut BytesMut,
) -> Result<usize, RecordError> {
    let total = spec.encoded_length()?;
    let sysflag = spec.stored_sysflag();
    let magic_v2 = spec.needs_magic_v2();
    let start = dst.len();
    dst.reserve(total);
    dst.put_i32(i32::try_from(total).expect("checked by encoded_length"));
    dst.put_i32(if magic_v2 { MAGIC_V2 } else { MAGIC_V1 });
    dst.put_i32(body_crc(spec.body));
    dst.put_i32(spec.queue_id);
    dst.put_i32(spec.flag);
    dst.put_i64(queue_offset);
    dst.put_i64(physical_offset);
    dst.put_i32(sysflag);
    dst.put_i64(spec.born_timestamp);
    put_host(dst, spec.born_host);
    dst.put_i64(store_timestamp);
    put_host(dst, spec.store_host);
    dst.put_i32(spec.reconsume_times);
    dst.put_i64(spec.prepared_transaction_offset);
    dst.put_i32(i32::try_from(spec.body.len()).expect("checked by encoded_length"));
    dst.put_slice(spec.body);
    if magic_v2 {
        dst.put_i16(i16::try_from(spec.topic.len()).expect("topic <= 255"));
    } else {
        dst.put_i8(i8::try_from(spec.topic.len()).expect("topic <= 127"));
    }
    dst.put_slice(spec.topic.as_bytes());
    dst.put_i16(i16::try_from(spec.properties.len()).expect("checked by encoded_length"));
    dst.put_slice(spec.properties.as_bytes());
    assert_eq!(
        dst.len() - start,
        total,
        "record length disagrees with record_length"
    );
    Ok(total)
}

/// The first two words of a record or blank marker: (TOTALSIZE or `maxBlank`, magic), or
/// `None` when fewer than 8 bytes are given.
pub fn peek_total_size_and_magic(bytes: &[u8]) -> Option<(i32, i32)> {
    let total = i32::from_be_bytes(bytes.get(0..4)?.try_into().ok()?);
    let magic = i32::from_be_bytes(bytes.get(4..8)?.try_into().ok()?);
    Some((total, magic))
}

fn truncated(what: &'static str, offset: usize, need: usize, limit: usize) -> RecordError {
    RecordError::Truncated {
        what,
        offset,
        need,
        have: limit.saturating_sub(offset),
    }
}

/// Reads a big-endian i32 at `at`, or says which field was cut short.
fn checked_i32(record: &[u8], at: usize, what: &'static str) -> Result<i32, RecordError> {
    match record.get(at..at + 4) {
        Some(word) => Ok(i32::from_be_bytes(word.try_into().expect("4 bytes"))),
        None => Err(truncated(what, at, 4, record.len())),
    }
}

fn read_i32(record: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(record[at..at + 4].try_into().expect("validated by parse"))
}

fn read_i64(record: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(record[at..at + 8].try_into().expect("validated by parse"))
}

/// Reads a host at `at` whose address is 4 or 16 bytes (`host_len` 8 or 20).
fn read_host(record: &[u8], at: usize, host_len: usize) -> SocketAddr {
    let ip = if host_len == 8 {
        let octets: [u8; 4] = record[at..at + 4].try_into().expect("validated by parse");
        IpAddr::V4(Ipv4Addr::from(octets))
    } else {
        let octets: [u8; 16] = record[at..at + 16].try_into().expect("validated by parse");
        IpAddr::V6(Ipv6Addr::from(octets))
    };
    let port = read_i32(record, at + host_len - 4);
    SocketAddr::new(ip, u16::try_from(port).expect("port validated by parse"))
}

fn check_port(
    record: &[u8],
    at: usize,
    host_len: usize,
    what: &'static str,
) -> Result<(), RecordError> {
    let port = read_i32(record, at + host_len - 4);
    if u16::try_from(port).is_err() {
        return Err(RecordError::Port { what, port });
    }
    Ok(())
}

/// A validated, borrowed view of one record. See the module docs for what parsing checks.
#[derive(Clone, Copy, Debug)]
pub struct RecordView<'a> {
    record: &'a [u8],
    sysflag: i32,
    body_start: usize,
    body_len: usize,
    topic: &'a str,
    topic_start: usize,
    properties: &'a str,
}

impl<'a> RecordView<'a> {
    /// Parses the record at the start of `bytes`, which may continue with more records; the
    /// view covers exactly TOTALSIZE bytes. A blank marker gives [`RecordError::Blank`].
    pub fn parse(bytes: &'a [u8]) -> Result<RecordView<'a>, RecordError> {
        let total_size = checked_i32(bytes, 0, "total size")?;
        let magic = checked_i32(bytes, 4, "magic")?;
        let magic_v2 = match magic {
            MAGIC_V1 => false,
            MAGIC_V2 => true,
            BLANK_MAGIC => {
                return Err(RecordError::Blank {
                    blank_bytes: total_size,
                })
            }
            other => return Err(RecordError::MagicUnknown { magic: other }),
        };
        let total = usize::try_from(total_size)
            .ok()
            .filter(|total| *total >= RECORD_BYTES_MIN)
            .ok_or(RecordError::LengthInvalid {
                what: "total size",
                offset: 0,
                length: total_size.into(),
            })?;
        if total > bytes.len() {
            return Err(truncated("record", 0, total, bytes.len()));
        }
        Self::parse_fields(&bytes[..total], magic_v2)
    }

    /// Parses the fields of exactly one record whose TOTALSIZE equals `record.len()`.
    fn parse_fields(record: &'a [u8], magic_v2: bool) -> Result<RecordView<'a>, RecordError> {
        let total = record.len();
        assert!(total >= RECORD_BYTES_MIN);
        let sysflag = read_i32(record, SYSFLAG_POSITION);
        let born_host_len = host_bytes(sysflag, BORN_HOST_V6);
        let store_host_len = host_bytes(sysflag, STORE_HOST_V6);
        let body_length_at = reconsume_times_position(sysflag) + 12;
        let body_len_raw = checked_i32(record, body_length_at, "body length")?;
        let body_start = body_length_at + 4;
        let body_len = usize::try_from(body_len_raw).map_err(|_| RecordError::LengthInvalid {
            what: "body",
            offset: body_length_at,
            length: body_len_raw.into(),
        })?;
        let topic_length_at = body_start
            .checked_add(body_len)
            .filter(|end| *end <= total)
            .ok_or_else(|| truncated("body", body_start, body_len, total))?;
        let (topic_len, topic_start) = read_topic_length(record, topic_length_at, magic_v2)?;
        let properties_length_at = topic_start + topic_len;
        let properties_len_raw = read_i16(record, properties_length_at, "properties length")?;
        let properties_start = properties_length_at + 2;
        let properties_len =
            usize::try_from(properties_len_raw).map_err(|_| RecordError::LengthInvalid {
                what: "properties",
                offset: properties_length_at,
                length: properties_len_raw.into(),
            })?;
        let computed = properties_start + properties_len;
        if computed != total {
            return Err(RecordError::TotalSizeMismatch {
                total_size: total,
                computed,
            });
        }
        assert_eq!(
            computed,
            record_length(sysflag, body_len, topic_len, properties_len, magic_v2)
        );
        check_port(record, BORN_HOST_POSITION, born_host_len, "born host")?;
        check_port(
            record,
            store_host_position(sysflag),
            store_host_len,
            "store host",
        )?;
        let topic = utf8(record, topic_start, topic_len, "topic")?;
        let properties = utf8(record, properties_start, properties_len, "properties")?;
        Ok(RecordView {
            record,
            sysflag,
            body_start,
            body_len,
            topic,
            topic_start,
            properties,
        })
    }

    /// The record's bytes (TOTALSIZE of them).
    pub fn bytes(&self) -> &'a [u8] {
        self.record
    }
    /// TOTALSIZE.
    pub fn total_size(&self) -> usize {
        self.record.len()
    }
    /// MAGICCODE: [`MAGIC_V1`] or [`MAGIC_V2`].
    pub fn magic(&self) -> i32 {
        read_i32(self.record, 4)
    }
    /// BODYCRC as stored.
    pub fn body_crc(&self) -> i32 {
        read_i32(self.record, BODY_CRC_POSITION)
    }
    /// True when BODYCRC matches the body bytes.
    pub fn body_crc_matches(&self) -> bool {
        body_crc(self.body()) == self.body_crc()
    }
    /// QUEUEID.
    pub fn queue_id(&self) -> i32 {
        read_i32(self.record, 12)
    }
    /// FLAG.
    pub fn flag(&self) -> i32 {
        read_i32(self.record, 16)
    }
    /// QUEUEOFFSET.
    pub fn queue_offset(&self) -> i64 {
        read_i64(self.record, QUEUE_OFFSET_POSITION)
    }
    /// PHYSICALOFFSET.
    pub fn physical_offset(&self) -> i64 {
        read_i64(self.record, PHYSICAL_OFFSET_POSITION)
    }
    /// SYSFLAG.
    pub fn sysflag(&self) -> i32 {
        self.sysflag
    }
    /// BORNTIMESTAMP, ms.
    pub fn born_timestamp(&self) -> i64 {
        read_i64(self.record, BORN_TIMESTAMP_POSITION)
    }
    /// BORNHOST.
    pub fn born_host(&self) -> SocketAddr {
        read_host(
            self.record,
            BORN_HOST_POSITION,
            host_bytes(self.sysflag, BORN_HOST_V6),
        )
    }
    /// STORETIMESTAMP, ms.
    pub fn store_timestamp(&self) -> i64 {
        read_i64(self.record, store_timestamp_position(self.sysflag))
    }
    /// STOREHOST.
    pub fn store_host(&self) -> SocketAddr {
        read_host(
            self.record,
            store_host_position(self.sysflag),
            host_bytes(self.sysflag, STORE_HOST_V6),
        )
    }
    /// RECONSUMETIMES.
    pub fn reconsume_times(&self) -> i32 {
        read_i32(self.record, reconsume_times_position(self.sysflag))
    }
    /// PREPARED TRANSACTION OFFSET.
    pub fn prepared_transaction_offset(&self) -> i64 {
        read_i64(self.record, reconsume_times_position(self.sysflag) + 4)
    }
    /// BODY as stored (compressed when sysflag bit 0 is set).
    pub fn body(&self) -> &'a [u8] {
        &self.record[self.body_range()]
    }
    /// Where the body lies within [`RecordView::bytes`], for zero-copy slicing.
    pub fn body_range(&self) -> Range<usize> {
        self.body_start..self.body_start + self.body_len
    }
    /// TOPIC.
    pub fn topic(&self) -> &'a str {
        self.topic
    }
    /// Where the topic lies within [`RecordView::bytes`].
    pub fn topic_range(&self) -> Range<usize> {
        self.topic_start..self.topic_start + self.topic.len()
    }
    /// PROPERTIES, the encoded string.
    pub fn properties(&self) -> &'a str {
        self.properties
    }
    /// One property, read without allocation (last occurrence wins).
    pub fn property(&self, name: &str) -> Option<&'a str> {
        properties::get(self.properties, name)
    }
    /// The offset message id: store host and physical offset.
    pub fn offset_msg_id(&self) -> String {
        encode_offset_msg_id(self.store_host(), self.physical_offset())
    }
}

fn read_i16(record: &[u8], at: usize, what: &'static str) -> Result<i16, RecordError> {
    match record.get(at..at + 2) {
        Some(word) => Ok(i16::from_be_bytes(word.try_into().expect("2 bytes"))),
        None => Err(truncated(what, at, 2, record.len())),
    }
}

/// Reads the topic length (signed byte for V1, i16 for V2) and checks the topic fits.
/// Returns (topic length, topic start).
fn read_topic_length(
    record: &[u8],
    at: usize,
    magic_v2: bool,
) -> Result<(usize, usize), RecordError> {
    let (length, width) = if magic_v2 {
        (i64::from(read_i16(record, at, "topic length")?), 2)
    } else {
        let byte = record
            .get(at)
            .ok_or_else(|| truncated("topic length", at, 1, record.len()))?;
        (i64::from(i8::from_be_bytes([*byte])), 1)
    };
    let topic_len = usize::try_from(length).map_err(|_| RecordError::LengthInvalid {
        what: "topic",
        offset: at,
        length,
    })?;
    let topic_start = at + width;
    if topic_start + topic_len > record.len() {
        return Err(truncated("topic", topic_start, topic_len, record.len()));
    }
    Ok((topic_len, topic_start))
}

fn utf8<'a>(
    record: &'a [u8],
    start: usize,
    len: usize,
    what: &'static str,
) -> Result<&'a str, RecordError> {
    let bytes = record
        .get(start..start + len)
        .ok_or_else(|| truncated(what, start, len, record.len()))?;
    std::str::from_utf8(bytes).map_err(|_| RecordError::Utf8 {
        what,
        offset: start,
    })
}

/// How client-side decoding treats bodies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeOptions {
    /// Inflate compressed bodies (Java's `deCompressBody`).
    pub decompress_body: bool,
    /// Largest inflated body accepted.
    pub decompressed_body_bytes_max: usize,
}

impl Default for DecodeOptions {
    fn default() -> DecodeOptions {
        DecodeOptions {
            decompress_body: true,
            decompressed_body_bytes_max: DECOMPRESSED_BODY_BYTES_MAX_DEFAULT,
        }
    }
}

/// A decoded message as a client sees it (Java `MessageExt`). Owned; the body shares the
/// input's memory unless it had to be inflated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageExt {
    /// Topic.
    pub topic: String,
    /// Queue id.
    pub queue_id: i32,
    /// Application flag.
    pub flag: i32,
    /// Consume-queue offset.
    pub queue_offset: i64,
    /// Commit-log offset.
    pub commit_log_offset: i64,
    /// Sysflag; bit 0 is cleared once the body was inflated, as Java does.
    pub sysflag: i32,
    /// Producer wall clock, ms.
    pub born_timestamp: i64,
    /// Producer address.
    pub born_host: SocketAddr,
    /// Broker wall clock at append, ms.
    pub store_timestamp: i64,
    /// Broker address.
    pub store_host: SocketAddr,
    /// Delivery attempts so far.
    pub reconsume_times: i32,
    /// Half-message offset of committed transaction messages.
    pub prepared_transaction_offset: i64,
    /// BODYCRC as stored.
    pub body_crc: i32,
    /// TOTALSIZE of the record.
    pub store_size: i32,
    /// The body, inflated unless `body_compression` says otherwise.
    pub body: Bytes,
    /// `Some(type)` when the body is still compressed (inflation off); sysflag bit 0 is then
    /// still set.
    pub body_compression: Option<CompressionType>,
    /// Decoded properties.
    pub properties: Properties,
    /// The offset message id (Java sets `msgId` to it; see [`MessageExt::client_msg_id`]).
    pub msg_id: String,
}

impl MessageExt {
    /// Builds an owned message from a parsed view; `record` must be the bytes the view covers.
    pub fn from_view(
        view: &RecordView<'_>,
        record: &Bytes,
        options: &DecodeOptions,
    ) -> Result<MessageExt, RecordError> {
        assert_eq!(
            record.len(),
            view.total_size(),
            "record bytes and view disagree"
        );
        assert!(
            record.as_ptr() == view.bytes().as_ptr(),
            "view is not over these bytes"
        );
        let (body, sysflag, body_compression) = decode_body(view, record, options)?;
        Ok(MessageExt {
            topic: view.topic().to_owned(),
            queue_id: view.queue_id(),
            flag: view.flag(),
            queue_offset: view.queue_offset(),
            commit_log_offset: view.physical_offset(),
            sysflag,
            born_timestamp: view.born_timestamp(),
            born_host: view.born_host(),
            store_timestamp: view.store_timestamp(),
            store_host: view.store_host(),
            reconsume_times: view.reconsume_times(),
            prepared_transaction_offset: view.prepared_transaction_offset(),
            body_crc: view.body_crc(),
            store_size: i32::try_from(view.total_size()).expect("TOTALSIZE is an i32"),
            body,
            body_compression,
            properties: Properties::decode(view.properties()),
            msg_id: view.offset_msg_id(),
        })
    }

    /// One property.
    pub fn property(&self, name: &str) -> Option<&str> {
        self.properties.get(name)
    }
    /// `TAGS`.
    pub fn tags(&self) -> Option<&str> {
        self.properties.get(names::TAGS)
    }
    /// `KEYS`, split on spaces.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.properties
            .get(names::KEYS)
            .unwrap_or("")
            .split(properties::KEY_SEPARATOR)
            .filter(|k| !k.is_empty())
    }
    /// `UNIQ_KEY`, the client-generated id.
    pub fn uniq_key(&self) -> Option<&str> {
        self.properties.get(names::UNIQ_KEY)
    }
    /// The id applications see (Java `MessageClientExt.getMsgId`): `UNIQ_KEY`, else the offset
    /// message id.
    pub fn client_msg_id(&self) -> &str {
        self.uniq_key().unwrap_or(&self.msg_id)
    }
    /// Properties an application set itself (names not reserved by the protocol).
    pub fn user_properties(&self) -> impl Iterator<Item = (&str, &str)> {
        self.properties.user_properties()
    }
}

type DecodedBody = (Bytes, i32, Option<CompressionType>);

/// The body as the client should see it: sliced, or inflated with bit 0 cleared.
fn decode_body(
    view: &RecordView<'_>,
    record: &Bytes,
    options: &DecodeOptions,
) -> Result<DecodedBody, RecordError> {
    let sysflag = view.sysflag();
    let stored = record.slice(view.body_range());
    if sysflag & COMPRESSED == 0 {
        return Ok((stored, sysflag, None));
    }
    let kind = CompressionType::from_sysflag(sysflag)?;
    if !options.decompress_body {
        return Ok((stored, sysflag, Some(kind)));
    }
    let inflated = compression::decompress(sysflag, &stored, options.decompressed_body_bytes_max)?;
    Ok((
        Bytes::from(inflated),
        compression::clear_compressed(sysflag),
        None,
    ))
}

/// Where and why [`decode_records_with`] stopped early.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeStop {
    /// Offset of the undecodable record in the input.
    pub offset: usize,
    /// Why it could not be decoded.
    pub error: RecordError,
}

/// Decodes concatenated records (a pull, query or view body) with default options, stopping at
/// the first record that does not decode, as the Java client does.
pub fn decode_records(bytes: Bytes) -> Vec<MessageExt> {
    decode_records_with(bytes, &DecodeOptions::default()).0
}

/// Like [`decode_records`], also saying where decoding stopped, if before the end.
pub fn decode_records_with(
    bytes: Bytes,
    options: &DecodeOptions,
) -> (Vec<MessageExt>, Option<DecodeStop>) {
    let mut messages = Vec::new();
    let mut offset = 0;
    while offset < bytes.len() {
        let result = RecordView::parse(&bytes[offset..]).and_then(|view| {
            let record = bytes.slice(offset..offset + view.total_size());
            MessageExt::from_view(&view, &record, options)
        });
        match result {
            Ok(message) => {
                offset += usize::try_from(message.store_size).expect("positive TOTALSIZE");
                messages.push(message);
            }
            Err(error) => return (messages, Some(DecodeStop { offset, error })),
        }
    }
    assert_eq!(offset, bytes.len());
    (messages, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec<'a>(topic: &'a str, body: &'a [u8], properties: &'a str) -> RecordSpec<'a> {
        RecordSpec {
            topic,
            queue_id: 3,
            flag: 7,
            sysflag: 0,
            born_timestamp: 1_700_000_000_000,
            born_host: "192.168.0.10:50000".parse().unwrap(),
            store_host: "10.0.0.5:10911".parse().unwrap(),
            reconsume_times: 1,
            prepared_transaction_offset: 0,
            body,
            properties,
        }
    }

    // Proves the documented constants and the IPv4 V1 size formula 91 + n + t + p.
    #[test]
    fn constants_and_lengths() {
        assert_eq!(MAGIC_V1, -626_843_481);
        assert_eq!(MAGIC_V2, -626_843_477);
        assert_eq!(BLANK_MAGIC, -875_286_124);
        assert_eq!(record_length(0, 10, 5, 7, false), 91 + 22);
        assert_eq!(record_length(0, 10, 5, 7, true), 92 + 22);
        assert_eq!(
            record_length(BORN_HOST_V6 | STORE_HOST_V6, 0, 0, 0, false),
            91 + 24
        );
        assert_eq!(store_timestamp_position(0), 56);
        assert_eq!(store_timestamp_position(BORN_HOST_V6), 68);
    }

    // Proves encode then parse returns every field, for IPv4 and IPv6 hosts.
    #[test]
    fn encode_parse_round_trip() {
        let properties = "TAGS\u{1}TagA\u{2}";
        for (born, store) in [
            ("1.2.3.4:1", "5.6.7.8:2"),
            ("[::1]:3", "5.6.7.8:4"),
            ("1.2.3.4:5", "[fe80::1]:6"),
        ] {
            let mut record_spec = spec("TopicTest", b"hello", properties);
            record_spec.born_host = born.parse().unwrap();
            record_spec.store_host = store.parse().unwrap();
            let mut buffer = BytesMut::new();
            let length =
                encode_record(&record_spec, 11, 2048, 1_700_000_000_123, &mut buffer).unwrap();
            assert_eq!(length, buffer.len());
            let view = RecordView::parse(&buffer).unwrap();
            assert_eq!(view.magic(), MAGIC_V1);
            assert_eq!(view.born_host(), record_spec.born_host);
            assert_eq!(view.store_host(), record_spec.store_host);
            assert_eq!((view.queue_offset(), view.physical_offset()), (11, 2048));
            assert_eq!(view.store_timestamp(), 1_700_000_000_123);
            assert_eq!(view.body(), b"hello");
            assert_eq!(view.topic(), "TopicTest");
            assert_eq!(view.property("TAGS"), Some("TagA"));
            assert!(view.body_crc_matches());
        }
    }

    // Proves an IPv4-mapped IPv6 peer is stored as 4-byte IPv4 without the IPv6 bit.
    #[test]
    fn mapped_addresses_are_stored_as_ipv4() {
        let mut record_spec = spec("T", b"", "");
        record_spec.born_host = "[::ffff:192.168.0.10]:50000".parse().unwrap();
        record_spec.sysflag = BORN_HOST_V6;
        let mut buffer = BytesMut::new();
        encode_record(&record_spec, 0, 0, 0, &mut buffer).unwrap();
        let view = RecordView::parse(&buffer).unwrap();
        assert_eq!(view.sysflag() & BORN_HOST_V6, 0);
        assert_eq!(view.born_host(), "192.168.0.10:50000".parse().unwrap());
        assert_eq!(view.total_size(), record_length(0, 0, 1, 0, false));
    }

    // Proves topics over 127 bytes use V2, over 255 bytes and huge properties are refused.
    #[test]
    fn v2_and_limits() {
        let long_topic = "%RETRY%".to_owned() + &"g".repeat(150);
        let mut buffer = BytesMut::new();
        encode_record(&spec(&long_topic, b"", ""), 0, 0, 0, &mut buffer).unwrap();
        let view = RecordView::parse(&buffer).unwrap();
        assert_eq!(view.magic(), MAGIC_V2);
        assert_eq!(view.topic(), long_topic);
        let too_long = "t".repeat(256);
        assert!(matches!(
            encode_record(&spec(&too_long, b"", ""), 0, 0, 0, &mut buffer),
            Err(RecordError::TooLong { what: "topic", .. })
        ));
        let huge = "p".repeat(32_768);
        assert!(matches!(
            encode_record(&spec("t", b"", &huge), 0, 0, 0, &mut buffer),
            Err(RecordError::TooLong {
                what: "properties",
                ..
            })
        ));
    }

    // Proves LZ4 and zstd bodies (what 5.x Java producers may send) are inflated with bit 0
    // cleared, stay compressed with their type when inflation is off, and an unknown
    // compression type stops decoding with a typed error.
    #[test]
    fn lz4_and_zstd_bodies_are_inflated_and_unknown_types_refused() {
        let text = b"a body long enough to be worth compressing, again and again and again";
        let mut buffer = BytesMut::new();
        for (kind, compressed) in [
            (CompressionType::Lz4, compression::lz4_compress(text)),
            (CompressionType::Zstd, compression::zstd_compress(text, 5)),
        ] {
            let mut record = spec("T", &compressed, "");
            record.sysflag = kind.sysflag_bits();
            encode_record(&record, 0, 0, 0, &mut buffer).unwrap();
            let bytes = buffer.split().freeze();
            let messages = decode_records(bytes.clone());
            assert_eq!(&messages[0].body[..], &text[..], "{kind:?}");
            assert_eq!(messages[0].body_compression, None);
            assert_eq!(
                messages[0].sysflag,
                compression::clear_compressed(record.sysflag)
            );
            let kept = DecodeOptions {
                decompress_body: false,
                ..DecodeOptions::default()
            };
            let (messages, _) = decode_records_with(bytes, &kept);
            assert_eq!(messages[0].body_compression, Some(kind));
            assert_eq!(&messages[0].body[..], &compressed[..]);
        }
        let mut lz4 = spec("T", b"\x04\x22\x4d\x18", "");
        lz4.sysflag = 0x101;
        let mut unknown = lz4;
        unknown.sysflag = 0x401;
        encode_record(&unknown, 0, 0, 0, &mut buffer).unwrap();
        let (messages, stop) = decode_records_with(buffer.freeze(), &DecodeOptions::default());
        assert!(messages.is_empty());
        let error = stop.unwrap().error;
        assert_eq!(
            error,
            RecordError::Compression(CompressionError::TypeUnknown { bits: 4 })
        );
    }

    // Proves the blank marker and unknown magics are reported, not misread.
    #[test]
    fn blank_and_unknown_magic() {
        let mut marker = Vec::new();
        marker.extend_from_slice(&100i32.to_be_bytes());
        marker.extend_from_slice(&BLANK_MAGIC.to_be_bytes());
        assert_eq!(peek_total_size_and_magic(&marker), Some((100, BLANK_MAGIC)));
        assert_eq!(
            RecordView::parse(&marker).unwrap_err(),
            RecordError::Blank { blank_bytes: 100 }
        );
        assert!(matches!(
            RecordView::parse(&[0u8; 200]).unwrap_err(),
            RecordError::MagicUnknown { magic: 0 }
        ));
        assert_eq!(peek_total_size_and_magic(&[0u8; 7]), None);
    }
}
