//! The consumers' conversation of
//! docs/protocol.md#push-consumer-conversation against scripted peers on 127.0.0.1: a name
//! server with one route and a scripted broker keeping messages, offsets, members and locks
//! in memory. The broker script answers just enough of HEART_BEAT, GET_CONSUMER_LIST_BY_GROUP,
//! QUERY_CONSUMER_OFFSET, GET_MAX/MIN_OFFSET, PULL_MESSAGE/LITE_PULL_MESSAGE,
//! UPDATE_CONSUMER_OFFSET, CONSUMER_SEND_MSG_BACK and LOCK/UNLOCK_BATCH_MQ to drive the
//! client; it is a test double for the conversation, not a broker (no long polling, no
//! server-side filtering).

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use comet_client::{
    ClientConfig, ConsumeConcurrentlyStatus, ConsumeFromWhere, ConsumeOrderlyStatus,
    ConsumerConfig, LitePullConfig, LitePullConsumer, MessageListener, MessageQueue, PushConsumer,
    PushConsumerConfig,
};
use comet_proto::body::{BrokerData, JsonBody, QueueData, TopicRouteData};
use comet_proto::bytes::BytesMut;
use comet_proto::message::{encode_record, RecordSpec};
use comet_proto::properties::{names, Properties};
use comet_proto::{RemotingCommand, RequestCode, ResponseCode};
use comet_test_support::wait_until;
use common::{FakeServer, ServerConn};

const TOPIC: &str = "TopicTest";
const QUEUES: i32 = 4;

#[derive(Default)]
struct BrokerState {
    /// (topic, queue id) → stored records.
    records: HashMap<(String, i32), Vec<Vec<u8>>>,
    /// (group, topic, queue id) → committed offset.
    offsets: HashMap<(String, String, i32), i64>,
    /// group → client ids seen in heartbeats (and not unregistered).
    members: HashMap<String, BTreeSet<String>>,
    /// Ext fields of every CONSUMER_SEND_MSG_BACK.
    send_backs: Vec<BTreeMap<String, String>>,
    /// (queue id) → client holding the lock.
    locks: HashMap<i32, String>,
    lock_requests: usize,
    pulls: usize,
    /// (group, topic, queue id) → offset a pull last committed (its commit flag).
    pull_commits: HashMap<(String, String, i32), i64>,
    /// (group, topic, queue id) → offset last stored by UPDATE_CONSUMER_OFFSET.
    updates: HashMap<(String, String, i32), i64>,
    /// A RESET_CONSUMER_CLIENT_OFFSET to send once the group pulled queue 0 past offset 5.
    pending_reset: Option<(String, i64)>,
    /// Answer CONSUMER_SEND_MSG_BACK with SYSTEM_ERROR.
    refuse_send_back: bool,
    /// SEND_MESSAGE_V2 requests received.
    sends: Vec<RemotingCommand>,
}

type State = Arc<Mutex<BrokerState>>;

fn store(state: &State, queue_id: i32, count: usize, tags: &[&str]) {
    let mut state = state.lock().unwrap();
    let records = state.records.entry((TOPIC.into(), queue_id)).or_default();
    for _ in 0..count {
        let index = records.len();
        let offset = index as i64;
        let mut properties = Properties::new();
        properties.insert(names::TAGS, tags[index % tags.len()]);
        properties.insert(names::UNIQ_KEY, format!("KEY-{queue_id}-{offset}"));
        let properties = properties.encode();
        let body = format!("q{queue_id}-m{offset}");
        let host = "127.0.0.1:10911".parse().unwrap();
        let spec = RecordSpec {
            topic: TOPIC,
            queue_id,
            flag: 0,
            sysflag: 0,
            born_timestamp: 1,
            born_host: host,
            store_host: host,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: body.as_bytes(),
            properties: &properties,
        };
        let mut bytes = BytesMut::new();
        let physical = i64::from(queue_id) * 1_000_000 + offset * 1000;
        encode_record(&spec, offset, physical, 2, &mut bytes).unwrap();
        records.push(bytes.to_vec());
    }
}

