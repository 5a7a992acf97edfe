//! Pop consumption end to end (issue 21): POP_MESSAGE, ACK_MESSAGE, BATCH_ACK_MESSAGE and
//! CHANGE_MESSAGE_INVISIBLETIME against a real broker with two shards, as Java's 5.x client
//! speaks them: receipts (`POP_CK`) come from the answered messages, acks name the queue's
//! own topic (the pop retry topic for a retried message).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use comet_proto::headers::{BatchAck, BatchAckMessageRequestBody};
use comet_proto::message::{decode_records, MessageExt};
use comet_proto::properties::names;
use comet_proto::{RemotingCommand, RequestCode, ResponseCode};
use comet_test_support::poll_until;
use common::pop::{
    ack, bodies, body, change_invisible, create_group, pop, pop_request, pop_until, popped,
    queue_topic, receipt, send_bodies,
};
use common::{create_topic, pull_request, send_request, Broker, Client, TempDir};

const CORES: usize = 2;

// Proves pop then ack: every message is handed out once with a receipt in Java's format
// (8 fields, this broker's queue and offset), the answer's offset infos name what was
// popped, and acked messages never come back, past several invisible times.
#[test]
fn popped_and_acked_messages_never_come_back() {
    let directory = TempDir::new("e2e-pop-ack");
    let broker = Broker::start(&directory.0, CORES, &[]);
    let mut client = broker.client();
    create_topic(&mut client, "PopAck", 4);
    let sent = bodies("ack", 12);
    send_bodies(&mut client, "PopAck", 4, &sent);
    let seen = pop_until(
        &mut client,
        "pop_ack_g",
        "PopAck",
        1_000,
        12,
        Duration::from_secs(10),
    );
    assert_eq!(seen.len(), 12, "each message popped once");
    for message in &seen {
        let receipt = receipt(message);
        let fields: Vec<&str> = receipt.split(' ').collect();
        assert_eq!(fields.len(), 8, "{receipt}");
        assert_eq!(fields[4], "0");
        assert_eq!(fields[6], message.queue_id.to_string());
        assert_eq!(fields[7], message.queue_offset.to_string());
        assert_eq!(message.topic, "PopAck");
        let response = ack(&mut client, "pop_ack_g", message);
        assert_eq!(response.response_code(), ResponseCode::SUCCESS);
    }
    // Acking twice is answered as Java does: SUCCESS, nothing changes.
    let again = ack(&mut client, "pop_ack_g", &seen[0]);
    assert_eq!(again.response_code(), ResponseCode::SUCCESS);
    let mut back = Vec::new();
    poll_until(Duration::from_secs(4), || {
        back.extend(pop(&mut client, "pop_ack_g", "PopAck", 32, 1_000).messages);
        false
    });
    assert!(
        back.is_empty(),
        "acked messages came back: {:?}",
        back.iter().map(body).collect::<Vec<_>>()
    );
    // One queue's answer: the offset infos name the queue and the offsets popped.
    client.call_ok(send_request("PopAck", 2, b"one", Some("t"), None));
    let one = popped(client.call(pop_request("pop_ack_g", "PopAck", 2, 32, 60_000, 3_000)));
    assert_eq!(one.code, ResponseCode::SUCCESS);
    let header = one.header.unwrap();
    let offset = one.messages[0].queue_offset;
    assert_eq!(
        header.start_offset_info.as_deref(),
        Some(format!("0 2 {offset}").as_str())
    );
    assert_eq!(
        header.msg_offset_info.as_deref(),
        Some(format!("0 2 {offset}").as_str())
    );
    assert_eq!(header.invisible_time, 60_000);
}

