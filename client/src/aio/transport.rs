//! The async transport: one connection per peer address, each served by two tasks on the
//! caller's tokio runtime.
//!
//! ```text
//!  request futures ──(bounded frame queue)──► writer task ──► socket ──► peer
//!        ▲                                                              │
//!        └── oneshot ◄── pending map ◄── reader task ◄── socket ◄───────┘
//!                        opaque → waiter
//! ```
//!
//! * A request takes a permit of its connection's in-flight limit
//!   ([`AsyncTransportConfig::in_flight_per_connection_max`]) before it is registered, so a
//!   full connection makes callers wait (back-pressure) within their own timeout, which then
//!   fails them with [`ClientError::Timeout`].
//! * Answers are matched by opaque through the blocking transport's [`PendingMap`]: the
//!   waiter is a callback that completes a oneshot channel, on the reader task.
//! * Cancellation-safe: a request future holds a guard that removes its entry when it is
//!   dropped, so a late answer finds no entry and is dropped (and counted in
//!   [`AsyncTransport::late_answers`]); opaques are never reused while in flight, so an
//!   answer is never delivered to another request.
//! * A read or write failure closes the connection once: every waiter fails at once with
//!   [`ClientError::ConnectionClosed`], waiters for a permit too, and the next request to
//!   that address opens a new connection.
//! * One-way requests ([`AsyncTransport::invoke_oneway`]) are queued for the writer and
//!   take no permit and no waiter.
//! * Requests that brokers send to the client go to the request hook
//!   ([`AsyncTransport::set_request_hook`], which the push consumer sets to hear
//!   NOTIFY_CONSUMER_IDS_CHANGED); without one, or when it has no answer, two-way ones are
//!   answered REQUEST_CODE_NOT_SUPPORTED and one-way ones are dropped
//!   (docs/protocol.md#one-way-requests-are-never-answered).
//!
//! * TLS (docs/operations.md#tls): with [`AsyncTransportConfig::tls`] set, every connection
//!   runs the handshake (tokio-rustls, on the blocking transport's rustls client
//!   configuration, [`TlsOptions`]) within the connect timeout before its tasks start.
//!
//! No thread is started: everything runs as tasks of the runtime the first request runs on.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use comet_proto::acl::Credentials;
use comet_proto::frame::{self, Decoded, FrameDecoder};
use comet_proto::RemotingCommand;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, watch, Semaphore};
use tokio::time::Instant;
use tokio_rustls::TlsConnector;

use crate::config::ClientConfig;
use crate::error::{ClientError, Result};
use crate::limits::{PENDING_REQUESTS_PER_CONNECTION_MAX, READ_CHUNK_BYTES};
use crate::remoting::pending::{Pending, PendingMap, Waiter};
use crate::remoting::TlsOptions;
use crate::util::lock;

/// Frames the writer task gathers into one socket write at most, in bytes. Many small sends
/// in flight then cost one system call per batch instead of one per frame.
const WRITE_BATCH_BYTES_MAX: usize = 256 * 1024;

/// Frames queued for a writer beyond the in-flight limit: answers to broker requests and
/// one-way frames, which hold no permit.
const WRITE_QUEUE_EXTRA_FRAMES: usize = 1024;

/// Settings of the async transport.
#[derive(Clone, Debug)]
pub struct AsyncTransportConfig {
    /// Longest wait for a TCP connect (Java `connectTimeoutMillis`, 3 s).
    pub connect_timeout: Duration,
    /// Requests awaiting their answer on one connection at most; more wait for a slot
    /// (back-pressure) within their timeout. The Java client's async semaphore is 65,535;
    /// at most [`PENDING_REQUESTS_PER_CONNECTION_MAX`].
    pub in_flight_per_connection_max: usize,
    /// Signs every request (ACL 1.0) when set, as the blocking transport does.
    pub credentials: Option<Credentials>,
    /// Speaks TLS on every connection when set, trusting what these options trust (the
    /// blocking transport's [`TlsOptions`]).
    pub tls: Option<TlsOptions>,
}