fn namesrv(broker_addr: String) -> FakeServer {
    let route = TopicRouteData {
        queue_datas: vec![QueueData {
            broker_name: "broker-a".into(),
            read_queue_nums: QUEUES,
            write_queue_nums: QUEUES,
            perm: 6,
            topic_sys_flag: 0,
        }],
        broker_datas: vec![BrokerData {
            cluster: "DefaultCluster".into(),
            broker_name: "broker-a".into(),
            broker_addrs: BTreeMap::from([(0, broker_addr)]),
            ..BrokerData::default()
        }],
        ..TopicRouteData::default()
    };
    let body = route.encode();
    FakeServer::start(move |mut conn: ServerConn| {
        while let Some(request) = conn.recv() {
            let topic = request.ext_fields.get("topic");
            let response = if topic == Some(TOPIC) || topic == Some("%RETRY%fallback") {
                RemotingCommand::response_to(&request, ResponseCode::SUCCESS)
                    .with_body(body.clone())
            } else {
                RemotingCommand::error_to(&request, ResponseCode::TOPIC_NOT_EXIST, "none")
            };
            conn.send(&response);
        }
    })
}

fn field<'a>(request: &'a RemotingCommand, key: &str) -> &'a str {
    request
        .ext_fields
        .get(key)
        .unwrap_or_else(|| panic!("missing {key}"))
}

fn offset_key(request: &RemotingCommand) -> (String, String, i32) {
    (
        field(request, "consumerGroup").into(),
        field(request, "topic").into(),
        field(request, "queueId").parse().unwrap(),
    )
}

fn ok(request: &RemotingCommand) -> RemotingCommand {
    RemotingCommand::response_to(request, ResponseCode::SUCCESS)
}

fn answer(state: &State, request: &RemotingCommand) -> RemotingCommand {
    match request.request_code() {
        RequestCode::PULL_MESSAGE | RequestCode::LITE_PULL_MESSAGE => pull(state, request),
        RequestCode::LOCK_BATCH_MQ | RequestCode::UNLOCK_BATCH_MQ => {
            lock_batch(&mut state.lock().unwrap(), request)
        }
        RequestCode::QUERY_CONSUMER_OFFSET
        | RequestCode::UPDATE_CONSUMER_OFFSET
        | RequestCode::GET_MAX_OFFSET
        | RequestCode::GET_MIN_OFFSET => offsets(&mut state.lock().unwrap(), request),
        _ => membership(&mut state.lock().unwrap(), request),
    }
}

fn membership(s: &mut BrokerState, request: &RemotingCommand) -> RemotingCommand {
    match request.request_code() {
        RequestCode::HEART_BEAT => {
            let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
            let client = body["clientID"].as_str().unwrap().to_owned();
            for consumer in body["consumerDataSet"].as_array().unwrap() {
                let group = consumer["groupName"].as_str().unwrap().to_owned();
                s.members.entry(group).or_default().insert(client.clone());
            }
            ok(request)
        }
        RequestCode::UNREGISTER_CLIENT => {
            if let Some(group) = request.ext_fields.get("consumerGroup") {
                let client = field(request, "clientID");
                s.members.entry(group.into()).or_default().remove(client);
            }
            ok(request)
        }
        RequestCode::GET_CONSUMER_LIST_BY_GROUP => {
            let group = field(request, "consumerGroup");
            let members = s.members.get(group).cloned().unwrap_or_default();
            let body = serde_json::json!({ "consumerIdList": members });
            ok(request).with_body(serde_json::to_vec(&body).unwrap())
        }
        RequestCode::CONSUMER_SEND_MSG_BACK if s.refuse_send_back => {
            RemotingCommand::error_to(request, ResponseCode::SYSTEM_ERROR, "refused")
        }
        RequestCode::SEND_MESSAGE_V2 => {
            s.sends.push(request.clone());
            let mut response = ok(request);
            let ext = &mut response.ext_fields;
            ext.insert("msgId", "7F00000100002A9F0000000000000000");
            ext.insert("queueId", field(request, "e"));
            ext.insert("queueOffset", "0");
            response
        }
        RequestCode::CONSUMER_SEND_MSG_BACK => {
            let fields = request.ext_fields.iter();
            s.send_backs
                .push(fields.map(|(k, v)| (k.to_owned(), v.to_owned())).collect());
            ok(request)
        }
        _ => RemotingCommand::not_supported_to(request),
    }
}

