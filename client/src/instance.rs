//! The client instance: what one producer, consumer or admin object shares with the network
//! (Java's `MQClientInstance`).
//!
//! It owns the transport, the client id, the name-server selection, the route cache, and one
//! background thread (`comet-client-tasks`) that refreshes routes (every 30 s, first after
//! 10 ms) and heartbeats every known master broker (every 30 s, first after 1 s). It serves
//! the admin client (the producers and consumers run on the async transport, see
//! `crate::aio`), which no broker request is meant for: every one gets
//! REQUEST_CODE_NOT_SUPPORTED (docs/protocol.md#broker-to-client-requests). A new broker
//! connection gets a heartbeat at once (5.x).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use comet_proto::{RemotingCommand, RequestCode, ResponseCode};

use crate::config::ClientConfig;
use crate::error::{ClientError, Result};
use comet_proto::body::JsonBody;

use crate::protocol::{self, HeartbeatData, ProducerData};
use crate::remoting::{Handled, RemotingClient, RequestHandler};
use crate::route::{self, NameServers, RouteCache, TopicRoute};
use crate::util::lock;

/// The internal producer group every Java client lists in its heartbeat.
pub const CLIENT_INNER_PRODUCER_GROUP: &str = "CLIENT_INNER_PRODUCER";

/// Shared state of one client instance.
pub struct ClientInstance {
    config: ClientConfig,
    client_id: String,
    remoting: RemotingClient,
    namesrv: NameServers,
    routes: RouteCache,
    publish_topics: Mutex<BTreeSet<String>>,
    broker_versions: Mutex<HashMap<String, i32>>,
    stopped: Mutex<bool>,
    wake: Condvar,
    tasks: Mutex<Option<JoinHandle<()>>>,
}

struct InstanceHandler {
    instance: Weak<ClientInstance>,
}

impl RequestHandler for InstanceHandler {
    fn handle_request(&self, _addr: &str, _request: &RemotingCommand) -> Handled {
        Handled::NotSupported
    }

    fn on_connected(&self, addr: &str) {
        if let Some(instance) = self.instance.upgrade() {
            if instance.is_broker_addr(addr) {
                if let Err(error) = instance.heartbeat_to(addr) {
                    log::debug!("heartbeat on connect to {addr} failed: {error}");
                }
            }
        }
    }
}

impl ClientInstance {
    /// Creates an instance and starts its transport (no background tasks yet).
    pub fn new(config: ClientConfig) -> Arc<ClientInstance> {
        let client_id = config.build_client_id();
        let remoting = RemotingClient::signed(config.transport.clone(), config.credentials.clone());
        let namesrv = NameServers::new(config.namesrv_addrs.clone());
        let instance = Arc::new(ClientInstance {
            config,
            client_id,
            remoting,
            namesrv,
            routes: RouteCache::default(),
            publish_topics: Mutex::new(BTreeSet::new()),
            broker_versions: Mutex::new(HashMap::new()),
            stopped: Mutex::new(false),
            wake: Condvar::new(),
            tasks: Mutex::new(None),
        });
        let handler = Arc::new(InstanceHandler {
            instance: Arc::downgrade(&instance),
        });
        instance.remoting.set_request_handler(handler);
        instance
    }

    /// Starts the route and heartbeat thread. Idempotent.
    pub fn start(self: &Arc<Self>) {
        let mut tasks = lock(&self.tasks);
        if tasks.is_some() {
            return;
        }
        let weak = Arc::downgrade(self);
        let handle = thread::Builder::new()
            .name("comet-client-tasks".into())
            .spawn(move || tasks_main(weak))
            .expect("spawning the client task thread");
        *tasks = Some(handle);
    }

    /// The settings.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// `<ip>@<instance>`.
    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    /// The transport.
    pub fn remoting(&self) -> &RemotingClient {
        &self.remoting
    }

    /// The route cache.
    pub fn routes(&self) -> &RouteCache {
        &self.routes
    }

    /// The name servers.
    pub fn name_servers(&self) -> &NameServers {
        &self.namesrv
    }

    /// Sends `request` to a name server (with fail-over) and returns the response.
    pub fn invoke_namesrv(&self, request: RemotingCommand) -> Result<(String, RemotingCommand)> {
        self.namesrv
            .invoke(&self.remoting, &request, self.config.api_timeout)
    }

    /// Sends `request` to a broker and fails unless the code is one of `accepted`.
    pub fn invoke_broker(
        &self,
        addr: &str,
        request: RemotingCommand,
        accepted: &[ResponseCode],
    ) -> Result<RemotingCommand> {
        let response = self
            .remoting
            .invoke(addr, request, self.config.api_timeout)?;
        protocol::expect(addr, response, accepted)
    }

    /// Marks a topic as published to, so its route is refreshed.
    pub fn add_publish_topic(&self, topic: &str) {
        lock(&self.publish_topics).insert(topic.to_owned());
    }

