//! Cancelling timed messages end to end: deletions (`TIMER_DEL_UNIQKEY`) on the same and on
//! another shard, their replay after SIGKILL, RECALL_MESSAGE with its refusals, and timed
//! batches (stored at once, as Java stores them).

mod common;
mod sched_common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use comet_broker::ownership::owner_shard;
use comet_broker::timer_wheel::limits::SLOT_ENTRY_BYTES;
use comet_broker::timer_wheel::{cancel_slot, recall_timestamp, slot};
use comet_proto::batch::{encode_batch, BatchEntry};
use comet_proto::bytes::BytesMut;
use comet_proto::headers::{
    RecallMessageRequestHeader, RecallMessageResponseHeader, SendMessageRequestHeaderV2,
    SendMessageResponseHeader, EXT_MSG_REGION,
};
use comet_proto::message::MessageExt;
use comet_proto::properties::{names, Properties};
use comet_proto::recall::RecallHandle;
use comet_proto::{CommandHeader, RemotingCommand, RequestCode, ResponseCode};
use comet_rt::ShardId;
use comet_test_support::poll_until;
use common::{create_topic, Broker, Client, TempDir};
use sched_common::{drain, send_with};

const QUEUES: i32 = 8;
const SHARDS: usize = 2;

fn now_ms() -> i64 {
    i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

/// A queue of `topic` owned by `shard`.
fn queue_on(topic: &str, shard: u16) -> i32 {
    (0..QUEUES)
        .find(|queue| owner_shard(topic, *queue, SHARDS) == ShardId(shard))
        .expect("every shard owns a queue of an 8-queue topic")
}

fn send(
    client: &mut Client,
    topic: &str,
    queue_id: i32,
    pairs: &[(&str, String)],
) -> RemotingCommand {
    let mut properties = Properties::new();
    for (name, value) in pairs {
        properties.insert(*name, value.clone());
    }
    properties.insert(names::WAIT, "true");
    client.call(send_with(topic, queue_id, b"body", &properties, 0, "pg"))
}

fn send_header(response: &RemotingCommand) -> SendMessageResponseHeader {
    assert_eq!(
        response.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        response.remark
    );
    SendMessageResponseHeader::from_ext_fields(&response.ext_fields).unwrap()
}

/// Sends a message due at `due_ms`; returns its UNIQ_KEY.
fn send_at(client: &mut Client, topic: &str, queue_id: i32, due_ms: i64) -> String {
    let response = send(
        client,
        topic,
        queue_id,
        &[(names::TIMER_DELIVER_MS, due_ms.to_string())],
    );
    send_header(&response).transaction_id.unwrap()
}

/// Sends a deletion of `topic`'s message `key` due at `at_ms` through `queue_id`.
fn send_deletion(client: &mut Client, topic: &str, queue_id: i32, key: &str, at_ms: i64) {
    let response = send(
        client,
        topic,
        queue_id,
        &[
            (names::TIMER_DELIVER_MS, at_ms.to_string()),
            (names::TIMER_DEL_UNIQKEY, format!("{topic}+{key}")),
        ],
    );
    send_header(&response);
}

/// Every message of `topic` (all queues).
fn everything(client: &mut Client, topic: &str) -> Vec<MessageExt> {
    (0..QUEUES)
        .flat_map(|queue| drain(client, topic, queue))
        .collect()
}

/// Waits until every key of `wanted` is stored in `topic` (60 s at most); returns the keys
/// stored then.
fn wait_for(client: &mut Client, topic: &str, wanted: &[String]) -> BTreeSet<String> {
    let mut stored = BTreeSet::new();
    poll_until(Duration::from_secs(60), || {
        stored = everything(client, topic)
            .iter()
            .filter_map(|message| message.uniq_key().map(str::to_owned))
            .collect();
        wanted.iter().all(|key| stored.contains(key))
    });
    stored
}

/// Bytes the wheel's slot files of `second` hold, over every timer queue.
fn slot_bytes(store_root: &Path, second: i64) -> u64 {
    let Ok(queues) = std::fs::read_dir(slot::wheel_dir(store_root)) else {
        return 0;
    };
    queues
        .filter_map(Result::ok)
        .filter_map(|queue| std::fs::metadata(queue.path().join(second.to_string())).ok())
        .map(|file| file.len())
        .sum()
}

/// A due time `lead_ms` ahead, in the middle of its cancellation slot.
fn due_in(lead_ms: i64) -> i64 {
    (now_ms() + lead_ms) / 1000 * 1000 + 500
}

/// Messages due at `due_ms` on a queue of each shard, the first of each pair to cancel,
/// plus a later sentinel per queue: once the sentinels are stored, both wheels are past
/// `due_ms`. Returns (to cancel, to keep, sentinels, queues).
fn send_pairs(
    client: &mut Client,
    topic: &str,
    due_ms: i64,
) -> (Vec<String>, Vec<String>, Vec<String>, [i32; 2]) {
    let queues = [queue_on(topic, 0), queue_on(topic, 1)];
    let (mut cancel, mut keep, mut sentinels) = (Vec::new(), Vec::new(), Vec::new());
    for queue in queues {
        cancel.push(send_at(client, topic, queue, due_ms));
        keep.push(send_at(client, topic, queue, due_ms + 100));
        sentinels.push(send_at(client, topic, queue, due_ms + 1_500));
    }
    (cancel, keep, sentinels, queues)
}

fn assert_outcome(
    client: &mut Client,
    topic: &str,
    cancel: &[String],
    keep: &[String],
    sentinels: &[String],
) {
    let mut wanted = keep.to_vec();
    wanted.extend_from_slice(sentinels);
    let stored = wait_for(client, topic, &wanted);
    for key in &wanted {
        assert!(stored.contains(key), "{key} was never delivered");
    }
    for key in cancel {
        assert!(!stored.contains(key), "cancelled {key} was delivered");
    }
    let messages = everything(client, topic);
    assert!(
        messages
            .iter()
            .all(|message| message.property(names::TIMER_DEL_UNIQKEY).is_none()),
        "a deletion was delivered"
    );
    assert_eq!(messages.len(), wanted.len(), "unexpected deliveries");
}

// Proves a deletion cancels the message it names in its slot, whether the deletion arrives
// on the shard holding the message or on the other one, while a message due in the same
// second stays delivered; that deletions of unknown keys and of keys in another slot are
// harmless; that the deletion itself is never delivered; that a deletion not in the future
// is refused with MESSAGE_ILLEGAL; and that TIMER_DEL_UNIQKEY without a timer property is
// an ordinary message, stored at once (Java's `HookUtils.checkIfTimerMessage`).
#[test]
fn deletions_cancel_their_message_on_any_shard() {
    let directory = TempDir::new("e2e-timer-cancel");
    let broker = Broker::start(&directory.0, SHARDS, &[]);
    let mut client = broker.client();
    let topic = "TimerCancel";
    create_topic(&mut client, topic, QUEUES);
    let due_ms = due_in(4_000);
    let (cancel, keep, sentinels, queues) = send_pairs(&mut client, topic, due_ms);
    let at_ms = recall_timestamp(due_ms);
    // The first message's deletion through its own shard, the second's through the other.
    send_deletion(&mut client, topic, queues[0], &cancel[0], at_ms);
    send_deletion(&mut client, topic, queues[0], &cancel[1], at_ms);
    send_deletion(
        &mut client,
        topic,
        queues[1],
        "0000000000000000UNKNOWN",
        at_ms,
    );
    // A deletion of a kept message, but in the next slot: cancels nothing.
    assert_ne!(cancel_slot(due_ms + 1_000), cancel_slot(due_ms + 100));
    send_deletion(&mut client, topic, queues[1], &keep[1], due_ms + 1_000);
    let past = send(
        &mut client,
        topic,
        queues[0],
        &[
            (names::TIMER_DELIVER_MS, (now_ms() - 1_000).to_string()),
            (names::TIMER_DEL_UNIQKEY, format!("{topic}+{}", keep[0])),
        ],
    );
    assert_eq!(past.response_code(), ResponseCode::MESSAGE_ILLEGAL);
    assert_outcome(&mut client, topic, &cancel, &keep, &sentinels);

    let plain_topic = "TimerCancelPlain";
    let plain = send(
        &mut client,
        plain_topic,
        0,
        &[(names::TIMER_DEL_UNIQKEY, format!("{topic}+{}", keep[0]))],
    );
    let key = send_header(&plain).transaction_id.unwrap();
    let stored = drain(&mut client, plain_topic, 0);
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].uniq_key(), Some(key.as_str()));
}

