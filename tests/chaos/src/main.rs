//! `comet-chaos`: runs rounds of failover faults against a controller group and a broker set
//! on this machine (tests/chaos/README.md) and prints one result line per round. Exits 0
//! when every round passed, 1 when one failed (with the evidence and the logs' paths), 2
//! when it cannot run (not root, no `ip`, no packet filter, no binaries).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use comet_chaos::cluster::{Cluster, Layout};
use comet_chaos::faults::{run_round, Fault, Rng};
use comet_chaos::net::{Firewall, Network};
use comet_chaos::ChaosError;

/// Failover chaos rounds against Comet's controller and a controller-mode broker pair.
#[derive(Parser, Debug)]
#[command(name = "comet-chaos")]
struct Args {
    /// Rounds of each fault.
    #[arg(long, default_value_t = 1)]
    rounds: u32,
    /// Faults to inject, comma-separated (default: all): kill-master, freeze-master,
    /// partition-master, isolate-slave, kill-controller-leader, kill-master-and-leader.
    #[arg(long, value_delimiter = ',')]
    faults: Vec<String>,
    /// Seed of the run's choices (how long the workload runs before each fault); default:
    /// from the clock. Printed, so a run can be replayed.
    #[arg(long)]
    seed: Option<u64>,
    /// Producers in the workload.
    #[arg(long, default_value_t = 4)]
    producers: usize,
    /// The directory holding comet-broker and comet-nameserver (default: this program's).
    #[arg(long)]
    bin_dir: Option<PathBuf>,
    /// Where stores and logs go (default: `tmp/chaos-<pid>` next to the binaries'
    /// directory); removed after a passing run, kept after a failing one.
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// Packet filter for partitions: iptables or nft (default: whichever is installed).
    #[arg(long)]
    firewall: Option<String>,
    /// Go on after a failed round: keep its work directory (renamed after the round), start
    /// a fresh cluster, and count the failure in the final table. Without it the run stops
    /// at its first failure.
    #[arg(long)]
    keep_going: bool,
    /// The brokers' controllerHeartBeatTimeoutMills (Java's default is 10000); at least
    /// 1000, since the brokers heartbeat every 300 ms and the lease needs the interval under
    /// 30% of it.
    #[arg(long, default_value_t = comet_chaos::cluster::HEARTBEAT_TIMEOUT_MS)]
    controller_timeout_ms: u64,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error @ ChaosError::Prerequisite(_)) => {
            eprintln!("comet-chaos: {error}");
            ExitCode::from(2)
        }
        Err(error) => {
            eprintln!("comet-chaos: FAILED: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<(), ChaosError> {
    let faults = if args.faults.is_empty() {
        Fault::ALL.to_vec()
    } else {
        args.faults
            .iter()
            .map(|name| {
                Fault::parse(name).ok_or_else(|| {
                    ChaosError::Prerequisite(format!("unknown fault {name:?} in --faults"))
                })
            })
            .collect::<Result<Vec<_>, _>>()?
    };
    let firewall = match args.firewall.as_deref() {
        None => Firewall::detect()?,
        Some("iptables") => Firewall::Iptables,
        Some("nft") => Firewall::Nft,
        Some(other) => {
            return Err(ChaosError::Prerequisite(format!(
                "--firewall {other:?}: iptables or nft"
            )))
        }
    };
    let bin_dir = match &args.bin_dir {
        Some(dir) => dir.clone(),
        None => std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(PathBuf::from))
            .ok_or_else(|| ChaosError::Prerequisite("cannot find this program's path".into()))?,
    };
    let work_dir = args.work_dir.clone().unwrap_or_else(|| {
        let base = bin_dir
            .parent()
            .map_or_else(|| bin_dir.clone(), PathBuf::from);
        base.join("tmp")
            .join(format!("chaos-{}", std::process::id()))
    });
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_secs())
    });
    println!(
        "comet-chaos: seed {seed}, {} round(s) of {} fault(s), {firewall:?}, work dir {}",
        args.rounds,
        faults.len(),
        work_dir.display()
    );
    let network = Network::create(2, firewall)?;
    let _ = std::fs::remove_dir_all(&work_dir);
    if args.controller_timeout_ms < 1000 {
        return Err(ChaosError::Prerequisite(format!(
            "--controller-timeout-ms {}: at least 1000",
            args.controller_timeout_ms
        )));
    }
    let layout = Layout {
        bin_dir,
        work_dir: work_dir.clone(),
        controller_timeout_ms: args.controller_timeout_ms,
    };
    let mut cluster = Cluster::start(layout.clone(), &network)?;
    let mut rng = Rng::new(seed);
    let mut tallies: Vec<Tally> = faults.iter().map(|fault| Tally::new(*fault)).collect();
    let mut failure = None;
    let mut kept = Vec::new();
    'rounds: for round in 1..=args.rounds {
        for (fault, tally) in faults.iter().zip(tallies.iter_mut()) {
            let started = Instant::now();
            let topic = format!("Chaos{round}{}", fault.name().replace('-', ""));
            let outcome = run_round(
                &mut cluster,
                &network,
                *fault,
                &topic,
                args.producers,
                &mut rng,
            );
            // A failed round may leave a broker frozen or a rule in place; the next round
            // (or the evidence) needs neither.
            cluster.resume_all();
            for index in 0..network.namespaces.len() {
                let _ = network.heal(index);
            }
            let seconds = started.elapsed().as_secs_f64();
            let line = format!("round {round} {:<24} seed {seed}", fault.name());
            tally.rounds += 1;
            let error = match outcome {
                Ok(result) => {
                    let s = &result.summary;
                    tally.lost += s.lost;
                    tally.reused_offsets += s.reused_offsets;
                    tally.acked += s.acked;
                    tally.elected_ms.extend(result.elected_after.map(millis));
                    tally
                        .recovered_ms
                        .extend(result.recovered_after.map(millis));
                    if s.violations.is_empty() {
                        tally.passed += 1;
                        let elected = result
                            .elected_after
                            .map(|elapsed| format!(" elected after {:.2} s", elapsed.as_secs_f64()))
                            .unwrap_or_default();
                        let recovered = result
                            .recovered_after
                            .map(|elapsed| {
                                format!(", SEND_OK again after {:.2} s", elapsed.as_secs_f64())
                            })
                            .unwrap_or_default();
                        println!(
                            "{line} PASS acked {} failed-attempts {} served {} duplicates {} \
                             master {}->{}{elected}{recovered} ({seconds:.1} s)",
                            s.acked,
                            s.failed_attempts,
                            s.served,
                            s.duplicates,
                            result.masters.0,
                            result.masters.1
                        );
                        continue;
                    }
                    println!(
                        "{line} FAIL acked {} served {} violations {} ({seconds:.1} s)",
                        s.acked,
                        s.served,
                        s.violations.len()
                    );
                    for violation in s.violations.iter().take(30) {
                        println!("    {violation}");
                    }
                    tally.failed_checks += 1;
                    ChaosError::Check(format!(
                        "round {round} {}: {} violation(s), first: {}",
                        fault.name(),
                        s.violations.len(),
                        s.violations[0]
                    ))
                }
                Err(error) => {
                    println!("{line} FAIL {error} ({seconds:.1} s)");
                    for path in cluster.dump_stacks() {
                        println!("    thread stacks: {}", path.display());
                    }
                    for line in cluster.log_errors() {
                        println!("    {line}");
                    }
                    tally.failed_rounds += 1;
                    error
                }
            };
            if !args.keep_going {
                failure = Some(error);
                break 'rounds;
            }
            // Keep the evidence and go on with a fresh cluster on an empty work directory.
            drop(cluster);
            let evidence = work_dir.with_file_name(format!(
                "{}-failed-{round}-{}",
                work_dir
                    .file_name()
                    .map_or_else(|| "chaos".into(), |name| name.to_string_lossy()),
                fault.name()
            ));
            let _ = std::fs::remove_dir_all(&evidence);
            if let Err(source) = std::fs::rename(&work_dir, &evidence) {
                eprintln!(
                    "comet-chaos: cannot keep {} as {}: {source}",
                    work_dir.display(),
                    evidence.display()
                );
            }
            println!("    evidence kept in {}", evidence.display());
            kept.push(evidence);
            failure.get_or_insert(error);
            cluster = Cluster::start(layout.clone(), &network)?;
        }
    }
    println!("{}", Tally::table(&tallies));
    let logs = cluster.log_paths();
    drop(cluster);
    drop(network);
    match failure {
        None => {
            let _ = std::fs::remove_dir_all(&work_dir);
            println!("comet-chaos: every round passed");
            Ok(())
        }
        Some(error) => {
            for dir in kept {
                eprintln!(
                    "comet-chaos: work directory of a failed round kept: {}",
                    dir.display()
                );
            }
            eprintln!("comet-chaos: logs kept:");
            for log in logs {
                eprintln!("    {}", log.display());
            }
            Err(error)
        }
    }
}

