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
//! A half queue's owner shard holds the set of resolved halves of the queues it owns (one
//! per shard thread, in [`STATE`]); END_TRANSACTION runs on the shard whose commit log
//! holds the half, which is that owner. A half is marked resolved before its decision is
//! appended, so a second decision arriving meanwhile is ignored.
//!
//! Crash between the committed message and its op record: the half is pending after the
//! restart; before checking it back, the checker looks for a committed message carrying the
//! half's offset in `PREPARED TRANSACTION OFFSET` under its `UNIQ_KEY` and, when found, only
//! writes the missing op record, so the message is not committed twice.

pub mod check;

use std::cell::RefCell;
use std::collections::HashSet;

use comet_proto::bytes::BytesMut;
use comet_proto::flags::message as message_sys_flag;
use comet_proto::headers::SendMessageRequestHeader;
use comet_proto::message::{encode_record, RecordSpec, RecordView};
use comet_proto::names::{TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC};
use comet_proto::properties::{names, Properties};
use comet_proto::{RemotingCommand, RequestCode};

use crate::delay_level::rewrite::{requested_level, retarget, send_keys, to_schedule, Rewritten};
use crate::shard::ShardBroker;
use crate::topic::HALF_QUEUES;

/// Tag of op records.
pub const OP_TAG: &str = "d";
/// The system group whose offset on the half queue is the checker's cursor.
pub const SYSTEM_GROUP: &str = "CID_RMQ_SYS_TRANS";

/// One half: its half queue and its offset there.
pub type HalfKey = (i32, i64);

/// Resolved halves of this shard's half queues.
#[derive(Default)]
pub struct TransactionState {
    resolved: HashSet<HalfKey>,
}

thread_local! {
    /// Per shard (one executor thread per shard), so no locking.
    pub static STATE: RefCell<TransactionState> = RefCell::new(TransactionState::default());
}

/// True when the half has a decision.
pub fn is_resolved(half: HalfKey) -> bool {
    STATE.with(|state| state.borrow().resolved.contains(&half))
}

/// Marks a half resolved; false when it already was.
pub fn mark_resolved(half: HalfKey) -> bool {
    STATE.with(|state| state.borrow_mut().resolved.insert(half))
}

/// Forgets a decision whose op record could not be stored, so the half is checked again.
pub fn unmark_resolved(half: HalfKey) {
    STATE.with(|state| state.borrow_mut().resolved.remove(&half));
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
}
