//! `xy-test-exfil`: the exfiltration child of the sandbox tests (SPEC §21).
//! Runs the probes given as a JSON list (`xy_core::sandbox::probe::Probe`),
//! prints one JSON line per probe (`{"who":"child",…}`), then re-runs
//! itself as a grandchild that does the same (`"who":"grandchild"`) and
//! reports whether it can lift the confinement (`no_new_privs`, seccomp
//! mode from `/proc/self/status`), then stays alive. `--read-or-die PATH`
//! (`--mkdir-or-die PATH`) instead reads PATH (creates directory PATH)
//! and, refused, exits 1 with Node's error line on stderr (what the
//! denial recogniser reads).

use std::sync::{Arc, Mutex};

use serde_json::json;
use xy_core::sandbox::probe::Probe;
use xy_testbins::args::Args;
use xy_testbins::out::{Shared, err, send};
use xy_testbins::sys;

const USAGE: &str =
    "xy-test-exfil [--probes JSON] [--grandchild] [--read-or-die PATH] [--mkdir-or-die PATH]";

fn status_field(name: &str) -> String {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_owned()))
        .unwrap_or_default()
}

fn main() {
    let mut args = Args::from_env(USAGE);
    let mut probes = String::from("[]");
    let mut grandchild = false;
    let mut or_die: Option<(&str, String)> = None;
    while let Some(flag) = args.next_flag() {
        match flag.as_str() {
            "--probes" => probes = args.value(&flag),
            "--grandchild" => grandchild = true,
            "--read-or-die" => or_die = Some(("open", args.value(&flag))),
            "--mkdir-or-die" => or_die = Some(("mkdir", args.value(&flag))),
            _ => args.unknown(&flag),
        }
    }
    if let Some((op, path)) = or_die {
        let done = if op == "open" {
            std::fs::read(&path).map(drop)
        } else {
            std::fs::create_dir(&path)
        };
        if let Err(e) = done {
            let (code, what) = if e.kind() == std::io::ErrorKind::PermissionDenied {
                ("EACCES", "permission denied")
            } else {
                ("ENOENT", "no such file or directory")
            };
            err(&format!("Error: {code}: {what}, {op} '{path}'"));
            std::process::exit(1);
        }
        err(&format!("{op} {path} succeeded"));
        sys::sleep_forever();
    }
    let list: Vec<Probe> =
        serde_json::from_str(&probes).unwrap_or_else(|e| args.fail(&format!("--probes: {e}")));
    let out: Shared = Arc::new(Mutex::new(std::io::stdout()));
    let who = if grandchild { "grandchild" } else { "child" };
    for p in &list {
        let r = p.run();
        send(
            &out,
            &json!({"who": who, "probe": r.probe, "outcome": r.outcome, "detail": r.detail}),
        );
    }
    if grandchild {
        send(
            &out,
            &json!({
                "who": who,
                "no_new_privs": status_field("NoNewPrivs:"),
                "seccomp": status_field("Seccomp:"),
            }),
        );
        return;
    }
    let me = std::env::current_exe().unwrap_or_else(|e| args.fail(&e.to_string()));
    match std::process::Command::new(me)
        .args(["--grandchild", "--probes", &probes])
        .status()
    {
        Ok(s) => send(&out, &json!({"who": who, "grandchild_exit": s.code()})),
        Err(e) => send(
            &out,
            &json!({"who": who, "grandchild_error": e.to_string()}),
        ),
    }
    send(&out, &json!({"who": who, "done": true}));
    sys::sleep_forever();
}