fn offsets(s: &mut BrokerState, request: &RemotingCommand) -> RemotingCommand {
    let mut response = ok(request);
    match request.request_code() {
        RequestCode::QUERY_CONSUMER_OFFSET => match s.offsets.get(&offset_key(request)) {
            Some(offset) => response.ext_fields.insert("offset", offset.to_string()),
            None => {
                return RemotingCommand::error_to(request, ResponseCode::QUERY_NOT_FOUND, "none")
            }
        },
        RequestCode::UPDATE_CONSUMER_OFFSET => {
            let offset = field(request, "commitOffset").parse().unwrap();
            s.offsets.insert(offset_key(request), offset);
            s.updates.insert(offset_key(request), offset);
        }
        code => {
            let queue_id = field(request, "queueId").parse().unwrap();
            let key = (field(request, "topic").to_owned(), queue_id);
            let max = s.records.get(&key).map_or(0, Vec::len);
            let offset = if code == RequestCode::GET_MAX_OFFSET {
                max
            } else {
                0
            };
            response.ext_fields.insert("offset", offset.to_string());
        }
    }
    response
}

fn pull(state: &State, request: &RemotingCommand) -> RemotingCommand {
    let mut s = state.lock().unwrap();
    s.pulls += 1;
    let (group, topic, queue_id) = offset_key(request);
    let offset: usize = field(request, "queueOffset").parse().unwrap();
    let max: usize = field(request, "maxMsgNums").parse().unwrap();
    let sys_flag: i32 = field(request, "sysFlag").parse().unwrap();
    if sys_flag & 1 != 0 {
        let commit = field(request, "commitOffset").parse().unwrap();
        s.offsets
            .insert((group.clone(), topic.clone(), queue_id), commit);
        s.pull_commits
            .insert((group, topic.clone(), queue_id), commit);
    }
    let records = s
        .records
        .get(&(topic, queue_id))
        .cloned()
        .unwrap_or_default();
    drop(s);
    let end = records.len().min(offset + max);
    let (code, body) = if offset < end {
        (ResponseCode::SUCCESS, records[offset..end].concat())
    } else {
        // Stands in for long polling so an idle client does not spin.
        thread::sleep(Duration::from_millis(30));
        (ResponseCode::PULL_NOT_FOUND, Vec::new())
    };
    let mut response = RemotingCommand::response_to(request, code).with_body(body);
    let ext = &mut response.ext_fields;
    ext.insert("suggestWhichBrokerId", "0");
    ext.insert("nextBeginOffset", end.max(offset).to_string());
    ext.insert("minOffset", "0");
    ext.insert("maxOffset", records.len().to_string());
    response
}

fn lock_batch(s: &mut BrokerState, request: &RemotingCommand) -> RemotingCommand {
    let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
    let client = body["clientId"].as_str().unwrap().to_owned();
    let mut granted = Vec::new();
    s.lock_requests += 1;
    for mq in body["mqSet"].as_array().unwrap() {
        let queue_id = i32::try_from(mq["queueId"].as_i64().unwrap()).unwrap();
        if request.request_code() == RequestCode::UNLOCK_BATCH_MQ {
            s.locks.remove(&queue_id);
            continue;
        }
        let holder = s.locks.entry(queue_id).or_insert_with(|| client.clone());
        if *holder == client {
            granted.push(mq.clone());
        }
    }
    let body = serde_json::json!({ "lockOKMQSet": granted });
    ok(request).with_body(serde_json::to_vec(&body).unwrap())
}

