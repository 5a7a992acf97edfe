//! Admin requests that must act on the whole broker, whichever shard accepted the
//! connection, on a broker with 2 shards whose topic has queues owned by both:
//! DELETE_SUBSCRIPTIONGROUP with cleanOffset, DELETE_TOPIC_IN_BROKER,
//! QUERY_TOPIC_CONSUME_BY_WHO, QUERY_TOPICS_BY_CONSUMER, the store figures and version of
//! GET_BROKER_RUNTIME_INFO, and the store maintenance codes (DELETE_EXPIRED_COMMITLOG and
//! the consume-queue cleanups).
//!
//! Every request is sent over several connections (a connection lands on whichever shard
//! accepted it); with per-queue state on both shards, a request served by one shard only
//! misses half of it on any of them.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use comet_broker::ownership::owner_shard;
use comet_proto::body::{ConsumerOffsetSerializeWrapper, GroupList, JsonBody, KVTable, TopicList};
use comet_proto::headers::{
    DeleteSubscriptionGroupRequestHeader, DeleteTopicRequestHeader, GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader, QueryTopicConsumeByWhoRequestHeader,
};
use comet_proto::message::decode_records;
use comet_proto::{CommandHeader, RemotingCommand, RequestCode, ResponseCode};
use comet_store::PhysicalOffset;
use comet_test_support::wait_until;
use common::{pull_request, send_request, Broker, Client, TempDir};

const TOPIC: &str = "ShardAdminTopic";
const QUEUES: i32 = 4;
/// Connections per request: with 2 shards, at least one lands away from any one shard's
/// data almost surely, and none may see a partial answer.
const CONNECTIONS: usize = 4;

fn request<H: CommandHeader>(code: RequestCode, header: &H) -> RemotingCommand {
    RemotingCommand::request(code, 0).with_header(header)
}

/// A broker with 2 shards and `TOPIC` on queues owned by both, `per_queue` messages of
/// `body_bytes` in each.
fn seeded(name: &str, extra: &[&str], per_queue: usize, body_bytes: usize) -> (TempDir, Broker) {
    let owners: Vec<_> = (0..QUEUES).map(|q| owner_shard(TOPIC, q, 2)).collect();
    assert!(
        owners.iter().any(|o| *o != owners[0]),
        "queues on one shard only"
    );
    let directory = TempDir::new(name);
    // Sends must not depend on how full the machine's disk is (the refusal mark's default
    // is 90%); a test's own `extra` comes later and wins.
    let mut args = vec!["-o", "diskSpaceWarningLevelRatio=99"];
    args.extend_from_slice(extra);
    let broker = Broker::start(&directory.0, 2, &args);
    let mut client = broker.client();
    common::create_topic(&mut client, TOPIC, QUEUES);
    let body = vec![b'x'; body_bytes];
    // Round by round, so each segment of a log holds messages of each of its queues.
    for _ in 0..per_queue {
        for queue_id in 0..QUEUES {
            client.call_ok(send_request(TOPIC, queue_id, &body, Some("TagA"), None));
        }
    }
    (directory, broker)
}

fn clients(broker: &Broker) -> Vec<Client> {
    (0..CONNECTIONS).map(|_| broker.client()).collect()
}

/// The broker-wide offset table's keys (`topic@group`).
fn offset_keys(client: &mut Client) -> Vec<String> {
    let response = client.call_ok(RemotingCommand::request(
        RequestCode::GET_ALL_CONSUMER_OFFSET,
        0,
    ));
    let table = ConsumerOffsetSerializeWrapper::decode(&response.body).unwrap();
    table.offset_table.into_keys().collect()
}

fn queue_offsets(client: &mut Client, queue_id: i32) -> (i64, i64) {
    let min = GetMinOffsetRequestHeader {
        topic: TOPIC.into(),
        queue_id,
        broker_name: None,
        logical: None,
    };
    let max = GetMaxOffsetRequestHeader {
        topic: TOPIC.into(),
        queue_id,
        committed: None,
        broker_name: None,
        logical: None,
    };
    let offset = |response: RemotingCommand| response.ext_fields.optional_i64("offset").unwrap();
    let min = offset(client.call_ok(request(RequestCode::GET_MIN_OFFSET, &min)));
    let max = offset(client.call_ok(request(RequestCode::GET_MAX_OFFSET, &max)));
    (min.unwrap(), max.unwrap())
}

fn runtime_info(client: &mut Client) -> BTreeMap<String, String> {
    let response = client.call_ok(RemotingCommand::request(
        RequestCode::GET_BROKER_RUNTIME_INFO,
        0,
    ));
    KVTable::decode(&response.body).unwrap().table
}

