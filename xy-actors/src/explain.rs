//! The crash-loop explainer: from a spawn error or an exit status, the last
//! stderr lines, a port holder and the next retry time, one line saying why
//! a server is `failed` or backing off. Pure; the ServerActor gathers input.

use std::time::{Duration, SystemTime};

use xy_core::protocol::{SpawnErrorKind, describe_exit};

/// A run shorter than this "exited immediately"; an exit this early also
/// triggers the port check (a busy port is the usual reason).
pub(crate) const IMMEDIATE: Duration = Duration::from_secs(3);

/// Stderr lines quoted at most, and their length cap.
const STDERR_LINES: usize = 2;
const STDERR_LINE_CHARS: usize = 200;

/// Stderr lines the ServerActor hands in: the last burst, long enough to
/// hold a whole Node or Python stack trace, whose telling line is at its top.
pub(crate) const STDERR_TAIL: usize = 80;

/// The recognised cause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Cause {
    /// exec found nothing (ENOENT, shell 127, "command not found").
    CommandNotFound,
    /// exec or the program hit EACCES (shell 126, "Permission denied").
    PermissionDenied,
    /// The program said a file it needs is missing (`No such file or
    /// directory`, `ENOENT`, `[Errno 2]`): the path, when it named one.
    /// Not a permission problem (issue 39: a relative path resolved
    /// elsewhere was explained as "permission denied").
    FileNotFound(Option<String>),
    /// exec refused the file: not a program this system runs (ENOEXEC).
    ExecFormat,
    /// The port is taken (`Address already in use`, EADDRINUSE, or a
    /// holder found by the port check).
    PortInUse,
    /// Died within [`IMMEDIATE`] of its spawn with this code.
    ExitedImmediately(i32),
    /// Any other exit or spawn failure, described.
    Other(String),
}

/// What the explainer looks at.
#[derive(Debug, Default)]
pub(crate) struct Input<'a> {
    /// The spawn error's kind, its text (`No such file or directory (os
    /// error 2)`) and the path tried, when the last attempt failed to spawn.
    pub(crate) spawn_error: Option<(SpawnErrorKind, &'a str, &'a str)>,
    /// Exit code of the last run, if it exited normally.
    pub(crate) code: Option<i32>,
    /// Signal name of the last run, if a signal ended it.
    pub(crate) signal: Option<&'a str>,
    /// How long the last run lasted.
    pub(crate) ran_for: Option<Duration>,
    /// The last stderr lines, oldest first.
    pub(crate) stderr: &'a [String],
    /// Who holds the port, as text.
    pub(crate) port_holder: Option<&'a str>,
    /// Why xy itself ended the run (failed health checks), if it did.
    pub(crate) killed_for: Option<&'a str>,
    /// When the next restart is due (backing off).
    pub(crate) next_retry: Option<SystemTime>,
}

/// Classifies the failure.
pub(crate) fn classify(input: &Input<'_>) -> Cause {
    let stderr_has = |needles: &[&str]| {
        input.stderr.iter().any(|l| {
            let l = l.to_ascii_lowercase();
            needles.iter().any(|n| l.contains(n))
        })
    };
    if let Some((kind, error, _)) = input.spawn_error {
        return match kind {
            _ if input.port_holder.is_some() => Cause::PortInUse,
            SpawnErrorKind::PortHeld => Cause::PortInUse,
            SpawnErrorKind::NotFound => Cause::CommandNotFound,
            SpawnErrorKind::PermissionDenied => Cause::PermissionDenied,
            SpawnErrorKind::ExecFormat => Cause::ExecFormat,
            SpawnErrorKind::WorkingDir
            | SpawnErrorKind::Secret
            | SpawnErrorKind::SandboxUnavailable
            | SpawnErrorKind::Other => Cause::Other(error.to_owned()),
        };
    }
    if input.port_holder.is_some()
        || stderr_has(&["address already in use", "eaddrinuse", "address in use"])
    {
        return Cause::PortInUse;
    }
    if input.code == Some(127) || stderr_has(&["command not found", ": not found"]) {
        return Cause::CommandNotFound;
    }
    if stderr_has(&["permission denied", "eacces"]) {
        return Cause::PermissionDenied;
    }
    if let Some(line) = input.stderr.iter().rev().find(|l| {
        let l = l.to_ascii_lowercase();
        ["no such file or directory", "enoent", "[errno 2]"]
            .iter()
            .any(|n| l.contains(n))
    }) {
        return Cause::FileNotFound(quoted_path(line));
    }
    if input.code == Some(126) {
        return Cause::PermissionDenied;
    }
    match (input.code, input.signal) {
        (Some(code), _) if input.ran_for.is_some_and(|d| d < IMMEDIATE) => {
            Cause::ExitedImmediately(code)
        }
        (code, signal) => Cause::Other(describe_exit(code, signal)),
    }
}

