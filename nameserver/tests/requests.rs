//! Request-level tests of the name server over real sockets on 127.0.0.1, through the codec.

mod common;

use std::time::Duration;

use comet_proto::body::{ClusterInfo, DataVersion, JsonBody, KVTable, TopicList, TopicRouteData};
use comet_proto::{RemotingCommand, RequestCode, ResponseCode};
use comet_test_support::poll_until;
use common::{route_request, Broker, Client, TestNameServer};

fn request(code: RequestCode, fields: &[(&str, &str)]) -> RemotingCommand {
    let mut request = RemotingCommand::request(code, 0);
    for (key, value) in fields {
        request.ext_fields.insert(*key, *value);
    }
    request
}

fn route(client: &mut Client, topic: &str) -> Option<TopicRouteData> {
    let response = client.call(route_request(topic));
    match response.response_code() {
        ResponseCode::SUCCESS => Some(TopicRouteData::decode(&response.body).unwrap()),
        ResponseCode::TOPIC_NOT_EXIST => None,
        other => panic!("unexpected {other}"),
    }
}

// Proves a registered topic's route is exactly the TopicRouteData JSON Java clients parse
// (sorted keys, quoted broker-id keys, no nulls), that an unknown topic is TOPIC_NOT_EXIST, and
// that a master's registration gets an empty master address back.
#[test]
fn register_then_route_has_java_shape() {
    let server = TestNameServer::start();
    let mut client = server.client();
    let broker = Broker::master("broker-a", "127.0.0.1:10911", &["TopicTest"]);
    let registered = client.call(broker.register_request());
    assert_eq!(registered.response_code(), ResponseCode::SUCCESS);
    assert_eq!(registered.ext_fields.get("masterAddr"), None);
    let response = client.call(route_request("TopicTest"));
    assert_eq!(response.response_code(), ResponseCode::SUCCESS);
    let expected = concat!(
        r#"{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10911"},"brokerName":"broker-a","#,
        r#""cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},"#,
        r#""queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"#,
        r#""writeQueueNums":4}]}"#
    );
    assert_eq!(std::str::from_utf8(&response.body).unwrap(), expected);
    let missing = client.call(route_request("NoSuchTopic"));
    assert_eq!(missing.response_code(), ResponseCode::TOPIC_NOT_EXIST);
    assert!(missing.remark.unwrap().contains("NoSuchTopic"));
}

// Proves a slave registration returns the master's addresses, a route lists both members, and
// when the master unregisters the slave stays readable in the route.
#[test]
fn slave_gets_master_and_survives_it() {
    let server = TestNameServer::start();
    let mut client = server.client();
    let master = Broker::master("broker-a", "127.0.0.1:10911", &["TopicTest"]);
    let slave = Broker {
        id: 1,
        addr: "127.0.0.2:10911".to_owned(),
        ..master.clone()
    };
    client.call(master.register_request());
    let answer = client.call(slave.register_request());
    assert_eq!(answer.ext_fields.get("masterAddr"), Some("127.0.0.1:10911"));
    assert_eq!(
        answer.ext_fields.get("haServerAddr"),
        Some("127.0.0.1:10912")
    );
    let both = route(&mut client, "TopicTest").unwrap();
    assert_eq!(both.broker_datas[0].broker_addrs.len(), 2);
    let unregister = request(
        RequestCode::UNREGISTER_BROKER,
        &[
            ("brokerName", "broker-a"),
            ("brokerAddr", "127.0.0.1:10911"),
            ("clusterName", "DefaultCluster"),
            ("brokerId", "0"),
        ],
    );
    assert_eq!(
        client.call(unregister).response_code(),
        ResponseCode::SUCCESS
    );
    let left = route(&mut client, "TopicTest").unwrap();
    let addrs: Vec<_> = left.broker_datas[0].broker_addrs.iter().collect();
    assert_eq!(addrs, vec![(&1, &"127.0.0.2:10911".to_owned())]);
    assert_eq!(left.queue_datas.len(), 1, "slaves stay readable");
}