impl Default for AsyncTransportConfig {
    fn default() -> AsyncTransportConfig {
        AsyncTransportConfig {
            connect_timeout: Duration::from_secs(3),
            in_flight_per_connection_max: PENDING_REQUESTS_PER_CONNECTION_MAX,
            credentials: None,
            tls: None,
        }
    }
}

impl AsyncTransportConfig {
    /// The async transport settings of a client configuration: its connect timeout,
    /// credentials and TLS options.
    pub fn from_client(config: &ClientConfig) -> Result<AsyncTransportConfig> {
        Ok(AsyncTransportConfig {
            connect_timeout: config.transport.connect_timeout,
            in_flight_per_connection_max: PENDING_REQUESTS_PER_CONNECTION_MAX,
            credentials: config.credentials.clone(),
            tls: config.transport.tls.clone(),
        })
    }

    fn check(&self) -> Result<()> {
        let limit = self.in_flight_per_connection_max;
        if limit == 0 || limit > PENDING_REQUESTS_PER_CONNECTION_MAX {
            return Err(ClientError::Invalid(format!(
                "in_flight_per_connection_max is {limit}, it must be 1 to \
                 {PENDING_REQUESTS_PER_CONNECTION_MAX}"
            )));
        }
        Ok(())
    }
}

/// What handles the requests a peer sends to the client: gets the peer's address and the
/// request, returns what to answer. It runs on the connection's reader task, so it must
/// return quickly; work that waits goes into [`HookAnswer::Later`].
pub type RequestHook = Arc<dyn Fn(&str, &RemotingCommand) -> HookAnswer + Send + Sync>;

/// A request hook's answer (one-way requests are never answered, whatever it says).
pub enum HookAnswer {
    /// REQUEST_CODE_NOT_SUPPORTED.
    NotSupported,
    /// This answer, now.
    Now(RemotingCommand),
    /// The answer this future resolves to, run as a task of the connection's runtime.
    Later(std::pin::Pin<Box<dyn std::future::Future<Output = RemotingCommand> + Send>>),
    /// Work with no answer, run as a task of the connection's runtime: for one-way requests
    /// (a check-back, whose answer is a later request of its own). A two-way request handed
    /// this is answered REQUEST_CODE_NOT_SUPPORTED at once, so its peer does not wait.
    Task(std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>),
}

/// One live connection and what its two tasks share.
struct AsyncConnection {
    addr: String,
    pending: PendingMap,
    /// Permits of the in-flight limit; closed with the connection so waiters fail at once.
    permits: Arc<Semaphore>,
    /// Encoded frames for the writer task.
    frames: mpsc::Sender<Bytes>,
    closed: AtomicBool,
    close_reason: Mutex<String>,
    /// Set to true once closed: stops both tasks.
    stop: watch::Sender<bool>,
    /// Answers that arrived for no waiter (the request timed out or was dropped).
    late_answers: Arc<AtomicU64>,
    hook: Option<RequestHook>,
}

impl AsyncConnection {
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// True when the connection can take requests: open, and its writer task still alive
    /// (the tasks end without closing it when the runtime that ran them is dropped).
    fn is_usable(&self) -> bool {
        if self.frames.is_closed() {
            self.close("its tasks ended with their runtime");
        }
        !self.is_closed()
    }

    fn closed_error(&self) -> ClientError {
        ClientError::ConnectionClosed {
            addr: self.addr.clone(),
            reason: lock(&self.close_reason).clone(),
        }
    }

    /// Closes the connection once: stops its tasks and fails every waiter.
    fn close(&self, reason: &str) {
        {
            // Under the reason's lock, so a caller seeing the flag reads the first reason.
            let mut first_reason = lock(&self.close_reason);
            if self.is_closed() {
                return;
            }
            *first_reason = reason.to_owned();
            self.closed.store(true, Ordering::SeqCst);
        }
        log::debug!("closing async connection to {}: {reason}", self.addr);
        self.stop.send_replace(true);
        self.permits.close();
        let error = self.closed_error();
        for (_, pending) in self.pending.take_all() {
            pending.waiter.complete(Err(error.clone()));
        }
    }

