//! TCP listeners and streams over glommio's io_uring network stack.
//!
//! Every shard of a pool binds its own [`Listener`] on the same address; the sockets carry
//! `SO_REUSEPORT`, so the kernel spreads incoming connections across shards and a connection
//! stays on the shard that accepted it. To bind "port 0" on several shards, first take a
//! [`PortReservation`] (a bound, non-listening reuse-port socket that fixes the port number),
//! bind every shard's listener to [`PortReservation::addr`], then drop the reservation.
//!
//! Sockets are made with `socket2`, for IPv4 and IPv6 alike. A listener on the IPv6 wildcard
//! (`[::]`) also accepts IPv4 connections (the Linux default, `net.ipv6.bindv6only = 0`).
//!
//! A [`Stream`] is a cheap-to-clone handle: a connection's reader task and writer task each
//! hold one. glommio keeps separate read and write readiness sources per socket, so one read
//! and one write may be pending at the same time; a stream must not be read by two tasks at
//! once (or written by two), which the connection code guarantees by construction.

use std::cell::RefCell;
use std::future::poll_fn;
use std::io;
use std::net::{Shutdown, SocketAddr};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, IntoRawFd};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_lite::{AsyncRead, AsyncWrite};
use socket2::{Domain, Protocol, SockRef, Socket, Type};

use crate::io_count::{completed, done, IoOp};

/// Connections the kernel queues for a listener before its shard accepts them.
pub const LISTEN_BACKLOG: i32 = 1024;

/// A TCP socket with `SO_REUSEPORT`, bound to `addr` (IPv4 or IPv6), not yet listening.
fn reuse_port_socket(addr: SocketAddr) -> io::Result<Socket> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_port(true)?;
    socket.bind(&addr.into())?;
    Ok(socket)
}

/// The address `socket` is bound to (with the real port after binding port 0).
fn bound_addr(socket: &Socket) -> io::Result<SocketAddr> {
    socket.local_addr()?.as_socket().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "a TCP socket bound to a non-IP address",
        )
    })
}

/// A listening socket with `SO_REUSEPORT`, owned by one shard.
pub struct Listener {
    inner: glommio::net::TcpListener,
    addr: SocketAddr,
}

impl Listener {
    /// Binds and listens on `addr` (IPv4 or IPv6) with `SO_REUSEPORT`. Must run inside an
    /// executor.
    pub fn bind(addr: SocketAddr) -> io::Result<Listener> {
        let socket = reuse_port_socket(addr)?;
        socket.listen(LISTEN_BACKLOG)?;
        let addr = bound_addr(&socket)?;
        // SAFETY: the descriptor is a bound, listening TCP socket whose ownership moves from
        // `socket` to the glommio listener, which closes it.
        let inner = unsafe { glommio::net::TcpListener::from_raw_fd(socket.into_raw_fd()) };
        Ok(Listener { inner, addr })
    }

    /// The bound address (with the real port when bound to port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Waits for the next connection.
    pub async fn accept(&self) -> io::Result<Stream> {
        let stream =
            done(IoOp::SocketAccept, self.inner.accept().await).map_err(io::Error::from)?;
        Stream::from_glommio(stream)
    }
}

/// One TCP connection; clones share the socket.
#[derive(Clone)]
pub struct Stream {
    inner: Rc<RefCell<glommio::net::TcpStream>>,
    peer_addr: SocketAddr,
    local_addr: SocketAddr,
}

impl Stream {
    fn from_glommio(stream: glommio::net::TcpStream) -> io::Result<Stream> {
        let peer_addr = stream.peer_addr().map_err(io::Error::from)?;
        let local_addr = stream.local_addr().map_err(io::Error::from)?;
        Ok(Stream {
            inner: Rc::new(RefCell::new(stream)),
            peer_addr,
            local_addr,
        })
    }

    /// Connects to `addr` (clients inside an executor: broker to name server, tests).
    pub async fn connect(addr: SocketAddr) -> io::Result<Stream> {
        let stream = done(
            IoOp::SocketConnect,
            glommio::net::TcpStream::connect(addr).await,
        )
        .map_err(io::Error::from)?;
        Stream::from_glommio(stream)
    }

