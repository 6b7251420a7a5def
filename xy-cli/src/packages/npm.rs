//! npm's steps of a pinned install: `npm view` for the exact version, its
//! publish time and its `bin`; the tree resolved before the plan, with its
//! install scripts named (D221); `npm ci` from that lockfile (or an
//! earlier install's) into the version directory; the check that
//! `package-lock.json` pins every dependency by integrity hash; the `node`
//! that runs the entry point.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;
use xy_core::package::{Ecosystem, PackageRef};

use super::{Built, Cutoff, Resolved, parse_rfc3339, program, run};
use crate::cli::InstallFlags;
use crate::error::{Exit, Failure};

/// The lockfile npm writes.
pub(crate) const LOCKFILE: &str = "package-lock.json";

const NO_NPM: &str = "install Node.js with npm (https://nodejs.org) to use --npm";

/// One version as `npm view <pkg>@<ver> version time bin --json` shows it.
#[derive(Debug, Deserialize)]
struct View {
    version: String,
    #[serde(default)]
    time: BTreeMap<String, String>,
    #[serde(default)]
    bin: Option<serde_json::Value>,
}

/// The exact version `want` (a version, range or tag; `latest` when
/// `None`) names.
pub(crate) fn resolve(name: &str, want: Option<&str>) -> Result<Resolved, Failure> {
    let npm = program("npm", NO_NPM)?;
    let spec = format!("{name}@{}", want.unwrap_or("latest"));
    let out = run(
        Command::new(npm)
            .args(["view", &spec, "version", "time", "bin", "--json"])
            .env("npm_config_update_notifier", "false"),
        &format!("`npm view {spec}`"),
    )?;
    let text = String::from_utf8_lossy(&out.stdout);
    let view = parse_view(&text).map_err(|e| {
        Failure::new(
            Exit::Operational,
            format!("cannot read `npm view {spec}`'s answer: {e}"),
        )
    })?;
    let view = view.ok_or_else(|| {
        Failure::new(
            Exit::Operational,
            format!(
                "no version of {name} matches {:?}",
                want.unwrap_or("latest")
            ),
        )
    })?;
    let pkg: PackageRef = format!("npm:{name}@{}", view.version).parse().map_err(
        |e: xy_core::package::PackageRefError| Failure::new(Exit::Operational, e.to_string()),
    )?;
    // Known before anything is installed: a package without a program is
    // refused here, not after the download.
    let bin = view
        .bin
        .as_ref()
        .ok_or_else(|| format!("{pkg} has no `bin`: there is no program to run"))
        .and_then(|b| pick_bin(name, b))
        .map_err(|e| Failure::new(Exit::Operational, e))?;
    Ok(Resolved {
        published: view.time.get(&pkg.version).and_then(|t| parse_rfc3339(t)),
        pkg,
        bin: Some(bin),
        tree: None,
    })
}

/// `npm view --json`'s answer: one object, or (a range matching several
/// versions) an array of them in ascending order, of which the newest
/// wins; empty when nothing matches.
fn parse_view(text: &str) -> Result<Option<View>, String> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let one = match v {
        serde_json::Value::Array(mut all) => match all.pop() {
            Some(last) => last,
            None => return Ok(None),
        },
        other => other,
    };
    serde_json::from_value(one)
        .map(Some)
        .map_err(|e| e.to_string())
}

/// The `bin` to run: the only one, else the one named like the package
/// (without its scope).
fn pick_bin(name: &str, bin: &serde_json::Value) -> Result<String, String> {
    let short = name.rsplit('/').next().unwrap_or(name);
    match bin {
        serde_json::Value::String(s) => Ok(s.clone()),
        serde_json::Value::Object(m) => {
            let paths: Vec<(&String, &str)> = m
                .iter()
                .filter_map(|(k, v)| Some((k, v.as_str()?)))
                .collect();
            match paths.as_slice() {
                [(_, p)] => Ok((*p).to_owned()),
                _ => paths
                    .iter()
                    .find(|(k, _)| *k == short)
                    .map(|(_, p)| (*p).to_owned())
                    .ok_or_else(|| {
                        format!(
                            "{name} has several programs ({}) and none is named {short}",
                            m.keys().cloned().collect::<Vec<_>>().join(", ")
                        )
                    }),
            }
        }
        _ => Err(format!("{name}'s `bin` is neither a path nor a map")),
    }
}