fn figure(figures: &BTreeMap<String, String>, key: &str) -> u64 {
    figures[key]
        .parse()
        .unwrap_or_else(|e| panic!("{key}={:?}: {e}", figures[key]))
}

// Proves DELETE_SUBSCRIPTIONGROUP with cleanOffset removes the group's committed offsets of
// every queue, on both shards, whichever connection asked; another group's stay; without
// cleanOffset the offsets stay.
#[test]
fn delete_group_cleans_offsets_on_every_shard() {
    let (_directory, broker) = seeded("shard-admin-group", &[], 2, 16);
    let mut connections = clients(&broker);
    for (index, client) in connections.iter_mut().enumerate() {
        let group = format!("cg_gone_{index}");
        for queue_id in 0..QUEUES {
            common::commit_offset(client, &group, TOPIC, queue_id, 1);
            common::commit_offset(client, "cg_kept", TOPIC, queue_id, 2);
        }
        let delete = DeleteSubscriptionGroupRequestHeader {
            group_name: group.clone(),
            clean_offset: Some(true),
        };
        client.call_ok(request(RequestCode::DELETE_SUBSCRIPTIONGROUP, &delete));
        for queue_id in 0..QUEUES {
            assert_eq!(
                common::committed_offset(client, &group, TOPIC, queue_id),
                None,
                "{group} {queue_id}"
            );
            assert_eq!(
                common::committed_offset(client, "cg_kept", TOPIC, queue_id),
                Some(2)
            );
        }
    }
    let mut client = broker.client();
    for queue_id in 0..QUEUES {
        common::commit_offset(&mut client, "cg_offsets_stay", TOPIC, queue_id, 1);
    }
    let keep = DeleteSubscriptionGroupRequestHeader {
        group_name: "cg_offsets_stay".into(),
        clean_offset: None,
    };
    client.call_ok(request(RequestCode::DELETE_SUBSCRIPTIONGROUP, &keep));
    for queue_id in 0..QUEUES {
        assert_eq!(
            common::committed_offset(&mut client, "cg_offsets_stay", TOPIC, queue_id),
            Some(1)
        );
    }
}

// Proves QUERY_TOPIC_CONSUME_BY_WHO lists the groups holding offsets on any shard: one
// group's offsets only on the queues of shard 0, another's only on shard 1's.
#[test]
fn consume_by_who_gathers_every_shard() {
    let (_directory, broker) = seeded("shard-admin-who", &[], 1, 16);
    let mut client = broker.client();
    for queue_id in 0..QUEUES {
        let group = match owner_shard(TOPIC, queue_id, 2).index() {
            0 => "cg_on_shard_0",
            _ => "cg_on_shard_1",
        };
        common::commit_offset(&mut client, group, TOPIC, queue_id, 1);
    }
    let header = QueryTopicConsumeByWhoRequestHeader {
        topic: TOPIC.into(),
    };
    for mut client in clients(&broker) {
        let response = client.call_ok(request(RequestCode::QUERY_TOPIC_CONSUME_BY_WHO, &header));
        let groups = GroupList::decode(&response.body).unwrap().group_list;
        assert!(groups.contains("cg_on_shard_0"), "{groups:?}");
        assert!(groups.contains("cg_on_shard_1"), "{groups:?}");
    }
}

// Proves QUERY_TOPICS_BY_CONSUMER lists the topics a group holds offsets on, on any shard:
// one topic's offsets only on shard 0's queues, another's only on shard 1's.
#[test]
fn topics_by_consumer_gathers_every_shard() {
    let (_directory, broker) = seeded("shard-admin-topics", &[], 1, 16);
    let mut client = broker.client();
    let other = "ShardAdminSecond";
    common::create_topic(&mut client, other, QUEUES);
    let on_shard = |topic: &str, shard: usize| {
        (0..QUEUES)
            .find(|queue_id| owner_shard(topic, *queue_id, 2).index() == shard)
            .expect("a queue on the shard")
    };
    common::commit_offset(&mut client, "cg_topics", TOPIC, on_shard(TOPIC, 0), 1);
    common::commit_offset(&mut client, "cg_topics", other, on_shard(other, 1), 1);
    for mut client in clients(&broker) {
        let mut ask = RemotingCommand::request(RequestCode::QUERY_TOPICS_BY_CONSUMER, 0);
        ask.ext_fields.insert("group", "cg_topics");
        let response = client.call_ok(ask);
        let topics = TopicList::decode(&response.body).unwrap().topic_list;
        assert!(topics.contains(TOPIC), "{topics:?}");
        assert!(topics.contains(other), "{topics:?}");
    }
}

