//! Three real `comet-nameserver` processes with `enableControllerInNamesrv=true` form one
//! controller group on loopback. A client speaking raw controller frames registers two
//! brokers of one broker set and has a master elected; the Raft leader is SIGKILLed; a new
//! leader must answer with every decision made before (broker ids, master, epoch) and make
//! new ones; the killed member, restarted from its store, must catch up on what was decided
//! while it was down (its store on disk receives the new decision). The log is compacted
//! into a snapshot every three entries, so snapshots are taken, restored at restart and
//! sent to the member that was down.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use comet_proto::body::{JsonBody, SyncStateSet};
use comet_proto::bytes::BytesMut;
use comet_proto::frame::encode_to_bytes;
use comet_proto::headers::*;
use comet_proto::{Decoded, FrameDecoder, RemotingCommand, RequestCode, ResponseCode};
use comet_test_support::{free_port, wait_for, wait_until, ChildGuard, TempDir};

const CLUSTER: &str = "CometCtlGroup";
const BROKER_NAME: &str = "broker-g";
const STEP_LIMIT: Duration = Duration::from_secs(60);

/// One request on a fresh connection; `None` when the member cannot be reached or does not
/// answer within two seconds.
fn call(addr: SocketAddr, command: RemotingCommand) -> Option<RemotingCommand> {
    call_keeping(addr, command).map(|(answer, _)| answer)
}

/// [`call`], returning the connection too: a broker's heartbeats must come over a connection
/// that stays open, since the controller counts a broker whose connection closed as gone.
fn call_keeping(
    addr: SocketAddr,
    mut command: RemotingCommand,
) -> Option<(RemotingCommand, TcpStream)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    command.opaque = 7;
    stream.write_all(&encode_to_bytes(&command)).ok()?;
    let decoder = FrameDecoder::default();
    let mut buffer = BytesMut::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Ok(Some(Decoded::Command(answer))) = decoder.decode(&mut buffer) {
            if answer.is_response() && answer.opaque == 7 {
                return Some((answer, stream));
            }
            continue;
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(read) => buffer.extend_from_slice(&chunk[..read]),
        }
    }
}

struct Member {
    name: String,
    addr: SocketAddr,
    dir: PathBuf,
    process: Option<ChildGuard>,
}

impl Drop for Member {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- {} ---\n{}", self.name, self.log_tail());
        }
    }
}

impl Member {
    fn start(&mut self) {
        let mut command = Command::new(env!("CARGO_BIN_EXE_comet-nameserver"));
        command
            .arg("-c")
            .arg(self.dir.join("namesrv.properties"))
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(
                std::fs::File::create(self.dir.join("namesrv.log"))
                    .map_or_else(|_| Stdio::null(), Stdio::from),
            );
        self.process = Some(ChildGuard::spawn(&self.name, &mut command));
    }

    fn kill(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.kill();
        }
    }

    /// The end of its log, shown when the test fails.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("namesrv.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// What its store holds: the Raft log and the snapshot the log was compacted into.
    fn store_bytes(&self) -> Vec<u8> {
        let store = self.dir.join("store");
        let mut bytes = std::fs::read(store.join("raft.log")).unwrap_or_default();
        bytes.extend(std::fs::read(store.join("snapshot")).unwrap_or_default());
        bytes
    }
}

fn write_config(dir: &Path, self_id: &str, peers: &str) {
    let text = format!(
        "listenPort={}\nkvConfigPath={}\nenableControllerInNamesrv=true\n\
         controllerDLegerGroup=comet-test\ncontrollerDLegerPeers={peers}\n\
         controllerDLegerSelfId={self_id}\ncontrollerStorePath={}\n\
         scanNotActiveBrokerInterval=1000\nnotifyBrokerRoleChanged=true\n\
         controllerCompactAfterEntries=3\n",
        free_port(),
        dir.join("kvConfig.json").display(),
        dir.join("store").display(),
    );
    std::fs::write(dir.join("namesrv.properties"), text).expect("config written");
}

fn metadata(addr: SocketAddr) -> Option<GetMetaDataResponseHeader> {
    let answer = call(
        addr,
        RemotingCommand::request(RequestCode::CONTROLLER_GET_METADATA_INFO, 0),
    )?;
    answer.decode_header().ok()
}

/// The member that says it leads and answers a request that needs the leader.
fn serving_leader(members: &[Member]) -> Option<usize> {
    members.iter().position(|member| {
        member.process.is_some()
            && metadata(member.addr).is_some_and(|meta| meta.is_leader)
            && call(member.addr, replica_info()).is_some_and(|answer| {
                let code = answer.response_code();
                code == ResponseCode::SUCCESS
                    || code == ResponseCode::CONTROLLER_BROKER_METADATA_NOT_EXIST
            })
    })
}

fn replica_info() -> RemotingCommand {
    RemotingCommand::request(RequestCode::CONTROLLER_GET_REPLICA_INFO, 0).with_header(
        &GetReplicaInfoRequestHeader {
            broker_name: BROKER_NAME.to_owned(),
        },
    )
}

