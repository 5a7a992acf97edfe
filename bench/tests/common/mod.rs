//! What the bench's end-to-end tests share: running comet-bench against a test broker and
//! reading its JSON report.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use comet_test_support::{run_to_exit, Broker};
use serde_json::Value;

/// Longest a bench run of this test may take before it is killed and the test fails.
pub const RUN_LIMIT: Duration = Duration::from_secs(60);

/// Runs comet-bench with `args` (plus --namesrv, --quiet, --json), bounded in time, and
/// returns its JSON report.
pub fn bench(broker: &Broker, dir: &Path, name: &str, args: &[&str]) -> Value {
    let json = dir.join(format!("{name}.json"));
    let mut command = Command::new(env!("CARGO_BIN_EXE_comet-bench"));
    command
        .args(["--namesrv", &broker.namesrv(), "--quiet"])
        .args(["--json", &json.display().to_string()])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    let status = run_to_exit(&format!("comet-bench {name}"), &mut command, RUN_LIMIT).status;
    assert!(status.success(), "comet-bench {name} failed: {status}");
    let text = std::fs::read_to_string(&json).expect("read the JSON report");
    serde_json::from_str(&text).expect("the report is JSON")
}

/// A numeric field of a report; panics naming it when missing.
pub fn number(report: &Value, field: &str) -> u64 {
    report[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{field} missing in {report}"))
}
