//! Pop requests as Java's 5.x client speaks them, for the pop end-to-end tests: receipts
//! (`POP_CK`) come from the answered messages, acks name the queue's own topic (the pop
//! retry topic for a retried message).

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use comet_proto::body::{JsonBody, SubscriptionGroupConfig};
use comet_proto::headers::{
    AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader, ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader, PopMessageResponseHeader,
};
use comet_proto::message::{decode_records, MessageExt};
use comet_proto::properties::names;
use comet_proto::{CommandHeader, RemotingCommand, RequestCode, ResponseCode};
use comet_test_support::poll_until;

use super::{send_request, Client};

/// The wall clock, ms.
pub fn now_ms() -> i64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    i64::try_from(since.as_millis()).unwrap()
}

/// One POP_MESSAGE answer.
pub struct Popped {
    /// SUCCESS or POLLING_TIMEOUT.
    pub code: ResponseCode,
    /// The answer's header.
    pub header: Option<PopMessageResponseHeader>,
    /// The messages.
    pub messages: Vec<MessageExt>,
}

/// A POP_MESSAGE request (tag `*`, not orderly).
pub fn pop_request(
    group: &str,
    topic: &str,
    queue_id: i32,
    max: i32,
    invisible_ms: i64,
    poll_ms: i64,
) -> RemotingCommand {
    let header = PopMessageRequestHeader {
        consumer_group: group.into(),
        topic: topic.into(),
        queue_id,
        max_msg_nums: max,
        invisible_time: invisible_ms,
        poll_time: poll_ms,
        born_time: now_ms(),
        init_mode: 0,
        exp_type: Some("TAG".into()),
        exp: Some("*".into()),
        order: Some(false),
        attempt_id: None,
        broker_name: None,
    };
    RemotingCommand::request(RequestCode::POP_MESSAGE, 0).with_header(&header)
}

/// Reads a pop answer; anything but SUCCESS and POLLING_TIMEOUT fails the test.
pub fn popped(response: RemotingCommand) -> Popped {
    let code = response.response_code();
    assert!(
        code == ResponseCode::SUCCESS || code == ResponseCode::POLLING_TIMEOUT,
        "pop answered {code:?}: {:?}",
        response.remark
    );
    let header = PopMessageResponseHeader::from_ext_fields(&response.ext_fields).ok();
    let messages = if code == ResponseCode::SUCCESS {
        decode_records(response.body.clone())
    } else {
        Vec::new()
    };
    Popped {
        code,
        header,
        messages,
    }
}

/// Pops every queue of `topic` (queue id -1) once.
pub fn pop(client: &mut Client, group: &str, topic: &str, max: i32, invisible_ms: i64) -> Popped {
    popped(client.call(pop_request(group, topic, -1, max, invisible_ms, 0)))
}

/// A popped message's receipt (`POP_CK`).
pub fn receipt(message: &MessageExt) -> String {
    message
        .property(names::POP_CK)
        .expect("a popped message carries POP_CK")
        .to_owned()
}

/// The topic of the queue a popped message came from: its receipt's retry flag says.
pub fn queue_topic(message: &MessageExt, group: &str) -> String {
    let receipt = receipt(message);
    let flag = receipt.split(' ').nth(4).expect("a retry flag");
    match flag {
        "0" => message.topic.clone(),
        "1" => format!("%RETRY%{group}_{}", message.topic),
        other => panic!("unexpected retry flag {other}"),
    }
}

/// Acks a popped message.
pub fn ack(client: &mut Client, group: &str, message: &MessageExt) -> RemotingCommand {
    let header = AckMessageRequestHeader {
        consumer_group: group.into(),
        topic: queue_topic(message, group),
        queue_id: message.queue_id,
        extra_info: receipt(message),
        offset: message.queue_offset,
        broker_name: None,
    };
    client.call(RemotingCommand::request(RequestCode::ACK_MESSAGE, 0).with_header(&header))
}

/// Changes a popped message's invisible time; the answer's header.
pub fn change_invisible(
    client: &mut Client,
    group: &str,
    message: &MessageExt,
    invisible_ms: i64,
) -> ChangeInvisibleTimeResponseHeader {
    let header = ChangeInvisibleTimeRequestHeader {
        consumer_group: group.into(),
        topic: queue_topic(message, group),
        queue_id: message.queue_id,
        extra_info: receipt(message),
        offset: message.queue_offset,
        invisible_time: invisible_ms,
        broker_name: None,
    };
    let request =
        RemotingCommand::request(RequestCode::CHANGE_MESSAGE_INVISIBLETIME, 0).with_header(&header);
    let response = client.call_ok(request);
    ChangeInvisibleTimeResponseHeader::from_ext_fields(&response.ext_fields).unwrap()
}

/// A message's body as text.
pub fn body(message: &MessageExt) -> String {
    String::from_utf8(message.body.to_vec()).unwrap()
}

/// Sends `bodies` round-robin over `queues` queues, tag `t`.
pub fn send_bodies(client: &mut Client, topic: &str, queues: i32, bodies: &[String]) {
    for (index, text) in bodies.iter().enumerate() {
        let queue = i32::try_from(index).unwrap() % queues;
        client.call_ok(send_request(topic, queue, text.as_bytes(), Some("t"), None));
    }
}

/// `count` distinct bodies.
pub fn bodies(prefix: &str, count: usize) -> Vec<String> {
    (0..count).map(|i| format!("{prefix}-{i}")).collect()
}

/// Pops until `wanted` distinct bodies were seen or `limit` passes; every message popped.
pub fn pop_until(
    client: &mut Client,
    group: &str,
    topic: &str,
    invisible_ms: i64,
    wanted: usize,
    limit: Duration,
) -> Vec<MessageExt> {
    let mut seen = Vec::new();
    poll_until(limit, || {
        seen.extend(pop(client, group, topic, 32, invisible_ms).messages);
        seen.iter().map(body).collect::<BTreeSet<_>>().len() >= wanted
    });
    seen
}

/// Creates `group` with `retry_max_times`.
pub fn create_group(client: &mut Client, group: &str, retry_max_times: i32) {
    let mut config = SubscriptionGroupConfig::new(group);
    config.retry_max_times = retry_max_times;
    client.call_ok(
        RemotingCommand::request(RequestCode::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, 0)
            .with_body(config.encode().to_vec()),
    );
}

/// An orderly POP_MESSAGE request of one queue (or -1 for every queue).
pub fn pop_order_request(
    group: &str,
    topic: &str,
    queue_id: i32,
    max: i32,
    invisible_ms: i64,
    attempt_id: &str,
) -> RemotingCommand {
    let mut header = PopMessageRequestHeader::from_ext_fields(
        &pop_request(group, topic, queue_id, max, invisible_ms, 0).ext_fields,
    )
    .unwrap();
    header.order = Some(true);
    header.attempt_id = Some(attempt_id.into());
    RemotingCommand::request(RequestCode::POP_MESSAGE, 0).with_header(&header)
}
