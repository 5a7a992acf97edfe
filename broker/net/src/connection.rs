//! One remoting connection: a reader task, a writer task and a handle shared with processors.
//!
//! ```text
//!  socket --read--> buffer --FrameDecoder--> request  --spawn--> processor --+
//!                                      \--> response (flag bit 0) --> pending[opaque]
//!  socket <--write-- pending output bytes <--encode-- responses, server requests <---+
//! ```
//!
//! Invariants:
//! * The read buffer holds at most one frame beyond what is decoded, and a frame's length is
//!   checked against the maximum before its bytes are awaited (no reservation from a length
//!   field).
//! * At most `inflight_requests_max` requests are being processed; at the limit the reader
//!   stops reading until one finishes, so a pipelining client is slowed by TCP, not by memory.
//! * Responses go out in completion order, which may differ from request order; clients match
//!   them by `opaque`.
//! * The writer writes everything queued since its last write in one call (write batching).
//! * A malformed frame whose boundary is intact is skipped and the connection goes on; an
//!   impossible length closes the connection (the stream cannot be resynchronised).
//! * Frames with the response flag are answers to this server's own requests, matched by the
//!   server's opaque space (docs/protocol.md#opaque-spaces-are-per-sender); unmatched ones are
//!   dropped.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use comet_proto::frame::encode;
use comet_proto::{Decoded, FrameDecoder, RemotingCommand};
use comet_rt::sync::{oneshot, Notify, OneshotSender};
use comet_rt::task_class::{spawn_detached, timeout, TaskClass};
use comet_rt::ShardId;
use thiserror::Error;

use crate::dispatch::{DispatchTable, RequestContext};
use crate::limits::{READ_CHUNK_BYTES, READ_CHUNK_BYTES_MIN, SERVER_REQUESTS_PER_CONNECTION_MAX};
use crate::tls::Transport;

/// Identity of a connection, unique within the process: the accepting shard and a serial.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnectionId {
    /// The shard that accepted the connection (and owns it).
    pub shard: ShardId,
    /// Per-shard serial number.
    pub serial: u64,
}

impl fmt::Display for ConnectionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/conn-{}", self.shard, self.serial)
    }
}

/// A failed send or server-to-client request.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ConnectionError {
    /// The connection is closed; nothing was sent.
    #[error("connection {0} is closed")]
    Closed(ConnectionId),
    /// The peer did not answer in time.
    #[error("no response from {peer} within {after:?}")]
    Timeout {
        /// The peer.
        peer: SocketAddr,
        /// The limit that passed.
        after: Duration,
    },
    /// Too many server-to-client requests already await answers on this connection.
    #[error("{0} server requests already pending on the connection")]
    TooManyPending(usize),
}

/// Per-connection limits.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    /// Largest frame accepted (length prefix excluded).
    pub frame_bytes_max: usize,
    /// Requests processed at once.
    pub inflight_requests_max: usize,
    /// Close after this long without receiving anything.
    pub idle_timeout: Duration,
    /// The task queue the writer and the processors run in.
    pub task_class: TaskClass,
}

struct Shared {
    id: ConnectionId,
    peer_addr: SocketAddr,
    local_addr: SocketAddr,
    transport: Transport,
    output: RefCell<BytesMut>,
    output_ready: Notify,
    closed: Cell<bool>,
    pending: RefCell<HashMap<i32, OneshotSender<RemotingCommand>>>,
    next_opaque: Cell<i32>,
    inflight: Cell<usize>,
    inflight_released: Notify,
}

/// A handle to a connection; clones share it. Lives on the accepting shard only.
#[derive(Clone)]
pub struct ConnectionHandle {
    shared: Rc<Shared>,
}

impl fmt::Debug for ConnectionHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Connection({}, {})",
            self.shared.id, self.shared.peer_addr
        )
    }
}