fn broker(state: State) -> FakeServer {
    FakeServer::start(move |mut conn: ServerConn| {
        while let Some(request) = conn.recv() {
            let response = answer(&state, &request);
            if !request.is_oneway() {
                conn.send(&response);
            }
            if let Some(reset) = due_reset(&state, &request) {
                conn.send(&reset);
            }
        }
    })
}

/// The broker → client reset request, once its trigger (a pull of queue 0 at offset 5 or
/// more by the group) is seen.
fn due_reset(state: &State, request: &RemotingCommand) -> Option<RemotingCommand> {
    if request.request_code() != RequestCode::PULL_MESSAGE {
        return None;
    }
    let mut s = state.lock().unwrap();
    let (group, _) = s.pending_reset.clone()?;
    let at_end = field(request, "queueId") == "0"
        && field(request, "queueOffset").parse::<i64>().unwrap() >= 5;
    if field(request, "consumerGroup") != group || !at_end {
        return None;
    }
    let (group, offset) = s.pending_reset.take()?;
    let header = comet_proto::headers::ResetOffsetRequestHeader {
        topic: TOPIC.into(),
        group,
        timestamp: 0,
        is_force: true,
        ..Default::default()
    };
    let body = comet_proto::body::ResetOffsetBody {
        offset_table: BTreeMap::from([(MessageQueue::new(TOPIC, "broker-a", 0), offset)]),
    };
    let mut reset = RemotingCommand::request(RequestCode::RESET_CONSUMER_CLIENT_OFFSET, 77)
        .with_header(&header)
        .with_body(body.encode());
    reset.set_oneway();
    Some(reset)
}

fn consumer_config(namesrv: &FakeServer, group: &str) -> ConsumerConfig {
    let mut client = ClientConfig::with_namesrv(namesrv.addr());
    client.client_ip = Some("127.0.0.1".into());
    let mut config = ConsumerConfig::new(group, client);
    config.consume_from_where = ConsumeFromWhere::FirstOffset;
    config.rebalance_interval = Duration::from_millis(300);
    config.suspend = Duration::from_millis(100);
    config.pull_delay_on_error = Duration::from_millis(50);
    config
}

/// How long a scripted conversation may take to reach a state.
const CONVERSATION_LIMIT: Duration = Duration::from_secs(10);

// Proves the push consumer conversation: it joins the group by heartbeat, takes every queue,
// starts at offset 0 (first offset, nothing committed), keeps only TagA messages (client-side
// re-filter), sends a failed message back with its commit-log offset, and commits each
// queue's offset past its last message at shutdown.
#[test]
fn push_consumer_consumes_filters_sends_back_and_commits() {
    let state = State::default();
    for queue_id in 0..QUEUES {
        store(&state, queue_id, 10, &["TagA", "TagB"]);
    }
    let broker = broker(state.clone());
    let namesrv = namesrv(broker.addr().to_owned());
    let received = Arc::new(Mutex::new(Vec::new()));
    let sink = received.clone();
    let listener = MessageListener::concurrently(move |messages, _queue| {
        let mut sink = sink.lock().unwrap();
        for message in messages {
            sink.push((
                message.tags().unwrap().to_owned(),
                String::from_utf8_lossy(&message.body).into_owned(),
            ));
        }
        if messages.iter().any(|m| &m.body[..] == b"q2-m4") {
            return ConsumeConcurrentlyStatus::ReconsumeLater;
        }
        ConsumeConcurrentlyStatus::ConsumeSuccess
    });
    let consumer = PushConsumer::new(
        PushConsumerConfig::new(consumer_config(&namesrv, "cg")),
        listener,
    )
    .unwrap();
    consumer.subscribe(TOPIC, "TagA").unwrap();
    consumer.start().unwrap();
    wait_until("20 TagA messages", CONVERSATION_LIMIT, || {
        received.lock().unwrap().len() >= 20
    });
    assert_eq!(consumer.assigned_queues().len(), QUEUES as usize);
    // The consumer's offsets pass the filtered TagB tails once every batch is consumed; its
    // pulls report them (commit flag), which shows when it got there.
    wait_until(
        "the consumer's offsets at every queue's end",
        CONVERSATION_LIMIT,
        || {
            let s = state.lock().unwrap();
            (0..QUEUES).all(|queue_id| {
                let key = ("cg".to_owned(), TOPIC.to_owned(), queue_id);
                s.pull_commits.get(&key) == Some(&10)
            })
        },
    );
    consumer.shutdown();
    let received = received.lock().unwrap().clone();
    assert_eq!(received.len(), 20, "{received:?}");
    assert!(received.iter().all(|(tags, _)| tags == "TagA"));
    let s = state.lock().unwrap();
    assert_eq!(s.send_backs.len(), 1);
    let send_back = &s.send_backs[0];
    assert_eq!(send_back["offset"], (2 * 1_000_000 + 4 * 1000).to_string());
    assert_eq!(send_back["group"], "cg");
    assert_eq!(send_back["maxReconsumeTimes"], "16");
    for queue_id in 0..QUEUES {
        let offset = s.updates.get(&("cg".into(), TOPIC.into(), queue_id));
        assert_eq!(offset, Some(&10), "queue {queue_id} committed at shutdown");
    }
    assert!(
        s.members.get("cg").is_none_or(BTreeSet::is_empty),
        "unregistered at shutdown"
    );
}

