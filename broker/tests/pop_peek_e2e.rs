//! PEEK_MESSAGE, NOTIFICATION and POLLING_INFO end to end against a real broker with two
//! shards (docs/architecture.md#pop): a peek takes nothing, a notification answers whether
//! the group could pop (at once, after its poll time, or woken by an arrival), and polling
//! info counts a waiting pop.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use comet_proto::headers::{
    NotificationRequestHeader, NotificationResponseHeader, PeekMessageRequestHeader,
    PollingInfoRequestHeader, PollingInfoResponseHeader, PopMessageResponseHeader,
};
use comet_proto::message::decode_records;
use comet_proto::{CommandHeader, RemotingCommand, RequestCode, ResponseCode};
use comet_test_support::poll_until;
use common::pop::{now_ms, pop_request};
use common::{create_topic, send_request, Broker, Client, TempDir};

const CORES: usize = 2;

/// The bodies a pop answered (none for POLLING_TIMEOUT).
fn pop_bodies(response: &RemotingCommand) -> Vec<String> {
    match response.response_code() {
        ResponseCode::SUCCESS => bodies_of(response),
        ResponseCode::POLLING_TIMEOUT => Vec::new(),
        other => panic!("pop answered {other:?}: {:?}", response.remark),
    }
}

fn bodies_of(response: &RemotingCommand) -> Vec<String> {
    decode_records(response.body.clone())
        .iter()
        .map(|message| String::from_utf8(message.body.to_vec()).unwrap())
        .collect()
}

fn peek(client: &mut Client, group: &str, topic: &str, queue_id: i32, max: i32) -> RemotingCommand {
    let header = PeekMessageRequestHeader {
        consumer_group: group.into(),
        topic: topic.into(),
        queue_id,
        max_msg_nums: max,
    };
    client.call(RemotingCommand::request(RequestCode::PEEK_MESSAGE, 0).with_header(&header))
}

fn notification_request(group: &str, topic: &str, queue_id: i32, poll_ms: i64) -> RemotingCommand {
    let header = NotificationRequestHeader {
        consumer_group: group.into(),
        topic: topic.into(),
        queue_id,
        poll_time: poll_ms,
        born_time: now_ms(),
        order: Some(false),
        attempt_id: None,
        broker_name: None,
    };
    RemotingCommand::request(RequestCode::NOTIFICATION, 0).with_header(&header)
}

/// `hasMsg` of a NOTIFICATION answer, and how long it took.
fn notify(
    client: &mut Client,
    group: &str,
    topic: &str,
    queue_id: i32,
    poll_ms: i64,
) -> (bool, Duration) {
    let started = Instant::now();
    let response = client.call_ok(notification_request(group, topic, queue_id, poll_ms));
    let header = NotificationResponseHeader::from_ext_fields(&response.ext_fields).unwrap();
    (header.has_msg, started.elapsed())
}

fn polling_num(client: &mut Client, group: &str, topic: &str, queue_id: i32) -> i32 {
    let header = PollingInfoRequestHeader {
        consumer_group: group.into(),
        topic: topic.into(),
        queue_id,
    };
    let request = RemotingCommand::request(RequestCode::POLLING_INFO, 0).with_header(&header);
    let response = client.call_ok(request);
    PollingInfoResponseHeader::from_ext_fields(&response.ext_fields)
        .unwrap()
        .polling_num
}

fn send_bodies(client: &mut Client, topic: &str, queues: i32, bodies: &[String]) {
    for (index, text) in bodies.iter().enumerate() {
        let queue = i32::try_from(index).unwrap() % queues;
        client.call_ok(send_request(topic, queue, text.as_bytes(), Some("t"), None));
    }
}

// Proves a peek returns the messages at the group's pop position across queues of both
// shards, with `restNum`, and takes nothing: peeking twice gives the same messages and a
// pop after it still gets every one of them; once popped, a peek finds nothing.
#[test]
fn peek_returns_messages_and_takes_nothing() {
    let directory = TempDir::new("e2e-peek");
    let broker = Broker::start(&directory.0, CORES, &[]);
    let mut client = broker.client();
    create_topic(&mut client, "Peek", 4);
    let sent: Vec<String> = (0..6).map(|i| format!("peek-{i}")).collect();
    send_bodies(&mut client, "Peek", 4, &sent);
    let all: BTreeSet<String> = sent.iter().cloned().collect();

    let first = peek(&mut client, "peek_g", "Peek", -1, 32);
    assert_eq!(
        first.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        first.remark
    );
    let header = PopMessageResponseHeader::from_ext_fields(&first.ext_fields).unwrap();
    assert_eq!(header.rest_num, 6);
    assert_eq!(bodies_of(&first).into_iter().collect::<BTreeSet<_>>(), all);
    let again = peek(&mut client, "peek_g", "Peek", -1, 32);
    assert_eq!(bodies_of(&again).into_iter().collect::<BTreeSet<_>>(), all);
    let one_queue = peek(&mut client, "peek_g", "Peek", 0, 32);
    assert_eq!(bodies_of(&one_queue), ["peek-0", "peek-4"]);
    let two = peek(&mut client, "peek_g", "Peek", -1, 2);
    assert_eq!(bodies_of(&two).len(), 2);

    let mut popped = BTreeSet::new();
    poll_until(Duration::from_secs(10), || {
        let response = client.call(pop_request("peek_g", "Peek", -1, 32, 60_000, 0));
        popped.extend(pop_bodies(&response));
        popped.len() >= all.len()
    });
    assert_eq!(popped, all, "the pop got every message the peek saw");
    let after = peek(&mut client, "peek_g", "Peek", -1, 32);
    assert_eq!(after.response_code(), ResponseCode::PULL_NOT_FOUND);
    assert_eq!(after.remark.as_deref(), Some("NO_MESSAGE_IN_QUEUE"));

    let unknown = peek(&mut client, "peek_g", "NoSuchTopic", -1, 32);
    assert_eq!(unknown.response_code(), ResponseCode::TOPIC_NOT_EXIST);
    let illegal = peek(&mut client, "peek_g", "Peek", 4, 32);
    assert_eq!(illegal.response_code(), ResponseCode::INVALID_PARAMETER);
}

