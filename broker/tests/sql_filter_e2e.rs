//! End-to-end tests of SQL92 property filters (docs/protocol.md#sql92-property-filters):
//! pulls with a selector in the request and with one a heartbeat registered, the refusal of
//! bad selectors (pull and CHECK_CLIENT_CONFIG), and Java's answers when
//! `enablePropertyFilter` is off.

mod common;

use comet_proto::body::{
    CheckClientRequestBody, ConsumeType, ConsumerData, HeartbeatData, JsonBody, SubscriptionData,
};
use comet_proto::headers::{PullMessageRequestHeader, PullMessageResponseHeader};
use comet_proto::message::decode_records;
use comet_proto::properties::{names, Properties};
use comet_proto::{CommandHeader, RemotingCommand, RequestCode, ResponseCode};

use common::{create_topic, send_request_with, Broker, Client, TempDir};

const TOPIC: &str = "SqlTopic";
/// Messages sent: message `i` has `color` red for even `i`, blue for odd, `size` = `i`,
/// and the tag `TagA` when `i` is a multiple of 3, else `TagB`.
const MESSAGES: i64 = 60;

fn start(property_filter: bool) -> (TempDir, Broker) {
    let directory = TempDir::new("sql-filter");
    let option = format!("enablePropertyFilter={property_filter}");
    let broker = Broker::start(&directory.0, 2, &["-o", option.as_str()]);
    (directory, broker)
}

fn send_messages(client: &mut Client) {
    create_topic(client, TOPIC, 1);
    for i in 0..MESSAGES {
        let mut properties = Properties::new();
        let color = if i % 2 == 0 { "red" } else { "blue" };
        properties.insert("color", color);
        properties.insert("size", i.to_string());
        properties.insert(names::TAGS, if i % 3 == 0 { "TagA" } else { "TagB" });
        properties.insert(names::WAIT, "true");
        let body = format!("m{i}");
        let response = client.call(send_request_with(TOPIC, 0, body.as_bytes(), &properties));
        assert_eq!(
            response.response_code(),
            ResponseCode::SUCCESS,
            "{response:?}"
        );
    }
}

/// A PULL_MESSAGE of queue 0 from `offset`; with `subscription` the request carries it
/// (sysflag bit 2), else the group's registered one applies.
fn pull(
    group: &str,
    offset: i64,
    max_msg_nums: i32,
    subscription: Option<(&str, &str)>,
) -> RemotingCommand {
    pull_within(group, offset, (max_msg_nums, None), subscription)
}

/// [`pull`] with a byte budget (`maxMsgBytes`) when given.
fn pull_within(
    group: &str,
    offset: i64,
    (max_msg_nums, max_msg_bytes): (i32, Option<i32>),
    subscription: Option<(&str, &str)>,
) -> RemotingCommand {
    let header = PullMessageRequestHeader {
        consumer_group: group.into(),
        topic: TOPIC.into(),
        queue_id: 0,
        queue_offset: offset,
        max_msg_nums,
        sys_flag: if subscription.is_some() { 4 } else { 0 },
        commit_offset: 0,
        suspend_timeout_millis: 0,
        subscription: subscription.map(|(_, expression)| expression.to_owned()),
        sub_version: 0,
        expression_type: subscription.map(|(kind, _)| kind.to_owned()),
        max_msg_bytes,
        request_source: None,
        proxy_froward_client_id: None,
        broker_name: None,
        logical: None,
    };
    RemotingCommand::request(RequestCode::PULL_MESSAGE, 0).with_header(&header)
}

/// The bodies a consumer gets pulling queue 0 to its end, `max_msg_nums` at a time, and
/// how many pulls that took.
fn pull_bodies(
    client: &mut Client,
    group: &str,
    max_msg_nums: i32,
    subscription: Option<(&str, &str)>,
) -> (Vec<String>, usize) {
    pull_bodies_within(client, group, (max_msg_nums, None), subscription)
}

