//! Queue and offset inspection end to end, on a broker with 2 shards so a topic's queues have
//! different owners: QUERY_CONSUME_QUEUE, QUERY_CONSUME_TIME_SPAN, the timestamps of
//! GET_CONSUME_STATS and GET_TOPIC_STATS_INFO, GET_BROKER_CONSUME_STATS, CLONE_GROUP_OFFSET,
//! GET_ALL_CONSUMER_OFFSET, GET_ALL_DELAY_OFFSET and GET_SUBSCRIPTIONGROUP_CONFIG, with their
//! bad-header answers.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use comet_broker::ownership::owner_shard;
use comet_proto::body::{
    ConsumeStats, ConsumeStatsList, ConsumerOffsetSerializeWrapper, DelayOffsetSerializeWrapper,
    JsonBody, QueryConsumeQueueResponseBody, QueryConsumeTimeSpanBody, QueueTimeSpan,
    SubscriptionGroupConfig, TopicStatsTable,
};
use comet_proto::headers::{
    CloneGroupOffsetRequestHeader, GetConsumeStatsInBrokerHeader, GetConsumeStatsRequestHeader,
    GetSubscriptionGroupConfigRequestHeader, GetTopicStatsInfoRequestHeader,
    QueryConsumeQueueRequestHeader, QueryConsumeTimeSpanRequestHeader,
};
use comet_proto::message::{decode_records, MessageExt};
use comet_proto::properties::{names, Properties};
use comet_proto::{CommandHeader, RemotingCommand, RequestCode, ResponseCode};
use comet_store::consume_queue::tag_code;
use common::{pull_request, send_request, Broker, Client, TempDir};

const TOPIC: &str = "InspectTopic";
const QUEUES: i32 = 4;
/// Committed offsets of the source group per queue (queue q holds 3 + q messages).
const COMMITTED: [i64; 4] = [2, 4, 0, 6];

fn request<H: CommandHeader>(code: RequestCode, header: &H) -> RemotingCommand {
    RemotingCommand::request(code, 0).with_header(header)
}

fn create_group(client: &mut Client, group: &str) {
    let body = SubscriptionGroupConfig::new(group).encode();
    client.call_ok(
        RemotingCommand::request(RequestCode::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, 0)
            .with_body(body.to_vec()),
    );
}

/// Every message of one queue as stored (physical offset, size, store time).
fn stored(client: &mut Client, queue_id: i32) -> Vec<MessageExt> {
    let response = client.call(pull_request("reader", TOPIC, queue_id, 0, 64, 0));
    assert_eq!(response.response_code(), ResponseCode::SUCCESS);
    decode_records(response.body.clone())
}

/// A broker with 2 shards, the topic on queues owned by both, 3 + q messages in queue q
/// (sent a few ms apart so store times differ), and the source group's offsets committed.
fn seeded(name: &str) -> (TempDir, Broker, Client, BTreeMap<i32, Vec<MessageExt>>) {
    let owners: Vec<_> = (0..QUEUES).map(|q| owner_shard(TOPIC, q, 2)).collect();
    assert!(
        owners.iter().any(|o| *o != owners[0]),
        "queues on one shard only"
    );
    let directory = TempDir::new(name);
    let broker = Broker::start(&directory.0, 2, &[]);
    let mut client = broker.client();
    common::create_topic(&mut client, TOPIC, QUEUES);
    for queue_id in 0..QUEUES {
        for index in 0..(3 + queue_id) {
            let body = format!("q{queue_id}-{index}");
            let send = send_request(TOPIC, queue_id, body.as_bytes(), Some("TagA"), None);
            client.call_ok(send);
            // Distinct store times per message are the input of the time-span checks.
            std::thread::sleep(Duration::from_millis(3));
        }
    }
    for (queue_id, offset) in (0..).zip(COMMITTED.iter()) {
        common::commit_offset(&mut client, "cg_src", TOPIC, queue_id, *offset);
    }
    let messages = (0..QUEUES).map(|q| (q, stored(&mut client, q))).collect();
    (directory, broker, client, messages)
}

