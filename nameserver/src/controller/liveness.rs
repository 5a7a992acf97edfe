//! Which brokers are alive, from their BROKER_HEARTBEATs (Java's
//! `DefaultBrokerHeartbeatManager` and `BrokerLiveInfo`). The table belongs to the leading
//! controller alone and is not replicated: a new leader learns it again within one heartbeat
//! interval.

use std::collections::BTreeMap;

use super::{BrokerId, Epoch};

/// How long a broker stays alive after a heartbeat that names no timeout (Java's
/// `DEFAULT_BROKER_CHANNEL_EXPIRED_TIME`). Brokers send their `controllerHeartBeatTimeoutMills`
/// (default also 10 s) in every heartbeat.
pub const HEARTBEAT_TIMEOUT_MS_DEFAULT: u64 = 10_000;

/// What a BROKER_HEARTBEAT to the controller carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Heartbeat {
    /// `clusterName`.
    pub cluster_name: String,
    /// `brokerName`.
    pub broker_name: String,
    /// `brokerAddr`.
    pub broker_addr: String,
    /// `brokerId`: the controller id.
    pub broker_id: BrokerId,
    /// `epoch`: the newest epoch of the broker's logs.
    pub epoch: Option<Epoch>,
    /// `maxOffset`: how far its logs reach.
    pub max_offset: Option<i64>,
    /// `confirmOffset`.
    pub confirm_offset: Option<i64>,
    /// `heartbeatTimeoutMills`.
    pub heartbeat_timeout_ms: Option<i64>,
    /// `electionPriority`: lower wins among equally advanced candidates.
    pub election_priority: Option<i32>,
}

/// What the controller knows of one broker's liveness and progress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerLive {
    /// Its address.
    pub addr: String,
    /// When the last heartbeat arrived, in the caller's monotonic ms.
    pub last_heartbeat_ms: u64,
    /// How long after it the broker counts as alive.
    pub timeout_ms: u64,
    /// Newest log epoch reported (-1: none).
    pub epoch: Epoch,
    /// Max offset reported with that epoch (-1: none).
    pub max_offset: i64,
    /// Confirm offset reported with them.
    pub confirm_offset: i64,
    /// Election priority (Java's default `Integer.MAX_VALUE`).
    pub election_priority: i32,
}

impl BrokerLive {
    /// Whether the broker counts as alive at `now_ms` (Java's `isBrokerActive`).
    pub fn alive(&self, now_ms: u64) -> bool {
        now_ms <= self.last_heartbeat_ms.saturating_add(self.timeout_ms)
    }
}

/// Brokers by cluster name, broker name and controller id.
#[derive(Clone, Debug, Default)]
pub struct HeartbeatTable {
    clusters: BTreeMap<String, BTreeMap<String, BTreeMap<BrokerId, BrokerLive>>>,
}

impl HeartbeatTable {
    /// An empty table.
    pub fn new() -> HeartbeatTable {
        HeartbeatTable::default()
    }

    /// Records a heartbeat arriving at `now_ms`. Progress (epoch, then max offset) is kept
    /// only when it moved forward, as Java does, so a reordered heartbeat cannot make a
    /// broker look less advanced than it was. The caller refuses a heartbeat without
    /// `brokerId` first (Java: CONTROLLER_INVALID_REQUEST, "Heart beat with empty brokerId").
    pub fn on_heartbeat(&mut self, heartbeat: &Heartbeat, now_ms: u64) {
        let epoch = heartbeat.epoch.unwrap_or(-1);
        let max_offset = heartbeat.max_offset.unwrap_or(-1);
        let confirm_offset = heartbeat.confirm_offset.unwrap_or(-1);
        let timeout_ms = heartbeat
            .heartbeat_timeout_ms
            .map_or(HEARTBEAT_TIMEOUT_MS_DEFAULT, |ms| {
                u64::try_from(ms).unwrap_or(0)
            });
        let election_priority = heartbeat.election_priority.unwrap_or(i32::MAX);
        let live = self
            .clusters
            .entry(heartbeat.cluster_name.clone())
            .or_default()
            .entry(heartbeat.broker_name.clone())
            .or_default()
            .entry(heartbeat.broker_id)
            .or_insert_with(|| BrokerLive {
                addr: heartbeat.broker_addr.clone(),
                last_heartbeat_ms: now_ms,
                timeout_ms,
                epoch,
                max_offset,
                confirm_offset,
                election_priority,
            });
        live.addr.clone_from(&heartbeat.broker_addr);
        live.last_heartbeat_ms = live.last_heartbeat_ms.max(now_ms);
        live.timeout_ms = timeout_ms;
        live.election_priority = election_priority;
        if epoch > live.epoch || (epoch == live.epoch && max_offset > live.max_offset) {
            live.epoch = epoch;
            live.max_offset = max_offset;
            live.confirm_offset = confirm_offset;
        }
    }

