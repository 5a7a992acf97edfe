//! TLS on the remoting ports, with RocketMQ's switches (docs/operations.md#tls).
//!
//! * [`TlsMode`]: Java's `tls.server.mode`. `disabled` serves plain connections only;
//!   `enforcing` serves TLS only; `permissive` serves both on one port, told apart by the
//!   first byte the client sends, as Java's `NettyRemotingServer` does in its TLS mode
//!   handler: a TLS record starts with 0x16 (handshake), while a plain RocketMQ frame starts
//!   with the high byte of its length, which is 0x16 only for a frame of over 350 MiB, far
//!   beyond any frame limit.
//! * [`ServerTls`]: the server's certificate, key and client-certificate policy, loaded once
//!   at start-up; a bad file is a [`TlsError`] then, never a failure of a later connection.
//! * [`Transport`]: one accepted or connected socket, plain or TLS, with the calls the
//!   connection code needs. TLS runs in futures-rustls over the runtime's socket.
//! * [`ClientTls`]: the client side for the broker's own connections to name servers.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::str::FromStr;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use comet_rt::net::Stream;
use comet_rt::task_class::timeout;
use futures_io::{AsyncRead, AsyncWrite};
use futures_rustls::{TlsAcceptor, TlsConnector};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};
use thiserror::Error;

/// The first byte of a TLS handshake record (Java's `HANDSHAKE_MAGIC_CODE`).
pub const TLS_HANDSHAKE_BYTE: u8 = 0x16;

/// Java's `tls.server.mode`: which connections a remoting port serves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TlsMode {
    /// Plain connections only.
    #[default]
    Disabled,
    /// Plain and TLS connections on the same port.
    Permissive,
    /// TLS connections only; a plain client is closed.
    Enforcing,
}

impl TlsMode {
    /// The name Java's `TlsMode` parses.
    pub fn name(self) -> &'static str {
        match self {
            TlsMode::Disabled => "disabled",
            TlsMode::Permissive => "permissive",
            TlsMode::Enforcing => "enforcing",
        }
    }
}

impl fmt::Display for TlsMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for TlsMode {
    type Err = TlsError;

    /// Java falls back to permissive on an unknown name; a typo here is refused instead, so
    /// an operator who meant `enforcing` never runs a port that also takes plain clients.
    fn from_str(text: &str) -> Result<TlsMode, TlsError> {
        match text.trim().to_ascii_lowercase().as_str() {
            "disabled" => Ok(TlsMode::Disabled),
            "permissive" => Ok(TlsMode::Permissive),
            "enforcing" => Ok(TlsMode::Enforcing),
            _ => Err(TlsError::UnknownValue {
                value: text.to_owned(),
                expected: "disabled, permissive or enforcing",
            }),
        }
    }
}

/// Java's `tls.server.need.client.auth`: whether clients must show a certificate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClientAuth {
    /// No client certificate is asked for.
    #[default]
    None,
    /// A client certificate is asked for and checked when given.
    Optional,
    /// A client without a certificate signed by the trusted CA is refused.
    Require,
}

impl ClientAuth {
    /// The name Java's `ClientAuth` parses.
    pub fn name(self) -> &'static str {
        match self {
            ClientAuth::None => "none",
            ClientAuth::Optional => "optional",
            ClientAuth::Require => "require",
        }
    }
}

impl fmt::Display for ClientAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ClientAuth {
    type Err = TlsError;

    fn from_str(text: &str) -> Result<ClientAuth, TlsError> {
        match text.trim().to_ascii_lowercase().as_str() {
            "none" => Ok(ClientAuth::None),
            "optional" => Ok(ClientAuth::Optional),
            "require" => Ok(ClientAuth::Require),
            _ => Err(TlsError::UnknownValue {
                value: text.to_owned(),
                expected: "none, optional or require",
            }),
        }
    }
}