// Proves two members of one group split the queues evenly and together see every message
// once, and that the survivor takes over all queues after the other leaves.
#[test]
fn two_members_split_queues_and_take_over() {
    let state = State::default();
    for queue_id in 0..QUEUES {
        store(&state, queue_id, 5, &["TagA"]);
    }
    let broker = broker(state.clone());
    let namesrv = namesrv(broker.addr().to_owned());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let start = |seen: Arc<Mutex<Vec<String>>>| {
        let listener = MessageListener::concurrently(move |messages, _| {
            let mut seen = seen.lock().unwrap();
            seen.extend(
                messages
                    .iter()
                    .map(|m| String::from_utf8_lossy(&m.body).into_owned()),
            );
            ConsumeConcurrentlyStatus::ConsumeSuccess
        });
        let consumer = PushConsumer::new(
            PushConsumerConfig::new(consumer_config(&namesrv, "pair")),
            listener,
        )
        .unwrap();
        consumer.subscribe(TOPIC, "*").unwrap();
        consumer.start().unwrap();
        consumer
    };
    let first = start(seen.clone());
    let second = start(seen.clone());
    wait_until("an even split", CONVERSATION_LIMIT, || {
        first.assigned_queues().len() == 2 && second.assigned_queues().len() == 2
    });
    wait_until("every message", CONVERSATION_LIMIT, || {
        seen.lock().unwrap().len() >= 20
    });
    second.shutdown();
    wait_until("take-over", CONVERSATION_LIMIT, || {
        first.assigned_queues().len() == QUEUES as usize
    });
    first.shutdown();
    let seen = seen.lock().unwrap();
    let distinct: BTreeSet<&String> = seen.iter().collect();
    assert_eq!(distinct.len(), 20);
}

