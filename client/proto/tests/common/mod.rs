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
