//! The connection to a cluster every command works through: comet-client's [`Admin`] for the
//! jobs it has, and a client instance for the requests it lacks (subscription groups, broker
//! config, write permission, KV config, pulls by offset).

use std::sync::Arc;

use comet_client::instance::ClientInstance;
use comet_client::{Admin, ClientConfig, MessageQueue};
use comet_proto::body::ClusterInfo;
use comet_proto::{RemotingCommand, ResponseCode};

use crate::error::{AdminError, Result};

/// One broker set of a cluster: its name, master and slaves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerSet {
    /// The cluster.
    pub cluster: String,
    /// The broker name.
    pub name: String,
    /// The master's address, if a master is registered.
    pub master: Option<String>,
    /// Slave addresses, by broker id.
    pub slaves: Vec<String>,
}

/// A cluster reached through its name servers.
pub struct Context {
    /// The admin API.
    pub admin: Admin,
    instance: Arc<ClientInstance>,
    config: ClientConfig,
}

impl Context {
    /// Connects lazily: nothing is sent until a command asks.
    pub fn new(config: ClientConfig) -> Result<Context> {
        let instance = ClientInstance::new(config.clone());
        let admin = Admin::new(config.clone())?;
        Ok(Context {
            admin,
            instance,
            config,
        })
    }

    /// The client settings (name servers, TLS) for producers a command starts.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// Closes every connection.
    pub fn shutdown(&self) {
        self.admin.shutdown();
        self.instance.shutdown();
    }

    /// The name server addresses given with `-n`.
    pub fn name_servers(&self) -> Vec<String> {
        self.instance.name_servers().addrs().to_vec()
    }

    /// Sends `request` to the server at `addr`; an answer outside `accepted` is an error, and
    /// REQUEST_CODE_NOT_SUPPORTED is said as such.
    pub fn invoke(
        &self,
        addr: &str,
        request: RemotingCommand,
        accepted: &[ResponseCode],
    ) -> Result<RemotingCommand> {
        Ok(self.instance.invoke_broker(addr, request, accepted)?)
    }

    /// Every broker set, of one cluster or of all.
    pub fn broker_sets(&self, cluster: Option<&str>) -> Result<Vec<BrokerSet>> {
        let info = self.admin.cluster_info()?;
        if let Some(wanted) = cluster {
            if !info.cluster_addr_table.contains_key(wanted) {
                return Err(AdminError::Invalid(format!("no cluster named {wanted}")));
            }
        }
        Ok(sets_of(&info, cluster))
    }

    /// Addresses a `-b` / `-c` pair names: the one broker, or every master of the cluster
    /// (and its slaves too with `with_slaves`).
    pub fn targets(
        &self,
        broker: Option<&str>,
        cluster: Option<&str>,
        with_slaves: bool,
    ) -> Result<Vec<String>> {
        match (broker, cluster) {
            (Some(addr), _) => Ok(vec![addr.to_owned()]),
            (None, Some(cluster)) => {
                let mut addrs = Vec::new();
                for set in self.broker_sets(Some(cluster))? {
                    addrs.extend(set.master);
                    if with_slaves {
                        addrs.extend(set.slaves);
                    }
                }
                if addrs.is_empty() {
                    return Err(AdminError::Invalid(format!(
                        "cluster {cluster} has no broker"
                    )));
                }
                Ok(addrs)
            }
            (None, None) => Err(AdminError::Invalid(
                "give a broker address (-b) or a cluster (-c)".into(),
            )),
        }
    }

    /// The master address of broker `name`.
    pub fn master_of(&self, name: &str) -> Result<String> {
        self.broker_sets(None)?
            .into_iter()
            .find(|set| set.name == name)
            .and_then(|set| set.master)
            .ok_or_else(|| AdminError::Invalid(format!("no master registered for broker {name}")))
    }

    /// The readable queues of `topic`, per its route, with each one's master address.
    pub fn read_queues(&self, topic: &str) -> Result<Vec<(MessageQueue, String)>> {
        let route = self.admin.topic_route(topic)?;
        let mut queues = Vec::new();
        for data in &route.queue_datas {
            let master = route
                .broker_datas
                .iter()
                .find(|broker| broker.broker_name == data.broker_name)
                .and_then(|broker| broker.master_addr());
            let Some(master) = master else {
                continue;
            };
            for queue_id in 0..data.read_queue_nums {
                let queue = MessageQueue {
                    topic: topic.to_owned(),
                    broker_name: data.broker_name.clone(),
                    queue_id,
                };
                queues.push((queue, master.to_owned()));
            }
        }
        Ok(queues)
    }
}

fn sets_of(info: &ClusterInfo, only: Option<&str>) -> Vec<BrokerSet> {
    let mut sets = Vec::new();
    for (cluster, names) in &info.cluster_addr_table {
        if only.is_some_and(|wanted| wanted != cluster) {
            continue;
        }
        for name in names {
            let Some(data) = info.broker_addr_table.get(name) else {
                continue;
            };
            let slaves = data
                .broker_addrs
                .iter()
                .filter(|(id, _)| **id != 0)
                .map(|(_, addr)| addr.clone())
                .collect();
            sets.push(BrokerSet {
                cluster: cluster.clone(),
                name: name.clone(),
                master: data.master_addr().map(str::to_owned),
                slaves,
            });
        }
    }
    sets
}