// Proves deletions survive SIGKILL: one enqueued by the wheel well before the kill and one
// acknowledged right before it are both replayed from the log after the restart, so their
// messages are never delivered while the others of the same second are.
#[test]
fn deletions_survive_sigkill() {
    let directory = TempDir::new("e2e-timer-cancel-crash");
    let mut broker = Broker::start(&directory.0, SHARDS, &[]);
    let mut client = broker.client();
    let topic = "TimerCancelCrash";
    create_topic(&mut client, topic, QUEUES);
    let due_ms = due_in(7_000);
    let (cancel, keep, sentinels, queues) = send_pairs(&mut client, topic, due_ms);
    let at_ms = recall_timestamp(due_ms);
    // The first deletion reaches its slot files (a copy on every shard's wheel) before the
    // second is sent, so the restart replays one from the slots and one from the log.
    let second = slot::second_of(at_ms);
    let before = slot_bytes(&directory.0, second);
    send_deletion(&mut client, topic, queues[1], &cancel[0], at_ms);
    let copies = u64::try_from(SHARDS * SLOT_ENTRY_BYTES).unwrap();
    let slotted = poll_until(Duration::from_secs(10), || {
        slot_bytes(&directory.0, second) >= before + copies
    });
    assert!(
        slotted,
        "the first deletion reached every wheel's slot file"
    );
    send_deletion(&mut client, topic, queues[0], &cancel[1], at_ms);
    drop(client);
    broker.kill();
    broker.restart(SHARDS);
    sched_common::wait_until_serving(broker.broker_addr);
    let mut client = broker.client();
    assert_outcome(&mut client, topic, &cancel, &keep, &sentinels);
}

