//! The store's side of master/slave replication: a master streams its own commit log's
//! bytes, a slave appends the same bytes at the same positions, so queue offsets, physical
//! offsets and message ids agree on both.
//!
//! - [`Store::read_log`] (master): whole records of the durable log from a record
//!   boundary, from the read cache when it still holds them, else from the segment with
//!   direct I/O (then every record is verified before it leaves). A segment's end marker
//!   travels as its 8 bytes; the chunk then ends at the segment's end, so the slave's
//!   segments end exactly where the master's do. A chunk never crosses a segment end.
//! - [`Store::append_replicated`] (slave): checks every record of the call against the log
//!   and the queues as they are here (magic, sizes, body CRC, PHYSICALOFFSET equal to where
//!   it lands, queue offset equal to its queue's next), then copies the bytes unchanged,
//!   all or nothing. Dispatch (consume queues, key index) follows durability as for local
//!   appends.
//! - [`Store::confirm`] (SYNC_MASTER): moves the confirmed position that limits visibility
//!   under `StoreConfig::visible_after_confirm` (see `flush::visible_end`).
//! - [`Store::wait_durable_beyond`] (master): resolves when the durable end passes a
//!   position, so an idle sender sleeps until a group commit gives it bytes to send.
//!
//! [`Store::read_log`]: crate::Store::read_log
//! [`Store::append_replicated`]: crate::Store::append_replicated
//! [`Store::confirm`]: crate::Store::confirm
//! [`Store::wait_durable_beyond`]: crate::Store::wait_durable_beyond

use std::collections::HashMap;
use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use bytes::Bytes;
use comet_proto::message::{
    peek_total_size_and_magic, RecordView, BLANK_MAGIC, MAGIC_V1, MAGIC_V2,
};

use crate::append::Appender;
use crate::commit_log::{to_index, BLANK_BYTES, PADDING_BYTES_MAX};
use crate::error::{ReplicaFault, StoreError, TruncateFault};
use crate::flights::Flights;
use crate::flush::dispatch_durable;
use crate::limits::PAGE_BYTES;
use crate::offset::PhysicalOffset;
use crate::queues::{TRANSACTION_PREPARED, TRANSACTION_ROLLBACK, TRANSACTION_TYPE_MASK};
use crate::shard::Shared;

/// Raw bytes of a store's own commit log (see [`Store::read_log`](crate::Store::read_log)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogChunk {
    /// Log position (no log id) of the first byte.
    pub position: u64,
    /// Whole records, padding and at most one segment end marker (its 8 bytes, last).
    pub bytes: Bytes,
    /// Log position just past `bytes`: `position + bytes.len()`, or the segment's end when
    /// the bytes end with its end marker. Where the next read starts.
    pub end: u64,
    /// When `bytes` is empty because the record at `position` is larger than the
    /// `max_bytes` asked for: its size (read again with at least that much).
    pub next_record_bytes: Option<usize>,
}

/// Where the record bytes a read returns stop.
struct Cut {
    whole_bytes: usize,
    end: u64,
    next_record_bytes: Option<usize>,
}

/// One piece of a checked replicated append (borrowing the call's bytes).
struct Piece<'b> {
    range: Range<usize>,
    /// The queue whose next offset it takes (topic, queue id), and that offset.
    queue: Option<(&'b str, i32, u64)>,
}

/// What a replicated append holds, checked against the log and queues.
struct Checked<'b> {
    pieces: Vec<Piece<'b>>,
    records: u64,
    ends_segment: bool,
}

/// The replication part of one store.
pub(crate) struct Replica<'s> {
    shared: &'s Rc<Shared>,
}

