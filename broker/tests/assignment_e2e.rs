//! Server-side assignment end to end: QUERY_ASSIGNMENT and SET_MESSAGE_REQUEST_MODE against
//! a real broker (two shards, with its embedded name server), with consumers registered by
//! HEART_BEAT on their own connections, as a Java 5.x client with `setClientRebalance(false)`
//! asks (docs/protocol.md#server-side-assignment); and the refusal of what the proxy and the
//! client may send that Comet does not build.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use comet_broker::config::BrokerConfig;
use comet_broker::register::register_request;
use comet_proto::body::{
    ConsumeType, ConsumerData, HeartbeatData, JsonBody, MessageModel, MessageRequestMode,
    QueryAssignmentRequestBody, QueryAssignmentResponseBody, SetMessageRequestModeRequestBody,
    SubscriptionData, TopicConfig, TopicConfigSerializeWrapper,
};
use comet_proto::{RemotingCommand, RequestCode, ResponseCode};
use comet_test_support::poll_until;
use common::{create_topic, Broker, Client, TempDir};

const CORES: usize = 2;
const GROUP: &str = "asg_cg";
const WAIT: Duration = Duration::from_secs(20);

/// A consumer of [`GROUP`] registered on its own connection (the registration lives as long
/// as the connection).
struct Consumer {
    client: Client,
    id: String,
}

impl Consumer {
    fn register(broker: &Broker, id: &str, topic: &str) -> Consumer {
        let mut client = broker.client();
        let data = HeartbeatData {
            client_id: id.into(),
            consumer_data_set: vec![ConsumerData {
                group_name: GROUP.into(),
                consume_type: ConsumeType::CONSUME_PASSIVELY,
                message_model: MessageModel::CLUSTERING,
                subscription_data_set: vec![SubscriptionData {
                    topic: topic.into(),
                    sub_string: "*".into(),
                    ..SubscriptionData::default()
                }],
                ..ConsumerData::default()
            }],
            ..HeartbeatData::default()
        };
        let request = RemotingCommand::request(RequestCode::HEART_BEAT, 0).with_body(data.encode());
        client.call_ok(request);
        Consumer {
            client,
            id: id.into(),
        }
    }

    /// QUERY_ASSIGNMENT for `topic` under `strategy`: `None` when the answer carries no
    /// assignment, else each queue as (queue id, mode).
    fn query(
        &mut self,
        topic: &str,
        strategy: &str,
    ) -> Option<BTreeSet<(i32, MessageRequestMode)>> {
        self.query_brokers(topic, strategy).map(|assigned| {
            assigned
                .into_iter()
                .map(|(_, queue_id, mode)| (queue_id, mode))
                .collect()
        })
    }

    /// [`Consumer::query`] with each queue's broker name.
    fn query_brokers(
        &mut self,
        topic: &str,
        strategy: &str,
    ) -> Option<BTreeSet<(String, i32, MessageRequestMode)>> {
        let body = QueryAssignmentRequestBody {
            topic: topic.into(),
            consumer_group: GROUP.into(),
            client_id: self.id.clone(),
            strategy_name: strategy.into(),
            message_model: Some(MessageModel::CLUSTERING),
        };
        let request =
            RemotingCommand::request(RequestCode::QUERY_ASSIGNMENT, 0).with_body(body.encode());
        let response = self.client.call_ok(request);
        let answer = QueryAssignmentResponseBody::decode(&response.body).unwrap();
        answer.message_queue_assignments.map(|assignments| {
            assignments
                .into_iter()
                .map(|assignment| {
                    let queue = assignment
                        .message_queue
                        .expect("an assignment names a queue");
                    assert_eq!(queue.topic, topic);
                    (queue.broker_name, queue.queue_id, assignment.mode)
                })
                .collect()
        })
    }
}

fn set_mode(
    client: &mut Client,
    topic: &str,
    mode: MessageRequestMode,
    pop_share_queue_num: i32,
) -> RemotingCommand {
    let body = SetMessageRequestModeRequestBody {
        topic: topic.into(),
        consumer_group: GROUP.into(),
        mode,
        pop_share_queue_num,
    };
    client.call(
        RemotingCommand::request(RequestCode::SET_MESSAGE_REQUEST_MODE, 0).with_body(body.encode()),
    )
}

fn ids(queues: &[i32], mode: MessageRequestMode) -> BTreeSet<(i32, MessageRequestMode)> {
    queues.iter().map(|id| (*id, mode)).collect()
}

use MessageRequestMode::{POP, PULL};