impl ConnectionHandle {
    pub(crate) fn new(id: ConnectionId, transport: Transport) -> ConnectionHandle {
        ConnectionHandle {
            shared: Rc::new(Shared {
                id,
                peer_addr: transport.peer_addr(),
                local_addr: transport.local_addr(),
                transport,
                output: RefCell::new(BytesMut::new()),
                output_ready: Notify::default(),
                closed: Cell::new(false),
                pending: RefCell::new(HashMap::new()),
                next_opaque: Cell::new(0),
                inflight: Cell::new(0),
                inflight_released: Notify::default(),
            }),
        }
    }

    /// The connection's identity.
    pub fn id(&self) -> ConnectionId {
        self.shared.id
    }

    /// The client's address (`ip:port`, as Java's `RemotingHelper.parseChannelRemoteAddr`).
    pub fn peer_addr(&self) -> SocketAddr {
        self.shared.peer_addr
    }

    /// The server's address on this connection.
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local_addr
    }

    /// True when the client speaks TLS on this connection (docs/operations.md#tls).
    pub fn is_tls(&self) -> bool {
        self.shared.transport.is_tls()
    }

    /// True once the connection is closed or closing.
    pub fn is_closed(&self) -> bool {
        self.shared.closed.get()
    }

    /// Queues `command` (a response, or a request built by the caller) for the writer.
    pub fn send(&self, command: &RemotingCommand) -> Result<(), ConnectionError> {
        if self.is_closed() {
            return Err(ConnectionError::Closed(self.id()));
        }
        encode(command, &mut self.shared.output.borrow_mut());
        self.shared.output_ready.notify();
        Ok(())
    }

    fn next_opaque(&self) -> i32 {
        let opaque = self.shared.next_opaque.get();
        self.shared.next_opaque.set(opaque.wrapping_add(1));
        opaque
    }

    /// Sends `request` one-way (no answer expected), with an opaque from this server's space.
    pub fn send_oneway(&self, mut request: RemotingCommand) -> Result<(), ConnectionError> {
        request.opaque = self.next_opaque();
        request.set_oneway();
        self.send(&request)
    }

    /// Sends `request` to the client and waits up to `limit` for its response (matched by the
    /// opaque this call assigns).
    pub async fn invoke(
        &self,
        mut request: RemotingCommand,
        limit: Duration,
    ) -> Result<RemotingCommand, ConnectionError> {
        assert!(
            !request.is_oneway(),
            "one-way requests go through send_oneway"
        );
        let pending = self.shared.pending.borrow().len();
        if pending >= SERVER_REQUESTS_PER_CONNECTION_MAX {
            return Err(ConnectionError::TooManyPending(pending));
        }
        let opaque = self.next_opaque();
        request.opaque = opaque;
        let (sender, receiver) = oneshot();
        self.shared.pending.borrow_mut().insert(opaque, sender);
        if let Err(error) = self.send(&request) {
            self.shared.pending.borrow_mut().remove(&opaque);
            return Err(error);
        }
        let outcome = timeout(limit, receiver.recv()).await;
        self.shared.pending.borrow_mut().remove(&opaque);
        match outcome {
            Ok(Some(response)) => Ok(response),
            Ok(None) => Err(ConnectionError::Closed(self.id())),
            Err(_) => Err(ConnectionError::Timeout {
                peer: self.peer_addr(),
                after: limit,
            }),
        }
    }

    /// Closes the connection: the reader stops, queued output is still written, pending
    /// server requests fail with `Closed`.
    pub fn close(&self) {
        if self.shared.closed.replace(true) {
            return;
        }
        self.shared.pending.borrow_mut().clear();
        self.shared.output_ready.notify();
        self.shared.inflight_released.notify();
        // Only the read side: the reader ends, the writer still flushes queued answers, and
        // run_connection shuts the socket fully once it has.
        self.shared.transport.shutdown_read();
    }

    /// Number of requests being processed.
    pub fn inflight_requests(&self) -> usize {
        self.shared.inflight.get()
    }
}

