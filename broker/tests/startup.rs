//! Start-up: where the broker listens (`bindAddress`), and failures: the process stops at
//! once with a clear message and an exit status that names the class of failure (see
//! `comet_rt::fatal::FatalReason`).

mod common;

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use comet_test_support::{free_port, poll_until, Broker, LOOPBACK};
use common::TempDir;

/// Exit status of a configuration that cannot be used (`FatalReason::Config`).
const EXIT_CONFIG: i32 = 72;
/// Exit status of a listener that could not bind (`FatalReason::Bind`).
const EXIT_BIND: i32 = 73;
/// TCP state `LISTEN` as `/proc/net/tcp` prints it.
const TCP_LISTEN_STATE: &str = "0A";

/// Local IPv4 addresses of the sockets listening on `port`, from `/proc/net/tcp`, and how many
/// IPv6 sockets listen on it (from `/proc/net/tcp6`; a dual-stack `::` would cover IPv4 too).
fn listeners_on(port: u16) -> (Vec<Ipv4Addr>, usize) {
    // Each row: `sl local_address rem_address st ...`, the address as the kernel's in-memory
    // 32-bit word in hex (so native byte order) and the port in hex.
    let rows = |path: &str| -> Vec<String> {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        text.lines()
            .skip(1)
            .filter_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                let (address, port_hex) = fields.get(1)?.split_once(':')?;
                let listening = *fields.get(3)? == TCP_LISTEN_STATE;
                let matches = u16::from_str_radix(port_hex, 16) == Ok(port);
                (listening && matches).then(|| address.to_owned())
            })
            .collect()
    };
    let v4 = rows("/proc/net/tcp")
        .into_iter()
        .map(|address| {
            let word = u32::from_str_radix(&address, 16).expect("a hex IPv4 address");
            Ipv4Addr::from(word.to_ne_bytes())
        })
        .collect();
    (v4, rows("/proc/net/tcp6").len())
}

// Proves a broker told `bindAddress=127.0.0.1` serves on 127.0.0.1 and that every socket it
// (and its embedded name server) listens with is bound to 127.0.0.1, none to the wildcard or
// IPv6, one per shard on the broker port; 127.0.0.2, which a wildcard listener would answer
// on Linux loopback, is refused.
#[test]
fn listeners_bind_only_the_bind_address() {
    let store = TempDir::new("startup-bind-address");
    let broker = Broker::start(store.path(), 2, &["-o", "bindAddress=127.0.0.1"]);
    for (addr, sockets_min) in [(broker.broker_addr, 2), (broker.namesrv_addr, 1)] {
        TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("accepts on 127.0.0.1");
        // The port answers once one shard listens; the others bind moments later.
        let all_bound = poll_until(Duration::from_secs(10), || {
            listeners_on(addr.port()).0.len() >= sockets_min
        });
        let (v4, v6_count) = listeners_on(addr.port());
        assert!(all_bound, "{addr}: listeners {v4:?}");
        assert!(
            v4.iter().all(|ip| *ip == LOOPBACK),
            "{addr}: listeners {v4:?}"
        );
        assert_eq!(v6_count, 0, "{addr}: an IPv6 socket listens on the port");
        let other = SocketAddr::from(([127, 0, 0, 2], addr.port()));
        assert!(
            TcpStream::connect_timeout(&other, Duration::from_secs(2)).is_err(),
            "{other} accepted a connection"
        );
    }
}

