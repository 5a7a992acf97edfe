//! Pops filtered by SQL92 selectors end to end (docs/protocol.md#sql92-property-filters), as
//! Java's `PopMessageProcessor` serves them: only matching messages are handed out, the
//! others are skipped (the pop position moves past them, they never block the queue nor come
//! back), an unacked matching message returns through the pop retry topic under the same
//! filter, a selector that does not compile is refused with SUBSCRIPTION_PARSE_FAILED, and
//! `enablePropertyFilter` off does not stop a pop from filtering (only pulls read it).

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use comet_broker::selected_read::{READ_ROUNDS_MAX, SCAN_RECORDS_MIN};
use comet_proto::headers::PopMessageRequestHeader;
use comet_proto::message::MessageExt;
use comet_proto::properties::{names, Properties};
use comet_proto::{CommandHeader, RemotingCommand, RequestCode, ResponseCode};
use comet_test_support::poll_until;
use common::pop::{ack, body, pop_request, popped, queue_topic};
use common::{committed_offset, create_topic, send_request_with, Broker, Client, TempDir};

const CORES: usize = 2;
/// Messages [`send_messages`] sends: message `i` has `color` red for even `i`, blue for odd,
/// `size` = `i`, and the tag `TagA` when `i` is a multiple of 3, else `TagB`.
const MESSAGES: i64 = 60;

fn start(property_filter: bool) -> (TempDir, Broker) {
    let directory = TempDir::new("e2e-pop-sql");
    let option = format!("enablePropertyFilter={property_filter}");
    let broker = Broker::start(&directory.0, CORES, &["-o", option.as_str()]);
    (directory, broker)
}

/// One message of `topic`'s queue `queue_id` with `color` and `size`, tag by `size`.
fn send_one(client: &mut Client, topic: &str, queue_id: i32, color: &str, size: i64, wait: bool) {
    let mut properties = Properties::new();
    properties.insert("color", color);
    properties.insert("size", size.to_string());
    properties.insert(names::TAGS, if size % 3 == 0 { "TagA" } else { "TagB" });
    properties.insert(names::WAIT, if wait { "true" } else { "false" });
    let body = format!("m{size}");
    let response = client.call(send_request_with(
        topic,
        queue_id,
        body.as_bytes(),
        &properties,
    ));
    assert_eq!(
        response.response_code(),
        ResponseCode::SUCCESS,
        "{response:?}"
    );
}

/// [`MESSAGES`] messages spread over `queues` queues of `topic`.
fn send_messages(client: &mut Client, topic: &str, queues: i32) {
    create_topic(client, topic, queues);
    for i in 0..MESSAGES {
        let queue = i32::try_from(i).unwrap() % queues;
        let color = if i % 2 == 0 { "red" } else { "blue" };
        send_one(client, topic, queue, color, i, true);
    }
}

/// A POP_MESSAGE of every queue of `topic` with a filter of `kind`.
fn pop_filtered(
    group: &str,
    topic: &str,
    (kind, expression): (&str, &str),
    (invisible_ms, poll_ms): (i64, i64),
) -> RemotingCommand {
    let mut header = PopMessageRequestHeader::from_ext_fields(
        &pop_request(group, topic, -1, 32, invisible_ms, poll_ms).ext_fields,
    )
    .unwrap();
    header.exp_type = Some(kind.into());
    header.exp = Some(expression.into());
    RemotingCommand::request(RequestCode::POP_MESSAGE, 0).with_header(&header)
}

/// Pops with `selector` and acks everything until `limit` passes or `done` holds for the
/// bodies seen; every message popped, in order.
fn pop_and_ack(
    client: &mut Client,
    group: &str,
    topic: &str,
    selector: &str,
    limit: Duration,
    done: impl Fn(&[MessageExt]) -> bool,
) -> Vec<MessageExt> {
    let mut seen = Vec::new();
    poll_until(limit, || {
        let request = pop_filtered(group, topic, ("SQL92", selector), (60_000, 0));
        for message in popped(client.call(request)).messages {
            assert_eq!(
                ack(client, group, &message).response_code(),
                ResponseCode::SUCCESS
            );
            seen.push(message);
        }
        done(&seen)
    });
    seen
}

fn bodies_of(messages: &[MessageExt]) -> BTreeSet<String> {
    messages.iter().map(body).collect()
}

