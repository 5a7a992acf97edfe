//! Randomised simulation of three broker sessions against an in-memory model of Apache's
//! controller rules (Java's `ReplicasInfoManager` and `DefaultElectPolicy`, reduced to one
//! broker set), with controller leader switches, lost answers, dying and returning brokers,
//! lost heartbeats, role notifications delivered late, twice or out of order, and changing
//! in-sync flags. Invariants, checked after every event: a broker's master epoch
//! never goes down; no two brokers are master under the same epoch; a broker is master under
//! an epoch only if the controller elected it under that epoch. Once the faults stop, all
//! three converge: one master under the controller's epoch, the others its slaves.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use comet_replication::controller::*;
use proptest::prelude::*;

const CONTROLLERS: [&str; 2] = ["10.0.0.1:9878", "10.0.0.2:9878"];
const BROKERS: usize = 3;
const HEARTBEAT_TIMEOUT_MS: u64 = 3_000;

/// The controller model: one broker set, ids, liveness from heartbeats, elections.
#[derive(Debug, Default)]
struct Model {
    leader: usize,
    next_id: BrokerControllerId,
    ids: BTreeMap<BrokerControllerId, (String, String)>,
    master: Option<BrokerControllerId>,
    master_epoch: ControllerEpoch,
    sync: BTreeSet<BrokerControllerId>,
    sync_epoch: ControllerEpoch,
    last_heartbeat_ms: BTreeMap<BrokerControllerId, u64>,
    /// (epoch, master) of every successful election.
    elected: BTreeSet<(ControllerEpoch, BrokerControllerId)>,
    /// Every NOTIFY_BROKER_ROLE_CHANGED the controller sent; the network may deliver any of
    /// them late, again, or out of order.
    notices: Vec<MasterView>,
}

impl Model {
    fn new() -> Model {
        Model {
            next_id: 1,
            ..Model::default()
        }
    }

    fn alive(&self, id: BrokerControllerId, now_ms: u64) -> bool {
        self.last_heartbeat_ms
            .get(&id)
            .is_some_and(|at| now_ms <= at + HEARTBEAT_TIMEOUT_MS)
    }

    /// Replica info names the recorded master; a registration only a live one (Java's
    /// `getReplicaInfo` and `registerBroker`).
    fn view(&self, live_master_only: bool, now_ms: u64) -> MasterView {
        let master = self
            .master
            .filter(|id| !live_master_only || self.alive(*id, now_ms));
        MasterView {
            master_broker_id: master,
            master_addr: master.map(|id| self.ids[&id].0.clone()),
            master_epoch: if live_master_only {
                master.map(|_| self.master_epoch)
            } else {
                Some(self.master_epoch)
            },
            sync_state_set: SyncStateSet {
                members: self.sync.clone(),
                epoch: self.sync_epoch,
            },
        }
    }

    fn elect(&mut self, asker: Option<BrokerControllerId>, now_ms: u64) -> Option<Reply> {
        if self.master_epoch == 0 {
            if let Some(asker) = asker {
                return Some(self.install(asker));
            }
        }
        if let Some(master) = self.master.filter(|id| self.alive(*id, now_ms)) {
            return Some(Reply::Elected(MasterView {
                master_broker_id: Some(master),
                master_addr: Some(self.ids[&master].0.clone()),
                master_epoch: Some(self.master_epoch),
                sync_state_set: SyncStateSet {
                    members: self.sync.clone(),
                    epoch: self.sync_epoch,
                },
            }));
        }
        let candidate = self.sync.iter().copied().find(|id| self.alive(*id, now_ms));
        match candidate {
            Some(id) => Some(self.install(id)),
            None => {
                if asker.is_none() && self.master.is_some() {
                    self.master = None;
                    self.master_epoch += 1;
                }
                None
            }
        }
    }

    fn install(&mut self, id: BrokerControllerId) -> Reply {
        self.master = Some(id);
        self.master_epoch += 1;
        self.sync = BTreeSet::from([id]);
        self.sync_epoch += 1;
        self.elected.insert((self.master_epoch, id));
        let view = MasterView {
            master_broker_id: Some(id),
            master_addr: Some(self.ids[&id].0.clone()),
            master_epoch: Some(self.master_epoch),
            sync_state_set: SyncStateSet {
                members: self.sync.clone(),
                epoch: self.sync_epoch,
            },
        };
        self.notices.push(view.clone());
        Reply::Elected(view)
    }

