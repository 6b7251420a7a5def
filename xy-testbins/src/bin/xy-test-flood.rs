//! `xy-test-flood`: writes many fixed-size lines to stdout as fast as it can
//! and reports its own write time on stderr; the benchmarks compare that time
//! under xy's log pumps with a plain `cat > file`.

use std::io::Write;
use std::os::fd::AsFd;
use std::time::Instant;

use xy_testbins::args::Args;
use xy_testbins::out::{err, out};
use xy_testbins::sys;

const USAGE: &str = "xy-test-flood [--lines N] [--bytes M] [--then-sleep]";

fn main() {
    let mut args = Args::from_env(USAGE);
    let mut lines: u64 = 1_000_000;
    let mut bytes: usize = 100;
    let mut then_sleep = false;
    while let Some(flag) = args.next_flag() {
        match flag.as_str() {
            "--lines" => lines = args.value(&flag),
            "--bytes" => bytes = args.value(&flag),
            "--then-sleep" => then_sleep = true,
            _ => args.unknown(&flag),
        }
    }
    if bytes == 0 {
        args.fail("--bytes must be >= 1 (it counts the newline)");
    }
    let sigterm = sys::block_sigterm();

    let started = Instant::now();
    if let Err(e) = flood(lines, bytes) {
        err(&format!("write failed: {e}"));
        std::process::exit(1);
    }
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    err(&format!("wrote {lines} lines in {ms:.3} ms"));

    if then_sleep {
        sys::wait_sigterm(&sigterm);
        out("got SIGTERM, exiting");
    }
}

/// Each line is exactly `bytes` long including its `\n`:
/// `line 0000001 xxxx…`, the prefix cut short if `bytes` is tiny.
fn flood(lines: u64, bytes: usize) -> std::io::Result<()> {
    // A dup of fd 1 as a File skips std's line-buffered Stdout, which would
    // otherwise split the large buffer at newlines.
    let stdout = std::fs::File::from(std::io::stdout().as_fd().try_clone_to_owned()?);
    let mut writer = std::io::BufWriter::with_capacity(1 << 20, stdout);
    let mut line = Vec::with_capacity(bytes.max(32));
    for n in 1..=lines {
        line.clear();
        write!(line, "line {n:07} ")?;
        line.resize(bytes - 1, b'x');
        line.push(b'\n');
        writer.write_all(&line)?;
    }
    writer.flush()
}
