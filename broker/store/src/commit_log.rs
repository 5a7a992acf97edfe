//! The commit log of one shard: fixed-size preallocated segments written with direct I/O
//! from aligned in-memory chunks.
//!
//! ```text
//!  segment files   |00000000000000000000|00000000000001048576|0000...2097152 (spare)|
//!  records          [r0][r1][r2]...[rk][BLANK] [r k+1][r k+2]...
//!  positions        0 ............................... durable ..... write
//!  chunks (memory)        [ sealed ][ sealed ]     [ sealed ][  open   ]
//! ```
//!
//! Invariants (asserted where they are relied on):
//! - `dispatched <= durable <= write`: consumers see only durable records (the dispatcher
//!   builds consume-queue entries up to `durable`), and durable only moves forward.
//! - Chunks are ordered; inside one segment they are contiguous, and the first cached chunk
//!   of the segment holding `durable` starts at or before `align_down(durable)`, so a flush can
//!   always rebuild the partial tail page from memory (docs/style.md#commit-log-write-rules: the
//!   tail page is rewritten, never read-modify-written from disk).
//! - A chunk never spans segments; a record never spans chunks or segments. When a record plus
//!   the 8-byte end marker does not fit the rest of a segment, the marker (`maxBlank`,
//!   BLANK_MAGIC) ends it and the record goes to the next one (docs/protocol.md#commit-log-format).
//! - A blank marker that does not end its segment is padding (see [`CommitLog::pad_to_page`]):
//!   it ends on a page boundary, is at most a page plus the marker long, and is zero past its
//!   8-byte header. Readers skip it; it lets the next flush start on a page of its own.
//! - The next segment (the spare) is created and preallocated in the background before it is
//!   needed, so a roll never waits for the file system (docs/style.md#preallocated-segments).

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use comet_rt::io::{AlignedBuffer, DirectFile};

use crate::limits::PAGE_BYTES;
use crate::offset::{LogId, PhysicalOffset};
use crate::read_windows::ReadWindows;

/// Bytes of the end-of-segment marker.
pub(crate) const BLANK_BYTES: u64 = comet_proto::message::BLANK_MARKER_BYTES as u64;

/// Longest padding (see [`CommitLog::pad_to_page`]): a gap too short for the marker is
/// padded through the next page.
pub(crate) const PADDING_BYTES_MAX: u64 = PAGE_BYTES + BLANK_BYTES - 1;

/// The 8-byte blank marker covering `blank` bytes (`maxBlank`, then BLANK_MAGIC): the end of a
/// segment, or padding.
fn blank_marker(blank: u64) -> [u8; 8] {
    let blank = i32::try_from(blank).expect("segments are below 2 GiB per blank");
    let mut marker = [0u8; 8];
    marker[..4].copy_from_slice(&blank.to_be_bytes());
    marker[4..].copy_from_slice(&comet_proto::message::BLANK_MAGIC.to_be_bytes());
    marker
}

pub(crate) fn align_down(value: u64) -> u64 {
    value - value % PAGE_BYTES
}

pub(crate) fn align_up(value: u64) -> u64 {
    value.div_ceil(PAGE_BYTES) * PAGE_BYTES
}

/// One in-memory run of log bytes.
pub(crate) struct Chunk {
    start: u64,
    data: ChunkData,
}

enum ChunkData {
    /// Still appended to; readers get copies.
    Open(BytesMut),
    /// Full; readers get zero-copy slices.
    Sealed(Bytes),
}

impl Chunk {
    fn bytes(&self) -> &[u8] {
        match &self.data {
            ChunkData::Open(open) => open,
            ChunkData::Sealed(sealed) => sealed,
        }
    }

    fn end(&self) -> u64 {
        self.start + self.bytes().len() as u64
    }
}

/// The appender needs the spare segment (a roll) and it is not ready yet.
#[derive(Debug)]
pub(crate) struct NeedSpare;

/// One aligned write of a flush.
pub(crate) struct FlushWrite {
    pub(crate) file: Rc<DirectFile>,
    pub(crate) file_position: u64,
    pub(crate) buffer: AlignedBuffer,
}

