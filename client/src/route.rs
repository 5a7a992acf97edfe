//! Topic routes: name-server selection, the route cache and the queue lists derived from a
//! route (docs/protocol.md#queue-lists-and-allocation).
//!
//! * [`NameServers`] keeps the configured addresses and a current index. Requests go to the
//!   current name server; a transport failure moves the index to the next one and the request
//!   is retried there, so one dead name server costs one failed attempt, not an outage.
//! * [`RouteCache`] holds, per topic, the last route and the two queue lists computed from
//!   it, plus the merged broker-name → address table. Entries are replaced whole (`Arc`),
//!   so readers never see a half-updated route.
//! * [`publish_queues`] and [`subscribe_queues`] are pure functions of a route.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use comet_proto::body::{BrokerData, JsonBody, TopicRouteData};
use comet_proto::{RemotingCommand, ResponseCode};

use crate::error::{ClientError, Result};
use crate::message::MessageQueue;
use crate::remoting::RemotingClient;
pub use comet_proto::allocate::{compare_queues, java_string_cmp, sort_queues};

/// Permission bit: readable.
pub const PERM_READ: i32 = 4;
/// Permission bit: writable.
pub const PERM_WRITE: i32 = 2;
/// Broker id of a master.
pub const MASTER_ID: i64 = 0;

/// The configured name servers and which one is in use.
pub struct NameServers {
    addrs: Vec<String>,
    current: AtomicUsize,
}

impl NameServers {
    /// Name servers from a list; the first one in use is picked at random so that many
    /// clients spread over the name servers.
    pub fn new(addrs: Vec<String>) -> NameServers {
        let start = if addrs.is_empty() {
            0
        } else {
            random_index(addrs.len())
        };
        NameServers {
            addrs,
            current: AtomicUsize::new(start),
        }
    }

    /// Parses the Java form `host:port;host:port` (commas and spaces accepted too).
    pub fn parse_list(list: &str) -> Vec<String> {
        list.split([';', ',', ' '])
            .map(str::trim)
            .filter(|addr| !addr.is_empty())
            .map(str::to_owned)
            .collect()
    }

    /// The configured addresses.
    pub fn addrs(&self) -> &[String] {
        &self.addrs
    }

    /// Sends `request` to the current name server, failing over to the others in turn on
    /// transport errors. A response (whatever its code) ends the walk.
    pub fn invoke(
        &self,
        remoting: &RemotingClient,
        request: &RemotingCommand,
        timeout: Duration,
    ) -> Result<(String, RemotingCommand)> {
        if self.addrs.is_empty() {
            return Err(ClientError::NameServer(
                "no name server address configured".into(),
            ));
        }
        let mut last_error = None;
        for (index, addr) in self.walk() {
            match remoting.invoke(addr, request.clone(), timeout) {
                Ok(response) => {
                    self.set_current(index);
                    return Ok((addr.to_owned(), response));
                }
                Err(error) if error.is_transport() => {
                    log::warn!("name server {addr} failed, trying the next one: {error}");
                    last_error = Some(error);
                }
                Err(error) => return Err(error),
            }
        }
        Err(NameServers::all_failed(last_error))
    }

    /// The fail-over walk of one request: (index, address) of every name server, the
    /// current one first.
    pub fn walk(&self) -> impl Iterator<Item = (usize, &str)> {
        let start = self.current.load(Ordering::Relaxed);
        let count = self.addrs.len();
        (0..count).map(move |step| {
            let index = (start + step) % count;
            (index, self.addrs[index].as_str())
        })
    }

    /// Makes name server `index` (of [`NameServers::walk`]) the current one: it answered.
    pub fn set_current(&self, index: usize) {
        assert!(index < self.addrs.len());
        self.current.store(index, Ordering::Relaxed);
    }

    /// The error of a walk in which every name server failed, the last with `last_error`.
    pub fn all_failed(last_error: Option<ClientError>) -> ClientError {
        let error = last_error.map_or_else(String::new, |error| error.to_string());
        ClientError::NameServer(format!("every name server failed; last: {error}"))
    }
}

/// A route and what the client derived from it.
#[derive(Clone, Debug)]
pub struct TopicRoute {
    /// The route as the name server sent it.
    pub data: TopicRouteData,
    /// Queues a producer may send to, in selection order.
    pub publish: Vec<MessageQueue>,
    /// Queues consumers rebalance over, sorted as Java sorts them.
    pub subscribe: Vec<MessageQueue>,
    /// True when the route came from `orderTopicConf`.
    pub ordered: bool,
}

