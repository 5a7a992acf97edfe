//! Frames on a replication connection: reading whole frames off a stream (the decoder
//! refuses a stranger's bytes as soon as the header shows them wrong, see
//! `comet_replication::wire::buffered`) and writing encoded frames.

use std::io;
use std::time::Duration;

use bytes::BytesMut;
use comet_replication::wire::{self, Close, DecodeError, EncodeError, Frame};
use comet_rt::net::Stream;
use comet_rt::task_class::timeout;
use thiserror::Error;

/// Longest wait for a Close frame to leave before the stream is shut anyway.
const CLOSE_WAIT_MAX: Duration = Duration::from_secs(1);

/// Bytes asked of the socket per read.
const READ_CHUNK_BYTES: usize = 256 * 1024;

/// Why a replication connection failed.
#[derive(Debug, Error)]
pub enum LinkError {
    /// The socket failed.
    #[error("replication link to {peer}: {source}")]
    Io {
        /// The other end.
        peer: std::net::SocketAddr,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The peer sent bytes that are not a frame.
    #[error("replication link to {peer}: malformed frame: {source}")]
    Decode {
        /// The other end.
        peer: std::net::SocketAddr,
        /// What was wrong.
        #[source]
        source: DecodeError,
    },
    /// A frame could not be encoded (a value out of the wire's range).
    #[error("replication frame cannot be encoded: {0}")]
    Encode(#[from] EncodeError),
    /// The peer closed the connection.
    #[error("replication link to {peer} closed by the peer")]
    Closed {
        /// The other end.
        peer: std::net::SocketAddr,
    },
    /// The peer sent a frame this end does not take at this point.
    #[error("replication link to {peer}: unexpected {what} frame")]
    Unexpected {
        /// The other end.
        peer: std::net::SocketAddr,
        /// The frame's kind.
        what: &'static str,
    },
    /// The peer closed the stream with a reason.
    #[error("replication link to {peer} closed: {reason:?} {detail}")]
    PeerClosed {
        /// The other end.
        peer: std::net::SocketAddr,
        /// Its reason.
        reason: wire::CloseReason,
        /// Its words.
        detail: String,
    },
}

impl LinkError {
    /// The error for a Close frame the peer sent.
    pub fn peer_closed(peer: std::net::SocketAddr, close: Close) -> LinkError {
        LinkError::PeerClosed {
            peer,
            reason: close.reason,
            detail: close.detail,
        }
    }
}

/// The kind of `frame`, for messages.
pub fn kind(frame: &Frame) -> &'static str {
    match frame {
        Frame::Hello(_) => "Hello",
        Frame::Welcome(_) => "Welcome",
        Frame::Data(_) => "Data",
        Frame::Ack(_) => "Ack",
        Frame::Heartbeat(_) => "Heartbeat",
        Frame::Close(_) => "Close",
    }
}

/// Reads whole frames off one stream (one reader per stream).
pub struct FrameReader {
    stream: Stream,
    buffer: BytesMut,
    /// What one read fills; only the bytes read are copied on, so a small frame (an Ack)
    /// costs a small copy.
    scratch: Box<[u8]>,
}

impl FrameReader {
    /// A reader of `stream`, starting with bytes already read from it (`buffered`).
    pub fn new(stream: Stream, buffered: &[u8]) -> FrameReader {
        let mut buffer = BytesMut::with_capacity(READ_CHUNK_BYTES);
        buffer.extend_from_slice(buffered);
        FrameReader {
            stream,
            buffer,
            scratch: vec![0; READ_CHUNK_BYTES].into_boxed_slice(),
        }
    }

    /// The other end.
    pub fn peer(&self) -> std::net::SocketAddr {
        self.stream.peer_addr()
    }

    /// Bytes read but not yet decoded (handed on with the stream).
    pub fn into_buffered(self) -> BytesMut {
        self.buffer
    }