fn expected(wanted: impl Fn(i64) -> bool) -> BTreeSet<String> {
    (0..MESSAGES)
        .filter(|i| wanted(*i))
        .map(|i| format!("m{i}"))
        .collect()
}

// Proves a SQL92 pop hands out exactly the matching messages of every queue, once each;
// that the non-matching ones are skipped, not held: the group's pop position reaches each
// queue's end, nothing comes back past the invisible time, and a later pop of everything
// (`*`) finds nothing left from before; and that a TAG-typed pop is unchanged.
#[test]
fn sql92_pop_hands_out_only_matching_messages() {
    let (_directory, broker) = start(true);
    let mut client = broker.client();
    send_messages(&mut client, "PopSql", 2);
    let want = expected(|i| i % 2 == 0 && i >= 10 && i % 3 != 0);
    let selector = "color = 'red' AND size >= 10 AND TAGS <> 'TagA'";
    let seen = pop_and_ack(
        &mut client,
        "pop_sql_g",
        "PopSql",
        selector,
        Duration::from_secs(10),
        |seen| seen.len() >= want.len(),
    );
    assert_eq!(bodies_of(&seen), want);
    assert_eq!(seen.len(), want.len(), "each matching message once");
    for message in &seen {
        assert_eq!(message.topic, "PopSql");
        assert_eq!(message.property("color"), Some("red"));
    }
    for queue_id in 0..2 {
        assert_eq!(
            committed_offset(&mut client, "pop_sql_g", "PopSql", queue_id),
            Some(MESSAGES / 2),
            "queue {queue_id}: the pop position moved past the skipped messages"
        );
    }
    let mut back = Vec::new();
    poll_until(Duration::from_secs(3), || {
        let request = pop_filtered("pop_sql_g", "PopSql", ("TAG", "*"), (60_000, 0));
        back.extend(popped(client.call(request)).messages);
        false
    });
    assert!(
        back.is_empty(),
        "skipped or acked messages came back: {:?}",
        bodies_of(&back)
    );

    let mut tagged = Vec::new();
    poll_until(Duration::from_secs(10), || {
        let request = pop_filtered("pop_tag2_g", "PopSql", ("TAG", "TagA"), (60_000, 0));
        tagged.extend(popped(client.call(request)).messages);
        tagged.len() >= 20
    });
    assert_eq!(bodies_of(&tagged), expected(|i| i % 3 == 0));
}

// Proves a long run of messages nobody of the group wants does not block the queue: one
// polling pop finds the single matching message behind many more non-matching ones than
// one round of reads covers, and the position ends past all of them. A round that only
// skipped is followed by the next at once: were it to wait for arrivals (at least
// `RECHECK_REMOTE_MS`, 200 ms, per wait) the rounds this run needs would outlast the pop's
// poll time, and it would answer empty.
#[test]
fn non_matching_messages_do_not_block_the_queue() {
    let (_directory, broker) = start(true);
    let mut client = broker.client();
    create_topic(&mut client, "PopSqlLong", 1);
    let skipped: i64 = 6_000;
    let round_records = i64::try_from(READ_ROUNDS_MAX * SCAN_RECORDS_MIN).unwrap();
    let rounds = (skipped + round_records) / round_records;
    let poll_ms: i64 = 2_000;
    assert!(
        (rounds - 1) * 200 > poll_ms,
        "a pop that waited between rounds would still make it"
    );
    for i in 0..skipped {
        send_one(&mut client, "PopSqlLong", 0, "blue", i, false);
    }
    send_one(&mut client, "PopSqlLong", 0, "red", skipped, true);
    let request = pop_filtered(
        "pop_long_g",
        "PopSqlLong",
        ("SQL92", "color = 'red'"),
        (60_000, poll_ms),
    );
    let answer = popped(client.call(request));
    assert_eq!(answer.code, ResponseCode::SUCCESS);
    let got: Vec<String> = answer.messages.iter().map(body).collect();
    assert_eq!(got, [format!("m{skipped}")]);
    assert_eq!(
        committed_offset(&mut client, "pop_long_g", "PopSqlLong", 0),
        Some(skipped + 1)
    );
}