/// What one flush writes, and the position it makes durable.
pub(crate) struct FlushPlan {
    pub(crate) target: u64,
    pub(crate) writes: Vec<FlushWrite>,
}

/// State of the commit log (see the module docs). Lives on one shard; mutated only by its
/// store.
pub(crate) struct CommitLog {
    pub(crate) dir: PathBuf,
    pub(crate) log_id: LogId,
    pub(crate) segment_bytes: u64,
    chunk_bytes: usize,
    read_cache_bytes: usize,
    pub(crate) segments: BTreeMap<u64, Rc<DirectFile>>,
    pub(crate) spare: Option<Rc<DirectFile>>,
    pub(crate) spare_creating: bool,
    pub(crate) write: u64,
    pub(crate) durable: u64,
    pub(crate) dispatched: u64,
    chunks: VecDeque<Chunk>,
    cached_bytes: usize,
    /// Windows of durable bytes read from disk, kept across pulls (see `read_windows`);
    /// here so that whatever changes the log below them drops them.
    pub(crate) read_windows: ReadWindows,
}

/// Sizes a [`CommitLog`] is built with.
pub(crate) struct CommitLogShape {
    pub(crate) dir: PathBuf,
    pub(crate) log_id: LogId,
    pub(crate) segment_bytes: u64,
    pub(crate) chunk_bytes: usize,
    pub(crate) read_cache_bytes: usize,
    pub(crate) read_window_cache_bytes: usize,
}

impl CommitLog {
    /// A log whose valid data ends at `end`; `tail_page` holds the bytes of
    /// `[align_down(end), end)` read back from disk (docs/style.md#commit-log-write-rules: read the
    /// tail page after a reopen, before the next append).
    pub(crate) fn new(
        shape: CommitLogShape,
        segments: BTreeMap<u64, Rc<DirectFile>>,
        end: u64,
        tail_page: &[u8],
    ) -> CommitLog {
        let tail_start = align_down(end);
        assert_eq!(tail_page.len() as u64, end - tail_start, "tail page length");
        assert!(segments.contains_key(&(end - end % shape.segment_bytes)));
        let mut open = BytesMut::with_capacity(shape.chunk_bytes);
        open.extend_from_slice(tail_page);
        let mut chunks = VecDeque::new();
        chunks.push_back(Chunk {
            start: tail_start,
            data: ChunkData::Open(open),
        });
        CommitLog {
            dir: shape.dir,
            log_id: shape.log_id,
            segment_bytes: shape.segment_bytes,
            chunk_bytes: shape.chunk_bytes,
            read_cache_bytes: shape.read_cache_bytes,
            segments,
            spare: None,
            spare_creating: false,
            write: end,
            durable: end,
            dispatched: end,
            chunks,
            cached_bytes: tail_page.len(),
            read_windows: ReadWindows::new(shape.read_window_cache_bytes),
        }
    }

    /// Start of the segment holding `position`.
    pub(crate) fn segment_start(&self, position: u64) -> u64 {
        position - position % self.segment_bytes
    }

    /// The physical offset of `position`.
    pub(crate) fn physical(&self, position: u64) -> PhysicalOffset {
        PhysicalOffset::new(self.log_id, position)
    }

    /// First position still on disk (start of the oldest segment).
    pub(crate) fn min_position(&self) -> u64 {
        self.segments
            .keys()
            .next()
            .copied()
            .unwrap_or(self.segment_start(self.write))
    }

    /// Start of the segment the spare becomes.
    pub(crate) fn spare_start(&self) -> u64 {
        self.segment_start(self.write) + self.segment_bytes
    }

    /// Whether records of `lengths` fit without a roll, need one (the spare must be ready),
    /// or need more than one (refused by the caller's size limit before this point).
    pub(crate) fn rolls_needed(&self, lengths: impl Iterator<Item = usize>) -> u32 {
        let mut position = self.write;
        let mut rolls = 0;
        for length in lengths {
            let length = length as u64;
            let end = self.segment_start(position) + self.segment_bytes;
            if position + length + BLANK_BYTES > end {
                position = end;
                rolls += 1;
            }
            position += length;
        }
        rolls
    }

