//! Server-side assignment (docs/architecture.md#server-side-assignment): a 5.x client that
//! leaves rebalancing to the broker (`setClientRebalance(false)`) asks with QUERY_ASSIGNMENT
//! which queues it reads and in which mode; SET_MESSAGE_REQUEST_MODE sets that mode per
//! (topic, group).
//!
//! - `modes`: the mode table and its file.
//! - `allocate`: the strategies and POP's sharing rule.
//! - `routes`: the topic's queues across the cluster, from the name servers.
//!
//! The state is broker-wide ([`AssignmentState`], held by the metadata), behind short
//! mutexes never held across an await.

pub mod allocate;
pub mod modes;
pub mod routes;

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::persist::PersistError;
use modes::RequestModeTable;
use routes::RouteCache;

/// The mode table and the route cache.
#[derive(Debug)]
pub struct AssignmentState {
    modes: Mutex<RequestModeTable>,
    routes: Mutex<RouteCache>,
    next_opaque: AtomicI32,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Poisoned only by a panic in a test (release aborts on panic); the data is still whole.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl AssignmentState {
    /// Loads the mode table from `config_dir`.
    pub fn load(config_dir: &std::path::Path) -> Result<AssignmentState, PersistError> {
        Ok(AssignmentState {
            modes: Mutex::new(RequestModeTable::load(config_dir)?),
            routes: Mutex::new(RouteCache::default()),
            next_opaque: AtomicI32::new(1),
        })
    }

    /// The mode table.
    pub fn modes(&self) -> MutexGuard<'_, RequestModeTable> {
        lock(&self.modes)
    }

    /// The route cache.
    pub fn routes(&self) -> MutexGuard<'_, RouteCache> {
        lock(&self.routes)
    }

    /// An opaque for a route request (each goes over its own connection, so uniqueness only
    /// helps reading logs).
    pub fn next_opaque(&self) -> i32 {
        self.next_opaque.fetch_add(1, Ordering::Relaxed) & i32::MAX
    }
}