impl<'s> Replica<'s> {
    /// The replication part of the store whose state is `shared`.
    pub(crate) fn new(shared: &'s Rc<Shared>) -> Replica<'s> {
        Replica { shared }
    }

    /// Whole records of the written log from `position`, a record boundary or segment
    /// start, at most `max_bytes` of them (see the module docs). Bytes not yet durable
    /// come from memory, where they stay until a flush writes them.
    pub(crate) async fn read_log(
        &self,
        position: u64,
        max_bytes: usize,
    ) -> Result<LogChunk, StoreError> {
        let (segment_end, source) = {
            let log = self.shared.log.borrow();
            let oldest = log.min_position();
            if position < oldest {
                return Err(StoreError::BelowRetention { position, oldest });
            }
            if position > log.write {
                return Err(StoreError::NotWritten {
                    position,
                    written: log.write,
                });
            }
            let segment_end = log.segment_start(position) + log.segment_bytes;
            let available = log.write.min(segment_end) - position;
            // At least a header, so a record larger than `max_bytes` can tell its size.
            let wanted = to_index(available.min(max_bytes.max(8) as u64));
            let cached = if wanted == 0 {
                Some(Bytes::new())
            } else {
                log.cached_span(position, wanted)
            };
            let source = match cached {
                Some(bytes) => Source::Cache(bytes),
                None => {
                    // Evicted bytes are durable (the cache keeps what no flush wrote), and
                    // the disk holds nothing past the durable end to read.
                    let on_disk = log.durable.min(segment_end).saturating_sub(position);
                    assert!(on_disk > 0, "bytes not yet durable stay cached");
                    let (start, file) = log.segment_of(position).ok_or_else(|| {
                        StoreError::corrupt(&log.dir, format!("no segment holds {position}"))
                    })?;
                    let length = wanted.min(to_index(on_disk));
                    Source::Disk(file, position - start, length)
                }
            };
            (segment_end, source)
        };
        let (bytes, verify) = match source {
            Source::Cache(bytes) => (bytes, false),
            Source::Disk(file, at, length) => {
                let mut stats = self.shared.stats.get();
                stats.disk_reads += 1;
                self.shared.stats.set(stats);
                (Bytes::from(file.read_at(at, length).await?), true)
            }
        };
        let reader = ChunkReader {
            log_id: self.shared.config.log_id,
            segment_end,
            max_bytes,
            verify,
        };
        let cut = reader.cut(&bytes, position)?;
        Ok(LogChunk {
            position,
            bytes: bytes.slice(..cut.whole_bytes),
            end: cut.end,
            next_record_bytes: cut.next_record_bytes,
        })
    }

    /// Appends a master's log bytes at `position`, which must be the written end; returns
    /// the new written end without waiting for durability (see the module docs).
    pub(crate) async fn append_replicated(
        &self,
        position: u64,
        bytes: &[u8],
    ) -> Result<u64, StoreError> {
        let appender = Appender::new(self.shared);
        loop {
            appender.check_writable()?;
            let checked = self.check(position, bytes)?;
            if checked.ends_segment && self.shared.log.borrow().spare.is_none() {
                // Checked again after the wait: other calls may have appended meanwhile.
                appender.wait_for_spare().await?;
                continue;
            }
            self.shared.replica.set(true);
            let end = self.apply(position, bytes, checked.pieces, checked.ends_segment);
            appender.count_replicated(checked.records, bytes.len() as u64);
            self.shared.flush_wanted.wake_all();
            if self.shared.log.borrow().spare.is_none() {
                // Prepared before the master's log rolls again.
                appender.request_spare();
            }
            return Ok(end);
        }
    }

    /// Resolves once the log is durable up to `position`.
    pub(crate) async fn wait_durable(&self, position: u64) -> Result<(), StoreError> {
        let written = self.shared.log.borrow().write;
        if position > written {
            return Err(StoreError::NotWritten { position, written });
        }
        Appender::new(self.shared).wait_durable(position).await
    }

    /// Resolves once the durable end is past `position`, or the store stopped (failed,
    /// closed or abandoned: the caller re-checks and finds out).
    pub(crate) fn wait_durable_beyond(&self, position: u64) -> LogBeyond {
        LogBeyond {
            shared: Rc::clone(self.shared),
            position,
            end: LogEnd::Durable,
        }
    }

    /// Takes back the bytes past `to` that consumers cannot have seen (see
    /// [`Store::truncate_unconfirmed`](crate::Store::truncate_unconfirmed)). Returns the
    /// number of bytes taken back.
    pub(crate) async fn truncate_unconfirmed(&self, to: u64) -> Result<u64, StoreError> {
        let refused = |fault| StoreError::TruncateRefused {
            position: to,
            fault,
        };
        if !self.shared.config.visible_after_confirm {
            return Err(refused(TruncateFault::NotConfirmed));
        }
        let written = self.shared.log.borrow().write;
        if to > written {
            return Err(StoreError::NotWritten {
                position: to,
                written,
            });
        }
        if to == written {
            return Ok(0);
        }
        self.check_tail(to, written).map_err(refused)?;
        // Everything written is made durable first: no flush is then in flight, and the
        // tail is on disk to read back and to zero.
        let appender = Appender::new(self.shared);
        appender.wait_durable(written).await?;
        let (file, segment_start, segments) = {
            let log = self.shared.log.borrow();
            let (segment_start, file) = log
                .segment_of(to)
                .ok_or_else(|| StoreError::corrupt(&log.dir, format!("no segment holds {to}")))?;
            (file, segment_start, log.segments.clone())
        };
        let tail = file
            .read_at(to - segment_start, to_index(written - to))
            .await?;
        let rollback = self.queue_rollback(to, &tail)?;
        let page_start = crate::commit_log::align_down(to);
        let tail_page = file
            .read_at(page_start - segment_start, to_index(to - page_start))
            .await?;
        crate::recovery::zero_range(&self.shared.config, &segments, to, written).await?;
        let now_written = self.shared.log.borrow().write;
        if now_written != written || self.shared.flights.borrow().busy() {
            return Err(refused(TruncateFault::Moved {
                expected: written,
                written: now_written,
            }));
        }
        self.check_tail(to, written).map_err(refused)?;
        self.shared.log.borrow_mut().truncate_tail(to, &tail_page);
        let max = self.shared.flights.borrow().max;
        *self.shared.flights.borrow_mut() = Flights::new(to, max);
        let mut queues = self.shared.queues.borrow_mut();
        for ((topic, queue_id), next_offset) in rollback {
            if let Some(queue) = queues.get_mut(&topic).and_then(|q| q.get_mut(&queue_id)) {
                queue.next_offset = next_offset.max(queue.consume_queue.max_offset());
            }
        }
        Ok(written - to)
    }

    /// Whether `[to, written)` may be taken back live: nothing of it visible, all of it
    /// in the segment being written.
    fn check_tail(&self, to: u64, written: u64) -> Result<(), TruncateFault> {
        let log = self.shared.log.borrow();
        let visible = log.dispatched.max(self.shared.confirmed.get());
        if to < visible {
            return Err(TruncateFault::Visible { visible });
        }
        let segment_end = log.segment_start(to) + log.segment_bytes;
        if written > segment_end || log.segment_start(written) != log.segment_start(to) {
            return Err(TruncateFault::AcrossSegments { segment_end });
        }
        Ok(())
    }

    /// The next offset each queue returns to once the records in `tail` (log bytes from
    /// `to`) are taken back: the first offset one of them took. Checks every piece, so `to`
    /// is proven a record boundary.
    fn queue_rollback(
        &self,
        to: u64,
        tail: &[u8],
    ) -> Result<HashMap<(String, i32), u64>, StoreError> {
        let config = &self.shared.config;
        let segment_end = {
            let log = self.shared.log.borrow();
            log.segment_start(to) + log.segment_bytes
        };
        let mut first_offsets: HashMap<(String, i32), u64> = HashMap::new();
        let mut at = 0usize;
        while at < tail.len() {
            let here = to + at as u64;
            let fault = |fault| StoreError::TruncateRefused {
                position: to,
                fault: TruncateFault::Unreadable { at: here, fault },
            };
            let rest = &tail[at..];
            let size = match check_piece(rest, here, segment_end).map_err(fault)? {
                PieceKind::EndMarker => rest.len(),
                PieceKind::Padding(size) => size,
                PieceKind::Record(size) => {
                    let view =
                        check_record(&rest[..size], PhysicalOffset::new(config.log_id, here))
                            .map_err(fault)?;
                    let transaction = view.sysflag() & TRANSACTION_TYPE_MASK;
                    let takes_offset = transaction != TRANSACTION_PREPARED
                        && transaction != TRANSACTION_ROLLBACK
                        && config.owns(view.topic(), view.queue_id());
                    if let (true, Ok(offset)) = (takes_offset, u64::try_from(view.queue_offset())) {
                        first_offsets
                            .entry((view.topic().to_string(), view.queue_id()))
                            .and_modify(|first| *first = (*first).min(offset))
                            .or_insert(offset);
                    }
                    size
                }
            };
            at += size;
        }
        Ok(first_offsets)
    }

    /// Resolves once the written end is past `position`, or the store stopped.
    pub(crate) fn wait_written_beyond(&self, position: u64) -> LogBeyond {
        LogBeyond {
            shared: Rc::clone(self.shared),
            position,
            end: LogEnd::Written,
        }
    }

    /// Moves the confirmed position forward to `position` (never back) and dispatches what
    /// becomes visible; readers of the queues that get entries wake.
    pub(crate) fn confirm(&self, position: u64) {
        if position <= self.shared.confirmed.get() {
            return;
        }
        self.shared.confirmed.set(position);
        if self.shared.config.visible_after_confirm {
            dispatch_durable(self.shared);
        }
    }

    /// Checks every piece of a replicated append against the log and the queues.
    fn check<'b>(&self, position: u64, bytes: &'b [u8]) -> Result<Checked<'b>, StoreError> {
        let log = self.shared.log.borrow();
        if position != log.write {
            return Err(StoreError::ReplicaPosition {
                position,
                written: log.write,
            });
        }
        let queues = self.shared.queues.borrow();
        let config = &self.shared.config;
        let segment_end = log.segment_start(position) + log.segment_bytes;
        let mut next_offsets: HashMap<(&'b str, i32), u64> = HashMap::new();
        let mut checked = Checked {
            pieces: Vec::new(),
            records: 0,
            ends_segment: false,
        };
        let mut at = 0usize;
        while at < bytes.len() {
            let here = position + at as u64;
            let fault = |fault| StoreError::ReplicaInvalid {
                position: here,
                fault,
            };
            let rest = &bytes[at..];
            let piece = match check_piece(rest, here, segment_end).map_err(fault)? {
                PieceKind::EndMarker => {
                    checked.ends_segment = true;
                    at += rest.len();
                    continue;
                }
                PieceKind::Padding(size) => Piece {
                    range: at..at + size,
                    queue: None,
                },
                PieceKind::Record(size) => {
                    let view =
                        check_record(&rest[..size], PhysicalOffset::new(config.log_id, here))
                            .map_err(fault)?;
                    let queue = next_queue_offset(&view, &queues, &mut next_offsets, config)
                        .map_err(fault)?;
                    checked.records += 1;
                    Piece {
                        range: at..at + size,
                        queue,
                    }
                }
            };
            at = piece.range.end;
            checked.pieces.push(piece);
        }
        Ok(checked)
    }

