//! Randomised simulation of three real broker sessions (comet-replication's controller
//! module) against this crate's controller state machine: every request is checked by
//! `ControllerState::handle` and its events are applied at once, as a single-node log
//! would. Faults: controller leader switches (two controllers share the replicated state;
//! each keeps its own heartbeat table, as brokers heartbeat to every controller), answers
//! lost after the controller applied the request, brokers dying and returning, heartbeats
//! lost for a while, role notifications delivered late, twice or out of order, and changing
//! in-sync flags. Checked after every step: a broker's master epoch never goes down, no two
//! brokers are master under one epoch, a broker is master under an epoch only if the
//! controller elected it under that epoch, and the controller's master is always in its
//! sync-state set with epochs that never go down. Once the faults stop, all three converge
//! on the controller's master, and replaying the event log rebuilds the same state.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use comet_nameserver::controller::{
    ControllerConfig, ControllerState, ElectTrigger, Event, Heartbeat, HeartbeatTable,
    Request as ControllerRequest, Response,
};
use comet_replication::controller::{
    codes, Action, MasterView, Persist, Reply, Request, Role, Session, SessionConfig,
    StoredIdentity, SyncStateSet,
};
use proptest::prelude::*;

const CONTROLLERS: [&str; 2] = ["10.0.0.1:9878", "10.0.0.2:9878"];
const BROKERS: usize = 3;
const CLUSTER: &str = "c";
const BROKER_NAME: &str = "b";
const HEARTBEAT_TIMEOUT_MS: i64 = 3_000;

/// The controller group: one replicated state, a heartbeat table per controller.
struct Controllers {
    config: ControllerConfig,
    leader: usize,
    state: ControllerState,
    heartbeats: [HeartbeatTable; 2],
    /// Every event applied, in order: what a Raft log would hold.
    log: Vec<Event>,
    /// (epoch, master) of every applied election.
    elected: BTreeSet<(i32, i64)>,
    /// Every NOTIFY_BROKER_ROLE_CHANGED sent, with its recipients; the network may deliver
    /// any of them late, again, or out of order.
    notices: Vec<(MasterView, BTreeSet<String>)>,
    highest_master_epoch: i32,
}

impl Controllers {
    fn new(config: ControllerConfig) -> Controllers {
        Controllers {
            config,
            leader: 0,
            state: ControllerState::new(),
            heartbeats: [HeartbeatTable::new(), HeartbeatTable::new()],
            log: Vec::new(),
            elected: BTreeSet::new(),
            notices: Vec::new(),
            highest_master_epoch: 0,
        }
    }

    /// Checks and applies a request on the leader.
    fn run(&mut self, request: &ControllerRequest, now_ms: u64) -> Result<Response, Reply> {
        let handled =
            self.state
                .handle(request, &self.config, &self.heartbeats[self.leader], now_ms);
        let (events, response) = handled.map_err(|refusal| Reply::Refused {
            code: refusal.code.value(),
            remark: Some(refusal.remark),
        })?;
        for event in events {
            if let Event::ElectMaster {
                new_master: Some(id),
                ..
            } = &event
            {
                self.check_candidate(*id);
            }
            if self.state.apply(&event) {
                if let Event::ElectMaster {
                    new_master: Some(id),
                    master_epoch,
                    ..
                } = &event
                {
                    assert!(
                        self.elected.insert((*master_epoch, *id)),
                        "a second election under epoch {master_epoch}"
                    );
                }
            }
            self.log.push(event);
        }
        if let Response::Elected {
            master,
            sync_state_set,
            notify,
            ..
        } = &response
        {
            let view = MasterView {
                master_broker_id: Some(master.broker_id),
                master_addr: Some(master.addr.clone()),
                master_epoch: Some(master.master_epoch),
                sync_state_set: SyncStateSet {
                    members: sync_state_set.members.clone(),
                    epoch: sync_state_set.epoch,
                },
            };
            self.notices
                .push((view, notify.values().cloned().collect()));
        }
        self.check();
        Ok(response)
    }

