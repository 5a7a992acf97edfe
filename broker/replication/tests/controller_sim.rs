//! Randomised simulation of three broker sessions against an in-memory model of Apache's
//! controller rules (Java's `ReplicasInfoManager` and `DefaultElectPolicy`, reduced to one
//! broker set), with controller leader switches, lost answers (the request never reaches the
//! model), dying and returning brokers, lost heartbeats, role notifications delivered late,
//! twice or out of order, and changing in-sync flags. The brokers' side, its faults and its
//! invariants are comet-test-support's `controller_sim`: a broker's master epoch never goes
//! down; no two brokers are master under the same epoch; a broker is master under an epoch
//! only if the controller elected it under that epoch. Once the faults stop, all three
//! converge: one master under the controller's epoch, the others its slaves.

use std::collections::{BTreeMap, BTreeSet};

use comet_replication::controller::*;
use comet_test_support::controller_sim::{Controller, LostAnswer, Settings, Sim};
use proptest::prelude::*;

const HEARTBEAT_TIMEOUT_MS: u64 = 3_000;

/// The brokers report Apache's default heartbeat timeout; the model keeps its own.
const SETTINGS: Settings = Settings {
    heartbeat_timeout_ms: HEARTBEAT_TIMEOUT_MS_DEFAULT,
    kill_and_restart_weight: 1,
    lost_answer: LostAnswer::BeforeTheController,
    must_go_quiet: false,
};

/// The controller model: one broker set, ids, liveness from heartbeats, elections.
#[derive(Debug, Default)]
struct Model {
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
}

impl Controller for Model {
    /// The model is one controller state whichever controller leads.
    fn answer(&mut self, _leader: usize, request: &Request, addr: &str, now_ms: u64) -> Reply {
        let refused = |code| Reply::Refused { code, remark: None };
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
            Request::GetMetadata => unreachable!("the harness answers who leads"),
            Request::Heartbeat(_) => unreachable!("heartbeats go one way"),
        }
    }

    /// The model keeps one heartbeat table whichever controller a heartbeat reaches.
    fn heartbeat(&mut self, _to: &str, _broker_addr: &str, heartbeat: &Heartbeat, now_ms: u64) {
        self.last_heartbeat_ms.insert(heartbeat.broker_id, now_ms);
    }

    /// The controller's own scan: a master without heartbeats is replaced.
    fn scan(&mut self, _leader: usize, now_ms: u64) {
        if let Some(master) = self.master {
            if !self.alive(master, now_ms) {
                self.elect(None, now_ms);
            }
        }
    }

    fn elected(&self) -> &BTreeSet<(ControllerEpoch, BrokerControllerId)> {
        &self.elected
    }

    /// Any notice may reach any broker.
    fn notice(&self, pick: usize, _broker_addr: &str) -> Option<MasterView> {
        (!self.notices.is_empty()).then(|| self.notices[pick % self.notices.len()].clone())
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    // Proves the invariants of the module docs under random faults, and convergence after.
    #[test]
    fn sessions_agree_with_the_controller(
        faults in prop::collection::vec(SETTINGS.fault(), 1..60),
    ) {
        let mut sim = Sim::new(Model::new(), SETTINGS);
        sim.run_and_heal(faults);
        let model = &sim.controller;
        let master_id = model.master.expect("a master after healing");
        let master_addr = model.ids[&master_id].0.clone();
        sim.check_converged(master_id, &master_addr, model.master_epoch)?;
    }
}
