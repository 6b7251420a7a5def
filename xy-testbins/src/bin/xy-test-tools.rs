//! `xy-test-tools`: a hand-written 2025-era MCP server on stdin/stdout whose
//! tools and prompts change at runtime, for the firewall's mutation suite
//! (SPEC §20). It reads `--file F` (JSON `{"tools": [...], "prompts":
//! [...], "notify": bool}`) afresh at every `tools/list` and `prompts/list`,
//! pages both lists `--page N` items at a time (`nextCursor` is the next
//! offset), and, when the file changes and says `"notify": true`, sends
//! `notifications/tools/list_changed` and `notifications/prompts/list_changed`.
//! Every `tools/call` is answered `called NAME`; `prompts/get` likewise.
//! It offers the prompts capability when the file has `prompts` at start.
//! The file's `gated` entries (`{"needs": "/sampling", "tool": {...}}`)
//! are tools it lists, after the others, only when its client's
//! `initialize` declared the capability at that JSON pointer, as SDK
//! servers register capability-dependent tools.
//!
//! With `--starts F` it appends one line to `F` per `initialize` it
//! answers, the capabilities declared (tests count xy's listing probes).
//!
//! With `--port P` it serves the same over HTTP instead (streamable HTTP,
//! 2025 era, stateless: each POST answered with one JSON body,
//! notifications `202`, every other method `405`), for the firewall on
//! the gateway's proxy; `list_changed` is not sent there.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use xy_testbins::args::Args;

/// What the client's `initialize` declared.
static CLIENT_CAPS: Mutex<Option<Value>> = Mutex::new(None);

const USAGE: &str = "xy-test-tools --file F [--page N] [--port P] [--starts F]";

/// `--starts`: where each `initialize` is recorded.
static STARTS: Mutex<Option<PathBuf>> = Mutex::new(None);

type Out = xy_testbins::out::Shared;
use xy_testbins::out::send;

fn read(file: &PathBuf) -> Value {
    std::fs::read_to_string(file)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| json!({}))
}

fn mtime(file: &PathBuf) -> Option<(SystemTime, u64)> {
    let m = std::fs::metadata(file).ok()?;
    Some((m.modified().ok()?, m.len()))
}

fn main() {
    let mut args = Args::from_env(USAGE);
    let mut file: Option<PathBuf> = None;
    let mut page = usize::MAX;
    let mut port: Option<u16> = None;
    while let Some(flag) = args.next_flag() {
        match flag.as_str() {
            "--file" => file = Some(args.value::<String>(&flag).into()),
            "--page" => page = args.value(&flag),
            "--port" => port = Some(args.value(&flag)),
            "--starts" => {
                *STARTS
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) =
                    Some(args.value::<String>(&flag).into());
            }
            _ => args.unknown(&flag),
        }
    }
    let Some(file) = file else {
        xy_testbins::out::err(USAGE);
        std::process::exit(2);
    };
    let out: Out = Arc::new(Mutex::new(std::io::stdout()));
    let with_prompts = read(&file).get("prompts").is_some();
    if port.is_none() {
        // A change of the file is a change of the lists.
        let (out, file) = (out.clone(), file.clone());
        std::thread::spawn(move || {
            let mut seen = mtime(&file);
            loop {
                std::thread::sleep(Duration::from_millis(50));
                let now = mtime(&file);
                if now != seen {
                    seen = now;
                    if read(&file).get("notify").and_then(Value::as_bool) == Some(true) {
                        for m in [
                            "notifications/tools/list_changed",
                            "notifications/prompts/list_changed",
                        ] {
                            send(&out, &json!({"jsonrpc": "2.0", "method": m}));
                        }
                    }
                }
            }
        });
    }
    if let Some(port) = port {
        serve_http(port, &file, page, with_prompts);
        return;
    }
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if let Some(answer) = answer(&msg, &file, page, with_prompts) {
            send(&out, &answer);
        }
    }
}

