//! One TCP connection to one peer address.
//!
//! ```text
//!  caller threads ──(writer mutex)──► socket ──► peer
//!                                                 │
//!  pending map ◄── reader thread ◄── socket ◄─────┘
//!   opaque → waiter      │
//!                        └──► inbound sink (broker → client requests)
//! ```
//!
//! Writers take the writer mutex for one whole frame, so frames from many threads never
//! interleave and requests pipeline freely. The reader thread owns the read half: it decodes
//! frames, completes waiters of responses (flag bit 0,
//! docs/protocol.md#opaque-spaces-are-per-sender: a broker request with the
//! same opaque as one of ours is a request, not our answer) and hands requests to the sink.
//!
//! A connection is closed once: by a read or write failure, by a broken frame stream, by the owner,
//! or by the transport's scanner once it has been idle too long (nothing read or written, nothing
//! pending; see [`Connection::idle_for`]). Closing shuts the socket down (which ends the reader
//! thread) and fails every pending request with `ConnectionClosed`. A closed connection is never
//! reused; the pool opens a fresh one on the next request.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread::{self, JoinHandle, ThreadId};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use comet_proto::frame::{self, Decoded, FrameDecoder};
use comet_proto::RemotingCommand;

use super::pending::{Pending, PendingMap, Waiter};
use super::tls::{TlsOptions, TlsSession};
use crate::error::{ClientError, Result};
use crate::limits::READ_CHUNK_BYTES;
use crate::util::lock;

/// Receives what the reader thread cannot handle alone.
pub(crate) trait ConnectionEvents: Send + Sync {
    /// A request from the peer (broker → client).
    fn on_request(&self, connection: &Arc<Connection>, request: RemotingCommand);
    /// The connection closed; it is already failed and must be forgotten.
    fn on_closed(&self, connection: &Arc<Connection>);
}

/// A live connection. Shared by every caller talking to the same address.
pub struct Connection {
    addr: String,
    writer: Mutex<TcpStream>,
    /// The TLS session when the connection speaks TLS (see `super::tls`).
    tls: Option<Arc<TlsSession>>,
    /// A clone of the socket used only to shut it down, so closing never waits for a writer
    /// blocked on a full send buffer.
    control: TcpStream,
    pending: PendingMap,
    closed: AtomicBool,
    /// When the connection opened; activity times are kept relative to it.
    opened: Instant,
    /// Milliseconds after `opened` of the last frame read or written.
    last_activity_ms: AtomicU64,
    reader: Mutex<Option<JoinHandle<()>>>,
    reader_thread: Mutex<Option<ThreadId>>,
}

impl Connection {
    /// Opens a connection and starts its reader thread.
    pub(crate) fn open(
        addr: &str,
        connect_timeout: Duration,
        write_timeout: Duration,
        tls: Option<&TlsOptions>,
        events: Weak<dyn ConnectionEvents>,
    ) -> Result<Arc<Connection>> {
        let mut stream = connect(addr, connect_timeout)?;
        let connect_error = |error: std::io::Error| ClientError::Connect {
            addr: addr.to_owned(),
            reason: error.to_string(),
        };
        stream.set_nodelay(true).map_err(connect_error)?;
        stream
            .set_write_timeout(Some(write_timeout))
            .map_err(connect_error)?;
        let tls = match tls {
            Some(options) => Some(Arc::new(options.handshake(
                addr,
                &mut stream,
                connect_timeout,
            )?)),
            None => None,
        };
        let read_half = stream.try_clone().map_err(connect_error)?;
        let control = stream.try_clone().map_err(connect_error)?;
        let connection = Arc::new(Connection {
            addr: addr.to_owned(),
            writer: Mutex::new(stream),
            tls: tls.clone(),
            control,
            pending: PendingMap::default(),
            closed: AtomicBool::new(false),
            opened: Instant::now(),
            last_activity_ms: AtomicU64::new(0),
            reader: Mutex::new(None),
            reader_thread: Mutex::new(None),
        });
        let reader_connection = connection.clone();
        let handle = thread::Builder::new()
            .name(format!("comet-read-{addr}"))
            .spawn(move || reader_main(reader_connection, read_half, tls, events))
            .map_err(connect_error)?;
        *lock(&connection.reader_thread) = Some(handle.thread().id());
        *lock(&connection.reader) = Some(handle);
        log::debug!("connected to {addr}");
        Ok(connection)
    }

    /// The peer address this connection was opened to.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// True once the connection failed or was closed.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Requests waiting for their response.
    pub fn pending_count(&self) -> usize {
        self.pending.len()
    }

    /// How long the connection has been idle at `now`: zero while a request is pending,
    /// else the time since the last frame read or written.
    pub fn idle_for(&self, now: Instant) -> Duration {
        if !self.pending.is_empty() {
            return Duration::ZERO;
        }
        let last =
            self.opened + Duration::from_millis(self.last_activity_ms.load(Ordering::Relaxed));
        now.saturating_duration_since(last)
    }

    /// Records a frame read or written now.
    fn touch(&self) {
        let elapsed_ms = u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_activity_ms
            .fetch_max(elapsed_ms, Ordering::Relaxed);
    }

    pub(crate) fn pending(&self) -> &PendingMap {
        &self.pending
    }