    /// Without unclean elections a new master comes from the sync-state set (or is the
    /// first master of the set).
    fn check_candidate(&self, id: i64) {
        let set = self
            .state
            .broker_set(BROKER_NAME)
            .expect("an election needs the set");
        assert!(
            self.config.enable_elect_unclean_master
                || set.master_epoch == 0
                || set.sync_state_set.members.contains(&id),
            "broker {id} elected from outside the sync-state set {:?}",
            set.sync_state_set
        );
    }

    fn check(&mut self) {
        let set = self.state.broker_set(BROKER_NAME);
        if let Some(set) = set {
            assert!(
                set.master_epoch >= self.highest_master_epoch,
                "the controller's master epoch went down"
            );
            self.highest_master_epoch = set.master_epoch;
            if let Some(master) = set.master {
                assert!(
                    set.sync_state_set.members.contains(&master),
                    "master {master} outside its sync-state set"
                );
            }
        }
    }

    /// The leader's own scan: a master without heartbeats is replaced.
    fn scan(&mut self, now_ms: u64) {
        let expired = self.state.expired(&self.heartbeats[self.leader], now_ms);
        for request in expired {
            let response = self.run(&request, now_ms);
            assert!(
                matches!(
                    response,
                    Ok(Response::Elected { .. } | Response::MasterGone { .. })
                ),
                "a controller-started election answered {response:?}"
            );
        }
    }

    /// What controller `to` answers to a broker's request.
    fn answer(&mut self, to: &str, request: &Request, broker_addr: &str, now_ms: u64) -> Reply {
        let refused = |code| Reply::Refused { code, remark: None };
        if let Request::GetMetadata = request {
            return Reply::Metadata {
                leader_addr: Some(CONTROLLERS[self.leader].to_owned()),
            };
        }
        if to != CONTROLLERS[self.leader] {
            return refused(codes::CONTROLLER_NOT_LEADER);
        }
        let translated = match request {
            Request::GetMetadata | Request::Heartbeat(_) => {
                unreachable!("answered elsewhere")
            }
            Request::GetNextBrokerId => ControllerRequest::GetNextBrokerId {
                cluster_name: CLUSTER.to_owned(),
                broker_name: BROKER_NAME.to_owned(),
            },
            Request::ApplyBrokerId {
                broker_id,
                register_check_code,
            } => ControllerRequest::ApplyBrokerId {
                cluster_name: CLUSTER.to_owned(),
                broker_name: BROKER_NAME.to_owned(),
                broker_id: *broker_id,
                register_check_code: register_check_code.clone(),
            },
            Request::RegisterBroker { broker_id } => ControllerRequest::RegisterBroker {
                cluster_name: CLUSTER.to_owned(),
                broker_name: BROKER_NAME.to_owned(),
                broker_id: *broker_id,
                broker_addr: broker_addr.to_owned(),
            },
            Request::GetReplicaInfo => ControllerRequest::GetReplicaInfo {
                broker_name: BROKER_NAME.to_owned(),
            },
            Request::ElectMaster { broker_id } => ControllerRequest::ElectMaster {
                broker_name: BROKER_NAME.to_owned(),
                trigger: ElectTrigger::Broker(*broker_id),
            },
            Request::AlterSyncStateSet {
                master_broker_id,
                master_epoch,
                proposal,
            } => ControllerRequest::AlterSyncStateSet {
                broker_name: BROKER_NAME.to_owned(),
                master_broker_id: *master_broker_id,
                master_epoch: *master_epoch,
                proposal: comet_nameserver::controller::SyncStateSet {
                    members: proposal.members.clone(),
                    epoch: proposal.epoch,
                },
            },
        };
        match self.run(&translated, now_ms) {
            Err(reply) => reply,
            Ok(response) => to_reply(response),
        }
    }

    fn heartbeat(&mut self, to: &str, heartbeat: &Heartbeat, now_ms: u64) {
        let index = CONTROLLERS
            .iter()
            .position(|addr| *addr == to)
            .expect("a known controller");
        self.heartbeats[index].on_heartbeat(heartbeat, now_ms);
    }
}

fn sync_set(set: comet_nameserver::controller::SyncStateSet) -> SyncStateSet {
    SyncStateSet {
        members: set.members,
        epoch: set.epoch,
    }
}

