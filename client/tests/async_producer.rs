//! The async producer and transport (`comet_client::aio`) against a real Comet broker
//! (`live`: a standalone `comet-broker` on free loopback ports, killed when the test ends)
//! and against scripted peers (`common::FakeServer`). Build the broker first
//! (`cargo build -p comet-broker`) or set `COMET_BROKER_BIN`.
//!
//! Request futures are polled by hand where a test needs them registered but unanswered:
//! on a current-thread runtime nothing else runs until the test yields, so the writer task
//! has not written them yet.

mod common;
mod live;

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use comet_client::{
    AsyncProducer, AsyncTransport, AsyncTransportConfig, ClientError, Message, ProducerConfig,
    SendResult, SendStatus,
};
use comet_proto::{RemotingCommand, RequestCode};
use comet_test_support::wait_until;
use common::FakeServer;
use live::{consumer_config, distinct_bodies, recording_consumer, unique, Live};

/// Longest any awaited step of these tests may take before the test fails.
const STEP_LIMIT: Duration = Duration::from_secs(30);

type SendFuture = Pin<Box<dyn Future<Output = comet_client::Result<SendResult>> + Send>>;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// An async producer of `live` whose routes stay fresh for the whole test, so a send never
/// stops at a route fetch.
fn producer(live: &Live) -> AsyncProducer {
    let mut client = live.client();
    client.poll_name_server_interval = Duration::from_secs(600);
    let mut config = ProducerConfig::new(&unique("async_pg"), client);
    config.send_timeout = STEP_LIMIT;
    AsyncProducer::new(config).expect("an async producer")
}

async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    live::within(what, STEP_LIMIT, future).await
}

/// Polls each future once, outside tokio's cooperative budget (which would make later ones
/// yield before registering), and asserts none is finished.
async fn poll_each_once<F: Future + Unpin>(futures: &mut [F]) {
    tokio::task::unconstrained(async {
        for future in futures.iter_mut() {
            assert!(futures::poll!(future).is_pending());
        }
    })
    .await;
}

