//! The JavaScript parts of a Python install (SPEC §25, D290): a wheel that
//! ships a `package.json` with `dependencies`, and whose own code runs
//! `npm`, installs those dependencies into its own directory at its first
//! call (`readabilipy`, under `mcp-server-fetch`, runs `npm install` in
//! `site-packages/readabilipy/javascript/`). A pinned install's venv is
//! read-only to the server, so that step fails there. The install does it
//! instead, before the venv is renamed into place, by npm's rules of `add
//! --npm`: `--ignore-scripts` unless `--allow-scripts`, every dependency
//! published before the `min-age` cutoff (`--before`), a
//! `package-lock.json` beside the `package.json` with an integrity hash
//! for every package (else the install is refused), and on a reinstall of
//! the same version `npm ci` from the earlier install's lockfile. The
//! package's `node_modules` then exists, so its own code finds its
//! dependencies and runs no `npm` at all.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{Cutoff, npm, program, run};
use crate::cli::InstallFlags;
use crate::error::{Exit, Failure};

/// Directory entries visited per install: a venv's site-packages is
/// thousands of files; the walk stays bounded on a pathological one.
const MAX_ENTRIES: usize = 200_000;

/// Bytes read of a `.py` file when looking for an `npm` run.
const MAX_PY_BYTES: u64 = 1 << 20;

/// A `package.json` inside the venv whose dependencies the package would
/// install itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Part {
    /// Its directory, relative to the version directory
    /// (`venv/lib/python3.11/site-packages/readabilipy/javascript`).
    pub(crate) rel: PathBuf,
    /// The same, relative to site-packages (`readabilipy/javascript`), as
    /// the user is told.
    pub(crate) shown: String,
}

/// A part whose dependencies were installed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Done {
    pub(crate) part: Part,
    /// Packages in its lockfile.
    pub(crate) packages: usize,
    /// Its top-level dependencies as the lockfile pins them (`jsdom@29.1.1`).
    pub(crate) direct: Vec<String>,
    /// Packages whose install script `--ignore-scripts` skipped.
    pub(crate) skipped_scripts: Vec<String>,
}

/// The parts of the venv in `version_dir`: under each
/// `venv/lib/<python>/site-packages/<top>/`, a `package.json` (outside
/// `node_modules`) with at least one `dependencies` entry and no
/// `node_modules` beside it, where a `.py` file of the same `<top>` runs
/// `npm` (a quoted `npm` word: `["npm", "install"]`, `"npm ci"`). Without
/// that last test a wheel that ships a built bundle with its `package.json`
/// (a notebook extension) would get dependencies it never loads. Sorted.
pub(crate) fn find(version_dir: &Path) -> Vec<Part> {
    let mut out = Vec::new();
    let mut budget = MAX_ENTRIES;
    for site in site_packages(version_dir) {
        let Ok(tops) = std::fs::read_dir(&site) else {
            continue;
        };
        let mut tops: Vec<PathBuf> = tops.flatten().map(|e| e.path()).collect();
        tops.sort();
        for top in tops {
            let name = top.file_name().unwrap_or_default().to_string_lossy();
            if !is_real_dir(&top) || name.ends_with(".dist-info") || name == "__pycache__" {
                continue;
            }
            let mut manifests = Vec::new();
            let mut runs = false;
            walk(&top, &mut budget, &mut |path| {
                let file = path.file_name().unwrap_or_default();
                if file == "package.json" {
                    manifests.push(path.to_path_buf());
                } else if !runs && path.extension().is_some_and(|e| e == "py") {
                    runs = runs_npm(&read_head(path));
                }
            });
            if !runs {
                continue;
            }
            for m in manifests {
                let dir = m.parent().unwrap_or(&top);
                if dir.join("node_modules").exists() || !has_dependencies(&m) {
                    continue;
                }
                let (Ok(rel), Ok(shown)) = (dir.strip_prefix(version_dir), dir.strip_prefix(&site))
                else {
                    continue;
                };
                out.push(Part {
                    rel: rel.to_path_buf(),
                    shown: shown.display().to_string(),
                });
            }
        }
    }
    out.sort_by(|a, b| a.rel.cmp(&b.rel));
    out
}

/// `venv/lib/*/site-packages` of a version directory (`lib64` is a link
/// to `lib` in most venvs: not walked twice).
fn site_packages(version_dir: &Path) -> Vec<PathBuf> {
    let lib = version_dir.join("venv").join("lib");
    let Ok(entries) = std::fs::read_dir(&lib) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path().join("site-packages"))
        .filter(|p| p.is_dir())
        .collect();
    out.sort();
    out
}

fn is_real_dir(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir())
}

/// Calls `visit` for every file under `dir` (links not followed; no
/// `node_modules`, no `__pycache__`), while `budget` lasts.
fn walk(dir: &Path, budget: &mut usize, visit: &mut dyn FnMut(&Path)) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        if *budget == 0 {
            return;
        }
        *budget -= 1;
        let path = e.path();
        let Ok(kind) = e.file_type() else { continue };
        if kind.is_dir() {
            let name = e.file_name();
            if name != "node_modules" && name != "__pycache__" {
                walk(&path, budget, visit);
            }
        } else if kind.is_file() {
            visit(&path);
        }
    }
}

