use std::collections::BTreeSet;

use comet_proto::code::ResponseCode;
use proptest::prelude::*;

use super::*;

const NAME: &str = "b";
const CLUSTER: &str = "c";

fn addr(id: BrokerId) -> String {
    format!("10.0.0.{id}:10911")
}

fn code(id: BrokerId) -> String {
    format!("{};{id}", addr(id))
}

fn heartbeat(id: BrokerId, epoch: Epoch, max_offset: i64, priority: Option<i32>) -> Heartbeat {
    Heartbeat {
        cluster_name: CLUSTER.to_owned(),
        broker_name: NAME.to_owned(),
        broker_addr: addr(id),
        broker_id: id,
        epoch: Some(epoch),
        max_offset: Some(max_offset),
        confirm_offset: Some(max_offset),
        heartbeat_timeout_ms: Some(3_000),
        election_priority: priority,
    }
}

fn apply_id(id: BrokerId) -> Request {
    Request::ApplyBrokerId {
        cluster_name: CLUSTER.to_owned(),
        broker_name: NAME.to_owned(),
        broker_id: id,
        register_check_code: code(id),
    }
}

fn elect(trigger: ElectTrigger) -> Request {
    Request::ElectMaster {
        broker_name: NAME.to_owned(),
        trigger,
    }
}

fn alter(master: BrokerId, master_epoch: Epoch, members: &[BrokerId], epoch: Epoch) -> Request {
    Request::AlterSyncStateSet {
        broker_name: NAME.to_owned(),
        master_broker_id: master,
        master_epoch,
        proposal: SyncStateSet {
            members: members.iter().copied().collect(),
            epoch,
        },
    }
}

/// Handles and applies, as a single-node log would; panics on a refusal.
fn run(node: &mut ControllerNode, request: &Request, now_ms: u64) -> Response {
    let (events, response) = node
        .handle(request, now_ms)
        .unwrap_or_else(|refusal| panic!("{request:?} refused: {refusal}"));
    for event in &events {
        assert!(node.apply(event), "{event:?} was skipped");
    }
    response
}

fn refused(node: &ControllerNode, request: &Request, now_ms: u64) -> ResponseCode {
    match node.handle(request, now_ms) {
        Ok(answer) => panic!("{request:?} accepted: {answer:?}"),
        Err(refusal) => refusal.code,
    }
}

/// Members 1..=`count` with heartbeats at 0, broker 1 elected (master epoch 1, set {1}).
fn group(count: BrokerId, config: ControllerConfig) -> ControllerNode {
    let mut node = ControllerNode::new(config);
    for id in 1..=count {
        run(&mut node, &apply_id(id), 0);
        node.on_heartbeat(&heartbeat(id, 0, 0, None), 0);
    }
    run(&mut node, &elect(ElectTrigger::Broker(1)), 0);
    node
}

fn set(node: &ControllerNode) -> &BrokerSet {
    node.state()
        .broker_set(NAME)
        .expect("the broker set exists")
}

/// The group with {1, 2, 3} in sync under master 1 (sync-state-set epoch 2).
fn synced_group(config: ControllerConfig) -> ControllerNode {
    let mut node = group(3, config);
    run(&mut node, &alter(1, 1, &[1, 2, 3], 1), 0);
    node
}

#[test]
fn next_broker_id_follows_claims() {
    let mut node = ControllerNode::new(ControllerConfig::default());
    let next = |node: &ControllerNode| match node.handle(
        &Request::GetNextBrokerId {
            cluster_name: CLUSTER.to_owned(),
            broker_name: NAME.to_owned(),
        },
        0,
    ) {
        Ok((events, Response::NextBrokerId { next_broker_id })) if events.is_empty() => {
            next_broker_id
        }
        other => panic!("unexpected {other:?}"),
    };
    assert_eq!(next(&node), FIRST_BROKER_ID);
    run(&mut node, &apply_id(1), 0);
    assert_eq!(next(&node), 2);
    run(&mut node, &apply_id(5), 0);
    assert_eq!(next(&node), 6, "never offers an id below one already held");
}

