//! Changing the core count of a broker keeps every queue's history: queues handed to a new
//! owner shard keep their messages at the same queue offsets (read from the old owner's
//! commit log) and their committed consumer offsets.

mod common;

use std::collections::BTreeMap;

use comet_broker::offset::OffsetFile;
use comet_proto::headers::{
    GetMinOffsetRequestHeader, QueryConsumerOffsetRequestHeader, UpdateConsumerOffsetRequestHeader,
    ViewMessageRequestHeader,
};
use comet_proto::message::decode_records;
use comet_proto::{RemotingCommand, RequestCode, ResponseCode};
use common::{pull_request, query_by_key, send_request, Broker, Client, TempDir};

const TOPIC: &str = "RemapTopic";
const QUEUES: i32 = 8;
const GROUP: &str = "remap_group";

/// Sends `count` messages to every queue; bodies, which are also their keys, name the queue,
/// the phase and the index.
fn send_all(client: &mut Client, phase: &str, count: usize) {
    for queue_id in 0..QUEUES {
        for index in 0..count {
            let body = format!("{phase}-q{queue_id}-{index}");
            let request = send_request(TOPIC, queue_id, body.as_bytes(), None, Some(&body));
            client.call_ok(request);
        }
    }
}

/// Every message of a queue as (queue offset, body), pulled from offset 0.
fn drain_queue(client: &mut Client, queue_id: i32) -> Vec<(i64, String)> {
    drain_from(client, queue_id, 0)
}

/// Every message of a queue as (queue offset, body), pulled from `offset`.
fn drain_from(client: &mut Client, queue_id: i32, mut offset: i64) -> Vec<(i64, String)> {
    let mut messages = Vec::new();
    loop {
        let response = client.call(pull_request("drain", TOPIC, queue_id, offset, 32, 0));
        match response.response_code() {
            ResponseCode::SUCCESS => {
                for message in decode_records(response.body.clone()) {
                    let body = String::from_utf8(message.body.to_vec()).expect("utf-8 body");
                    messages.push((message.queue_offset, body));
                }
                offset = response
                    .ext_fields
                    .optional_i64("nextBeginOffset")
                    .expect("header")
                    .expect("nextBeginOffset");
            }
            ResponseCode::PULL_NOT_FOUND => return messages,
            other => panic!(
                "pull of queue {queue_id} failed: {other} {:?}",
                response.remark
            ),
        }
    }
}

/// What every queue must hold after the phases `phases` (each `count` messages per queue).
fn expected(queue_id: i32, phases: &[&str], count: usize) -> Vec<(i64, String)> {
    let bodies = phases
        .iter()
        .flat_map(|phase| (0..count).map(move |index| format!("{phase}-q{queue_id}-{index}")));
    bodies
        .enumerate()
        .map(|(offset, body)| (offset as i64, body))
        .collect()
}

fn commit_offsets(client: &mut Client) {
    for queue_id in 0..QUEUES {
        let header = UpdateConsumerOffsetRequestHeader {
            consumer_group: GROUP.into(),
            topic: TOPIC.into(),
            queue_id,
            commit_offset: i64::from(queue_id) + 1,
            broker_name: None,
        };
        let request =
            RemotingCommand::request(RequestCode::UPDATE_CONSUMER_OFFSET, 0).with_header(&header);
        assert_eq!(client.call(request).response_code(), ResponseCode::SUCCESS);
    }
}

/// The offsets [`commit_offsets`] commits: queue id to offset.
fn committed_offsets() -> BTreeMap<i32, i64> {
    (0..QUEUES)
        .map(|queue_id| (queue_id, i64::from(queue_id) + 1))
        .collect()
}

/// The group's offsets of the topic as persisted in the store's `consumerOffset-<shard>.json`
/// files (a file being rewritten reads as empty).
fn persisted_offsets(store: &std::path::Path) -> BTreeMap<i32, i64> {
    let mut offsets = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(store.join("config")) else {
        return offsets;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !(name.starts_with("consumerOffset-") && name.ends_with(".json")) {
            continue;
        }
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        if let Ok(file) = serde_json::from_str::<OffsetFile>(&text) {
            if let Some(queues) = file.offset_table.get(&format!("{TOPIC}@{GROUP}")) {
                offsets.extend(queues);
            }
        }
    }
    offsets
}

fn check_offsets(client: &mut Client) {
    for queue_id in 0..QUEUES {
        let header = QueryConsumerOffsetRequestHeader {
            consumer_group: GROUP.into(),
            topic: TOPIC.into(),
            queue_id,
            set_zero_if_not_found: Some(false),
            broker_name: None,
        };
        let request =
            RemotingCommand::request(RequestCode::QUERY_CONSUMER_OFFSET, 0).with_header(&header);
        let response = client.call(request);
        assert_eq!(response.response_code(), ResponseCode::SUCCESS);
        let offset = response.ext_fields.optional_i64("offset").expect("header");
        assert_eq!(offset, Some(i64::from(queue_id) + 1), "queue {queue_id}");
    }
}

