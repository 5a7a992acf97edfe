//! The broker's side of the RocketMQ 5 controller protocol, as a sans-I/O state machine
//! (docs/protocol.md#controller-protocol).
//!
//! In controller mode (`enableControllerMode=true`) a broker does not choose its own role: the
//! controller (standalone, or inside the name server) decides which member of a broker set is
//! master, under a master epoch, and which members are in sync with it. A [`Session`] holds
//! one broker's view of that conversation and says what to send next and which role to take:
//!
//! 1. Find the leader controller (CONTROLLER_GET_METADATA_INFO, every address of
//!    `controllerAddr` in turn); every other request goes to the leader.
//! 2. Claim or reuse the broker's controller id ([`identity`]): GET_NEXT_BROKER_ID, the temp
//!    file, APPLY_BROKER_ID, the confirmed file; then CONTROLLER_REGISTER_BROKER, whose answer
//!    names the live master if there is one.
//! 3. Without a master, ask for an election (CONTROLLER_ELECT_MASTER with the broker's own id:
//!    the first election of a set elects the asker).
//! 4. Running: a one-way BROKER_HEARTBEAT to every controller each `brokerHeartbeatInterval`,
//!    CONTROLLER_GET_REPLICA_INFO each `syncBrokerMetadataPeriod` (a newer master epoch
//!    changes the role; a newer epoch without a master means the master is gone, so ask for
//!    an election), the leader looked up again each `syncControllerMetadataPeriod`, and, on a
//!    master, CONTROLLER_ALTER_SYNC_STATE_SET whenever the set of in-sync slaves changes
//!    (checked at once on a change, and again each `checkSyncStateSetPeriod`).
//!
//! NOTIFY_BROKER_ROLE_CHANGED, which the controller pushes after an election, is applied like
//! a replica-info answer. A role change is taken only for a master epoch above the one held,
//! so a late or repeated notification changes nothing.
//!
//! A Comet broker has many logs; a slave counts as in sync only when every one of its logs
//! is ([`Session::set_replica_logs_in_sync`]), and the set the master proposes is itself plus
//! those slaves. Which writes may be acknowledged follows from the set
//! ([`Session::ack_requirement`]): a shrink counts only once the controller accepted it, so
//! while one is proposed the old members are still waited for.
//!
//! Errors: a request that times out or fails in transport, or an answer
//! CONTROLLER_NOT_LEADER, makes the session look the leader up again (rotating through the
//! addresses) and then repeat what it was doing; other refusals are retried after
//! `retry_interval`, except the ones with a defined answer (an id claimed by someone else
//! restarts the claim; unknown replica metadata re-registers; a fenced sync-state-set
//! proposal polls replica info at once). Unlike Java's `ReplicasManager`, an APPLY_BROKER_ID
//! whose answer was lost keeps its temp file and is repeated: the controller accepts an id
//! held under the same check code, so the retry cannot claim a second id.
//!
//! Driving it: call [`Session::poll`] when [`Session::next_wakeup`] is reached, feed each
//! answer to [`Session::on_reply`] (or [`Session::on_failure`]), each finished file write to
//! [`Session::on_persisted`] (or [`Session::on_persist_failed`]), and carry out the returned
//! [`Action`]s in order. One control request is outstanding at a time; heartbeats are one
//! way and go regardless.

pub mod identity;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use thiserror::Error;

pub use identity::{
    BrokerControllerId, ConfirmedIdentity, IdentityError, StoredIdentity, TempIdentity,
};

/// A master epoch or sync-state-set epoch (Java `int`s; a set starts at 0).
pub type ControllerEpoch = i32;

/// The controller's response codes the session acts on; the same numbers as comet-proto's
/// `ResponseCode` (this crate does not depend on the codec; a test cross-checks them).
pub mod codes {
    /// The proposer's master epoch is not the current one.
    pub const CONTROLLER_FENCED_MASTER_EPOCH: i32 = 2000;
    /// The proposal replaces a sync-state set that is no longer current.
    pub const CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH: i32 = 2001;
    /// The proposer is not the master.
    pub const CONTROLLER_INVALID_MASTER: i32 = 2002;
    /// The answering controller is not the leader.
    pub const CONTROLLER_NOT_LEADER: i32 = 2007;
    /// The controller knows nothing of the broker set.
    pub const CONTROLLER_BROKER_METADATA_NOT_EXIST: i32 = 2008;
    /// The election kept the live master (its answer still names it).
    pub const CONTROLLER_MASTER_STILL_EXIST: i32 = 2011;
    /// The claimed controller id is held by another broker.
    pub const CONTROLLER_BROKER_ID_INVALID: i32 = 2014;
}

/// Java's defaults, in milliseconds: `brokerHeartbeatInterval`.
pub const HEARTBEAT_INTERVAL_MS_DEFAULT: u64 = 1_000;
/// `controllerHeartBeatTimeoutMills`.
pub const HEARTBEAT_TIMEOUT_MS_DEFAULT: i64 = 10_000;
/// `syncBrokerMetadataPeriod`.
pub const SYNC_BROKER_METADATA_PERIOD_MS_DEFAULT: u64 = 5_000;
/// `checkSyncStateSetPeriod`.
pub const CHECK_SYNC_STATE_SET_PERIOD_MS_DEFAULT: u64 = 5_000;
/// `syncControllerMetadataPeriod`.
pub const SYNC_CONTROLLER_METADATA_PERIOD_MS_DEFAULT: u64 = 10_000;
/// The timeout Java's `BrokerOuterAPI` gives every controller request.
pub const REQUEST_TIMEOUT_MS_DEFAULT: u64 = 3_000;
/// Pause before repeating a refused step, and after a full round of failed leader lookups.
pub const RETRY_INTERVAL_MS_DEFAULT: u64 = 1_000;
/// `brokerElectionPriority`: lower wins among equally advanced candidates.
pub const ELECTION_PRIORITY_DEFAULT: i32 = i32::MAX;

