//! Start-up failures: the process stops at once with a clear message and an exit status that
//! names the class of failure (see `comet_rt::fatal::FatalReason`).

use std::net::TcpListener;
use std::process::Command;
use std::time::Duration;

use comet_test_support::{broker_binary, free_port, TempDir};

/// Exit status of a listener that could not bind (`FatalReason::Bind`).
const EXIT_BIND: i32 = 73;

// Proves a broker whose listen port is taken exits with the bind status (not the storage
// one) and says which port, instead of sharing the port or hanging.
#[test]
fn busy_listen_port_exits_with_the_bind_status() {
    let taken = TcpListener::bind("0.0.0.0:0").expect("bind a port to occupy");
    let port = taken.local_addr().expect("address").port();
    let store = TempDir::new("startup-busy-port");
    let mut child = Command::new(broker_binary())
        .args(["--standalone", "--cores", "1"])
        .args(["--listen-port", &port.to_string()])
        .args(["--namesrv", &format!("127.0.0.1:{}", free_port())])
        .arg("--store")
        .arg(store.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start comet-broker");
    // The port probe waits up to 10 s for a dying listener before it gives up.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("comet-broker still running 30 s after start on a busy port");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr)
        .expect("read stderr");
    assert_eq!(status.code(), Some(EXIT_BIND), "stderr: {stderr}");
    assert!(stderr.contains("(Bind)"), "stderr: {stderr}");
    assert!(stderr.contains(&port.to_string()), "stderr: {stderr}");
    drop(taken);
}
