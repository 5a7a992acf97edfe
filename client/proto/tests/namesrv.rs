//! Name-server headers and bodies: ext-field round trips, missing-field errors, and JSON
//! bodies in every flavour Java writes (bare and quoted numeric keys, compressed register
//! bodies).

mod common;

use std::collections::BTreeMap;
use std::io::Write;

use comet_proto::body::*;
use comet_proto::headers::*;
use comet_proto::{CommandHeader, HeaderError, RemotingCommand, RequestCode};
use common::{check_header, ext, round_trip};

// Proves every name-server header round-trips through ext fields with the Java keys, and that
// each missing required key is reported by its Java name.
#[test]
fn namesrv_headers_round_trip() {
    check_header(&RegisterBrokerRequestHeader {
        broker_name: "broker-a".into(),
        broker_addr: "127.0.0.1:10911".into(),
        cluster_name: "DefaultCluster".into(),
        ha_server_addr: "127.0.0.1:10912".into(),
        broker_id: 0,
        heartbeat_timeout_millis: Some(120_000),
        enable_acting_master: Some(false),
        compressed: true,
        body_crc32: Some(-12345),
    });
    check_header(&RegisterBrokerResponseHeader {
        ha_server_addr: Some("127.0.0.1:10912".into()),
        master_addr: Some("127.0.0.1:10911".into()),
    });
    check_header(&UnRegisterBrokerRequestHeader {
        broker_name: "b".into(),
        broker_addr: "a:1".into(),
        cluster_name: "c".into(),
        broker_id: 1,
    });
    check_header(&GetRouteInfoRequestHeader {
        topic: "TopicTest".into(),
        accept_standard_json_only: Some(true),
    });
    check_header(&DeleteTopicFromNamesrvRequestHeader {
        topic: "T".into(),
        cluster_name: Some("c".into()),
    });
    check_header(&WipeWritePermOfBrokerRequestHeader {
        broker_name: "b".into(),
    });
    check_header(&WipeWritePermOfBrokerResponseHeader {
        wipe_topic_count: 3,
    });
    check_header(&AddWritePermOfBrokerRequestHeader {
        broker_name: "b".into(),
    });
    check_header(&AddWritePermOfBrokerResponseHeader { add_topic_count: 2 });
}

// Proves the data-version, KV, topic and 5.x heartbeat headers round-trip and name missing keys.
#[test]
fn namesrv_version_kv_and_heartbeat_headers_round_trip() {
    check_header(&QueryDataVersionRequestHeader {
        broker_name: "b".into(),
        broker_addr: "a:1".into(),
        cluster_name: "c".into(),
        broker_id: 0,
    });
    check_header(&QueryDataVersionResponseHeader { changed: true });
    check_header(&PutKVConfigRequestHeader {
        namespace: "ORDER_TOPIC_CONFIG".into(),
        key: "T".into(),
        value: "broker-a:4".into(),
    });
    check_header(&GetKVConfigRequestHeader {
        namespace: "n".into(),
        key: "k".into(),
    });
    check_header(&GetKVConfigResponseHeader {
        value: Some("v".into()),
    });
    check_header(&DeleteKVConfigRequestHeader {
        namespace: "n".into(),
        key: "k".into(),
    });
    check_header(&GetKVListByNamespaceRequestHeader {
        namespace: "n".into(),
    });
    check_header(&GetTopicsByClusterRequestHeader {
        cluster: "c".into(),
    });
    check_header(&RegisterTopicRequestHeader { topic: "T".into() });
    check_header(&BrokerHeartbeatRequestHeader {
        cluster_name: "c".into(),
        broker_addr: "a:1".into(),
        broker_name: "b".into(),
        broker_id: Some(0),
        epoch: Some(1),
        max_offset: Some(100),
        confirm_offset: Some(90),
        heartbeat_timeout_mills: Some(1000),
        election_priority: Some(1),
    });
    check_header(&GetBrokerMemberGroupRequestHeader {
        cluster_name: "c".into(),
        broker_name: "b".into(),
    });
}

// Proves the exact keys and value texts a Java broker sends for REGISTER_BROKER decode, that
// auth keys are ignored, and that Java's parsing rules apply (bad numbers are typed errors,
// `compressed` is true only for a case-insensitive "true").
#[test]
fn register_broker_header_from_java_keys() {
    let fields = ext(&[
        ("brokerName", "broker-a"),
        ("brokerAddr", "192.168.0.2:10911"),
        ("clusterName", "DefaultCluster"),
        ("haServerAddr", "192.168.0.2:10912"),
        ("brokerId", "0"),
        ("compressed", "False"),
        ("bodyCrc32", "1882372331"),
        ("enableActingMaster", "false"),
        ("heartbeatTimeoutMillis", "120000"),
        ("AccessKey", "ignored"),
    ]);
    let header = RegisterBrokerRequestHeader::from_ext_fields(&fields).unwrap();
    assert_eq!(header.broker_addr, "192.168.0.2:10911");
    assert!(!header.compressed);
    assert_eq!(header.body_crc32, Some(1_882_372_331));
    let mut bad = fields.clone();
    bad.insert("brokerId", "zero");
    assert!(matches!(
        RegisterBrokerRequestHeader::from_ext_fields(&bad),
        Err(HeaderError::Invalid {
            field: "brokerId",
            ..
        })
    ));
    let command = RemotingCommand::request(RequestCode::REGISTER_BROKER, 1).with_header(&header);
    assert_eq!(
        command.decode_header::<RegisterBrokerRequestHeader>(),
        Ok(header)
    );
}

