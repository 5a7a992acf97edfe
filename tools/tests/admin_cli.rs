//! comet-admin against a real standalone broker: every subcommand that reads or changes a
//! topic, a broker or a group runs and prints what the broker holds.

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The broker binary beside this package's binary (built by `cargo test --workspace`).
fn broker_binary() -> PathBuf {
    let admin = PathBuf::from(env!("CARGO_BIN_EXE_comet-admin"));
    let broker = admin.with_file_name("comet-broker");
    assert!(
        broker.exists(),
        "{} is missing: run `cargo build -p comet-broker` (or the workspace tests)",
        broker.display()
    );
    broker
}

struct Running(Child, PathBuf);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_dir_all(&self.1);
    }
}

fn wait_for(port: u16) {
    // Generous: a loaded machine can take a while to start every shard.
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "port {port} never opened");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn admin(namesrv: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_comet-admin"))
        .args(["-n", namesrv])
        .args(args)
        .output()
        .unwrap()
}

fn stdout_of(output: &Output) -> String {
    assert!(
        output.status.success(),
        "comet-admin failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

// Proves the CLI creates a topic, lists it, shows its route, status, the cluster and the
// broker's runtime figures, and reports a clear error for a topic that does not exist.
#[test]
fn admin_commands_against_a_standalone_broker() {
    let store = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("admin-cli-{}", std::process::id()));
    let (broker_port, namesrv_port) = (free_port(), free_port());
    let namesrv = format!("127.0.0.1:{namesrv_port}");
    let child = Command::new(broker_binary())
        .args(["--standalone", "--no-pin", "--cores", "2"])
        .args([
            "--listen-port",
            &broker_port.to_string(),
            "--namesrv",
            &namesrv,
        ])
        .args([
            "--store",
            &store.display().to_string(),
            "-o",
            "mappedFileSizeCommitLog=16777216",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _running = Running(child, store);
    wait_for(broker_port);
    wait_for(namesrv_port);
    let deadline = Instant::now() + Duration::from_secs(15);
    while !stdout_of(&admin(&namesrv, &["cluster-list"])).contains(&format!(":{broker_port}")) {
        assert!(Instant::now() < deadline, "the broker never registered");
        std::thread::sleep(Duration::from_millis(100));
    }
    let created = stdout_of(&admin(
        &namesrv,
        &["update-topic", "-t", "AdminCliTopic", "-q", "3"],
    ));
    assert!(created.contains("AdminCliTopic"), "{created}");
    let deadline = Instant::now() + Duration::from_secs(15);
    while !stdout_of(&admin(&namesrv, &["topic-list"]))
        .lines()
        .any(|line| line == "AdminCliTopic")
    {
        assert!(
            Instant::now() < deadline,
            "the topic never reached the name server"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let route = stdout_of(&admin(&namesrv, &["topic-route", "-t", "AdminCliTopic"]));
    assert!(route.contains("broker-a 3 3 6"), "{route}");
    let status = stdout_of(&admin(&namesrv, &["topic-status", "-t", "AdminCliTopic"]));
    assert_eq!(
        status
            .lines()
            .filter(|line| line.starts_with("broker-a "))
            .count(),
        3,
        "{status}"
    );
    let broker = format!("127.0.0.1:{broker_port}");
    let runtime = stdout_of(&admin(&namesrv, &["broker-status", "-b", &broker]));
    assert!(runtime.contains("brokerVersionDesc"), "{runtime}");
    let missing = admin(&namesrv, &["topic-route", "-t", "NoSuchTopic"]);
    assert!(!missing.status.success());
    assert!(!String::from_utf8_lossy(&missing.stderr).is_empty());
}
