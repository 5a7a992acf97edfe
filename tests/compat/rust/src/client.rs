//! The run's environment: the crate's client runtime, its admin client (topic creation), and
//! builders for producers and push consumers with unique names.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cheetah_string::CheetahString;
use rocketmq_client_rust::{
    ClientConfig, ClientRuntime, ClientRuntimeConfig, ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus, DefaultMQAdminExt, DefaultMQProducer, DefaultMQPushConsumer,
    MQAdminReadExt, MQPushConsumer, MessageListenerConcurrently, TopicAdmin,
};
use rocketmq_model::common::consumer::consume_from_where::ConsumeFromWhere;
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::topic::TopicConfig;
use rocketmq_runtime::{RuntimeConfig, RuntimeOwner};

/// Queues of every topic a scenario creates.
pub const QUEUES: usize = 4;
/// Read and write permission bits of a topic (PermName.PERM_READ | PERM_WRITE).
const PERM_READ_WRITE: u32 = 4 | 2;
/// How long a just-started broker may take to register, and a new topic's route to appear.
const REGISTRATION_WAIT: Duration = Duration::from_secs(30);
/// Producer send timeout, ms (a loaded 2-core machine can stall a broker for seconds).
const SEND_TIMEOUT_MS: u32 = 10_000;

/// What every scenario needs.
pub struct Env {
    /// Name server address.
    pub namesrv: String,
    /// 8 hex digits unique to this run, part of every resource name.
    pub run_id: String,
    owner: RuntimeOwner,
    client_runtime: Arc<ClientRuntime>,
    telemetry: rocketmq_observability::TelemetryRuntimeGuard,
    admin: DefaultMQAdminExt,
    masters: Vec<CheetahString>,
    serial: Mutex<u32>,
}

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

impl Env {
    /// Starts the client runtime and the admin client, and waits for a master broker.
    pub async fn start(namesrv: &str) -> Result<Env, String> {
        let owner = RuntimeOwner::plan(RuntimeConfig {
            thread_name: "compat-rust".to_owned(),
            ..Default::default()
        })
        .map_err(|e| format!("runtime plan: {e}"))?
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
        let telemetry = rocketmq_observability::install_global(
            &rocketmq_observability::TelemetryBootstrapConfig::default(),
        )
        .map_err(|e| format!("telemetry: {e}"))?;
        let client_runtime = ClientRuntime::try_new(
            owner.root_context().component("client"),
            ClientRuntimeConfig::default(),
            telemetry.handle(),
        )
        .map_err(|e| format!("client runtime: {e}"))?;
        let run_id = run_id();
        let mut admin = DefaultMQAdminExt::with_admin_ext_group(
            client_runtime.clone(),
            format!("compat_admin_{run_id}"),
        );
        admin.set_namesrv_addr(namesrv);
        admin
            .client_config_mut()
            .set_instance_name(format!("compat-admin-{run_id}").into());
        admin
            .start()
            .await
            .map_err(|e| format!("admin start: {e}"))?;
        let masters = wait_for_masters(&admin).await?;
        Ok(Env {
            namesrv: namesrv.to_owned(),
            run_id,
            owner,
            client_runtime,
            telemetry,
            admin,
            masters,
            serial: Mutex::new(0),
        })
    }

    /// Stops the admin client and the runtimes.
    pub async fn shutdown(mut self) {
        self.admin.shutdown().await;
        // Health reports of the runtimes are informational here: the scenarios decided.
        let _ = self.client_runtime.shutdown().await;
        let _ = self.owner.shutdown_tasks().await;
        let _ = self.owner.shutdown_background();
        let _ = self.telemetry.shutdown();
    }

    /// A unique resource name: `prefix_scenario_runId`.
    pub fn name(&self, prefix: &str, scenario: &str) -> String {
        format!("{prefix}_{scenario}_{}", self.run_id)
    }

    fn next_serial(&self) -> u32 {
        let mut serial = self.serial.lock().unwrap_or_else(|p| p.into_inner());
        *serial += 1;
        *serial
    }

