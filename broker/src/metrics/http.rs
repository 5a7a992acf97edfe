//! The scrape requests the metrics endpoint reads: a minimal HTTP/1.1 request head, parsed
//! with limits. Only `GET` (and `HEAD`) of `/metrics` is served; anything malformed or larger
//! than [`REQUEST_HEAD_BYTES_MAX`] is answered 400 and the connection closed. Every answer
//! closes the connection (Prometheus reconnects per scrape at its default intervals).

use thiserror::Error;

/// The largest request head read (request line and headers).
pub const REQUEST_HEAD_BYTES_MAX: usize = 8 * 1024;

/// The path served.
pub const METRICS_PATH: &str = "/metrics";

/// A request head that is not a usable HTTP/1.x request.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum BadRequest {
    /// Larger than [`REQUEST_HEAD_BYTES_MAX`] without its blank line.
    #[error("request head larger than {REQUEST_HEAD_BYTES_MAX} bytes")]
    TooLarge,
    /// Not `METHOD SP TARGET SP HTTP/1.x` with ASCII headers.
    #[error("malformed request line")]
    Malformed,
}

/// What a complete request head asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Request {
    /// `GET /metrics` (`head_only` for `HEAD`).
    Metrics {
        /// `HEAD`: the answer carries no body.
        head_only: bool,
    },
    /// A method other than GET and HEAD (405).
    MethodNotAllowed,
    /// Another path (404).
    NotFound,
}

/// The end of the head in `buffer` (after its blank line), if it is all there.
pub fn head_end(buffer: &[u8]) -> Option<usize> {
    buffer
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .map(|at| at + 4)
}

/// Reads a complete request head (as [`head_end`] found it).
pub fn parse(head: &[u8]) -> Result<Request, BadRequest> {
    let text = std::str::from_utf8(head).map_err(|_| BadRequest::Malformed)?;
    if !text.is_ascii() {
        return Err(BadRequest::Malformed);
    }
    let line = text.split("\r\n").next().ok_or(BadRequest::Malformed)?;
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(BadRequest::Malformed);
    };
    let token = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_graphic());
    if !token(method) || !target.starts_with('/') || !token(target) {
        return Err(BadRequest::Malformed);
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(BadRequest::Malformed);
    }
    let path = target.split('?').next().unwrap_or(target);
    let head_only = match method {
        "GET" => false,
        "HEAD" => true,
        _ => return Ok(Request::MethodNotAllowed),
    };
    if path != METRICS_PATH {
        return Ok(Request::NotFound);
    }
    Ok(Request::Metrics { head_only })
}

/// A complete answer: status line, headers and (unless `head_only`) the body.
pub fn response(status: &str, content_type: &str, body: &[u8], head_only: bool) -> Vec<u8> {
    let mut bytes = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if !head_only {
        bytes.extend_from_slice(body);
    }
    bytes
}

/// The answer to a request that was not served: 400, 404 or 405 with a line of text.
pub fn refusal(status: &str) -> Vec<u8> {
    let body = format!("{status}\n");
    response(status, "text/plain; charset=utf-8", body.as_bytes(), false)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves GET and HEAD of /metrics are served (a query string is ignored), other methods
    // and paths get their own answers, and malformed heads are refused.
    #[test]
    fn parses_scrapes_and_refuses_garbage() {
        let get = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
        assert_eq!(head_end(get), Some(get.len()));
        assert_eq!(parse(get), Ok(Request::Metrics { head_only: false }));
        let head = b"HEAD /metrics?x=1 HTTP/1.0\r\n\r\n";
        assert_eq!(parse(head), Ok(Request::Metrics { head_only: true }));
        assert_eq!(
            parse(b"POST /metrics HTTP/1.1\r\n\r\n"),
            Ok(Request::MethodNotAllowed)
        );
        assert_eq!(parse(b"GET / HTTP/1.1\r\n\r\n"), Ok(Request::NotFound));
        for bad in [
            &b"GET /metrics\r\n\r\n"[..],
            b"GET /metrics HTTP/2\r\n\r\n",
            b"GET metrics HTTP/1.1\r\n\r\n",
            b"GET  /metrics HTTP/1.1\r\n\r\n",
            b"GET /metrics HTTP/1.1 x\r\n\r\n",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
            b"GET /m\xc3\xa9trics HTTP/1.1\r\n\r\n",
        ] {
            assert_eq!(parse(bad), Err(BadRequest::Malformed), "{bad:?}");
        }
        assert_eq!(head_end(b"GET /metrics HTTP/1.1\r\n"), None);
    }

    // Proves an answer states its length and closes, and HEAD leaves the body out.
    #[test]
    fn answers_state_length_and_close() {
        let full = response("200 OK", "text/plain", b"abc", false);
        let text = String::from_utf8(full).unwrap();
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(text.contains("Content-Length: 3\r\n"), "{text}");
        assert!(text.contains("Connection: close\r\n"), "{text}");
        assert!(text.ends_with("\r\n\r\nabc"), "{text}");
        let head = response("200 OK", "text/plain", b"abc", true);
        assert!(String::from_utf8(head).unwrap().ends_with("\r\n\r\n"));
        assert!(String::from_utf8(refusal("400 Bad Request"))
            .unwrap()
            .starts_with("HTTP/1.1 400 Bad Request\r\n"));
    }
}
