//! PyPI's steps of a pinned install: the PyPI JSON API for the exact
//! version and its upload time (over [`crate::http`]: the system's roots,
//! the `HTTPS_PROXY`/`NO_PROXY` settings); a venv in the version
//! directory; `pip download` of every wheel, each hashed into
//! `requirements.lock` as `--hash=sha256:…`, each file's upload time
//! checked against `min-age` (the JSON API again); `pip install --no-index
//! --require-hashes` from those files only; the npm dependencies of a
//! wheel that would install them itself ([`js`], D290); the
//! distribution's console script run by the venv's python.

use std::path::{Path, PathBuf};
use std::process::Command;

use xy_core::package::PackageRef;

use super::{Built, Cutoff, Resolved, js, parse_rfc3339, program, run};
use crate::cli::InstallFlags;
use crate::error::{Exit, Failure};

/// The hash-pinned requirements file.
pub(crate) const LOCKFILE: &str = "requirements.lock";

const NO_PYTHON: &str = "install Python 3 (with its venv module) to use --pypi";

/// The JSON API's base; `XY_PYPI_URL` points it at a mirror.
fn api_base() -> String {
    std::env::var("XY_PYPI_URL").unwrap_or_else(|_| "https://pypi.org/pypi".to_owned())
}

/// The console scripts of a distribution, as a JSON list.
const SCRIPTS_PY: &str = r#"
import json, sys, importlib.metadata as m
d = m.distribution(sys.argv[1])
print(json.dumps(sorted(e.name for e in d.entry_points if e.group == "console_scripts")))
"#;

/// The exact version `want` names (`None`: the newest). Ranges are not
/// resolved: PyPI's API answers exact versions only.
pub(crate) fn resolve(name: &str, want: Option<&str>) -> Result<Resolved, Failure> {
    if let Some(v) = want
        && !xy_core::package::is_exact_version(xy_core::package::Ecosystem::Pypi, v)
    {
        return Err(Failure::new(
            Exit::Operational,
            format!(
                "{v:?} is not an exact version: write {name}==<version>, or no version for the newest"
            ),
        ));
    }
    // The project document, not the per-version one: it lists every
    // release's files, and some mirrors serve only it.
    let url = format!("{}/{name}/json", api_base().trim_end_matches('/'));
    let (status, doc) = crate::http::get_json(&url, LOOKUP_TIMEOUT)
        .map_err(|e| Failure::new(Exit::Operational, e))?;
    let fail = |m: String| Failure::new(Exit::Operational, m);
    let a = match (status, doc) {
        (200, Some(doc)) => release(&doc, want).map_err(|e| fail(format!("{url}: {e}")))?,
        (404, _) => return Err(fail(format!("PyPI has no project {name} ({url})"))),
        (200, None) => return Err(fail(format!("{url} answered with no JSON"))),
        (s, _) => return Err(fail(format!("{url} answered {s}"))),
    };
    let pkg: PackageRef = format!("pypi:{name}=={}", a.version).parse().map_err(
        |e: xy_core::package::PackageRefError| Failure::new(Exit::Operational, e.to_string()),
    )?;
    Ok(Resolved {
        pkg,
        published: a.uploaded.as_deref().and_then(parse_rfc3339),
        bin: None,
        tree: None,
    })
}

/// How long a lookup may take.
const LOOKUP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// A release as the project document describes it.
#[derive(Debug, PartialEq, Eq)]
struct Release {
    version: String,
    /// The earliest upload of its files: when it became installable.
    uploaded: Option<String>,
}

/// `want` (else the newest, `info.version`) in a project document
/// (`/pypi/<pkg>/json`); an error when it has no such release.
fn release(doc: &serde_json::Value, want: Option<&str>) -> Result<Release, String> {
    let version = match want {
        Some(v) => v.to_owned(),
        None => doc
            .pointer("/info/version")
            .and_then(|v| v.as_str())
            .ok_or("no info.version")?
            .to_owned(),
    };
    let files = doc
        .get("releases")
        .and_then(|r| r.get(&version))
        .and_then(|f| f.as_array())
        .ok_or_else(|| format!("PyPI has no release {version}"))?;
    let uploaded = files
        .iter()
        .filter_map(|f| f.get("upload_time_iso_8601")?.as_str())
        .min()
        .map(str::to_owned);
    Ok(Release { version, uploaded })
}

/// `<dir>/venv/bin`.
pub(crate) fn venv_bin(dir: &Path) -> PathBuf {
    dir.join("venv").join("bin")
}

/// `<dir>/venv/bin/python`: the config's runtime (not canonicalized: the
/// link inside the venv is what makes it the venv's interpreter).
pub(crate) fn venv_python(dir: &Path) -> PathBuf {
    venv_bin(dir).join("python")
}