fn check_code(broker_id: i64) -> String {
    format!("127.0.0.1:{};1700000000000", 10_910 + broker_id)
}

fn apply_broker_id(broker_id: i64) -> RemotingCommand {
    RemotingCommand::request(RequestCode::CONTROLLER_APPLY_BROKER_ID, 0).with_header(
        &ApplyBrokerIdRequestHeader {
            cluster_name: CLUSTER.to_owned(),
            broker_name: BROKER_NAME.to_owned(),
            applied_broker_id: broker_id,
            register_check_code: check_code(broker_id),
        },
    )
}

fn next_broker_id(members: &[Member]) -> Option<i64> {
    let command = RemotingCommand::request(RequestCode::CONTROLLER_GET_NEXT_BROKER_ID, 0)
        .with_header(&GetNextBrokerIdRequestHeader {
            cluster_name: CLUSTER.to_owned(),
            broker_name: BROKER_NAME.to_owned(),
        });
    let answer = on_leader(members, command)?;
    let header: GetNextBrokerIdResponseHeader = answer.decode_header().ok()?;
    header.next_broker_id
}

fn heartbeat(broker_id: i64) -> RemotingCommand {
    RemotingCommand::request(RequestCode::BROKER_HEARTBEAT, 0).with_header(
        &BrokerHeartbeatRequestHeader {
            cluster_name: CLUSTER.to_owned(),
            broker_addr: format!("127.0.0.1:{}", 10_910 + broker_id),
            broker_name: BROKER_NAME.to_owned(),
            broker_id: Some(broker_id),
            epoch: Some(0),
            max_offset: Some(0),
            confirm_offset: Some(0),
            heartbeat_timeout_mills: Some(120_000),
            election_priority: None,
        },
    )
}

fn expect_success(what: &str, answer: Option<RemotingCommand>) -> RemotingCommand {
    let answer = answer.unwrap_or_else(|| panic!("{what}: no answer"));
    assert_eq!(
        answer.response_code(),
        ResponseCode::SUCCESS,
        "{what}: {:?}",
        answer.remark
    );
    answer
}

/// (master id, master epoch, sync-state set) from the leader's replica info.
fn replica_view(members: &[Member]) -> Option<(Option<i64>, Option<i32>, SyncStateSet)> {
    let answer = on_leader(members, replica_info())?;
    if answer.response_code() != ResponseCode::SUCCESS {
        return None;
    }
    let header: GetReplicaInfoResponseHeader = answer.decode_header().ok()?;
    let body = SyncStateSet::decode(&answer.body).ok()?;
    Some((header.master_broker_id, header.master_epoch, body))
}