/// The answer as the broker's runtime decodes it.
fn to_reply(response: Response) -> Reply {
    match response {
        Response::NextBrokerId { next_broker_id } => Reply::NextBrokerId {
            next_broker_id: Some(next_broker_id),
        },
        Response::BrokerIdApplied => Reply::BrokerIdApplied,
        Response::Registered {
            master,
            sync_state_set,
        } => Reply::Registered(MasterView {
            master_broker_id: master.as_ref().map(|m| m.broker_id),
            master_addr: master.as_ref().map(|m| m.addr.clone()),
            master_epoch: master.as_ref().map(|m| m.master_epoch),
            sync_state_set: sync_set(sync_state_set),
        }),
        Response::ReplicaInfo {
            master_broker_id,
            master_addr,
            master_epoch,
            sync_state_set,
        } => Reply::ReplicaInfo(MasterView {
            master_broker_id,
            master_addr,
            master_epoch: Some(master_epoch),
            sync_state_set: sync_set(sync_state_set),
        }),
        Response::Elected {
            master,
            sync_state_set,
            ..
        }
        | Response::MasterStillExists {
            master,
            sync_state_set,
        } => Reply::Elected(MasterView {
            master_broker_id: Some(master.broker_id),
            master_addr: Some(master.addr),
            master_epoch: Some(master.master_epoch),
            sync_state_set: sync_set(sync_state_set),
        }),
        Response::SyncStateSetAltered(set) => Reply::SyncStateSetAltered(sync_set(set)),
        other => panic!("no broker request is answered with {other:?}"),
    }
}

struct Broker {
    addr: String,
    session: Session,
    queue: VecDeque<Action>,
    files: StoredIdentity,
    alive: bool,
    highest_epoch: i32,
}

impl Broker {
    fn boot(index: usize, files: StoredIdentity, boot_unix_ms: i64) -> Broker {
        let addr = format!("10.0.1.{index}:10911");
        let mut config = SessionConfig::new(
            CLUSTER,
            BROKER_NAME,
            addr.clone(),
            CONTROLLERS.iter().map(|a| a.to_string()).collect(),
            boot_unix_ms,
        );
        config.heartbeat_timeout_ms = HEARTBEAT_TIMEOUT_MS;
        config.sync_broker_metadata_period = Duration::from_millis(1_000);
        config.check_sync_state_set_period = Duration::from_millis(1_000);
        Broker {
            addr,
            session: Session::new(config, files.clone()).expect("a valid session"),
            queue: VecDeque::new(),
            files,
            alive: true,
            highest_epoch: 0,
        }
    }
}

#[derive(Clone, Debug)]
enum Fault {
    Advance(u64),
    Kill(usize),
    Restart(usize),
    SwitchLeader,
    /// The controller applies the broker's next request but the answer is lost.
    LoseNextAnswer(usize),
    InSync(usize, usize, Vec<bool>),
    /// The broker's heartbeats are lost for this many ms (it keeps running).
    Partition(usize, u64),
    /// Some past notification reaches the broker, if it was sent to it.
    Deliver(usize, usize),
}

fn fault() -> impl Strategy<Value = Fault> {
    prop_oneof![
        6 => (50u64..1_500).prop_map(Fault::Advance),
        2 => (0..BROKERS).prop_map(Fault::Kill),
        2 => (0..BROKERS).prop_map(Fault::Restart),
        1 => Just(Fault::SwitchLeader),
        1 => (0..BROKERS).prop_map(Fault::LoseNextAnswer),
        2 => (0..BROKERS, 0..BROKERS, prop::collection::vec(any::<bool>(), 1..4))
            .prop_map(|(m, s, logs)| Fault::InSync(m, s, logs)),
        1 => (0..BROKERS, 1_000u64..8_000).prop_map(|(b, ms)| Fault::Partition(b, ms)),
        2 => (0..BROKERS, any::<usize>()).prop_map(|(b, pick)| Fault::Deliver(b, pick)),
    ]
}

struct Sim {
    base: Instant,
    now_ms: u64,
    controllers: Controllers,
    brokers: Vec<Broker>,
    lose: BTreeSet<usize>,
    /// Broker index to the time its heartbeats get through again.
    partitioned_until: BTreeMap<usize, u64>,
}