    /// Registers `waiter` and writes `request`. On `Err` the waiter was not (and will never
    /// be) completed; on `Ok` it will be completed exactly once.
    pub(crate) fn send(
        self: &Arc<Self>,
        request: &RemotingCommand,
        timeout: Duration,
        waiter: Waiter,
    ) -> Result<()> {
        assert!(!request.is_response());
        assert!(!request.is_oneway());
        if self.is_closed() {
            return Err(self.closed_error("closed before the request was written"));
        }
        let pending = Pending {
            code: request.code,
            deadline: Instant::now() + timeout,
            timeout,
            waiter,
        };
        if self
            .pending
            .insert(&self.addr, request.opaque, pending)
            .is_err()
        {
            return Err(ClientError::TooManyPending {
                addr: self.addr.clone(),
                pending: self.pending.len(),
            });
        }
        match self.write(request) {
            Ok(()) => Ok(()),
            // Whoever removes the entry owns the waiter: if the close below already failed
            // it, the caller was told through the waiter, so this call succeeded.
            Err(error) => match self.pending.remove(request.opaque) {
                Some(_) => Err(error),
                None => Ok(()),
            },
        }
    }

    /// Writes a frame nobody waits for: one-way requests and responses to the peer.
    pub(crate) fn write(&self, command: &RemotingCommand) -> Result<()> {
        if self.is_closed() {
            return Err(self.closed_error("closed before the frame was written"));
        }
        let bytes = frame::encode_to_bytes(command);
        self.touch();
        let outcome = match &self.tls {
            Some(tls) => tls.write_all(&mut lock(&self.writer), &bytes),
            None => lock(&self.writer).write_all(&bytes),
        };
        outcome.map_err(|error| {
            let reason = format!("write failed: {error}");
            self.close(&reason);
            self.closed_error(&reason)
        })
    }

    /// Closes the connection and fails every pending request. Idempotent.
    pub fn close(&self, reason: &str) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        log::debug!("closing connection to {}: {reason}", self.addr);
        // Fails only when the socket is already gone, which is the goal anyway.
        let _ = self.control.shutdown(Shutdown::Both);
        for (_, pending) in self.pending.take_all() {
            pending.waiter.complete(Err(self.closed_error(reason)));
        }
    }

    /// Waits for the reader thread to finish, unless called from it.
    pub(crate) fn join_reader(&self) {
        let current = thread::current().id();
        if *lock(&self.reader_thread) == Some(current) {
            return;
        }
        if let Some(handle) = lock(&self.reader).take() {
            let _ = handle.join();
        }
    }

    pub(crate) fn closed_error(&self, reason: &str) -> ClientError {
        ClientError::ConnectionClosed {
            addr: self.addr.clone(),
            reason: reason.to_owned(),
        }
    }
}

fn connect(addr: &str, timeout: Duration) -> Result<TcpStream> {
    let connect_error = |reason: String| ClientError::Connect {
        addr: addr.to_owned(),
        reason,
    };
    let targets: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .map_err(|error| connect_error(error.to_string()))?
        .collect();
    let mut last_error = String::from("address resolved to nothing");
    for target in targets {
        match TcpStream::connect_timeout(&target, timeout) {
            Ok(stream) => return Ok(stream),
            Err(error) => last_error = error.to_string(),
        }
    }
    Err(connect_error(last_error))
}

fn reader_main(
    connection: Arc<Connection>,
    stream: TcpStream,
    tls: Option<Arc<TlsSession>>,
    events: Weak<dyn ConnectionEvents>,
) {
    let reason = read_loop(&connection, stream, tls.as_deref(), &events);
    connection.close(&reason);
    if let Some(events) = events.upgrade() {
        events.on_closed(&connection);
    }
}

/// Reads and dispatches frames until the stream ends; returns why it ended.
fn read_loop(
    connection: &Arc<Connection>,
    mut stream: TcpStream,
    tls: Option<&TlsSession>,
    events: &Weak<dyn ConnectionEvents>,
) -> String {
    let decoder = FrameDecoder::default();
    let mut buffer = BytesMut::with_capacity(READ_CHUNK_BYTES);
    let mut chunk = vec![0u8; READ_CHUNK_BYTES];
    let mut plaintext = Vec::new();
    loop {
        loop {
            match decoder.decode(&mut buffer) {
                Ok(Some(Decoded::Command(command))) => dispatch(connection, command, events),
                Ok(Some(Decoded::Malformed(error))) => {
                    log::warn!("{}: skipped a malformed frame: {error}", connection.addr)
                }
                Ok(None) => break,
                Err(error) => return format!("broken frame stream: {error}"),
            }
        }
        if let Ok(Some(wanted)) = decoder.bytes_wanted(&buffer) {
            buffer.reserve(wanted.saturating_sub(buffer.len()));
        }
        match stream.read(&mut chunk) {
            Ok(0) => return String::from("closed by peer"),
            Ok(count) => {
                connection.touch();
                let Some(tls) = tls else {
                    buffer.extend_from_slice(&chunk[..count]);
                    continue;
                };
                plaintext.clear();
                let open = match tls.decrypt(&chunk[..count], &mut plaintext) {
                    Ok(open) => open,
                    Err(error) => return format!("TLS: {error}"),
                };
                buffer.extend_from_slice(&plaintext);
                if !open {
                    // Frames that arrived with the close are still dispatched first.
                    while let Ok(Some(Decoded::Command(command))) = decoder.decode(&mut buffer) {
                        dispatch(connection, command, events);
                    }
                    return String::from("closed by peer (TLS close_notify)");
                }
            }
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return format!("read failed: {error}"),
        }
    }
}

fn dispatch(
    connection: &Arc<Connection>,
    command: RemotingCommand,
    events: &Weak<dyn ConnectionEvents>,
) {
    if command.is_response() {
        match connection.pending.remove(command.opaque) {
            Some(pending) => pending.waiter.complete(Ok(command)),
            None => log::debug!(
                "{}: response opaque={} matches no pending request (timed out?)",
                connection.addr,
                command.opaque
            ),
        }
        return;
    }
    match events.upgrade() {
        Some(events) => events.on_request(connection, command),
        None => log::debug!("{}: request after client shutdown dropped", connection.addr),
    }
}
