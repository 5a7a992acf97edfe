//! Client and broker headers: ext-field round trips with every field set, missing required
//! fields named by their Java key, V1/V2 send header equivalence, and decoding of the
//! headers real clients sent (the captured frames under `tests/data/`).

mod common;

use comet_proto::headers::*;
use comet_proto::{CommandHeader, HeaderError, RemotingCommand, RequestCode};
use common::{check_header, ext};

fn send_header() -> SendMessageRequestHeader {
    SendMessageRequestHeader {
        producer_group: "pg".into(),
        topic: "TopicTest".into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 3,
        sys_flag: 0,
        born_timestamp: 1_795_960_828_956,
        flag: 0,
        properties: Some("TAGS\u{1}TagA\u{2}".into()),
        reconsume_times: Some(0),
        unit_mode: Some(false),
        batch: Some(false),
        max_reconsume_times: Some(16),
        broker_name: Some("broker-a".into()),
    }
}

// Proves both send header forms round-trip with every field, report missing required keys
// by name, and convert into each other field for field.
#[test]
fn send_headers_round_trip_and_convert() {
    let v1 = send_header();
    check_header(&v1);
    let v2 = SendMessageRequestHeaderV2::from(v1.clone());
    check_header(&v2);
    assert_eq!(SendMessageRequestHeader::from(v2.clone()), v1);
    let mut fields = comet_proto::ExtFields::new();
    v2.to_ext_fields(&mut fields);
    assert_eq!(fields.get("b"), Some("TopicTest"));
    assert_eq!(fields.get("n"), Some("broker-a"));
    assert_eq!(fields.get("g"), Some("1795960828956"));
    let mut v1_fields = comet_proto::ExtFields::new();
    v1.to_ext_fields(&mut v1_fields);
    assert_eq!(v1_fields.get("bname"), Some("broker-a"));

    let request = RemotingCommand::request(RequestCode::SEND_BATCH_MESSAGE, 1).with_header(&v2);
    assert_eq!(decode_send_request(&request), Ok(v1.clone()));
    let request = RemotingCommand::request(RequestCode::SEND_MESSAGE, 1).with_header(&v1);
    assert_eq!(decode_send_request(&request), Ok(v1));
    let empty = RemotingCommand::request(RequestCode::SEND_MESSAGE_V2, 1);
    assert_eq!(
        decode_send_request(&empty),
        Err(HeaderError::Missing { field: "a" })
    );
    check_header(&SendMessageResponseHeader {
        msg_id: "7F00000100002A9F0000000000000000".into(),
        queue_id: 1,
        queue_offset: 9,
        transaction_id: Some("u".into()),
        batch_uniq_id: Some("b".into()),
        recall_handle: Some("r".into()),
    });
}

// Proves the pull, offset and lookup headers round-trip and name missing keys.
#[test]
fn pull_and_offset_headers_round_trip() {
    check_header(&PullMessageRequestHeader {
        consumer_group: "cg".into(),
        topic: "T".into(),
        queue_id: 1,
        queue_offset: 10,
        max_msg_nums: 32,
        sys_flag: 6,
        commit_offset: 0,
        suspend_timeout_millis: 15_000,
        subscription: Some("*".into()),
        sub_version: 1_795_960_958_067,
        expression_type: Some("TAG".into()),
        max_msg_bytes: Some(262_144),
        request_source: Some(-1),
        proxy_froward_client_id: Some("p".into()),
        broker_name: Some("broker-a".into()),
        logical: Some(false),
    });
    check_header(&PullMessageResponseHeader {
        suggest_which_broker_id: 0,
        next_begin_offset: 11,
        min_offset: 0,
        max_offset: 11,
        offset_delta: Some(0),
        topic_sys_flag: Some(0),
        group_sys_flag: Some(0),
        forbidden_type: Some(1),
    });
    check_header(&QueryConsumerOffsetRequestHeader {
        consumer_group: "cg".into(),
        topic: "T".into(),
        queue_id: 0,
        set_zero_if_not_found: Some(false),
        broker_name: Some("b".into()),
    });
    check_header(&QueryConsumerOffsetResponseHeader { offset: 5 });
    check_header(&UpdateConsumerOffsetRequestHeader {
        consumer_group: "cg".into(),
        topic: "T".into(),
        queue_id: 0,
        commit_offset: 7,
        broker_name: Some("b".into()),
    });
    check_header(&UpdateConsumerOffsetResponseHeader {});
}

