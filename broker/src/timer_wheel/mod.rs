//! Timed messages (RocketMQ 5.x,
//! docs/protocol.md#delay-levels): a send carrying `TIMER_DELIVER_MS` (absolute
//! epoch ms), `TIMER_DELAY_SEC` or `TIMER_DELAY_MS` (relative to its arrival) is delivered to
//! its topic at that time, to the millisecond, from a persistent timing wheel per shard.
//!
//! Send side ([`rewrite_timer_send`], as Apache's `HookUtils.transformTimerMessage`): only
//! non-transactional or committed single sends without a `DELAY` level (a level wins, and the delay
//! rewrite has already dropped the timer properties). The due time is `now + TIMER_DELAY_SEC *
//! 1000`, else `now + TIMER_DELAY_MS`, else `TIMER_DELIVER_MS`; an unparsable value, or a due time
//! more than `timerMaxDelaySec` ahead, is refused with MESSAGE_ILLEGAL and Apache's remark; with
//! `timerWheelEnable=false` the send fails with SYSTEM_ERROR. A due time not in the future is
//! stored directly in the real topic, as Apache does. Otherwise `TIMER_OUT_MS` (the due time),
//! `REAL_TOPIC` and `REAL_QID` are added and the message is stored in [`TIMER_TOPIC`], in a queue
//! owned by the shard that owns its real queue (so its delivery is an append to that shard's own
//! log), and answered like any send (its msgId is the stored timer record's). Unlike Apache, the
//! due time is not rounded down to a 1 s precision: Comet delivers at the exact millisecond.
//!
//! Delivery side ([`wheel`]): each shard's wheel reads the timer queues it owns into slot
//! files ([`slot`], one per queue and due second), keeps the slots due within
//! [`limits::PREFETCH_MS`] in memory with their delivered records already built, and at the
//! due time appends them all to their real queues on their owner shards, many group-committed
//! appends in flight at once. The delivered record is the timer record with its real topic
//! and queue, `REAL_TOPIC`/`REAL_QID` removed (as Apache's `convertMessage`),
//! `TIMER_ENQUEUE_MS` (the timer record's store time) and `TIMER_DEQUEUE_MS` (its due time)
//! added, `UNIQ_KEY` and the timer properties kept, and
//! [`SCHEDULE_ORIGIN`](crate::delay_level::SCHEDULE_ORIGIN) = the timer record's physical offset
//! (what makes a redelivery after a crash detectable). Cursors ([`cursor`]) make delivery
//! exactly once across clean restarts and crashes; see [`wheel`] for the argument.
//!
//! Cancelling (docs/architecture.md#timer-wheel): a timed message carrying `TIMER_DEL_UNIQKEY`
//! = `<real topic>+<UNIQ_KEY>` is a deletion. It is stored like any timed message and, by the
//! send path, copied to every other wheel ([`deletion_copies`]); each wheel drops, instead of
//! delivering, the entries of the deletion's cancellation slot ([`cancel_slot`]) it names,
//! and never delivers the deletion. A single timed send answers a recall handle
//! ([`recall_handle`]); RECALL_MESSAGE (`crate::processor::recall`) turns one into a deletion.

pub mod cursor;
pub mod deliver;
pub mod limits;
pub mod slot;
pub mod wheel;

use comet_proto::flags::message as message_sys_flag;
use comet_proto::headers::SendMessageRequestHeader;
use std::collections::BTreeSet;

use comet_proto::bytes::BytesMut;
use comet_proto::message::RecordView;
use comet_proto::properties::{self, names, Properties};
use comet_proto::{RemotingCommand, RequestCode, ResponseCode};
use thiserror::Error;

use crate::delay_level::rewrite::{retarget, Rewritten};
use crate::reappend;
use crate::shard::ShardBroker;
use comet_rt::ShardId;

pub use crate::topic::{TIMER_QUEUES, TIMER_TOPIC};

