//! Confining a server's child (SPEC §21): from the `sandbox { }` block and
//! the resolved program to the facts of this spawn ([`SpawnFacts`]: home,
//! program and `#!` interpreter, working dir, a private temp dir emptied
//! at each spawn), the effective [`Rules`], and the OS enforcement put on
//! the command before it is spawned (`linux`: Landlock + seccomp in a
//! `pre_exec`; `macos`: a Seatbelt profile through `sandbox-exec`). A rule
//! the OS cannot enforce fails the spawn with `SandboxUnavailable`; a
//! server without a block is spawned exactly as before.

pub(crate) mod egress;
#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "macos")]
mod macos;

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use xy_core::config::ServerConfig;
use xy_core::protocol::{LogStream, SandboxStatus, SpawnErrorKind, Transport};
use xy_core::sandbox::{Denied, NetworkMode, Os, SpawnFacts};

use crate::os::spawn::SpawnError;

/// What the enforcement needs beyond the config: where temp dirs live, the
/// egress proxy's grant for `network "allow"`, and (debug builds) a
/// pretended Landlock ABI so the unavailable path is tested anywhere.
#[derive(Debug, Clone, Default)]
pub(crate) struct SandboxEnv {
    /// `<state>/sandbox`: each server's temp dir is `<name>/tmp` beneath it
    /// (`Paths::sandbox_temp`).
    pub(crate) root: PathBuf,
    /// `<data>/data`: each server's private home and data dir is `<name>`
    /// beneath it (`Paths::server_data`, SPEC §25).
    pub(crate) data_root: PathBuf,
    /// The Landlock ABI to pretend the kernel has (`XY_SANDBOX_FAKE_ABI`,
    /// read only in debug builds; Linux only).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) fake_abi: Option<i32>,
}

impl SandboxEnv {
    /// `root` and `data_root` with the fake ABI from the environment
    /// (debug builds only).
    pub(crate) fn new(root: PathBuf, data_root: PathBuf) -> SandboxEnv {
        let fake_abi = if cfg!(debug_assertions) {
            std::env::var("XY_SANDBOX_FAKE_ABI")
                .ok()
                .and_then(|v| v.parse().ok())
        } else {
            None
        };
        SandboxEnv {
            root,
            data_root,
            fake_abi,
        }
    }

    /// The private home and data dir of server `name`.
    pub(crate) fn data_dir(&self, name: &str) -> PathBuf {
        self.data_root.join(name)
    }

    /// The private temp dir of server `name`.
    pub(crate) fn temp_dir(&self, name: &str) -> PathBuf {
        self.root.join(name).join("tmp")
    }
}

/// The egress proxy's grant for one spawn under `network "allow"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProxyGrant {
    /// The proxy's loopback port (the one TCP port the child may connect to).
    pub(crate) port: u16,
    /// `http://<server>:<token>@127.0.0.1:<port>`, given as `HTTPS_PROXY` & co.
    pub(crate) url: String,
}