// Proves a notification answers false after its poll time when nothing can be popped,
// true at once when something can (for that queue only), and true soon after a message
// arrives during its poll.
#[test]
fn notification_tells_whether_a_pop_would_find_something() {
    let directory = TempDir::new("e2e-notify");
    let broker = Broker::start(&directory.0, CORES, &[]);
    let mut client = broker.client();
    create_topic(&mut client, "Notify", 2);

    let (has_msg, waited) = notify(&mut client, "notify_g", "Notify", -1, 400);
    assert!(!has_msg);
    assert!(
        waited >= Duration::from_millis(300),
        "answered after {waited:?}"
    );

    client.call_ok(send_request("Notify", 0, b"here", Some("t"), None));
    let (has_msg, waited) = notify(&mut client, "notify_g", "Notify", -1, 20_000);
    assert!(has_msg);
    assert!(waited < Duration::from_secs(5), "answered after {waited:?}");
    assert!(notify(&mut client, "notify_g", "Notify", 0, 20_000).0);
    assert!(!notify(&mut client, "notify_g", "Notify", 1, 300).0);

    // Popped: nothing is left for the group.
    let popped = pop_bodies(&client.call(pop_request("notify_g", "Notify", -1, 32, 60_000, 0)));
    assert_eq!(popped, ["here"]);
    assert!(!notify(&mut client, "notify_g", "Notify", -1, 300).0);

    let addr = broker.broker_addr;
    let (asked, was_asked) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let mut client = Client::connect(addr);
        let started = Instant::now();
        let opaque = client.send(notification_request("notify_g", "Notify", -1, 20_000));
        asked.send(()).unwrap();
        let response = client.receive();
        assert_eq!(response.opaque, opaque);
        assert_eq!(response.response_code(), ResponseCode::SUCCESS);
        let header = NotificationResponseHeader::from_ext_fields(&response.ext_fields).unwrap();
        (header.has_msg, started.elapsed())
    });
    // The send follows the notification on the wire, so it arrives while it polls.
    was_asked.recv().unwrap();
    client.call_ok(send_request("Notify", 1, b"later", Some("t"), None));
    let (has_msg, waited) = waiter.join().unwrap();
    assert!(has_msg);
    assert!(waited < Duration::from_secs(10), "woken after {waited:?}");

    let illegal = client.call(notification_request("notify_g", "Notify", 2, 0));
    assert_eq!(illegal.response_code(), ResponseCode::SYSTEM_ERROR);
}

// Proves polling info counts a pop waiting for the topic, group and queue id it asked,
// and stops counting it once a message answered it.
#[test]
fn polling_info_counts_a_waiting_pop() {
    let directory = TempDir::new("e2e-polling-info");
    let broker = Broker::start(&directory.0, CORES, &[]);
    let mut client = broker.client();
    create_topic(&mut client, "PollInfo", 2);
    assert_eq!(polling_num(&mut client, "poll_info_g", "PollInfo", -1), 0);

    let addr = broker.broker_addr;
    let waiter = std::thread::spawn(move || {
        let mut client = Client::connect(addr);
        let response = client.call(pop_request(
            "poll_info_g",
            "PollInfo",
            -1,
            32,
            60_000,
            20_000,
        ));
        pop_bodies(&response)
    });
    let counted = poll_until(Duration::from_secs(10), || {
        polling_num(&mut client, "poll_info_g", "PollInfo", -1) == 1
    });
    assert!(counted, "the waiting pop is counted");
    assert_eq!(polling_num(&mut client, "poll_info_g", "PollInfo", 0), 0);
    assert_eq!(polling_num(&mut client, "other_g", "PollInfo", -1), 0);

    client.call_ok(send_request("PollInfo", 1, b"wake", Some("t"), None));
    assert_eq!(waiter.join().unwrap(), ["wake"]);
    let released = poll_until(Duration::from_secs(10), || {
        polling_num(&mut client, "poll_info_g", "PollInfo", -1) == 0
    });
    assert!(released, "an answered pop is no longer counted");
}
