//! Transport behaviour against a scripted peer on 127.0.0.1: pipelining, out-of-order
//! responses, timeouts, one-way sends, peer-initiated requests, reconnects and shutdown.

mod common;

use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use comet_client::{ClientError, Handled, RemotingClient, RequestHandler, TransportConfig};
use comet_proto::{RemotingCommand, RequestCode, ResponseCode};
use comet_test_support::wait_until;
use common::{echo, FakeServer, ServerConn};

fn client() -> RemotingClient {
    RemotingClient::new(TransportConfig {
        connect_timeout: Duration::from_secs(2),
        write_timeout: Duration::from_secs(2),
        scan_interval: Duration::from_millis(20),
        channel_max_idle: Duration::from_secs(120),
        tls: None,
    })
}

fn request(body: &str) -> RemotingCommand {
    RemotingCommand::request(RequestCode::HEART_BEAT, 0).with_body(body.to_owned())
}

// Proves responses are matched by opaque, not by order: the server holds two requests and
// answers the second first; each caller still gets the response to its own request.
#[test]
fn out_of_order_responses_reach_their_callers() {
    let server = FakeServer::start(|mut conn: ServerConn| {
        let first = conn.recv().unwrap();
        let second = conn.recv().unwrap();
        for request in [second, first] {
            let body = request.body.clone();
            conn.send(
                &RemotingCommand::response_to(&request, ResponseCode::SUCCESS).with_body(body),
            );
        }
        echo(conn);
    });
    let client = client();
    let addr = server.addr().to_owned();
    let callers: Vec<_> = ["alpha", "beta"]
        .into_iter()
        .map(|name| {
            let (client, addr) = (client.clone(), addr.clone());
            thread::spawn(move || {
                let response = client
                    .invoke(&addr, request(name), Duration::from_secs(5))
                    .unwrap();
                assert_eq!(&response.body[..], name.as_bytes());
            })
        })
        .collect();
    for caller in callers {
        caller.join().unwrap();
    }
    assert_eq!(server.accepted(), 1, "both requests share one connection");
    client.shutdown();
}

// Proves many threads pipeline requests over one connection and every response goes to
// the thread that sent the matching request.
#[test]
fn concurrent_callers_pipeline_on_one_connection() {
    let server = FakeServer::start(echo);
    let client = client();
    let callers: Vec<_> = (0..8)
        .map(|thread_index| {
            let (client, addr) = (client.clone(), server.addr().to_owned());
            thread::spawn(move || {
                for request_index in 0..200 {
                    let body = format!("{thread_index}-{request_index}");
                    let response = client
                        .invoke(&addr, request(&body), Duration::from_secs(5))
                        .unwrap();
                    assert_eq!(&response.body[..], body.as_bytes());
                }
            })
        })
        .collect();
    for caller in callers {
        caller.join().unwrap();
    }
    assert_eq!(server.accepted(), 1);
    client.shutdown();
}

// Proves a silent peer makes a blocking call fail with Timeout close to its timeout, a
// callback fail through the scanner, and that a late response is dropped while the
// connection stays usable.
#[test]
fn timeouts_for_blocking_and_callback_requests() {
    let server = FakeServer::start(|mut conn: ServerConn| {
        let mut held = Vec::new();
        while let Some(request) = conn.recv() {
            if &request.body[..] == b"answer" {
                for late in held.drain(..) {
                    conn.send(&RemotingCommand::response_to(&late, ResponseCode::SUCCESS));
                }
                conn.send(&RemotingCommand::response_to(
                    &request,
                    ResponseCode::SUCCESS,
                ));
            } else {
                held.push(request);
            }
        }
    });
    let client = client();
    let started = Instant::now();
    let error = client
        .invoke(server.addr(), request("silent"), Duration::from_millis(200))
        .unwrap_err();
    let elapsed = started.elapsed();
    assert!(matches!(error, ClientError::Timeout { .. }), "{error}");
    assert!(elapsed >= Duration::from_millis(200) && elapsed < Duration::from_secs(2));

    let (sender, receiver) = mpsc::channel();
    client
        .invoke_async(
            server.addr(),
            request("silent too"),
            Duration::from_millis(100),
            Box::new(move |outcome| sender.send(outcome).unwrap()),
        )
        .unwrap();
    let outcome = receiver.recv_timeout(Duration::from_secs(2)).unwrap();
    assert!(matches!(outcome, Err(ClientError::Timeout { .. })));

    let response = client
        .invoke(server.addr(), request("answer"), Duration::from_secs(5))
        .unwrap();
    assert_eq!(response.response_code(), ResponseCode::SUCCESS);
    assert_eq!(server.accepted(), 1);
    client.shutdown();
}

