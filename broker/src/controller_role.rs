//! What the controller decided for this broker in controller mode (`enableControllerMode`),
//! shared by the driver that talks to the controllers (`crate::controller_mode`) and the
//! shards: the role the broker serves in, the master's write lease, the slaves' progress a
//! master reports, and the role notifications the controllers push.
//!
//! The lease is the fence against two masters (docs/architecture.md#failover): a master
//! acknowledges writes only while the controller confirmed it as master recently enough that
//! the controller cannot have elected anyone else yet. The driver extends it from the send
//! time of each answer naming this broker master; the send path checks it on every write.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use comet_replication::controller::{
    AckRequirement, BrokerControllerId, ControllerEpoch, MasterView,
};

use crate::replication_state::SharedReplication;

/// The role a run of the broker serves in (one run lasts until the controller decides a
/// role this run cannot take without restarting its shards).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Serving {
    /// No decision yet: a read replica following no one, refusing writes.
    Undecided,
    /// Master under `epoch`.
    Master {
        /// The master epoch.
        epoch: ControllerEpoch,
    },
    /// Slave of the master at `master_addr` (its broker address).
    Slave {
        /// The master's broker address, `ip:port`.
        master_addr: String,
        /// The master epoch.
        epoch: ControllerEpoch,
    },
}

impl Serving {
    /// True for a master.
    pub fn is_master(&self) -> bool {
        matches!(self, Serving::Master { .. })
    }
}

/// What one log of this broker holds, as a shard last published it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogFigures {
    /// Newest epoch of the log.
    pub epoch: u32,
    /// Written end.
    pub written: u64,
    /// Position up to which consumers may read (confirmed).
    pub confirmed: u64,
}

/// The controller's decisions and the shards' figures, shared across threads and runs.
#[derive(Debug)]
pub struct ControllerRole {
    origin: Instant,
    /// Writes are acknowledged while the monotonic clock, in ms since `origin`, is below it.
    lease_until_ms: AtomicU64,
    serving: Mutex<Serving>,
    broker_id: Mutex<Option<BrokerControllerId>>,
    logs: Mutex<BTreeMap<u8, LogFigures>>,
    /// When a shard last published figures, in ms since `origin` (see [`Self::shards_alive`]).
    published_ms: AtomicU64,
    /// Per slave (controller id), per log: whether it is in sync.
    replicas: Mutex<BTreeMap<BrokerControllerId, BTreeMap<u8, bool>>>,
    notifications: Mutex<Sender<MasterView>>,
    shared: Arc<SharedReplication>,
    /// What a replicated write needs now, as the session last said
    /// (docs/architecture.md#failover), with a number that grows at each change.
    ack_requirement: Mutex<(u64, AckRequirement)>,
    /// Passes the driver made over the shards' figures, each followed by publishing the
    /// requirement (a log waits for a withdrawn joiner until two went by).
    driver_passes: AtomicU64,
}

impl ControllerRole {
    /// Nothing decided yet; the receiving end of the notifications is the driver's.
    pub fn new(now: Instant) -> (Arc<ControllerRole>, Receiver<MasterView>) {
        let (sender, receiver) = mpsc::channel();
        let role = ControllerRole {
            origin: now,
            lease_until_ms: AtomicU64::new(0),
            serving: Mutex::new(Serving::Undecided),
            broker_id: Mutex::new(None),
            logs: Mutex::new(BTreeMap::new()),
            published_ms: AtomicU64::new(0),
            replicas: Mutex::new(BTreeMap::new()),
            notifications: Mutex::new(sender),
            shared: Arc::new(SharedReplication::new()),
            ack_requirement: Mutex::new((0, AckRequirement::NotMaster)),
            driver_passes: AtomicU64::new(0),
        };
        (Arc::new(role), receiver)
    }

    /// The master addresses the slave's replication follows: set by the driver from the
    /// controller's decisions, kept across runs.
    pub fn shared_replication(&self) -> &Arc<SharedReplication> {
        &self.shared
    }

