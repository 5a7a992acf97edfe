//! The accept loop of one shard: connection limit, connection tasks under a gate, open and
//! close notifications, and an orderly stop.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use comet_rt::net::Listener;
use comet_rt::shutdown::{Gate, StopSignal};
use comet_rt::sync::{race, Either};
use comet_rt::task_class::TaskClass;
use comet_rt::ShardId;

use crate::connection::{run_connection, ConnectionHandle, ConnectionId, ConnectionLimits};
use crate::dispatch::DispatchTable;
use crate::limits::{
    CONNECTIONS_PER_SHARD_MAX_DEFAULT, DRAIN_WAIT_MAX_DEFAULT, IDLE_TIMEOUT_DEFAULT,
    INFLIGHT_REQUESTS_PER_CONNECTION_MAX_DEFAULT, TLS_HANDSHAKE_TIMEOUT,
};
use crate::tls::{accept, AcceptError, ServerTls, Transport};

/// Limits of one shard's server.
#[derive(Clone, Copy, Debug)]
pub struct ServerConfig {
    /// Connections this shard serves at once.
    pub connections_max: usize,
    /// Largest frame accepted (length prefix excluded).
    pub frame_bytes_max: usize,
    /// Requests processed at once per connection.
    pub inflight_requests_max: usize,
    /// Close a connection after this long without receiving anything.
    pub idle_timeout: Duration,
    /// How long a stop waits for connections to finish.
    pub drain_wait_max: Duration,
    /// The task queue connections and processors run in ([`TaskClass::Request`] for the
    /// broker; an embedded name server uses [`TaskClass::NameServer`] so route lookups never
    /// compete with produce and pull at equal shares).
    pub task_class: TaskClass,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            connections_max: CONNECTIONS_PER_SHARD_MAX_DEFAULT,
            frame_bytes_max: comet_proto::limits::FRAME_BYTES_MAX_DEFAULT,
            inflight_requests_max: INFLIGHT_REQUESTS_PER_CONNECTION_MAX_DEFAULT,
            idle_timeout: IDLE_TIMEOUT_DEFAULT,
            drain_wait_max: DRAIN_WAIT_MAX_DEFAULT,
            task_class: TaskClass::Request,
        }
    }
}

/// A connection-lifecycle callback.
pub type ConnectionHook = Rc<dyn Fn(&ConnectionHandle)>;

/// One shard's remoting server. Lives on that shard; build one per shard.
pub struct Server {
    shard: ShardId,
    table: Rc<DispatchTable>,
    config: ServerConfig,
    connections: Rc<RefCell<BTreeMap<ConnectionId, ConnectionHandle>>>,
    next_serial: Cell<u64>,
    gate: Gate,
    on_opened: Vec<ConnectionHook>,
    on_closed: Vec<ConnectionHook>,
    tls: ServerTls,
}

impl Server {
    /// A server for `shard` dispatching through `table`.
    pub fn new(shard: ShardId, table: DispatchTable, config: ServerConfig) -> Server {
        assert!(config.connections_max > 0);
        assert!(config.inflight_requests_max > 0);
        Server {
            shard,
            table: Rc::new(table),
            config,
            connections: Rc::new(RefCell::new(BTreeMap::new())),
            next_serial: Cell::new(0),
            gate: Gate::new(),
            on_opened: Vec::new(),
            on_closed: Vec::new(),
            tls: ServerTls::disabled(),
        }
    }

    /// Serves connections as `tls` says (plain only until called): with TLS on, a
    /// connection's handshake runs in its own task, so a slow or failing one delays no other.
    pub fn set_tls(&mut self, tls: ServerTls) {
        self.tls = tls;
    }

    /// Calls `hook` for every accepted connection before its first request is read.
    pub fn on_connection_opened(&mut self, hook: ConnectionHook) {
        self.on_opened.push(hook);
    }

    /// Calls `hook` once for every connection that closes (peer gone, idle, error or stop).
    pub fn on_connection_closed(&mut self, hook: ConnectionHook) {
        self.on_closed.push(hook);
    }

    /// The open connections.
    pub fn connections(&self) -> Vec<ConnectionHandle> {
        self.connections.borrow().values().cloned().collect()
    }

    /// One open connection by id.
    pub fn connection(&self, id: ConnectionId) -> Option<ConnectionHandle> {
        self.connections.borrow().get(&id).cloned()
    }

