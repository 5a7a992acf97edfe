//! The command line of `comet-chaos` refuses what it cannot run before touching the machine.

use std::process::Command;

// Proves an unknown fault or packet filter is refused with exit status 2 (cannot run) and a
// message naming it, before any namespace or cluster is made (so this needs no root).
#[test]
fn unknown_faults_and_firewalls_are_refused_up_front() {
    let chaos = env!("CARGO_BIN_EXE_comet-chaos");
    for (flags, named) in [
        (["--faults", "kill-master,melt-disk"], "\"melt-disk\""),
        (["--firewall", "pf"], "\"pf\""),
    ] {
        let run = Command::new(chaos).args(flags).output().expect("runs");
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(stderr.contains(named), "{flags:?}: {stderr}");
    }
}
