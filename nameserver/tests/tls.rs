//! The name server's port over TLS (`tls.server.*` keys): an enforcing name server answers a
//! TLS client and closes a plain one, and a bad key file stops its start with a clear error.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use comet_nameserver::{NameServerError, NameServerThread, NamesrvConfig};
use comet_net::TlsMode;
use comet_proto::frame::{encode_to_bytes, Decoded, FrameDecoder};
use comet_proto::{RemotingCommand, RequestCode, ResponseCode};
use comet_test_support::tls::TestCertificates;
use common::TestNameServer;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

fn enforcing(config: &mut NamesrvConfig, certificates: &TestCertificates) {
    config.tls_server_mode = TlsMode::Enforcing;
    config.tls_server_cert_path = Some(certificates.server_cert.clone());
    config.tls_server_key_path = Some(certificates.server_key.clone());
}

/// Asks for the cluster view over `io`; `None` when the connection closes unanswered.
fn cluster_info(io: &mut impl ReadWriteStream) -> Option<RemotingCommand> {
    let request = RemotingCommand::request(RequestCode::GET_BROKER_CLUSTER_INFO, 7);
    io.write_all(&encode_to_bytes(&request)).ok()?;
    io.flush().ok()?;
    let decoder = FrameDecoder::default();
    let mut buffer = comet_proto::bytes::BytesMut::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Ok(Some(Decoded::Command(command))) = decoder.decode(&mut buffer) {
            return Some(command);
        }
        match io.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(read) => buffer.extend_from_slice(&chunk[..read]),
        }
    }
}

trait ReadWriteStream: Read + Write {}
impl<T: Read + Write> ReadWriteStream for T {}

fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream
}

// Proves an enforcing name server answers a client that trusts its CA over TLS and closes a
// plain client without an answer.
#[test]
fn enforcing_name_server_answers_tls_and_refuses_plain() {
    let certificates = TestCertificates::new("namesrv-tls");
    let server = TestNameServer::start_with(|config| enforcing(config, &certificates));
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(&certificates.ca_cert).unwrap())
        .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let name = ServerName::IpAddress(server.addr().ip().into());
    let session = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let mut secure = rustls::StreamOwned::new(session, connect(server.addr()));
    let answer = cluster_info(&mut secure).expect("a TLS client is answered");
    assert_eq!(answer.response_code(), ResponseCode::SUCCESS);

    let mut plain = connect(server.addr());
    assert!(
        cluster_info(&mut plain).is_none(),
        "a plain client is refused"
    );
}

// Proves a key file that holds no key stops the name server's start with an error naming it.
#[test]
fn a_bad_key_file_stops_the_start() {
    let certificates = TestCertificates::new("namesrv-tls-bad");
    let directory = comet_test_support::TempDir::new("namesrv-tls-bad-kv");
    let mut config = NamesrvConfig {
        listen_port: 0,
        bind_address: "127.0.0.1".parse().unwrap(),
        kv_config_path: directory.path().join("kvConfig.json"),
        ..NamesrvConfig::default()
    };
    enforcing(&mut config, &certificates);
    config.tls_server_key_path = Some(certificates.server_cert.clone());
    let error = match NameServerThread::spawn(config) {
        Ok(_) => panic!("a name server started with a certificate as its key"),
        Err(error) => error,
    };
    assert!(matches!(error, NameServerError::Tls(_)), "{error}");
    assert!(error.to_string().contains("server.pem"), "{error}");
}