    /// Copies checked pieces into the log unchanged; returns the new written end.
    fn apply(
        &self,
        position: u64,
        bytes: &[u8],
        pieces: Vec<Piece<'_>>,
        ends_segment: bool,
    ) -> u64 {
        let shared = self.shared;
        let mut log = shared.log.borrow_mut();
        let mut queues = shared.queues.borrow_mut();
        assert_eq!(log.write, position, "checked at the written end");
        for piece in pieces {
            let landed = log
                .append_record(&bytes[piece.range.clone()], |_, _| {})
                .expect("checked to fit its segment");
            assert_eq!(
                landed,
                position + piece.range.start as u64,
                "no roll inside"
            );
            if let Some((topic, queue_id, offset)) = piece.queue {
                let queue =
                    crate::queues::queue_state(&mut queues, &shared.config, topic, queue_id);
                queue.next_offset = offset + 1;
            }
        }
        if ends_segment {
            log.end_segment().expect("spare checked");
        }
        log.write
    }
}

/// Which end of the log a [`LogBeyond`] waits on.
#[derive(Clone, Copy)]
enum LogEnd {
    Durable,
    Written,
}

/// See [`Store::wait_durable_beyond`](crate::Store::wait_durable_beyond) and
/// [`Store::wait_written_beyond`](crate::Store::wait_written_beyond).
pub struct LogBeyond {
    shared: Rc<Shared>,
    position: u64,
    end: LogEnd,
}

