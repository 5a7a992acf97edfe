//! One request to a name server over a short-lived connection: registration runs every 30 s,
//! so a connection per call costs nothing that matters and never leaves a half-dead link.

use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use comet_net::{ClientTls, Transport};
use comet_proto::bytes::BytesMut;
use comet_proto::frame::{encode, FrameDecoder};
use comet_proto::{Decoded, RemotingCommand};
use comet_rt::net::Stream;
use comet_rt::task_class::timeout;
use thiserror::Error;

/// A name-server call that did not produce a response.
#[derive(Debug, Error)]
pub enum CallError {
    /// The address does not parse.
    #[error("bad name server address {0:?}")]
    Address(String),
    /// Connecting, writing or reading failed.
    #[error("name server {addr}: {source}")]
    Io {
        /// The name server.
        addr: SocketAddr,
        /// What failed.
        source: std::io::Error,
    },
    /// No response within the limit.
    #[error("name server {0} did not answer in time")]
    Timeout(SocketAddr),
    /// The response frame is malformed.
    #[error("name server {addr} sent a malformed response: {reason}")]
    Malformed {
        /// The name server.
        addr: SocketAddr,
        /// What was wrong.
        reason: String,
    },
}

/// Resolves `ip:port` (no DNS: name servers are configured by address, as in RocketMQ).
pub fn parse_addr(text: &str) -> Result<SocketAddr, CallError> {
    text.trim()
        .parse()
        .map_err(|_| CallError::Address(text.to_owned()))
}

/// The TLS of the broker's own connections, as its config says. The files were checked at
/// start-up (`runtime::run_shard`), so a failure here means one vanished since: it is logged
/// and the link stays plain, which a name server enforcing TLS refuses visibly.
pub fn client_tls(config: &crate::config::BrokerConfig) -> Option<ClientTls> {
    config.client_tls().unwrap_or_else(|error| {
        log::error!("outgoing TLS: {error}");
        None
    })
}

/// A long-lived connection to one name server. Name servers drop a broker the moment its
/// connection closes (docs/protocol.md#name-server-requests), so registration keeps one link per
/// name server open and reconnects only after a failure.
pub struct NameServerLink {
    addr: SocketAddr,
    tls: Option<ClientTls>,
    stream: Option<Rc<Transport>>,
    buffer: BytesMut,
}

impl NameServerLink {
    /// A link to `addr`, connected on first use, over TLS when `tls` is given
    /// ([`crate::config::BrokerConfig::client_tls`]).
    pub fn new(addr: SocketAddr, tls: Option<ClientTls>) -> NameServerLink {
        NameServerLink {
            addr,
            tls,
            stream: None,
            buffer: BytesMut::new(),
        }
    }

    /// The name server's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Sends `request` and waits up to `limit` for the response with its opaque. Any failure
    /// drops the connection; the next call reconnects.
    pub async fn call(
        &mut self,
        request: &RemotingCommand,
        limit: Duration,
    ) -> Result<RemotingCommand, CallError> {
        let addr = self.addr;
        let outcome = match timeout(limit, self.exchange(request)).await {
            Ok(result) => result,
            Err(_) => Err(CallError::Timeout(addr)),
        };
        if outcome.is_err() {
            if let Some(stream) = self.stream.take() {
                stream.shutdown();
            }
            self.buffer.clear();
        }
        outcome
    }

    async fn exchange(&mut self, request: &RemotingCommand) -> Result<RemotingCommand, CallError> {
        let addr = self.addr;
        let io = |source| CallError::Io { addr, source };
        if self.stream.is_none() {
            let socket = Stream::connect(addr).await.map_err(io)?;
            let transport = match &self.tls {
                // The caller's time limit bounds the handshake too.
                Some(tls) => tls
                    .connect(socket, comet_net::limits::TLS_HANDSHAKE_TIMEOUT)
                    .await
                    .map_err(io)?,
                None => Transport::plain(socket),
            };
            self.stream = Some(Rc::new(transport));
        }
        let stream = self.stream.clone().expect("connected above");
        let mut frame = BytesMut::new();
        encode(request, &mut frame);
        stream.write_all(&frame).await.map_err(io)?;
        let decoder = FrameDecoder::default();
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            while let Some(decoded) =
                decoder
                    .decode(&mut self.buffer)
                    .map_err(|error| CallError::Malformed {
                        addr,
                        reason: error.to_string(),
                    })?
            {
                match decoded {
                    Decoded::Command(response)
                        if response.is_response() && response.opaque == request.opaque =>
                    {
                        return Ok(response);
                    }
                    Decoded::Command(_) => continue,
                    Decoded::Malformed(error) => {
                        return Err(CallError::Malformed {
                            addr,
                            reason: error.to_string(),
                        })
                    }
                }
            }
            let read = stream.read(&mut chunk).await.map_err(io)?;
            if read == 0 {
                return Err(io(std::io::ErrorKind::UnexpectedEof.into()));
            }
            self.buffer.extend_from_slice(&chunk[..read]);
        }
    }
}
