//! Test doubles shared by the integration tests.
//!
//! [`FakeServer`] is a scripted peer that speaks remoting frames on 127.0.0.1: each accepted
//! connection runs the test's script on its own thread with a [`ServerConn`] to receive and
//! send commands. It exists to drive transport behaviour (pipelining, out-of-order answers,
//! timeouts, disconnects, server-initiated requests); it is not a broker.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use comet_proto::bytes::BytesMut;
use comet_proto::frame::{self, Decoded, FrameDecoder};
use comet_proto::RemotingCommand;

/// One accepted connection, seen from the server side.
pub struct ServerConn {
    stream: TcpStream,
    buffer: BytesMut,
    decoder: FrameDecoder,
}

impl ServerConn {
    /// The next command from the client, or `None` once it closed.
    pub fn recv(&mut self) -> Option<RemotingCommand> {
        let mut chunk = [0u8; 4096];
        loop {
            match self.decoder.decode(&mut self.buffer) {
                Ok(Some(Decoded::Command(command))) => return Some(command),
                Ok(Some(Decoded::Malformed(error))) => panic!("client sent a bad frame: {error}"),
                Ok(None) => {}
                Err(error) => panic!("client broke the frame stream: {error}"),
            }
            match self.stream.read(&mut chunk) {
                Ok(0) | Err(_) => return None,
                Ok(count) => self.buffer.extend_from_slice(&chunk[..count]),
            }
        }
    }

    /// Writes one command.
    pub fn send(&mut self, command: &RemotingCommand) {
        let bytes = frame::encode_to_bytes(command);
        // The client may already be gone in tests that close on purpose.
        let _ = self.stream.write_all(&bytes);
    }

    /// Closes the connection.
    pub fn close(&self) {
        let _ = self.stream.shutdown(Shutdown::Both);
    }
}

type Script = dyn Fn(ServerConn) + Send + Sync;

/// A scripted remoting peer on 127.0.0.1.
pub struct FakeServer {
    addr: String,
    accepted: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
    acceptor: Option<JoinHandle<()>>,
}

impl FakeServer {
    /// Starts a server running `script` for every connection.
    pub fn start(script: impl Fn(ServerConn) + Send + Sync + 'static) -> FakeServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let addr = listener.local_addr().unwrap().to_string();
        let accepted = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let open = Arc::new(Mutex::new(Vec::new()));
        let script: Arc<Script> = Arc::new(script);
        let acceptor = {
            let (accepted, stop, open) = (accepted.clone(), stop.clone(), open.clone());
            thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::Acquire) {
                        return;
                    }
                    let Ok(stream) = stream else { continue };
                    accepted.fetch_add(1, Ordering::AcqRel);
                    open.lock().unwrap().push(stream.try_clone().unwrap());
                    let script = script.clone();
                    let conn = ServerConn {
                        stream,
                        buffer: BytesMut::new(),
                        decoder: FrameDecoder::default(),
                    };
                    thread::spawn(move || script(conn));
                }
            })
        };
        FakeServer {
            addr,
            accepted,
            stop,
            open,
            acceptor: Some(acceptor),
        }
    }

    /// `127.0.0.1:port`.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::Acquire)
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        for stream in self.open.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
        // Wake the acceptor so it sees the stop flag.
        let _ = TcpStream::connect_timeout(&self.addr.parse().unwrap(), Duration::from_secs(1));
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

/// An echo script: answers every two-way request with SUCCESS and the request's body.
pub fn echo(mut conn: ServerConn) {
    while let Some(request) = conn.recv() {
        if request.is_oneway() {
            continue;
        }
        let response = RemotingCommand::response_to(&request, comet_proto::ResponseCode::SUCCESS)
            .with_body(request.body.clone());
        conn.send(&response);
    }
}