/// What a session needs to know about its broker and the controller group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionConfig {
    /// `brokerClusterName`.
    pub cluster_name: String,
    /// `brokerName`: the broker set.
    pub broker_name: String,
    /// The broker's address, `ip:port`, as clients and the controller reach it.
    pub broker_addr: String,
    /// `controllerAddr`, split ([`parse_controller_addrs`]).
    pub controller_addrs: Vec<String>,
    /// `brokerElectionPriority`.
    pub election_priority: i32,
    /// `brokerHeartbeatInterval`.
    pub heartbeat_interval: Duration,
    /// `controllerHeartBeatTimeoutMills`: how long the controller keeps the broker live
    /// without a heartbeat (sent in each heartbeat).
    pub heartbeat_timeout_ms: i64,
    /// `syncBrokerMetadataPeriod`.
    pub sync_broker_metadata_period: Duration,
    /// `checkSyncStateSetPeriod`.
    pub check_sync_state_set_period: Duration,
    /// `syncControllerMetadataPeriod`.
    pub sync_controller_metadata_period: Duration,
    /// How long a control request may go unanswered.
    pub request_timeout: Duration,
    /// Pause before repeating a refused step.
    pub retry_interval: Duration,
    /// Wall-clock time of this boot, Unix ms: part of the register check code of a claim.
    pub boot_unix_ms: i64,
}

impl SessionConfig {
    /// A configuration with Java's defaults for every period.
    pub fn new(
        cluster_name: impl Into<String>,
        broker_name: impl Into<String>,
        broker_addr: impl Into<String>,
        controller_addrs: Vec<String>,
        boot_unix_ms: i64,
    ) -> SessionConfig {
        SessionConfig {
            cluster_name: cluster_name.into(),
            broker_name: broker_name.into(),
            broker_addr: broker_addr.into(),
            controller_addrs,
            election_priority: ELECTION_PRIORITY_DEFAULT,
            heartbeat_interval: Duration::from_millis(HEARTBEAT_INTERVAL_MS_DEFAULT),
            heartbeat_timeout_ms: HEARTBEAT_TIMEOUT_MS_DEFAULT,
            sync_broker_metadata_period: Duration::from_millis(
                SYNC_BROKER_METADATA_PERIOD_MS_DEFAULT,
            ),
            check_sync_state_set_period: Duration::from_millis(
                CHECK_SYNC_STATE_SET_PERIOD_MS_DEFAULT,
            ),
            sync_controller_metadata_period: Duration::from_millis(
                SYNC_CONTROLLER_METADATA_PERIOD_MS_DEFAULT,
            ),
            request_timeout: Duration::from_millis(REQUEST_TIMEOUT_MS_DEFAULT),
            retry_interval: Duration::from_millis(RETRY_INTERVAL_MS_DEFAULT),
            boot_unix_ms,
        }
    }
}

/// Splits Java's `controllerAddr` (`ip:port;ip:port`) into addresses, skipping empty parts.
pub fn parse_controller_addrs(value: &str) -> Vec<String> {
    value
        .split(';')
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Java's `SyncStateSet`: the members in sync with the master (itself included) and the
/// epoch of that set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SyncStateSet {
    /// Controller ids of the members.
    pub members: BTreeSet<BrokerControllerId>,
    /// The set's epoch.
    pub epoch: ControllerEpoch,
}

/// Identifies one control request, to match its answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(pub u64);

/// A request to a controller. The cluster name, broker name and broker address every
/// request also carries are the session's ([`Session::config`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// CONTROLLER_GET_METADATA_INFO: who leads.
    GetMetadata,
    /// CONTROLLER_GET_NEXT_BROKER_ID.
    GetNextBrokerId,
    /// CONTROLLER_APPLY_BROKER_ID.
    ApplyBrokerId {
        /// The id claimed.
        broker_id: BrokerControllerId,
        /// The claim's check code.
        register_check_code: String,
    },
    /// CONTROLLER_REGISTER_BROKER.
    RegisterBroker {
        /// The confirmed id.
        broker_id: BrokerControllerId,
    },
    /// BROKER_HEARTBEAT, one way.
    Heartbeat(Heartbeat),
    /// CONTROLLER_GET_REPLICA_INFO.
    GetReplicaInfo,
    /// CONTROLLER_ELECT_MASTER, asked by this broker (`designateElect` false).
    ElectMaster {
        /// This broker's id.
        broker_id: BrokerControllerId,
    },
    /// CONTROLLER_ALTER_SYNC_STATE_SET.
    AlterSyncStateSet {
        /// This broker's id (the master).
        master_broker_id: BrokerControllerId,
        /// The master epoch it holds.
        master_epoch: ControllerEpoch,
        /// The proposed members, with the epoch of the set they replace.
        proposal: SyncStateSet,
    },
}

