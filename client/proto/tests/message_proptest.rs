//! Property tests: decoders never panic on arbitrary or mutated input, and encode then decode
//! is the identity for records, batches, properties, offset message ids and tag expressions.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use comet_proto::batch::{decode_batch, encode_batch, iter_batch, BatchEntry};
use comet_proto::bytes::{Bytes, BytesMut};
use comet_proto::filter::{java_string_hash, TagSubscription};
use comet_proto::message::{
    decode_records, encode_record, record_length, RecordSpec, RecordView, MAGIC_V1, MAGIC_V2,
};
use comet_proto::message_id::{decode_offset_msg_id, encode_offset_msg_id};
use comet_proto::properties::{self, Properties};
use proptest::prelude::*;

fn socket_address() -> impl Strategy<Value = SocketAddr> {
    prop_oneof![
        (any::<[u8; 4]>(), any::<u16>())
            .prop_map(|(ip, port)| SocketAddr::new(IpAddr::V4(Ipv4Addr::from(ip)), port)),
        (any::<[u8; 16]>(), any::<u16>())
            .prop_map(|(ip, port)| SocketAddr::new(IpAddr::V6(Ipv6Addr::from(ip)), port)),
    ]
}

/// Property names and values: non-empty and free of the two separators, as Java requires for
/// a lossless round trip.
fn property_text() -> impl Strategy<Value = String> {
    "[^\u{1}\u{2}]{1,12}"
}

fn properties_map() -> impl Strategy<Value = Properties> {
    prop::collection::vec((property_text(), property_text()), 0..8)
        .prop_map(|pairs| pairs.into_iter().collect())
}

#[derive(Debug, Clone)]
struct RecordInput {
    topic: String,
    queue_id: i32,
    flag: i32,
    sysflag: i32,
    born_timestamp: i64,
    born_host: SocketAddr,
    store_host: SocketAddr,
    reconsume_times: i32,
    prepared_transaction_offset: i64,
    body: Vec<u8>,
    properties: String,
    queue_offset: i64,
    physical_offset: i64,
    store_timestamp: i64,
}

fn record_input() -> impl Strategy<Value = RecordInput> {
    (
        (
            "[a-zA-Z0-9_%-]{1,200}",
            any::<i32>(),
            any::<i32>(),
            0i32..0x800,
            any::<i64>(),
        ),
        (
            socket_address(),
            socket_address(),
            any::<i32>(),
            any::<i64>(),
        ),
        (prop::collection::vec(any::<u8>(), 0..300), properties_map()),
        (any::<i64>(), any::<i64>(), any::<i64>()),
    )
        .prop_map(|(head, hosts, payload, offsets)| RecordInput {
            topic: head.0,
            queue_id: head.1,
            flag: head.2,
            // Keep bit 0 clear: a "compressed" random body is not a zlib stream.
            sysflag: head.3 & !1,
            born_timestamp: head.4,
            born_host: hosts.0,
            store_host: hosts.1,
            reconsume_times: hosts.2,
            prepared_transaction_offset: hosts.3,
            body: payload.0,
            properties: payload.1.encode(),
            queue_offset: offsets.0,
            physical_offset: offsets.1,
            store_timestamp: offsets.2,
        })
}

