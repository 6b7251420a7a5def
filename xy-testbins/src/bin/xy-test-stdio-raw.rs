//! `xy-test-stdio-raw`: a hand-written 2025-era MCP server on stdin/stdout,
//! for what an SDK server will not do on purpose: tools that write a huge
//! line without a newline (`blob`), answer late unless cancelled (`slow`),
//! or ask the client something first (`ask`, a `roots/list` request);
//! and, for call records, tools that end each way a call can: `fail` (a
//! result with `isError: true`), `reject` (a JSON-RPC error) and `die`
//! (the process exits without answering); `meta` answers with the
//! request's `params._meta` as its text (what reached the child).
//! A cancelled `slow` call is answered at once with error `-32800`, so a
//! test sees whether a `notifications/cancelled` reached it; with a
//! progress token it sends one progress notification as it starts.
//! `lone` answers with a lone surrogate escape in its text, `huge` with a
//! text of `mib` MiB (default 5, over xy's line limit), each with its id
//! last, as the TypeScript SDK orders an answer.
//! `task` starts a task (the 2025-11-25 tasks utility: a `CreateTaskResult`
//! at once) that completes after `ms` (default a minute); `tasks/get` and
//! `tasks/cancel` serve its state.
//! `flood` floods: `n` notifications (`notifications/progress` with the
//! call's progress token when it has one, `notifications/message` log
//! messages padded with `pad` bytes, `notifications/tools/list_changed`,
//! in turn) as fast as the
//! pipe takes them, then its answer `flooded <n>`, then `flooded <n>` on
//! stderr (the server's log), so a test knows the flood is over.
//! With `"ask": true` it answers with an `InputRequiredResult` (one
//! `elicitation/create`, its message padded as the log messages are)
//! instead, as a 2026-era server asks its client.
//! `--era2026` makes it a 2026-only server: it answers `server/discover`
//! (only `2026-07-28`) and refuses `initialize` with `-32022`.
//! `--refuse-echo NAME` makes it refuse the handshake (`initialize` and
//! `server/discover`) with an error quoting variable `NAME`, as a server
//! that quotes its token in an error would.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use xy_testbins::args::Args;

const USAGE: &str = "xy-test-stdio-raw [--era2026] [--refuse-echo NAME]";

type Out = xy_testbins::out::Shared;
use xy_testbins::out::send;

fn text(id: &Value, text: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": {
        "content": [{"type": "text", "text": text}], "isError": false}})
}

/// The `flood` tool: `n` notifications, then the answer to `id`. Written
/// in batches, the lock released between them: the child still answers
/// xy's own requests (its re-listing after `list_changed`) meanwhile.
fn flood(out: &Out, n: u64, pad: &str, token: Option<&Value>, id: &Value, ask: bool) {
    const BATCH: u64 = 1000;
    let mut lines = Vec::with_capacity(128 * BATCH as usize);
    let mut i = 0;
    while i < n {
        lines.clear();
        for k in i..(i + BATCH).min(n) {
            let msg = match (k % 3, token) {
                (0, Some(t)) => json!({"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": t, "progress": k, "total": n}}),
                (0 | 1, _) => json!({"jsonrpc": "2.0", "method": "notifications/message",
                    "params": {"level": "info", "logger": "flood", "data": format!("flood {k}{pad}")}}),
                _ => json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
            };
            let _ = serde_json::to_writer(&mut lines, &msg);
            lines.push(b'\n');
        }
        let mut o = out
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if o.write_all(&lines).and_then(|()| o.flush()).is_err() {
            return;
        }
        drop(o);
        i += BATCH;
    }
    if ask {
        send(
            out,
            &json!({"jsonrpc": "2.0", "id": id, "result": {
                "resultType": "input_required",
                "inputRequests": {"q": {"method": "elicitation/create", "params": {
                    "message": format!("after the flood? {pad}"),
                    "requestedSchema": {"type": "object", "properties": {}}}}},
                "requestState": "flood"}}),
        );
    } else {
        send(out, &text(id, &format!("flooded {n}")));
    }
    xy_testbins::out::err(&format!("xy-test-stdio-raw: flooded {n}"));
}