// Proves the max/min/search/earliest offset and message lookup headers round-trip.
#[test]
fn offset_query_and_lookup_headers_round_trip() {
    check_header(&GetMaxOffsetRequestHeader {
        topic: "T".into(),
        queue_id: 0,
        committed: Some(true),
        broker_name: Some("b".into()),
        logical: Some(true),
    });
    check_header(&GetMaxOffsetResponseHeader { offset: 1 });
    check_header(&GetMinOffsetRequestHeader {
        topic: "T".into(),
        queue_id: 0,
        broker_name: Some("b".into()),
        logical: Some(false),
    });
    check_header(&GetMinOffsetResponseHeader { offset: 0 });
    check_header(&SearchOffsetRequestHeader {
        topic: "T".into(),
        queue_id: 0,
        timestamp: 1_700_000_000_000,
        boundary_type: Some(BoundaryType::Upper),
        broker_name: Some("b".into()),
        logical: Some(false),
    });
    check_header(&SearchOffsetResponseHeader { offset: 3 });
    check_header(&GetEarliestMsgStoretimeRequestHeader {
        topic: "T".into(),
        queue_id: 2,
        broker_name: Some("b".into()),
        logical: Some(false),
    });
    check_header(&GetEarliestMsgStoretimeResponseHeader { timestamp: 99 });
    check_header(&QueryMessageRequestHeader {
        topic: "T".into(),
        key: "k".into(),
        max_num: 32,
        begin_timestamp: 0,
        end_timestamp: i64::MAX,
        unique_key_query: Some(true),
        broker_name: Some("b".into()),
    });
    check_header(&QueryMessageResponseHeader {
        index_last_update_timestamp: 1,
        index_last_update_phyoffset: 2,
    });
    check_header(&ViewMessageRequestHeader {
        offset: 1234,
        topic: Some("T".into()),
        broker_name: Some("b".into()),
    });
}

// Proves the 5.x base keys read from any request alongside its own header, and round-trip.
#[test]
fn rpc_base_keys() {
    check_header(&RpcRequestBase {
        namespace: Some("ns1".into()),
        namespaced: Some(true),
        broker_name: Some("broker-a".into()),
        oneway: Some(false),
        logical: Some(false),
    });
    let fields = ext(&[
        ("topic", "T"),
        ("queueId", "1"),
        ("bname", "broker-b"),
        ("oway", "true"),
    ]);
    let base = RpcRequestBase::from_ext_fields(&fields).unwrap();
    assert_eq!(base.broker_name.as_deref(), Some("broker-b"));
    assert_eq!(base.oneway, Some(true));
    assert_eq!(base.namespace, None);
    let own = GetMinOffsetRequestHeader::from_ext_fields(&fields).unwrap();
    assert_eq!(own.broker_name, base.broker_name);
}

// Proves the boundary type enum is read case-insensitively and an unknown name is a typed
// error naming the key.
#[test]
fn boundary_type_parsing() {
    let fields = ext(&[
        ("topic", "T"),
        ("queueId", "0"),
        ("timestamp", "5"),
        ("boundaryType", "lower"),
    ]);
    let header = SearchOffsetRequestHeader::from_ext_fields(&fields).unwrap();
    assert_eq!(header.boundary_type, Some(BoundaryType::Lower));
    let mut fields = fields;
    fields.insert("boundaryType", "MIDDLE");
    assert!(matches!(
        SearchOffsetRequestHeader::from_ext_fields(&fields),
        Err(HeaderError::Invalid {
            field: "boundaryType",
            ..
        })
    ));
}

