//! The queue tables: the state of each consume queue this store owns, dispatch, which
//! turns one durable record into its consume-queue entry and key-index entries (shared by
//! the live dispatcher in `flush` and by `recovery`), and reads of a queue's entries
//! through its hot tail, the store's block cache or its files.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::PathBuf;

use comet_proto::message::RecordView;
use comet_rt::sync::WakerList;

use crate::config::StoreConfig;
use crate::consume_queue::{tag_code, ConsumeQueue, CqEntry, Lookup};
use crate::cq_cache::CqCache;
use crate::error::StoreError;
use crate::index::KeyIndex;
use crate::offset::PhysicalOffset;

/// Name of the topic holding delayed messages (docs/protocol.md#delay-levels).
pub const SCHEDULE_TOPIC: &str = "SCHEDULE_TOPIC_XXXX";

/// MessageSysFlag transaction bits (docs/protocol.md#flag-words).
pub(crate) const TRANSACTION_TYPE_MASK: i32 = 0x3 << 2;
pub(crate) const TRANSACTION_PREPARED: i32 = 0x1 << 2;
pub(crate) const TRANSACTION_ROLLBACK: i32 = 0x3 << 2;

/// State of one queue owned by this store.
pub(crate) struct QueueState {
    /// Next queue offset to assign (includes records not yet durable).
    pub(crate) next_offset: u64,
    pub(crate) consume_queue: ConsumeQueue,
    /// Readers waiting for a new entry.
    pub(crate) arrivals: WakerList,
}

pub(crate) type Queues = HashMap<String, HashMap<i32, QueueState>>;

/// The state of (topic, queue_id), created empty on first use.
pub(crate) fn queue_state<'q>(
    queues: &'q mut Queues,
    config: &StoreConfig,
    topic: &str,
    queue_id: i32,
) -> &'q mut QueueState {
    if !queues.contains_key(topic) {
        queues.insert(topic.to_string(), HashMap::new());
    }
    let topic_queues = queues.get_mut(topic).expect("just inserted");
    topic_queues.entry(queue_id).or_insert_with(|| {
        let dir = queue_dir(config, topic, queue_id);
        QueueState {
            next_offset: 0,
            consume_queue: ConsumeQueue::new(dir, config.cq_entries_per_file),
            arrivals: WakerList::default(),
        }
    })
}

/// `consumequeue/<topic>/<queueId>`.
pub(crate) fn queue_dir(config: &StoreConfig, topic: &str, queue_id: i32) -> PathBuf {
    config
        .root
        .join("consumequeue")
        .join(topic)
        .join(queue_id.to_string())
}

/// Dispatches one durable record into its consume queue (if this store owns the queue) and
/// the key index: the single place shared by the live dispatcher and recovery. A record
/// whose queue already holds its offset (recovery rescanning a queue handed over and back,
/// checked by recovery before) only reaches the key index; returns false for it.
pub(crate) fn dispatch_record(
    view: &RecordView<'_>,
    position: u64,
    queues: &mut Queues,
    index: &mut KeyIndex,
    config: &StoreConfig,
) -> bool {
    let transaction = view.sysflag() & TRANSACTION_TYPE_MASK;
    let physical = PhysicalOffset::new(config.log_id, position);
    let found = DispatchProperties::scan(view);
    let mut continues = true;
    if let Some((offset, entry)) = queue_entry(view, &found, physical, config) {
        let queue = queue_state(queues, config, view.topic(), view.queue_id());
        continues = offset >= queue.consume_queue.max_offset();
        if continues {
            queue.consume_queue.push(offset, entry);
            queue.next_offset = queue.next_offset.max(offset + 1);
            // Wake long-polling readers of this queue (a no-op without waiters, as in
            // recovery).
            queue.arrivals.wake_all();
        }
    }
    if transaction != TRANSACTION_ROLLBACK {
        index_keys(view, &found, physical, index);
    }
    continues
}

/// The consume-queue entry of a record at `physical` and its queue offset: `None` for a
/// queue this store does not own, a prepared or rolled-back record, or a negative offset.
fn queue_entry(
    view: &RecordView<'_>,
    found: &DispatchProperties<'_>,
    physical: PhysicalOffset,
    config: &StoreConfig,
) -> Option<(u64, CqEntry)> {
    let transaction = view.sysflag() & TRANSACTION_TYPE_MASK;
    if transaction == TRANSACTION_PREPARED || transaction == TRANSACTION_ROLLBACK {
        return None;
    }
    if !config.owns(view.topic(), view.queue_id()) {
        return None;
    }
    let offset = u64::try_from(view.queue_offset()).ok()?;
    let entry = CqEntry {
        physical,
        size: u32::try_from(view.total_size()).expect("record size limit"),
        tag_code: consume_queue_tag(view, found, config),
    };
    Some((offset, entry))
}