impl TopicRoute {
    /// Derives the queue lists of `data` for `topic`.
    pub fn new(topic: &str, data: TopicRouteData) -> TopicRoute {
        let ordered = data
            .order_topic_conf
            .as_deref()
            .is_some_and(|conf| !conf.is_empty());
        TopicRoute {
            publish: publish_queues(topic, &data),
            subscribe: subscribe_queues(topic, &data),
            data,
            ordered,
        }
    }
}

/// Publish queues (docs/protocol.md#queue-lists-and-allocation): from `orderTopicConf` when set,
/// else queue datas sorted by broker name, writable and with a master, queues `0..writeQueueNums`.
pub fn publish_queues(topic: &str, data: &TopicRouteData) -> Vec<MessageQueue> {
    if let Some(conf) = data.order_topic_conf.as_deref().filter(|c| !c.is_empty()) {
        return conf
            .split(';')
            .filter_map(|item| item.split_once(':'))
            .filter_map(|(broker, count)| Some((broker.trim(), count.trim().parse::<i32>().ok()?)))
            .flat_map(|(broker, count)| {
                (0..count.max(0)).map(move |queue_id| MessageQueue::new(topic, broker, queue_id))
            })
            .collect();
    }
    let mut queue_datas: Vec<_> = data.queue_datas.iter().collect();
    queue_datas.sort_by(|a, b| java_string_cmp(&a.broker_name, &b.broker_name));
    queue_datas
        .into_iter()
        .filter(|queue_data| queue_data.perm & PERM_WRITE != 0)
        .filter(|queue_data| has_master(&data.broker_datas, &queue_data.broker_name))
        .flat_map(|queue_data| {
            (0..queue_data.write_queue_nums.max(0))
                .map(|queue_id| MessageQueue::new(topic, &queue_data.broker_name, queue_id))
        })
        .collect()
}

/// Subscribe queues (docs/protocol.md#queue-lists-and-allocation): readable queue datas, queues
/// `0..readQueueNums`, sorted by (topic, broker name, queue id) in Java order.
pub fn subscribe_queues(topic: &str, data: &TopicRouteData) -> Vec<MessageQueue> {
    let mut queues: Vec<MessageQueue> = data
        .queue_datas
        .iter()
        .filter(|queue_data| queue_data.perm & PERM_READ != 0)
        .flat_map(|queue_data| {
            (0..queue_data.read_queue_nums.max(0))
                .map(|queue_id| MessageQueue::new(topic, &queue_data.broker_name, queue_id))
        })
        .collect();
    sort_queues(&mut queues);
    queues
}

fn has_master(brokers: &[BrokerData], broker_name: &str) -> bool {
    brokers.iter().any(|broker| {
        broker.broker_name == broker_name && broker.broker_addrs.contains_key(&MASTER_ID)
    })
}

/// Routes by topic and broker addresses by name.
#[derive(Default)]
pub struct RouteCache {
    routes: RwLock<HashMap<String, Arc<TopicRoute>>>,
    brokers: RwLock<HashMap<String, BTreeMap<i64, String>>>,
}

impl RouteCache {
    /// The cached route of `topic`.
    pub fn get(&self, topic: &str) -> Option<Arc<TopicRoute>> {
        read(&self.routes).get(topic).cloned()
    }

    /// Stores a route and merges its broker addresses. Returns true when the route changed.
    pub fn put(&self, topic: &str, data: TopicRouteData) -> bool {
        {
            let mut brokers = write(&self.brokers);
            for broker in &data.broker_datas {
                brokers.insert(broker.broker_name.clone(), broker.broker_addrs.clone());
            }
        }
        let changed = self.get(topic).is_none_or(|old| old.data != data);
        if changed {
            let route = Arc::new(TopicRoute::new(topic, data));
            write(&self.routes).insert(topic.to_owned(), route);
        }
        changed
    }

    /// Forgets a topic.
    pub fn remove(&self, topic: &str) {
        write(&self.routes).remove(topic);
    }

    /// Topics with a cached route.
    pub fn topics(&self) -> Vec<String> {
        read(&self.routes).keys().cloned().collect()
    }

    /// The master address of `broker_name`.
    pub fn master_addr(&self, broker_name: &str) -> Option<String> {
        read(&self.brokers)
            .get(broker_name)
            .and_then(|addrs| addrs.get(&MASTER_ID).cloned())
    }

    /// The address of broker `broker_id` of `broker_name`, else the master, else any member.
    pub fn addr_preferring(&self, broker_name: &str, broker_id: i64) -> Option<String> {
        let brokers = read(&self.brokers);
        let addrs = brokers.get(broker_name)?;
        addrs
            .get(&broker_id)
            .or_else(|| addrs.get(&MASTER_ID))
            .or_else(|| addrs.values().next())
            .cloned()
    }