/// The one-line explanation: cause, detail, stderr, next retry.
pub(crate) fn explain(input: &Input<'_>, now: SystemTime) -> String {
    let mut parts: Vec<String> = Vec::new();
    let exit = describe_exit(input.code, input.signal);
    let head = match classify(input) {
        Cause::CommandNotFound => match input.spawn_error {
            Some((_, _, path)) => format!("command not found: {path}"),
            None => format!("command not found ({exit})"),
        },
        Cause::PermissionDenied => match input.spawn_error {
            Some((_, _, path)) => format!("permission denied: {path}"),
            None => format!("permission denied ({exit})"),
        },
        Cause::FileNotFound(Some(path)) => format!("file not found: {path}"),
        Cause::FileNotFound(None) => format!("a file it needs is missing ({exit})"),
        Cause::ExecFormat => match input.spawn_error {
            Some((_, error, path)) => {
                format!("not a program this system can run: {path} ({error})")
            }
            None => format!("not a program this system can run ({exit})"),
        },
        Cause::PortInUse => match input.port_holder {
            Some(h) => format!("port in use: {h}"),
            None => format!("port in use ({exit})"),
        },
        Cause::ExitedImmediately(code) => format!("exited immediately with code {code}"),
        Cause::Other(what) => what,
    };
    parts.push(head);
    if let Some(why) = input.killed_for {
        parts.push(format!("stopped by xy: {why}"));
    }
    // A spawn failure has no output of its own; older lines would mislead.
    if input.spawn_error.is_none() {
        let lines: Vec<String> = telling(input.stderr)
            .iter()
            .map(|l| quote(l.trim()))
            .collect();
        if !lines.is_empty() {
            parts.push(format!("last stderr: {}", lines.join(" / ")));
        }
    }
    if let Some(at) = input.next_retry {
        let in_ms = at.duration_since(now).unwrap_or_default();
        let secs = in_ms.as_secs_f64();
        parts.push(format!(
            "next retry at {} (in {secs:.1}s)",
            xy_core::time::rfc3339_ms(at)
        ));
    }
    parts.join("; ")
}

/// The lines worth quoting from the last stderr burst, oldest first: the
/// line that names the failure when there is one (a stack trace's last
/// physical line is a frame or the `}` of an error's properties), else the
/// last [`STDERR_LINES`] non-blank lines. In order of preference:
/// - Python: the last unindented line after the last `Traceback` header
///   (`ValueError: …`);
/// - Rust: the last `panicked at` line, with the message line after it;
/// - the newest line, not a stack frame, with `Error`, `Exception` or
///   `fatal` (Node's `Error: …`, Java's, Go's `fatal error: …`).
fn telling(stderr: &[String]) -> Vec<&str> {
    let frame = |l: &str| {
        let t = l.trim_start();
        t.starts_with("at ") || t.starts_with("File \"") || t.starts_with("...")
    };
    let blank = |l: &str| l.trim().is_empty();
    if let Some(tb) = stderr.iter().rposition(|l| {
        l.trim_start()
            .starts_with("Traceback (most recent call last)")
    }) && let Some(last) = stderr[tb + 1..]
        .iter()
        .rev()
        .find(|l| !blank(l) && !l.starts_with(char::is_whitespace))
    {
        return vec![last.as_str()];
    }
    if let Some(p) = stderr.iter().rposition(|l| l.contains("panicked at")) {
        let mut out = vec![stderr[p].as_str()];
        // Since Rust 1.73 the message is on the line after `panicked at …:`.
        if stderr[p].trim_end().ends_with(':')
            && let Some(msg) = stderr.get(p + 1).filter(|l| !blank(l))
        {
            out.push(msg.as_str());
        }
        return out;
    }
    if let Some(l) = stderr.iter().rev().find(|l| {
        !frame(l)
            && (l.contains("Error")
                || l.contains("Exception")
                || l.to_ascii_lowercase().contains("fatal"))
    }) {
        return vec![l.as_str()];
    }
    // Node's closing lines say nothing: the `}` of an error's properties,
    // its version banner, a property line.
    let noise = |l: &str| {
        let t = l.trim();
        t == "}"
            || t == "^"
            || t.starts_with("Node.js v")
            || (l.starts_with("  ") && t.ends_with(','))
    };
    let mut last: Vec<&str> = stderr
        .iter()
        .rev()
        .filter(|l| !blank(l) && !noise(l))
        .take(STDERR_LINES)
        .map(String::as_str)
        .collect();
    last.reverse();
    last
}

