//! Controller mode end to end (docs/architecture.md#failover): Comet's controller runs inside
//! a name server (`enableControllerInNamesrv`), two Comet brokers of one broker set run with
//! `enableControllerMode=true`, and the controller, not their configuration, decides which
//! one is master. Killing or freezing the master must hand the broker set to the other one
//! without losing a message that was answered SEND_OK, and never let two brokers acknowledge
//! writes.
//!
//! With `COMET_FAILOVER_CONTROLLER` (a controller's address) and `COMET_FAILOVER_NAMESRV`
//! set, the brokers use that controller and name server instead:
//! `tests/compat/controller/run.sh --only brokers` runs these tests against Apache
//! RocketMQ's.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use comet_proto::body::{JsonBody, SyncStateSet};
use comet_proto::bytes::BytesMut;
use comet_proto::frame::encode_to_bytes;
use comet_proto::headers::GetReplicaInfoRequestHeader;
use comet_proto::{Decoded, FrameDecoder, RemotingCommand, RequestCode, ResponseCode};
use comet_test_support::{free_port, poll_until};
use common::replication::{
    bodies_by_offset, pull_topic, send_until_stopped, Acknowledged, Node, CONVERGE_LIMIT, QUEUES,
    SHARDS,
};
use common::TempDir;

/// The controller counts a broker gone after this much silence; the master's lease is 70%
/// of it.
const HEARTBEAT_TIMEOUT_MS: u64 = 3_000;

/// The brokers' log filter: warnings, and the steps of role changes.
const ROLE_CHANGE_LOG: &str = "warn,comet_broker::controller_mode=info,\
     comet_broker::replication=info,comet_broker::runtime=info";

/// The controller and name server the brokers use.
struct ControllerUnderTest {
    /// Comet's, in this process; `None` for one given by the environment.
    namesrv: Option<comet_nameserver::NameServerThread>,
    namesrv_addr: String,
    controller_addr: String,
}

impl ControllerUnderTest {
    fn start(dir: &Path) -> ControllerUnderTest {
        let given = (
            std::env::var("COMET_FAILOVER_CONTROLLER"),
            std::env::var("COMET_FAILOVER_NAMESRV"),
        );
        if let (Ok(controller_addr), Ok(namesrv_addr)) = given {
            return ControllerUnderTest {
                namesrv: None,
                namesrv_addr,
                controller_addr,
            };
        }
        let (namesrv, controller_addr) = start_controller(dir);
        ControllerUnderTest {
            namesrv_addr: namesrv.addr().to_string(),
            namesrv: Some(namesrv),
            controller_addr,
        }
    }

    fn stop(self) {
        if let Some(namesrv) = self.namesrv {
            namesrv.stop();
        }
    }
}

/// A broker set name of its own for each test and run (an outside controller keeps what
/// earlier runs registered).
fn broker_set_name(test: &str) -> String {
    format!(
        "{test}-{}-{}",
        std::process::id(),
        comet_test_support::free_port()
    )
}

/// One broker set in controller mode: its name and its controller.
struct BrokerSet {
    name: String,
    controller_addr: String,
}

/// The controller and two brokers of a new broker set (named after `test`), in controller
/// mode, their stores and logs under `dir`.
fn start_pair(dir: &Path, test: &str) -> (ControllerUnderTest, BrokerSet, Vec<Node>) {
    // The brokers say what their role changes do (a failure's evidence shows where a
    // promotion stopped), unless the caller chose a log level.
    if std::env::var_os("RUST_LOG").is_none() {
        std::env::set_var("RUST_LOG", ROLE_CHANGE_LOG);
    }
    let controller = ControllerUnderTest::start(dir);
    let set = BrokerSet {
        name: broker_set_name(test),
        controller_addr: controller.controller_addr.clone(),
    };
    let nodes = ["a", "b"]
        .iter()
        .map(|name| {
            Node::start_with(
                &dir.join(name),
                &controller.namesrv_addr,
                SHARDS,
                controller_options(&set.controller_addr, &set.name),
                Some(&dir.join(format!("{name}.log"))),
            )
        })
        .collect();
    (controller, set, nodes)
}

/// A name server with Comet's controller inside; returns it and the controller's address.
fn start_controller(dir: &Path) -> (comet_nameserver::NameServerThread, String) {
    let controller_port = free_port();
    let config = comet_nameserver::NamesrvConfig {
        listen_port: free_port(),
        bind_address: "127.0.0.1".parse().unwrap(),
        kv_config_path: dir.join("kvConfig.json"),
        enable_controller_in_namesrv: true,
        controller_peers: format!("n0-127.0.0.1:{controller_port}"),
        controller_self_id: "n0".into(),
        controller_store_path: dir.join("controller"),
        scan_interval: Duration::from_millis(500),
        ..comet_nameserver::NamesrvConfig::default()
    };
    let namesrv = comet_nameserver::NameServerThread::spawn(config).unwrap();
    (namesrv, format!("127.0.0.1:{controller_port}"))
}

