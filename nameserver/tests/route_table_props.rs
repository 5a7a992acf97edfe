//! Property test: random register / unregister / expire / connection-close sequences leave the
//! route table consistent, and what it answers matches a simple model of who is registered.

use std::collections::{BTreeMap, BTreeSet};

use comet_nameserver::route_table::{BrokerKey, Registration, RouteTable};
use comet_net::ConnectionId;
use comet_proto::body::{DataVersion, TopicConfig, TopicConfigSerializeWrapper};
use comet_rt::ShardId;
use proptest::prelude::*;

const TOPICS: [&str; 4] = ["T0", "T1", "T2", "T3"];

#[derive(Clone, Debug)]
enum Op {
    /// Register member (name, id) at address slot, with a topic subset and version counter.
    Register {
        name: u8,
        id: u8,
        slot: u8,
        topics: u8,
        counter: u8,
        connection: u8,
    },
    /// Unregister the member at (name, slot).
    Unregister { name: u8, slot: u8 },
    /// Advance time past some members' expiry and drop them.
    Expire { advance_ms: u16 },
    /// A connection closes.
    Close { connection: u8 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..3u8, 0..3u8, 0..3u8, 0..16u8, 0..3u8, 0..3u8).prop_map(
            |(name, id, slot, topics, counter, connection)| Op::Register {
                name, id, slot, topics, counter, connection
            }
        ),
        2 => (0..3u8, 0..3u8).prop_map(|(name, slot)| Op::Unregister { name, slot }),
        1 => (0..3000u16).prop_map(|advance_ms| Op::Expire { advance_ms }),
        1 => (0..3u8).prop_map(|connection| Op::Close { connection }),
    ]
}

fn name_of(name: u8) -> String {
    format!("broker-{name}")
}

// Each broker name lives in one cluster and owns its own addresses (as real brokers do).
fn cluster_of(name: u8) -> String {
    format!("cluster-{}", name % 2)
}

fn addr_of(name: u8, slot: u8) -> String {
    format!("10.0.{name}.{slot}:10911")
}

fn registration(
    name: u8,
    id: u8,
    slot: u8,
    topics: u8,
    counter: u8,
    connection: u8,
) -> Registration {
    let topic_config_table = TOPICS
        .iter()
        .enumerate()
        .filter(|(index, _)| topics & (1 << index) != 0)
        .map(|(_, topic)| ((*topic).to_owned(), TopicConfig::new(*topic)))
        .collect();
    Registration {
        cluster: cluster_of(name),
        addr: addr_of(name, slot),
        broker_name: name_of(name),
        broker_id: i64::from(id),
        ha_server_addr: String::new(),
        zone_name: None,
        timeout_ms: 1000 + 500 * i64::from(slot),
        enable_acting_master: Some(false),
        topics: TopicConfigSerializeWrapper {
            data_version: DataVersion {
                counter: i64::from(counter),
                ..DataVersion::default()
            },
            topic_config_table,
            ..TopicConfigSerializeWrapper::default()
        },
        filter_servers: Vec::new(),
        connection: Some(ConnectionId {
            shard: ShardId(0),
            serial: u64::from(connection),
        }),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    // Proves the invariants of route_table hold after every step of a random sequence, and
    // that a master's most recent registration is visible: each of its topics routes to it.
    #[test]
    fn random_sequences_keep_the_table_consistent(ops in proptest::collection::vec(op(), 1..60)) {
        let mut table = RouteTable::new();
        let mut now_ms = 1_000_000i64;
        // Model: last registration per live master name -> (addr, topics).
        let mut masters: BTreeMap<String, (String, BTreeSet<String>)> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Register { name, id, slot, topics, counter, connection } => {
                    let registration = registration(name, id, slot, topics, counter, connection);
                    let addr = registration.addr.clone();
                    let topic_set: BTreeSet<String> =
                        registration.topics.topic_config_table.keys().cloned().collect();
                    prop_assert!(table.register(registration, now_ms).is_some());
                    if id == 0 {
                        masters.insert(name_of(name), (addr, topic_set));
                    }
                }
                Op::Unregister { name, slot } => {
                    let key = BrokerKey { cluster: cluster_of(name), addr: addr_of(name, slot) };
                    table.unregister(&key);
                }
                Op::Expire { advance_ms } => {
                    now_ms += i64::from(advance_ms);
                    for key in table.expired(now_ms) {
                        table.unregister(&key);
                    }
                }
                Op::Close { connection } => {
                    let id = ConnectionId { shard: ShardId(0), serial: u64::from(connection) };
                    for key in table.registered_on(id) {
                        table.unregister(&key);
                    }
                }
            }
            table
                .check_invariants()
                .map_err(|broken| TestCaseError::fail(broken.to_string()))?;
            // A master still registered at its last address serves each topic it registered.
            masters.retain(|name, (addr, _)| {
                let cluster = format!("cluster-{}", name[7..].parse::<u8>().unwrap() % 2);
                table
                    .live(&BrokerKey { cluster, addr: addr.clone() })
                    .is_some_and(|live| live.broker_id == 0 && live.broker_name == *name)
            });
            for (name, (addr, topics)) in &masters {
                for topic in topics {
                    let route = table.route(topic);
                    let unroutable = || TestCaseError::fail(format!("{topic} unroutable"));
                    let route = route.ok_or_else(unroutable)?;
                    let broker = route.broker_datas.iter().find(|b| b.broker_name == *name);
                    let master = broker.and_then(|b| b.master_addr());
                    prop_assert_eq!(master, Some(addr.as_str()), "{} on {}", topic, name);
                    prop_assert!(route.queue_datas.iter().any(|q| q.broker_name == *name));
                }
            }
        }
    }
}
