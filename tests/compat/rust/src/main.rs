//! `compat-rust`: the compatibility scenarios of the Rust client from the Rust package registry
//! (`rocketmq-client-rust` 1.0.0) against one name server:
//!
//! ```text
//! compat-rust --namesrv 127.0.0.1:9876 [--only a,b]
//! ```
//!
//! Scenarios: producer sync, async (callback), one-way, batch and selector (ordered) sends,
//! each checked by a push consumer, and a clustering push consumer whose two members split the
//! queues and filter by tag. Topics are created explicitly with the crate's own admin client.
//! Every message carries a unique `cid` property; what arrives is compared with what was sent
//! (topic, body, tags, keys, every property, system fields). Prints PASS/FAIL per scenario
//! and `scenarios: N passed, N failed`; exits 1 on any failure, 2 on bad arguments.

mod check;
mod client;
mod scenarios;

use std::time::{Duration, Instant};

const USAGE: &str = "usage: compat-rust --namesrv HOST:PORT [--only scenario,...]";
/// Whole-scenario deadline: a hang fails the scenario instead of blocking the run.
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(150);

fn usage(why: &str) -> ! {
    eprintln!("error: {why}\n{USAGE}");
    std::process::exit(2);
}

fn parse_args() -> (String, Option<Vec<String>>) {
    let mut namesrv = None;
    let mut only = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| usage(&format!("{arg} needs a value")))
        };
        match arg.as_str() {
            "--namesrv" => namesrv = Some(value()),
            "--only" => only = Some(value().split(',').map(str::to_owned).collect()),
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => usage(&format!("unknown argument {other}")),
        }
    }
    (
        namesrv.unwrap_or_else(|| usage("--namesrv is required")),
        only,
    )
}

fn main() {
    let (namesrv, only) = parse_args();
    let mut picked = scenarios::ALL.to_vec();
    if let Some(names) = only {
        for name in &names {
            if !scenarios::ALL.iter().any(|(known, _)| known == name) {
                usage(&format!("unknown scenario {name}"));
            }
        }
        picked.retain(|(known, _)| names.iter().any(|n| n == known));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap_or_else(|e| {
            eprintln!("error: cannot start the tokio runtime: {e}");
            std::process::exit(1);
        });
    let failed = runtime.block_on(run_all(&namesrv, &picked));
    // Clients that a timed-out scenario left behind may still hold tasks: do not wait.
    runtime.shutdown_timeout(Duration::from_secs(5));
    std::process::exit(i32::from(failed > 0));
}

async fn run_all(namesrv: &str, picked: &[(&'static str, scenarios::Scenario)]) -> usize {
    println!("rocketmq-client-rust 1.0.0 against name server {namesrv}");
    let env = match client::Env::start(namesrv).await {
        Ok(env) => env,
        Err(e) => {
            println!("FAIL setup: {e}");
            println!("scenarios: 0 passed, {} failed", picked.len());
            return picked.len().max(1);
        }
    };
    let mut failed = Vec::new();
    for (name, scenario) in picked {
        let start = Instant::now();
        let outcome = tokio::time::timeout(SCENARIO_TIMEOUT, scenario(&env, name)).await;
        let ms = start.elapsed().as_millis();
        match outcome {
            Ok(Ok(detail)) => println!("PASS {name:<28} ({ms:>6} ms) {detail}"),
            Ok(Err(reason)) => {
                println!("FAIL {name:<28} ({ms:>6} ms): {reason}");
                failed.push(*name);
            }
            Err(_) => {
                println!(
                    "FAIL {name:<28} ({ms:>6} ms): timed out after {} s",
                    SCENARIO_TIMEOUT.as_secs()
                );
                failed.push(*name);
            }
        }
    }
    env.shutdown().await;
    if !failed.is_empty() {
        println!("failed scenarios: {}", failed.join(", "));
    }
    println!(
        "scenarios: {} passed, {} failed",
        picked.len() - failed.len(),
        failed.len()
    );
    failed.len()
}