    /// What is known of a broker.
    pub fn get(
        &self,
        cluster_name: &str,
        broker_name: &str,
        broker_id: BrokerId,
    ) -> Option<&BrokerLive> {
        self.clusters
            .get(cluster_name)?
            .get(broker_name)?
            .get(&broker_id)
    }

    /// Whether a broker's heartbeats are current at `now_ms`.
    pub fn is_alive(
        &self,
        cluster_name: &str,
        broker_name: &str,
        broker_id: BrokerId,
        now_ms: u64,
    ) -> bool {
        self.get(cluster_name, broker_name, broker_id)
            .is_some_and(|live| live.alive(now_ms))
    }

    /// The connection a broker heartbeats on closed at `now_ms`: it counts as gone at once,
    /// as Java's controller counts a broker whose channel closed (a killed broker's kernel
    /// closes its connections, so its master role moves on without waiting for the
    /// timeout). A connection whose last heartbeat is `idle_close_ms` or more old was closed
    /// for idleness by this side, which says nothing new: the timeout decides then. Returns
    /// whether the broker was alive and now counts as gone.
    pub fn on_channel_closed(
        &mut self,
        cluster_name: &str,
        broker_name: &str,
        broker_id: BrokerId,
        now_ms: u64,
        idle_close_ms: u64,
    ) -> bool {
        let Some(live) = self
            .clusters
            .get_mut(cluster_name)
            .and_then(|sets| sets.get_mut(broker_name))
            .and_then(|brokers| brokers.get_mut(&broker_id))
        else {
            return false;
        };
        if !live.alive(now_ms) || now_ms.saturating_sub(live.last_heartbeat_ms) >= idle_close_ms {
            return false;
        }
        live.last_heartbeat_ms = now_ms.saturating_sub(1);
        live.timeout_ms = 0;
        true
    }

    /// Forgets brokers whose heartbeats stopped before `now_ms` (Java drops them in its
    /// scan), so the table holds no more than the brokers heard from recently.
    pub fn forget_expired(&mut self, now_ms: u64) {
        for sets in self.clusters.values_mut() {
            for brokers in sets.values_mut() {
                brokers.retain(|_, live| live.alive(now_ms));
            }
            sets.retain(|_, brokers| !brokers.is_empty());
        }
        self.clusters.retain(|_, sets| !sets.is_empty());
    }

    /// Forgets one broker (an admin cleaned its data).
    pub fn forget(&mut self, cluster_name: &str, broker_name: &str, broker_id: BrokerId) {
        if let Some(sets) = self.clusters.get_mut(cluster_name) {
            if let Some(brokers) = sets.get_mut(broker_name) {
                brokers.remove(&broker_id);
                if brokers.is_empty() {
                    sets.remove(broker_name);
                }
            }
            if sets.is_empty() {
                self.clusters.remove(cluster_name);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn heartbeat(broker_id: BrokerId) -> Heartbeat {
        Heartbeat {
            cluster_name: "c".into(),
            broker_name: "b".into(),
            broker_addr: "127.0.0.1:10911".into(),
            broker_id,
            epoch: Some(1),
            max_offset: Some(10),
            confirm_offset: Some(10),
            heartbeat_timeout_ms: Some(3_000),
            election_priority: None,
        }
    }

    // Proves a closed connection counts its broker gone at once, a later heartbeat brings it
    // back, and a close long after the last heartbeat (this side closing an idle
    // connection) leaves the timeout in charge.
    #[test]
    fn a_closed_connection_counts_its_broker_gone() {
        let mut table = HeartbeatTable::new();
        table.on_heartbeat(&heartbeat(1), 1_000);
        assert!(table.is_alive("c", "b", 1, 1_500));
        assert!(table.on_channel_closed("c", "b", 1, 1_500, 120_000));
        assert!(!table.is_alive("c", "b", 1, 1_500));
        assert!(
            !table.on_channel_closed("c", "b", 1, 1_600, 120_000),
            "already gone"
        );
        table.on_heartbeat(&heartbeat(1), 2_000);
        assert!(table.is_alive("c", "b", 1, 2_500));
        assert!(
            !table.on_channel_closed("c", "b", 1, 4_000, 2_000),
            "closed when idle"
        );
        assert!(table.is_alive("c", "b", 1, 4_000));
        assert!(
            !table.on_channel_closed("c", "b", 2, 2_500, 120_000),
            "unknown broker"
        );
    }
}
