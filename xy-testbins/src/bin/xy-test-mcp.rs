//! `xy-test-mcp`: the test MCP server of `xy_testbins::mcp` (built on rmcp)
//! over streamable HTTP or stdio, for xy's tests, health probes and the
//! README example. Flags: see the `xy_testbins::mcp` docs or `--help`.

use std::sync::Arc;
use std::time::Duration;

use rmcp::ServiceExt;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, ReadHalf, WriteHalf};
use xy_testbins::args::Args;
use xy_testbins::mcp::http::Front;
use xy_testbins::mcp::{Options, TestServer, USAGE};
use xy_testbins::out::{err, out};

fn main() {
    let opts = Arc::new(Options::parse(Args::from_env(USAGE)));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let code = runtime.block_on(run(opts));
    std::process::exit(code);
}

async fn run(opts: Arc<Options>) -> i32 {
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler");
    if opts.stdio {
        err("xy-test-mcp serving on stdio");
        let served = if opts.refuse_initialize || opts.log_methods {
            TestServer::new(Arc::clone(&opts))
                .serve(pumped(opts.refuse_initialize, opts.log_methods))
                .await
        } else {
            TestServer::new(Arc::clone(&opts))
                .serve(rmcp::transport::stdio())
                .await
        };
        let server = match served {
            Ok(server) => server,
            Err(e) => {
                err(&format!("xy-test-mcp: stdio session failed to start: {e}"));
                return 1;
            }
        };
        tokio::select! {
            _ = server.waiting() => { err("stdin closed, exiting"); 0 }
            _ = sigterm.recv() => { err("got SIGTERM, exiting"); 0 }
        }
    } else {
        // Lets tests see a child that is running but not yet listening.
        tokio::time::sleep(Duration::from_millis(opts.bind_delay_ms)).await;
        let port = opts.port.unwrap_or(0);
        let listener = match tokio::net::TcpListener::bind((opts.host.as_str(), port)).await {
            Ok(listener) => listener,
            Err(e) => {
                err(&format!(
                    "xy-test-mcp: cannot bind {}:{port}: {e}",
                    opts.host
                ));
                return 1;
            }
        };
        let addr = listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|_| format!("{}:{port}", opts.host));
        err(&format!("xy-test-mcp listening on {addr}"));
        let front = Front::new(Arc::clone(&opts));
        tokio::select! {
            () = front.serve(listener) => 1,
            _ = sigterm.recv() => { out("got SIGTERM, exiting"); 0 }
        }
    }
}

/// rmcp's stdio server ends its session on an `initialize` it refuses; a
/// 2026-only server need not. Lines from stdin go to rmcp through an
/// in-process pipe (each message's method logged on stderr with `log`),
/// except, with `refuse`, `initialize` requests, answered here with
/// `-32022` (what rmcp answers) while rmcp serves on; rmcp's lines and
/// those answers share one stdout writer, a line at a time.
fn pumped(refuse: bool, log: bool) -> (ReadHalf<DuplexStream>, WriteHalf<DuplexStream>) {
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let (from_rmcp, mut to_rmcp) = tokio::io::split(ours);
    let (lines, mut outbox) = tokio::sync::mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(mut line) = outbox.recv().await {
            line.push('\n');
            if stdout.write_all(line.as_bytes()).await.is_err() || stdout.flush().await.is_err() {
                return;
            }
        }
    });
    let refusals = lines.clone();
    tokio::spawn(async move {
        let mut stdin = BufReader::new(tokio::io::stdin()).lines();
        while let Ok(Some(line)) = stdin.next_line().await {
            let msg: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
            if log && let Some(method) = msg["method"].as_str() {
                err(&format!("got {method}"));
            }
            if refuse && msg["method"] == "initialize" && !msg["id"].is_null() {
                err("refusing initialize, serving on");
                let refusal = json!({"jsonrpc": "2.0", "id": msg["id"], "error": {
                    "code": -32022, "message": "Unsupported protocol version",
                    "data": {"requested": msg["params"]["protocolVersion"],
                        "supported": ["2026-07-28"]}}});
                let _ = refusals.send(refusal.to_string());
                continue;
            }
            let line = format!("{line}\n");
            if to_rmcp.write_all(line.as_bytes()).await.is_err() {
                return;
            }
        }
        // stdin closed: rmcp's input ends too (the halves share one pipe,
        // so dropping this one alone would not close it).
        let _ = to_rmcp.shutdown().await;
    });
    tokio::spawn(async move {
        let mut out = BufReader::new(from_rmcp).lines();
        while let Ok(Some(line)) = out.next_line().await {
            if lines.send(line).is_err() {
                return;
            }
        }
    });
    tokio::io::split(theirs)
}