/// Why TLS cannot be set up.
#[derive(Debug, Error)]
pub enum TlsError {
    /// A switch has a value it does not take.
    #[error("invalid value {value:?} (expected {expected})")]
    UnknownValue {
        /// The value given.
        value: String,
        /// What is accepted.
        expected: &'static str,
    },
    /// A file the TLS set-up needs is not configured.
    #[error("{key} must be set: {because}")]
    Missing {
        /// The key to set.
        key: &'static str,
        /// What needs it.
        because: &'static str,
    },
    /// A file cannot be read.
    #[error("cannot read the TLS {what} file {path}: {source}")]
    Read {
        /// Which file (certificate, private key, trusted certificates).
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// A file is not PEM, or holds nothing of the kind wanted.
    #[error("the TLS {what} file {path} holds no usable PEM {what}: {reason}")]
    Pem {
        /// Which file.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The private key is encrypted (or a key password is set), which Comet does not read.
    #[error(
        "the TLS private key {path} is encrypted (or tls.server.keyPassword is set): Comet reads \
         unencrypted PEM keys only; decrypt it first (openssl pkcs8 -nocrypt)"
    )]
    EncryptedKey {
        /// The key file.
        path: PathBuf,
    },
    /// rustls refuses the certificates or the key (a key that does not match its
    /// certificate, an unsupported algorithm).
    #[error("TLS set-up refused: {0}")]
    Rustls(#[from] rustls::Error),
    /// The client-certificate verifier cannot be built from the trusted certificates.
    #[error("TLS client verification cannot be set up: {0}")]
    ClientVerifier(#[from] rustls::server::VerifierBuilderError),
}

/// What the server side of TLS needs: Java's `tls.server.*` switches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerTlsSettings {
    /// `tls.server.mode`.
    pub mode: TlsMode,
    /// `tls.server.certPath`: the PEM certificate chain, the server's own first.
    pub cert_path: Option<PathBuf>,
    /// `tls.server.keyPath`: the PEM private key (PKCS#8, PKCS#1 or SEC1, unencrypted).
    pub key_path: Option<PathBuf>,
    /// `tls.server.keyPassword`: refused when set (encrypted keys are not read).
    pub key_password: String,
    /// `tls.server.need.client.auth`.
    pub client_auth: ClientAuth,
    /// `tls.server.trustCertPath`: PEM CA certificates client certificates must chain to.
    pub trust_cert_path: Option<PathBuf>,
}

/// The server side of TLS for one port, built once; clones share it (and may cross threads).
#[derive(Clone)]
pub struct ServerTls {
    mode: TlsMode,
    acceptor: Option<TlsAcceptor>,
}

impl fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ServerTls({})", self.mode)
    }
}

impl ServerTls {
    /// Plain connections only.
    pub fn disabled() -> ServerTls {
        ServerTls {
            mode: TlsMode::Disabled,
            acceptor: None,
        }
    }

    /// Loads the certificate, key and trusted certificates `settings` names. Nothing is read
    /// when the mode is disabled.
    pub fn new(settings: &ServerTlsSettings) -> Result<ServerTls, TlsError> {
        if settings.mode == TlsMode::Disabled {
            return Ok(ServerTls::disabled());
        }
        let config = server_config(settings)?;
        Ok(ServerTls {
            mode: settings.mode,
            acceptor: Some(TlsAcceptor::from(Arc::new(config))),
        })
    }

    /// The mode this port runs in.
    pub fn mode(&self) -> TlsMode {
        self.mode
    }

    /// True when a connection must be looked at (and maybe handshaken) before it is served.
    pub(crate) fn acceptor_needed(&self) -> bool {
        self.acceptor.is_some()
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn server_config(settings: &ServerTlsSettings) -> Result<rustls::ServerConfig, TlsError> {
    const BECAUSE: &str = "tls.server.mode is permissive or enforcing";
    let cert_path = settings.cert_path.as_deref().ok_or(TlsError::Missing {
        key: "tls.server.certPath",
        because: BECAUSE,
    })?;
    let key_path = settings.key_path.as_deref().ok_or(TlsError::Missing {
        key: "tls.server.keyPath",
        because: BECAUSE,
    })?;
    let certificates = load_certificates(cert_path, "certificate")?;
    if !settings.key_password.is_empty() {
        return Err(TlsError::EncryptedKey {
            path: key_path.to_owned(),
        });
    }
    let key = load_private_key(key_path)?;
    let provider = provider();
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let builder = match settings.client_auth {
        ClientAuth::None => builder.with_no_client_auth(),
        ClientAuth::Optional | ClientAuth::Require => {
            let trust_path = settings
                .trust_cert_path
                .as_deref()
                .ok_or(TlsError::Missing {
                    key: "tls.server.trustCertPath",
                    because: "tls.server.need.client.auth asks for client certificates",
                })?;
            let roots = load_roots(trust_path)?;
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if settings.client_auth == ClientAuth::Optional {
                verifier.allow_unauthenticated().build()?
            } else {
                verifier.build()?
            };
            builder.with_client_cert_verifier(verifier)
        }
    };
    Ok(builder.with_single_cert(certificates, key)?)
}

fn read_file(path: &Path, what: &'static str) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        what,
        path: path.to_owned(),
        source,
    })
}