    /// Every known broker: name → (id → address).
    pub fn brokers(&self) -> HashMap<String, BTreeMap<i64, String>> {
        read(&self.brokers).clone()
    }
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|poison| poison.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|poison| poison.into_inner())
}

/// A cheap non-cryptographic random number (for spreading load, never for security):
/// std's randomly keyed SipHash over a per-call counter.
pub fn random_u64() -> u64 {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_usize(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.finish()
}

/// A random index below `len` (0 when `len` is 0).
pub fn random_index(len: usize) -> usize {
    let len = u64::try_from(len.max(1)).unwrap_or(u64::MAX);
    usize::try_from(random_u64() % len).unwrap_or(0)
}

/// Turns a GET_ROUTEINFO_BY_TOPIC response into a route: `None` for TOPIC_NOT_EXIST.
pub fn route_from_response(
    addr: &str,
    response: RemotingCommand,
) -> Result<Option<TopicRouteData>> {
    match response.response_code() {
        ResponseCode::SUCCESS => comet_proto::body::TopicRouteData::decode(&response.body)
            .map(Some)
            .map_err(|error| ClientError::Json {
                what: "TopicRouteData",
                reason: error.to_string(),
            }),
        ResponseCode::TOPIC_NOT_EXIST => Ok(None),
        code => Err(ClientError::Response {
            addr: addr.to_owned(),
            code,
            remark: response.remark.unwrap_or_default(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use comet_proto::body::QueueData;

    fn queue_data(broker: &str, read: i32, write: i32, perm: i32) -> QueueData {
        QueueData {
            broker_name: broker.into(),
            read_queue_nums: read,
            write_queue_nums: write,
            perm,
            topic_sys_flag: 0,
        }
    }

    fn broker(name: &str, ids: &[i64]) -> BrokerData {
        BrokerData {
            cluster: "DefaultCluster".into(),
            broker_name: name.into(),
            broker_addrs: ids
                .iter()
                .map(|id| (*id, format!("127.0.0.1:{}", 10911 + id)))
                .collect(),
            ..BrokerData::default()
        }
    }

    fn names(queues: &[MessageQueue]) -> Vec<String> {
        queues
            .iter()
            .map(|q| format!("{}:{}", q.broker_name, q.queue_id))
            .collect()
    }

    // Proves publish queues are sorted by broker, skip read-only brokers and brokers with no
    // master, and use writeQueueNums; subscribe queues use readQueueNums of readable brokers.
    #[test]
    fn queue_lists_from_a_route() {
        let data = TopicRouteData {
            queue_datas: vec![
                queue_data("broker-c", 1, 1, 6),
                queue_data("broker-b", 2, 3, 6),
                queue_data("broker-a", 2, 2, 4),
                queue_data("broker-d", 1, 1, 6),
            ],
            broker_datas: vec![
                broker("broker-a", &[0]),
                broker("broker-b", &[0, 1]),
                broker("broker-c", &[0]),
                broker("broker-d", &[1]),
            ],
            ..TopicRouteData::default()
        };
        let publish = publish_queues("T", &data);
        assert_eq!(
            names(&publish),
            ["broker-b:0", "broker-b:1", "broker-b:2", "broker-c:0"]
        );
        let subscribe = subscribe_queues("T", &data);
        assert_eq!(
            names(&subscribe),
            [
                "broker-a:0",
                "broker-a:1",
                "broker-b:0",
                "broker-b:1",
                "broker-c:0",
                "broker-d:0"
            ]
        );
    }

    // Proves orderTopicConf overrides the queue datas for publishing.
    #[test]
    fn ordered_topic_conf() {
        let data = TopicRouteData {
            order_topic_conf: Some("broker-b:2;broker-a:1".into()),
            queue_datas: vec![queue_data("broker-a", 8, 8, 6)],
            broker_datas: vec![broker("broker-a", &[0])],
            ..TopicRouteData::default()
        };
        let route = TopicRoute::new("T", data);
        assert!(route.ordered);
        assert_eq!(
            names(&route.publish),
            ["broker-b:0", "broker-b:1", "broker-a:0"]
        );
    }

    // Proves the Java name-server list syntax is split on semicolons.
    #[test]
    fn name_server_list() {
        assert_eq!(
            NameServers::parse_list(" 127.0.0.1:9876;127.0.0.2:9876; "),
            ["127.0.0.1:9876", "127.0.0.2:9876"]
        );
    }
}
