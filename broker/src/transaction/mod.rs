//! Transactional messages
//! (docs/protocol.md#transaction-requests, docs/protocol.md#transactional-messages): half messages,
//! decisions, check-back.
//!
//! A send with `TRAN_MSG=true` and the PREPARED sysflag is stored rewritten ([`half_send`])
//! as a half message in a queue of `RMQ_SYS_TRANS_HALF_TOPIC` that the shard handling the
//! send owns ([`own_half_queue`]), which nobody subscribes to: the half is appended where
//! the request is, with no hop to another shard, and transactional load spreads over every
//! shard (Java keeps one half queue, 0; Comet's half topic has [`HALF_QUEUES`] queues so
//! every shard owns one). END_TRANSACTION (`crate::processor::end_transaction`) commits
//! (the real message is stored, then an op record) or rolls back (op record only). Op
//! records in the same-numbered queue of `RMQ_SYS_TRANS_OP_HALF_TOPIC` (tag `d`, body
//! `<half queue offset>,`) are the durable log of decisions; [`check`] replays them at
//! start-up, so a restart neither forgets a pending half nor resolves one twice.
//!
//! A half queue's owner shard holds what it knows of the decisions on the queues it owns (one
//! per shard thread, in [`STATE`]); END_TRANSACTION runs on the shard whose commit log
//! holds the half, which is that owner. A half is marked resolved before its decision is
//! appended, so a second decision arriving meanwhile is ignored.
//!
//! **Bounded by progress, not by what is retained** (as Java's `TransactionalMessageServiceImpl`
//! keeps a consume offset on the half queue and one on the op queue). Each half queue has a
//! *progress*: every half below it has a decision whose op record is durable. It is the
//! checker's `CID_RMQ_SYS_TRANS` offset on the half queue; next to it, in the same offsets
//! file, the checker keeps its offset on the op queue: no op record below it names a half at
//! or above the progress. The decision set holds only halves at or above the progress and is
//! pruned as the progress moves, so it holds the decisions taken while an older half is still
//! pending (about `transactionTimeOut` of decisions, or a pending half's longer
//! `CHECK_IMMUNITY_TIME_IN_SECONDS`: the checker waits at it), whatever the queues retain; a
//! restart reads op records from the op queue offset only.
//!
//! Crash between the committed message and its op record: the half is pending after the
//! restart; before checking it back, the checker looks for a committed message carrying the
//! half's offset in `PREPARED TRANSACTION OFFSET` under its `UNIQ_KEY` and, when found, only
//! writes the missing op record, so the message is not committed twice.

pub mod check;

use std::cell::RefCell;
use std::collections::HashMap;

use comet_proto::bytes::BytesMut;
use comet_proto::flags::message as message_sys_flag;
use comet_proto::headers::SendMessageRequestHeader;
use comet_proto::message::{encode_record, RecordSpec, RecordView};
use comet_proto::names::{TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC};
use comet_proto::properties::{names, Properties};
use comet_proto::{RemotingCommand, RequestCode};

use crate::delay_level::rewrite::{requested_level, retarget, send_keys, to_schedule, Rewritten};
use crate::metrics::CheckerFigures;
use crate::shard::ShardBroker;
use crate::topic::HALF_QUEUES;

/// Tag of op records.
pub const OP_TAG: &str = "d";
/// The system group whose offsets on a half queue (its progress) and on its op queue are the
/// checker's.
pub const SYSTEM_GROUP: &str = "CID_RMQ_SYS_TRANS";

/// One half: its half queue and its offset there.
pub type HalfKey = (i32, i64);

/// What one shard knows of the decisions on one of its half queues.
#[derive(Debug, Default)]
struct HalfQueue {
    /// Every half below has a decision with a durable op record (the checker's cursor).
    progress: i64,
    /// Halves at or above `progress` with a decision: `Some(op offset)` once its op record
    /// was read back from the op queue (so it is durable), `None` while it is being stored.
    resolved: HashMap<i64, Option<i64>>,
}

/// The decisions of this shard's half queues, and what the checker did since start-up.
#[derive(Debug, Default)]
pub struct TransactionState {
    queues: HashMap<i32, HalfQueue>,
    op_records_read: u64,
    check_passes: u64,
}

thread_local! {
    /// Per shard (one executor thread per shard), so no locking.
    pub static STATE: RefCell<TransactionState> = RefCell::new(TransactionState::default());
}