fn query_cq(topic: &str, queue_id: i32, index: i64, count: i32) -> RemotingCommand {
    let header = QueryConsumeQueueRequestHeader {
        topic: topic.into(),
        queue_id,
        index,
        count,
        consumer_group: Some("cg_src".into()),
    };
    request(RequestCode::QUERY_CONSUME_QUEUE, &header)
}

fn assert_refused(client: &mut Client, request: RemotingCommand, code: ResponseCode, why: &str) {
    let response = client.call(request);
    assert_eq!(
        response.response_code(),
        code,
        "{why}: {:?}",
        response.remark
    );
    let remark = response.remark.unwrap_or_default();
    assert!(remark.contains(why), "remark {remark:?} lacks {why:?}");
}

// Proves QUERY_CONSUME_QUEUE answers, from each queue's owner, the entries from an index for
// a count (physical offset, size and tag code of the stored messages), the queue's min and
// max, and the group's subscription state; and that a missing topic, an unknown queue, a
// negative index, a negative or huge count get clear errors, an index past the end no entries.
#[test]
fn query_consume_queue_entries_and_bad_headers() {
    let (_directory, _broker, mut client, messages) = seeded("inspect-cq");
    for (queue_id, stored) in &messages {
        let response = client.call_ok(query_cq(TOPIC, *queue_id, 1, 10));
        let body = QueryConsumeQueueResponseBody::decode(&response.body).unwrap();
        assert_eq!(body.min_queue_index, 0);
        assert_eq!(body.max_queue_index, stored.len() as i64);
        assert_eq!(
            body.filter_data.as_deref(),
            Some("cg_src@InspectTopic is not online!")
        );
        let entries = body.queue_data.unwrap();
        assert_eq!(entries.len(), stored.len() - 1, "from index 1 to the end");
        for (entry, message) in entries.iter().zip(&stored[1..]) {
            assert_eq!(entry.physic_offset, message.commit_log_offset);
            assert_eq!(entry.physic_size, message.store_size);
            assert_eq!(entry.tags_code, tag_code("TagA"));
        }
    }
    let one = client.call_ok(query_cq(TOPIC, 3, 2, 1));
    let one = QueryConsumeQueueResponseBody::decode(&one.body).unwrap();
    let one = one.queue_data.unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].physic_offset, messages[&3][2].commit_log_offset);
    let past = client.call_ok(query_cq(TOPIC, 0, 50, 10));
    assert!(past.remark.unwrap_or_default().contains("Index 50"));
    let past = QueryConsumeQueueResponseBody::decode(&past.body).unwrap();
    assert_eq!(past.queue_data, Some(Vec::new()));

    let mut no_topic = query_cq(TOPIC, 0, 0, 1);
    no_topic.ext_fields.remove("topic");
    assert_refused(&mut client, no_topic, ResponseCode::SYSTEM_ERROR, "topic");
    let unknown = query_cq("NoSuchTopic", 0, 0, 1);
    assert_refused(
        &mut client,
        unknown,
        ResponseCode::SYSTEM_ERROR,
        "0@NoSuchTopic",
    );
    let negative = query_cq(TOPIC, 0, -1, 1);
    assert_refused(
        &mut client,
        negative,
        ResponseCode::INVALID_PARAMETER,
        "index -1",
    );
    let negative = query_cq(TOPIC, 0, 0, -5);
    assert_refused(
        &mut client,
        negative,
        ResponseCode::INVALID_PARAMETER,
        "count -5",
    );
    let huge = query_cq(TOPIC, 0, 0, i32::MAX);
    assert_refused(
        &mut client,
        huge,
        ResponseCode::INVALID_PARAMETER,
        "count 2147483647",
    );
}

fn time_span(group: &str, topic: &str) -> RemotingCommand {
    let header = QueryConsumeTimeSpanRequestHeader {
        topic: topic.into(),
        group: group.into(),
    };
    request(RequestCode::QUERY_CONSUME_TIME_SPAN, &header)
}

