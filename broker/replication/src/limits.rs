//! Structural bounds of the replication stream, each with what it bounds and why it is
//! large enough. The decoder refuses anything beyond them before allocating for it.

/// Bytes of the fixed frame header (magic, version, kind, reserved, body length, CRC).
pub const FRAME_HEADER_BYTES: usize = 16;

/// Most payload bytes of one Data frame. A Data frame carries whole records, so it must hold
/// the largest record the store accepts (4 MiB of body plus headers and properties); four
/// times that keeps frames few at full speed while bounding what a receiver buffers per
/// connection before it can check the frame's CRC.
pub const DATA_PAYLOAD_BYTES_MAX: usize = 16 * 1024 * 1024;

/// Bytes of a Data frame body before its payload (log, epoch, start, confirm, payload CRC).
pub const DATA_FIXED_BYTES: usize = 1 + 4 + 8 + 8 + 4;

/// Most body bytes of any frame: a full Data frame. Every other frame is far smaller (the
/// largest, a Hello naming [`LOGS_MAX`] logs of [`EPOCHS_MAX`] epochs each, is under 2 MiB;
/// checked below at compile time).
pub const FRAME_BODY_BYTES_MAX: usize = DATA_FIXED_BYTES + DATA_PAYLOAD_BYTES_MAX;

/// Largest log id: physical offsets keep 7 bits for it below a clear sign bit (the store's
/// `LogId::MAX`).
pub const LOG_ID_MAX: u8 = 127;

/// Most logs one Hello or Welcome names: every possible log id once.
pub const LOGS_MAX: usize = LOG_ID_MAX as usize + 1;

/// Most entries of one epoch history. An epoch begins only when a log starts serving as a
/// master (a start-up or a promotion), so a thousand covers years of restarts; a history
/// that would grow past it forgets its oldest entry, which can only make the divergence rule
/// more cautious (a slave that shares no remembered epoch is copied afresh).
pub const EPOCHS_MAX: usize = 1024;

/// Largest position in a log: positions share a 64-bit physical offset with the log id and
/// use its low 56 bits.
pub const POSITION_MAX: u64 = (1 << 56) - 1;

/// Most bytes of a cluster or broker name. RocketMQ puts no bound on them, but they are
/// config-file identifiers that name servers print; 255 leaves room for any real one.
pub const NAME_BYTES_MAX: usize = 255;

/// Most bytes of the human-readable detail of a Close frame: one log line's worth.
pub const CLOSE_DETAIL_BYTES_MAX: usize = 1024;

/// Bytes of one epoch entry on the wire (epoch u32, start u64).
pub const EPOCH_ENTRY_BYTES: usize = 4 + 8;

/// Bytes of one log's state in a Hello, at most (id, written, durable, history).
pub const HELLO_LOG_BYTES_MAX: usize = 1 + 8 + 8 + 2 + EPOCHS_MAX * EPOCH_ENTRY_BYTES;

/// Bytes of one log's answer in a Welcome, at most (id, kind, position, history).
pub const WELCOME_LOG_BYTES_MAX: usize = 1 + 1 + 8 + 2 + EPOCHS_MAX * EPOCH_ENTRY_BYTES;

// The largest Hello and Welcome fit a frame, so an honest peer can always say what it holds.
const _: () = assert!(
    2 + NAME_BYTES_MAX * 2 + 2 + 8 + 12 + 2 + LOGS_MAX * HELLO_LOG_BYTES_MAX
        <= FRAME_BODY_BYTES_MAX
);
const _: () = assert!(2 + LOGS_MAX + 2 + LOGS_MAX * WELCOME_LOG_BYTES_MAX <= FRAME_BODY_BYTES_MAX);
// A frame body length travels as u32.
const _: () = assert!(FRAME_BODY_BYTES_MAX <= u32::MAX as usize);