// Proves the orderly listener locks queues before consuming and sees each queue's messages
// in offset order, retrying a suspended batch in place.
#[test]
fn orderly_consumer_keeps_queue_order() {
    let state = State::default();
    for queue_id in 0..QUEUES {
        store(&state, queue_id, 8, &["TagA"]);
    }
    let broker = broker(state.clone());
    let namesrv = namesrv(broker.addr().to_owned());
    let per_queue: Arc<Mutex<HashMap<i32, Vec<i64>>>> = Arc::default();
    let sink = per_queue.clone();
    let suspended_once = Arc::new(Mutex::new(false));
    let listener = MessageListener::orderly(move |messages, queue| {
        let mut suspended = suspended_once.lock().unwrap();
        if queue.queue_id == 1 && messages[0].queue_offset == 3 && !*suspended {
            *suspended = true;
            return ConsumeOrderlyStatus::SuspendCurrentQueueAMoment;
        }
        let mut sink = sink.lock().unwrap();
        sink.entry(queue.queue_id)
            .or_default()
            .extend(messages.iter().map(|m| m.queue_offset));
        ConsumeOrderlyStatus::Success
    });
    let mut config = PushConsumerConfig::new(consumer_config(&namesrv, "ordered"));
    config.suspend_current_queue_time = Duration::from_millis(50);
    let consumer = PushConsumer::new(config, listener).unwrap();
    consumer.subscribe(TOPIC, "*").unwrap();
    consumer.start().unwrap();
    wait_until("32 ordered messages", CONVERSATION_LIMIT, || {
        per_queue
            .lock()
            .unwrap()
            .values()
            .map(Vec::len)
            .sum::<usize>()
            >= 32
    });
    consumer.shutdown();
    for (queue_id, offsets) in per_queue.lock().unwrap().iter() {
        assert_eq!(offsets, &(0..8).collect::<Vec<i64>>(), "queue {queue_id}");
    }
    assert!(state.lock().unwrap().lock_requests >= 1);
}

// Proves that an orderly member whose new queues are still locked by their previous owner
// retries soon (as the 5.x client does) instead of waiting out its rebalance interval: the
// joining member's interval is 60 s, yet it holds its two queues within the 10 s wait.
#[test]
fn orderly_member_retries_locked_queues_soon() {
    let state = State::default();
    let broker = broker(state.clone());
    let namesrv = namesrv(broker.addr().to_owned());
    let start = |rebalance_interval: Duration| {
        let listener = MessageListener::orderly(|_, _| ConsumeOrderlyStatus::Success);
        let mut config = consumer_config(&namesrv, "locked");
        config.rebalance_interval = rebalance_interval;
        let consumer = PushConsumer::new(PushConsumerConfig::new(config), listener).unwrap();
        consumer.subscribe(TOPIC, "*").unwrap();
        consumer.start().unwrap();
        consumer
    };
    let first = start(Duration::from_secs(2));
    wait_until(
        "the first member to lock every queue",
        CONVERSATION_LIMIT,
        || first.assigned_queues().len() == QUEUES as usize,
    );
    // The second member's first rebalance finds its two queues locked by the first member,
    // which gives them up only at its own next rebalance (up to 2 s later).
    let second = start(Duration::from_secs(60));
    wait_until("a 2 + 2 split of locked queues", CONVERSATION_LIMIT, || {
        first.assigned_queues().len() == 2 && second.assigned_queues().len() == 2
    });
    second.shutdown();
    first.shutdown();
}

// Proves the lite pull consumer: assigned queues are polled, manual commit persists the
// polled position, and seek moves a queue back.
#[test]
fn lite_pull_poll_commit_seek() {
    let state = State::default();
    store(&state, 0, 6, &["TagA"]);
    let broker = broker(state.clone());
    let namesrv = namesrv(broker.addr().to_owned());
    let mut config = LitePullConfig::new(consumer_config(&namesrv, "lite"));
    config.auto_commit = false;
    let consumer = LitePullConsumer::new(config).unwrap();
    let queue = MessageQueue::new(TOPIC, "broker-a", 0);
    consumer.assign(vec![queue.clone()]);
    consumer.start().unwrap();
    let offsets = poll_offsets(&consumer, 6);
    assert_eq!(offsets, (0..6).collect::<Vec<i64>>());
    consumer.commit().unwrap();
    wait_until("the commit", CONVERSATION_LIMIT, || {
        state
            .lock()
            .unwrap()
            .offsets
            .get(&("lite".into(), TOPIC.into(), 0))
            == Some(&6)
    });
    consumer.seek(&queue, 2).unwrap();
    let again = poll_offsets(&consumer, 4);
    assert_eq!(again, vec![2, 3, 4, 5]);
    assert!(consumer.seek(&queue, 99).is_err());
    consumer.shutdown();
}

