//! The compatibility corpus of SPEC §25: real MCP servers from npm and
//! PyPI, pinned here in one place ([`NPM`], [`PYPI`], [`UV_VERSION`]), and
//! what installing them the README's way needs without the network: an npm
//! cache holding every pinned package's tarballs and metadata, a wheelhouse
//! holding every pinned distribution's wheels, `uv`/`uvx` for the `uvx`
//! entries of `xyctl import`, and a user's own project with its `.venv`
//! and `server.py` on the Python SDK. Filled once into the interop cache
//! (`corpus-<digest of the pins>/`, see [`crate::interop`]) by `.ci/run`
//! or by the first test that needs it; a changed pin gets a fresh directory.
//!
//! The tests (`xy-cli/tests/compat.rs`) point `xyctl add|import` at this
//! cache with [`Corpus::install_env`]: npm then resolves and installs from
//! the cache (`prefer-offline`), pip from the wheelhouse (`--no-index`);
//! only PyPI's JSON API (the version's upload time) is asked over the network.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::interop::{
    self, Failure, Interop, PYTHON_MCP_VERSION, cache_dir, ensure, run, which, write_if_changed,
};

/// The npm servers of the corpus, `(package, version)`: the four reference
/// servers, both browser drivers, and two that keep a dot-directory.
pub const NPM: &[(&str, &str)] = &[
    ("@modelcontextprotocol/server-memory", "2026.8.31"),
    ("@modelcontextprotocol/server-filesystem", "2026.8.31"),
    ("@modelcontextprotocol/server-everything", "2026.8.31"),
    (
        "@modelcontextprotocol/server-sequential-thinking",
        "2026.8.31",
    ),
    ("@playwright/mcp", "0.0.86"),
    ("chrome-devtools-mcp", "1.11.0"),
    ("@wonderwhy-er/desktop-commander", "0.2.52"),
    ("mongodb-mcp-server", "3.0.4"),
];

/// The PyPI servers of the corpus, `(distribution, version)`.
pub const PYPI: &[(&str, &str)] = &[
    ("mcp-server-time", "2026.10.19"),
    ("mcp-server-fetch", "2026.10.24"),
    ("mcp-server-git", "2026.10.19"),
    ("markitdown-mcp", "0.0.1a8"),
    ("excel-mcp-server", "2.2.2"),
];

/// `uv` (and its `uvx`) from PyPI, for `uvx` entries of a client's config.
pub const UV_VERSION: &str = "0.13.9";

/// The version a corpus package is pinned at (panics for one not pinned:
/// a test must name only pinned packages).
pub fn pin(package: &str) -> &'static str {
    NPM.iter()
        .chain(PYPI)
        .find(|(p, _)| *p == package)
        .map(|(_, v)| *v)
        .unwrap_or_else(|| panic!("{package} is not pinned in xy_testbins::corpus"))
}

const CLIENT_SCRIPT: &str = include_str!("../interop/corpus_client.py");
const PROJECT_SERVER: &str = include_str!("../interop/corpus_server.py");

/// The installed corpus.
#[derive(Debug, Clone)]
pub struct Corpus {
    /// The corpus directory in the interop cache.
    pub dir: PathBuf,
    /// npm's cache with every pinned package (`npm_config_cache`).
    pub npm_cache: PathBuf,
    /// Every pinned distribution's wheels and their dependencies'.
    pub wheels: PathBuf,
    /// The directory holding `uv` and `uvx`.
    pub uv_bin: PathBuf,
    /// A project: `server.py` and `.venv` (the Python SDK installed);
    /// copy it before use, a test writes into its project.
    pub project: PathBuf,
    /// The Python SDK's venv python, which runs [`Corpus::client_script`].
    pub python: PathBuf,
    /// `interop/corpus_client.py`.
    pub client_script: PathBuf,
}

impl Corpus {
    /// What `xyctl add --npm|--pypi` and `xyctl import --pin` need to
    /// install from this corpus: npm's cache (preferred to the network),
    /// pip's wheelhouse (no index).
    pub fn install_env(&self) -> Vec<(String, String)> {
        vec![
            (
                "npm_config_cache".to_owned(),
                self.npm_cache.display().to_string(),
            ),
            ("npm_config_prefer_offline".to_owned(), "true".to_owned()),
            ("PIP_NO_INDEX".to_owned(), "1".to_owned()),
            (
                "PIP_FIND_LINKS".to_owned(),
                self.wheels.display().to_string(),
            ),
        ]
    }
}

/// Adds, beside each wheel younger than xy's default `min-age` (plus a
/// day), the newest older release of that distribution: `xyctl add --pypi`
/// holds a too-new dependency back and asks for an older one, which a
/// wheelhouse filled on one day lacks a few days later (the `fetch` row
/// failed on `regex` released two days before). Once a day (a marker
/// names the day); best effort: PyPI unreachable leaves the wheelhouse as
/// it is and the install names the dependency.
fn age_wheels(wheels: &Path) {
    const SCRIPT: &str = r#"
import json, os, subprocess, sys, time, urllib.request
from datetime import datetime
wheels, min_age = sys.argv[1], float(sys.argv[2])
seen = set()
for _ in range(3):
    fresh = []
    for f in sorted(os.listdir(wheels)):
        if not f.endswith(".whl"): continue
        name, ver = f.split("-")[:2]
        if (name, ver) in seen: continue
        seen.add((name, ver))
        try:
            d = json.load(urllib.request.urlopen(f"https://pypi.org/pypi/{name}/json", timeout=30))
            t = min(u["upload_time_iso_8601"] for u in d["releases"][ver])
        except Exception:
            continue
        age = time.time() - datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp()
        if age < min_age: fresh.append((name, ver))
    if not fresh: break
    for name, ver in fresh:
        print(f"older than {name}=={ver}", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--disable-pip-version-check",
            "--no-input", "-q", "--only-binary=:all:", "--no-deps", "-d", wheels, f"{name}<{ver}"])
