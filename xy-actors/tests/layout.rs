//! The layout is written down where a reader looks for it: every module of
//! this crate is named in `lib.rs`'s `# Layout`, and every source file of
//! every workspace crate has a row in `docs/architecture.md`'s file map.

use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the crate sits in the workspace")
        .to_path_buf()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_module_is_named_in_the_crate_layout() {
    let lib = std::fs::read_to_string(workspace().join("xy-actors/src/lib.rs")).unwrap();
    let layout: String = lib
        .lines()
        .skip_while(|l| !l.starts_with("//! # Layout"))
        .take_while(|l| l.starts_with("//!"))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(!layout.is_empty(), "lib.rs has no `# Layout` section");
    let missing: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("mod ")?.strip_suffix(';'))
        .filter(|m| !layout.contains(&format!("`{m}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "modules not named in lib.rs's # Layout: {missing:?}"
    );
}

#[test]
fn every_source_file_has_a_row_in_the_architecture_file_map() {
    let root = workspace();
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let map: String = doc
        .lines()
        .skip_while(|l| !l.starts_with("## File map"))
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(!map.is_empty(), "docs/architecture.md has no `## File map`");
    let mut missing = Vec::new();
    for krate in ["xy-core", "xy-actors", "xy-daemon", "xy-cli", "xy-testbins"] {
        let mut files = Vec::new();
        rust_files(&root.join(krate).join("src"), &mut files);
        for f in files {
            let rel = f
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if !map.contains(&format!("`{rel}`")) {
                missing.push(rel);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "source files without a row in docs/architecture.md's file map:\n{}",
        missing.join("\n")
    );
}