/// Builds the venv in `tmp` (which becomes `target`): the wheels of
/// `previous`'s lock when this version was installed before, else those
/// `pip download` picks, each uploaded before `before` (min-age covers
/// every dependency: too-new releases are held back by constraints and the
/// download redone; what cannot be held back is named), hashed into the
/// lock; then installed from those files only, every hash checked.
pub(crate) fn install(
    tmp: &Path,
    target: &Path,
    previous: Option<&Path>,
    r: &Resolved,
    flags: &InstallFlags,
    before: Option<&Cutoff>,
) -> Result<Built, Failure> {
    let python3 = program("python3", NO_PYTHON)?;
    run(
        Command::new(&python3)
            .args(["-m", "venv"])
            .arg(tmp.join("venv")),
        "`python3 -m venv`",
    )?;
    let py = venv_python(tmp);
    let wheels = tmp.join("wheels");
    let lock = tmp.join(LOCKFILE);
    let pip = |args: &[&std::ffi::OsStr]| {
        let mut c = Command::new(&py);
        c.args(["-m", "pip"])
            .args(args)
            .env("PIP_DISABLE_PIP_VERSION_CHECK", "1");
        c
    };
    let os = |s: &'static str| std::ffi::OsStr::new(s);
    let old_lock = previous.map(|p| p.join(LOCKFILE)).filter(|l| l.is_file());
    if let Some(old) = old_lock {
        std::fs::copy(&old, &lock).map_err(|e| {
            Failure::new(
                Exit::Operational,
                format!("cannot copy {}: {e}", old.display()),
            )
        })?;
        run(
            &mut pip(&[
                os("download"),
                os("--only-binary=:all:"),
                os("--no-deps"),
                os("--require-hashes"),
                os("-r"),
                lock.as_os_str(),
                os("-d"),
                wheels.as_os_str(),
            ]),
            "`pip download` of the locked wheels",
        )?;
    } else {
        let spec = format!("{}=={}", r.pkg.name, r.pkg.version);
        let constraints = tmp.join("min-age.constraints");
        let mut excluded: Vec<String> = Vec::new();
        for round in 0.. {
            std::fs::write(&constraints, excluded.join("\n") + "\n").map_err(|e| {
                Failure::new(
                    Exit::Operational,
                    format!("cannot write {}: {e}", constraints.display()),
                )
            })?;
            let _ = std::fs::remove_dir_all(&wheels);
            run(
                &mut pip(&[
                    os("download"),
                    os("--only-binary=:all:"),
                    os("-c"),
                    constraints.as_os_str(),
                    os("-d"),
                    wheels.as_os_str(),
                    std::ffi::OsStr::new(&spec),
                ]),
                &format!("`pip download {spec}`"),
            )
            .map_err(|f| match excluded.is_empty() {
                true => f,
                false => Failure::new(
                    Exit::Operational,
                    format!(
                        "no set of dependencies of {spec} is older than min-age: {} were \
                         held back as too new; nothing was installed (--allow-fresh installs \
                         them anyway)",
                        excluded.join(", ")
                    ),
                )
                .with_detail(f.detail.unwrap_or_default()),
            })?;
            let Some(c) = before else { break };
            let more = too_new_uploads(&wheels, &r.pkg.name, c)?;
            if more.is_empty() {
                break;
            }
            if round == MAX_ROUNDS {
                return Err(Failure::new(
                    Exit::Operational,
                    format!(
                        "{spec}'s dependencies kept resolving to releases newer than min-age \
                         {} ({}); nothing was installed (--allow-fresh installs them anyway)",
                        humantime::format_duration(c.min_age),
                        more.join(", ")
                    ),
                ));
            }
            excluded.extend(more);
        }
        let _ = std::fs::remove_file(&constraints);
        let text = lock_text(&wheels)?;
        std::fs::write(&lock, text).map_err(|e| {
            Failure::new(
                Exit::Operational,
                format!("cannot write {}: {e}", lock.display()),
            )
        })?;
    }
    run(
        &mut pip(&[
            os("install"),
            os("--no-index"),
            os("--find-links"),
            wheels.as_os_str(),
            os("--require-hashes"),
            os("--only-binary=:all:"),
            os("-r"),
            lock.as_os_str(),
        ]),
        "`pip install --require-hashes`",
    )?;
    // The lock is what reproduces the install; the wheels are not kept.
    let _ = std::fs::remove_dir_all(&wheels);
    let out = run(
        Command::new(&py).args(["-c", SCRIPTS_PY, &r.pkg.name]),
        "reading the console scripts",
    )?;
    let scripts: Vec<String> = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let script =
        pick_script(&r.pkg.name, &scripts).map_err(|e| Failure::new(Exit::Operational, e))?;
    // D290: a wheel that installs its own npm dependencies at its first
    // call gets them now, while the venv is still writable.
    let js = js::install(tmp, previous, flags, before)?;
    Ok(Built {
        runtime: venv_python(target),
        entry: venv_bin(target).join(script),
        lockfile: LOCKFILE,
        skipped_scripts: Vec::new(),
        js,
    })
}

