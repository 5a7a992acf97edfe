//! TLS on a remoting port: what each `tls.server.mode` serves and refuses, client
//! certificates, failed handshakes that touch no other connection, and start-up errors for
//! bad files. Clients are blocking rustls sessions over std sockets.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use comet_net::{ClientAuth, DispatchTable, Server, ServerConfig, ServerTls, ServerTlsSettings};
use comet_net::{TlsError, TlsMode};
use comet_proto::frame::{encode_to_bytes, Decoded, FrameDecoder};
use comet_proto::{RemotingCommand, RequestCode, ResponseCode};
use comet_rt::net::Listener;
use comet_rt::pool::{run_on_current_thread, ExecutorOptions};
use comet_rt::shutdown::{RemoteStop, StopSignal};
use comet_rt::ShardId;
use comet_test_support::tls::TestCertificates;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

/// A one-shard server answering HEART_BEAT, on its own thread until dropped.
struct TestServer {
    addr: SocketAddr,
    stop: RemoteStop,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TestServer {
    fn start(tls: ServerTls) -> TestServer {
        let stop = RemoteStop::new();
        let remote = stop.clone();
        let (addr_sender, addr_receiver) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            run_on_current_thread(&ExecutorOptions::default(), async move {
                let listener = Listener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
                addr_sender.send(listener.local_addr()).unwrap();
                let mut table = DispatchTable::new();
                table.register_fn(RequestCode::HEART_BEAT, |_context, request| async move {
                    Some(RemotingCommand::response_to(
                        &request,
                        ResponseCode::SUCCESS,
                    ))
                });
                let mut server = Server::new(ShardId(0), table, ServerConfig::default());
                server.set_tls(tls);
                let signal = StopSignal::new();
                signal.follow(remote);
                server.serve(listener, signal).await;
            })
            .unwrap();
        });
        TestServer {
            addr: addr_receiver.recv().unwrap(),
            stop,
            thread: Some(thread),
        }
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

fn settings(certificates: &TestCertificates, mode: TlsMode) -> ServerTlsSettings {
    ServerTlsSettings {
        mode,
        cert_path: Some(certificates.server_cert.clone()),
        key_path: Some(certificates.server_key.clone()),
        ..ServerTlsSettings::default()
    }
}

fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream
}

fn client_config(
    certificates: &TestCertificates,
    with_client_cert: bool,
) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(&certificates.ca_cert).unwrap())
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = if with_client_cert {
        let chain = vec![CertificateDer::from_pem_file(&certificates.client_cert).unwrap()];
        let key = PrivateKeyDer::from_pem_file(&certificates.client_key).unwrap();
        builder.with_client_auth_cert(chain, key).unwrap()
    } else {
        builder.with_no_client_auth()
    };
    Arc::new(config)
}

/// Sends one HEART_BEAT over `io` and reads the answer; `None` when the server closes the
/// connection (or the handshake fails) instead of answering.
fn heartbeat(io: &mut impl ReadWrite, opaque: i32) -> Option<RemotingCommand> {
    let request = RemotingCommand::request(RequestCode::HEART_BEAT, opaque);
    io.write_all(&encode_to_bytes(&request)).ok()?;
    io.flush().ok()?;
    let decoder = FrameDecoder::default();
    let mut buffer = comet_proto::bytes::BytesMut::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Ok(Some(Decoded::Command(command))) = decoder.decode(&mut buffer) {
            assert_eq!(command.opaque, opaque);
            return Some(command);
        }
        match io.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(read) => buffer.extend_from_slice(&chunk[..read]),
        }
    }
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

type TlsClient = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

fn tls_client(addr: SocketAddr, config: Arc<rustls::ClientConfig>) -> TlsClient {
    let name = ServerName::IpAddress(addr.ip().into());
    let session = rustls::ClientConnection::new(config, name).unwrap();
    rustls::StreamOwned::new(session, connect(addr))
}

// Proves an enforcing port serves TLS clients and closes a plain one and a broken handshake
// without an answer, while a TLS connection opened before them goes on being served.
#[test]
fn enforcing_serves_tls_only_and_a_failure_touches_no_other_connection() {
    let certificates = TestCertificates::new("net-tls-enforcing");
    let tls = ServerTls::new(&settings(&certificates, TlsMode::Enforcing)).unwrap();
    let server = TestServer::start(tls);
    let mut first = tls_client(server.addr, client_config(&certificates, false));
    let answer = heartbeat(&mut first, 1).expect("a TLS client is served");
    assert_eq!(answer.response_code(), ResponseCode::SUCCESS);

    let mut plain = connect(server.addr);
    assert!(
        heartbeat(&mut plain, 2).is_none(),
        "a plain client is refused"
    );
    let mut broken = connect(server.addr);
    broken
        .write_all(&[0x16, 0x03, 0x01, 0x00, 0x05, 1, 2, 3, 4, 5])
        .unwrap();
    let mut rest = Vec::new();
    let _ = broken.read_to_end(&mut rest);
    assert!(
        rest.len() < 64,
        "a broken handshake gets at most an alert: {rest:?}"
    );

    let answer = heartbeat(&mut first, 3).expect("the first TLS connection still works");
    assert_eq!(answer.response_code(), ResponseCode::SUCCESS);
}

