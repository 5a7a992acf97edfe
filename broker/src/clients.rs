//! Producer and consumer registries: who is connected, in which groups, subscribed to what
//! (docs/protocol.md#client-registration). Fed by HEART_BEAT and UNREGISTER_CLIENT, expired 120 s
//! after a client's last heartbeat and at once when its connection closes.
//!
//! A client's connection lives on the shard that accepted it; [`ChannelRef`] names it so that
//! a broker-to-client request (NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE) can be
//! sent there. Broker-wide, behind the metadata lock; never held across an await.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;

use comet_proto::body::{
    ConsumeFromWhere, ConsumeType, ConsumerData, MessageModel, SubscriptionData,
};
use comet_proto::LanguageCode;
use comet_rt::ShardId;

/// How long a client stays registered without a heartbeat.
pub const CLIENT_EXPIRY_MS: i64 = 120_000;

/// One client connection: where it lives and what it said about itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelRef {
    /// Shard whose executor owns the connection.
    pub shard: ShardId,
    /// Connection id, unique within its shard.
    pub connection_id: u64,
    /// Peer address.
    pub client_addr: SocketAddr,
    /// Client language.
    pub language: LanguageCode,
    /// Client version ordinal.
    pub version: i32,
}

#[derive(Clone, Debug)]
struct Member {
    channel: ChannelRef,
    last_heartbeat_ms: i64,
}

/// A consumer group as its members describe it.
#[derive(Clone, Debug)]
pub struct ConsumerGroup {
    members: BTreeMap<String, Member>,
    /// Pull, push or pop.
    pub consume_type: ConsumeType,
    /// Clustering or broadcasting.
    pub message_model: MessageModel,
    /// Where a new member starts.
    pub consume_from_where: ConsumeFromWhere,
    /// Topic → subscription (the latest heartbeat wins).
    pub subscriptions: BTreeMap<String, SubscriptionData>,
}

impl ConsumerGroup {
    /// Client ids, sorted (what GET_CONSUMER_LIST_BY_GROUP answers).
    pub fn client_ids(&self) -> Vec<String> {
        self.members.keys().cloned().collect()
    }

    /// Member channels with their client ids.
    pub fn channels(&self) -> Vec<(String, ChannelRef)> {
        self.members
            .iter()
            .map(|(id, member)| (id.clone(), member.channel.clone()))
            .collect()
    }
}

/// What a heartbeat changed for one consumer group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupChange {
    /// Membership changed: every member should be notified.
    pub members_changed: bool,
}

/// Every producer and consumer group of the broker.
#[derive(Debug, Default)]
pub struct ClientRegistry {
    consumers: HashMap<String, ConsumerGroup>,
    producers: HashMap<String, BTreeMap<String, Member>>,
}

impl ClientRegistry {
    /// An empty registry.
    pub fn new() -> ClientRegistry {
        ClientRegistry::default()
    }

    /// Every consumer group with its name (the metrics' connection gauges).
    pub fn consumer_groups(&self) -> impl Iterator<Item = (&str, &ConsumerGroup)> {
        self.consumers
            .iter()
            .map(|(name, group)| (name.as_str(), group))
    }

    /// Every producer's channel, once per group it registered in.
    pub fn all_producer_channels(&self) -> impl Iterator<Item = &ChannelRef> {
        self.producers
            .values()
            .flat_map(|members| members.values().map(|member| &member.channel))
    }