    /// The next frame. End of stream is [`LinkError::Closed`].
    pub async fn next(&mut self) -> Result<Frame, LinkError> {
        let peer = self.stream.peer_addr();
        loop {
            if let Some(frame) = wire::decode(&mut self.buffer)
                .map_err(|source| LinkError::Decode { peer, source })?
            {
                return Ok(frame);
            }
            match self.stream.read(&mut self.scratch).await {
                Ok(0) => return Err(LinkError::Closed { peer }),
                Ok(read) => self.buffer.extend_from_slice(&self.scratch[..read]),
                Err(source) => return Err(LinkError::Io { peer, source }),
            }
        }
    }
}

/// Writes one frame.
pub async fn write_frame(stream: &Stream, frame: &Frame) -> Result<(), LinkError> {
    let mut bytes = BytesMut::new();
    wire::encode(frame, &mut bytes)?;
    stream
        .write_all(&bytes)
        .await
        .map_err(|source| LinkError::Io {
            peer: stream.peer_addr(),
            source,
        })
}

/// Writes one frame, failing with `TimedOut` when the peer does not take it within
/// `limit` (a peer that stops reading must not hold a task for ever).
pub async fn write_frame_within(
    stream: &Stream,
    frame: &Frame,
    limit: Duration,
) -> Result<(), LinkError> {
    match timeout(limit, write_frame(stream, frame)).await {
        Ok(written) => written,
        Err(timed_out) => Err(LinkError::Io {
            peer: stream.peer_addr(),
            source: io::Error::new(io::ErrorKind::TimedOut, timed_out),
        }),
    }
}

/// Sends `close` (best effort: the peer may be gone) and shuts the stream down.
pub async fn close(stream: &Stream, close: Close) {
    let _ = write_frame_within(stream, &Frame::Close(close), CLOSE_WAIT_MAX).await;
    stream.shutdown();
}

#[cfg(test)]
mod tests {
    use super::*;
    use comet_replication::wire::{Ack, CloseReason};
    use std::io::Write;

    fn encoded(frame: &Frame) -> Vec<u8> {
        let mut bytes = BytesMut::new();
        wire::encode(frame, &mut bytes).unwrap();
        bytes.to_vec()
    }

    // Proves the reader returns whole frames whatever the reads cut them into (two frames
    // in one write, one frame split across writes), starts from bytes read before it, and
    // turns bytes that are not a frame into a decode error and end of stream into Closed.
    #[test]
    fn frames_are_read_whole_and_garbage_is_an_error() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let ack = Frame::Ack(Ack {
            log_id: 1,
            written: 4096,
            durable: 2048,
            confirm: 1024,
        });
        let close = Frame::Close(Close::new(CloseReason::Shutdown, "bye"));
        let (first, rest) = {
            let mut all = encoded(&ack);
            all.extend(encoded(&close));
            all.extend(encoded(&ack));
            let split = encoded(&ack).len() / 2;
            (all[..split].to_vec(), all[split..].to_vec())
        };
        let partial = encoded(&ack)[..5].to_vec();
        let writer = std::thread::spawn(move || {
            let (mut peer, _) = listener.accept().unwrap();
            std::thread::sleep(std::time::Duration::from_millis(50));
            peer.write_all(&rest).unwrap();
            peer.write_all(b"not a frame").unwrap();
            let (mut second, _) = listener.accept().unwrap();
            second.write_all(&partial).unwrap();
        });
        let options = comet_rt::pool::ExecutorOptions::default();
        comet_rt::pool::run_on_current_thread(&options, async move {
            let stream = Stream::connect(addr).await.unwrap();
            let mut reader = FrameReader::new(stream, &first);
            assert_eq!(reader.next().await.unwrap(), ack);
            assert_eq!(reader.next().await.unwrap(), close);
            assert_eq!(reader.next().await.unwrap(), ack);
            let error = reader.next().await.unwrap_err();
            assert!(matches!(error, LinkError::Decode { .. }), "{error}");
            let stream = Stream::connect(addr).await.unwrap();
            let mut reader = FrameReader::new(stream, &[]);
            let error = reader.next().await.unwrap_err();
            assert!(matches!(error, LinkError::Closed { .. }), "{error}");
        })
        .unwrap();
        writer.join().unwrap();
    }
}
