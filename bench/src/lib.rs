//! `comet-bench`: a load generator for any broker that speaks the Apache RocketMQ remoting
//! protocol (Comet, Apache RocketMQ, rocketmq-rust), built on `comet-client`.
//!
//! Kinds of run ([`kinds`]):
//!
//! * `produce`: sync senders on N threads, or an async window of N sends in flight (the
//!   blocking client's callbacks, or with `--async-client` comet-client's tokio
//!   `AsyncProducer` from one task), single messages or batches, closed loop (as fast as
//!   answers come) or open loop (`--rate`); with `--transactional` every message is a
//!   transaction (a half message committed at once, comet-client's `TransactionProducer`);
//! * `consume`: a push or lite-pull consumer group, rate and end-to-end latency;
//! * `e2e`: produce at a fixed rate while consuming; end-to-end latency percentiles.
//! * `pop`: RocketMQ 5.x pop consumers (comet-client's `AsyncPopConsumer`), draining a
//!   topic or popping while producing at a fixed rate.
//!
//! Measuring honestly:
//!
//! * latencies go into HdrHistograms ([`stats`]) in microseconds, 3 significant digits, up to
//!   [`limits::LATENCY_US_MAX`]; nothing is averaged away;
//! * in open-loop mode every send has an intended time on a fixed schedule
//!   ([`rate_limiter`]) and its latency is measured from that time, not from when a busy
//!   sender got round to it, so a stall shows up in the percentiles instead of hiding behind
//!   fewer samples (no coordinated omission);
//! * end-to-end latency comes from a stamp the producer writes at the front of each body
//!   ([`payload`]): the intended send time in nanoseconds since the epoch. Bodies without it
//!   (other tools' messages) fall back to the broker's `bornTimestamp`, in milliseconds;
//! * the run ends on a [`finish_condition`] (a duration or an exact message count).
//!
//! The report ([`report`]) is printed as text and, with `--json FILE`, written as one JSON
//! object with unit-suffixed fields (`latency_us_p99`, `throughput_msgs_per_s`, ...).

#![forbid(unsafe_code)]

pub mod args;
pub mod cpu;
pub mod error;
pub mod finish_condition;
pub mod kinds;
pub mod limits;
pub mod payload;
pub mod rate_limiter;
pub mod report;
pub mod stats;
pub mod summary;
pub mod topic;

pub use error::BenchError;
