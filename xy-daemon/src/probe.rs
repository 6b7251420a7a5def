//! `xyd --sandbox-probe`: the hidden mode `sandbox_test` runs confined
//! (SPEC §21). Reads a JSON list of probes on stdin, runs them, runs itself
//! once more as a grandchild (`--grandchild`) with the same list, and
//! prints every result as one JSON array on stdout, the grandchild's named
//! `grandchild: …`. Never started by hand; takes no lock and opens no log.

use std::io::{Read, Write};
use std::process::{Command, ExitCode, Stdio};

use xy_core::protocol::{ProbeOutcome, ProbeResult};
use xy_core::sandbox::probe::Probe;

/// Whether `args` (without the program name) ask for the probe mode, and
/// as the grandchild.
pub fn requested(args: &[std::ffi::OsString]) -> Option<bool> {
    (args.first()? == "--sandbox-probe").then(|| args.get(1).is_some_and(|a| a == "--grandchild"))
}

fn grandchild(input: &[u8]) -> Vec<ProbeResult> {
    let failed = |detail: String| {
        vec![ProbeResult {
            probe: "grandchild".to_owned(),
            outcome: ProbeOutcome::Skipped,
            detail,
        }]
    };
    let me = match std::env::current_exe() {
        Ok(me) => me,
        Err(e) => return failed(e.to_string()),
    };
    let child = Command::new(me)
        .args(["--sandbox-probe", "--grandchild"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        // A sandbox that refuses to run xyd again blocks the grandchild.
        Err(e) => return failed(format!("could not start: {e}")),
    };
    if let Some(mut i) = child.stdin.take() {
        let _ = i.write_all(input);
    }
    let mut out = Vec::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_end(&mut out);
    }
    let _ = child.wait();
    match serde_json::from_slice::<Vec<ProbeResult>>(&out) {
        Ok(results) => results
            .into_iter()
            .map(|mut r| {
                r.probe = format!("grandchild: {}", r.probe);
                r
            })
            .collect(),
        Err(e) => failed(format!("no answer: {e}")),
    }
}

/// Runs the probe mode; the exit code is 0 unless stdin is not a probe list.
pub fn main(is_grandchild: bool) -> ExitCode {
    let mut input = Vec::new();
    if std::io::stdin().read_to_end(&mut input).is_err() {
        return ExitCode::from(2);
    }
    let Ok(probes) = serde_json::from_slice::<Vec<Probe>>(&input) else {
        return ExitCode::from(2);
    };
    let mut results: Vec<ProbeResult> = probes.iter().map(Probe::run).collect();
    if !is_grandchild {
        results.extend(grandchild(&input));
    }
    let mut out = std::io::stdout().lock();
    match serde_json::to_writer(&mut out, &results) {
        Ok(()) if out.flush().is_ok() => ExitCode::SUCCESS,
        _ => ExitCode::from(1),
    }
}
