//! The small HTTP/1.1 servers Comet runs beside remoting (the broker's metrics endpoint, the
//! name server's web console): one request per connection, its head parsed by `httparse`, a
//! body only with `Content-Length`, both bounded; the answer always closes the connection.
//!
//! Limits: a head longer than [`HEAD_BYTES_MAX`] or with more than [`HEADERS_MAX`] fields, a
//! body longer than [`BODY_BYTES_MAX`], and a chunked body are refused with 400 and a reason;
//! [`serve`] bounds the connections open at once and each exchange in time.

use std::cell::Cell;
use std::future::Future;
use std::io;
use std::rc::Rc;
use std::time::Duration;

use comet_rt::net::{Listener, Stream};
use comet_rt::shutdown::StopSignal;
use comet_rt::sync::{race, Either};
use comet_rt::task_class::{sleep, spawn_detached, timeout, TaskClass};
use thiserror::Error;

/// Longest request head accepted (request line and fields).
pub const HEAD_BYTES_MAX: usize = 16 * 1024;

/// Most header fields accepted.
pub const HEADERS_MAX: usize = 64;

/// Longest request body accepted (the reset form is a few hundred bytes).
pub const BODY_BYTES_MAX: usize = 16 * 1024;

/// Bytes asked of the socket per read.
const READ_CHUNK_BYTES: usize = 4096;

/// The request methods the servers tell apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// GET.
    Get,
    /// HEAD: a GET without the body.
    Head,
    /// POST.
    Post,
    /// Anything else: answered 405.
    Other,
}

/// A request as the servers read it.
#[derive(Debug)]
pub struct Request {
    /// The method.
    pub method: Method,
    /// The path, before any `?`, not decoded.
    pub path: String,
    /// The query string's fields, percent-decoded.
    pub query: Vec<(String, String)>,
    /// The header fields' names (as sent), at most [`HEADERS_MAX`].
    pub header_names: Vec<String>,
    /// The body (empty without `Content-Length`).
    pub body: Vec<u8>,
}

impl Request {
    /// The first query field named `name`.
    pub fn query(&self, name: &str) -> Option<&str> {
        field(&self.query, name)
    }

    /// The body's fields, read as an `application/x-www-form-urlencoded` form.
    pub fn form_fields(&self) -> Vec<(String, String)> {
        form_urlencoded::parse(&self.body).into_owned().collect()
    }

    /// Whether a header field named `name` (any case) was sent.
    pub fn has_header(&self, name: &str) -> bool {
        self.header_names
            .iter()
            .any(|sent| sent.eq_ignore_ascii_case(name))
    }
}

/// The first field named `name` of decoded `pairs`.
pub fn field<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.as_str())
}

/// Why no request could be read.
#[derive(Debug, Error)]
pub enum HttpError {
    /// The peer closed (or failed) before sending a whole request: nothing to answer.
    #[error("connection closed before a whole request")]
    Closed,
    /// The head is longer than [`HEAD_BYTES_MAX`].
    #[error("request head larger than {HEAD_BYTES_MAX} bytes")]
    HeadTooLarge,
    /// The head does not parse.
    #[error("malformed request head: {0}")]
    Malformed(httparse::Error),
    /// `Content-Length` is not a number.
    #[error("bad Content-Length")]
    BadLength,
    /// The body is longer than [`BODY_BYTES_MAX`].
    #[error("request body larger than {BODY_BYTES_MAX} bytes")]
    BodyTooLarge,
    /// A `Transfer-Encoding` body: only `Content-Length` is accepted.
    #[error("Transfer-Encoding bodies are not accepted; send Content-Length")]
    Chunked,
    /// Reading failed.
    #[error("read failed: {0}")]
    Io(#[from] io::Error),
}

/// Reads one request from `stream`.
pub async fn read_request(stream: &Stream) -> Result<Request, HttpError> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; READ_CHUNK_BYTES];
    let (head_len, mut request, body_len) = loop {
        if let Some(parsed) = parse_head(&buffer)? {
            break parsed;
        }
        if buffer.len() > HEAD_BYTES_MAX {
            return Err(HttpError::HeadTooLarge);
        }
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            return Err(HttpError::Closed);
        }
        buffer.extend_from_slice(&chunk[..read]);
    };
    let mut body = buffer.split_off(head_len);
    while body.len() < body_len {
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            return Err(HttpError::Closed);
        }
        body.extend_from_slice(&chunk[..read]);
    }
    body.truncate(body_len);
    request.body = body;
    Ok(request)
}

