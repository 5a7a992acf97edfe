//! The producer's conversation of
//! docs/protocol.md#producer-conversation against scripted peers on 127.0.0.1: a name
//! server answering GET_ROUTEINFO_BY_TOPIC and brokers answering SEND_MESSAGE_V2 /
//! SEND_BATCH_MESSAGE / HEART_BEAT / UNREGISTER_CLIENT. The peers check what the client
//! sends (keys, body, properties) and answer like a broker; they are test doubles for the
//! conversation, not a broker.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use comet_client::{ClientConfig, ClientError, Message, Producer, ProducerConfig, SendStatus};
use comet_proto::batch::decode_batch;
use comet_proto::body::{BrokerData, JsonBody, QueueData, TopicRouteData};
use comet_proto::properties::{self, names};
use comet_proto::{RemotingCommand, RequestCode, ResponseCode};
use common::{FakeServer, ServerConn};

fn route(brokers: &[(&str, &str)]) -> TopicRouteData {
    TopicRouteData {
        queue_datas: brokers
            .iter()
            .map(|(name, _)| QueueData {
                broker_name: (*name).into(),
                read_queue_nums: 4,
                write_queue_nums: 4,
                perm: 6,
                topic_sys_flag: 0,
            })
            .collect(),
        broker_datas: brokers
            .iter()
            .map(|(name, addr)| BrokerData {
                cluster: "DefaultCluster".into(),
                broker_name: (*name).into(),
                broker_addrs: BTreeMap::from([(0, (*addr).to_owned())]),
                ..BrokerData::default()
            })
            .collect(),
        ..TopicRouteData::default()
    }
}

fn namesrv(route: TopicRouteData) -> FakeServer {
    let body = route.encode();
    FakeServer::start(move |mut conn: ServerConn| {
        while let Some(request) = conn.recv() {
            assert_eq!(request.request_code(), RequestCode::GET_ROUTEINFO_BY_TOPIC);
            let response = if request.ext_fields.get("topic") == Some("TopicTest") {
                RemotingCommand::response_to(&request, ResponseCode::SUCCESS)
                    .with_body(body.clone())
            } else {
                RemotingCommand::error_to(&request, ResponseCode::TOPIC_NOT_EXIST, "no route")
            };
            conn.send(&response);
        }
    })
}

/// What a scripted broker saw.
#[derive(Default)]
struct Seen {
    sends: Mutex<Vec<RemotingCommand>>,
    heartbeats: AtomicUsize,
    unregisters: AtomicUsize,
}

fn broker(seen: Arc<Seen>, healthy: bool) -> FakeServer {
    let offset = Arc::new(AtomicUsize::new(0));
    FakeServer::start(move |mut conn: ServerConn| {
        while let Some(request) = conn.recv() {
            match request.request_code() {
                RequestCode::HEART_BEAT => {
                    seen.heartbeats.fetch_add(1, Ordering::AcqRel);
                    conn.send(&RemotingCommand::response_to(
                        &request,
                        ResponseCode::SUCCESS,
                    ));
                }
                RequestCode::UNREGISTER_CLIENT => {
                    seen.unregisters.fetch_add(1, Ordering::AcqRel);
                    conn.send(&RemotingCommand::response_to(
                        &request,
                        ResponseCode::SUCCESS,
                    ));
                }
                RequestCode::SEND_MESSAGE_V2 | RequestCode::SEND_BATCH_MESSAGE => {
                    seen.sends.lock().unwrap().push(request.clone());
                    if !healthy {
                        conn.close();
                        return;
                    }
                    if request.is_oneway() {
                        continue;
                    }
                    let mut response =
                        RemotingCommand::response_to(&request, ResponseCode::SUCCESS);
                    let queue_offset = offset.fetch_add(1, Ordering::AcqRel);
                    let ext = &mut response.ext_fields;
                    ext.insert("msgId", "7F00000100002A9F0000000000000000");
                    ext.insert("queueId", request.ext_fields.get("e").unwrap());
                    ext.insert("queueOffset", queue_offset.to_string());
                    ext.insert("MSG_REGION", "DefaultRegion");
                    ext.insert("TRACE_ON", "true");
                    conn.send(&response);
                }
                _ => conn.send(&RemotingCommand::not_supported_to(&request)),
            }
        }
    })
}

