//! The `comet-nameserver` binary: `-c` reads a namesrv.properties file, a flag overrides it,
//! and the process serves routes on the configured port.

mod common;

use std::process::Command;
use std::time::Duration;

use comet_proto::ResponseCode;
use comet_test_support::{free_port, wait_for_port, ChildGuard};
use common::{route_request, Client, TempDir};

// Proves the binary starts from a properties file (comments, RocketMQ keys), that the
// `--listen-port` flag overrides the file's `listenPort`, and that it answers requests.
#[test]
fn binary_reads_config_file_and_flags() {
    let directory = TempDir::new("namesrv-binary");
    let file_port = free_port();
    let flag_port = free_port();
    let config = directory.path().join("namesrv.properties");
    let kv_path = directory.path().join("kv").join("kvConfig.json");
    let text = format!(
        "# test config\nlistenPort={file_port}\nbindAddress=127.0.0.1\nkvConfigPath={}\n\
         rocketmqHome=/nowhere\n",
        kv_path.display()
    );
    std::fs::write(&config, text).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_comet-nameserver"));
    command
        .arg("-c")
        .arg(&config)
        .arg("--listen-port")
        .arg(flag_port.to_string())
        .env("RUST_LOG", "warn");
    let _name_server = ChildGuard::spawn("comet-nameserver", &mut command);
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], flag_port));
    wait_for_port(addr, Duration::from_secs(10));
    let mut client = Client::connect(addr);
    let response = client.call(route_request("NoSuchTopic"));
    assert_eq!(response.response_code(), ResponseCode::TOPIC_NOT_EXIST);
    let file_addr = std::net::SocketAddr::from(([127, 0, 0, 1], file_port));
    assert!(
        std::net::TcpStream::connect(file_addr).is_err(),
        "file port should be overridden"
    );
}
