//! Feeds arbitrary bytes to `FrameDecoder::decode` until it wants more input or refuses the
//! stream. Every command that decodes must re-encode to a frame that decodes to the same
//! command, consuming exactly that frame.

#![no_main]

use comet_proto::bytes::BytesMut;
use comet_proto::frame::{encode, FrameDecoder};
use comet_proto::header::effective_serialize_type;
use comet_proto::{Decoded, LanguageCode, SerializeType};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let decoder = FrameDecoder::new(1 << 20);
    let mut buffer = BytesMut::from(data);
    loop {
        match decoder.decode(&mut buffer) {
            Ok(Some(Decoded::Command(mut command))) => {
                let mut again = BytesMut::new();
                encode(&command, &mut again);
                // Re-encoding may grow the header (JSON escapes), so no frame limit here.
                let Ok(Some(Decoded::Command(round))) = FrameDecoder::default().decode(&mut again)
                else {
                    panic!("re-encoded frame did not decode: {command:?}");
                };
                assert!(again.is_empty(), "re-encoded frame left bytes over");
                // A binary header whose code or version exceeds 16 bits travels as JSON.
                command.serialize_type = effective_serialize_type(&command);
                // JSON carries the language as a name; an unnamed code is written as OTHER.
                let as_json = command.serialize_type == SerializeType::Json;
                if as_json && command.language.name().is_none() {
                    command.language = LanguageCode::OTHER;
                }
                assert_eq!(round, command);
            }
            Ok(Some(Decoded::Malformed(_))) => continue,
            Ok(None) | Err(_) => break,
        }
    }
});
