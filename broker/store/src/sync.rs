//! The store's shard-local wake-up primitives are `comet_rt::sync`'s; this module only keeps
//! the store's `crate::sync` paths working.

pub(crate) use comet_rt::sync::{sleep_unless, PositionWaiters, WakerList};