/// Polls `condition` until it holds, failing the test after [`STEP_LIMIT`].
async fn until(what: &str, mut condition: impl FnMut() -> bool) {
    within(what, async {
        while !condition() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
}

// Proves async sends (spawned as tasks) and an async batch are stored: a push consumer reads
// every body back, and each send result names the stored queue and offset.
#[test]
fn async_sends_and_a_batch_arrive() {
    let live = Live::start("client-async-sends", &[]);
    let topic = unique("AsyncSends");
    let producer = producer(&live);
    let (singles, batches) = runtime().block_on(async {
        let mut singles = Vec::new();
        for i in 0..10 {
            let message = Message::new(topic.as_str(), format!("single-{i}"));
            // Send futures own what they need, so they can run as tasks of their own.
            let task = tokio::spawn(producer.send(message));
            singles.push(within("a send", task).await.unwrap().unwrap());
        }
        let batch = (0..10)
            .map(|i| Message::new(topic.as_str(), format!("batch-{i}")))
            .collect();
        let batches = within("a batch", producer.send_batch(batch)).await.unwrap();
        (singles, batches)
    });
    assert_eq!(
        batches.len(),
        1,
        "ten small messages make one batch request"
    );
    for result in singles.iter().chain(&batches) {
        assert_eq!(result.status, SendStatus::SendOk);
        assert_eq!(result.queue.topic, topic);
        assert!(result.queue_offset >= 0, "{result:?}");
    }
    assert_eq!(batches[0].msg_id.split(',').count(), 10);
    let (consumer, seen) = recording_consumer(consumer_config(&live, &unique("async_cg")), &topic);
    let expected: BTreeSet<String> = (0..10)
        .flat_map(|i| [format!("single-{i}"), format!("batch-{i}")])
        .collect();
    wait_until("every message consumed", STEP_LIMIT, || {
        distinct_bodies(&seen) == expected
    });
    consumer.shutdown();
    producer.shutdown();
}

// Proves dropping send futures in flight withdraws their waiters at once, that their late
// answers are dropped rather than delivered, and that the connection keeps serving sends.
#[test]
fn dropped_sends_leave_no_waiter_and_a_usable_connection() {
    let live = Live::start("client-async-drop", &[]);
    let topic = unique("AsyncDrop");
    let producer = producer(&live);
    runtime().block_on(async {
        let warm_up = Message::new(topic.as_str(), "warm-up");
        within("the first send", producer.send(warm_up))
            .await
            .unwrap();
        let transport = producer.transport();
        let connects = transport.connects();
        let mut sends: Vec<SendFuture> = (0..100)
            .map(|i| {
                Box::pin(producer.send(Message::new(topic.as_str(), format!("drop-{i}")))) as _
            })
            .collect();
        poll_each_once(&mut sends).await;
        assert_eq!(transport.in_flight_total(), 100);
        drop(sends);
        assert_eq!(
            transport.in_flight_total(),
            0,
            "dropping removes the waiters"
        );
        // The withdrawn frames were queued already: the broker answers them, unheard.
        until("the late answers", || transport.late_answers() == 100).await;
        for i in 0..20 {
            let message = Message::new(topic.as_str(), format!("after-{i}"));
            let result = within("a send after the drop", producer.send(message)).await;
            assert_eq!(result.unwrap().status, SendStatus::SendOk);
        }
        assert_eq!(
            transport.connects(),
            connects,
            "the same connections served"
        );
        assert_eq!(transport.in_flight_total(), 0);
        assert_eq!(transport.late_answers(), 100);
    });
    producer.shutdown();
}

// Proves a broker killed with requests in flight fails every waiter promptly (well within
// the request timeout) with `ConnectionClosed`, and that sends afterwards fail with a
// transport error instead of hanging.
#[test]
fn a_killed_broker_fails_every_waiter_at_once() {
    let mut live = Live::start("client-async-kill", &[]);
    let broker = live.broker.broker_addr.to_string();
    let topic = unique("AsyncKill");
    let producer = producer(&live);
    let transport = AsyncTransport::new(AsyncTransportConfig::default()).unwrap();
    let request_timeout = Duration::from_secs(120);
    let request = || RemotingCommand::request(RequestCode::GET_BROKER_RUNTIME_INFO, 0);
    runtime().block_on(async {
        within(
            "a request",
            transport.invoke(&broker, request(), request_timeout),
        )
        .await
        .unwrap();
        let warm_up = Message::new(topic.as_str(), "warm-up");
        within("the first send", producer.send(warm_up))
            .await
            .unwrap();
        let mut requests: Vec<_> = (0..100)
            .map(|_| Box::pin(transport.invoke(&broker, request(), request_timeout)))
            .collect();
        poll_each_once(&mut requests).await;
        assert_eq!(transport.in_flight(&broker), 100);
        live.broker.kill();
        let killed = Instant::now();
        let outcomes = within("the failures", futures::future::join_all(requests)).await;
        let waited = killed.elapsed();
        for outcome in outcomes {
            assert!(
                matches!(outcome, Err(ClientError::ConnectionClosed { .. })),
                "{outcome:?}"
            );
        }
        assert!(waited < Duration::from_secs(10), "failing took {waited:?}");
        assert_eq!(transport.in_flight(&broker), 0);
        let sends = (0..50).map(|i| producer.send(Message::new(topic.as_str(), i.to_string())));
        let outcomes = within("sends to a dead broker", futures::future::join_all(sends)).await;
        for outcome in outcomes {
            let error = outcome.unwrap_err();
            assert!(error.is_transport(), "{error:?}");
        }
    });
    producer.shutdown();
    transport.shutdown();
}

// Proves a producer outlives the runtime its connections were opened on: after that
// runtime is dropped (and its connection tasks with it), sends on a new runtime reconnect.
#[test]
fn a_producer_serves_one_runtime_after_another() {
    let live = Live::start("client-async-runtimes", &[]);
    let topic = unique("AsyncRuntimes");
    let producer = producer(&live);
    for round in 0..2 {
        let result = runtime().block_on(async {
            let message = Message::new(topic.as_str(), format!("round-{round}"));
            within("a send", producer.send(message)).await
        });
        assert_eq!(result.unwrap().status, SendStatus::SendOk);
    }
    // The name server's and the broker's, then the broker's again (the route is fresh).
    assert_eq!(producer.transport().connects(), 3);
    producer.shutdown();
}

/// A peer that reads every request and answers none.
fn silent_server() -> FakeServer {
    FakeServer::start(|mut conn| while conn.recv().is_some() {})
}

// Proves a request unanswered within its timeout fails with `Timeout` and leaves no waiter.
#[test]
fn unanswered_requests_time_out() {
    let server = silent_server();
    let transport = AsyncTransport::new(AsyncTransportConfig::default()).unwrap();
    runtime().block_on(async {
        let request = RemotingCommand::request(RequestCode::HEART_BEAT, 0);
        let started = Instant::now();
        let timeout = Duration::from_millis(200);
        let outcome = within(
            "a timeout",
            transport.invoke(server.addr(), request, timeout),
        )
        .await;
        assert!(
            matches!(outcome, Err(ClientError::Timeout { .. })),
            "{outcome:?}"
        );
        assert!(started.elapsed() >= timeout);
        assert_eq!(transport.in_flight(server.addr()), 0);
    });
}

// Proves the in-flight limit: requests beyond it wait for a slot instead of being written,
// a slot freed by a dropped request goes to a waiter, and closing the connection fails the
// registered requests and the waiting one alike.
#[test]
fn the_in_flight_limit_holds_requests_back() {
    let server = silent_server();
    let config = AsyncTransportConfig {
        in_flight_per_connection_max: 2,
        ..AsyncTransportConfig::default()
    };
    let transport = AsyncTransport::new(config).unwrap();
    let addr = server.addr().to_owned();
    runtime().block_on(async {
        // Opens the connection, so that one poll of each request reaches its slot.
        let heart_beat = RemotingCommand::request(RequestCode::HEART_BEAT, 0);
        let short = Duration::from_millis(50);
        let outcome = within("a warm-up", transport.invoke(&addr, heart_beat, short)).await;
        assert!(
            matches!(outcome, Err(ClientError::Timeout { .. })),
            "{outcome:?}"
        );
        assert_eq!(transport.in_flight(&addr), 0);
        let timeout = Duration::from_secs(120);
        let mut requests: Vec<_> = (0..4)
            .map(|_| {
                let request = RemotingCommand::request(RequestCode::HEART_BEAT, 0);
                Some(Box::pin(transport.invoke(&addr, request, timeout)))
            })
            .collect();
        let mut live_requests: Vec<_> = requests.iter_mut().flatten().collect();
        poll_each_once(&mut live_requests).await;
        assert_eq!(transport.in_flight(&addr), 2);
        requests[0] = None;
        assert_eq!(transport.in_flight(&addr), 1);
        let mut live_requests: Vec<_> = requests.iter_mut().flatten().collect();
        poll_each_once(&mut live_requests).await;
        assert_eq!(transport.in_flight(&addr), 2, "the freed slot is taken");
        transport.close_connection(&addr);
        let outcomes = within(
            "the failures",
            futures::future::join_all(requests.into_iter().flatten()),
        )
        .await;
        assert_eq!(outcomes.len(), 3);
        for outcome in outcomes {
            assert!(
                matches!(outcome, Err(ClientError::ConnectionClosed { .. })),
                "{outcome:?}"
            );
        }
    });
}

// Proves an in-flight limit out of range is refused with a typed error.
#[test]
fn an_in_flight_limit_of_zero_is_refused() {
    let config = AsyncTransportConfig {
        in_flight_per_connection_max: 0,
        ..AsyncTransportConfig::default()
    };
    assert!(matches!(
        AsyncTransport::new(config),
        Err(ClientError::Invalid(_))
    ));
}