    /// The controller's own scan: a master without heartbeats is replaced.
    fn scan(&mut self, now_ms: u64) {
        if let Some(master) = self.master {
            if !self.alive(master, now_ms) {
                self.elect(None, now_ms);
            }
        }
    }

    fn answer(&mut self, to: &str, request: &Request, addr: &str, now_ms: u64) -> Reply {
        let refused = |code| Reply::Refused { code, remark: None };
        if let Request::Heartbeat(heartbeat) = request {
            self.last_heartbeat_ms.insert(heartbeat.broker_id, now_ms);
            return refused(0);
        }
        if let Request::GetMetadata = request {
            return Reply::Metadata {
                leader_addr: Some(CONTROLLERS[self.leader].to_owned()),
            };
        }
        if to != CONTROLLERS[self.leader] {
            return refused(codes::CONTROLLER_NOT_LEADER);
        }
        match request {
            Request::GetNextBrokerId => Reply::NextBrokerId {
                next_broker_id: Some(self.next_id),
            },
            Request::ApplyBrokerId {
                broker_id,
                register_check_code,
            } => match self.ids.get(broker_id) {
                Some((_, code)) if code != register_check_code => {
                    refused(codes::CONTROLLER_BROKER_ID_INVALID)
                }
                Some(_) => Reply::BrokerIdApplied,
                None => {
                    self.ids
                        .insert(*broker_id, (addr.to_owned(), register_check_code.clone()));
                    self.next_id += 1;
                    Reply::BrokerIdApplied
                }
            },
            Request::RegisterBroker { broker_id } => {
                if !self.ids.contains_key(broker_id) {
                    return refused(2010);
                }
                Reply::Registered(self.view(true, now_ms))
            }
            Request::GetReplicaInfo => Reply::ReplicaInfo(self.view(false, now_ms)),
            Request::ElectMaster { broker_id } => self
                .elect(Some(*broker_id), now_ms)
                .unwrap_or_else(|| refused(2012)),
            Request::AlterSyncStateSet {
                master_broker_id,
                master_epoch,
                proposal,
            } => {
                if self.master != Some(*master_broker_id) {
                    return refused(codes::CONTROLLER_INVALID_MASTER);
                }
                if *master_epoch != self.master_epoch {
                    return refused(codes::CONTROLLER_FENCED_MASTER_EPOCH);
                }
                if proposal.epoch != self.sync_epoch {
                    return refused(codes::CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH);
                }
                if proposal.members == self.sync
                    || !proposal.members.contains(master_broker_id)
                    || proposal.members.iter().any(|id| !self.alive(*id, now_ms))
                {
                    return refused(2013);
                }
                self.sync = proposal.members.clone();
                self.sync_epoch += 1;
                Reply::SyncStateSetAltered(SyncStateSet {
                    members: self.sync.clone(),
                    epoch: self.sync_epoch,
                })
            }
            Request::GetMetadata | Request::Heartbeat(_) => unreachable!("handled above"),
        }
    }
}

struct Broker {
    addr: String,
    session: Session,
    queue: VecDeque<Action>,
    files: StoredIdentity,
    alive: bool,
    highest_epoch: ControllerEpoch,
}

impl Broker {
    fn boot(index: usize, files: StoredIdentity, base_unix_ms: i64) -> Broker {
        let addr = format!("10.0.1.{index}:10911");
        let mut config = SessionConfig::new(
            "c",
            "b",
            addr.clone(),
            CONTROLLERS.iter().map(|a| a.to_string()).collect(),
            base_unix_ms,
        );
        config.sync_broker_metadata_period = Duration::from_millis(1_000);
        config.check_sync_state_set_period = Duration::from_millis(1_000);
        Broker {
            addr,
            session: Session::new(config, files.clone()).expect("valid"),
            queue: VecDeque::new(),
            files,
            alive: true,
            highest_epoch: 0,
        }
    }
}

#[derive(Clone, Debug)]
enum Event {
    Advance(u64),
    Kill(usize),
    Restart(usize),
    SwitchLeader,
    LoseNextAnswer(usize),
    InSync(usize, usize, Vec<bool>),
    /// The broker's heartbeats are lost for this many ms (it keeps running).
    Partition(usize, u64),
    /// Some past notification reaches the broker.
    Deliver(usize, usize),
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        6 => (50u64..1_500).prop_map(Event::Advance),
        1 => (0..BROKERS).prop_map(Event::Kill),
        1 => (0..BROKERS).prop_map(Event::Restart),
        1 => Just(Event::SwitchLeader),
        1 => (0..BROKERS).prop_map(Event::LoseNextAnswer),
        2 => (0..BROKERS, 0..BROKERS, prop::collection::vec(any::<bool>(), 1..4))
            .prop_map(|(m, s, logs)| Event::InSync(m, s, logs)),
        1 => (0..BROKERS, 1_000u64..8_000).prop_map(|(b, ms)| Event::Partition(b, ms)),
        2 => (0..BROKERS, any::<usize>()).prop_map(|(b, pick)| Event::Deliver(b, pick)),
    ]
}

