//! The queue set QUERY_ASSIGNMENT splits: every readable queue of the topic on every broker
//! of the cluster, as the name servers' route says (Java's `TopicRouteInfoManager`, which a
//! Java broker refreshes from its name servers).
//!
//! The route is asked for when a query needs it, over an async connection (the shard keeps
//! serving while it waits), and kept for [`ROUTE_CACHE_TTL`]: a group's consumers all ask
//! within a rebalance round, so one lookup serves the round. When no name server answers
//! (none configured, or all down), the broker's own queues of the topic are used instead:
//! the assignment then covers this broker only, which is what a client of a one-broker
//! cluster needs and better than refusing every consumer while the name servers are away.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use comet_proto::body::{JsonBody, MessageQueue, TopicRouteData};
use comet_proto::headers::GetRouteInfoRequestHeader;
use comet_proto::{RemotingCommand, RequestCode, ResponseCode};

use crate::config::BrokerConfig;
use crate::namesrv_client::{client_tls, parse_addr, NameServerLink};
use crate::topic::{perm, TopicTable};

/// How long a name server's answer is reused.
pub const ROUTE_CACHE_TTL: Duration = Duration::from_secs(3);

/// How long one name server may take to answer (the client waits 3 s for the whole query).
pub const ROUTE_CALL_TIMEOUT: Duration = Duration::from_millis(800);

/// What the name servers said about a topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RouteAnswer {
    /// The topic's readable queues on every broker.
    Queues(Vec<MessageQueue>),
    /// The name servers know no such topic.
    NoRoute,
}

/// Answers of the last [`ROUTE_CACHE_TTL`], by topic.
#[derive(Debug, Default)]
pub struct RouteCache {
    entries: HashMap<String, (Instant, RouteAnswer)>,
}

impl RouteCache {
    /// The answer for `topic` if it is younger than the TTL at `now`.
    pub fn fresh(&self, topic: &str, now: Instant) -> Option<RouteAnswer> {
        let (fetched, answer) = self.entries.get(topic)?;
        (now.saturating_duration_since(*fetched) < ROUTE_CACHE_TTL).then(|| answer.clone())
    }

    /// Keeps `answer` for `topic`, fetched at `now`, and forgets answers past their TTL (so
    /// the cache holds only the topics of the last few seconds).
    pub fn store(&mut self, topic: &str, answer: RouteAnswer, now: Instant) {
        self.entries
            .retain(|_, (fetched, _)| now.saturating_duration_since(*fetched) < ROUTE_CACHE_TTL);
        self.entries.insert(topic.to_owned(), (now, answer));
    }
}

/// The subscribe queues of a route (Java's `topicRouteData2TopicSubscribeInfo`, static-topic
/// mappings ignored as Java's assignment does): queues `0..readQueueNums` of every readable
/// broker entry.
pub fn subscribe_queues(topic: &str, route: &TopicRouteData) -> Vec<MessageQueue> {
    route
        .queue_datas
        .iter()
        .filter(|data| perm::is_readable(data.perm))
        .flat_map(|data| {
            (0..data.read_queue_nums.max(0))
                .map(move |queue_id| MessageQueue::new(topic, data.broker_name.clone(), queue_id))
        })
        .collect()
}

/// This broker's readable queues of `topic`, as it would register them; `None` when it does
/// not have the topic.
pub fn own_queues(
    config: &BrokerConfig,
    topics: &TopicTable,
    topic: &str,
) -> Option<Vec<MessageQueue>> {
    let topic_config = topics.get(topic)?;
    if !perm::is_readable(topic_config.perm & config.broker_permission) {
        return Some(Vec::new());
    }
    Some(
        (0..topic_config.read_queue_nums.max(0))
            .map(|queue_id| MessageQueue::new(topic, config.broker_name.clone(), queue_id))
            .collect(),
    )
}

/// Asks the configured name servers in turn for `topic`'s route; `None` when none answered
/// (each failure is logged).
pub async fn ask_name_servers(
    config: &BrokerConfig,
    topic: &str,
    opaque: i32,
) -> Option<RouteAnswer> {
    let tls = client_tls(config);
    let header = GetRouteInfoRequestHeader {
        topic: topic.to_owned(),
        accept_standard_json_only: Some(true),
    };
    for text in &config.namesrv_addrs {
        let addr = match parse_addr(text) {
            Ok(addr) => addr,
            Err(error) => {
                log::warn!("route of {topic}: {error}");
                continue;
            }
        };
        // A connection per lookup: lookups are a few per rebalance round, and the link that
        // registers this broker must not carry anything else.
        let mut link = NameServerLink::new(addr, tls.clone());
        let request = RemotingCommand::request(RequestCode::GET_ROUTEINFO_BY_TOPIC, opaque)
            .with_header(&header);
        match link.call(&request, ROUTE_CALL_TIMEOUT).await {
            Ok(response) if response.response_code() == ResponseCode::SUCCESS => {
                match TopicRouteData::decode(&response.body) {
                    Ok(route) => return Some(RouteAnswer::Queues(subscribe_queues(topic, &route))),
                    Err(error) => {
                        log::warn!("route of {topic} from {addr} does not parse: {error}")
                    }
                }
            }
            Ok(response) if response.response_code() == ResponseCode::TOPIC_NOT_EXIST => {
                return Some(RouteAnswer::NoRoute);
            }
            Ok(response) => log::warn!(
                "route of {topic}: name server {addr} answered {} {:?}",
                response.response_code(),
                response.remark
            ),
            Err(error) => log::warn!("route of {topic}: {error}"),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use comet_proto::body::QueueData;

    // Proves the subscribe queues come from readable entries only, per broker name.
    #[test]
    fn subscribe_queues_of_a_route() {
        let data = |broker: &str, read: i32, perm: i32| QueueData {
            broker_name: broker.into(),
            read_queue_nums: read,
            write_queue_nums: read,
            perm,
            topic_sys_flag: 0,
        };
        let route = TopicRouteData {
            queue_datas: vec![data("a", 2, 6), data("b", 1, 4), data("c", 3, 2)],
            ..TopicRouteData::default()
        };
        let queues: Vec<(String, i32)> = subscribe_queues("T", &route)
            .into_iter()
            .map(|queue| (queue.broker_name, queue.queue_id))
            .collect();
        assert_eq!(
            queues,
            vec![("a".into(), 0), ("a".into(), 1), ("b".into(), 0)]
        );
    }

    // Proves a cached answer lives for the TTL and no longer, and that storing drops
    // expired entries.
    #[test]
    fn cache_expires() {
        let start = comet_rt::clock::monotonic_now();
        let mut cache = RouteCache::default();
        cache.store("T", RouteAnswer::NoRoute, start);
        assert_eq!(
            cache.fresh("T", start + Duration::from_secs(1)),
            Some(RouteAnswer::NoRoute)
        );
        assert_eq!(cache.fresh("T", start + ROUTE_CACHE_TTL), None);
        cache.store(
            "U",
            RouteAnswer::Queues(Vec::new()),
            start + ROUTE_CACHE_TTL,
        );
        assert_eq!(cache.entries.len(), 1);
    }
}