impl TransactionState {
    fn is_resolved(&self, (queue_id, offset): HalfKey) -> bool {
        self.queues
            .get(&queue_id)
            .is_some_and(|queue| offset < queue.progress || queue.resolved.contains_key(&offset))
    }

    fn mark_resolved(&mut self, (queue_id, offset): HalfKey) -> bool {
        let queue = self.queues.entry(queue_id).or_default();
        if offset < queue.progress || queue.resolved.contains_key(&offset) {
            return false;
        }
        queue.resolved.insert(offset, None);
        true
    }

    fn unmark_resolved(&mut self, (queue_id, offset): HalfKey) {
        if let Some(queue) = self.queues.get_mut(&queue_id) {
            if queue.resolved.get(&offset) == Some(&None) {
                queue.resolved.remove(&offset);
            }
        }
    }

    fn record_op(&mut self, (queue_id, offset): HalfKey, op_offset: i64) {
        let queue = self.queues.entry(queue_id).or_default();
        if offset < queue.progress {
            return;
        }
        let entry = queue.resolved.entry(offset).or_insert(None);
        if entry.is_none() {
            *entry = Some(op_offset);
        }
    }

    fn is_durable(&self, (queue_id, offset): HalfKey) -> bool {
        self.queues.get(&queue_id).is_some_and(|queue| {
            offset < queue.progress || matches!(queue.resolved.get(&offset), Some(Some(_)))
        })
    }

    fn advance(&mut self, queue_id: i32, progress: i64, ops_read_to: i64) -> i64 {
        let queue = self.queues.entry(queue_id).or_default();
        assert!(
            progress >= queue.progress,
            "half queue {queue_id} progress moving back from {} to {progress}",
            queue.progress
        );
        queue.progress = progress;
        queue.resolved.retain(|offset, _| *offset >= progress);
        queue
            .resolved
            .values()
            .flatten()
            .copied()
            .min()
            .map_or(ops_read_to, |oldest| oldest.min(ops_read_to))
    }

    fn figures(&self) -> CheckerFigures {
        CheckerFigures {
            op_records_read: self.op_records_read,
            check_passes: self.check_passes,
            resolved_halves: self
                .queues
                .values()
                .map(|queue| queue.resolved.len() as u64)
                .sum(),
        }
    }
}

/// True when the half has a decision (below its queue's progress, or in the decision set).
pub fn is_resolved(half: HalfKey) -> bool {
    STATE.with(|state| state.borrow().is_resolved(half))
}

/// Marks a half resolved; false when it already was.
pub fn mark_resolved(half: HalfKey) -> bool {
    STATE.with(|state| state.borrow_mut().mark_resolved(half))
}

/// Forgets a decision whose op record could not be stored, so the half is checked again.
pub fn unmark_resolved(half: HalfKey) {
    STATE.with(|state| state.borrow_mut().unmark_resolved(half));
}

/// Records an op record read back from the op queue at `op_offset`, naming `half`.
pub fn record_op(half: HalfKey, op_offset: i64) {
    STATE.with(|state| state.borrow_mut().record_op(half, op_offset));
}

/// True when the half's decision is known durable: its op record was read back (or the
/// half is below its queue's progress).
pub fn is_durable(half: HalfKey) -> bool {
    STATE.with(|state| state.borrow().is_durable(half))
}

/// The progress of a half queue as this shard holds it.
pub fn progress(queue_id: i32) -> i64 {
    STATE.with(|state| {
        state
            .borrow()
            .queues
            .get(&queue_id)
            .map_or(0, |queue| queue.progress)
    })
}

/// Starts a half queue's state afresh at its persisted progress (the checker's start, before
/// the shard serves): what an earlier run of the shard on this thread knew is rebuilt from
/// the op records.
pub fn load_progress(queue_id: i32, progress: i64) {
    STATE.with(|state| {
        let queue = HalfQueue {
            progress,
            resolved: HashMap::new(),
        };
        state.borrow_mut().queues.insert(queue_id, queue);
    });
}

/// Moves a half queue's progress up to `progress` (every half below has a durable decision)
/// and forgets the decisions below it; returns the op queue offset to persist with it: the
/// oldest op record still naming a half at or above the progress, or `ops_read_to` (the
/// next op record to read) when none does.
pub fn advance(queue_id: i32, progress: i64, ops_read_to: i64) -> i64 {
    STATE.with(|state| state.borrow_mut().advance(queue_id, progress, ops_read_to))
}