/// Why a timed send is refused.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum TimerError {
    /// A timer property is not a number, or the due time overflows.
    #[error("timer property {name} = {value:?} is not a valid number")]
    Unparsable {
        /// The property.
        name: &'static str,
        /// Its value.
        value: String,
    },
    /// The due time is further ahead than `timerMaxDelaySec`.
    #[error("due in {delay_ms} ms, over the {max_delay_ms} ms maximum")]
    TooFar {
        /// Requested delay.
        delay_ms: i64,
        /// The limit.
        max_delay_ms: i64,
    },
    /// A timer-deletion message whose time is not in the future.
    #[error("a timer deletion must be due in the future")]
    DeletionInThePast,
}

/// True when the message asks for a timer (and is not already a timer record).
pub fn is_timed(topic: &str, properties: &Properties) -> bool {
    if topic == TIMER_TOPIC || properties.get(names::TIMER_OUT_MS).is_some() {
        return false;
    }
    [
        names::TIMER_DELIVER_MS,
        names::TIMER_DELAY_SEC,
        names::TIMER_DELAY_MS,
    ]
    .iter()
    .any(|name| properties.get(name).is_some())
}

fn parse_property(properties: &Properties, name: &'static str) -> Result<Option<i64>, TimerError> {
    let Some(value) = properties.get(name) else {
        return Ok(None);
    };
    value
        .parse::<i64>()
        .map(Some)
        .map_err(|_| TimerError::Unparsable {
            name,
            value: value.to_owned(),
        })
}

/// The due time of a timed message arriving at `now_ms` (Apache's precedence: delay in
/// seconds, then delay in ms, then the absolute time).
pub fn due_ms(properties: &Properties, now_ms: i64) -> Result<i64, TimerError> {
    let overflow = |name: &'static str| TimerError::Unparsable {
        name,
        value: properties.get(name).unwrap_or("").to_owned(),
    };
    if let Some(seconds) = parse_property(properties, names::TIMER_DELAY_SEC)? {
        return seconds
            .checked_mul(1000)
            .and_then(|ms| now_ms.checked_add(ms))
            .ok_or_else(|| overflow(names::TIMER_DELAY_SEC));
    }
    if let Some(ms) = parse_property(properties, names::TIMER_DELAY_MS)? {
        return now_ms
            .checked_add(ms)
            .ok_or_else(|| overflow(names::TIMER_DELAY_MS));
    }
    parse_property(properties, names::TIMER_DELIVER_MS)?
        .ok_or_else(|| overflow(names::TIMER_DELIVER_MS))
}

/// What the send path does with a timed message: `Ok(Some(due))` to store it in the timer
/// topic, `Ok(None)` to store it as it is (due now or in the past).
pub fn classify(
    properties: &Properties,
    now_ms: i64,
    max_delay_sec: u64,
) -> Result<Option<i64>, TimerError> {
    let due = due_ms(properties, now_ms)?;
    if due <= now_ms {
        if properties.get(names::TIMER_DEL_UNIQKEY).is_some() {
            return Err(TimerError::DeletionInThePast);
        }
        return Ok(None);
    }
    let max_delay_ms = i64::try_from(max_delay_sec.saturating_mul(1000)).unwrap_or(i64::MAX);
    if due - now_ms > max_delay_ms {
        return Err(TimerError::TooFar {
            delay_ms: due - now_ms,
            max_delay_ms,
        });
    }
    Ok(Some(due))
}

/// Apache's remark for an illegal timer message.
pub fn illegal_remark(max_delay_sec: u64) -> String {
    format!(
        "timer message illegal, the delay time should not be bigger than the max delay {}ms; \
         or if set del msg, the delay time should be bigger than the current time",
        max_delay_sec.saturating_mul(1000)
    )
}

