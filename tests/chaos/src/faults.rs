//! The faults and one round: settle, run the workload, inject one fault, heal, restart what
//! was killed, wait for a master with an in-sync slave again, stop the workload and check.

use std::time::{Duration, Instant};

use crate::checker::{check, Served, Summary};
use crate::cluster::Cluster;
use crate::net::{Cut, Network, NAMESRV_ADDR};
use crate::workload::{Workload, QUEUES};
use crate::{wire, ChaosError};

/// How long the cluster may take to settle, elect, or show an effect.
const CONVERGE_LIMIT: Duration = Duration::from_secs(60);
/// SEND_OKs required after a fault took effect and again after healing, showing that the
/// broker set serves writes in that state.
const PROGRESS_SENDS: usize = 30;
/// How finely the first SEND_OK after an election is looked for.
const RECOVERY_POLL: Duration = Duration::from_millis(5);

/// One kind of fault, injected while the workload runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// SIGKILL of the master.
    KillMaster,
    /// SIGSTOP of the master until the other broker is elected (beyond its lease), then
    /// SIGCONT.
    FreezeMaster,
    /// The master cut off from the controllers (and name servers) and its slave, while
    /// clients still reach it.
    PartitionMaster,
    /// Every packet of the slave dropped.
    IsolateSlave,
    /// SIGKILL of the controller group's leader.
    KillControllerLeader,
    /// SIGKILL of the master and the controller leader together.
    KillMasterAndLeader,
}

impl Fault {
    /// Every fault, in the order a run injects them.
    pub const ALL: [Fault; 6] = [
        Fault::KillMaster,
        Fault::FreezeMaster,
        Fault::PartitionMaster,
        Fault::IsolateSlave,
        Fault::KillControllerLeader,
        Fault::KillMasterAndLeader,
    ];

    /// Its name on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Fault::KillMaster => "kill-master",
            Fault::FreezeMaster => "freeze-master",
            Fault::PartitionMaster => "partition-master",
            Fault::IsolateSlave => "isolate-slave",
            Fault::KillControllerLeader => "kill-controller-leader",
            Fault::KillMasterAndLeader => "kill-master-and-leader",
        }
    }

    /// The fault named `name`.
    pub fn parse(name: &str) -> Option<Fault> {
        Fault::ALL.into_iter().find(|fault| fault.name() == name)
    }
}

/// A small deterministic generator (splitmix64), so a seed replays a run's choices.
pub struct Rng(u64);

impl Rng {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// A number in `low..high`.
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        low + z % (high - low).max(1)
    }
}

/// Polls `condition` every 100 ms until it holds; a timeout naming `what` otherwise.
fn wait(what: &str, condition: impl FnMut() -> bool) -> Result<(), ChaosError> {
    if poll(condition) {
        Ok(())
    } else {
        Err(ChaosError::Timeout(what.to_owned()))
    }
}

/// Polls `condition` every 100 ms for at most [`CONVERGE_LIMIT`]; whether it held.
fn poll(condition: impl FnMut() -> bool) -> bool {
    poll_every(Duration::from_millis(100), condition)
}

/// Polls `condition` every `interval` for at most [`CONVERGE_LIMIT`]; whether it held.
fn poll_every(interval: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + CONVERGE_LIMIT;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(interval);
    }
}

/// Waits until the workload has `more` SEND_OKs than now.
fn wait_for_progress(workload: &Workload, more: usize, when: &str) -> Result<(), ChaosError> {
    let target = workload.acked() + more;
    if poll(|| workload.acked() >= target) {
        return Ok(());
    }
    Err(ChaosError::Timeout(format!(
        "{more} more SEND_OKs {when} ({} SEND_OKs, {} failed attempts, the latest: {})",
        workload.acked(),
        workload.failed(),
        workload.last_failure()
    )))
}

/// The member leading the controller group, once one does.
fn wait_for_leader(cluster: &Cluster) -> Result<usize, ChaosError> {
    let mut leader = None;
    wait("a controller leader", || {
        leader = cluster.controller_leader();
        leader.is_some()
    })?;
    leader.ok_or_else(|| ChaosError::Timeout("a controller leader".into()))
}

/// What a round found.
pub struct RoundResult {
    /// The checker's figures.
    pub summary: Summary,
    /// The master that was faulted (or whose slave was), and the final master.
    pub masters: (usize, usize),
    /// From the fault to the slave answering as master, for the faults that depose one.
    pub elected_after: Option<Duration>,
    /// From the fault to the first SEND_OK a producer got after the election (the recovery
    /// time clients see), for the faults that depose a master.
    pub recovered_after: Option<Duration>,
}