/// A spawn's confinement, ready to put on the command.
pub(crate) struct Prepared {
    /// What `status.sandbox` shows for this spawn (no denials yet).
    pub(crate) status: SandboxStatus,
    /// The home directory `~` expanded against (denials are shown with it).
    pub(crate) home: PathBuf,
    /// Variables set on top of the child's env (`HOME`, `TMPDIR`, caches,
    /// proxy variables).
    env: Vec<(&'static str, OsString)>,
    /// `env-pass` names: xyd's variables the built environment takes
    /// besides the fixed list (SPEC §24).
    env_pass: Vec<String>,
    /// The working dir when the config names none and the default is the
    /// data dir (a pinned install, SPEC §25).
    cwd: Option<PathBuf>,
    /// Variables removed from the child's env (`NO_PROXY`).
    env_remove: Vec<&'static str>,
    #[cfg(target_os = "linux")]
    enforcer: linux::Enforcer,
    #[cfg(target_os = "macos")]
    enforcer: macos::Enforcer,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

fn unavailable(program: &Path, error: String) -> SpawnError {
    SpawnError {
        path: program.display().to_string(),
        error,
        kind: SpawnErrorKind::SandboxUnavailable,
    }
}

/// The child's home: its env block's `HOME`, else the daemon's.
pub(crate) fn child_home(config: &ServerConfig) -> PathBuf {
    config
        .env
        .get("HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/"))
}

/// The interpreter named by `program`'s `#!` line, resolved and
/// canonicalized: `#!/usr/bin/env node` → `node` on `path` (the child's
/// PATH, else the daemon's). `None` for a binary or an unreadable file.
#[cfg(test)]
pub(crate) fn interpreter(program: &Path, path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    std::fs::canonicalize(interpreter_as_named(program, path)?).ok()
}

/// [`interpreter`] before symlinks are followed: a venv's entry script
/// names `<venv>/bin/python`, a link out of the venv.
fn interpreter_as_named(program: &Path, path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(program).ok()?.read(&mut head).ok()?;
    let head = head.get(..n)?;
    let line = head.strip_prefix(b"#!")?;
    let line = &line[..line.iter().position(|&b| b == b'\n').unwrap_or(line.len())];
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split_whitespace();
    let first = words.next()?;
    if Path::new(first).file_name().is_some_and(|n| n == "env") {
        // `env -S node --flag`, `env node`: the first word that is no option.
        let name = words.find(|w| !w.starts_with('-'))?;
        xy_core::config::resolve_command_in(name, path, None).ok()
    } else {
        Some(PathBuf::from(first))
    }
}

/// Creates `dir` (and missing parents) private, or makes an existing one
/// private again: a server's home keeps its files across spawns.
fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.is_dir() {
        return Err(std::io::Error::other("not a directory"));
    }
    if meta.permissions().mode() & 0o777 != 0o700 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Empties (or creates) `dir` as a private 0700 directory.
fn fresh_temp(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    if let Some(parent) = dir.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)?;
    }
    std::fs::DirBuilder::new().mode(0o700).create(dir)
}