// Proves that `assign` on a started lite pull consumer takes effect before it returns, as
// Java's does: a `seek` right after it succeeds, and polling then starts at the seek offset.
#[test]
fn lite_pull_seek_right_after_assign() {
    let state = State::default();
    store(&state, 0, 6, &["TagA"]);
    let broker = broker(state.clone());
    let namesrv = namesrv(broker.addr().to_owned());
    let mut config = LitePullConfig::new(consumer_config(&namesrv, "assign_seek"));
    config.auto_commit = false;
    let consumer = LitePullConsumer::new(config).unwrap();
    consumer.start().unwrap();
    let queue = MessageQueue::new(TOPIC, "broker-a", 0);
    consumer.assign(vec![queue.clone()]);
    assert_eq!(consumer.assignment(), vec![queue.clone()]);
    consumer.seek(&queue, 3).unwrap();
    let offsets = poll_offsets(&consumer, 3);
    // Pulling may have started at offset 0 before the seek: the last three are 3, 4, 5.
    assert!(offsets.ends_with(&[3, 4, 5]), "{offsets:?}");
    consumer.shutdown();
}

// Proves broadcasting: two members of one group each receive every message, nothing is
// committed on the broker, and each keeps its offsets in its own local file.
#[test]
fn broadcasting_delivers_to_every_member() {
    let state = State::default();
    for queue_id in 0..QUEUES {
        store(&state, queue_id, 3, &["TagA"]);
    }
    let broker = broker(state.clone());
    let namesrv = namesrv(broker.addr().to_owned());
    let directory = tempfile::tempdir().unwrap();
    let start = |instance: &str| {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let listener = MessageListener::concurrently(move |messages, _| {
            sink.lock()
                .unwrap()
                .extend(messages.iter().map(|m| m.queue_offset));
            ConsumeConcurrentlyStatus::ConsumeSuccess
        });
        let mut config = consumer_config(&namesrv, "everyone");
        config.message_model = comet_client::MessageModel::Broadcasting;
        config.local_offset_dir = directory.path().to_owned();
        config.client.instance_name = instance.to_owned();
        let consumer = PushConsumer::new(PushConsumerConfig::new(config), listener).unwrap();
        consumer.subscribe(TOPIC, "*").unwrap();
        consumer.start().unwrap();
        (consumer, seen)
    };
    let (first, first_seen) = start("first");
    let (second, second_seen) = start("second");
    wait_until("both members to see all 12", CONVERSATION_LIMIT, || {
        first_seen.lock().unwrap().len() >= 12 && second_seen.lock().unwrap().len() >= 12
    });
    first.shutdown();
    second.shutdown();
    assert!(
        state.lock().unwrap().offsets.is_empty(),
        "no broker offsets"
    );
    let files: Vec<_> = walk(directory.path())
        .into_iter()
        .filter(|p| p.ends_with("offsets.json"))
        .collect();
    assert_eq!(files.len(), 2, "{files:?}");
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        assert_eq!(
            text.matches("\"offset\":3").count(),
            QUEUES as usize,
            "{text}"
        );
    }
}

fn walk(path: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(path).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else {
            found.push(path);
        }
    }
    found
}

// Proves the broker's RESET_CONSUMER_CLIENT_OFFSET moves a consuming queue back: after
// consuming offsets 0-4 of queue 0, a reset to 2 redelivers 2, 3 and 4.
#[test]
fn broker_reset_moves_the_queue_back() {
    let state = State::default();
    store(&state, 0, 5, &["TagA"]);
    state.lock().unwrap().pending_reset = Some(("resetme".into(), 2));
    let broker = broker(state.clone());
    let namesrv = namesrv(broker.addr().to_owned());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let listener = MessageListener::concurrently(move |messages, _| {
        sink.lock()
            .unwrap()
            .extend(messages.iter().map(|m| m.queue_offset));
        ConsumeConcurrentlyStatus::ConsumeSuccess
    });
    let config = PushConsumerConfig::new(consumer_config(&namesrv, "resetme"));
    let consumer = PushConsumer::new(config, listener).unwrap();
    consumer.subscribe(TOPIC, "*").unwrap();
    consumer.start().unwrap();
    wait_until("5 messages and 3 again", CONVERSATION_LIMIT, || {
        seen.lock().unwrap().len() >= 8
    });
    consumer.shutdown();
    let mut seen = seen.lock().unwrap().clone();
    seen.sort_unstable();
    assert_eq!(seen, vec![0, 1, 2, 2, 3, 3, 4, 4]);
}