// Proves DELETE_TOPIC_IN_BROKER removes the topic's config, its offsets and its queue data
// on both shards (a topic created again under the name starts empty) and the pop retry
// topic of a group that consumed it; and refuses blank and system topics as Java does.
#[test]
fn delete_topic_on_every_shard() {
    let (_directory, broker) = seeded("shard-admin-topic", &[], 3, 16);
    let mut client = broker.client();
    let pop_retry = format!("%RETRY%cg_del_{TOPIC}");
    common::create_topic(&mut client, &pop_retry, 1);
    for queue_id in 0..QUEUES {
        common::commit_offset(&mut client, "cg_del", TOPIC, queue_id, 2);
    }
    let mut other = broker.client();
    common::create_topic(&mut other, "ShardAdminOther", 2);
    common::commit_offset(&mut other, "cg_del", "ShardAdminOther", 1, 1);

    for (topic, code) in [
        (" ", ResponseCode::INVALID_PARAMETER),
        ("TBW102", ResponseCode::INVALID_PARAMETER),
        ("rmq_sys_wheel_timer", ResponseCode::INVALID_PARAMETER),
    ] {
        let header = DeleteTopicRequestHeader {
            topic: topic.into(),
        };
        let response = client.call(request(RequestCode::DELETE_TOPIC_IN_BROKER, &header));
        assert_eq!(response.response_code(), code, "{topic:?}");
    }

    let header = DeleteTopicRequestHeader {
        topic: TOPIC.into(),
    };
    client.call_ok(request(RequestCode::DELETE_TOPIC_IN_BROKER, &header));
    for mut client in clients(&broker) {
        let keys = offset_keys(&mut client);
        assert!(
            !keys.iter().any(|key| key.starts_with(&format!("{TOPIC}@"))),
            "{keys:?}"
        );
        assert!(
            keys.contains(&"ShardAdminOther@cg_del".to_owned()),
            "{keys:?}"
        );
        for topic in [TOPIC, pop_retry.as_str()] {
            let config = RemotingCommand::request(RequestCode::GET_TOPIC_CONFIG, 0);
            let mut config = config;
            config.ext_fields.insert("topic", topic);
            let response = client.call(config);
            assert_eq!(
                response.response_code(),
                ResponseCode::TOPIC_NOT_EXIST,
                "{topic}"
            );
        }
    }
    common::create_topic(&mut client, TOPIC, QUEUES);
    for queue_id in 0..QUEUES {
        let (min, max) = queue_offsets(&mut client, queue_id);
        assert_eq!((min, max), (3, 3), "queue {queue_id} holds nothing");
        let response = client.call(pull_request("cg_new", TOPIC, queue_id, 0, 32, 0));
        assert_ne!(
            response.response_code(),
            ResponseCode::SUCCESS,
            "queue {queue_id}"
        );
        client.call_ok(send_request(TOPIC, queue_id, b"again", None, None));
        let response = client.call_ok(pull_request("cg_new", TOPIC, queue_id, 3, 32, 0));
        let records = decode_records(response.body.clone());
        assert_eq!(records.len(), 1);
        assert_eq!(&records[0].body[..], b"again");
    }
}

