//! What the C++ and JavaScript clients of the compatibility suites (tests/compat/python,
//! tests/compat/node) rely on, replayed from frames captured from those clients.

mod common;

use bytes::Bytes;
use comet_proto::frame::decode_frame_payload;
use comet_proto::{RemotingCommand, RequestCode, ResponseCode};
use common::{Broker, TempDir};

/// HEART_BEAT (34) as npm ali-ons 3.12.0 sent it (captured 2026-11-29): language JAVA,
/// version 121, enum names in the body (`CONSUME_PASSIVELY`, `CLUSTERING`), a numeric
/// `subVersion`, for consumer group `compat_node_consumer` on `TopicTest`.
const ALI_ONS_HEARTBEAT_HEX: &str = concat!(
    "000001c60000004e7b22636f6465223a33342c226c616e6775616765223a224a415641222c226f7061717565",
    "223a322c22666c6167223a302c2276657273696f6e223a3132312c226578744669656c6473223a7b7d7d7b22",
    "636c69656e744944223a223139322e302e322e32403136353430222c22636f6e73756d657244617461536574",
    "223a5b7b2267726f75704e616d65223a22636f6d7061745f6e6f64655f636f6e73756d6572222c22636f6e73",
    "756d6554797065223a22434f4e53554d455f504153534956454c59222c226d6573736167654d6f64656c223a",
    "22434c5553544552494e47222c22636f6e73756d6546726f6d5768657265223a22434f4e53554d455f46524f",
    "4d5f4c4153545f4f4646534554222c22737562736372697074696f6e44617461536574223a5b7b22746f7069",
    "63223a22546f70696354657374222c22737562537472696e67223a222a222c22636c61737346696c7465724d",
    "6f6465223a66616c73652c2274616773536574223a5b5d2c22636f6465536574223a5b5d2c22737562566572",
    "73696f6e223a313739353936313030393534357d5d2c22756e69744d6f6465223a66616c73657d5d2c227072",
    "6f647563657244617461536574223a5b5d7d",
);

fn captured(hex: &str) -> RemotingCommand {
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect();
    // The frame minus its 4-byte length prefix.
    decode_frame_payload(Bytes::from(bytes[4..].to_vec())).expect("the captured frame decodes")
}

// Proves the retry topic a first heartbeat creates is known to the name server by the time
// the heartbeat is answered, as with Apache RocketMQ: ali-ons asks for the route of
// %RETRY%<group> right after that heartbeat and, told the topic does not exist, asks again
// only 30 s later, so a new group's retries waited that long. Before the heartbeat waited for
// the registration, the route query failed (the registration came up to a second later).
#[test]
fn first_heartbeat_registers_the_retry_topic_before_answering() {
    let directory = TempDir::new("e2e-native-heartbeat");
    let broker = Broker::start(&directory.0, 2, &[]);
    let mut client = broker.client();
    client.call_ok(captured(ALI_ONS_HEARTBEAT_HEX));
    let mut namesrv = broker.namesrv_client();
    let mut request = RemotingCommand::request(RequestCode::GET_ROUTEINFO_BY_TOPIC, 0);
    request.version = 121;
    request
        .ext_fields
        .insert("topic", "%RETRY%compat_node_consumer");
    let route = namesrv.call(request);
    assert_eq!(
        route.response_code(),
        ResponseCode::SUCCESS,
        "route of the new retry topic: {:?}",
        route.remark
    );
    let body = String::from_utf8_lossy(&route.body);
    assert!(body.contains("queueDatas"), "route body: {body}");
}