    /// Fetches `topic`'s route from a name server and caches it. `Ok(None)` when no name
    /// server knows the topic.
    pub fn update_route(&self, topic: &str) -> Result<Option<Arc<TopicRoute>>> {
        let (addr, response) = self.invoke_namesrv(protocol::get_route_info(topic))?;
        match route::route_from_response(&addr, response)? {
            Some(data) => {
                self.routes.put(topic, data);
                Ok(self.routes.get(topic))
            }
            None => Ok(None),
        }
    }

    /// The cached route of `topic`, fetched when absent.
    pub fn route(&self, topic: &str) -> Result<Arc<TopicRoute>> {
        if let Some(route) = self.routes.get(topic) {
            return Ok(route);
        }
        self.update_route(topic)?
            .ok_or_else(|| ClientError::NoRoute {
                topic: topic.to_owned(),
                reason: "unknown to the name servers".into(),
            })
    }

    /// The master address of `broker_name`, refreshing `topic`'s route once if unknown.
    pub fn master_addr(&self, broker_name: &str, topic: &str) -> Result<String> {
        if let Some(addr) = self.routes.master_addr(broker_name) {
            return Ok(addr);
        }
        self.update_route(topic)?;
        self.routes
            .master_addr(broker_name)
            .ok_or_else(|| ClientError::BrokerNotFound(broker_name.to_owned()))
    }

    fn is_broker_addr(&self, addr: &str) -> bool {
        self.routes
            .brokers()
            .values()
            .any(|members| members.values().any(|known| known == addr))
    }

    fn heartbeat_data(&self) -> HeartbeatData {
        let producer_data_set = vec![ProducerData {
            group_name: CLIENT_INNER_PRODUCER_GROUP.into(),
        }];
        HeartbeatData {
            client_id: self.client_id.clone(),
            producer_data_set,
            consumer_data_set: Vec::new(),
            heartbeat_fingerprint: 0,
            without_sub: false,
        }
    }

    /// Sends one heartbeat to `addr` and records the broker's version.
    pub fn heartbeat_to(&self, addr: &str) -> Result<()> {
        let body = self.heartbeat_data().encode();
        let request = RemotingCommand::request(RequestCode::HEART_BEAT, 0).with_body(body);
        let response = self.invoke_broker(addr, request, &[ResponseCode::SUCCESS])?;
        lock(&self.broker_versions).insert(addr.to_owned(), response.version);
        Ok(())
    }

    /// Heartbeats every known master broker (slaves serve consumers only).
    pub fn heartbeat_all(&self) {
        for members in self.routes.brokers().values() {
            for (id, addr) in members {
                if *id != route::MASTER_ID {
                    continue;
                }
                if let Err(error) = self.heartbeat_to(addr) {
                    log::warn!("heartbeat to {addr} failed: {error}");
                }
            }
        }
    }

    /// Refreshes the route of every topic in use.
    pub fn refresh_routes(&self) {
        let topics: BTreeSet<String> = lock(&self.publish_topics).clone();
        for topic in topics {
            match self.update_route(&topic) {
                Ok(_) => {}
                Err(error) => log::debug!("route refresh of {topic} failed: {error}"),
            }
        }
    }

    /// Unregisters a producer or consumer group from every known broker (3 s each).
    pub fn unregister(&self, producer_group: Option<&str>, consumer_group: Option<&str>) {
        for members in self.routes.brokers().values() {
            for addr in members.values() {
                let request =
                    protocol::unregister_client(&self.client_id, producer_group, consumer_group);
                if let Err(error) = self.invoke_broker(addr, request, &[ResponseCode::SUCCESS]) {
                    log::debug!("unregister from {addr} failed: {error}");
                }
            }
        }
    }

    /// Stops the background thread and the transport. Idempotent.
    pub fn shutdown(&self) {
        *lock(&self.stopped) = true;
        self.wake.notify_all();
        let handle = lock(&self.tasks).take();
        if let Some(handle) = handle {
            if handle.thread().id() != thread::current().id() {
                let _ = handle.join();
            }
        }
        self.remoting.shutdown();
    }

    /// Waits up to `timeout` unless stopped; true when stopped.
    fn sleep(&self, timeout: Duration) -> bool {
        let stopped = lock(&self.stopped);
        let (stopped, _) = self
            .wake
            .wait_timeout_while(stopped, timeout, |stopped| !*stopped)
            .unwrap_or_else(|poison| poison.into_inner());
        *stopped
    }
}

fn tasks_main(instance: Weak<ClientInstance>) {
    let start = Instant::now();
    let (mut next_route, mut next_heartbeat) = (
        start + Duration::from_millis(10),
        start + Duration::from_secs(1),
    );
    loop {
        let Some(strong) = instance.upgrade() else {
            return;
        };
        let now = Instant::now();
        if now >= next_route {
            strong.refresh_routes();
            next_route = Instant::now() + strong.config.poll_name_server_interval;
        }
        if now >= next_heartbeat {
            strong.heartbeat_all();
            next_heartbeat = Instant::now() + strong.config.heartbeat_broker_interval;
        }
        let wait = next_route
            .min(next_heartbeat)
            .saturating_duration_since(Instant::now());
        if strong.sleep(wait) {
            return;
        }
    }
}
