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
    let layout = Layout {
        bin_dir,
        work_dir: work_dir.clone(),
    };
    let mut cluster = Cluster::start(layout, &network)?;
    let mut rng = Rng::new(seed);
    let mut failure = None;
    'rounds: for round in 1..=args.rounds {
        for fault in &faults {
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
            match outcome {
                Ok(result) if result.summary.violations.is_empty() => {
                    let s = &result.summary;
                    println!(
                        "{line} PASS acked {} failed-attempts {} served {} duplicates {} \
                         master {}->{} ({seconds:.1} s)",
                        s.acked,
                        s.failed_attempts,
                        s.served,
                        s.duplicates,
                        result.masters.0,
                        result.masters.1
                    );
                }
                Ok(result) => {
                    let s = &result.summary;
                    println!(
                        "{line} FAIL acked {} served {} violations {} ({seconds:.1} s)",
                        s.acked,
                        s.served,
                        s.violations.len()
                    );
                    for violation in s.violations.iter().take(30) {
                        println!("    {violation}");
                    }
                    failure = Some(ChaosError::Check(format!(
                        "round {round} {}: {} violation(s), first: {}",
                        fault.name(),
                        s.violations.len(),
                        s.violations[0]
                    )));
                    break 'rounds;
                }
                Err(error) => {
                    println!("{line} FAIL {error} ({seconds:.1} s)");
                    for path in cluster.dump_stacks() {
                        println!("    thread stacks: {}", path.display());
                    }
                    for line in cluster.log_errors() {
                        println!("    {line}");
                    }
                    failure = Some(error);
                    break 'rounds;
                }
            }
        }
    }
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
            eprintln!("comet-chaos: logs kept:");
            for log in logs {
                eprintln!("    {}", log.display());
            }
            Err(error)
        }
    }
}