/// Runs one round of `fault` on topic `topic` with `producers` producers.
pub fn run_round(
    cluster: &mut Cluster,
    network: &Network,
    fault: Fault,
    topic: &str,
    producers: usize,
    rng: &mut Rng,
) -> Result<RoundResult, ChaosError> {
    let master = cluster.wait_for_master_with_slave(&[topic], QUEUES, CONVERGE_LIMIT)?;
    let slave = 1 - master;
    let workload = Workload::start(&cluster.namesrv_list(), topic, producers, topic);
    let warmup = usize::try_from(rng.between(50, 300)).unwrap_or(50);
    wait_for_progress(&workload, warmup, "before the fault")?;
    let slave_addr = cluster.brokers[slave].addr;
    let faulted_at = Instant::now();
    let (mut elected_after, mut recovered_after) = (None, None);
    // Until the slave answers as master, then until a producer's next SEND_OK (polled
    // finely: it is the recovery time clients see).
    let elected = |elected_after: &mut Option<Duration>, recovered_after: &mut Option<Duration>| {
        wait("the slave elected master", || wire::is_master(slave_addr))?;
        *elected_after = Some(faulted_at.elapsed());
        let before = workload.acked();
        if poll_every(RECOVERY_POLL, || workload.acked() > before) {
            *recovered_after = Some(faulted_at.elapsed());
        }
        wait_for_progress(&workload, PROGRESS_SENDS, "on the new master alone")
    };
    // Once the controller elected the slave, or dropped an isolated slave from the
    // sync-state set, the broker left serving answers SEND_OK alone: a SYNC_MASTER in
    // controller mode waits for the members of the accepted set (docs/architecture.md#failover).
    // So every fault must let the workload progress while it lasts, not only after the heal.
    match fault {
        Fault::KillMaster => {
            cluster.kill_broker(master);
            elected(&mut elected_after, &mut recovered_after)?;
        }
        Fault::FreezeMaster => {
            cluster.signal_broker(master, libc::SIGSTOP);
            // The controller elects the slave only after the master's heartbeats stopped
            // for the full timeout, longer than the master's lease.
            let outcome = elected(&mut elected_after, &mut recovered_after);
            cluster.signal_broker(master, libc::SIGCONT);
            outcome?;
        }
        Fault::PartitionMaster => {
            let slave_ip = network.namespaces[slave].addr;
            network.partition(master, &Cut::Peers(vec![NAMESRV_ADDR, slave_ip]))?;
            let outcome = elected(&mut elected_after, &mut recovered_after);
            network.heal(master)?;
            outcome?;
        }
        Fault::IsolateSlave => {
            network.partition(slave, &Cut::All)?;
            let dropped = wait("the slave dropped from the sync-state set", || {
                cluster.sync_state_set_size() == Some(1)
            })
            .and_then(|()| wait_for_progress(&workload, PROGRESS_SENDS, "on the master alone"));
            network.heal(slave)?;
            dropped?;
        }
        Fault::KillControllerLeader => {
            let old = wait_for_leader(cluster)?;
            cluster.kill_member(old);
            wait("another controller leader", || {
                cluster.controller_leader().is_some_and(|new| new != old)
            })?;
            wait_for_progress(&workload, PROGRESS_SENDS, "after the leader died")?;
        }
        Fault::KillMasterAndLeader => {
            let leader = wait_for_leader(cluster)?;
            cluster.kill_member(leader);
            cluster.kill_broker(master);
            elected(&mut elected_after, &mut recovered_after)?;
        }
    }
    cluster.restart_dead()?;
    let final_master = match cluster.wait_for_master_with_slave(&[topic], QUEUES, CONVERGE_LIMIT) {
        Ok(master) => master,
        Err(error) => return Err(check_unhealed(cluster, workload, topic, error)),
    };
    wait_for_progress(&workload, PROGRESS_SENDS, "after healing")?;
    let history = workload.stop()?;
    let served = pull_everything(cluster.brokers[final_master].addr, topic)?;
    Ok(RoundResult {
        summary: check(&history, &served),
        masters: (master, final_master),
        elected_after,
        recovered_after,
    })
}

/// The evidence of a round whose broker set did not heal: the checker's result on whichever
/// broker serves as master now, if one does.
fn check_unhealed(
    cluster: &Cluster,
    workload: Workload,
    topic: &str,
    error: ChaosError,
) -> ChaosError {
    let history = match workload.stop() {
        Ok(history) => history,
        Err(stopped) => return stopped,
    };
    let check = match cluster.masters()[..] {
        [master] => match pull_everything(cluster.brokers[master].addr, topic) {
            Ok(served) => {
                let summary = check(&history, &served);
                format!(
                    "broker {master}: acked {} served {} duplicates {} violations {}{}",
                    summary.acked,
                    summary.served,
                    summary.duplicates,
                    summary.violations.len(),
                    summary
                        .violations
                        .iter()
                        .take(10)
                        .map(|violation| format!("; {violation}"))
                        .collect::<String>()
                )
            }
            Err(pull) => format!("broker {master} could not be pulled: {pull}"),
        },
        ref masters => format!("no single master (masters: {masters:?})"),
    };
    ChaosError::NotHealed {
        reason: error.to_string(),
        check,
    }
}

/// Every queue of `topic` from offset 0 on the broker at `addr`.
fn pull_everything(addr: std::net::SocketAddr, topic: &str) -> Result<Vec<Served>, ChaosError> {
    let mut served = Vec::new();
    for queue in 0..QUEUES {
        let mut messages = None;
        wait(
            &format!("queue {queue} of {topic} pulled from {addr}"),
            || {
                messages = wire::pull_queue(addr, topic, queue);
                messages.is_some()
            },
        )?;
        served.extend(
            messages
                .unwrap_or_default()
                .into_iter()
                .map(|message| Served {
                    queue,
                    offset: message.queue_offset,
                    body: message.body.to_vec(),
                }),
        );
    }
    Ok(served)
}