impl Future for LogBeyond {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let shared = &self.shared;
        let stopped = shared.closed.get() || shared.failure.borrow().is_some();
        let reached = {
            let log = shared.log.borrow();
            match self.end {
                LogEnd::Durable => log.durable,
                LogEnd::Written => log.write,
            }
        };
        if stopped || reached > self.position {
            return Poll::Ready(());
        }
        // Flushes wake durable waiters up to the new durable end, appends wake `appended`;
        // failure and abandonment wake all, shutdown wakes `closing`.
        match self.end {
            LogEnd::Durable => shared
                .durable_waiters
                .register(self.position.saturating_add(1), cx.waker()),
            LogEnd::Written => shared.appended.register(cx.waker()),
        }
        shared.closing.register(cx.waker());
        Poll::Pending
    }
}

/// Where the bytes of a read come from.
enum Source {
    Cache(Bytes),
    Disk(Rc<comet_rt::io::DirectFile>, u64, usize),
}

/// What one piece of a replicated append is.
enum PieceKind {
    EndMarker,
    Padding(usize),
    Record(usize),
}

/// What a piece's header says it is, when that is possible at `here` in a segment ending
/// at `segment_end`: the segment's end marker, padding or a record, with its log length.
enum Shape {
    EndMarker,
    Padding(u64),
    Record(u64),
}

