//! `xy-test-flood`: writes many fixed-size lines to stdout and reports its
//! own write time on stderr; the benchmarks compare that time under xy's log
//! pumps with a plain `cat > file`. Three shapes: numbered lines as fast as
//! it can (the loss check), one constant line with no per-line work (a child
//! faster than any pump), or a steady rate (the soak and fairness benches).

use std::io::Write;
use std::os::fd::AsFd;
use std::time::{Duration, Instant, SystemTime};

use xy_testbins::args::Args;
use xy_testbins::out::{err, out};
use xy_testbins::sys;

const USAGE: &str = "xy-test-flood [--lines N] [--bytes M] [--constant] [--rate LINES_PER_SEC [--stamp]] [--then-sleep]";

fn main() {
    let mut args = Args::from_env(USAGE);
    let mut lines: u64 = 1_000_000;
    let mut bytes: usize = 100;
    let mut constant = false;
    let mut rate: Option<u64> = None;
    let mut stamp = false;
    let mut then_sleep = false;
    while let Some(flag) = args.next_flag() {
        match flag.as_str() {
            "--lines" => lines = args.value(&flag),
            "--bytes" => bytes = args.value(&flag),
            "--constant" => constant = true,
            "--rate" => rate = Some(args.value(&flag)),
            "--stamp" => stamp = true,
            "--then-sleep" => then_sleep = true,
            _ => args.unknown(&flag),
        }
    }
    if bytes == 0 {
        args.fail("--bytes must be >= 1 (it counts the newline)");
    }
    if rate == Some(0) {
        args.fail("--rate must be >= 1");
    }
    if stamp && rate.is_none() {
        args.fail("--stamp needs --rate");
    }
    let sigterm = sys::block_sigterm();

    let started = Instant::now();
    let result = match rate {
        Some(rate) => paced(lines, bytes, rate, stamp),
        None if constant => flood_constant(lines, bytes),
        None => flood(lines, bytes),
    };
    if let Err(e) = result {
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

/// fd 1 as a `File`: a dup skips std's line-buffered `Stdout`, which would
/// otherwise split a large buffer at newlines.
fn stdout_file() -> std::io::Result<std::fs::File> {
    Ok(std::fs::File::from(
        std::io::stdout().as_fd().try_clone_to_owned()?,
    ))
}

/// `line 0000001 xxxx…`, exactly `bytes` long with its `\n` (the prefix cut
/// short if `bytes` is tiny).
fn numbered(line: &mut Vec<u8>, n: u64, bytes: usize) {
    line.clear();
    let _ = write!(line, "line {n:07} ");
    line.resize(bytes - 1, b'x');
    line.push(b'\n');
}

/// Numbered lines, as fast as it can (the loss check reads the numbers).
fn flood(lines: u64, bytes: usize) -> std::io::Result<()> {
    let mut writer = std::io::BufWriter::with_capacity(1 << 20, stdout_file()?);
    let mut line = Vec::with_capacity(bytes.max(32));
    for n in 1..=lines {
        numbered(&mut line, n, bytes);
        writer.write_all(&line)?;
    }
    writer.flush()
}

/// One constant line, copied into a 64 KiB buffer per line: a C program's
/// `fputs` loop through stdio, with nothing to format.
fn flood_constant(lines: u64, bytes: usize) -> std::io::Result<()> {
    let mut writer = std::io::BufWriter::with_capacity(64 * 1024, stdout_file()?);
    let mut line = vec![b'x'; bytes];
    line[bytes - 1] = b'\n';
    for _ in 0..lines {
        writer.write_all(&line)?;
    }
    writer.flush()
}

/// `rate` numbered lines a second, written in 10 ms steps and flushed after
/// each step. With `stamp` each line starts with `t=<µs since the epoch> `
/// taken just before it is written, so a reader can measure how late it saw
/// it. The step catches up after a stall rather than drifting.
fn paced(lines: u64, bytes: usize, rate: u64, stamp: bool) -> std::io::Result<()> {
    let mut writer = std::io::BufWriter::with_capacity(64 * 1024, stdout_file()?);
    let mut line = Vec::with_capacity(bytes.max(64));
    let step = Duration::from_millis(10);
    let start = Instant::now();
    let mut written = 0u64;
    let mut tick = 0u32;
    while written < lines {
        tick += 1;
        let due = (rate * u64::from(tick) / 100).min(lines);
        while written < due {
            written += 1;
            numbered(&mut line, written, bytes);
            if stamp {
                let us = SystemTime::now()
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_micros();
                let mut stamped = format!("t={us} ").into_bytes();
                stamped.extend_from_slice(&line);
                writer.write_all(&stamped)?;
            } else {
                writer.write_all(&line)?;
            }
        }
        writer.flush()?;
        if let Some(wait) = (start + step * tick).checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    Ok(())
}