// Proves an unacked message comes back after its invisible time from the group's pop retry
// topic, under its own topic, with reconsume times 1 and its first pop time; unacked again
// with retryMaxTimes 1 it goes to %DLQ%<group> and is never popped again.
#[test]
fn unacked_message_is_retried_then_dead_lettered() {
    let directory = TempDir::new("e2e-pop-retry");
    let broker = Broker::start(&directory.0, CORES, &[]);
    let mut client = broker.client();
    create_topic(&mut client, "PopRetry", 2);
    create_group(&mut client, "pop_retry_g", 1);
    client.call_ok(send_request("PopRetry", 1, b"fragile", Some("t"), None));
    let first = pop_until(
        &mut client,
        "pop_retry_g",
        "PopRetry",
        1_000,
        1,
        Duration::from_secs(10),
    );
    assert_eq!(first.len(), 1);
    let first_pop = receipt(&first[0]).split(' ').nth(1).unwrap().to_owned();
    assert_eq!(first[0].reconsume_times, 0);
    let retried = pop_until(
        &mut client,
        "pop_retry_g",
        "PopRetry",
        1_000,
        1,
        Duration::from_secs(15),
    );
    assert_eq!(retried.len(), 1, "the unacked message came back once");
    let retried = &retried[0];
    assert_eq!(body(retried), "fragile");
    assert_eq!(retried.topic, "PopRetry");
    assert_eq!(retried.reconsume_times, 1);
    assert_eq!(
        queue_topic(retried, "pop_retry_g"),
        "%RETRY%pop_retry_g_PopRetry"
    );
    assert_eq!(
        retried.property(names::FIRST_POP_TIME),
        Some(first_pop.as_str())
    );
    let mut dead = Vec::new();
    let mut popped_again = Vec::new();
    let landed = poll_until(Duration::from_secs(15), || {
        popped_again.extend(pop(&mut client, "pop_retry_g", "PopRetry", 32, 1_000).messages);
        let response = client.call(pull_request("dlq_check", "%DLQ%pop_retry_g", 0, 0, 32, 0));
        if response.response_code() == ResponseCode::SUCCESS {
            dead = decode_records(response.body.clone());
        }
        !dead.is_empty()
    });
    assert!(landed, "the message never reached the dead letters");
    assert!(popped_again.is_empty(), "popped after its last retry");
    assert_eq!(body(&dead[0]), "fragile");
    assert_eq!(dead[0].reconsume_times, 2);
    assert_eq!(dead[0].property(names::RETRY_TOPIC), Some("PopRetry"));
}

// Proves CHANGE_MESSAGE_INVISIBLETIME: shortened, a message comes back before its first
// invisible time; extended, it stays away past it; its new receipt is the message's own
// offset and the new pop time, and acks.
#[test]
fn change_invisible_time_moves_the_return() {
    let directory = TempDir::new("e2e-pop-change");
    let broker = Broker::start(&directory.0, CORES, &[]);
    let mut client = broker.client();
    create_topic(&mut client, "PopChange", 1);
    client.call_ok(send_request("PopChange", 0, b"short", Some("t"), None));
    client.call_ok(send_request("PopChange", 0, b"long", Some("t"), None));
    let popped_at = std::time::Instant::now();
    let seen = pop_until(
        &mut client,
        "pop_change_g",
        "PopChange",
        4_000,
        2,
        Duration::from_secs(10),
    );
    let short = seen.iter().find(|m| body(m) == "short").unwrap().clone();
    let long = seen.iter().find(|m| body(m) == "long").unwrap().clone();
    let shortened = change_invisible(&mut client, "pop_change_g", &short, 300);
    assert_eq!(shortened.invisible_time, 300);
    let extended = change_invisible(&mut client, "pop_change_g", &long, 60_000);
    let mut back = Vec::new();
    poll_until(Duration::from_secs(8), || {
        back.extend(pop(&mut client, "pop_change_g", "PopChange", 32, 60_000).messages);
        false
    });
    let back: Vec<String> = back.iter().map(body).collect();
    assert_eq!(back, ["short"], "only the shortened one comes back");
    assert!(
        popped_at.elapsed() > Duration::from_secs(4),
        "watched past the first invisible time"
    );
    let renewed_receipt = format!(
        "{} {} {} {} 0 {} {} {}",
        long.queue_offset,
        extended.pop_time,
        extended.invisible_time,
        extended.revive_qid,
        receipt(&long).split(' ').nth(5).unwrap(),
        long.queue_id,
        long.queue_offset
    );
    let mut renewed = long.clone();
    renewed.properties.insert(names::POP_CK, renewed_receipt);
    assert_eq!(
        ack(&mut client, "pop_change_g", &renewed).response_code(),
        ResponseCode::SUCCESS
    );
}

