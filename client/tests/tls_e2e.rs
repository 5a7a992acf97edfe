//! End-to-end TLS: comet-client producers and push consumers against a real
//! `comet-broker --standalone` whose port (and embedded name server) runs with
//! `tls.server.mode` enforcing or permissive, with a CA and certificates made at test time.
//! Route lookups go to the name server over TLS and the broker registers with it over TLS
//! (an enforcing broker's own connections use TLS, as Java's).

mod live;

use std::time::Duration;

use comet_client::remoting::TlsOptions;
use comet_client::{ClientConfig, Message, Producer, ProducerConfig};
use comet_test_support::tls::TestCertificates;
use comet_test_support::wait_until;
use live::{consumer_config, distinct_bodies, recording_consumer, unique, Live};

fn tls_args(certificates: &TestCertificates, mode: &str) -> Vec<String> {
    vec![
        "-o".to_owned(),
        format!("tls.server.mode={mode}"),
        "-o".to_owned(),
        format!("tls.server.certPath={}", certificates.server_cert.display()),
        "-o".to_owned(),
        format!("tls.server.keyPath={}", certificates.server_key.display()),
    ]
}

fn producer(config: ClientConfig) -> Producer {
    let producer = Producer::new(ProducerConfig::new(&unique("tls_pg"), config)).unwrap();
    producer.start().unwrap();
    producer
}

/// Sends `count` messages tagged `label` with `producer` and waits until a push consumer
/// made from `consumer_client` has received them all.
fn send_and_consume(live: &Live, producer: &Producer, consumer_client: ClientConfig, label: &str) {
    let topic = unique("TlsTopic");
    for i in 0..20 {
        let message = Message::new(topic.as_str(), format!("{label}-{i}"));
        producer.send(message).unwrap();
    }
    let mut settings = consumer_config(live, &unique("tls_cg"));
    settings.client = consumer_client;
    let (consumer, seen) = recording_consumer(settings, &topic);
    wait_until("20 messages over TLS", Duration::from_secs(60), || {
        distinct_bodies(&seen).len() >= 20
    });
    consumer.shutdown();
}

// Proves an enforcing broker serves a client trusting its CA (name server and broker, send
// and pull) and refuses a plain client.
#[test]
fn enforcing_broker_serves_tls_clients_and_refuses_plain_ones() {
    let certificates = TestCertificates::new("client-tls-enforcing");
    let args = tls_args(&certificates, "enforcing");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let tls = TlsOptions::trusting_ca(&certificates.ca_cert).unwrap();
    let live = Live::start_with_tls("client-tls-enforcing", &args, Some(tls));
    let secure = producer(live.client());
    send_and_consume(&live, &secure, live.client(), "tls");
    secure.shutdown();

    let mut plain_config = live.client();
    plain_config.transport.tls = None;
    let plain = Producer::new(ProducerConfig::new(&unique("plain_pg"), plain_config)).unwrap();
    let refused = plain
        .start()
        .and_then(|()| plain.send(Message::new("TlsRefused", "plain")));
    assert!(refused.is_err(), "a plain client was served: {refused:?}");
    plain.shutdown();
}

// Proves a permissive broker serves a plain client and a TLS client (here one that accepts
// any certificate, as Java's test mode) on the same port.
#[test]
fn permissive_broker_serves_plain_and_tls_clients() {
    let certificates = TestCertificates::new("client-tls-permissive");
    let args = tls_args(&certificates, "permissive");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let live = Live::start("client-tls-permissive", &args);
    let mut tls_config = live.client();
    tls_config.transport.tls = Some(TlsOptions::trusting_any().unwrap());
    let secure = producer(tls_config.clone());
    send_and_consume(&live, &secure, live.client(), "tls");
    secure.shutdown();
    let plain = producer(live.client());
    send_and_consume(&live, &plain, tls_config, "plain");
    plain.shutdown();
}

// Proves a CA file that cannot be read is a clear error, not a panic.
#[test]
fn an_unreadable_ca_file_is_an_error() {
    let error = TlsOptions::trusting_ca(std::path::Path::new("/nonexistent/ca.pem"))
        .unwrap_err()
        .to_string();
    assert!(error.contains("/nonexistent/ca.pem"), "{error}");
}
