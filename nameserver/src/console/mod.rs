//! The web console (`consoleListenPort`, docs/operations.md#web-console): an HTTP/1.1
//! listener on the name server's shard serving a static page and the JSON API it reads.
//!
//! The name server knows every broker of every cluster that registers with it, so one URL
//! shows the whole deployment: brokers, roles and addresses come from the route table; every
//! other figure comes from asking the brokers themselves over remoting ([`broker_call`]),
//! the same requests `comet-admin` sends. A broker that does not answer is named with its
//! error next to what the others answered.
//!
//! ```text
//!  browser --HTTP--> serve --read_request--> api::answer --+--> route table (in place)
//!                                                          +--> BrokerCalls --remoting--> brokers
//! ```
//!
//! Bounds: [`CONNECTIONS_MAX`] connections at once (more are closed unanswered), one request
//! per connection, [`EXCHANGE_TIMEOUT`] for reading it and answering, request sizes as
//! [`http`] says, broker calls as [`broker_call`] says. The only request that changes
//! anything is the offset reset, a POST.

pub mod api;
pub mod assets;
pub mod broker_call;
pub mod groups;
pub mod messages;

use std::rc::Rc;
use std::time::Duration;

use comet_net::http::{self, ServeLimits};
use comet_rt::net::Listener;
use comet_rt::shutdown::StopSignal;

use crate::processor::NameServerState;
use broker_call::BrokerCalls;

/// The header the console page sends with its POST (any value): a form another site makes a
/// browser send cannot carry it (it would need a CORS preflight, which the console never
/// grants).
pub const CONSOLE_HEADER: &str = "X-Comet-Console";

/// Console connections open at once; more are closed at once.
pub const CONNECTIONS_MAX: usize = 32;

/// How long one connection may take to send its request and be answered (broker calls
/// included: they end within [`broker_call::BROKER_CALL_TIMEOUT`]).
pub const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(15);

/// What every console request shares: the name server's state and the broker calls' bound.
pub struct Console {
    state: Rc<NameServerState>,
    calls: BrokerCalls,
}

impl Console {
    /// A console over the name server's `state`.
    pub fn new(state: Rc<NameServerState>) -> Rc<Console> {
        Rc::new(Console {
            state,
            calls: BrokerCalls::default(),
        })
    }

    /// The name server's state.
    pub fn state(&self) -> &NameServerState {
        &self.state
    }

    /// The broker calls.
    pub fn calls(&self) -> &BrokerCalls {
        &self.calls
    }
}

/// Serves the console on `listener` until `stop`.
pub async fn serve(console: Rc<Console>, listener: Listener, stop: StopSignal) {
    log::info!("web console on http://{}/", listener.local_addr());
    let limits = ServeLimits {
        connections_max: CONNECTIONS_MAX,
        exchange_timeout: EXCHANGE_TIMEOUT,
    };
    http::serve("console", listener, stop, limits, move |request| {
        let console = console.clone();
        async move { api::answer(&console, &request).await }
    })
    .await;
}
