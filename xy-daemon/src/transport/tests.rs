//! Framing and dispatch over a real socket pair, with a small test method
//! table (no engine). Raw async sockets on purpose: the point is what the
//! framing does with bytes the shared `xy_core::client` would never send.

use std::time::Duration;

use jsonrpsee::types::ErrorObjectOwned;
use jsonrpsee::{ResponsePayload, RpcModule};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

use super::*;

struct Harness {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    stop: watch::Sender<bool>,
    closing: watch::Sender<bool>,
    server: tokio::task::JoinHandle<Arc<Semaphore>>,
}

fn methods() -> Handlers {
    let mut m = RpcModule::new(());
    m.register_method("echo", |p, _, _| {
        let v: Value = p.parse()?;
        Ok::<_, ErrorObjectOwned>(v)
    })
    .unwrap();
    m.register_async_method("slow", |_, _, _| async {
        tokio::time::sleep(Duration::from_millis(150)).await;
        Ok::<_, ErrorObjectOwned>("slept")
    })
    .unwrap();
    // Named like the lifecycle method so the transport runs it beside the reader.
    m.register_async_method("stop", |_, _, _| async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        Ok::<_, ErrorObjectOwned>("stopped")
    })
    .unwrap();
    m.register_async_method("ordered", |_, _, ext| async move {
        let conn = ext.get::<Arc<Conn>>().cloned().unwrap();
        let (payload, written) = ResponsePayload::success("first").notify_on_completion();
        tokio::spawn(async move {
            written.await.unwrap();
            conn.send(serde_json::value::to_raw_value(&json!({"then": "second"})).unwrap())
                .await;
        });
        payload
    })
    .unwrap();
    let mut h = Handlers::from(jsonrpsee::Methods::from(m));
    // A direct method (writes its own reply line), like `list`.
    h.register_direct("direct_echo", |p| async move {
        match p.parse::<Value>() {
            Ok(Value::String(_)) | Err(_) => Err(jsonrpsee::types::ErrorObject::owned(
                -32602,
                "params must be an array or object",
                None::<()>,
            )),
            Ok(v) => Ok(v),
        }
    });
    h
}

async fn start() -> Harness {
    let dir = tempfile::Builder::new()
        .prefix("xyt")
        .tempdir_in("/tmp")
        .unwrap();
    let path = dir.path().join("s.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let (stop, stop_rx) = watch::channel(false);
    let (closing, closing_rx) = watch::channel(false);
    let server = tokio::spawn(serve(listener, methods(), stop_rx, closing_rx));
    Harness {
        _dir: dir,
        path,
        stop,
        closing,
        server,
    }
}

struct Client {
    r: BufReader<OwnedReadHalf>,
    w: OwnedWriteHalf,
}

impl Client {
    async fn connect(h: &Harness) -> Client {
        let (r, w) = UnixStream::connect(&h.path).await.unwrap().into_split();
        Client {
            r: BufReader::new(r),
            w,
        }
    }

    async fn send_raw(&mut self, bytes: &[u8]) {
        self.w.write_all(bytes).await.unwrap();
    }

    async fn send(&mut self, line: &str) {
        self.send_raw(format!("{line}\n").as_bytes()).await;
    }

    async fn recv(&mut self) -> Value {
        let mut line = String::new();
        let n = tokio::time::timeout(Duration::from_secs(10), self.r.read_line(&mut line))
            .await
            .expect("reply in time")
            .unwrap();
        assert!(n > 0, "unexpected EOF");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad reply {line:?}: {e}"))
    }

    async fn call(&mut self, line: &str) -> Value {
        self.send(line).await;
        self.recv().await
    }

    /// The server closed: EOF, or a reset when it closed with our unread
    /// request in its buffer.
    async fn expect_eof(&mut self) {
        let mut rest = String::new();
        let r = tokio::time::timeout(Duration::from_secs(10), self.r.read_to_string(&mut rest))
            .await
            .expect("EOF in time");
        match r {
            Ok(n) => assert_eq!(n, 0, "unexpected data {rest:?}"),
            Err(e) => assert_eq!(e.kind(), io::ErrorKind::ConnectionReset, "{e}"),
        }
    }
}

fn code(v: &Value) -> i64 {
    v["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error: {v}"))
}

