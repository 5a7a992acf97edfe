//! Golden byte vectors for stored records, batch bodies and properties strings (the annotated
//! `.hex` files under `tests/data/`, computed field by field from the layout of
//! docs/protocol.md#stored-message-record, not by
//! Comet's encoder), plus the properties of the send frames captured from real clients.

use std::net::SocketAddr;

use comet_proto::batch::{decode_batch, encode_batch, BatchEntry};
use comet_proto::bytes::{Bytes, BytesMut};
use comet_proto::compression::CompressionType;
use comet_proto::frame::FrameDecoder;
use comet_proto::message::{
    decode_records, decode_records_with, encode_record, DecodeOptions, RecordError, RecordSpec,
    RecordView, MAGIC_V1, MAGIC_V2,
};
use comet_proto::properties::{self, names, Properties};
use comet_proto::{Decoded, RequestCode};

/// Reads an annotated hex file: one field per line, `#` starts a comment.
fn load_hex(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let digits: String = text
        .lines()
        .map(|line| line.split('#').next().unwrap_or(""))
        .flat_map(|field| field.chars().filter(|c| !c.is_whitespace()))
        .collect();
    hex::decode(digits).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn host(text: &str) -> SocketAddr {
    text.parse().unwrap()
}

const IPV4_PROPERTIES: &str = "TAGS\u{1}TagA\u{2}KEYS\u{1}key1 key2\u{2}\
UNIQ_KEY\u{1}C0A8000A1F40000000011D4D8EC80000\u{2}WAIT\u{1}true\u{2}";

// Proves the IPv4 golden record parses to its documented fields and that the encoder
// reproduces it byte for byte.
#[test]
fn ipv4_record_golden() {
    let golden = load_hex("record-ipv4.hex");
    let view = RecordView::parse(&golden).unwrap();
    assert_eq!(view.total_size(), 188);
    assert_eq!(view.magic(), MAGIC_V1);
    assert_eq!((view.queue_id(), view.flag(), view.sysflag()), (3, 7, 0));
    assert_eq!((view.queue_offset(), view.physical_offset()), (42, 4096));
    assert_eq!(view.born_host(), host("192.168.0.10:50000"));
    assert_eq!(view.store_host(), host("10.0.0.5:10911"));
    assert_eq!(
        (view.born_timestamp(), view.store_timestamp()),
        (1_700_000_000_000, 1_700_000_000_123)
    );
    assert_eq!(view.body(), b"Hello Comet");
    assert!(view.body_crc_matches());
    assert_eq!(view.topic(), "TopicTest");
    assert_eq!(view.property(names::KEYS), Some("key1 key2"));
    assert_eq!(view.offset_msg_id(), "0A00000500002A9F0000000000001000");

    let spec = RecordSpec {
        topic: "TopicTest",
        queue_id: 3,
        flag: 7,
        sysflag: 0,
        born_timestamp: 1_700_000_000_000,
        born_host: host("192.168.0.10:50000"),
        store_host: host("10.0.0.5:10911"),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: b"Hello Comet",
        properties: IPV4_PROPERTIES,
    };
    let mut encoded = BytesMut::new();
    encode_record(&spec, 42, 4096, 1_700_000_000_123, &mut encoded).unwrap();
    assert_eq!(&encoded[..], &golden[..]);
}

// Proves the IPv6 golden record (compressed body) re-encodes exactly, and that client decoding
// inflates it and clears sysflag bit 0, or keeps it compressed when asked.
#[test]
fn ipv6_zlib_record_golden() {
    let golden = load_hex("record-ipv6-zlib.hex");
    let view = RecordView::parse(&golden).unwrap();
    assert_eq!(view.sysflag(), 0x331);
    assert_eq!(view.born_host(), host("[2001:db8::7]:50001"));
    assert_eq!(view.store_host(), host("[2001:db8::1]:10911"));
    assert_eq!(view.physical_offset(), 1 << 40);
    assert_eq!(view.reconsume_times(), 2);
    assert!(view.body_crc_matches());
    let spec = RecordSpec {
        topic: view.topic(),
        queue_id: 0,
        flag: 0,
        // The host bits come from the addresses, whatever the caller passes.
        sysflag: 0x301,
        born_timestamp: 1_700_000_001_000,
        born_host: view.born_host(),
        store_host: view.store_host(),
        reconsume_times: 2,
        prepared_transaction_offset: 0,
        body: view.body(),
        properties: view.properties(),
    };
    let mut encoded = BytesMut::new();
    encode_record(&spec, 5, 1 << 40, 1_700_000_001_500, &mut encoded).unwrap();
    assert_eq!(&encoded[..], &golden[..]);

    let messages = decode_records(Bytes::from(golden.clone()));
    assert_eq!(messages.len(), 1);
    let message = &messages[0];
    assert_eq!(message.body, "compressible ".repeat(400).as_bytes());
    assert_eq!(message.sysflag, 0x330);
    assert_eq!(message.body_compression, None);
    assert_eq!(message.msg_id.len(), 56);
    assert_eq!(message.client_msg_id().len(), 56);
    assert_eq!(message.property(names::RETRY_TOPIC), Some("TopicTest"));

    let keep = DecodeOptions {
        decompress_body: false,
        ..DecodeOptions::default()
    };
    let (kept, stop) = decode_records_with(Bytes::from(golden), &keep);
    assert!(stop.is_none());
    assert_eq!(kept[0].sysflag, 0x331);
    assert_eq!(kept[0].body_compression, Some(CompressionType::Zlib));
}

// Proves the V2 golden record (147-byte topic) parses and re-encodes with the V2 magic.
#[test]
fn v2_record_golden() {
    let golden = load_hex("record-v2.hex");
    let view = RecordView::parse(&golden).unwrap();
    assert_eq!(view.magic(), MAGIC_V2);
    assert_eq!(view.topic().len(), 147);
    assert_eq!(view.prepared_transaction_offset(), 123_456);
    assert_eq!(view.reconsume_times(), 16);
    let spec = RecordSpec {
        topic: view.topic(),
        queue_id: 0,
        flag: 0,
        sysflag: 0x8,
        born_timestamp: 1,
        born_host: host("127.0.0.1:1"),
        store_host: host("127.0.0.1:10911"),
        reconsume_times: 16,
        prepared_transaction_offset: 123_456,
        body: b"x",
        properties: "WAIT\u{1}false\u{2}",
    };
    let mut encoded = BytesMut::new();
    encode_record(&spec, 0, 0, 2, &mut encoded).unwrap();
    assert_eq!(&encoded[..], &golden[..]);
}

// Proves a pull-style body of concatenated records decodes in order, sharing the input's
// memory for plain bodies, and stops at the first undecodable record like Java.
#[test]
fn concatenated_records_stop_at_garbage() {
    let mut body = load_hex("record-ipv4.hex");
    body.extend(load_hex("record-v2.hex"));
    body.extend(load_hex("record-ipv6-zlib.hex"));
    let good_length = body.len();
    body.extend([0xDE, 0xAD, 0xBE, 0xEF, 0, 0, 0, 0, 1]);
    let input = Bytes::from(body);
    let (messages, stop) = decode_records_with(input.clone(), &DecodeOptions::default());
    assert_eq!(messages.len(), 3);
    assert_eq!(messages[0].topic, "TopicTest");
    assert_eq!(messages[0].tags(), Some("TagA"));
    assert_eq!(messages[0].keys().collect::<Vec<_>>(), ["key1", "key2"]);
    assert_eq!(
        messages[0].client_msg_id(),
        "C0A8000A1F40000000011D4D8EC80000"
    );
    assert_eq!(messages[0].msg_id, "0A00000500002A9F0000000000001000");
    let inside = input.as_ptr_range();
    assert!(
        inside.contains(&messages[0].body.as_ptr()),
        "plain body must not be copied"
    );
    let stop = stop.unwrap();
    assert_eq!(stop.offset, good_length);
    assert!(matches!(stop.error, RecordError::MagicUnknown { .. }));
}

// Proves the batch golden body decodes to its two entries and the encoder reproduces it.
#[test]
fn batch_golden() {
    let golden = load_hex("batch-two-entries.hex");
    let entries = decode_batch(&golden).unwrap();
    let expected = [
        BatchEntry {
            flag: 0,
            body: b"first body",
            properties: "UNIQ_KEY\u{1}AA\u{2}WAIT\u{1}true\u{2}",
        },
        BatchEntry {
            flag: 5,
            body: b"",
            properties: "TAGS\u{1}TagB\u{2}",
        },
    ];
    assert_eq!(entries, expected);
    let mut encoded = BytesMut::new();
    encode_batch(&expected, &mut encoded).unwrap();
    assert_eq!(&encoded[..], &golden[..]);
}

// Proves the golden properties string decodes to its four entries and re-encodes exactly.
#[test]
fn properties_golden() {
    let golden = String::from_utf8(load_hex("properties.hex")).unwrap();
    let decoded = Properties::decode(&golden);
    assert_eq!(decoded.len(), 4);
    assert_eq!(
        decoded.get(names::UNIQ_KEY),
        Some("7F0000013C2F2A97783B933428030000")
    );
    assert_eq!(decoded.get(names::WAIT), Some("true"));
    assert_eq!(decoded.encode(), golden);
}

// Proves the properties (`i` in V2 headers, `properties` in V1) of every send frame captured
// from real clients decode with Java's rules: each has TAGS=TagA, no segment is dropped, and
// re-encoding in arrival order gives back the exact string.
#[test]
fn captured_send_properties_decode() {
    let directory = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");
    let mut checked = 0;
    for entry in std::fs::read_dir(directory).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
            continue;
        }
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            let record: serde_json::Value = serde_json::from_str(line).unwrap();
            let wire = hex::decode(record["hex"].as_str().unwrap()).unwrap();
            let mut buffer = BytesMut::from(&wire[..]);
            let Some(Decoded::Command(command)) =
                FrameDecoder::default().decode(&mut buffer).unwrap()
            else {
                panic!("{}: frame did not decode", path.display())
            };
            let code = command.request_code();
            if code != RequestCode::SEND_MESSAGE && code != RequestCode::SEND_MESSAGE_V2 {
                continue;
            }
            let text = command
                .ext_fields
                .get("i")
                .or(command.ext_fields.get("properties"))
                .unwrap();
            let decoded = Properties::decode(text);
            assert_eq!(decoded.get(names::TAGS), Some("TagA"), "{}", path.display());
            assert_eq!(
                properties::iter(text).count(),
                text.matches('\u{2}').count()
            );
            assert_eq!(decoded.encode(), text, "{}", path.display());
            if let Some(key) = decoded.get(names::UNIQ_KEY) {
                assert_eq!(key.len(), 32);
                assert!(key
                    .chars()
                    .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_lowercase()));
            }
            checked += 1;
        }
    }
    assert!(
        checked >= 7,
        "expected the captured send frames, found {checked}"
    );
}
