//! The smallest HTTP/1.1 server the exporter needs: one request per
//! connection (`Connection: close`), GET only, the request head bounded in
//! size and time, a bounded number of connections at once.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::Duration;

/// The longest request head read (request line and headers).
pub(crate) const MAX_HEAD_BYTES: usize = 8 * 1024;
/// How long a client may take to send its whole request head, and each
/// write of the answer.
pub(crate) const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// A parsed request: its path and decoded query parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Request {
    /// The path, without the query.
    pub(crate) path: String,
    /// `key=value` pairs of the query, percent-decoded, in order.
    pub(crate) query: Vec<(String, String)>,
}

impl Request {
    /// The first value of query parameter `key`.
    pub(crate) fn param(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// An answer: status, content type and body.
#[derive(Debug, Clone)]
pub(crate) struct Response {
    /// Status code.
    pub(crate) status: u16,
    /// `Content-Type`.
    pub(crate) content_type: &'static str,
    /// The body.
    pub(crate) body: String,
}

/// The OpenMetrics text format's content type.
pub(crate) const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const TEXT: &str = "text/plain; charset=utf-8";

impl Response {
    /// A plain-text answer.
    pub(crate) fn text(status: u16, body: impl Into<String>) -> Self {
        let mut body = body.into();
        if !body.ends_with('\n') {
            body.push('\n');
        }
        Self {
            status,
            content_type: TEXT,
            body,
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
        408 => "Request Timeout",
        413 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Unknown",
    }
}

/// Why a request was not read: the answer to send instead.
fn refuse(status: u16, why: &str) -> Result<Request, Response> {
    Err(Response::text(status, why))
}

/// Reads one request head from `stream` (bounded by [`MAX_HEAD_BYTES`]
/// and [`IO_TIMEOUT`]) and parses it; a malformed, oversized, slow or
/// non-GET request gives the error answer to send.
pub(crate) fn read_request(stream: &mut TcpStream) -> Result<Request, Response> {
    let _ = stream.set_write_timeout(Some(IO_TIMEOUT));
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    let deadline = std::time::Instant::now() + IO_TIMEOUT;
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() > MAX_HEAD_BYTES {
            return refuse(413, "request head too large");
        }
        // One deadline for the whole head: a byte at a time does not extend it.
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return refuse(408, "request not received in time");
        }
        let _ = stream.set_read_timeout(Some(left));
        match stream.read(&mut buf) {
            Ok(0) => return refuse(400, "connection closed before the request ended"),
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return refuse(408, "request not received in time")
            }
            Err(_) => return refuse(400, "reading the request failed"),
        }
    }
    parse_head(&head)
}

/// Parses a request head (request line, headers, blank line).
pub(crate) fn parse_head(head: &[u8]) -> Result<Request, Response> {
    let Ok(text) = std::str::from_utf8(head) else {
        return refuse(400, "request is not UTF-8");
    };
    let line = text.lines().next().unwrap_or_default();
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return refuse(400, "malformed request line");
    };
    if !version.starts_with("HTTP/1.") {
        return refuse(400, "only HTTP/1.x is served");
    }
    if method != "GET" {
        return refuse(405, "only GET is served");
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut pairs = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match (decode(k), decode(v)) {
            (Some(k), Some(v)) => pairs.push((k, v)),
            _ => return refuse(400, "malformed percent-encoding in the query"),
        }
    }
    Ok(Request {
        path: path.to_string(),
        query: pairs,
    })
}

/// Percent-decoding (and `+` as space) of a query component.
fn decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// Writes `r` and closes the connection (errors ignored: the client left).
pub(crate) fn write_response(stream: &mut TcpStream, r: &Response) {
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\nCache-Control: no-store\r\n\r\n",
        r.status,
        reason(r.status),
        r.content_type,
        r.body.len()
    );
    let _ = stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(r.body.as_bytes()))
        .and_then(|()| stream.flush());
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_get_with_a_query_parses_and_decodes() {
        let r = parse_head(
            b"GET /probe?target=127.0.0.1%3A5300&test=latency&x HTTP/1.1\r\nHost: a\r\n\r\n",
        )
        .unwrap();
        assert_eq!(r.path, "/probe");
        assert_eq!(r.param("target"), Some("127.0.0.1:5300"));
        assert_eq!(r.param("test"), Some("latency"));
        assert_eq!(r.param("x"), Some(""));
        assert_eq!(r.param("y"), None);
    }

    #[test]
    fn other_methods_and_malformed_requests_are_refused() {
        let status = |h: &[u8]| parse_head(h).unwrap_err().status;
        assert_eq!(status(b"POST / HTTP/1.1\r\n\r\n"), 405);
        assert_eq!(status(b"GET /\r\n\r\n"), 400);
        assert_eq!(status(b"GET / SPDY/3\r\n\r\n"), 400);
        assert_eq!(status(b"GET /?a=%zz HTTP/1.1\r\n\r\n"), 400);
        assert_eq!(status(b"GET /?a=%4 HTTP/1.1\r\n\r\n"), 400);
    }
}
