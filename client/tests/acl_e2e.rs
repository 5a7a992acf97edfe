//! End-to-end test of request signing: comet-client producers and consumers given ACL 1.0
//! credentials, against a real `comet-broker --standalone` started with `aclEnable=true`
//! and an accounts file (`live`; the broker is killed when the test ends).

mod live;

use std::time::Duration;

use comet_client::{ClientConfig, Credentials, Message, Producer, ProducerConfig};
use comet_test_support::{wait_until, TempDir};
use live::{consumer_config, distinct_bodies, recording_consumer, unique, Live};

const ACCOUNTS: &str = "\
accounts:
  - accessKey: client0001
    secretKey: client-secret
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
    topicPerms: [ClosedTopic=DENY]
";

fn credentials() -> Credentials {
    Credentials::new("client0001", "client-secret")
}

fn signed(mut config: ClientConfig) -> ClientConfig {
    config.credentials = Some(credentials());
    config
}

fn producer(config: ClientConfig) -> Producer {
    let producer = Producer::new(ProducerConfig::new(&unique("acl_pg"), config)).unwrap();
    producer.start().unwrap();
    producer
}

// Proves a producer and a push consumer signing with the account's credentials send and
// consume through an ACL broker, while an unsigned producer, a wrong secret and a DENY
// topic are refused with the broker's ACL remark.
#[test]
fn signed_producer_and_consumer_work_against_an_acl_broker() {
    let accounts = TempDir::new("client-acl-file");
    let file = accounts.path().join("plain_acl.yml");
    std::fs::write(&file, ACCOUNTS).unwrap();
    let file_option = format!("plainAclFile={}", file.display());
    let live = Live::start(
        "client-acl",
        &["-o", "aclEnable=true", "-o", file_option.as_str()],
    );
    let topic = unique("AclClient");
    let signed_producer = producer(signed(live.client()));
    for i in 0..20 {
        let message = Message::new(topic.as_str(), format!("acl-{i}"));
        signed_producer.send(message).unwrap();
    }
    let mut settings = consumer_config(&live, &unique("acl_cg"));
    settings.client.credentials = Some(credentials());
    let (consumer, seen) = recording_consumer(settings, &topic);
    wait_until("20 signed messages", Duration::from_secs(60), || {
        distinct_bodies(&seen).len() >= 20
    });
    consumer.shutdown();

    let closed = signed_producer.send(Message::new("ClosedTopic", "no"));
    let error = closed.unwrap_err().to_string();
    assert!(
        error.contains("No permission for topic:ClosedTopic"),
        "{error}"
    );
    signed_producer.shutdown();

    let unsigned = producer(live.client());
    let error = unsigned
        .send(Message::new(topic.as_str(), "unsigned"))
        .unwrap_err()
        .to_string();
    assert!(error.contains("No accessKey is configured"), "{error}");
    unsigned.shutdown();
    let mut wrong = live.client();
    wrong.credentials = Some(Credentials::new("client0001", "wrong-secret"));
    let wrong = producer(wrong);
    let error = wrong
        .send(Message::new(topic.as_str(), "wrong"))
        .unwrap_err()
        .to_string();
    assert!(error.contains("Check signature failed"), "{error}");
    wrong.shutdown();
}