    /// The remote address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer_addr
    }

    /// The local address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Disables Nagle's algorithm: responses are batched by the writer already.
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        self.inner
            .borrow()
            .set_nodelay(nodelay)
            .map_err(io::Error::from)
    }

    /// A read that waits longer than `limit` fails with `TimedOut` (idle connections).
    pub fn set_read_timeout(&self, limit: Option<Duration>) -> io::Result<()> {
        self.inner
            .borrow()
            .set_read_timeout(limit)
            .map_err(io::Error::from)
    }

    /// Reads into `buffer`; `Ok(0)` is end of stream.
    pub async fn read(&self, buffer: &mut [u8]) -> io::Result<usize> {
        poll_fn(|cx| {
            let mut stream = self.inner.borrow_mut();
            counted(
                IoOp::SocketRecv,
                Pin::new(&mut *stream).poll_read(cx, buffer),
            )
        })
        .await
    }

    /// Writes all of `bytes`.
    pub async fn write_all(&self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            let written = poll_fn(|cx| {
                let mut stream = self.inner.borrow_mut();
                counted(
                    IoOp::SocketSend,
                    Pin::new(&mut *stream).poll_write(cx, bytes),
                )
            })
            .await?;
            if written == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            bytes = &bytes[written..];
        }
        Ok(())
    }

    /// Shuts both directions down: a pending read on another clone returns end of stream.
    pub fn shutdown(&self) {
        self.shutdown_how(Shutdown::Both);
    }

    /// Shuts the read side down only: a pending read returns end of stream while writes
    /// still go out (a connection closing after it has flushed its answers).
    pub fn shutdown_read(&self) {
        self.shutdown_how(Shutdown::Read);
    }

    fn shutdown_how(&self, how: Shutdown) {
        let stream = self.inner.borrow();
        // SAFETY: the descriptor is the socket `stream` owns, open while `stream` is borrowed,
        // which outlasts `fd`.
        let fd = unsafe { BorrowedFd::borrow_raw(stream.as_raw_fd()) };
        // A failure means the connection is already gone, which is what the caller wants.
        let _ = SockRef::from(&fd).shutdown(how);
    }
}

/// The futures-io traits over the same socket, for adapters written against them (TLS over a
/// connection in comet-net). Each poll borrows the socket only for that poll, so a reader on
/// one clone and a writer on another may be pending at once, as with [`Stream::read`] and
/// [`Stream::write_all`].
impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buffer: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let mut stream = self.inner.borrow_mut();
        counted(
            IoOp::SocketRecv,
            Pin::new(&mut *stream).poll_read(cx, buffer),
        )
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<io::Result<usize>> {
        let mut stream = self.inner.borrow_mut();
        counted(
            IoOp::SocketSend,
            Pin::new(&mut *stream).poll_write(cx, bytes),
        )
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut stream = self.inner.borrow_mut();
        Pin::new(&mut *stream).poll_flush(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut stream = self.inner.borrow_mut();
        Pin::new(&mut *stream).poll_close(cx)
    }
}

/// Counts `op` when `poll` is ready (the operation completed, successfully or not).
fn counted<T>(op: IoOp, poll: Poll<T>) -> Poll<T> {
    if poll.is_ready() {
        completed(op);
    }
    poll
}

/// Holds a port number for a group of reuse-port listeners (see the module docs). The socket
/// is bound but never listens, so the kernel never hands it a connection; dropping the
/// reservation closes it.
pub struct PortReservation {
    _socket: Socket,
    addr: SocketAddr,
}

impl PortReservation {
    /// Binds a reuse-port socket on `addr` (IPv4 or IPv6); with port 0 the kernel picks the
    /// port. Fails with `AddrInUse` when another socket (of any process) listens there: see
    /// [`ensure_port_free`].
    pub fn new(addr: SocketAddr) -> io::Result<PortReservation> {
        ensure_port_free(addr)?;
        let socket = reuse_port_socket(addr)?;
        let addr = bound_addr(&socket)?;
        Ok(PortReservation {
            _socket: socket,
            addr,
        })
    }

