//! The console's way into the daemon's methods: one in-memory connection
//! to the control socket's own transport (`transport::connection`), so a
//! console request runs exactly the code a `socat` line runs (framing,
//! limits, params checks, streams), with no second implementation. Which
//! methods may be called is the console's allow-list (`api.rs`), not this
//! file's.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, ReadHalf, WriteHalf};
use tokio::sync::{Semaphore, watch};

use crate::transport::{self, Handlers};

/// In-memory connections open at once (calls in flight and live streams of
/// every open page); past it a request waits for one to close.
const MAX_OPEN: usize = 64;
/// Bytes buffered between the console and the transport per connection.
const PIPE_BYTES: usize = 256 * 1024;
/// Connection ids of the console, far from the socket's counter (they name
/// a connection in the daemon's debug log only).
const FIRST_ID: usize = 1 << 40;

/// What opens in-memory connections to the method table.
#[derive(Debug, Clone)]
pub(crate) struct Daemon {
    methods: Handlers,
    closing: watch::Receiver<bool>,
    slots: Arc<Semaphore>,
    next_id: Arc<AtomicUsize>,
}

/// A JSON-RPC error answer, as the transport wrote it.
#[derive(Debug, Clone)]
pub(crate) struct RpcFailure(pub(crate) Value);

impl Daemon {
    pub(crate) fn new(methods: Handlers, closing: watch::Receiver<bool>) -> Daemon {
        Daemon {
            methods,
            closing,
            slots: Arc::new(Semaphore::new(MAX_OPEN)),
            next_id: Arc::new(AtomicUsize::new(FIRST_ID)),
        }
    }

    /// Opens one connection.
    pub(crate) async fn open(&self) -> Line {
        let permit = Arc::clone(&self.slots)
            .acquire_owned()
            .await
            .expect("the semaphore is never closed");
        let (ours, theirs) = tokio::io::duplex(PIPE_BYTES);
        let (read, write) = tokio::io::split(theirs);
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        tokio::spawn(transport::connection(
            id,
            read,
            write,
            self.methods.clone(),
            self.closing.clone(),
            permit,
        ));
        let (r, w) = tokio::io::split(ours);
        Line {
            read: BufReader::new(r),
            write: w,
            next: 1,
        }
    }

    /// One call; the daemon's answer line as it wrote it (a JSON-RPC
    /// response: `result` or `error`), not parsed again: a page's read of
    /// 10,000 call records is passed through, not rebuilt.
    pub(crate) async fn call_raw(
        &self,
        method: &str,
        params: Value,
    ) -> Result<Vec<u8>, RpcFailure> {
        let mut line = self.open().await;
        let id = line.request(method, &params).await?;
        loop {
            let Some(raw) = line.next_line().await else {
                return Err(gone());
            };
            let head: Head = serde_json::from_slice(&raw).unwrap_or_default();
            if head.id == Some(id) {
                return Ok(raw);
            }
        }
    }

    /// One call; notifications before the answer (a `logs` read's lines)
    /// are dropped: use [`Line`] to keep them.
    pub(crate) async fn call(&self, method: &str, params: Value) -> Result<Value, RpcFailure> {
        let mut line = self.open().await;
        line.call(method, params, |_| {}).await
    }
}

/// One open in-memory connection.
#[derive(Debug)]
pub(crate) struct Line {
    read: BufReader<ReadHalf<DuplexStream>>,
    write: WriteHalf<DuplexStream>,
    next: u64,
}

impl Line {
    /// Sends one request and returns its answer; each notification that
    /// arrives first goes to `notified`.
    pub(crate) async fn call(
        &mut self,
        method: &str,
        params: Value,
        mut notified: impl FnMut(Value),
    ) -> Result<Value, RpcFailure> {
        let id = self.request(method, &params).await?;
        loop {
            let Some(msg) = self.next_message().await else {
                return Err(gone());
            };
            if msg.get("id").and_then(Value::as_u64) == Some(id) {
                return match msg.get("error") {
                    Some(e) => Err(RpcFailure(e.clone())),
                    None => Ok(msg.get("result").cloned().unwrap_or(Value::Null)),
                };
            }
            notified(msg);
        }
    }

    /// Writes one request; its id.
    async fn request(&mut self, method: &str, params: &Value) -> Result<u64, RpcFailure> {
        let id = self.next;
        self.next += 1;
        let mut req = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )
        .expect("a Value serialises");
        req.push(b'\n');
        if self.write.write_all(&req).await.is_err() {
            return Err(gone());
        }
        Ok(id)
    }

    /// The next message the daemon wrote, `None` once it closed.
    pub(crate) async fn next_message(&mut self) -> Option<Value> {
        loop {
            let raw = self.next_line().await?;
            if let Ok(v) = serde_json::from_slice(&raw) {
                return Some(v);
            }
        }
    }

    /// The next line the daemon wrote, without its newline.
    async fn next_line(&mut self) -> Option<Vec<u8>> {
        let mut buf = Vec::new();
        match self.read.read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => None,
            Ok(_) => {
                if buf.last() == Some(&b'\n') {
                    buf.pop();
                }
                Some(buf)
            }
        }
    }
}

/// Just the id of a message, the rest skipped.
#[derive(Debug, Default, serde::Deserialize)]
struct Head {
    id: Option<u64>,
}

fn gone() -> RpcFailure {
    RpcFailure(
        json!({"code": -32603, "message": "xyd closed the console's connection (shutting down?)"}),
    )
}