// Proves BATCH_ACK_MESSAGE as Java's client builds it (one entry per pop of a queue, bits
// from the start offset): acked messages never come back, an unacked one does.
#[test]
fn batch_ack_acks_what_its_bits_name() {
    let directory = TempDir::new("e2e-pop-batch");
    let broker = Broker::start(&directory.0, CORES, &[]);
    let mut client = broker.client();
    create_topic(&mut client, "PopBatch", 2);
    let sent = bodies("batch", 8);
    send_bodies(&mut client, "PopBatch", 2, &sent);
    let seen = pop_until(
        &mut client,
        "pop_batch_g",
        "PopBatch",
        1_500,
        8,
        Duration::from_secs(10),
    );
    assert_eq!(seen.len(), 8);
    let keep = seen.iter().find(|m| body(m) == "batch-3").unwrap().clone();
    // Group by receipt prefix (start offset, pop time, queue): one BatchAck per pop.
    let mut per_pop: BTreeMap<(i32, String, String), Vec<&MessageExt>> = BTreeMap::new();
    for message in seen.iter().filter(|m| body(m) != "batch-3") {
        let receipt = receipt(message);
        let fields: Vec<&str> = receipt.split(' ').collect();
        let key = (message.queue_id, fields[0].to_owned(), fields[1].to_owned());
        per_pop.entry(key).or_default().push(message);
    }
    let acks = per_pop
        .into_iter()
        .map(|((queue_id, start, pop_time), messages)| {
            let start: i64 = start.parse().unwrap();
            let fields: Vec<String> = receipt(messages[0]).split(' ').map(str::to_owned).collect();
            BatchAck {
                consumer_group: "pop_batch_g".into(),
                topic: "PopBatch".into(),
                retry: "0".into(),
                start_offset: start,
                queue_id,
                revive_queue_id: fields[3].parse().unwrap(),
                pop_time: pop_time.parse().unwrap(),
                invisible_time: fields[2].parse().unwrap(),
                bit_set: BatchAck::bits_of(
                    messages
                        .iter()
                        .map(|m| usize::try_from(m.queue_offset - start).unwrap()),
                ),
            }
        })
        .collect();
    let body_json = BatchAckMessageRequestBody {
        broker_name: None,
        acks,
    };
    let request = RemotingCommand::request(RequestCode::BATCH_ACK_MESSAGE, 0)
        .with_body(comet_proto::json::to_bytes(&body_json));
    client.call_ok(request);
    let mut back = Vec::new();
    poll_until(Duration::from_secs(5), || {
        back.extend(pop(&mut client, "pop_batch_g", "PopBatch", 32, 60_000).messages);
        false
    });
    assert_eq!(back.iter().map(body).collect::<Vec<_>>(), [body(&keep)]);
    let empty =
        RemotingCommand::request(RequestCode::BATCH_ACK_MESSAGE, 0).with_body(b"{}".to_vec());
    assert_eq!(client.call(empty).response_code(), ResponseCode::NO_MESSAGE);
}

// Proves several consumers popping the same queue at once never get the same message while
// it is in flight, and together get every message.
#[test]
fn concurrent_consumers_never_share_a_message_in_flight() {
    let directory = TempDir::new("e2e-pop-concurrent");
    let broker = Broker::start(&directory.0, CORES, &[]);
    let mut client = broker.client();
    create_topic(&mut client, "PopShared", 1);
    let sent = bodies("shared", 60);
    send_bodies(&mut client, "PopShared", 1, &sent);
    let addr = broker.broker_addr;
    let total = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let consumers: Vec<_> = (0..4)
        .map(|_| {
            let total = total.clone();
            std::thread::spawn(move || {
                let mut client = Client::connect(addr);
                let mut got = Vec::new();
                poll_until(Duration::from_secs(15), || {
                    let request = pop_request("pop_shared_g", "PopShared", 0, 3, 60_000, 0);
                    let answer = popped(client.call(request));
                    got.extend(answer.messages.iter().map(body));
                    let ordering = std::sync::atomic::Ordering::SeqCst;
                    total.fetch_add(answer.messages.len(), ordering) + answer.messages.len() >= 60
                        || total.load(ordering) >= 60
                });
                got
            })
        })
        .collect();
    let mut all = Vec::new();
    for consumer in consumers {
        all.extend(consumer.join().unwrap());
    }
    let distinct: BTreeSet<&String> = all.iter().collect();
    assert_eq!(distinct.len(), all.len(), "a message went to two consumers");
    assert_eq!(distinct.len(), 60);
}

// Proves a pop with a poll time waits for a message and is woken by its arrival, well
// before the poll time; one with nothing to find is answered POLLING_TIMEOUT.
#[test]
fn long_polling_pop_is_woken_by_a_new_message() {
    let directory = TempDir::new("e2e-pop-poll");
    let broker = Broker::start(&directory.0, CORES, &[]);
    let mut client = broker.client();
    create_topic(&mut client, "PopPoll", 1);
    let empty = popped(client.call(pop_request("pop_poll_g", "PopPoll", -1, 32, 60_000, 300)));
    assert_eq!(empty.code, ResponseCode::POLLING_TIMEOUT);
    let addr = broker.broker_addr;
    let (asked, was_asked) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let mut client = Client::connect(addr);
        let started = std::time::Instant::now();
        let opaque = client.send(pop_request("pop_poll_g", "PopPoll", 0, 32, 60_000, 20_000));
        asked.send(()).unwrap();
        let response = client.receive();
        assert_eq!(response.opaque, opaque);
        let answer = popped(response);
        (
            answer.messages.iter().map(body).collect::<Vec<_>>(),
            started.elapsed(),
        )
    });
    // The send follows the pop on the wire; the broker parks the pop within microseconds,
    // long before a send round trip reaches it.
    was_asked.recv().unwrap();
    client.call_ok(send_request("PopPoll", 0, b"wake", Some("t"), None));
    let (got, waited) = waiter.join().unwrap();
    assert_eq!(got, ["wake"]);
    assert!(waited < Duration::from_secs(10), "woken after {waited:?}");
}