// Proves cluster info, topic lists, topic deletion and write-permission changes.
#[test]
fn cluster_views_and_admin_changes() {
    let server = TestNameServer::start();
    let mut client = server.client();
    client.call(Broker::master("broker-a", "127.0.0.1:10911", &["A", "B"]).register_request());
    let mut other = Broker::master("broker-b", "127.0.0.3:10911", &["B", "C"]);
    other.cluster = "OtherCluster".to_owned();
    client.call(other.register_request());

    let info = client.call(request(RequestCode::GET_BROKER_CLUSTER_INFO, &[]));
    let info = ClusterInfo::decode(&info.body).unwrap();
    assert_eq!(info.cluster_addr_table.len(), 2);
    assert_eq!(info.broker_addr_table["broker-b"].cluster, "OtherCluster");

    let all = client.call(request(
        RequestCode::GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
        &[],
    ));
    let all: Vec<String> = TopicList::decode(&all.body)
        .unwrap()
        .topic_list
        .into_iter()
        .collect();
    assert_eq!(all, ["A", "B", "C"]);
    let by_cluster = client.call(request(
        RequestCode::GET_TOPICS_BY_CLUSTER,
        &[("cluster", "OtherCluster")],
    ));
    let by_cluster: Vec<String> = TopicList::decode(&by_cluster.body)
        .unwrap()
        .topic_list
        .into_iter()
        .collect();
    assert_eq!(by_cluster, ["B", "C"]);
    let system = client.call(request(RequestCode::GET_SYSTEM_TOPIC_LIST_FROM_NS, &[]));
    let system = TopicList::decode(&system.body).unwrap();
    assert!(system.topic_list.contains("DefaultCluster") && system.topic_list.contains("broker-b"));

    let wiped = client.call(request(
        RequestCode::WIPE_WRITE_PERM_OF_BROKER,
        &[("brokerName", "broker-a")],
    ));
    assert_eq!(wiped.ext_fields.get("wipeTopicCount"), Some("2"));
    assert_eq!(route(&mut client, "A").unwrap().queue_datas[0].perm, 4);
    let added = client.call(request(
        RequestCode::ADD_WRITE_PERM_OF_BROKER,
        &[("brokerName", "broker-a")],
    ));
    assert_eq!(added.ext_fields.get("addTopicCount"), Some("2"));
    assert_eq!(route(&mut client, "A").unwrap().queue_datas[0].perm, 6);

    let delete_in_cluster = request(
        RequestCode::DELETE_TOPIC_IN_NAMESRV,
        &[("topic", "B"), ("clusterName", "OtherCluster")],
    );
    client.call(delete_in_cluster);
    let b = route(&mut client, "B").unwrap();
    assert_eq!(b.queue_datas.len(), 1);
    assert_eq!(b.queue_datas[0].broker_name, "broker-a");
    client.call(request(
        RequestCode::DELETE_TOPIC_IN_NAMESRV,
        &[("topic", "B")],
    ));
    assert!(route(&mut client, "B").is_none());
}

// Proves QUERY_DATA_VERSION reports a change only when the broker's version differs, returns
// the stored version, and keeps the broker alive.
#[test]
fn query_data_version() {
    let server = TestNameServer::start();
    let mut client = server.client();
    let broker = Broker::master("broker-a", "127.0.0.1:10911", &["A"]);
    client.call(broker.register_request());
    let stored = broker.body().topic_config_serialize_wrapper.data_version;
    let fields = [
        ("brokerName", "broker-a"),
        ("brokerAddr", "127.0.0.1:10911"),
        ("clusterName", "DefaultCluster"),
        ("brokerId", "0"),
    ];
    let same =
        client.call(request(RequestCode::QUERY_DATA_VERSION, &fields).with_body(stored.encode()));
    assert_eq!(same.ext_fields.get("changed"), Some("false"));
    assert_eq!(DataVersion::decode(&same.body).unwrap(), stored);
    let newer = DataVersion {
        counter: 99,
        ..stored
    };
    let changed =
        client.call(request(RequestCode::QUERY_DATA_VERSION, &fields).with_body(newer.encode()));
    assert_eq!(changed.ext_fields.get("changed"), Some("true"));
}