fn producer(namesrv: &FakeServer) -> Producer {
    let mut client = ClientConfig::with_namesrv(namesrv.addr());
    client.client_ip = Some("127.0.0.1".into());
    let producer = Producer::new(ProducerConfig::new("pg", client)).unwrap();
    producer.start().unwrap();
    producer
}

// Proves a sync send follows
// docs/protocol.md#producer-conversation: the request carries the single-letter keys, the
// body unchanged, a UNIQ_KEY and the tag; the result carries the broker's fields and the
// UNIQ_KEY as msgId; shutdown unregisters the group.
#[test]
fn sync_send_conversation() {
    let seen = Arc::new(Seen::default());
    let broker_a = broker(seen.clone(), true);
    let namesrv = namesrv(route(&[("broker-a", broker_a.addr())]));
    let producer = producer(&namesrv);
    let message = Message::new("TopicTest", "Hello RocketMQ")
        .with_tags("TagA")
        .with_keys(["k1", "k2"]);
    let result = producer.send(message).unwrap();
    assert_eq!(result.status, SendStatus::SendOk);
    assert_eq!(result.queue.broker_name, "broker-a");
    assert_eq!(result.offset_msg_id, "7F00000100002A9F0000000000000000");
    assert_eq!(result.region_id.as_deref(), Some("DefaultRegion"));
    let request = seen.sends.lock().unwrap()[0].clone();
    assert_eq!(&request.body[..], b"Hello RocketMQ");
    let ext = &request.ext_fields;
    assert_eq!(ext.get("a"), Some("pg"));
    assert_eq!(ext.get("b"), Some("TopicTest"));
    assert_eq!(ext.get("c"), Some("TBW102"));
    assert_eq!(ext.get("d"), Some("4"));
    assert_eq!(ext.get("f"), Some("0"));
    assert_eq!(ext.get("n"), Some("broker-a"));
    let props = ext.get("i").unwrap();
    assert_eq!(properties::get(props, names::TAGS), Some("TagA"));
    assert_eq!(properties::get(props, names::KEYS), Some("k1 k2"));
    assert_eq!(
        properties::get(props, names::UNIQ_KEY),
        Some(result.msg_id.as_str())
    );
    assert_eq!(result.msg_id.len(), 32);
    producer.shutdown();
    assert!(
        seen.unregisters.load(Ordering::Acquire) >= 2,
        "pg and CLIENT_INNER_PRODUCER"
    );
}

// Proves a failed broker makes the send retry on the other broker and succeed, and that the
// failed broker is then avoided by the next sends (latency fault tolerance).
#[test]
fn retry_on_another_broker_and_sideline_the_failed_one() {
    let seen_bad = Arc::new(Seen::default());
    let seen_good = Arc::new(Seen::default());
    let bad = broker(seen_bad.clone(), false);
    let good = broker(seen_good.clone(), true);
    let namesrv = namesrv(route(&[
        ("broker-a", bad.addr()),
        ("broker-b", good.addr()),
    ]));
    let producer = producer(&namesrv);
    for index in 0..8 {
        let result = producer
            .send(Message::new("TopicTest", format!("m{index}")))
            .unwrap();
        assert_eq!(result.queue.broker_name, "broker-b");
    }
    assert!(
        seen_bad.sends.lock().unwrap().len() <= 1,
        "broker-a sidelined after its failure"
    );
    assert_eq!(seen_good.sends.lock().unwrap().len(), 8);
    producer.shutdown();
}

