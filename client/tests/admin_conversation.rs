//! The admin API against scripted peers on 127.0.0.1: a name server answering cluster info,
//! topic list and routes, and a broker answering topic creation, runtime info and consume
//! stats in fastjson's forms (bare numeric and object map keys). Test doubles for the
//! conversation, not a broker.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use comet_client::{Admin, ClientConfig, MessageQueue, TopicSpec};
use comet_proto::body::{BrokerData, JsonBody, QueueData, TopicRouteData};
use comet_proto::{RemotingCommand, RequestCode, ResponseCode};
use common::{FakeServer, ServerConn};

fn namesrv(broker_addr: String) -> FakeServer {
    FakeServer::start(move |mut conn: ServerConn| {
        while let Some(request) = conn.recv() {
            let ok = RemotingCommand::response_to(&request, ResponseCode::SUCCESS);
            let response = match request.request_code() {
                RequestCode::GET_BROKER_CLUSTER_INFO => ok.with_body(cluster_info(&broker_addr)),
                RequestCode::GET_ALL_TOPIC_LIST_FROM_NAMESERVER => {
                    ok.with_body("{\"topicList\":[\"TopicTest\",\"TBW102\"]}")
                }
                RequestCode::GET_ROUTEINFO_BY_TOPIC => ok.with_body(route(&broker_addr).encode()),
                _ => RemotingCommand::not_supported_to(&request),
            };
            conn.send(&response);
        }
    })
}

/// fastjson's default flavour: bare numeric keys (docs/protocol.md#fastjson-map-keys).
fn cluster_info(broker_addr: &str) -> String {
    let table = r#"{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"ADDR"},"#;
    let rest = r#""brokerName":"broker-a","cluster":"DefaultCluster"}},"#;
    let clusters = r#""clusterAddrTable":{"DefaultCluster":["broker-a"]}}"#;
    format!("{}{rest}{clusters}", table.replace("ADDR", broker_addr))
}

/// fastjson writes MessageQueue-keyed maps with the object itself as the key
/// (docs/protocol.md#fastjson-map-keys).
const CONSUME_STATS: &str = concat!(
    r#"{"consumeTps":1.5,"offsetTable":{"#,
    r#"{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}:"#,
    r#"{"brokerOffset":10,"consumerOffset":4,"lastTimestamp":0,"pullOffset":6},"#,
    r#"{"brokerName":"broker-a","queueId":1,"topic":"TopicTest"}:"#,
    r#"{"brokerOffset":3,"consumerOffset":3,"lastTimestamp":0,"pullOffset":3}}}"#,
);

fn route(broker_addr: &str) -> TopicRouteData {
    TopicRouteData {
        queue_datas: vec![QueueData {
            broker_name: "broker-a".into(),
            read_queue_nums: 2,
            write_queue_nums: 2,
            perm: 6,
            topic_sys_flag: 0,
        }],
        broker_datas: vec![BrokerData {
            cluster: "DefaultCluster".into(),
            broker_name: "broker-a".into(),
            broker_addrs: BTreeMap::from([(0, broker_addr.to_owned())]),
            ..BrokerData::default()
        }],
        ..TopicRouteData::default()
    }
}

fn broker(created: Arc<Mutex<Vec<RemotingCommand>>>) -> FakeServer {
    FakeServer::start(move |mut conn: ServerConn| {
        while let Some(request) = conn.recv() {
            let ok = RemotingCommand::response_to(&request, ResponseCode::SUCCESS);
            let response = match request.request_code() {
                RequestCode::UPDATE_AND_CREATE_TOPIC => {
                    created.lock().unwrap().push(request.clone());
                    ok
                }
                RequestCode::GET_BROKER_RUNTIME_INFO => {
                    ok.with_body(r#"{"table":{"brokerVersionDesc":"V5_3_3","putTps":"0.0"}}"#)
                }
                RequestCode::GET_CONSUME_STATS => ok.with_body(CONSUME_STATS),
                _ => RemotingCommand::not_supported_to(&request),
            };
            conn.send(&response);
        }
    })
}

// Proves the admin calls parse fastjson's bodies (bare numeric keys in cluster info, object
// keys in consume stats), create a topic on every master of a cluster with the Java header
// keys, and compute lag per group.
#[test]
fn admin_reads_cluster_topics_stats_and_creates_topics() {
    let created = Arc::new(Mutex::new(Vec::new()));
    let broker = broker(created.clone());
    let namesrv = namesrv(broker.addr().to_owned());
    let admin = Admin::new(ClientConfig::with_namesrv(namesrv.addr())).unwrap();

    let cluster = admin.cluster_info().unwrap();
    let broker_a = &cluster.broker_addr_table["broker-a"];
    assert_eq!(broker_a.master_addr(), Some(broker.addr()));
    assert_eq!(
        admin.cluster_masters(Some("DefaultCluster")).unwrap(),
        [broker.addr()]
    );
    assert!(admin
        .list_topics()
        .unwrap()
        .topic_list
        .contains("TopicTest"));
    assert_eq!(admin.topic_route("TopicTest").unwrap().queue_datas.len(), 1);

    admin
        .create_topic("DefaultCluster", &TopicSpec::new("NewTopic", 8))
        .unwrap();
    let request = created.lock().unwrap()[0].clone();
    let ext = &request.ext_fields;
    assert_eq!(ext.get("topic"), Some("NewTopic"));
    assert_eq!(ext.get("readQueueNums"), Some("8"));
    assert_eq!(ext.get("perm"), Some("6"));
    assert_eq!(ext.get("topicFilterType"), Some("SINGLE_TAG"));
    assert!(admin
        .create_topic("NoSuchCluster", &TopicSpec::new("X", 1))
        .is_err());

    let info = admin.broker_runtime_info(broker.addr()).unwrap();
    assert_eq!(info["brokerVersionDesc"], "V5_3_3");
    let stats = admin.consume_stats("cg", "TopicTest").unwrap();
    let queue0 = &stats.offset_table[&MessageQueue::new("TopicTest", "broker-a", 0)];
    assert_eq!((queue0.broker_offset, queue0.consumer_offset), (10, 4));
    assert_eq!(admin.consumer_lag("cg", "TopicTest").unwrap(), 6);
    admin.shutdown();
}

// Proves name-server fail-over: with a dead address listed next to a live one, every call
// succeeds whichever address the client starts with.
#[test]
fn name_server_fail_over() {
    let live = namesrv("127.0.0.1:1".to_owned());
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_addr = dead.local_addr().unwrap().to_string();
    drop(dead);
    for _ in 0..4 {
        let list = format!("{dead_addr};{}", live.addr());
        let admin = Admin::new(ClientConfig::with_namesrv(&list)).unwrap();
        for _ in 0..3 {
            assert!(admin
                .list_topics()
                .unwrap()
                .topic_list
                .contains("TopicTest"));
        }
        admin.shutdown();
    }
}
