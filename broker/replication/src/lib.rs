//! `comet-replication`: the sans-I/O core of master/slave replication.
//!
//! A master shard's replication task streams its own log to the log with the same id on
//! each slave; the slave appends the same bytes, so positions, queue offsets and message ids
//! agree on both. This crate holds everything about that stream that needs no socket, file
//! or clock: the frames ([`wire`]), epoch histories and the divergence rule ([`epoch`]), and
//! the record framing a Data frame must respect ([`records`]).

pub mod epoch;
pub mod limits;
pub mod records;
pub mod wire;