// Proves async sends deliver results through the callback and the waitable handle, that
// one-way sends set flag bit 1, and that a body over 4 KiB is zlib-compressed with the
// compressed and zlib bits in `f`.
#[test]
fn async_oneway_and_compression() {
    let seen = Arc::new(Seen::default());
    let broker_a = broker(seen.clone(), true);
    let namesrv = namesrv(route(&[("broker-a", broker_a.addr())]));
    let producer = producer(&namesrv);
    let (sender, receiver) = mpsc::channel();
    producer
        .send_async(Message::new("TopicTest", "async"), move |result| {
            sender.send(result).unwrap()
        })
        .unwrap();
    let result = receiver
        .recv_timeout(Duration::from_secs(5))
        .unwrap()
        .unwrap();
    assert_eq!(result.status, SendStatus::SendOk);
    let futures: Vec<_> = (0..32)
        .map(|i| {
            producer
                .send_async_future(Message::new("TopicTest", format!("w{i}")))
                .unwrap()
        })
        .collect();
    for future in futures {
        assert_eq!(future.wait().unwrap().status, SendStatus::SendOk);
    }
    producer
        .send_oneway(Message::new("TopicTest", "oneway"))
        .unwrap();
    let big = vec![b'x'; 8192];
    producer
        .send(Message::new("TopicTest", big.clone()))
        .unwrap();
    let sends = seen.sends.lock().unwrap().clone();
    assert!(sends
        .iter()
        .any(|s| s.is_oneway() && &s.body[..] == b"oneway"));
    let compressed = sends
        .iter()
        .find(|s| s.ext_fields.get("f") == Some("769"))
        .unwrap();
    assert!(compressed.body.len() < big.len());
    let inflated = comet_proto::compression::zlib_decompress(&compressed.body, 1 << 20).unwrap();
    assert_eq!(inflated, big);
    producer.shutdown();
}

// Proves batches are sent with SEND_BATCH_MESSAGE, each entry keeps its own UNIQ_KEY, the
// result's msgId joins them, and invalid batches and messages are refused before sending.
#[test]
fn batch_send_and_validation() {
    let seen = Arc::new(Seen::default());
    let broker_a = broker(seen.clone(), true);
    let namesrv = namesrv(route(&[("broker-a", broker_a.addr())]));
    let producer = producer(&namesrv);
    let messages: Vec<Message> = (0..10)
        .map(|i| Message::new("TopicTest", format!("b{i}")))
        .collect();
    let results = producer.send_batch(messages).unwrap();
    assert_eq!(results.len(), 1);
    let request = seen.sends.lock().unwrap()[0].clone();
    assert_eq!(request.request_code(), RequestCode::SEND_BATCH_MESSAGE);
    assert_eq!(request.ext_fields.get("m"), Some("true"));
    let entries = decode_batch(&request.body).unwrap();
    assert_eq!(entries.len(), 10);
    let keys: Vec<&str> = entries
        .iter()
        .map(|e| properties::get(e.properties, names::UNIQ_KEY).unwrap())
        .collect();
    assert_eq!(results[0].msg_id, keys.join(","));

    let mixed = vec![Message::new("TopicTest", "a"), Message::new("Other", "b")];
    assert!(matches!(
        producer.send_batch(mixed),
        Err(ClientError::Invalid(_))
    ));
    let delayed = vec![Message::new("TopicTest", "a").with_delay_level(3)];
    assert!(matches!(
        producer.send_batch(delayed),
        Err(ClientError::Invalid(_))
    ));
    assert!(matches!(
        producer.send(Message::new("TopicTest", "")),
        Err(ClientError::Invalid(_))
    ));
    assert!(matches!(
        producer.send(Message::new("bad topic", "x")),
        Err(ClientError::Name(_))
    ));
    let unknown = producer.send(Message::new("NoSuchTopic", "x")).unwrap_err();
    assert!(matches!(unknown, ClientError::NoRoute { .. }), "{unknown}");
    producer.shutdown();
}

// Proves ordered sends with one sharding key always pick the same queue.
#[test]
fn orderly_send_keeps_a_key_on_one_queue() {
    let seen = Arc::new(Seen::default());
    let broker_a = broker(seen.clone(), true);
    let namesrv = namesrv(route(&[("broker-a", broker_a.addr())]));
    let producer = producer(&namesrv);
    let mut queues = std::collections::BTreeSet::new();
    for i in 0..10 {
        let result = producer
            .send_orderly(Message::new("TopicTest", format!("o{i}")), "order-42")
            .unwrap();
        queues.insert(result.queue.queue_id);
    }
    assert_eq!(queues.len(), 1);
    producer.shutdown();
}