/// The fields of a BROKER_HEARTBEAT besides the names and address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Heartbeat {
    /// The broker's controller id.
    pub broker_id: BrokerControllerId,
    /// The newest epoch the broker's logs hold (the election prefers higher).
    pub epoch: ControllerEpoch,
    /// How far the broker's logs reach (the election prefers more, at equal epochs).
    pub max_offset: i64,
    /// How far they are confirmed.
    pub confirm_offset: i64,
    /// `heartbeatTimeoutMills`.
    pub timeout_ms: i64,
    /// `electionPriority`.
    pub election_priority: i32,
}

/// What the broker's logs hold, reported in heartbeats. A Comet broker has several logs; the
/// runtime reports the newest epoch of any and the sums of their positions, which grow
/// exactly when some log grows, so the election's "most advanced" comparison stays sound.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogProgress {
    /// Newest epoch of any log.
    pub epoch: ControllerEpoch,
    /// Sum of the logs' written ends.
    pub max_offset: i64,
    /// Sum of the logs' confirmed positions.
    pub confirm_offset: i64,
}

/// The master as a controller answer or notification describes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MasterView {
    /// `masterBrokerId`, absent when the set has no master.
    pub master_broker_id: Option<BrokerControllerId>,
    /// `masterAddress`, absent or empty when the set has no master.
    pub master_addr: Option<String>,
    /// `masterEpoch`.
    pub master_epoch: Option<ControllerEpoch>,
    /// The sync-state set (body members, and the epoch from the body or the header).
    pub sync_state_set: SyncStateSet,
}

/// An answer from a controller, decoded by the runtime according to the request it answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// GET_METADATA_INFO succeeded.
    Metadata {
        /// `controllerLeaderAddress`; absent or empty while there is no leader.
        leader_addr: Option<String>,
    },
    /// GET_NEXT_BROKER_ID succeeded.
    NextBrokerId {
        /// `nextBrokerId`.
        next_broker_id: Option<BrokerControllerId>,
    },
    /// APPLY_BROKER_ID succeeded.
    BrokerIdApplied,
    /// REGISTER_BROKER succeeded.
    Registered(MasterView),
    /// GET_REPLICA_INFO succeeded.
    ReplicaInfo(MasterView),
    /// ELECT_MASTER answered SUCCESS or CONTROLLER_MASTER_STILL_EXIST (both name the master).
    Elected(MasterView),
    /// ALTER_SYNC_STATE_SET succeeded: the new set.
    SyncStateSetAltered(SyncStateSet),
    /// Any other response code.
    Refused {
        /// The response code.
        code: i32,
        /// The remark, for logs.
        remark: Option<String>,
    },
}

/// A file write the runtime must finish (durably) before reporting
/// [`Session::on_persisted`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Persist {
    /// Write the temp identity file.
    WriteTemp(TempIdentity),
    /// Write the confirmed identity file, then delete the temp file.
    WriteConfirmed(ConfirmedIdentity),
    /// Delete the temp identity file.
    DeleteTemp,
}

/// What the session asks the runtime to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send a request and report its answer with [`Session::on_reply`] or its failure with
    /// [`Session::on_failure`].
    Send {
        /// Matches the answer.
        id: RequestId,
        /// Controller address.
        to: String,
        /// The request.
        request: Request,
    },
    /// Send a one-way request.
    SendOneway {
        /// Controller address.
        to: String,
        /// The request.
        request: Request,
    },
    /// Write or delete an identity file, then report [`Session::on_persisted`].
    Persist(Persist),
    /// Serve as master from now on, starting `epoch` on every log.
    BecomeMaster {
        /// The new master epoch.
        epoch: ControllerEpoch,
        /// The sync-state set the master starts with.
        sync_state_set: SyncStateSet,
    },
    /// Follow `master_addr` from now on.
    BecomeSlave {
        /// The master's controller id.
        master_broker_id: BrokerControllerId,
        /// The master's address.
        master_addr: String,
        /// The master epoch.
        epoch: ControllerEpoch,
    },
    /// The controller accepted a new sync-state set for this master.
    SyncStateSetChanged(SyncStateSet),
}

/// The role the session has decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// Not decided yet: the broker must neither accept writes nor follow anyone.
    Undecided,
    /// Master under `epoch`.
    Master {
        /// Master epoch.
        epoch: ControllerEpoch,
    },
    /// Slave of the named master.
    Slave {
        /// The master's controller id.
        master_broker_id: BrokerControllerId,
        /// The master's address.
        master_addr: String,
        /// Master epoch.
        epoch: ControllerEpoch,
    },
}

/// How a master may acknowledge a replicated write (Java's `CommitLog` rules for
/// controller mode: `minInSyncReplicas`, `allAckInSyncStateSet`, `inSyncReplicas`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckPolicy {
    /// `inSyncReplicas`: how many copies (the master's included) a write needs.
    pub in_sync_replicas: usize,
    /// `minInSyncReplicas`: below this many in-sync members writes are refused.
    pub min_in_sync_replicas: usize,
    /// `allAckInSyncStateSet`: wait for every member of the set.
    pub all_ack_in_sync_state_set: bool,
}

impl Default for AckPolicy {
    fn default() -> AckPolicy {
        AckPolicy {
            in_sync_replicas: 1,
            min_in_sync_replicas: 1,
            all_ack_in_sync_state_set: false,
        }
    }
}

/// What a replicated write needs before it is acknowledged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AckRequirement {
    /// This broker is not master: refuse writes.
    NotMaster,
    /// Fewer in-sync members than `minInSyncReplicas`: refuse with
    /// IN_SYNC_REPLICAS_NOT_ENOUGH.
    TooFewInSync {
        /// Members counted.
        in_sync: usize,
        /// `minInSyncReplicas`.
        min: usize,
    },
    /// Every listed member (the master included) must hold the write.
    AllOf(BTreeSet<BrokerControllerId>),
    /// This many copies, the master's included.
    Copies(usize),
}

