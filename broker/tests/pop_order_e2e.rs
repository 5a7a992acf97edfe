//! Orderly (FIFO) pop end to end against a real broker with two shards
//! (docs/architecture.md#pop): a queue's next messages stay blocked while popped ones are
//! unacked and invisible, unacked ones come back in order with their delivery counts,
//! acks ahead of the first unacked message are never delivered again, and a SIGKILL loses
//! neither an ack nor a message.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use comet_proto::message::MessageExt;
use comet_proto::{RemotingCommand, ResponseCode};
use comet_test_support::poll_until;
use common::pop::{ack, body, change_invisible, pop_order_request, popped, Popped};
use common::{create_topic, send_request, Broker, Client, TempDir};

const CORES: usize = 2;
/// Java's revive queue id of an orderly pop.
const ORDER_REVIVE_QUEUE: i32 = 999;
/// Attempt ids of polling pops, distinct across the tests of this process.
static ATTEMPTS: AtomicUsize = AtomicUsize::new(0);

fn send_texts(client: &mut Client, topic: &str, texts: &[&str]) {
    for text in texts {
        client.call_ok(send_request(topic, 0, text.as_bytes(), Some("t"), None));
    }
}

fn pop_order(
    client: &mut Client,
    group: &str,
    topic: &str,
    max: i32,
    invisible_ms: i64,
    attempt: &str,
) -> Popped {
    popped(client.call(pop_order_request(
        group,
        topic,
        0,
        max,
        invisible_ms,
        attempt,
    )))
}

fn texts(messages: &[MessageExt]) -> Vec<String> {
    messages.iter().map(body).collect()
}

fn order_count_info(popped: &Popped) -> String {
    let header = popped.header.as_ref().expect("a pop answer has a header");
    header.order_count_info.clone().unwrap_or_default()
}

fn acked(client: &mut Client, group: &str, message: &MessageExt) {
    let answer: RemotingCommand = ack(client, group, message);
    assert_eq!(
        answer.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        answer.remark
    );
}

/// Pops up to `max` (new attempt ids) until something comes or `limit` passes.
fn pop_when_visible(
    client: &mut Client,
    (group, topic): (&str, &str),
    max: i32,
    invisible_ms: i64,
    limit: Duration,
) -> Popped {
    let mut last = None;
    poll_until(limit, || {
        // Never an earlier pop's id: a repeated attempt id is a retry of that pop.
        let attempt = ATTEMPTS.fetch_add(1, Ordering::Relaxed);
        let one = pop_order(
            client,
            group,
            topic,
            max,
            invisible_ms,
            &format!("w{attempt}"),
        );
        let found = !one.messages.is_empty();
        last = Some(one);
        found
    });
    last.expect("polled at least once")
}

// Proves a queue is blocked while its popped messages are unacked and invisible, an ack
// ahead of the first unacked message keeps it blocked, and the ack of that one frees the
// next messages, in order; the answer carries Java's orderly marks.
#[test]
fn a_queue_stays_blocked_until_its_popped_messages_are_acked() {
    let directory = TempDir::new("e2e-pop-order-block");
    let broker = Broker::start(&directory.0, CORES, &[]);
    let mut client = broker.client();
    create_topic(&mut client, "PopOrder", 1);
    send_texts(&mut client, "PopOrder", &["m0", "m1", "m2", "m3"]);
    let group = "pop_order_g";
    let first = pop_order(&mut client, group, "PopOrder", 2, 60_000, "a1");
    assert_eq!(texts(&first.messages), ["m0", "m1"]);
    let header = first.header.as_ref().unwrap();
    assert_eq!(header.revive_qid, ORDER_REVIVE_QUEUE);
    assert_eq!(order_count_info(&first), "0 0 0");
    for message in &first.messages {
        let receipt = common::pop::receipt(message);
        assert_eq!(receipt.split(' ').nth(3), Some("999"), "{receipt}");
    }
    let blocked = pop_order(&mut client, group, "PopOrder", 2, 60_000, "a2");
    assert_eq!(blocked.code, ResponseCode::POLLING_TIMEOUT);
    // The same attempt (a client retrying a pop it got no answer to) is let through.
    let retried = pop_order(&mut client, group, "PopOrder", 2, 60_000, "a1");
    assert_eq!(texts(&retried.messages), ["m0", "m1"]);
    acked(&mut client, group, &retried.messages[1]);
    let still = pop_order(&mut client, group, "PopOrder", 2, 60_000, "a3");
    assert!(still.messages.is_empty(), "m0 is still unacked");
    acked(&mut client, group, &retried.messages[0]);
    let next = pop_order(&mut client, group, "PopOrder", 2, 60_000, "a4");
    assert_eq!(texts(&next.messages), ["m2", "m3"]);
}

