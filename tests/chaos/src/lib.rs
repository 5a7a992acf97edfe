//! The failover chaos suite (tests/chaos/README.md): a harness that runs Comet's controller
//! group and one controller-mode broker set on this machine, each broker in its own network
//! namespace; a workload of ordered producers; faults (kills, freezes, partitions) injected
//! while it runs; and a checker that compares every acknowledged send with what the final
//! master serves.

pub mod checker;
pub mod cluster;
pub mod error;
pub mod faults;
pub mod net;
pub mod wire;
pub mod workload;

pub use error::ChaosError;
