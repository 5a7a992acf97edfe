//! Broker liveness: drop members silent past their timeout (scanned every
//! `scanNotActiveBrokerInterval`), and at once when the connection they registered on closes.

use std::rc::Rc;

use comet_net::ConnectionHandle;
use comet_rt::clock::wall_clock_ms;
use comet_rt::shutdown::StopSignal;
use comet_rt::task_class::timeout;

use crate::processor::NameServerState;

/// Scans until `stop`; each scan unregisters every expired member.
pub async fn scan_loop(state: Rc<NameServerState>, stop: StopSignal) {
    loop {
        let interval = state.config.borrow().scan_interval;
        if timeout(interval, stop.wait()).await.is_ok() {
            return;
        }
        let dropped = scan_once(&state, wall_clock_ms());
        if dropped > 0 {
            log::info!("liveness scan dropped {dropped} silent broker member(s)");
        }
    }
}

/// Unregisters every member expired at `now_ms`; returns how many.
pub fn scan_once(state: &NameServerState, now_ms: i64) -> usize {
    let mut routes = state.routes.borrow_mut();
    let expired = routes.expired(now_ms);
    for key in &expired {
        log::warn!("broker {} in {} expired", key.addr, key.cluster);
        routes.unregister(key);
    }
    expired.len()
}

/// Unregisters the members that registered over `connection` (it just closed).
pub fn connection_closed(state: &NameServerState, connection: &ConnectionHandle) {
    let mut routes = state.routes.borrow_mut();
    for key in routes.registered_on(connection.id()) {
        log::info!("broker {} connection closed; unregistering", key.addr);
        routes.unregister(&key);
    }
}