/// The shape of the piece whose header starts `bytes` (at least 8 of them).
fn classify(bytes: &[u8], here: u64, segment_end: u64) -> Result<Shape, ReplicaFault> {
    let (size, magic) =
        peek_total_size_and_magic(bytes).ok_or(ReplicaFault::Cut { size: BLANK_BYTES })?;
    let length = u64::try_from(size).map_err(|_| ReplicaFault::Size { size })?;
    if magic == BLANK_MAGIC {
        if length >= BLANK_BYTES && here + length == segment_end {
            return Ok(Shape::EndMarker);
        }
        if is_padding(here, length, segment_end) {
            return Ok(Shape::Padding(length));
        }
        return Err(ReplicaFault::Blank { size });
    }
    if magic != MAGIC_V1 && magic != MAGIC_V2 {
        return Err(ReplicaFault::Magic {
            magic: u32::from_be_bytes(magic.to_be_bytes()),
        });
    }
    if length < comet_proto::message::RECORD_BYTES_MIN as u64 {
        return Err(ReplicaFault::Size { size });
    }
    if here + length + BLANK_BYTES > segment_end {
        // The sender kept the marker's room at another place: its segments differ.
        return Err(ReplicaFault::SegmentSize { segment_end });
    }
    Ok(Shape::Record(length))
}

