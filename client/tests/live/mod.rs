//! A real Comet broker for the client's end-to-end tests: `comet-broker --standalone`
//! (embedded name server) on free loopback ports with a temporary store, through
//! comet-test-support (which also has the waiting helpers). Each test starts its own and it
//! is killed when the test ends.

#![allow(dead_code)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use comet_client::{
    Admin, ClientConfig, ConsumeConcurrentlyStatus, ConsumeFromWhere, ConsumerConfig,
    MessageListener, PushConsumer, PushConsumerConfig, TopicSpec,
};
use comet_test_support::{wait_until, Broker, TempDir};

/// How long a broker may take to show up in its name server's routes.
const REGISTRATION_LIMIT: Duration = Duration::from_secs(30);

/// A running broker and its store. Field order matters: the broker is killed before its
/// store directory is removed.
pub struct Live {
    /// The broker process.
    pub broker: Broker,
    store: TempDir,
    /// TLS of every client this harness makes (a broker whose port enforces TLS).
    tls: Option<comet_client::remoting::TlsOptions>,
}

impl Live {
    /// Starts a one-shard standalone broker with `extra` arguments and waits until the
    /// auto-create template `TBW102` is routable, so the first send of a test cannot race
    /// the broker's registration.
    pub fn start(name: &str, extra: &[&str]) -> Live {
        Live::start_with_tls(name, extra, None)
    }

    /// [`Live::start`] whose clients (the registration check's too) speak TLS with `tls`.
    pub fn start_with_tls(
        name: &str,
        extra: &[&str],
        tls: Option<comet_client::remoting::TlsOptions>,
    ) -> Live {
        let store = TempDir::new(name);
        let broker = Broker::start(store.path(), 1, extra);
        let live = Live { broker, store, tls };
        live.wait_registered();
        live
    }

    /// The name server address.
    pub fn namesrv(&self) -> String {
        self.broker.namesrv()
    }

    /// Client settings for this broker, with a short route refresh so restarts are noticed.
    pub fn client(&self) -> ClientConfig {
        let mut config = ClientConfig::with_namesrv(&self.namesrv());
        config.poll_name_server_interval = Duration::from_secs(2);
        config.transport.tls = self.tls.clone();
        config
    }

    /// Creates a topic named `prefix` and a unique suffix with `queues` queues, and waits
    /// until the name server routes it.
    pub fn create_topic(&self, prefix: &str, queues: i32) -> String {
        let topic = unique(prefix);
        let admin = Admin::new(self.client()).expect("an admin client");
        admin
            .create_topic("DefaultCluster", &TopicSpec::new(&topic, queues))
            .expect("the topic is created");
        wait_until("the topic's route", REGISTRATION_LIMIT, || {
            admin
                .topic_route(&topic)
                .is_ok_and(|route| !route.queue_datas.is_empty())
        });
        admin.shutdown();
        topic
    }

    /// Waits until the name server routes `TBW102` to this broker.
    pub fn wait_registered(&self) {
        let admin = Admin::new(self.client()).expect("an admin client");
        wait_until("the broker's registration", REGISTRATION_LIMIT, || {
            admin.topic_route("TBW102").is_ok()
        });
        admin.shutdown();
    }
}

/// Threads of this process now (from /proc).
pub fn threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .count()
}

/// A name unique to this run, so tests sharing nothing never meet.
pub fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}_{}", nanos % 1_000_000_000_000)
}

/// Consumer settings for this broker: from the first offset, quick rebalances.
pub fn consumer_config(live: &Live, group: &str) -> ConsumerConfig {
    let mut config = ConsumerConfig::new(group, live.client());
    config.consume_from_where = ConsumeFromWhere::FirstOffset;
    config.rebalance_interval = Duration::from_secs(2);
    config
}

/// What a recording consumer saw: (UNIQ_KEY, body) per delivery.
pub type Seen = Arc<Mutex<Vec<(String, String)>>>;

/// A concurrent consumer recording (UNIQ_KEY, body) of everything it consumes.
pub fn recording_consumer(config: ConsumerConfig, topic: &str) -> (PushConsumer, Seen) {
    let seen: Seen = Arc::default();
    let sink = seen.clone();
    let listener = MessageListener::concurrently(move |messages, _| {
        let mut sink = sink.lock().unwrap();
        for message in messages {
            let body = String::from_utf8_lossy(&message.body).into_owned();
            sink.push((message.client_msg_id().to_owned(), body));
        }
        ConsumeConcurrentlyStatus::ConsumeSuccess
    });
    let consumer = PushConsumer::new(PushConsumerConfig::new(config), listener).unwrap();
    consumer.subscribe(topic, "*").unwrap();
    consumer.start().unwrap();
    (consumer, seen)
}

/// The distinct bodies seen.
pub fn distinct_bodies(seen: &Seen) -> BTreeSet<String> {
    seen.lock()
        .unwrap()
        .iter()
        .map(|(_, body)| body.clone())
        .collect()
}

/// The runtime of the async API's tests: two workers, every driver.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// Awaits `future`; the test fails naming `what` if it takes more than `limit`.
pub async fn within<T>(
    what: &str,
    limit: Duration,
    future: impl std::future::Future<Output = T>,
) -> T {
    match tokio::time::timeout(limit, future).await {
        Ok(value) => value,
        Err(_) => panic!("{what} took more than {limit:?}"),
    }
}
