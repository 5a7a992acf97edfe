//! `compat-reverse`: the compatibility scenarios of the Java suite, driven through
//! comet-client against one name server (Apache RocketMQ's own broker in CI, to prove the
//! client; any RocketMQ-protocol broker works).
//!
//! ```text
//! compat-reverse --namesrv 127.0.0.1:9876 [--only a,b] [--scenario-timeout-s 150]
//! ```
//!
//! Prints `PASS name (ms) detail` or `FAIL name (ms): reason` per scenario, then
//! `scenarios: N passed, N failed`; exits 1 when any scenario failed, 2 on bad arguments.
//! Each scenario runs on its own thread under a deadline; on time-out its clients are shut
//! down and the run goes on (the process exits at the end, whatever is still blocked).

mod check;
mod collector;
mod ctx;
mod scenarios;

use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use check::Outcome;
use ctx::{Ctx, Shared};
use scenarios::Scenario;

const USAGE: &str =
    "usage: compat-reverse --namesrv HOST:PORT [--only scenario,...] [--scenario-timeout-s N]";

struct Args {
    namesrv: String,
    only: Option<Vec<String>>,
    scenario_timeout: Duration,
}

fn usage(why: &str) -> ! {
    eprintln!("error: {why}\n{USAGE}");
    std::process::exit(2);
}

fn parse_args() -> Args {
    let mut namesrv = None;
    let mut only = None;
    let mut timeout_s = 150;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| usage(&format!("{arg} needs a value")))
        };
        match arg.as_str() {
            "--namesrv" => namesrv = Some(value()),
            "--only" => only = Some(value().split(',').map(str::to_owned).collect()),
            "--scenario-timeout-s" => {
                timeout_s = value()
                    .parse()
                    .unwrap_or_else(|_| usage("--scenario-timeout-s takes whole seconds"));
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => usage(&format!("unknown argument {other}")),
        }
    }
    Args {
        namesrv: namesrv.unwrap_or_else(|| usage("--namesrv is required")),
        only,
        scenario_timeout: Duration::from_secs(timeout_s),
    }
}

fn pick(only: Option<Vec<String>>) -> Vec<(&'static str, Scenario)> {
    let all = scenarios::all();
    let Some(names) = only else { return all };
    names
        .iter()
        .map(|name| {
            all.iter()
                .find(|(known, _)| known == name)
                .copied()
                .unwrap_or_else(|| {
                    let known: Vec<&str> = all.iter().map(|(n, _)| *n).collect();
                    usage(&format!("unknown scenario {name}; known: {known:?}"))
                })
        })
        .collect()
}

/// Runs one scenario on its own thread; a panic or a time-out is a failure.
fn run_one(ctx: &Arc<Ctx>, scenario: Scenario, timeout: Duration) -> Outcome {
    let (done, outcome) = mpsc::channel();
    let worker = ctx.clone();
    let spawned = std::thread::Builder::new()
        .name("scenario".into())
        .spawn(move || {
            // The receiver is gone only after a time-out; the result is moot then.
            let _ = done.send(scenario(&worker));
        });
    if let Err(e) = spawned {
        return Err(check::Failure::Check(format!("cannot start a thread: {e}")));
    }
    match outcome.recv_timeout(timeout) {
        Ok(outcome) => outcome,
        Err(mpsc::RecvTimeoutError::Timeout) => Err(check::Failure::Check(format!(
            "timed out after {} s",
            timeout.as_secs()
        ))),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(check::Failure::Check(
            "the scenario panicked (message above)".into(),
        )),
    }
}

fn main() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("error")).init();
    let args = parse_args();
    let picked = pick(args.only);
    println!("comet-client against name server {}", args.namesrv);
    let shared = match Shared::new(&args.namesrv) {
        Ok(shared) => Arc::new(shared),
        Err(e) => {
            println!("FAIL setup: cannot reach the name server / broker: {e}");
            println!("scenarios: 0 passed, {} failed", picked.len());
            std::process::exit(1);
        }
    };
    let mut failed = Vec::new();
    for (name, scenario) in &picked {
        let start = Instant::now();
        let ctx = Arc::new(Ctx::new(shared.clone(), name));
        let outcome = run_one(&ctx, *scenario, args.scenario_timeout);
        ctx.close();
        let ms = start.elapsed().as_millis();
        match outcome {
            Ok(detail) => println!("PASS {name:<30} ({ms:>6} ms) {detail}"),
            Err(reason) => {
                println!("FAIL {name:<30} ({ms:>6} ms): {reason}");
                failed.push(*name);
            }
        }
    }
    shared.close();
    if !failed.is_empty() {
        println!("failed scenarios: {}", failed.join(", "));
    }
    println!(
        "scenarios: {} passed, {} failed",
        picked.len() - failed.len(),
        failed.len()
    );
    std::process::exit(i32::from(!failed.is_empty()));
}