    /// Whether a master may acknowledge a write at `now`.
    pub fn lease_valid(&self, now: Instant) -> bool {
        self.ms_since_origin(now) < self.lease_until_ms.load(Ordering::Acquire)
    }

    /// Extends the lease to `until` (never shortens it: answers may arrive out of order).
    pub fn extend_lease(&self, until: Instant) {
        self.lease_until_ms
            .fetch_max(self.ms_since_origin(until), Ordering::AcqRel);
    }

    /// Ends the lease at once (a newer master exists, or this broker stops being master).
    pub fn revoke_lease(&self) {
        self.lease_until_ms.store(0, Ordering::Release);
    }

    /// How long the lease still runs at `now` (zero once expired).
    pub fn lease_left(&self, now: Instant) -> Duration {
        let until = self.lease_until_ms.load(Ordering::Acquire);
        Duration::from_millis(until.saturating_sub(self.ms_since_origin(now)))
    }

    /// The role this run serves in.
    pub fn serving(&self) -> Serving {
        self.serving
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Sets the role this run serves in.
    pub fn set_serving(&self, serving: Serving) {
        *self.serving.lock().unwrap_or_else(PoisonError::into_inner) = serving;
    }

    /// The broker's controller id, once confirmed.
    pub fn broker_id(&self) -> Option<BrokerControllerId> {
        *self
            .broker_id
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Records the confirmed controller id.
    pub fn set_broker_id(&self, id: BrokerControllerId) {
        *self
            .broker_id
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(id);
    }

    /// A NOTIFY_BROKER_ROLE_CHANGED for the driver (dropped once the driver ended).
    pub fn notify(&self, view: MasterView) {
        let sender = self
            .notifications
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let _ = sender.send(view);
    }

    /// A shard's figures for one of its logs (also proof that the shard runs: see
    /// [`Self::shards_alive`]).
    pub fn publish_log(&self, now: Instant, log_id: u8, figures: LogFigures) {
        self.published_ms
            .fetch_max(self.ms_since_origin(now), Ordering::AcqRel);
        self.logs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(log_id, figures);
    }

    /// A master shard's view of which slaves are in sync on its log.
    pub fn publish_replicas(&self, log_id: u8, in_sync: &BTreeMap<BrokerControllerId, bool>) {
        let mut replicas = self.replicas.lock().unwrap_or_else(PoisonError::into_inner);
        for logs in replicas.values_mut() {
            logs.remove(&log_id);
        }
        for (slave, synced) in in_sync {
            replicas.entry(*slave).or_default().insert(log_id, *synced);
        }
        replicas.retain(|_, logs| !logs.is_empty());
    }

    /// Every log's figures, by log id.
    pub fn logs(&self) -> BTreeMap<u8, LogFigures> {
        self.logs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Per slave, whether each of the master's logs (`log_count` of them) is in sync with
    /// it; a log the slave does not follow counts as out of sync.
    pub fn replica_logs(&self, log_count: usize) -> BTreeMap<BrokerControllerId, Vec<bool>> {
        let replicas = self.replicas.lock().unwrap_or_else(PoisonError::into_inner);
        replicas
            .iter()
            .map(|(slave, logs)| {
                let each = (0..log_count)
                    .map(|log| {
                        u8::try_from(log)
                            .ok()
                            .and_then(|log| logs.get(&log).copied())
                            .unwrap_or(false)
                    })
                    .collect();
                (*slave, each)
            })
            .collect()
    }

    /// What a replicated write needs now, with its change number.
    pub fn ack_requirement(&self) -> (u64, AckRequirement) {
        self.ack_requirement
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Records what a replicated write needs (the change number grows only on a change).
    pub fn set_ack_requirement(&self, requirement: AckRequirement) {
        let mut current = self
            .ack_requirement
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if current.1 != requirement {
            *current = (current.0 + 1, requirement);
        }
    }

    /// The driver's passes over the figures so far.
    pub fn driver_passes(&self) -> u64 {
        self.driver_passes.load(Ordering::Acquire)
    }

    /// The driver read the figures and published the requirement that follows from them.
    pub fn end_driver_pass(&self) {
        self.driver_passes.fetch_add(1, Ordering::AcqRel);
    }

    /// Whether the shards published figures less than `limit` before `now`: a broker whose
    /// shards stopped turning must stop heartbeating, so that the controller elects another
    /// master instead of keeping one that serves nobody.
    pub fn shards_alive(&self, now: Instant, limit: Duration) -> bool {
        let published = self.published_ms.load(Ordering::Acquire);
        self.ms_since_origin(now).saturating_sub(published) < limit_ms(limit)
    }

    /// Forgets every log's and slave's figures (a new run publishes its own); the shards
    /// count as alive from `now`, while they start.
    pub fn clear_figures(&self, now: Instant) {
        self.published_ms
            .store(self.ms_since_origin(now), Ordering::Release);
        self.logs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        self.replicas
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    fn ms_since_origin(&self, at: Instant) -> u64 {
        let since = at.saturating_duration_since(self.origin);
        // Plus one so that the zero of a revoked lease is never valid, even at the origin.
        u64::try_from(since.as_millis())
            .unwrap_or(u64::MAX - 1)
            .saturating_add(1)
    }
}

fn limit_ms(limit: Duration) -> u64 {
    u64::try_from(limit.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the lease: invalid before any grant, valid until its end, never shortened by a
    // late answer, and gone at once when revoked.
    #[test]
    fn the_lease_runs_until_its_end_and_ends_when_revoked() {
        let origin = Instant::now();
        let (role, _notifications) = ControllerRole::new(origin);
        assert!(!role.lease_valid(origin));
        role.extend_lease(origin + Duration::from_secs(8));
        assert!(role.lease_valid(origin + Duration::from_secs(7)));
        assert!(!role.lease_valid(origin + Duration::from_secs(8)));
        role.extend_lease(origin + Duration::from_secs(3));
        assert!(role.lease_valid(origin + Duration::from_secs(7)));
        assert_eq!(
            role.lease_left(origin + Duration::from_secs(6)),
            Duration::from_secs(2)
        );
        role.revoke_lease();
        assert!(!role.lease_valid(origin));
        assert_eq!(role.lease_left(origin), Duration::ZERO);
    }

    // Proves the shards count as alive only while they publish: from a run's start, until
    // `limit` passed without figures.
    #[test]
    fn shards_are_alive_while_they_publish() {
        let origin = Instant::now();
        let (role, _notifications) = ControllerRole::new(origin);
        let limit = Duration::from_secs(2);
        role.clear_figures(origin);
        assert!(role.shards_alive(origin + Duration::from_secs(1), limit));
        assert!(!role.shards_alive(origin + Duration::from_secs(3), limit));
        role.publish_log(origin + Duration::from_secs(3), 0, LogFigures::default());
        assert!(role.shards_alive(origin + Duration::from_secs(4), limit));
        assert!(!role.shards_alive(origin + Duration::from_secs(6), limit));
    }

    // Proves a slave counts as in sync on a log only while the master's shard says so, and
    // a log it does not follow counts against it.
    #[test]
    fn replica_logs_list_every_log_of_the_master() {
        let (role, _notifications) = ControllerRole::new(Instant::now());
        role.publish_replicas(0, &BTreeMap::from([(2, true), (3, true)]));
        role.publish_replicas(1, &BTreeMap::from([(2, true)]));
        let logs = role.replica_logs(2);
        assert_eq!(logs[&2], vec![true, true]);
        assert_eq!(logs[&3], vec![true, false]);
        role.publish_replicas(0, &BTreeMap::from([(2, false)]));
        let logs = role.replica_logs(2);
        assert_eq!(logs[&2], vec![false, true]);
        assert!(!logs.contains_key(&3));
    }
}
