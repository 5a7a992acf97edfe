//! Route requests captured from real clients (C++ 1.x/2.x/3.0, pure JS, Rust; checked in with
//! the codec's vectors) sent byte for byte to the name server: each gets TopicTest's route.

mod common;

use std::io::Write;

use comet_proto::body::{JsonBody, TopicRouteData};
use comet_proto::ResponseCode;
use common::{Broker, TestNameServer};
use serde_json::Value;

fn hex_decode(text: &str) -> Vec<u8> {
    assert!(text.len() % 2 == 0);
    (0..text.len())
        .step_by(2)
        .map(|index| u8::from_str_radix(&text[index..index + 2], 16).unwrap())
        .collect()
}

/// Every captured GET_ROUTEINFO_BY_TOPIC frame, with its file name.
fn captured_route_requests() -> Vec<(String, Vec<u8>, i64, String)> {
    let directory =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../client/proto/tests/data");
    let mut frames = Vec::new();
    for entry in std::fs::read_dir(&directory).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
            continue;
        }
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            let record: Value = serde_json::from_str(line).unwrap();
            if record["header"]["code"].as_i64() == Some(105) {
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                let opaque = record["header"]["opaque"].as_i64().unwrap();
                let topic = record["header"]["extFields"]["topic"]
                    .as_str()
                    .unwrap()
                    .to_owned();
                frames.push((
                    name,
                    hex_decode(record["hex"].as_str().unwrap()),
                    opaque,
                    topic,
                ));
            }
        }
    }
    frames
}

// Proves every captured client's route request is answered SUCCESS with a TopicRouteData that
// names the registered broker, matched by the client's own opaque.
#[test]
fn captured_route_requests_get_routes() {
    let server = TestNameServer::start();
    let frames = captured_route_requests();
    // The broker serves every topic the clients ask about (TopicTest and retry topics).
    let topics: std::collections::BTreeSet<&str> = frames
        .iter()
        .map(|(_, _, _, topic)| topic.as_str())
        .collect();
    let topics: Vec<&str> = topics.into_iter().collect();
    let mut broker_connection = server.client();
    let broker = Broker::master("broker-a", "127.0.0.1:10911", &topics);
    broker_connection.call(broker.register_request());
    assert!(
        frames.len() >= 5,
        "only {} captured route requests",
        frames.len()
    );
    for (file, wire, opaque, _) in frames {
        let mut client = server.client();
        client.stream.write_all(&wire).unwrap();
        let response = client.receive().unwrap();
        assert_eq!(i64::from(response.opaque), opaque, "{file}");
        assert_eq!(response.response_code(), ResponseCode::SUCCESS, "{file}");
        let route = TopicRouteData::decode(&response.body).unwrap();
        assert_eq!(
            route.broker_datas[0].master_addr(),
            Some("127.0.0.1:10911"),
            "{file}"
        );
    }
}