/// `<dir>/node_modules/<pkg>/<bin>`.
pub(crate) fn entry_path(dir: &Path, name: &str, bin: &str) -> PathBuf {
    let mut p = dir.join("node_modules").join(name);
    for part in bin.split('/').filter(|s| !s.is_empty() && *s != ".") {
        p.push(part);
    }
    p
}

/// The `node` npm runs with: the first on PATH, canonicalized so the
/// config survives a shim being re-pointed.
pub(crate) fn node() -> Result<PathBuf, Failure> {
    let node = program("node", NO_NPM)?;
    Ok(node.canonicalize().unwrap_or(node))
}

/// Installs `r` into `tmp`, which becomes `target`: `npm ci` from
/// `previous`'s lockfile when the same version was installed before, else
/// `npm install --save-exact`, every dependency resolved to a version
/// published before `before` (`--before`: min-age covers the whole tree;
/// a dependency with no such version is named). Scripts are off unless
/// `--allow-scripts`.
pub(crate) fn install(
    tmp: &Path,
    target: &Path,
    previous: Option<&Path>,
    r: &Resolved,
    flags: &InstallFlags,
    before: Option<&Cutoff>,
) -> Result<Built, Failure> {
    debug_assert_eq!(r.pkg.ecosystem, Ecosystem::Npm);
    let npm = program("npm", NO_NPM)?;
    let node = node()?;
    let mut cmd = Command::new(&npm);
    cmd.env("npm_config_update_notifier", "false");
    let reuse = previous
        .map(|p| (p.join("package.json"), p.join(LOCKFILE)))
        .filter(|(pj, lock)| pj.is_file() && lock.is_file());
    let what = if let Some((pj, lock)) = reuse {
        for (from, name) in [(pj, "package.json"), (lock, LOCKFILE)] {
            std::fs::copy(&from, tmp.join(name)).map_err(|e| {
                Failure::new(
                    Exit::Operational,
                    format!("cannot copy {}: {e}", from.display()),
                )
            })?;
        }
        cmd.arg("ci");
        "`npm ci`"
    } else {
        cmd.arg("install")
            .arg("--save-exact")
            .arg(format!("{}@{}", r.pkg.name, r.pkg.version));
        if let Some(c) = before {
            cmd.arg("--before").arg(xy_core::time::rfc3339_ms(c.at));
        }
        "`npm install`"
    };
    cmd.arg("--prefix")
        .arg(tmp)
        .args(["--no-audit", "--no-fund"]);
    if !flags.allow_scripts {
        cmd.arg("--ignore-scripts");
    }
    run(&mut cmd, what).map_err(|f| match (before, too_new_dependency(&f)) {
        (Some(c), Some(dep)) => c
            .too_new(&dep, None)
            .with_detail(f.detail.unwrap_or_default()),
        _ => f,
    })?;
    let lock = std::fs::read_to_string(tmp.join(LOCKFILE)).map_err(|e| {
        Failure::new(
            Exit::Operational,
            format!("npm wrote no {LOCKFILE} in {}: {e}", tmp.display()),
        )
    })?;
    let unpinned = unpinned(&lock)
        .map_err(|e| Failure::new(Exit::Operational, format!("cannot read {LOCKFILE}: {e}")))?;
    if !unpinned.is_empty() {
        return Err(Failure::new(
            Exit::Operational,
            format!(
                "{LOCKFILE} pins {} without an integrity hash; nothing was installed",
                unpinned.join(", ")
            ),
        ));
    }
    // The installed manifest decides, not the registry's summary.
    let manifest = tmp
        .join("node_modules")
        .join(&r.pkg.name)
        .join("package.json");
    let pj: serde_json::Value = std::fs::read_to_string(&manifest)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .ok_or_else(|| {
            Failure::new(
                Exit::Operational,
                format!("cannot read {}", manifest.display()),
            )
        })?;
    let bin = pj
        .get("bin")
        .ok_or_else(|| {
            Failure::new(
                Exit::Operational,
                format!("{} has no `bin`: there is no program to run", r.pkg),
            )
        })
        .and_then(|b| pick_bin(&r.pkg.name, b).map_err(|e| Failure::new(Exit::Operational, e)))?;
    let entry = entry_path(target, &r.pkg.name, &bin);
    let in_tmp = entry_path(tmp, &r.pkg.name, &bin);
    if !in_tmp.is_file() {
        return Err(Failure::new(
            Exit::Operational,
            format!("{}'s `bin` {bin} is not in the package", r.pkg),
        ));
    }
    Ok(Built {
        runtime: node,
        entry,
        lockfile: LOCKFILE,
        skipped_scripts: if flags.allow_scripts {
            Vec::new()
        } else {
            with_install_scripts(&lock)
        },
        js: Vec::new(),
    })
}

