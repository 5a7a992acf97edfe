//! The blocking producer's thread budget, alone in its test binary so that no other test's
//! threads blur the count. Scripted peers on 127.0.0.1 stand in for a name server and
//! brokers (they run their own threads, which is why only the client's threads, named
//! `comet-*`, are counted).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::mpsc;
use std::time::Duration;

use comet_client::limits::PRODUCER_IO_THREADS;
use comet_client::{ClientConfig, Message, Producer, ProducerConfig, SendStatus};
use comet_proto::body::{BrokerData, JsonBody, QueueData, TopicRouteData};
use comet_proto::{RemotingCommand, RequestCode, ResponseCode};
use comet_test_support::wait_until;
use common::{FakeServer, ServerConn};

/// Queues of the topic on each broker.
const QUEUES_PER_BROKER: i32 = 8;
/// Longest wait for one send's callback.
const CALLBACK_LIMIT: Duration = Duration::from_secs(10);

/// Threads of this process whose name starts with `comet-` (the client's), by reading
/// `/proc/self/task/*/comm`.
fn client_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("comet-"))
        .count()
}

/// A broker answering heartbeats, unregistrations and sends like a broker.
fn broker() -> FakeServer {
    FakeServer::start(|mut conn: ServerConn| {
        while let Some(request) = conn.recv() {
            let code = request.request_code();
            if code == RequestCode::SEND_MESSAGE_V2 {
                let mut response = RemotingCommand::response_to(&request, ResponseCode::SUCCESS);
                let ext = &mut response.ext_fields;
                ext.insert("msgId", "7F00000100002A9F0000000000000000");
                ext.insert("queueId", request.ext_fields.get("e").unwrap_or("0"));
                ext.insert("queueOffset", "0");
                conn.send(&response);
            } else if code == RequestCode::HEART_BEAT || code == RequestCode::UNREGISTER_CLIENT {
                conn.send(&RemotingCommand::response_to(
                    &request,
                    ResponseCode::SUCCESS,
                ));
            } else if !request.is_oneway() {
                conn.send(&RemotingCommand::not_supported_to(&request));
            }
        }
    })
}

/// A name server whose route of `topic` spreads its queues over `brokers`.
fn namesrv(topic: &'static str, brokers: &[FakeServer]) -> FakeServer {
    let names: Vec<(String, String)> = brokers
        .iter()
        .enumerate()
        .map(|(index, broker)| (format!("broker-{index}"), broker.addr().to_owned()))
        .collect();
    let route = TopicRouteData {
        queue_datas: names
            .iter()
            .map(|(name, _)| QueueData {
                broker_name: name.clone(),
                read_queue_nums: QUEUES_PER_BROKER,
                write_queue_nums: QUEUES_PER_BROKER,
                perm: 6,
                topic_sys_flag: 0,
            })
            .collect(),
        broker_datas: names
            .iter()
            .map(|(name, addr)| BrokerData {
                cluster: "DefaultCluster".into(),
                broker_name: name.clone(),
                broker_addrs: BTreeMap::from([(0, addr.clone())]),
                ..BrokerData::default()
            })
            .collect(),
        ..TopicRouteData::default()
    };
    let body = route.encode();
    FakeServer::start(move |mut conn: ServerConn| {
        while let Some(request) = conn.recv() {
            let response = if request.ext_fields.get("topic") == Some(topic) {
                RemotingCommand::response_to(&request, ResponseCode::SUCCESS)
                    .with_body(body.clone())
            } else {
                RemotingCommand::error_to(&request, ResponseCode::TOPIC_NOT_EXIST, "no route")
            };
            conn.send(&response);
        }
    })
}

/// Starts a producer over `broker_count` brokers, sends to every queue of each (sync sends
/// from several threads, async sends with callbacks, one-way sends) and returns the most
/// client threads seen while it ran; the producer is shut down.
fn peak_threads_over(broker_count: usize) -> usize {
    const TOPIC: &str = "ThreadsTopic";
    let brokers: Vec<FakeServer> = (0..broker_count).map(|_| broker()).collect();
    let namesrv = namesrv(TOPIC, &brokers);
    let mut client = ClientConfig::with_namesrv(namesrv.addr());
    client.client_ip = Some("127.0.0.1".into());
    let mut config = ProducerConfig::new("threads_pg", client);
    // Every send goes round the queues in turn, whatever latency the peers show.
    config.send_latency_fault_enable = false;
    let producer = Producer::new(config).unwrap();
    producer.start().unwrap();
    let queues = broker_count * usize::try_from(QUEUES_PER_BROKER).unwrap();
    let mut peak = client_threads();
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for index in 0..queues {
                    let result = producer
                        .send(Message::new(TOPIC, format!("sync-{index}")))
                        .unwrap();
                    assert_eq!(result.status, SendStatus::SendOk);
                }
            });
        }
    });
    peak = peak.max(client_threads());
    let (sender, receiver) = mpsc::channel();
    for index in 0..queues {
        let sender = sender.clone();
        producer
            .send_async(
                Message::new(TOPIC, format!("async-{index}")),
                move |result| {
                    sender.send(result.map(|result| result.queue)).unwrap();
                },
            )
            .unwrap();
    }
    let mut reached = BTreeSet::new();
    for _ in 0..queues {
        let queue = receiver.recv_timeout(CALLBACK_LIMIT).unwrap().unwrap();
        reached.insert((queue.broker_name, queue.queue_id));
        peak = peak.max(client_threads());
    }
    assert_eq!(reached.len(), queues, "the async sends reached every queue");
    for index in 0..queues {
        producer
            .send_oneway(Message::new(TOPIC, format!("oneway-{index}")))
            .unwrap();
    }
    peak = peak.max(client_threads());
    producer.shutdown();
    peak
}

// Proves the blocking producer's threads do not grow with the brokers and queues it sends
// to: sending to 8 queues of 1 broker and to 128 queues of 16 brokers, the process peaks at
// the same count of client threads, at most the producer's runtime workers, its callback
// thread and one blocking-pool thread above what it had before; and they end with it.
#[test]
fn a_producer_of_16_brokers_has_the_threads_of_one_of_1() {
    let before = client_threads();
    let peak_one = peak_threads_over(1);
    let peak_many = peak_threads_over(16);
    assert_eq!(
        peak_one, peak_many,
        "1 broker: {peak_one} client threads, 16 brokers: {peak_many}"
    );
    assert!(
        peak_many <= before + PRODUCER_IO_THREADS + 2,
        "{peak_many} client threads, {before} before"
    );
    wait_until("the producer's threads gone", CALLBACK_LIMIT, || {
        client_threads() == before
    });
}