/// One fault's results over a run.
struct Tally {
    fault: Fault,
    rounds: u32,
    passed: u32,
    /// Rounds whose checker found a broken rule.
    failed_checks: u32,
    /// Rounds that could not finish (the broker set did not heal in time, a process hung).
    failed_rounds: u32,
    acked: usize,
    lost: usize,
    reused_offsets: usize,
    /// Fault to the slave answering as master, per round that deposed a master.
    elected_ms: Vec<u64>,
    /// Fault to the first SEND_OK after the election, per round that deposed a master.
    recovered_ms: Vec<u64>,
}

impl Tally {
    fn new(fault: Fault) -> Tally {
        Tally {
            fault,
            rounds: 0,
            passed: 0,
            failed_checks: 0,
            failed_rounds: 0,
            acked: 0,
            lost: 0,
            reused_offsets: 0,
            elected_ms: Vec::new(),
            recovered_ms: Vec::new(),
        }
    }

    /// The run's results as a Markdown table (tests/chaos/README.md keeps it).
    fn table(tallies: &[Tally]) -> String {
        let mut out = String::from(
            "| fault | rounds | passed | failed checks | failed rounds | acked | lost | \
             reused offsets | elected after (ms) | first SEND_OK after (ms) |\n\
             |---|---|---|---|---|---|---|---|---|---|\n",
        );
        for tally in tallies {
            out.push_str(&format!(
                "| `{}` | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                tally.fault.name(),
                tally.rounds,
                tally.passed,
                tally.failed_checks,
                tally.failed_rounds,
                tally.acked,
                tally.lost,
                tally.reused_offsets,
                spread(&tally.elected_ms),
                spread(&tally.recovered_ms),
            ));
        }
        out
    }
}

/// `min / median / max` of `values`, or `-` when there are none.
fn spread(values: &[u64]) -> String {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    match (sorted.first(), sorted.last()) {
        (Some(min), Some(max)) => format!("{min} / {} / {max}", sorted[sorted.len() / 2]),
        _ => "-".into(),
    }
}

fn millis(elapsed: std::time::Duration) -> u64 {
    u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
}
