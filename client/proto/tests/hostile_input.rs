//! Garbage and lying lengths must give typed errors without large allocations.
//!
//! A counting global allocator records, per thread, the largest single allocation made while
//! each case runs, so tests running in parallel threads do not blur each other's figures.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use comet_proto::batch::decode_batch;
use comet_proto::bytes::{Bytes, BytesMut};
use comet_proto::compression::{zlib_compress, CompressionError};
use comet_proto::message::{
    decode_records_with, encode_record, DecodeOptions, RecordError, RecordSpec, RecordView,
    MAGIC_V1,
};
use comet_proto::properties::Properties;

struct CountingAllocator;

thread_local! {
    // Const-initialised, so reading it inside the allocator never allocates.
    static LARGEST_ALLOCATION_BYTES: Cell<usize> = const { Cell::new(0) };
}

fn note_allocation(size: usize) {
    // `try_with` fails only during thread teardown, when nothing is being measured.
    let _ = LARGEST_ALLOCATION_BYTES.try_with(|largest| largest.set(largest.get().max(size)));
}

unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_allocation(layout.size());
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(pointer, layout) }
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_allocation(new_size);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.realloc(pointer, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// Runs `case` and returns the largest allocation it made.
fn largest_allocation(case: impl FnOnce()) -> usize {
    LARGEST_ALLOCATION_BYTES.with(|largest| largest.set(0));
    case();
    LARGEST_ALLOCATION_BYTES.with(Cell::get)
}

fn sample_record(body: &[u8], sysflag: i32) -> Vec<u8> {
    let spec = RecordSpec {
        topic: "T",
        queue_id: 0,
        flag: 0,
        sysflag,
        born_timestamp: 0,
        born_host: "127.0.0.1:1".parse().unwrap(),
        store_host: "127.0.0.1:2".parse().unwrap(),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body,
        properties: "a\u{1}b\u{2}",
    };
    let mut buffer = BytesMut::new();
    encode_record(&spec, 0, 0, 0, &mut buffer).unwrap();
    buffer.to_vec()
}

/// A mutated record and the check its error must pass.
type Case = (Vec<u8>, fn(&RecordError) -> bool);

fn with_i32(mut bytes: Vec<u8>, at: usize, value: i32) -> Vec<u8> {
    bytes[at..at + 4].copy_from_slice(&value.to_be_bytes());
    bytes
}

/// The record with TOTALSIZE one larger and one extra byte: inner lengths no longer add up.
fn longer_by_one(record: &[u8]) -> Vec<u8> {
    let mut longer = record.to_vec();
    longer.push(0);
    let total = i32::try_from(longer.len()).unwrap();
    with_i32(longer, 0, total)
}

// Proves lying record lengths (TOTALSIZE, BODYLENGTH, topic and properties lengths) are typed
// errors and parsing allocates nothing at all.
#[test]
fn lying_lengths_are_errors_without_allocation() {
    let record = sample_record(b"body", 0);
    let body_length_at = 84;
    let cases: Vec<Case> = vec![
        (with_i32(record.clone(), 0, i32::MAX), |e| {
            matches!(e, RecordError::Truncated { .. })
        }),
        (with_i32(record.clone(), 0, -5), |e| {
            matches!(e, RecordError::LengthInvalid { .. })
        }),
        (with_i32(record.clone(), 0, 20), |e| {
            matches!(e, RecordError::LengthInvalid { .. })
        }),
        (with_i32(record.clone(), body_length_at, i32::MAX), |e| {
            matches!(e, RecordError::Truncated { what: "body", .. })
        }),
        (with_i32(record.clone(), body_length_at, -1), |e| {
            matches!(e, RecordError::LengthInvalid { .. })
        }),
        (longer_by_one(&record), |e| {
            matches!(e, RecordError::TotalSizeMismatch { .. })
        }),
        // IPv6 bits without the bytes: every later field shifts and must still be checked.
        (with_i32(record.clone(), 36, 0x30), |e| {
            matches!(
                e,
                RecordError::Truncated { .. } | RecordError::LengthInvalid { .. }
            )
        }),
        (with_i32(record.clone(), 4, 0x1234), |e| {
            matches!(e, RecordError::MagicUnknown { .. })
        }),
    ];
    for (index, (bytes, expected)) in cases.into_iter().enumerate() {
        let mut outcome = None;
        let largest = largest_allocation(|| {
            outcome = Some(RecordView::parse(&bytes).map(|v| v.total_size()))
        });
        let error = outcome.unwrap().expect_err("lying record must not parse");
        assert!(expected(&error), "case {index}: unexpected {error:?}");
        assert_eq!(largest, 0, "case {index}: parse allocated {largest} bytes");
    }
    let mut topic_length = record.clone();
    topic_length[88 + 4] = 0x80; // signed byte: -128
    assert!(matches!(
        RecordView::parse(&topic_length),
        Err(RecordError::LengthInvalid { what: "topic", .. })
    ));
    let mut bad_port = record;
    bad_port[52..56].copy_from_slice(&70_000i32.to_be_bytes());
    assert!(matches!(
        RecordView::parse(&bad_port),
        Err(RecordError::Port { .. })
    ));
}

// Proves a compressed record whose body inflates past the limit stops client decoding with a
// typed error after allocating a small multiple of the limit, not the bomb's full size.
#[test]
fn zip_bomb_is_bounded() {
    let bomb = zlib_compress(&vec![0u8; 64 * 1024 * 1024], 9);
    let mut body = sample_record(b"plain", 0);
    body.extend(sample_record(&bomb, 0x301));
    let input = Bytes::from(body);
    let limit_bytes = 256 * 1024;
    let options = DecodeOptions {
        decompress_body: true,
        decompressed_body_bytes_max: limit_bytes,
    };
    let mut outcome = None;
    let largest =
        largest_allocation(|| outcome = Some(decode_records_with(input.clone(), &options)));
    let (messages, stop) = outcome.unwrap();
    assert_eq!(messages.len(), 1);
    let stop = stop.unwrap();
    assert_eq!(
        stop.error,
        RecordError::Compression(CompressionError::TooLarge { limit_bytes })
    );
    assert!(
        largest <= 4 * limit_bytes,
        "largest allocation {largest} bytes"
    );
}

// Proves garbage and lying entry lengths in batch bodies and garbage properties strings fail
// or decode without allocations beyond the input's size.
#[test]
fn batch_and_properties_garbage() {
    let mut lying = Vec::new();
    lying.extend(1_000_000i32.to_be_bytes());
    lying.extend([0u8; 12]);
    lying.extend(i32::MAX.to_be_bytes());
    lying.extend([0u8; 8]);
    let mut outcome = None;
    let largest = largest_allocation(|| outcome = Some(decode_batch(&lying).map(|e| e.len())));
    assert!(matches!(
        outcome.unwrap(),
        Err(RecordError::Truncated { .. })
    ));
    assert!(
        largest <= lying.len() * 2,
        "largest allocation {largest} bytes"
    );

    let garbage: String = (0..4096u32)
        .map(|i| char::from_u32(i % 5).unwrap())
        .collect();
    let largest = largest_allocation(|| {
        let decoded = Properties::decode(&garbage);
        assert!(decoded.len() <= 1);
    });
    assert!(
        largest <= garbage.len(),
        "largest allocation {largest} bytes"
    );
    assert_eq!(MAGIC_V1, 0xDAA3_20A7_u32 as i32);
}