// Proves the pop retry topic is popped with the same filter, as Java pops it: two messages
// popped unfiltered and left unacked go to the retry topic; a pop that now filters by SQL92
// gets the matching one back once (reconsume times 1, from the retry topic, acked there) and
// never the other, which the retry queue's position moves past.
#[test]
fn retry_topic_is_popped_with_the_same_filter() {
    let (_directory, broker) = start(true);
    let mut client = broker.client();
    create_topic(&mut client, "PopSqlRetry", 1);
    send_one(&mut client, "PopSqlRetry", 0, "blue", 1, true);
    send_one(&mut client, "PopSqlRetry", 0, "red", 2, true);
    let group = "pop_sql_retry_g";
    let mut first = Vec::new();
    poll_until(Duration::from_secs(10), || {
        let request = pop_filtered(group, "PopSqlRetry", ("TAG", "*"), (1_000, 0));
        first.extend(popped(client.call(request)).messages);
        first.len() >= 2
    });
    assert_eq!(
        bodies_of(&first),
        BTreeSet::from(["m1".to_owned(), "m2".to_owned()]),
        "left unacked"
    );
    let selector = ("SQL92", "color = 'red'");
    let mut again = Vec::new();
    poll_until(Duration::from_secs(15), || {
        let request = pop_filtered(group, "PopSqlRetry", selector, (60_000, 0));
        again.extend(popped(client.call(request)).messages);
        !again.is_empty()
    });
    assert_eq!(again.len(), 1, "{:?}", bodies_of(&again));
    assert_eq!(body(&again[0]), "m2");
    assert_eq!(again[0].reconsume_times, 1);
    let retry_topic = format!("%RETRY%{group}_PopSqlRetry");
    assert_eq!(queue_topic(&again[0], group), retry_topic);
    assert_eq!(
        ack(&mut client, group, &again[0]).response_code(),
        ResponseCode::SUCCESS
    );
    // The blue one went to the retry topic too (its queue holds both), but the filter keeps
    // it from the group: the retry queue's position moves past it and it never comes.
    let mut later = Vec::new();
    let passed = poll_until(Duration::from_secs(5), || {
        let request = pop_filtered(group, "PopSqlRetry", selector, (60_000, 0));
        later.extend(popped(client.call(request)).messages);
        committed_offset(&mut client, group, &retry_topic, 0) == Some(2)
    });
    assert!(passed, "the retry queue's position did not move past both");
    assert!(later.is_empty(), "{:?}", bodies_of(&later));
}

// Proves Java's refusals: a selector that does not compile, and an expression type Java has
// no filter for, answer SUBSCRIPTION_PARSE_FAILED with Java's remark, and take nothing.
#[test]
fn bad_selectors_are_refused_like_java() {
    let (_directory, broker) = start(true);
    let mut client = broker.client();
    send_messages(&mut client, "PopSqlBad", 1);
    for (kind, expression) in [
        ("SQL92", "color = "),
        ("SQL92", "size > 'abc'"),
        ("XPATH", "/color"),
    ] {
        let request = pop_filtered("pop_bad_g", "PopSqlBad", (kind, expression), (60_000, 0));
        let response = client.call(request);
        assert_eq!(
            response.response_code(),
            ResponseCode::SUBSCRIPTION_PARSE_FAILED,
            "{kind} {expression}: {response:?}"
        );
        assert_eq!(
            response.remark.as_deref(),
            Some("parse the consumer's subscription failed")
        );
    }
    let everything = pop_and_ack(
        &mut client,
        "pop_bad_g",
        "PopSqlBad",
        "size >= 0",
        Duration::from_secs(10),
        |seen| seen.len() >= 60,
    );
    assert_eq!(bodies_of(&everything), expected(|_| true));
}

// Proves `enablePropertyFilter` off (the default) does not stop a pop from filtering, as in
// Java, where only CHECK_CLIENT_CONFIG and pulls refuse SQL92 then.
#[test]
fn property_filter_off_still_filters_pops_as_java_does() {
    let (_directory, broker) = start(false);
    let mut client = broker.client();
    send_messages(&mut client, "PopSqlOff", 1);
    let want = expected(|i| i < 5);
    let seen = pop_and_ack(
        &mut client,
        "pop_off_g",
        "PopSqlOff",
        "size < 5",
        Duration::from_secs(10),
        |seen| seen.len() >= want.len(),
    );
    assert_eq!(bodies_of(&seen), want);
    assert_eq!(seen.len(), want.len());
}
