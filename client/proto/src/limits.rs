//! Structural bounds of the codec. Every bound says what it limits and what it costs.

/// Largest frame accepted by default, length prefix excluded: 16 MiB, as the Java remoting
/// layer (`com.rocketmq.remoting.frameMaxLength`). A longer length field is refused before any
/// allocation, so a hostile peer cannot make us reserve memory.
pub const FRAME_BYTES_MAX_DEFAULT: usize = 16 * 1024 * 1024;

/// Smallest value of the frame's total-length field: the 4-byte header word alone.
pub const FRAME_TOTAL_LENGTH_MIN: usize = 4;

/// The header length lives in the low 24 bits of the header word.
pub const HEADER_BYTES_MAX: usize = 0x00FF_FFFF;

/// Fixed part of a ROCKETMQ binary header: code, language, version, opaque, flag and the
/// remark and ext-section length words.
pub const BINARY_HEADER_FIXED_BYTES: usize = 21;

/// Largest message body the Java broker and client accept (`maxMessageSize`), 4 MiB.
pub const MESSAGE_BODY_BYTES_MAX_DEFAULT: usize = 4 * 1024 * 1024;

/// The properties string is length-prefixed by an i16 in stored records.
pub const PROPERTIES_BYTES_MAX: usize = i16::MAX as usize;

/// Topic names longer than this need the V2 record magic (a 2-byte topic length).
pub const TOPIC_BYTES_MAX_V1: usize = 127;

/// Longest topic name accepted at all (long `%RETRY%` and `%DLQ%` topics).
pub const TOPIC_BYTES_MAX: usize = 255;

/// Largest body a client inflates from one compressed record. The Java producer only
/// compresses bodies up to 4 MiB; other producers may go further, so this allows 16 MiB and
/// no more: a zlib bomb costs at most this much memory per message.
pub const DECOMPRESSED_BODY_BYTES_MAX_DEFAULT: usize = 16 * 1024 * 1024;

/// Most entries accepted in one SEND_BATCH_MESSAGE body. Each entry is at least 22 bytes, so
/// a 4 MiB body could otherwise announce ~190,000 entries; decoding allocates one small
/// struct per entry, and this caps that vector.
pub const BATCH_ENTRIES_MAX: usize = 16 * 1024;

/// Longest consumer or producer group name (5.x).
pub const GROUP_BYTES_MAX: usize = 120;

const _: () = assert!(FRAME_BYTES_MAX_DEFAULT <= i32::MAX as usize);
const _: () = assert!(HEADER_BYTES_MAX < FRAME_BYTES_MAX_DEFAULT);
const _: () = assert!(MESSAGE_BODY_BYTES_MAX_DEFAULT < FRAME_BYTES_MAX_DEFAULT);
const _: () = assert!(DECOMPRESSED_BODY_BYTES_MAX_DEFAULT >= MESSAGE_BODY_BYTES_MAX_DEFAULT);
const _: () = assert!(TOPIC_BYTES_MAX_V1 < TOPIC_BYTES_MAX);
