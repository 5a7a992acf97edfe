//! A TCP relay on loopback whose link a test can cut like a network partition.
//!
//! [`Relay::start`] listens on a free loopback port and forwards every connection to a
//! target address, bytes and half-closes both ways. [`Relay::cut`] black-holes the link:
//! from its return no byte and no end of stream crosses in either direction, yet every
//! connection stays open (neither end sees a FIN or a reset), and a connection opened during
//! the cut is accepted but reaches the target only after [`Relay::heal`], as a SYN
//! retransmitted across a partition would. What is held during a cut is delivered at the
//! heal, in order, as TCP retransmission would deliver it. [`Relay::sever`] closes every
//! current connection (both ends see end of stream); new ones are still relayed.
//!
//! Invariants: at most [`CHUNK_BYTES`] per direction of a connection are held in the relay
//! (the rest waits in the kernel's socket buffers and, past them, in the sender: TCP flow
//! control); every thread is joined when the relay drops, which closes every connection.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::LOOPBACK;

/// Most bytes one direction of a connection holds in the relay.
pub const CHUNK_BYTES: usize = 64 * 1024;

/// Longest a single write to a peer blocks: bounds how long [`Relay::cut`] waits for
/// writes already under way, and lets a writer facing a full peer look at the gate again.
const WRITE_WAIT_MAX: Duration = Duration::from_millis(50);

/// Longest wait for the target to accept a relayed connection.
const CONNECT_WAIT_MAX: Duration = Duration::from_secs(5);

/// Whether bytes may move, and who is moving them.
struct Gate {
    /// The link is black-holed.
    cut: bool,
    /// The relay is dropping: every thread ends.
    closing: bool,
    /// Bumped by each sever: a connection of an older generation ends.
    generation: u64,
    /// Writes to a peer under way (each bounded by [`WRITE_WAIT_MAX`]).
    writing: usize,
}

/// What the relay's threads share.
struct Shared {
    target: SocketAddr,
    gate: Mutex<Gate>,
    /// Signalled on every change of the gate.
    changed: Condvar,
    /// Both sockets of each open connection, by connection id (for sever and drop).
    sockets: Mutex<HashMap<u64, Vec<TcpStream>>>,
    /// Connections accepted so far.
    accepted: AtomicU64,
    /// Connection threads, joined at drop (finished ones are reaped as new ones start).
    connections: Mutex<Vec<JoinHandle<()>>>,
}

/// Poison only means another relay thread panicked; the gate's fields stay consistent
/// because every change is a single assignment.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shared {
    /// Waits until bytes may move for a connection of `generation`; false when it must end
    /// instead (severed, or the relay is dropping).
    fn wait_open(&self, generation: u64) -> bool {
        let mut gate = lock(&self.gate);
        loop {
            if gate.closing || gate.generation != generation {
                return false;
            }
            if !gate.cut {
                return true;
            }
            gate = self
                .changed
                .wait(gate)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }

    /// Waits until a write may start and counts it as under way until the guard drops;
    /// `None` when the connection must end instead.
    fn begin_write(&self, generation: u64) -> Option<WriteGuard<'_>> {
        let mut gate = lock(&self.gate);
        loop {
            if gate.closing || gate.generation != generation {
                return None;
            }
            if !gate.cut {
                gate.writing += 1;
                return Some(WriteGuard(self));
            }
            gate = self
                .changed
                .wait(gate)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }

    fn close_sockets(&self, id: u64) {
        if let Some(sockets) = lock(&self.sockets).remove(&id) {
            for socket in sockets {
                let _ = socket.shutdown(Shutdown::Both);
            }
        }
    }
}

/// A write under way; dropping it lets a waiting [`Relay::cut`] return.
struct WriteGuard<'a>(&'a Shared);

impl Drop for WriteGuard<'_> {
    fn drop(&mut self) {
        lock(&self.0.gate).writing -= 1;
        self.0.changed.notify_all();
    }
}