struct Sim {
    base: Instant,
    now_ms: u64,
    model: Model,
    brokers: Vec<Broker>,
    lose: BTreeSet<usize>,
    /// Broker index to the time its heartbeats get through again.
    partitioned_until: BTreeMap<usize, u64>,
}

impl Sim {
    fn new() -> Sim {
        Sim {
            base: Instant::now(),
            now_ms: 0,
            model: Model::new(),
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

    /// Carries out every queued action of every live broker, answering from the model.
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
            self.model.scan(self.now_ms);
            if !busy {
                return;
            }
        }
    }

    fn carry_out(&mut self, index: usize, action: Action) {
        let now = self.now();
        let broker = &mut self.brokers[index];
        let more = match action {
            Action::Send { id, to, request } => {
                if self.lose.remove(&index) {
                    broker.session.on_failure(now, id)
                } else {
                    let reply = self.model.answer(&to, &request, &broker.addr, self.now_ms);
                    broker
                        .session
                        .on_reply(now, id, reply)
                        .expect("the model answers well-formed replies")
                }
            }
            Action::SendOneway { to, request } => {
                let cut = self
                    .partitioned_until
                    .get(&index)
                    .is_some_and(|until| self.now_ms < *until);
                if !cut {
                    self.model.answer(&to, &request, &broker.addr, self.now_ms);
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
                    self.model.elected.contains(&(*epoch, id)),
                    "broker {index} master at {epoch} without being elected"
                );
                assert!(
                    masters.insert(*epoch, index).is_none(),
                    "two masters under epoch {epoch}"
                );
            }
        }
    }

    fn apply(&mut self, event: Event) {
        match event {
            Event::Advance(ms) => self.now_ms += ms,
            Event::Kill(index) => self.brokers[index].alive = false,
            Event::Restart(index) => {
                if !self.brokers[index].alive {
                    // A restart keeps only the identity files; the epoch is learnt again.
                    let files = self.brokers[index].files.clone();
                    self.brokers[index] = Broker::boot(index, files, 1_000 + self.now_ms as i64);
                }
            }
            Event::SwitchLeader => self.model.leader = 1 - self.model.leader,
            Event::LoseNextAnswer(index) => {
                self.lose.insert(index);
            }
            Event::Partition(index, ms) => {
                self.partitioned_until.insert(index, self.now_ms + ms);
            }
            Event::Deliver(index, pick) => {
                if self.brokers[index].alive && !self.model.notices.is_empty() {
                    let view = self.model.notices[pick % self.model.notices.len()].clone();
                    let now = self.now();
                    let actions = self.brokers[index].session.on_role_notification(now, view);
                    self.brokers[index].queue.extend(actions);
                }
            }
            Event::InSync(master, slave, logs) => {
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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    // Proves the invariants of the module docs under random faults, and convergence after.
    #[test]
    fn sessions_agree_with_the_controller(events in prop::collection::vec(event(), 1..60)) {
        let mut sim = Sim::new();
        sim.settle();
        for event in events {
            sim.apply(event);
        }
        // Heal: everyone back, nothing lost, every slave in sync, time passes.
        for index in 0..BROKERS {
            sim.apply(Event::Restart(index));
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
                        sim.apply(Event::InSync(master, slave, vec![true, true]));
                    }
                }
            }
            sim.apply(Event::Advance(500));
        }
        let epoch = sim.model.master_epoch;
        let master_id = sim.model.master.expect("a master after healing");
        for (index, broker) in sim.brokers.iter().enumerate() {
            let id = broker.session.broker_id().expect("every broker has an id");
            let expected = if id == master_id {
                Role::Master { epoch }
            } else {
                Role::Slave {
                    master_broker_id: master_id,
                    master_addr: sim.model.ids[&master_id].0.clone(),
                    epoch,
                }
            };
            prop_assert_eq!(broker.session.role(), &expected, "broker {}", index);
        }
        let ids: BTreeSet<_> = sim.brokers.iter().filter_map(|b| b.session.broker_id()).collect();
        prop_assert_eq!(ids.len(), BROKERS, "distinct ids");
    }
}
