//! Looking up a server's secrets at each spawn (SPEC §16): a command's
//! stdout, a macOS keychain item (`security find-generic-password`) or a
//! file. Runs off the ServerActor (a task that reports back by message),
//! each lookup bounded by [`TIMEOUT`]. Values are returned to the caller
//! only; errors name the secret and its source, never a value or any of a
//! command's output.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use xy_core::config::{SecretSource, SecretSpec};

/// Longest a single lookup may take (they run concurrently).
pub(crate) const TIMEOUT: Duration = Duration::from_secs(10);
/// Largest secret accepted: a token, a key, a certificate — not a dump.
const MAX_VALUE: usize = 64 * 1024;

/// One resolved secret. `Debug` hides the value.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Resolved {
    pub(crate) name: String,
    pub(crate) value: String,
}

impl std::fmt::Debug for Resolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolved")
            .field("name", &self.name)
            .field("value", &"<hidden>")
            .finish()
    }
}

/// Why a lookup failed; never holds the value or the command's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SecretError {
    /// The secret's name.
    pub name: String,
    /// `command`, `keychain` or `file`.
    pub kind: &'static str,
    /// The source, described (`command \`op\``, the keychain item, the file).
    pub source: String,
    /// What went wrong (`exited with code 1`, `timed out after 10s`).
    pub reason: String,
    /// The command's exit code, when it exited.
    pub exit_code: Option<i32>,
}

impl std::fmt::Display for SecretError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "secret `{}` ({}): {}",
            self.name, self.source, self.reason
        )
    }
}

/// The command line that reads a keychain item (platform independent, so
/// it is tested everywhere with a fake `security`).
pub(crate) fn keychain_command(service: &str, account: Option<&str>) -> (String, Vec<String>) {
    let mut args = vec![
        "find-generic-password".to_owned(),
        "-s".to_owned(),
        service.to_owned(),
    ];
    if let Some(a) = account {
        args.push("-a".to_owned());
        args.push(a.to_owned());
    }
    args.push("-w".to_owned());
    (security_program(), args)
}

/// macOS: the system's own tool when present (a PATH entry cannot stand
/// in for it); elsewhere (tests) whatever `security` is on PATH.
fn security_program() -> String {
    #[cfg(target_os = "macos")]
    if Path::new("/usr/bin/security").exists() && std::env::var_os("XY_TEST_SECURITY").is_none() {
        return "/usr/bin/security".to_owned();
    }
    "security".to_owned()
}

