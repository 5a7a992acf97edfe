//! The queue tables: the state of each consume queue this store owns, and dispatch, which
//! turns one durable record into its consume-queue entry and key-index entries (shared by
//! the live dispatcher in `flush` and by `recovery`).

use std::collections::HashMap;
use std::path::PathBuf;

use comet_proto::message::RecordView;
use comet_rt::sync::WakerList;

use crate::config::StoreConfig;
use crate::consume_queue::{tag_code, ConsumeQueue, CqEntry};
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
/// the key index: the single place shared by the live dispatcher and recovery. Returns false
/// (nothing changed) when the record's queue offset does not continue its queue (a stale
/// record, for recovery).
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
    let owned = config.owns(view.topic(), view.queue_id());
    if owned && transaction != TRANSACTION_PREPARED && transaction != TRANSACTION_ROLLBACK {
        let queue = queue_state(queues, config, view.topic(), view.queue_id());
        let Ok(offset) = u64::try_from(view.queue_offset()) else {
            return false;
        };
        if offset < queue.consume_queue.max_offset() {
            // Recovery may rescan a record its queue already holds (a queue handed over and
            // back keeps entries of another log after it, so truncation stops above it).
            let held = queue.consume_queue.entry(offset);
            if held.is_none_or(|entry| entry.physical != physical) {
                return false;
            }
        } else {
            let entry = CqEntry {
                physical,
                size: u32::try_from(view.total_size()).expect("record size limit"),
                tag_code: consume_queue_tag(view, &found, config),
            };
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
    true
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
