//! One HTTP/1.1 exchange of the console: the request head parsed by `httparse`, a body only
//! with `Content-Length`, both bounded; the answer always closes the connection.
//!
//! Limits: a head longer than [`HEAD_BYTES_MAX`] or with more than [`HEADERS_MAX`] fields, a
//! body longer than [`BODY_BYTES_MAX`], and a chunked body are refused with 400 and a reason;
//! the caller bounds the whole exchange in time.

use std::io;

use comet_rt::net::Stream;
use thiserror::Error;

/// Longest request head accepted (request line and fields).
pub const HEAD_BYTES_MAX: usize = 16 * 1024;

/// Most header fields accepted.
pub const HEADERS_MAX: usize = 64;

/// Longest request body accepted (the reset form is a few hundred bytes).
pub const BODY_BYTES_MAX: usize = 16 * 1024;

/// Bytes asked of the socket per read.
const READ_CHUNK_BYTES: usize = 4096;

/// The request methods the console tells apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// GET.
    Get,
    /// HEAD: a GET without the body.
    Head,
    /// POST (the offset reset).
    Post,
    /// Anything else: answered 405.
    Other,
}

/// A request as the console reads it.
#[derive(Debug)]
pub struct Request {
    /// The method.
    pub method: Method,
    /// The path, before any `?`, not decoded.
    pub path: String,
    /// The query string's fields, percent-decoded.
    pub query: Vec<(String, String)>,
    /// The body (empty without `Content-Length`).
    pub body: Vec<u8>,
    /// Whether the request carries [`CONSOLE_HEADER`]: the page's own requests do, a form
    /// another site makes a browser send cannot (it would need a CORS preflight, which the
    /// console never grants).
    pub from_console: bool,
}

/// The header the console page sends with its POST (any value).
pub const CONSOLE_HEADER: &str = "X-Comet-Console";

impl Request {
    /// The first query field named `name`.
    pub fn query(&self, name: &str) -> Option<&str> {
        field(&self.query, name)
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
    let mut from_console = false;
    for header in parsed.headers.iter() {
        from_console |= header.name.eq_ignore_ascii_case(CONSOLE_HEADER);
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
        body: Vec::new(),
        from_console,
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

/// `Content-Type` of the JSON API's answers.
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
        assert!(!post.from_console);
        let (_, marked, _) = parse_head(b"POST /api/reset HTTP/1.1\r\nx-comet-console: 1\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(marked.from_console);
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
