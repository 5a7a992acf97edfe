//! Controller-mode headers and bodies: ext-field round trips with Java's keys, missing keys
//! named, the fastjson shape of the sync-state set, and whole frames laid out as Java's
//! controller writes them (JSON header keyed by Java's field names, JSON body).

mod common;

use std::collections::{BTreeMap, BTreeSet};

use comet_proto::body::*;
use comet_proto::bytes::{BufMut, BytesMut};
use comet_proto::headers::*;
use comet_proto::{Decoded, FrameDecoder, RemotingCommand, RequestCode, ResponseCode};
use common::{check_header, ext, round_trip};

// Proves every identity and registration header round-trips with Java's keys and names each
// missing required key.
#[test]
fn identity_headers_round_trip() {
    check_header(&GetNextBrokerIdRequestHeader {
        cluster_name: "DefaultCluster".into(),
        broker_name: "broker-a".into(),
    });
    check_header(&GetNextBrokerIdResponseHeader {
        cluster_name: Some("DefaultCluster".into()),
        broker_name: Some("broker-a".into()),
        next_broker_id: Some(2),
    });
    check_header(&ApplyBrokerIdRequestHeader {
        cluster_name: "c".into(),
        broker_name: "b".into(),
        applied_broker_id: 2,
        register_check_code: "127.0.0.1:30911;1795960828956".into(),
    });
    check_header(&ApplyBrokerIdResponseHeader {
        cluster_name: Some("c".into()),
        broker_name: Some("b".into()),
    });
    check_header(&RegisterBrokerToControllerRequestHeader {
        cluster_name: "c".into(),
        broker_name: "b".into(),
        broker_id: 1,
        broker_address: "127.0.0.1:30911".into(),
        invoke_time: Some(1_795_960_828_956),
    });
    check_header(&RegisterBrokerToControllerResponseHeader {
        cluster_name: Some("c".into()),
        broker_name: Some("b".into()),
        master_broker_id: Some(1),
        master_address: Some("127.0.0.1:30911".into()),
        master_epoch: Some(3),
        sync_state_set_epoch: Some(4),
    });
}

// Proves the replica-info, election, sync-state-set, metadata and notification headers
// round-trip with Java's keys and name each missing required key.
#[test]
fn election_headers_round_trip() {
    check_header(&GetReplicaInfoRequestHeader {
        broker_name: "b".into(),
    });
    check_header(&GetReplicaInfoResponseHeader {
        master_broker_id: Some(2),
        master_address: Some("a:1".into()),
        master_epoch: Some(2),
    });
    check_header(&ElectMasterRequestHeader {
        cluster_name: "c".into(),
        broker_name: "b".into(),
        broker_id: 1,
        designate_elect: false,
        invoke_time: Some(5),
    });
    check_header(&ElectMasterResponseHeader {
        master_broker_id: Some(1),
        master_address: Some("a:1".into()),
        master_epoch: Some(1),
        sync_state_set_epoch: Some(1),
    });
    check_header(&AlterSyncStateSetRequestHeader {
        broker_name: "b".into(),
        master_broker_id: 1,
        master_epoch: 1,
        invoke_time: Some(5),
    });
    check_header(&AlterSyncStateSetResponseHeader {
        new_sync_state_set_epoch: 2,
    });
    check_header(&GetMetaDataResponseHeader {
        group: Some("group1".into()),
        controller_leader_id: Some("n0".into()),
        controller_leader_address: Some("127.0.0.1:9878".into()),
        is_leader: true,
        peers: Some("n0:127.0.0.1:9878;".into()),
    });
    check_header(&NotifyBrokerRoleChangedRequestHeader {
        master_address: Some("a:2".into()),
        master_epoch: Some(2),
        sync_state_set_epoch: Some(2),
        master_broker_id: Some(2),
    });
}

// Proves a controller-triggered election header (no invokeTime, brokerId -1) decodes from
// the keys Java writes, booleans by Java's rules.
#[test]
fn elect_master_header_from_java_keys() {
    let fields = ext(&[
        ("clusterName", ""),
        ("brokerName", "broker-a"),
        ("brokerId", "-1"),
        ("designateElect", "false"),
    ]);
    let header: ElectMasterRequestHeader = comet_proto::CommandHeader::from_ext_fields(&fields)
        .expect("Java's controller-trigger header decodes");
    assert_eq!(header.broker_id, -1);
    assert!(!header.designate_elect);
    assert_eq!(header.invoke_time, None);
}