"#;
    let day = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400);
    let marker = wheels.join(format!(".aged-{day}"));
    let Some(python3) = which("python3") else {
        return;
    };
    if marker.is_file() || !wheels.is_dir() {
        return;
    }
    let min_age = xy_core::package::DEFAULT_MIN_AGE.as_secs() + 86_400;
    let ok = Command::new(python3)
        .arg("-c")
        .arg(SCRIPT)
        .arg(wheels)
        .arg(min_age.to_string())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        let _ = std::fs::write(&marker, "");
    }
}

/// The corpus directory's name: a digest of every pin, so a changed pin
/// never reuses an old install.
fn dir_name() -> String {
    // FNV-1a: stable across Rust versions, unlike `DefaultHasher`.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |s: &str| {
        for b in s.bytes().chain([0]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for (p, v) in NPM.iter().chain(PYPI) {
        feed(p);
        feed(v);
    }
    feed(UV_VERSION);
    feed(PYTHON_MCP_VERSION);
    format!("corpus-{h:016x}")
}

/// Ensures the corpus is installed (see the module docs). A missing
/// `python3`/`npm` or an unreachable registry is a skip; a broken pin panics.
pub fn corpus() -> Interop<Corpus> {
    let sdk = match interop::python_sdk() {
        Interop::Ready(sdk) => sdk,
        Interop::Skip(skip) => return Interop::Skip(skip),
    };
    let dir = cache_dir().join(dir_name());
    let result = ensure(&dir, |work| {
        let (Some(npm), Some(python3)) = (which("npm"), which("python3")) else {
            return Err(Failure::Skip("npm or python3 is not on PATH".to_owned()));
        };
        let cache = work.join("npm-cache");
        for (package, version) in NPM {
            let spec = format!("{package}@{version}");
            // What `xyctl add --npm` asks first (`npm view`), then what it
            // installs, each into the shared cache (its tree is never used).
            run(
                Command::new(&npm)
                    .args(["view", &spec, "version", "time", "bin", "--json", "--cache"])
                    .arg(&cache),
                &format!("npm view {spec}"),
            )?;
            // Kept: deleting a large tree is slow on some CI disks.
            let prefix = work.join("npm-warm").join(package.replace('/', "+"));
            run(
                Command::new(&npm)
                    .args([
                        "install",
                        "--no-audit",
                        "--no-fund",
                        "--ignore-scripts",
                        "--save-exact",
                        "--loglevel",
                        "error",
                        "--cache",
                    ])
                    .arg(&cache)
                    .arg("--prefix")
                    .arg(&prefix)
                    .arg(&spec),
                &format!("npm install {spec}"),
            )?;
        }
        let wheels = work.join("wheels");
        let mut wanted: Vec<String> = PYPI.iter().map(|(p, v)| format!("{p}=={v}")).collect();
        wanted.push(format!("uv=={UV_VERSION}"));
        wanted.push(format!("mcp=={PYTHON_MCP_VERSION}"));
        for spec in &wanted {
            run(
                Command::new(&python3)
                    .args([
                        "-m",
                        "pip",
                        "download",
                        "--disable-pip-version-check",
                        "--no-input",
                        "-q",
                        "--only-binary=:all:",
                        "-d",
                    ])
                    .arg(&wheels)
                    .arg(spec),
                &format!("pip download {spec}"),
            )?;
        }
        let local = |venv: &Path, spec: &str| -> Result<(), Failure> {
            run(
                Command::new(&python3).arg("-m").arg("venv").arg(venv),
                "python3 -m venv",
            )?;
            run(
                Command::new(venv.join("bin").join("python"))
                    .args(["-m", "pip", "install", "-q", "--no-index", "--find-links"])
                    .arg(&wheels)
                    .arg(spec),
                &format!("pip install {spec} (from the wheelhouse)"),
            )
        };
        local(&work.join("uv"), &format!("uv=={UV_VERSION}"))?;
        let project = work.join("project");
        local(
            &project.join(".venv"),
            &format!("mcp=={PYTHON_MCP_VERSION}"),
        )?;
        Ok(())
    });
    if let Err(skip) = result {
        return Interop::Skip(skip);
    }
    static AGED: std::sync::Once = std::sync::Once::new();
    AGED.call_once(|| age_wheels(&dir.join("wheels")));
    // Both scripts are rewritten on every call so an edit reaches a cached corpus.
    let client_script = dir.join("corpus_client.py");
    write_if_changed(&client_script, CLIENT_SCRIPT);
    write_if_changed(&dir.join("project").join("server.py"), PROJECT_SERVER);
    let corpus = Corpus {
        npm_cache: dir.join("npm-cache"),
        wheels: dir.join("wheels"),
        uv_bin: dir.join("uv").join("bin"),
        project: dir.join("project"),
        python: sdk.python,
        client_script,
        dir,
    };
    for f in [corpus.uv_bin.join("uvx"), corpus.project.join("server.py")] {
        assert!(f.is_file(), "{} missing after install", f.display());
    }
    Interop::Ready(corpus)
}
