//! Frames captured from real RocketMQ clients (C++ 1.x and 2.x, C++ 3.0 under Node.js, the
//! pure-JS clients and the Rust client), checked in under `tests/data/`. Every one must decode
//! to exactly what the capture's decoded header says, consume exactly its bytes, and
//! re-encode to a frame that decodes to the same command.

use comet_proto::bytes::BytesMut;
use comet_proto::frame::{encode, FrameDecoder};
use comet_proto::{Decoded, LanguageCode};
use serde_json::Value;

fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        Value::Bool(flag) => Some(flag.to_string()),
        Value::Null => None,
        other => panic!("non-scalar ext value {other}"),
    }
}

fn check_record(file: &str, record: &Value) {
    let wire = hex::decode(record["hex"].as_str().unwrap()).unwrap();
    let mut buffer = BytesMut::from(&wire[..]);
    let decoder = FrameDecoder::default();
    let decoded = decoder
        .decode(&mut buffer)
        .unwrap_or_else(|e| panic!("{file}: {e}"));
    let Some(Decoded::Command(command)) = decoded else {
        panic!("{file}: no command")
    };
    assert!(buffer.is_empty(), "{file}: bytes left over");
    assert_eq!(
        command.body.len() as u64,
        record["body_len"].as_u64().unwrap()
    );
    let header = &record["header"];
    assert_eq!(
        i64::from(command.code),
        header["code"].as_i64().unwrap(),
        "{file}"
    );
    assert_eq!(
        i64::from(command.opaque),
        header["opaque"].as_i64().unwrap_or(0),
        "{file}"
    );
    if let Some(name) = header["language"].as_str() {
        assert_eq!(
            command.language,
            LanguageCode::from_name(name).unwrap(),
            "{file}"
        );
    }
    if let Some(ext) = header["extFields"].as_object() {
        for (key, value) in ext {
            assert_eq!(
                command.ext_fields.get(key).map(str::to_owned),
                scalar_text(value),
                "{file}: {key}"
            );
        }
    }
    let mut again = BytesMut::new();
    encode(&command, &mut again);
    let Some(Decoded::Command(round)) = decoder.decode(&mut again).unwrap() else {
        panic!("{file}: re-encoded frame did not decode")
    };
    assert_eq!(round, command, "{file}: round trip");
}

// Proves every captured frame decodes exactly and re-encodes faithfully.
#[test]
fn every_captured_frame_decodes() {
    let directory = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");
    let mut frames = 0;
    for entry in std::fs::read_dir(directory).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
            continue;
        }
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            if line.trim().is_empty() {
                continue;
            }
            let record: Value = serde_json::from_str(line).unwrap();
            check_record(&name, &record);
            frames += 1;
        }
    }
    assert!(frames > 50, "only {frames} captured frames found");
}