// Proves the send-back fallback of
// docs/protocol.md#consumer-send-back: when the broker refuses
// CONSUMER_SEND_MSG_BACK, the failed message is sent to %RETRY%<group> with the original
// topic and id, reconsume count 1 (header j), max reconsume times (header l) and delay 3.
#[test]
fn refused_send_back_falls_back_to_the_retry_topic() {
    let state = State::default();
    store(&state, 0, 1, &["TagA"]);
    state.lock().unwrap().refuse_send_back = true;
    let broker = broker(state.clone());
    let namesrv = namesrv(broker.addr().to_owned());
    let listener = MessageListener::concurrently(|_, _| ConsumeConcurrentlyStatus::ReconsumeLater);
    let config = PushConsumerConfig::new(consumer_config(&namesrv, "fallback"));
    let consumer = PushConsumer::new(config, listener).unwrap();
    consumer.subscribe(TOPIC, "*").unwrap();
    consumer.start().unwrap();
    wait_until("the retry send", CONVERSATION_LIMIT, || {
        !state.lock().unwrap().sends.is_empty()
    });
    consumer.shutdown();
    let send = state.lock().unwrap().sends[0].clone();
    assert_eq!(field(&send, "b"), "%RETRY%fallback");
    assert_eq!(field(&send, "j"), "1");
    assert_eq!(field(&send, "l"), "16");
    let properties = Properties::decode(field(&send, "i"));
    assert_eq!(properties.get(names::RETRY_TOPIC), Some(TOPIC));
    assert_eq!(properties.get(names::DELAY), Some("3"));
    assert_eq!(properties.get(names::UNIQ_KEY), Some("KEY-0-0"));
    assert!(properties.get(names::ORIGIN_MESSAGE_ID).is_some());
    assert!(
        properties.get(names::RECONSUME_TIME).is_none(),
        "moved to header j"
    );
    assert_eq!(&send.body[..], b"q0-m0");
}

/// Polls `consumer` until `count` messages arrived or 10 s passed; their queue offsets.
fn poll_offsets(consumer: &LitePullConsumer, count: usize) -> Vec<i64> {
    let mut offsets = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while offsets.len() < count && Instant::now() < deadline {
        offsets.extend(
            consumer
                .poll(Duration::from_millis(200))
                .iter()
                .map(|m| m.queue_offset),
        );
    }
    offsets
}

// Proves the blocking consumers refuse a runtime of no worker thread (or too many) with a
// typed error, before any traffic.
#[test]
fn pull_thread_nums_out_of_range_is_refused() {
    let namesrv = namesrv("127.0.0.1:1".into());
    for threads in [0, 65] {
        let mut config = consumer_config(&namesrv, "cg_threads");
        config.pull_thread_nums = threads;
        let listener =
            MessageListener::concurrently(|_, _| ConsumeConcurrentlyStatus::ConsumeSuccess);
        let push = PushConsumer::new(PushConsumerConfig::new(config.clone()), listener);
        assert!(
            matches!(push, Err(comet_client::ClientError::Invalid(_))),
            "{threads} threads"
        );
        let lite = LitePullConsumer::new(LitePullConfig::new(config));
        assert!(
            matches!(lite, Err(comet_client::ClientError::Invalid(_))),
            "{threads} threads"
        );
    }
}
