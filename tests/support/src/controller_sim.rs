//! The broker side of a randomised controller-session simulation: three real broker
//! `Session`s (comet-replication's `controller` module) driven against any [`Controller`],
//! under faults: controller leader switches, lost answers, brokers dying and returning with
//! only their identity files, heartbeats lost for a while, role notifications delivered late,
//! twice or out of order, and changing in-sync flags. Time is simulated: nothing sleeps.
//!
//! Invariants, checked after every action a broker carries out: a broker's master epoch
//! never goes down; no two live brokers are master under the same epoch; a live broker is
//! master under an epoch only if the controller elected it under that epoch. After
//! [`Sim::run_and_heal`], [`Sim::check_converged`] proves that every broker follows the
//! master the controller names, under its epoch, with distinct ids.
//!
//! What the controllers answer, and what they check of themselves, stays with each test;
//! what the tests' brokers do differently is a [`Settings`] field.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use comet_replication::controller::{
    codes, Action, BrokerControllerId, ControllerEpoch, Heartbeat, MasterView, Persist, Reply,
    Request, Role, Session, SessionConfig, StoredIdentity,
};
use proptest::prelude::*;

/// The two controllers' addresses; the first leads at the start.
pub const CONTROLLERS: [&str; 2] = ["10.0.0.1:9878", "10.0.0.2:9878"];

/// How many brokers the broker set has.
pub const BROKERS: usize = 3;

/// The brokers' cluster name.
pub const CLUSTER: &str = "c";

/// The brokers' broker name: all three form one broker set.
pub const BROKER_NAME: &str = "b";

/// A controller group as the brokers see it. Which controller leads is the harness's: it
/// answers who leads itself and refuses what reaches a follower, as Apache's controllers do.
pub trait Controller {
    /// What the leader, `CONTROLLERS[leader]`, answers to `request` from the broker at
    /// `broker_addr`. Never called with a heartbeat, which goes one way
    /// ([`Controller::heartbeat`]), nor with a metadata request, which the harness answers.
    fn answer(&mut self, leader: usize, request: &Request, broker_addr: &str, now_ms: u64)
        -> Reply;

    /// A heartbeat from the broker at `broker_addr` reaches controller `to`.
    fn heartbeat(&mut self, to: &str, broker_addr: &str, heartbeat: &Heartbeat, now_ms: u64);

    /// The leader's own scan for masters whose heartbeats stopped.
    fn scan(&mut self, leader: usize, now_ms: u64);

    /// (epoch, master) of every election the controller made.
    fn elected(&self) -> &BTreeSet<(ControllerEpoch, BrokerControllerId)>;

    /// A role notification the controller sent that may reach the broker at `broker_addr`,
    /// chosen by `pick`; none when there is none for it.
    fn notice(&self, pick: usize, broker_addr: &str) -> Option<MasterView>;
}

/// Where a lost answer is lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LostAnswer {
    /// The request never reaches the controller.
    BeforeTheController,
    /// The controller acts on the request, and its answer is lost on the way back.
    AfterTheController,
}

/// What differs between the simulations that use this harness.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    /// `heartbeatTimeoutMills` the brokers configure and report.
    pub heartbeat_timeout_ms: i64,
    /// The weight of [`Fault::Kill`] and of [`Fault::Restart`] among faults; an
    /// [`Fault::Advance`] weighs 6.
    pub kill_and_restart_weight: u32,
    /// What [`Fault::LoseNextAnswer`] loses.
    pub lost_answer: LostAnswer,
    /// Whether sessions still busy after 200 rounds of [`Sim::settle`] fail the test, rather
    /// than being left to the next fault.
    pub must_go_quiet: bool,
}