/// The piece at the start of `rest` (log position `here`) of a replicated append: a
/// segment end marker alone as the last 8 bytes, padding whole and zero past its header,
/// or a whole record of a plausible size.
fn check_piece(rest: &[u8], here: u64, segment_end: u64) -> Result<PieceKind, ReplicaFault> {
    // An end marker travels alone as the last 8 bytes, padding travels whole: a lone
    // blank marker that does not end this segment ends the sender's segment elsewhere.
    let lone_blank = rest.len() as u64 == BLANK_BYTES
        && peek_total_size_and_magic(rest).is_some_and(|(_, magic)| magic == BLANK_MAGIC);
    match classify(rest, here, segment_end) {
        Ok(Shape::EndMarker) if rest.len() as u64 != BLANK_BYTES => {
            Err(ReplicaFault::AfterSegmentEnd)
        }
        Ok(Shape::EndMarker) => Ok(PieceKind::EndMarker),
        Ok(Shape::Padding(length)) if lone_blank && length > BLANK_BYTES => {
            Err(ReplicaFault::SegmentSize { segment_end })
        }
        Err(ReplicaFault::Blank { .. }) if lone_blank => {
            Err(ReplicaFault::SegmentSize { segment_end })
        }
        Ok(Shape::Padding(length)) => {
            let padding = rest
                .get(..to_index(length))
                .ok_or(ReplicaFault::Cut { size: length })?;
            check_padding(padding)?;
            Ok(PieceKind::Padding(to_index(length)))
        }
        Ok(Shape::Record(length)) if (rest.len() as u64) < length => {
            Err(ReplicaFault::Cut { size: length })
        }
        Ok(Shape::Record(length)) => Ok(PieceKind::Record(to_index(length))),
        Err(fault) => Err(fault),
    }
}

/// Padding is zero past its header.
fn check_padding(padding: &[u8]) -> Result<(), ReplicaFault> {
    if padding[to_index(BLANK_BYTES)..]
        .iter()
        .any(|&byte| byte != 0)
    {
        let size = i32::try_from(padding.len()).expect("padding is at most a page long");
        return Err(ReplicaFault::Blank { size });
    }
    Ok(())
}

/// Padding's shape (see `CommitLog::pad_to_page`): ends on a page, keeps room for the
/// segment's end marker, at most a page plus the marker.
fn is_padding(here: u64, length: u64, segment_end: u64) -> bool {
    let end = here + length;
    (BLANK_BYTES..=PADDING_BYTES_MAX).contains(&length)
        && end % PAGE_BYTES == 0
        && end + BLANK_BYTES <= segment_end
}

/// Parses a record and checks its body CRC and that its PHYSICALOFFSET is `physical`.
fn check_record(bytes: &[u8], physical: PhysicalOffset) -> Result<RecordView<'_>, ReplicaFault> {
    let view = RecordView::parse(bytes).map_err(ReplicaFault::Record)?;
    if !view.body_crc_matches() {
        return Err(ReplicaFault::BodyCrc);
    }
    if view.physical_offset() != physical.as_i64() {
        return Err(ReplicaFault::PhysicalOffset {
            found: view.physical_offset(),
            expected: physical.as_i64(),
        });
    }
    Ok(view)
}

/// The queue and offset a replicated record takes, after checking that its queue offset is
/// the queue's next (`pending` holds the next offsets of the records before it in the
/// call). A queue that holds nothing here may start anywhere: its older records were
/// deleted, or live in another log (queues move between logs when the shard count
/// changes). Records of queues this store does not own, and prepared or rolled-back
/// transaction records, take no queue offset.
fn next_queue_offset<'b>(
    view: &RecordView<'b>,
    queues: &crate::queues::Queues,
    pending: &mut HashMap<(&'b str, i32), u64>,
    config: &crate::config::StoreConfig,
) -> Result<Option<(&'b str, i32, u64)>, ReplicaFault> {
    let transaction = view.sysflag() & TRANSACTION_TYPE_MASK;
    let (topic, queue_id) = (view.topic(), view.queue_id());
    if transaction == TRANSACTION_PREPARED
        || transaction == TRANSACTION_ROLLBACK
        || !config.owns(topic, queue_id)
    {
        return Ok(None);
    }
    let key = (topic, queue_id);
    let expected = pending.get(&key).copied().or_else(|| {
        let queue = queues.get(topic)?.get(&queue_id)?;
        let next = queue.next_offset.max(queue.consume_queue.max_offset());
        (next > 0).then_some(next)
    });
    let found = view.queue_offset();
    let offset = match (u64::try_from(found), expected) {
        (Ok(offset), None) => offset,
        (Ok(offset), Some(expected)) if offset == expected => offset,
        (_, expected) => {
            return Err(ReplicaFault::QueueOffset {
                topic: topic.to_string(),
                queue_id,
                found,
                expected: expected.unwrap_or(0),
            })
        }
    };
    pending.insert(key, offset + 1);
    Ok(Some((topic, queue_id, offset)))
}