// Proves a permissive port serves plain and TLS clients on the same port.
#[test]
fn permissive_serves_plain_and_tls() {
    let certificates = TestCertificates::new("net-tls-permissive");
    let tls = ServerTls::new(&settings(&certificates, TlsMode::Permissive)).unwrap();
    let server = TestServer::start(tls);
    let mut plain = connect(server.addr);
    assert!(
        heartbeat(&mut plain, 1).is_some(),
        "a plain client is served"
    );
    let mut secure = tls_client(server.addr, client_config(&certificates, false));
    assert!(
        heartbeat(&mut secure, 2).is_some(),
        "a TLS client is served"
    );
    assert!(heartbeat(&mut plain, 3).is_some());
}

// Proves a disabled port (the default) serves plain clients and never completes a TLS
// handshake.
#[test]
fn disabled_serves_plain_only() {
    let certificates = TestCertificates::new("net-tls-disabled");
    let server = TestServer::start(ServerTls::disabled());
    let mut plain = connect(server.addr);
    assert!(heartbeat(&mut plain, 1).is_some());
    let mut secure = tls_client(server.addr, client_config(&certificates, false));
    assert!(heartbeat(&mut secure, 2).is_none());
}

// Proves tls.server.need.client.auth=require refuses a client without a certificate and
// serves one whose certificate the trusted CA signed.
#[test]
fn required_client_certificates_are_checked() {
    let certificates = TestCertificates::new("net-tls-client-auth");
    let settings = ServerTlsSettings {
        client_auth: ClientAuth::Require,
        trust_cert_path: Some(certificates.ca_cert.clone()),
        ..settings(&certificates, TlsMode::Enforcing)
    };
    let server = TestServer::start(ServerTls::new(&settings).unwrap());
    let mut anonymous = tls_client(server.addr, client_config(&certificates, false));
    assert!(heartbeat(&mut anonymous, 1).is_none());
    let mut known = tls_client(server.addr, client_config(&certificates, true));
    assert!(heartbeat(&mut known, 2).is_some());
}

// Proves bad TLS settings are errors at start-up that name the problem, never panics: a
// missing key, an unreadable file, a file without a certificate, an encrypted key, a key
// password, a key that does not match its certificate, and unknown switch values.
#[test]
fn bad_settings_are_clear_errors() {
    let certificates = TestCertificates::new("net-tls-bad");
    let good = settings(&certificates, TlsMode::Enforcing);
    let error = |settings: ServerTlsSettings| ServerTls::new(&settings).unwrap_err().to_string();

    let message = error(ServerTlsSettings {
        key_path: None,
        ..good.clone()
    });
    assert!(message.contains("tls.server.keyPath"), "{message}");
    let message = error(ServerTlsSettings {
        cert_path: Some(certificates.dir.path().join("missing.pem")),
        ..good.clone()
    });
    assert!(message.contains("missing.pem"), "{message}");
    let message = error(ServerTlsSettings {
        cert_path: Some(certificates.server_key.clone()),
        ..good.clone()
    });
    assert!(message.contains("no usable PEM certificate"), "{message}");
    let encrypted = certificates.dir.path().join("encrypted.key");
    std::fs::write(
        &encrypted,
        "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----\n",
    )
    .unwrap();
    let message = error(ServerTlsSettings {
        key_path: Some(encrypted),
        ..good.clone()
    });
    assert!(message.contains("encrypted"), "{message}");
    let message = error(ServerTlsSettings {
        key_password: "secret".to_owned(),
        ..good.clone()
    });
    assert!(message.contains("keyPassword"), "{message}");
    let message = error(ServerTlsSettings {
        key_path: Some(certificates.client_key.clone()),
        ..good.clone()
    });
    assert!(message.contains("TLS set-up refused"), "{message}");
    let message = error(ServerTlsSettings {
        client_auth: ClientAuth::Require,
        ..good.clone()
    });
    assert!(message.contains("tls.server.trustCertPath"), "{message}");
    assert!(matches!(
        "strict".parse::<TlsMode>(),
        Err(TlsError::UnknownValue { .. })
    ));
    assert_eq!("Enforcing".parse::<TlsMode>().unwrap(), TlsMode::Enforcing);
    assert!("maybe".parse::<ClientAuth>().is_err());
}