impl Settings {
    /// Any one fault, at this simulation's weights.
    pub fn fault(&self) -> impl Strategy<Value = Fault> {
        prop_oneof![
            6 => (50u64..1_500).prop_map(Fault::Advance),
            self.kill_and_restart_weight => (0..BROKERS).prop_map(Fault::Kill),
            self.kill_and_restart_weight => (0..BROKERS).prop_map(Fault::Restart),
            1 => Just(Fault::SwitchLeader),
            1 => (0..BROKERS).prop_map(Fault::LoseNextAnswer),
            2 => (0..BROKERS, 0..BROKERS, prop::collection::vec(any::<bool>(), 1..4))
                .prop_map(|(m, s, logs)| Fault::InSync(m, s, logs)),
            1 => (0..BROKERS, 1_000u64..8_000).prop_map(|(b, ms)| Fault::Partition(b, ms)),
            2 => (0..BROKERS, any::<usize>()).prop_map(|(b, pick)| Fault::Deliver(b, pick)),
        ]
    }
}

/// One step of a simulation; brokers are named by their index.
#[derive(Clone, Debug)]
pub enum Fault {
    /// Time passes, this many ms.
    Advance(u64),
    /// The broker dies.
    Kill(usize),
    /// A dead broker boots again from its identity files.
    Restart(usize),
    /// The other controller leads.
    SwitchLeader,
    /// The broker's next request gets no answer ([`Settings::lost_answer`] says where).
    LoseNextAnswer(usize),
    /// The first broker, if master, sets the second's logs' in-sync flags.
    InSync(usize, usize, Vec<bool>),
    /// The broker's heartbeats are lost for this many ms (it keeps running).
    Partition(usize, u64),
    /// Some past notification reaches the broker, if the controller has one for it.
    Deliver(usize, usize),
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
    fn boot(
        index: usize,
        files: StoredIdentity,
        boot_unix_ms: i64,
        heartbeat_timeout_ms: i64,
    ) -> Broker {
        let addr = format!("10.0.1.{index}:10911");
        let mut config = SessionConfig::new(
            CLUSTER,
            BROKER_NAME,
            addr.clone(),
            CONTROLLERS.iter().map(|a| a.to_string()).collect(),
            boot_unix_ms,
        );
        config.heartbeat_timeout_ms = heartbeat_timeout_ms;
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

/// Three brokers and a controller, on simulated time.
pub struct Sim<C> {
    settings: Settings,
    base: Instant,
    now_ms: u64,
    /// The controller the brokers talk to.
    pub controller: C,
    /// Index of the leading controller in [`CONTROLLERS`].
    leader: usize,
    brokers: Vec<Broker>,
    lose: BTreeSet<usize>,
    /// Broker index to the time its heartbeats get through again.
    partitioned_until: BTreeMap<usize, u64>,
}

impl<C: Controller> Sim<C> {
    /// Three freshly booted brokers without identity files, at time 0.
    pub fn new(controller: C, settings: Settings) -> Sim<C> {
        Sim {
            settings,
            base: Instant::now(),
            now_ms: 0,
            controller,
            leader: 0,
            brokers: (0..BROKERS)
                .map(|i| {
                    Broker::boot(
                        i,
                        StoredIdentity::default(),
                        i as i64,
                        settings.heartbeat_timeout_ms,
                    )
                })
                .collect(),
            lose: BTreeSet::new(),
            partitioned_until: BTreeMap::new(),
        }
    }

    fn now(&self) -> Instant {
        self.base + Duration::from_millis(self.now_ms)
    }

    /// Settles, applies every fault, then heals: every broker back, nothing lost, every
    /// slave in sync, and 20 s of time passing.
    pub fn run_and_heal(&mut self, faults: Vec<Fault>) {
        self.settle();
        for fault in faults {
            self.apply(fault);
        }
        for index in 0..BROKERS {
            self.apply(Fault::Restart(index));
        }
        self.lose.clear();
        self.partitioned_until.clear();
        for round in 0..40 {
            let master = self
                .brokers
                .iter()
                .position(|b| matches!(b.session.role(), Role::Master { .. }));
            if let Some(master) = master {
                for slave in 0..BROKERS {
                    if slave != master && round % 5 == 0 {
                        self.apply(Fault::InSync(master, slave, vec![true, true]));
                    }
                }
            }
            self.apply(Fault::Advance(500));
        }
    }

    /// Every broker follows `master_id` at `master_addr` under `epoch` (the master itself
    /// leads under it), and their ids are distinct.
    pub fn check_converged(
        &self,
        master_id: BrokerControllerId,
        master_addr: &str,
        epoch: ControllerEpoch,
    ) -> Result<(), TestCaseError> {
        for (index, broker) in self.brokers.iter().enumerate() {
            let id = broker.session.broker_id().expect("every broker has an id");
            let expected = if id == master_id {
                Role::Master { epoch }
            } else {
                Role::Slave {
                    master_broker_id: master_id,
                    master_addr: master_addr.to_owned(),
                    epoch,
                }
            };
            prop_assert_eq!(broker.session.role(), &expected, "broker {}", index);
        }
        let ids: BTreeSet<_> = self
            .brokers
            .iter()
            .filter_map(|b| b.session.broker_id())
            .collect();
        prop_assert_eq!(ids.len(), BROKERS, "distinct ids");
        Ok(())
    }

    /// Carries out every queued action of every live broker, then lets the controller scan,
    /// until nothing is left to do.
    pub fn settle(&mut self) {
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
            self.controller.scan(self.leader, self.now_ms);
            if !busy {
                return;
            }
        }
        assert!(
            !self.settings.must_go_quiet,
            "the sessions never went quiet"
        );
    }

    fn carry_out(&mut self, index: usize, action: Action) {
        let now = self.now();
        let now_ms = self.now_ms;
        let broker = &mut self.brokers[index];
        let more = match action {
            Action::Send { id, to, request } => {
                let lost = self.lose.remove(&index);
                let reaches = !lost || self.settings.lost_answer == LostAnswer::AfterTheController;
                let reply = reaches.then(|| match request {
                    Request::GetMetadata => Reply::Metadata {
                        leader_addr: Some(CONTROLLERS[self.leader].to_owned()),
                    },
                    _ if to != CONTROLLERS[self.leader] => Reply::Refused {
                        code: codes::CONTROLLER_NOT_LEADER,
                        remark: None,
                    },
                    _ => self
                        .controller
                        .answer(self.leader, &request, &broker.addr, now_ms),
                });
                match reply {
                    Some(reply) if !lost => broker
                        .session
                        .on_reply(now, id, reply)
                        .expect("the controller answers well-formed replies"),
                    _ => broker.session.on_failure(now, id),
                }
            }
            Action::SendOneway { to, request } => {
                let cut = self
                    .partitioned_until
                    .get(&index)
                    .is_some_and(|until| now_ms < *until);
                if let (false, Request::Heartbeat(beat)) = (cut, &request) {
                    self.controller.heartbeat(&to, &broker.addr, beat, now_ms);
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
                    self.controller.elected().contains(&(*epoch, id)),
                    "broker {index} master at {epoch} without being elected"
                );
                assert!(
                    masters.insert(*epoch, index).is_none(),
                    "two masters under epoch {epoch}"
                );
            }
        }
    }

    /// Applies one fault, then settles.
    pub fn apply(&mut self, fault: Fault) {
        match fault {
            Fault::Advance(ms) => self.now_ms += ms,
            Fault::Kill(index) => self.brokers[index].alive = false,
            Fault::Restart(index) => {
                if !self.brokers[index].alive {
                    // A restart keeps only the identity files; the epoch is learnt again.
                    let files = self.brokers[index].files.clone();
                    self.brokers[index] = Broker::boot(
                        index,
                        files,
                        1_000 + self.now_ms as i64,
                        self.settings.heartbeat_timeout_ms,
                    );
                }
            }
            Fault::SwitchLeader => self.leader = 1 - self.leader,
            Fault::LoseNextAnswer(index) => {
                self.lose.insert(index);
            }
            Fault::Partition(index, ms) => {
                self.partitioned_until.insert(index, self.now_ms + ms);
            }
            Fault::Deliver(index, pick) => {
                let broker = &self.brokers[index];
                let view = broker
                    .alive
                    .then(|| self.controller.notice(pick, &broker.addr))
                    .flatten();
                if let Some(view) = view {
                    let now = self.now();
                    let actions = self.brokers[index].session.on_role_notification(now, view);
                    self.brokers[index].queue.extend(actions);
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