// Proves the controller group survives the loss of its Raft leader with every decision, and
// that a restarted member catches up (see the module docs).
#[test]
fn controller_group_fails_over_and_catches_up() {
    let root = TempDir::new("controller-group");
    let ports = [free_port(), free_port(), free_port()];
    let peers: String = ports
        .iter()
        .enumerate()
        .map(|(index, port)| format!("n{index}-127.0.0.1:{port};"))
        .collect();
    let mut members: Vec<Member> = ports
        .iter()
        .enumerate()
        .map(|(index, port)| {
            let dir = root.path().join(format!("n{index}"));
            std::fs::create_dir_all(&dir).expect("member folder");
            write_config(&dir, &format!("n{index}"), &peers);
            Member {
                name: format!("n{index}"),
                addr: SocketAddr::from(([127, 0, 0, 1], *port)),
                dir,
                process: None,
            }
        })
        .collect();
    for member in &mut members {
        member.start();
    }

    // A leader is elected and serves.
    let leader = wait_for("a serving controller leader", STEP_LIMIT, || {
        serving_leader(&members)
    });
    let leader_addr = members[leader].addr;
    let followers: Vec<usize> = (0..3).filter(|index| *index != leader).collect();
    for follower in &followers {
        let answer = call(members[*follower].addr, replica_info()).expect("follower answers");
        assert_eq!(
            answer.response_code(),
            ResponseCode::CONTROLLER_NOT_LEADER,
            "follower {}",
            members[*follower].name
        );
        let meta = metadata(members[*follower].addr).expect("follower metadata");
        assert!(!meta.is_leader);
        assert_eq!(
            meta.controller_leader_address.as_deref(),
            Some(leader_addr.to_string().as_str()),
            "a follower names the leader"
        );
    }

    // What the controller does not build is refused as Java refuses an unknown code.
    let clean = RemotingCommand::request(RequestCode::CLEAN_BROKER_DATA, 0);
    let refused = call(leader_addr, clean).expect("an answer to CLEAN_BROKER_DATA");
    assert_eq!(
        refused.response_code(),
        ResponseCode::REQUEST_CODE_NOT_SUPPORTED
    );

    // Two brokers claim ids 1 and 2, register and heartbeat to every member (as brokers do);
    // broker 1 asks for the first election and wins it under master epoch 1.
    let mut heartbeat_connections = Vec::new();
    for broker_id in [1, 2] {
        assert_eq!(next_broker_id(&members), Some(broker_id));
        expect_success(
            "apply broker id",
            on_leader(&members, apply_broker_id(broker_id)),
        );
        let register = RemotingCommand::request(RequestCode::CONTROLLER_REGISTER_BROKER, 0)
            .with_header(&RegisterBrokerToControllerRequestHeader {
                cluster_name: CLUSTER.to_owned(),
                broker_name: BROKER_NAME.to_owned(),
                broker_id,
                broker_address: format!("127.0.0.1:{}", 10_910 + broker_id),
                invoke_time: None,
            });
        expect_success("register", on_leader(&members, register));
        for member in &members {
            let (answer, connection) = call_keeping(member.addr, heartbeat(broker_id))
                .expect("an answer to the heartbeat");
            expect_success("heartbeat", Some(answer));
            heartbeat_connections.push(connection);
        }
    }
    let elect = RemotingCommand::request(RequestCode::CONTROLLER_ELECT_MASTER, 0).with_header(
        &ElectMasterRequestHeader {
            cluster_name: CLUSTER.to_owned(),
            broker_name: BROKER_NAME.to_owned(),
            broker_id: 1,
            designate_elect: false,
            invoke_time: None,
        },
    );
    let elected = on_leader(&members, elect).expect("an election answer");
    // A retry after a lost answer finds the master it elected still there.
    assert!(
        [
            ResponseCode::SUCCESS,
            ResponseCode::CONTROLLER_MASTER_STILL_EXIST
        ]
        .contains(&elected.response_code()),
        "elect: {:?}",
        elected.remark
    );
    let header: ElectMasterResponseHeader = elected.decode_header().expect("elect header");
    assert_eq!(header.master_broker_id, Some(1));
    assert_eq!(header.master_epoch, Some(1));
    let before = replica_view(&members).expect("replica info");
    assert_eq!((before.0, before.1), (Some(1), Some(1)));

    // SIGKILL the leader: another member leads, with every decision.
    let leader = wait_for("the serving leader", STEP_LIMIT, || {
        serving_leader(&members)
    });
    members[leader].kill();
    wait_for("a new serving leader", STEP_LIMIT, || {
        serving_leader(&members)
    });
    assert_eq!(
        replica_view(&members),
        Some(before.clone()),
        "decisions kept"
    );
    assert_eq!(next_broker_id(&members), Some(3), "ids 1 and 2 stay taken");
    let taken = ApplyBrokerIdRequestHeader {
        cluster_name: CLUSTER.to_owned(),
        broker_name: BROKER_NAME.to_owned(),
        applied_broker_id: 2,
        register_check_code: "127.0.0.1:1;1".to_owned(),
    };
    let refused = on_leader(&members, apply_broker_id(2).with_header(&taken)).expect("an answer");
    assert_eq!(
        refused.response_code(),
        ResponseCode::CONTROLLER_BROKER_ID_INVALID,
        "another broker cannot take id 2"
    );
    // A decision made while the old leader is down.
    expect_success("apply broker id 3", on_leader(&members, apply_broker_id(3)));
    assert_eq!(next_broker_id(&members), Some(4));
    for member in members.iter().filter(|member| member.process.is_some()) {
        assert!(
            member.dir.join("store").join("snapshot").is_file(),
            "{}: the log was compacted into a snapshot",
            member.name
        );
    }

    // The killed member restarts from its store and receives what it missed.
    let restarted = leader;
    let marker = check_code(3);
    assert!(
        !contains(&members[restarted].store_bytes(), marker.as_bytes()),
        "the killed member cannot have broker 3's claim yet"
    );
    members[restarted].start();
    wait_until("the restarted member catches up", STEP_LIMIT, || {
        contains(&members[restarted].store_bytes(), marker.as_bytes())
    });
    wait_for("the restarted member knows the leader", STEP_LIMIT, || {
        metadata(members[restarted].addr).filter(|meta| meta.controller_leader_address.is_some())
    });
    // The group still decides with the restarted member in it.
    assert_eq!(replica_view(&members), Some(before));
    for member in &mut members {
        member.kill();
    }
}

/// `command` answered by whichever member leads: members are asked in turn until one
/// answers other than CONTROLLER_NOT_LEADER (leadership may move on a busy machine).
fn on_leader(members: &[Member], command: RemotingCommand) -> Option<RemotingCommand> {
    let mut answer = None;
    comet_test_support::poll_until(STEP_LIMIT, || {
        answer = members
            .iter()
            .filter(|member| member.process.is_some())
            .filter_map(|member| call(member.addr, command.clone()))
            .find(|answer| answer.response_code() != ResponseCode::CONTROLLER_NOT_LEADER);
        answer.is_some()
    });
    answer
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}