/// The request head in `buffer` once complete: its length, the request without body, and
/// the body's length. `None` while more bytes are needed.
fn parse_head(buffer: &[u8]) -> Result<Option<(usize, Request, usize)>, HttpError> {
    let mut headers = [httparse::EMPTY_HEADER; HEADERS_MAX];
    let mut parsed = httparse::Request::new(&mut headers);
    let head_len = match parsed.parse(buffer).map_err(HttpError::Malformed)? {
        httparse::Status::Complete(length) => length,
        httparse::Status::Partial => return Ok(None),
    };
    if head_len > HEAD_BYTES_MAX {
        return Err(HttpError::HeadTooLarge);
    }
    let method = match parsed.method.unwrap_or_default() {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        "POST" => Method::Post,
        _ => Method::Other,
    };
    let mut body_len = 0;
    for header in parsed.headers.iter() {
        if header.name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(HttpError::Chunked);
        }
        if header.name.eq_ignore_ascii_case("content-length") {
            body_len = std::str::from_utf8(header.value)
                .ok()
                .and_then(|text| text.trim().parse::<usize>().ok())
                .ok_or(HttpError::BadLength)?;
        }
    }
    if body_len > BODY_BYTES_MAX {
        return Err(HttpError::BodyTooLarge);
    }
    let target = parsed.path.unwrap_or("/");
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let request = Request {
        method,
        path: path.to_owned(),
        query: form_urlencoded::parse(query.as_bytes())
            .into_owned()
            .collect(),
        header_names: parsed
            .headers
            .iter()
            .map(|header| header.name.to_owned())
            .collect(),
        body: Vec::new(),
    };
    Ok(Some((head_len, request, body_len)))
}

/// An answer: status, content type and body.
#[derive(Debug)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// `Content-Type`.
    pub content_type: &'static str,
    /// The body.
    pub body: Vec<u8>,
}

/// `Content-Type` of JSON answers.
pub const JSON: &str = "application/json";

impl Response {
    /// A 200 answer.
    pub fn ok(content_type: &'static str, body: impl Into<Vec<u8>>) -> Response {
        Response {
            status: 200,
            content_type,
            body: body.into(),
        }
    }

    /// A JSON answer with `status`.
    pub fn json(status: u16, value: &serde_json::Value) -> Response {
        Response {
            status,
            content_type: JSON,
            body: value.to_string().into_bytes(),
        }
    }

    /// A refusal: `status` with `{"error": reason}`.
    pub fn error(status: u16, reason: impl std::fmt::Display) -> Response {
        Response::json(status, &serde_json::json!({ "error": reason.to_string() }))
    }

    /// The bytes on the wire; `head_only` leaves the body out (HEAD).
    pub fn encode(&self, head_only: bool) -> Vec<u8> {
        let mut bytes = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n\
             Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n\
             Content-Security-Policy: default-src 'self'; img-src 'self' data:; \
             frame-ancestors 'none'\r\n\
             Connection: close\r\n\r\n",
            self.status,
            reason(self.status),
            self.content_type,
            self.body.len()
        )
        .into_bytes();
        if !head_only {
            bytes.extend_from_slice(&self.body);
        }
        bytes
    }
}

/// How [`serve`] bounds its connections.
#[derive(Clone, Copy, Debug)]
pub struct ServeLimits {
    /// Connections open at once; more are closed unanswered.
    pub connections_max: usize,
    /// Time to read one request and answer it.
    pub exchange_timeout: Duration,
}

/// Most bytes read after answering, so that closing does not reset the connection before
/// the peer reads the answer.
const DRAIN_BYTES_MAX: usize = 64 * 1024;

/// How long draining waits for more bytes before it closes.
const DRAIN_QUIET: Duration = Duration::from_millis(100);

