//! End-to-end tests of the broker: a real `comet-broker --standalone` process on loopback,
//! driven over sockets with comet-proto frames.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use comet_proto::body::{
    BrokerStatsData, ConsumeStats, JsonBody, KVTable, TopicRouteData, TopicStatsTable,
};
use comet_proto::headers::{
    GetConsumeStatsRequestHeader, GetRouteInfoRequestHeader, GetTopicStatsInfoRequestHeader,
    QueryConsumerOffsetRequestHeader, SendMessageResponseHeader, UpdateConsumerOffsetRequestHeader,
    ViewBrokerStatsDataRequestHeader,
};
use comet_proto::message::decode_records;
use comet_proto::{CommandHeader, RemotingCommand, RequestCode, ResponseCode};
use comet_test_support::wait_until;
use common::{create_topic, pull_request, send_request, Broker, Client, TempDir};

/// Pulls a whole queue from offset 0: returns (queue offset, body) of every message.
fn drain_queue(client: &mut Client, topic: &str, queue_id: i32) -> Vec<(i64, Vec<u8>)> {
    let mut messages = Vec::new();
    let mut offset = 0;
    loop {
        let response = client.call(pull_request("drain_group", topic, queue_id, offset, 32, 0));
        match response.response_code() {
            ResponseCode::SUCCESS => {
                for message in decode_records(response.body.clone()) {
                    messages.push((message.queue_offset, message.body.to_vec()));
                }
                offset = response
                    .ext_fields
                    .optional_i64("nextBeginOffset")
                    .unwrap()
                    .unwrap();
            }
            ResponseCode::PULL_NOT_FOUND | ResponseCode::PULL_OFFSET_MOVED => return messages,
            other => panic!("pull failed: {other} {:?}", response.remark),
        }
    }
}

// Proves that thousands of messages sent to an 8-queue topic over two shards are all
// acknowledged with dense per-queue offsets and read back intact, in queue order.
#[test]
fn produce_and_consume_across_queues_and_shards() {
    let directory = TempDir::new("e2e-produce");
    let broker = Broker::start(&directory.0, 2, &[]);
    let mut client = broker.client();
    create_topic(&mut client, "E2ETopic", 8);
    let total = 2000;
    let mut expected: BTreeMap<i32, Vec<Vec<u8>>> = BTreeMap::new();
    for window in 0..(total / 50) {
        let mut pending = Vec::new();
        for index in 0..50 {
            let number = window * 50 + index;
            let queue_id = number % 8;
            let body = format!("message-{number}").into_bytes();
            expected.entry(queue_id).or_default().push(body.clone());
            client.send(send_request(
                "E2ETopic",
                queue_id,
                &body,
                Some("TagA"),
                Some("k1"),
            ));
            pending.push(queue_id);
        }
        for _ in pending {
            let response = client.receive();
            assert_eq!(
                response.response_code(),
                ResponseCode::SUCCESS,
                "{:?}",
                response.remark
            );
            let header = SendMessageResponseHeader::from_ext_fields(&response.ext_fields).unwrap();
            assert_eq!(header.msg_id.len(), 32);
            assert!(response.ext_fields.get("MSG_REGION").is_some());
        }
    }
    for (queue_id, bodies) in &expected {
        let messages = drain_queue(&mut client, "E2ETopic", *queue_id);
        let offsets: Vec<i64> = messages.iter().map(|(offset, _)| *offset).collect();
        let dense: Vec<i64> = (0..bodies.len() as i64).collect();
        assert_eq!(offsets, dense, "queue {queue_id} offsets");
        let read: Vec<Vec<u8>> = messages.into_iter().map(|(_, body)| body).collect();
        assert_eq!(&read, bodies, "queue {queue_id} bodies");
    }
}