// Proves the KV store: put, get, list, delete, QUERY_NOT_FOUND, persistence to the configured
// file, orderTopicConf in routes, and the ORDER_TOPIC_CONFIG table in the register response.
#[test]
fn kv_config_and_order_topics() {
    let server = TestNameServer::start_with(|config| config.order_message_enable = true);
    let mut client = server.client();
    let put = request(
        RequestCode::PUT_KV_CONFIG,
        &[
            ("namespace", "ORDER_TOPIC_CONFIG"),
            ("key", "Ordered"),
            ("value", "broker-a:4"),
        ],
    );
    assert_eq!(client.call(put).response_code(), ResponseCode::SUCCESS);
    let file = server.directory.path().join("kvConfig.json");
    let persisted = std::fs::read_to_string(&file).unwrap();
    assert_eq!(
        persisted,
        r#"{"configTable":{"ORDER_TOPIC_CONFIG":{"Ordered":"broker-a:4"}}}"#
    );
    let get = client.call(request(
        RequestCode::GET_KV_CONFIG,
        &[("namespace", "ORDER_TOPIC_CONFIG"), ("key", "Ordered")],
    ));
    assert_eq!(get.ext_fields.get("value"), Some("broker-a:4"));
    let list = client.call(request(
        RequestCode::GET_KVLIST_BY_NAMESPACE,
        &[("namespace", "ORDER_TOPIC_CONFIG")],
    ));
    assert_eq!(
        KVTable::decode(&list.body).unwrap().table["Ordered"],
        "broker-a:4"
    );

    let registered =
        client.call(Broker::master("broker-a", "127.0.0.1:10911", &["Ordered"]).register_request());
    assert_eq!(KVTable::decode(&registered.body).unwrap().table.len(), 1);
    let ordered = route(&mut client, "Ordered").unwrap();
    assert_eq!(ordered.order_topic_conf.as_deref(), Some("broker-a:4"));

    let delete = request(
        RequestCode::DELETE_KV_CONFIG,
        &[("namespace", "ORDER_TOPIC_CONFIG"), ("key", "Ordered")],
    );
    assert_eq!(client.call(delete).response_code(), ResponseCode::SUCCESS);
    let missing = client.call(request(
        RequestCode::GET_KV_CONFIG,
        &[("namespace", "ORDER_TOPIC_CONFIG"), ("key", "Ordered")],
    ));
    assert_eq!(missing.response_code(), ResponseCode::QUERY_NOT_FOUND);
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        r#"{"configTable":{}}"#
    );
}

// Proves GET/UPDATE_NAMESRV_CONFIG speak properties text, refuse black-listed keys and bad
// values with SYSTEM_ERROR, and that an update takes effect (topic lists disabled).
#[test]
fn namesrv_config_get_and_update() {
    let server = TestNameServer::start();
    let mut client = server.client();
    let config = client.call(request(RequestCode::GET_NAMESRV_CONFIG, &[]));
    let text = String::from_utf8(config.body.to_vec()).unwrap();
    assert!(text.contains("enableAllTopicList=true"), "{text}");
    let black =
        request(RequestCode::UPDATE_NAMESRV_CONFIG, &[]).with_body(&b"kvConfigPath=/tmp/x\n"[..]);
    assert_eq!(
        client.call(black).response_code(),
        ResponseCode::SYSTEM_ERROR
    );
    let bad = request(RequestCode::UPDATE_NAMESRV_CONFIG, &[])
        .with_body(&b"enableAllTopicList=maybe\n"[..]);
    assert_eq!(client.call(bad).response_code(), ResponseCode::SYSTEM_ERROR);
    let update = request(RequestCode::UPDATE_NAMESRV_CONFIG, &[])
        .with_body(&b"enableAllTopicList=false\n"[..]);
    assert_eq!(client.call(update).response_code(), ResponseCode::SUCCESS);
    let disabled = client.call(request(
        RequestCode::GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
        &[],
    ));
    assert_eq!(disabled.response_code(), ResponseCode::SYSTEM_ERROR);
    assert_eq!(disabled.remark.as_deref(), Some("disable"));
}

// Proves two name servers side by side are independent: a broker registered with both is
// routable from each, and stopping one leaves the other serving.
#[test]
fn two_name_servers() {
    let first = TestNameServer::start();
    let mut second = TestNameServer::start();
    let broker = Broker::master("broker-a", "127.0.0.1:10911", &["TopicTest"]);
    // Broker connections stay open: a closed one unregisters its broker at once.
    let mut broker_connections = Vec::new();
    for server in [&first, &second] {
        let mut client = server.client();
        assert_eq!(
            client.call(broker.register_request()).response_code(),
            ResponseCode::SUCCESS
        );
        broker_connections.push(client);
    }
    let only_first = Broker::master("broker-b", "127.0.0.3:10911", &["OnlyFirst"]);
    let mut first_only_connection = first.client();
    first_only_connection.call(only_first.register_request());
    assert!(route(&mut second.client(), "OnlyFirst").is_none());
    second.server.take().unwrap().stop();
    let mut client = first.client();
    assert!(route(&mut client, "TopicTest").is_some());
    assert!(route(&mut client, "OnlyFirst").is_some());
}