// Proves GET_BROKER_RUNTIME_INFO reports the store of the whole broker: commitLogMaxOffset
// covers both shards' logs (the sum of their ends, not a physical offset with a log id in
// its top bits), dispatchBehindBytes settles at 0, earliestMessageTimeStamp is the oldest
// message's of either shard, the version is Java's name of Comet's version, and asking does
// not count as routed requests.
#[test]
fn runtime_info_covers_every_shard() {
    let (_directory, broker) = seeded("shard-admin-runtime", &[], 5, 100);
    let mut client = broker.client();
    let mut log_ends: BTreeMap<u8, u64> = BTreeMap::new();
    let mut earliest = i64::MAX;
    for queue_id in 0..QUEUES {
        let response = client.call_ok(pull_request("cg_ends", TOPIC, queue_id, 0, 32, 0));
        for message in decode_records(response.body.clone()) {
            let physical = PhysicalOffset::from_i64(message.commit_log_offset).unwrap();
            let end = physical.position() + u64::try_from(message.store_size).unwrap();
            let log_end = log_ends.entry(physical.log_id().get()).or_default();
            *log_end = (*log_end).max(end);
            earliest = earliest.min(message.store_timestamp);
        }
    }
    assert_eq!(log_ends.len(), 2, "both logs hold messages: {log_ends:?}");
    let ends: u64 = log_ends.values().sum();
    for mut client in clients(&broker) {
        let figures = runtime_info(&mut client);
        let max = figure(&figures, "commitLogMaxOffset");
        assert!(max >= ends, "max {max} covers both logs' ends {log_ends:?}");
        assert!(
            max < 1 << 40,
            "a sum of positions, not a physical offset: {max}"
        );
        assert_eq!(figure(&figures, "commitLogMinOffset"), 0);
        assert_eq!(figures["brokerVersionDesc"], "V5_3_3");
        assert_eq!(figures["earliestMessageTimeStamp"], earliest.to_string());
        assert_eq!(figures["brokerActive"], "true");
        assert_eq!(figures["shardCount"], "2");
    }
    wait_until("dispatch to catch up", Duration::from_secs(10), || {
        figure(&runtime_info(&mut client), "dispatchBehindBytes") == 0
    });
    let routed = |figures: &BTreeMap<String, String>| {
        figure(figures, "requestsHandledInPlace") + figure(figures, "requestsForwardedToOwnerShard")
    };
    let before = routed(&runtime_info(&mut client));
    let after = routed(&runtime_info(&mut client));
    assert_eq!(before, after, "gathering the figures routes no requests");
}

// Proves DELETE_EXPIRED_COMMITLOG makes every shard delete its expired segments outside the
// delete hour (the commit-log min of both logs moves), that CLEAN_EXPIRED_CONSUMEQUEUE and
// CLEAN_UNUSED_TOPIC are answered SUCCESS, as Java answers them, and that maintenance codes
// without a Comet counterpart get REQUEST_CODE_NOT_SUPPORTED.
#[test]
fn manual_delete_reaches_every_shard() {
    let not_now = (comet_store::local_hour(comet_rt::clock::wall_clock_ms()) + 12) % 24;
    let delete_when = format!("deleteWhen={not_now:02}");
    let extra = [
        "-o",
        "mappedFileSizeCommitLog=65536",
        "-o",
        "fileReservedTime=0",
        "-o",
        &delete_when,
        // The retention passes must not delete for disk use: only the request may.
        "-o",
        "diskMaxUsedSpaceRatio=95",
        "-o",
        "diskSpaceCleanForciblyRatio=95",
    ];
    let (_directory, broker) = seeded("shard-admin-manual", &extra, 60, 1000);
    let mut client = broker.client();
    let figures = runtime_info(&mut client);
    assert_eq!(
        figure(&figures, "commitLogMinOffset"),
        0,
        "nothing deleted yet"
    );
    for code in [
        RequestCode::CLEAN_EXPIRED_CONSUMEQUEUE,
        RequestCode::CLEAN_UNUSED_TOPIC,
        RequestCode::DELETE_EXPIRED_COMMITLOG,
    ] {
        client.call_ok(RemotingCommand::request(code, 0));
    }
    // A retention pass runs every 10 s on each shard. Each segment of a log holds messages of
    // both its queues, so every queue's min moves only once both logs deleted a segment.
    wait_until("both logs to delete", Duration::from_secs(30), || {
        (0..QUEUES).all(|queue_id| queue_offsets(&mut client, queue_id).0 > 0)
    });
    let figures = runtime_info(&mut client);
    assert!(
        figure(&figures, "commitLogMinOffset") >= 2 * 65536,
        "{figures:?}"
    ); // Maintenance of things Comet does not have (RocksDB queues, a master flush offset to
       // reset, cold-data flow control, read-ahead modes) is refused honestly, as Java refuses
       // an unknown code.
    for code in [
        RequestCode::RESET_MASTER_FLUSH_OFFSET,
        RequestCode::CHECK_ROCKSDB_CQ_WRITE_PROGRESS,
        RequestCode::EXPORT_ROCKSDB_CONFIG_TO_JSON,
        RequestCode::UPDATE_COLD_DATA_FLOW_CTR_CONFIG,
        RequestCode::SET_COMMITLOG_READ_MODE,
    ] {
        let response = client.call(RemotingCommand::request(code, 0));
        assert_eq!(
            response.response_code(),
            ResponseCode::REQUEST_CODE_NOT_SUPPORTED,
            "{code:?}"
        );
        let remark = format!(" request type {} not supported", code.value());
        assert_eq!(response.remark.as_deref(), Some(remark.as_str()));
    }
}
