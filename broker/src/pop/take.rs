//! One pop of one queue, on the shard owning it (Java's `PopMessageProcessor.popMsgFromQueue`).
//!
//! The pop holds the queue for its group ([`super::state::try_hold`]), reads from the
//! group's pop position (its consumer offset, as Java keeps it), appends the checkpoint of
//! what it found to this shard's revive queue and waits until that record is durable, and
//! only then moves the pop position past the messages and answers them: a message handed
//! out is always covered by a durable CK, so a crash can only bring it back, never lose it.
//!
//! An orderly pop ([`OrderPop`]) reads from the same position, which for it stays at the
//! first unacked message: it takes nothing from a queue its group has unacked, invisible
//! messages of, writes no CK, and leaves the position where it was; acks move it
//! ([`super::order`]).
//!
//! A filtered pop ([`PopFilter`]) hands out only the messages its filter keeps; the position
//! moves past the ones it drops as past the ones handed out (the CK names only the kept
//! ones), so messages nobody of the group wants never block the queue.

use comet_proto::bytes::{Bytes, BytesMut};
use comet_proto::message::{encode_record, RecordError, RecordSpec, RecordView};
use comet_proto::names::RETRY_TOPIC_PREFIX;
use comet_proto::properties::{names, Properties};
use comet_proto::sql92::Selector;
use comet_proto::ResponseCode;
use comet_store::{GetResult, GetStatus, MessageFilter, QueueOffset, StoreError};

use super::extra_info::{normal_topic, retry_flag, ExtraInfo};
use super::order::{Deliveries, OrderKey, PopTimes};
use super::records::{ck_record, CheckPoint};
use crate::selected_read::{read_selected, Wanted};
use crate::shard::ShardBroker;
use crate::stats::Delivery;

/// Bytes one pop of one queue reads at most.
pub const POP_BYTES_MAX: usize = 4 * 1024 * 1024;
/// `initMode` asking a group without a position to start at the queue's first message
/// (Java's `ConsumeInitMode.MIN`); any other value starts at its last one.
pub const INIT_MODE_MIN: i32 = 0;

/// What to pop from one queue.
pub struct PopQueue<'a> {
    /// Consumer group.
    pub group: &'a str,
    /// The queue's topic (a pop retry topic for a retry queue).
    pub topic: &'a str,
    /// Queue id.
    pub queue_id: i32,
    /// Most messages.
    pub max_messages: usize,
    /// How long they stay invisible, ms.
    pub invisible_time_ms: i64,
    /// Where a group without a position starts ([`INIT_MODE_MIN`] or the end).
    pub init_mode: i32,
    /// Which messages to hand out; the others are skipped, the pop position moving past
    /// them (Java's pop with a message filter).
    pub filter: PopFilter<'a>,
    /// Set for an orderly pop (docs/architecture.md#pop): its attempt id, if any.
    pub order: Option<OrderPop<'a>>,
}

/// Which messages of a queue a pop hands out.
#[derive(Clone, Copy, Debug)]
pub enum PopFilter<'a> {
    /// Every message.
    All,
    /// Messages whose consume-queue tag code is one of these.
    TagCodes(&'a [i64]),
    /// Messages whose properties the compiled SQL92 selector matches.
    Sql(&'a Selector),
}

/// What an orderly pop adds.
#[derive(Clone, Copy, Debug)]
pub struct OrderPop<'a> {
    /// The client's id of this pop attempt (a retried pop repeats it).
    pub attempt_id: Option<&'a str>,
}

/// What one pop of one queue took.
#[derive(Debug, Default)]
pub struct Popped {
    /// The messages, each carrying its `POP_CK`, under the subscribed topic.
    pub records: Vec<Bytes>,
    /// Where the pop started.
    pub start_offset: i64,
    /// Each message's queue offset.
    pub offsets: Vec<i64>,
    /// Messages left in the queue after the pop's position.
    pub rest: i64,
    /// An orderly pop's delivery counts (`None` for other pops and empty ones).
    pub deliveries: Option<Deliveries>,
    /// Nothing was handed out, but the pop position moved past messages the filter does
    /// not match: a pop that asks again right away gets further.
    pub skipped: bool,
}