/// A cuttable TCP relay to one target; closes every connection and joins its threads on
/// drop.
pub struct Relay {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

impl Relay {
    /// Listens on a free loopback port and relays each connection to `target`.
    pub fn start(target: SocketAddr) -> io::Result<Relay> {
        let listener = TcpListener::bind(SocketAddr::new(LOOPBACK.into(), 0))?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            target,
            gate: Mutex::new(Gate {
                cut: false,
                closing: false,
                generation: 0,
                writing: 0,
            }),
            changed: Condvar::new(),
            sockets: Mutex::new(HashMap::new()),
            accepted: AtomicU64::new(0),
            connections: Mutex::new(Vec::new()),
        });
        let accepting = Arc::clone(&shared);
        let acceptor = std::thread::Builder::new()
            .name("relay-accept".into())
            .spawn(move || accept_loop(&listener, &accepting))?;
        Ok(Relay {
            addr,
            shared,
            acceptor: Some(acceptor),
        })
    }

    /// The address to connect to instead of the target.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Black-holes the link. On return no write to either end is under way and none starts
    /// until [`Relay::heal`]; connections stay open.
    pub fn cut(&self) {
        let mut gate = lock(&self.shared.gate);
        gate.cut = true;
        while gate.writing > 0 {
            gate = self
                .shared
                .changed
                .wait(gate)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }

    /// Lets bytes move again: what was held is delivered, and connections accepted during
    /// the cut reach the target.
    pub fn heal(&self) {
        lock(&self.shared.gate).cut = false;
        self.shared.changed.notify_all();
    }

    /// Whether the link is cut.
    pub fn is_cut(&self) -> bool {
        lock(&self.shared.gate).cut
    }

    /// Closes every current connection at both ends (each sees end of stream); later
    /// connections are relayed as before.
    pub fn sever(&self) {
        lock(&self.shared.gate).generation += 1;
        self.shared.changed.notify_all();
        let ids: Vec<u64> = lock(&self.shared.sockets).keys().copied().collect();
        for id in ids {
            self.shared.close_sockets(id);
        }
    }

    /// Connections accepted since the start (the same count after a heal: the connections
    /// cut carried on, none replaced them).
    pub fn connections_accepted(&self) -> u64 {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// Connections relayed to the target now (accepted during a cut and not yet connected
    /// onward ones not counted).
    pub fn open_connections(&self) -> usize {
        lock(&self.shared.sockets)
            .values()
            .filter(|sockets| sockets.len() == 2)
            .count()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        lock(&self.shared.gate).closing = true;
        self.shared.changed.notify_all();
        // The acceptor blocks in accept(2): a connection wakes it to see `closing`.
        let _ = TcpStream::connect_timeout(&self.addr, CONNECT_WAIT_MAX);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        let ids: Vec<u64> = lock(&self.shared.sockets).keys().copied().collect();
        for id in ids {
            self.shared.close_sockets(id);
        }
        let connections = std::mem::take(&mut *lock(&self.shared.connections));
        for connection in connections {
            let _ = connection.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    let mut next_id = 0u64;
    loop {
        let accepted = listener.accept();
        if lock(&shared.gate).closing {
            return;
        }
        let Ok((client, _)) = accepted else {
            continue;
        };
        let id = next_id;
        next_id += 1;
        shared.accepted.fetch_add(1, Ordering::SeqCst);
        let generation = lock(&shared.gate).generation;
        let relaying = Arc::clone(shared);
        let spawned = std::thread::Builder::new()
            .name(format!("relay-conn-{id}"))
            .spawn(move || relay_connection(&relaying, id, generation, client));
        let mut connections = lock(&shared.connections);
        connections.retain(|connection| !connection.is_finished());
        // A thread that cannot start drops its client: that connection is closed.
        if let Ok(connection) = spawned {
            connections.push(connection);
        }
    }
}

/// Connects `client` onward once the link is up, then moves bytes both ways until both
/// directions ended.
fn relay_connection(shared: &Arc<Shared>, id: u64, generation: u64, client: TcpStream) {
    if let Ok(registered) = client.try_clone() {
        lock(&shared.sockets).insert(id, vec![registered]);
    }
    let upstream = shared.wait_open(generation).then(|| {
        TcpStream::connect_timeout(&shared.target, CONNECT_WAIT_MAX)
            .and_then(|upstream| upstream.try_clone().map(|clone| (upstream, clone)))
    });
    let Some(Ok((upstream, registered))) = upstream else {
        shared.close_sockets(id);
        return;
    };
    match lock(&shared.sockets).get_mut(&id) {
        Some(sockets) => sockets.push(registered),
        // Severed or dropped while connecting: nothing would ever close this upstream.
        None => return,
    }
    let streams = (
        client.try_clone(),
        upstream.try_clone(),
        client.set_write_timeout(Some(WRITE_WAIT_MAX)),
        upstream.set_write_timeout(Some(WRITE_WAIT_MAX)),
        client.set_nodelay(true),
        upstream.set_nodelay(true),
    );
    let (Ok(client_reader), Ok(upstream_reader), Ok(()), Ok(()), Ok(()), Ok(())) = streams else {
        shared.close_sockets(id);
        return;
    };
    let downstream = Arc::clone(shared);
    let back = std::thread::Builder::new()
        .name(format!("relay-back-{id}"))
        .spawn(move || pump(&downstream, generation, upstream_reader, client));
    if let Ok(back) = back {
        pump(shared, generation, client_reader, upstream);
        let _ = back.join();
    }
    shared.close_sockets(id);
}

/// Moves bytes from `from` to `to` while the gate allows, one chunk at a time; passes an
/// end of stream on as a half-close.
fn pump(shared: &Shared, generation: u64, mut from: TcpStream, mut to: TcpStream) {
    let mut buffer = vec![0u8; CHUNK_BYTES];
    loop {
        let read = match from.read(&mut buffer) {
            Ok(read) => read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => 0,
        };
        if read == 0 {
            // A FIN crosses the link like a byte: not during a cut.
            if shared.wait_open(generation) {
                let _ = to.shutdown(Shutdown::Write);
            }
            return;
        }
        let mut sent = 0;
        while sent < read {
            let Some(_writing) = shared.begin_write(generation) else {
                return;
            };
            match to.write(&buffer[sent..read]) {
                Ok(0) => return,
                Ok(written) => sent += written,
                Err(error)
                    if matches!(
                        error.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) => {}
                Err(_) => {
                    // The destination is gone: so is this connection's other end.
                    let _ = from.shutdown(Shutdown::Both);
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wait_until;
    use std::sync::atomic::AtomicUsize;

    const LIMIT: Duration = Duration::from_secs(10);

    /// A target that echoes every byte back on each connection, until the peer closes,
    /// counting the bytes it received.
    fn echo_server() -> (SocketAddr, Arc<AtomicUsize>, JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let received = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&received);
        let server = std::thread::spawn(move || {
            let mut echoes = Vec::new();
            // Three connections in each test below.
            for _ in 0..3 {
                let (mut connection, _) = listener.accept().unwrap();
                let counted = Arc::clone(&counted);
                echoes.push(std::thread::spawn(move || {
                    let mut buffer = [0u8; 4096];
                    loop {
                        let read = connection.read(&mut buffer).unwrap_or(0);
                        if read == 0 {
                            return;
                        }
                        counted.fetch_add(read, Ordering::SeqCst);
                        if connection.write_all(&buffer[..read]).is_err() {
                            return;
                        }
                    }
                }));
            }
            for echo in echoes {
                echo.join().unwrap();
            }
        });
        (addr, received, server)
    }

    fn connect(addr: SocketAddr) -> TcpStream {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(LIMIT)).unwrap();
        stream
    }

    fn echoed(stream: &mut TcpStream, bytes: &[u8]) -> Vec<u8> {
        let mut back = vec![0; bytes.len()];
        stream.read_exact(&mut back).unwrap();
        back
    }

    // Proves a cut holds bytes both ways without closing anything, a connection opened
    // during the cut waits for the heal, the heal delivers what was held in order, and a
    // relay forwards several connections at once.
    #[test]
    fn cut_holds_bytes_and_heal_delivers_them() {
        let (target, received, server) = echo_server();
        let relay = Relay::start(target).unwrap();
        let mut first = connect(relay.addr());
        first.write_all(b"before").unwrap();
        assert_eq!(echoed(&mut first, b"before"), b"before");
        assert_eq!(relay.open_connections(), 1);

        relay.cut();
        assert!(relay.is_cut());
        first.write_all(b"during").unwrap();
        let mut late = connect(relay.addr());
        late.write_all(b"late").unwrap();
        // Nothing comes back, and the connection is neither closed nor reset: the read
        // times out.
        first
            .set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut byte = [0u8; 1];
        let error = first.read(&mut byte).unwrap_err();
        assert!(
            matches!(
                error.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ),
            "{error}"
        );
        assert_eq!(
            relay.open_connections(),
            1,
            "the late one waits for the heal"
        );
        assert_eq!(
            received.load(Ordering::SeqCst),
            6,
            "the target got only the first bytes"
        );

        relay.heal();
        first.set_read_timeout(Some(LIMIT)).unwrap();
        assert_eq!(echoed(&mut first, b"during"), b"during");
        assert_eq!(echoed(&mut late, b"late"), b"late");
        assert_eq!(relay.connections_accepted(), 2);
        first.write_all(b"after").unwrap();
        assert_eq!(echoed(&mut first, b"after"), b"after");
        assert_eq!(relay.open_connections(), 2);

        // More than the relay holds, through a cut and heal: every byte, in order.
        let big: Vec<u8> = (0..4 * CHUNK_BYTES)
            .map(|i| u8::try_from(i % 251).unwrap())
            .collect();
        let mut reader = late.try_clone().unwrap();
        let expected = big.len();
        let collecting = std::thread::spawn(move || {
            let mut back = vec![0; expected];
            reader.read_exact(&mut back).unwrap();
            back
        });
        relay.cut();
        let sending = big.clone();
        let mut writer = late.try_clone().unwrap();
        let sender = std::thread::spawn(move || writer.write_all(&sending).unwrap());
        relay.heal();
        sender.join().unwrap();
        assert_eq!(collecting.join().unwrap(), big);

        // The echo server's third connection: nothing waits for it when the relay drops.
        let third = connect(relay.addr());
        wait_until("the third connection relayed", LIMIT, || {
            relay.open_connections() == 3
        });
        drop(relay);
        for mut stream in [first, late, third] {
            let mut rest = Vec::new();
            stream.read_to_end(&mut rest).unwrap();
            assert!(rest.is_empty(), "a dropped relay closes its connections");
        }
        server.join().unwrap();
    }

    // Proves sever closes both ends of every connection (each sees end of stream) and the
    // relay still forwards new connections; a relay that drops frees its port.
    #[test]
    fn sever_closes_connections_and_new_ones_work() {
        let (target, _, server) = echo_server();
        let relay = Relay::start(target).unwrap();
        let mut first = connect(relay.addr());
        first.write_all(b"x").unwrap();
        assert_eq!(echoed(&mut first, b"x"), b"x");
        relay.sever();
        let mut rest = Vec::new();
        first.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty());
        wait_until("the severed connection gone", LIMIT, || {
            relay.open_connections() == 0
        });
        let mut second = connect(relay.addr());
        second.write_all(b"y").unwrap();
        assert_eq!(echoed(&mut second, b"y"), b"y");
        let mut third = connect(relay.addr());
        third.write_all(b"z").unwrap();
        assert_eq!(echoed(&mut third, b"z"), b"z");
        let addr = relay.addr();
        drop(relay);
        drop((second, third));
        server.join().unwrap();
        assert!(TcpStream::connect(addr).is_err(), "the port is closed");
    }
}