#[test]
fn apply_broker_id_validation() {
    let other_code = Request::ApplyBrokerId {
        cluster_name: CLUSTER.to_owned(),
        broker_name: NAME.to_owned(),
        broker_id: 1,
        register_check_code: "10.9.9.9:10911;7".to_owned(),
    };
    let no_addr = Request::ApplyBrokerId {
        cluster_name: CLUSTER.to_owned(),
        broker_name: NAME.to_owned(),
        broker_id: 2,
        register_check_code: ";7".to_owned(),
    };
    // (members before, request, expected: Some(code) refused, None accepted)
    let cases: Vec<(BrokerId, Request, Option<ResponseCode>)> = vec![
        (0, apply_id(1), None),
        (
            0,
            apply_id(2),
            Some(ResponseCode::CONTROLLER_BROKER_ID_INVALID),
        ),
        (
            0,
            apply_id(0),
            Some(ResponseCode::CONTROLLER_BROKER_ID_INVALID),
        ),
        (
            0,
            apply_id(-1),
            Some(ResponseCode::CONTROLLER_BROKER_ID_INVALID),
        ),
        (1, apply_id(1), None),
        (1, apply_id(2), None),
        (1, apply_id(9), None),
        (
            1,
            other_code,
            Some(ResponseCode::CONTROLLER_BROKER_ID_INVALID),
        ),
        (1, no_addr, Some(ResponseCode::CONTROLLER_BROKER_ID_INVALID)),
    ];
    for (members, request, expected) in cases {
        let mut node = ControllerNode::new(ControllerConfig::default());
        for id in 1..=members {
            run(&mut node, &apply_id(id), 0);
        }
        match (node.handle(&request, 0), expected) {
            (Ok((_, Response::BrokerIdApplied)), None) => {}
            (Err(refusal), Some(code)) => assert_eq!(refusal.code, code, "{request:?}"),
            (other, _) => panic!("{members} members, {request:?}: {other:?}"),
        }
    }
}

#[test]
fn repeated_claim_changes_nothing() {
    let mut node = ControllerNode::new(ControllerConfig::default());
    run(&mut node, &apply_id(1), 0);
    let (events, response) = node.handle(&apply_id(1), 0).expect("same check code");
    assert!(events.is_empty());
    assert_eq!(response, Response::BrokerIdApplied);
}

#[test]
fn register_broker_validation() {
    let register = |name: &str, id: BrokerId, broker_addr: String| Request::RegisterBroker {
        cluster_name: CLUSTER.to_owned(),
        broker_name: name.to_owned(),
        broker_id: id,
        broker_addr,
    };
    let mut node = group(2, ControllerConfig::default());
    let need = ResponseCode::CONTROLLER_BROKER_NEED_TO_BE_REGISTERED;
    assert_eq!(refused(&node, &register("other", 1, addr(1)), 0), need);
    assert_eq!(refused(&node, &register(NAME, 3, addr(3)), 0), need);
    // The live master is named.
    let (events, response) = node.handle(&register(NAME, 2, addr(2)), 1_000).expect("ok");
    assert!(events.is_empty());
    let Response::Registered { master, .. } = response else {
        panic!("{response:?}");
    };
    assert_eq!(master.map(|m| (m.broker_id, m.master_epoch)), Some((1, 1)));
    // A dead master is not.
    match node.handle(&register(NAME, 2, addr(2)), 10_000) {
        Ok((_, Response::Registered { master: None, .. })) => {}
        other => panic!("{other:?}"),
    }
    // A new address is recorded through an event.
    run(&mut node, &register(NAME, 2, "10.1.1.1:1".to_owned()), 0);
    assert_eq!(set(&node).addr(2), Some("10.1.1.1:1"));
}