    /// Appends one record, rolling to the spare if needed; `patch` gets the record's bytes in
    /// the chunk and its position (to fill in offsets). Returns the position.
    pub(crate) fn append_record(
        &mut self,
        record: &[u8],
        patch: impl FnOnce(&mut [u8], u64),
    ) -> Result<u64, NeedSpare> {
        let length = record.len() as u64;
        assert!(
            length + BLANK_BYTES <= self.segment_bytes,
            "record larger than a segment"
        );
        let segment_end = self.segment_start(self.write) + self.segment_bytes;
        if self.write + length + BLANK_BYTES > segment_end {
            self.roll(segment_end)?;
        }
        let position = self.write;
        let open = self.open_chunk_for(record.len());
        let at = open.len();
        open.extend_from_slice(record);
        patch(&mut open[at..], position);
        self.write += length;
        self.cached_bytes += record.len();
        assert!(self.write <= self.segment_start(position) + self.segment_bytes - BLANK_BYTES);
        Ok(position)
    }

    /// Ends the current segment with its end marker and continues in the spare (a replica
    /// does so where its master's log did). Returns the new written end.
    pub(crate) fn end_segment(&mut self) -> Result<u64, NeedSpare> {
        let segment_end = self.segment_start(self.write) + self.segment_bytes;
        self.roll(segment_end)?;
        Ok(self.write)
    }

    /// Ends the current segment with the blank marker and continues in the spare.
    fn roll(&mut self, segment_end: u64) -> Result<(), NeedSpare> {
        let spare = self.spare.take().ok_or(NeedSpare)?;
        let blank = segment_end - self.write;
        assert!(
            blank >= BLANK_BYTES,
            "a segment always keeps room for its end marker"
        );
        let marker = blank_marker(blank);
        let open = self.open_chunk_for(marker.len());
        open.extend_from_slice(&marker);
        self.cached_bytes += marker.len();
        self.seal_open_chunk();
        self.segments.insert(segment_end, spare);
        self.write = segment_end;
        self.chunks.push_back(Chunk {
            start: segment_end,
            data: ChunkData::Open(BytesMut::with_capacity(self.chunk_bytes)),
        });
        Ok(())
    }

    fn seal_open_chunk(&mut self) {
        let last = self
            .chunks
            .back_mut()
            .expect("one open chunk always exists");
        if let ChunkData::Open(open) = &mut last.data {
            let sealed = std::mem::take(open).freeze();
            last.data = ChunkData::Sealed(sealed);
        }
    }

    /// The open chunk, replaced by a fresh one first if `length` more bytes do not fit.
    fn open_chunk_for(&mut self, length: usize) -> &mut BytesMut {
        let full = match &self.chunks.back().expect("open chunk").data {
            ChunkData::Open(open) => open.capacity() - open.len() < length,
            ChunkData::Sealed(_) => true,
        };
        if full {
            self.seal_open_chunk();
            let capacity = self.chunk_bytes.max(length);
            self.chunks.push_back(Chunk {
                start: self.write,
                data: ChunkData::Open(BytesMut::with_capacity(capacity)),
            });
        }
        match &mut self.chunks.back_mut().expect("open chunk").data {
            ChunkData::Open(open) => open,
            ChunkData::Sealed(_) => unreachable!("just opened"),
        }
    }

    /// Pads the log to the next page boundary with a blank marker, so the flush planned next
    /// ends on a page and the one after it shares no page with it (two flushes may then be in
    /// flight, see `flush`). Returns the padding's length: 0 when the log is on a page already,
    /// the padding would be longer than `padding_bytes_max`, or it would leave no room for the
    /// segment's end marker.
    pub(crate) fn pad_to_page(&mut self, padding_bytes_max: u64) -> u64 {
        let mut padding = align_up(self.write) - self.write;
        if padding == 0 {
            return 0;
        }
        if padding < BLANK_BYTES {
            padding += PAGE_BYTES;
        }
        let segment_end = self.segment_start(self.write) + self.segment_bytes;
        if padding > padding_bytes_max || self.write + padding + BLANK_BYTES > segment_end {
            return 0;
        }
        assert!(padding <= PADDING_BYTES_MAX);
        let length = to_index(padding);
        let open = self.open_chunk_for(length);
        let at = open.len();
        open.extend_from_slice(&blank_marker(padding));
        open.resize(at + length, 0);
        self.write += padding;
        self.cached_bytes += length;
        padding
    }

