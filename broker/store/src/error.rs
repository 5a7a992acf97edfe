//! Store errors. Operating errors are typed; broken invariants panic (docs/style.md#error-classes).

use std::path::PathBuf;

use comet_rt::io::IoError;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file operation failed.
    #[error("store i/o: {0}")]
    Io(#[from] IoError),
    /// An earlier write or fdatasync failed; nothing more is written until a restart
    /// recovers from the last durable state (no retry over a possibly lost page).
    #[error("store refuses writes after an i/o failure: {reason}")]
    WriteFailed {
        /// The failure that stopped writes.
        reason: String,
    },
    /// Disk use passed the hard mark (`diskSpaceWarningLevelRatio`). The text is the remark
    /// Java's `SendMessageProcessor` gives a send its store refused for it (with the use as a
    /// fraction of the commit log's, consume queues' and index's file system, which for Comet
    /// is one), then the marks.
    #[error(
        "service not available now. It may be caused by one of the following reasons: the \
         broker's disk is full [CL: {used:5.2} CQ: {used:5.2} INDEX: {used:5.2}], messages are \
         put to the slave, message store has been shut down, etc. (disk use {used_percent}% \
         is past the refusal mark {hard_percent}%)",
        used = fraction(.used_percent)
    )]
    DiskFull {
        /// Current disk use.
        used_percent: u32,
        /// The configured hard mark.
        hard_percent: u32,
    },
    /// The record bytes given to append are not a valid record.
    #[error("record {index} of the append is invalid: {reason}")]
    RecordInvalid {
        /// Position of the record in the append call.
        index: usize,
        /// What is wrong.
        reason: String,
    },
    /// A record (or batch) is larger than a segment or the configured limit.
    #[error("record of {length} bytes exceeds the limit of {max} bytes")]
    RecordTooLarge {
        /// Its length.
        length: usize,
        /// The limit.
        max: usize,
    },
    /// The store configuration cannot be used.
    #[error("store config: {0}")]
    Config(String),
    /// Another process holds the store lock.
    #[error("store {path} is locked by another process")]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
    /// A file on disk does not have the expected format.
    #[error("store file {path} is corrupt: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The next commit-log segment could not be created (for example the disk is full);
    /// nothing was written, the append may be retried later.
    #[error("cannot create the next commit-log segment: {reason}")]
    SegmentUnavailable {
        /// Why.
        reason: String,
    },
    /// The store is shut down.
    #[error("store is shut down")]
    Closed,
    /// A log position below the oldest retained segment: retention deleted those bytes, so a
    /// slave that needs them must start over from `oldest` (a full copy).
    #[error("log position {position} is below the oldest retained segment start {oldest}")]
    BelowRetention {
        /// The position asked for.
        position: u64,
        /// Start of the oldest retained segment.
        oldest: u64,
    },
    /// A log position where no record, padding or segment end marker starts.
    #[error("log position {position} is not a record boundary")]
    NotRecordBoundary {
        /// The position asked for.
        position: u64,
    },
    /// Replicated bytes for another position than the written end: the stream and the
    /// log disagree on where the log ends.
    #[error("replicated bytes for log position {position}, the log is written up to {written}")]
    ReplicaPosition {
        /// Where the bytes were meant to go.
        position: u64,
        /// The log's written end.
        written: u64,
    },
    /// Replicated bytes that are not the records of a log at their position; nothing of the
    /// call was appended.
    #[error("replicated bytes refused at log position {position}: {fault}")]
    ReplicaInvalid {
        /// Log position of the offending record.
        position: u64,
        /// What is wrong with it.
        fault: ReplicaFault,
    },
    /// A wait for a position the log has not been written up to.
    #[error("log position {position} is past the written end {written}")]
    NotWritten {
        /// The position asked for.
        position: u64,
        /// The written end.
        written: u64,
    },
    /// `StoreConfig::truncate_log_to` names a position the log cannot end at.
    #[error("cannot truncate the log to position {position}: {fault}")]
    TruncateRefused {
        /// The position asked for.
        position: u64,
        /// Why not.
        fault: TruncateFault,
    },
}