// Proves a one-way request carries flag bit 1 and that a future completes with the answer.
#[test]
fn oneway_and_future() {
    let (seen_sender, seen) = mpsc::channel();
    let server = FakeServer::start(move |mut conn: ServerConn| {
        while let Some(request) = conn.recv() {
            seen_sender.send(request.clone()).unwrap();
            if !request.is_oneway() {
                conn.send(&RemotingCommand::response_to(
                    &request,
                    ResponseCode::SUCCESS,
                ));
            }
        }
    });
    let client = client();
    client
        .invoke_oneway(server.addr(), request("fire"))
        .unwrap();
    let first = seen.recv_timeout(Duration::from_secs(2)).unwrap();
    assert!(first.is_oneway());
    assert_eq!(&first.body[..], b"fire");
    let future = client
        .invoke_future(server.addr(), request("wait"), Duration::from_secs(2))
        .unwrap();
    assert_eq!(
        future.wait().unwrap().response_code(),
        ResponseCode::SUCCESS
    );
    client.shutdown();
}

struct Recorder {
    requests: Mutex<Vec<i32>>,
    connected: AtomicUsize,
}

impl RequestHandler for Recorder {
    fn handle_request(&self, _addr: &str, request: &RemotingCommand) -> Handled {
        self.requests.lock().unwrap().push(request.code);
        match request.request_code() {
            RequestCode::NOTIFY_CONSUMER_IDS_CHANGED => Handled::NoResponse,
            RequestCode::GET_CONSUMER_RUNNING_INFO => Handled::Response(
                RemotingCommand::response_to(request, ResponseCode::SUCCESS).with_body("info"),
            ),
            // Answering a one-way request must still send nothing.
            RequestCode::RESET_CONSUMER_CLIENT_OFFSET => {
                Handled::Response(RemotingCommand::response_to(request, ResponseCode::SUCCESS))
            }
            _ => Handled::NotSupported,
        }
    }

    fn on_connected(&self, _addr: &str) {
        self.connected.fetch_add(1, Ordering::AcqRel);
    }
}

// Proves peer-initiated requests reach the handler, two-way ones are answered (unknown
// codes with REQUEST_CODE_NOT_SUPPORTED), one-way ones never are, and that a peer request
// reusing the opaque of a pending client request (docs/protocol.md#opaque-spaces-are-per-sender) is
// not taken for its answer.
#[test]
fn peer_requests_are_answered_by_the_handler() {
    let (answers_sender, answers) = mpsc::channel();
    let server = FakeServer::start(move |mut conn: ServerConn| {
        let pending = conn.recv().unwrap();
        let mut notify = RemotingCommand::request(RequestCode::NOTIFY_CONSUMER_IDS_CHANGED, 1);
        notify.set_oneway();
        conn.send(&notify);
        let mut reset = RemotingCommand::request(RequestCode::RESET_CONSUMER_CLIENT_OFFSET, 2);
        reset.set_oneway();
        conn.send(&reset);
        conn.send(&RemotingCommand::request(RequestCode::Unknown(9999), 3));
        conn.send(&RemotingCommand::request(
            RequestCode::GET_CONSUMER_RUNNING_INFO,
            pending.opaque,
        ));
        for _ in 0..2 {
            answers_sender.send(conn.recv().unwrap()).unwrap();
        }
        conn.send(&RemotingCommand::response_to(&pending, ResponseCode::SUCCESS).with_body("mine"));
        echo(conn);
    });
    let client = client();
    let recorder = Arc::new(Recorder {
        requests: Mutex::new(Vec::new()),
        connected: AtomicUsize::new(0),
    });
    client.set_request_handler(recorder.clone());
    let response = client
        .invoke(server.addr(), request("pending"), Duration::from_secs(5))
        .unwrap();
    assert_eq!(&response.body[..], b"mine");
    let first = answers.recv_timeout(Duration::from_secs(2)).unwrap();
    let second = answers.recv_timeout(Duration::from_secs(2)).unwrap();
    assert!(first.is_response() && second.is_response());
    assert_eq!(first.opaque, 3);
    assert_eq!(
        first.response_code(),
        ResponseCode::REQUEST_CODE_NOT_SUPPORTED
    );
    assert_eq!(second.response_code(), ResponseCode::SUCCESS);
    assert_eq!(&second.body[..], b"info");
    // Nothing else arrives: the two one-way requests were not answered.
    let last = client
        .invoke(server.addr(), request("after"), Duration::from_secs(5))
        .unwrap();
    assert_eq!(&last.body[..], b"after");
    assert_eq!(recorder.requests.lock().unwrap().len(), 4);
    assert_eq!(recorder.connected.load(Ordering::Acquire), 1);
    client.shutdown();
}