fn sample_route() -> TopicRouteData {
    let mut addrs = BTreeMap::new();
    addrs.insert(0, "127.0.0.1:10911".to_owned());
    addrs.insert(1, "127.0.0.1:10921".to_owned());
    TopicRouteData {
        order_topic_conf: None,
        queue_datas: vec![QueueData {
            broker_name: "broker-a".into(),
            read_queue_nums: 4,
            write_queue_nums: 4,
            perm: 6,
            topic_sys_flag: 0,
        }],
        broker_datas: vec![BrokerData {
            cluster: "DefaultCluster".into(),
            broker_name: "broker-a".into(),
            broker_addrs: addrs,
            enable_acting_master: false,
            zone_name: None,
        }],
        filter_server_table: BTreeMap::new(),
        topic_queue_mapping_by_broker: None,
    }
}

// Proves TopicRouteData is written with sorted keys and quoted broker ids, exactly as the
// browser-compatible fastjson flavour, and reads back.
#[test]
fn topic_route_data_written_with_quoted_ids() {
    let route = sample_route();
    let text = round_trip(&route);
    assert_eq!(
        text,
        concat!(
            r#"{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10911","1":"127.0.0.1:10921"},"#,
            r#""brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],"#,
            r#""filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"#,
            r#""readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}"#
        )
    );
    assert_eq!(route.broker_datas[0].master_addr(), Some("127.0.0.1:10911"));
}

// Proves the default fastjson flavour of a Java name server (bare numeric broker ids, 4.x
// fields only, unknown derived keys) reads into the same route.
#[test]
fn topic_route_data_from_fastjson_bare_keys() {
    let java = concat!(
        r#"{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},"#,
        r#""brokerName":"broker-a","cluster":"DefaultCluster"}],"filterServerTable":{},"#,
        r#""queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"#,
        r#""topicSynFlag":2,"writeQueueNums":4}],"someDerivedGetter":true}"#,
        "\n"
    );
    let mut route = TopicRouteData::decode(java.as_bytes()).unwrap();
    assert_eq!(route.queue_datas[0].topic_sys_flag, 2, "4.x topicSynFlag");
    route.queue_datas[0].topic_sys_flag = 0;
    assert_eq!(route, sample_route());
}

// Proves ClusterInfo reads Java's default flavour (bare numeric keys inside brokerAddrs)
// and writes a form that reads back.
#[test]
fn cluster_info_round_trip() {
    let java = concat!(
        r#"{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"10.0.0.1:10911"},"#,
        r#""brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}},"#,
        r#""clusterAddrTable":{"DefaultCluster":["broker-a"]}}"#
    );
    let info = ClusterInfo::decode(java.as_bytes()).unwrap();
    assert_eq!(
        info.broker_addr_table["broker-a"].master_addr(),
        Some("10.0.0.1:10911")
    );
    assert!(info.cluster_addr_table["DefaultCluster"].contains("broker-a"));
    round_trip(&info);
}