#[test]
fn first_election_elects_the_asker() {
    let mut node = ControllerNode::new(ControllerConfig::default());
    run(&mut node, &apply_id(1), 0);
    run(&mut node, &apply_id(2), 0);
    assert_eq!(
        refused(&node, &elect(ElectTrigger::Broker(7)), 0),
        ResponseCode::CONTROLLER_ELECT_MASTER_FAILED,
        "a stranger is never elected"
    );
    let response = run(&mut node, &elect(ElectTrigger::Broker(2)), 0);
    let Response::Elected {
        master,
        sync_state_set,
        ..
    } = response
    else {
        panic!("{response:?}");
    };
    assert_eq!((master.broker_id, master.master_epoch), (2, 1));
    assert_eq!(sync_state_set.members, BTreeSet::from([2]));
    assert_eq!(set(&node).master, Some(2));
    assert_eq!(set(&node).sync_state_set.epoch, 1);
}

#[test]
fn election_outcomes() {
    let unclean = ControllerConfig {
        enable_elect_unclean_master: true,
    };
    // (config, in-sync set, alive at 5 s, trigger, expected winner or refusal)
    type Case = (
        ControllerConfig,
        &'static [BrokerId],
        &'static [BrokerId],
        ElectTrigger,
        Result<Option<BrokerId>, ResponseCode>,
    );
    let clean = ControllerConfig::default();
    let still = Err(ResponseCode::CONTROLLER_MASTER_STILL_EXIST);
    let failed = Err(ResponseCode::CONTROLLER_ELECT_MASTER_FAILED);
    let cases: Vec<Case> = vec![
        (
            clean,
            &[1, 2, 3],
            &[1, 2, 3],
            ElectTrigger::Broker(2),
            still,
        ),
        (
            clean,
            &[1, 2, 3],
            &[2, 3],
            ElectTrigger::Broker(3),
            Ok(Some(2)),
        ),
        (
            clean,
            &[1, 3],
            &[2, 3],
            ElectTrigger::Broker(2),
            Ok(Some(3)),
        ),
        (clean, &[1], &[2, 3], ElectTrigger::Broker(2), failed),
        (clean, &[1], &[2, 3], ElectTrigger::Controller, Ok(None)),
        (unclean, &[1], &[2, 3], ElectTrigger::Broker(3), Ok(Some(2))),
        (
            clean,
            &[1, 2, 3],
            &[1, 2, 3],
            ElectTrigger::Designated(3),
            Ok(Some(3)),
        ),
        (
            clean,
            &[1, 2],
            &[1, 2, 3],
            ElectTrigger::Designated(3),
            failed,
        ),
        (
            unclean,
            &[1, 2],
            &[1, 2, 3],
            ElectTrigger::Designated(3),
            Ok(Some(3)),
        ),
        (clean, &[1, 2], &[1, 3], ElectTrigger::Designated(2), failed),
    ];
    for (config, in_sync, alive, trigger, expected) in cases {
        let mut node = group(3, config);
        if in_sync.len() > 1 {
            run(&mut node, &alter(1, 1, in_sync, 1), 0);
        }
        for id in alive {
            node.on_heartbeat(&heartbeat(*id, 0, 0, None), 5_000);
        }
        let sync_epoch = set(&node).sync_state_set.epoch;
        let outcome = node.handle(&elect(trigger), 5_000);
        let label = format!("in sync {in_sync:?}, alive {alive:?}, {trigger:?}");
        match (outcome, expected) {
            (Ok((events, Response::Elected { master, .. })), Ok(Some(winner))) => {
                assert_eq!(master.broker_id, winner, "{label}");
                assert_eq!(master.master_epoch, 2, "{label}");
                assert!(in_sync.contains(&winner) || config.enable_elect_unclean_master);
                for event in &events {
                    assert!(node.apply(event));
                }
                assert_eq!(set(&node).master, Some(winner));
                assert_eq!(set(&node).sync_state_set.members, BTreeSet::from([winner]));
                assert_eq!(set(&node).sync_state_set.epoch, sync_epoch + 1);
            }
            (Ok((events, Response::MasterGone { master_epoch })), Ok(None)) => {
                assert_eq!(master_epoch, 2, "{label}");
                for event in &events {
                    assert!(node.apply(event));
                }
                assert_eq!(set(&node).master, None);
                assert_eq!(set(&node).master_epoch, 2);
                assert_eq!(set(&node).sync_state_set.epoch, sync_epoch, "{label}");
            }
            (Ok((events, response)), Err(code)) if response.code() == code => {
                assert!(events.is_empty(), "{label}");
            }
            (Err(refusal), Err(code)) => assert_eq!(refusal.code, code, "{label}"),
            (other, expected) => panic!("{label}: {other:?}, expected {expected:?}"),
        }
    }
}