    fn client_config(&self, instance: String) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set_namesrv_addr(self.namesrv.clone().into());
        // Members of one group in this process need distinct client ids, or the broker
        // would count them as one consumer.
        config.set_instance_name(instance.into());
        config
    }

    /// Creates `topic` with [`QUEUES`] read/write queues on every master and waits until the
    /// name server returns its route.
    pub async fn create_topic(&self, topic: &str) -> Result<String, String> {
        for addr in &self.masters {
            let mut config = TopicConfig::new(topic);
            config.read_queue_nums = QUEUES as u32;
            config.write_queue_nums = QUEUES as u32;
            config.perm = PERM_READ_WRITE;
            TopicAdmin::create_and_update_topic_config(self.admin.inner(), addr.clone(), config)
                .await
                .map_err(|e| format!("create topic {topic} on {addr}: {e}"))?;
        }
        let deadline = Instant::now() + REGISTRATION_WAIT;
        loop {
            let route = MQAdminReadExt::examine_topic_route_info(&self.admin, topic.into()).await;
            match route {
                Ok(Some(route)) if !route.queue_datas.is_empty() => return Ok(topic.to_owned()),
                other if Instant::now() > deadline => {
                    return Err(format!(
                        "route of new topic {topic} never appeared: {other:?}"
                    ))
                }
                _ => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    /// A started producer in a group of its own.
    pub async fn producer(&self, scenario: &str) -> Result<DefaultMQProducer, String> {
        let serial = self.next_serial();
        let instance = format!("{}_{serial}", self.name("prod", scenario));
        let mut producer = DefaultMQProducer::builder(self.client_runtime.clone())
            .client_config(self.client_config(instance))
            .name_server_addr(self.namesrv.clone())
            .producer_group(format!("{}_{serial}", self.name("pg", scenario)))
            .send_msg_timeout(SEND_TIMEOUT_MS)
            .build();
        producer
            .start()
            .await
            .map_err(|e| format!("producer start: {e}"))?;
        Ok(producer)
    }

    /// A started clustering push consumer member of `group`, reading new groups from the
    /// first offset, recording into `collector`.
    pub async fn push_consumer(
        &self,
        group: &str,
        topic: &str,
        expression: &str,
        collector: &Arc<Collector>,
    ) -> Result<DefaultMQPushConsumer, String> {
        let serial = self.next_serial();
        let instance = format!("{group}_m{serial}");
        let mut consumer = DefaultMQPushConsumer::builder(self.client_runtime.clone())
            .client_config(self.client_config(instance))
            .name_server_addr(self.namesrv.clone())
            .consumer_group(group.to_owned())
            .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
            .build();
        consumer
            .subscribe(topic, expression)
            .await
            .map_err(|e| format!("subscribe: {e}"))?;
        consumer.register_message_listener_concurrently(Recorder(collector.clone()));
        consumer
            .start()
            .await
            .map_err(|e| format!("consumer start: {e}"))?;
        Ok(consumer)
    }
}

async fn wait_for_masters(admin: &DefaultMQAdminExt) -> Result<Vec<CheetahString>, String> {
    let deadline = Instant::now() + REGISTRATION_WAIT;
    loop {
        let info = MQAdminReadExt::examine_broker_cluster_info(admin).await;
        let masters: Vec<CheetahString> = match &info {
            Ok(info) => info
                .broker_addr_table
                .iter()
                .flat_map(|table| table.values())
                .filter_map(|broker| broker.broker_addrs().get(&0).cloned())
                .collect(),
            Err(_) => Vec::new(),
        };
        if !masters.is_empty() {
            return Ok(masters);
        }
        if Instant::now() > deadline {
            return Err(format!(
                "the name server knows no master broker after {} s: {:?}",
                REGISTRATION_WAIT.as_secs(),
                info.err()
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Arrivals of one consumer member, in the order its listener saw them.
#[derive(Default)]
pub struct Collector {
    got: Mutex<Vec<MessageExt>>,
}

impl Collector {
    /// An empty collector.
    pub fn new() -> Arc<Collector> {
        Arc::new(Collector::default())
    }

    /// Every delivery so far, duplicates included.
    pub fn arrivals(&self) -> Vec<MessageExt> {
        self.got.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Distinct messages received (by `cid`).
    pub fn distinct_count(&self) -> usize {
        let mut seen: HashMap<String, ()> = HashMap::new();
        for message in self.got.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            seen.insert(crate::check::cid(message), ());
        }
        seen.len()
    }
}

/// The listener: records and acknowledges everything.
struct Recorder(Arc<Collector>);

impl MessageListenerConcurrently for Recorder {
    fn consume_message(
        &self,
        msgs: &[&MessageExt],
        _context: &ConsumeConcurrentlyContext,
    ) -> rocketmq_client_rust::ClientResult<ConsumeConcurrentlyStatus> {
        let mut got = self.0.got.lock().unwrap_or_else(|p| p.into_inner());
        got.extend(msgs.iter().map(|m| (*m).clone()));
        Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
    }
}
