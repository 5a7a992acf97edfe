//! Consumer retry and dead letters end to end (issue 9, point 3), with short delay levels.

mod common;
mod sched_common;

use std::time::{Duration, Instant};

use comet_proto::headers::ConsumerSendMsgBackRequestHeader;
use comet_proto::message::MessageExt;
use comet_proto::properties::{names, Properties};
use comet_proto::{RemotingCommand, RequestCode, ResponseCode};
use common::{Broker, Client, TempDir};
use sched_common::{collect, drain, send_with};

const MAX_RECONSUME_TIMES: i32 = 3;

fn send_back(client: &mut Client, message: &MessageExt, group: &str) {
    send_back_as(client, message, group, MAX_RECONSUME_TIMES, None);
}

/// CONSUMER_SEND_MSG_BACK with the client's `maxReconsumeTimes`, from a client at `version`
/// (Comet's own when `None`).
fn send_back_as(
    client: &mut Client,
    message: &MessageExt,
    group: &str,
    max_reconsume_times: i32,
    version: Option<i32>,
) {
    let header = ConsumerSendMsgBackRequestHeader {
        offset: message.commit_log_offset,
        group: group.into(),
        delay_level: 0,
        origin_msg_id: None,
        origin_topic: Some(message.topic.clone()),
        unit_mode: Some(false),
        max_reconsume_times: Some(max_reconsume_times),
        broker_name: None,
    };
    let mut request =
        RemotingCommand::request(RequestCode::CONSUMER_SEND_MSG_BACK, 0).with_header(&header);
    if let Some(version) = version {
        request.version = version;
    }
    client.call_ok(request);
}

// Proves a message failed by its consumer every time is seen maxReconsumeTimes + 1 times
// (original + 3 retries) through %RETRY%<group>, each retry after its level's delay
// (levels 3, 4, 5 = 1 s, 2 s, 3 s: growing), with reconsumeTimes counting up and the original
// topic in RETRY_TOPIC; the last failure lands it in %DLQ%<group>, where it stays.
#[test]
fn failing_consumer_sees_retries_with_growing_delays_then_dead_letter() {
    let directory = TempDir::new("e2e-retry");
    let broker = Broker::start(&directory.0, 2, &["-o", "messageDelayLevel=1s 1s 1s 2s 3s"]);
    let mut client = broker.client();
    let mut properties = Properties::new();
    properties.insert(names::TAGS, "t");
    let response = client.call(send_with("RetryTopic", 0, b"fragile", &properties, 0, "pg"));
    assert_eq!(response.response_code(), ResponseCode::SUCCESS);
    let original = collect(&mut client, "RetryTopic", 0, 1, Duration::from_secs(5));
    assert_eq!(original.len(), 1);
    let mut current = original[0].0.clone();
    let retry_topic = "%RETRY%retry_cg";
    let mut sightings = 1;
    for attempt in 1..=MAX_RECONSUME_TIMES {
        let sent_back = Instant::now();
        send_back(&mut client, &current, "retry_cg");
        let seen = collect(
            &mut client,
            retry_topic,
            0,
            attempt as usize,
            Duration::from_secs(10),
        );
        assert_eq!(seen.len(), attempt as usize, "retry {attempt} never came");
        let (message, at) = seen.last().unwrap().clone();
        let delay = at.duration_since(sent_back);
        let expected = Duration::from_secs(attempt as u64);
        assert!(
            delay + Duration::from_millis(20) >= expected,
            "retry {attempt} early: {delay:?}"
        );
        assert!(
            delay <= expected + Duration::from_secs(1),
            "retry {attempt} late: {delay:?}"
        );
        assert_eq!(message.body.as_ref(), b"fragile");
        assert_eq!(message.reconsume_times, attempt);
        assert_eq!(message.property(names::RETRY_TOPIC), Some("RetryTopic"));
        assert_eq!(message.uniq_key(), original[0].0.uniq_key());
        sightings += 1;
        current = message;
    }
    assert_eq!(sightings, MAX_RECONSUME_TIMES + 1);
    send_back(&mut client, &current, "retry_cg");
    let dead = collect(&mut client, "%DLQ%retry_cg", 0, 1, Duration::from_secs(3));
    assert_eq!(
        dead.len(),
        1,
        "the message did not reach the dead-letter queue"
    );
    assert_eq!(dead[0].0.body.as_ref(), b"fragile");
    assert_eq!(dead[0].0.reconsume_times, MAX_RECONSUME_TIMES + 1);
    // What is checked is that nothing arrives, which no event marks: a retry that should
    // not exist would come after at most the last level's 3 s, inside this window.
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(
        drain(&mut client, retry_topic, 0).len(),
        MAX_RECONSUME_TIMES as usize,
        "a retry was delivered after the message went to the DLQ"
    );
}

// Proves the Java client's fallback path: a plain send to %RETRY%<group> whose
// reconsumeTimes exceeds maxReconsumeTimes is stored in %DLQ%<group> instead.
#[test]
fn fallback_send_past_the_limit_goes_to_the_dead_letter_queue() {
    let directory = TempDir::new("e2e-retry-fallback");
    let broker = Broker::start(&directory.0, 2, &[]);
    let mut client = broker.client();
    let mut properties = Properties::new();
    properties.insert(names::DELAY, "3");
    let mut request = send_with("%RETRY%fallback_cg", 0, b"late", &properties, 0, "pg");
    request.ext_fields.insert("j", "17");
    request.ext_fields.insert("l", "16");
    client.call_ok(request);
    let dead = collect(
        &mut client,
        "%DLQ%fallback_cg",
        0,
        1,
        Duration::from_secs(3),
    );
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].0.body.as_ref(), b"late");
}