    /// Accepts until `stop` is triggered, then closes every connection and waits for them, at
    /// most `drain_wait_max`.
    pub async fn serve(&self, listener: Listener, stop: StopSignal) {
        log::info!("{} serving on {}", self.shard, listener.local_addr());
        loop {
            match race(stop.wait(), listener.accept()).await {
                Either::Left(()) => break,
                Either::Right(Ok(stream)) => self.admit(stream),
                Either::Right(Err(error)) => {
                    // Accept errors (EMFILE, ECONNABORTED) are transient; back off briefly so
                    // a descriptor shortage does not spin the shard.
                    log::warn!("accept on {} failed: {error}", listener.local_addr());
                    comet_rt::task_class::sleep(Duration::from_millis(10)).await;
                }
            }
        }
        drop(listener);
        for connection in self.connections() {
            connection.close();
        }
        if let Err(error) = self.gate.close(self.config.drain_wait_max).await {
            log::warn!("{}: connections did not drain: {error}", self.shard);
        }
    }

    fn admit(&self, stream: comet_rt::net::Stream) {
        if self.connections.borrow().len() >= self.config.connections_max {
            log::warn!(
                "refusing {}: {} connections open (limit)",
                stream.peer_addr(),
                self.config.connections_max
            );
            stream.shutdown();
            return;
        }
        // Responses are already batched per write; Nagle would only add latency.
        let _ = stream.set_nodelay(true);
        let serial = self.next_serial.get();
        self.next_serial.set(serial + 1);
        let id = ConnectionId {
            shard: self.shard,
            serial,
        };
        let opening = Opening {
            connections: self.connections.clone(),
            on_opened: self.on_opened.clone(),
            on_closed: self.on_closed.clone(),
            table: self.table.clone(),
            limits: ConnectionLimits {
                frame_bytes_max: self.config.frame_bytes_max,
                inflight_requests_max: self.config.inflight_requests_max,
                idle_timeout: self.config.idle_timeout,
                task_class: self.config.task_class,
            },
        };
        let spawned = if self.tls.acceptor_needed() {
            let tls = self.tls.clone();
            self.gate
                .spawn("connection", TaskClass::Request, async move {
                    let peer = stream.peer_addr();
                    match accept(stream, &tls, TLS_HANDSHAKE_TIMEOUT).await {
                        Ok(transport) => opening.serve(id, transport).await,
                        // A probe that connects and closes is routine, not worth a warning.
                        Err(AcceptError::Closed) => {
                            log::debug!("{id} from {peer}: {}", AcceptError::Closed)
                        }
                        Err(error) => log::warn!("{id} from {peer} closed: {error}"),
                    }
                })
        } else {
            // Plain only: the connection is registered before its task first runs, as the
            // accept loop's stop expects of every admitted connection.
            let connection = opening.open(id, Transport::plain(stream));
            self.gate
                .spawn("connection", TaskClass::Request, async move {
                    opening.run(connection).await;
                })
        };
        if spawned.is_err() {
            // The server is stopping; the connection was never served.
            if let Some(connection) = self.connections.borrow_mut().remove(&id) {
                connection.close();
            }
        }
    }
}

/// What a connection task needs of its server to register, serve and forget a connection.
struct Opening {
    connections: Rc<RefCell<BTreeMap<ConnectionId, ConnectionHandle>>>,
    on_opened: Vec<ConnectionHook>,
    on_closed: Vec<ConnectionHook>,
    table: Rc<DispatchTable>,
    limits: ConnectionLimits,
}

impl Opening {
    fn open(&self, id: ConnectionId, transport: Transport) -> ConnectionHandle {
        let connection = ConnectionHandle::new(id, transport);
        self.connections.borrow_mut().insert(id, connection.clone());
        for hook in &self.on_opened {
            hook(&connection);
        }
        connection
    }

    async fn serve(self, id: ConnectionId, transport: Transport) {
        let connection = self.open(id, transport);
        self.run(connection).await;
    }

    async fn run(self, connection: ConnectionHandle) {
        run_connection(connection.clone(), self.table, self.limits).await;
        self.connections.borrow_mut().remove(&connection.id());
        for hook in &self.on_closed {
            hook(&connection);
        }
    }
}