    /// The writes that make `[from, target)` durable, or `None` when nothing past `from` is
    /// dirty. `from` is `durable` (the write starts on its page and rewrites it) or, while
    /// another flush is in flight, that flush's target, which is then on a page boundary. At
    /// most `flush_bytes_max` bytes of log are covered; the tail page is rewritten.
    pub(crate) fn plan_flush(&self, from: u64, flush_bytes_max: usize) -> Option<FlushPlan> {
        assert!(from >= self.durable && from <= self.write);
        assert!(
            from == self.durable || from % PAGE_BYTES == 0,
            "a flush never shares a page with one in flight"
        );
        if from == self.write {
            return None;
        }
        let from = align_down(from);
        let budget_end = from + flush_bytes_max as u64;
        let mut groups: Vec<(u64, u64, u64)> = Vec::new(); // (segment start, low, high)
        for chunk in self.chunks.iter().filter(|chunk| chunk.end() > from) {
            let low = chunk.start.max(from);
            let high = chunk.end().min(budget_end);
            if low >= high {
                break;
            }
            let segment = self.segment_start(chunk.start);
            match groups.last_mut() {
                Some(group) if group.0 == segment => {
                    assert_eq!(group.2, low, "chunks of a segment are contiguous");
                    group.2 = high;
                }
                _ => groups.push((segment, low, high)),
            }
        }
        let target = self.past_end_marker(groups.last().map(|group| group.2)?);
        assert!(target > from && target > self.durable && target <= self.write);
        let writes = groups
            .iter()
            .map(|&(segment, low, high)| self.flush_write(segment, low, high))
            .collect();
        Some(FlushPlan { target, writes })
    }

    /// `position`, or the end of its segment when it is the end of that segment's end
    /// marker: the rest of the segment holds nothing, so once the marker is durable the log
    /// is durable up to the segment's end. A log whose written end is a segment start then
    /// becomes durable there too (a replica rolls without a record behind the marker).
    fn past_end_marker(&self, position: u64) -> u64 {
        let segment_end = self.segment_start(position) + self.segment_bytes;
        // Chunks of a segment are contiguous and the last one ends with the end marker, so
        // a written position of an earlier segment that no chunk holds is past the marker.
        let ends_segment = position > self.segment_start(position)
            && segment_end <= self.write
            && self.cached_from(position).is_none();
        if ends_segment {
            segment_end
        } else {
            position
        }
    }

    fn flush_write(&self, segment: u64, low: u64, high: u64) -> FlushWrite {
        assert_eq!((low - segment) % PAGE_BYTES, 0, "a flush starts on a page");
        let file = Rc::clone(
            self.segments
                .get(&segment)
                .expect("segment of cached chunk"),
        );
        let length = usize::try_from(align_up(high - low)).expect("flush fits memory");
        // The chunks of a segment are contiguous (asserted by `plan_flush`), so the copies
        // cover `[low, high)` without a gap and only the padding past `high` needs zeros.
        let buffer = file.alloc_buffer_with(length, |target| {
            let mut copied_to = low;
            for chunk in self.chunks.iter() {
                let overlap_low = chunk.start.max(low);
                let overlap_high = chunk.end().min(high);
                if overlap_low >= overlap_high {
                    continue;
                }
                assert_eq!(overlap_low, copied_to, "flush range has no gap");
                let source = &chunk.bytes()[to_index(overlap_low - chunk.start)..]
                    [..to_index(overlap_high - overlap_low)];
                target[to_index(overlap_low - low)..][..source.len()].copy_from_slice(source);
                copied_to = overlap_high;
            }
            assert_eq!(copied_to, high, "flush range covered");
            to_index(high - low)
        });
        FlushWrite {
            file,
            file_position: low - segment,
            buffer,
        }
    }