impl Sim {
    fn new(config: ControllerConfig) -> Sim {
        Sim {
            base: Instant::now(),
            now_ms: 0,
            controllers: Controllers::new(config),
            brokers: (0..BROKERS)
                .map(|i| Broker::boot(i, StoredIdentity::default(), i as i64))
                .collect(),
            lose: BTreeSet::new(),
            partitioned_until: BTreeMap::new(),
        }
    }

    fn now(&self) -> Instant {
        self.base + Duration::from_millis(self.now_ms)
    }

    /// Carries out every queued action of every live broker, then lets the leader scan.
    fn settle(&mut self) {
        for _ in 0..200 {
            let mut busy = false;
            for index in 0..BROKERS {
                if !self.brokers[index].alive {
                    continue;
                }
                let now = self.now();
                let polled = self.brokers[index].session.poll(now);
                self.brokers[index].queue.extend(polled);
                while let Some(action) = self.brokers[index].queue.pop_front() {
                    busy = true;
                    self.carry_out(index, action);
                }
            }
            self.controllers.scan(self.now_ms);
            if !busy {
                return;
            }
        }
        panic!("the sessions never went quiet");
    }

    fn carry_out(&mut self, index: usize, action: Action) {
        let now = self.now();
        let now_ms = self.now_ms;
        let broker = &mut self.brokers[index];
        let more = match action {
            Action::Send { id, to, request } => {
                let reply = self.controllers.answer(&to, &request, &broker.addr, now_ms);
                if self.lose.remove(&index) {
                    broker.session.on_failure(now, id)
                } else {
                    broker
                        .session
                        .on_reply(now, id, reply)
                        .expect("the controller answers well-formed replies")
                }
            }
            Action::SendOneway { to, request } => {
                let cut = self
                    .partitioned_until
                    .get(&index)
                    .is_some_and(|until| now_ms < *until);
                if let (false, Request::Heartbeat(beat)) = (cut, &request) {
                    let heartbeat = Heartbeat {
                        cluster_name: CLUSTER.to_owned(),
                        broker_name: BROKER_NAME.to_owned(),
                        broker_addr: broker.addr.clone(),
                        broker_id: beat.broker_id,
                        epoch: Some(beat.epoch),
                        max_offset: Some(beat.max_offset),
                        confirm_offset: Some(beat.confirm_offset),
                        heartbeat_timeout_ms: Some(beat.timeout_ms),
                        election_priority: Some(beat.election_priority),
                    };
                    self.controllers.heartbeat(&to, &heartbeat, now_ms);
                }
                Vec::new()
            }
            Action::Persist(persist) => {
                match persist {
                    Persist::WriteTemp(temp) => broker.files.temp = Some(temp),
                    Persist::WriteConfirmed(confirmed) => {
                        broker.files.confirmed = Some(confirmed);
                        broker.files.temp = None;
                    }
                    Persist::DeleteTemp => broker.files.temp = None,
                }
                broker.session.on_persisted(now)
            }
            Action::BecomeMaster { .. }
            | Action::BecomeSlave { .. }
            | Action::SyncStateSetChanged(_) => Vec::new(),
        };
        broker.queue.extend(more);
        self.check();
    }

    fn check(&mut self) {
        let mut masters = BTreeMap::new();
        for (index, broker) in self.brokers.iter_mut().enumerate() {
            let epoch = broker.session.master_epoch();
            assert!(
                epoch >= broker.highest_epoch,
                "broker {index}: epoch went down"
            );
            broker.highest_epoch = epoch;
            if !broker.alive {
                continue;
            }
            if let Role::Master { epoch } = broker.session.role() {
                let id = broker.session.broker_id().expect("a master has an id");
                assert!(
                    self.controllers.elected.contains(&(*epoch, id)),
                    "broker {index} master at {epoch} without being elected"
                );
                assert!(
                    masters.insert(*epoch, index).is_none(),
                    "two masters under epoch {epoch}"
                );
            }
        }
    }

