//! Rebalance: which queues of a group this consumer owns.
//!
//! * [`allocate`]: the allocation strategies, pure functions.

pub mod allocate;

pub use allocate::AllocateStrategy;