fn check_queues(client: &mut Client, phases: &[&str], count: usize) {
    for queue_id in 0..QUEUES {
        let got = drain_queue(client, queue_id);
        assert_eq!(got, expected(queue_id, phases, count), "queue {queue_id}");
    }
}

/// Every stored message, looked up by its commit-log offset (VIEW_MESSAGE_BY_ID), has its
/// body; after the core count shrank this includes logs no running shard writes any more.
fn check_view_by_offset(client: &mut Client) {
    let mut logs = std::collections::BTreeSet::new();
    for queue_id in 0..QUEUES {
        let response = client.call(pull_request("view", TOPIC, queue_id, 0, 32, 0));
        assert_eq!(response.response_code(), ResponseCode::SUCCESS);
        for message in decode_records(response.body.clone()) {
            logs.insert(message.commit_log_offset >> 56);
            let header = ViewMessageRequestHeader {
                offset: message.commit_log_offset,
                topic: None,
                broker_name: None,
            };
            let view = client.call(
                RemotingCommand::request(RequestCode::VIEW_MESSAGE_BY_ID, 0).with_header(&header),
            );
            assert_eq!(
                view.response_code(),
                ResponseCode::SUCCESS,
                "offset {}: {:?}",
                message.commit_log_offset,
                view.remark
            );
            let viewed = decode_records(view.body.clone());
            assert_eq!(viewed.len(), 1);
            assert_eq!(viewed[0].body, message.body);
        }
    }
    assert!(logs.len() > 1, "every message came from one log: {logs:?}");
}

/// QUERY_MESSAGE (queryMsgByKey) finds the first and last message of `phase` in every queue
/// by its key; after the core count shrank this includes keys of logs no running shard
/// writes any more.
fn check_query_by_key(client: &mut Client, phase: &str, count: usize) {
    for queue_id in 0..QUEUES {
        for index in [0, count - 1] {
            let key = format!("{phase}-q{queue_id}-{index}");
            let found = query_by_key(client, TOPIC, &key, None);
            let bodies: Vec<&[u8]> = found.iter().map(|message| &message.body[..]).collect();
            assert_eq!(bodies, vec![key.as_bytes()], "key {key}");
        }
    }
}

// Proves a broker restarted with fewer and then more cores (2, then 1, then 3) serves every
// queue's whole history at the same queue offsets, keeps committed consumer offsets, and
// continues each queue's offsets for new messages.
#[test]
fn core_count_changes_keep_every_queue() {
    let directory = TempDir::new("e2e-remap");
    let count = 20;
    let mut broker = Broker::start(&directory.0, 2, &[]);
    let mut client = broker.client();
    common::create_topic(&mut client, TOPIC, QUEUES);
    send_all(&mut client, "two", count);
    commit_offsets(&mut client);
    check_queues(&mut client, &["two"], count);
    drop(client);
    assert!(broker.stop().success());

    broker.restart(1);
    let mut client = broker.client();
    check_queues(&mut client, &["two"], count);
    check_offsets(&mut client);
    check_view_by_offset(&mut client);
    check_query_by_key(&mut client, "two", count);
    send_all(&mut client, "one", count);
    check_queues(&mut client, &["two", "one"], count);
    drop(client);
    assert!(broker.stop().success());

    broker.restart(3);
    let mut client = broker.client();
    check_queues(&mut client, &["two", "one"], count);
    check_offsets(&mut client);
    send_all(&mut client, "three", count);
    check_queues(&mut client, &["two", "one", "three"], count);
    drop(client);
    assert!(broker.stop().success());
}

fn min_offset(client: &mut Client, queue_id: i32) -> i64 {
    let header = GetMinOffsetRequestHeader {
        topic: TOPIC.into(),
        queue_id,
        broker_name: None,
        logical: None,
    };
    let response =
        client.call(RemotingCommand::request(RequestCode::GET_MIN_OFFSET, 0).with_header(&header));
    assert_eq!(response.response_code(), ResponseCode::SUCCESS);
    response
        .ext_fields
        .optional_i64("offset")
        .expect("header")
        .expect("offset")
}

/// The log holding each queue's messages (all of a queue's messages are in one log here).
fn log_of_queues(client: &mut Client) -> Vec<i64> {
    let mut logs = Vec::new();
    for queue_id in 0..QUEUES {
        let response = client.call(pull_request("logs", TOPIC, queue_id, 0, 1, 0));
        assert_eq!(response.response_code(), ResponseCode::SUCCESS);
        let messages = decode_records(response.body.clone());
        logs.push(messages[0].commit_log_offset >> 56);
    }
    logs
}