/// Counts op records the checker read back.
pub fn count_op_records(records: u64) {
    STATE.with(|state| state.borrow_mut().op_records_read += records);
}

/// Counts one completed pass of the checker.
pub fn count_pass() {
    STATE.with(|state| state.borrow_mut().check_passes += 1);
}

/// What this shard's checker did since start-up.
pub fn checker_figures() -> CheckerFigures {
    STATE.with(|state| state.borrow().figures())
}

/// The topic whose owner keeps a consumer offset of `topic` (loading the offsets files):
/// the checker's offset on an op queue lives with its half queue's owner, which runs the
/// checker, in the same file as the half queue's offset, so the two are persisted together.
pub fn offset_owner_topic(topic: &str) -> &str {
    if topic == TRANS_OP_HALF_TOPIC {
        TRANS_HALF_TOPIC
    } else {
        topic
    }
}

/// The half queues this shard owns (queue 0, Java's only one, among them on some shard:
/// halves stored before the topic had more queues are checked there).
pub fn owned_half_queues(broker: &ShardBroker) -> Vec<i32> {
    (0..HALF_QUEUES)
        .filter(|queue_id| broker.owns(TRANS_HALF_TOPIC, *queue_id))
        .collect()
}

/// The half queue this shard stores new halves in: the first it owns (queue 0 when it owns
/// none, which only more shards than [`HALF_QUEUES`] would cause).
pub fn own_half_queue(broker: &ShardBroker) -> i32 {
    owned_half_queues(broker).first().copied().unwrap_or(0)
}

/// Rewrites a prepared transactional send to a half message; `None` for other sends.
pub fn half_send(
    broker: &ShardBroker,
    request: &mut RemotingCommand,
    header: &SendMessageRequestHeader,
    queue_id: i32,
) -> Option<Rewritten> {
    if request.request_code() == RequestCode::SEND_BATCH_MESSAGE {
        return None;
    }
    let transaction = message_sys_flag::transaction_type(header.sys_flag);
    let mut properties = Properties::decode(header.properties.as_deref().unwrap_or(""));
    let is_half = properties.get(names::TRAN_MSG) == Some("true")
        && transaction == message_sys_flag::TRANSACTION_PREPARED_TYPE;
    if !is_half {
        return None;
    }
    let unique_key = match properties.get(names::UNIQ_KEY) {
        Some(key) => key.to_owned(),
        None => {
            let key = broker.unique_key(comet_rt::clock::wall_clock_ms());
            properties.insert(names::UNIQ_KEY, key.clone());
            key
        }
    };
    properties.insert(names::REAL_TOPIC, header.topic.clone());
    properties.insert(names::REAL_QID, queue_id.to_string());
    properties.insert(names::TRANSACTION_ID, unique_key);
    let rewritten = Rewritten {
        topic: TRANS_HALF_TOPIC.to_owned(),
        queue_id: own_half_queue(broker),
    };
    retarget(request, &rewritten, &properties);
    let sys_flag = message_sys_flag::with_transaction_type(
        header.sys_flag,
        message_sys_flag::TRANSACTION_NOT_TYPE,
    );
    let sys_flag_key = if send_keys(request.request_code()).0 == "b" {
        "f"
    } else {
        "sysFlag"
    };
    request
        .ext_fields
        .insert(sys_flag_key, sys_flag.to_string());
    Some(rewritten)
}

/// The op record resolving `half`, for the op queue numbered as its half queue.
pub fn op_record(broker: &ShardBroker, half: HalfKey) -> BytesMut {
    let (half_queue_id, half_queue_offset) = half;
    let mut properties = Properties::new();
    properties.insert(names::TAGS, OP_TAG);
    let properties = properties.encode();
    let body = format!("{half_queue_offset},");
    let spec = RecordSpec {
        topic: TRANS_OP_HALF_TOPIC,
        queue_id: half_queue_id,
        flag: 0,
        sysflag: 0,
        born_timestamp: comet_rt::clock::wall_clock_ms(),
        born_host: broker.store_host(),
        store_host: broker.store_host(),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: body.as_bytes(),
        properties: &properties,
    };
    let mut record = BytesMut::new();
    encode_record(&spec, 0, 0, 0, &mut record).expect("op records are small");
    record
}