fn encode(input: &RecordInput) -> BytesMut {
    let spec = RecordSpec {
        topic: &input.topic,
        queue_id: input.queue_id,
        flag: input.flag,
        sysflag: input.sysflag,
        born_timestamp: input.born_timestamp,
        born_host: input.born_host,
        store_host: input.store_host,
        reconsume_times: input.reconsume_times,
        prepared_transaction_offset: input.prepared_transaction_offset,
        body: &input.body,
        properties: &input.properties,
    };
    let mut buffer = BytesMut::new();
    let length = encode_record(
        &spec,
        input.queue_offset,
        input.physical_offset,
        input.store_timestamp,
        &mut buffer,
    )
    .unwrap();
    assert_eq!(length, buffer.len());
    buffer
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    // Proves RecordView::parse and decode_records never panic on arbitrary bytes.
    #[test]
    fn record_decoders_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        if let Ok(view) = RecordView::parse(&bytes) {
            let _ = (view.born_host(), view.store_host(), view.body_crc_matches());
        }
        let _ = decode_records(Bytes::from(bytes));
    }

    // Proves parsing survives any single-byte mutation of a valid record: either an error or a
    // view whose accessors all work and whose size still matches record_length.
    #[test]
    fn mutated_records_never_panic(
        input in record_input(),
        at in any::<prop::sample::Index>(),
        value in any::<u8>(),
    ) {
        let mut bytes = encode(&input).to_vec();
        let position = at.index(bytes.len());
        bytes[position] = value;
        if let Ok(view) = RecordView::parse(&bytes) {
            let _ = (view.born_host(), view.store_host(), view.store_timestamp());
            let _ = (view.reconsume_times(), view.prepared_transaction_offset());
            let expected = record_length(view.sysflag(), view.body().len(), view.topic().len(),
                view.properties().len(), view.magic() == MAGIC_V2);
            prop_assert_eq!(view.total_size(), expected);
        }
        let _ = decode_records(Bytes::from(bytes));
    }

    // Proves encode then parse returns every field (IPv4/IPv6, V1/V2, any values).
    #[test]
    fn record_round_trip(input in record_input()) {
        let bytes = encode(&input);
        let view = RecordView::parse(&bytes).unwrap();
        prop_assert_eq!(view.magic(), if input.topic.len() > 127 { MAGIC_V2 } else { MAGIC_V1 });
        prop_assert_eq!(view.topic(), input.topic.as_str());
        prop_assert_eq!((view.queue_id(), view.flag()), (input.queue_id, input.flag));
        prop_assert_eq!(view.sysflag() & !0x30, input.sysflag & !0x30);
        prop_assert_eq!(view.born_host(), input.born_host);
        prop_assert_eq!(view.store_host(), input.store_host);
        prop_assert_eq!(view.born_timestamp(), input.born_timestamp);
        prop_assert_eq!(view.store_timestamp(), input.store_timestamp);
        prop_assert_eq!(view.queue_offset(), input.queue_offset);
        prop_assert_eq!(view.physical_offset(), input.physical_offset);
        prop_assert_eq!(view.reconsume_times(), input.reconsume_times);
        prop_assert_eq!(view.prepared_transaction_offset(), input.prepared_transaction_offset);
        prop_assert_eq!(view.body(), &input.body[..]);
        prop_assert_eq!(view.properties(), input.properties.as_str());
        prop_assert!(view.body_crc_matches());
        let messages = decode_records(bytes.freeze());
        prop_assert_eq!(messages.len(), 1);
        prop_assert_eq!(&messages[0].body[..], &input.body[..]);
        prop_assert_eq!(messages[0].properties.encode(), input.properties);
    }

    // Proves batch decoders never panic and batch encode then decode is the identity.
    #[test]
    fn batch_round_trip(
        garbage in prop::collection::vec(any::<u8>(), 0..256),
        bodies in prop::collection::vec(
            (any::<i32>(), prop::collection::vec(any::<u8>(), 0..64), properties_map()),
            0..8,
        ),
    ) {
        let _ = decode_batch(&garbage);
        let _ = iter_batch(&garbage).count();
        let texts: Vec<String> = bodies.iter().map(|(_, _, p)| p.encode()).collect();
        let entries: Vec<BatchEntry<'_>> = bodies.iter().zip(&texts)
            .map(|((flag, body, _), text)| BatchEntry { flag: *flag, body, properties: text })
            .collect();
        let mut buffer = BytesMut::new();
        encode_batch(&entries, &mut buffer).unwrap();
        prop_assert_eq!(decode_batch(&buffer).unwrap(), entries);
    }

    // Proves the properties decoder never panics on arbitrary text and round-trips valid maps.
    #[test]
    fn properties_round_trip(text in "[a-c\u{1}\u{2} ]{0,64}", map in properties_map()) {
        let decoded = Properties::decode(&text);
        for (name, value) in decoded.iter() {
            prop_assert!(!name.is_empty() && !value.is_empty());
            let separator = properties::PROPERTY_SEPARATOR;
            prop_assert!(!name.contains(separator) && !value.contains(separator));
            prop_assert_eq!(properties::get(&text, name), Some(value));
        }
        prop_assert_eq!(Properties::decode(&map.encode()), map);
    }

    // Proves offset message ids round-trip for every address and offset, and decoding
    // arbitrary text never panics.
    #[test]
    fn offset_msg_id_round_trip(
        host in socket_address(),
        offset in any::<i64>(),
        text in "\\PC{0,60}",
    ) {
        let id = encode_offset_msg_id(host, offset);
        let decoded = decode_offset_msg_id(&id).unwrap();
        prop_assert_eq!((decoded.store_host, decoded.commit_log_offset), (host, offset));
        prop_assert_eq!(id.to_uppercase(), id);
        let _ = decode_offset_msg_id(&text);
    }

    // Proves tag expressions: every listed tag matches by code and by name.
    #[test]
    fn tag_expression_lists(tags in prop::collection::vec("[A-Za-z0-9_]{1,10}", 1..6)) {
        let expression = tags.join(" || ");
        let subscription = TagSubscription::parse(Some(&expression));
        for tag in &tags {
            prop_assert!(subscription.matches(i64::from(java_string_hash(tag))));
            prop_assert!(subscription.matches_tags(Some(tag)));
        }
    }
}
