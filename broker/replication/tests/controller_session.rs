//! Scenario tests of the broker's controller session (`comet_replication::controller`):
//! every answer is fed by hand, time is an offset from one base instant.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use comet_replication::controller::*;

const CONTROLLER_A: &str = "127.0.0.1:9878";
const CONTROLLER_B: &str = "127.0.0.1:9879";
const BROKER_ADDR: &str = "127.0.0.1:30911";
const MASTER_ADDR: &str = "127.0.0.1:30921";

struct Clock {
    base: Instant,
}

impl Clock {
    fn new() -> Clock {
        Clock {
            base: Instant::now(),
        }
    }
    fn at(&self, ms: u64) -> Instant {
        self.base + Duration::from_millis(ms)
    }
}

fn config(controllers: &[&str]) -> SessionConfig {
    SessionConfig::new(
        "DefaultCluster",
        "broker-a",
        BROKER_ADDR,
        controllers.iter().map(|addr| addr.to_string()).collect(),
        1_795_960_828_956,
    )
}

fn identity(broker_id: BrokerControllerId) -> ConfirmedIdentity {
    ConfirmedIdentity {
        cluster_name: "DefaultCluster".into(),
        broker_name: "broker-a".into(),
        broker_id,
    }
}

fn confirmed(broker_id: BrokerControllerId) -> StoredIdentity {
    StoredIdentity {
        confirmed: Some(identity(broker_id)),
        temp: None,
    }
}

fn temp_identity(broker_id: BrokerControllerId, register_check_code: String) -> TempIdentity {
    TempIdentity {
        cluster_name: "DefaultCluster".into(),
        broker_name: "broker-a".into(),
        broker_id,
        register_check_code,
    }
}

fn set(members: &[BrokerControllerId], epoch: ControllerEpoch) -> SyncStateSet {
    SyncStateSet {
        members: members.iter().copied().collect::<BTreeSet<_>>(),
        epoch,
    }
}

fn view(master: Option<(BrokerControllerId, &str)>, epoch: i32, sync: SyncStateSet) -> MasterView {
    MasterView {
        master_broker_id: master.map(|(id, _)| id),
        master_addr: master.map(|(_, addr)| addr.to_owned()),
        master_epoch: Some(epoch),
        sync_state_set: sync,
    }
}