/// The lockfile's packages with an install script (`hasInstallScript`,
/// which npm records whether or not the script ran): with
/// `--ignore-scripts` a native add-on among them was never built (SPEC
/// §25: `@executeautomation/database-server`'s sqlite3 crash-looped).
/// Names, not paths: `node_modules/a/node_modules/b` is `b`.
pub(crate) fn with_install_scripts(lock: &str) -> Vec<String> {
    let mut names: Vec<String> = install_script_packages(lock)
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    names.dedup();
    names
}

/// The lockfile's packages with an install script, as sorted
/// `(name, version)` pairs (`latest` where the lockfile has no version).
fn install_script_packages(lock: &str) -> Vec<(String, String)> {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(lock) else {
        return Vec::new();
    };
    let Some(packages) = v.get("packages").and_then(|p| p.as_object()) else {
        return Vec::new();
    };
    let mut out: Vec<(String, String)> = packages
        .iter()
        .filter(|(k, p)| {
            !k.is_empty()
                && p.get("hasInstallScript")
                    .and_then(serde_json::Value::as_bool)
                    == Some(true)
        })
        .map(|(k, p)| {
            let name = k
                .rsplit_once("node_modules/")
                .map_or(k.as_str(), |(_, n)| n);
            let version = p
                .get("version")
                .and_then(|v| v.as_str())
                .unwrap_or("latest");
            (name.to_owned(), version.to_owned())
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// A package of the resolved tree with an install script (D221).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Script {
    /// `name@version`.
    pub(crate) package: String,
    /// A native add-on: `gypfile`, or a script that builds or fetches a
    /// binary (`node-gyp`, `prebuild-install`, …); it does not load when
    /// the script was skipped.
    pub(crate) native: bool,
}

/// Most packages whose manifest is read for the plan; a tree with more
/// install scripts lists the rest unclassified.
const MAX_SCRIPT_VIEWS: usize = 16;

/// Resolves `r`'s whole tree into `dir` before anything is installed
/// (`npm install --package-lock-only --ignore-scripts`: registry metadata
/// only, every dependency `--before` the cutoff), so the plan can name the
/// packages with an install script — `hasInstallScript` in the lockfile —
/// and which of them are native add-ons; the install then runs `npm ci`
/// from this lockfile, so the tree shown is the tree installed.
pub(crate) fn resolve_tree(
    dir: &Path,
    r: &Resolved,
    before: Option<&Cutoff>,
) -> Result<Vec<Script>, Failure> {
    let npm = program("npm", NO_NPM)?;
    let mut cmd = Command::new(&npm);
    cmd.env("npm_config_update_notifier", "false")
        .args([
            "install",
            "--package-lock-only",
            "--ignore-scripts",
            "--save-exact",
        ])
        .arg(format!("{}@{}", r.pkg.name, r.pkg.version));
    if let Some(c) = before {
        cmd.arg("--before").arg(xy_core::time::rfc3339_ms(c.at));
    }
    cmd.arg("--prefix")
        .arg(dir)
        .args(["--no-audit", "--no-fund"]);
    run(&mut cmd, "`npm install --package-lock-only`").map_err(|f| {
        match (before, too_new_dependency(&f)) {
            (Some(c), Some(dep)) => c
                .too_new(&dep, None)
                .with_detail(f.detail.unwrap_or_default()),
            _ => f,
        }
    })?;
    let lock = std::fs::read_to_string(dir.join(LOCKFILE)).map_err(|e| {
        Failure::new(
            Exit::Operational,
            format!("npm wrote no {LOCKFILE} in {}: {e}", dir.display()),
        )
    })?;
    let with = with_install_scripts_versions(&lock);
    let native: Vec<bool> = std::thread::scope(|s| {
        let handles: Vec<_> = with
            .iter()
            .take(MAX_SCRIPT_VIEWS)
            .map(|spec| {
                let npm = &npm;
                s.spawn(move || is_native(npm, spec))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(false))
            .collect()
    });
    Ok(with
        .into_iter()
        .enumerate()
        .map(|(i, package)| Script {
            package,
            native: native.get(i).copied().unwrap_or(false),
        })
        .collect())
}

/// Whether `spec`'s manifest says it is a native add-on (`npm view
/// <spec> gypfile scripts.preinstall scripts.install scripts.postinstall`).
fn is_native(npm: &Path, spec: &str) -> bool {
    let out = Command::new(npm)
        .env("npm_config_update_notifier", "false")
        .args([
            "view",
            spec,
            "gypfile",
            "scripts.preinstall",
            "scripts.install",
            "scripts.postinstall",
            "--json",
        ])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output();
    out.ok()
        .filter(|o| o.status.success())
        .is_some_and(|o| native_manifest(&String::from_utf8_lossy(&o.stdout)))
}

/// `npm view`'s answer for the fields above: a native add-on builds or
/// fetches a binary at install.
fn native_manifest(text: &str) -> bool {
    const BUILDERS: [&str; 7] = [
        "node-gyp",
        "prebuild-install",
        "node-pre-gyp",
        "cmake-js",
        "node-gyp-build",
        "prebuildify",
        "napi-postinstall",
    ];
    let Ok(v) = serde_json::from_str::<serde_json::Value>(text.trim()) else {
        // A single field is printed bare.
        return BUILDERS.iter().any(|b| text.contains(b));
    };
    if v.get("gypfile").and_then(serde_json::Value::as_bool) == Some(true) {
        return true;
    }
    let scripts = match &v {
        serde_json::Value::Object(m) => m
            .iter()
            .filter(|(k, _)| k.starts_with("scripts."))
            .filter_map(|(_, v)| v.as_str())
            .collect::<Vec<_>>(),
        serde_json::Value::String(s) => vec![s.as_str()],
        _ => Vec::new(),
    };
    scripts
        .iter()
        .any(|s| BUILDERS.iter().any(|b| s.contains(b)))
}

/// [`with_install_scripts`] as `name@version`, for `npm view`.
fn with_install_scripts_versions(lock: &str) -> Vec<String> {
    install_script_packages(lock)
        .into_iter()
        .map(|(name, version)| format!("{name}@{version}"))
        .collect()
}

/// The dependency npm's `--before` found no version of: npm says `No
/// matching version found for <name>@<range> with a date before <date>`.
pub(crate) fn too_new_dependency(f: &Failure) -> Option<String> {
    let text = f.detail.as_deref()?;
    let rest = &text[text.find("No matching version found for ")? + 30..];
    let spec = rest.split_whitespace().next()?.trim_end_matches('.');
    rest.contains("with a date before")
        .then(|| format!("{spec} (no version of it is old enough)"))
}

/// The lockfile's installed packages that carry no `integrity` (links to
/// local folders and bundled dependencies have none by nature and are
/// pinned by their parent).
pub(crate) fn unpinned(lock: &str) -> Result<Vec<String>, String> {
    let v: serde_json::Value = serde_json::from_str(lock).map_err(|e| e.to_string())?;
    let packages = v
        .get("packages")
        .and_then(|p| p.as_object())
        .ok_or("no `packages` (lockfileVersion 2 or later expected)")?;
    Ok(packages
        .iter()
        .filter(|(k, _)| !k.is_empty())
        .filter(|(_, p)| {
            let yes = |key: &str| p.get(key).and_then(serde_json::Value::as_bool) == Some(true);
            !yes("link")
                && !yes("inBundle")
                && !p
                    .get("integrity")
                    .and_then(|i| i.as_str())
                    .is_some_and(|i| i.starts_with("sha"))
        })
        .map(|(k, _)| k.clone())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packages_with_install_scripts_are_named() {
        let lock = r#"{"lockfileVersion":3,"packages":{
            "":{"name":"x"},
            "node_modules/@executeautomation/database-server":{"version":"1.1.0","integrity":"sha512-a"},
            "node_modules/sqlite3":{"version":"5.1.7","integrity":"sha512-b","hasInstallScript":true},
            "node_modules/a/node_modules/better-sqlite3":{"version":"11.0.0","integrity":"sha512-c","hasInstallScript":true},
            "node_modules/left-pad":{"version":"1.3.0","integrity":"sha512-d"}}}"#;
        assert_eq!(with_install_scripts(lock), ["better-sqlite3", "sqlite3"]);
        assert!(with_install_scripts(r#"{"packages":{}}"#).is_empty());
    }

    #[test]
    fn native_add_ons_are_told_from_other_install_scripts() {
        // sqlite3 5.1.7's manifest.
        assert!(native_manifest(
            r#"{"scripts.install": "prebuild-install -r napi || node-gyp rebuild"}"#
        ));
        assert!(native_manifest(r#"{"gypfile": true}"#));
        assert!(native_manifest("\"node-gyp-build\"\n"));
        // esbuild-like: a postinstall that is not a native build.
        assert!(!native_manifest(
            r#"{"scripts.postinstall": "node install.js"}"#
        ));
        assert!(!native_manifest(""));
        let lock = r#"{"lockfileVersion":3,"packages":{"":{},
            "node_modules/sqlite3":{"version":"5.1.7","hasInstallScript":true},
            "node_modules/a":{"version":"1.0.0"}}}"#;
        assert_eq!(with_install_scripts_versions(lock), ["sqlite3@5.1.7"]);
    }

    #[test]
    fn views_of_one_or_several_versions_parse() {
        let one = r#"{"version":"2026.8.31","time":{"2026.8.31":"2026-09-01T22:46:36.382000+00:00"},
                     "bin":{"mcp-server-memory":"dist/index.js"}}"#;
        let v = parse_view(one).unwrap().unwrap();
        assert_eq!(v.version, "2026.8.31");
        assert_eq!(
            pick_bin(
                "@modelcontextprotocol/server-memory",
                v.bin.as_ref().unwrap()
            )
            .unwrap(),
            "dist/index.js"
        );
        let several = r#"[{"version":"1.0.0"},{"version":"1.2.0","time":{}}]"#;
        assert_eq!(parse_view(several).unwrap().unwrap().version, "1.2.0");
        assert!(parse_view("").unwrap().is_none());
        assert!(parse_view("[]").unwrap().is_none());
        assert!(parse_view("{").is_err());
    }

    #[test]
    fn the_bin_named_like_the_package_wins() {
        let b = serde_json::json!({"other": "o.js", "srv": "./s.js"});
        assert_eq!(pick_bin("@x/srv", &b).unwrap(), "./s.js");
        assert!(pick_bin("@x/none", &b).unwrap_err().contains("other, srv"));
        assert_eq!(
            pick_bin("a", &serde_json::json!("cli.js")).unwrap(),
            "cli.js"
        );
        assert_eq!(
            entry_path(Path::new("/d"), "@x/srv", "./dist//s.js"),
            Path::new("/d/node_modules/@x/srv/dist/s.js")
        );
    }

    #[test]
    fn the_dependency_with_no_version_old_enough_is_named() {
        let f = Failure::new(Exit::Operational, "`npm install` failed").with_detail(
            "npm error code ETARGET\nnpm error notarget No matching version found for \
             zod@^4.1.0 with a date before 11/1/2026, 12:00:00 AM.\nnpm error notarget …",
        );
        assert_eq!(
            too_new_dependency(&f).as_deref(),
            Some("zod@^4.1.0 (no version of it is old enough)")
        );
        let other = Failure::new(Exit::Operational, "x").with_detail("E404");
        assert_eq!(too_new_dependency(&other), None);
    }

    #[test]
    fn a_dependency_without_integrity_is_found() {
        let lock = r#"{"lockfileVersion":3,"packages":{
            "": {"dependencies":{"a":"1.0.0"}},
            "node_modules/a": {"version":"1.0.0","integrity":"sha512-xx"},
            "node_modules/b": {"version":"1.0.0"},
            "node_modules/c": {"link":true},
            "node_modules/a/node_modules/d": {"inBundle":true}
        }}"#;
        assert_eq!(unpinned(lock).unwrap(), ["node_modules/b"]);
        assert!(unpinned(r#"{"lockfileVersion":1}"#).is_err());
    }
}
