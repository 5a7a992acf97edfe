//! Request-level tests of the remoting server over real sockets on 127.0.0.1, driven by a
//! blocking std client speaking comet-proto frames.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::rc::Rc;
use std::time::Duration;

use bytes::BytesMut;
use comet_net::{DispatchTable, Server, ServerConfig};
use comet_proto::frame::{encode, encode_to_bytes};
use comet_proto::{Decoded, FrameDecoder, RemotingCommand, RequestCode, ResponseCode};
use comet_rt::net::{Listener, PortReservation};
use comet_rt::pool::{run_on_current_thread, CpuPlacement, ExecutorOptions, Pool, PoolConfig};
use comet_rt::shutdown::{RemoteStop, StopSignal};
use comet_rt::task_class::sleep;

const ECHO: RequestCode = RequestCode::HEART_BEAT;
const SLOW: RequestCode = RequestCode::GET_BROKER_RUNTIME_INFO;
const ASK_CLIENT: RequestCode = RequestCode::GET_CONSUMER_RUNNING_INFO;

/// The table every test server uses: an echo, a processor that sleeps `delayMs`, and one that
/// asks the client a question and answers with the client's answer's remark.
fn table(
    closed_log: Rc<std::cell::RefCell<Vec<SocketAddr>>>,
) -> (DispatchTable, impl Fn(&mut Server)) {
    let mut table = DispatchTable::new();
    table.register_fn(ECHO, |_context, request| async move {
        Some(
            RemotingCommand::response_to(&request, ResponseCode::SUCCESS)
                .with_body(request.body.clone()),
        )
    });
    table.register_fn(SLOW, |_context, request| async move {
        let delay_ms = request
            .ext_fields
            .get("delayMs")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        sleep(Duration::from_millis(delay_ms)).await;
        Some(RemotingCommand::response_to(
            &request,
            ResponseCode::SUCCESS,
        ))
    });
    table.register_fn(ASK_CLIENT, |context, request| async move {
        let question = RemotingCommand::request(RequestCode::GET_CONSUMER_STATUS_FROM_CLIENT, 0);
        let answer = context
            .connection
            .invoke(question, Duration::from_secs(5))
            .await;
        let remark = match answer {
            Ok(answer) => answer.remark.unwrap_or_default(),
            Err(error) => error.to_string(),
        };
        Some(RemotingCommand::response_to(&request, ResponseCode::SUCCESS).with_remark(remark))
    });
    let hook = move |server: &mut Server| {
        let log = closed_log.clone();
        server.on_connection_closed(Rc::new(move |connection| {
            log.borrow_mut().push(connection.peer_addr())
        }));
    };
    (table, hook)
}

struct TestServer {
    addr: SocketAddr,
    stop: RemoteStop,
    thread: Option<std::thread::JoinHandle<Vec<SocketAddr>>>,
}

impl TestServer {
    fn start(config: ServerConfig) -> TestServer {
        let stop = RemoteStop::new();
        let remote = stop.clone();
        let (addr_sender, addr_receiver) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            run_on_current_thread(&ExecutorOptions::default(), async move {
                let closed = Rc::new(std::cell::RefCell::new(Vec::new()));
                let (table, hook) = table(closed.clone());
                let mut server = Server::new(comet_rt::ShardId(0), table, config);
                hook(&mut server);
                let listener = Listener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
                addr_sender.send(listener.local_addr()).unwrap();
                let signal = StopSignal::new();
                signal.follow(remote);
                server.serve(listener, signal).await;
                let closed = closed.borrow().clone();
                closed
            })
            .unwrap()
        });
        let addr = addr_receiver.recv_timeout(Duration::from_secs(10)).unwrap();
        TestServer {
            addr,
            stop,
            thread: Some(thread),
        }
    }

    fn stop(mut self) -> Vec<SocketAddr> {
        self.stop.request();
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.request();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A blocking client: writes frames, reads whole frames.
struct Client {
    stream: TcpStream,
    buffer: BytesMut,
}

impl Client {
    fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Client {
            stream,
            buffer: BytesMut::new(),
        }
    }

    fn send(&mut self, command: &RemotingCommand) {
        self.stream.write_all(&encode_to_bytes(command)).unwrap();
    }

    /// The next frame, or `None` when the server closed the connection.
    fn receive(&mut self) -> Option<RemotingCommand> {
        let decoder = FrameDecoder::default();
        loop {
            match decoder.decode(&mut self.buffer).unwrap() {
                Some(Decoded::Command(command)) => return Some(command),
                Some(Decoded::Malformed(error)) => panic!("server sent a malformed frame: {error}"),
                None => {}
            }
            let mut chunk = [0u8; 4096];
            match self.stream.read(&mut chunk) {
                Ok(0) => return None,
                Ok(read) => self.buffer.extend_from_slice(&chunk[..read]),
                Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => return None,
                Err(error) => panic!("read failed: {error}"),
            }
        }
    }
}