// Proves TopicList and KVTable shapes, with the optional brokerAddr omitted when absent.
#[test]
fn topic_list_and_kv_table() {
    let list = TopicList {
        topic_list: ["B".to_owned(), "A".to_owned()].into_iter().collect(),
        broker_addr: None,
    };
    assert_eq!(round_trip(&list), r#"{"topicList":["A","B"]}"#);
    let list = TopicList::decode(br#"{"brokerAddr":"a:1","topicList":["X"]}"#).unwrap();
    assert_eq!(list.broker_addr.as_deref(), Some("a:1"));
    let mut table = KVTable::default();
    table.table.insert("k".into(), "v".into());
    assert_eq!(round_trip(&table), r#"{"table":{"k":"v"}}"#);
}

fn sample_register_body() -> RegisterBrokerBody {
    let mut body = RegisterBrokerBody::default();
    let wrapper = &mut body.topic_config_serialize_wrapper;
    wrapper.data_version = DataVersion {
        counter: 7,
        state_version: 0,
        timestamp: 1_700_000_000_000,
    };
    let mut topic = TopicConfig::new("TopicTest");
    topic.read_queue_nums = 4;
    topic.write_queue_nums = 4;
    topic
        .attributes
        .insert("+message.type".into(), "NORMAL".into());
    wrapper.topic_config_table.insert("TopicTest".into(), topic);
    let mut tagged = TopicConfig::new("Tagged");
    tagged.topic_filter_type = TopicFilterType::MULTI_TAG;
    tagged.perm = 4;
    wrapper.topic_config_table.insert("Tagged".into(), tagged);
    body
}

// Proves the JSON register body matches the topics.json shape (sorted keys, defaults for
// missing members) and round-trips.
#[test]
fn register_broker_body_json() {
    let body = sample_register_body();
    let text = round_trip(&body);
    assert!(text.starts_with(
        r#"{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":7,"#
    ));
    assert!(text.contains(concat!(
        r#""TopicTest":{"attributes":{"+message.type":"NORMAL"},"order":false,"perm":6,"#,
        r#""readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"TopicTest","#,
        r#""topicSysFlag":0,"writeQueueNums":4}"#
    )));
    let sparse = br#"{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"topicName":"T"}}}}"#;
    let body = RegisterBrokerBody::decode(sparse).unwrap();
    let topic = &body.topic_config_serialize_wrapper.topic_config_table["T"];
    assert_eq!((topic.read_queue_nums, topic.perm), (16, 6));
}

// Proves the compressed register body round-trips, and that a body laid out by hand the way
// the Java broker writes it (4.x: no mapping section; topic line with spaces inside the
// attributes JSON) decodes.
#[test]
fn register_broker_body_compressed() {
    let body = sample_register_body();
    let bytes = body.encode_with(true);
    assert_eq!(&bytes[..2], &[0x78, 0xDA], "zlib header at level 9");
    let mut expected = body.clone();
    for topic in expected
        .topic_config_serialize_wrapper
        .topic_config_table
        .values_mut()
    {
        topic.order = false;
        topic.topic_sys_flag = 0;
    }
    expected
        .topic_config_serialize_wrapper
        .topic_queue_mapping_info_map = Some(BTreeMap::new());
    assert_eq!(
        RegisterBrokerBody::decode_with(&bytes, true).unwrap(),
        expected
    );

    let mut plain = Vec::new();
    let mut part = |bytes: &[u8]| {
        plain.extend_from_slice(&i32::try_from(bytes.len()).unwrap().to_be_bytes());
        plain.extend_from_slice(bytes);
    };
    part(br#"{"counter":3,"timestamp":5}"#);
    let mut with_count = Vec::new();
    with_count.extend_from_slice(&plain);
    with_count.extend_from_slice(&1i32.to_be_bytes());
    let line = br#"Spaced 8 8 6 SINGLE_TAG {"k":"a b"}"#;
    with_count.extend_from_slice(&i32::try_from(line.len()).unwrap().to_be_bytes());
    with_count.extend_from_slice(line);
    with_count.extend_from_slice(&2i32.to_be_bytes());
    with_count.extend_from_slice(b"[]");
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(&with_count).unwrap();
    let compressed = encoder.finish().unwrap();
    let decoded = RegisterBrokerBody::decode_compressed(&compressed).unwrap();
    let wrapper = &decoded.topic_config_serialize_wrapper;
    assert_eq!(wrapper.data_version.counter, 3);
    assert_eq!(wrapper.topic_config_table["Spaced"].read_queue_nums, 8);
    assert_eq!(wrapper.topic_config_table["Spaced"].attributes["k"], "a b");
    assert_eq!(wrapper.topic_queue_mapping_info_map, None);
}

// Proves corrupt compressed bodies give typed errors: not zlib, truncated parts, negative
// lengths, bad topic lines.
#[test]
fn register_broker_body_compressed_errors() {
    assert!(matches!(
        RegisterBrokerBody::decode_compressed(b"not zlib"),
        Err(BodyError::Zlib(_))
    ));
    let zip = |plain: &[u8]| {
        let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(plain).unwrap();
        encoder.finish().unwrap()
    };
    assert!(matches!(
        RegisterBrokerBody::decode_compressed(&zip(&[0, 0, 0, 9, b'{'])),
        Err(BodyError::Truncated {
            need: 9,
            have: 1,
            ..
        })
    ));
    assert!(matches!(
        RegisterBrokerBody::decode_compressed(&zip(&[0xFF, 0xFF, 0xFF, 0xFF])),
        Err(BodyError::Negative { value: -1, .. })
    ));
    let mut plain = vec![0, 0, 0, 2, b'{', b'}', 0, 0, 0, 1, 0, 0, 0, 3];
    plain.extend_from_slice(b"a 1");
    assert!(matches!(
        RegisterBrokerBody::decode_compressed(&zip(&plain)),
        Err(BodyError::TopicLine { .. })
    ));
    assert!(TopicConfig::from_line("t x 1 6 SINGLE_TAG").is_err());
    let plain = TopicConfig::new("Plain");
    assert_eq!(
        plain.to_line(),
        "Plain 16 16 6 SINGLE_TAG",
        "4.x takes exactly 5 fields"
    );
    assert_eq!(
        TopicConfig::from_line("Plain 16 16 6 SINGLE_TAG ").unwrap(),
        plain
    );
    assert!(TopicConfig::from_line("t 1 1 6 NO_SUCH").is_err());
}

// Proves the DataVersion shape and that numbers sent as strings are accepted.
#[test]
fn data_version_lenient() {
    let version = DataVersion::decode(br#"{"counter":"12","timestamp":99}"#).unwrap();
    assert_eq!(version.counter, 12);
    assert_eq!(version.timestamp, 99);
    assert_eq!(
        round_trip(&version),
        r#"{"counter":12,"stateVersion":0,"timestamp":99}"#
    );
}