/// Serves `listener` until `stop`: each connection's request goes to `answer`, whose
/// response is written back before the connection closes; a request that cannot be read is
/// answered 400 with the reason. `name` tags the log lines.
pub async fn serve<A, F>(
    name: &'static str,
    listener: Listener,
    stop: StopSignal,
    limits: ServeLimits,
    answer: A,
) where
    A: Fn(Request) -> F + Clone + 'static,
    F: Future<Output = Response> + 'static,
{
    let open = Rc::new(Cell::new(0usize));
    loop {
        let stream = match race(stop.wait(), listener.accept()).await {
            Either::Left(()) => break,
            Either::Right(Ok(stream)) => stream,
            Either::Right(Err(error)) => {
                log::warn!("{name}: accept failed: {error}");
                sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if open.get() >= limits.connections_max {
            stream.shutdown();
            continue;
        }
        open.set(open.get() + 1);
        let (open, answer) = (open.clone(), answer.clone());
        spawn_detached(TaskClass::Admin, async move {
            let peer = stream.peer_addr();
            if timeout(limits.exchange_timeout, exchange(name, &stream, answer))
                .await
                .is_err()
            {
                log::debug!(
                    "{name}: {peer}: no whole exchange within {:?}",
                    limits.exchange_timeout
                );
            }
            stream.shutdown();
            open.set(open.get() - 1);
        });
    }
}

/// Reads one request, answers it and drains what the peer still sends.
async fn exchange<A, F>(name: &str, stream: &Stream, answer: A)
where
    A: Fn(Request) -> F,
    F: Future<Output = Response>,
{
    let (response, head_only) = match read_request(stream).await {
        Ok(request) => {
            let head_only = request.method == Method::Head;
            (answer(request).await, head_only)
        }
        Err(HttpError::Closed | HttpError::Io(_)) => return,
        Err(error) => (Response::error(400, error), false),
    };
    if let Err(error) = stream.write_all(&response.encode(head_only)).await {
        log::debug!("{name}: {}: {error}", stream.peer_addr());
        return;
    }
    drain(stream).await;
}

/// Reads what the peer still sends (a refused request's rest), bounded, so that closing does
/// not reset the connection and destroy the answer before the peer reads it.
async fn drain(stream: &Stream) {
    let mut chunk = [0u8; 4096];
    let mut drained = 0;
    while drained < DRAIN_BYTES_MAX {
        match timeout(DRAIN_QUIET, stream.read(&mut chunk)).await {
            Ok(Ok(read)) if read > 0 => drained += read,
            _ => return,
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves heads are read only when complete, with the query decoded, and that broken,
    // chunked and oversized requests are typed errors.
    #[test]
    fn heads_parse_and_refuse() {
        assert!(
            parse_head(b"GET /api/topic?topic=a%20b HTTP/1.1\r\nHost: x\r\n")
                .unwrap()
                .is_none()
        );
        let (length, request, body) =
            parse_head(b"GET /api/topic?topic=a%20b&x=1 HTTP/1.1\r\nHost: x\r\n\r\nrest")
                .unwrap()
                .unwrap();
        assert_eq!(length, 52);
        assert_eq!(request.method, Method::Get);
        assert_eq!(request.path, "/api/topic");
        assert_eq!(request.query("topic"), Some("a b"));
        assert_eq!(request.query("x"), Some("1"));
        assert_eq!(body, 0);
        let (_, post, body) = parse_head(b"POST /api/reset HTTP/1.1\r\nContent-Length: 12\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!((post.method, body), (Method::Post, 12));
        assert!(!post.has_header("X-Comet-Console"));
        let (_, marked, _) = parse_head(b"POST /api/reset HTTP/1.1\r\nx-comet-console: 1\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(marked.has_header("X-Comet-Console"));
        assert!(matches!(
            parse_head(b"\x00\x01garbage\r\n\r\n"),
            Err(HttpError::Malformed(_))
        ));
        assert!(matches!(
            parse_head(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Err(HttpError::Chunked)
        ));
        assert!(matches!(
            parse_head(b"POST / HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n"),
            Err(HttpError::BodyTooLarge)
        ));
        assert!(matches!(
            parse_head(b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n"),
            Err(HttpError::BadLength)
        ));
        let mut many = b"GET / HTTP/1.1\r\n".to_vec();
        for index in 0..=HEADERS_MAX {
            many.extend_from_slice(format!("X-{index}: y\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert!(matches!(
            parse_head(&many),
            Err(HttpError::Malformed(httparse::Error::TooManyHeaders))
        ));
    }
}
