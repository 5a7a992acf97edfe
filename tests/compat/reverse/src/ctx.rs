//! Per-run and per-scenario context: unique names, explicit topic creation, and the clients a
//! scenario started, shut down in reverse order when the scenario ends whatever its outcome
//! (also when it timed out and its thread is still blocked in a client call).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use comet_client::{
    Admin, ClientConfig, ConsumeFromWhere, ConsumerConfig, LitePullConfig, LitePullConsumer,
    MessageListener, MessageModel, Producer, ProducerConfig, PushConsumer, PushConsumerConfig,
    TopicSpec,
};

use crate::check::{ensure, Failure};

/// Queues of every topic a scenario creates.
pub const QUEUES: usize = 4;
/// How long a just-started broker may take to register with the name server, and a new
/// topic's route to appear there.
const REGISTRATION_WAIT: Duration = Duration::from_secs(30);
/// Producer send timeout (a loaded 2-core machine can stall a broker for seconds).
const SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// State shared by every scenario of a run.
pub struct Shared {
    /// Name server address.
    pub namesrv: String,
    /// 8 hex digits unique to this run, part of every resource name.
    pub run_id: String,
    /// Admin client for topic creation and consume stats.
    pub admin: Admin,
    masters: Vec<String>,
    /// Broadcasting consumers' offset files (removed at the end of the run).
    pub offsets_dir: PathBuf,
}

impl Shared {
    /// Connects the admin client and waits until the name server knows a master broker.
    pub fn new(namesrv: &str) -> Result<Shared, Failure> {
        let admin = Admin::new(ClientConfig::with_namesrv(namesrv))?;
        let deadline = Instant::now() + REGISTRATION_WAIT;
        let masters = loop {
            match admin.cluster_masters(None) {
                Ok(masters) if !masters.is_empty() => break masters,
                outcome => {
                    if Instant::now() > deadline {
                        admin.shutdown();
                        return Err(Failure::Check(format!(
                            "the name server knows no master broker after {} s: {outcome:?}",
                            REGISTRATION_WAIT.as_secs()
                        )));
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        let run_id = run_id();
        let offsets_dir = std::env::temp_dir().join(format!("compat-reverse-{run_id}"));
        Ok(Shared {
            namesrv: namesrv.to_owned(),
            run_id,
            admin,
            masters,
            offsets_dir,
        })
    }

    /// Closes the admin client and removes the offset files.
    pub fn close(&self) {
        self.admin.shutdown();
        // Absent when no broadcasting consumer ran; nothing to report then.
        let _ = std::fs::remove_dir_all(&self.offsets_dir);
    }
}

/// 8 hex digits from the clock and the process id: unique enough across runs of one machine.
fn run_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mixed = nanos ^ (u128::from(std::process::id()) << 40);
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in mixed.to_le_bytes() {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{:08x}", hash & 0xffff_ffff)
}

type Closer = Box<dyn FnOnce() + Send>;

/// One scenario's context.
pub struct Ctx {
    /// The run's shared state.
    pub shared: Arc<Shared>,
    scenario: String,
    closers: Mutex<Vec<Closer>>,
    serial: AtomicU32,
}

impl Ctx {
    /// A context for `scenario`.
    pub fn new(shared: Arc<Shared>, scenario: &str) -> Ctx {
        Ctx {
            shared,
            scenario: scenario.to_owned(),
            closers: Mutex::new(Vec::new()),
            serial: AtomicU32::new(0),
        }
    }

    /// The run id.
    pub fn run_id(&self) -> &str {
        &self.shared.run_id
    }

    /// A unique resource name: `prefix_scenario_runId`.
    pub fn name(&self, prefix: &str) -> String {
        format!("{prefix}_{}_{}", self.scenario, self.shared.run_id)
    }

    fn serial(&self) -> u32 {
        self.serial.fetch_add(1, Ordering::Relaxed)
    }

    fn client_config(&self, prefix: &str) -> ClientConfig {
        let mut client = ClientConfig::with_namesrv(&self.shared.namesrv);
        // Members of one group in this process need distinct client ids, or the broker
        // would count them as one consumer.
        client.instance_name = format!("{}_{}", self.name(prefix), self.serial());
        client
    }

    fn on_close(&self, closer: Closer) {
        self.closers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(closer);
    }

    /// Creates `topic` with [`QUEUES`] read/write queues on every master and waits until the
    /// name server returns its route, so clients started afterwards find it at once.
    pub fn create_topic(&self, topic: &str) -> Result<String, Failure> {
        let queues = i32::try_from(QUEUES).expect("queue count fits an i32");
        let spec = TopicSpec::new(topic, queues);
        for addr in &self.shared.masters {
            self.shared.admin.create_topic_on_broker(addr, &spec)?;
        }
        let deadline = Instant::now() + REGISTRATION_WAIT;
        loop {
            match self.shared.admin.topic_route(topic) {
                Ok(route) if !route.queue_datas.is_empty() => return Ok(topic.to_owned()),
                outcome => ensure(Instant::now() < deadline, || {
                    format!("route of new topic {topic} never appeared: {outcome:?}")
                })?,
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A started producer in a group of its own.
    pub fn producer(&self) -> Result<Producer, Failure> {
        let group = format!("{}_{}", self.name("pg"), self.serial());
        let mut config = ProducerConfig::new(&group, self.client_config("prod"));
        config.send_timeout = SEND_TIMEOUT;
        let producer = Producer::new(config)?;
        producer.start()?;
        let closing = producer.clone();
        self.on_close(Box::new(move || closing.shutdown()));
        Ok(producer)
    }

    /// A started push consumer member of `group`, reading new groups from the first offset,
    /// subscribed to `topic` with `expression`.
    pub fn push_consumer(
        &self,
        group: &str,
        model: MessageModel,
        topic: &str,
        expression: &str,
        listener: MessageListener,
    ) -> Result<PushConsumer, Failure> {
        let mut consumer = ConsumerConfig::new(group, self.client_config("cons"));
        consumer.consume_from_where = ConsumeFromWhere::FirstOffset;
        consumer.message_model = model;
        consumer.local_offset_dir = self.shared.offsets_dir.clone();
        let push = PushConsumer::new(PushConsumerConfig::new(consumer), listener)?;
        let closing = push.clone();
        self.on_close(Box::new(move || closing.shutdown()));
        push.subscribe(topic, expression)?;
        push.start()?;
        Ok(push)
    }

    /// A lite pull consumer of `group` with manual commits, not started.
    pub fn lite_pull_consumer(&self, group: &str) -> Result<LitePullConsumer, Failure> {
        let mut consumer = ConsumerConfig::new(group, self.client_config("pull"));
        consumer.consume_from_where = ConsumeFromWhere::FirstOffset;
        let mut config = LitePullConfig::new(consumer);
        config.auto_commit = false;
        let lite = LitePullConsumer::new(config)?;
        let closing = lite.clone();
        self.on_close(Box::new(move || closing.shutdown()));
        Ok(lite)
    }

    /// Shuts down every client the scenario started, newest first.
    pub fn close(&self) {
        let closers: Vec<Closer> =
            std::mem::take(&mut *self.closers.lock().unwrap_or_else(|p| p.into_inner()));
        for closer in closers.into_iter().rev() {
            closer();
        }
    }
}
