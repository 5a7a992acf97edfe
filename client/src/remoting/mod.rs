//! The client transport: one connection per peer address, pipelined requests matched by
//! opaque, timeouts, one-way sends and broker → client requests.
//!
//! Threads (all named `comet-*`, all ended by [`RemotingClient::shutdown`]):
//! * one reader per connection (see [`connection`]);
//! * one timeout scanner, failing requests whose deadline passed (callers of the blocking
//!   [`RemotingClient::invoke`] time out on their own; the scanner serves callbacks and
//!   futures);
//! * one inbound thread running the [`RequestHandler`] for requests the peers send us and for
//!   connection events, so a slow handler never stalls a reader.
//!
//! Opaques come from one counter per client; they only need to be unique among the requests
//! in flight on one connection (docs/protocol.md#remoting-command-semantics).
//!
//! Failure model: a connection that fails is closed, its pending requests fail with
//! `ConnectionClosed`, and it is dropped from the pool; the next request to that address
//! opens a new connection (reconnect on demand, no background retry loop).

pub mod connection;
pub mod pending;
pub mod tls;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use comet_proto::acl::Credentials;
use comet_proto::{RemotingCommand, ResponseCode};

use self::connection::{Connection, ConnectionEvents};
pub use self::pending::{ResponseCallback, ResponseFuture};
use self::pending::{ResponseSlot, Waiter};
pub use self::tls::TlsOptions;
use crate::error::{ClientError, Result};
use crate::limits::INBOUND_REQUESTS_QUEUED_MAX;
use crate::util::lock;

/// Transport settings.
#[derive(Clone, Debug)]
pub struct TransportConfig {
    /// Longest wait for a TCP connect (Java `connectTimeoutMillis`, 3 s).
    pub connect_timeout: Duration,
    /// Longest a single frame write may block before the connection is declared dead.
    pub write_timeout: Duration,
    /// How often the timeout scanner looks for expired requests and idle connections.
    pub scan_interval: Duration,
    /// A connection with nothing read, nothing written and no request pending for this long
    /// is closed; the next request to its address opens a new one. The Java client closes
    /// a channel idle (no read and no write) for `clientChannelMaxIdleTimeSeconds`, 120 s.
    /// `Duration::ZERO` keeps idle connections open.
    pub channel_max_idle: Duration,
    /// TLS on every connection (to name servers and brokers) when set; plain when `None`
    /// (docs/operations.md#tls).
    pub tls: Option<TlsOptions>,
}

impl Default for TransportConfig {
    fn default() -> TransportConfig {
        TransportConfig {
            connect_timeout: Duration::from_secs(3),
            write_timeout: Duration::from_secs(10),
            scan_interval: Duration::from_millis(100),
            channel_max_idle: Duration::from_secs(120),
            tls: None,
        }
    }
}

/// What a [`RequestHandler`] did with a request from a peer.
#[derive(Debug)]
pub enum Handled {
    /// Send this response (its opaque and flag are set by the transport).
    Response(RemotingCommand),
    /// The request was handled and needs no answer (one-way codes).
    NoResponse,
    /// The code is unknown: a two-way request gets REQUEST_CODE_NOT_SUPPORTED.
    NotSupported,
}

/// Handles requests that brokers send to the client (docs/protocol.md#broker-to-client-requests)
/// and connection events.
///
/// Runs on the transport's inbound thread, one call at a time. Whatever it returns, one-way
/// requests (flag bit 1) are never answered (docs/protocol.md#one-way-requests-are-never-answered).
pub trait RequestHandler: Send + Sync + 'static {
    /// Handles one request from the peer at `addr`.
    fn handle_request(&self, addr: &str, request: &RemotingCommand) -> Handled;

    /// A new connection to `addr` was opened (the 5.x client heartbeats here).
    fn on_connected(&self, addr: &str) {
        let _ = addr;
    }
}

enum Inbound {
    Request(Arc<Connection>, RemotingCommand),
    Connected(String),
}

type Slot = Arc<Mutex<Option<Arc<Connection>>>>;