    /// The reserved address, with the real port.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

/// How long one probe of [`ensure_port_free`] waits for a connection.
const PORT_PROBE_TIMEOUT: Duration = Duration::from_millis(500);
/// How long [`ensure_port_free`] waits for a busy port to become free.
pub const PORT_BUSY_WAIT: Duration = Duration::from_secs(10);

/// Fails with `AddrInUse` when something listens on `addr` for longer than
/// [`PORT_BUSY_WAIT`] (port 0 always passes). Blocking: call it before serving.
///
/// Why: listeners carry `SO_REUSEPORT`, and the kernel lets any process of the same user join
/// a reuse-port group. Without this check a second broker (or name server) started by mistake
/// on a busy port would silently share the first one's connections, each with its own store.
/// The probe connects to the address (the loopback address for a wildcard one): only a
/// listening socket accepts. It retries for a while because a process killed a moment ago can
/// leave its listener open until the kernel tears down its io_uring instance (the ring holds
/// the socket while its pending accept is cancelled); joining that dying listener's group
/// would hand some new connections to a socket nobody serves.
pub fn ensure_port_free(addr: SocketAddr) -> io::Result<()> {
    ensure_port_free_within(addr, PORT_BUSY_WAIT)
}

/// [`ensure_port_free`] with another wait limit.
pub fn ensure_port_free_within(addr: SocketAddr, wait: Duration) -> io::Result<()> {
    if addr.port() == 0 {
        return Ok(());
    }
    let mut target = addr;
    if target.ip().is_unspecified() {
        target.set_ip(match addr {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    let deadline = crate::clock::monotonic_now() + wait;
    loop {
        if std::net::TcpStream::connect_timeout(&target, PORT_PROBE_TIMEOUT).is_err() {
            return Ok(());
        }
        if crate::clock::monotonic_now() >= deadline {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!(
                    "{addr} is already in use: something listens there \
                     (is another broker or name server running?)"
                ),
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Handing a connection to another shard: one shard accepts and reads what tells it which
/// shard the connection belongs to, then gives the socket up with [`Stream::into_std`] (a
/// std stream is `Send`, so it crosses threads as data) and that shard takes it on with
/// [`Stream::adopt`], without a hop per message afterwards.
impl Stream {
    /// Gives this shard's hold on the connection up, as a std stream another shard adopts.
    /// Fails with `WouldBlock` while another clone of this stream is alive (a reader or a
    /// writer could still use it), and with the error of duplicating the descriptor.
    pub fn into_std(self) -> io::Result<std::net::TcpStream> {
        let Ok(inner) = Rc::try_unwrap(self.inner) else {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "the stream is still used by another clone",
            ));
        };
        let stream = inner.into_inner();
        // glommio gives its descriptor up only by closing it, so a duplicate (close-on-exec,
        // the same open socket) outlives it.
        // SAFETY: the descriptor is the socket `stream` owns, open until `stream` drops below.
        let fd = unsafe {
            std::os::fd::BorrowedFd::borrow_raw(std::os::fd::AsRawFd::as_raw_fd(&stream))
        };
        let owned = fd.try_clone_to_owned()?;
        drop(stream);
        Ok(std::net::TcpStream::from(owned))
    }

    /// Takes a connection on in this shard's executor: one another shard gave up with
    /// [`Stream::into_std`], or one accepted with std. Must run inside an executor.
    pub fn adopt(stream: std::net::TcpStream) -> io::Result<Stream> {
        // SAFETY: the descriptor is a connected TCP socket whose ownership moves from
        // `stream` to the glommio stream, which closes it.
        let fd = std::os::fd::IntoRawFd::into_raw_fd(stream);
        let inner = unsafe { <glommio::net::TcpStream as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        Stream::from_glommio(inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::{run_on_current_thread, ExecutorOptions};
    use std::io::{Read, Write};

    // Proves a port another socket listens on is refused, even though listeners use
    // SO_REUSEPORT (which would otherwise let a second process share it), and a free one is
    // accepted.
    #[test]
    fn busy_port_is_refused() {
        let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = busy.local_addr().unwrap();
        let error = ensure_port_free_within(addr, Duration::from_millis(300)).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::AddrInUse);
        drop(busy);
        assert!(ensure_port_free(addr).is_ok());
        let reservation = PortReservation::new(addr).unwrap();
        assert_eq!(reservation.addr(), addr);
        let busy = std::net::TcpListener::bind("[::1]:0").unwrap();
        let addr = busy.local_addr().unwrap();
        let error = ensure_port_free_within(addr, Duration::from_millis(300)).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::AddrInUse);
    }

    // Proves a listener accepts, reads and writes over IPv4 loopback, and that two reuse-port
    // listeners can share a reserved port.
    #[test]
    fn echo_over_reserved_port() {
        echo_over_reserved_port_at("127.0.0.1:0".parse().unwrap());
    }

    // Proves the same over IPv6 loopback: reservations and listeners are not IPv4-only.
    #[test]
    fn echo_over_reserved_ipv6_port() {
        echo_over_reserved_port_at("[::1]:0".parse().unwrap());
    }

    fn echo_over_reserved_port_at(wanted: SocketAddr) {
        let reservation = PortReservation::new(wanted).unwrap();
        let addr = reservation.addr();
        assert_ne!(addr.port(), 0);
        assert_eq!(addr.ip(), wanted.ip());
        let server = std::thread::spawn(move || {
            run_on_current_thread(&ExecutorOptions::default(), async move {
                let first = Listener::bind(addr).unwrap();
                let second = Listener::bind(addr).unwrap();
                assert_eq!(second.local_addr(), addr);
                drop(second);
                let stream = first.accept().await.unwrap();
                assert_eq!(stream.local_addr().ip(), wanted.ip());
                stream.set_nodelay(true).unwrap();
                let mut buffer = [0u8; 5];
                let mut filled = 0;
                while filled < 5 {
                    let read = stream.read(&mut buffer[filled..]).await.unwrap();
                    assert!(read > 0);
                    filled += read;
                }
                stream.clone().write_all(&buffer).await.unwrap();
                stream.shutdown();
            })
            .unwrap();
        });
        let mut client = connect_with_retry(addr);
        drop(reservation);
        client.write_all(b"hello").unwrap();
        let mut answer = Vec::new();
        client.read_to_end(&mut answer).unwrap();
        assert_eq!(answer, b"hello");
        server.join().unwrap();
    }

    fn connect_with_retry(addr: SocketAddr) -> std::net::TcpStream {
        for _ in 0..200 {
            if let Ok(stream) = std::net::TcpStream::connect(addr) {
                return stream;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("cannot connect to {addr}");
    }

    // Proves a connection accepted and partly read on one executor thread continues on
    // another after `into_std` and `adopt`: no byte is lost or repeated, the peer address
    // survives, and a stream with a live clone is not given up.
    #[test]
    fn a_connection_moves_to_another_executor() {
        let (sender, receiver) = std::sync::mpsc::channel::<std::net::TcpStream>();
        let (addr_sender, addr_receiver) = std::sync::mpsc::channel::<SocketAddr>();
        let first = std::thread::spawn(move || {
            run_on_current_thread(&ExecutorOptions::default(), async move {
                let listener = Listener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
                addr_sender.send(listener.local_addr()).unwrap();
                let stream = listener.accept().await.unwrap();
                let mut first_byte = [0u8; 1];
                assert_eq!(stream.read(&mut first_byte).await.unwrap(), 1);
                assert_eq!(&first_byte, b"h");
                let clone = stream.clone();
                let stream = match stream.into_std() {
                    Err(error) => {
                        assert_eq!(error.kind(), io::ErrorKind::WouldBlock);
                        clone
                    }
                    Ok(_) => panic!("a shared stream was given up"),
                };
                sender.send(stream.into_std().unwrap()).unwrap();
            })
            .unwrap();
        });
        let second = std::thread::spawn(move || {
            let moved = receiver.recv().unwrap();
            run_on_current_thread(&ExecutorOptions::default(), async move {
                let stream = Stream::adopt(moved).unwrap();
                let mut buffer = [0u8; 4];
                let mut filled = 0;
                while filled < 4 {
                    let read = stream.read(&mut buffer[filled..]).await.unwrap();
                    assert!(read > 0);
                    filled += read;
                }
                stream.write_all(&buffer).await.unwrap();
                stream.peer_addr()
            })
            .unwrap()
        });
        let addr = addr_receiver.recv().unwrap();
        let mut client = std::net::TcpStream::connect(addr).unwrap();
        client.write_all(b"hello").unwrap();
        let mut answer = [0u8; 4];
        client.read_exact(&mut answer).unwrap();
        assert_eq!(&answer, b"ello");
        first.join().unwrap();
        assert_eq!(second.join().unwrap(), client.local_addr().unwrap());
    }
}
