//! `xy-test-mcp`: a minimal but real HTTP MCP server (streamable HTTP, JSON or
//! SSE answers, sessions, one `echo` tool) for xy's tests, health probes and
//! the README example. Logs one line per request to stdout; exits 0 on SIGTERM.

use std::net::TcpListener;
use std::time::Duration;

use xy_testbins::args::Args;
use xy_testbins::mcp::{Options, Server};
use xy_testbins::out::{err, out};
use xy_testbins::sys;

const USAGE: &str = "xy-test-mcp --port N [--host ADDR] [--path /mcp] [--hang] [--stateless] \
[--bind-delay-ms N] [--fail-bind-exit]";

fn main() {
    let mut args = Args::from_env(USAGE);
    let mut host = "127.0.0.1".to_owned();
    let mut port: Option<u16> = None;
    let mut bind_delay_ms: u64 = 0;
    let mut opts = Options {
        path: "/mcp".to_owned(),
        hang: false,
        stateless: false,
    };
    while let Some(flag) = args.next_flag() {
        match flag.as_str() {
            "--port" => port = Some(args.value(&flag)),
            "--host" => host = args.value(&flag),
            "--path" => opts.path = args.value(&flag),
            "--hang" => opts.hang = true,
            "--stateless" => opts.stateless = true,
            "--bind-delay-ms" => bind_delay_ms = args.value(&flag),
            // Exiting 1 on a taken port is the default; the flag documents intent.
            "--fail-bind-exit" => {}
            _ => args.unknown(&flag),
        }
    }
    let Some(port) = port else {
        args.fail("--port is required (0 picks a free port)");
    };
    if !opts.path.starts_with('/') {
        args.fail("--path must start with /");
    }

    let sigterm = sys::block_sigterm();
    // Lets tests see a child that is running but not yet listening.
    std::thread::sleep(Duration::from_millis(bind_delay_ms));
    let listener = match TcpListener::bind((host.as_str(), port)) {
        Ok(listener) => listener,
        Err(e) => {
            err(&format!("xy-test-mcp: cannot bind {host}:{port}: {e}"));
            std::process::exit(1);
        }
    };
    let addr = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| format!("{host}:{port}"));
    err(&format!("xy-test-mcp listening on {addr}"));

    let server = Server::new(opts);
    std::thread::spawn(move || server.serve(listener));
    sys::wait_sigterm(&sigterm);
    out("got SIGTERM, exiting");
    std::process::exit(0);
}
