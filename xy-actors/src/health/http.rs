//! The probes' HTTP client: hyper's HTTP/1.1 client connection (no pool,
//! one request per connection to `127.0.0.1`), reading the body frame by
//! frame so an SSE stream that already carried the answer ends the read
//! early. No timeouts here: the probe bounds the whole exchange.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{HOST, HeaderName, HeaderValue, USER_AGENT};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::http::body::{MAX_BODY, Response};

/// Aborts the connection task when the request is over (or abandoned).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
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
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("HTTP handshake: {e}"))?;
    let _conn = AbortOnDrop(tokio::spawn(async move {
        let _ = conn.await;
    }));

    let method = hyper::Method::from_bytes(method.as_bytes()).map_err(|e| e.to_string())?;
    let mut req = hyper::Request::builder()
        .method(method.clone())
        .uri(path)
        .body(Full::new(Bytes::copy_from_slice(body.unwrap_or_default())))
        .map_err(|e| format!("building {method} {path}: {e}"))?;
    let h = req.headers_mut();
    h.insert(HOST, header_value(&format!("127.0.0.1:{port}"))?);
    h.insert(USER_AGENT, HeaderValue::from_static("xy-probe"));
    for (k, v) in headers {
        let name = HeaderName::from_bytes(k.as_bytes()).map_err(|e| format!("header {k}: {e}"))?;
        h.insert(name, header_value(v)?);
    }

    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| describe(&e, &method, path))?;
    let status = resp.status().as_u16();
    let (parts, mut incoming) = resp.into_parts();
    let mut out = Vec::new();
    while !done(&out) {
        let Some(frame) = incoming.frame().await else {
            break;
        };
        let frame = frame.map_err(|e| format!("reading the answer to {method} {path}: {e}"))?;
        if let Some(data) = frame.data_ref() {
            if out.len() + data.len() > MAX_BODY {
                return Err(format!(
                    "answer to {method} {path} is over {MAX_BODY} bytes"
                ));
            }
            out.extend_from_slice(data);
        }
    }
    Ok(Response {
        status,
        headers: parts.headers,
        body: out,
    })
}

fn header_value(v: &str) -> Result<HeaderValue, String> {
    HeaderValue::from_str(v).map_err(|e| format!("header value {v:?}: {e}"))
}

/// A short reason for a failed exchange ("not an HTTP answer" for a
/// listener that speaks something else).
fn describe(e: &hyper::Error, method: &hyper::Method, path: &str) -> String {
    if e.is_parse() {
        format!("{method} {path}: not an HTTP answer ({e})")
    } else if e.is_incomplete_message() {
        format!("{method} {path}: the connection closed before an answer")
    } else {
        format!("{method} {path}: {e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    use tokio::net::TcpListener;

    /// Serves one canned answer on a fresh port; returns the port and the
    /// request head the client sent.
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
                if line == "\r\n" || line.is_empty() {
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

    #[tokio::test]
    async fn content_length_body_and_request_shape() {
        let (port, req) = serve(
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nMcp-Session-Id: abc\r\n\r\nhello",
            false,
        )
        .await;
        let r = request(port, "POST", "/mcp", &[("X-A", "1")], Some(b"{}"), &never)
            .await
            .unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.body, b"hello");
        assert_eq!(r.header("MCP-SESSION-ID"), Some("abc"));
        let req = req.await.unwrap().to_ascii_lowercase();
        assert!(req.starts_with("post /mcp http/1.1\r\n"), "{req}");
        assert!(
            req.contains("x-a: 1\r\n") && req.contains("content-length: 2\r\n"),
            "{req}"
        );
        assert!(req.contains("host: 127.0.0.1:"), "{req}");
    }

    #[tokio::test]
    async fn chunked_and_interim_and_eof_bodies() {
        let (port, _) = serve(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;x=y\r\n world\r\n0\r\n\r\n",
            false,
        )
        .await;
        let r = request(port, "GET", "/", &[], None, &never).await.unwrap();
        assert_eq!(r.body, b"hello world");
        let (port, _) = serve(b"HTTP/1.0 503 Busy\r\n\r\nlater", false).await;
        let r = request(port, "GET", "/", &[], None, &never).await.unwrap();
        assert_eq!((r.status, r.body.as_slice()), (503, &b"later"[..]));
    }

    #[tokio::test]
    async fn early_stop_and_garbage() {
        // The server never ends the stream; `done` ends the read.
        let (port, _) = serve(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n10\r\ndata: {\"id\":1}\n\n\r\n",
            true,
        )
        .await;
        let stop = |b: &[u8]| b.ends_with(b"\n\n");
        let r = tokio::time::timeout(
            xy_testbins::wait::scaled(std::time::Duration::from_secs(10)),
            request(port, "POST", "/", &[], Some(b"x"), &stop),
        )
        .await
        .expect("the read ends at the event, not at EOF")
        .unwrap();
        assert_eq!(r.body, b"data: {\"id\":1}\n\n");
        let (port, _) = serve(b"SSH-2.0-OpenSSH_9\r\n", false).await;
        let e = request(port, "GET", "/", &[], None, &never)
            .await
            .unwrap_err();
        assert!(e.contains("not an HTTP answer"), "{e}");
    }
}