// Proves the default: PULL, the topic's queues split by AVG (and AVG_BY_CIRCLE) across the
// group's two consumers, disjoint and complete; no assignment for an unknown strategy or
// topic, and none for a client of a group with no consumer.
#[test]
fn default_pull_split_across_two_clients() {
    let dir = TempDir::new("asg-pull");
    let broker = Broker::start(dir.path(), CORES, &[]);
    let mut admin = broker.client();
    create_topic(&mut admin, "AsgPull", 4);
    let mut first = Consumer::register(&broker, "10.0.0.1@a", "AsgPull");
    let mut second = Consumer::register(&broker, "10.0.0.1@b", "AsgPull");

    let mut answers = (None, None);
    let split = poll_until(WAIT, || {
        answers = (
            first.query("AsgPull", "AVG"),
            second.query("AsgPull", "AVG"),
        );
        answers == (Some(ids(&[0, 1], PULL)), Some(ids(&[2, 3], PULL)))
    });
    assert!(split, "AVG split: {answers:?}");
    assert_eq!(
        first.query("AsgPull", "AVG_BY_CIRCLE"),
        Some(ids(&[0, 2], PULL))
    );
    assert_eq!(
        second.query("AsgPull", "AVG_BY_CIRCLE"),
        Some(ids(&[1, 3], PULL))
    );
    assert_eq!(first.query("AsgPull", "CONSISTENT_HASH"), None);
    assert_eq!(first.query("NoSuchTopic", "AVG"), None);

    // A client id the group does not hold gets an empty set: it must drop its queues.
    let mut stranger = Consumer {
        client: broker.client(),
        id: "10.0.0.9@z".into(),
    };
    assert_eq!(stranger.query("AsgPull", "AVG"), Some(BTreeSet::new()));
}

// Proves SET_MESSAGE_REQUEST_MODE: POP with a share count <= 0 gives every consumer the
// broker's queues as queue id -1; POP with share 1 and three consumers gives each its own
// share plus the next consumer's; a retry topic is refused NO_PERMISSION and an unknown
// topic TOPIC_NOT_EXIST; the mode survives a broker restart.
#[test]
fn pop_mode_sharing_refusals_and_restart() {
    let dir = TempDir::new("asg-pop");
    let mut broker = Broker::start(dir.path(), CORES, &[]);
    let mut admin = broker.client();
    create_topic(&mut admin, "AsgPop", 4);
    let mut consumers: Vec<Consumer> = ["10.0.0.1@a", "10.0.0.1@b", "10.0.0.1@c"]
        .iter()
        .map(|id| Consumer::register(&broker, id, "AsgPop"))
        .collect();
    let every_queue = Some(ids(&[-1], POP));

    let response = set_mode(&mut admin, "AsgPop", POP, -1);
    assert_eq!(
        response.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        response.remark
    );
    for consumer in &mut consumers {
        assert_eq!(
            consumer.query("AsgPop", "AVG"),
            every_queue,
            "{}",
            consumer.id
        );
    }

    // AVG over 4 queues and 3 consumers: a [0, 1], b [2], c [3]; each adds the next one's.
    admin.call_ok(
        RemotingCommand::request(RequestCode::SET_MESSAGE_REQUEST_MODE, 0).with_body(
            SetMessageRequestModeRequestBody {
                topic: "AsgPop".into(),
                consumer_group: GROUP.into(),
                mode: POP,
                pop_share_queue_num: 1,
            }
            .encode(),
        ),
    );
    let shared: Vec<_> = consumers
        .iter_mut()
        .map(|consumer| consumer.query("AsgPop", "AVG"))
        .collect();
    assert_eq!(
        shared,
        vec![
            Some(ids(&[0, 1, 2], POP)),
            Some(ids(&[2, 3], POP)),
            Some(ids(&[0, 1, 3], POP)),
        ]
    );

    let refused = set_mode(&mut admin, &format!("%RETRY%{GROUP}"), POP, 0);
    assert_eq!(refused.response_code(), ResponseCode::NO_PERMISSION);
    assert_eq!(
        refused.remark.as_deref(),
        Some("retry topic is not allowed to set mode")
    );
    let unknown = set_mode(&mut admin, "NoSuchTopic", POP, 0);
    assert_eq!(unknown.response_code(), ResponseCode::TOPIC_NOT_EXIST);

    // Back to POP without sharing, then a restart: the table is read back from the file.
    let response = set_mode(&mut admin, "AsgPop", POP, 0);
    assert_eq!(response.response_code(), ResponseCode::SUCCESS);
    let file = dir.path().join("config/messageRequestMode.json");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.contains(r#""mode":"POP","popShareQueueNum":0"#),
        "{text}"
    );
    drop(consumers);
    drop(admin);
    broker.stop();
    broker.restart(CORES);
    let mut consumer = Consumer::register(&broker, "10.0.0.1@a", "AsgPop");
    let mut answer = None;
    let restored = poll_until(WAIT, || {
        answer = consumer.query("AsgPop", "AVG");
        answer == every_queue
    });
    assert!(restored, "after the restart: {answer:?}");
}

