//! Client and admin JSON bodies: exact fastjson-shaped output, round trips, Java samples
//! with fastjson quirks (object keys, bare numeric keys, pretty printing, derived keys), and
//! the heartbeat bodies real clients sent (`tests/data/*.jsonl`, code 34).

mod common;

use std::collections::BTreeMap;

use comet_proto::body::*;
use comet_proto::json::JsonError;
use comet_proto::{LanguageCode, RequestCode};
use common::round_trip;

fn utf8(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).unwrap()
}

// Proves a Java 5.x heartbeat (names, every member) reads, and that writing produces the
// fastjson shape of
// docs/protocol.md#json-body-shapes (sorted keys, enums by name, `withoutSub`).
#[test]
fn heartbeat_java_shape() {
    let java = concat!(
        r#"{"clientID":"10.0.0.1@1234#5678","consumerDataSet":[{"consumeFromWhere":"#,
        r#""CONSUME_FROM_FIRST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"cg","#,
        r#""messageModel":"CLUSTERING","subscriptionDataSet":[{"classFilterMode":false,"#,
        r#""codeSet":[2598919,2598920],"expressionType":"TAG","subString":"TagA || TagB","#,
        r#""subVersion":1700000000000,"tagsSet":["TagA","TagB"],"topic":"TopicTest"}],"#,
        r#""unitMode":false}],"heartbeatFingerprint":0,"producerDataSet":[{"groupName":"#,
        r#""CLIENT_INNER_PRODUCER"}],"withoutSub":false}"#
    );
    let heartbeat = HeartbeatData::decode(java.as_bytes()).unwrap();
    let consumer = &heartbeat.consumer_data_set[0];
    assert_eq!(consumer.consume_type, ConsumeType::CONSUME_PASSIVELY);
    assert_eq!(
        consumer.consume_from_where,
        ConsumeFromWhere::CONSUME_FROM_FIRST_OFFSET
    );
    assert_eq!(consumer.subscription_data_set[0].code_set.len(), 2);
    assert_eq!(round_trip(&heartbeat), java);
}

// Proves every heartbeat the captured clients sent decodes, with C++ ordinals mapped to
// the Java enums and C++ string subVersions read as numbers, and re-encodes to a form
// that reads back identically.
#[test]
fn captured_heartbeats_decode() {
    let mut seen = 0;
    for command in common::captured_commands() {
        if command.request_code() != RequestCode::HEART_BEAT {
            continue;
        }
        let heartbeat = HeartbeatData::decode(&command.body)
            .unwrap_or_else(|e| panic!("{e}: {}", utf8(&command.body)));
        assert!(!heartbeat.client_id.is_empty());
        for consumer in &heartbeat.consumer_data_set {
            assert!(consumer.group_name.starts_with("compat_"));
            assert_eq!(consumer.consume_type, ConsumeType::CONSUME_PASSIVELY);
            assert_eq!(consumer.message_model, MessageModel::CLUSTERING);
            assert_eq!(
                consumer.consume_from_where,
                ConsumeFromWhere::CONSUME_FROM_LAST_OFFSET
            );
            for subscription in &consumer.subscription_data_set {
                assert_eq!(subscription.sub_string, "*");
                assert_eq!(subscription.expression_type, "TAG");
            }
        }
        round_trip(&heartbeat);
        seen += 1;
    }
    assert!(seen >= 8, "only {seen} captured heartbeats");
}

