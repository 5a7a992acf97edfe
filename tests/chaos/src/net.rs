//! The network the brokers live in: a bridge in the root namespace holding the clients'
//! address and the name servers' address, and one network namespace per broker joined to
//! it by a veth pair. Partitions are DROP rules inside a broker's namespace, written with
//! iptables or nft, whichever this machine has.
//!
//! Everything created here is removed when the [`Network`] drops, and a run first removes
//! what an interrupted earlier run may have left (the names are fixed).

use std::net::Ipv4Addr;
use std::process::Command;

use crate::ChaosError;

/// The bridge in the root namespace.
const BRIDGE: &str = "cmtchaos-br";
/// The /24 every address comes from.
const PREFIX: [u8; 3] = [10, 213, 7];
/// The bridge's first address: connections from the root namespace to a broker come from
/// it, so a partition that drops the name servers' address leaves clients through.
pub const CLIENT_ADDR: Ipv4Addr = Ipv4Addr::new(PREFIX[0], PREFIX[1], PREFIX[2], 1);
/// The bridge's second address: the name servers and their controllers listen on it.
pub const NAMESRV_ADDR: Ipv4Addr = Ipv4Addr::new(PREFIX[0], PREFIX[1], PREFIX[2], 2);

/// Runs `program args`, failing with its standard error when it exits non-zero.
pub fn run(program: &str, args: &[&str]) -> Result<String, ChaosError> {
    let command = format!("{program} {}", args.join(" "));
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|source| ChaosError::Command {
            command: command.clone(),
            output: source.to_string(),
        })?;
    if !output.status.success() {
        return Err(ChaosError::Command {
            command,
            output: format!(
                "{}: {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Whether `program` runs at all (found on PATH).
fn exists(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success())
}

/// The packet filter used for partitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Firewall {
    /// iptables (legacy or its nf_tables flavour).
    Iptables,
    /// nft.
    Nft,
}

impl Firewall {
    /// iptables when present, else nft; an error when neither is.
    pub fn detect() -> Result<Firewall, ChaosError> {
        if exists("iptables") {
            Ok(Firewall::Iptables)
        } else if exists("nft") {
            Ok(Firewall::Nft)
        } else {
            Err(ChaosError::Prerequisite(
                "neither iptables nor nft is installed (partitions need one of them)".into(),
            ))
        }
    }
}

/// What a partition drops inside one broker's namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cut {
    /// Every packet to and from these addresses.
    Peers(Vec<Ipv4Addr>),
    /// Every packet on the namespace's veth end (the broker is cut off from everyone).
    All,
}

/// One broker's namespace and its veth pair.
#[derive(Debug)]
pub struct Namespace {
    /// The namespace's name (`ip netns`).
    pub name: String,
    /// The veth end inside the namespace.
    pub inner_link: String,
    /// The broker's address.
    pub addr: Ipv4Addr,
}

/// The bridge and the brokers' namespaces; removed on drop.
#[derive(Debug)]
pub struct Network {
    /// One namespace per broker, in broker order.
    pub namespaces: Vec<Namespace>,
    firewall: Firewall,
}

fn namespace_name(index: usize) -> String {
    format!("cmtchaos-{index}")
}

fn outer_link(index: usize) -> String {
    format!("cmtch{index}-r")
}

impl Network {
    /// Checks root and the tools, removes leftovers of an earlier run, and creates the
    /// bridge and `brokers` namespaces.
    pub fn create(brokers: usize, firewall: Firewall) -> Result<Network, ChaosError> {
        // SAFETY: geteuid(2) has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return Err(ChaosError::Prerequisite(
                "it must run as root (it creates network namespaces and packet filters)".into(),
            ));
        }
        if !Command::new("ip")
            .arg("-V")
            .output()
            .is_ok_and(|output| output.status.success())
        {
            return Err(ChaosError::Prerequisite(
                "the `ip` command (iproute2) is not installed".into(),
            ));
        }
        remove_leftovers(brokers);
        // The network is built step by step into a value whose drop undoes each step, so a
        // failure half way leaves nothing behind.
        let mut network = Network {
            namespaces: Vec::new(),
            firewall,
        };
        run("ip", &["link", "add", BRIDGE, "type", "bridge"])?;
        for addr in [CLIENT_ADDR, NAMESRV_ADDR] {
            run("ip", &["addr", "add", &format!("{addr}/24"), "dev", BRIDGE])?;
        }
        run("ip", &["link", "set", BRIDGE, "up"])?;
        for index in 0..brokers {
            let name = namespace_name(index);
            let outer = outer_link(index);
            let inner = format!("cmtch{index}-n");
            let last = u8::try_from(11 + index).map_err(|_| {
                ChaosError::Prerequisite(format!("{brokers} brokers do not fit the /24"))
            })?;
            let addr = Ipv4Addr::new(PREFIX[0], PREFIX[1], PREFIX[2], last);
            run("ip", &["netns", "add", &name])?;
            network.namespaces.push(Namespace {
                name: name.clone(),
                inner_link: inner.clone(),
                addr,
            });
            run(
                "ip",
                &[
                    "link", "add", &outer, "type", "veth", "peer", "name", &inner,
                ],
            )?;
            run("ip", &["link", "set", &inner, "netns", &name])?;
            run("ip", &["link", "set", &outer, "master", BRIDGE])?;
            run("ip", &["link", "set", &outer, "up"])?;
            let in_ns = |args: &[&str]| {
                let mut full = vec!["netns", "exec", &name, "ip"];
                full.extend_from_slice(args);
                run("ip", &full)
            };
            in_ns(&["link", "set", "lo", "up"])?;
            in_ns(&["addr", "add", &format!("{addr}/24"), "dev", &inner])?;
            in_ns(&["link", "set", &inner, "up"])?;
        }
        Ok(network)
    }

    /// The packet filter partitions use.
    pub fn firewall(&self) -> Firewall {
        self.firewall
    }

    /// Drops `what` inside broker `index`'s namespace, both directions.
    pub fn partition(&self, index: usize, what: &Cut) -> Result<(), ChaosError> {
        let ns = &self.namespaces[index];
        match self.firewall {
            Firewall::Iptables => {
                let mut rules: Vec<Vec<String>> = Vec::new();
                match what {
                    Cut::Peers(peers) => {
                        for peer in peers {
                            let peer = peer.to_string();
                            rules.push(vec!["INPUT".into(), "-s".into(), peer.clone()]);
                            rules.push(vec!["OUTPUT".into(), "-d".into(), peer]);
                        }
                    }
                    Cut::All => {
                        rules.push(vec!["INPUT".into(), "-i".into(), ns.inner_link.clone()]);
                        rules.push(vec!["OUTPUT".into(), "-o".into(), ns.inner_link.clone()]);
                    }
                }
                for rule in rules {
                    let mut args = vec!["netns", "exec", &ns.name, "iptables", "-w", "-A"];
                    args.extend(rule.iter().map(String::as_str));
                    args.extend(["-j", "DROP"]);
                    run("ip", &args)?;
                }
            }
            Firewall::Nft => {
                let mut script = String::from(
                    "table inet cmtchaos {\n\
                     chain input { type filter hook input priority 0; policy accept;\n",
                );
                let (input, output) = match what {
                    Cut::Peers(peers) => {
                        let set = peers
                            .iter()
                            .map(Ipv4Addr::to_string)
                            .collect::<Vec<_>>()
                            .join(", ");
                        (
                            format!("ip saddr {{ {set} }} drop\n"),
                            format!("ip daddr {{ {set} }} drop\n"),
                        )
                    }
                    Cut::All => (
                        format!("iifname \"{}\" drop\n", ns.inner_link),
                        format!("oifname \"{}\" drop\n", ns.inner_link),
                    ),
                };
                script.push_str(&input);
                script.push_str(
                    "}\nchain output { type filter hook output priority 0; policy accept;\n",
                );
                script.push_str(&output);
                script.push_str("}\n}\n");
                let path = std::env::temp_dir().join(format!("cmtchaos-{}.nft", ns.name));
                std::fs::write(&path, script).map_err(|source| ChaosError::Io {
                    what: "writing an nft script",
                    path: path.clone(),
                    source,
                })?;
                let file = path.to_string_lossy().into_owned();
                let result = run("ip", &["netns", "exec", &ns.name, "nft", "-f", &file]);
                let _ = std::fs::remove_file(&path);
                result?;
            }
        }
        Ok(())
    }

    /// Removes every partition rule in broker `index`'s namespace.
    pub fn heal(&self, index: usize) -> Result<(), ChaosError> {
        let ns = &self.namespaces[index].name;
        match self.firewall {
            Firewall::Iptables => {
                for chain in ["INPUT", "OUTPUT"] {
                    run("ip", &["netns", "exec", ns, "iptables", "-w", "-F", chain])?;
                }
            }
            Firewall::Nft => {
                // No table means nothing to heal.
                let _ = run(
                    "ip",
                    &[
                        "netns", "exec", ns, "nft", "delete", "table", "inet", "cmtchaos",
                    ],
                );
            }
        }
        Ok(())
    }
}

impl std::ops::Drop for Network {
    fn drop(&mut self) {
        for ns in &self.namespaces {
            // Deleting a namespace deletes the veth end inside it, and with it the pair.
            let _ = run("ip", &["netns", "del", &ns.name]);
        }
        let _ = run("ip", &["link", "del", BRIDGE]);
    }
}

/// Removes the bridge, veth ends and namespaces an interrupted run may have left.
fn remove_leftovers(brokers: usize) {
    for index in 0..brokers.max(2) {
        let _ = run("ip", &["netns", "del", &namespace_name(index)]);
        let _ = run("ip", &["link", "del", &outer_link(index)]);
    }
    let _ = run("ip", &["link", "del", BRIDGE]);
}