// Proves the membership, send-back and transaction headers round-trip.
#[test]
fn membership_and_transaction_headers_round_trip() {
    check_header(&UnregisterClientRequestHeader {
        client_id: "127.0.0.1@1".into(),
        producer_group: Some("pg".into()),
        consumer_group: Some("cg".into()),
    });
    check_header(&GetConsumerListByGroupRequestHeader {
        consumer_group: "cg".into(),
        broker_name: Some("b".into()),
    });
    check_header(&NotifyConsumerIdsChangedRequestHeader {
        consumer_group: "cg".into(),
    });
    check_header(&ConsumerSendMsgBackRequestHeader {
        offset: 100,
        group: "cg".into(),
        delay_level: 0,
        origin_msg_id: Some("id".into()),
        origin_topic: Some("T".into()),
        unit_mode: Some(false),
        max_reconsume_times: Some(16),
        broker_name: Some("b".into()),
    });
    check_header(&EndTransactionRequestHeader {
        topic: Some("T".into()),
        producer_group: "pg".into(),
        tran_state_table_offset: 1,
        commit_log_offset: 2,
        commit_or_rollback: 8,
        from_transaction_check: Some(true),
        msg_id: "u".into(),
        transaction_id: Some("u".into()),
        broker_name: Some("b".into()),
    });
    check_header(&CheckTransactionStateRequestHeader {
        topic: Some("T".into()),
        tran_state_table_offset: 1,
        commit_log_offset: 2,
        msg_id: Some("u".into()),
        transaction_id: Some("u".into()),
        offset_msg_id: Some("o".into()),
        broker_name: Some("b".into()),
    });
}

// Proves the admin and broker-to-client headers round-trip.
#[test]
fn admin_headers_round_trip() {
    check_header(&CreateTopicRequestHeader {
        topic: "T".into(),
        default_topic: "TBW102".into(),
        read_queue_nums: 8,
        write_queue_nums: 8,
        perm: 6,
        topic_filter_type: "SINGLE_TAG".into(),
        topic_sys_flag: Some(0),
        order: false,
        attributes: Some("+message.type=NORMAL".into()),
        force: Some(false),
    });
    check_header(&DeleteTopicRequestHeader { topic: "T".into() });
    check_header(&GetAllTopicConfigRequestHeader {
        topic_seq: Some(0),
        data_version: Some("{}".into()),
        max_topic_num: Some(100),
    });
    check_header(&GetAllTopicConfigResponseHeader {
        total_topic_num: Some(3),
    });
    check_header(&GetTopicStatsInfoRequestHeader {
        topic: "T".into(),
        broker_name: Some("b".into()),
    });
    check_header(&GetConsumeStatsRequestHeader {
        consumer_group: "cg".into(),
        topic: Some("T".into()),
        topic_list: Some("A;B".into()),
        broker_name: Some("b".into()),
    });
    check_header(&GetConsumerConnectionListRequestHeader {
        consumer_group: "cg".into(),
    });
    check_header(&GetProducerConnectionListRequestHeader {
        producer_group: "pg".into(),
    });
}

// Proves the reset, group, paging, HA, reply and diagnostic headers round-trip.
#[test]
fn admin_offset_and_diagnostic_headers_round_trip() {
    check_header(&ResetOffsetRequestHeader {
        topic: "T".into(),
        group: "cg".into(),
        queue_id: Some(-1),
        offset: Some(5),
        timestamp: -1,
        is_force: true,
    });
    check_header(&DeleteSubscriptionGroupRequestHeader {
        group_name: "cg".into(),
        clean_offset: Some(true),
    });
    check_header(&QueryTopicConsumeByWhoRequestHeader { topic: "T".into() });
    check_header(&GetConsumerRunningInfoRequestHeader {
        consumer_group: "cg".into(),
        client_id: "c".into(),
        jstack_enable: Some(false),
    });
    check_header(&ConsumeMessageDirectlyResultRequestHeader {
        consumer_group: "cg".into(),
        client_id: Some("c".into()),
        msg_id: Some("m".into()),
        broker_name: Some("b".into()),
        topic: Some("T".into()),
        topic_sys_flag: Some(0),
        group_sys_flag: Some(0),
    });
    check_header(&GetAllSubscriptionGroupRequestHeader {
        group_seq: Some(0),
        data_version: Some("{}".into()),
        max_group_num: Some(50),
    });
    check_header(&GetAllSubscriptionGroupResponseHeader {
        total_group_num: Some(4),
    });
    check_header(&QueryConsumeTimeSpanRequestHeader {
        topic: "T".into(),
        group: "cg".into(),
    });
}