/// The answer to one message (`None` for a notification).
fn answer(msg: &Value, file: &PathBuf, page: usize, with_prompts: bool) -> Option<Value> {
    let id = msg.get("id").cloned()?;
    let method = msg.get("method").and_then(Value::as_str).unwrap_or("");
    let name = msg
        .pointer("/params/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let result = match method {
        "initialize" => {
            *CLIENT_CAPS
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) =
                msg.pointer("/params/capabilities").cloned();
            let starts = STARTS
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone();
            if let Some(f) = starts {
                let line = format!(
                    "{}\n",
                    msg.pointer("/params/capabilities").unwrap_or(&Value::Null)
                );
                let _ = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(f)
                    .and_then(|mut o| o.write_all(line.as_bytes()));
            }
            let mut caps = json!({"tools": {"listChanged": true}});
            if with_prompts {
                caps["prompts"] = json!({"listChanged": true});
            }
            json!({"protocolVersion": "2025-06-18", "capabilities": caps,
                   "serverInfo": {"name": "xy-test-tools", "version": "1"}})
        }
        "ping" => json!({}),
        "tools/list" | "prompts/list" => {
            let key = if method == "tools/list" {
                "tools"
            } else {
                "prompts"
            };
            let lists = read(file);
            let mut all = lists
                .get(key)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if key == "tools" {
                let declared = CLIENT_CAPS
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clone()
                    .unwrap_or_else(|| json!({}));
                for g in lists
                    .get("gated")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let needs = g.get("needs").and_then(Value::as_str).unwrap_or("");
                    if declared.pointer(needs).is_some() {
                        all.extend(g.get("tool").cloned());
                    }
                }
            }
            let from: usize = msg
                .pointer("/params/cursor")
                .and_then(Value::as_str)
                .and_then(|c| c.parse().ok())
                .unwrap_or(0);
            let to = from.saturating_add(page).min(all.len());
            let mut r = json!({key: all.get(from..to).unwrap_or_default()});
            if to < all.len() {
                r["nextCursor"] = json!(to.to_string());
            }
            r
        }
        "tools/call" => {
            json!({"content": [{"type": "text", "text": format!("called {name}")}]})
        }
        "prompts/get" => {
            json!({"messages": [{"role": "user", "content": {"type": "text", "text": format!("got {name}")}}]})
        }
        _ => {
            return Some(
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "method not found"}}),
            );
        }
    };
    Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

/// Serves [`answer`] over HTTP/1.1 on `127.0.0.1:port`, a thread per
/// connection, keep-alive honoured.
fn serve_http(port: u16, file: &std::path::Path, page: usize, with_prompts: bool) {
    let listener = match std::net::TcpListener::bind(("127.0.0.1", port)) {
        Ok(l) => l,
        Err(e) => {
            xy_testbins::out::err(&format!("xy-test-tools: cannot listen on {port}: {e}"));
            std::process::exit(1);
        }
    };
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let file = file.to_path_buf();
        std::thread::spawn(move || {
            let _ = connection(conn, &file, page, with_prompts);
        });
    }
}

fn connection(
    conn: std::net::TcpStream,
    file: &PathBuf,
    page: usize,
    with_prompts: bool,
) -> std::io::Result<()> {
    use std::io::Read;
    let mut reader = std::io::BufReader::new(conn.try_clone()?);
    let mut conn = conn;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line)? == 0 {
            return Ok(());
        }
        let mut length = 0usize;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h)? == 0 {
                return Ok(());
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length.min(16 << 20)];
        reader.read_exact(&mut body)?;
        let (status, text) = if !request_line.starts_with("POST ") {
            ("405 Method Not Allowed", String::new())
        } else {
            match serde_json::from_slice::<Value>(&body) {
                Ok(msg) => match answer(&msg, file, page, with_prompts) {
                    Some(a) => ("200 OK", a.to_string()),
                    None => ("202 Accepted", String::new()),
                },
                Err(_) => ("400 Bad Request", String::new()),
            }
        };
        write!(
            conn,
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{text}",
            text.len()
        )?;
        conn.flush()?;
    }
}