/// The first quoted (`'…'`, `"…"`) text of `line` that looks like a path.
fn quoted_path(line: &str) -> Option<String> {
    for q in ['\'', '"'] {
        let mut parts = line.split(q);
        parts.next();
        while let (Some(inside), Some(_)) = (parts.next(), parts.clone().next()) {
            if inside.contains('/') || inside.contains('.') {
                return Some(inside.to_owned());
            }
        }
    }
    None
}

/// Markers of an OS refusal in a server's own text.
const DENIAL_MARKERS: [&str; 4] = [
    "EACCES",
    "EPERM",
    "ermission denied",
    "peration not permitted",
];

/// The lines of a tool result with `isError` that report an OS refusal
/// (SPEC §25: server-memory's `EACCES … dist/memory.jsonl` came back in a
/// tool result, never on stderr), at most three, each cut to
/// [`STDERR_LINE_CHARS`]. The bridge writes them to the server's log, where
/// `status` looks for denials as it does on stderr. Cheap for every other
/// answer: the JSON is parsed only when a marker is in the bytes.
pub(crate) fn denials_in_tool_error(answer: &[u8]) -> Vec<String> {
    let has = |hay: &[u8]| {
        DENIAL_MARKERS
            .iter()
            .any(|m| memchr::memmem::find(hay, m.as_bytes()).is_some())
    };
    if !has(answer) {
        return Vec::new();
    }
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(answer) else {
        return Vec::new();
    };
    let Some(content) = v.pointer("/result/content").and_then(|c| c.as_array()) else {
        return Vec::new();
    };
    content
        .iter()
        .filter_map(|c| c.get("text").and_then(serde_json::Value::as_str))
        .flat_map(str::lines)
        .filter(|l| has(l.as_bytes()))
        .take(3)
        .map(|l| quote(l.trim()))
        .collect()
}

