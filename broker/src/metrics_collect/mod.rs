//! What a shard computes for a scrape from the state it owns (its queues' consumer figures,
//! its pending transactional halves). It reads the shard's context, so it sits in the
//! runtime layer, above the tables where `crate::metrics` keeps the figures' types.

pub mod consumer;
pub mod half;
