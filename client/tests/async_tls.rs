//! TLS on the async transport: an `AsyncProducer` and an `AsyncPushConsumer` against a real
//! `comet-broker --standalone` whose port (and embedded name server) enforces TLS, with a CA
//! and certificates made at test time (as `tls_e2e.rs` does for the blocking clients).

mod live;

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use comet_client::remoting::TlsOptions;
use comet_client::{
    AsyncMessageListener, AsyncProducer, AsyncPushConsumer, AsyncPushConsumerConfig, ClientError,
    ConsumeConcurrentlyStatus, Message, ProducerConfig,
};
use comet_test_support::tls::TestCertificates;
use live::{consumer_config, runtime, unique, Live};

/// Longest any awaited step of these tests may take before the test fails.
const STEP_LIMIT: Duration = Duration::from_secs(60);

async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    live::within(what, STEP_LIMIT, future).await
}

fn enforcing_broker(name: &str, certificates: &TestCertificates) -> Live {
    let args = [
        "-o".to_owned(),
        "tls.server.mode=enforcing".to_owned(),
        "-o".to_owned(),
        format!("tls.server.certPath={}", certificates.server_cert.display()),
        "-o".to_owned(),
        format!("tls.server.keyPath={}", certificates.server_key.display()),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let tls = TlsOptions::trusting_ca(&certificates.ca_cert).unwrap();
    Live::start_with_tls(name, &args, Some(tls))
}

// Proves the async producer (route lookup at the name server, sends to the broker) and the
// async push consumer (heartbeats, rebalance, pulls, offset commits) work over TLS against
// a broker that enforces it.
#[test]
fn async_clients_send_and_consume_over_tls() {
    let certificates = TestCertificates::new("client-atls-enforcing");
    let live = enforcing_broker("client-atls-enforcing", &certificates);
    let topic = unique("AsyncTlsTopic");
    runtime().block_on(async {
        let producer =
            AsyncProducer::new(ProducerConfig::new(&unique("atls_pg"), live.client())).unwrap();
        let sent: BTreeSet<String> = (0..20).map(|i| format!("tls-{i}")).collect();
        for body in &sent {
            let message = Message::new(topic.as_str(), body.clone().into_bytes());
            within("a send", producer.send(message)).await.unwrap();
        }
        producer.shutdown();

        let seen: Arc<Mutex<BTreeSet<String>>> = Arc::default();
        let sink = seen.clone();
        let listener = AsyncMessageListener::concurrently(move |messages, _| {
            let sink = sink.clone();
            async move {
                let bodies = messages
                    .iter()
                    .map(|message| String::from_utf8_lossy(&message.body).into_owned());
                sink.lock().unwrap().extend(bodies);
                ConsumeConcurrentlyStatus::ConsumeSuccess
            }
        });
        let config = AsyncPushConsumerConfig::new(consumer_config(&live, &unique("atls_cg")));
        let consumer = AsyncPushConsumer::new(config, listener).unwrap();
        consumer.subscribe(&topic, "*").unwrap();
        within("the start", consumer.start()).await.unwrap();
        within("20 messages over TLS", async {
            while !seen.lock().unwrap().is_superset(&sent) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        within("the shutdown", consumer.shutdown()).await;
    });
}

// Proves the async transport's TLS checks the server: a client trusting another CA fails
// its handshake with a connect error naming TLS, and a plain client is not served.
#[test]
fn async_clients_refuse_an_untrusted_server_and_are_refused_plain() {
    let certificates = TestCertificates::new("client-atls-refused");
    let live = enforcing_broker("client-atls-refused", &certificates);
    let other = TestCertificates::new("client-atls-other-ca");
    runtime().block_on(async {
        let mut untrusting = live.client();
        untrusting.transport.tls = Some(TlsOptions::trusting_ca(&other.ca_cert).unwrap());
        let producer =
            AsyncProducer::new(ProducerConfig::new(&unique("atls_pg"), untrusting)).unwrap();
        let outcome = within(
            "a send",
            producer.send(Message::new("AsyncTlsRefused", "x")),
        )
        .await;
        producer.shutdown();
        let error = outcome.expect_err("a server of an untrusted CA was trusted");
        assert!(error.to_string().contains("TLS handshake"), "{error}");

        let mut plain = live.client();
        plain.transport.tls = None;
        let producer = AsyncProducer::new(ProducerConfig::new(&unique("atls_pg"), plain)).unwrap();
        let outcome = within(
            "a send",
            producer.send(Message::new("AsyncTlsRefused", "x")),
        )
        .await;
        producer.shutdown();
        assert!(
            !matches!(outcome, Ok(_) | Err(ClientError::Invalid(_))),
            "a plain client was served or refused locally: {outcome:?}"
        );
    });
}