/// The PEM certificates in `path`, in file order; at least one.
pub fn load_certificates(
    path: &Path,
    what: &'static str,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read_file(path, what)?;
    let pem_error = |reason: String| TlsError::Pem {
        what,
        path: path.to_owned(),
        reason,
    };
    let certificates = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| pem_error(error.to_string()))?;
    if certificates.is_empty() {
        return Err(pem_error("no CERTIFICATE block".to_owned()));
    }
    Ok(certificates)
}

fn load_private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bytes = read_file(path, "private key")?;
    // PKCS#8 "ENCRYPTED PRIVATE KEY" blocks and OpenSSL's "Proc-Type: 4,ENCRYPTED" headers.
    if bytes.windows(b"ENCRYPTED".len()).any(|w| w == b"ENCRYPTED") {
        return Err(TlsError::EncryptedKey {
            path: path.to_owned(),
        });
    }
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|error| TlsError::Pem {
        what: "private key",
        path: path.to_owned(),
        reason: match error {
            pem::Error::NoItemsFound => "no PRIVATE KEY block".to_owned(),
            other => other.to_string(),
        },
    })
}

fn load_roots(path: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for certificate in load_certificates(path, "trusted certificates")? {
        roots.add(certificate)?;
    }
    Ok(roots)
}

/// The client side of TLS (the broker's connections to name servers); clones share it.
#[derive(Clone)]
pub struct ClientTls {
    connector: TlsConnector,
}

impl fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClientTls")
    }
}

impl ClientTls {
    /// Trusts servers whose certificate chains to a CA in the PEM file `ca_path` and names
    /// the address connected to.
    pub fn trusting(ca_path: &Path) -> Result<ClientTls, TlsError> {
        let roots = load_roots(ca_path)?;
        let config = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(ClientTls::from_config(config))
    }

    /// Accepts any server certificate: encryption without authentication, Java's
    /// `tls.test.mode.enable` (its default) and its client without `tls.client.authServer`.
    pub fn trusting_any() -> Result<ClientTls, TlsError> {
        let provider = provider();
        let config = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyServerCertificate(provider)))
            .with_no_client_auth();
        Ok(ClientTls::from_config(config))
    }

    fn from_config(config: rustls::ClientConfig) -> ClientTls {
        ClientTls {
            connector: TlsConnector::from(Arc::new(config)),
        }
    }

    /// Runs the TLS handshake over `socket`, naming the server by its IP address, within
    /// `limit`.
    pub async fn connect(&self, socket: Stream, limit: Duration) -> io::Result<Transport> {
        let name = ServerName::IpAddress(socket.peer_addr().ip().into());
        let io = Replay::new(socket.clone(), None);
        let session = timeout(limit, self.connector.connect(name, io))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out"))??;
        Ok(Transport {
            socket,
            kind: Kind::Tls(Box::new(RefCell::new(session.into()))),
        })
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
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
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
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
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

/// Why an accepted connection is not served.
#[derive(Debug, Error)]
pub enum AcceptError {
    /// The client closed before sending a byte (a port probe).
    #[error("closed before sending anything")]
    Closed,
    /// The client sent nothing, or did not finish the handshake, in time.
    #[error("no TLS handshake or first byte within {0:?}")]
    TimedOut(Duration),
    /// A plain client on a port that enforces TLS (Java closes it likewise).
    #[error("a plain (non-TLS) client on a port whose tls.server.mode is enforcing")]
    PlainRefused,
    /// The TLS handshake failed (untrusted or missing client certificate, no common cipher,
    /// not TLS after all).
    #[error("TLS handshake failed: {0}")]
    Handshake(io::Error),
    /// Reading the first byte failed.
    #[error("{0}")]
    Io(io::Error),
}

/// Decides what `socket` speaks, as `tls`'s mode allows, and runs the TLS handshake when it
/// speaks TLS; each wait is bounded by `limit`. With TLS disabled nothing is read: the
/// connection is plain.
pub async fn accept(
    socket: Stream,
    tls: &ServerTls,
    limit: Duration,
) -> Result<Transport, AcceptError> {
    let acceptor = match (&tls.acceptor, tls.mode) {
        (Some(acceptor), TlsMode::Permissive | TlsMode::Enforcing) => acceptor,
        _ => return Ok(Transport::plain(socket)),
    };
    let mut first = [0u8; 1];
    let read = timeout(limit, socket.read(&mut first))
        .await
        .map_err(|_| AcceptError::TimedOut(limit))?
        .map_err(AcceptError::Io)?;
    if read == 0 {
        return Err(AcceptError::Closed);
    }
    if first[0] != TLS_HANDSHAKE_BYTE {
        if tls.mode == TlsMode::Enforcing {
            return Err(AcceptError::PlainRefused);
        }
        return Ok(Transport {
            socket,
            kind: Kind::Plain {
                replay: Cell::new(Some(first[0])),
            },
        });
    }
    let io = Replay::new(socket.clone(), Some(first[0]));
    let session = timeout(limit, acceptor.accept(io))
        .await
        .map_err(|_| AcceptError::TimedOut(limit))?
        .map_err(AcceptError::Handshake)?;
    Ok(Transport {
        socket,
        kind: Kind::Tls(Box::new(RefCell::new(session.into()))),
    })
}

/// The socket with a byte already read put back in front, so the TLS handshake sees the
/// whole first record after [`accept`] looked at its first byte.
struct Replay {
    first: Option<u8>,
    socket: Stream,
}

impl Replay {
    fn new(socket: Stream, first: Option<u8>) -> Replay {
        Replay { first, socket }
    }
}

impl AsyncRead for Replay {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buffer: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        if buffer.is_empty() {
            return Poll::Ready(Ok(0));
        }
        if let Some(byte) = self.first.take() {
            buffer[0] = byte;
            return Poll::Ready(Ok(1));
        }
        Pin::new(&mut self.socket).poll_read(cx, buffer)
    }
}