// Proves a connection the peer drops fails its pending request with ConnectionClosed and
// the next request opens a new connection.
#[test]
fn reconnects_after_the_peer_closes() {
    let server = FakeServer::start(|mut conn: ServerConn| {
        let request = conn.recv().unwrap();
        if &request.body[..] == b"drop me" {
            conn.close();
            return;
        }
        conn.send(&RemotingCommand::response_to(
            &request,
            ResponseCode::SUCCESS,
        ));
        echo(conn);
    });
    let client = client();
    let error = client
        .invoke(server.addr(), request("drop me"), Duration::from_secs(5))
        .unwrap_err();
    assert!(
        matches!(error, ClientError::ConnectionClosed { .. }),
        "{error}"
    );
    let deadline = Instant::now() + Duration::from_secs(2);
    let response = loop {
        match client.invoke(server.addr(), request("hello"), Duration::from_secs(5)) {
            Ok(response) => break response,
            Err(error) if Instant::now() < deadline && error.is_transport() => {
                thread::sleep(Duration::from_millis(10))
            }
            Err(error) => panic!("{error}"),
        }
    };
    assert_eq!(response.response_code(), ResponseCode::SUCCESS);
    assert_eq!(server.accepted(), 2);
    client.shutdown();
}

// Proves a refused connect is a Connect error naming the address, within the timeout.
#[test]
fn connect_failure_is_typed() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    drop(listener);
    let client = client();
    let error = client
        .invoke(&addr, request("x"), Duration::from_secs(2))
        .unwrap_err();
    match error {
        ClientError::Connect { addr: failed, .. } => assert_eq!(failed, addr),
        other => panic!("unexpected {other}"),
    }
    client.shutdown();
}

// Proves shutdown fails requests in flight, ends promptly, and refuses later requests.
#[test]
fn shutdown_fails_pending_and_refuses_new_requests() {
    let server = FakeServer::start(|mut conn: ServerConn| while conn.recv().is_some() {});
    let client = client();
    let (sender, receiver) = mpsc::channel();
    client
        .invoke_async(
            server.addr(),
            request("never answered"),
            Duration::from_secs(30),
            Box::new(move |outcome| sender.send(outcome).unwrap()),
        )
        .unwrap();
    let started = Instant::now();
    client.shutdown();
    assert!(started.elapsed() < Duration::from_secs(2));
    let outcome = receiver.recv_timeout(Duration::from_secs(1)).unwrap();
    assert!(matches!(outcome, Err(ClientError::ConnectionClosed { .. })));
    let error = client
        .invoke(server.addr(), request("late"), Duration::from_secs(1))
        .unwrap_err();
    assert!(matches!(error, ClientError::State(_)));
}

/// A client whose connections close after `max_idle` without traffic.
fn client_with_idle(max_idle: Duration) -> RemotingClient {
    RemotingClient::new(TransportConfig {
        connect_timeout: Duration::from_secs(2),
        write_timeout: Duration::from_secs(2),
        scan_interval: Duration::from_millis(20),
        channel_max_idle: max_idle,
        tls: None,
    })
}

// Proves an idle connection is closed after the configured idle time and the next request
// opens a new one transparently, while a connection in steady use stays open.
#[test]
fn idle_connections_close_and_reconnect_on_demand() {
    let server = FakeServer::start(echo);
    let client = client_with_idle(Duration::from_millis(300));
    let addr = server.addr().to_owned();
    // Steady traffic every 50 ms for about 1 s: never idle for 300 ms, one connection. The
    // pacing is the input, not a wait.
    for index in 0..20 {
        let body = format!("busy-{index}");
        let response = client
            .invoke(&addr, request(&body), Duration::from_secs(5))
            .unwrap();
        assert_eq!(&response.body[..], body.as_bytes());
        thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(server.accepted(), 1, "a busy connection was closed");
    wait_until(
        "the idle connection to close",
        Duration::from_secs(10),
        || client.connected_addrs().is_empty(),
    );
    let response = client
        .invoke(&addr, request("again"), Duration::from_secs(5))
        .unwrap();
    assert_eq!(&response.body[..], b"again");
    assert_eq!(server.accepted(), 2, "the next request reconnected");
    client.shutdown();
}

// Proves a zero idle time keeps idle connections open: a client with a 300 ms idle time,
// idle as long, closes its connection (the control), and once it has, the zero-idle client's
// connection, idle at least as long, is still open.
#[test]
fn zero_idle_time_keeps_connections() {
    let server = FakeServer::start(echo);
    let client = client_with_idle(Duration::ZERO);
    let control = client_with_idle(Duration::from_millis(300));
    let addr = server.addr().to_owned();
    client
        .invoke(&addr, request("one"), Duration::from_secs(5))
        .unwrap();
    control
        .invoke(&addr, request("control"), Duration::from_secs(5))
        .unwrap();
    wait_until(
        "the control client to close its idle connection",
        Duration::from_secs(10),
        || control.connected_addrs().is_empty(),
    );
    assert_eq!(client.connected_addrs(), std::slice::from_ref(&addr));
    client
        .invoke(&addr, request("two"), Duration::from_secs(5))
        .unwrap();
    assert_eq!(server.accepted(), 2, "one connection per client");
    control.shutdown();
    client.shutdown();
}