// Proves QUERY_CONSUME_TIME_SPAN gives, per queue, the store times of the first and last
// message, the store time of the last consumed one (the first message's when nothing was)
// and a delay only while messages are left; that GET_CONSUME_STATS' lastTimestamp and
// GET_TOPIC_STATS_INFO's lastUpdateTimestamp are those store times (not 0); that one
// queue's span asked with a queueId is its owner's; and that a
// missing group or an unknown topic gets a clear error.
#[test]
fn time_spans_and_stats_timestamps() {
    let (_directory, _broker, mut client, messages) = seeded("inspect-span");
    let response = client.call_ok(time_span("cg_src", TOPIC));
    let spans = QueryConsumeTimeSpanBody::decode(&response.body).unwrap();
    assert_eq!(spans.consume_time_span_set.len(), QUEUES as usize);
    for span in &spans.consume_time_span_set {
        let queue_id = span.message_queue.queue_id;
        let stored = &messages[&queue_id];
        let committed = usize::try_from(COMMITTED[queue_id as usize]).unwrap();
        assert_eq!(span.min_time_stamp, stored[0].store_timestamp);
        assert_eq!(span.max_time_stamp, stored.last().unwrap().store_timestamp);
        let consumed = committed
            .checked_sub(1)
            .map_or(&stored[0], |last| &stored[last]);
        assert_eq!(
            span.consume_time_stamp, consumed.store_timestamp,
            "queue {queue_id}"
        );
        if committed < stored.len() {
            assert!(
                span.delay_time >= 0 && span.delay_time < 600_000,
                "{span:?}"
            );
        } else {
            assert_eq!(span.delay_time, 0, "nothing left to consume");
        }
    }
    // The per-queue form (a `queueId` added) is answered by the queue's owner, whichever
    // shard the connection is on.
    for span in &spans.consume_time_span_set {
        let mut one = time_span("cg_src", TOPIC);
        let queue_id = span.message_queue.queue_id;
        one.ext_fields.insert("queueId", queue_id.to_string());
        let response = client.call_ok(one);
        let mut alone = QueueTimeSpan::decode(&response.body).unwrap();
        assert!(alone.delay_time >= span.delay_time, "delays grow with time");
        alone.delay_time = span.delay_time;
        assert_eq!(&alone, span);
    }
    let header = GetConsumeStatsRequestHeader {
        consumer_group: "cg_src".into(),
        topic: None,
        topic_list: None,
        broker_name: None,
    };
    let response = client.call_ok(request(RequestCode::GET_CONSUME_STATS, &header));
    let stats = ConsumeStats::decode(&response.body).unwrap();
    assert_eq!(
        stats.offset_table.len(),
        QUEUES as usize,
        "topics with offsets"
    );
    for (queue, wrapper) in &stats.offset_table {
        let committed = COMMITTED[queue.queue_id as usize];
        assert_eq!(wrapper.consumer_offset, committed);
        let expected = match committed {
            0 => 0,
            n => messages[&queue.queue_id][usize::try_from(n - 1).unwrap()].store_timestamp,
        };
        assert_eq!(wrapper.last_timestamp, expected, "{queue:?}");
    }
    let header = GetTopicStatsInfoRequestHeader {
        topic: TOPIC.into(),
        broker_name: None,
    };
    let response = client.call_ok(request(RequestCode::GET_TOPIC_STATS_INFO, &header));
    let table = TopicStatsTable::decode(&response.body).unwrap();
    for (queue, offsets) in &table.offset_table {
        let last = messages[&queue.queue_id].last().unwrap().store_timestamp;
        assert_eq!(offsets.last_update_timestamp, last, "{queue:?}");
    }

    let mut no_group = time_span("cg_src", TOPIC);
    no_group.ext_fields.remove("group");
    assert_refused(&mut client, no_group, ResponseCode::SYSTEM_ERROR, "group");
    let mut negative = time_span("cg_src", TOPIC);
    negative.ext_fields.insert("queueId", "-2");
    assert_refused(
        &mut client,
        negative,
        ResponseCode::INVALID_PARAMETER,
        "queueId -2",
    );
    let unknown = time_span("cg_src", "NoSuchTopic");
    assert_refused(
        &mut client,
        unknown,
        ResponseCode::TOPIC_NOT_EXIST,
        "NoSuchTopic",
    );
}

