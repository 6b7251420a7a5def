//! `xy-test-sleep`: a well-behaved long-running child. Prints `tick N` every
//! interval, exits 0 on SIGTERM, and can report its env, cwd and args, exit on
//! its own after a delay, or hold some memory (for RSS figures).

use std::time::Duration;

use xy_testbins::args::Args;
use xy_testbins::out::{err, out};
use xy_testbins::sys;

const USAGE: &str = "xy-test-sleep [--interval-ms N] [--exit-after-ms N] [--exit-code C] \
[--print-env VAR]... [--print-cwd] [--print-args] [--allocate-mb N] [-- ARGS...]";

fn main() {
    let mut args = Args::from_env(USAGE);
    let mut interval_ms: u64 = 500;
    let mut exit_after_ms: Option<u64> = None;
    let mut exit_code: i32 = 0;
    let mut print_env: Vec<String> = Vec::new();
    let mut print_cwd = false;
    let mut print_args = false;
    let mut allocate_mb: usize = 0;
    while let Some(flag) = args.next_flag() {
        match flag.as_str() {
            "--interval-ms" => interval_ms = args.value(&flag),
            "--exit-after-ms" => exit_after_ms = Some(args.value(&flag)),
            "--exit-code" => exit_code = args.value(&flag),
            "--print-env" => print_env.push(args.value(&flag)),
            "--print-cwd" => print_cwd = true,
            "--print-args" => print_args = true,
            "--allocate-mb" => allocate_mb = args.value(&flag),
            _ => args.unknown(&flag),
        }
    }
    if interval_ms == 0 {
        args.fail("--interval-ms must be > 0");
    }

    let sigterm = sys::block_sigterm();
    err(&format!("sleep server started pid={}", std::process::id()));

    for var in &print_env {
        match std::env::var_os(var) {
            Some(value) => out(&format!("{var}={}", value.to_string_lossy())),
            None => out(&format!("{var} is unset")),
        }
    }
    if print_cwd {
        let cwd = std::env::current_dir()
            .map(|dir| dir.display().to_string())
            .unwrap_or_else(|e| format!("<error: {e}>"));
        out(&format!("cwd={cwd}"));
    }
    if print_args {
        let all: Vec<String> = std::env::args().skip(1).collect();
        out(&format!("args={}", serde_json::Value::from(all)));
    }

    // Kept alive until exit; every page is written so it counts in RSS.
    let memory = allocate(allocate_mb);
    if allocate_mb > 0 {
        err(&format!("allocated {allocate_mb} MiB"));
    }

    if let Some(ms) = exit_after_ms {
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(ms));
            err(&format!("exiting after {ms} ms with code {exit_code}"));
            std::process::exit(exit_code);
        });
    }
    std::thread::spawn(move || {
        for n in 1u64.. {
            std::thread::sleep(Duration::from_millis(interval_ms));
            out(&format!("tick {n}"));
        }
    });

    sys::wait_sigterm(&sigterm);
    out("got SIGTERM, exiting");
    std::hint::black_box(&memory);
    std::process::exit(0);
}

fn allocate(mb: usize) -> Vec<u8> {
    let mut memory = vec![0u8; mb * 1024 * 1024];
    // Non-zero writes: a zeroed allocation may be lazily mapped and not resident.
    for byte in memory.iter_mut().step_by(4096) {
        *byte = 1;
    }
    std::hint::black_box(memory)
}