fn read_head(path: &Path) -> String {
    use std::io::Read;
    let mut s = Vec::new();
    if let Ok(f) = std::fs::File::open(path) {
        let _ = f.take(MAX_PY_BYTES).read_to_end(&mut s);
    }
    String::from_utf8_lossy(&s).into_owned()
}

/// Whether Python source runs `npm`: the word `npm` as a whole quoted
/// string or the first word of one (`"npm"`, `'npm'`, `"npm install"`).
fn runs_npm(source: &str) -> bool {
    let b = source.as_bytes();
    source.match_indices("npm").any(|(i, _)| {
        let before = i.checked_sub(1).map(|j| b[j]);
        let after = b.get(i + 3).copied();
        matches!(before, Some(b'"' | b'\'')) && matches!(after, Some(b'"' | b'\'' | b' '))
    })
}

/// Whether a `package.json` names at least one dependency (dev
/// dependencies are not installed: `--omit=dev`).
fn has_dependencies(manifest: &Path) -> bool {
    std::fs::read_to_string(manifest)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v.get("dependencies")?.as_object().map(|d| !d.is_empty()))
        .unwrap_or(false)
}

/// Installs the npm dependencies of every part of the venv being built in
/// `tmp`: `npm ci` from `previous`'s lockfile of the same part when this
/// version was installed before, else `npm install` resolved before the
/// cutoff. Fails (naming the part) when npm is missing, npm fails, the
/// lockfile pins a package without an integrity hash, or npm changed the
/// shipped `package.json`.
pub(crate) fn install(
    tmp: &Path,
    previous: Option<&Path>,
    flags: &InstallFlags,
    before: Option<&Cutoff>,
) -> Result<Vec<Done>, Failure> {
    let parts = find(tmp);
    if parts.is_empty() {
        return Ok(Vec::new());
    }
    let npm = program(
        "npm",
        &format!(
            "{} ships a package.json and its code runs npm to install its dependencies; \
             install Node.js with npm (https://nodejs.org) so they are installed with the package",
            parts[0].shown
        ),
    )?;
    parts
        .into_iter()
        .map(|p| install_part(&npm, tmp, previous, p, flags, before))
        .collect()
}

fn install_part(
    npm_bin: &Path,
    tmp: &Path,
    previous: Option<&Path>,
    part: Part,
    flags: &InstallFlags,
    before: Option<&Cutoff>,
) -> Result<Done, Failure> {
    let dir = tmp.join(&part.rel);
    let manifest = dir.join("package.json");
    let shipped = std::fs::read(&manifest).map_err(|e| {
        Failure::new(
            Exit::Operational,
            format!("cannot read {}: {e}", manifest.display()),
        )
    })?;
    let lock_path = dir.join(npm::LOCKFILE);
    let old_lock = previous
        .map(|p| p.join(&part.rel))
        .filter(|d| std::fs::read(d.join("package.json")).is_ok_and(|t| t == shipped))
        .map(|d| d.join(npm::LOCKFILE))
        .filter(|l| l.is_file());
    let mut cmd = Command::new(npm_bin);
    cmd.env("npm_config_update_notifier", "false")
        .current_dir(&dir);
    let what = format!(
        "the npm dependencies of {} (a package.json its wheel ships)",
        part.shown
    );
    if let Some(old) = old_lock {
        std::fs::copy(&old, &lock_path).map_err(|e| {
            Failure::new(
                Exit::Operational,
                format!("cannot copy {}: {e}", old.display()),
            )
        })?;
        cmd.arg("ci");
    } else {
        cmd.arg("install");
        if let Some(c) = before {
            cmd.arg("--before").arg(xy_core::time::rfc3339_ms(c.at));
        }
    }
    cmd.arg("--prefix")
        .arg(&dir)
        .args(["--omit=dev", "--no-audit", "--no-fund"]);
    if !flags.allow_scripts {
        cmd.arg("--ignore-scripts");
    }
    run(&mut cmd, &format!("`npm install` of {what}")).map_err(|f| {
        match (before, npm::too_new_dependency(&f)) {
            (Some(c), Some(dep)) => c
                .too_new(&format!("{dep} of {}", part.shown), None)
                .with_detail(f.detail.unwrap_or_default()),
            _ => f,
        }
    })?;
    // npm never rewrites a manifest it only installs from; a package's
    // own file changed under it would be a different package.
    if std::fs::read(&manifest).ok().as_deref() != Some(&shipped[..]) {
        return Err(Failure::new(
            Exit::Operational,
            format!(
                "npm changed {} while installing {what}; nothing was installed",
                manifest.display()
            ),
        ));
    }
    let lock = std::fs::read_to_string(&lock_path).map_err(|e| {
        Failure::new(
            Exit::Operational,
            format!("npm wrote no {} for {what}: {e}", npm::LOCKFILE),
        )
    })?;
    let unpinned = npm::unpinned(&lock).map_err(|e| {
        Failure::new(
            Exit::Operational,
            format!("cannot read {}: {e}", lock_path.display()),
        )
    })?;
    if !unpinned.is_empty() {
        return Err(Failure::new(
            Exit::Operational,
            format!(
                "{} pins {} without an integrity hash; nothing was installed",
                lock_path.display(),
                unpinned.join(", ")
            ),
        ));
    }
    let (packages, direct) = summary(&lock);
    Ok(Done {
        part,
        packages,
        direct,
        skipped_scripts: if flags.allow_scripts {
            Vec::new()
        } else {
            npm::with_install_scripts(&lock)
        },
    })
}