/// Prepares `config`'s confinement for a spawn of `program` (as resolved),
/// or `Ok(None)` when the server has no `sandbox` block. `extra_read`:
/// paths the spawn must read beyond the rules (`sandbox_test`'s probe is
/// xyd itself).
///
/// # Errors
///
/// `SandboxUnavailable` naming the rule the OS cannot enforce, or the temp
/// dir that cannot be made.
pub(crate) fn prepare(
    config: &ServerConfig,
    program: &Path,
    env: &SandboxEnv,
    proxy: Option<&ProxyGrant>,
    extra_read: &[PathBuf],
) -> Result<Option<Prepared>, SpawnError> {
    let Some(block) = &config.sandbox else {
        return Ok(None);
    };
    let home = child_home(config);
    let canonical = std::fs::canonicalize(program).unwrap_or_else(|_| program.to_path_buf());
    let path_var: Option<OsString> = config.env.get("PATH").map(OsString::from);
    let named_interp = interpreter_as_named(program, path_var.as_deref());
    let interp = named_interp
        .as_deref()
        .and_then(|i| std::fs::canonicalize(i).ok());
    // A venv is judged on the paths as named (its `python` links out of it),
    // then canonicalized like every other rule.
    let is_file = |p: &Path| p.is_file();
    let venv = [Some(program), named_interp.as_deref()]
        .into_iter()
        .flatten()
        .find_map(|p| xy_core::sandbox::venv_root(p, &is_file))
        .and_then(|v| std::fs::canonicalize(v).ok());
    let data_dir = env.data_dir(&config.name);
    private_dir(&data_dir).map_err(|e| {
        unavailable(
            program,
            format!("sandbox home dir {}: {e}", data_dir.display()),
        )
    })?;
    let data_dir = std::fs::canonicalize(&data_dir).unwrap_or(data_dir);
    // A pinned install's files are its code (read-only): it works in its
    // data dir unless the file says otherwise.
    let cwd = (config.working_dir.is_none() && config.package.is_some()).then(|| data_dir.clone());
    let working_dir = match (&config.working_dir, &cwd) {
        (Some(d), _) => std::fs::canonicalize(d).unwrap_or_else(|_| d.clone()),
        (None, Some(d)) => d.clone(),
        (None, None) => std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
    };
    let script = xy_core::sandbox::script_candidate(&canonical, &config.args, &working_dir)
        .and_then(|s| std::fs::canonicalize(s).ok())
        .filter(|s| s.is_file());
    let temp_dir = env.temp_dir(&config.name);
    fresh_temp(&temp_dir).map_err(|e| {
        unavailable(
            program,
            format!("sandbox temp dir {}: {e}", temp_dir.display()),
        )
    })?;
    let facts = SpawnFacts {
        home: &home,
        program: &canonical,
        interpreter: interp.as_deref(),
        script: script.as_deref(),
        working_dir: &working_dir,
        temp_dir: &temp_dir,
        venv: venv.as_deref(),
        data_dir: Some(&data_dir),
        listen_port: (config.transport == Transport::Http).then_some(config.port),
        os: Os::current(),
    };
    let mut rules = xy_core::sandbox::effective(block, &facts);
    // A venv made with `--copies`: its `python` loads the standard library
    // from beside the interpreter it was copied from (SPEC §25, D321).
    if let Some(base) = venv
        .as_ref()
        .and_then(|v| std::fs::read_to_string(v.join("pyvenv.cfg")).ok())
        .and_then(|cfg| xy_core::sandbox::venv_home(&cfg))
        .and_then(|dir| std::fs::canonicalize(dir).ok())
    {
        let rule = xy_core::sandbox::program_rule(&base.join("python"), &home);
        if !rules.can_read(&rule) {
            rules.read.push(xy_core::sandbox::PathRule {
                path: rule,
                source: xy_core::sandbox::RuleSource::Program,
            });
        }
    }
    for p in extra_read {
        rules.read.push(xy_core::sandbox::PathRule {
            path: p.clone(),
            source: xy_core::sandbox::RuleSource::Program,
        });
    }
    if rules.network == NetworkMode::Allow && proxy.is_none() {
        return Err(unavailable(
            program,
            "sandbox.network \"allow\" needs xy's egress proxy, which is not running".to_owned(),
        ));
    }
    let mut vars: Vec<(&'static str, OsString)> = ["TMPDIR", "TMP", "TEMP"]
        .into_iter()
        .map(|k| (k, temp_dir.clone().into_os_string()))
        .collect();
    if !config.env.contains_key("HOME") {
        vars.push(("HOME", data_dir.clone().into_os_string()));
    }
    // The user's caches the rules grant stay the ones the tools use.
    for (var, rel) in xy_core::sandbox::user_caches(Os::current()) {
        let cache = home.join(rel);
        if !config.env.contains_key(*var) && rules.can_write(&cache) {
            vars.push((var, cache.into_os_string()));
        }
    }
    let mut env_remove = Vec::new();
    if let (NetworkMode::Allow, Some(grant)) = (rules.network, proxy) {
        for k in [
            "HTTPS_PROXY",
            "HTTP_PROXY",
            "https_proxy",
            "http_proxy",
            "ALL_PROXY",
            "all_proxy",
        ] {
            vars.push((k, OsString::from(&grant.url)));
        }
        env_remove.extend(["NO_PROXY", "no_proxy"]);
    }
    let proxy_port = proxy
        .filter(|_| rules.network == NetworkMode::Allow)
        .map(|g| g.port);
    #[cfg(target_os = "linux")]
    let (enforcer, enforcement) = linux::Enforcer::build(&rules, proxy_port, env.fake_abi)
        .map_err(|e| unavailable(program, e))?;
    #[cfg(target_os = "macos")]
    let (enforcer, enforcement) =
        macos::Enforcer::build(&rules, proxy_port).map_err(|e| unavailable(program, e))?;
    let mut enforcement = enforcement;
    if let Some(port) = proxy_port {
        enforcement.push(format!("egress proxy 127.0.0.1:{port}"));
    }
    Ok(Some(Prepared {
        status: SandboxStatus {
            rules,
            enforcement,
            temp_dir: temp_dir.display().to_string(),
            denials: Vec::new(),
        },
        home,
        env: vars,
        env_pass: block.env_pass.clone(),
        cwd,
        env_remove,
        enforcer,
    }))
}

/// The command a server's child (or the probe run as if it were one) is
/// spawned with: `program` — behind `sandbox-exec` on macOS when confined —
/// with `config`'s env and working dir, in its own process group, killed on
/// drop, the descriptor limit given back, then the sandbox's environment
/// and enforcement put on last (they win over the config's env), and the
/// spawn's egress grant activated for the returned run (what `status`
/// shows, and where the proxy records refusals). A confined child's
/// environment is built, not inherited (SPEC §24): xyd's variables that
/// [`xy_core::sandbox::passes_env`] names, then the config's. Arguments
/// and stdio are the caller's.
pub(crate) fn command(
    config: &ServerConfig,
    program: &Path,
    sandbox: Option<&mut Prepared>,
    egress: Option<(ProxyGrant, String)>,
) -> (tokio::process::Command, Option<Arc<SandboxRun>>) {
    let mut cmd = match &sandbox {
        Some(s) => s.command(program),
        None => tokio::process::Command::new(program),
    };
    if let Some(s) = &sandbox {
        cmd.env_clear();
        for (k, v) in std::env::vars_os() {
            if k.to_str()
                .is_some_and(|k| xy_core::sandbox::passes_env(k, &s.env_pass))
            {
                cmd.env(k, v);
            }
        }
    }
    cmd.envs(&config.env).process_group(0).kill_on_drop(true);
    match (
        &config.working_dir,
        sandbox.as_ref().and_then(|s| s.cwd.as_ref()),
    ) {
        (Some(dir), _) | (None, Some(dir)) => {
            cmd.current_dir(dir);
        }
        (None, None) => {}
    }
    crate::os::limits::restore_for_child(&mut cmd);
    let run = sandbox.map(|s| {
        s.apply(&mut cmd);
        s.run()
    });
    if let (Some((_, authorization)), Some(run)) = (egress, &run) {
        crate::os::sandbox::egress::proxy().activate(authorization, run);
    }
    (cmd, run)
}

impl Prepared {
    /// The command to spawn for `program` (on macOS, `sandbox-exec` in front).
    pub(crate) fn command(&self, program: &Path) -> tokio::process::Command {
        self.enforcer.command(program)
    }

    /// Puts the environment and the enforcement on `cmd`; call after the
    /// config's own env is set (these win) and before spawning.
    pub(crate) fn apply(&mut self, cmd: &mut tokio::process::Command) {
        for k in &self.env_remove {
            cmd.env_remove(k);
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        self.enforcer.apply(cmd);
    }

    /// What the ServerActor keeps for this spawn (`status.sandbox`, denials).
    pub(crate) fn run(&self) -> Arc<SandboxRun> {
        Arc::new(SandboxRun {
            status: self.status.clone(),
            home: self.home.clone(),
            since: SystemTime::now(),
            reported: Mutex::new(VecDeque::new()),
        })
    }
}

/// Denials kept per spawn, and quoted in `status`.
pub(crate) const MAX_DENIALS: usize = 10;

/// One sandboxed spawn as `status` shows it: its rules and enforcement,
/// and the denials reported for it (by the egress proxy; the child's own
/// error lines are read from the log ring when `status` is asked, D103).
#[derive(Debug)]
pub(crate) struct SandboxRun {
    status: SandboxStatus,
    home: PathBuf,
    since: SystemTime,
    reported: Mutex<VecDeque<(SystemTime, String)>>,
}

impl SandboxRun {
    /// Records a denial xy itself saw (the egress proxy's refusals).
    pub(crate) fn record(&self, denied: &Denied) {
        let text = xy_core::sandbox::explain_denial(&self.status.rules, denied, &self.home);
        let mut r = self
            .reported
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        r.push_back((SystemTime::now(), text));
        while r.len() > MAX_DENIALS {
            r.pop_front();
        }
    }

    /// The `allow-host` lines of this spawn.
    pub(crate) fn allow_hosts(&self) -> &[xy_core::sandbox::HostPort] {
        &self.status.rules.allow_hosts
    }

    /// `status.sandbox`: the rules and the denials since the spawn, newest
    /// last, from the reported ones and the child's stderr `lines`.
    pub(crate) fn status(&self, lines: &[crate::logs::LogLine]) -> SandboxStatus {
        let mut all: Vec<(SystemTime, String)> = self
            .reported
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .cloned()
            .collect();
        all.extend(
            lines
                .iter()
                .filter(|l| l.ts >= self.since && l.stream == LogStream::Stderr)
                .filter_map(|l| {
                    let d = xy_core::sandbox::denials::denial_in_line_under(
                        &l.line,
                        &self.status.rules,
                        &|p| p.exists(),
                    )?;
                    Some((
                        l.ts,
                        xy_core::sandbox::explain_denial(&self.status.rules, &d, &self.home),
                    ))
                }),
        );
        all.sort_by_key(|(t, _)| *t);
        all.dedup_by(|a, b| a.1 == b.1);
        let skip = all.len().saturating_sub(MAX_DENIALS);
        let mut status = self.status.clone();
        status.denials = all.into_iter().skip(skip).map(|(_, t)| t).collect();
        status
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpreter_follows_env_to_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("s");
        std::fs::write(&script, "#!/usr/bin/env -S sh -e\necho hi\n").unwrap();
        let sh = interpreter(&script, Some(std::ffi::OsStr::new("/bin:/usr/bin"))).unwrap();
        assert_eq!(sh, std::fs::canonicalize("/bin/sh").unwrap());
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        assert_eq!(
            interpreter(&script, None).unwrap(),
            std::fs::canonicalize("/bin/sh").unwrap()
        );
        std::fs::write(&script, "\x7fELF").unwrap();
        assert_eq!(interpreter(&script, None), None);
    }

    #[test]
    fn denials_merge_the_proxy_and_stderr_newest_last_at_most_ten() {
        // A refused open of a missing path is a failed create (D323): the
        // key this test reads must exist for its denial to be a read.
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::write(home.join(".ssh/id_rsa"), "key").unwrap();
        let work = home.join("work");
        let rules = xy_core::sandbox::effective(
            &xy_core::sandbox::SandboxConfig::default(),
            &SpawnFacts {
                home,
                script: None,
                program: Path::new("/usr/bin/node"),
                interpreter: None,
                working_dir: &work,
                temp_dir: Path::new("/tmp/t"),
                venv: None,
                data_dir: None,
                listen_port: None,
                os: Os::Linux,
            },
        );
        let run = SandboxRun {
            status: SandboxStatus {
                rules,
                enforcement: vec![],
                temp_dir: "/tmp/t".into(),
                denials: vec![],
            },
            home: home.to_owned(),
            since: SystemTime::now(),
            reported: Mutex::new(VecDeque::new()),
        };
        let line = |text: &str, stream| crate::logs::LogLine {
            name: "n".into(),
            stream,
            line: text.to_owned(),
            ts: SystemTime::now(),
        };
        let before = crate::logs::LogLine {
            ts: run.since - std::time::Duration::from_secs(1),
            ..line(
                &format!(
                    "Error: EACCES: permission denied, open '{}/old'",
                    home.display()
                ),
                LogStream::Stderr,
            )
        };
        run.record(&Denied::Connect("evil.example:443".into()));
        let mut lines = vec![before];
        lines.push(line(
            &format!(
                "Error: EACCES: permission denied, open '{}/.ssh/id_rsa'",
                home.display()
            ),
            LogStream::Stderr,
        ));
        lines.push(line(
            &format!(
                "Error: EACCES: permission denied, open '{}/.aws/x'",
                home.display()
            ),
            LogStream::Stdout,
        ));
        lines.push(line("all fine", LogStream::Stderr));
        let s = run.status(&lines);
        assert_eq!(
            s.denials,
            vec![
                "sandbox: connection to evil.example:443 denied (network \"any\": not the sandbox; check a firewall)".to_owned(),
                "sandbox: read of ~/.ssh/id_rsa denied (not under sandbox.read); \
                 fix: add `read \"~/.ssh/id_rsa\"` to the sandbox block"
                    .to_owned(),
            ]
        );
        for i in 0..15 {
            run.record(&Denied::Bind(9000 + i));
        }
        let s = run.status(&[]);
        assert_eq!(s.denials.len(), MAX_DENIALS);
        assert!(
            s.denials.last().unwrap().contains("9014"),
            "{:?}",
            s.denials
        );
    }

    #[test]
    fn fresh_temp_empties_and_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("a/tmp");
        fresh_temp(&t).unwrap();
        std::fs::write(t.join("left"), "x").unwrap();
        fresh_temp(&t).unwrap();
        assert!(!t.join("left").exists());
        let mode = std::fs::metadata(&t).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
    }
}
