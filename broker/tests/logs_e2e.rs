//! End-to-end tests of the broker's log formats (docs/operations.md#logs) against a real
//! `comet-broker --standalone` process whose standard error goes to a file.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use comet_proto::ResponseCode;
use comet_test_support::{run_to_exit, wait_for};
use common::{send_request, Broker, TempDir};

/// The JSON objects of the log file so far; panics on a line that is not one.
fn json_lines(log: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect()
}

// Proves that with logFormat json a refused request's warning is one JSON object a line
// carrying the level, the shard that served it, and the request's code, opaque, topic,
// queueId and group as sent, and that every line the broker wrote parses as JSON.
#[test]
fn a_refused_send_is_logged_as_json_with_its_wire_fields() {
    let dir = TempDir::new("logs-json");
    let log = dir.path().join("broker.log");
    let broker = Broker::start_logging(
        &dir.path().join("store"),
        2,
        &["--log-format", "json", "-o", "autoCreateTopicEnable=false"],
        &log,
    );
    let mut client = broker.client();
    let request = send_request("NoSuchTopic", 1, b"body", None, None);
    let code = request.code;
    let response = client.call(request);
    assert_eq!(response.response_code(), ResponseCode::TOPIC_NOT_EXIST);
    let line = wait_for("the refusal's log line", Duration::from_secs(20), || {
        json_lines(&log).into_iter().find(|line| {
            line["msg"]
                .as_str()
                .is_some_and(|m| m.contains("NoSuchTopic"))
        })
    });
    assert_eq!(line["level"], "warn", "{line}");
    let shard = line["shard"]
        .as_u64()
        .unwrap_or_else(|| panic!("no shard: {line}"));
    assert!(shard < 2, "{line}");
    assert_eq!(line["code"], code, "{line}");
    assert_eq!(line["opaque"], response.opaque, "{line}");
    assert_eq!(line["topic"], "NoSuchTopic", "{line}");
    assert_eq!(line["queueId"], 1, "{line}");
    assert_eq!(line["group"], "test_pg", "{line}");
    assert_eq!(line["target"], "comet_broker::processor::send", "{line}");
    assert!(
        line["ts"].as_str().is_some_and(|ts| ts.ends_with('Z')),
        "{line}"
    );
    drop(client);
    drop(broker);
    assert!(!json_lines(&log).is_empty());
}

// Proves an unknown log format stops the broker at start with the config exit status and a
// message naming the formats it takes, rather than falling back to one silently.
#[test]
fn an_unknown_log_format_is_refused() {
    let dir = TempDir::new("logs-refused");
    let mut command = Command::new(env!("CARGO_BIN_EXE_comet-broker"));
    command
        .args(["--standalone", "--no-pin", "--cores", "1"])
        .args(["--bind-address", "127.0.0.1"])
        .arg("--store")
        .arg(dir.path().join("store"))
        .args(["--log-format", "xml"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let output = run_to_exit(
        "comet-broker --log-format xml",
        &mut command,
        Duration::from_secs(60),
    );
    assert_eq!(output.status.code(), Some(72), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("logFormat") && stderr.contains("text, kv or json"),
        "{stderr}"
    );
}