    fn apply(&mut self, fault: Fault) {
        match fault {
            Fault::Advance(ms) => self.now_ms += ms,
            Fault::Kill(index) => self.brokers[index].alive = false,
            Fault::Restart(index) => {
                if !self.brokers[index].alive {
                    // A restart keeps only the identity files; the epoch is learnt again.
                    let files = self.brokers[index].files.clone();
                    self.brokers[index] = Broker::boot(index, files, 1_000 + self.now_ms as i64);
                }
            }
            Fault::SwitchLeader => self.controllers.leader = 1 - self.controllers.leader,
            Fault::LoseNextAnswer(index) => {
                self.lose.insert(index);
            }
            Fault::Partition(index, ms) => {
                self.partitioned_until.insert(index, self.now_ms + ms);
            }
            Fault::Deliver(index, pick) => {
                let notices = &self.controllers.notices;
                let broker = &mut self.brokers[index];
                if broker.alive && !notices.is_empty() {
                    let (view, recipients) = &notices[pick % notices.len()];
                    if recipients.contains(&broker.addr) {
                        let now = self.base + Duration::from_millis(self.now_ms);
                        let actions = broker.session.on_role_notification(now, view.clone());
                        broker.queue.extend(actions);
                    }
                }
            }
            Fault::InSync(master, slave, logs) => {
                if let Some(slave_id) = self.brokers[slave].session.broker_id() {
                    let now = self.now();
                    let actions = self.brokers[master]
                        .session
                        .set_replica_logs_in_sync(now, slave_id, &logs);
                    self.brokers[master].queue.extend(actions);
                }
            }
        }
        self.settle();
    }
}

fn simulate(faults: Vec<Fault>, config: ControllerConfig) -> Result<(), TestCaseError> {
    let mut sim = Sim::new(config);
    sim.settle();
    for fault in faults {
        sim.apply(fault);
    }
    // Heal: everyone back, nothing lost, every slave in sync, time passes.
    for index in 0..BROKERS {
        sim.apply(Fault::Restart(index));
    }
    sim.lose.clear();
    sim.partitioned_until.clear();
    for round in 0..40 {
        let master = sim
            .brokers
            .iter()
            .position(|b| matches!(b.session.role(), Role::Master { .. }));
        if let Some(master) = master {
            for slave in 0..BROKERS {
                if slave != master && round % 5 == 0 {
                    sim.apply(Fault::InSync(master, slave, vec![true, true]));
                }
            }
        }
        sim.apply(Fault::Advance(500));
    }
    let set = sim
        .controllers
        .state
        .broker_set(BROKER_NAME)
        .expect("the broker set is known");
    let epoch = set.master_epoch;
    let master_id = set.master.expect("a master after healing");
    let master_addr = set
        .addr(master_id)
        .expect("the master's address")
        .to_owned();
    prop_assert_eq!(
        set.sync_state_set.members.len(),
        BROKERS,
        "all back in sync"
    );
    for (index, broker) in sim.brokers.iter().enumerate() {
        let id = broker.session.broker_id().expect("every broker has an id");
        let expected = if id == master_id {
            Role::Master { epoch }
        } else {
            Role::Slave {
                master_broker_id: master_id,
                master_addr: master_addr.clone(),
                epoch,
            }
        };
        prop_assert_eq!(broker.session.role(), &expected, "broker {}", index);
    }
    let ids: BTreeSet<_> = sim
        .brokers
        .iter()
        .filter_map(|b| b.session.broker_id())
        .collect();
    prop_assert_eq!(ids.len(), BROKERS, "distinct ids");
    let mut replayed = ControllerState::new();
    for event in &sim.controllers.log {
        replayed.apply(event);
    }
    prop_assert_eq!(
        &replayed,
        &sim.controllers.state,
        "the log rebuilds the state"
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    // The invariants of the file docs under random faults, and convergence after.
    #[test]
    fn sessions_agree_with_the_controller(faults in prop::collection::vec(fault(), 1..80)) {
        simulate(faults, ControllerConfig::default())?;
    }

    // The same with unclean elections allowed: they may lose data, never split the brain.
    #[test]
    fn sessions_agree_with_an_unclean_controller(
        faults in prop::collection::vec(fault(), 1..80),
    ) {
        simulate(faults, ControllerConfig { enable_elect_unclean_master: true })?;
    }
}