    /// Registers (or refreshes) `client_id` in a consumer group from its heartbeat entry.
    pub fn register_consumer(
        &mut self,
        client_id: &str,
        data: &ConsumerData,
        channel: ChannelRef,
        now_ms: i64,
    ) -> GroupChange {
        let group = self
            .consumers
            .entry(data.group_name.clone())
            .or_insert_with(|| ConsumerGroup {
                members: BTreeMap::new(),
                consume_type: data.consume_type,
                message_model: data.message_model,
                consume_from_where: data.consume_from_where,
                subscriptions: BTreeMap::new(),
            });
        group.consume_type = data.consume_type;
        group.message_model = data.message_model;
        group.consume_from_where = data.consume_from_where;
        for subscription in &data.subscription_data_set {
            // Only a newer version replaces what the group holds (as Apache's
            // ConsumerGroupInfo.updateSubscription): members heartbeat independently, and a
            // member still on the version before a rebalance must not roll back the version
            // another member already pulls with (its pulls would get SUBSCRIPTION_NOT_LATEST
            // until its next heartbeat, 30 s later).
            let newer = group
                .subscriptions
                .get(&subscription.topic)
                .is_none_or(|held| subscription.sub_version > held.sub_version);
            if newer {
                group
                    .subscriptions
                    .insert(subscription.topic.clone(), subscription.clone());
            }
        }
        let member = Member {
            channel,
            last_heartbeat_ms: now_ms,
        };
        let previous = group.members.insert(client_id.to_owned(), member);
        GroupChange {
            members_changed: previous.is_none(),
        }
    }

    /// Registers (or refreshes) `client_id` in a producer group.
    pub fn register_producer(
        &mut self,
        group: &str,
        client_id: &str,
        channel: ChannelRef,
        now_ms: i64,
    ) {
        let members = self.producers.entry(group.to_owned()).or_default();
        members.insert(
            client_id.to_owned(),
            Member {
                channel,
                last_heartbeat_ms: now_ms,
            },
        );
    }

    /// Removes `client_id` from a consumer group (UNREGISTER_CLIENT); true when it was there.
    pub fn unregister_consumer(&mut self, group: &str, client_id: &str) -> bool {
        let Some(consumers) = self.consumers.get_mut(group) else {
            return false;
        };
        let removed = consumers.members.remove(client_id).is_some();
        if consumers.members.is_empty() {
            self.consumers.remove(group);
        }
        removed
    }

    /// Removes `client_id` from a producer group.
    pub fn unregister_producer(&mut self, group: &str, client_id: &str) {
        if let Some(members) = self.producers.get_mut(group) {
            members.remove(client_id);
            if members.is_empty() {
                self.producers.remove(group);
            }
        }
    }

    /// Drops every registration of a closed connection; returns the consumer groups whose
    /// membership changed.
    pub fn connection_closed(&mut self, shard: ShardId, connection_id: u64) -> Vec<String> {
        self.remove_members(|member| {
            member.channel.shard == shard && member.channel.connection_id == connection_id
        })
    }

    /// Drops clients silent for [`CLIENT_EXPIRY_MS`]; returns the consumer groups whose
    /// membership changed.
    pub fn expire(&mut self, now_ms: i64) -> Vec<String> {
        self.remove_members(|member| now_ms - member.last_heartbeat_ms > CLIENT_EXPIRY_MS)
    }

    fn remove_members(&mut self, dead: impl Fn(&Member) -> bool) -> Vec<String> {
        let mut changed = Vec::new();
        for (name, group) in &mut self.consumers {
            let before = group.members.len();
            group.members.retain(|_, member| !dead(member));
            if group.members.len() != before {
                changed.push(name.clone());
            }
        }
        self.consumers.retain(|_, group| !group.members.is_empty());
        for members in self.producers.values_mut() {
            members.retain(|_, member| !dead(member));
        }
        self.producers.retain(|_, members| !members.is_empty());
        changed.sort();
        changed
    }

    /// A consumer group, if any member is registered.
    pub fn consumer_group(&self, group: &str) -> Option<&ConsumerGroup> {
        self.consumers.get(group)
    }

    /// Names of consumer groups subscribed to `topic`.
    pub fn groups_subscribed_to(&self, topic: &str) -> Vec<String> {
        let mut groups: Vec<String> = self
            .consumers
            .iter()
            .filter(|(_, group)| group.subscriptions.contains_key(topic))
            .map(|(name, _)| name.clone())
            .collect();
        groups.sort();
        groups
    }

