//! Feeds arbitrary bytes to every message-format decoder: `RecordView::parse` (and, when the
//! record is canonical, a byte-exact re-encode), `decode_records`, batch decoding (re-encoded and
//! decoded again), the properties parser, offset message ids and tag expressions.

#![no_main]

use comet_proto::batch::{decode_batch, encode_batch};
use comet_proto::bytes::{Bytes, BytesMut};
use comet_proto::filter::TagSubscription;
use comet_proto::message::{
    decode_records_with, encode_record, stored_ip, DecodeOptions, RecordSpec, RecordView, MAGIC_V2,
};
use comet_proto::message_id::decode_offset_msg_id;
use comet_proto::properties::{self, Properties};
use libfuzzer_sys::fuzz_target;

fn check_record(data: &[u8]) {
    let Ok(view) = RecordView::parse(data) else {
        return;
    };
    let spec = RecordSpec {
        topic: view.topic(),
        queue_id: view.queue_id(),
        flag: view.flag(),
        sysflag: view.sysflag(),
        born_timestamp: view.born_timestamp(),
        born_host: view.born_host(),
        store_host: view.store_host(),
        reconsume_times: view.reconsume_times(),
        prepared_transaction_offset: view.prepared_transaction_offset(),
        body: view.body(),
        properties: view.properties(),
    };
    // The encoder writes the real CRC, picks V2 only for long topics and stores IPv4-mapped
    // IPv6 hosts as IPv4; records that agree with all three must come back byte for byte.
    let canonical_magic = (view.magic() == MAGIC_V2) == spec.needs_magic_v2();
    let canonical_hosts = [view.born_host(), view.store_host()]
        .iter()
        .all(|host| stored_ip(*host) == host.ip());
    if view.body_crc_matches() && canonical_magic && canonical_hosts {
        let mut again = BytesMut::new();
        let length = encode_record(
            &spec,
            view.queue_offset(),
            view.physical_offset(),
            view.store_timestamp(),
            &mut again,
        )
        .expect("a parsed record is encodable");
        assert_eq!(length, view.total_size());
        assert_eq!(&again[..], view.bytes());
    }
}

fuzz_target!(|data: &[u8]| {
    check_record(data);
    let options = DecodeOptions {
        decompress_body: true,
        decompressed_body_bytes_max: 1 << 16,
    };
    let _ = decode_records_with(Bytes::copy_from_slice(data), &options);
    if let Ok(entries) = decode_batch(data) {
        let mut again = BytesMut::new();
        encode_batch(&entries, &mut again).expect("decoded entries are encodable");
        // Magic and CRC words are ignored on decode and written as 0, so compare the
        // entries and the length rather than the bytes.
        assert_eq!(again.len(), data.len());
        assert_eq!(
            decode_batch(&again).expect("re-encoded batch decodes"),
            entries
        );
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let decoded = Properties::decode(text);
        assert!(decoded.len() <= properties::iter(text).count());
        let _ = decode_offset_msg_id(text);
        let subscription = TagSubscription::parse(Some(text));
        assert!(subscription.codes().len() <= subscription.tags().len());
    }
});