fn recall(client: &mut Client, topic: &str, handle: &str) -> RemotingCommand {
    let header = RecallMessageRequestHeader {
        producer_group: Some("pg".into()),
        topic: topic.into(),
        recall_handle: handle.into(),
    };
    client.call(RemotingCommand::request(RequestCode::RECALL_MESSAGE, 0).with_header(&header))
}

fn assert_refused(response: &RemotingCommand, code: ResponseCode, remark: &str) {
    assert_eq!(response.response_code(), code, "{:?}", response.remark);
    assert_eq!(response.remark.as_deref(), Some(remark));
}

// Proves RECALL_MESSAGE as Java's `RecallMessageProcessor`: a timed send answers a v1
// handle naming its topic, broker, slot and id (a plain or due-now send none); recalling
// with it answers SUCCESS with the id and MSG_REGION, and the message is never delivered
// while one due in the same second is; a handle naming an unknown message is SUCCESS and
// harmless; bad handles, another topic, another broker, a past timestamp and an unknown
// topic are refused with Java's codes and remarks; with recallMessageEnable off (the
// default) recall is NO_PERMISSION.
#[test]
fn recall_cancels_by_handle() {
    let directory = TempDir::new("e2e-timer-recall");
    let broker = Broker::start(&directory.0, SHARDS, &["-o", "recallMessageEnable=true"]);
    let mut client = broker.client();
    let topic = "TimerRecall";
    create_topic(&mut client, topic, QUEUES);
    let due_ms = due_in(4_000);
    // Queue 0 is where a recall's deletion goes; the recalled message sits on the other
    // shard, so the deletion must reach that shard's wheel.
    let far_shard = owner_shard(topic, 0, SHARDS).0 ^ 1;
    let queue = queue_on(topic, far_shard);
    let response = send(
        &mut client,
        topic,
        queue,
        &[(names::TIMER_DELIVER_MS, due_ms.to_string())],
    );
    let header = send_header(&response);
    let recalled = header.transaction_id.unwrap();
    let handle = header
        .recall_handle
        .expect("a timed send answers a recall handle");
    let decoded = RecallHandle::decode(&handle).unwrap();
    assert_eq!(decoded.topic, topic);
    assert_eq!(decoded.message_id, recalled);
    assert_eq!(decoded.timestamp, recall_timestamp(due_ms).to_string());
    let keep = send_at(&mut client, topic, queue, due_ms + 100);
    let sentinel = send_at(&mut client, topic, queue, due_ms + 1_500);
    let plain = send(&mut client, topic, queue, &[]);
    assert_eq!(send_header(&plain).recall_handle, None);

    let response = recall(&mut client, topic, &handle);
    assert_eq!(
        response.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        response.remark
    );
    let answer = RecallMessageResponseHeader::from_ext_fields(&response.ext_fields).unwrap();
    assert_eq!(answer.msg_id, recalled);
    assert!(response.ext_fields.get(EXT_MSG_REGION).is_some());
    let unknown = RecallHandle {
        message_id: "0000000000000000UNKNOWN".into(),
        ..decoded.clone()
    };
    let response = recall(&mut client, topic, &unknown.encode());
    assert_eq!(
        response.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        response.remark
    );

    let invalid = "recall handle is invalid";
    assert_refused(
        &recall(&mut client, topic, "!!!"),
        ResponseCode::ILLEGAL_OPERATION,
        invalid,
    );
    let short = RecallHandle {
        message_id: String::new(),
        ..decoded.clone()
    };
    assert_refused(
        &recall(&mut client, topic, &short.encode()),
        ResponseCode::ILLEGAL_OPERATION,
        invalid,
    );
    create_topic(&mut client, "TimerRecallOther", 1);
    assert_refused(
        &recall(&mut client, "TimerRecallOther", &handle),
        ResponseCode::ILLEGAL_OPERATION,
        "recall failed, topic not match",
    );
    let elsewhere = RecallHandle {
        broker_name: "another-broker".into(),
        ..decoded.clone()
    };
    assert_refused(
        &recall(&mut client, topic, &elsewhere.encode()),
        ResponseCode::ILLEGAL_OPERATION,
        "recall failed, broker service not available",
    );
    let past = RecallHandle {
        timestamp: (now_ms() - 1).to_string(),
        ..decoded.clone()
    };
    assert_refused(
        &recall(&mut client, topic, &past.encode()),
        ResponseCode::ILLEGAL_OPERATION,
        "recall failed, timestamp invalid",
    );
    assert_refused(
        &recall(&mut client, "TimerRecallNoSuchTopic", &handle),
        ResponseCode::TOPIC_NOT_EXIST,
        "recall failed, the topic[TimerRecallNoSuchTopic] not exist",
    );

    let wanted = [keep.clone(), sentinel.clone()];
    let stored = wait_for(&mut client, topic, &wanted);
    assert!(
        stored.contains(&keep) && stored.contains(&sentinel),
        "{stored:?}"
    );
    assert!(
        !stored.contains(&recalled),
        "a recalled message was delivered"
    );
    drop(broker);

    let directory = TempDir::new("e2e-timer-recall-off");
    let broker = Broker::start(&directory.0, 1, &[]);
    let mut client = broker.client();
    create_topic(&mut client, topic, 1);
    assert_refused(
        &recall(&mut client, topic, &handle),
        ResponseCode::NO_PERMISSION,
        "recall failed, operation is forbidden",
    );
}