/// What is wrong with one record of a replicated append (see `Store::append_replicated`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplicaFault {
    /// A magic that is neither a record's nor a blank marker's.
    #[error("unknown magic {magic:#010x}")]
    Magic {
        /// The magic found.
        magic: u32,
    },
    /// A size no record or marker can have here (negative, too small, or running into the
    /// room every segment keeps for its end marker).
    #[error("impossible size {size}")]
    Size {
        /// The TOTALSIZE (or blank size) found.
        size: i32,
    },
    /// The bytes end inside a record.
    #[error("the bytes end inside a record of {size} bytes")]
    Cut {
        /// The record's TOTALSIZE.
        size: u64,
    },
    /// The record does not parse.
    #[error("record does not parse: {0}")]
    Record(comet_proto::message::RecordError),
    /// The body CRC does not match the body.
    #[error("body CRC does not match the body")]
    BodyCrc,
    /// The record's PHYSICALOFFSET is not where it would land.
    #[error("PHYSICALOFFSET {found} where the record lands at {expected}")]
    PhysicalOffset {
        /// The field's value.
        found: i64,
        /// The physical offset of its position here.
        expected: i64,
    },
    /// The record's queue offset does not continue its queue (a gap or a reuse).
    #[error("{topic}/{queue_id} queue offset {found} where {expected} is next")]
    QueueOffset {
        /// Its topic.
        topic: String,
        /// Its queue.
        queue_id: i32,
        /// The record's QUEUEOFFSET.
        found: i64,
        /// The queue's next offset here.
        expected: u64,
    },
    /// Padding that is not padding's shape (ends on a page, at most a page plus the marker,
    /// zero past its header).
    #[error("blank marker of {size} bytes is neither padding nor the segment's end")]
    Blank {
        /// Its size.
        size: i32,
    },
    /// A record or end marker that does not end where this store's segment does (a record
    /// running into the room kept for its end marker, a marker ending the segment
    /// elsewhere): the sender's segments have another size.
    #[error("this store's segment ends at {segment_end}; the sender's segment size differs")]
    SegmentSize {
        /// Where this store's segment ends.
        segment_end: u64,
    },
    /// Bytes after a segment's end marker: one call appends to one segment.
    #[error("bytes follow the segment's end marker")]
    AfterSegmentEnd,
}

/// Why `StoreConfig::truncate_log_to` cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TruncateFault {
    /// The recovered log ends before it.
    #[error("the recovered log ends at {end}")]
    BeyondEnd {
        /// The recovered end.
        end: u64,
    },
    /// A record spans it.
    #[error("a record spans it, from {record_start} to {record_end}")]
    NotBoundary {
        /// Where that record starts.
        record_start: u64,
        /// Where it ends.
        record_end: u64,
    },
    /// It lies below the oldest retained segment.
    #[error("the oldest retained segment starts at {oldest}")]
    BelowOldest {
        /// Start of the oldest retained segment.
        oldest: u64,
    },
    /// A live truncation (`Store::truncate_unconfirmed`) would take back bytes consumers
    /// may have seen: they are visible up to `visible`.
    #[error("the log is visible up to {visible}")]
    Visible {
        /// The visible (dispatched or confirmed) end.
        visible: u64,
    },
    /// A live truncation would take back a segment roll: only a restart does that.
    #[error("the bytes past it reach into the next segment, from {segment_end}")]
    AcrossSegments {
        /// Where the segment holding the position ends.
        segment_end: u64,
    },
    /// The log was appended to while a live truncation waited for it to be durable.
    #[error("the log moved from {expected} to {written} during the truncation")]
    Moved {
        /// The written end when the truncation began.
        expected: u64,
        /// The written end found.
        written: u64,
    },
    /// A piece of the bytes past it is not what the log should hold there.
    #[error("the bytes at {at} do not read: {fault}")]
    Unreadable {
        /// Where the piece starts.
        at: u64,
        /// What is wrong with it.
        fault: ReplicaFault,
    },
    /// Live truncation is for a store whose visibility follows confirm (a slave's).
    #[error("the store does not hold back unconfirmed bytes from its readers")]
    NotConfirmed,
}

impl StoreError {
    pub(crate) fn corrupt(path: impl Into<PathBuf>, reason: impl Into<String>) -> StoreError {
        StoreError::Corrupt {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

/// Blocking file-system setup errors at open (before serving), with the path.
pub(crate) fn setup_error(path: &std::path::Path, error: std::io::Error) -> StoreError {
    StoreError::Config(format!("{}: {error}", path.display()))
}

/// A percentage as the fraction Java prints disk use with.
fn fraction(percent: &u32) -> f64 {
    f64::from(*percent) / 100.0
}