/// [`queue_entry`] for a record recovery repairs one queue from.
pub(crate) fn repair_entry(
    view: &RecordView<'_>,
    physical: PhysicalOffset,
    config: &StoreConfig,
) -> Option<(u64, CqEntry)> {
    queue_entry(view, &DispatchProperties::scan(view), physical, config)
}

/// Entries of (topic, queue_id) from `from` on (at least one, at most `limit`), from the
/// hot tail or the block cache, or read from the queue's file (direct I/O, then cached);
/// `None` at or past the end, for an unknown queue, or below the oldest file. The second
/// value says whether the queue's file was read.
pub(crate) async fn read_entries(
    queues: &RefCell<Queues>,
    cache: &RefCell<CqCache>,
    (topic, queue_id): (&str, i32),
    from: u64,
    limit: u64,
) -> Result<(Option<Vec<CqEntry>>, bool), StoreError> {
    let cold = {
        let queues = queues.borrow();
        let Some(queue) = queues.get(topic).and_then(|queues| queues.get(&queue_id)) else {
            return Ok((None, false));
        };
        match queue
            .consume_queue
            .lookup(from, limit, &mut cache.borrow_mut())?
        {
            Lookup::End => return Ok((None, false)),
            Lookup::Entries(entries) => return Ok((Some(entries), false)),
            Lookup::Cold(block) => block,
        }
    };
    let bytes = cold.read().await?;
    let entries = cold.run(&bytes, from, limit)?;
    cache.borrow_mut().insert(cold.key, bytes);
    Ok((Some(entries), true))
}

/// [`read_entries`] for callers that cannot await (admin inspection): a block not cached is
/// read with a blocking positional read of at most 20 KiB.
pub(crate) fn read_entries_blocking(
    queue: &ConsumeQueue,
    cache: &mut CqCache,
    from: u64,
    limit: u64,
) -> Result<Option<Vec<CqEntry>>, StoreError> {
    match queue.lookup(from, limit, cache)? {
        Lookup::End => Ok(None),
        Lookup::Entries(entries) => Ok(Some(entries)),
        Lookup::Cold(block) => {
            let bytes = block.read_blocking()?;
            let entries = block.run(&bytes, from, limit)?;
            cache.insert(block.key, bytes);
            Ok(Some(entries))
        }
    }
}

/// The properties dispatch reads, found in one pass over the properties string (each
/// `view.property` lookup is a full scan; dispatch cost three per record). The last
/// occurrence of a name wins, as in `properties::get`.
#[derive(Default)]
struct DispatchProperties<'a> {
    unique_key: Option<&'a str>,
    keys: Option<&'a str>,
    tags: Option<&'a str>,
    delay_level: Option<&'a str>,
}

impl<'a> DispatchProperties<'a> {
    fn scan(view: &RecordView<'a>) -> DispatchProperties<'a> {
        use comet_proto::properties::{iter, names};
        let mut found = DispatchProperties::default();
        for (name, value) in iter(view.properties()) {
            match name {
                names::UNIQ_KEY => found.unique_key = Some(value),
                names::KEYS => found.keys = Some(value),
                names::TAGS => found.tags = Some(value),
                names::DELAY => found.delay_level = Some(value),
                _ => {}
            }
        }
        found
    }
}

fn index_keys(
    view: &RecordView<'_>,
    found: &DispatchProperties<'_>,
    physical: PhysicalOffset,
    index: &mut KeyIndex,
) {
    let time = view.store_timestamp();
    if let Some(unique) = found.unique_key {
        index.add(view.topic(), unique, physical, time);
    }
    if let Some(keys) = found.keys {
        for key in keys.split(' ').filter(|key| !key.is_empty()) {
            index.add(view.topic(), key, physical, time);
        }
    }
}

/// The tag field: the tag hash, or the due time on the schedule topic
/// (docs/protocol.md#delay-levels).
fn consume_queue_tag(
    view: &RecordView<'_>,
    found: &DispatchProperties<'_>,
    config: &StoreConfig,
) -> i64 {
    if view.topic() == SCHEDULE_TOPIC {
        let levels = config.delay_levels_ms.len();
        let level = found
            .delay_level
            .and_then(|level| level.trim().parse::<usize>().ok())
            .unwrap_or(1)
            .clamp(1, levels.max(1));
        let delay_ms = config.delay_levels_ms.get(level - 1).copied().unwrap_or(0);
        return view.store_timestamp().saturating_add(delay_ms);
    }
    found.tags.map_or(0, tag_code)
}
