//! A minimal HTTP/1.1 client for the probes: one request per connection
//! (`Connection: close`) to `127.0.0.1`, bodies by `Content-Length`, chunked
//! encoding or EOF, with an early stop for SSE streams. No timeouts here:
//! the probe bounds the whole exchange.

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Largest response head or body read; a probe answer is tiny.
const MAX_HEAD: usize = 64 * 1024;
const MAX_BODY: usize = 1024 * 1024;

/// A response: status, headers (names lower-cased) and the body read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Response {
    /// The first header called `name` (case-insensitive).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// One request. `done(body_so_far)` may end the body read early (an SSE
/// stream that already carried the answer).
pub(crate) async fn request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
    done: &(dyn Fn(&[u8]) -> bool + Sync),
) -> Result<Response, String> {
    let stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| format!("connect to 127.0.0.1:{port}: {e}"))?;
    let _ = stream.set_nodelay(true);
    let mut stream = BufReader::new(stream);
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: xy-probe\r\nConnection: close\r\n"
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(b) = body {
        head.push_str(&format!("Content-Length: {}\r\n", b.len()));
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    out.extend_from_slice(body.unwrap_or_default());
    stream
        .get_mut()
        .write_all(&out)
        .await
        .map_err(|e| format!("send: {e}"))?;

    let (status, headers) = loop {
        let (status, headers) = read_head(&mut stream).await?;
        // Interim answers (100 Continue) precede the real one.
        if !(100..200).contains(&status) {
            break (status, headers);
        }
    };
    let mut resp = Response {
        status,
        headers,
        body: Vec::new(),
    };
    if method == "HEAD" || status == 204 || status == 304 {
        return Ok(resp);
    }
    let chunked = resp
        .header("transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    let length = resp
        .header("content-length")
        .and_then(|v| v.trim().parse::<usize>().ok());
    resp.body = if chunked {
        read_chunked(&mut stream, done).await?
    } else {
        read_plain(&mut stream, length, done).await?
    };
    Ok(resp)
}

async fn read_line(stream: &mut BufReader<TcpStream>, limit: usize) -> Result<String, String> {
    let mut line = Vec::new();
    let n = (&mut *stream)
        .take(limit as u64)
        .read_until(b'\n', &mut line)
        .await
        .map_err(|e| format!("read: {e}"))?;
    if n == 0 {
        return Err("connection closed before the answer".to_owned());
    }
    if !line.ends_with(b"\n") {
        return Err("answer line too long".to_owned());
    }
    Ok(String::from_utf8_lossy(&line)
        .trim_end_matches(['\r', '\n'])
        .to_owned())
}

async fn read_head(
    stream: &mut BufReader<TcpStream>,
) -> Result<(u16, Vec<(String, String)>), String> {
    let status_line = read_line(stream, MAX_HEAD).await?;
    let status = parse_status_line(&status_line)
        .ok_or_else(|| format!("not an HTTP answer: {status_line:?}"))?;
    let mut headers = Vec::new();
    let mut total = status_line.len();
    loop {
        let line = read_line(stream, MAX_HEAD).await?;
        if line.is_empty() {
            break;
        }
        total += line.len();
        if total > MAX_HEAD {
            return Err("answer head too large".to_owned());
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
        }
    }
    Ok((status, headers))
}

/// `HTTP/1.1 200 OK` → 200.
pub(crate) fn parse_status_line(line: &str) -> Option<u16> {
    let mut parts = line.split_whitespace();
    let version = parts.next()?;
    if !version.starts_with("HTTP/1.") {
        return None;
    }
    let code = parts.next()?;
    (code.len() == 3).then_some(())?;
    code.parse().ok()
}

async fn read_plain(
    stream: &mut BufReader<TcpStream>,
    length: Option<usize>,
    done: &(dyn Fn(&[u8]) -> bool + Sync),
) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    let want = length.unwrap_or(MAX_BODY);
    let mut buf = [0u8; 8192];
    while body.len() < want.min(MAX_BODY) {
        let room = (want.min(MAX_BODY) - body.len()).min(buf.len());
        let n = stream
            .read(&mut buf[..room])
            .await
            .map_err(|e| format!("read body: {e}"))?;
        if n == 0 {
            if length.is_some() {
                return Err("connection closed in the middle of the body".to_owned());
            }
            break;
        }
        body.extend_from_slice(&buf[..n]);
        if done(&body) {
            break;
        }
    }
    Ok(body)
}