    /// Routes one frame from the peer.
    fn dispatch(&self, command: RemotingCommand) {
        if command.is_response() {
            match self.pending.remove(command.opaque) {
                Some(pending) => pending.waiter.complete(Ok(command)),
                None => {
                    self.late_answers.fetch_add(1, Ordering::Relaxed);
                    log::debug!(
                        "{}: answer opaque={} matches no waiter (timed out or dropped)",
                        self.addr,
                        command.opaque
                    );
                }
            }
            return;
        }
        let answer = match self.hook.as_ref() {
            Some(hook) => hook(&self.addr, &command),
            None => HookAnswer::NotSupported,
        };
        let answer = match answer {
            HookAnswer::NotSupported => RemotingCommand::not_supported_to(&command),
            HookAnswer::Now(answer) => answer,
            HookAnswer::Later(answer) => {
                let (frames, oneway) = (self.frames.clone(), command.is_oneway());
                tokio::spawn(async move {
                    let answer = answer.await;
                    if !oneway {
                        // Fails only once the connection closed: nobody waits for it then.
                        let _ = frames.send(frame::encode_to_bytes(&answer)).await;
                    }
                });
                return;
            }
            HookAnswer::Task(work) => {
                tokio::spawn(work);
                if command.is_oneway() {
                    return;
                }
                RemotingCommand::not_supported_to(&command)
            }
        };
        if command.is_oneway() {
            return;
        }
        let answer = frame::encode_to_bytes(&answer);
        if self.frames.try_send(answer).is_err() {
            log::debug!("{}: no room to answer request {}", self.addr, command.code);
        }
    }
}

/// Removes a request's entry when its future ends or is dropped.
struct Registered<'a> {
    connection: &'a AsyncConnection,
    opaque: i32,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.connection.pending.remove(self.opaque);
    }
}

type Slot = Arc<tokio::sync::Mutex<Option<Arc<AsyncConnection>>>>;

struct TransportInner {
    config: AsyncTransportConfig,
    /// One slot per address; its async lock serializes connects to one address.
    connections: Mutex<HashMap<String, Slot>>,
    opaque: AtomicI32,
    shutdown: AtomicBool,
    /// Connections opened so far.
    connects: AtomicU64,
    late_answers: Arc<AtomicU64>,
    hook: Mutex<Option<RequestHook>>,
}

/// The async transport. Cheap to clone; clones share connections.
#[derive(Clone)]
pub struct AsyncTransport {
    inner: Arc<TransportInner>,
}

impl AsyncTransport {
    /// A transport with no connection yet. Needs no runtime; requests need a tokio one.
    pub fn new(config: AsyncTransportConfig) -> Result<AsyncTransport> {
        config.check()?;
        Ok(AsyncTransport {
            inner: Arc::new(TransportInner {
                config,
                connections: Mutex::new(HashMap::new()),
                opaque: AtomicI32::new(0),
                shutdown: AtomicBool::new(false),
                connects: AtomicU64::new(0),
                late_answers: Arc::new(AtomicU64::new(0)),
                hook: Mutex::new(None),
            }),
        })
    }

