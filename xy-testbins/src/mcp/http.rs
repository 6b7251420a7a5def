//! Just enough HTTP/1.1 for the test MCP server: request head and body
//! (`Content-Length` or `chunked`) with hard size limits, and responses
//! written in one `write_all`.

use std::io::{self, BufRead, Read, Write};

const MAX_LINE: usize = 16 * 1024;
const MAX_HEADERS: usize = 100;
const MAX_BODY: usize = 8 * 1024 * 1024;

/// A parsed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// Path without the query string.
    pub path: String,
    /// `HTTP/1.1` (keep-alive by default) rather than `HTTP/1.0`.
    pub http11: bool,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Whether the connection stays open after the response.
    pub fn keep_alive(&self) -> bool {
        let connection = self.header("connection").unwrap_or("");
        if self.http11 {
            !connection.eq_ignore_ascii_case("close")
        } else {
            connection.eq_ignore_ascii_case("keep-alive")
        }
    }
}

/// Why a request could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// The peer closed the connection between requests.
    Closed,
    Io(io::Error),
    /// Malformed or oversized input; answered with 400 and the connection closed.
    Bad(&'static str),
}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

/// Reads a request head; the body is read by [`read_body`] (after an optional
/// `100 Continue`).
pub fn read_head<R: BufRead>(r: &mut R) -> Result<Request, ReadError> {
    let mut line = match read_line(r)? {
        Some(line) => line,
        None => return Err(ReadError::Closed),
    };
    // RFC 9112 §2.2: ignore empty lines before a request line.
    while line.is_empty() {
        line = read_line(r)?.ok_or(ReadError::Closed)?;
    }
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(ReadError::Bad("malformed request line"));
    };
    let http11 = match version {
        "HTTP/1.1" => true,
        "HTTP/1.0" => false,
        _ => return Err(ReadError::Bad("unsupported HTTP version")),
    };
    let path = target.split('?').next().unwrap_or("").to_owned();
    let mut headers = Vec::new();
    loop {
        let line = read_line(r)?.ok_or(ReadError::Bad("truncated headers"))?;
        if line.is_empty() {
            break;
        }
        if headers.len() == MAX_HEADERS {
            return Err(ReadError::Bad("too many headers"));
        }
        let (name, value) = line
            .split_once(':')
            .ok_or(ReadError::Bad("malformed header"))?;
        headers.push((name.trim().to_owned(), value.trim().to_owned()));
    }
    Ok(Request {
        method: method.to_owned(),
        path,
        http11,
        headers,
        body: Vec::new(),
    })
}

/// Reads the body announced by the head's headers into `req.body`.
pub fn read_body<R: BufRead>(r: &mut R, req: &mut Request) -> Result<(), ReadError> {
    let chunked = req
        .header("transfer-encoding")
        .is_some_and(|te| te.to_ascii_lowercase().contains("chunked"));
    if chunked {
        req.body = read_chunked(r)?;
    } else if let Some(len) = req.header("content-length") {
        let len: usize = len
            .parse()
            .map_err(|_| ReadError::Bad("bad content-length"))?;
        if len > MAX_BODY {
            return Err(ReadError::Bad("body too large"));
        }
        let mut body = vec![0; len];
        r.read_exact(&mut body)?;
        req.body = body;
    }
    Ok(())
}

fn read_chunked<R: BufRead>(r: &mut R) -> Result<Vec<u8>, ReadError> {
    let mut body = Vec::new();
    loop {
        let line = read_line(r)?.ok_or(ReadError::Bad("truncated chunk"))?;
        let size = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size, 16).map_err(|_| ReadError::Bad("bad chunk size"))?;
        if size == 0 {
            // Trailers, up to the empty line.
            while !read_line(r)?
                .ok_or(ReadError::Bad("truncated trailer"))?
                .is_empty()
            {}
            return Ok(body);
        }
        if body.len() + size > MAX_BODY {
            return Err(ReadError::Bad("body too large"));
        }
        let start = body.len();
        body.resize(start + size, 0);
        r.read_exact(&mut body[start..])?;
        if !read_line(r)?
            .ok_or(ReadError::Bad("truncated chunk"))?
            .is_empty()
        {
            return Err(ReadError::Bad("chunk not followed by CRLF"));
        }
    }
}

/// One line without its `\r\n`; `None` at EOF before any byte.
fn read_line<R: BufRead>(r: &mut R) -> Result<Option<String>, ReadError> {
    let mut buf = Vec::new();
    let n = r.take(MAX_LINE as u64 + 1).read_until(b'\n', &mut buf)?;
    if n == 0 {
        return Ok(None);
    }
    if buf.last() != Some(&b'\n') {
        return Err(if n > MAX_LINE {
            ReadError::Bad("line too long")
        } else {
            ReadError::Bad("truncated line")
        });
    }
    buf.pop();
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    String::from_utf8(buf)
        .map(Some)
        .map_err(|_| ReadError::Bad("non-UTF-8 head"))
}

/// A response to be written in one go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// A response with a body of the given content type.
    pub fn new(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        Self {
            status,
            headers: vec![("Content-Type".to_owned(), content_type.to_owned())],
            body: body.into(),
        }
    }

    /// A response without a body.
    pub fn empty(status: u16) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    /// Adds a header.
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Writes status line, headers and body; adds `Connection: close` unless `keep_alive`.
    pub fn write_to<W: Write>(&self, w: &mut W, keep_alive: bool) -> io::Result<()> {
        let mut out = Vec::with_capacity(self.body.len() + 256);
        write!(out, "HTTP/1.1 {} {}\r\n", self.status, reason(self.status))?;
        for (name, value) in &self.headers {
            write!(out, "{name}: {value}\r\n")?;
        }
        write!(out, "Content-Length: {}\r\n", self.body.len())?;
        if !keep_alive {
            out.extend_from_slice(b"Connection: close\r\n");
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&self.body);
        w.write_all(&out)?;
        w.flush()
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        202 => "Accepted",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(raw: &[u8]) -> Result<Request, ReadError> {
        let mut r = io::BufReader::new(raw);
        let mut req = read_head(&mut r)?;
        read_body(&mut r, &mut req)?;
        Ok(req)
    }

    #[test]
    fn content_length_request() {
        let req =
            parse(b"POST /mcp?x=1 HTTP/1.1\r\nContent-Length: 2\r\nMcp-Session-Id: ab\r\n\r\n{}")
                .unwrap();
        assert_eq!(req.method, "POST");
        assert_eq!(req.path, "/mcp");
        assert_eq!(req.header("mcp-session-id"), Some("ab"));
        assert_eq!(req.body, b"{}");
        assert!(req.keep_alive());
    }

    #[test]
    fn chunked_request() {
        let req = parse(
            b"POST /mcp HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;ext\r\n{\"a\r\n4\r\n\":1}\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!(req.body, b"{\"a\":1}");
    }

    #[test]
    fn malformed_and_closed() {
        assert!(matches!(parse(b""), Err(ReadError::Closed)));
        assert!(matches!(parse(b"GARBAGE\r\n\r\n"), Err(ReadError::Bad(_))));
        assert!(matches!(
            parse(b"GET / HTTP/1.1\r\nno-colon\r\n\r\n"),
            Err(ReadError::Bad(_))
        ));
        let long = [b"GET /".as_slice(), &[b'a'; MAX_LINE + 10]].concat();
        assert!(matches!(parse(&long), Err(ReadError::Bad(_))));
    }

    #[test]
    fn http10_closes_by_default() {
        let req = parse(b"GET /health HTTP/1.0\r\n\r\n").unwrap();
        assert!(!req.keep_alive());
    }
}
