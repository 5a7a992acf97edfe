//! The check-back service: on each shard, for each half queue it owns, every
//! `transactionCheckInterval` it reads the op records of that queue appended since its last
//! read, then walks the half queue from its progress (`super` explains the progress and the
//! two offsets persisted with the shard's consumer offsets), moves the progress over the
//! halves whose op record it has read back, and persists both offsets. After a restart it
//! reads op records from the persisted op queue offset, not from the queue's start. A
//! pending half older than `transactionTimeOut` (or its `CHECK_IMMUNITY_TIME_IN_SECONDS`) is:
//! * resolved quietly when its committed message is found (crash between commit and op);
//! * discarded to `TRANS_CHECK_MAX_TIME_TOPIC` after `transactionCheckMax` checks;
//! * otherwise re-appended with `TRANSACTION_CHECK_TIMES` + 1 (the old copy gets an op
//!   record, so a late decision naming it is ignored) and CHECK_TRANSACTION_STATE is sent
//!   one-way to a live producer connection of its `PGROUP`, naming the new copy.

use std::rc::Rc;
use std::time::Duration;

use comet_net::ConnectionId;
use comet_proto::bytes::{Bytes, BytesMut};
use comet_proto::headers::{CheckTransactionStateRequestHeader, PullMessageRequestHeader};
use comet_proto::message::{decode_records, encode_record, RecordError, RecordSpec, RecordView};
use comet_proto::message_id::encode_offset_msg_id;
use comet_proto::names::{TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC};
use comet_proto::properties::{names, Properties};
use comet_proto::{RemotingCommand, RequestCode, ResponseCode};
use comet_rt::shutdown::StopSignal;
use comet_rt::task_class::{spawn, timeout, TaskClass, TaskHandle};
use comet_store::{AppendedRecord, GetStatus, MessageFilter, QueueOffset, StoreError};

use super::{
    is_durable, is_resolved, mark_resolved, op_offsets, op_record, owned_half_queues, record_op,
    unmark_resolved, HalfKey, SYSTEM_GROUP,
};
use crate::reappend::{append_on_owners, ReappendError};
use crate::routing::{call_owner, messages_by_key};
use crate::shard::ShardBroker;

/// Half records read per store read.
const READ_RECORDS_MAX: usize = 256;

/// Starts the checker when this shard owns a half queue; it ends after `stop`.
pub fn spawn_checker(broker: &Rc<ShardBroker>, stop: &StopSignal) -> Option<TaskHandle<()>> {
    let queues = owned_half_queues(broker);
    if queues.is_empty() {
        return None;
    }
    // Before any decision is taken here: a decision for a half below the progress is one
    // for a half already resolved.
    let mut op_cursors = Vec::with_capacity(queues.len());
    for queue_id in &queues {
        let offsets = broker.offsets().borrow();
        let progress = offsets.query(SYSTEM_GROUP, TRANS_HALF_TOPIC, *queue_id);
        super::load_progress(*queue_id, progress.unwrap_or(0).max(0));
        let op_offset = offsets.query(SYSTEM_GROUP, TRANS_OP_HALF_TOPIC, *queue_id);
        op_cursors.push(op_offset.unwrap_or(0).max(0));
    }
    let broker = broker.clone();
    let stop = stop.clone();
    Some(spawn(TaskClass::Housekeeping, async move {
        let interval =
            Duration::from_millis(broker.config().transaction_check_interval_ms.max(100));
        while !stop.is_triggered() {
            for (queue_id, op_cursor) in queues.iter().zip(op_cursors.iter_mut()) {
                *op_cursor = replay_ops(&broker, *queue_id, *op_cursor).await;
                if let Err(e) = check_halves(&broker, *queue_id, *op_cursor).await {
                    log::warn!("transaction check of half queue {queue_id} failed: {e}");
                }
            }
            super::count_pass();
            let _ = timeout(interval, stop.wait()).await;
        }
    }))
}

