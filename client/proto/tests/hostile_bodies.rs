//! Property tests on hostile input: typed headers from arbitrary ext fields, every JSON body
//! from arbitrary text, and compressed register bodies from arbitrary bytes. None may panic;
//! whatever decodes must re-encode to the same value.

use std::fmt::Debug;
use std::io::Write;

use comet_proto::body::*;
use comet_proto::headers::*;
use comet_proto::{CommandHeader, ExtFields};
use proptest::prelude::*;

/// Values that hit Java's parsing edge cases: signs, overflow, case, empty.
fn ext_value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("true".to_owned()),
        Just("TRUE".to_owned()),
        Just("0".to_owned()),
        Just("-1".to_owned()),
        Just("+7".to_owned()),
        Just("2147483648".to_owned()),
        Just("9223372036854775808".to_owned()),
        Just("LOWER".to_owned()),
        any::<i64>().prop_map(|n| n.to_string()),
        "[ -~]{0,12}",
    ]
}

/// Decodes `H` from random values under its own keys; a success must round-trip.
fn header_survives<H>(values: &[String]) -> Result<(), TestCaseError>
where
    H: CommandHeader + HeaderKeys + PartialEq + Debug,
{
    let mut ext = ExtFields::new();
    for ((key, _), value) in H::KEYS.iter().zip(values) {
        if !value.is_empty() || key.len() % 2 == 0 {
            ext.insert(*key, value.clone());
        }
    }
    if let Ok(header) = H::from_ext_fields(&ext) {
        let mut again = ExtFields::new();
        header.to_ext_fields(&mut again);
        prop_assert_eq!(H::from_ext_fields(&again).unwrap(), header);
    }
    Ok(())
}

/// Decodes `B` from `text`; a success must round-trip through the fastjson writer.
fn body_survives<B>(text: &str) -> Result<(), TestCaseError>
where
    B: JsonBody + PartialEq + Debug,
{
    if let Ok(body) = B::decode(text.as_bytes()) {
        let bytes = body.encode();
        prop_assert_eq!(B::decode(&bytes).unwrap(), body);
    }
    Ok(())
}

/// JSON-ish text seeded with the keys the bodies use, so the decoders go deep.
fn body_text() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("{".to_owned()),
        Just("}".to_owned()),
        Just("[".to_owned()),
        Just("]".to_owned()),
        Just(":".to_owned()),
        Just(",".to_owned()),
        Just("0".to_owned()),
        Just("1".to_owned()),
        Just("-3".to_owned()),
        Just("1.5".to_owned()),
        Just("true".to_owned()),
        Just("null".to_owned()),
        Just("\"x\"".to_owned()),
        Just("\"CONSUME_PASSIVELY\"".to_owned()),
        Just("\"consumerDataSet\"".to_owned()),
        Just("\"subscriptionDataSet\"".to_owned()),
        Just("\"subVersion\"".to_owned()),
        Just("\"offsetTable\"".to_owned()),
        Just("\"brokerName\"".to_owned()),
        Just("\"queueId\"".to_owned()),
        Just("\"topic\"".to_owned()),
        Just("\"brokerAddrs\"".to_owned()),
        Just("\"brokerDatas\"".to_owned()),
        Just("\"topicConfigTable\"".to_owned()),
        Just("\"mqTable\"".to_owned()),
        Just("\"consumerTable\"".to_owned()),
    ];
    prop::collection::vec(token, 0..48).prop_map(|tokens| tokens.concat())
}

fn zlib(plain: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(plain).unwrap();
    encoder.finish().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    // Proves typed headers never panic on arbitrary values under their keys, and that any
    // header that decodes re-encodes to itself.
    #[test]
    fn headers_survive_arbitrary_values(values in prop::collection::vec(ext_value(), 16)) {
        header_survives::<RegisterBrokerRequestHeader>(&values)?;
        header_survives::<SendMessageRequestHeader>(&values)?;
        header_survives::<SendMessageRequestHeaderV2>(&values)?;
        header_survives::<PullMessageRequestHeader>(&values)?;
        header_survives::<PullMessageResponseHeader>(&values)?;
        header_survives::<SearchOffsetRequestHeader>(&values)?;
        header_survives::<EndTransactionRequestHeader>(&values)?;
        header_survives::<ResetOffsetRequestHeader>(&values)?;
        header_survives::<PopMessageRequestHeader>(&values)?;
        header_survives::<BrokerHeartbeatRequestHeader>(&values)?;
    }

    // Proves every JSON body decoder returns (never panics) on JSON-like garbage, and that
    // whatever decodes survives the writer.
    #[test]
    fn bodies_survive_arbitrary_text(text in body_text()) {
        body_survives::<HeartbeatData>(&text)?;
        body_survives::<TopicRouteData>(&text)?;
        body_survives::<ClusterInfo>(&text)?;
        body_survives::<RegisterBrokerBody>(&text)?;
        body_survives::<ConsumeStats>(&text)?;
        body_survives::<TopicStatsTable>(&text)?;
        body_survives::<ResetOffsetBody>(&text)?;
        body_survives::<LockBatchRequestBody>(&text)?;
        body_survives::<ConsumerOffsetSerializeWrapper>(&text)?;
        body_survives::<SubscriptionGroupWrapper>(&text)?;
        body_survives::<ConsumerConnection>(&text)?;
        body_survives::<ConsumerRunningInfo>(&text)?;
        body_survives::<GetConsumerStatusBody>(&text)?;
        body_survives::<GetBrokerMemberGroupResponseBody>(&text)?;
    }

    // Proves the compressed register body decoder never panics on arbitrary bytes, raw or
    // inside a valid zlib stream.
    #[test]
    fn compressed_register_body_survives(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = RegisterBrokerBody::decode_compressed(&bytes);
        let _ = RegisterBrokerBody::decode_compressed(&zlib(&bytes));
    }

    // Proves random topic tables survive the compressed form (order and topicSysFlag are
    // not part of it, so they stay at their defaults here).
    #[test]
    fn compressed_register_body_round_trips(
        topics in prop::collection::btree_map(
            "[A-Za-z0-9_%-]{1,16}", (1i32..64, 1i32..64, 0i32..16, any::<bool>()), 0..12),
        counter in any::<i64>(),
    ) {
        let mut body = RegisterBrokerBody::default();
        let wrapper = &mut body.topic_config_serialize_wrapper;
        wrapper.data_version.counter = counter;
        for (name, (read, write, perm, multi)) in topics {
            let mut config = TopicConfig::new(name.clone());
            config.read_queue_nums = read;
            config.write_queue_nums = write;
            config.perm = perm;
            if multi {
                config.topic_filter_type = TopicFilterType::MULTI_TAG;
                config.attributes.insert("+k".into(), "v w".into());
            }
            wrapper.topic_config_table.insert(name, config);
        }
        wrapper.topic_queue_mapping_info_map = Some(Default::default());
        let decoded = RegisterBrokerBody::decode_compressed(&body.encode_compressed()).unwrap();
        prop_assert_eq!(decoded, body);
    }
}
