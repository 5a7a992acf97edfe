//! TLS for the client's connections (docs/operations.md#tls), on blocking sockets (the async
//! transport runs tokio-rustls on the same client configuration).
//!
//! The handshake runs when the connection opens, before its reader thread starts. Afterwards
//! the session sits behind a mutex that is held only to turn bytes into records and back,
//! never across a socket call: a writer encrypts under the lock and writes the records with
//! only the connection's writer mutex held, and the reader decrypts what it read. So a writer
//! blocked on a full send buffer never stops the reader from draining the peer's answers.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConnection, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::error::{ClientError, Result};

/// How the client speaks TLS: which servers it trusts. Clones share the set-up.
#[derive(Clone)]
pub struct TlsOptions {
    config: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for TlsOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TlsOptions")
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn setup_error(what: &str, reason: impl std::fmt::Display) -> ClientError {
    ClientError::Invalid(format!("TLS {what}: {reason}"))
}

impl TlsOptions {
    /// Trusts servers whose certificate chains to a CA in the PEM file `ca_path` and names
    /// the host or IP address connected to (Java's `tls.client.trustCertPath` with
    /// `tls.client.authServer=true`).
    pub fn trusting_ca(ca_path: &Path) -> Result<TlsOptions> {
        let what = format!("trusted certificates {}", ca_path.display());
        let certificates = CertificateDer::pem_file_iter(ca_path)
            .map_err(|error| setup_error(&what, error))?
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|error| setup_error(&what, error))?;
        if certificates.is_empty() {
            return Err(setup_error(&what, "no CERTIFICATE block"));
        }
        let mut roots = RootCertStore::empty();
        for certificate in certificates {
            roots
                .add(certificate)
                .map_err(|error| setup_error(&what, error))?;
        }
        let config = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|error| setup_error("TLS versions", error))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(TlsOptions {
            config: Arc::new(config),
        })
    }

    /// Accepts any server certificate: encryption without authentication, as Java's client
    /// with `tls.test.mode.enable=true` (its default).
    pub fn trusting_any() -> Result<TlsOptions> {
        let provider = provider();
        let config = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|error| setup_error("TLS versions", error))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyServerCertificate(provider)))
            .with_no_client_auth();
        Ok(TlsOptions {
            config: Arc::new(config),
        })
    }

    /// The rustls client configuration, shared with the async transport's TLS streams.
    pub(crate) fn client_config(&self) -> Arc<rustls::ClientConfig> {
        self.config.clone()
    }

    /// The name the server's certificate must hold to be trusted when connecting to `addr`
    /// (`host:port`): the host or IP address, without the port and an IPv6 address's
    /// brackets.
    pub(crate) fn server_name(addr: &str) -> Result<ServerName<'static>> {
        let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
        let host = host.trim_start_matches('[').trim_end_matches(']');
        ServerName::try_from(host.to_owned()).map_err(|error| ClientError::Connect {
            addr: addr.to_owned(),
            reason: format!("TLS handshake: {error}"),
        })
    }

    /// Runs the handshake with `addr` (`host:port`) over `stream`, waiting at most `limit`
    /// for each read.
    pub(crate) fn handshake(
        &self,
        addr: &str,
        stream: &mut TcpStream,
        limit: Duration,
    ) -> Result<TlsSession> {
        let handshake_error = |reason: String| ClientError::Connect {
            addr: addr.to_owned(),
            reason: format!("TLS handshake: {reason}"),
        };
        let name = TlsOptions::server_name(addr)?;
        let mut session = ClientConnection::new(self.config.clone(), name)
            .map_err(|error| handshake_error(error.to_string()))?;
        // Records are taken out right after each write; no limit is needed on the buffer.
        session.set_buffer_limit(None);
        stream
            .set_read_timeout(Some(limit))
            .map_err(|error| handshake_error(error.to_string()))?;
        while session.is_handshaking() {
            session
                .complete_io(stream)
                .map_err(|error| handshake_error(error.to_string()))?;
        }
        stream
            .set_read_timeout(None)
            .map_err(|error| handshake_error(error.to_string()))?;
        Ok(TlsSession {
            session: Mutex::new(session),
        })
    }
}

/// One connection's TLS session.
pub(crate) struct TlsSession {
    session: Mutex<ClientConnection>,
}

impl TlsSession {
    fn lock(&self) -> std::sync::MutexGuard<'_, ClientConnection> {
        self.session
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Encrypts `bytes` and writes the records to `socket`; the caller holds the writer
    /// mutex, so records of two frames never interleave.
    pub(crate) fn write_all(&self, socket: &mut TcpStream, bytes: &[u8]) -> io::Result<()> {
        let mut records = Vec::with_capacity(bytes.len() + 64);
        {
            let mut session = self.lock();
            session.writer().write_all(bytes)?;
            while session.wants_write() {
                session.write_tls(&mut records)?;
            }
        }
        socket.write_all(&records)
    }

    /// Decrypts `received` (bytes read from the socket) and appends the plaintext to `out`.
    /// `Ok(false)` when the server closed the session (close_notify).
    pub(crate) fn decrypt(&self, mut received: &[u8], out: &mut Vec<u8>) -> io::Result<bool> {
        let mut session = self.lock();
        let mut open = true;
        while !received.is_empty() {
            session.read_tls(&mut received)?;
            let state = session
                .process_new_packets()
                .map_err(|error| io::Error::new(io::ErrorKind::InvalidData, error))?;
            let plaintext = state.plaintext_bytes_to_read();
            if plaintext > 0 {
                let start = out.len();
                out.resize(start + plaintext, 0);
                session.reader().read_exact(&mut out[start..])?;
            }
            if state.peer_has_closed() {
                open = false;
            }
        }
        Ok(open)
    }
}

/// Accepts any certificate but still checks the handshake signatures, so the session keys
/// belong to whoever holds the certificate's key.
#[derive(Debug)]
struct AnyServerCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyServerCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            certificate,
            signature,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            certificate,
            signature,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
