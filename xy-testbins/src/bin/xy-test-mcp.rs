//! `xy-test-mcp`: the test MCP server of `xy_testbins::mcp` (built on rmcp)
//! over streamable HTTP or stdio, for xy's tests, health probes and the
//! README example. Flags: see the `xy_testbins::mcp` docs or `--help`.

use std::sync::Arc;
use std::time::Duration;

use rmcp::ServiceExt;
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
        let server = match TestServer::new(Arc::clone(&opts))
            .serve(rmcp::transport::stdio())
            .await
        {
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