// Proves the broker defaults: with defaultMessageRequestMode=POP and
// defaultPopShareQueueNum=-1, a (topic, group) nobody set is POP on every queue, while the
// group's retry topic stays PULL and is split as usual.
#[test]
fn default_pop_keeps_retry_topics_pull() {
    let dir = TempDir::new("asg-default-pop");
    let broker = Broker::start(
        dir.path(),
        CORES,
        &[
            "-o",
            "defaultMessageRequestMode=POP",
            "-o",
            "defaultPopShareQueueNum=-1",
        ],
    );
    let mut admin = broker.client();
    create_topic(&mut admin, "AsgDefault", 2);
    let retry = format!("%RETRY%{GROUP}");
    create_topic(&mut admin, &retry, 1);
    let mut consumer = Consumer::register(&broker, "10.0.0.1@a", "AsgDefault");
    assert_eq!(consumer.query("AsgDefault", "AVG"), Some(ids(&[-1], POP)));
    assert_eq!(consumer.query(&retry, "AVG"), Some(ids(&[0], PULL)));
}

// Proves the queue set comes from the name servers' route: once a second broker
// (`broker-x`, registered by hand on the embedded name server) serves the topic too, the
// broker splits the queues of both brokers, in Java's queue order.
#[test]
fn queues_of_every_broker_in_the_route() {
    let dir = TempDir::new("asg-route");
    let broker = Broker::start(dir.path(), CORES, &[]);
    let mut admin = broker.client();
    create_topic(&mut admin, "AsgRoute", 2);
    // The name server forgets a broker whose connection closes: this one stays open.
    let mut other = broker.namesrv_client();
    let config = BrokerConfig {
        broker_name: "broker-x".into(),
        listen_port: 1,
        ..BrokerConfig::default()
    };
    let mut topics = TopicConfigSerializeWrapper::default();
    let mut topic = TopicConfig::new("AsgRoute");
    topic.read_queue_nums = 2;
    topic.write_queue_nums = 2;
    topics.topic_config_table.insert("AsgRoute".into(), topic);
    other.call_ok(register_request(&config, topics, 0));

    let mut first = Consumer::register(&broker, "10.0.0.1@a", "AsgRoute");
    let mut second = Consumer::register(&broker, "10.0.0.1@b", "AsgRoute");
    let queue = |broker: &str, id: i32| (broker.to_owned(), id, PULL);
    let mut answers = (None, None);
    let split = poll_until(WAIT, || {
        answers = (
            first.query_brokers("AsgRoute", "AVG"),
            second.query_brokers("AsgRoute", "AVG"),
        );
        answers
            == (
                Some([queue("broker-a", 0), queue("broker-a", 1)].into()),
                Some([queue("broker-x", 0), queue("broker-x", 1)].into()),
            )
    });
    assert!(split, "split over both brokers: {answers:?}");
}

// Proves the requests Apache RocketMQ's proxy and the 5.x Java client may send that Comet
// does not build (ACL 2.0 look-ups, 5.5 lite topics, the export of a RocksDB pop store) are
// refused REQUEST_CODE_NOT_SUPPORTED with Java's remark, never answered as done
// (docs/protocol.md#requests-from-apache-rocketmqs-proxy).
#[test]
fn requests_comet_does_not_build_are_refused() {
    let dir = TempDir::new("asg-unbuilt");
    let broker = Broker::start(dir.path(), CORES, &[]);
    let mut client = broker.client();
    for code in [
        RequestCode::AUTH_GET_USER,
        RequestCode::AUTH_GET_ACL,
        RequestCode::POP_LITE_MESSAGE,
        RequestCode::LITE_SUBSCRIPTION_CTL,
        RequestCode::ACK_LITE_MESSAGE,
        RequestCode::GET_BROKER_LITE_INFO,
        RequestCode::GET_PARENT_TOPIC_INFO,
        RequestCode::GET_LITE_TOPIC_INFO,
        RequestCode::GET_LITE_CLIENT_INFO,
        RequestCode::GET_LITE_GROUP_INFO,
        RequestCode::TRIGGER_LITE_DISPATCH,
        RequestCode::POP_ROLLBACK,
    ] {
        let response = client.call(RemotingCommand::request(code, 0));
        assert_eq!(
            response.response_code(),
            ResponseCode::REQUEST_CODE_NOT_SUPPORTED,
            "{code:?}"
        );
        let remark = format!(" request type {} not supported", code.value());
        assert_eq!(
            response.remark.as_deref(),
            Some(remark.as_str()),
            "{code:?}"
        );
    }
}