fn request(code: RequestCode, opaque: i32) -> RemotingCommand {
    RemotingCommand::request(code, opaque)
}

// Proves known codes are dispatched, unknown codes get REQUEST_CODE_NOT_SUPPORTED with the Java
// remark, and one-way requests (known or unknown) are never answered.
#[test]
fn dispatch_unknown_and_oneway() {
    let server = TestServer::start(ServerConfig::default());
    let mut client = Client::connect(server.addr);
    let mut oneway = request(ECHO, 1);
    oneway.set_oneway();
    client.send(&oneway);
    let mut oneway_unknown = request(RequestCode::Unknown(9999), 2);
    oneway_unknown.set_oneway();
    client.send(&oneway_unknown);
    client.send(&request(RequestCode::Unknown(4242), 3));
    client.send(&request(ECHO, 4).with_body(&b"ping"[..]));
    let first = client.receive().unwrap();
    assert_eq!(first.opaque, 3);
    assert_eq!(
        first.response_code(),
        ResponseCode::REQUEST_CODE_NOT_SUPPORTED
    );
    assert_eq!(
        first.remark.as_deref(),
        Some(" request type 4242 not supported")
    );
    let second = client.receive().unwrap();
    assert_eq!((second.opaque, &second.body[..]), (4, &b"ping"[..]));
    assert!(second.is_response());
}

// Proves pipelining: responses come back in completion order, not request order, each
// carrying its request's opaque.
#[test]
fn pipelined_responses_out_of_order() {
    let server = TestServer::start(ServerConfig::default());
    let mut client = Client::connect(server.addr);
    let mut slow = request(SLOW, 10);
    slow.ext_fields.insert("delayMs", "300");
    client.send(&slow);
    client.send(&request(ECHO, 11));
    assert_eq!(client.receive().unwrap().opaque, 11);
    assert_eq!(client.receive().unwrap().opaque, 10);
}

// Proves a malformed frame with an intact boundary is skipped and the next request served,
// and that an impossible length closes only that connection while the server keeps serving.
#[test]
fn malformed_and_oversized_frames() {
    let config = ServerConfig {
        frame_bytes_max: 64 * 1024,
        ..ServerConfig::default()
    };
    let server = TestServer::start(config);
    let mut client = Client::connect(server.addr);
    let mut garbage = Vec::new();
    garbage.extend_from_slice(&7u32.to_be_bytes());
    garbage.extend_from_slice(&3u32.to_be_bytes());
    garbage.extend_from_slice(b"{x}");
    client.stream.write_all(&garbage).unwrap();
    client.send(&request(ECHO, 20));
    assert_eq!(client.receive().unwrap().opaque, 20);

    client
        .stream
        .write_all(&(1u32 << 30).to_be_bytes())
        .unwrap();
    assert!(
        client.receive().is_none(),
        "oversized length must close the connection"
    );

    let mut again = Client::connect(server.addr);
    again.send(&request(ECHO, 21));
    assert_eq!(again.receive().unwrap().opaque, 21);
}

