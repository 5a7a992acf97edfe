//! The suite's errors: what failed to set up, or which check a round broke.

use std::path::PathBuf;

/// Why a chaos run stopped.
#[derive(Debug, thiserror::Error)]
pub enum ChaosError {
    /// A prerequisite (root, a tool, a binary) is missing.
    #[error("cannot run the chaos suite: {0}")]
    Prerequisite(String),
    /// A command the harness runs (`ip`, `iptables`, `nft`) failed.
    #[error("`{command}` failed: {output}")]
    Command {
        /// The command line.
        command: String,
        /// Its exit status and standard error.
        output: String,
    },
    /// Starting a process or writing a file failed.
    #[error("{what} ({path}): {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file or program involved.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The cluster did not reach a state before its deadline.
    #[error("timed out waiting for {0}")]
    Timeout(String),
    /// The broker set did not heal after a fault; what the current master serves was
    /// checked all the same.
    #[error("the broker set did not heal: {reason}; the checker on the master now: {check}")]
    NotHealed {
        /// What did not happen.
        reason: String,
        /// The checker's figures and first violations on the broker serving as master.
        check: String,
    },
    /// The checker found acknowledged data lost, reordered, overwritten or duplicated.
    #[error("check failed: {0}")]
    Check(String),
}