/// Queue requests the broker has routed so far (`requestsHandledInPlace` plus
/// `requestsForwardedToOwnerShard` of GET_BROKER_RUNTIME_INFO, which itself is not counted).
fn queue_requests_routed(client: &mut Client) -> u64 {
    let response = client.call_ok(RemotingCommand::request(
        RequestCode::GET_BROKER_RUNTIME_INFO,
        0,
    ));
    let figures = KVTable::decode(&response.body).unwrap().table;
    ["requestsHandledInPlace", "requestsForwardedToOwnerShard"]
        .iter()
        .map(|key| figures[*key].parse::<u64>().unwrap())
        .sum()
}

// Proves a pull parked at the end of a queue answers within milliseconds of a send, not at
// the end of its suspend time, and with the message (a suspended pull that answered at once
// would carry PULL_NOT_FOUND).
#[test]
fn long_polling_wakes_on_arrival() {
    let directory = TempDir::new("e2e-longpoll");
    let broker = Broker::start(&directory.0, 2, &[]);
    let mut producer = broker.client();
    create_topic(&mut producer, "PollTopic", 2);
    let mut observer = broker.client();
    let routed_before = queue_requests_routed(&mut observer);
    let mut consumer = broker.client();
    consumer.send(pull_request("poll_group", "PollTopic", 1, 0, 32, 20_000));
    // The broker counts the pull when it routes it to the queue's owner, which parks it a
    // moment later. A send landing in that moment is answered at once with the message:
    // the test then passes without the wake-up, it never fails for it.
    wait_until(
        "the broker to route the pull",
        Duration::from_secs(10),
        || queue_requests_routed(&mut observer) > routed_before,
    );
    let sent_at = Instant::now();
    let response = producer.call(send_request("PollTopic", 1, b"wake up", None, None));
    assert_eq!(response.response_code(), ResponseCode::SUCCESS);
    let pulled = consumer.receive();
    let waited = sent_at.elapsed();
    assert_eq!(
        pulled.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        pulled.remark
    );
    assert!(waited < Duration::from_secs(2), "woke after {waited:?}");
    let messages = decode_records(pulled.body.clone());
    assert_eq!(messages.len(), 1);
    assert_eq!(&messages[0].body[..], b"wake up");
}