/// Runs a connection until it closes: spawns its writer, then reads and dispatches.
pub(crate) async fn run_connection(
    connection: ConnectionHandle,
    table: Rc<DispatchTable>,
    limits: ConnectionLimits,
) {
    let writer = connection.clone();
    let (writer_done, writer_finished) = oneshot::<()>();
    spawn_detached(limits.task_class, async move {
        write_loop(&writer).await;
        writer_done.send(());
    });
    if let Err(error) = read_loop(&connection, &table, limits).await {
        log::debug!(
            "connection {} from {} ends: {error}",
            connection.id(),
            connection.peer_addr()
        );
    }
    connection.shared.closed.set(true);
    connection.shared.pending.borrow_mut().clear();
    connection.shared.output_ready.notify();
    // The writer flushes what is queued, then ends; the socket closes with the last handle.
    let _ = writer_finished.recv().await;
    connection.shared.transport.shutdown();
}

async fn read_loop(
    connection: &ConnectionHandle,
    table: &Rc<DispatchTable>,
    limits: ConnectionLimits,
) -> io::Result<()> {
    let decoder = FrameDecoder::new(limits.frame_bytes_max);
    let stream = &connection.shared.transport;
    stream.set_read_timeout(Some(limits.idle_timeout))?;
    let mut buffer = BytesMut::new();
    let mut chunk = ReadChunk::new();
    loop {
        drain_frames(connection, table, &decoder, &mut buffer, limits).await?;
        if connection.is_closed() {
            return Ok(());
        }
        if buffer.is_empty() && buffer.capacity() > READ_CHUNK_BYTES {
            // A large frame's allocation is not kept by a connection that went quiet.
            buffer = BytesMut::new();
        }
        let read = stream.read(chunk.bytes()).await?;
        if read == 0 {
            return Ok(());
        }
        buffer.extend_from_slice(&chunk.bytes()[..read]);
        chunk.after_read(read);
    }
}

/// The buffer a connection reads into, sized by what its reads bring (see
/// [`READ_CHUNK_BYTES_MIN`]): a busy connection reads up to [`READ_CHUNK_BYTES`] per call, an
/// idle one holds the minimum.
struct ReadChunk {
    bytes: Vec<u8>,
    /// Reads in a row that brought under a quarter of the chunk.
    small_reads: u32,
}

/// Reads in a row under a quarter of the chunk before it halves: a connection whose reads
/// alternate between full and small ones keeps its size rather than reallocating each time.
const SMALL_READS_BEFORE_SHRINK: u32 = 8;

impl ReadChunk {
    fn new() -> ReadChunk {
        ReadChunk {
            bytes: vec![0; READ_CHUNK_BYTES_MIN],
            small_reads: 0,
        }
    }

    fn bytes(&mut self) -> &mut [u8] {
        &mut self.bytes
    }

    /// Resizes the chunk after a read of `read` bytes into it.
    fn after_read(&mut self, read: usize) {
        let len = self.bytes.len();
        assert!(read <= len, "a read fits its chunk");
        self.small_reads = if read < len / 4 {
            self.small_reads + 1
        } else {
            0
        };
        let next = if read == len {
            (len * 2).min(READ_CHUNK_BYTES)
        } else if self.small_reads >= SMALL_READS_BEFORE_SHRINK {
            self.small_reads = 0;
            (len / 2).max(READ_CHUNK_BYTES_MIN)
        } else {
            len
        };
        if next != len {
            self.bytes = vec![0; next];
        }
    }
}

async fn drain_frames(
    connection: &ConnectionHandle,
    table: &Rc<DispatchTable>,
    decoder: &FrameDecoder,
    buffer: &mut BytesMut,
    limits: ConnectionLimits,
) -> io::Result<()> {
    loop {
        let decoded = decoder
            .decode(buffer)
            .map_err(|error| io::Error::new(io::ErrorKind::InvalidData, error))?;
        match decoded {
            None => return Ok(()),
            Some(Decoded::Malformed(error)) => {
                log::warn!(
                    "skipping malformed frame from {} on {}: {error}",
                    connection.peer_addr(),
                    connection.id()
                );
            }
            Some(Decoded::Command(command)) if command.is_response() => {
                complete_pending(connection, command);
            }
            Some(Decoded::Command(command)) => {
                wait_for_inflight_slot(connection, limits.inflight_requests_max).await;
                if connection.is_closed() {
                    return Ok(());
                }
                start_request(connection, table, command, limits.task_class);
            }
        }
    }
}

