//! Reads of a queue through a SQL92 selector (docs/protocol.md#sql92-property-filters), for
//! pulls and pops alike: the store reads every record, and the selector, evaluated against
//! each record's properties, keeps those it matches.
//!
//! As Java's store, a read counts only the records kept against its count and byte budget,
//! and moves past the ones it drops: a read that matches nothing still reports how far it
//! got (`NoMatchedMessage` with its next offset), so a consumer never reads the same
//! non-matching records twice. Each store read asks for at least [`SCAN_RECORDS_MIN`]
//! records, so a selective filter behind a small count still gets far per read, and at most
//! [`READ_ROUNDS_MAX`] store reads are made.

use comet_proto::bytes::Bytes;
use comet_proto::message::RecordView;
use comet_proto::sql92::Selector;
use comet_store::{GetResult, GetStatus, MessageFilter, QueueOffset, Store, StoreError};

/// Most store reads one selected read makes; past it the read answers what it kept (or
/// `NoMatchedMessage` with the offset reached) and the consumer asks again.
pub const READ_ROUNDS_MAX: usize = 16;
/// Fewest records one store read of a selected read asks for, whatever fewer are still
/// wanted: records past the ones kept are read again by the next read.
pub const SCAN_RECORDS_MIN: usize = 32;

/// Which queue and how much of it.
#[derive(Clone, Copy, Debug)]
pub struct Wanted<'a> {
    /// The queue's topic.
    pub topic: &'a str,
    /// The queue id.
    pub queue_id: i32,
    /// Where to start.
    pub offset: QueueOffset,
    /// Most records kept.
    pub max_count: usize,
    /// Most bytes kept (the first record kept always is, as a plain read returns one).
    pub max_bytes: usize,
}

/// Reads from `wanted.offset` and keeps the records `selector` matches, reading on until
/// `max_count` records or `max_bytes` are kept, the queue ends or [`READ_ROUNDS_MAX`] reads
/// were made. The answer's next offset is past every record dropped and before the first
/// matching record left out, so nothing matching is lost and nothing dropped is read again.
/// A first read that finds nothing to read (end of the queue, an offset outside it) is
/// answered as the store answered it.
pub async fn read_selected(
    store: &Store,
    selector: &Selector,
    wanted: Wanted<'_>,
) -> Result<GetResult, StoreError> {
    let Wanted {
        topic,
        queue_id,
        mut offset,
        max_count,
        max_bytes,
    } = wanted;
    let max_count = max_count.max(1);
    let mut kept: Option<GetResult> = None;
    let mut kept_bytes = 0usize;
    for _ in 0..READ_ROUNDS_MAX {
        let kept_count = kept.as_ref().map_or(0, |kept| kept.records.len());
        if kept_count >= max_count || kept_bytes >= max_bytes {
            break;
        }
        let mut result = store
            .get_messages(
                topic,
                queue_id,
                offset,
                (max_count - kept_count).max(SCAN_RECORDS_MIN),
                max_bytes - kept_bytes,
                MessageFilter::All,
            )
            .await?;
        if !matches!(
            result.status,
            GetStatus::Found | GetStatus::NoMatchedMessage
        ) {
            // The end of the queue (or an offset problem): answer it, unless earlier reads
            // already moved past records.
            match kept {
                None => return Ok(result),
                Some(_) => break,
            }
        }
        result.records.retain(|record| selected(selector, record));
        // A kept record never pushes the read past its count, nor past its byte budget
        // (except the very first, as a plain read always returns one).
        let mut fits = 0;
        for record in &result.records {
            let kept_now = kept_count + fits;
            if kept_now >= max_count || (kept_now > 0 && kept_bytes + record.len() > max_bytes) {
                break;
            }
            kept_bytes += record.len();
            fits += 1;
        }
        let full = fits < result.records.len();
        if full {
            // What does not fit is read again by the next read, from the first left out.
            let first_left = RecordView::parse(&result.records[fits])
                .expect("a kept record parsed in `selected`")
                .queue_offset();
            result.records.truncate(fits);
            result.next_offset = QueueOffset(u64::try_from(first_left).unwrap_or(0));
        }
        offset = result.next_offset;
        kept = Some(match kept {
            None => result,
            Some(mut earlier) => {
                earlier.records.append(&mut result.records);
                earlier.next_offset = result.next_offset;
                earlier.min_offset = result.min_offset;
                earlier.max_offset = result.max_offset;
                earlier
            }
        });
        if full {
            break;
        }
    }
    let mut kept = kept.expect("the first read round always runs");
    kept.status = if kept.records.is_empty() {
        GetStatus::NoMatchedMessage
    } else {
        GetStatus::Found
    };
    Ok(kept)
}

/// Whether the stored record's properties satisfy `selector`; a record that does not parse
/// is not delivered through a selector.
fn selected(selector: &Selector, record: &Bytes) -> bool {
    match RecordView::parse(record) {
        Ok(view) => selector.matches(|name| view.property(name)),
        Err(e) => {
            log::warn!("record skipped by a SQL92 selector: {e}");
            false
        }
    }
}