/// Rewrites a timed single send to the timer topic (see the module docs). `Ok(None)` when
/// the send is not timed or is due already; `Err` is the refusal to answer with.
pub fn rewrite_timer_send(
    broker: &ShardBroker,
    request: &mut RemotingCommand,
    header: &SendMessageRequestHeader,
    queue_id: i32,
) -> Result<Option<Rewritten>, RemotingCommand> {
    if request.request_code() == RequestCode::SEND_BATCH_MESSAGE {
        return Ok(None);
    }
    let transaction = message_sys_flag::transaction_type(header.sys_flag);
    if transaction != message_sys_flag::TRANSACTION_NOT_TYPE
        && transaction != message_sys_flag::TRANSACTION_COMMIT_TYPE
    {
        return Ok(None);
    }
    let mut properties = Properties::decode(header.properties.as_deref().unwrap_or(""));
    if !is_timed(&header.topic, &properties) {
        return Ok(None);
    }
    if !broker.config().timer_wheel_enable {
        let remark = "accurate timer message is not enabled, timerWheelEnable is false";
        return Err(RemotingCommand::error_to(
            request,
            ResponseCode::SYSTEM_ERROR,
            remark,
        ));
    }
    let max_delay_sec = broker.config().timer_max_delay_sec;
    let due = match classify(&properties, comet_rt::clock::wall_clock_ms(), max_delay_sec) {
        Ok(Some(due)) => due,
        Ok(None) => return Ok(None),
        Err(e) => {
            log::debug!("timed send refused: {e}");
            return Err(RemotingCommand::error_to(
                request,
                ResponseCode::MESSAGE_ILLEGAL,
                illegal_remark(max_delay_sec),
            ));
        }
    };
    properties.insert(names::TIMER_OUT_MS, due.to_string());
    properties.insert(names::REAL_TOPIC, header.topic.clone());
    properties.insert(names::REAL_QID, queue_id.to_string());
    let rewritten = Rewritten {
        topic: TIMER_TOPIC.to_owned(),
        queue_id: timer_queue(broker, &header.topic, queue_id),
    };
    retarget(request, &rewritten, &properties);
    Ok(Some(rewritten))
}

/// A timer queue owned by the shard that owns the real queue `(topic, queue_id)` (round
/// robin among them), any queue when that shard owns none.
///
/// Why that shard: its wheel then delivers into queues it owns, appending to its own log
/// without crossing the mesh, and the wheels' shares follow the real queues' spread over
/// shards (even for a topic whose queues are used evenly) instead of how client connections
/// happen to be spread. The send itself goes to the real queue's owner, as an untimed send to
/// that queue would, so choosing this way adds no hop.
fn timer_queue(broker: &ShardBroker, topic: &str, queue_id: i32) -> i32 {
    let cursor = broker.queue_cursor().get();
    broker.queue_cursor().set(cursor.wrapping_add(1));
    let owner = broker.owner_of(topic, queue_id);
    pick_timer_queue(owner, broker.shard_count(), cursor)
}

/// The `cursor`-th (modulo) timer queue `owner` owns among `shard_count` shards; the
/// `cursor`-th of all when it owns none (more shards than timer queues).
fn pick_timer_queue(owner: ShardId, shard_count: usize, cursor: u32) -> i32 {
    let candidates: Vec<i32> = (0..TIMER_QUEUES)
        .filter(|q| crate::ownership::owner_shard(TIMER_TOPIC, *q, shard_count) == owner)
        .collect();
    if candidates.is_empty() {
        (cursor % TIMER_QUEUES as u32) as i32
    } else {
        candidates[cursor as usize % candidates.len()]
    }
}

/// Width of a cancellation slot, ms: Java's default `timerPrecisionMs`.
pub const CANCEL_SLOT_MS: i64 = 1000;

/// The cancellation slot of a due time: a deletion cancels only entries in its own slot, as
/// Java's wheel applies a slot's deletions to that slot's other entries only. Java's slots
/// hold the due times in `(s * 1000, (s + 1) * 1000]` (its send path moves an exact multiple
/// one step earlier before rounding down), and so do these.
pub fn cancel_slot(due_ms: i64) -> i64 {
    due_ms.saturating_sub(1).div_euclid(CANCEL_SLOT_MS)
}

/// What a deletion names: `<real topic>+<UNIQ_KEY>` (Java's `TimerMessageStore.buildDeleteKey`).
pub fn delete_key(topic: &str, unique_key: &str) -> String {
    format!("{topic}+{unique_key}")
}