fn quote(line: &str) -> String {
    if line.chars().count() <= STDERR_LINE_CHARS {
        return line.to_owned();
    }
    let mut s: String = line.chars().take(STDERR_LINE_CHARS - 1).collect();
    s.push('…');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn spawn_errors() {
        let i = Input {
            spawn_error: Some((
                SpawnErrorKind::NotFound,
                "No such file or directory (os error 2)",
                "/opt/nope",
            )),
            ..Input::default()
        };
        assert_eq!(classify(&i), Cause::CommandNotFound);
        assert_eq!(
            explain(&i, SystemTime::now()),
            "command not found: /opt/nope"
        );
        let i = Input {
            spawn_error: Some((
                SpawnErrorKind::PermissionDenied,
                "Permission denied (os error 13)",
                "/opt/x",
            )),
            ..Input::default()
        };
        assert_eq!(explain(&i, SystemTime::now()), "permission denied: /opt/x");
        let i = Input {
            spawn_error: Some((
                SpawnErrorKind::PortHeld,
                "port 8421 is held by pid 7 (node s.js)",
                "/opt/x",
            )),
            port_holder: Some("port 8421 is held by pid 7 (node s.js)"),
            ..Input::default()
        };
        assert_eq!(
            explain(&i, SystemTime::now()),
            "port in use: port 8421 is held by pid 7 (node s.js)"
        );
    }

    #[test]
    fn the_kind_decides_not_the_text() {
        // A missing working directory says "No such file or directory"
        // too; it is not a missing command.
        let i = Input {
            spawn_error: Some((
                SpawnErrorKind::WorkingDir,
                "working directory /gone: No such file or directory (os error 2)",
                "/usr/bin/env",
            )),
            ..Input::default()
        };
        assert_eq!(
            explain(&i, SystemTime::now()),
            "working directory /gone: No such file or directory (os error 2)"
        );
        let i = Input {
            spawn_error: Some((
                SpawnErrorKind::ExecFormat,
                "Exec format error (os error 8)",
                "/opt/script",
            )),
            ..Input::default()
        };
        assert_eq!(classify(&i), Cause::ExecFormat);
        assert_eq!(
            explain(&i, SystemTime::now()),
            "not a program this system can run: /opt/script (Exec format error (os error 8))"
        );
    }

    #[test]
    fn exits_by_code_and_stderr() {
        let stderr = lines(&[
            "starting",
            "Error: listen EADDRINUSE: address already in use :::8421",
        ]);
        let i = Input {
            code: Some(1),
            ran_for: Some(Duration::from_millis(300)),
            stderr: &stderr,
            ..Input::default()
        };
        assert_eq!(classify(&i), Cause::PortInUse);
        let sh = lines(&["sh: 1: insikt-mcp: not found"]);
        let i = Input {
            code: Some(127),
            stderr: &sh,
            ..Input::default()
        };
        assert_eq!(classify(&i), Cause::CommandNotFound);
        let i = Input {
            code: Some(126),
            ..Input::default()
        };
        assert_eq!(classify(&i), Cause::PermissionDenied);
        let boom = lines(&["config error", "", "boom: missing API_TOKEN"]);
        let i = Input {
            code: Some(2),
            ran_for: Some(Duration::from_millis(40)),
            stderr: &boom,
            ..Input::default()
        };
        assert_eq!(classify(&i), Cause::ExitedImmediately(2));
        assert_eq!(
            explain(&i, SystemTime::now()),
            "exited immediately with code 2; last stderr: config error / boom: missing API_TOKEN"
        );
        let i = Input {
            code: Some(2),
            ran_for: Some(Duration::from_secs(600)),
            ..Input::default()
        };
        assert_eq!(classify(&i), Cause::Other("exited with code 2".into()));
        let i = Input {
            signal: Some("SIGSEGV"),
            ..Input::default()
        };
        assert_eq!(explain(&i, SystemTime::now()), "killed by SIGSEGV");
    }

    /// Issue 39: an own server added with a relative path, run without a
    /// sandbox from xyd's directory: a missing file, not a permission.
    #[test]
    fn a_missing_file_is_not_called_permission_denied() {
        let py = lines(&[
            "/usr/bin/python3: can't open file '/server.py': [Errno 2] No such file or directory",
        ]);
        let i = Input {
            code: Some(2),
            ran_for: Some(Duration::from_millis(40)),
            stderr: &py,
            ..Input::default()
        };
        assert_eq!(classify(&i), Cause::FileNotFound(Some("/server.py".into())));
        let text = explain(&i, SystemTime::now());
        assert!(
            text.starts_with("file not found: /server.py; last stderr: "),
            "{text}"
        );
        assert!(!text.contains("permission denied"), "{text}");
        let node = lines(&[
            "Error: Cannot find module '/srv/app/server.js'",
            "  code: 'MODULE_NOT_FOUND',",
            "Error: ENOENT: no such file or directory, open 'data/config.json'",
        ]);
        let i = Input {
            code: Some(1),
            stderr: &node,
            ..Input::default()
        };
        assert_eq!(
            classify(&i),
            Cause::FileNotFound(Some("data/config.json".into()))
        );
    }

    #[test]
    fn next_retry_and_health_kill() {
        let now = humantime::parse_rfc3339("2026-11-30T05:00:00Z").unwrap();
        let i = Input {
            signal: Some("SIGTERM"),
            killed_for: Some("3 failed health checks (timed out after 2s)"),
            next_retry: Some(now + Duration::from_millis(2500)),
            ..Input::default()
        };
        assert_eq!(
            explain(&i, now),
            "killed by SIGTERM; stopped by xy: 3 failed health checks (timed out after 2s); \
             next retry at 2026-11-30T05:00:02.500Z (in 2.5s)"
        );
    }

    #[test]
    fn long_lines_are_cut() {
        let long = lines(&[&"x".repeat(1000)]);
        let i = Input {
            code: Some(1),
            stderr: &long,
            ..Input::default()
        };
        let text = explain(&i, SystemTime::now());
        assert!(text.chars().count() < 260, "{text}");
        assert!(text.ends_with('…'));
    }

    fn last_stderr(stderr: &[&str]) -> String {
        let stderr = lines(stderr);
        let i = Input {
            code: Some(1),
            ran_for: Some(Duration::from_millis(300)),
            stderr: &stderr,
            ..Input::default()
        };
        let text = explain(&i, SystemTime::now());
        text.split_once("last stderr: ")
            .map(|(_, s)| s.to_owned())
            .unwrap_or(text)
    }

    // Issue 26: the explainer quoted `}` (the end of the error's
    // properties) as the last stderr line of this Node crash.
    #[test]
    fn a_node_stack_trace_is_quoted_by_its_error_line() {
        let node = [
            "node:events:497",
            "      throw er; // Unhandled 'error' event",
            "      ^",
            "",
            "Error: listen EADDRINUSE: address already in use :::8421",
            "    at Server.setupListenHandle [as _listen2] (node:net:1872:16)",
            "    at listenInCluster (node:net:1920:12)",
            "    at Server.listen (node:net:2008:7)",
            "    at Object.<anonymous> (/srv/weather/server.js:14:8)",
            "    at Module._compile (node:internal/modules/cjs/loader:1469:14)",
            "Emitted 'error' event on Server instance at:",
            "    at emitErrorNT (node:net:1899:8)",
            "    at process.processTicksAndRejections (node:internal/process/task_queues:82:21) {",
            "  code: 'EADDRINUSE',",
            "  errno: -98,",
            "  syscall: 'listen',",
            "  address: '::',",
            "  port: 8421",
            "}",
            "",
            "Node.js v20.17.0",
        ];
        assert_eq!(
            last_stderr(&node),
            "Error: listen EADDRINUSE: address already in use :::8421"
        );
        let thrown = [
            "/srv/weather/server.js:3",
            "  throw new Error(\"missing API_TOKEN\");",
            "  ^",
            "",
            "Error: missing API_TOKEN",
            "    at Object.<anonymous> (/srv/weather/server.js:3:9)",
            "    at new NodeError (node:internal/errors:405:5)",
            "",
            "Node.js v20.17.0",
        ];
        assert_eq!(last_stderr(&thrown), "Error: missing API_TOKEN");
    }

    /// server-memory under the starter sandbox (issue 39), as its tool
    /// result came back; a plain failure says nothing.
    #[test]
    fn a_denial_in_a_tool_result_is_found() {
        let answer = br#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"EACCES: permission denied, open '/home/me/.local/share/xy/packages/memory/2026.8.31/node_modules/@modelcontextprotocol/server-memory/dist/memory.jsonl'"}],"isError":true}}"#;
        assert_eq!(
            denials_in_tool_error(answer),
            [
                "EACCES: permission denied, open '/home/me/.local/share/xy/packages/memory/2026.8.31/node_modules/@modelcontextprotocol/server-memory/dist/memory.jsonl'"
            ]
        );
        let py = br#"{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"Error executing tool write: [Errno 13] Permission denied: '/srv/notes/a.md'\nmore"}],"isError":true}}"#;
        assert_eq!(
            denials_in_tool_error(py),
            ["Error executing tool write: [Errno 13] Permission denied: '/srv/notes/a.md'"]
        );
        let plain = br#"{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"no such note"}],"isError":true}}"#;
        assert!(denials_in_tool_error(plain).is_empty());
    }

    /// Issue 39: `@executeautomation/database-server` without its install
    /// script; its `Error:` line scrolled out of the tail, and `}` /
    /// `Node.js v20…` were quoted.
    #[test]
    fn a_node_stack_without_its_error_line_is_not_quoted_by_its_brace() {
        let tail = [
            " → /srv/db/node_modules/sqlite3/lib/binding/node-v115-linux-x64/node_sqlite3.node",
            "    at bindings (/srv/db/node_modules/bindings/bindings.js:126:9)",
            "    at Object.<anonymous> (/srv/db/node_modules/sqlite3/lib/sqlite3-binding.js:1:37)",
            "  tries: [",
            "    '/srv/db/node_modules/sqlite3/build/node_sqlite3.node',",
            "  ]",
            "}",
            "",
            "Node.js v20.17.0",
        ];
        let got = last_stderr(&tail);
        assert!(!got.contains('}') && !got.contains("Node.js"), "{got}");
    }

    #[test]
    fn a_python_traceback_is_quoted_by_its_last_line() {
        let py = [
            "Traceback (most recent call last):",
            "  File \"/srv/weather/weather.py\", line 4, in <module>",
            "    token = os.environ[\"API_TOKEN\"]",
            "  File \"<frozen os>\", line 714, in __getitem__",
            "KeyError: 'API_TOKEN'",
            "",
            "During handling of the above exception, another exception occurred:",
            "",
            "Traceback (most recent call last):",
            "  File \"/srv/weather/weather.py\", line 6, in <module>",
            "    raise SystemExit(\"set API_TOKEN\")",
            "SystemExit: set API_TOKEN",
        ];
        assert_eq!(last_stderr(&py), "SystemExit: set API_TOKEN");
    }

    #[test]
    fn a_rust_panic_is_quoted_with_its_message() {
        let rust = [
            "thread 'main' panicked at src/main.rs:12:41:",
            "missing API_TOKEN: NotPresent",
            "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace",
        ];
        assert_eq!(
            last_stderr(&rust),
            "thread 'main' panicked at src/main.rs:12:41: / missing API_TOKEN: NotPresent"
        );
        let go = [
            "fatal error: all goroutines are asleep - deadlock!",
            "",
            "goroutine 1 [chan receive]:",
            "main.main()",
            "\t/srv/x/main.go:5 +0x1d",
            "exit status 2",
        ];
        assert_eq!(
            last_stderr(&go),
            "fatal error: all goroutines are asleep - deadlock!"
        );
    }
}