/// `requirements.lock` for the wheels in `dir`: one `name==version
/// --hash=sha256:…` line per file, sorted.
fn lock_text(dir: &Path) -> Result<String, Failure> {
    let io = |e: std::io::Error| {
        Failure::new(
            Exit::Operational,
            format!("cannot read {}: {e}", dir.display()),
        )
    };
    let mut lines = Vec::new();
    for e in std::fs::read_dir(dir).map_err(io)? {
        let path = e.map_err(io)?.path();
        let file = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let (name, version) = wheel_name(&file).ok_or_else(|| {
            Failure::new(
                Exit::Operational,
                format!("pip downloaded {file}, which is not a wheel"),
            )
        })?;
        let bytes = std::fs::read(&path).map_err(io)?;
        lines.push(format!(
            "{name}=={version} --hash=sha256:{}",
            xy_core::firewall::sha256_hex(&bytes)
        ));
    }
    lines.sort();
    let mut s = String::from(
        "# Written by `xyctl add --pypi`: every wheel of this install, pinned by hash.\n",
    );
    for l in lines {
        s.push_str(&l);
        s.push('\n');
    }
    Ok(s)
}

/// How many times a download is redone with more too-new versions held
/// back before the install is refused.
const MAX_ROUNDS: usize = 8;

/// For every downloaded wheel other than `top`'s own (checked when it was
/// resolved) uploaded after the cutoff, or of no known upload time: one
/// constraint line `name!=version` per release of that project first
/// uploaded after the cutoff, so pip's next resolution picks older ones
/// (pip has no `--before`; each project's document is looked up). Empty
/// when every file is old enough.
fn too_new_uploads(dir: &Path, top: &str, before: &Cutoff) -> Result<Vec<String>, Failure> {
    let io = |e: std::io::Error| {
        Failure::new(
            Exit::Operational,
            format!("cannot read {}: {e}", dir.display()),
        )
    };
    let mut files: Vec<String> = Vec::new();
    for e in std::fs::read_dir(dir).map_err(io)? {
        files.push(e.map_err(io)?.file_name().to_string_lossy().into_owned());
    }
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let Some((name, version)) = wheel_name(&file) else {
            continue;
        };
        if normalized(name) == normalized(top) {
            continue;
        }
        let url = format!(
            "{}/{}/json",
            api_base().trim_end_matches('/'),
            normalized(name)
        );
        let doc = match crate::http::get_json(&url, LOOKUP_TIMEOUT) {
            Ok((200, Some(doc))) => doc,
            _ => {
                return Err(before
                    .too_new(&format!("{name}=={version} ({file})"), None)
                    .with_detail(format!("its upload time could not be read from {url}")));
            }
        };
        match upload_time(&doc, version, &file) {
            Some(t) if t <= before.at => {}
            Some(_) => out.extend(
                too_new_releases(&doc, before)
                    .into_iter()
                    .map(|v| format!("{}!={v}", normalized(name))),
            ),
            None => return Err(before.too_new(&format!("{name}=={version} ({file})"), None)),
        }
    }
    Ok(out)
}

/// The releases of a project document first uploaded after the cutoff.
fn too_new_releases(doc: &serde_json::Value, before: &Cutoff) -> Vec<String> {
    let Some(releases) = doc.get("releases").and_then(|r| r.as_object()) else {
        return Vec::new();
    };
    releases
        .iter()
        .filter(|(_, files)| {
            files
                .as_array()
                .and_then(|fs| {
                    fs.iter()
                        .filter_map(|f| f.get("upload_time_iso_8601")?.as_str())
                        .filter_map(parse_rfc3339)
                        .min()
                })
                .is_some_and(|first| first > before.at)
        })
        .map(|(v, _)| v.clone())
        .collect()
}

/// When file `file` of release `version` was uploaded, per a project
/// document.
fn upload_time(
    doc: &serde_json::Value,
    version: &str,
    file: &str,
) -> Option<std::time::SystemTime> {
    doc.get("releases")?
        .get(version)?
        .as_array()?
        .iter()
        .find(|f| f.get("filename").and_then(|n| n.as_str()) == Some(file))?
        .get("upload_time_iso_8601")?
        .as_str()
        .and_then(parse_rfc3339)
}