/// The one control request among `actions`.
fn sent(actions: &[Action]) -> (RequestId, String, Request) {
    let sends: Vec<_> = actions
        .iter()
        .filter_map(|action| match action {
            Action::Send { id, to, request } => Some((*id, to.clone(), request.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(sends.len(), 1, "exactly one control request in {actions:?}");
    sends.into_iter().next().unwrap()
}

fn no_send(actions: &[Action]) {
    assert!(
        !actions.iter().any(|a| matches!(a, Action::Send { .. })),
        "no control request expected in {actions:?}"
    );
}

fn heartbeats(actions: &[Action]) -> Vec<(String, Heartbeat)> {
    actions
        .iter()
        .filter_map(|action| match action {
            Action::SendOneway {
                to,
                request: Request::Heartbeat(heartbeat),
            } => Some((to.clone(), *heartbeat)),
            _ => None,
        })
        .collect()
}

fn reply(session: &mut Session, now: Instant, id: RequestId, reply: Reply) -> Vec<Action> {
    session.on_reply(now, id, reply).expect("reply accepted")
}

/// Answers the metadata lookup `id`: the leader is `leader`.
fn leader_is(session: &mut Session, now: Instant, id: RequestId, leader: &str) -> Vec<Action> {
    let metadata = Reply::Metadata {
        leader_addr: Some(leader.into()),
    };
    reply(session, now, id, metadata)
}

/// A refusal with `code` and no remark.
fn refused(code: i32) -> Reply {
    Reply::Refused { code, remark: None }
}

/// When a running session's first replica poll is due (registration answered at 2 ms).
const REPLICA_POLL_AT_MS: u64 = SYNC_BROKER_METADATA_PERIOD_MS_DEFAULT + 2;

/// Drives a session with a confirmed id through leader lookup and registration to a role.
fn running(
    clock: &Clock,
    broker_id: BrokerControllerId,
    master: (i64, &str),
    epoch: i32,
) -> Session {
    let mut session = Session::new(config(&[CONTROLLER_A, CONTROLLER_B]), confirmed(broker_id))
        .expect("valid config");
    let (id, _, _) = sent(&session.poll(clock.at(0)));
    let actions = leader_is(&mut session, clock.at(1), id, CONTROLLER_A);
    let (id, _, request) = sent(&actions);
    assert_eq!(request, Request::RegisterBroker { broker_id });
    reply(
        &mut session,
        clock.at(2),
        id,
        Reply::Registered(view(Some(master), epoch, set(&[master.0], epoch))),
    );
    session
}

// Proves a first start claims an id the way Java's ReplicasManager does (next id, temp file,
// apply, confirmed file, register), heartbeats before it asks for the first election, and
// becomes master under epoch 1 when the controller elects it.
#[test]
fn first_start_claims_an_id_and_is_elected_master() {
    let clock = Clock::new();
    let mut session =
        Session::new(config(&[CONTROLLER_A]), StoredIdentity::default()).expect("valid config");
    assert_eq!(session.role(), &Role::Undecided);

    let (id, to, request) = sent(&session.poll(clock.at(0)));
    assert_eq!((to.as_str(), request), (CONTROLLER_A, Request::GetMetadata));
    let actions = leader_is(&mut session, clock.at(1), id, CONTROLLER_A);
    let (id, _, request) = sent(&actions);
    assert_eq!(request, Request::GetNextBrokerId);

    let actions = reply(
        &mut session,
        clock.at(2),
        id,
        Reply::NextBrokerId {
            next_broker_id: Some(1),
        },
    );
    let temp = temp_identity(1, format!("{BROKER_ADDR};1795960828956"));
    assert_eq!(
        actions,
        vec![Action::Persist(Persist::WriteTemp(temp.clone()))]
    );
    // Nothing goes out while the file is being written.
    assert!(session.poll(clock.at(3)).is_empty());

    let (id, _, request) = sent(&session.on_persisted(clock.at(4)));
    assert_eq!(
        request,
        Request::ApplyBrokerId {
            broker_id: 1,
            register_check_code: temp.register_check_code.clone(),
        }
    );
    let actions = reply(&mut session, clock.at(5), id, Reply::BrokerIdApplied);
    assert_eq!(
        actions,
        vec![Action::Persist(Persist::WriteConfirmed(identity(1)))]
    );
    assert_eq!(
        session.broker_id(),
        None,
        "not confirmed before the file is written"
    );

    let (id, _, request) = sent(&session.on_persisted(clock.at(6)));
    assert_eq!(request, Request::RegisterBroker { broker_id: 1 });
    assert_eq!(session.broker_id(), Some(1));

    let actions = reply(
        &mut session,
        clock.at(7),
        id,
        Reply::Registered(view(None, 0, set(&[], 0))),
    );
    let beats = heartbeats(&actions);
    assert_eq!(beats.len(), 1);
    assert_eq!(beats[0].1.broker_id, 1);
    assert_eq!(beats[0].1.timeout_ms, HEARTBEAT_TIMEOUT_MS_DEFAULT);
    let heartbeat_index = actions
        .iter()
        .position(|a| matches!(a, Action::SendOneway { .. }))
        .unwrap();
    let elect_index = actions
        .iter()
        .position(|a| matches!(a, Action::Send { .. }))
        .unwrap();
    assert!(
        heartbeat_index < elect_index,
        "heartbeat before the election"
    );
    let (id, _, request) = sent(&actions);
    assert_eq!(request, Request::ElectMaster { broker_id: 1 });

    let actions = reply(
        &mut session,
        clock.at(8),
        id,
        Reply::Elected(view(Some((1, BROKER_ADDR)), 1, set(&[1], 1))),
    );
    assert!(actions.contains(&Action::BecomeMaster {
        epoch: 1,
        sync_state_set: set(&[1], 1),
    }));
    assert_eq!(session.role(), &Role::Master { epoch: 1 });
    assert_eq!(session.master_epoch(), 1);
}

// Proves a restart with a confirmed id goes straight to registration, follows the live
// master the answer names, and heartbeats to every controller each interval.
#[test]
fn restart_with_persisted_id_registers_and_follows_the_master() {
    let clock = Clock::new();
    let mut session = running(&clock, 2, (1, MASTER_ADDR), 3);
    assert_eq!(
        session.role(),
        &Role::Slave {
            master_broker_id: 1,
            master_addr: MASTER_ADDR.into(),
            epoch: 3,
        }
    );
    session.set_log_progress(LogProgress {
        epoch: 3,
        max_offset: 4096,
        confirm_offset: 4000,
    });
    let beats = heartbeats(&session.poll(clock.at(2_000)));
    let targets: Vec<_> = beats.iter().map(|(to, _)| to.as_str()).collect();
    assert_eq!(targets, vec![CONTROLLER_A, CONTROLLER_B]);
    assert_eq!(beats[0].1.max_offset, 4096);
    assert_eq!(beats[0].1.epoch, 3);
    // Not again before the interval.
    assert!(heartbeats(&session.poll(clock.at(2_500))).is_empty());
    assert_eq!(heartbeats(&session.poll(clock.at(3_000))).len(), 2);
}

// Proves a temp file left by a crash resumes at the apply step with the same id and check
// code, and that an id someone else holds drops the temp file and claims afresh.
#[test]
fn temp_file_resumes_the_claim_and_a_taken_id_starts_over() {
    let clock = Clock::new();
    let temp = temp_identity(2, format!("{BROKER_ADDR};1"));
    let stored = StoredIdentity {
        confirmed: None,
        temp: Some(temp.clone()),
    };
    let mut session = Session::new(config(&[CONTROLLER_A]), stored).expect("valid config");
    let (id, _, _) = sent(&session.poll(clock.at(0)));
    let actions = leader_is(&mut session, clock.at(1), id, CONTROLLER_A);
    let (id, _, request) = sent(&actions);
    assert_eq!(
        request,
        Request::ApplyBrokerId {
            broker_id: 2,
            register_check_code: temp.register_check_code.clone(),
        }
    );
    // The answer is lost: after a pause the leader is looked up again and the same claim
    // is repeated.
    let lost = id;
    no_send(&session.on_failure(clock.at(2), lost));
    no_send(&session.poll(clock.at(3)));
    let (id, _, request) = sent(&session.poll(clock.at(2 + RETRY_INTERVAL_MS_DEFAULT)));
    assert_eq!(request, Request::GetMetadata);
    assert!(
        session.on_failure(clock.at(1_003), lost).is_empty(),
        "stale id ignored"
    );
    let actions = leader_is(&mut session, clock.at(1_100), id, CONTROLLER_A);
    let (id, _, request) = sent(&actions);
    assert!(matches!(
        request,
        Request::ApplyBrokerId { broker_id: 2, .. }
    ));

    let actions = reply(
        &mut session,
        clock.at(1_200),
        id,
        refused(codes::CONTROLLER_BROKER_ID_INVALID),
    );
    assert_eq!(actions, vec![Action::Persist(Persist::DeleteTemp)]);
    let (_, _, request) = sent(&session.on_persisted(clock.at(1_300)));
    assert_eq!(request, Request::GetNextBrokerId);
}

// Proves identity files of another broker set are refused, and an empty controllerAddr too.
#[test]
fn files_of_another_broker_and_missing_controllers_are_refused() {
    let stored = StoredIdentity {
        confirmed: Some(ConfirmedIdentity {
            cluster_name: "DefaultCluster".into(),
            broker_name: "broker-b".into(),
            broker_id: 1,
        }),
        temp: None,
    };
    assert!(matches!(
        Session::new(config(&[CONTROLLER_A]), stored),
        Err(SessionError::Identity(IdentityError::Mismatch { .. }))
    ));
    assert!(matches!(
        Session::new(config(&[]), StoredIdentity::default()),
        Err(SessionError::NoControllerAddress)
    ));
    assert_eq!(
        parse_controller_addrs(" 127.0.0.1:9878;;127.0.0.1:9879 "),
        vec![CONTROLLER_A.to_owned(), CONTROLLER_B.to_owned()]
    );
    let mut session =
        Session::new(config(&[CONTROLLER_A]), StoredIdentity::default()).expect("valid config");
    assert_eq!(
        session.set_controller_addrs(Vec::new()),
        Err(SessionError::NoControllerAddress)
    );
    // A new DNS answer: the next lookup asks its first address.
    session
        .set_controller_addrs(vec![CONTROLLER_B.to_owned()])
        .expect("one address");
    let (_, to, request) = sent(&session.poll(Instant::now()));
    assert_eq!((to.as_str(), request), (CONTROLLER_B, Request::GetMetadata));
}

// Proves a slave whose replica poll shows a newer epoch without a master asks for an election
// at once, and becomes master when it wins.
#[test]
fn master_lost_then_the_slave_asks_for_an_election_and_wins() {
    let clock = Clock::new();
    let mut session = running(&clock, 2, (1, MASTER_ADDR), 1);
    let poll_at = REPLICA_POLL_AT_MS;
    assert!(session
        .next_wakeup()
        .is_some_and(|at| at <= clock.at(poll_at)));
    let (id, to, request) = sent(&session.poll(clock.at(poll_at)));
    assert_eq!(
        (to.as_str(), request),
        (CONTROLLER_A, Request::GetReplicaInfo)
    );
    // The controller already ran an election that found nobody: epoch 2, no master.
    let actions = reply(
        &mut session,
        clock.at(poll_at + 1),
        id,
        Reply::ReplicaInfo(view(None, 2, set(&[1, 2], 2))),
    );
    let (id, _, request) = sent(&actions);
    assert_eq!(request, Request::ElectMaster { broker_id: 2 });
    let actions = reply(
        &mut session,
        clock.at(poll_at + 2),
        id,
        Reply::Elected(view(Some((2, BROKER_ADDR)), 3, set(&[2], 3))),
    );
    assert!(actions.contains(&Action::BecomeMaster {
        epoch: 3,
        sync_state_set: set(&[2], 3),
    }));
    assert_eq!(session.role(), &Role::Master { epoch: 3 });
}

// Proves a notification whose epoch is not above the held one changes nothing, and a newer
// one changes the role at once.
#[test]
fn stale_epoch_notification_is_ignored() {
    let clock = Clock::new();
    let mut session = running(&clock, 1, (1, BROKER_ADDR), 3);
    assert_eq!(session.role(), &Role::Master { epoch: 3 });
    let stale = view(Some((2, MASTER_ADDR)), 2, set(&[2], 2));
    assert!(session.on_role_notification(clock.at(10), stale).is_empty());
    let repeated = view(Some((2, MASTER_ADDR)), 3, set(&[2], 3));
    assert!(session
        .on_role_notification(clock.at(11), repeated)
        .is_empty());
    assert_eq!(session.role(), &Role::Master { epoch: 3 });

    let newer = view(Some((2, MASTER_ADDR)), 4, set(&[2], 4));
    let actions = session.on_role_notification(clock.at(12), newer);
    assert_eq!(
        actions,
        vec![Action::BecomeSlave {
            master_broker_id: 2,
            master_addr: MASTER_ADDR.into(),
            epoch: 4,
        }]
    );
    assert_eq!(
        session.ack_requirement(&AckPolicy::default()),
        AckRequirement::NotMaster
    );
}

// Proves a CONTROLLER_NOT_LEADER answer sends the session to the next controller for the
// leader's address and the request is repeated there; a time-out does the same.
#[test]
fn controller_leader_switch_redirects_requests() {
    let clock = Clock::new();
    let mut session = running(&clock, 2, (1, MASTER_ADDR), 1);
    let poll_at = REPLICA_POLL_AT_MS;
    let (id, to, _) = sent(&session.poll(clock.at(poll_at)));
    assert_eq!(to, CONTROLLER_A);
    let actions = reply(
        &mut session,
        clock.at(poll_at + 1),
        id,
        Reply::Refused {
            code: codes::CONTROLLER_NOT_LEADER,
            remark: Some("The controller is not in leader state".into()),
        },
    );
    let (id, to, request) = sent(&actions);
    assert_eq!((to.as_str(), request), (CONTROLLER_B, Request::GetMetadata));
    let actions = leader_is(&mut session, clock.at(poll_at + 2), id, CONTROLLER_B);
    assert_eq!(session.leader(), Some(CONTROLLER_B));
    // The refused replica poll is repeated at once, at the new leader.
    let (id, to, request) = sent(&actions);
    assert_eq!(
        (to.as_str(), request),
        (CONTROLLER_B, Request::GetReplicaInfo)
    );
    let next = poll_at + 2;

    // The new leader dies: the request times out and the lookup starts over at A.
    let deadline = next + REQUEST_TIMEOUT_MS_DEFAULT;
    let (_, to, request) = sent(&session.poll(clock.at(deadline)));
    assert_eq!((to.as_str(), request), (CONTROLLER_A, Request::GetMetadata));
    assert!(session.on_failure(clock.at(deadline), id).is_empty());
}

// Proves a master proposes a slave only once every one of its logs is in sync, counts a
// shrink only once the controller accepted it, and polls at once when a proposal is fenced.
#[test]
fn sync_state_set_follows_per_log_flags() {
    let clock = Clock::new();
    let mut session = running(&clock, 1, (1, BROKER_ADDR), 1);
    let policy = AckPolicy {
        in_sync_replicas: 1,
        min_in_sync_replicas: 1,
        all_ack_in_sync_state_set: true,
    };
    assert_eq!(
        session.ack_requirement(&policy),
        AckRequirement::AllOf(BTreeSet::from([1]))
    );
    no_send(&session.set_replica_logs_in_sync(clock.at(10), 2, &[true, false]));
    let (id, _, request) = sent(&session.set_replica_logs_in_sync(clock.at(11), 2, &[true, true]));
    assert_eq!(
        request,
        Request::AlterSyncStateSet {
            master_broker_id: 1,
            master_epoch: 1,
            proposal: set(&[1, 2], 1),
        }
    );
    let actions = reply(
        &mut session,
        clock.at(12),
        id,
        Reply::SyncStateSetAltered(set(&[1, 2], 2)),
    );
    assert!(actions.contains(&Action::SyncStateSetChanged(set(&[1, 2], 2))));

    // One log falls behind: the shrink is proposed, but until it is accepted writes still
    // wait for the slave.
    let (id, _, request) = sent(&session.set_replica_logs_in_sync(clock.at(20), 2, &[true, false]));
    assert!(matches!(
        request,
        Request::AlterSyncStateSet { ref proposal, .. } if *proposal == set(&[1], 2)
    ));
    assert_eq!(
        session.ack_requirement(&policy),
        AckRequirement::AllOf(BTreeSet::from([1, 2]))
    );
    let strict = AckPolicy {
        min_in_sync_replicas: 2,
        ..policy
    };
    let actions = reply(
        &mut session,
        clock.at(21),
        id,
        refused(codes::CONTROLLER_FENCED_MASTER_EPOCH),
    );
    let (id, _, request) = sent(&actions);
    assert_eq!(request, Request::GetReplicaInfo);
    reply(
        &mut session,
        clock.at(22),
        id,
        Reply::ReplicaInfo(view(Some((1, BROKER_ADDR)), 1, set(&[1], 3))),
    );
    assert_eq!(session.sync_state_set(), &set(&[1], 3));
    assert_eq!(
        session.ack_requirement(&strict),
        AckRequirement::TooFewInSync { in_sync: 1, min: 2 }
    );
    assert_eq!(
        session.ack_requirement(&AckPolicy::default()),
        AckRequirement::Copies(1)
    );
}

// Proves an answer of the wrong kind is reported and the step is repeated, and unknown
// replica metadata makes a running broker register again.
#[test]
fn wrong_answers_are_errors_and_lost_metadata_re_registers() {
    let clock = Clock::new();
    let mut session = running(&clock, 2, (1, MASTER_ADDR), 1);
    let poll_at = REPLICA_POLL_AT_MS;
    let (id, _, _) = sent(&session.poll(clock.at(poll_at)));
    assert_eq!(
        session.on_reply(clock.at(poll_at), id, Reply::BrokerIdApplied),
        Err(SessionError::UnexpectedReply {
            request: "CONTROLLER_GET_REPLICA_INFO",
            reply: "BrokerIdApplied",
        })
    );
    // Treated like a failure: the leader is looked up again, at B.
    let (id, to, request) = sent(&session.poll(clock.at(poll_at + 1)));
    assert_eq!((to.as_str(), request), (CONTROLLER_B, Request::GetMetadata));
    let actions = leader_is(&mut session, clock.at(poll_at + 2), id, CONTROLLER_A);
    // The failed poll is repeated at once.
    let (id, _, request) = sent(&actions);
    assert_eq!(request, Request::GetReplicaInfo);
    let next = poll_at + 2;
    let actions = reply(
        &mut session,
        clock.at(next + 1),
        id,
        refused(codes::CONTROLLER_BROKER_METADATA_NOT_EXIST),
    );
    let (id, _, request) = sent(&actions);
    assert_eq!(request, Request::RegisterBroker { broker_id: 2 });
    // A controller that forgot the id refuses the registration: repeated, but paced.
    let refused_at = next + 2;
    let actions = reply(&mut session, clock.at(refused_at), id, refused(2010));
    no_send(&actions);
    no_send(&session.poll(clock.at(refused_at + RETRY_INTERVAL_MS_DEFAULT - 1)));
    let (_, _, request) = sent(&session.poll(clock.at(refused_at + RETRY_INTERVAL_MS_DEFAULT)));
    assert_eq!(request, Request::RegisterBroker { broker_id: 2 });
}

// Proves the response codes this crate repeats are the codec's.
#[test]
fn codes_match_the_codec() {
    use comet_proto::ResponseCode;
    let pairs = [
        (
            codes::CONTROLLER_FENCED_MASTER_EPOCH,
            ResponseCode::CONTROLLER_FENCED_MASTER_EPOCH,
        ),
        (
            codes::CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
            ResponseCode::CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
        ),
        (
            codes::CONTROLLER_INVALID_MASTER,
            ResponseCode::CONTROLLER_INVALID_MASTER,
        ),
        (
            codes::CONTROLLER_NOT_LEADER,
            ResponseCode::CONTROLLER_NOT_LEADER,
        ),
        (
            codes::CONTROLLER_BROKER_METADATA_NOT_EXIST,
            ResponseCode::CONTROLLER_BROKER_METADATA_NOT_EXIST,
        ),
        (
            codes::CONTROLLER_MASTER_STILL_EXIST,
            ResponseCode::CONTROLLER_MASTER_STILL_EXIST,
        ),
        (
            codes::CONTROLLER_BROKER_ID_INVALID,
            ResponseCode::CONTROLLER_BROKER_ID_INVALID,
        ),
    ];
    for (ours, codec) in pairs {
        assert_eq!(ours, codec.value(), "{codec:?}");
    }
}
