//! Helpers shared by the delayed-message, retry and transaction end-to-end tests: typed
//! sends with properties, and pulls that decode every message of a queue.

#![allow(dead_code)]

pub mod transaction;

use std::time::{Duration, Instant};

use comet_proto::headers::{
    GetMaxOffsetRequestHeader, GetMaxOffsetResponseHeader, SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
};
use comet_proto::message::{decode_records, MessageExt};
use comet_proto::properties::{names, Properties};
use comet_proto::{CommandHeader, RemotingCommand, RequestCode, ResponseCode};

use crate::common::{pull_request, Client};

/// A SEND_MESSAGE_V2 with the given properties, sysflag and reconsume fields.
pub fn send_with(
    topic: &str,
    queue_id: i32,
    body: &[u8],
    properties: &Properties,
    sys_flag: i32,
    producer_group: &str,
) -> RemotingCommand {
    let header = SendMessageRequestHeaderV2 {
        producer_group: producer_group.into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id,
        sys_flag,
        born_timestamp: 1_700_000_000_000,
        flag: 0,
        properties: Some(properties.encode()),
        reconsume_times: Some(0),
        unit_mode: Some(false),
        max_reconsume_times: None,
        batch: Some(false),
        broker_name: None,
    };
    RemotingCommand::request(RequestCode::SEND_MESSAGE_V2, 0)
        .with_header(&header)
        .with_body(body.to_vec())
}

/// Sends `body` to (`topic`, `queue_id`) with the delay property `delay` (a delay level or a
/// timer's delay) and WAIT; asserts SUCCESS and returns the message's UNIQ_KEY.
pub fn send_with_delay(
    client: &mut Client,
    topic: &str,
    queue_id: i32,
    delay: (&str, i64),
    body: &str,
) -> String {
    let mut properties = Properties::new();
    properties.insert(delay.0, delay.1.to_string());
    properties.insert(names::WAIT, "true");
    let response = client.call_ok(send_with(
        topic,
        queue_id,
        body.as_bytes(),
        &properties,
        0,
        "pg",
    ));
    let header = SendMessageResponseHeader::from_ext_fields(&response.ext_fields).unwrap();
    header.transaction_id.expect("the unique key is echoed")
}

/// Pulls (topic, queue) from `offset` once, without waiting; messages and next offset.
pub fn pull_once(
    client: &mut Client,
    topic: &str,
    queue_id: i32,
    offset: i64,
) -> (Vec<MessageExt>, i64) {
    let response = client.call(pull_request("sched_check", topic, queue_id, offset, 256, 0));
    if response.response_code() != ResponseCode::SUCCESS {
        return (Vec::new(), offset);
    }
    let next = response
        .ext_fields
        .optional_i64("nextBeginOffset")
        .unwrap()
        .unwrap();
    (decode_records(response.body.clone()), next)
}

/// Every message of (topic, queue) from offset 0.
pub fn drain(client: &mut Client, topic: &str, queue_id: i32) -> Vec<MessageExt> {
    let mut all = Vec::new();
    let mut offset = 0;
    loop {
        let (messages, next) = pull_once(client, topic, queue_id, offset);
        if messages.is_empty() {
            return all;
        }
        all.extend(messages);
        offset = next;
    }
}

/// Polls (topic, queue) until `count` messages arrived past `offset` or `limit` passed;
/// returns each with the instant it was first seen.
pub fn collect(
    client: &mut Client,
    topic: &str,
    queue_id: i32,
    count: usize,
    limit: Duration,
) -> Vec<(MessageExt, Instant)> {
    let deadline = Instant::now() + limit;
    let mut seen = Vec::new();
    let mut offset = 0;
    while seen.len() < count && Instant::now() < deadline {
        let (messages, next) = pull_once(client, topic, queue_id, offset);
        let now = Instant::now();
        offset = next;
        if messages.is_empty() {
            std::thread::sleep(Duration::from_millis(20));
        }
        seen.extend(messages.into_iter().map(|message| (message, now)));
    }
    seen
}

/// Waits until a fresh connection gets an answer: right after a restart the first
/// connection can be reset while the shards' listeners come up (seen on a loaded machine).
pub fn wait_until_serving(broker_addr: std::net::SocketAddr) {
    let what = format!("the broker at {broker_addr} to answer");
    comet_test_support::wait_until(&what, Duration::from_secs(60), || {
        std::panic::catch_unwind(|| {
            let mut client = Client::connect(broker_addr);
            let request = RemotingCommand::request(RequestCode::GET_BROKER_CONFIG, 0);
            client.call(request).response_code()
        })
        .is_ok()
    });
}

/// Sends every request over `client` with up to `window` unanswered at once (the broker
/// answers by opaque, in any order) and returns the responses in request order. Pipelining
/// lets one connection keep many sends in the same group commit instead of one per fsync.
pub fn call_pipelined(
    client: &mut Client,
    requests: Vec<RemotingCommand>,
    window: usize,
) -> Vec<RemotingCommand> {
    assert!(window > 0);
    let total = requests.len();
    let mut index_of = std::collections::HashMap::with_capacity(total);
    let mut responses: Vec<Option<RemotingCommand>> = (0..total).map(|_| None).collect();
    let mut pending = requests.into_iter().enumerate();
    let mut in_flight = 0;
    let mut answered = 0;
    while answered < total {
        while in_flight < window {
            let Some((index, request)) = pending.next() else {
                break;
            };
            index_of.insert(client.send(request), index);
            in_flight += 1;
        }
        let response = client.receive();
        let index = index_of
            .remove(&response.opaque)
            .unwrap_or_else(|| panic!("response to unknown opaque {}", response.opaque));
        responses[index] = Some(response);
        in_flight -= 1;
        answered += 1;
    }
    responses.into_iter().flatten().collect()
}

/// The max offset (one past the last visible entry) of (topic, queue): GET_MAX_OFFSET.
pub fn max_offset(client: &mut Client, topic: &str, queue_id: i32) -> i64 {
    let header = GetMaxOffsetRequestHeader {
        topic: topic.into(),
        queue_id,
        committed: None,
        broker_name: None,
        logical: None,
    };
    let request = RemotingCommand::request(RequestCode::GET_MAX_OFFSET, 0).with_header(&header);
    let response = client.call(request);
    assert_eq!(
        response.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        response.remark
    );
    GetMaxOffsetResponseHeader::from_ext_fields(&response.ext_fields)
        .expect("GET_MAX_OFFSET response header")
        .offset
}