/// The timestamp a recall handle carries for a message due at `due_ms`: one ms past the
/// start of its cancellation slot, the value Java puts there (its rounded `TIMER_OUT_MS`
/// plus one), so the recall's deletion lands in the same slot.
pub fn recall_timestamp(due_ms: i64) -> i64 {
    cancel_slot(due_ms)
        .saturating_mul(CANCEL_SLOT_MS)
        .saturating_add(1)
}

/// The recall handle a send answers, as Java's `SendMessageProcessor.attachRecallHandle`:
/// for a single (not batch) send stored with `TIMER_OUT_MS` and a `REAL_TOPIC` that is not a
/// retry topic; `properties` are the stored record's.
pub fn recall_handle(
    broker: &ShardBroker,
    request_code: RequestCode,
    properties: &str,
    unique_key: &str,
) -> Option<String> {
    if request_code == RequestCode::SEND_BATCH_MESSAGE {
        return None;
    }
    let properties = Properties::decode(properties);
    let due_ms: i64 = properties.get(names::TIMER_OUT_MS)?.trim().parse().ok()?;
    let topic = properties.get(names::REAL_TOPIC)?;
    if comet_proto::names::is_retry_topic(topic) {
        return None;
    }
    let handle = comet_proto::recall::RecallHandle {
        topic: topic.to_owned(),
        broker_name: broker.config().broker_name.clone(),
        timestamp: recall_timestamp(due_ms).to_string(),
        message_id: unique_key.to_owned(),
    };
    Some(handle.encode())
}

/// True for a deletion (a timer record carrying `TIMER_DEL_UNIQKEY`).
pub fn is_deletion(topic: &str, properties: &str) -> bool {
    topic == TIMER_TOPIC && properties::get(properties, names::TIMER_DEL_UNIQKEY).is_some()
}