/// [`pull_bodies`] with a byte budget per pull when given.
fn pull_bodies_within(
    client: &mut Client,
    group: &str,
    limits: (i32, Option<i32>),
    subscription: Option<(&str, &str)>,
) -> (Vec<String>, usize) {
    let mut bodies = Vec::new();
    let mut offset = 0;
    for pulls in 1..=1000 {
        let response = client.call(pull_within(group, offset, limits, subscription));
        let code = response.response_code();
        let header = PullMessageResponseHeader::from_ext_fields(&response.ext_fields)
            .unwrap_or_else(|e| panic!("pull answer without its header ({e}): {response:?}"));
        match code {
            ResponseCode::SUCCESS | ResponseCode::PULL_RETRY_IMMEDIATELY => {
                for message in decode_records(response.body.clone()) {
                    bodies.push(String::from_utf8_lossy(&message.body).into_owned());
                }
                assert!(
                    header.next_begin_offset > offset,
                    "no progress: {response:?}"
                );
                offset = header.next_begin_offset;
            }
            ResponseCode::PULL_NOT_FOUND => return (bodies, pulls),
            other => panic!("pull answered {other:?}: {:?}", response.remark),
        }
    }
    panic!("queue 0 of {TOPIC} did not end within 1000 pulls");
}

/// Bodies of the sent messages for which `wanted` holds.
fn expected(wanted: impl Fn(i64) -> bool) -> Vec<String> {
    (0..MESSAGES)
        .filter(|i| wanted(*i))
        .map(|i| format!("m{i}"))
        .collect()
}

fn heartbeat(client: &mut Client, group: &str, kind: &str, expression: &str) {
    let data = HeartbeatData {
        client_id: format!("{group}@sql-test"),
        consumer_data_set: vec![ConsumerData {
            group_name: group.into(),
            consume_type: ConsumeType::CONSUME_PASSIVELY,
            subscription_data_set: vec![SubscriptionData {
                topic: TOPIC.into(),
                sub_string: expression.into(),
                expression_type: kind.into(),
                ..SubscriptionData::default()
            }],
            ..ConsumerData::default()
        }],
        ..HeartbeatData::default()
    };
    let request = RemotingCommand::request(RequestCode::HEART_BEAT, 0).with_body(data.encode());
    let response = client.call(request);
    assert_eq!(
        response.response_code(),
        ResponseCode::SUCCESS,
        "{response:?}"
    );
}

fn check_client_config(client: &mut Client, kind: &str, expression: &str) -> RemotingCommand {
    let body = CheckClientRequestBody {
        client_id: "sql-test".into(),
        group: "sql_check_cg".into(),
        namespace: None,
        subscription_data: SubscriptionData {
            topic: TOPIC.into(),
            sub_string: expression.into(),
            expression_type: kind.into(),
            ..SubscriptionData::default()
        },
    };
    client.call(
        RemotingCommand::request(RequestCode::CHECK_CLIENT_CONFIG, 0).with_body(body.encode()),
    )
}

// Proves pulls with a SQL92 selector, in the request or registered by a heartbeat, deliver
// exactly the messages whose properties match (TAGS included: the selector is never read as
// a tag expression), that a selective filter reads on past non-matching records, and that
// tag pulls are unchanged.
#[test]
fn sql92_pulls_deliver_only_matching_messages() {
    let (_directory, broker) = start(true);
    let mut client = broker.client();
    send_messages(&mut client);

    let red_big = ("SQL92", "color = 'red' AND size >= 10");
    let (bodies, _) = pull_bodies(&mut client, "sql_cg", 8, Some(red_big));
    assert_eq!(bodies, expected(|i| i % 2 == 0 && i >= 10));

    let tags = ("SQL92", "TAGS = 'TagA' AND NOT (size BETWEEN 10 AND 20)");
    let (bodies, _) = pull_bodies(&mut client, "sql_cg", 32, Some(tags));
    assert_eq!(bodies, expected(|i| i % 3 == 0 && !(10..=20).contains(&i)));

    let listed = ("SQL92", "size IN ('1', '7', '59') OR missing IS NOT NULL");
    let (bodies, _) = pull_bodies(&mut client, "sql_cg", 32, Some(listed));
    assert_eq!(bodies, expected(|i| [1, 7, 59].contains(&i)));

    // One match near the end: 2 messages per read, yet few pulls, since a pull reads on
    // while nothing matched.
    let (bodies, pulls) = pull_bodies(&mut client, "sql_cg", 2, Some(("SQL92", "size = 57")));
    assert_eq!(bodies, ["m57"]);
    assert!(pulls <= 4, "{pulls} pulls");

    // A byte budget of one and a half records: each pull keeps one matching record and
    // leaves the next for the following pull, losing none.
    let first = client.call(pull("sql_cg", 0, 1, Some(("TAG", "*"))));
    let record_bytes = i32::try_from(first.body.len()).unwrap();
    let budget = (32, Some(record_bytes * 3 / 2));
    let (bodies, pulls) = pull_bodies_within(&mut client, "sql_cg", budget, Some(red_big));
    assert_eq!(bodies, expected(|i| i % 2 == 0 && i >= 10));
    assert!(
        pulls > bodies.len(),
        "{pulls} pulls for {} messages",
        bodies.len()
    );

    heartbeat(
        &mut client,
        "sql_registered_cg",
        "SQL92",
        "color = 'blue' AND size < 9",
    );
    let (bodies, _) = pull_bodies(&mut client, "sql_registered_cg", 32, None);
    assert_eq!(bodies, expected(|i| i % 2 == 1 && i < 9));

    let (bodies, _) = pull_bodies(&mut client, "sql_cg", 32, Some(("TAG", "TagA")));
    assert_eq!(bodies, expected(|i| i % 3 == 0));
}