// Proves the sync-state set is written in fastjson's shape (sorted keys, a JSON array of
// longs) and read back, also when Java writes a null set.
#[test]
fn sync_state_set_fastjson_shape() {
    let set = SyncStateSet {
        sync_state_set: BTreeSet::from([1, 2]),
        sync_state_set_epoch: 3,
    };
    assert_eq!(
        round_trip(&set),
        r#"{"syncStateSet":[1,2],"syncStateSetEpoch":3}"#
    );
    let empty = SyncStateSet::decode(br#"{"syncStateSet":null,"syncStateSetEpoch":0}"#)
        .expect("a null set reads as empty");
    assert!(empty.sync_state_set.is_empty());
    let body = ElectMasterResponseBody {
        broker_member_group: Some(BrokerMemberGroup {
            broker_addrs: BTreeMap::from([(1, "127.0.0.1:30911".into())]),
            broker_name: "broker-a".into(),
            cluster: "DefaultCluster".into(),
        }),
        sync_state_set: BTreeSet::from([1]),
    };
    round_trip(&body);
}

/// One frame as a Java peer lays it out: total length, header word (type 0 = JSON in the
/// top byte, header length below), the JSON header, the body.
fn java_frame(header_json: &str, body: &[u8]) -> BytesMut {
    let mut frame = BytesMut::new();
    let header_length = u32::try_from(header_json.len()).expect("small header");
    frame.put_u32(4 + header_length + u32::try_from(body.len()).expect("small body"));
    frame.put_u32(header_length);
    frame.put_slice(header_json.as_bytes());
    frame.put_slice(body);
    frame
}

fn decode_one(mut frame: BytesMut) -> RemotingCommand {
    match FrameDecoder::default().decode(&mut frame) {
        Ok(Some(Decoded::Command(command))) => {
            assert!(frame.is_empty(), "one frame, fully consumed");
            command
        }
        other => panic!("expected one command, got {other:?}"),
    }
}

// Proves an ELECT_MASTER success frame laid out as Java's controller writes it (ext keys are
// Java's field names, a fastjson body with bare numeric member-group keys) decodes into the
// typed header and body.
#[test]
fn elect_master_response_frame_from_java_layout() {
    let header = concat!(
        r#"{"code":0,"extFields":{"masterAddress":"127.0.0.1:30911","masterBrokerId":"1","#,
        r#""masterEpoch":"1","syncStateSetEpoch":"1"},"flag":1,"language":"JAVA","#,
        r#""opaque":7,"serializeTypeCurrentRPC":"JSON","version":475}"#
    );
    let body = concat!(
        r#"{"brokerMemberGroup":{"brokerAddrs":{1:"127.0.0.1:30911",2:"127.0.0.1:30921"},"#,
        r#""brokerName":"broker-a","cluster":"DefaultCluster"},"syncStateSet":[1]}"#
    );
    let command = decode_one(java_frame(header, body.as_bytes()));
    assert!(command.is_response());
    assert_eq!(command.response_code(), ResponseCode::SUCCESS);
    let header: ElectMasterResponseHeader = command.decode_header().expect("typed header");
    assert_eq!(header.master_broker_id, Some(1));
    assert_eq!(header.master_address.as_deref(), Some("127.0.0.1:30911"));
    assert_eq!(header.master_epoch, Some(1));
    assert_eq!(header.sync_state_set_epoch, Some(1));
    let body = ElectMasterResponseBody::decode(&command.body).expect("typed body");
    assert_eq!(body.sync_state_set, BTreeSet::from([1]));
    let group = body.broker_member_group.expect("member group");
    assert_eq!(
        group.broker_addrs.get(&2).map(String::as_str),
        Some("127.0.0.1:30921")
    );
}

// Proves a NOTIFY_BROKER_ROLE_CHANGED request frame in Java's layout decodes, and that the
// metadata answer's `isLeader` key (Java's field name, not a getter name) is the one read.
#[test]
fn notify_and_metadata_frames_from_java_layout() {
    let header = concat!(
        r#"{"code":1008,"extFields":{"masterAddress":"127.0.0.1:30921","#,
        r#""masterBrokerId":"2","masterEpoch":"2","syncStateSetEpoch":"3"},"flag":2,"#,
        r#""language":"JAVA","opaque":11,"serializeTypeCurrentRPC":"JSON","version":475}"#
    );
    let body = br#"{"syncStateSet":[2],"syncStateSetEpoch":3}"#;
    let command = decode_one(java_frame(header, body));
    assert_eq!(
        command.request_code(),
        RequestCode::NOTIFY_BROKER_ROLE_CHANGED
    );
    assert!(command.is_oneway());
    let header: NotifyBrokerRoleChangedRequestHeader = command.decode_header().expect("header");
    assert_eq!(header.master_broker_id, Some(2));
    assert_eq!(header.master_epoch, Some(2));
    let set = SyncStateSet::decode(&command.body).expect("body");
    assert_eq!(set.sync_state_set_epoch, 3);

    let header = concat!(
        r#"{"code":0,"extFields":{"controllerLeaderAddress":"127.0.0.1:9878","#,
        r#""controllerLeaderId":"n0","group":"group1","isLeader":"true","#,
        r#""peers":"n0:127.0.0.1:9878;"},"flag":1,"language":"JAVA","opaque":1,"#,
        r#""serializeTypeCurrentRPC":"JSON","version":475}"#
    );
    let command = decode_one(java_frame(header, b""));
    let metadata: GetMetaDataResponseHeader = command.decode_header().expect("header");
    assert!(metadata.is_leader);
    assert_eq!(
        metadata.controller_leader_address.as_deref(),
        Some("127.0.0.1:9878")
    );
}

/// The frames of `tests/data/apache-controller-frames.txt` with their labels.
fn captured_apache_frames() -> Vec<(String, RemotingCommand)> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/apache-controller-frames.txt"
    );
    let text = std::fs::read_to_string(path).expect("captured frames");
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| {
            let (label, hex) = line.rsplit_once(' ').expect("label and hex");
            let bytes: Vec<u8> = (0..hex.len() / 2)
                .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).expect("hex"))
                .collect();
            (label.to_owned(), decode_one(BytesMut::from(&bytes[..])))
        })
        .collect()
}

