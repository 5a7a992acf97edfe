//! `comet-bench`: see the library's docs (`comet_bench`) for what is measured and how.

use std::process::ExitCode;

use clap::Parser;
use comet_bench::args::Cli;
use comet_bench::{cpu, kinds, payload, report};

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let cli = Cli::parse();
    tighten_timer_slack();
    let started_at_unix_ms = payload::unix_ns_now() / 1_000_000;
    let cpu_watch = cpu::CpuWatch::start(&cli.watch_pids);
    let outcome = match kinds::run(&cli) {
        Ok(outcome) => outcome,
        Err(error) => {
            eprintln!("comet-bench: {error}");
            return ExitCode::FAILURE;
        }
    };
    let cpu = cpu_watch.finish();
    println!();
    print!("{}", outcome.main.text());
    for (_, phase) in &outcome.others {
        print!("{}", phase.text());
    }
    for (name, value) in &outcome.extra {
        println!("  {name}: {value}");
    }
    println!("  cpu: {cpu}");
    if let Some(path) = &cli.json {
        let report = report::build(&cli, &outcome, cpu, started_at_unix_ms);
        if let Err(error) = report::write(path, &report) {
            eprintln!("comet-bench: {error}");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

/// Open-loop senders sleep until each intended send time; the default 50 µs timer slack
/// would add that much to every such sleep. Threads inherit the setting from this one.
fn tighten_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes an integer and changes only this thread's timer slack.
    let status = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    if status != 0 {
        log::debug!("PR_SET_TIMERSLACK refused; sleeps keep the default slack");
    }
}