    /// Sends `request` to `addr` and resolves to its answer, whatever its code. `timeout`
    /// covers everything: connecting, waiting for an in-flight slot, writing and the answer.
    /// Dropping the future withdraws the request (its answer, if any, is dropped).
    pub async fn invoke(
        &self,
        addr: &str,
        mut request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand> {
        if request.is_oneway() || request.is_response() {
            return Err(ClientError::Invalid(
                "invoke takes two-way requests only".into(),
            ));
        }
        request.opaque = self.inner.opaque.fetch_add(1, Ordering::Relaxed);
        if let Some(credentials) = &self.inner.config.credentials {
            // The signature covers every other field, the opaque included, so it comes last.
            comet_proto::acl::sign(&mut request, credentials);
        }
        let (code, opaque) = (request.code, request.opaque);
        let deadline = Instant::now() + timeout;
        match tokio::time::timeout_at(deadline, self.exchange(addr, request, timeout)).await {
            Ok(outcome) => outcome,
            Err(_) => Err(ClientError::Timeout {
                addr: addr.to_owned(),
                code,
                opaque,
                timeout,
            }),
        }
    }

    /// Sends `request` one-way to `addr` (no answer is awaited; the peer sends none).
    /// Resolves once the frame is queued for the connection's writer; `timeout` covers
    /// connecting and waiting for room in the queue. Dropping the future before it resolves
    /// sends nothing.
    pub async fn invoke_oneway(
        &self,
        addr: &str,
        mut request: RemotingCommand,
        timeout: Duration,
    ) -> Result<()> {
        if request.is_response() {
            return Err(ClientError::Invalid(
                "invoke_oneway takes requests only".into(),
            ));
        }
        request.set_oneway();
        request.opaque = self.inner.opaque.fetch_add(1, Ordering::Relaxed);
        if let Some(credentials) = &self.inner.config.credentials {
            comet_proto::acl::sign(&mut request, credentials);
        }
        let (code, opaque) = (request.code, request.opaque);
        let queueing = async {
            let connection = self.connection(addr).await?;
            // A bounded queue send: cancelling it leaves nothing queued.
            if connection
                .frames
                .send(frame::encode_to_bytes(&request))
                .await
                .is_err()
            {
                connection.close("its tasks ended with their runtime");
                return Err(connection.closed_error());
            }
            Ok(())
        };
        match tokio::time::timeout(timeout, queueing).await {
            Ok(outcome) => outcome,
            Err(_) => Err(ClientError::Timeout {
                addr: addr.to_owned(),
                code,
                opaque,
                timeout,
            }),
        }
    }

    async fn exchange(
        &self,
        addr: &str,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand> {
        let connection = self.connection(addr).await?;
        let _permit = connection
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| connection.closed_error())?;
        let (sender, receiver) = oneshot::channel();
        let pending = Pending {
            code: request.code,
            // Unused: the future's own timeout ends the wait (no scanner runs here).
            deadline: std::time::Instant::now() + timeout,
            timeout,
            waiter: Waiter::Callback(Box::new(move |outcome| {
                // The receiver is gone only when the request future was dropped.
                let _ = sender.send(outcome);
            })),
        };
        if connection
            .pending
            .insert(addr, request.opaque, pending)
            .is_err()
        {
            return Err(ClientError::TooManyPending {
                addr: addr.to_owned(),
                pending: connection.pending.len(),
            });
        }
        let _registered = Registered {
            connection: &connection,
            opaque: request.opaque,
        };
        // A close that ran before the entry was inserted did not fail it: fail it here.
        if connection.is_closed() && connection.pending.remove(request.opaque).is_some() {
            return Err(connection.closed_error());
        }
        let frame = frame::encode_to_bytes(&request);
        if connection.frames.send(frame).await.is_err() {
            connection.close("its tasks ended with their runtime");
            return Err(connection.closed_error());
        }
        receiver
            .await
            .unwrap_or_else(|_| Err(connection.closed_error()))
    }

    /// The live connection to `addr`, opening one (and its two tasks) if needed.
    async fn connection(&self, addr: &str) -> Result<Arc<AsyncConnection>> {
        if self.inner.shutdown.load(Ordering::SeqCst) {
            return Err(ClientError::State("shut down"));
        }
        let slot = lock(&self.inner.connections)
            .entry(addr.to_owned())
            .or_default()
            .clone();
        let mut slot = slot.lock().await;
        if let Some(connection) = slot.as_ref().filter(|c| c.is_usable()) {
            return Ok(connection.clone());
        }
        let connection = self.open(addr).await?;
        *slot = Some(connection.clone());
        // A shutdown that ran while this connection opened did not see it.
        if self.inner.shutdown.load(Ordering::SeqCst) {
            connection.close("client shut down");
            return Err(ClientError::State("shut down"));
        }
        Ok(connection)
    }

    async fn open(&self, addr: &str) -> Result<Arc<AsyncConnection>> {
        let connect_error = |reason: String| ClientError::Connect {
            addr: addr.to_owned(),
            reason,
        };
        let connect_timeout = self.inner.config.connect_timeout;
        // An IP address connects without a resolver lookup, which tokio would run on a
        // blocking-pool thread.
        let connecting = async {
            match addr.parse::<SocketAddr>() {
                Ok(target) => TcpStream::connect(target).await,
                Err(_) => TcpStream::connect(addr).await,
            }
        };
        let stream = tokio::time::timeout(connect_timeout, connecting)
            .await
            .map_err(|_| connect_error(format!("no connection within {connect_timeout:?}")))?
            .map_err(|error| connect_error(error.to_string()))?;
        stream
            .set_nodelay(true)
            .map_err(|error| connect_error(error.to_string()))?;
        let Some(tls) = self.inner.config.tls.as_ref() else {
            let (read_half, write_half) = stream.into_split();
            return Ok(self.serve(addr, read_half, write_half));
        };
        let name = TlsOptions::server_name(addr)?;
        let connector = TlsConnector::from(tls.client_config());
        // The handshake gets a connect timeout of its own, as the blocking transport's.
        let stream = tokio::time::timeout(connect_timeout, connector.connect(name, stream))
            .await
            .map_err(|_| {
                connect_error(format!(
                    "TLS handshake: no answer within {connect_timeout:?}"
                ))
            })?
            .map_err(|error| connect_error(format!("TLS handshake: {error}")))?;
        let (read_half, write_half) = tokio::io::split(stream);
        Ok(self.serve(addr, read_half, write_half))
    }

    /// Makes the connection over an open stream's two halves and starts its two tasks.
    fn serve(
        &self,
        addr: &str,
        read_half: impl AsyncRead + Unpin + Send + 'static,
        write_half: impl AsyncWrite + Unpin + Send + 'static,
    ) -> Arc<AsyncConnection> {
        let limit = self.inner.config.in_flight_per_connection_max;
        let (frames, frames_receiver) = mpsc::channel(limit + WRITE_QUEUE_EXTRA_FRAMES);
        let (stop, stop_receiver) = watch::channel(false);
        let connection = Arc::new(AsyncConnection {
            addr: addr.to_owned(),
            pending: PendingMap::default(),
            permits: Arc::new(Semaphore::new(limit)),
            frames,
            closed: AtomicBool::new(false),
            close_reason: Mutex::new(String::new()),
            stop,
            late_answers: self.inner.late_answers.clone(),
            hook: lock(&self.inner.hook).clone(),
        });
        tokio::spawn(write_loop(
            connection.clone(),
            write_half,
            frames_receiver,
            stop_receiver.clone(),
        ));
        tokio::spawn(read_loop(connection.clone(), read_half, stop_receiver));
        self.inner.connects.fetch_add(1, Ordering::Relaxed);
        log::debug!("async connection to {addr} open");
        connection
    }

    /// Sets what handles the requests peers send to the client, on connections opened from
    /// now on.
    pub fn set_request_hook(&self, hook: RequestHook) {
        *lock(&self.inner.hook) = Some(hook);
    }

    /// Requests awaiting their answer on the connection to `addr` (0 without one).
    pub fn in_flight(&self, addr: &str) -> usize {
        let slot = lock(&self.inner.connections).get(addr).cloned();
        let Some(slot) = slot else { return 0 };
        // A connect in progress holds the lock and has nothing in flight yet.
        let Ok(slot) = slot.try_lock() else { return 0 };
        slot.as_ref()
            .map_or(0, |connection| connection.pending.len())
    }

    /// Requests awaiting their answer on every connection.
    pub fn in_flight_total(&self) -> usize {
        let slots: Vec<Slot> = lock(&self.inner.connections).values().cloned().collect();
        slots
            .iter()
            .filter_map(|slot| Some(slot.try_lock().ok()?.as_ref()?.pending.len()))
            .sum()
    }

    /// Connections opened since the transport was made.
    pub fn connects(&self) -> u64 {
        self.inner.connects.load(Ordering::Relaxed)
    }

    /// Answers that found no waiter: their request timed out or its future was dropped.
    pub fn late_answers(&self) -> u64 {
        self.inner.late_answers.load(Ordering::Relaxed)
    }

    /// Closes the connection to `addr` if there is one, failing its waiters.
    pub fn close_connection(&self, addr: &str) {
        let slot = lock(&self.inner.connections).get(addr).cloned();
        if let Some(connection) = slot.and_then(|slot| slot.try_lock().ok()?.take()) {
            connection.close("closed by the client");
        }
    }

    /// True once [`AsyncTransport::shutdown`] ran.
    pub fn is_shut_down(&self) -> bool {
        self.inner.shutdown.load(Ordering::SeqCst)
    }

    /// Closes every connection (failing their waiters and ending their tasks); later
    /// requests fail with `State("shut down")`. Idempotent.
    pub fn shutdown(&self) {
        self.inner.shutdown.store(true, Ordering::SeqCst);
        self.inner.close_all("client shut down");
    }
}

impl TransportInner {
    fn close_all(&self, reason: &str) {
        let slots: Vec<Slot> = lock(&self.connections).values().cloned().collect();
        for slot in slots {
            // A slot locked by a connect in progress is closed by that connect, which
            // checks the shutdown flag once it has stored its connection.
            if let Some(connection) = slot.try_lock().ok().and_then(|mut slot| slot.take()) {
                connection.close(reason);
            }
        }
    }
}

impl Drop for TransportInner {
    // The tasks hold their connection, not the transport: without this, dropping the last
    // handle would leave them running until the peer closed.
    fn drop(&mut self) {
        self.close_all("client dropped");
    }
}

/// Writes queued frames, gathering what is queued into one write, until the connection
/// closes.
async fn write_loop(
    connection: Arc<AsyncConnection>,
    mut socket: impl AsyncWrite + Unpin,
    mut frames: mpsc::Receiver<Bytes>,
    mut stop: watch::Receiver<bool>,
) {
    let mut batch = BytesMut::new();
    let reason = loop {
        let first = tokio::select! {
            frame = frames.recv() => frame,
            _ = stop.wait_for(|stopped| *stopped) => return,
        };
        // The connection holds the sender, so the queue cannot end while it is open.
        let Some(first) = first else { return };
        batch.clear();
        batch.extend_from_slice(&first);
        while batch.len() < WRITE_BATCH_BYTES_MAX {
            match frames.try_recv() {
                Ok(frame) => batch.extend_from_slice(&frame),
                Err(_) => break,
            }
        }
        // The flush pushes out what a TLS stream still holds (a no-op on plain TCP).
        let writing = async {
            socket.write_all(&batch).await?;
            socket.flush().await
        };
        tokio::select! {
            written = writing => {
                if let Err(error) = written {
                    break format!("write failed: {error}");
                }
            }
            _ = stop.wait_for(|stopped| *stopped) => return,
        }
    };
    connection.close(&reason);
}

/// Reads and dispatches frames until the stream ends or the connection closes.
async fn read_loop(
    connection: Arc<AsyncConnection>,
    mut socket: impl AsyncRead + Unpin,
    mut stop: watch::Receiver<bool>,
) {
    let decoder = FrameDecoder::default();
    let mut buffer = BytesMut::with_capacity(READ_CHUNK_BYTES);
    let reason = 'read: loop {
        loop {
            match decoder.decode(&mut buffer) {
                Ok(Some(Decoded::Command(command))) => connection.dispatch(command),
                Ok(Some(Decoded::Malformed(error))) => {
                    log::warn!("{}: skipped a malformed frame: {error}", connection.addr)
                }
                Ok(None) => break,
                Err(error) => break 'read format!("broken frame stream: {error}"),
            }
        }
        let wanted = decoder.bytes_wanted(&buffer).ok().flatten().unwrap_or(0);
        buffer.reserve(wanted.saturating_sub(buffer.len()).max(READ_CHUNK_BYTES));
        tokio::select! {
            read = socket.read_buf(&mut buffer) => match read {
                Ok(0) => break String::from("closed by peer"),
                Ok(_) => {}
                Err(error) => break format!("read failed: {error}"),
            },
            _ = stop.wait_for(|stopped| *stopped) => return,
        }
    };
    connection.close(&reason);
}