struct Inner {
    config: TransportConfig,
    /// Signs every outgoing request when set (ACL 1.0).
    credentials: Option<Credentials>,
    /// One creation slot per address: the map lock is held only to find the slot, and the
    /// slot lock serializes connects to one address without blocking other addresses.
    connections: Mutex<HashMap<String, Slot>>,
    handler: RwLock<Option<Arc<dyn RequestHandler>>>,
    inbound: SyncSender<Inbound>,
    opaque: AtomicI32,
    shutdown: AtomicBool,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

/// The transport. Cheap to clone; all clones share connections and threads.
#[derive(Clone)]
pub struct RemotingClient {
    inner: Arc<Inner>,
}

impl RemotingClient {
    /// Starts the scanner and inbound threads.
    pub fn new(config: TransportConfig) -> RemotingClient {
        RemotingClient::signed(config, None)
    }

    /// Like [`RemotingClient::new`]; with `credentials`, every request sent is signed last,
    /// after its opaque is set, as Java's `AclClientRPCHook` does before each send.
    pub fn signed(config: TransportConfig, credentials: Option<Credentials>) -> RemotingClient {
        assert!(config.scan_interval > Duration::ZERO);
        let (inbound, inbound_receiver) = mpsc::sync_channel(INBOUND_REQUESTS_QUEUED_MAX);
        let inner = Arc::new(Inner {
            config,
            credentials,
            connections: Mutex::new(HashMap::new()),
            handler: RwLock::new(None),
            inbound,
            opaque: AtomicI32::new(0),
            shutdown: AtomicBool::new(false),
            threads: Mutex::new(Vec::new()),
        });
        let scanner_inner = Arc::downgrade(&inner);
        let scan_interval = inner.config.scan_interval;
        let scanner = thread::Builder::new()
            .name("comet-timeouts".into())
            .spawn(move || scanner_main(scanner_inner, scan_interval))
            .expect("spawning the timeout scanner thread");
        let inbound_inner = Arc::downgrade(&inner);
        let inbound_thread = thread::Builder::new()
            .name("comet-inbound".into())
            .spawn(move || inbound_main(inbound_inner, inbound_receiver))
            .expect("spawning the inbound request thread");
        lock(&inner.threads).extend([scanner, inbound_thread]);
        RemotingClient { inner }
    }

    /// Installs the handler for broker → client requests (replacing any earlier one).
    pub fn set_request_handler(&self, handler: Arc<dyn RequestHandler>) {
        *self
            .inner
            .handler
            .write()
            .unwrap_or_else(|poison| poison.into_inner()) = Some(handler);
    }

    /// The next request id.
    pub fn next_opaque(&self) -> i32 {
        self.inner.opaque.fetch_add(1, Ordering::Relaxed)
    }

    /// Gives `request` its opaque and, with credentials, its signature (which must come
    /// after every other ext field).
    fn prepare(&self, request: &mut RemotingCommand) {
        request.opaque = self.next_opaque();
        if let Some(credentials) = &self.inner.credentials {
            comet_proto::acl::sign(request, credentials);
        }
    }