/// A request, answer or notification the session cannot use.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum SessionError {
    /// `controllerAddr` names no address.
    #[error("no controller address configured (controllerAddr is empty)")]
    NoControllerAddress,
    /// The stored identity files cannot be used.
    #[error(transparent)]
    Identity(#[from] IdentityError),
    /// An answer of the wrong kind for the request.
    #[error("{request} was answered with {reply}")]
    UnexpectedReply {
        /// The request kind.
        request: &'static str,
        /// The answer kind.
        reply: &'static str,
    },
    /// An answer that lacks what its kind must carry.
    #[error("{request} answer is invalid: {reason}")]
    InvalidReply {
        /// The request kind.
        request: &'static str,
        /// What is wrong.
        reason: &'static str,
    },
}

/// Which step of the broker's start-up the session is in.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Phase {
    /// No usable identity file: ask for a candidate id.
    NextId,
    /// A temp file: apply its id.
    Apply(TempIdentity),
    /// A confirmed id: register it.
    Register,
    /// Registered, no master known: ask for an election.
    Elect,
    /// A role is decided.
    Running,
}

/// Which file write the session waits for.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Pending {
    Temp(TempIdentity),
    Confirmed(TempIdentity),
    DeleteTemp,
}

/// The kind of the outstanding control request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Metadata,
    NextBrokerId,
    ApplyBrokerId,
    RegisterBroker,
    ElectMaster,
    ReplicaInfo,
    AlterSyncStateSet,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Metadata => "CONTROLLER_GET_METADATA_INFO",
            Kind::NextBrokerId => "CONTROLLER_GET_NEXT_BROKER_ID",
            Kind::ApplyBrokerId => "CONTROLLER_APPLY_BROKER_ID",
            Kind::RegisterBroker => "CONTROLLER_REGISTER_BROKER",
            Kind::ElectMaster => "CONTROLLER_ELECT_MASTER",
            Kind::ReplicaInfo => "CONTROLLER_GET_REPLICA_INFO",
            Kind::AlterSyncStateSet => "CONTROLLER_ALTER_SYNC_STATE_SET",
        }
    }
}

#[derive(Clone, Debug)]
struct InFlight {
    id: RequestId,
    kind: Kind,
    deadline: Instant,
}

/// Periodic work of a running session.
#[derive(Clone, Copy, Debug)]
struct Timers {
    replica_poll_at: Instant,
    leader_refresh_at: Instant,
    sync_check_at: Instant,
}

/// One broker's conversation with the controller group (see the module docs).
#[derive(Debug)]
pub struct Session {
    config: SessionConfig,
    next_request: u64,
    leader: Option<String>,
    lookup_cursor: usize,
    lookup_misses: usize,
    phase: Phase,
    broker_id: Option<BrokerControllerId>,
    in_flight: Option<InFlight>,
    pending: Option<Pending>,
    retry_at: Option<Instant>,
    heartbeat_at: Option<Instant>,
    timers: Option<Timers>,
    role: Role,
    master_epoch: ControllerEpoch,
    sync_state_set: SyncStateSet,
    proposed: Option<BTreeSet<BrokerControllerId>>,
    replicas: BTreeMap<BrokerControllerId, Vec<bool>>,
    sync_dirty: bool,
    need_elect: bool,
    need_register: bool,
    poll_now: bool,
    progress: LogProgress,
}