/// Reads op records of `queue_id` from `cursor` (on the op queue's owner) and records the
/// halves they name; returns the next op offset.
async fn replay_ops(broker: &ShardBroker, queue_id: i32, mut cursor: i64) -> i64 {
    loop {
        let header = PullMessageRequestHeader {
            consumer_group: SYSTEM_GROUP.into(),
            topic: TRANS_OP_HALF_TOPIC.into(),
            queue_id,
            queue_offset: cursor,
            max_msg_nums: 1024,
            sys_flag: 4,
            commit_offset: 0,
            suspend_timeout_millis: 0,
            subscription: Some("*".into()),
            sub_version: 0,
            expression_type: None,
            max_msg_bytes: Some(4 * 1024 * 1024),
            request_source: None,
            proxy_froward_client_id: None,
            broker_name: None,
            logical: None,
        };
        let request = RemotingCommand::request(RequestCode::PULL_MESSAGE, 0).with_header(&header);
        let Some(response) = call_owner(broker, TRANS_OP_HALF_TOPIC, queue_id, request).await
        else {
            return cursor;
        };
        let next = response
            .ext_fields
            .optional_i64("nextBeginOffset")
            .ok()
            .flatten();
        match (response.response_code(), next) {
            (ResponseCode::SUCCESS, _) => {}
            // Below the queue's first record (retention removed the op records there) or
            // past its end (the queue was reset): read from where the owner says.
            (ResponseCode::PULL_OFFSET_MOVED, Some(next)) if next != cursor => {
                log::warn!("transaction op queue {queue_id}: offset {cursor} moved to {next}");
                cursor = next;
                continue;
            }
            (ResponseCode::PULL_RETRY_IMMEDIATELY, Some(next)) if next > cursor => {
                cursor = next;
                continue;
            }
            _ => return cursor,
        }
        let messages = decode_records(response.body.clone());
        super::count_op_records(messages.len() as u64);
        for message in messages {
            for offset in op_offsets(&message.body) {
                record_op((queue_id, offset), message.queue_offset);
            }
        }
        match next {
            Some(next) if next > cursor => cursor = next,
            _ => return cursor,
        }
    }
}

