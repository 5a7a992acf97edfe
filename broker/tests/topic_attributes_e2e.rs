//! Topic creation end to end: the topic is routed by the name server once the creation is
//! answered, and (5.x) UPDATE_AND_CREATE_TOPIC's `attributes` are kept,
//! answered by GET_TOPIC_CONFIG (where 5.x's proxy reads a topic's message type), survive a
//! restart, and a modification Java refuses is refused with Java's answer.

mod common;

use comet_proto::headers::{CreateTopicRequestHeader, GetRouteInfoRequestHeader};
use comet_proto::{CommandHeader, RemotingCommand, RequestCode, ResponseCode};
use common::{create_topic_request, Broker, Client, TempDir};

const CORES: usize = 2;

fn create_with(client: &mut Client, topic: &str, attributes: &str) -> RemotingCommand {
    let request = create_topic_request(topic, 4);
    let mut header = CreateTopicRequestHeader::from_ext_fields(&request.ext_fields).unwrap();
    header.attributes = Some(attributes.into());
    let request =
        RemotingCommand::request(RequestCode::UPDATE_AND_CREATE_TOPIC, 0).with_header(&header);
    client.call(request)
}

/// The topic's attributes as GET_TOPIC_CONFIG answers them.
fn attributes(client: &mut Client, topic: &str) -> serde_json::Value {
    let mut request = RemotingCommand::request(RequestCode::GET_TOPIC_CONFIG, 0);
    request.ext_fields.insert("topic", topic);
    let response = client.call_ok(request);
    let body: serde_json::Value = serde_json::from_slice(&response.body).unwrap();
    body["attributes"].clone()
}

// Proves attributes are created, kept by an update that names none, changed and deleted by
// +/- modifications, persisted across a restart, and that MIXED, unknown keys and values
// Comet does not build are refused.
#[test]
fn topic_attributes_are_kept_answered_and_checked() {
    let directory = TempDir::new("e2e-topic-attributes");
    let mut broker = Broker::start(&directory.0, CORES, &[]);
    let mut client = broker.client();
    let created = create_with(&mut client, "AttrFifo", "+message.type=FIFO");
    assert_eq!(created.response_code(), ResponseCode::SUCCESS);
    // Registered before the answer, as Java does: the name server routes it at once.
    let header = GetRouteInfoRequestHeader {
        topic: "AttrFifo".into(),
        accept_standard_json_only: None,
    };
    let route = broker.namesrv_client().call(
        RemotingCommand::request(RequestCode::GET_ROUTEINFO_BY_TOPIC, 0).with_header(&header),
    );
    assert_eq!(route.response_code(), ResponseCode::SUCCESS);
    assert_eq!(
        attributes(&mut client, "AttrFifo"),
        serde_json::json!({"message.type": "FIFO"})
    );
    // An update without attributes (queue counts, say) keeps them.
    client.call_ok(create_topic_request("AttrFifo", 8));
    assert_eq!(
        attributes(&mut client, "AttrFifo")["message.type"],
        serde_json::json!("FIFO")
    );
    let mixed = create_with(&mut client, "AttrMixed", "+message.type=MIXED");
    assert_eq!(mixed.response_code(), ResponseCode::INVALID_PARAMETER);
    assert_eq!(
        mixed.remark.as_deref(),
        Some("MIXED message type is not supported.")
    );
    let unknown = create_with(&mut client, "AttrOther", "+colour=red");
    assert_eq!(unknown.response_code(), ResponseCode::SYSTEM_ERROR);
    assert_eq!(unknown.remark.as_deref(), Some("unsupported key: colour"));
    let batch = create_with(&mut client, "AttrOther", "+queue.type=BatchCQ");
    assert_eq!(batch.response_code(), ResponseCode::SYSTEM_ERROR);
    let changed = create_with(&mut client, "AttrFifo", "+message.type=TRANSACTION");
    assert_eq!(changed.response_code(), ResponseCode::SUCCESS);
    drop(client);
    broker.stop();
    broker.restart(CORES);
    let mut client = broker.client();
    assert_eq!(
        attributes(&mut client, "AttrFifo"),
        serde_json::json!({"message.type": "TRANSACTION"})
    );
    let deleted = create_with(&mut client, "AttrFifo", "-message.type");
    assert_eq!(deleted.response_code(), ResponseCode::SUCCESS);
    assert_eq!(attributes(&mut client, "AttrFifo"), serde_json::json!({}));
}