fn main() {
    let mut args = Args::from_env(USAGE);
    let mut refuse: Option<String> = None;
    let mut era2026 = false;
    while let Some(flag) = args.next_flag() {
        match flag.as_str() {
            "--era2026" => era2026 = true,
            "--refuse-echo" => {
                let name: String = args.value(&flag);
                refuse = Some(std::env::var(&name).unwrap_or_default());
            }
            _ => args.unknown(&flag),
        }
    }
    let out: Out = Arc::new(Mutex::new(std::io::stdout()));
    // Slow calls in flight (request id as text → cancelled?), and calls
    // waiting for the answer to their `roots/list` (our id → their id).
    let slow: Arc<Mutex<HashMap<String, bool>>> = Arc::default();
    let mut asks: HashMap<String, Value> = HashMap::new();
    let mut next_ask = 0u64;
    // Task id → its status.
    let tasks: Arc<Mutex<HashMap<String, &'static str>>> = Arc::default();
    let mut next_task = 0u64;
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let id = msg.get("id").cloned();
        let method = msg.get("method").and_then(Value::as_str).unwrap_or("");
        let args = msg
            .pointer("/params/arguments")
            .cloned()
            .unwrap_or(json!({}));
        if let (Some(quoted), "initialize" | "server/discover", Some(id)) = (&refuse, method, &id) {
            let why = format!("upstream refused the token {quoted}");
            send(
                &out,
                &json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32000, "message": why}}),
            );
            continue;
        }
        match (method, id) {
            ("", Some(id)) => {
                let key = id.as_str().unwrap_or_default().to_owned();
                if let Some(call) = asks.remove(&key) {
                    let got = msg.get("result").cloned().unwrap_or(Value::Null);
                    send(&out, &text(&call, &format!("roots: {got}")));
                }
            }
            ("server/discover", Some(id)) if era2026 => send(
                &out,
                &json!({"jsonrpc": "2.0", "id": id, "result": {
                    "supportedVersions": ["2026-07-28"],
                    "capabilities": {"tools": {}},
                    "_meta": {"io.modelcontextprotocol/serverInfo":
                        {"name": "xy-test-stdio-raw", "version": "1"}}}}),
            ),
            ("initialize", Some(id)) if era2026 => send(
                &out,
                &json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32022,
                    "message": "unsupported protocol version",
                    "data": {"supported": ["2026-07-28"]}}}),
            ),
            ("initialize", Some(id)) => send(
                &out,
                &json!({"jsonrpc": "2.0", "id": id, "result": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "xy-test-stdio-raw", "version": "1"}}}),
            ),
            ("ping", Some(id)) => send(&out, &json!({"jsonrpc": "2.0", "id": id, "result": {}})),
            ("tools/list", Some(id)) => {
                let tools: Vec<Value> = [
                    "echo", "slow", "ask", "blob", "fail", "reject", "die", "meta", "task", "lone",
                    "huge", "flood",
                ]
                .iter()
                .map(|n| json!({"name": n, "inputSchema": {"type": "object"}}))
                .collect();
                send(
                    &out,
                    &json!({"jsonrpc": "2.0", "id": id, "result": {"tools": tools}}),
                );
            }
            ("tools/call", Some(id)) => {
                let name = msg.pointer("/params/name").and_then(Value::as_str);
                let said = args.get("text").and_then(Value::as_str).unwrap_or("");
                match name {
                    Some("slow") => {
                        let ms = args.get("ms").and_then(Value::as_u64).unwrap_or(1000);
                        let key = id.to_string();
                        slow.lock().unwrap().insert(key.clone(), false);
                        // Progress first, when asked: the caller then knows
                        // the call is under way.
                        if let Some(t) = msg.pointer("/params/_meta/progressToken") {
                            send(
                                &out,
                                &json!({"jsonrpc": "2.0", "method": "notifications/progress",
                                "params": {"progressToken": t, "progress": 0}}),
                            );
                        }
                        let (out, slow, said) = (out.clone(), slow.clone(), said.to_owned());
                        std::thread::spawn(move || {
                            std::thread::sleep(Duration::from_millis(ms));
                            if slow.lock().unwrap().remove(&key) == Some(false) {
                                send(&out, &text(&id, &said));
                            }
                        });
                    }
                    Some("ask") => {
                        next_ask += 1;
                        let ours = format!("ask-{next_ask}");
                        asks.insert(ours.clone(), id);
                        send(
                            &out,
                            &json!({"jsonrpc": "2.0", "id": ours, "method": "roots/list"}),
                        );
                    }
                    Some("blob") => {
                        let mib = args.get("mib").and_then(Value::as_u64).unwrap_or(1);
                        let chunk = vec![b'x'; 1 << 20];
                        let mut o = out.lock().unwrap();
                        for _ in 0..mib {
                            if o.write_all(&chunk).is_err() {
                                return;
                            }
                        }
                        let _ = o.write_all(b"\n");
                        drop(o);
                        send(&out, &text(&id, "after the blob"));
                    }
                    Some("lone") => {
                        // `result` first and the id last, as the TypeScript
                        // SDK writes; `JSON.stringify` escapes a lone
                        // surrogate exactly so.
                        let line = format!(
                            "{{\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"a\\ud800b\"}}],\"isError\":false}},\"jsonrpc\":\"2.0\",\"id\":{id}}}\n"
                        );
                        let mut o = out.lock().unwrap();
                        let _ = o.write_all(line.as_bytes());
                        let _ = o.flush();
                    }
                    Some("huge") => {
                        let mib = args.get("mib").and_then(Value::as_u64).unwrap_or(5);
                        let mut o = out.lock().unwrap();
                        let _ = o.write_all(br#"{"result":{"content":[{"type":"text","text":""#);
                        let chunk = vec![b'x'; 1 << 20];
                        for _ in 0..mib {
                            if o.write_all(&chunk).is_err() {
                                return;
                            }
                        }
                        let end = format!(
                            "\"}}],\"isError\":false}},\"jsonrpc\":\"2.0\",\"id\":{id}}}\n"
                        );
                        let _ = o.write_all(end.as_bytes());
                        let _ = o.flush();
                    }
                    Some("fail") => send(
                        &out,
                        &json!({"jsonrpc": "2.0", "id": id, "result": {
                            "content": [{"type": "text", "text": "it failed"}], "isError": true}}),
                    ),
                    Some("reject") => send(
                        &out,
                        &json!({"jsonrpc": "2.0", "id": id,
                            "error": {"code": -32602, "message": "rejected"}}),
                    ),
                    Some("die") => std::process::exit(3),
                    Some("flood") => {
                        let n = args.get("n").and_then(Value::as_u64).unwrap_or(1000);
                        let pad = args.get("pad").and_then(Value::as_u64).unwrap_or(0);
                        let token = msg.pointer("/params/_meta/progressToken").cloned();
                        let ask = args.get("ask").and_then(Value::as_bool) == Some(true)
                            && msg.pointer("/params/inputResponses").is_none();
                        let out = out.clone();
                        std::thread::spawn(move || {
                            let pad = "x".repeat(usize::try_from(pad).unwrap_or(0));
                            flood(&out, n, &pad, token.as_ref(), &id, ask);
                        });
                    }
                    Some("meta") => {
                        let meta = msg.pointer("/params/_meta").cloned().unwrap_or(Value::Null);
                        send(&out, &text(&id, &meta.to_string()));
                    }
                    Some("task") => {
                        next_task += 1;
                        // Unique across restarts, as a real server's are.
                        let task = format!("task-{}-{next_task}", std::process::id());
                        tasks.lock().unwrap().insert(task.clone(), "working");
                        send(
                            &out,
                            &json!({"jsonrpc": "2.0", "id": id, "result": {"task": {
                                "taskId": task, "status": "working", "ttl": 600_000,
                                "pollInterval": 100, "createdAt": "2026-01-01T00:00:00Z",
                                "lastUpdatedAt": "2026-01-01T00:00:00Z"}}}),
                        );
                        let ms = args.get("ms").and_then(Value::as_u64).unwrap_or(60_000);
                        let tasks = tasks.clone();
                        std::thread::spawn(move || {
                            std::thread::sleep(Duration::from_millis(ms));
                            if let Some(s) = tasks.lock().unwrap().get_mut(&task)
                                && *s == "working"
                            {
                                *s = "completed";
                            }
                        });
                    }
                    _ => send(&out, &text(&id, said)),
                }
            }
            ("tasks/get" | "tasks/cancel", Some(id)) => {
                let task = msg
                    .pointer("/params/taskId")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                let mut all = tasks.lock().unwrap();
                match all.get_mut(&task) {
                    Some(status) => {
                        if method == "tasks/cancel" && *status == "working" {
                            *status = "cancelled";
                        }
                        send(
                            &out,
                            &json!({"jsonrpc": "2.0", "id": id, "result": {
                                "taskId": task, "status": *status, "ttl": 600_000,
                                "createdAt": "2026-01-01T00:00:00Z",
                                "lastUpdatedAt": "2026-01-01T00:00:00Z"}}),
                        );
                    }
                    None => send(
                        &out,
                        &json!({"jsonrpc": "2.0", "id": id,
                            "error": {"code": -32602, "message": "Failed to retrieve task: Task not found"}}),
                    ),
                }
            }
            ("notifications/cancelled", None) => {
                let rid = msg
                    .pointer("/params/requestId")
                    .cloned()
                    .unwrap_or(Value::Null);
                // On stderr (the server's log), so a test sees it even when
                // nobody is left to read the answer.
                xy_testbins::out::err(&format!("xy-test-stdio-raw: cancelled {rid}"));
                let mut s = slow.lock().unwrap();
                if let Some(c) = s.get_mut(&rid.to_string()) {
                    *c = true;
                    send(
                        &out,
                        &json!({"jsonrpc": "2.0", "id": rid,
                            "error": {"code": -32800, "message": "cancelled"}}),
                    );
                }
            }
            (_, Some(id)) => send(
                &out,
                &json!({"jsonrpc": "2.0", "id": id,
                    "error": {"code": -32601, "message": "method not found"}}),
            ),
            _ => {}
        }
    }
}