// Proves unacked messages come back after their invisible time, in order, with delivery
// counts per offset, that a message acked ahead of an unacked one is not delivered again,
// and that an invisible-time change moves one message's return.
#[test]
fn unacked_messages_come_back_in_order_with_their_counts() {
    let directory = TempDir::new("e2e-pop-order-return");
    let broker = Broker::start(&directory.0, CORES, &[]);
    let mut client = broker.client();
    create_topic(&mut client, "PopOrderBack", 1);
    send_texts(&mut client, "PopOrderBack", &["m0", "m1", "m2"]);
    let group = "pop_order_back_g";
    let first = pop_order(&mut client, group, "PopOrderBack", 2, 1_000, "b1");
    assert_eq!(texts(&first.messages), ["m0", "m1"]);
    let limit = Duration::from_secs(15);
    let again = pop_when_visible(&mut client, (group, "PopOrderBack"), 2, 1_000, limit);
    assert_eq!(texts(&again.messages), ["m0", "m1"], "{:?}", again.header);
    assert_eq!(order_count_info(&again), "0 qo0%0 1;0 qo0%1 1;0 0 1");
    // m1 acked ahead of m0: only m0 comes back, counted twice.
    acked(&mut client, group, &again.messages[1]);
    let third = pop_when_visible(&mut client, (group, "PopOrderBack"), 1, 60_000, limit);
    assert_eq!(texts(&third.messages), ["m0"]);
    assert_eq!(order_count_info(&third), "0 qo0%0 2;0 0 2");
    // Made visible again sooner than its minute.
    let changed = change_invisible(&mut client, group, &third.messages[0], 500);
    assert_eq!(changed.revive_qid, ORDER_REVIVE_QUEUE);
    let fourth = pop_when_visible(&mut client, (group, "PopOrderBack"), 1, 60_000, limit);
    assert_eq!(texts(&fourth.messages), ["m0"]);
    acked(&mut client, group, &fourth.messages[0]);
    let rest = pop_order(&mut client, group, "PopOrderBack", 32, 60_000, "b9");
    assert_eq!(texts(&rest.messages), ["m2"], "m1 was acked: never again");
}

// Proves a SIGKILL loses no orderly ack (with offsets persisted only at shutdown, the acks'
// records alone carry them) and no unacked message: after the restart the queue resumes at
// the first unacked message and skips the one acked ahead of it.
#[test]
fn sigkill_keeps_orderly_acks_and_unacked_messages() {
    let directory = TempDir::new("e2e-pop-order-kill");
    let mut broker = Broker::start(
        &directory.0,
        CORES,
        &["-o", "flushConsumerOffsetInterval=600000"],
    );
    let mut client = broker.client();
    create_topic(&mut client, "PopOrderKill", 1);
    send_texts(&mut client, "PopOrderKill", &["m0", "m1", "m2", "m3", "m4"]);
    let group = "pop_order_kill_g";
    let popped = pop_order(&mut client, group, "PopOrderKill", 4, 60_000, "k1");
    assert_eq!(texts(&popped.messages), ["m0", "m1", "m2", "m3"]);
    acked(&mut client, group, &popped.messages[0]);
    acked(&mut client, group, &popped.messages[1]);
    acked(&mut client, group, &popped.messages[3]);
    broker.kill();
    broker.restart(CORES);
    let mut client = broker.client();
    let limit = Duration::from_secs(30);
    let back = pop_when_visible(&mut client, (group, "PopOrderKill"), 32, 60_000, limit);
    assert_eq!(
        texts(&back.messages),
        ["m2", "m4"],
        "m3 was acked ahead of m2"
    );
}