/// Half queue offsets named by an op record body (`"12,"`, `"12,13,"` or a bare `"12"`).
pub fn op_offsets(body: &[u8]) -> Vec<i64> {
    String::from_utf8_lossy(body)
        .split(',')
        .filter_map(|item| item.trim().parse().ok())
        .collect()
}

/// The committed message of a half: real topic and queue, `REAL_*` and `TRAN_MSG` removed,
/// COMMIT type, `PREPARED TRANSACTION OFFSET` = the half's physical offset; a `DELAY` still
/// goes through the schedule topic. `None` when the half lacks its real topic.
pub fn committed_record(
    broker: &ShardBroker,
    half: &RecordView<'_>,
    level_count: usize,
) -> Option<BytesMut> {
    let mut properties = Properties::decode(half.properties());
    let topic = properties.remove(names::REAL_TOPIC)?;
    let queue_id: i32 = properties.remove(names::REAL_QID)?.trim().parse().ok()?;
    properties.remove(names::TRAN_MSG);
    properties.remove(names::TRANSACTION_CHECK_TIMES);
    let sysflag = message_sys_flag::with_transaction_type(
        half.sysflag(),
        message_sys_flag::TRANSACTION_COMMIT_TYPE,
    );
    let destination = match requested_level(sysflag, &properties) {
        Some(level) => to_schedule(&mut properties, &topic, queue_id, level, level_count),
        None => Rewritten { topic, queue_id },
    };
    let properties = properties.encode();
    let spec = RecordSpec {
        topic: &destination.topic,
        queue_id: destination.queue_id,
        flag: half.flag(),
        sysflag,
        born_timestamp: half.born_timestamp(),
        born_host: half.born_host(),
        store_host: broker.store_host(),
        reconsume_times: half.reconsume_times(),
        prepared_transaction_offset: half.physical_offset(),
        body: half.body(),
        properties: &properties,
    };
    let mut record = BytesMut::new();
    encode_record(&spec, 0, 0, 0, &mut record).ok()?;
    Some(record)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves op bodies in the 4.x (bare) and 5.x (comma list) forms are read, junk skipped.
    #[test]
    fn op_bodies() {
        assert_eq!(op_offsets(b"12,"), vec![12]);
        assert_eq!(op_offsets(b"12,13,"), vec![12, 13]);
        assert_eq!(op_offsets(b"7"), vec![7]);
        assert_eq!(op_offsets(b"x,"), Vec::<i64>::new());
    }

    // Proves the decision set is bounded by the progress: a decision is held until the
    // progress passes it, then dropped yet still counts as taken; the op queue offset to
    // persist is the oldest op record naming a half at or above the progress, else the next
    // op record to read; a claim whose op record is not read back is not durable.
    #[test]
    fn decisions_below_the_progress_are_dropped_and_still_taken() {
        let mut state = TransactionState::default();
        assert!(state.mark_resolved((3, 0)));
        assert!(!state.mark_resolved((3, 0)), "a second decision");
        assert!(state.is_resolved((3, 0)) && !state.is_durable((3, 0)));
        state.record_op((3, 0), 7);
        state.record_op((3, 1), 8);
        state.record_op((3, 2), 9);
        assert!(state.is_durable((3, 0)) && state.is_durable((3, 2)));
        assert_eq!(state.figures().resolved_halves, 3);
        // Halves 0 and 1 passed; 2 still held: op records from 9 on are needed.
        assert_eq!(state.advance(3, 2, 10), 9);
        assert_eq!(state.figures().resolved_halves, 1);
        assert!(state.is_resolved((3, 1)) && state.is_durable((3, 1)));
        assert!(
            !state.mark_resolved((3, 1)),
            "a decision below the progress"
        );
        // An op record read again below the progress adds nothing.
        state.record_op((3, 0), 7);
        assert_eq!(state.figures().resolved_halves, 1);
        // A claim not read back holds no op offset: the next op record to read is kept.
        assert!(state.mark_resolved((3, 5)));
        assert_eq!(state.advance(3, 3, 12), 12);
        assert_eq!(state.figures().resolved_halves, 1);
        state.unmark_resolved((3, 5));
        assert!(!state.is_resolved((3, 5)));
        assert!(!state.is_resolved((4, 0)), "queues are apart");
    }
}