// Proves expiry with shortened timeouts: a broker that stops registering disappears after its
// heartbeatTimeoutMillis, found by a 50 ms scan, while one that keeps registering stays.
#[test]
fn silent_broker_expires() {
    let server =
        TestNameServer::start_with(|config| config.scan_interval = Duration::from_millis(50));
    let mut client = server.client();
    let mut silent = Broker::master("broker-a", "127.0.0.1:10911", &["Silent"]);
    silent.timeout_ms = Some(300);
    let mut alive = Broker::master("broker-b", "127.0.0.3:10911", &["Alive"]);
    alive.timeout_ms = Some(300);
    client.call(silent.register_request());
    client.call(alive.register_request());
    let gone = poll_until(Duration::from_secs(5), || {
        client.call(alive.register_request());
        route(&mut client, "Silent").is_none()
    });
    assert!(gone, "silent broker never expired");
    assert!(route(&mut client, "Alive").is_some());
}

// Proves a broker is dropped at once when its connection closes, and that after a restart
// (new connection, new data version) it registers again and its route returns.
#[test]
fn broker_restart_reregisters() {
    let server = TestNameServer::start();
    let broker = Broker::master("broker-a", "127.0.0.1:10911", &["TopicTest"]);
    let mut broker_connection = server.client();
    broker_connection.call(broker.register_request());
    let mut client = server.client();
    assert!(route(&mut client, "TopicTest").is_some());
    drop(broker_connection);
    assert!(
        poll_until(Duration::from_secs(5), || route(&mut client, "TopicTest")
            .is_none()),
        "closing the connection did not drop the broker"
    );
    let restarted = Broker {
        counter: 1,
        topics: vec!["TopicTest".to_owned(), "NewTopic".to_owned()],
        ..broker
    };
    let mut new_connection = server.client();
    new_connection.call(restarted.register_request());
    assert!(route(&mut client, "TopicTest").is_some());
    assert!(route(&mut client, "NewTopic").is_some());
}

// Proves bad input gets errors, never a crash: a malformed register body and a bad CRC are
// SYSTEM_ERROR, a missing header field is SYSTEM_ERROR naming it, an unknown code is
// REQUEST_CODE_NOT_SUPPORTED, an oversized frame closes only that connection, and the server
// still serves afterwards.
#[test]
fn bad_input_is_answered_and_server_survives() {
    let server = TestNameServer::start_with(|config| config.frame_bytes_max = 64 * 1024);
    let mut client = server.client();
    let broker = Broker::master("broker-a", "127.0.0.1:10911", &["TopicTest"]);
    let mut malformed = broker
        .register_request()
        .with_body(&b"{\"filterServerList\":[1,"[..]);
    malformed.ext_fields.remove("bodyCrc32");
    let answer = client.call(malformed);
    assert_eq!(answer.response_code(), ResponseCode::SYSTEM_ERROR);
    assert!(answer.remark.unwrap().contains("malformed register body"));
    let mut bad_crc = broker.register_request();
    bad_crc.ext_fields.insert("bodyCrc32", "12345");
    let answer = client.call(bad_crc);
    assert_eq!(answer.remark.as_deref(), Some("crc32 not match"));
    let answer = client.call(request(RequestCode::GET_ROUTEINFO_BY_TOPIC, &[]));
    assert_eq!(answer.response_code(), ResponseCode::SYSTEM_ERROR);
    assert!(answer.remark.unwrap().contains("topic"));
    let answer = client.call(request(RequestCode::Unknown(77777), &[]));
    assert_eq!(
        answer.response_code(),
        ResponseCode::REQUEST_CODE_NOT_SUPPORTED
    );

    use std::io::Write;
    let mut oversized = server.client();
    oversized
        .stream
        .write_all(&(1u32 << 20).to_be_bytes())
        .unwrap();
    oversized.stream.write_all(&[0u8; 100]).unwrap();
    assert!(
        oversized.receive().is_none(),
        "oversized frame must close the connection"
    );

    assert_eq!(
        client.call(broker.register_request()).response_code(),
        ResponseCode::SUCCESS
    );
    assert!(route(&mut server.client(), "TopicTest").is_some());
}

// Proves the compressed register body form is accepted and registers the same topics.
#[test]
fn compressed_registration() {
    let server = TestNameServer::start();
    let mut client = server.client();
    let broker = Broker::master("broker-a", "127.0.0.1:10911", &["Zipped", "Other"]);
    let mut request = broker.register_request();
    request.body = broker.body().encode_compressed();
    request.ext_fields.insert("compressed", "true");
    request.ext_fields.remove("bodyCrc32");
    assert_eq!(client.call(request).response_code(), ResponseCode::SUCCESS);
    assert_eq!(
        route(&mut client, "Zipped").unwrap().queue_datas[0].write_queue_nums,
        4
    );
}
