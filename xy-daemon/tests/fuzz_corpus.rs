//! Replays the fuzz seeds and every input the fuzzers found a bug with
//! (`fuzz/corpus/<target>/`, `fuzz/regressions/<target>/`) through the same
//! checks the cargo-fuzz targets run, on stable, in the default suite.
// The figures and skips are reported on stderr (`--no-capture`).
#![allow(clippy::print_stderr)]

use std::path::PathBuf;

#[path = "../../fuzz/harness.rs"]
#[allow(dead_code, unreachable_pub)]
mod harness;

fn inputs(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let mut all = Vec::new();
    for kind in ["corpus", "regressions"] {
        let Ok(dir) = std::fs::read_dir(root.join(kind).join(target)) else {
            continue;
        };
        for e in dir.flatten() {
            if e.path().is_file() {
                all.push((e.path(), std::fs::read(e.path()).unwrap()));
            }
        }
    }
    all.sort();
    assert!(
        !all.is_empty(),
        "no inputs for {target} under {}",
        root.display()
    );
    all
}

#[test]
fn transport_fuzz_inputs_replay() {
    let t = harness::Transport::new();
    let inputs = inputs("transport");
    let mut replies = 0;
    for (path, data) in &inputs {
        eprintln!("replay {}", path.display());
        replies += t.run(data).len();
    }
    eprintln!(
        "[fuzz replay] transport: {} inputs, {replies} reply lines",
        inputs.len()
    );
    // The seeds hold real requests: a replay that answers nothing is broken.
    assert!(replies >= inputs.len());
}

#[test]
fn config_fuzz_inputs_replay() {
    let inputs = inputs("config");
    for (path, data) in &inputs {
        eprintln!("replay {}", path.display());
        harness::config(data);
    }
    eprintln!("[fuzz replay] config: {} inputs", inputs.len());
}
