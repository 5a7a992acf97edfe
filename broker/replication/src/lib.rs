//! `comet-replication`: the sans-I/O core of master/slave replication.
//!
//! A master shard's replication task streams its own log to the log with the same id on
//! each slave; the slave appends the same bytes, so positions, queue offsets and message ids
//! agree on both. This crate holds everything about that stream that needs no socket, file
//! or clock: the frames ([`wire`]), epoch histories and the divergence rule ([`epoch`]), the
//! master's per-log sender ([`master`]), the slave's per-log receiver ([`slave`]), the
//! SYNC_MASTER waiters and confirm position ([`sync_wait`]) and, in controller mode, which
//! slaves they wait for ([`ack_set`]), the record framing a Data
//! frame must respect ([`records`]), and the broker's side of the RocketMQ 5 controller
//! protocol that decides who is master ([`controller`]). Time comes in as arguments
//! (`Instant`), so a simulator or a test can drive both ends in memory; the crate's README
//! shows the frame layout, the handshake and the invariants.
//!
//! Driving it from a per-log task:
//!
//! - Slave: build a [`slave::Receiver`] from the log's recovered state, send a Hello listing
//!   [`slave::Receiver::hello_state`], feed the Welcome's answer to
//!   [`slave::Receiver::on_answer`] and carry out its instruction (truncate, or reset the
//!   log), then feed each Data frame to [`slave::Receiver::on_data`] and append what it
//!   returns; report group-commit progress with [`slave::Receiver::on_durable`] and send
//!   [`slave::Receiver::ack`].
//! - Master: check the Hello and answer it with [`master::welcome`], start a
//!   [`master::Sender`] per followed log, and loop: [`master::Sender::next_send`] says which
//!   bytes to read, [`master::Sender::prepare`] turns them into a Data frame;
//!   [`master::Sender::on_ack`] validates each Ack, whose durable position goes to
//!   [`sync_wait::SyncWaiters::on_slave_durable`].
//!
//! Any error of a state machine closes the stream with [`wire::Close`]; the slave then
//! reconnects and the handshake decides again where to resume.

pub mod ack_set;
pub mod controller;
pub mod epoch;
pub mod limits;
pub mod master;
pub mod records;
pub mod slave;
pub mod sync_wait;
pub mod wire;
