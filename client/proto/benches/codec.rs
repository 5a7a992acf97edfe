//! Codec micro-benchmarks: a SEND_MESSAGE_V2 request with a 1 KiB body through both header
//! serializations (typed header to frame and back), a stored record encode plus
//! `RecordView::parse`, a 32 x 128-byte batch body decode and a 32-record pull body decode.
//!
//! Run: `cargo bench -p comet-proto --bench codec -- --warm-up-time 1 --measurement-time 3`.

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use std::hint::black_box;

use comet_proto::batch::{decode_batch, encode_batch, BatchEntry};
use comet_proto::bytes::{Bytes, BytesMut};
use comet_proto::frame::{encode, FrameDecoder};
use comet_proto::headers::send::SendMessageRequestHeaderV2;
use comet_proto::message::{decode_records, encode_record, RecordSpec, RecordView};
use comet_proto::{CommandHeader, Decoded, RemotingCommand, RequestCode, SerializeType};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

const PROPERTIES: &str = "TAGS\u{1}TagA\u{2}KEYS\u{1}order-42\u{2}\
UNIQ_KEY\u{1}C0A8000A1F40000000011D4D8EC80000\u{2}WAIT\u{1}true\u{2}";

fn send_header() -> SendMessageRequestHeaderV2 {
    SendMessageRequestHeaderV2 {
        producer_group: "bench_producer_group".to_owned(),
        topic: "BenchTopic".to_owned(),
        default_topic: "TBW102".to_owned(),
        default_topic_queue_nums: 4,
        queue_id: 3,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_000,
        flag: 0,
        properties: Some(PROPERTIES.to_owned()),
        reconsume_times: Some(0),
        unit_mode: Some(false),
        max_reconsume_times: None,
        batch: Some(false),
        broker_name: Some("broker-a".to_owned()),
    }
}

/// Typed header to ext fields to frame bytes, then frame bytes back to a typed header.
fn send_round_trip(serialize_type: SerializeType, body: &Bytes, frame: &mut BytesMut) {
    let mut request = RemotingCommand::request(RequestCode::SEND_MESSAGE_V2, 7)
        .with_header(&send_header())
        .with_body(body.clone());
    request.serialize_type = serialize_type;
    frame.clear();
    encode(&request, frame);
    let Ok(Some(Decoded::Command(decoded))) = FrameDecoder::default().decode(frame) else {
        panic!("benchmark frame did not decode")
    };
    let header = SendMessageRequestHeaderV2::from_ext_fields(&decoded.ext_fields).unwrap();
    black_box((header, decoded.body));
}

fn bench_send(c: &mut Criterion) {
    let body = Bytes::from(vec![b'x'; 1024]);
    let mut group = c.benchmark_group("send_message_v2_1KiB");
    group.throughput(Throughput::Elements(1));
    for (name, kind) in [
        ("json", SerializeType::Json),
        ("rocketmq", SerializeType::RocketMq),
    ] {
        let mut frame = BytesMut::with_capacity(4096);
        group.bench_function(name, |b| {
            b.iter(|| send_round_trip(kind, &body, &mut frame))
        });
    }
    group.finish();
}

fn record_spec(body: &[u8]) -> RecordSpec<'_> {
    RecordSpec {
        topic: "BenchTopic",
        queue_id: 3,
        flag: 0,
        sysflag: 0,
        born_timestamp: 1_700_000_000_000,
        born_host: "192.168.0.10:50000".parse().unwrap(),
        store_host: "10.0.0.5:10911".parse().unwrap(),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body,
        properties: PROPERTIES,
    }
}

fn bench_record(c: &mut Criterion) {
    let body = vec![b'x'; 1024];
    let spec = record_spec(&body);
    let mut buffer = BytesMut::with_capacity(2048);
    let mut group = c.benchmark_group("record_1KiB");
    group.throughput(Throughput::Elements(1));
    group.bench_function("encode_and_parse", |b| {
        b.iter(|| {
            buffer.clear();
            encode_record(black_box(&spec), 42, 4096, 1_700_000_000_123, &mut buffer).unwrap();
            let view = RecordView::parse(&buffer).unwrap();
            black_box((view.queue_offset(), view.topic(), view.body().len()));
        })
    });
    group.bench_function("parse_and_check_crc", |b| {
        b.iter(|| {
            let view = RecordView::parse(black_box(&buffer)).unwrap();
            black_box(view.body_crc_matches());
        })
    });
    group.finish();
}

fn bench_batch(c: &mut Criterion) {
    let bodies: Vec<Vec<u8>> = (0..32u8).map(|i| vec![i; 128]).collect();
    let entries: Vec<BatchEntry<'_>> = bodies
        .iter()
        .map(|body| BatchEntry {
            flag: 0,
            body,
            properties: PROPERTIES,
        })
        .collect();
    let mut batch = BytesMut::new();
    encode_batch(&entries, &mut batch).unwrap();
    let mut pull_body = BytesMut::new();
    for (offset, body) in (0i64..).zip(&bodies) {
        encode_record(&record_spec(body), offset, offset * 300, 0, &mut pull_body).unwrap();
    }
    let pull_body = pull_body.freeze();
    let mut group = c.benchmark_group("32x128B");
    group.throughput(Throughput::Elements(32));
    group.bench_function("batch_decode", |b| {
        b.iter(|| black_box(decode_batch(black_box(&batch)).unwrap().len()))
    });
    group.bench_function("pull_body_decode_records", |b| {
        b.iter(|| black_box(decode_records(pull_body.clone()).len()))
    });
    group.finish();
}

criterion_group!(benches, bench_send, bench_record, bench_batch);
criterion_main!(benches);
