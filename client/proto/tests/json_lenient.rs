//! The fastjson-tolerant reader and the fastjson-style writer: samples of every quirk, and
//! property tests that the reader never panics, stays bounded, and agrees with serde_json
//! on standard JSON.

use std::collections::BTreeMap;

use comet_proto::json::{self, object_key_map, JsonError, JSON_DEPTH_MAX};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
struct Queue {
    #[serde(rename = "brokerName")]
    broker_name: String,
    #[serde(rename = "queueId")]
    queue_id: i32,
    topic: String,
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Table {
    #[serde(rename = "offsetTable", with = "object_key_map")]
    offset_table: BTreeMap<Queue, i64>,
}

fn queue(topic: &str, queue_id: i32) -> Queue {
    Queue {
        broker_name: "b".into(),
        queue_id,
        topic: topic.into(),
    }
}

// Proves an object-keyed map is written exactly in fastjson's form, sorted by key text,
// and read back from that form, from the escaped-string form of the browser-compatible
// flavour, and from gson's array of pairs.
#[test]
fn object_key_map_all_forms() {
    let mut table = Table {
        offset_table: BTreeMap::new(),
    };
    table.offset_table.insert(queue("T", 1), 20);
    table.offset_table.insert(queue("T", 0), 10);
    let bytes = json::to_bytes(&table);
    let fastjson = concat!(
        r#"{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:10,"#,
        r#"{"brokerName":"b","queueId":1,"topic":"T"}:20}}"#
    );
    assert_eq!(std::str::from_utf8(&bytes).unwrap(), fastjson);
    assert_eq!(
        json::from_slice::<Table>(fastjson.as_bytes()).unwrap(),
        table
    );
    let escaped = concat!(
        r#"{"offsetTable":{"{\"brokerName\":\"b\",\"queueId\":0,\"topic\":\"T\"}":10,"#,
        r#""{\"topic\":\"T\",\"queueId\":1,\"brokerName\":\"b\"}":20}}"#
    );
    assert_eq!(
        json::from_slice::<Table>(escaped.as_bytes()).unwrap(),
        table
    );
    let gson = concat!(
        r#"{"offsetTable":[[{"brokerName":"b","queueId":0,"topic":"T"},10],"#,
        r#"[{"brokerName":"b","queueId":1,"topic":"T"},20]]}"#
    );
    assert_eq!(json::from_slice::<Table>(gson.as_bytes()).unwrap(), table);
    // serde_json on its own (no fastjson writer) also round-trips through the marker form.
    let plain = serde_json::to_string(&table).unwrap();
    assert_eq!(serde_json::from_str::<Table>(&plain).unwrap(), table);
}

// Proves a key that is not a valid object for the key type is a typed shape error.
#[test]
fn object_key_map_bad_key() {
    let bad = br#"{"offsetTable":{{"queueId":"x"}:1}}"#;
    assert!(matches!(
        json::from_slice::<Table>(bad),
        Err(JsonError::Shape { .. })
    ));
    let bad = br#"{"offsetTable":{"plain":1}}"#;
    assert!(matches!(
        json::from_slice::<Table>(bad),
        Err(JsonError::Shape { .. })
    ));
}

// Proves bare numeric keys (fastjson's Map<Long, _>) read into integer-keyed maps and are
// written back quoted.
#[test]
fn bare_numeric_keys() {
    let map: BTreeMap<i64, i64> = json::from_slice(b"{0:12,1:3,-1:0\n}").unwrap();
    assert_eq!(map.get(&0), Some(&12));
    assert_eq!(map.get(&-1), Some(&0));
    let bytes = json::to_bytes(&map);
    assert_eq!(&bytes[..], br#"{"-1":0,"0":12,"1":3}"#);
}

// Proves the writer escapes control characters like the header codec and keeps non-ASCII
// as UTF-8, and that the reader accepts them back.
#[test]
fn string_escaping() {
    let text = "a\u{1}b\u{2}\"\\\n\u{e9}";
    let bytes = json::to_bytes(&text);
    assert_eq!(
        &bytes[..],
        "\"a\\u0001b\\u0002\\\"\\\\\\n\u{e9}\"".as_bytes()
    );
    assert_eq!(json::from_slice::<String>(&bytes).unwrap(), text);
}

// Proves nesting at the limit is accepted and one deeper is refused.
#[test]
fn depth_limit_is_exact() {
    let ok = format!(
        "{}{}",
        "[".repeat(JSON_DEPTH_MAX),
        "]".repeat(JSON_DEPTH_MAX)
    );
    assert!(json::normalize(ok.as_bytes()).is_ok());
    let deep = format!(
        "{}{}",
        "[".repeat(JSON_DEPTH_MAX + 1),
        "]".repeat(JSON_DEPTH_MAX + 1)
    );
    assert!(matches!(
        json::normalize(deep.as_bytes()),
        Err(JsonError::TooDeep { .. })
    ));
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        // Quarters are exact in binary, so float parsing precision does not blur the check.
        (-4_000_000i32..4_000_000).prop_map(|n| Value::from(f64::from(n) / 4.0)),
        "[a-zA-Z0-9 %@\u{1}\u{2}\"\\\\é]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("[a-zA-Z0-9_]{0,8}", inner, 0..6)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    // Proves the reader returns (never panics) on arbitrary bytes and that whatever it
    // accepts stays within its size bound.
    #[test]
    fn normalize_never_panics_on_bytes(input in prop::collection::vec(any::<u8>(), 0..512)) {
        if let Ok(text) = json::normalize(&input) {
            prop_assert!(text.len() <= input.len() * 4 + 64);
        }
        let _ = json::from_slice::<Value>(&input);
    }

    // Proves the same on inputs drawn from JSON's own alphabet, which reach far deeper into
    // the parser than random bytes.
    #[test]
    fn normalize_never_panics_on_json_alphabet(input in "[\\[\\]{}:,\"\\\\0-9a-z\\- \n.]{0,256}") {
        if let Ok(text) = json::normalize(input.as_bytes()) {
            prop_assert!(text.len() <= input.len() * 4 + 64);
        }
        let _ = json::from_slice::<Value>(input.as_bytes());
    }

    // Proves standard JSON passes through unchanged in meaning, and that the sorted writer's
    // output reads back to the same value (nulls in objects are dropped, as fastjson does).
    #[test]
    fn standard_json_round_trips(value in json_value()) {
        let text = serde_json::to_string(&value).unwrap();
        let read: Value = json::from_slice(text.as_bytes()).unwrap();
        prop_assert_eq!(&read, &value);
        let written = json::to_bytes(&value);
        let reread: Value = json::from_slice(&written).unwrap();
        prop_assert_eq!(reread, drop_null_members(value));
    }

    // Proves object-keyed maps survive the fastjson writer and the tolerant reader.
    #[test]
    fn object_key_maps_round_trip(
        entries in prop::collection::btree_map(
            ("[A-Za-z%_]{1,8}", 0i32..64), any::<i64>(), 0..16)
    ) {
        let table = Table {
            offset_table: entries
                .into_iter()
                .map(|((topic, id), offset)| (queue(&topic, id), offset))
                .collect(),
        };
        let bytes = json::to_bytes(&table);
        prop_assert_eq!(json::from_slice::<Table>(&bytes).unwrap(), table);
    }
}

fn drop_null_members(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, drop_null_members(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(drop_null_members).collect()),
        other => other,
    }
}