// Proves bad selectors are refused with Java's codes and remarks: in a pull's request,
// registered by a heartbeat, and at CHECK_CLIENT_CONFIG, while a valid one is accepted.
#[test]
fn bad_selectors_are_refused_like_java() {
    let (_directory, broker) = start(true);
    let mut client = broker.client();
    send_messages(&mut client);

    let response = client.call(pull("sql_cg", 0, 32, Some(("SQL92", "color = "))));
    assert_eq!(
        response.response_code(),
        ResponseCode::SUBSCRIPTION_PARSE_FAILED
    );
    assert_eq!(
        response.remark.as_deref(),
        Some("parse the consumer's subscription failed")
    );

    heartbeat(&mut client, "sql_bad_cg", "SQL92", "size > 'abc'");
    let response = client.call(pull("sql_bad_cg", 0, 32, None));
    assert_eq!(
        response.response_code(),
        ResponseCode::FILTER_DATA_NOT_EXIST
    );
    assert_eq!(
        response.remark.as_deref(),
        Some("The broker's consumer filter data is not exist!Your expression may be wrong!")
    );

    let response = check_client_config(&mut client, "SQL92", "color = 'red' AND size > 3");
    assert_eq!(
        response.response_code(),
        ResponseCode::SUCCESS,
        "{response:?}"
    );
    let response = check_client_config(&mut client, "SQL92", "size > 'abc'");
    assert_eq!(
        response.response_code(),
        ResponseCode::SUBSCRIPTION_PARSE_FAILED
    );
    assert_eq!(
        response.remark.as_deref(),
        Some("java.lang.RuntimeException: Value ''abc'' cannot be compared.")
    );
    let response = check_client_config(&mut client, "SQL92", "a and between 2 and 10");
    assert_eq!(
        response.response_code(),
        ResponseCode::SUBSCRIPTION_PARSE_FAILED
    );
    assert_eq!(
        response.remark.as_deref(),
        Some(
            "org.apache.rocketmq.filter.parser.ParseException: Encountered \" \"BETWEEN\" \
             \"between \"\" at line 1, column 7."
        )
    );
    let response = check_client_config(&mut client, "TAG", "TagA || TagB");
    assert_eq!(response.response_code(), ResponseCode::SUCCESS);
}

// Proves Java's answers with enablePropertyFilter off (the default): CHECK_CLIENT_CONFIG
// and pulls with a SQL92 selector get SYSTEM_ERROR with Java's remark; TAG pulls work.
#[test]
fn property_filter_off_refuses_sql92() {
    let (_directory, broker) = start(false);
    let mut client = broker.client();
    send_messages(&mut client);
    let refusal = "The broker does not support consumer to filter message by SQL92";

    let response = check_client_config(&mut client, "SQL92", "color = 'red'");
    assert_eq!(response.response_code(), ResponseCode::SYSTEM_ERROR);
    assert_eq!(response.remark.as_deref(), Some(refusal));

    let response = client.call(pull("sql_cg", 0, 32, Some(("SQL92", "color = 'red'"))));
    assert_eq!(response.response_code(), ResponseCode::SYSTEM_ERROR);
    assert_eq!(response.remark.as_deref(), Some(refusal));

    heartbeat(&mut client, "sql_registered_cg", "SQL92", "color = 'red'");
    let response = client.call(pull("sql_registered_cg", 0, 32, None));
    assert_eq!(response.response_code(), ResponseCode::SYSTEM_ERROR);
    assert_eq!(response.remark.as_deref(), Some(refusal));

    let response = check_client_config(&mut client, "TAG", "*");
    assert_eq!(response.response_code(), ResponseCode::SUCCESS);
    let (bodies, _) = pull_bodies(&mut client, "sql_cg", 32, Some(("TAG", "TagA")));
    assert_eq!(bodies, expected(|i| i % 3 == 0));
}