/// The `-o` pairs of a broker in controller mode with short periods, SYNC_MASTER when master.
fn controller_options(controller: &str, broker_name: &str) -> Vec<String> {
    vec![
        "enableControllerMode=true".into(),
        format!("controllerAddr={controller}"),
        "brokerClusterName=FailoverCluster".into(),
        format!("brokerName={broker_name}"),
        "brokerRole=SYNC_MASTER".into(),
        format!("controllerHeartBeatTimeoutMills={HEARTBEAT_TIMEOUT_MS}"),
        "brokerHeartbeatInterval=300".into(),
        "syncBrokerMetadataPeriod=500".into(),
        "checkSyncStateSetPeriod=500".into(),
        "syncControllerMetadataPeriod=2000".into(),
        "haHousekeepingInterval=3000".into(),
        "haSendHeartbeatInterval=500".into(),
        "syncFlushTimeout=2000".into(),
    ]
}

/// One request on a fresh connection; `None` when the broker does not answer in time (it
/// may be restarting into another role, or frozen).
fn try_call(addr: SocketAddr, request: RemotingCommand) -> Option<RemotingCommand> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(3))).ok()?;
    let mut request = request;
    request.opaque = 1;
    stream.write_all(&encode_to_bytes(&request)).ok()?;
    let decoder = FrameDecoder::default();
    let mut buffer = BytesMut::new();
    let mut chunk = [0u8; 65536];
    loop {
        if let Ok(Some(Decoded::Command(answer))) = decoder.decode(&mut buffer) {
            if answer.is_response() {
                return Some(answer);
            }
            continue;
        }
        let read = stream.read(&mut chunk).ok()?;
        if read == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..read]);
    }
}

/// A TCP connection to `to` from the local address `local` (as an outgoing connection whose
/// ephemeral port happened to be `local`'s port); fails when `local` cannot be bound.
fn connect_from(local: SocketAddr, to: SocketAddr) -> std::io::Result<TcpStream> {
    use std::os::fd::FromRawFd;
    let (SocketAddr::V4(local), SocketAddr::V4(to)) = (local, to) else {
        panic!("loopback IPv4 addresses only");
    };
    let sockaddr = |addr: std::net::SocketAddrV4| libc::sockaddr_in {
        sin_family: libc::sa_family_t::try_from(libc::AF_INET).expect("AF_INET fits"),
        sin_port: addr.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*addr.ip()).to_be(),
        },
        sin_zero: [0; 8],
    };
    let size = libc::socklen_t::try_from(std::mem::size_of::<libc::sockaddr_in>())
        .expect("a sockaddr_in's size fits");
    // SAFETY: plain socket calls on a descriptor this function owns; the addresses are
    // valid `sockaddr_in` values of the size given; the descriptor moves into the stream.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let stream = TcpStream::from_raw_fd(fd);
        let bound = sockaddr(local);
        if libc::bind(fd, std::ptr::addr_of!(bound).cast(), size) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let target = sockaddr(to);
        if libc::connect(fd, std::ptr::addr_of!(target).cast(), size) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(stream)
    }
}

/// The role a broker runs in now (`brokerRole` of GET_BROKER_CONFIG), if it answers.
fn role_of(node: &Node) -> Option<String> {
    let answer = try_call(
        node.addr,
        RemotingCommand::request(RequestCode::GET_BROKER_CONFIG, 0),
    )?;
    let text = String::from_utf8(answer.body.to_vec()).ok()?;
    comet_proto::java_properties::parse(&text)
        .into_iter()
        .find(|(key, _)| key == "brokerRole")
        .map(|(_, role)| role)
}

fn is_master(node: &Node) -> bool {
    role_of(node).is_some_and(|role| role.ends_with("MASTER"))
}

/// How many brokers the controller counts in the broker set's sync-state set.
fn sync_state_set_size(controller: &str, broker_name: &str) -> Option<usize> {
    let request = RemotingCommand::request(RequestCode::CONTROLLER_GET_REPLICA_INFO, 0)
        .with_header(&GetReplicaInfoRequestHeader {
            broker_name: broker_name.into(),
        });
    let answer = try_call(controller.parse().ok()?, request)?;
    let set = SyncStateSet::decode(&answer.body).ok()?;
    Some(set.sync_state_set.len())
}