/// Copies of a deletion `record` for every other shard running a wheel, one in a timer queue
/// each owns, so every wheel holds it in its own log: a deletion cancels an entry whatever
/// wheel holds it (an entry's wheel follows its real queue's owner, which the deletion does
/// not know), and each wheel replays its copy from its log after a restart as it replays
/// its entries. `None` when the record does not parse.
pub fn deletion_copies(broker: &ShardBroker, record: &[u8]) -> Option<Vec<BytesMut>> {
    let view = RecordView::parse(record).ok()?;
    let mut owners = BTreeSet::new();
    let mut copies = Vec::new();
    for queue_id in 0..TIMER_QUEUES {
        let owner = broker.owner_of(TIMER_TOPIC, queue_id);
        if owner == broker.shard() || !owners.insert(owner) {
            continue;
        }
        let copy =
            reappend::restored_record(broker, &view, TIMER_TOPIC, queue_id, view.properties())?;
        copies.push(copy);
    }
    Some(copies)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> Properties {
        let mut properties = Properties::new();
        for (name, value) in pairs {
            properties.insert(*name, *value);
        }
        properties
    }

    // Proves Apache's precedence and arithmetic for the three timer properties, the refusal
    // of unparsable values, over-max delays and past deletions, and that a past or present
    // due time is stored as it is.
    #[test]
    fn due_times_and_refusals() {
        let now = 1_700_000_000_000;
        let max = 3 * 24 * 3600;
        let both = props(&[(names::TIMER_DELAY_SEC, "2"), (names::TIMER_DELAY_MS, "5")]);
        assert_eq!(classify(&both, now, max), Ok(Some(now + 2000)));
        let ms = props(&[
            (names::TIMER_DELAY_MS, "250"),
            (names::TIMER_DELIVER_MS, "1"),
        ]);
        assert_eq!(classify(&ms, now, max), Ok(Some(now + 250)));
        let at = props(&[(names::TIMER_DELIVER_MS, "1700000000500")]);
        assert_eq!(classify(&at, now, max), Ok(Some(now + 500)));
        let past = props(&[(names::TIMER_DELIVER_MS, "1")]);
        assert_eq!(classify(&past, now, max), Ok(None));
        let bad = props(&[(names::TIMER_DELAY_SEC, "soon")]);
        assert!(matches!(
            classify(&bad, now, max),
            Err(TimerError::Unparsable { .. })
        ));
        let huge = props(&[(names::TIMER_DELAY_SEC, "9223372036854775807")]);
        assert!(matches!(
            classify(&huge, now, max),
            Err(TimerError::Unparsable { .. })
        ));
        let far = props(&[(names::TIMER_DELAY_SEC, &(max + 1).to_string())]);
        assert!(matches!(
            classify(&far, now, max),
            Err(TimerError::TooFar { .. })
        ));
        let edge = props(&[(names::TIMER_DELAY_SEC, &max.to_string())]);
        assert_eq!(classify(&edge, now, max), Ok(Some(now + max as i64 * 1000)));
        let delete = props(&[
            (names::TIMER_DELIVER_MS, "1"),
            (names::TIMER_DEL_UNIQKEY, "k"),
        ]);
        assert_eq!(
            classify(&delete, now, max),
            Err(TimerError::DeletionInThePast)
        );
        assert!(is_timed("T", &at));
        assert!(!is_timed(TIMER_TOPIC, &at));
        let mut already = at.clone();
        already.insert(names::TIMER_OUT_MS, "5");
        assert!(!is_timed("T", &already));
        assert!(!is_timed("T", &Properties::new()));
        assert!(illegal_remark(max).contains("259200000ms"));
    }

    // Proves cancellation slots are Java's (an exact second belongs to the slot before it),
    // that a recall timestamp falls in its message's slot, and Java's delete-key format.
    #[test]
    fn cancellation_slots_and_keys_follow_java() {
        assert_eq!(cancel_slot(5_001), 5);
        assert_eq!(cancel_slot(5_999), 5);
        assert_eq!(cancel_slot(6_000), 5);
        assert_eq!(cancel_slot(6_001), 6);
        assert_eq!(cancel_slot(0), -1);
        for due_ms in [5_001, 5_500, 6_000, 1_700_000_000_000, 1_700_000_000_001] {
            let timestamp = recall_timestamp(due_ms);
            assert_eq!(cancel_slot(timestamp), cancel_slot(due_ms), "{due_ms}");
            assert!(timestamp <= due_ms);
        }
        assert_eq!(recall_timestamp(6_000), 5_001);
        assert_eq!(delete_key("T", "AC1"), "T+AC1");
        assert_eq!(cancel_slot(i64::MIN), i64::MIN.div_euclid(CANCEL_SLOT_MS));
    }

    // Proves a timed send lands in a timer queue owned by its real queue's owner for every
    // shard count up to the number of timer queues (so that shard's wheel delivers it to its
    // own log), that successive sends rotate over all of that owner's timer queues, and that
    // with more shards than timer queues a shard owning none still gets a valid queue.
    #[test]
    fn timer_queue_follows_the_real_queue_owner() {
        for shard_count in 1..=TIMER_QUEUES as usize {
            for owner in 0..shard_count {
                let owner = ShardId(u16::try_from(owner).unwrap());
                let mut seen = std::collections::BTreeSet::new();
                for cursor in 0..TIMER_QUEUES as u32 {
                    let queue = pick_timer_queue(owner, shard_count, cursor);
                    let queue_owner =
                        crate::ownership::owner_shard(TIMER_TOPIC, queue, shard_count);
                    assert_eq!(queue_owner, owner, "{shard_count} shards");
                    seen.insert(queue);
                }
                let owned = (0..TIMER_QUEUES)
                    .filter(|q| {
                        crate::ownership::owner_shard(TIMER_TOPIC, *q, shard_count) == owner
                    })
                    .count();
                assert_eq!(seen.len(), owned);
            }
        }
        let shard_count = TIMER_QUEUES as usize + 8;
        for owner in 0..shard_count {
            let queue = pick_timer_queue(ShardId(u16::try_from(owner).unwrap()), shard_count, 7);
            assert!((0..TIMER_QUEUES).contains(&queue));
        }
    }
}