/// How many packages a lockfile installs, and its root's dependencies as
/// `name@version`.
fn summary(lock: &str) -> (usize, Vec<String>) {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(lock) else {
        return (0, Vec::new());
    };
    let Some(packages) = v.get("packages").and_then(|p| p.as_object()) else {
        return (0, Vec::new());
    };
    let count = packages.keys().filter(|k| !k.is_empty()).count();
    let mut direct: Vec<String> = packages
        .get("")
        .and_then(|root| root.get("dependencies")?.as_object())
        .map(|deps| {
            deps.keys()
                .map(|name| {
                    let version = packages
                        .get(&format!("node_modules/{name}"))
                        .and_then(|p| p.get("version")?.as_str())
                        .unwrap_or("?");
                    format!("{name}@{version}")
                })
                .collect()
        })
        .unwrap_or_default();
    direct.sort();
    (count, direct)
}

/// What the user is told after the install, one line per part.
pub(crate) fn told(d: &Done) -> String {
    format!(
        "{}: its npm dependencies installed with the package ({}; {} package{}, {} with an \
         integrity hash each): its code runs npm into its own directory at its first call, \
         which is read-only to the server",
        d.part.shown,
        d.direct.join(", "),
        d.packages,
        if d.packages == 1 { "" } else { "s" },
        npm::LOCKFILE
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quoted_npm_word_is_an_npm_run() {
        assert!(runs_npm(
            r#"cp = subprocess.run(["npm", "install"], check=True)"#
        ));
        assert!(runs_npm("os.system('npm ci')"));
        assert!(runs_npm("cmd = 'npm'"));
        assert!(!runs_npm("# run npm install by hand"));
        assert!(!runs_npm(r#"x = "pnpm""#));
        assert!(!runs_npm(r#"x = "npmrc""#));
        assert!(!runs_npm(""));
    }

    fn write(p: &Path, text: &str) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn parts_are_package_jsons_of_packages_that_run_npm() {
        let d = tempfile::tempdir().unwrap();
        let site = d.path().join("venv/lib/python3.11/site-packages");
        let deps = r#"{"name":"x","dependencies":{"jsdom":">=12"}}"#;
        // readabilipy's shape: it runs npm, its package.json has deps.
        write(
            &site.join("readabilipy/utils.py"),
            r#"subprocess.run(["npm", "install"])"#,
        );
        write(&site.join("readabilipy/javascript/package.json"), deps);
        // A bundle that ships its manifest and never runs npm.
        write(&site.join("widget/__init__.py"), "import json\n");
        write(&site.join("widget/static/package.json"), deps);
        // Runs npm, but nothing to install, or already installed.
        write(&site.join("tool/run.py"), "subprocess.run(['npm', 'ci'])");
        write(&site.join("tool/a/package.json"), r#"{"dependencies":{}}"#);
        write(&site.join("tool/b/package.json"), deps);
        std::fs::create_dir_all(site.join("tool/b/node_modules")).unwrap();
        write(&site.join("tool/c/node_modules/dep/package.json"), deps);
        write(&site.join("tool-1.0.dist-info/package.json"), deps);
        assert_eq!(
            find(d.path()),
            [Part {
                rel: PathBuf::from("venv/lib/python3.11/site-packages/readabilipy/javascript"),
                shown: "readabilipy/javascript".into(),
            }]
        );
        assert!(find(&d.path().join("none")).is_empty());
    }

    #[test]
    fn a_lockfile_is_summed_up() {
        let lock = r#"{"lockfileVersion":3,"packages":{
            "":{"name":"ReadabiliPy","dependencies":{"jsdom":">=12.2.0","minimist":"^1.2.3"}},
            "node_modules/jsdom":{"version":"29.1.1","integrity":"sha512-a"},
            "node_modules/minimist":{"version":"1.2.8","integrity":"sha512-b"},
            "node_modules/tough-cookie":{"version":"6.0.0","integrity":"sha512-c"}}}"#;
        assert_eq!(
            summary(lock),
            (3, vec!["jsdom@29.1.1".into(), "minimist@1.2.8".into()])
        );
        assert_eq!(summary("{"), (0, Vec::new()));
    }
}