// Proves durability across SIGKILL, with consumer offsets never persisted in between (a
// long persist interval): popped-unacked messages come back after restart (once their
// invisible time passed), acked ones never do, and nothing sent before is popped as new
// twice.
#[test]
fn sigkill_keeps_in_flight_messages_and_forgets_acked_ones() {
    let directory = TempDir::new("e2e-pop-kill");
    let mut broker = Broker::start(
        &directory.0,
        CORES,
        &["-o", "flushConsumerOffsetInterval=600000"],
    );
    let mut client = broker.client();
    create_topic(&mut client, "PopKill", 4);
    let sent = bodies("kill", 16);
    send_bodies(&mut client, "PopKill", 4, &sent);
    let seen = pop_until(
        &mut client,
        "pop_kill_g",
        "PopKill",
        8_000,
        16,
        Duration::from_secs(10),
    );
    assert_eq!(seen.len(), 16);
    let (acked, in_flight): (Vec<_>, Vec<_>) = seen
        .iter()
        .partition(|m| body(m).ends_with(['0', '2', '4', '6', '8']));
    for message in &acked {
        assert_eq!(
            ack(&mut client, "pop_kill_g", message).response_code(),
            ResponseCode::SUCCESS
        );
    }
    broker.kill();
    broker.restart(CORES);
    let mut client = broker.client();
    let expected: BTreeSet<String> = in_flight.iter().map(|m| body(m)).collect();
    let mut back: Vec<MessageExt> = Vec::new();
    let all_back = poll_until(Duration::from_secs(30), || {
        back.extend(pop(&mut client, "pop_kill_g", "PopKill", 32, 60_000).messages);
        back.iter().map(body).collect::<BTreeSet<_>>() == expected
    });
    let got: Vec<String> = back.iter().map(body).collect();
    assert!(
        all_back,
        "in-flight messages lost: came back {got:?}, expected {expected:?}"
    );
    assert_eq!(
        got.len(),
        expected.len(),
        "a message came back twice: {got:?}"
    );
    assert!(back.iter().all(|m| m.reconsume_times == 1));
    // Nothing else: the acked ones stay acked past their invisible time.
    let mut more = Vec::new();
    poll_until(Duration::from_secs(5), || {
        more.extend(pop(&mut client, "pop_kill_g", "PopKill", 32, 60_000).messages);
        false
    });
    assert!(
        more.is_empty(),
        "came back after restart: {:?}",
        more.iter().map(body).collect::<Vec<_>>()
    );
}

/// Pops queue 0 of `topic` once for a group new to it, asking to start at the queue's end
/// (initMode 1, what 5.x's proxy sends); the bodies popped.
fn pop_from_end(client: &mut Client, group: &str, topic: &str) -> Vec<String> {
    use comet_proto::CommandHeader;
    let mut header = comet_proto::headers::PopMessageRequestHeader::from_ext_fields(
        &pop_request(group, topic, 0, 32, 60_000, 0).ext_fields,
    )
    .unwrap();
    header.init_mode = 1;
    let request = RemotingCommand::request(RequestCode::POP_MESSAGE, 0).with_header(&header);
    popped(client.call(request))
        .messages
        .iter()
        .map(body)
        .collect()
}

// Proves a new group asking to start at a queue's end gets the queue from its first message
// while the queue was never trimmed and that message is in memory (Java's
// initPopOffsetByCheckMsgInMem, on by default), and only the last message with it off.
#[test]
fn a_new_group_at_the_end_of_a_young_queue_starts_at_its_first_message() {
    let directory = TempDir::new("e2e-pop-init");
    let broker = Broker::start(&directory.0, CORES, &[]);
    let mut client = broker.client();
    create_topic(&mut client, "PopInit", 1);
    let sent = bodies("init", 5);
    send_bodies(&mut client, "PopInit", 1, &sent);
    assert_eq!(pop_from_end(&mut client, "pop_init_g", "PopInit"), sent);
    drop(client);
    drop(broker);
    let directory = TempDir::new("e2e-pop-init-off");
    let options = ["-o", "initPopOffsetByCheckMsgInMem=false"];
    let broker = Broker::start(&directory.0, CORES, &options);
    let mut client = broker.client();
    create_topic(&mut client, "PopInit", 1);
    send_bodies(&mut client, "PopInit", 1, &sent);
    assert_eq!(
        pop_from_end(&mut client, "pop_init_g", "PopInit"),
        ["init-4"]
    );
}