fn clone_request(source: &str, target: &str, topic: Option<&str>) -> RemotingCommand {
    let header = CloneGroupOffsetRequestHeader {
        src_group: source.into(),
        dest_group: target.into(),
        topic: topic.map(str::to_owned),
        offline: Some(false),
    };
    request(RequestCode::CLONE_GROUP_OFFSET, &header)
}

fn all_offsets(client: &mut Client) -> ConsumerOffsetSerializeWrapper {
    let response = client.call_ok(RemotingCommand::request(
        RequestCode::GET_ALL_CONSUMER_OFFSET,
        0,
    ));
    let offsets = ConsumerOffsetSerializeWrapper::decode(&response.body).unwrap();
    assert!(
        offsets.data_version.is_some(),
        "5.x slaves read the data version"
    );
    offsets
}

// Proves CLONE_GROUP_OFFSET copies the source's offsets of every queue (on both shards) to
// the target, for one topic and for every topic the source has offsets for, and that the
// copies survive a restart; that GET_ALL_CONSUMER_OFFSET parses back as consumerOffset.json
// with every shard's queues; that GET_BROKER_CONSUME_STATS lists both groups with the summed
// lag; and that missing or equal groups and a missing isOrder get clear errors.
#[test]
fn clone_all_offsets_and_broker_consume_stats() {
    let (_directory, mut broker, mut client, messages) = seeded("inspect-clone");
    client.call_ok(clone_request("cg_src", "cg_one", Some(TOPIC)));
    client.call_ok(clone_request("cg_src", "cg_all", None));
    client.call_ok(clone_request("cg_nobody", "cg_none", Some(TOPIC)));
    for (queue_id, offset) in (0..).zip(COMMITTED.iter()) {
        assert_eq!(
            common::committed_offset(&mut client, "cg_one", TOPIC, queue_id),
            Some(*offset)
        );
        assert_eq!(
            common::committed_offset(&mut client, "cg_all", TOPIC, queue_id),
            Some(*offset)
        );
        assert_eq!(
            common::committed_offset(&mut client, "cg_none", TOPIC, queue_id),
            None
        );
    }
    let offsets = all_offsets(&mut client);
    let expected: BTreeMap<i32, i64> = (0..QUEUES).zip(COMMITTED).collect();
    for group in ["cg_src", "cg_one", "cg_all"] {
        let key = ConsumerOffsetSerializeWrapper::key(TOPIC, group);
        assert_eq!(offsets.offset_table.get(&key), Some(&expected), "{group}");
    }

    for group in ["cg_src", "cg_one"] {
        create_group(&mut client, group);
    }
    let header = GetConsumeStatsInBrokerHeader { is_order: false };
    let response = client.call_ok(request(RequestCode::GET_BROKER_CONSUME_STATS, &header));
    let list = ConsumeStatsList::decode(&response.body).unwrap();
    let stored: i64 = messages.values().map(|queue| queue.len() as i64).sum();
    let lag = stored - COMMITTED.iter().sum::<i64>();
    assert_eq!(list.total_diff, 2 * lag, "two groups with the same lag");
    let listed: Vec<&String> = list
        .consume_stats_list
        .iter()
        .flat_map(|map| map.iter())
        .filter(|(_, per_topic)| !per_topic.is_empty())
        .map(|(group, _)| group)
        .collect();
    assert_eq!(listed, ["cg_one", "cg_src"]);
    let ordered = GetConsumeStatsInBrokerHeader { is_order: true };
    let response = client.call_ok(request(RequestCode::GET_BROKER_CONSUME_STATS, &ordered));
    let list = ConsumeStatsList::decode(&response.body).unwrap();
    assert_eq!(list.total_diff, 0, "the topic is not ordered");

    let no_order = RemotingCommand::request(RequestCode::GET_BROKER_CONSUME_STATS, 0);
    assert_refused(&mut client, no_order, ResponseCode::SYSTEM_ERROR, "isOrder");
    let mut no_target = clone_request("cg_src", "x", Some(TOPIC));
    no_target.ext_fields.remove("destGroup");
    assert_refused(
        &mut client,
        no_target,
        ResponseCode::SYSTEM_ERROR,
        "destGroup",
    );
    let same = clone_request("cg_src", "cg_src", None);
    assert_refused(
        &mut client,
        same,
        ResponseCode::INVALID_PARAMETER,
        "both cg_src",
    );

    broker.stop();
    broker.restart(2);
    let mut client = broker.client();
    for (queue_id, offset) in (0..).zip(COMMITTED.iter()) {
        let after = common::committed_offset(&mut client, "cg_one", TOPIC, queue_id);
        assert_eq!(after, Some(*offset), "clone persisted");
    }
}

