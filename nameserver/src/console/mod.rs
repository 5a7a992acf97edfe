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
pub mod http;
pub mod messages;

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use comet_rt::net::{Listener, Stream};
use comet_rt::shutdown::StopSignal;
use comet_rt::sync::{race, Either};
use comet_rt::task_class::{sleep, spawn_detached, timeout, TaskClass};

use crate::processor::NameServerState;
use broker_call::BrokerCalls;
use http::{HttpError, Method, Response};

/// Console connections open at once; more are closed at once.
pub const CONNECTIONS_MAX: usize = 32;

/// How long one connection may take to send its request and be answered (broker calls
/// included: they end within [`broker_call::BROKER_CALL_TIMEOUT`]).
pub const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(15);

/// Most bytes read after answering, so that closing does not reset the connection before
/// the peer reads the answer.
const DRAIN_BYTES_MAX: usize = 64 * 1024;

/// How long draining waits for more bytes before it closes.
const DRAIN_QUIET: Duration = Duration::from_millis(100);

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
    let open = Rc::new(Cell::new(0usize));
    loop {
        let stream = match race(stop.wait(), listener.accept()).await {
            Either::Left(()) => break,
            Either::Right(Ok(stream)) => stream,
            Either::Right(Err(error)) => {
                log::warn!("console: accept failed: {error}");
                sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if open.get() >= CONNECTIONS_MAX {
            stream.shutdown();
            continue;
        }
        open.set(open.get() + 1);
        let console = console.clone();
        let open = open.clone();
        spawn_detached(TaskClass::Admin, async move {
            let peer = stream.peer_addr();
            if timeout(EXCHANGE_TIMEOUT, exchange(&console, &stream))
                .await
                .is_err()
            {
                log::debug!("console: {peer}: no whole exchange within {EXCHANGE_TIMEOUT:?}");
            }
            stream.shutdown();
            open.set(open.get() - 1);
        });
    }
}

/// Reads one request and answers it.
async fn exchange(console: &Rc<Console>, stream: &Stream) {
    let (response, head_only) = match http::read_request(stream).await {
        Ok(request) => {
            let head_only = request.method == Method::Head;
            (api::answer(console, &request).await, head_only)
        }
        Err(HttpError::Closed | HttpError::Io(_)) => return,
        Err(error) => (Response::error(400, error), false),
    };
    if let Err(error) = stream.write_all(&response.encode(head_only)).await {
        log::debug!("console: {}: {error}", stream.peer_addr());
        return;
    }
    drain(stream).await;
}

/// Reads what the peer still sends (a refused request's rest), bounded, so that closing does
/// not reset the connection and destroy the answer before the peer reads it.
async fn drain(stream: &Stream) {
    let mut chunk = [0u8; 4096];
    let mut drained = 0;
    while drained < DRAIN_BYTES_MAX {
        match timeout(DRAIN_QUIET, stream.read(&mut chunk)).await {
            Ok(Ok(read)) if read > 0 => drained += read,
            _ => return,
        }
    }
}