// Proves the broker registers with its embedded name server and an auto-created topic gets
// a route that lists this broker.
#[test]
fn auto_created_topic_gets_a_route() {
    let directory = TempDir::new("e2e-route");
    let broker = Broker::start(&directory.0, 2, &[]);
    let mut client = broker.client();
    client.call_ok(send_request("AutoTopic", -1, b"hello", None, None));
    let mut namesrv = broker.namesrv_client();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let header = GetRouteInfoRequestHeader {
            topic: "AutoTopic".into(),
            accept_standard_json_only: None,
        };
        let response = namesrv.call(
            RemotingCommand::request(RequestCode::GET_ROUTEINFO_BY_TOPIC, 0).with_header(&header),
        );
        if response.response_code() == ResponseCode::SUCCESS {
            let route = TopicRouteData::decode(&response.body).unwrap();
            assert_eq!(route.queue_datas.len(), 1);
            assert_eq!(route.queue_datas[0].write_queue_nums, 8);
            let addr = route.broker_datas[0].broker_addrs.get(&0).unwrap();
            assert!(
                addr.ends_with(&format!(":{}", broker.broker_addr.port())),
                "{addr}"
            );
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no route after 10 s: {:?}",
            response.remark
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

// Proves bad input gets RocketMQ's error codes and never stops the broker serving others:
// an unknown code, a bad topic name, an empty and an oversized body, a malformed header, and
// an oversized frame (which closes only its own connection).
#[test]
fn bad_input_gets_errors_and_the_broker_keeps_serving() {
    let directory = TempDir::new("e2e-bad");
    let broker = Broker::start(&directory.0, 2, &["-o", "maxMessageSize=1024"]);
    let mut client = broker.client();
    let unknown = client.call(RemotingCommand {
        code: 9999,
        ..RemotingCommand::request(RequestCode::HEART_BEAT, 0)
    });
    assert_eq!(
        unknown.response_code(),
        ResponseCode::REQUEST_CODE_NOT_SUPPORTED
    );
    let bad_name = client.call(send_request("bad topic!", 0, b"x", None, None));
    assert_eq!(bad_name.response_code(), ResponseCode::INVALID_PARAMETER);
    let empty = client.call(send_request("BadInput", 0, b"", None, None));
    assert_eq!(empty.response_code(), ResponseCode::MESSAGE_ILLEGAL);
    let large = client.call(send_request("BadInput", 0, &[7u8; 2048], None, None));
    assert_eq!(large.response_code(), ResponseCode::MESSAGE_ILLEGAL);
    let mut missing = send_request("BadInput", 0, b"x", None, None);
    missing.ext_fields.remove("a");
    let missing = client.call(missing);
    assert_eq!(missing.response_code(), ResponseCode::SYSTEM_ERROR);
    assert!(missing.remark.unwrap_or_default().contains("`a`"));
    use std::io::Write;
    let mut garbage = broker.client();
    garbage
        .stream
        .write_all(&[0, 0, 0, 9, 0, 0, 0, 5, b'{', b'x', b'}', b'!', b'!'])
        .unwrap();
    let mut oversized = broker.client();
    oversized
        .stream
        .write_all(&(64u32 << 20).to_be_bytes())
        .unwrap();
    let ok = client.call(send_request("BadInput", 0, b"still serving", None, None));
    assert_eq!(ok.response_code(), ResponseCode::SUCCESS);
    let after_garbage = garbage.call(send_request("BadInput", 0, b"same connection", None, None));
    assert_eq!(after_garbage.response_code(), ResponseCode::SUCCESS);
}

fn query_offset(client: &mut Client, group: &str, topic: &str, queue_id: i32) -> RemotingCommand {
    let header = QueryConsumerOffsetRequestHeader {
        consumer_group: group.into(),
        topic: topic.into(),
        queue_id,
        set_zero_if_not_found: Some(false),
        broker_name: None,
    };
    client
        .call(RemotingCommand::request(RequestCode::QUERY_CONSUMER_OFFSET, 0).with_header(&header))
}

// Proves committed consumer offsets and stored messages survive a clean restart.
#[test]
fn offsets_and_messages_survive_a_restart() {
    let directory = TempDir::new("e2e-restart");
    let mut broker = Broker::start(&directory.0, 2, &[]);
    let mut client = broker.client();
    create_topic(&mut client, "RestartTopic", 4);
    for queue_id in 0..4 {
        for index in 0..5 {
            let body = format!("q{queue_id}-{index}");
            assert_eq!(
                client
                    .call(send_request(
                        "RestartTopic",
                        queue_id,
                        body.as_bytes(),
                        None,
                        None
                    ))
                    .response_code(),
                ResponseCode::SUCCESS
            );
        }
        let header = UpdateConsumerOffsetRequestHeader {
            consumer_group: "restart_group".into(),
            topic: "RestartTopic".into(),
            queue_id,
            commit_offset: i64::from(queue_id) + 1,
            broker_name: None,
        };
        let response = client.call(
            RemotingCommand::request(RequestCode::UPDATE_CONSUMER_OFFSET, 0).with_header(&header),
        );
        assert_eq!(response.response_code(), ResponseCode::SUCCESS);
    }
    assert_eq!(
        query_offset(&mut client, "restart_group", "RestartTopic", 2).response_code(),
        ResponseCode::SUCCESS
    );
    drop(client);
    assert!(broker.stop().success());
    assert!(
        !directory.0.join("shard-0").join("abort").exists(),
        "clean stop leaves no abort file"
    );
    broker.restart(2);
    let mut client = broker.client();
    for queue_id in 0..4 {
        let response = query_offset(&mut client, "restart_group", "RestartTopic", queue_id);
        assert_eq!(
            response.response_code(),
            ResponseCode::SUCCESS,
            "queue {queue_id}"
        );
        assert_eq!(
            response.ext_fields.optional_i64("offset").unwrap(),
            Some(i64::from(queue_id) + 1)
        );
        assert_eq!(drain_queue(&mut client, "RestartTopic", queue_id).len(), 5);
    }
}

// Proves the 5.x server-side offset reset: INVOKE_BROKER_TO_RESET_OFFSET to a time before
// every message moves the group's committed offset of each queue back to 0 and answers the
// new offsets; the group's next pull is told PULL_OFFSET_MOVED to 0, once.
#[test]
fn server_side_offset_reset() {
    let directory = TempDir::new("e2e-reset");
    let broker = Broker::start(&directory.0, 2, &[]);
    let mut client = broker.client();
    create_topic(&mut client, "ResetTopic", 2);
    for index in 0..3 {
        let body = format!("m{index}");
        let sent = client.call(send_request("ResetTopic", 0, body.as_bytes(), None, None));
        assert_eq!(sent.response_code(), ResponseCode::SUCCESS);
    }
    let commit = UpdateConsumerOffsetRequestHeader {
        consumer_group: "reset_group".into(),
        topic: "ResetTopic".into(),
        queue_id: 0,
        commit_offset: 3,
        broker_name: None,
    };
    let request =
        RemotingCommand::request(RequestCode::UPDATE_CONSUMER_OFFSET, 0).with_header(&commit);
    assert_eq!(client.call(request).response_code(), ResponseCode::SUCCESS);
    let mut reset = RemotingCommand::request(RequestCode::INVOKE_BROKER_TO_RESET_OFFSET, 0);
    for (key, value) in [
        ("topic", "ResetTopic"),
        ("group", "reset_group"),
        ("timestamp", "0"),
        ("isForce", "true"),
    ] {
        reset.ext_fields.insert(key, value);
    }
    let answer = client.call_ok(reset);
    let body = comet_proto::body::ResetOffsetBody::decode(&answer.body).unwrap();
    assert_eq!(body.offset_table.len(), 2);
    assert!(body.offset_table.values().all(|offset| *offset == 0));
    let committed = query_offset(&mut client, "reset_group", "ResetTopic", 0);
    assert_eq!(
        committed.ext_fields.optional_i64("offset").unwrap(),
        Some(0)
    );
    let moved = client.call(pull_request("reset_group", "ResetTopic", 0, 3, 32, 0));
    assert_eq!(moved.response_code(), ResponseCode::PULL_OFFSET_MOVED);
    assert_eq!(
        moved.ext_fields.optional_i64("nextBeginOffset").unwrap(),
        Some(0)
    );
    let again = client.call(pull_request("reset_group", "ResetTopic", 0, 0, 32, 0));
    assert_eq!(again.response_code(), ResponseCode::SUCCESS);
    assert_eq!(decode_records(again.body.clone()).len(), 3);
}

fn stats_view(client: &mut Client, name: &str, key: &str) -> RemotingCommand {
    let header = ViewBrokerStatsDataRequestHeader {
        stats_name: name.into(),
        stats_key: key.into(),
    };
    client
        .call(RemotingCommand::request(RequestCode::VIEW_BROKER_STATS_DATA, 0).with_header(&header))
}

// Proves per-topic and per-group statistics count sends and pulls on both shards (an
// 8-queue topic spans them), answer VIEW_BROKER_STATS_DATA with every window, feed the rates
// of GET_TOPIC_STATS_INFO and GET_CONSUME_STATS, and answer an unknown item with RocketMQ's
// error.
#[test]
fn statistics_count_sends_and_pulls() {
    let directory = TempDir::new("e2e-stats");
    let broker = Broker::start(&directory.0, 2, &[]);
    let mut client = broker.client();
    create_topic(&mut client, "StatsTopic", 8);
    let total = 40;
    for number in 0..total {
        let body = format!("stats-{number}").into_bytes();
        let request = send_request("StatsTopic", number % 8, &body, None, None);
        let response = client.call(request);
        assert_eq!(response.response_code(), ResponseCode::SUCCESS);
    }
    for queue_id in 0..8 {
        assert_eq!(drain_queue(&mut client, "StatsTopic", queue_id).len(), 5);
    }
    let expect_sum = |response: RemotingCommand, sum: i64| {
        assert_eq!(
            response.response_code(),
            ResponseCode::SUCCESS,
            "{:?}",
            response.remark
        );
        let data = BrokerStatsData::decode(&response.body).unwrap();
        for window in [data.stats_minute, data.stats_hour, data.stats_day] {
            assert_eq!(window.sum, sum);
            assert!(window.tps > 0.0);
        }
        data
    };
    let put = stats_view(&mut client, "TOPIC_PUT_NUMS", "StatsTopic");
    assert_eq!(expect_sum(put, total.into()).stats_minute.avgpt, 1.0);
    let got = stats_view(&mut client, "GROUP_GET_NUMS", "StatsTopic@drain_group");
    expect_sum(got, total.into());
    let broker_put = stats_view(&mut client, "BROKER_PUT_NUMS", "DefaultCluster");
    expect_sum(broker_put, total.into());
    let size = stats_view(&mut client, "TOPIC_PUT_SIZE", "StatsTopic");
    let size = BrokerStatsData::decode(&size.body).unwrap();
    // Stored bytes: every record has a fixed part of over 90 bytes besides body and topic.
    assert!(size.stats_day.sum > i64::from(total) * 100, "{size:?}");

    let unknown = stats_view(&mut client, "TOPIC_PUT_NUMS", "NoSuchTopic");
    assert_eq!(unknown.response_code(), ResponseCode::SYSTEM_ERROR);
    assert_eq!(
        unknown.remark.as_deref(),
        Some("The stats <TOPIC_PUT_NUMS> <NoSuchTopic> not exist")
    );
    let no_group = stats_view(&mut client, "GROUP_GET_NUMS", "StatsTopic");
    assert_eq!(no_group.response_code(), ResponseCode::SYSTEM_ERROR);

    let header = GetTopicStatsInfoRequestHeader {
        topic: "StatsTopic".into(),
        broker_name: None,
    };
    let topic_stats = client
        .call(RemotingCommand::request(RequestCode::GET_TOPIC_STATS_INFO, 0).with_header(&header));
    let table = TopicStatsTable::decode(&topic_stats.body).unwrap();
    assert!(table.topic_put_tps > 0.0);
    let header = GetConsumeStatsRequestHeader {
        consumer_group: "drain_group".into(),
        topic: Some("StatsTopic".into()),
        topic_list: None,
        broker_name: None,
    };
    let consume_stats = client
        .call(RemotingCommand::request(RequestCode::GET_CONSUME_STATS, 0).with_header(&header));
    let stats = ConsumeStats::decode(&consume_stats.body).unwrap();
    assert!(stats.consume_tps > 0.0);
}

// Proves a SYNC_MASTER, having no slave, stores a send and answers SLAVE_NOT_AVAILABLE with
// the usual send header (as Apache RocketMQ's SYNC_MASTER does while no slave is connected),
// and the message is readable.
#[test]
fn sync_master_without_slaves_answers_slave_not_available() {
    let directory = TempDir::new("e2e-sync-master");
    let broker = Broker::start(&directory.0, 1, &["-o", "brokerRole=SYNC_MASTER"]);
    let mut client = broker.client();
    create_topic(&mut client, "SyncMasterTopic", 1);
    let response = client.call(send_request("SyncMasterTopic", 0, b"kept", None, None));
    assert_eq!(response.response_code(), ResponseCode::SLAVE_NOT_AVAILABLE);
    let header = SendMessageResponseHeader::from_ext_fields(&response.ext_fields).unwrap();
    assert_eq!(header.msg_id.len(), 32);
    assert_eq!(header.queue_offset, 0);
    let messages = drain_queue(&mut client, "SyncMasterTopic", 0);
    assert_eq!(messages, vec![(0, b"kept".to_vec())]);
}