/// Waits until exactly one of `nodes` serves as master, a SYNC_MASTER send to it is
/// answered SEND_OK (its slave follows and is in sync), and the controller counts both in
/// the sync-state set (only its members may be elected); returns the master's index.
fn wait_for_master_with_slave(nodes: &[&Node], topic: &str, set: &BrokerSet) -> usize {
    let mut master = None;
    let mut probes = 0;
    // What the last probe saw, so a failure says which condition never held.
    let mut last_seen = String::new();
    let settled = poll_until(CONVERGE_LIMIT * 2, || {
        let roles: Vec<Option<String>> = nodes.iter().map(|node| role_of(node)).collect();
        let masters: Vec<usize> = (0..nodes.len())
            .filter(|i| {
                roles[*i]
                    .as_deref()
                    .is_some_and(|role| role.ends_with("MASTER"))
            })
            .collect();
        last_seen = format!("roles {roles:?}");
        let [only] = masters[..] else { return false };
        master = Some(only);
        probes += 1;
        // Fallible calls: a broker may be restarting into its role between two probes.
        let addr = nodes[only].addr;
        let created = try_call(addr, common::create_topic_request(topic, QUEUES))
            .map(|answer| answer.response_code());
        let body = format!("probe {probes}");
        let probe = common::send_request(topic, 0, body.as_bytes(), None, None);
        let sent = try_call(addr, probe).map(|answer| answer.response_code());
        let in_sync = sync_state_set_size(&set.controller_addr, &set.name);
        last_seen = format!(
            "roles {roles:?}, create topic {created:?}, send {sent:?}, \
             sync-state set size {in_sync:?}"
        );
        created == Some(ResponseCode::SUCCESS)
            && sent == Some(ResponseCode::SUCCESS)
            && in_sync == Some(nodes.len())
    });
    if !settled {
        let logs: Vec<String> = nodes.iter().map(|node| node.log_text()).collect();
        panic!("no master with an in-sync slave; last probe saw {last_seen}; logs: {logs:#?}");
    }
    master.expect("settled names the master")
}

/// Runs `senders` comet-client producers against the name server until `stop`.
fn start_senders(
    namesrv: &str,
    topic: &'static str,
    senders: usize,
    round: &str,
    stop: &Arc<AtomicBool>,
    acked: &Arc<AtomicUsize>,
) -> Vec<std::thread::JoinHandle<Vec<Acknowledged>>> {
    (0..senders)
        .map(|sender| {
            let (stop, acked) = (stop.clone(), acked.clone());
            let (namesrv, label) = (namesrv.to_owned(), format!("{round}s{sender}"));
            std::thread::spawn(move || {
                send_until_stopped(namesrv, topic, label, sender, stop, acked)
            })
        })
        .collect()
}

fn assert_all_held(node: &Node, topic: &str, acknowledged: &[Acknowledged], what: &str) {
    let mut client = node.client();
    let held = bodies_by_offset(&mut client, topic);
    for ack in acknowledged {
        assert_eq!(
            held.get(&(ack.queue, ack.offset)),
            Some(&ack.body),
            "{what}: acknowledged, so on the new master: {ack:?}"
        );
    }
}