/// Every queue holds `count` messages of each phase from its min offset, which is past the
/// first phase's messages exactly for the queues whose messages were in `deleted_log`.
fn check_after_deletion(client: &mut Client, logs: &[i64], deleted_log: i64, count: usize) {
    for queue_id in 0..QUEUES {
        let deleted = logs[queue_id as usize] == deleted_log;
        let phases: &[&str] = if deleted { &["one"] } else { &["two", "one"] };
        let first = if deleted { count as i64 } else { 0 };
        assert_eq!(min_offset(client, queue_id), first, "queue {queue_id}");
        let want: Vec<(i64, String)> = expected(queue_id, &["two", "one"], count)
            .into_iter()
            .filter(|(_, body)| phases.iter().any(|phase| body.starts_with(phase)))
            .collect();
        assert_eq!(
            drain_from(client, queue_id, first),
            want,
            "queue {queue_id}"
        );
    }
}

/// Broker options: segments expire at once, at the current hour (UTC). Waits out the last
/// half minute of an hour so the hour cannot change before the deletion.
fn expire_now_options() -> Vec<String> {
    let mut now_ms = comet_rt::clock::wall_clock_ms();
    if now_ms.rem_euclid(3_600_000) > 3_570_000 {
        std::thread::sleep(std::time::Duration::from_secs(31));
        now_ms = comet_rt::clock::wall_clock_ms();
    }
    let hour = now_ms.div_euclid(3_600_000).rem_euclid(24);
    [
        "-o",
        "fileReservedTime=0",
        "-o",
        &format!("deleteWhen={hour:02}"),
    ]
    .map(String::from)
    .to_vec()
}

// Proves the log of a shard that no longer runs is deleted by retention like any other
// (here: expired at once) and its store directory removed, that queues whose history was in
// it start after it, and that this holds across a restart and when the core count grows
// back (the log id then names a new log, which never serves the deleted entries).
#[test]
fn log_of_a_stopped_shard_is_deleted_and_stays_deleted() {
    let directory = TempDir::new("e2e-remap-retire");
    let count = 10;
    let mut broker = Broker::start(&directory.0, 2, &[]);
    let mut client = broker.client();
    common::create_topic(&mut client, TOPIC, QUEUES);
    send_all(&mut client, "two", count);
    let logs = log_of_queues(&mut client);
    assert!(logs.contains(&0) && logs.contains(&1), "{logs:?}");
    drop(client);
    assert!(broker.stop().success());

    broker.extra = expire_now_options();
    broker.restart(1);
    let orphan_store = directory.0.join("shard-1");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while orphan_store.exists() {
        assert!(std::time::Instant::now() < deadline, "log 1 never deleted");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let mut client = broker.client();
    send_all(&mut client, "one", count);
    check_after_deletion(&mut client, &logs, 1, count);
    drop(client);
    assert!(broker.stop().success());

    broker.extra.clear();
    for cores in [1, 2] {
        broker.restart(cores);
        let mut client = broker.client();
        check_after_deletion(&mut client, &logs, 1, count);
        drop(client);
        assert!(broker.stop().success());
    }
}

// Proves a crash just before the core count changes loses nothing acknowledged: the old
// stores are recovered under the old ownership before their queues are handed over.
#[test]
fn crash_then_fewer_cores_keeps_every_queue() {
    let directory = TempDir::new("e2e-remap-crash");
    let count = 10;
    let mut broker = Broker::start(&directory.0, 2, &[]);
    let mut client = broker.client();
    common::create_topic(&mut client, TOPIC, QUEUES);
    send_all(&mut client, "two", count);
    commit_offsets(&mut client);
    drop(client);
    // The committed offsets must be on disk before the kill (they are persisted on an
    // interval); the store itself is SIGKILLed mid-flight.
    comet_test_support::wait_until(
        "the committed offsets to be persisted",
        std::time::Duration::from_secs(30),
        || persisted_offsets(&directory.0) == committed_offsets(),
    );
    broker.kill();

    // The harness waits for the killed broker's listener to be gone (it can outlive the
    // process for a moment) before the restart, so the readiness probe sees the new broker.
    broker.restart(1);
    let status = broker
        .child
        .as_mut()
        .expect("running")
        .try_wait()
        .expect("wait");
    assert!(status.is_none(), "broker exited: {status:?}");
    let mut client = broker.client();
    check_queues(&mut client, &["two"], count);
    check_offsets(&mut client);
    send_all(&mut client, "one", count);
    check_queues(&mut client, &["two", "one"], count);
    drop(client);
    assert!(broker.stop().success());
}