// Proves a bad `bindAddress`, and a standalone name server address outside `bindAddress`,
// stop the broker with the configuration status and a message naming the key.
#[test]
fn bad_bind_address_settings_exit_with_the_config_status() {
    let store = TempDir::new("startup-bad-bind");
    let namesrv = format!("127.0.0.1:{}", free_port());
    let (code, stderr) = common::run_to_exit(
        &["--bind-address", "localhost", "--namesrv", &namesrv],
        store.path(),
    );
    assert_eq!(code, Some(EXIT_CONFIG), "stderr: {stderr}");
    assert!(stderr.contains("`bindAddress`"), "stderr: {stderr}");
    let outside = format!("127.0.0.2:{}", free_port());
    let (code, stderr) = common::run_to_exit(
        &[
            "--bind-address",
            "127.0.0.1",
            "--listen-port",
            &free_port().to_string(),
            "--namesrv",
            &outside,
        ],
        store.path(),
    );
    assert_eq!(code, Some(EXIT_CONFIG), "stderr: {stderr}");
    assert!(stderr.contains("bindAddress 127.0.0.1"), "stderr: {stderr}");
}

// Proves a brokerId that does not fit the role stops the broker with the configuration
// status and names the key: a slave with the master's id 0, a master with a slave's id.
#[test]
fn role_and_id_mismatch_exits_with_the_config_status() {
    let store = TempDir::new("startup-slave");
    let namesrv = format!("127.0.0.1:{}", free_port());
    for option in ["brokerRole=SLAVE", "brokerId=1"] {
        let (code, stderr) =
            common::run_to_exit(&["-o", option, "--namesrv", &namesrv], store.path());
        assert_eq!(code, Some(EXIT_CONFIG), "{option}: stderr: {stderr}");
        assert!(stderr.contains("brokerId"), "stderr: {stderr}");
        assert!(stderr.contains("brokerRole"), "stderr: {stderr}");
    }
}

// Proves a broker whose listen port is taken exits with the bind status (not the storage
// one) and says which port, instead of sharing the port or hanging.
#[test]
fn busy_listen_port_exits_with_the_bind_status() {
    let taken = TcpListener::bind((LOOPBACK, 0)).expect("bind a port to occupy");
    let port = taken.local_addr().expect("address").port();
    let store = TempDir::new("startup-busy-port");
    let namesrv = format!("127.0.0.1:{}", free_port());
    let args = [
        "--bind-address",
        "127.0.0.1",
        "--listen-port",
        &port.to_string(),
        "--namesrv",
        &namesrv,
    ];
    // The port probe waits up to 10 s for a dying listener before it gives up.
    let (code, stderr) = common::run_to_exit(&args, store.path());
    assert_eq!(code, Some(EXIT_BIND), "stderr: {stderr}");
    assert!(stderr.contains("(Bind)"), "stderr: {stderr}");
    assert!(stderr.contains(&port.to_string()), "stderr: {stderr}");
    drop(taken);
}

// Proves `bindAddress` may be an IPv6 address: a standalone broker told `::1` serves a request
// on [::1] on its broker port and runs its embedded name server on [::1] too.
#[test]
fn an_ipv6_bind_address_serves_on_ipv6() {
    let store = TempDir::new("startup-ipv6");
    let loopback_v6 = std::net::IpAddr::V6(std::net::Ipv6Addr::LOCALHOST);
    let broker_addr = SocketAddr::new(loopback_v6, free_port());
    let namesrv_addr = SocketAddr::new(loopback_v6, free_port());
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_comet-broker"));
    command
        .args([
            "--standalone",
            "--no-pin",
            "--cores",
            "1",
            "--bind-address",
            "::1",
        ])
        .args(["--listen-port", &broker_addr.port().to_string()])
        .args(["-o", &format!("haListenPort={}", free_port())])
        .args(["--namesrv", &namesrv_addr.to_string()])
        .arg("--store")
        .arg(store.path());
    let _broker = comet_test_support::ChildGuard::spawn("comet-broker", &mut command);
    for addr in [broker_addr, namesrv_addr] {
        comet_test_support::wait_for_port(addr, Duration::from_secs(60));
    }
    let mut client = common::Client::connect(broker_addr);
    let request =
        comet_proto::RemotingCommand::request(comet_proto::RequestCode::GET_BROKER_RUNTIME_INFO, 0);
    let response = client.call(request);
    assert_eq!(response.response_code(), comet_proto::ResponseCode::SUCCESS);
}