async fn read_chunked(
    stream: &mut BufReader<TcpStream>,
    done: &(dyn Fn(&[u8]) -> bool + Sync),
) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        let line = read_line(stream, 1024).await?;
        let size_text = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| format!("bad chunk size {size_text:?}"))?;
        if size == 0 {
            // Trailers (rarely any) end with a blank line; a closed
            // connection here is fine too.
            while let Ok(l) = read_line(stream, 1024).await {
                if l.is_empty() {
                    break;
                }
            }
            return Ok(body);
        }
        if body.len() + size > MAX_BODY {
            return Err("answer body too large".to_owned());
        }
        let start = body.len();
        body.resize(start + size, 0);
        stream
            .read_exact(&mut body[start..])
            .await
            .map_err(|e| format!("read chunk: {e}"))?;
        let _ = read_line(stream, 8).await?;
        if done(&body) {
            return Ok(body);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// Serves one canned answer on a fresh port; returns the port and the
    /// request the client sent.
    async fn serve_once(answer: &'static [u8]) -> (u16, tokio::task::JoinHandle<String>) {
        serve(answer, false).await
    }

    /// `hold`: keep the connection open after the answer.
    async fn serve(answer: &'static [u8], hold: bool) -> (u16, tokio::task::JoinHandle<String>) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            let (s, _) = l.accept().await.unwrap();
            let mut s = BufReader::new(s);
            let mut req = String::new();
            loop {
                let mut line = String::new();
                s.read_line(&mut line).await.unwrap();
                req.push_str(&line);
                if line == "\r\n" {
                    break;
                }
            }
            s.get_mut().write_all(answer).await.unwrap();
            if hold {
                tokio::time::sleep(std::time::Duration::from_secs(60)).await;
            }
            req
        });
        (port, task)
    }

    fn never(_: &[u8]) -> bool {
        false
    }

    #[test]
    fn status_lines() {
        assert_eq!(parse_status_line("HTTP/1.1 200 OK"), Some(200));
        assert_eq!(parse_status_line("HTTP/1.0 404"), Some(404));
        assert_eq!(parse_status_line("SSH-2.0-OpenSSH"), None);
        assert_eq!(parse_status_line("HTTP/1.1 2000 x"), None);
    }

    #[tokio::test]
    async fn content_length_body_and_request_shape() {
        let (port, req) =
            serve_once(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nMcp-Session-Id: abc\r\n\r\nhello")
                .await;
        let r = request(port, "POST", "/mcp", &[("X-A", "1")], Some(b"{}"), &never)
            .await
            .unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.body, b"hello");
        assert_eq!(r.header("MCP-SESSION-ID"), Some("abc"));
        let req = req.await.unwrap();
        assert!(req.starts_with("POST /mcp HTTP/1.1\r\n"), "{req}");
        assert!(req.contains("X-A: 1\r\n") && req.contains("Content-Length: 2\r\n"));
    }

    #[tokio::test]
    async fn chunked_and_interim_and_eof_bodies() {
        let (port, _) = serve_once(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;x=y\r\n world\r\n0\r\n\r\n",
        )
        .await;
        let r = request(port, "GET", "/", &[], None, &never).await.unwrap();
        assert_eq!(r.body, b"hello world");
        let (port, _) = serve_once(b"HTTP/1.0 503 Busy\r\n\r\nlater").await;
        let r = request(port, "GET", "/", &[], None, &never).await.unwrap();
        assert_eq!((r.status, r.body.as_slice()), (503, &b"later"[..]));
    }

    #[tokio::test]
    async fn early_stop_and_garbage() {
        // The server never ends the stream; `done` ends the read.
        let (port, _) = serve(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: {\"id\":1}\n\n",
            true,
        )
        .await;
        let stop = |b: &[u8]| b.ends_with(b"\n\n");
        let r = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            request(port, "POST", "/", &[], Some(b"x"), &stop),
        )
        .await
        .expect("the read ends at the event, not at EOF")
        .unwrap();
        assert_eq!(r.body, b"data: {\"id\":1}\n\n");
        let (port, _) = serve_once(b"SSH-2.0-OpenSSH_9\r\n").await;
        let e = request(port, "GET", "/", &[], None, &never)
            .await
            .unwrap_err();
        assert!(e.contains("not an HTTP answer"), "{e}");
    }
}