impl AsyncWrite for Replay {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.socket).poll_write(cx, bytes)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.socket).poll_flush(cx)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.socket).poll_close(cx)
    }
}

enum Kind {
    /// A plain connection; `replay` holds the byte [`accept`] read to tell it from TLS.
    Plain { replay: Cell<Option<u8>> },
    /// A TLS session over the socket. Each read or write borrows it for one poll only, so
    /// a connection's reader and writer tasks may both be pending on it.
    Tls(Box<RefCell<futures_rustls::TlsStream<Replay>>>),
}

/// One connection's byte stream, plain or TLS. One task may read while another writes.
pub struct Transport {
    socket: Stream,
    kind: Kind,
}

impl Transport {
    /// A plain connection over `socket`.
    pub fn plain(socket: Stream) -> Transport {
        Transport {
            socket,
            kind: Kind::Plain {
                replay: Cell::new(None),
            },
        }
    }

    /// True for a TLS connection.
    pub fn is_tls(&self) -> bool {
        matches!(self.kind, Kind::Tls(_))
    }

    /// The remote address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.socket.peer_addr()
    }

    /// The local address.
    pub fn local_addr(&self) -> SocketAddr {
        self.socket.local_addr()
    }

    /// A read that waits longer than `limit` on the socket fails with `TimedOut`.
    pub fn set_read_timeout(&self, limit: Option<Duration>) -> io::Result<()> {
        self.socket.set_read_timeout(limit)
    }

    /// Reads into `buffer`; `Ok(0)` is end of stream.
    pub async fn read(&self, buffer: &mut [u8]) -> io::Result<usize> {
        match &self.kind {
            Kind::Plain { replay } => {
                if let (Some(byte), Some(slot)) = (replay.get(), buffer.first_mut()) {
                    replay.set(None);
                    *slot = byte;
                    return Ok(1);
                }
                self.socket.read(buffer).await
            }
            Kind::Tls(session) => {
                poll_fn(|cx| Pin::new(&mut *session.borrow_mut()).poll_read(cx, buffer)).await
            }
        }
    }

    /// Writes all of `bytes` (and, over TLS, flushes the records they became).
    pub async fn write_all(&self, mut bytes: &[u8]) -> io::Result<()> {
        let session = match &self.kind {
            Kind::Plain { .. } => return self.socket.write_all(bytes).await,
            Kind::Tls(session) => session,
        };
        while !bytes.is_empty() {
            let written =
                poll_fn(|cx| Pin::new(&mut *session.borrow_mut()).poll_write(cx, bytes)).await?;
            if written == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            bytes = &bytes[written..];
        }
        poll_fn(|cx| Pin::new(&mut *session.borrow_mut()).poll_flush(cx)).await
    }

    /// Shuts both directions of the socket down.
    pub fn shutdown(&self) {
        self.socket.shutdown();
    }

    /// Shuts the read side of the socket down: a pending read ends, writes still go out.
    pub fn shutdown_read(&self) {
        self.socket.shutdown_read();
    }
}