fn complete_pending(connection: &ConnectionHandle, response: RemotingCommand) {
    let waiter = connection
        .shared
        .pending
        .borrow_mut()
        .remove(&response.opaque);
    match waiter {
        Some(waiter) => waiter.send(response),
        None => log::debug!(
            "dropping unmatched response opaque {} from {}",
            response.opaque,
            connection.peer_addr()
        ),
    }
}

async fn wait_for_inflight_slot(connection: &ConnectionHandle, inflight_max: usize) {
    while connection.shared.inflight.get() >= inflight_max && !connection.is_closed() {
        connection.shared.inflight_released.notified().await;
    }
}

fn start_request(
    connection: &ConnectionHandle,
    table: &Rc<DispatchTable>,
    request: RemotingCommand,
    class: TaskClass,
) {
    let shared = &connection.shared;
    shared.inflight.set(shared.inflight.get() + 1);
    let context = RequestContext {
        connection: connection.clone(),
        shard: connection.id().shard,
    };
    let class = table.class_of(request.code).unwrap_or(class);
    let table = table.clone();
    spawn_detached(class, async move {
        let oneway = request.is_oneway();
        let response = table.dispatch(context.clone(), request).await;
        let connection = context.connection;
        if let Some(response) = response.filter(|_| !oneway) {
            // A closed connection cannot be answered; the client has gone.
            let _ = connection.send(&response);
        }
        let shared = &connection.shared;
        assert!(shared.inflight.get() > 0);
        shared.inflight.set(shared.inflight.get() - 1);
        shared.inflight_released.notify();
    });
}

async fn write_loop(connection: &ConnectionHandle) {
    let stream = &connection.shared.transport;
    loop {
        let batch: Bytes = connection.shared.output.borrow_mut().split().freeze();
        if batch.is_empty() {
            if connection.is_closed() {
                return;
            }
            connection.shared.output_ready.notified().await;
            continue;
        }
        if let Err(error) = stream.write_all(&batch).await {
            log::debug!("write to {} failed: {error}", connection.peer_addr());
            connection.close();
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the read chunk grows by doubling while reads fill it, up to READ_CHUNK_BYTES,
    // keeps its size while reads use a quarter or more of it or while small reads alternate
    // with full ones, and halves back to READ_CHUNK_BYTES_MIN (never below) after eight
    // small reads in a row: an idle connection holds the minimum, a busy one the maximum.
    #[test]
    fn the_read_chunk_follows_what_reads_bring() {
        let mut chunk = ReadChunk::new();
        assert_eq!(chunk.bytes().len(), READ_CHUNK_BYTES_MIN);
        let mut sizes = Vec::new();
        for _ in 0..6 {
            let len = chunk.bytes().len();
            chunk.after_read(len);
            sizes.push(chunk.bytes().len() / 1024);
        }
        assert_eq!(sizes, [8, 16, 32, 64, 64, 64]);
        chunk.after_read(READ_CHUNK_BYTES / 4);
        assert_eq!(chunk.bytes().len(), READ_CHUNK_BYTES, "a quarter keeps it");
        for _ in 0..20 {
            chunk.after_read(100);
            chunk.after_read(READ_CHUNK_BYTES);
        }
        assert_eq!(
            chunk.bytes().len(),
            READ_CHUNK_BYTES,
            "alternating keeps it"
        );
        sizes.clear();
        for _ in 0..6 {
            for _ in 0..SMALL_READS_BEFORE_SHRINK {
                chunk.after_read(100);
            }
            sizes.push(chunk.bytes().len() / 1024);
        }
        assert_eq!(sizes, [32, 16, 8, 4, 4, 4]);
        chunk.after_read(100);
        assert_eq!(chunk.bytes().len(), READ_CHUNK_BYTES_MIN);
    }
}