/// A CONSUMER_SEND_MSG_BACK frame as npm ali-ons 3.12.0 writes it (header layout of the
/// frames captured from that client: language JAVA, version 121, numbers and booleans
/// unquoted), with `offset` as JavaScript prints a commit-log offset it holds in a double.
fn ali_ons_send_back(offset_text: &str, group: &str, topic: &str) -> RemotingCommand {
    let header = format!(
        "{{\"code\":36,\"language\":\"JAVA\",\"opaque\":7,\"flag\":0,\"version\":121,\
         \"extFields\":{{\"offset\":{offset_text},\"group\":\"{group}\",\"delayLevel\":0,\
         \"originMsgId\":\"7F000001000078BF000000000004A926\",\"originTopic\":\"{topic}\",\
         \"unitMode\":false,\"maxReconsumeTimes\":16}}}}"
    );
    let mut frame = Vec::new();
    frame.extend_from_slice(&u32::try_from(header.len()).unwrap().to_be_bytes());
    frame.extend_from_slice(header.as_bytes());
    comet_proto::frame::decode_frame_payload(frame.into()).expect("the frame decodes")
}

// Proves a send-back from a JavaScript client finds its message on a shard whose offsets
// exceed 2^53: ali-ons rounds commitLogOffset to a double (log 1 starts at 2^56, where
// doubles are 16 apart) and sends that double's shortest decimal; the broker stores the retry
// anyway, with the original body and a raised reconsume count. It failed with "look message
// by offset failed" before the broker searched within the rounding distance.
#[test]
fn javascript_rounded_offset_still_finds_the_message() {
    let directory = TempDir::new("e2e-retry-js");
    let broker = Broker::start(&directory.0, 2, &["-o", "messageDelayLevel=1s 1s 1s"]);
    let mut client = broker.client();
    let topic = "JsRetryTopic";
    let mut found = None;
    'search: for round in 0..8usize {
        for queue_id in 0..4i32 {
            let pad = "x".repeat(round * 3 + queue_id as usize);
            let body = format!("js-{round}-{queue_id}-{pad}");
            let response = client.call(send_with(
                topic,
                queue_id,
                body.as_bytes(),
                &Properties::new(),
                0,
                "pg",
            ));
            assert_eq!(response.response_code(), ResponseCode::SUCCESS);
            for message in drain(&mut client, topic, queue_id) {
                let offset = message.commit_log_offset;
                // What a client holding the offset in a double sees: the truncation is the
                // point.
                #[allow(clippy::cast_possible_truncation)]
                let as_double = (offset as f64) as i64;
                if offset >> 56 == 1 && as_double != offset {
                    found = Some(message);
                    break 'search;
                }
            }
        }
    }
    let message = found.expect("a message on log 1 at an offset no double holds exactly");
    let rounded = format!("{}", message.commit_log_offset as f64);
    assert_ne!(rounded, message.commit_log_offset.to_string());
    client.call_ok(ali_ons_send_back(&rounded, "js_cg", topic));
    let retried = collect(&mut client, "%RETRY%js_cg", 0, 1, Duration::from_secs(10));
    assert_eq!(retried.len(), 1, "the retry never came");
    assert_eq!(retried[0].0.body, message.body);
    assert_eq!(retried[0].0.reconsume_times, 1);
    assert_eq!(retried[0].0.property(names::RETRY_TOPIC), Some(topic));
}
// Proves the client version check Apache applies to CONSUMER_SEND_MSG_BACK: an orderly
// consumer past its local retries sends back with its own maxReconsumeTimes (here 0, so the
// first send-back is past the limit) and, from a V3_4_9+ client, the message goes straight to
// %DLQ%<group>; the same request from an older client is judged by the group's
// retryMaxTimes (16) instead and goes to %RETRY%<group>.
#[test]
fn send_back_limit_from_the_header_only_for_new_clients() {
    let directory = TempDir::new("e2e-retry-version");
    let broker = Broker::start(&directory.0, 2, &["-o", "messageDelayLevel=1s 1s 1s"]);
    let mut client = broker.client();
    for body in ["orderly-new", "orderly-old"] {
        let response = client.call(send_with(
            "OrderlyTopic",
            0,
            body.as_bytes(),
            &Properties::new(),
            0,
            "pg",
        ));
        assert_eq!(response.response_code(), ResponseCode::SUCCESS);
    }
    let original = collect(&mut client, "OrderlyTopic", 0, 2, Duration::from_secs(5));
    assert_eq!(original.len(), 2);
    send_back_as(&mut client, &original[0].0, "orderly_cg", 0, None);
    send_back_as(&mut client, &original[1].0, "orderly_cg", 0, Some(120));
    let dead = collect(&mut client, "%DLQ%orderly_cg", 0, 1, Duration::from_secs(3));
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].0.body.as_ref(), b"orderly-new");
    let retried = collect(
        &mut client,
        "%RETRY%orderly_cg",
        0,
        1,
        Duration::from_secs(5),
    );
    assert_eq!(retried.len(), 1);
    assert_eq!(retried[0].0.body.as_ref(), b"orderly-old");
    assert_eq!(retried[0].0.reconsume_times, 1);
    // What is checked is that no second dead letter arrives; a window is the only way.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(drain(&mut client, "%DLQ%orderly_cg", 0).len(), 1);
}