impl Session {
    /// A session for a broker whose store held `stored` at start-up.
    pub fn new(config: SessionConfig, stored: StoredIdentity) -> Result<Session, SessionError> {
        if config.controller_addrs.is_empty() {
            return Err(SessionError::NoControllerAddress);
        }
        identity::check_belongs(&stored, &config.cluster_name, &config.broker_name)?;
        let (phase, broker_id) = match (stored.confirmed, stored.temp) {
            (Some(confirmed), _) => (Phase::Register, Some(confirmed.broker_id)),
            (None, Some(temp)) => (Phase::Apply(temp), None),
            (None, None) => (Phase::NextId, None),
        };
        Ok(Session {
            config,
            next_request: 0,
            leader: None,
            lookup_cursor: 0,
            lookup_misses: 0,
            phase,
            broker_id,
            in_flight: None,
            pending: None,
            retry_at: None,
            heartbeat_at: None,
            timers: None,
            role: Role::Undecided,
            master_epoch: 0,
            sync_state_set: SyncStateSet::default(),
            proposed: None,
            replicas: BTreeMap::new(),
            sync_dirty: false,
            need_elect: false,
            need_register: false,
            poll_now: false,
            progress: LogProgress::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &SessionConfig {
        &self.config
    }

    /// The broker's controller id, once confirmed.
    pub fn broker_id(&self) -> Option<BrokerControllerId> {
        self.broker_id
    }

    /// The role decided so far.
    pub fn role(&self) -> &Role {
        &self.role
    }

    /// The highest master epoch acted on.
    pub fn master_epoch(&self) -> ControllerEpoch {
        self.master_epoch
    }

    /// The sync-state set the controller last confirmed to this broker as master.
    pub fn sync_state_set(&self) -> &SyncStateSet {
        &self.sync_state_set
    }

    /// The leader controller's address, when known.
    pub fn leader(&self) -> Option<&str> {
        self.leader.as_deref()
    }

    /// When [`Session::poll`] next has something to do. Every entry point already sends
    /// whatever may go at once, so this is always a future instant (`None`: nothing until an
    /// answer or a finished write).
    pub fn next_wakeup(&self) -> Option<Instant> {
        let mut wakeups = Vec::with_capacity(5);
        wakeups.extend(self.heartbeat_at);
        if let Some(in_flight) = &self.in_flight {
            wakeups.push(in_flight.deadline);
        } else if self.pending.is_none() {
            wakeups.extend(self.retry_at);
            if let (None, Some(timers)) = (self.retry_at, &self.timers) {
                wakeups.push(timers.replica_poll_at);
                wakeups.push(timers.leader_refresh_at);
                if matches!(self.role, Role::Master { .. }) {
                    wakeups.push(timers.sync_check_at);
                }
            }
        }
        wakeups.into_iter().min()
    }

    /// Replaces the controller addresses: with `fetchControllerAddrByDnsLookup=true` Java
    /// resolves `controllerAddr` as a domain name again every two minutes, and the runtime
    /// passes each non-empty result here. The known leader is kept; lookups continue from the
    /// first new address.
    pub fn set_controller_addrs(&mut self, addrs: Vec<String>) -> Result<(), SessionError> {
        if addrs.is_empty() {
            return Err(SessionError::NoControllerAddress);
        }
        self.config.controller_addrs = addrs;
        self.lookup_cursor = 0;
        self.lookup_misses = 0;
        Ok(())
    }

    /// Reports what the broker's logs hold, for the following heartbeats.
    pub fn set_log_progress(&mut self, progress: LogProgress) {
        self.progress = progress;
    }

    /// Reports, for the slave with controller id `slave_id`, whether each of its logs is in
    /// sync with this master's. The slave counts as in sync only when it has logs and every
    /// one is. A change of the in-sync slaves is proposed to the controller at once (when no
    /// other request is outstanding, else right after it).
    pub fn set_replica_logs_in_sync(
        &mut self,
        now: Instant,
        slave_id: BrokerControllerId,
        logs: &[bool],
    ) -> Vec<Action> {
        let before = self.desired_members();
        self.replicas.insert(slave_id, logs.to_vec());
        if self.desired_members() != before {
            self.sync_dirty = true;
        }
        let mut out = Vec::new();
        self.step(now, &mut out);
        out
    }

    /// Forgets a slave (its connection closed): it no longer counts as in sync.
    pub fn forget_replica(&mut self, now: Instant, slave_id: BrokerControllerId) -> Vec<Action> {
        if self.replicas.remove(&slave_id).is_some() {
            self.sync_dirty = true;
        }
        let mut out = Vec::new();
        self.step(now, &mut out);
        out
    }

    /// What a replicated write needs before this broker may acknowledge it. The members
    /// counted are the confirmed set plus those of a proposal not yet answered, so a shrink
    /// takes effect only once the controller accepted it.
    pub fn ack_requirement(&self, policy: &AckPolicy) -> AckRequirement {
        if !matches!(self.role, Role::Master { .. }) {
            return AckRequirement::NotMaster;
        }
        let mut members = self.sync_state_set.members.clone();
        if let Some(proposed) = &self.proposed {
            members.extend(proposed.iter().copied());
        }
        if let Some(own) = self.broker_id {
            members.insert(own);
        }
        if members.len() < policy.min_in_sync_replicas {
            return AckRequirement::TooFewInSync {
                in_sync: members.len(),
                min: policy.min_in_sync_replicas,
            };
        }
        if policy.all_ack_in_sync_state_set {
            return AckRequirement::AllOf(members);
        }
        AckRequirement::Copies(policy.in_sync_replicas.max(1))
    }

    /// Does whatever is due at `now`: time-outs, heartbeats, the next control request.
    pub fn poll(&mut self, now: Instant) -> Vec<Action> {
        let mut out = Vec::new();
        if self.in_flight.as_ref().is_some_and(|f| f.deadline <= now) {
            if let Some(in_flight) = self.in_flight.take() {
                self.fail(in_flight.kind, now);
            }
        }
        self.step(now, &mut out);
        out
    }

    /// Reports that the request `id` failed in transport or timed out.
    pub fn on_failure(&mut self, now: Instant, id: RequestId) -> Vec<Action> {
        let mut out = Vec::new();
        if let Some(in_flight) = self.take_in_flight(id) {
            self.fail(in_flight.kind, now);
        }
        self.step(now, &mut out);
        out
    }

    /// Reports the answer to request `id`. An answer to a request that is no longer
    /// outstanding (it timed out) is ignored. On an error the request counts as failed and is
    /// repeated like one that timed out, from the next [`Session::poll`].
    pub fn on_reply(
        &mut self,
        now: Instant,
        id: RequestId,
        reply: Reply,
    ) -> Result<Vec<Action>, SessionError> {
        let mut out = Vec::new();
        let Some(in_flight) = self.take_in_flight(id) else {
            return Ok(out);
        };
        if let Err(error) = self.handle_reply(now, in_flight.kind, reply, &mut out) {
            // Nothing is sent with an error: the runtime logs it and polls.
            self.fail(in_flight.kind, now);
            return Err(error);
        }
        self.step(now, &mut out);
        Ok(out)
    }

    /// Reports that the last [`Action::Persist`] is durably done.
    pub fn on_persisted(&mut self, now: Instant) -> Vec<Action> {
        let mut out = Vec::new();
        match self.pending.take() {
            Some(Pending::Temp(temp)) => self.phase = Phase::Apply(temp),
            Some(Pending::Confirmed(temp)) => {
                self.broker_id = Some(temp.broker_id);
                self.phase = Phase::Register;
            }
            Some(Pending::DeleteTemp) => self.phase = Phase::NextId,
            None => {}
        }
        self.step(now, &mut out);
        out
    }

    /// Reports that the last [`Action::Persist`] failed. The claim steps back the way Java's
    /// does: a temp file that could not be written is claimed afresh, a confirmed file that
    /// could not be written is applied again (same id, same check code).
    pub fn on_persist_failed(&mut self, now: Instant) -> Vec<Action> {
        let mut out = Vec::new();
        match self.pending.take() {
            Some(Pending::Temp(_)) | Some(Pending::DeleteTemp) => self.phase = Phase::NextId,
            Some(Pending::Confirmed(temp)) => self.phase = Phase::Apply(temp),
            None => {}
        }
        self.retry_at = Some(now + self.config.retry_interval);
        self.step(now, &mut out);
        out
    }

    /// Applies a NOTIFY_BROKER_ROLE_CHANGED. Only a master epoch above the one held changes
    /// anything; a notification without a master is ignored (replica-info polling covers it).
    pub fn on_role_notification(&mut self, now: Instant, view: MasterView) -> Vec<Action> {
        let mut out = Vec::new();
        if let Some((id, addr, epoch)) = master_of(&view) {
            self.adopt_master(now, id, addr, epoch, view.sync_state_set, &mut out);
        }
        self.step(now, &mut out);
        out
    }

    fn take_in_flight(&mut self, id: RequestId) -> Option<InFlight> {
        if self.in_flight.as_ref().is_some_and(|f| f.id == id) {
            return self.in_flight.take();
        }
        None
    }

    /// A failed control request: look the leader up again (the leader may have moved or
    /// died), then repeat the step.
    fn fail(&mut self, kind: Kind, now: Instant) {
        // A running broker's one-off requests are flags, consumed when sent: raise them
        // again so the repeat goes to the next leader.
        match kind {
            Kind::AlterSyncStateSet => {
                self.proposed = None;
                self.sync_dirty = true;
            }
            Kind::RegisterBroker if self.phase == Phase::Running => self.need_register = true,
            Kind::ElectMaster if self.phase == Phase::Running => self.need_elect = true,
            Kind::ReplicaInfo => self.poll_now = true,
            _ => {}
        }
        self.forget_leader(now);
    }

    fn forget_leader(&mut self, now: Instant) {
        self.leader = None;
        self.advance_lookup(now);
    }

    /// Moves the leader lookup to the next address; after a full round of misses, pauses.
    fn advance_lookup(&mut self, now: Instant) {
        let addrs = self.config.controller_addrs.len();
        self.lookup_cursor = (self.lookup_cursor + 1) % addrs;
        self.lookup_misses += 1;
        if self.lookup_misses >= addrs {
            self.lookup_misses = 0;
            self.retry_at = Some(now + self.config.retry_interval);
        }
    }

    fn handle_reply(
        &mut self,
        now: Instant,
        kind: Kind,
        reply: Reply,
        out: &mut Vec<Action>,
    ) -> Result<(), SessionError> {
        if let Reply::Refused { code, .. } = reply {
            self.refused(now, kind, code, out);
            return Ok(());
        }
        match (kind, reply) {
            (Kind::Metadata, Reply::Metadata { leader_addr }) => {
                match leader_addr.filter(|addr| !addr.is_empty()) {
                    Some(addr) => {
                        self.leader = Some(addr);
                        self.lookup_misses = 0;
                    }
                    None => self.forget_leader(now),
                }
            }
            (Kind::NextBrokerId, Reply::NextBrokerId { next_broker_id }) => {
                let broker_id =
                    next_broker_id
                        .filter(|id| *id > 0)
                        .ok_or(SessionError::InvalidReply {
                            request: kind.name(),
                            reason: "nextBrokerId is missing or not positive",
                        })?;
                let temp = TempIdentity {
                    cluster_name: self.config.cluster_name.clone(),
                    broker_name: self.config.broker_name.clone(),
                    broker_id,
                    register_check_code: identity::register_check_code(
                        &self.config.broker_addr,
                        self.config.boot_unix_ms,
                    ),
                };
                self.pending = Some(Pending::Temp(temp.clone()));
                out.push(Action::Persist(Persist::WriteTemp(temp)));
            }
            (Kind::ApplyBrokerId, Reply::BrokerIdApplied) => {
                if let Phase::Apply(temp) = &self.phase {
                    let confirmed = ConfirmedIdentity {
                        cluster_name: temp.cluster_name.clone(),
                        broker_name: temp.broker_name.clone(),
                        broker_id: temp.broker_id,
                    };
                    self.pending = Some(Pending::Confirmed(temp.clone()));
                    out.push(Action::Persist(Persist::WriteConfirmed(confirmed)));
                }
            }
            (Kind::RegisterBroker, Reply::Registered(view)) => {
                match master_of(&view) {
                    Some((id, addr, epoch)) => {
                        self.adopt_master(now, id, addr, epoch, view.sync_state_set, out);
                        self.enter_running(now);
                    }
                    // Registered without a live master: heartbeat first, so the controller
                    // counts this broker live when it elects (Java does the same).
                    None if self.phase == Phase::Register => {
                        self.phase = Phase::Elect;
                        self.heartbeat_at = Some(now);
                    }
                    None => self.need_elect = true,
                }
            }
            (Kind::ElectMaster, Reply::Elected(view)) => match master_of(&view) {
                Some((id, addr, epoch)) => {
                    self.adopt_master(now, id, addr, epoch, view.sync_state_set, out);
                    self.enter_running(now);
                }
                None => self.retry_at = Some(now + self.config.retry_interval),
            },
            (Kind::ReplicaInfo, Reply::ReplicaInfo(view)) => {
                let epoch = view.master_epoch.ok_or(SessionError::InvalidReply {
                    request: kind.name(),
                    reason: "masterEpoch is missing",
                })?;
                let master = master_of(&view);
                let set = view.sync_state_set;
                if epoch == self.master_epoch && matches!(self.role, Role::Master { .. }) {
                    self.adopt_sync_state_set(set.clone(), out);
                }
                match master {
                    Some((id, addr, epoch)) => self.adopt_master(now, id, addr, epoch, set, out),
                    // A newer epoch without a master: the master is gone and the controller
                    // found nobody to elect on its own; ask with this broker's id.
                    None if epoch > self.master_epoch => self.need_elect = true,
                    None => {}
                }
            }
            (Kind::AlterSyncStateSet, Reply::SyncStateSetAltered(set)) => {
                self.proposed = None;
                self.adopt_sync_state_set(set, out);
            }
            (kind, reply) => {
                return Err(SessionError::UnexpectedReply {
                    request: kind.name(),
                    reply: reply_name(&reply),
                })
            }
        }
        Ok(())
    }

    fn refused(&mut self, now: Instant, kind: Kind, code: i32, out: &mut Vec<Action>) {
        if code == codes::CONTROLLER_NOT_LEADER {
            self.fail(kind, now);
            return;
        }
        match kind {
            Kind::Metadata => self.forget_leader(now),
            Kind::ApplyBrokerId if code == codes::CONTROLLER_BROKER_ID_INVALID => {
                // Someone else holds the id: drop the claim and start over.
                self.pending = Some(Pending::DeleteTemp);
                out.push(Action::Persist(Persist::DeleteTemp));
            }
            Kind::ReplicaInfo if code == codes::CONTROLLER_BROKER_METADATA_NOT_EXIST => {
                self.need_register = true;
            }
            Kind::AlterSyncStateSet => {
                self.proposed = None;
                if matches!(
                    code,
                    codes::CONTROLLER_FENCED_MASTER_EPOCH
                        | codes::CONTROLLER_INVALID_MASTER
                        | codes::CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH
                ) {
                    // The proposal was made under a stale view: learn the current one now.
                    self.poll_now = true;
                }
            }
            Kind::RegisterBroker if self.phase == Phase::Running => {
                self.need_register = true;
                self.retry_at = Some(now + self.config.retry_interval);
            }
            // The next replica poll asks again if still needed.
            Kind::ElectMaster | Kind::ReplicaInfo if self.phase == Phase::Running => {}
            _ => self.retry_at = Some(now + self.config.retry_interval),
        }
    }

    fn enter_running(&mut self, now: Instant) {
        if self.phase == Phase::Running {
            return;
        }
        self.phase = Phase::Running;
        self.timers = Some(Timers {
            replica_poll_at: now + self.config.sync_broker_metadata_period,
            leader_refresh_at: now + self.config.sync_controller_metadata_period,
            sync_check_at: now + self.config.check_sync_state_set_period,
        });
    }

    /// Takes the role a master epoch above the held one names (Java's `changeBrokerRole`).
    fn adopt_master(
        &mut self,
        now: Instant,
        master_id: BrokerControllerId,
        master_addr: String,
        epoch: ControllerEpoch,
        set: SyncStateSet,
        out: &mut Vec<Action>,
    ) {
        if epoch <= self.master_epoch {
            return;
        }
        self.master_epoch = epoch;
        self.need_elect = false;
        if Some(master_id) == self.broker_id {
            self.role = Role::Master { epoch };
            if set.epoch > self.sync_state_set.epoch {
                self.sync_state_set = set;
            }
            self.proposed = None;
            self.sync_dirty = true;
            out.push(Action::BecomeMaster {
                epoch,
                sync_state_set: self.sync_state_set.clone(),
            });
        } else {
            self.role = Role::Slave {
                master_broker_id: master_id,
                master_addr: master_addr.clone(),
                epoch,
            };
            self.replicas.clear();
            self.proposed = None;
            self.sync_dirty = false;
            out.push(Action::BecomeSlave {
                master_broker_id: master_id,
                master_addr,
                epoch,
            });
        }
        if let Some(timers) = &mut self.timers {
            timers.sync_check_at = now + self.config.check_sync_state_set_period;
        }
    }

    fn adopt_sync_state_set(&mut self, set: SyncStateSet, out: &mut Vec<Action>) {
        if set.epoch > self.sync_state_set.epoch {
            self.sync_state_set = set.clone();
            out.push(Action::SyncStateSetChanged(set));
        }
    }

    /// The set a master should propose: itself and every slave whose every log is in sync.
    fn desired_members(&self) -> BTreeSet<BrokerControllerId> {
        let slaves = self
            .replicas
            .iter()
            .filter(|(_, logs)| !logs.is_empty() && logs.iter().all(|in_sync| *in_sync))
            .map(|(id, _)| *id);
        self.broker_id.into_iter().chain(slaves).collect()
    }

    fn step(&mut self, now: Instant, out: &mut Vec<Action>) {
        self.send_heartbeats(now, out);
        if self.in_flight.is_some() || self.pending.is_some() {
            return;
        }
        if self.retry_at.is_some_and(|at| at > now) {
            return;
        }
        self.retry_at = None;
        if self.leader.is_none() {
            let to = self.config.controller_addrs[self.lookup_cursor].clone();
            self.send(now, to, Kind::Metadata, Request::GetMetadata, out);
            return;
        }
        let request = match (&self.phase, self.broker_id) {
            (Phase::NextId, _) => (Kind::NextBrokerId, Request::GetNextBrokerId),
            (Phase::Apply(temp), _) => (
                Kind::ApplyBrokerId,
                Request::ApplyBrokerId {
                    broker_id: temp.broker_id,
                    register_check_code: temp.register_check_code.clone(),
                },
            ),
            (Phase::Register, Some(broker_id)) => {
                (Kind::RegisterBroker, Request::RegisterBroker { broker_id })
            }
            (Phase::Elect, Some(broker_id)) => {
                (Kind::ElectMaster, Request::ElectMaster { broker_id })
            }
            (Phase::Running, Some(broker_id)) => match self.running_request(now, broker_id) {
                Some(request) => request,
                None => return,
            },
            // Register, Elect and Running are entered only with a confirmed id.
            (_, None) => return,
        };
        // Everything goes to the leader, the periodic lookup too: a controller that lost the
        // lead names its successor.
        if let Some(to) = self.leader.clone() {
            self.send(now, to, request.0, request.1, out);
        }
    }

    fn running_request(
        &mut self,
        now: Instant,
        broker_id: BrokerControllerId,
    ) -> Option<(Kind, Request)> {
        let timers = self.timers.as_mut()?;
        if self.need_register {
            self.need_register = false;
            return Some((Kind::RegisterBroker, Request::RegisterBroker { broker_id }));
        }
        if self.need_elect {
            self.need_elect = false;
            return Some((Kind::ElectMaster, Request::ElectMaster { broker_id }));
        }
        if self.poll_now || timers.replica_poll_at <= now {
            self.poll_now = false;
            timers.replica_poll_at = now + self.config.sync_broker_metadata_period;
            return Some((Kind::ReplicaInfo, Request::GetReplicaInfo));
        }
        if timers.leader_refresh_at <= now {
            timers.leader_refresh_at = now + self.config.sync_controller_metadata_period;
            return Some((Kind::Metadata, Request::GetMetadata));
        }
        let Role::Master { epoch } = self.role else {
            return None;
        };
        if !self.sync_dirty && timers.sync_check_at > now {
            return None;
        }
        self.sync_dirty = false;
        timers.sync_check_at = now + self.config.check_sync_state_set_period;
        let desired = self.desired_members();
        if desired == self.sync_state_set.members {
            return None;
        }
        self.proposed = Some(desired.clone());
        Some((
            Kind::AlterSyncStateSet,
            Request::AlterSyncStateSet {
                master_broker_id: broker_id,
                master_epoch: epoch,
                proposal: SyncStateSet {
                    members: desired,
                    epoch: self.sync_state_set.epoch,
                },
            },
        ))
    }

    fn send(
        &mut self,
        now: Instant,
        to: String,
        kind: Kind,
        request: Request,
        out: &mut Vec<Action>,
    ) {
        self.next_request += 1;
        let id = RequestId(self.next_request);
        self.in_flight = Some(InFlight {
            id,
            kind,
            deadline: now + self.config.request_timeout,
        });
        out.push(Action::Send { id, to, request });
    }

    fn send_heartbeats(&mut self, now: Instant, out: &mut Vec<Action>) {
        let Some(broker_id) = self.broker_id else {
            return;
        };
        if matches!(self.phase, Phase::Register) && self.heartbeat_at.is_none() {
            // Heartbeats start once the broker is registered (or about to elect).
            return;
        }
        if self.heartbeat_at.is_some_and(|at| at > now) {
            return;
        }
        self.heartbeat_at = Some(now + self.config.heartbeat_interval);
        let heartbeat = Heartbeat {
            broker_id,
            epoch: self.progress.epoch,
            max_offset: self.progress.max_offset,
            confirm_offset: self.progress.confirm_offset,
            timeout_ms: self.config.heartbeat_timeout_ms,
            election_priority: self.config.election_priority,
        };
        for to in &self.config.controller_addrs {
            out.push(Action::SendOneway {
                to: to.clone(),
                request: Request::Heartbeat(heartbeat),
            });
        }
    }
}

/// The master a view names, when it names one completely.
fn master_of(view: &MasterView) -> Option<(BrokerControllerId, String, ControllerEpoch)> {
    let id = view.master_broker_id?;
    let addr = view.master_addr.as_ref().filter(|addr| !addr.is_empty())?;
    let epoch = view.master_epoch?;
    Some((id, addr.clone(), epoch))
}

fn reply_name(reply: &Reply) -> &'static str {
    match reply {
        Reply::Metadata { .. } => "Metadata",
        Reply::NextBrokerId { .. } => "NextBrokerId",
        Reply::BrokerIdApplied => "BrokerIdApplied",
        Reply::Registered(_) => "Registered",
        Reply::ReplicaInfo(_) => "ReplicaInfo",
        Reply::Elected(_) => "Elected",
        Reply::SyncStateSetAltered(_) => "SyncStateSetAltered",
        Reply::Refused { .. } => "Refused",
    }
}
