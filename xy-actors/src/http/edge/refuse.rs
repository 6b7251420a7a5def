//! The answers the edge gives instead of serving: `403` to a peer that is
//! not xyd's user (or cannot be identified) or is a sandboxed server's
//! process, `503` past the connection cap.
//! Written raw before the request is read (HTTP/1.1 lets a server answer
//! early), then the connection lingers: our side is shut for writing and
//! the client's bytes are read and dropped until it closes, so closing
//! with unread input does not turn into a reset that loses the answer.

use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

/// How long a refused client gets to take its answer and close.
const LINGER: Duration = Duration::from_secs(2);
/// Bytes of a refused client's request read (and dropped) at most.
const LINGER_BYTES: usize = 64 * 1024;
/// Refused connections lingering at once, across listeners. A refused
/// connection holds none of its listener's slots (so another user cannot
/// crowd the owner out by never closing); past this many, the answer is
/// written and the connection closed at once.
const MAX_LINGERING: usize = 64;

static LINGERING: Semaphore = Semaphore::const_new(MAX_LINGERING);

/// Why a connection is not served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The peer's socket belongs to another uid, or its owner is unknown.
    Forbidden,
    /// The peer is a process of a sandboxed server whose `reach` lines do
    /// not name the server behind this listener (SPEC §24).
    Confined,
    /// Every slot of the listener stayed taken for the queue wait.
    Busy { limit: usize },
}

impl Refusal {
    fn response(self) -> Vec<u8> {
        let (status, code, message, retry) = match self {
            Refusal::Forbidden => (
                "403 Forbidden",
                -32600,
                "connection refused: this endpoint serves only the user xyd runs as".to_owned(),
                "",
            ),
            Refusal::Confined => (
                "403 Forbidden",
                -32600,
                "connection refused: a sandboxed server's process may not reach xy's \
                 listeners unless its sandbox block says reach \"<server>\""
                    .to_owned(),
                "",
            ),
            Refusal::Busy { limit } => (
                "503 Service Unavailable",
                -32000,
                format!("server busy: this endpoint already has {limit} connections; retry"),
                "retry-after: 1\r\n",
            ),
        };
        let body = serde_json::to_vec(&json!({
            "jsonrpc": "2.0",
            "id": null,
            "error": {"code": code, "message": message},
        }))
        .unwrap_or_default();
        let mut out = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
             connection: close\r\n{retry}\r\n",
            body.len()
        )
        .into_bytes();
        out.extend_from_slice(&body);
        out
    }
}

/// Answers `why` on `stream` and closes it after the linger.
pub(crate) async fn refuse(mut stream: TcpStream, why: Refusal) {
    let linger = LINGERING.try_acquire().ok();
    let _ = tokio::time::timeout(LINGER, async {
        stream.write_all(&why.response()).await?;
        stream.shutdown().await?;
        if linger.is_none() {
            return Ok(());
        }
        let mut buf = [0u8; 4096];
        let mut seen = 0;
        while seen < LINGER_BYTES {
            match stream.read(&mut buf).await? {
                0 => break,
                n => seen += n,
            }
        }
        Ok::<_, std::io::Error>(())
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_complete_http_with_json_bodies() {
        for why in [
            Refusal::Forbidden,
            Refusal::Confined,
            Refusal::Busy { limit: 256 },
        ] {
            let text = String::from_utf8(why.response()).unwrap();
            let (head, body) = text.split_once("\r\n\r\n").unwrap();
            assert!(
                head.contains(&format!("content-length: {}", body.len())),
                "{head}"
            );
            let v: serde_json::Value = serde_json::from_str(body).unwrap();
            assert!(v["error"]["message"].is_string());
        }
        let busy = String::from_utf8(Refusal::Busy { limit: 256 }.response()).unwrap();
        assert!(busy.starts_with("HTTP/1.1 503 "));
        assert!(busy.contains("256 connections"));
        assert!(
            String::from_utf8(Refusal::Forbidden.response())
                .unwrap()
                .starts_with("HTTP/1.1 403 ")
        );
    }
}