// Proves a batch whose messages carry timer properties is stored at once in its real queue,
// timer properties untouched and no TIMER_OUT_MS added, with no recall handle: Java applies
// its timer rewrite to single messages only (`HookUtils.handleScheduleMessage` is skipped
// for a `MessageExtBatch`).
#[test]
fn timed_batches_are_stored_at_once() {
    let directory = TempDir::new("e2e-timer-batch");
    let broker = Broker::start(&directory.0, 1, &[]);
    let mut client = broker.client();
    let topic = "TimerBatch";
    create_topic(&mut client, topic, 1);
    let mut first = Properties::new();
    first.insert(names::TIMER_DELAY_SEC, "60");
    let mut second = Properties::new();
    second.insert(names::TIMER_DELIVER_MS, (now_ms() + 60_000).to_string());
    let (first, second) = (first.encode(), second.encode());
    let entries = [
        BatchEntry {
            flag: 0,
            body: b"one",
            properties: &first,
        },
        BatchEntry {
            flag: 0,
            body: b"two",
            properties: &second,
        },
    ];
    let mut body = BytesMut::new();
    encode_batch(&entries, &mut body).unwrap();
    let header = SendMessageRequestHeaderV2 {
        producer_group: "pg".into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 0,
        sys_flag: 0,
        born_timestamp: now_ms(),
        flag: 0,
        properties: None,
        reconsume_times: Some(0),
        unit_mode: Some(false),
        max_reconsume_times: None,
        batch: Some(true),
        broker_name: None,
    };
    let request = RemotingCommand::request(RequestCode::SEND_BATCH_MESSAGE, 0)
        .with_header(&header)
        .with_body(body.freeze());
    let response = client.call(request);
    let answer = send_header(&response);
    assert_eq!(answer.recall_handle, None);
    let stored = drain(&mut client, topic, 0);
    assert_eq!(stored.len(), 2, "a timed batch is stored at once");
    assert_eq!(stored[0].property(names::TIMER_DELAY_SEC), Some("60"));
    assert!(stored[1].property(names::TIMER_DELIVER_MS).is_some());
    assert!(stored
        .iter()
        .all(|message| message.property(names::TIMER_OUT_MS).is_none()));
}