// Proves GET_ALL_DELAY_OFFSET answers delayOffset.json in Java's shape: after one message of
// delay level 1 is delivered, level 1's next offset is 1 (keys are levels, not queue ids).
#[test]
fn all_delay_offsets_after_a_delivery() {
    let directory = TempDir::new("inspect-delay");
    let broker = Broker::start(&directory.0, 2, &[]);
    let mut client = broker.client();
    common::create_topic(&mut client, "DelayInspect", QUEUES);
    let mut properties = Properties::new();
    properties.insert(names::DELAY, "1");
    properties.insert(names::WAIT, "true");
    let send = common::send_request_with("DelayInspect", 0, b"later", &properties);
    client.call_ok(send);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let response = client.call_ok(RemotingCommand::request(
            RequestCode::GET_ALL_DELAY_OFFSET,
            0,
        ));
        let delay = DelayOffsetSerializeWrapper::decode(&response.body).unwrap();
        assert!(delay.data_version.is_some());
        assert!(
            !delay.offset_table.contains_key(&0),
            "no level 0: {delay:?}"
        );
        if delay.offset_table.get(&1) == Some(&1) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "level 1 never delivered: {delay:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

// Proves GET_SUBSCRIPTIONGROUP_CONFIG answers a group's configuration as it was created,
// Java's SYSTEM_ERROR for a group the broker does not hold, and a clear error for a request
// without the group.
#[test]
fn one_group_config_by_name() {
    let directory = TempDir::new("inspect-group-config");
    let broker = Broker::start(&directory.0, 2, &[]);
    let mut client = broker.client();
    let mut config = SubscriptionGroupConfig::new("cg_one");
    config.retry_max_times = 7;
    client.call_ok(
        RemotingCommand::request(RequestCode::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, 0)
            .with_body(config.encode().to_vec()),
    );
    let header = GetSubscriptionGroupConfigRequestHeader {
        group: "cg_one".into(),
    };
    let answer = client.call_ok(request(RequestCode::GET_SUBSCRIPTIONGROUP_CONFIG, &header));
    let got = SubscriptionGroupConfig::decode(&answer.body).expect("a group config body");
    assert_eq!(got.group_name, "cg_one");
    assert_eq!(got.retry_max_times, 7);
    let unknown = GetSubscriptionGroupConfigRequestHeader {
        group: "cg_nobody".into(),
    };
    let refused = request(RequestCode::GET_SUBSCRIPTIONGROUP_CONFIG, &unknown);
    assert_refused(
        &mut client,
        refused,
        ResponseCode::SYSTEM_ERROR,
        "No group in this broker",
    );
    let bare = RemotingCommand::request(RequestCode::GET_SUBSCRIPTIONGROUP_CONFIG, 0);
    assert_eq!(
        client.call(bare).response_code(),
        ResponseCode::SYSTEM_ERROR
    );
}
