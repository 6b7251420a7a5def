//! The plain child programs: sleep, exit, ignore-term, fork and flood.

use std::os::unix::process::{CommandExt, ExitStatusExt};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::{Pid, getpgid};

use crate::helper::{DEADLINE, Proc, alive, temp_path, wait_for};

const SLEEP: &str = env!("CARGO_BIN_EXE_xy-test-sleep");
const EXIT: &str = env!("CARGO_BIN_EXE_xy-test-exit");
const IGNORE_TERM: &str = env!("CARGO_BIN_EXE_xy-test-ignore-term");
const FORK: &str = env!("CARGO_BIN_EXE_xy-test-fork");
const FLOOD: &str = env!("CARGO_BIN_EXE_xy-test-flood");

#[test]
fn sleep_reports_env_cwd_args_ticks_and_exits_0_on_sigterm() {
    let cwd = std::env::temp_dir().canonicalize().unwrap();
    let args = [
        "--interval-ms",
        "10",
        "--print-env",
        "XY_T_SET",
        "--print-env",
        "XY_T_UNSET",
        "--print-cwd",
        "--print-args",
        "--",
        "a b",
    ];
    let mut p = Proc::spawn(SLEEP, &args, |cmd| {
        cmd.env("XY_T_SET", "v=1")
            .env_remove("XY_T_UNSET")
            .current_dir(&cwd);
    });
    let started = p.stderr_line(|l| l.starts_with("sleep server started"));
    assert_eq!(started, format!("sleep server started pid={}", p.pid()));
    assert_eq!(p.stdout_line(|_| true), "XY_T_SET=v=1");
    assert_eq!(p.stdout_line(|_| true), "XY_T_UNSET is unset");
    assert_eq!(p.stdout_line(|_| true), format!("cwd={}", cwd.display()));
    let printed = p.stdout_line(|_| true);
    let json: serde_json::Value =
        serde_json::from_str(printed.strip_prefix("args=").unwrap()).unwrap();
    assert_eq!(json, serde_json::json!(args));
    assert_eq!(p.stdout_line(|_| true), "tick 1");
    assert_eq!(p.stdout_line(|_| true), "tick 2");

    p.signal(Signal::SIGTERM);
    p.stdout_line(|l| l == "got SIGTERM, exiting");
    assert_eq!(p.wait_exit().code(), Some(0));
}

#[test]
fn sleep_exits_on_its_own_with_the_given_code() {
    let mut p = Proc::spawn(
        SLEEP,
        &["--exit-after-ms", "20", "--exit-code", "3"],
        |_| {},
    );
    p.stderr_line(|l| l.starts_with("exiting after 20 ms with code 3"));
    assert_eq!(p.wait_exit().code(), Some(3));
}

#[cfg(target_os = "linux")]
#[test]
fn sleep_allocate_mb_is_resident() {
    let p = Proc::spawn(SLEEP, &["--allocate-mb", "32"], |_| {});
    p.stderr_line(|l| l == "allocated 32 MiB");
    let status = std::fs::read_to_string(format!("/proc/{}/status", p.pid())).unwrap();
    let rss_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    assert!(rss_kb >= 32 * 1024, "VmRSS {rss_kb} kB");
}

#[test]
fn bad_arguments_exit_2_with_usage() {
    for (bin, args) in [
        (SLEEP, &["--nope"][..]),
        (EXIT, &["--code", "x"][..]),
        (EXIT, &["--signal", "SIGNOPE"][..]),
        (IGNORE_TERM, &["extra"][..]),
        (FLOOD, &["--lines"][..]),
    ] {
        let mut p = Proc::spawn(bin, args, |_| {});
        p.stderr_line(|l| l.starts_with("usage: xy-test-"));
        assert_eq!(p.wait_exit().code(), Some(2), "{bin} {args:?}");
    }
}

#[test]
fn exit_with_code_or_signal() {
    let mut p = Proc::spawn(EXIT, &["--code", "7"], |_| {});
    p.stderr_line(|l| l == "exiting with code 7");
    assert_eq!(p.wait_exit().code(), Some(7));

    let mut p = Proc::spawn(EXIT, &[], |_| {});
    assert_eq!(p.wait_exit().code(), Some(1));

    for (name, signal) in [("SIGSEGV", Signal::SIGSEGV), ("kill", Signal::SIGKILL)] {
        let mut p = Proc::spawn(EXIT, &["--signal", name], |_| {});
        assert_eq!(p.wait_exit().signal(), Some(signal as i32), "{name}");
    }
}

