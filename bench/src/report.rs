//! The JSON report: one object per run.
//!
//! ```text
//! { "tool": "comet-bench", "version", "kind", "started_at_unix_ms",
//!   "params": { every flag },
//!   "environment": { "cpus", "kernel", "git_commit" },
//!   "cpu": { "bench_cpu_s", "bench_cpu_cores", "watched": [{ "pid", "cpu_s", "cpu_cores" }] },
//!   <main phase fields>          latency_us_p99, throughput_msgs_per_s, ... (summary.rs)
//!   <other phases, prefixed>     send_latency_us_p99, ... (e2e)
//!   <run-specific totals>        e2e_missing_total, foreign_messages_total, ... }
//! ```

use std::path::Path;
use std::process::Command as Process;

use serde_json::{json, Map, Value};

use crate::args::Cli;
use crate::error::{BenchError, Result};
use crate::summary::PhaseSummary;

/// What a run produced, before formatting.
pub struct Outcome {
    /// The main phase (unprefixed in JSON).
    pub main: PhaseSummary,
    /// Other phases with their JSON prefix.
    pub others: Vec<(&'static str, PhaseSummary)>,
    /// Run-specific totals.
    pub extra: Map<String, Value>,
}

/// The machine and build the run happened on.
pub fn environment() -> Value {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|text| text.trim().to_owned())
        .ok();
    let git_commit = Process::new("git")
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    json!({ "cpus": cpus, "kernel": kernel, "git_commit": git_commit })
}

/// The report object.
pub fn build(cli: &Cli, outcome: &Outcome, cpu: Value, started_at_unix_ms: u64) -> Value {
    let mut report = Map::new();
    report.insert("tool".into(), "comet-bench".into());
    report.insert("version".into(), env!("CARGO_PKG_VERSION").into());
    let kind = cli
        .command
        .as_ref()
        .map_or("produce", |command| command.name());
    report.insert("kind".into(), kind.into());
    report.insert("started_at_unix_ms".into(), started_at_unix_ms.into());
    report.insert(
        "params".into(),
        serde_json::to_value(cli).unwrap_or(Value::Null),
    );
    report.insert("environment".into(), environment());
    report.insert("cpu".into(), cpu);
    report.extend(outcome.main.json_fields(""));
    for (prefix, phase) in &outcome.others {
        report.extend(phase.json_fields(prefix));
    }
    report.extend(outcome.extra.clone());
    Value::Object(report)
}

/// Writes `report` to `path`, pretty-printed.
pub fn write(path: &Path, report: &Value) -> Result<()> {
    let text = serde_json::to_string_pretty(report).map_err(|error| BenchError::Report {
        path: path.display().to_string(),
        reason: error.to_string(),
    })?;
    std::fs::write(path, text + "\n").map_err(|error| BenchError::Report {
        path: path.display().to_string(),
        reason: error.to_string(),
    })
}