/// PEP 503: lower case, runs of `-`, `_`, `.` as one `-`.
fn normalized(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// `(distribution, version)` from a wheel's file name
/// (`{dist}-{version}(-{build})?-{py}-{abi}-{platform}.whl`).
fn wheel_name(file: &str) -> Option<(&str, &str)> {
    let stem = file.strip_suffix(".whl")?;
    let parts: Vec<&str> = stem.split('-').collect();
    (parts.len() == 5 || parts.len() == 6).then(|| (parts[0], parts[1]))
}

/// The console script to run: the only one, else the one named like the
/// project (PEP 503 normalized).
fn pick_script(name: &str, scripts: &[String]) -> Result<String, String> {
    let norm = |s: &str| s.to_ascii_lowercase().replace(['_', '.'], "-");
    match scripts {
        [] => Err(format!(
            "{name} has no console script: there is no program to run"
        )),
        [one] => Ok(one.clone()),
        many => many
            .iter()
            .find(|s| norm(s) == norm(name))
            .cloned()
            .ok_or_else(|| {
                format!(
                    "{name} has several console scripts ({}) and none is named {name}",
                    many.join(", ")
                )
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_files_upload_time_and_a_normalized_name() {
        let doc = serde_json::json!({"releases": {"1.0": [
            {"filename": "a_b-1.0-py3-none-any.whl", "upload_time_iso_8601": "2024-01-02T00:00:00.000000Z"},
            {"filename": "a_b-1.0.tar.gz", "upload_time_iso_8601": "2024-01-01T00:00:00.000000Z"}
        ]}});
        assert_eq!(
            upload_time(&doc, "1.0", "a_b-1.0-py3-none-any.whl"),
            parse_rfc3339("2024-01-02T00:00:00.000000Z")
        );
        assert_eq!(upload_time(&doc, "1.0", "other.whl"), None);
        assert_eq!(upload_time(&doc, "2.0", "a_b-1.0.tar.gz"), None);
        assert_eq!(normalized("Typing__Extensions.x"), "typing-extensions-x");
        let cut = Cutoff {
            at: parse_rfc3339("2023-12-31T12:00:00Z").unwrap(),
            min_age: std::time::Duration::from_secs(86_400),
        };
        assert_eq!(too_new_releases(&doc, &cut), vec!["1.0".to_owned()]);
        let later = Cutoff {
            at: parse_rfc3339("2024-02-01T00:00:00Z").unwrap(),
            ..cut
        };
        assert!(too_new_releases(&doc, &later).is_empty());
    }

    #[test]
    fn a_release_is_found_with_its_first_upload() {
        let doc = serde_json::json!({
            "info": {"version": "2.0"},
            "releases": {
                "1.0": [{"upload_time_iso_8601": "2024-01-02T00:00:00.000000Z"},
                        {"upload_time_iso_8601": "2024-01-01T00:00:00.000000Z"}],
                "2.0": [],
            }
        });
        assert_eq!(
            release(&doc, Some("1.0")).unwrap(),
            Release {
                version: "1.0".into(),
                uploaded: Some("2024-01-01T00:00:00.000000Z".into())
            }
        );
        // A release without files has no known age.
        assert_eq!(release(&doc, None).unwrap().uploaded, None);
        assert!(
            release(&doc, Some("3.0"))
                .unwrap_err()
                .contains("no release 3.0")
        );
    }

    #[test]
    fn wheel_names_split() {
        assert_eq!(
            wheel_name("mcp_server_time-2026.10.19-py3-none-any.whl"),
            Some(("mcp_server_time", "2026.10.19"))
        );
        assert_eq!(
            wheel_name("pydantic_core-2.33.2-1-cp311-cp311-manylinux_2_17_x86_64.whl"),
            Some(("pydantic_core", "2.33.2"))
        );
        assert_eq!(wheel_name("x-1.0.tar.gz"), None);
        assert_eq!(wheel_name("x-1.0.whl"), None);
    }

    #[test]
    fn the_script_named_like_the_project_wins() {
        let s = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(pick_script("a", &s(&["only"])).unwrap(), "only");
        assert_eq!(
            pick_script("mcp_server.time", &s(&["mcp-server-time", "other"])).unwrap(),
            "mcp-server-time"
        );
        assert!(pick_script("a", &s(&[])).is_err());
        assert!(
            pick_script("a", &s(&["b", "c"]))
                .unwrap_err()
                .contains("b, c")
        );
    }

    #[test]
    fn a_lock_hashes_every_wheel() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("b-2.0-py3-none-any.whl"), b"b").unwrap();
        std::fs::write(d.path().join("a-1.0-py3-none-any.whl"), b"").unwrap();
        let text = lock_text(d.path()).unwrap();
        let lines: Vec<&str> = text.lines().skip(1).collect();
        assert_eq!(
            lines,
            [
                "a==1.0 --hash=sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                "b==2.0 --hash=sha256:3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d",
            ]
        );
        std::fs::write(d.path().join("c.tar.gz"), b"").unwrap();
        assert!(lock_text(d.path()).is_err());
    }
}