// Proves the exact C++ heartbeat of the capture README (ordinals, string subVersion,
// trailing newline, missing members) maps to the right values.
#[test]
fn cpp_heartbeat_ordinals() {
    let cpp = concat!(
        r#"{"clientID":"16286-127.0.0.1@DEFAULT","consumerDataSet":[{"consumeFromWhere":0,"#,
        r#""consumeType":1,"groupName":"compat_py_consumer","messageModel":1,"#,
        r#""subscriptionDataSet":[{"subString":"*","subVersion":"1795960958067","#,
        r#""topic":"%RETRY%compat_py_consumer"},{"subString":"*","#,
        r#""subVersion":"1795960958067","topic":"TopicTest"}]}]}"#,
        "\n"
    );
    let heartbeat = HeartbeatData::decode(cpp.as_bytes()).unwrap();
    let consumer = &heartbeat.consumer_data_set[0];
    assert_eq!(consumer.consume_type, ConsumeType::CONSUME_PASSIVELY);
    assert_eq!(consumer.message_model, MessageModel::CLUSTERING);
    assert_eq!(
        consumer.consume_from_where,
        ConsumeFromWhere::CONSUME_FROM_LAST_OFFSET
    );
    assert_eq!(
        consumer.subscription_data_set[1].sub_version,
        1_795_960_958_067
    );
    assert!(heartbeat.producer_data_set.is_empty());
    let other = concat!(
        r#"{"clientID":"c","consumerDataSet":[{"consumeFromWhere":4,"consumeType":0,"#,
        r#""messageModel":0}]}"#
    );
    let consumer = &HeartbeatData::decode(other.as_bytes())
        .unwrap()
        .consumer_data_set[0];
    assert_eq!(consumer.consume_type, ConsumeType::CONSUME_ACTIVELY);
    assert_eq!(consumer.message_model, MessageModel::BROADCASTING);
    assert_eq!(
        consumer.consume_from_where,
        ConsumeFromWhere::CONSUME_FROM_FIRST_OFFSET
    );
    for (ordinal, variant) in ConsumeFromWhere::ALL.iter().enumerate() {
        assert_eq!(variant.ordinal() as usize, ordinal);
    }
}

// Proves the Go client's heartbeat shape reads: tag codes as strings, upper-cased model
// names, `null` collections.
#[test]
fn go_heartbeat_shape() {
    let go = concat!(
        r#"{"clientID":"10.0.0.2@7@DEFAULT","producerDataSet":null,"consumerDataSet":[{"#,
        r#""groupName":"g","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","#,
        r#""consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","subscriptionDataSet":[{"#,
        r#""classFilterMode":false,"topic":"T","subString":"TagA || TagB","#,
        r#""tagsSet":["TagA","TagB"],"codeSet":["2598919","2598920"],"#,
        r#""subVersion":1700000000000000000,"expressionType":"TAG"}],"unitMode":false}]}"#
    );
    let heartbeat = HeartbeatData::decode(go.as_bytes()).unwrap();
    assert!(heartbeat.producer_data_set.is_empty());
    let subscription = &heartbeat.consumer_data_set[0].subscription_data_set[0];
    assert_eq!(
        subscription.code_set.iter().copied().collect::<Vec<_>>(),
        [2_598_919, 2_598_920]
    );
    assert!(subscription.tags_set.contains("TagB"));
    let bad = br#"{"consumerDataSet":[{"subscriptionDataSet":[{"codeSet":["x"]}]}]}"#;
    assert!(HeartbeatData::decode(bad).is_err());
    let nulls =
        br#"{"consumerDataSet":[{"subscriptionDataSet":[{"tagsSet":null,"codeSet":null}]}]}"#;
    assert!(HeartbeatData::decode(nulls).is_ok());
}

// Proves unknown enum names and out-of-range ordinals are typed errors, not panics.
#[test]
fn heartbeat_bad_enums() {
    for bad in [
        r#"{"consumerDataSet":[{"consumeType":"CONSUME_LATER"}]}"#,
        r#"{"consumerDataSet":[{"consumeType":7}]}"#,
        r#"{"consumerDataSet":[{"messageModel":-1}]}"#,
        r#"{"consumerDataSet":[{"subscriptionDataSet":[{"subVersion":"soon"}]}]}"#,
    ] {
        assert!(
            matches!(
                HeartbeatData::decode(bad.as_bytes()),
                Err(JsonError::Shape { .. })
            ),
            "{bad}"
        );
    }
}

fn mq(topic: &str, queue_id: i32) -> MessageQueue {
    MessageQueue::new(topic, "broker-a", queue_id)
}