/// Why a pop of one queue failed.
#[derive(Debug, thiserror::Error)]
pub enum TakeError {
    /// The store could not be read.
    #[error("reading the queue: {0}")]
    Store(#[from] StoreError),
    /// A record could not be re-encoded.
    #[error("encoding: {0}")]
    Encode(#[from] RecordError),
    /// The checkpoint was not stored.
    #[error("storing the checkpoint: {0}")]
    Checkpoint(String),
}

/// Pops up to `request.max_messages` from one queue this shard owns at `pop_time_ms`.
pub async fn pop_queue(
    broker: &ShardBroker,
    request: &PopQueue<'_>,
    pop_time_ms: i64,
) -> Result<Popped, TakeError> {
    let store = broker.queue_store(request.topic, request.queue_id);
    let max_offset = store.max_offset(request.topic, request.queue_id).as_i64();
    if !super::state::recovered() {
        return Ok(Popped::default());
    }
    let Some(_hold) = super::state::try_hold(request.topic, request.group, request.queue_id) else {
        // Another pop holds the queue: what it leaves counts as rest (Java's answer).
        let position = broker
            .offsets()
            .borrow()
            .query(request.group, request.topic, request.queue_id)
            .unwrap_or(max_offset);
        return Ok(Popped {
            rest: (max_offset - position).max(0),
            ..Popped::default()
        });
    };
    let mut position = pop_position(broker, request);
    let order_key: OrderKey = (
        request.topic.to_owned(),
        request.group.to_owned(),
        request.queue_id,
    );
    if let Some(order) = request.order {
        let blocked = super::state::with_order_book(|book| {
            book.is_blocked(&order_key, order.attempt_id, pop_time_ms)
        });
        if blocked {
            // Java counts no backlog for a blocked queue: a polling pop would only wake
            // for messages it may not take.
            return Ok(Popped::default());
        }
    }
    let mut result = read(broker, request, position).await?;
    if matches!(
        result.status,
        GetStatus::OffsetTooSmall | GetStatus::OffsetOverflowBadly
    ) {
        // The position is outside the queue (retention, a reset store): move it to the
        // nearest end and read there, as Java does.
        position = if result.status == GetStatus::OffsetTooSmall {
            result.min_offset.as_i64()
        } else {
            result.max_offset.as_i64()
        };
        commit(broker, request, position);
        result = read(broker, request, position).await?;
    }
    let rest = (result.max_offset.as_i64() - result.next_offset.as_i64()).max(0);
    match result.status {
        GetStatus::Found => {}
        GetStatus::NoMatchedMessage => {
            commit(broker, request, result.next_offset.as_i64());
            return Ok(Popped {
                rest,
                skipped: result.next_offset.as_i64() > position,
                ..Popped::default()
            });
        }
        _ => {
            return Ok(Popped {
                rest,
                ..Popped::default()
            })
        }
    }
    let mut views: Vec<RecordView<'_>> = result
        .records
        .iter()
        .map(|record| RecordView::parse(record))
        .collect::<Result<_, _>>()?;
    if let Some(order) = request.order {
        // An ack may have moved the consume offset while the store was read: then this
        // read is stale (it may start with the acked message), and the pop takes nothing.
        let now_at =
            broker
                .offsets()
                .borrow()
                .query(request.group, request.topic, request.queue_id);
        if now_at != Some(position) {
            return Ok(Popped {
                rest,
                ..Popped::default()
            });
        }
        // Messages acked ahead of the consume offset are not handed out again.
        super::state::with_order_book(|book| {
            views.retain(|view| !book.is_acked(&order_key, view.queue_offset()));
        });
        return order_popped(
            broker,
            request,
            &views,
            (order, &order_key),
            position,
            pop_time_ms,
            rest,
        );
    }
    let offsets: Vec<i64> = views.iter().map(RecordView::queue_offset).collect();
    let ck = CheckPoint {
        start_offset: position,
        pop_time: pop_time_ms,
        invisible_time: request.invisible_time_ms,
        num: u8::try_from(offsets.len()).expect("at most POP_MESSAGES_MAX"),
        queue_id: request.queue_id,
        topic: request.topic.to_owned(),
        cid: request.group.to_owned(),
        queue_offset_diff: offsets
            .iter()
            .map(|offset| i32::try_from(offset - position).unwrap_or(i32::MAX))
            .collect(),
        broker_name: broker.config().broker_name.clone(),
        next_offset: result.next_offset.as_i64(),
        ..CheckPoint::default()
    };
    let stored = crate::reappend::append_local(broker, vec![ck_record(broker, &ck)?]).await;
    if stored.response_code() != ResponseCode::SUCCESS {
        return Err(TakeError::Checkpoint(stored.remark.unwrap_or_default()));
    }
    commit(broker, request, ck.next_offset);
    let handed = Handed {
        position,
        pop_time_ms,
        revive_qid: super::revive_queue(broker),
        rest,
    };
    hand_out(broker, request, &views, offsets, handed, None)
}

/// Where and how a pop of one queue handed its messages out.
struct Handed {
    position: i64,
    pop_time_ms: i64,
    revive_qid: i32,
    rest: i64,
}

/// The pop's answer for one queue: each message with its receipt (`POP_CK`) under the
/// subscribed topic, counted in the statistics.
fn hand_out(
    broker: &ShardBroker,
    request: &PopQueue<'_>,
    views: &[RecordView<'_>],
    offsets: Vec<i64>,
    handed: Handed,
    deliveries: Option<Deliveries>,
) -> Result<Popped, TakeError> {
    let receipt = ExtraInfo {
        ck_queue_offset: handed.position,
        pop_time: handed.pop_time_ms,
        invisible_time: request.invisible_time_ms,
        revive_qid: handed.revive_qid,
        retry_flag: retry_flag(request.topic).to_owned(),
        broker_name: broker.config().broker_name.clone(),
        queue_id: request.queue_id,
        queue_offset: None,
    };
    let answered_topic = normal_topic(request.topic, request.group);
    let mut records = Vec::with_capacity(views.len());
    for view in views {
        records.push(with_receipt(view, &receipt, answered_topic)?);
    }
    count(broker, request, &records);
    Ok(Popped {
        records,
        start_offset: handed.position,
        offsets,
        rest: handed.rest,
        deliveries,
        skipped: false,
    })
}

/// The end of an orderly pop that found `views` from consume offset `position`: no
/// checkpoint (unacked messages come back by being popped again from the consume offset,
/// which stays), the book records what is in flight and how often each was delivered.
fn order_popped(
    broker: &ShardBroker,
    request: &PopQueue<'_>,
    views: &[RecordView<'_>],
    (order, key): (OrderPop<'_>, &OrderKey),
    position: i64,
    pop_time_ms: i64,
    rest: i64,
) -> Result<Popped, TakeError> {
    if views.is_empty() {
        return Ok(Popped {
            rest,
            ..Popped::default()
        });
    }
    let offsets: Vec<i64> = views.iter().map(RecordView::queue_offset).collect();
    let times = PopTimes {
        pop_time_ms,
        invisible_time_ms: request.invisible_time_ms,
    };
    let deliveries = super::state::with_order_book(|book| {
        book.record_pop(key, order.attempt_id, times, position, offsets.clone())
    });
    let handed = Handed {
        position,
        pop_time_ms,
        revive_qid: super::ORDER_REVIVE_QUEUE,
        rest,
    };
    hand_out(broker, request, views, offsets, handed, Some(deliveries))
}

/// The group's pop position in the queue, set first (and committed) when it has none:
/// the queue's first message for [`INIT_MODE_MIN`] and for retry topics; else its first
/// one too while the queue was never trimmed and that message is still in memory
/// (`initPopOffsetByCheckMsgInMem`, on by default: a group whose consumers start after the
/// first sends gets them, as 5.x's proxy consumers expect), and its last one otherwise
/// (Java's `getInitOffset`). A pending offset reset wins.
fn pop_position(broker: &ShardBroker, request: &PopQueue<'_>) -> i64 {
    let mut offsets = broker.offsets().borrow_mut();
    if let Some(reset) = offsets.take_reset(request.group, request.topic, request.queue_id) {
        // What an orderly pop had in flight no longer counts (Java's `resetPopOffset`).
        let key = (
            request.topic.to_owned(),
            request.group.to_owned(),
            request.queue_id,
        );
        super::state::with_order_book(|book| book.clear(&key));
        return reset;
    }
    if let Some(position) = offsets.query(request.group, request.topic, request.queue_id) {
        return position;
    }
    let store = broker.queue_store(request.topic, request.queue_id);
    let min = store.min_offset(request.topic, request.queue_id).as_i64();
    let from_first = request.init_mode == INIT_MODE_MIN
        || request.topic.starts_with(RETRY_TOPIC_PREFIX)
        || (broker.config().init_pop_offset_by_check_msg_in_mem
            && min <= 0
            && crate::memory::is_in_memory(broker, request.topic, request.queue_id, 0));
    let position = if from_first {
        min
    } else {
        (store.max_offset(request.topic, request.queue_id).as_i64() - 1).max(0)
    };
    offsets.commit(request.group, request.topic, request.queue_id, position);
    position
}

fn commit(broker: &ShardBroker, request: &PopQueue<'_>, position: i64) {
    broker
        .offsets()
        .borrow_mut()
        .commit(request.group, request.topic, request.queue_id, position);
}

async fn read(
    broker: &ShardBroker,
    request: &PopQueue<'_>,
    position: i64,
) -> Result<GetResult, StoreError> {
    let store = broker.queue_store(request.topic, request.queue_id);
    let offset = QueueOffset(u64::try_from(position).unwrap_or(0));
    let max_count = request.max_messages.max(1);
    let filter = match request.filter {
        PopFilter::All => MessageFilter::All,
        PopFilter::TagCodes(codes) => MessageFilter::TagCodes(codes),
        PopFilter::Sql(selector) => {
            let wanted = Wanted {
                topic: request.topic,
                queue_id: request.queue_id,
                offset,
                max_count,
                max_bytes: POP_BYTES_MAX,
            };
            return read_selected(store, selector, wanted).await;
        }
    };
    store
        .get_messages(
            request.topic,
            request.queue_id,
            offset,
            max_count,
            POP_BYTES_MAX,
            filter,
        )
        .await
}

/// `view` as the consumer gets it: `POP_CK` added (unless it has one) with its own queue
/// offset, and a retry queue's message under the subscribed topic, as Java answers it.
fn with_receipt(
    view: &RecordView<'_>,
    receipt: &ExtraInfo,
    answered_topic: &str,
) -> Result<Bytes, RecordError> {
    let mut properties = Properties::decode(view.properties());
    if properties.get(names::POP_CK).is_none() {
        let own = ExtraInfo {
            queue_offset: Some(view.queue_offset()),
            ..receipt.clone()
        };
        properties.insert(names::POP_CK, own.build());
    }
    let properties = properties.encode();
    let spec = RecordSpec {
        topic: answered_topic,
        queue_id: view.queue_id(),
        flag: view.flag(),
        sysflag: view.sysflag(),
        born_timestamp: view.born_timestamp(),
        born_host: view.born_host(),
        store_host: view.store_host(),
        reconsume_times: view.reconsume_times(),
        prepared_transaction_offset: view.prepared_transaction_offset(),
        body: view.body(),
        properties: &properties,
    };
    let mut record = BytesMut::with_capacity(view.total_size() + 96);
    encode_record(
        &spec,
        view.queue_offset(),
        view.physical_offset(),
        view.store_timestamp(),
        &mut record,
    )?;
    Ok(record.freeze())
}

fn count(broker: &ShardBroker, request: &PopQueue<'_>, records: &[Bytes]) {
    let messages = records.len() as u64;
    let bytes = records.iter().map(|record| record.len() as u64).sum();
    broker.traffic().add_got(messages);
    let delivery = Delivery {
        topic: request.topic,
        group: request.group,
        cluster: &broker.config().cluster_name,
    };
    broker
        .stats()
        .record_get(broker.shard().index(), delivery, messages, bytes);
}