    /// Sends `request` to `addr` and blocks until its response, the timeout (which includes
    /// connecting) or a connection failure. The response is returned whatever its code.
    pub fn invoke(
        &self,
        addr: &str,
        mut request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand> {
        let started = Instant::now();
        let connection = self.connection(addr)?;
        let remaining = timeout.saturating_sub(started.elapsed());
        self.prepare(&mut request);
        let timeout_error = || ClientError::Timeout {
            addr: addr.to_owned(),
            code: request.code,
            opaque: request.opaque,
            timeout,
        };
        if remaining.is_zero() {
            return Err(timeout_error());
        }
        let slot = Arc::new(ResponseSlot::default());
        connection.send(&request, remaining, Waiter::Slot(slot.clone()))?;
        if let Some(outcome) = slot.wait(remaining) {
            return outcome;
        }
        // Remove the entry; a response that raced in meanwhile already filled the slot.
        connection.pending().remove(request.opaque);
        match slot.try_take() {
            Some(outcome) => outcome,
            None => Err(timeout_error()),
        }
    }

    /// Sends `request` and calls `callback` exactly once with the outcome, unless this
    /// returns `Err` (then the callback is dropped uncalled). The callback runs on a
    /// transport thread and must return quickly.
    pub fn invoke_async(
        &self,
        addr: &str,
        mut request: RemotingCommand,
        timeout: Duration,
        callback: ResponseCallback,
    ) -> Result<()> {
        let connection = self.connection(addr)?;
        self.prepare(&mut request);
        connection.send(&request, timeout, Waiter::Callback(callback))
    }

    /// Sends `request` and returns a handle to wait on.
    pub fn invoke_future(
        &self,
        addr: &str,
        mut request: RemotingCommand,
        timeout: Duration,
    ) -> Result<ResponseFuture> {
        let connection = self.connection(addr)?;
        self.prepare(&mut request);
        let slot = Arc::new(ResponseSlot::default());
        connection.send(&request, timeout, Waiter::Slot(slot.clone()))?;
        Ok(ResponseFuture::new(slot, timeout))
    }

    /// Sends `request` as one-way (flag bit 1): nothing is awaited.
    pub fn invoke_oneway(&self, addr: &str, mut request: RemotingCommand) -> Result<()> {
        let connection = self.connection(addr)?;
        request.set_oneway();
        self.prepare(&mut request);
        connection.write(&request)
    }

    /// The live connection to `addr`, opening one if needed.
    pub fn connection(&self, addr: &str) -> Result<Arc<Connection>> {
        if self.inner.shutdown.load(Ordering::Acquire) {
            return Err(ClientError::State("shut down"));
        }
        let slot = {
            let mut connections = lock(&self.inner.connections);
            connections.entry(addr.to_owned()).or_default().clone()
        };
        let mut slot = lock(&slot);
        if let Some(connection) = slot.as_ref().filter(|c| !c.is_closed()) {
            return Ok(connection.clone());
        }
        let events: Arc<dyn ConnectionEvents> = self.inner.clone();
        let events = Arc::downgrade(&events);
        let connection = Connection::open(
            addr,
            self.inner.config.connect_timeout,
            self.inner.config.write_timeout,
            self.inner.config.tls.as_ref(),
            events,
        )?;
        *slot = Some(connection.clone());
        // A full queue only loses the connect hook (the periodic heartbeat covers it).
        let _ = self
            .inner
            .inbound
            .try_send(Inbound::Connected(addr.to_owned()));
        Ok(connection)
    }

    /// Addresses with a live connection.
    pub fn connected_addrs(&self) -> Vec<String> {
        let connections = lock(&self.inner.connections);
        connections
            .iter()
            .filter(|(_, slot)| lock(slot).as_ref().is_some_and(|c| !c.is_closed()))
            .map(|(addr, _)| addr.clone())
            .collect()
    }

    /// Closes the connection to `addr` (failing its pending requests) if there is one.
    pub fn close_connection(&self, addr: &str) {
        let slot = lock(&self.inner.connections).get(addr).cloned();
        if let Some(connection) = slot.and_then(|slot| lock(&slot).take()) {
            connection.close("closed by the client");
            connection.join_reader();
        }
    }

    /// Closes every connection, fails pending requests and stops all transport threads.
    /// Idempotent; later calls fail with `State("shut down")`.
    pub fn shutdown(&self) {
        if self.inner.shutdown.swap(true, Ordering::AcqRel) {
            return;
        }
        let connections: Vec<Arc<Connection>> = {
            let connections = lock(&self.inner.connections);
            connections
                .values()
                .filter_map(|slot| lock(slot).take())
                .collect()
        };
        for connection in &connections {
            connection.close("client shut down");
        }
        for connection in &connections {
            connection.join_reader();
        }
        // Wakes the inbound thread; it sees the flag and exits.
        let _ = self
            .inner
            .inbound
            .try_send(Inbound::Connected(String::new()));
        let threads: Vec<JoinHandle<()>> = lock(&self.inner.threads).drain(..).collect();
        let current = thread::current().id();
        for handle in threads {
            if handle.thread().id() == current {
                continue;
            }
            handle.thread().unpark();
            let _ = handle.join();
        }
    }
}

impl ConnectionEvents for Inner {
    fn on_request(&self, connection: &Arc<Connection>, request: RemotingCommand) {
        match self
            .inbound
            .try_send(Inbound::Request(connection.clone(), request))
        {
            Ok(()) => {}
            Err(TrySendError::Full(Inbound::Request(connection, request))) => {
                if !request.is_oneway() {
                    let busy = RemotingCommand::error_to(
                        &request,
                        ResponseCode::SYSTEM_BUSY,
                        "[OVERLOAD] client inbound queue full",
                    );
                    let _ = connection.write(&busy);
                }
            }
            Err(_) => {}
        }
    }