#[test]
fn ignore_term_survives_sigterm_and_dies_on_sigkill() {
    let mut p = Proc::spawn(IGNORE_TERM, &[], |_| {});
    let line = p.stdout_line(|_| true);
    assert_eq!(line, format!("ignoring SIGTERM pid={}", p.pid()));
    p.signal(Signal::SIGTERM);
    // A SIGTERM with its default action would be the exit signal: seeing
    // SIGKILL as the cause proves the SIGTERM was survived.
    p.signal(Signal::SIGKILL);
    assert_eq!(p.wait_exit().signal(), Some(Signal::SIGKILL as i32));
}

fn read_pidfile(path: &std::path::Path) -> Pid {
    let pid = xy_testbins::wait::wait_some("pidfile", DEADLINE, || {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|s| s.trim().parse().ok())
    });
    Pid::from_raw(pid)
}

#[cfg(target_os = "linux")]
fn ignores_sigterm(pid: Pid) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let mask = status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .map(|v| u64::from_str_radix(v.trim(), 16).unwrap())
        .unwrap();
    mask & (1 << (Signal::SIGTERM as u32 - 1)) != 0
}

#[test]
fn fork_leaves_a_sigterm_ignoring_grandchild_in_the_group() {
    let pidfile = temp_path("fork.pid");
    let mut p = Proc::spawn(FORK, &["--pidfile", pidfile.to_str().unwrap()], |cmd| {
        cmd.process_group(0);
    });
    let group = p.pid();
    let grandchild = read_pidfile(&pidfile);
    let lines = [p.stdout_line(|_| true), p.stdout_line(|_| true)];
    assert!(lines.contains(&format!("parent pid={group}")), "{lines:?}");
    assert!(
        lines.contains(&format!("grandchild pid={grandchild}")),
        "{lines:?}"
    );
    assert!(alive(grandchild));
    assert_eq!(getpgid(Some(grandchild)).unwrap(), group);
    #[cfg(target_os = "linux")]
    assert!(ignores_sigterm(grandchild));

    killpg(group, Signal::SIGTERM).unwrap();
    p.stdout_line(|l| l == "got SIGTERM, exiting");
    assert_eq!(p.wait_exit().code(), Some(0));
    assert!(alive(grandchild), "grandchild must outlive SIGTERM");

    killpg(group, Signal::SIGKILL).unwrap();
    wait_for("grandchild death", DEADLINE, || !alive(grandchild));
}

#[test]
fn fork_parent_exits_on_its_own() {
    let pidfile = temp_path("fork-exit.pid");
    let args = [
        "--parent-exit-ms",
        "10",
        "--pidfile",
        pidfile.to_str().unwrap(),
    ];
    let mut p = Proc::spawn(FORK, &args, |cmd| {
        cmd.process_group(0);
    });
    let group = p.pid();
    let grandchild = read_pidfile(&pidfile);
    p.stdout_line(|l| l == "parent exiting after 10 ms");
    assert_eq!(p.wait_exit().code(), Some(0));
    assert!(alive(grandchild));
    killpg(group, Signal::SIGKILL).unwrap();
    wait_for("grandchild death", DEADLINE, || !alive(grandchild));
}

#[test]
fn flood_writes_exact_lines() {
    let mut p = Proc::spawn(FLOOD, &["--lines", "2000", "--bytes", "40"], |_| {});
    let lines = p.stdout_to_end();
    assert_eq!(lines.len(), 2000);
    assert!(
        lines.iter().all(|l| l.len() == 39),
        "each line is 40 bytes with its newline"
    );
    assert_eq!(lines[0], format!("line 0000001 {}", "x".repeat(26)));
    assert!(lines[1999].starts_with("line 0002000 x"));
    p.stderr_line(|l| l.starts_with("wrote 2000 lines in ") && l.ends_with(" ms"));
    assert_eq!(p.wait_exit().code(), Some(0));
}

#[test]
fn flood_then_sleep_waits_for_sigterm() {
    let mut p = Proc::spawn(FLOOD, &["--lines", "3", "--then-sleep"], |_| {});
    p.stderr_line(|l| l.starts_with("wrote 3 lines in "));
    assert_eq!(p.child.try_wait().unwrap(), None);
    p.signal(Signal::SIGTERM);
    p.stdout_line(|l| l == "got SIGTERM, exiting");
    assert_eq!(p.wait_exit().code(), Some(0));
}