/// Why a pass over the pending halves stopped early (the next pass retries).
#[derive(Debug, thiserror::Error)]
enum CheckError {
    /// The half queue could not be read, or a half could not be stored again.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A half or its replacement does not parse.
    #[error("unreadable half: {0}")]
    Record(#[from] RecordError),
    /// The discard topic was created but could not be persisted.
    #[error("cannot persist {TRANS_CHECK_MAX_TIME_TOPIC}: {0}")]
    PersistTopic(#[source] std::io::Error),
    /// A replacement or an op record was not stored on its owner.
    #[error(transparent)]
    Reappend(#[from] ReappendError),
}

/// Walks the half queue from its progress, checking the due pending halves, then moves the
/// progress over the halves with a durable decision and persists it with the op queue
/// offset (`ops_read_to`: the next op record to read).
async fn check_halves(
    broker: &ShardBroker,
    queue_id: i32,
    ops_read_to: i64,
) -> Result<(), CheckError> {
    let store = broker.queue_store(TRANS_HALF_TOPIC, queue_id);
    // Halves below the queue's first one were removed by retention: nothing to decide.
    let first = store.min_offset(TRANS_HALF_TOPIC, queue_id).as_i64();
    let start = super::progress(queue_id).max(first);
    let end = store.max_offset(TRANS_HALF_TOPIC, queue_id).as_i64();
    let mut cursor = start;
    let mut contiguous = true;
    let now_ms = comet_rt::clock::wall_clock_ms();
    let mut offset = start;
    let walked = async {
        'scan: while offset < end {
            let records = read_halves(broker, queue_id, offset).await?;
            if records.is_empty() {
                break;
            }
            for bytes in records {
                let view = RecordView::parse(&bytes)?;
                let queue_offset = view.queue_offset();
                offset = queue_offset + 1;
                let key = (queue_id, queue_offset);
                if is_durable(key) {
                    if contiguous {
                        cursor = offset;
                    }
                    continue;
                }
                // Decided but not read back yet (its op record may not be durable): the
                // progress waits for the next pass.
                contiguous = false;
                if is_resolved(key) {
                    continue;
                }
                if !is_due(broker, &view, now_ms) {
                    break 'scan;
                }
                check_one(broker, &view).await?;
            }
        }
        Ok::<(), CheckError>(())
    };
    let walked = walked.await;
    // Also after a failed walk: what was passed before the failure is durable.
    let op_offset = super::advance(queue_id, cursor, ops_read_to);
    let mut offsets = broker.offsets().borrow_mut();
    // Committed when they move, as Java's checker does: a broker that never saw a
    // transaction keeps no offsets of the system group (nor lists it among the groups).
    for (topic, offset) in [(TRANS_HALF_TOPIC, cursor), (TRANS_OP_HALF_TOPIC, op_offset)] {
        if offsets.query(SYSTEM_GROUP, topic, queue_id).unwrap_or(0) != offset {
            offsets.commit(SYSTEM_GROUP, topic, queue_id, offset);
        }
    }
    walked
}

async fn read_halves(
    broker: &ShardBroker,
    queue_id: i32,
    offset: i64,
) -> Result<Vec<Bytes>, StoreError> {
    let result = broker
        .queue_store(TRANS_HALF_TOPIC, queue_id)
        .get_messages(
            TRANS_HALF_TOPIC,
            queue_id,
            QueueOffset(u64::try_from(offset).unwrap_or(0)),
            READ_RECORDS_MAX,
            4 * 1024 * 1024,
            MessageFilter::All,
        )
        .await?;
    match result.status {
        GetStatus::Found => Ok(result.records),
        _ => Ok(Vec::new()),
    }
}

fn is_due(broker: &ShardBroker, half: &RecordView<'_>, now_ms: i64) -> bool {
    let immunity_ms = half
        .property(names::CHECK_IMMUNITY_TIME_IN_SECONDS)
        .and_then(|seconds| seconds.trim().parse::<i64>().ok())
        .map_or(
            i64::try_from(broker.config().transaction_timeout_ms).unwrap_or(i64::MAX),
            |seconds| seconds.saturating_mul(1000),
        );
    now_ms - half.store_timestamp() >= immunity_ms
}

/// Handles one due pending half: resolves it (its op record is read back by a later pass).
async fn check_one(broker: &ShardBroker, half: &RecordView<'_>) -> Result<(), CheckError> {
    let queue_offset = half.queue_offset();
    if already_committed(broker, half).await {
        log::info!("half {queue_offset} was committed before a crash; writing its op record");
        return resolve_with(broker, half, None).await.map(|_| ());
    }
    let times: i32 = half
        .property(names::TRANSACTION_CHECK_TIMES)
        .and_then(|times| times.trim().parse().ok())
        .unwrap_or(0);
    if times >= broker.config().transaction_check_max {
        ensure_discard_topic(broker).await?;
        let discarded = copy_of(broker, half, (TRANS_CHECK_MAX_TIME_TOPIC, 0), times);
        log::info!("half {queue_offset} checked {times} times; discarded");
        return resolve_with(broker, half, Some(discarded))
            .await
            .map(|_| ());
    }
    // The copy stays in the half's own queue, which this shard owns.
    let copy = copy_of(broker, half, (TRANS_HALF_TOPIC, half.queue_id()), times + 1);
    let appended = resolve_with(broker, half, Some(copy.clone())).await?;
    if let Some(appended) = appended {
        send_check(broker, half, &copy, appended).await;
    }
    Ok(())
}

/// Creates `TRANS_CHECK_MAX_TIME_TOPIC` (1 queue) on first use, persisted before use.
async fn ensure_discard_topic(broker: &ShardBroker) -> Result<(), CheckError> {
    if broker.topics().get(TRANS_CHECK_MAX_TIME_TOPIC).is_some() {
        return Ok(());
    }
    broker
        .topics()
        .ensure_system_topic(TRANS_CHECK_MAX_TIME_TOPIC, 1);
    broker.mark_topics_changed();
    crate::routing::persist_topics_now(broker)
        .await
        .map_err(CheckError::PersistTopic)
}

/// Marks the half resolved, appends `replacement` (locally when it is a new half copy) and
/// the op record; returns where a local replacement went.
async fn resolve_with(
    broker: &ShardBroker,
    half: &RecordView<'_>,
    replacement: Option<BytesMut>,
) -> Result<Option<AppendedRecord>, CheckError> {
    let key = (half.queue_id(), half.queue_offset());
    if !mark_resolved(key) {
        return Ok(None);
    }
    let result = append_resolution(broker, key, replacement).await;
    if result.is_err() {
        unmark_resolved(key);
    }
    result
}

async fn append_resolution(
    broker: &ShardBroker,
    half: HalfKey,
    replacement: Option<BytesMut>,
) -> Result<Option<AppendedRecord>, CheckError> {
    let mut appended = None;
    if let Some(record) = replacement {
        let view = RecordView::parse(&record)?;
        if view.topic() == TRANS_HALF_TOPIC {
            let mut stored = broker.store().append(&[record]).await?;
            appended = stored.pop();
        } else {
            append_on_owners(broker, vec![record]).await?;
        }
    }
    let op = op_record(broker, half);
    append_on_owners(broker, vec![op]).await?;
    Ok(appended)
}

/// The half copied to `(topic, queue_id)` with its check counter set to `times`.
fn copy_of(
    broker: &ShardBroker,
    half: &RecordView<'_>,
    (topic, queue_id): (&str, i32),
    times: i32,
) -> BytesMut {
    let mut properties = Properties::decode(half.properties());
    properties.insert(names::TRANSACTION_CHECK_TIMES, times.to_string());
    let properties = properties.encode();
    let spec = RecordSpec {
        topic,
        queue_id,
        flag: half.flag(),
        sysflag: half.sysflag(),
        born_timestamp: half.born_timestamp(),
        born_host: half.born_host(),
        store_host: broker.store_host(),
        reconsume_times: half.reconsume_times(),
        prepared_transaction_offset: 0,
        body: half.body(),
        properties: &properties,
    };
    let mut record = BytesMut::new();
    encode_record(&spec, 0, 0, 0, &mut record).expect("a stored half re-encodes");
    record
}

/// CHECK_TRANSACTION_STATE to one live producer connection of the half's group.
async fn send_check(
    broker: &ShardBroker,
    half: &RecordView<'_>,
    copy: &[u8],
    appended: AppendedRecord,
) {
    let Some(group) = half.property(names::PGROUP) else {
        return;
    };
    let channels = broker.clients().producer_channels(group);
    let Some((_, channel)) = channels.first() else {
        log::debug!("no live producer of {group} to check a half with");
        return;
    };
    let Some(body) = check_body(half, copy, appended) else {
        return;
    };
    let unique_key = half.property(names::UNIQ_KEY).map(str::to_owned);
    let physical = appended.physical_offset.as_i64();
    let header = CheckTransactionStateRequestHeader {
        topic: half.property(names::REAL_TOPIC).map(str::to_owned),
        tran_state_table_offset: appended.queue_offset.as_i64(),
        commit_log_offset: physical,
        msg_id: unique_key.clone(),
        transaction_id: half
            .property(names::TRANSACTION_ID)
            .map(str::to_owned)
            .or(unique_key),
        offset_msg_id: Some(encode_offset_msg_id(broker.store_host(), physical)),
        broker_name: Some(broker.config().broker_name.clone()),
    };
    let mut command = RemotingCommand::request(RequestCode::CHECK_TRANSACTION_STATE, 0)
        .with_header(&header)
        .with_body(body);
    command.set_oneway();
    let connection = ConnectionId {
        shard: channel.shard,
        serial: channel.connection_id,
    };
    crate::routing::send_to_client(broker, connection, command).await;
}

/// The new half copy re-encoded as a stored record under its real topic and queue, with the
/// copy's offsets and store time.
fn check_body(half: &RecordView<'_>, copy: &[u8], appended: AppendedRecord) -> Option<Bytes> {
    let copy = RecordView::parse(copy).ok()?;
    let topic = half.property(names::REAL_TOPIC)?;
    let queue_id: i32 = half.property(names::REAL_QID)?.trim().parse().ok()?;
    let spec = RecordSpec {
        topic,
        queue_id,
        flag: copy.flag(),
        sysflag: copy.sysflag(),
        born_timestamp: copy.born_timestamp(),
        born_host: copy.born_host(),
        store_host: copy.store_host(),
        reconsume_times: copy.reconsume_times(),
        prepared_transaction_offset: 0,
        body: copy.body(),
        properties: copy.properties(),
    };
    let mut record = BytesMut::new();
    encode_record(
        &spec,
        appended.queue_offset.as_i64(),
        appended.physical_offset.as_i64(),
        appended.store_timestamp_ms,
        &mut record,
    )
    .ok()?;
    Some(record.freeze())
}

/// True when the real topic already holds this half's committed message.
async fn already_committed(broker: &ShardBroker, half: &RecordView<'_>) -> bool {
    let (Some(topic), Some(queue_id), Some(key)) = (
        half.property(names::REAL_TOPIC),
        half.property(names::REAL_QID)
            .and_then(|q| q.trim().parse::<i32>().ok()),
        half.property(names::UNIQ_KEY),
    ) else {
        return false;
    };
    let found = messages_by_key(broker, topic, queue_id, key, half.store_timestamp()).await;
    let Some(found) = found else {
        return false;
    };
    let physical = half.physical_offset();
    decode_records(found)
        .iter()
        .any(|message| message.prepared_transaction_offset == physical)
}
