//! `xy-test-post --port N`: sends the bytes of stdin to `127.0.0.1:N` as
//! they are (a whole HTTP request), then copies everything the server
//! sends to stdout until it closes (or 15 s pass). A client the edge tests
//! run under another uid, where the test process itself cannot go.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use xy_testbins::args::Args;

const USAGE: &str = "xy-test-post --port N < request";

fn main() {
    let mut args = Args::from_env(USAGE);
    let mut port: u16 = 0;
    while let Some(flag) = args.next_flag() {
        match flag.as_str() {
            "--port" => port = args.value(&flag),
            _ => args.unknown(&flag),
        }
    }
    if port == 0 {
        args.fail("--port is required");
    }
    let mut request = Vec::new();
    std::io::stdin()
        .read_to_end(&mut request)
        .expect("read stdin");
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap_or_else(|e| {
        xy_testbins::out::err(&format!("connect: {e}"));
        std::process::exit(2);
    });
    s.set_read_timeout(Some(Duration::from_secs(15)))
        .expect("set timeout");
    // The server may answer and close before the whole request is written.
    let _ = s.write_all(&request);
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    std::io::stdout().write_all(&answer).expect("write stdout");
}