    /// Takes back the written bytes past `to` (a replica's unconfirmed tail, see
    /// `replica`): the log ends at `to`, durable there, and its cache restarts with the page
    /// holding `to`, whose bytes below `to` are `tail_page` (as after a reopen). The caller
    /// made everything written durable first (no flush in flight), checked that `to` is a
    /// record boundary in the segment being written, and zeroed the disk past `to`.
    pub(crate) fn truncate_tail(&mut self, to: u64, tail_page: &[u8]) {
        assert!(
            to >= self.dispatched && to <= self.write,
            "truncates only undispatched bytes"
        );
        assert_eq!(self.durable, self.write, "nothing in flight");
        assert_eq!(
            self.segment_start(to),
            self.segment_start(self.write.saturating_sub(1).max(to)),
            "within the segment being written"
        );
        let tail_start = align_down(to);
        assert_eq!(tail_page.len() as u64, to - tail_start, "tail page length");
        let mut open = BytesMut::with_capacity(self.chunk_bytes);
        open.extend_from_slice(tail_page);
        self.chunks.clear();
        self.chunks.push_back(Chunk {
            start: tail_start,
            data: ChunkData::Open(open),
        });
        self.cached_bytes = tail_page.len();
        self.write = to;
        self.durable = to;
        // The bytes from `to` on are rewritten: no window may answer with the old ones.
        self.read_windows.drop_from(to);
    }

    /// Removes the oldest segment, which starts at `start` (retention deletes its file), and
    /// the read windows of its bytes. Returns its file.
    pub(crate) fn remove_oldest_segment(&mut self, start: u64) -> Option<Rc<DirectFile>> {
        assert_eq!(self.min_position(), start, "segments go oldest first");
        let file = self.segments.remove(&start)?;
        self.read_windows.drop_below(start + self.segment_bytes);
        Some(file)
    }

    /// Bytes of the cached chunk holding `position`, from `position` to the chunk's end.
    pub(crate) fn cached_from(&self, position: u64) -> Option<&[u8]> {
        let index = self.chunks.partition_point(|chunk| chunk.start <= position);
        let chunk = self.chunks.get(index.checked_sub(1)?)?;
        if position >= chunk.end() {
            return None;
        }
        Some(&chunk.bytes()[to_index(position - chunk.start)..])
    }

    /// Bytes the chunks hold allocated: the open chunk's whole buffer, the sealed ones'
    /// bytes (see `StoreMemory::log_chunks_bytes`).
    pub(crate) fn chunk_bytes_held(&self) -> usize {
        self.chunks
            .iter()
            .map(|chunk| match &chunk.data {
                ChunkData::Open(open) => open.capacity(),
                ChunkData::Sealed(sealed) => sealed.len(),
            })
            .sum()
    }

    /// `length` bytes at `position` from memory (zero-copy from sealed chunks), if cached.
    pub(crate) fn read_cached(&self, position: u64, length: usize) -> Option<Bytes> {
        let index = self.chunks.partition_point(|chunk| chunk.start <= position);
        let chunk = self.chunks.get(index.checked_sub(1)?)?;
        if position + length as u64 > chunk.end() {
            return None;
        }
        let from = to_index(position - chunk.start);
        match &chunk.data {
            ChunkData::Sealed(sealed) => Some(sealed.slice(from..from + length)),
            ChunkData::Open(open) => Some(Bytes::copy_from_slice(&open[from..from + length])),
        }
    }

    /// Up to `length` bytes from `position` to the end of the cached chunk holding it
    /// (zero-copy from sealed chunks), if cached.
    pub(crate) fn cached_span(&self, position: u64, length: usize) -> Option<Bytes> {
        let index = self.chunks.partition_point(|chunk| chunk.start <= position);
        let chunk = self.chunks.get(index.checked_sub(1)?)?;
        if position >= chunk.end() {
            return None;
        }
        let from = to_index(position - chunk.start);
        let to = from + length.min(to_index(chunk.end() - position));
        match &chunk.data {
            ChunkData::Sealed(sealed) => Some(sealed.slice(from..to)),
            ChunkData::Open(open) => Some(Bytes::copy_from_slice(&open[from..to])),
        }
    }

