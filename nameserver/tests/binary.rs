//! The `comet-nameserver` binary: `-c` reads a namesrv.properties file, a flag overrides it,
//! and the process serves routes on the configured port.

mod common;

use std::process::{Child, Command};
use std::time::Duration;

use comet_proto::ResponseCode;
use common::{eventually, route_request, Client};

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

// Proves the binary starts from a properties file (comments, RocketMQ keys), that the
// `--listen-port` flag overrides the file's `listenPort`, and that it answers requests.
#[test]
fn binary_reads_config_file_and_flags() {
    let directory = tempfile::tempdir().unwrap();
    let file_port = free_port();
    let flag_port = free_port();
    let config = directory.path().join("namesrv.properties");
    let kv_path = directory.path().join("kv").join("kvConfig.json");
    let text = format!(
        "# test config\nlistenPort={file_port}\nbindAddress=127.0.0.1\nkvConfigPath={}\nrocketmqHome=/nowhere\n",
        kv_path.display()
    );
    std::fs::write(&config, text).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_comet-nameserver"))
        .arg("-c")
        .arg(&config)
        .arg("--listen-port")
        .arg(flag_port.to_string())
        .env("RUST_LOG", "warn")
        .spawn()
        .unwrap();
    let _child = KillOnDrop(child);
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], flag_port));
    let up = eventually(Duration::from_secs(10), || {
        std::net::TcpStream::connect(addr).is_ok()
    });
    assert!(up, "binary never listened on the flag's port");
    let mut client = Client::connect(addr);
    let response = client.call(route_request("NoSuchTopic"));
    assert_eq!(response.response_code(), ResponseCode::TOPIC_NOT_EXIST);
    let file_addr = std::net::SocketAddr::from(([127, 0, 0, 1], file_port));
    assert!(
        std::net::TcpStream::connect(file_addr).is_err(),
        "file port should be overridden"
    );
}