#[tokio::test]
async fn bad_input_gets_errors_and_connection_stays_usable() {
    let h = start().await;
    let mut c = Client::connect(&h).await;
    let ok = r#"{"jsonrpc":"2.0","id":7,"method":"echo","params":{"a":1}}"#;

    let r = c.call("{not json").await;
    assert_eq!(code(&r), -32700);
    assert_eq!(r["id"], Value::Null);
    assert_eq!(c.call(ok).await["result"], json!({"a":1}));

    c.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"echo\xff\"}\n")
        .await;
    let r = c.recv().await;
    assert_eq!(code(&r), -32700);
    assert!(r["error"]["message"].as_str().unwrap().contains("UTF-8"));
    assert_eq!(c.call(ok).await["id"], 7);

    let r = c
        .call(r#"{"jsonrpc":"2.0","id":"x","method":"nope"}"#)
        .await;
    assert_eq!(code(&r), -32601);
    assert_eq!(r["id"], "x");

    let r = c.call(r#"{"jsonrpc":"1.0","id":2,"method":"echo"}"#).await;
    assert_eq!(code(&r), -32600);
    assert_eq!(r["id"], 2);
    let r = c.call(r#"{"jsonrpc":"2.0","id":3}"#).await;
    assert_eq!(code(&r), -32600);
    let r = c.call("42").await;
    assert_eq!(code(&r), -32600);

    // Blank lines are skipped; CRLF is accepted.
    c.send_raw(b"\n   \n\r\n").await;
    c.send_raw(format!("{ok}\r\n").as_bytes()).await;
    assert_eq!(c.recv().await["id"], 7);
}

#[tokio::test]
async fn over_long_line_is_rejected_and_discarded() {
    let h = start().await;
    let mut c = Client::connect(&h).await;
    let mut long = br#"{"jsonrpc":"2.0","id":1,"method":"echo","params":[""#.to_vec();
    long.resize(MAX_LINE_BYTES + 4096, b'a');
    long.extend_from_slice(b"\"]}\n");
    let (r, w) = (&mut c.r, &mut c.w);
    let writer = async {
        w.write_all(&long).await.unwrap();
        w.write_all(br#"{"jsonrpc":"2.0","id":2,"method":"echo","params":{"after":true}}"#)
            .await
            .unwrap();
        w.write_all(b"\n").await.unwrap();
    };
    let reader = async {
        let mut a = String::new();
        r.read_line(&mut a).await.unwrap();
        let mut b = String::new();
        r.read_line(&mut b).await.unwrap();
        (a, b)
    };
    let ((), (a, b)) = tokio::join!(writer, reader);
    let a: Value = serde_json::from_str(&a).unwrap();
    assert_eq!(code(&a), -32600);
    assert!(
        a["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&MAX_LINE_BYTES.to_string())
    );
    let b: Value = serde_json::from_str(&b).unwrap();
    assert_eq!(
        b["result"],
        json!({"after": true}),
        "the rest of the long line was discarded"
    );

    // Exactly the limit is fine.
    let prefix = br#"{"jsonrpc":"2.0","id":3,"method":"echo","params":[""#;
    let suffix = br#""]}"#;
    let mut exact = prefix.to_vec();
    exact.resize(MAX_LINE_BYTES - suffix.len(), b'b');
    exact.extend_from_slice(suffix);
    assert_eq!(exact.len(), MAX_LINE_BYTES);
    exact.push(b'\n');
    let (r, w) = (&mut c.r, &mut c.w);
    let reader = async {
        let mut a = String::new();
        r.read_line(&mut a).await.unwrap();
        a
    };
    let (_, a) = tokio::join!(async { w.write_all(&exact).await.unwrap() }, reader);
    let a: Value = serde_json::from_str(&a).unwrap();
    assert_eq!(a["id"], 3);
    assert!(a.get("result").is_some());
}

#[tokio::test]
async fn batches_and_notifications() {
    let h = start().await;
    let mut c = Client::connect(&h).await;
    // A notification (no id) gets no reply, even for an unknown method.
    c.send(r#"{"jsonrpc":"2.0","method":"echo","params":{}}"#)
        .await;
    c.send(r#"{"jsonrpc":"2.0","method":"nope"}"#).await;
    let r = c
        .call(
            r#"[{"jsonrpc":"2.0","id":1,"method":"echo","params":[1]},
                {"jsonrpc":"2.0","method":"echo","params":[2]},
                {"jsonrpc":"2.0","id":2,"method":"nope"},
                5]"#
            .replace('\n', " ")
            .as_str(),
        )
        .await;
    let arr = r
        .as_array()
        .unwrap_or_else(|| panic!("batch reply is an array: {r}"));
    assert_eq!(arr.len(), 3, "{r}");
    assert_eq!(arr[0]["result"], json!([1]));
    assert_eq!(code(&arr[1]), -32601);
    assert_eq!(code(&arr[2]), -32600);

    // Direct methods answer alone, in batches and as notifications alike.
    c.send(r#"{"jsonrpc":"2.0","method":"direct_echo","params":[0]}"#)
        .await;
    let r = c
        .call(r#"{"jsonrpc":"2.0","id":"d","method":"direct_echo","params":{"x":"\"y"}}"#)
        .await;
    assert_eq!(
        r,
        json!({"jsonrpc": "2.0", "id": "d", "result": {"x": "\"y"}})
    );
    let r = c
        .call(
            r#"[{"jsonrpc":"2.0","id":3,"method":"direct_echo","params":[3]},
                {"jsonrpc":"2.0","method":"direct_echo","params":[4]},
                {"jsonrpc":"2.0","id":4,"method":"echo","params":[5]},
                {"jsonrpc":"2.0","id":5,"method":"direct_echo","params":"bad"}]"#
                .replace('\n', " ")
                .as_str(),
        )
        .await;
    let arr = r.as_array().unwrap_or_else(|| panic!("{r}"));
    assert_eq!(arr.len(), 3, "{r}");
    assert_eq!((&arr[0]["id"], &arr[0]["result"]), (&json!(3), &json!([3])));
    assert_eq!((&arr[1]["id"], &arr[1]["result"]), (&json!(4), &json!([5])));
    assert_eq!((&arr[2]["id"], code(&arr[2])), (&json!(5), -32602));

    let r = c.call("[]").await;
    assert_eq!(code(&r), -32600);
    let r = c.call("[1,").await;
    assert_eq!(code(&r), -32700);

    // A batch of notifications only: no reply; the next reply is the echo.
    c.send(r#"[{"jsonrpc":"2.0","method":"echo"},{"jsonrpc":"2.0","method":"echo"}]"#)
        .await;
    let r = c
        .call(r#"{"jsonrpc":"2.0","id":9,"method":"echo","params":[9]}"#)
        .await;
    assert_eq!(r["id"], 9);
}

#[tokio::test]
async fn half_close_finishes_in_flight_calls_then_closes() {
    let h = start().await;
    let mut c = Client::connect(&h).await;
    c.send(r#"{"jsonrpc":"2.0","id":1,"method":"slow"}"#).await;
    c.send(r#"{"jsonrpc":"2.0","id":2,"method":"ordered"}"#)
        .await;
    c.w.shutdown().await.unwrap();
    let mut got = vec![c.recv().await, c.recv().await, c.recv().await];
    // The reply of `ordered` always precedes what it sends after completion.
    let first = got.iter().position(|v| v["result"] == "first").unwrap();
    let second = got.iter().position(|v| v["then"] == "second").unwrap();
    assert!(first < second, "{got:?}");
    got.retain(|v| v["id"] == 1);
    assert_eq!(got[0]["result"], "slept");
    c.expect_eof().await;
}

#[tokio::test]
async fn last_line_without_newline_is_served() {
    let h = start().await;
    let mut c = Client::connect(&h).await;
    c.send_raw(br#"{"jsonrpc":"2.0","id":4,"method":"echo","params":[4]}"#)
        .await;
    c.w.shutdown().await.unwrap();
    assert_eq!(c.recv().await["result"], json!([4]));
    c.expect_eof().await;
}

#[tokio::test]
async fn stop_then_closing_ends_everything() {
    let h = start().await;
    let mut idle = Client::connect(&h).await;
    let mut busy = Client::connect(&h).await;
    assert_eq!(
        busy.call(r#"{"jsonrpc":"2.0","id":1,"method":"echo","params":[]}"#)
            .await["id"],
        1
    );
    h.stop.send_replace(true);
    let slots = h.server.await.unwrap();
    // No new connections once stopped (the listener is dropped).
    assert!(UnixStream::connect(&h.path).await.is_err());
    h.closing.send_replace(true);
    idle.expect_eof().await;
    busy.expect_eof().await;
    let all = u32::try_from(MAX_CONNECTIONS).unwrap();
    tokio::time::timeout(Duration::from_secs(10), slots.acquire_many(all))
        .await
        .expect("connections released their slots")
        .unwrap()
        .forget();
}

#[tokio::test]
async fn connections_beyond_the_cap_wait_for_a_slot() {
    let h = start().await;
    let mut held = Vec::new();
    for _ in 0..MAX_CONNECTIONS {
        let mut c = Client::connect(&h).await;
        // A round trip proves the connection was accepted, not just queued.
        assert_eq!(
            c.call(r#"{"jsonrpc":"2.0","id":1,"method":"echo","params":[]}"#)
                .await["id"],
            1
        );
        held.push(c);
    }
    let mut extra = Client::connect(&h).await;
    extra
        .send(r#"{"jsonrpc":"2.0","id":2,"method":"echo","params":[]}"#)
        .await;
    // Not closed, not answered: it waits in the backlog.
    let mut line = String::new();
    assert!(
        tokio::time::timeout(Duration::from_millis(300), extra.r.read_line(&mut line))
            .await
            .is_err(),
        "answered or closed past the cap: {line:?}"
    );
    // One slot frees: the waiting client is served.
    drop(held.pop());
    let n = tokio::time::timeout(Duration::from_secs(10), extra.r.read_line(&mut line))
        .await
        .expect("served once a slot freed")
        .unwrap();
    assert!(n > 0 && line.contains("\"id\":2"), "{line}");
}

#[tokio::test]
async fn quick_requests_are_answered_in_order() {
    let h = start().await;
    let mut c = Client::connect(&h).await;
    // One write: a slow call, garbage, then a quick call. Replies keep that
    // order, as a socat user pasting lines expects.
    c.send_raw(
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"slow\"}\n{oops\n\
          {\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"echo\",\"params\":[2]}\n",
    )
    .await;
    assert_eq!(c.recv().await["id"], 1);
    assert_eq!(code(&c.recv().await), -32700);
    assert_eq!(c.recv().await["id"], 2);
}

#[tokio::test]
async fn a_waiting_lifecycle_call_does_not_hold_up_later_requests() {
    let h = start().await;
    let mut c = Client::connect(&h).await;
    c.send(r#"{"jsonrpc":"2.0","id":1,"method":"stop"}"#).await;
    let v = c
        .call(r#"{"jsonrpc":"2.0","id":2,"method":"echo","params":[2]}"#)
        .await;
    assert_eq!(v["id"], 2, "echo answered while stop still waits");
    let v = c.recv().await;
    assert_eq!(
        (v["id"].clone(), v["result"].clone()),
        (json!(1), json!("stopped"))
    );
}