// Proves a processor can send a request to the client on the same connection and await the
// client's response by opaque, while the client's own request is pending.
#[test]
fn server_to_client_request() {
    let server = TestServer::start(ServerConfig::default());
    let mut client = Client::connect(server.addr);
    client.send(&request(ASK_CLIENT, 30));
    let question = client.receive().unwrap();
    assert!(!question.is_response());
    assert_eq!(
        question.request_code(),
        RequestCode::GET_CONSUMER_STATUS_FROM_CLIENT
    );
    let answer = RemotingCommand::response_to(&question, ResponseCode::SUCCESS)
        .with_remark("client says hi");
    client.send(&answer);
    let response = client.receive().unwrap();
    assert_eq!(response.opaque, 30);
    assert_eq!(response.remark.as_deref(), Some("client says hi"));
}

// Proves the connection limit refuses extra connections and the close hook reports every
// connection that ended.
#[test]
fn connection_limit_and_close_hook() {
    let config = ServerConfig {
        connections_max: 1,
        ..ServerConfig::default()
    };
    let server = TestServer::start(config);
    let mut first = Client::connect(server.addr);
    first.send(&request(ECHO, 40));
    assert_eq!(first.receive().unwrap().opaque, 40);
    let mut second = Client::connect(server.addr);
    second.send(&request(ECHO, 41));
    assert!(
        second.receive().is_none(),
        "over the limit: closed without an answer"
    );
    let first_addr = first.stream.local_addr().unwrap();
    drop(first);
    std::thread::sleep(Duration::from_millis(200));
    let closed = server.stop();
    assert!(
        closed.contains(&first_addr),
        "{closed:?} lacks {first_addr}"
    );
}

// Proves the in-flight limit holds requests back without losing any: 50 pipelined slow
// requests through a limit of 2 all get answered.
#[test]
fn inflight_limit_queues_without_loss() {
    let config = ServerConfig {
        inflight_requests_max: 2,
        ..ServerConfig::default()
    };
    let server = TestServer::start(config);
    let mut client = Client::connect(server.addr);
    let mut wire = BytesMut::new();
    for opaque in 0..50 {
        let mut slow = request(SLOW, opaque);
        slow.ext_fields.insert("delayMs", "2");
        encode(&slow, &mut wire);
    }
    client.stream.write_all(&wire).unwrap();
    let mut seen: Vec<i32> = (0..50).map(|_| client.receive().unwrap().opaque).collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..50).collect::<Vec<_>>());
}

// Proves the server runs on several shards of a pool behind one reuse-port address: many
// connections are all served.
#[test]
fn serves_on_every_shard_of_a_pool() {
    let reservation = PortReservation::new("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = reservation.addr();
    let stop = RemoteStop::new();
    let remote = stop.clone();
    let (bound_sender, bound_receiver) = std::sync::mpsc::channel();
    let config = PoolConfig {
        shard_count: 2,
        placement: CpuPlacement::Unbound,
        executor: ExecutorOptions::default(),
    };
    let pool = Pool::start(&config, move |context| {
        let remote = remote.clone();
        let bound_sender = bound_sender.clone();
        async move {
            let (table, _) = table(Rc::default());
            let server = Server::new(context.shard, table, ServerConfig::default());
            let listener = Listener::bind(addr).unwrap();
            bound_sender.send(()).unwrap();
            let signal = StopSignal::new();
            signal.follow(remote);
            server.serve(listener, signal).await;
        }
    })
    .unwrap();
    for _ in 0..2 {
        bound_receiver
            .recv_timeout(Duration::from_secs(10))
            .unwrap();
    }
    for opaque in 0..16 {
        let mut client = Client::connect(addr);
        client.send(&request(ECHO, opaque));
        assert_eq!(client.receive().unwrap().opaque, opaque);
    }
    stop.request();
    for result in pool.join() {
        result.unwrap();
    }
    drop(reservation);
}