// Proves automatic failover loses no acknowledged message and restores writes by itself:
// the controller elects one of two controller-mode brokers, 8 producers send SYNC_MASTER
// messages through the name server, the master is SIGKILLed under that load, the controller
// elects the other broker, and once the sync-state set shrank to it alone it answers
// SEND_OK again (the recovery time is printed). The killed broker, restarted on its store,
// follows the new master, and joins the sync-state set only once it holds every message
// answered while it was away: killing the new master too then hands the broker set back to
// it, and it holds every message ever answered SEND_OK at its acknowledged offset.
#[test]
fn a_killed_master_is_replaced_without_losing_an_acknowledged_message() {
    const TOPIC: &str = "FailoverKill";
    const SENDERS: usize = 8;
    let dir = TempDir::new("failover-kill");
    let (controller, set, mut nodes) = start_pair(dir.path(), TOPIC);
    let namesrv_addr = controller.namesrv_addr.clone();
    let first = wait_for_master_with_slave(&[&nodes[0], &nodes[1]], TOPIC, &set);
    let other = 1 - first;
    // The slave's HA port must be held while it is a slave, or a connection taking it as
    // its local port would make its promotion fail to listen for slaves.
    let slave_ha = SocketAddr::new(nodes[other].addr.ip(), nodes[other].ha_port);
    let squatter = connect_from(slave_ha, nodes[first].addr);
    assert!(
        squatter.is_err(),
        "a connection took the slave's HA port {slave_ha} as its local port"
    );
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(AtomicUsize::new(0));
    let senders = start_senders(&namesrv_addr, TOPIC, SENDERS, "k", &stop, &acked);
    let more_acked = |count: usize| {
        let from = acked.load(Ordering::SeqCst);
        poll_until(CONVERGE_LIMIT, || {
            acked.load(Ordering::SeqCst) >= from + count
        })
    };
    assert!(
        more_acked(20 * SENDERS),
        "sends were answered SEND_OK before the kill"
    );
    nodes[first].kill();
    let killed_at = std::time::Instant::now();
    let answers_send_ok = |node: &Node| {
        let probe = common::send_request(TOPIC, 1, b"recovery probe", None, None);
        try_call(node.addr, probe)
            .is_some_and(|answer| answer.response_code() == ResponseCode::SUCCESS)
    };
    // Recovery time: the controller elects the other broker, and the sync-state set shrinks
    // to it alone, so a SYNC_MASTER send no longer waits for the dead one.
    let promoted = poll_until(CONVERGE_LIMIT, || answers_send_ok(&nodes[other]));
    eprintln!(
        "failover: first SEND_OK on the new master {} ms after the kill",
        killed_at.elapsed().as_millis()
    );
    assert!(
        promoted,
        "the other broker answers SEND_OK as master: {}",
        nodes[other].log_text()
    );
    assert!(
        more_acked(20 * SENDERS),
        "producers continue on the new master after their route refresh"
    );
    // The old master comes back as a slave of the new one, and the pair is whole again.
    nodes[first].spawn();
    let again = wait_for_master_with_slave(&[&nodes[0], &nodes[1]], TOPIC, &set);
    assert_eq!(again, other, "the new master stays master");
    assert_eq!(role_of(&nodes[first]).as_deref(), Some("SLAVE"));
    assert!(more_acked(20 * SENDERS), "sends go on with both in the set");
    // The returned broker joined the set holding everything: a second failover to it keeps
    // every acknowledged message, those answered while it was down included.
    nodes[other].kill();
    let back = poll_until(CONVERGE_LIMIT, || answers_send_ok(&nodes[first]));
    assert!(
        back,
        "the returned broker is elected and answers SEND_OK: {}",
        nodes[first].log_text()
    );
    stop.store(true, Ordering::SeqCst);
    let acknowledged: Vec<Acknowledged> = senders
        .into_iter()
        .flat_map(|sender| sender.join().unwrap())
        .collect();
    assert_all_held(
        &nodes[first],
        TOPIC,
        &acknowledged,
        "after the second failover",
    );
    nodes[other].spawn();
    let whole = wait_for_master_with_slave(&[&nodes[0], &nodes[1]], TOPIC, &set);
    assert_eq!(whole, first, "the second new master stays master");
    let (mut master, mut slave) = (nodes[first].client(), nodes[other].client());
    let same = poll_until(CONVERGE_LIMIT, || {
        pull_topic(&mut master, TOPIC) == pull_topic(&mut slave, TOPIC)
    });
    assert!(same, "the old master follows the new one: same queues");
    assert_all_held(
        &nodes[first],
        TOPIC,
        &acknowledged,
        "after the old master returned",
    );
    drop(nodes);
    controller.stop();
}

// Proves the lease fences a frozen master: the master is stopped with SIGSTOP (its process
// and its connections stay, so nothing tells the controller but the missing heartbeats),
// the controller elects the other broker, and when the old master resumes, it acknowledges
// no write (its lease lapsed while it was frozen) and turns into the new master's slave.
#[test]
fn a_frozen_master_acknowledges_nothing_once_another_was_elected() {
    const TOPIC: &str = "FailoverFreeze";
    let dir = TempDir::new("failover-freeze");
    let (controller, set, mut nodes) = start_pair(dir.path(), TOPIC);
    let first = wait_for_master_with_slave(&[&nodes[0], &nodes[1]], TOPIC, &set);
    let other = 1 - first;
    nodes[first].signal(libc::SIGSTOP);
    let promoted = poll_until(CONVERGE_LIMIT, || is_master(&nodes[other]));
    assert!(promoted, "the controller elected the other broker");
    nodes[first].signal(libc::SIGCONT);
    // Whatever the resumed broker answers from now on, it is never SEND_OK: its lease ran
    // out while it was frozen, and then it becomes a slave.
    let mut answers = Vec::new();
    let demoted = poll_until(CONVERGE_LIMIT, || {
        let request = common::send_request(TOPIC, 0, b"after the freeze", None, None);
        if let Some(answer) = try_call(nodes[first].addr, request) {
            answers.push(answer.response_code());
        }
        role_of(&nodes[first]).as_deref() == Some("SLAVE")
    });
    assert!(
        !answers.contains(&ResponseCode::SUCCESS),
        "the old master acknowledged a write after another was elected: {answers:?}"
    );
    assert!(
        demoted,
        "the old master became a slave: {}",
        nodes[first].log_text()
    );
    let again = wait_for_master_with_slave(&[&nodes[0], &nodes[1]], TOPIC, &set);
    assert_eq!(again, other);
    drop(nodes);
    controller.stop();
}