// Proves the inspection headers (QUERY_CONSUME_QUEUE, GET_BROKER_CONSUME_STATS,
// CLONE_GROUP_OFFSET) round-trip under Java's keys and name a missing required key.
#[test]
fn inspection_headers_round_trip() {
    check_header(&QueryConsumeQueueRequestHeader {
        topic: "T".into(),
        queue_id: 2,
        index: 6447,
        count: 10,
        consumer_group: Some("cg".into()),
    });
    check_header(&GetConsumeStatsInBrokerHeader { is_order: true });
    check_header(&CloneGroupOffsetRequestHeader {
        src_group: "a".into(),
        dest_group: "b".into(),
        topic: Some("T".into()),
        offline: Some(false),
    });
    let java = ext(&[("isOrder", "false")]);
    let header = GetConsumeStatsInBrokerHeader::from_ext_fields(&java).unwrap();
    assert!(!header.is_order);
    let missing = ext(&[("topic", "T"), ("queueId", "0"), ("index", "0")]);
    assert_eq!(
        QueryConsumeQueueRequestHeader::from_ext_fields(&missing),
        Err(HeaderError::Missing { field: "count" })
    );
    let missing = ext(&[("srcGroup", "a")]);
    assert_eq!(
        CloneGroupOffsetRequestHeader::from_ext_fields(&missing),
        Err(HeaderError::Missing { field: "destGroup" })
    );
}

// Proves the 5.x HA-info, request-reply and consumer-status headers round-trip.
#[test]
fn ha_and_reply_headers_round_trip() {
    check_header(&ExchangeHAInfoRequestHeader {
        master_ha_address: Some("a:10912".into()),
        master_flush_offset: Some(100),
        master_address: Some("a:10911".into()),
    });
    check_header(&ExchangeHAInfoResponseHeader {
        master_ha_address: Some("a:10912".into()),
        master_flush_offset: Some(100),
        master_address: Some("a:10911".into()),
    });
    check_header(&ReplyMessageRequestHeader {
        producer_group: "pg".into(),
        topic: "T".into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 0,
        sys_flag: 0,
        born_timestamp: 1,
        flag: 0,
        properties: Some("a\u{1}b\u{2}".into()),
        reconsume_times: Some(0),
        unit_mode: Some(false),
        born_host: "127.0.0.1:5000".into(),
        store_host: "127.0.0.1:10911".into(),
        store_timestamp: 2,
    });
    check_header(&GetConsumerStatusRequestHeader {
        topic: "T".into(),
        group: "cg".into(),
        client_addr: Some("1.2.3.4:5".into()),
    });
}

// Proves the pop headers round-trip.
#[test]
fn pop_headers_round_trip() {
    check_header(&PopMessageRequestHeader {
        consumer_group: "cg".into(),
        topic: "T".into(),
        queue_id: -1,
        max_msg_nums: 32,
        invisible_time: 60_000,
        poll_time: 15_000,
        born_time: 1,
        init_mode: 0,
        exp_type: Some("TAG".into()),
        exp: Some("*".into()),
        order: Some(false),
        attempt_id: Some("a".into()),
        broker_name: Some("b".into()),
    });
    check_header(&PopMessageResponseHeader {
        pop_time: 1,
        invisible_time: 2,
        revive_qid: 3,
        rest_num: 4,
        start_offset_info: Some("0 1 5".into()),
        msg_offset_info: Some("0 1 5,6".into()),
        order_count_info: Some("0 1 0".into()),
    });
    check_header(&PeekMessageRequestHeader {
        consumer_group: "cg".into(),
        topic: "T".into(),
        queue_id: 0,
        max_msg_nums: 1,
    });
    check_header(&AckMessageRequestHeader {
        consumer_group: "cg".into(),
        topic: "T".into(),
        queue_id: 0,
        extra_info: "0 1 60000 3 0 b 0 5".into(),
        offset: 5,
        broker_name: Some("b".into()),
    });
}