    /// Drops the oldest sealed chunks beyond the cache budget that no flush needs, nor
    /// dispatch unless `keep_undispatched` is false (dispatch then reads them from disk).
    pub(crate) fn evict(&mut self, keep_undispatched: bool) {
        let mut keep_from = align_down(self.durable);
        if keep_undispatched {
            keep_from = keep_from.min(self.dispatched);
        }
        while self.cached_bytes > self.read_cache_bytes && self.chunks.len() > 1 {
            let front = self.chunks.front().expect("non-empty");
            if front.end() > keep_from || matches!(front.data, ChunkData::Open(_)) {
                break;
            }
            self.cached_bytes -= front.bytes().len();
            self.chunks.pop_front();
        }
    }

    /// The segment holding `position`: its start and file.
    pub(crate) fn segment_of(&self, position: u64) -> Option<(u64, Rc<DirectFile>)> {
        let (start, file) = self.segments.range(..=position).next_back()?;
        if position >= start + self.segment_bytes {
            return None;
        }
        Some((*start, Rc::clone(file)))
    }
}

pub(crate) fn to_index(value: u64) -> usize {
    usize::try_from(value).expect("in-memory index fits usize")
}

#[cfg(test)]
mod tests {
    use super::*;
    use comet_rt::io::OpenMode;

    const SEGMENT_BYTES: u64 = 64 * 1024;

    async fn log_at(name: &str) -> CommitLog {
        let dir = std::env::var_os("COMET_TEST_DIR")
            .map_or_else(|| PathBuf::from("target/tmp/test-stores"), PathBuf::from)
            .join(format!("log-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("test dir");
        let file = DirectFile::open(&dir.join("segment"), OpenMode::CreateReadWrite, None)
            .await
            .expect("segment");
        let shape = CommitLogShape {
            dir,
            log_id: LogId::new(1).expect("id"),
            segment_bytes: SEGMENT_BYTES,
            chunk_bytes: 64 * 1024,
            read_cache_bytes: 1 << 20,
            read_window_cache_bytes: 0,
        };
        CommitLog::new(shape, BTreeMap::from([(0, Rc::new(file))]), 0, &[])
    }

    // Proves padding ends the log on the next page (through the following page when the gap
    // cannot hold the marker), is a blank marker zero past its header, never takes the room
    // of the segment's end marker, and that a flush behind it starts on a page of its own.
    #[test]
    fn padding_ends_the_log_on_a_page() {
        comet_rt::local::run_local("pad", async {
            let mut log = log_at("pad").await;
            assert_eq!(log.pad_to_page(u64::MAX), 0, "an empty log is on a page");
            log.append_record(&[7u8; 1000], |_, _| {}).expect("append");
            assert_eq!(log.pad_to_page(3095), 0, "longer than allowed");
            assert_eq!(log.pad_to_page(3096), 3096);
            assert_eq!(log.write, 4096);
            let padding = log.cached_from(1000).expect("cached");
            assert_eq!(&padding[..4], &3096i32.to_be_bytes());
            assert_eq!(
                &padding[4..8],
                &comet_proto::message::BLANK_MAGIC.to_be_bytes()
            );
            assert!(padding[8..3096].iter().all(|&byte| byte == 0));

            log.append_record(&[7u8; 4091], |_, _| {}).expect("append");
            assert_eq!(
                log.pad_to_page(u64::MAX),
                4096 + 5,
                "a 5-byte gap cannot hold the marker"
            );
            assert_eq!(log.write, 3 * 4096);

            log.durable = 4096;
            let plan = log.plan_flush(3 * 4096, 1 << 20);
            assert!(plan.is_none(), "nothing past the planned flush");
            log.append_record(&[7u8; 100], |_, _| {}).expect("append");
            let plan = log.plan_flush(3 * 4096, 1 << 20).expect("dirty");
            assert_eq!(plan.writes[0].file_position, 3 * 4096);
            assert_eq!(plan.target, 3 * 4096 + 100);

            let last_page = SEGMENT_BYTES - 4096;
            while log.write + 1000 + BLANK_BYTES <= last_page {
                log.append_record(&[7u8; 1000], |_, _| {}).expect("append");
            }
            log.append_record(&[7u8; 4096], |_, _| {}).expect("append");
            assert!(log.write > last_page);
            assert_eq!(
                log.pad_to_page(u64::MAX),
                0,
                "the segment's end marker keeps its room"
            );
        });
    }
}