/// Cuts the bytes of a read at record boundaries (see [`Store::read_log`](crate::Store::read_log)).
struct ChunkReader {
    log_id: crate::offset::LogId,
    segment_end: u64,
    max_bytes: usize,
    /// Bytes read from disk: every record is verified, as any read from disk is.
    verify: bool,
}

impl ChunkReader {
    /// The whole records at the start of `bytes`, the log from `position`.
    fn cut(&self, bytes: &[u8], position: u64) -> Result<Cut, StoreError> {
        let mut cut = Cut {
            whole_bytes: 0,
            end: position,
            next_record_bytes: None,
        };
        loop {
            let rest = &bytes[cut.whole_bytes..];
            let here = cut.end;
            let first = cut.whole_bytes == 0;
            if rest.len() < to_index(BLANK_BYTES) {
                // Every piece is at least a marker long: the rest is not durable yet, or
                // beyond what was read, unless the segment ends first.
                if first && here + BLANK_BYTES > self.segment_end {
                    return Err(StoreError::NotRecordBoundary { position });
                }
                return Ok(cut);
            }
            let bad = |reason: String| {
                if first {
                    StoreError::NotRecordBoundary { position }
                } else {
                    StoreError::corrupt(format!("commitlog/{}", self.log_id), reason)
                }
            };
            let (length, travels) = match self.piece(rest, here) {
                Ok(piece) => piece,
                Err(reason) => return Err(bad(format!("log position {here}: {reason}"))),
            };
            if cut.whole_bytes + travels > self.max_bytes {
                cut.next_record_bytes = first.then_some(travels);
                return Ok(cut);
            }
            if rest.len() < travels {
                // Not durable yet (or beyond what was read).
                return Ok(cut);
            }
            if first || self.verify {
                if let Err(fault) = self.verify_piece(&rest[..travels], here) {
                    return Err(bad(format!("log position {here}: {fault}")));
                }
            }
            cut.whole_bytes += travels;
            cut.end = here + length;
            if cut.end == self.segment_end {
                return Ok(cut);
            }
        }
    }

    /// The log length of the piece at `here` and the bytes it travels as (an end marker
    /// covers the rest of the segment in 8 bytes).
    fn piece(&self, rest: &[u8], here: u64) -> Result<(u64, usize), ReplicaFault> {
        match classify(rest, here, self.segment_end)? {
            Shape::EndMarker => Ok((self.segment_end - here, to_index(BLANK_BYTES))),
            Shape::Padding(length) | Shape::Record(length) => Ok((length, to_index(length))),
        }
    }

    /// A record's own checks (the first one proves `here` is a record boundary: its
    /// PHYSICALOFFSET names it).
    fn verify_piece(&self, bytes: &[u8], here: u64) -> Result<(), ReplicaFault> {
        match classify(bytes, here, self.segment_end)? {
            Shape::EndMarker => Ok(()),
            Shape::Padding(_) => check_padding(bytes),
            Shape::Record(_) => {
                check_record(bytes, PhysicalOffset::new(self.log_id, here)).map(|_| ())
            }
        }
    }
}
