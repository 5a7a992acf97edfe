//! Helpers shared by the header and body tests.

#![allow(dead_code)]

use std::fmt::Debug;

use comet_proto::body::JsonBody;
use comet_proto::headers::HeaderKeys;
use comet_proto::{CommandHeader, ExtFields, HeaderError};

/// Checks one header type with a value whose every field is set:
/// * encoding writes exactly the declared keys;
/// * decoding gives the value back;
/// * removing any required key gives `Missing` naming that key;
/// * removing any optional key still decodes.
pub fn check_header<H>(full: &H)
where
    H: CommandHeader + HeaderKeys + PartialEq + Debug,
{
    let mut ext = ExtFields::new();
    full.to_ext_fields(&mut ext);
    let name = std::any::type_name::<H>();
    assert_eq!(
        ext.len(),
        H::KEYS.len(),
        "{name}: every field set must be written"
    );
    for (key, _) in H::KEYS {
        assert!(ext.get(key).is_some(), "{name}: key {key} not written");
    }
    assert_eq!(
        &H::from_ext_fields(&ext).unwrap(),
        full,
        "{name}: round trip"
    );
    for (key, required) in H::KEYS {
        let mut partial = ext.clone();
        partial.remove(key);
        let decoded = H::from_ext_fields(&partial);
        if *required {
            assert_eq!(
                decoded,
                Err(HeaderError::Missing { field: key }),
                "{name}: missing {key}"
            );
        } else {
            assert!(decoded.is_ok(), "{name}: optional {key} absent");
        }
    }
}

/// Ext fields from `(key, value)` pairs.
pub fn ext(pairs: &[(&str, &str)]) -> ExtFields {
    pairs.iter().map(|(k, v)| (*k, *v)).collect()
}

/// Encodes, decodes and compares a body; returns the encoded text.
pub fn round_trip<B: JsonBody + PartialEq + Debug>(body: &B) -> String {
    let bytes = body.encode();
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    let back = B::decode(&bytes).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(&back, body, "round trip of {text}");
    text
}

/// Every frame captured from real clients under `tests/data/*.jsonl`, decoded.
pub fn captured_commands() -> Vec<comet_proto::RemotingCommand> {
    use comet_proto::bytes::BytesMut;
    use comet_proto::{Decoded, FrameDecoder};
    let directory = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");
    let mut paths: Vec<_> = std::fs::read_dir(directory)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().and_then(|e| e.to_str()) == Some("jsonl"))
        .collect();
    paths.sort();
    let mut commands = Vec::new();
    for path in paths {
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            if line.trim().is_empty() {
                continue;
            }
            let record: serde_json::Value = serde_json::from_str(line).unwrap();
            let wire = hex_decode(record["hex"].as_str().unwrap());
            let mut buffer = BytesMut::from(&wire[..]);
            match FrameDecoder::default().decode(&mut buffer) {
                Ok(Some(Decoded::Command(command))) => commands.push(command),
                other => panic!("{}: {other:?}", path.display()),
            }
        }
    }
    commands
}

fn hex_decode(text: &str) -> Vec<u8> {
    (0..text.len() / 2)
        .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}