    /// The connection of producer client `client_id` in any group, with that group (Java's
    /// `ProducerManager.findChannel`, which request-reply uses to reach a requester).
    pub fn find_producer(&self, client_id: &str) -> Option<(String, ChannelRef)> {
        self.producers.iter().find_map(|(group, members)| {
            let member = members.get(client_id)?;
            Some((group.clone(), member.channel.clone()))
        })
    }

    /// Channels of a producer group (transaction check-back goes to one of them).
    pub fn producer_channels(&self, group: &str) -> Vec<(String, ChannelRef)> {
        self.producers
            .get(group)
            .map(|members| {
                members
                    .iter()
                    .map(|(id, member)| (id.clone(), member.channel.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Which client of which group is asked: what error remarks name (an admin
/// request a client answers, see `crate::processor::ask_client`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientLabel {
    /// Consumer group.
    pub group: String,
    /// Client id within the group.
    pub client_id: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn channel(connection_id: u64) -> ChannelRef {
        ChannelRef {
            shard: ShardId(0),
            connection_id,
            client_addr: "127.0.0.1:5000".parse().unwrap(),
            language: LanguageCode::JAVA,
            version: 479,
        }
    }

    fn consumer(group: &str, topic: &str) -> ConsumerData {
        ConsumerData {
            group_name: group.to_owned(),
            subscription_data_set: vec![SubscriptionData {
                topic: topic.to_owned(),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    // Proves membership changes are reported on join and on close/expiry, not on refresh,
    // and that client ids come back sorted.
    #[test]
    fn membership_changes() {
        let mut registry = ClientRegistry::new();
        let data = consumer("g", "t");
        assert!(
            registry
                .register_consumer("c2", &data, channel(2), 0)
                .members_changed
        );
        assert!(
            registry
                .register_consumer("c1", &data, channel(1), 0)
                .members_changed
        );
        assert!(
            !registry
                .register_consumer("c1", &data, channel(1), 10)
                .members_changed
        );
        assert_eq!(
            registry.consumer_group("g").unwrap().client_ids(),
            vec!["c1", "c2"]
        );
        assert_eq!(registry.groups_subscribed_to("t"), vec!["g".to_owned()]);
        assert_eq!(
            registry.connection_closed(ShardId(0), 2),
            vec!["g".to_owned()]
        );
        assert_eq!(
            registry.consumer_group("g").unwrap().client_ids(),
            vec!["c1"]
        );
        assert!(registry.expire(100_000).is_empty());
        assert_eq!(registry.expire(200_000), vec!["g".to_owned()]);
        assert!(registry.consumer_group("g").is_none());
    }

    // Proves a heartbeat carrying an older subscription version (a member that has not
    // rebalanced yet) does not roll back the version a newer heartbeat registered, and a
    // newer version (a changed expression) replaces it.
    #[test]
    fn subscription_versions_only_move_forward() {
        let mut registry = ClientRegistry::new();
        let versioned = |version: i64, expression: &str| {
            let mut data = consumer("g", "t");
            data.subscription_data_set[0].sub_version = version;
            data.subscription_data_set[0].sub_string = expression.to_owned();
            data
        };
        let held = |registry: &ClientRegistry| {
            let subscription = &registry.consumer_group("g").unwrap().subscriptions["t"];
            (subscription.sub_version, subscription.sub_string.clone())
        };
        registry.register_consumer("c1", &versioned(200, "*"), channel(1), 0);
        registry.register_consumer("c2", &versioned(100, "*"), channel(2), 0);
        assert_eq!(held(&registry), (200, "*".to_owned()));
        registry.register_consumer("c2", &versioned(300, "TagA"), channel(2), 10);
        assert_eq!(held(&registry), (300, "TagA".to_owned()));
    }

    // Proves producer registration and unregistration.
    #[test]
    fn producers() {
        let mut registry = ClientRegistry::new();
        registry.register_producer("pg", "c1", channel(1), 0);
        assert_eq!(registry.producer_channels("pg").len(), 1);
        registry.unregister_producer("pg", "c1");
        assert!(registry.producer_channels("pg").is_empty());
        assert!(!registry.unregister_consumer("nope", "c1"));
    }
}