// Proves every frame Apache's own controller sent in the compatibility run decodes into the
// typed headers and bodies with the values that run produced: the metadata answer's
// `isLeader`, the id claim and its "taken" refusal, a registration without a master, the
// first election (bare numeric member-group keys), the role notification, replica info and
// both a refused and an accepted sync-state-set change.
#[test]
fn frames_captured_from_apache_controller_decode() {
    let frames = captured_apache_frames();
    let get = |label: &str| {
        frames
            .iter()
            .find(|(l, _)| l == label)
            .map(|(_, command)| command)
            .unwrap_or_else(|| panic!("no captured frame {label}"))
    };
    let metadata: GetMetaDataResponseHeader = get("CONTROLLER_GET_METADATA_INFO 0")
        .decode_header()
        .expect("metadata header");
    assert!(metadata.is_leader);
    let leader = metadata.controller_leader_address.expect("leader address");
    assert!(metadata.peers.expect("peers").contains(&leader));

    let next: GetNextBrokerIdResponseHeader = get("CONTROLLER_GET_NEXT_BROKER_ID 0")
        .decode_header()
        .expect("next id header");
    assert_eq!(next.next_broker_id, Some(1));
    let applied: ApplyBrokerIdResponseHeader = get("CONTROLLER_APPLY_BROKER_ID 0")
        .decode_header()
        .expect("apply header");
    assert!(applied.broker_name.is_some());
    let taken = get("CONTROLLER_APPLY_BROKER_ID 2014");
    assert_eq!(
        taken.response_code(),
        ResponseCode::CONTROLLER_BROKER_ID_INVALID
    );
    assert!(taken
        .remark
        .as_deref()
        .is_some_and(|r| r.contains("brokerId")));

    let registered = get("CONTROLLER_REGISTER_BROKER 0");
    let header: RegisterBrokerToControllerResponseHeader =
        registered.decode_header().expect("register header");
    assert_eq!(header.master_broker_id, None, "no master yet");
    let set = SyncStateSet::decode(&registered.body).expect("register body");
    assert!(set.sync_state_set.is_empty());

    let elected = get("CONTROLLER_ELECT_MASTER 0");
    let header: ElectMasterResponseHeader = elected.decode_header().expect("elect header");
    assert_eq!(
        (header.master_broker_id, header.master_epoch),
        (Some(1), Some(1))
    );
    let body = ElectMasterResponseBody::decode(&elected.body).expect("elect body");
    assert_eq!(body.sync_state_set, BTreeSet::from([1]));
    let group = body.broker_member_group.expect("member group");
    assert_eq!(group.broker_addrs.get(&1), header.master_address.as_ref());

    let notify = get("NOTIFY_BROKER_ROLE_CHANGED request");
    assert!(notify.is_oneway());
    let header: NotifyBrokerRoleChangedRequestHeader =
        notify.decode_header().expect("notify header");
    let set = SyncStateSet::decode(&notify.body).expect("notify body");
    assert_eq!(header.sync_state_set_epoch, Some(set.sync_state_set_epoch));

    let info = get("CONTROLLER_GET_REPLICA_INFO 0");
    let header: GetReplicaInfoResponseHeader = info.decode_header().expect("info header");
    assert!(header.master_epoch.is_some_and(|epoch| epoch >= 1));
    SyncStateSet::decode(&info.body).expect("info body");

    let refused = get("CONTROLLER_ALTER_SYNC_STATE_SET 2006");
    assert_eq!(
        refused.response_code(),
        ResponseCode::CONTROLLER_BROKER_NOT_ALIVE
    );
    let altered = get("CONTROLLER_ALTER_SYNC_STATE_SET 0");
    let header: AlterSyncStateSetResponseHeader = altered.decode_header().expect("alter header");
    let set = SyncStateSet::decode(&altered.body).expect("alter body");
    assert_eq!(header.new_sync_state_set_epoch, set.sync_state_set_epoch);
    assert_eq!(set.sync_state_set, BTreeSet::from([1, 2]));
}