// Proves ConsumeStats is written in fastjson's object-key form and reads Java's output.
#[test]
fn consume_stats_object_keys() {
    let mut stats = ConsumeStats {
        consume_tps: 0.0,
        offset_table: BTreeMap::new(),
    };
    stats.offset_table.insert(
        mq("T", 0),
        OffsetWrapper {
            broker_offset: 10,
            consumer_offset: 8,
            last_timestamp: 1_700_000_000_000,
            pull_offset: 9,
        },
    );
    let text = round_trip(&stats);
    assert_eq!(
        text,
        concat!(
            r#"{"consumeTps":0.0,"offsetTable":{{"brokerName":"broker-a","queueId":0,"#,
            r#""topic":"T"}:{"brokerOffset":10,"consumerOffset":8,"#,
            r#""lastTimestamp":1700000000000,"pullOffset":9}}}"#
        )
    );
    let java = concat!(
        r#"{"consumeTps":1.5,"offsetTable":{{"brokerName":"broker-a","queueId":1,"#,
        r#""topic":"T"}:{"brokerOffset":3,"consumerOffset":3,"lastTimestamp":0,"#,
        r#""pullOffset":3},{"brokerName":"broker-a","queueId":0,"topic":"T"}:{"#,
        r#""brokerOffset":5,"consumerOffset":1,"lastTimestamp":0,"pullOffset":2}}}"#
    );
    let stats = ConsumeStats::decode(java.as_bytes()).unwrap();
    assert_eq!(stats.consume_tps, 1.5);
    assert_eq!(stats.offset_table[&mq("T", 0)].broker_offset, 5);
    assert_eq!(stats.offset_table[&mq("T", 1)].pull_offset, 3);
}

// Proves TopicStatsTable and ResetOffsetBody use the object-key form both ways.
#[test]
fn topic_stats_and_reset_offset() {
    let mut table = TopicStatsTable::default();
    table.offset_table.insert(
        mq("T", 0),
        TopicOffset {
            last_update_timestamp: 5,
            max_offset: 10,
            min_offset: 0,
        },
    );
    let text = round_trip(&table);
    assert_eq!(
        text,
        concat!(
            r#"{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:"#,
            r#"{"lastUpdateTimestamp":5,"maxOffset":10,"minOffset":0}},"topicPutTps":0.0}"#
        )
    );
    let mut reset = ResetOffsetBody::default();
    reset.offset_table.insert(mq("T", 1), 42);
    reset.offset_table.insert(mq("T", 0), 7);
    assert_eq!(
        round_trip(&reset),
        concat!(
            r#"{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:7,"#,
            r#"{"brokerName":"broker-a","queueId":1,"topic":"T"}:42}}"#
        )
    );
}

// Proves the C++ list form of the reset body converts both ways and has the Java shape.
#[test]
fn reset_offset_body_for_cpp() {
    let mut reset = ResetOffsetBody::default();
    reset.offset_table.insert(mq("T", 3), 99);
    let cpp = ResetOffsetBodyForC::from(&reset);
    assert_eq!(
        round_trip(&cpp),
        r#"{"offsetTable":[{"brokerName":"broker-a","offset":99,"queueId":3,"topic":"T"}]}"#
    );
    assert_eq!(ResetOffsetBody::from(cpp), reset);
}