/// Resolves every secret concurrently; the first failure in config order
/// is returned (the others are dropped and their commands killed).
pub(crate) async fn resolve_all(
    specs: Vec<SecretSpec>,
    timeout: Duration,
) -> Result<Vec<Resolved>, SecretError> {
    let mut tasks = Vec::with_capacity(specs.len());
    for spec in specs {
        tasks.push(tokio::spawn(
            async move { resolve_one(&spec, timeout).await },
        ));
    }
    let mut out = Vec::with_capacity(tasks.len());
    let mut first_err = None;
    for t in tasks {
        match t.await {
            Ok(Ok(r)) => out.push(r),
            Ok(Err(e)) => {
                first_err.get_or_insert(e);
            }
            Err(join) => {
                first_err.get_or_insert(SecretError {
                    name: String::new(),
                    kind: "command",
                    source: String::new(),
                    reason: format!("lookup task failed: {join}"),
                    exit_code: None,
                });
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

async fn resolve_one(spec: &SecretSpec, timeout: Duration) -> Result<Resolved, SecretError> {
    let fail = |reason: String, exit_code: Option<i32>| SecretError {
        name: spec.name.clone(),
        kind: spec.source.kind(),
        source: spec.source.describe(),
        reason,
        exit_code,
    };
    let raw = match &spec.source {
        SecretSource::Command { program, args } => run(program, args, timeout)
            .await
            .map_err(|(r, c)| fail(r, c))?,
        SecretSource::Keychain { service, account } => {
            let (program, args) = keychain_command(service, account.as_deref());
            run(&program, &args, timeout).await.map_err(|(r, c)| {
                let r = if r.starts_with("cannot run") && !cfg!(target_os = "macos") {
                    format!("{r} (keychain secrets use macOS's `security` tool)")
                } else {
                    r
                };
                fail(r, c)
            })?
        }
        SecretSource::File(path) => read_file(path, timeout).await.map_err(|r| fail(r, None))?,
    };
    let value = String::from_utf8(raw).map_err(|_| fail("the value is not UTF-8".into(), None))?;
    let value = strip_newline(value);
    if value.is_empty() {
        return Err(fail("the value is empty".into(), None));
    }
    if value.contains('\0') {
        return Err(fail("the value contains a NUL byte".into(), None));
    }
    Ok(Resolved {
        name: spec.name.clone(),
        value,
    })
}

/// One trailing `\n` (or `\r\n`) is how tools end their output; it is not
/// part of the value.
fn strip_newline(mut s: String) -> String {
    if s.ends_with('\n') {
        s.pop();
        if s.ends_with('\r') {
            s.pop();
        }
    }
    s
}

/// Runs `program args` without a shell, in its own process group, and
/// returns its stdout; stderr is read and dropped (it may echo the secret).
/// The whole group is killed on timeout.
async fn run(
    program: &str,
    args: &[String],
    timeout: Duration,
) -> Result<Vec<u8>, (String, Option<i32>)> {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = cmd
        .spawn()
        .map_err(|e| (format!("cannot run `{program}`: {e}"), None))?;
    let pgid = child.id().and_then(|p| i32::try_from(p).ok());
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let work = async {
        let mut out = Vec::new();
        let mut sink = Vec::new();
        let read_out = async {
            if let Some(s) = stdout.as_mut() {
                let _ = s.take(MAX_VALUE as u64 + 1).read_to_end(&mut out).await;
            }
        };
        let read_err = async {
            if let Some(s) = stderr.as_mut() {
                let _ = s.take(MAX_VALUE as u64).read_to_end(&mut sink).await;
            }
        };
        tokio::join!(read_out, read_err);
        let status = child.wait().await;
        (out, status)
    };
    match tokio::time::timeout(timeout, work).await {
        Ok((out, Ok(status))) => {
            if let Some(pgid) = pgid {
                // A helper it left behind must not linger.
                let _ = crate::os::group::signal_group(pgid, nix::sys::signal::Signal::SIGKILL);
            }
            if !status.success() {
                return Err(match status.code() {
                    Some(code) => (format!("`{program}` exited with code {code}"), Some(code)),
                    None => (format!("`{program}` was killed by a signal"), None),
                });
            }
            if out.len() > MAX_VALUE {
                return Err((format!("`{program}` printed more than 64 KiB"), None));
            }
            Ok(out)
        }
        Ok((_, Err(e))) => Err((format!("waiting for `{program}` failed: {e}"), None)),
        Err(_) => {
            if let Some(pgid) = pgid {
                let _ = crate::os::group::signal_group(pgid, nix::sys::signal::Signal::SIGKILL);
            }
            Err((
                format!(
                    "`{program}` did not finish within {}",
                    humantime::format_duration(timeout)
                ),
                None,
            ))
        }
    }
}

async fn read_file(path: &Path, timeout: Duration) -> Result<Vec<u8>, String> {
    let p = path.to_path_buf();
    let read = tokio::task::spawn_blocking(move || {
        use std::io::Read;
        let f = std::fs::File::open(&p)?;
        let mut out = Vec::new();
        f.take(MAX_VALUE as u64 + 1).read_to_end(&mut out)?;
        Ok::<_, std::io::Error>(out)
    });
    match tokio::time::timeout(timeout, read).await {
        Ok(Ok(Ok(v))) if v.len() > MAX_VALUE => Err("the file is larger than 64 KiB".into()),
        Ok(Ok(Ok(v))) => Ok(v),
        Ok(Ok(Err(e))) => Err(format!("cannot read: {e}")),
        Ok(Err(e)) => Err(format!("cannot read: {e}")),
        Err(_) => Err("reading did not finish in time".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, source: SecretSource) -> SecretSpec {
        SecretSpec {
            name: name.into(),
            source,
        }
    }

    fn sh(script: &str) -> SecretSource {
        SecretSource::Command {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
        }
    }

    #[test]
    fn keychain_command_line() {
        let (p, a) = keychain_command("svc", Some("me"));
        assert!(p.ends_with("security"));
        assert_eq!(a, ["find-generic-password", "-s", "svc", "-a", "me", "-w"]);
        let (_, a) = keychain_command("svc", None);
        assert_eq!(a, ["find-generic-password", "-s", "svc", "-w"]);
    }

    #[tokio::test]
    async fn command_and_file_values() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("s");
        std::fs::write(&f, "from-file\r\n").unwrap();
        let got = resolve_all(
            vec![
                spec("A", sh("printf 'tok-123\\n'")),
                spec("B", SecretSource::File(f)),
            ],
            TIMEOUT,
        )
        .await
        .unwrap();
        assert_eq!(got[0].value, "tok-123");
        assert_eq!(got[1].value, "from-file");
        assert!(!format!("{got:?}").contains("tok-123"));
    }

    #[tokio::test]
    async fn failing_command_names_secret_and_code_not_output() {
        let err = resolve_all(
            vec![spec(
                "TOKEN",
                sh("echo leaked-secret-output; echo oops >&2; exit 3"),
            )],
            TIMEOUT,
        )
        .await
        .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("TOKEN") && text.contains("code 3"), "{text}");
        assert!(!text.contains("leaked") && !text.contains("oops"), "{text}");
        assert_eq!(err.exit_code, Some(3));
    }

    #[tokio::test]
    async fn hanging_command_times_out_and_is_killed() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let script = format!("echo $$ > {}; exec sleep 30", pidfile.display());
        let err = resolve_all(vec![spec("SLOW", sh(&script))], Duration::from_millis(500))
            .await
            .unwrap_err();
        assert!(err.reason.contains("did not finish"), "{err}");
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        xy_testbins::wait::poll(
            "the lookup to be killed",
            Duration::from_secs(10),
            || async { (!crate::os::group::pid_alive(pid)).then_some(()) },
        )
        .await;
    }

    #[tokio::test]
    async fn empty_and_missing() {
        let e = resolve_all(vec![spec("E", sh("true"))], TIMEOUT)
            .await
            .unwrap_err();
        assert!(e.reason.contains("empty"));
        let e = resolve_all(
            vec![spec("F", SecretSource::File("/nonexistent/x".into()))],
            TIMEOUT,
        )
        .await
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("secret `F` (file /nonexistent/x): cannot read")
        );
    }
}