#[test]
fn the_most_advanced_in_sync_member_wins() {
    // (epoch, max offset, priority) of brokers 2 and 3; the winner.
    let cases = [
        ((3, 10, None), (2, 99, None), 2),
        ((2, 10, None), (2, 11, None), 3),
        ((2, 10, Some(5)), (2, 10, Some(1)), 3),
        ((2, 10, None), (2, 10, None), 2),
    ];
    for ((e2, o2, p2), (e3, o3, p3), winner) in cases {
        let mut node = synced_group(ControllerConfig::default());
        node.on_heartbeat(&heartbeat(2, e2, o2, p2), 5_000);
        node.on_heartbeat(&heartbeat(3, e3, o3, p3), 5_000);
        match node.handle(&elect(ElectTrigger::Controller), 5_000) {
            Ok((_, Response::Elected { master, .. })) => assert_eq!(master.broker_id, winner),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn heartbeat_progress_only_moves_forward() {
    let mut table = HeartbeatTable::new();
    table.on_heartbeat(&heartbeat(2, 3, 100, None), 0);
    table.on_heartbeat(&heartbeat(2, 2, 500, Some(4)), 10);
    let live = table.get(CLUSTER, NAME, 2).expect("known");
    assert_eq!(
        (live.epoch, live.max_offset, live.election_priority),
        (3, 100, 4)
    );
    assert_eq!(live.last_heartbeat_ms, 10);
    assert!(live.alive(3_010) && !live.alive(3_011));
    table.forget_expired(3_011);
    assert!(table.get(CLUSTER, NAME, 2).is_none());
}

#[test]
fn master_death_elects_from_the_alive_sync_state_set() {
    let mut node = group(3, ControllerConfig::default());
    run(&mut node, &alter(1, 1, &[1, 3], 1), 0);
    assert!(node.expired(2_000).is_empty(), "the master is alive");
    // Broker 2 is the most advanced but not in sync; 1 (the master) stops.
    node.on_heartbeat(&heartbeat(2, 9, 9_999, Some(0)), 4_000);
    node.on_heartbeat(&heartbeat(3, 1, 10, None), 4_000);
    let expired = node.expired(4_000);
    assert_eq!(expired, vec![elect(ElectTrigger::Controller)]);
    let Response::Elected { master, notify, .. } = run(&mut node, &expired[0], 4_000) else {
        panic!("no election");
    };
    assert_eq!((master.broker_id, master.master_epoch), (3, 2));
    let notified: Vec<_> = notify.keys().copied().collect();
    assert_eq!(
        notified,
        vec![2, 3],
        "the live members are told, the dead master is not"
    );
    assert!(node.expired(4_000).is_empty());
}

#[test]
fn master_death_without_successor_records_it_gone_once() {
    let mut node = group(2, ControllerConfig::default());
    node.on_heartbeat(&heartbeat(2, 0, 0, None), 4_000);
    let expired = node.expired(4_000);
    assert_eq!(expired.len(), 1);
    assert_eq!(
        run(&mut node, &expired[0], 4_000),
        Response::MasterGone { master_epoch: 2 }
    );
    assert_eq!((set(&node).master, set(&node).master_epoch), (None, 2));
    assert!(node.expired(5_000).is_empty(), "not listed again");
    // A member asking gets a refusal, not a master outside the set.
    assert_eq!(
        refused(&node, &elect(ElectTrigger::Broker(2)), 4_000),
        ResponseCode::CONTROLLER_ELECT_MASTER_FAILED
    );
    // The old master returns: as the only in-sync member it is elected again, one epoch up.
    node.on_heartbeat(&heartbeat(1, 1, 0, None), 6_000);
    match run(&mut node, &elect(ElectTrigger::Broker(2)), 6_000) {
        Response::Elected { master, .. } => {
            assert_eq!((master.broker_id, master.master_epoch), (1, 3))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn alter_sync_state_set_validation() {
    use ResponseCode as C;
    // Master 1 under epoch 1; set {1} under epoch 1; broker 3 dead at 5 s.
    let cases: Vec<(Request, Option<ResponseCode>)> = vec![
        (alter(1, 1, &[1, 2], 1), None),
        (
            alter(1, 1, &[1], 1),
            Some(C::CONTROLLER_ALTER_SYNC_STATE_SET_FAILED),
        ),
        (alter(2, 1, &[1, 2], 1), Some(C::CONTROLLER_INVALID_MASTER)),
        (
            alter(1, 0, &[1, 2], 1),
            Some(C::CONTROLLER_FENCED_MASTER_EPOCH),
        ),
        (
            alter(1, 2, &[1, 2], 1),
            Some(C::CONTROLLER_FENCED_MASTER_EPOCH),
        ),
        (
            alter(1, 1, &[1, 2], 0),
            Some(C::CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH),
        ),
        (
            alter(1, 1, &[1, 9], 1),
            Some(C::CONTROLLER_INVALID_REPLICAS),
        ),
        (
            alter(1, 1, &[1, 3], 1),
            Some(C::CONTROLLER_BROKER_NOT_ALIVE),
        ),
        (
            alter(1, 1, &[2], 1),
            Some(C::CONTROLLER_ALTER_SYNC_STATE_SET_FAILED),
        ),
        (
            Request::AlterSyncStateSet {
                broker_name: "other".to_owned(),
                master_broker_id: 1,
                master_epoch: 1,
                proposal: SyncStateSet::default(),
            },
            Some(C::CONTROLLER_ALTER_SYNC_STATE_SET_FAILED),
        ),
    ];
    for (request, expected) in cases {
        let mut node = group(3, ControllerConfig::default());
        node.on_heartbeat(&heartbeat(1, 0, 0, None), 4_000);
        node.on_heartbeat(&heartbeat(2, 0, 0, None), 4_000);
        match (node.handle(&request, 5_000), expected) {
            (Ok((events, Response::SyncStateSetAltered(accepted))), None) => {
                assert_eq!(accepted.epoch, 2);
                for event in &events {
                    assert!(node.apply(event));
                }
                assert_eq!(set(&node).sync_state_set, accepted);
            }
            (Err(refusal), Some(code)) => assert_eq!(refusal.code, code, "{request:?}"),
            (other, _) => panic!("{request:?}: {other:?}"),
        }
    }
}

#[test]
fn a_deposed_master_is_fenced() {
    let mut node = synced_group(ControllerConfig::default());
    node.on_heartbeat(&heartbeat(2, 0, 0, None), 4_000);
    node.on_heartbeat(&heartbeat(3, 0, 0, None), 4_000);
    run(&mut node, &elect(ElectTrigger::Controller), 4_000);
    assert_eq!(set(&node).master, Some(2));
    // The old master comes back and proposes under its old epochs.
    node.on_heartbeat(&heartbeat(1, 1, 0, None), 4_500);
    assert_eq!(
        refused(&node, &alter(1, 1, &[1, 3], 2), 4_500),
        ResponseCode::CONTROLLER_INVALID_MASTER
    );
    // The new master with a set epoch it no longer holds.
    assert_eq!(
        refused(&node, &alter(2, 2, &[2, 3], 2), 4_500),
        ResponseCode::CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH
    );
    assert_eq!(
        refused(&node, &alter(2, 1, &[2, 3], 3), 4_500),
        ResponseCode::CONTROLLER_FENCED_MASTER_EPOCH
    );
    run(&mut node, &alter(2, 2, &[1, 2, 3], 3), 4_500);
}

#[test]
fn events_checked_against_a_replaced_state_are_skipped() {
    let mut node = synced_group(ControllerConfig::default());
    node.on_heartbeat(&heartbeat(2, 0, 0, None), 4_000);
    node.on_heartbeat(&heartbeat(3, 0, 0, None), 4_000);
    // Two elections and a proposal checked before any is applied.
    let (first, _) = node
        .handle(&elect(ElectTrigger::Controller), 4_000)
        .expect("ok");
    let (second, _) = node
        .handle(&elect(ElectTrigger::Broker(3)), 4_000)
        .expect("ok");
    node.on_heartbeat(&heartbeat(1, 0, 0, None), 4_000);
    let (shrink, _) = node.handle(&alter(1, 1, &[1, 2], 2), 4_000).expect("ok");
    assert!(node.apply(&first[0]));
    assert!(
        !node.apply(&second[0]),
        "a second election under the same epoch"
    );
    assert!(!node.apply(&shrink[0]), "the deposed master's proposal");
    assert_eq!((set(&node).master, set(&node).master_epoch), (Some(2), 2));
    assert_eq!(set(&node).sync_state_set.members, BTreeSet::from([2]));
    // A proposal applied first makes an election checked before it stale.
    let mut node = synced_group(ControllerConfig::default());
    node.on_heartbeat(&heartbeat(1, 0, 0, None), 4_000);
    node.on_heartbeat(&heartbeat(2, 0, 0, None), 4_000);
    let (shrink, _) = node.handle(&alter(1, 1, &[1], 2), 4_000).expect("ok");
    let (designated, _) = node
        .handle(&elect(ElectTrigger::Designated(2)), 4_000)
        .expect("ok");
    assert!(node.apply(&shrink[0]));
    assert!(
        !node.apply(&designated[0]),
        "2 left the set before the election applied"
    );
    assert_eq!(set(&node).master, Some(1));
}

#[test]
fn replica_info_and_sync_state_data() {
    let node = synced_group(ControllerConfig::default());
    assert_eq!(
        refused(
            &node,
            &Request::GetReplicaInfo {
                broker_name: "other".to_owned()
            },
            0
        ),
        ResponseCode::CONTROLLER_BROKER_METADATA_NOT_EXIST
    );
    let info = node.handle(
        &Request::GetReplicaInfo {
            broker_name: NAME.to_owned(),
        },
        9_000,
    );
    match info {
        Ok((
            events,
            Response::ReplicaInfo {
                master_broker_id: Some(1),
                master_addr: Some(master_addr),
                master_epoch: 1,
                sync_state_set,
            },
        )) => {
            assert!(events.is_empty());
            assert_eq!(master_addr, addr(1));
            assert_eq!(sync_state_set.members.len(), 3);
        }
        other => panic!("{other:?}"),
    }
    let request = Request::GetSyncStateData {
        broker_names: vec![NAME.to_owned(), "other".to_owned()],
    };
    let Ok((_, Response::SyncStateData(data))) = node.handle(&request, 1_000) else {
        panic!("no data");
    };
    assert_eq!(data.len(), 1);
    let data = &data[NAME];
    assert_eq!(data.in_sync.len(), 3);
    assert!(data.not_in_sync.is_empty());
    assert!(data.in_sync.iter().all(|replica| replica.alive));
}

#[test]
fn clean_broker_data_validation() {
    let clean = |ids: Option<&str>, living: bool| Request::CleanBrokerData {
        cluster_name: CLUSTER.to_owned(),
        broker_name: NAME.to_owned(),
        broker_ids_to_clean: ids.map(str::to_owned),
        clean_living_broker: living,
    };
    let invalid = Some(ResponseCode::CONTROLLER_INVALID_CLEAN_BROKER_METADATA);
    // (request, at ms, expected refusal, members left afterwards: None = set removed)
    let cases: Vec<(Request, u64, Option<ResponseCode>, Option<usize>)> = vec![
        (clean(None, false), 0, invalid, Some(3)),
        (clean(Some("2"), false), 0, invalid, Some(3)),
        (clean(Some("2;x"), false), 9_000, invalid, Some(3)),
        (clean(Some("2;3"), false), 9_000, None, Some(1)),
        (clean(Some("2;3;"), true), 0, None, Some(1)),
        (clean(None, true), 0, None, None),
        (clean(Some("1;2;3"), true), 0, None, None),
    ];
    for (request, now_ms, expected, left) in cases {
        let mut node = synced_group(ControllerConfig::default());
        match (node.handle(&request, now_ms), expected) {
            (Ok((events, Response::BrokerDataCleaned)), None) => {
                for event in &events {
                    assert!(node.apply(event));
                }
                let members = node.state().broker_set(NAME).map(|set| set.members.len());
                assert_eq!(members, left, "{request:?}");
            }
            (Err(refusal), Some(code)) => assert_eq!(refusal.code, code, "{request:?}"),
            (other, _) => panic!("{request:?}: {other:?}"),
        }
    }
    let node = ControllerNode::new(ControllerConfig::default());
    assert_eq!(
        refused(&node, &clean(None, true), 0),
        ResponseCode::CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    );
}

#[test]
fn cleaning_the_master_starts_a_new_epoch() {
    let mut node = synced_group(ControllerConfig::default());
    let request = Request::CleanBrokerData {
        cluster_name: CLUSTER.to_owned(),
        broker_name: NAME.to_owned(),
        broker_ids_to_clean: Some("1".to_owned()),
        clean_living_broker: true,
    };
    run(&mut node, &request, 0);
    let set = set(&node);
    assert_eq!((set.master, set.master_epoch), (None, 2));
    assert_eq!(set.sync_state_set.members, BTreeSet::from([2, 3]));
    assert_eq!(set.sync_state_set.epoch, 3);
}

#[derive(Clone, Debug)]
enum Step {
    Apply(BrokerId),
    Beat(BrokerId, Epoch, i64),
    Elect(ElectTrigger),
    Alter(BrokerId, Epoch, Vec<BrokerId>, Epoch),
    Clean(BrokerId),
    Advance(u64),
}

fn step() -> impl Strategy<Value = Step> {
    let id = 1..5i64;
    prop_oneof![
        id.clone().prop_map(Step::Apply),
        (id.clone(), 0..4, 0..100i64).prop_map(|(i, e, o)| Step::Beat(i, e, o)),
        id.clone()
            .prop_map(|i| Step::Elect(ElectTrigger::Broker(i))),
        id.clone()
            .prop_map(|i| Step::Elect(ElectTrigger::Designated(i))),
        Just(Step::Elect(ElectTrigger::Controller)),
        (
            id.clone(),
            0..4,
            prop::collection::vec(id.clone(), 0..4),
            0..4
        )
            .prop_map(|(m, e, set, s)| Step::Alter(m, e, set, s)),
        id.prop_map(Step::Clean),
        (0..4_000u64).prop_map(Step::Advance),
    ]
}

proptest! {
    // Apply is deterministic: replaying the log on a fresh state, or after a serde round trip
    // of every event and of the state, gives the same state; epochs never go down.
    #[test]
    fn apply_replays_to_the_same_state(
        steps in prop::collection::vec(step(), 1..80),
        unclean in any::<bool>(),
    ) {
        let config = ControllerConfig { enable_elect_unclean_master: unclean };
        let mut node = ControllerNode::new(config);
        let mut log = Vec::new();
        let mut now_ms = 0;
        let mut highest = (0, 0);
        for step in steps {
            let request = match step {
                Step::Apply(id) => apply_id(id),
                Step::Beat(id, epoch, offset) => {
                    node.on_heartbeat(&heartbeat(id, epoch, offset, None), now_ms);
                    continue;
                }
                Step::Elect(trigger) => elect(trigger),
                Step::Alter(master, epoch, members, set_epoch) => {
                    alter(master, epoch, &members, set_epoch)
                }
                Step::Clean(id) => Request::CleanBrokerData {
                    cluster_name: CLUSTER.to_owned(),
                    broker_name: NAME.to_owned(),
                    broker_ids_to_clean: Some(id.to_string()),
                    clean_living_broker: true,
                },
                Step::Advance(ms) => {
                    now_ms += ms;
                    continue;
                }
            };
            if let Ok((events, _)) = node.handle(&request, now_ms) {
                for event in events {
                    node.apply(&event);
                    log.push(event);
                }
            }
            if let Some(set) = node.state().broker_set(NAME) {
                let epochs = (set.master_epoch, set.sync_state_set.epoch);
                prop_assert!(epochs.0 >= highest.0, "master epoch went down");
                if let Some(master) = set.master {
                    prop_assert!(set.sync_state_set.members.contains(&master));
                }
                highest = epochs;
            } else {
                highest = (0, 0);
            }
        }
        let mut replayed = ControllerState::new();
        for event in &log {
            let text = serde_json::to_string(event).expect("events serialise");
            let decoded: Event = serde_json::from_str(&text).expect("events deserialise");
            prop_assert_eq!(&decoded, event);
            replayed.apply(&decoded);
        }
        prop_assert_eq!(&replayed, node.state());
        let text = serde_json::to_string(node.state()).expect("state serialises");
        let decoded: ControllerState = serde_json::from_str(&text).expect("state deserialises");
        prop_assert_eq!(&decoded, node.state());
    }
}

#[test]
fn refusals_carry_javas_remarks() {
    let node = group(3, ControllerConfig::default());
    let remark = |request: &Request| match node.handle(request, 0) {
        Err(refusal) => refusal.remark,
        Ok(answer) => panic!("{request:?} accepted: {answer:?}"),
    };
    let cases = [
        (
            alter(2, 1, &[1, 2], 1),
            "Rejecting alter syncStateSet request because the current leader is:{1}, not {2}",
        ),
        (
            alter(1, 0, &[1, 2], 1),
            "Rejecting alter syncStateSet request because the current master epoch is:{1}, \
             not {0}",
        ),
        (
            alter(1, 1, &[1, 2], 0),
            "Rejecting alter syncStateSet request because the current syncStateSet epoch \
             is:{1}, not {0}",
        ),
        (
            alter(1, 1, &[1, 9], 1),
            "Rejecting alter syncStateSet request because the replicas {9} don't exist",
        ),
        (
            Request::GetReplicaInfo {
                broker_name: "other".to_owned(),
            },
            "Broker metadata is not existed",
        ),
        (
            Request::ElectMaster {
                broker_name: "other".to_owned(),
                trigger: ElectTrigger::Broker(1),
            },
            "Broker hasn't been registered",
        ),
    ];
    for (request, expected) in cases {
        assert_eq!(remark(&request), expected);
    }
    let gone = Response::MasterGone { master_epoch: 2 };
    assert_eq!(gone.code(), ResponseCode::CONTROLLER_MASTER_NOT_AVAILABLE);
    assert_eq!(
        gone.remark(),
        Some("Old master has down and failed to elect a new broker master")
    );
}