    fn on_closed(&self, connection: &Arc<Connection>) {
        let slot = lock(&self.connections).get(connection.addr()).cloned();
        if let Some(slot) = slot {
            let mut slot = lock(&slot);
            if slot.as_ref().is_some_and(|c| Arc::ptr_eq(c, connection)) {
                *slot = None;
            }
        }
    }
}

fn scanner_main(inner: Weak<Inner>, interval: Duration) {
    loop {
        thread::park_timeout(interval);
        let Some(inner) = inner.upgrade() else { return };
        if inner.shutdown.load(Ordering::Acquire) {
            return;
        }
        let connections: Vec<Arc<Connection>> = {
            let connections = lock(&inner.connections);
            connections
                .values()
                .filter_map(|slot| lock(slot).clone())
                .collect()
        };
        let now = Instant::now();
        for connection in connections {
            expire(&connection, now);
        }
        if !inner.config.channel_max_idle.is_zero() {
            close_idle(&inner, inner.config.channel_max_idle, now);
        }
    }
}

/// Holders of a connection nobody uses: its pool slot and its own reader thread.
const IDLE_CONNECTION_HOLDERS: usize = 2;

/// Closes connections idle for `max_idle` that no caller holds. The check runs under the
/// slot lock, and a caller clones the connection out of its slot under the same lock, so a
/// connection some caller is about to use is never closed under it (its count is higher),
/// and a caller arriving after the close finds the slot empty and connects anew.
fn close_idle(inner: &Inner, max_idle: Duration, now: Instant) {
    let slots: Vec<Slot> = lock(&inner.connections).values().cloned().collect();
    for slot in slots {
        let mut slot = lock(&slot);
        let idle = slot.as_ref().is_some_and(|connection| {
            Arc::strong_count(connection) <= IDLE_CONNECTION_HOLDERS
                && connection.idle_for(now) >= max_idle
        });
        if idle {
            if let Some(connection) = slot.take() {
                // The reader thread ends on its own; its on_closed finds the slot empty.
                connection.close(&format!("idle for {:?}", max_idle));
            }
        }
    }
}

fn expire(connection: &Connection, now: Instant) {
    for (opaque, pending) in connection.pending().take_expired(now) {
        pending.waiter.complete(Err(ClientError::Timeout {
            addr: connection.addr().to_owned(),
            code: pending.code,
            opaque,
            timeout: pending.timeout,
        }));
    }
}

fn inbound_main(inner: Weak<Inner>, receiver: Receiver<Inbound>) {
    while let Ok(event) = receiver.recv() {
        let Some(inner) = inner.upgrade() else { return };
        if inner.shutdown.load(Ordering::Acquire) {
            return;
        }
        let handler = inner
            .handler
            .read()
            .unwrap_or_else(|poison| poison.into_inner())
            .clone();
        drop(inner);
        match event {
            Inbound::Connected(addr) => {
                if let Some(handler) = handler {
                    handler.on_connected(&addr);
                }
            }
            Inbound::Request(connection, request) => {
                answer(&connection, &request, handler.as_deref());
            }
        }
    }
}

fn answer(
    connection: &Connection,
    request: &RemotingCommand,
    handler: Option<&dyn RequestHandler>,
) {
    let handled = match handler {
        Some(handler) => handler.handle_request(connection.addr(), request),
        None => Handled::NotSupported,
    };
    if request.is_oneway() {
        return;
    }
    let response = match handled {
        Handled::Response(mut response) => {
            response.opaque = request.opaque;
            response.flag |= comet_proto::command::FLAG_RESPONSE;
            response
        }
        Handled::NoResponse => return,
        Handled::NotSupported => RemotingCommand::not_supported_to(request),
    };
    if let Err(error) = connection.write(&response) {
        log::debug!("answer to {} failed: {error}", connection.addr());
    }
}

/// Turns a response into `Ok` when its code is one of `accepted`, else a typed error.
pub fn expect_code(
    addr: &str,
    response: RemotingCommand,
    accepted: &[ResponseCode],
) -> Result<RemotingCommand> {
    let code = response.response_code();
    if accepted.contains(&code) {
        return Ok(response);
    }
    Err(ClientError::Response {
        addr: addr.to_owned(),
        code,
        remark: response.remark.unwrap_or_default(),
    })
}

impl Drop for Inner {
    // Without an explicit shutdown, dropping the last handle must still end the reader
    // threads: closing the sockets does that (the scanner and inbound threads notice the
    // handle is gone on their own).
    fn drop(&mut self) {
        let connections = self
            .connections
            .get_mut()
            .unwrap_or_else(|poison| poison.into_inner());
        for slot in connections.values() {
            if let Some(connection) = lock(slot).take() {
                connection.close("client dropped");
            }
        }
    }
}