// Proves the lock bodies, including the `lockOKMQSet` key spelling.
#[test]
fn lock_bodies() {
    let mut request = LockBatchRequestBody {
        client_id: "c".into(),
        consumer_group: "cg".into(),
        ..LockBatchRequestBody::default()
    };
    request.mq_set.insert(mq("T", 0));
    assert_eq!(
        round_trip(&request),
        concat!(
            r#"{"clientId":"c","consumerGroup":"cg","mqSet":[{"brokerName":"broker-a","#,
            r#""queueId":0,"topic":"T"}],"onlyThisBroker":false}"#
        )
    );
    let unlock = concat!(
        r#"{"clientId":"c","consumerGroup":"cg","mqSet":[{"brokerName":"b","queueId":3,"#,
        r#""topic":"T"}]}"#
    );
    let unlock = UnlockBatchRequestBody::decode(unlock.as_bytes()).unwrap();
    assert_eq!(unlock.mq_set.len(), 1);
    let mut response = LockBatchResponseBody::default();
    response.lock_ok_mq_set.insert(mq("T", 2));
    assert!(round_trip(&response).starts_with(r#"{"lockOKMQSet":[{"#));
    let list = GetConsumerListByGroupResponseBody {
        consumer_id_list: vec!["a".into(), "b".into()],
    };
    assert_eq!(round_trip(&list), r#"{"consumerIdList":["a","b"]}"#);
}

// Proves consumerOffset.json as Java pretty-prints it (tabs, bare queue ids, the stray
// newline before `}`, the leaked `groupTopicMap`) reads, and writes back with quoted ids.
#[test]
fn consumer_offset_file() {
    let java = concat!(
        "{\n\t\"dataVersion\":{\n\t\t\"counter\":3,\n\t\t\"stateVersion\":0,\n",
        "\t\t\"timestamp\":1700000000000\n\t},\n",
        "\t\"groupTopicMap\":{\"cg1\":[\"TopicTest\"]},\n",
        "\t\"offsetTable\":{\n\t\t\"TopicTest@cg1\":{0:12,1:3\n\t\t}\n\t}\n}"
    );
    let wrapper = ConsumerOffsetSerializeWrapper::decode(java.as_bytes()).unwrap();
    let key = ConsumerOffsetSerializeWrapper::key("TopicTest", "cg1");
    assert_eq!(wrapper.offset_table[&key][&0], 12);
    assert_eq!(wrapper.offset_table[&key][&1], 3);
    assert_eq!(
        ConsumerOffsetSerializeWrapper::split_key(&key),
        Some(("TopicTest", "cg1"))
    );
    let text = round_trip(&wrapper);
    assert!(text.ends_with(r#""offsetTable":{"TopicTest@cg1":{"0":12,"1":3}}}"#));
}

// Proves subscription-group configs take Java's defaults for missing members and the
// wrapper round-trips with its 5.x members.
#[test]
fn subscription_groups() {
    let config =
        SubscriptionGroupConfig::decode(br#"{"groupName":"cg","retryMaxTimes":3}"#).unwrap();
    assert_eq!(config.retry_max_times, 3);
    assert!(config.consume_enable);
    assert_eq!(config.retry_queue_nums, 1);
    assert_eq!(config.which_broker_when_consume_slowly, 1);
    let mut wrapper = SubscriptionGroupWrapper::default();
    let mut full = SubscriptionGroupConfig::new("cg");
    full.group_retry_policy = Some(serde_json::json!({"type": "CUSTOMIZED"}));
    full.subscription_data_set = Some(vec![SimpleSubscriptionData {
        expression: "*".into(),
        expression_type: "TAG".into(),
        topic: "T".into(),
        version: 1,
    }]);
    wrapper.subscription_group_table.insert("cg".into(), full);
    wrapper
        .forbidden_table
        .insert("cg".into(), [("T".to_owned(), 1)].into_iter().collect());
    let text = round_trip(&wrapper);
    assert!(text.contains(r#""groupRetryPolicy":{"type":"CUSTOMIZED"}"#));
    assert!(text.contains(r#""consumeEnable":true"#));
}

// Proves connection bodies write the language by name and read a name or a byte.
#[test]
fn connections() {
    let connection = Connection {
        client_addr: "127.0.0.1:5000".into(),
        client_id: "c".into(),
        language: LanguageCode::CPP,
        version: 333,
    };
    let producers = ProducerConnection {
        connection_set: vec![connection.clone()],
    };
    assert_eq!(
        round_trip(&producers),
        concat!(
            r#"{"connectionSet":[{"clientAddr":"127.0.0.1:5000","clientId":"c","#,
            r#""language":"CPP","version":333}]}"#
        )
    );
    let by_byte =
        Connection::decode(br#"{"clientAddr":"a","clientId":"c","language":9,"version":1}"#)
            .unwrap();
    assert_eq!(by_byte.language, LanguageCode::GO);
    let mut consumers = ConsumerConnection {
        connection_set: vec![connection],
        consume_type: Some(ConsumeType::CONSUME_PASSIVELY),
        message_model: Some(MessageModel::CLUSTERING),
        consume_from_where: Some(ConsumeFromWhere::CONSUME_FROM_LAST_OFFSET),
        ..ConsumerConnection::default()
    };
    consumers
        .subscription_table
        .insert("T".into(), SubscriptionData::default());
    let text = round_trip(&consumers);
    assert!(text.contains(r#""consumeType":"CONSUME_PASSIVELY""#));
    let groups = GroupList {
        group_list: ["b".to_owned(), "a".to_owned()].into_iter().collect(),
    };
    assert_eq!(round_trip(&groups), r#"{"groupList":["a","b"]}"#);
}

// Proves CheckClientRequestBody and the GET_ALL_TOPIC_CONFIG wrapper shape (5.x mapping
// members optional, unknown members ignored).
#[test]
fn check_client_and_topic_config_wrapper() {
    let body = CheckClientRequestBody {
        client_id: "c".into(),
        group: "cg".into(),
        namespace: None,
        subscription_data: SubscriptionData {
            expression_type: "SQL92".into(),
            sub_string: "a > 1".into(),
            topic: "T".into(),
            ..SubscriptionData::default()
        },
    };
    round_trip(&body);
    let java = concat!(
        r#"{"dataVersion":{"counter":1,"timestamp":2},"#,
        r#""mappingDataVersion":{"counter":0,"timestamp":2},"topicConfigTable":{"T":{"perm":6,"#,
        r#""readQueueNums":8,"topicName":"T","writeQueueNums":8}},"#,
        r#""topicQueueMappingDetailMap":{},"topicQueueMappingInfoMap":{},"extra":1}"#
    );
    let wrapper = TopicConfigAndMappingSerializeWrapper::decode(java.as_bytes()).unwrap();
    assert_eq!(wrapper.topic_config_table["T"].read_queue_nums, 8);
    assert_eq!(
        wrapper.mapping_data_version.as_ref().map(|v| v.timestamp),
        Some(2)
    );
    round_trip(&wrapper);
}

// Proves ConsumerRunningInfo writes both queue tables with object keys and fastjson's
// getter-derived names, and reads a Java sample (Properties values of mixed types, the
// derived-looking keys ignored).
#[test]
fn consumer_running_info() {
    let mut info = ConsumerRunningInfo::default();
    info.properties.insert(
        PROP_CONSUME_TYPE.into(),
        serde_json::Value::String("CONSUME_PASSIVELY".into()),
    );
    info.mq_table.insert(
        mq("T", 0),
        ProcessQueueInfo {
            commit_offset: 5,
            cached_msg_size_in_mib: 1,
            ..ProcessQueueInfo::default()
        },
    );
    info.status_table.insert(
        "T".into(),
        ConsumeStatus {
            pull_rt: 1.5,
            consume_ok_tps: 2.0,
            ..ConsumeStatus::default()
        },
    );
    info.subscription_set.push(SubscriptionData::default());
    let text = round_trip(&info);
    assert!(text.contains(r#""mqTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:{"#));
    assert!(text.contains(r#""cachedMsgSizeInMiB":1"#));
    assert!(text.contains(r#""consumeOKTPS":2.0"#));
    assert!(text.contains(r#""pullRT":1.5"#));
    assert!(text.contains(r#""mqPopTable":{}"#));
    let java = concat!(
        r#"{"jstack":"main","mqPopTable":{},"mqTable":{{"brokerName":"b","queueId":1,"#,
        r#""topic":"T"}:{"cachedMsgCount":3,"commitOffset":9,"locked":true}},"#,
        r#""properties":{"PROP_CONSUMER_START_TIMESTAMP":1700000000000,"#,
        r#""PROP_CONSUME_TYPE":"CONSUME_PASSIVELY"},"statusTable":{},"subscriptionSet":[],"#,
        r#""userConsumerInfo":{}}"#
    );
    let info = ConsumerRunningInfo::decode(java.as_bytes()).unwrap();
    let queue = &info.mq_table[&MessageQueue::new("T", "b", 1)];
    assert_eq!(
        (queue.cached_msg_count, queue.commit_offset, queue.locked),
        (3, 9, true)
    );
    assert_eq!(info.jstack.as_deref(), Some("main"));
}

// Proves the consume-directly result, the consumer-status body (object-keyed maps nested in
// an ordinary map) and the time-span body.
#[test]
fn client_diagnostic_bodies() {
    let result = ConsumeMessageDirectlyResult {
        consume_result: Some(CMResult::CR_SUCCESS),
        spent_time_mills: 3,
        ..ConsumeMessageDirectlyResult::default()
    };
    assert_eq!(
        round_trip(&result),
        r#"{"autoCommit":true,"consumeResult":"CR_SUCCESS","order":false,"spentTimeMills":3}"#
    );
    let mut status = GetConsumerStatusBody::default();
    status.message_queue_table.insert(mq("T", 0), 4);
    let mut offsets = QueueOffsets::default();
    offsets.0.insert(mq("T", 1), 8);
    status.consumer_table.insert("client-1".into(), offsets);
    assert_eq!(
        round_trip(&status),
        concat!(
            r#"{"consumerTable":{"client-1":{{"brokerName":"broker-a","queueId":1,"#,
            r#""topic":"T"}:8}},"messageQueueTable":{{"brokerName":"broker-a","queueId":0,"#,
            r#""topic":"T"}:4}}"#
        )
    );
    let span = QueryConsumeTimeSpanBody {
        consume_time_span_set: vec![QueueTimeSpan {
            consume_time_stamp: 1,
            delay_time: 2,
            max_time_stamp: 3,
            message_queue: mq("T", 0),
            min_time_stamp: 0,
        }],
    };
    let text = round_trip(&span);
    assert!(text.contains(r#""messageQueue":{"brokerName":"broker-a","queueId":0,"topic":"T"}"#));
}

// Proves the 5.x member-group body reads the name server's bare broker ids, and the list
// request bodies round-trip.
#[test]
fn member_group_and_list_bodies() {
    let java = concat!(
        r#"{"brokerMemberGroup":{"brokerAddrs":{0:"a:1",1:"a:2"},"brokerName":"b","#,
        r#""cluster":"c"}}"#
    );
    let body = GetBrokerMemberGroupResponseBody::decode(java.as_bytes()).unwrap();
    let group = body.broker_member_group.as_ref().unwrap();
    assert_eq!(group.broker_addrs[&1], "a:2");
    round_trip(&body);
    assert_eq!(
        round_trip(&GetBrokerMemberGroupResponseBody::default()),
        "{}"
    );
    let topics = CreateTopicListRequestBody {
        topic_config_list: vec![TopicConfig::new("A"), TopicConfig::new("B")],
    };
    assert!(round_trip(&topics).starts_with(r#"{"topicConfigList":[{"attributes":{}"#));
    let groups = SubscriptionGroupList {
        group_config_list: vec![SubscriptionGroupConfig::new("cg")],
    };
    assert!(round_trip(&groups).starts_with(r#"{"groupConfigList":[{"attributes":{}"#));
}

// Proves the inspection bodies: QueryConsumeQueueResponseBody and ConsumeStatsList read what
// Java writes (object keys inside the nested ConsumeStats, members Comet never fills) and
// write the fastjson shape; the delay-offset table reads bare level keys and writes quoted
// ones.
#[test]
fn inspection_bodies() {
    let java = concat!(
        r#"{"filterData":"cg@T is not online!","maxQueueIndex":5,"minQueueIndex":0,"#,
        r#""queueData":[{"eval":false,"physicOffset":1024,"physicSize":180,"tagsCode":7}]}"#
    );
    let body = QueryConsumeQueueResponseBody::decode(java.as_bytes()).unwrap();
    assert_eq!(body.max_queue_index, 5);
    let entries = body.queue_data.clone().unwrap();
    assert_eq!(entries[0].physic_offset, 1024);
    assert_eq!(entries[0].physic_size, 180);
    assert_eq!(round_trip(&body), java);

    let mut stats = ConsumeStats::default();
    stats.offset_table.insert(
        mq("T", 0),
        OffsetWrapper {
            broker_offset: 5,
            consumer_offset: 2,
            last_timestamp: 1_700_000_000_000,
            pull_offset: 2,
        },
    );
    let list = ConsumeStatsList {
        consume_stats_list: vec![BTreeMap::from([("cg".to_owned(), vec![stats])])],
        broker_addr: Some("127.0.0.1:10911".into()),
        total_diff: 3,
        total_inflight_diff: 0,
    };
    let text = round_trip(&list);
    assert_eq!(
        text,
        concat!(
            r#"{"brokerAddr":"127.0.0.1:10911","consumeStatsList":[{"cg":[{"consumeTps":0.0,"#,
            r#""offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:"#,
            r#"{"brokerOffset":5,"consumerOffset":2,"lastTimestamp":1700000000000,"#,
            r#""pullOffset":2}}}]}],"totalDiff":3,"totalInflightDiff":0}"#
        )
    );
    let old = r#"{"brokerAddr":"b:1","consumeStatsList":[{"g":[]}],"totalDiff":0}"#;
    let old = ConsumeStatsList::decode(old.as_bytes()).unwrap();
    assert_eq!(
        old.consume_stats_list[0]["g"].len(),
        0,
        "4.x has no inflight diff"
    );

    let java =
        "{\n\t\"dataVersion\":{\"counter\":2,\"timestamp\":1},\n\t\"offsetTable\":{1:5,2:0\n\t}\n}";
    let delay = DelayOffsetSerializeWrapper::decode(java.as_bytes()).unwrap();
    assert_eq!(delay.offset_table, BTreeMap::from([(1, 5), (2, 0)]));
    assert!(round_trip(&delay).ends_with(r#""offsetTable":{"1":5,"2":0}}"#));
}

// Proves the server-side assignment bodies as Java 5.x's fastjson writes them: the request
// with its enum by name, an answer whose assignments carry a mode (and a POP queue id -1),
// a null answer left out, and the SET_MESSAGE_REQUEST_MODE body with Java's defaults.
#[test]
fn assignment_bodies() {
    let java = concat!(
        r#"{"clientId":"10.0.0.1@1234","consumerGroup":"cg","messageModel":"CLUSTERING","#,
        r#""strategyName":"AVG","topic":"T"}"#
    );
    let request = QueryAssignmentRequestBody::decode(java.as_bytes()).unwrap();
    assert_eq!(request.message_model, Some(MessageModel::CLUSTERING));
    assert_eq!(request.strategy_name, "AVG");
    assert_eq!(round_trip(&request), java);

    let assignments = [mq("T", 1), MessageQueue::new("T", "broker-a", -1)]
        .into_iter()
        .map(|queue| MessageQueueAssignment {
            message_queue: Some(queue),
            mode: MessageRequestMode::POP,
            attachments: None,
        })
        .collect();
    let response = QueryAssignmentResponseBody {
        message_queue_assignments: Some(assignments),
    };
    assert_eq!(
        round_trip(&response),
        concat!(
            r#"{"messageQueueAssignments":[{"messageQueue":{"brokerName":"broker-a","#,
            r#""queueId":-1,"topic":"T"},"mode":"POP"},{"messageQueue":{"brokerName":"#,
            r#""broker-a","queueId":1,"topic":"T"},"mode":"POP"}]}"#
        )
    );
    assert_eq!(round_trip(&QueryAssignmentResponseBody::default()), "{}");

    let set =
        SetMessageRequestModeRequestBody::decode(br#"{"topic":"T","consumerGroup":"g"}"#).unwrap();
    assert_eq!(set.mode, MessageRequestMode::PULL);
    assert_eq!(set.pop_share_queue_num, 0);
    let set = SetMessageRequestModeRequestBody {
        mode: MessageRequestMode::POP,
        pop_share_queue_num: -1,
        ..set
    };
    let mut table = MessageRequestModeSerializeWrapper::default();
    table
        .message_request_mode_map
        .entry("T".into())
        .or_default()
        .insert("g".into(), set);
    assert_eq!(
        round_trip(&table),
        concat!(
            r#"{"messageRequestModeMap":{"T":{"g":{"consumerGroup":"g","mode":"POP","#,
            r#""popShareQueueNum":-1,"topic":"T"}}}}"#
        )
    );
    assert!(SetMessageRequestModeRequestBody::decode(br#"{"mode":"PUSH"}"#).is_err());
}