// Proves the invisible-time, notification and polling headers round-trip.
#[test]
fn pop_ack_and_notification_headers_round_trip() {
    check_header(&ChangeInvisibleTimeRequestHeader {
        consumer_group: "cg".into(),
        topic: "T".into(),
        queue_id: 0,
        extra_info: "x".into(),
        offset: 5,
        invisible_time: 1000,
        broker_name: Some("b".into()),
    });
    check_header(&ChangeInvisibleTimeResponseHeader {
        pop_time: 1,
        invisible_time: 2,
        revive_qid: 3,
    });
    check_header(&NotificationRequestHeader {
        consumer_group: "cg".into(),
        topic: "T".into(),
        queue_id: 0,
        poll_time: 1,
        born_time: 2,
        order: Some(false),
        attempt_id: Some("a".into()),
        broker_name: Some("b".into()),
    });
    check_header(&NotificationResponseHeader {
        has_msg: true,
        polling_full: Some(false),
    });
    check_header(&PollingInfoRequestHeader {
        consumer_group: "cg".into(),
        topic: "T".into(),
        queue_id: 0,
    });
    check_header(&PollingInfoResponseHeader { polling_num: 2 });
}

/// Decodes the typed request header of one captured frame, by code.
fn decode_captured(command: &RemotingCommand) -> Result<(), HeaderError> {
    match command.request_code() {
        RequestCode::GET_ROUTEINFO_BY_TOPIC => {
            let header: GetRouteInfoRequestHeader = command.decode_header()?;
            let known = ["TopicTest", "TBW102"].contains(&header.topic.as_str());
            assert!(
                known || header.topic.starts_with("%RETRY%"),
                "{}",
                header.topic
            );
        }
        RequestCode::SEND_MESSAGE | RequestCode::SEND_MESSAGE_V2 => {
            let header = decode_send_request(command)?;
            assert_eq!(header.topic, "TopicTest");
            assert_eq!(header.default_topic, "TBW102");
            assert_eq!(header.default_topic_queue_nums, 4);
            assert!(header.born_timestamp > 1_700_000_000_000);
            assert_ne!(header.batch, Some(true));
        }
        RequestCode::UNREGISTER_CLIENT => {
            let header: UnregisterClientRequestHeader = command.decode_header()?;
            assert!(!header.client_id.is_empty());
        }
        RequestCode::GET_CONSUMER_LIST_BY_GROUP => {
            let header: GetConsumerListByGroupRequestHeader = command.decode_header()?;
            assert!(header.consumer_group.starts_with("compat_"));
        }
        RequestCode::QUERY_CONSUMER_OFFSET => {
            let header: QueryConsumerOffsetRequestHeader = command.decode_header()?;
            assert!(header.queue_id >= 0);
        }
        RequestCode::UPDATE_CONSUMER_OFFSET => {
            let header: UpdateConsumerOffsetRequestHeader = command.decode_header()?;
            assert!(header.commit_offset >= -1, "clients commit -1 for unknown");
        }
        RequestCode::PULL_MESSAGE => {
            let header: PullMessageRequestHeader = command.decode_header()?;
            assert_eq!(header.max_msg_nums, 32);
            assert_eq!(header.suspend_timeout_millis, 15_000);
        }
        RequestCode::HEART_BEAT => {}
        other => panic!("unexpected captured code {other}"),
    }
    Ok(())
}

// Proves the typed headers decode every request header the C++, JS and Rust clients sent
// in the captures (numbers as JSON numbers or strings, booleans as "0"/"false", auth keys).
#[test]
fn captured_client_headers_decode() {
    let mut decoded = 0;
    for command in common::captured_commands() {
        decode_captured(&command).unwrap_or_else(|e| panic!("code {}: {e}", command.code));
        decoded += 1;
    }
    assert!(decoded > 100, "only {decoded} captured frames");
}
