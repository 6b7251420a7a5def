//! The sandbox's vocabulary (SPEC §21), shared by the daemon (which
//! enforces it), `xyctl` (which renders it) and the config parser: the
//! block as written ([`SandboxConfig`]), the rules a spawn actually gets
//! once defaults are added ([`Rules`], from the pure [`effective`]), and
//! the one-line explanation of a denial in terms of the block
//! ([`explain_denial`]). No I/O here: the caller hands in the home
//! directory, the resolved program and the private temp dir.
//!
//! Beside it: [`seatbelt`] (the macOS profile, pure text), [`denials`]
//! (a denial recognised in a confined child's error line) and [`probe`]
//! (the exfiltration probes, which do the I/O they test).

pub mod denials;
pub mod probe;
pub mod seatbelt;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// `network "…"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NetworkMode {
    /// No network rule (the default).
    #[default]
    Any,
    /// No outbound connections, no UDP, no Unix sockets outside the allowed
    /// paths; listening only on a supervised HTTP server's own port.
    None,
    /// Outbound only to the `allow-host` lines (through xy's egress proxy
    /// where the kernel cannot filter by host).
    Allow,
}

impl NetworkMode {
    /// The word as written in a config file.
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkMode::Any => "any",
            NetworkMode::None => "none",
            NetworkMode::Allow => "allow",
        }
    }

    /// Parses the config word.
    pub fn parse(s: &str) -> Option<NetworkMode> {
        match s {
            "any" => Some(NetworkMode::Any),
            "none" => Some(NetworkMode::None),
            "allow" => Some(NetworkMode::Allow),
            _ => None,
        }
    }
}

/// One `allow-host "host:port"` line.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HostPort {
    /// A DNS name or an IP literal (IPv6 without brackets), lowercase.
    pub host: String,
    /// The TCP port.
    pub port: u16,
}

impl HostPort {
    /// Parses `host:port` (`[v6]:port` for IPv6 literals). The host is
    /// lowercased; `*` and empty hosts are refused (a wildcard is what
    /// `network "any"` says).
    pub fn parse(s: &str) -> Result<HostPort, String> {
        let (host, port) = if let Some(rest) = s.strip_prefix('[') {
            let (h, p) = rest
                .split_once("]:")
                .ok_or_else(|| format!("{s:?} is not [ipv6]:port"))?;
            (h, p)
        } else {
            s.rsplit_once(':').ok_or_else(|| {
                format!("{s:?} has no port; write host:port, e.g. \"api.github.com:443\"")
            })?
        };
        if host.is_empty() || host.contains('*') || host.contains('/') {
            return Err(format!("{host:?} is not a host name or IP address"));
        }
        let port: u16 = port
            .parse()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("{port:?} is not a port (1–65535)"))?;
        Ok(HostPort {
            host: host.to_ascii_lowercase(),
            port,
        })
    }
}

impl std::fmt::Display for HostPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// `sandbox { … }` as written (paths unexpanded: `~` is resolved at spawn,
/// against the home directory the child gets).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct SandboxConfig {
    /// `read` paths: absolute or `~/…`.
    pub read: Vec<String>,
    /// `write` paths (readable too).
    pub write: Vec<String>,
    /// `network`.
    pub network: NetworkMode,
    /// `allow-host` lines (only with [`NetworkMode::Allow`]).
    pub allow_hosts: Vec<HostPort>,
    /// `reach "<server>"` lines: the servers this one's processes may use
    /// through xy's listeners (SPEC §24); none by default.
    pub reach: Vec<String>,
    /// `env-pass "NAME"` lines: variables of xyd's environment the child
    /// gets besides [`passes_env`]'s fixed list (SPEC §24).
    pub env_pass: Vec<String>,
}

/// The variables of xyd's own environment a confined child inherits
/// (SPEC §24): what programs need to find programs, say who they run as,
/// speak the user's language and draw on a terminal. `HOME` and `TMPDIR`
/// are the sandbox's own (not xyd's); the file's `env` block, secrets and
/// `env-pass` lines come on top.
pub const PASSED_ENV: &[&str] = &["PATH", "USER", "LOGNAME", "LANG", "LANGUAGE", "TERM", "TZ"];

/// Whether xyd's variable `name` reaches a confined child: [`PASSED_ENV`],
/// `LC_*`, or an `env-pass` line.
pub fn passes_env(name: &str, env_pass: &[String]) -> bool {
    PASSED_ENV.contains(&name) || name.starts_with("LC_") || env_pass.iter().any(|p| p == name)
}

/// Whether `name` can be an `env-pass` line: a POSIX-portable variable name.
pub fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The user's package caches a confined child keeps using although its
/// `HOME` is its own data dir: the variable that points the tool at its
/// cache, and the cache's home-relative path. xy sets a variable only when
/// the rules make its cache writable (the starter block grants the
/// launcher's), so a cache the block does not grant is the server's own,
/// under its private home.
pub fn user_caches(os: Os) -> &'static [(&'static str, &'static str)] {
    match os {
        Os::Linux => &[
            ("npm_config_cache", ".npm"),
            ("UV_CACHE_DIR", ".cache/uv"),
            ("UV_PYTHON_INSTALL_DIR", ".local/share/uv/python"),
            ("UV_TOOL_DIR", ".local/share/uv/tools"),
            ("PIP_CACHE_DIR", ".cache/pip"),
            ("PIPX_HOME", ".local/share/pipx"),
            ("BUN_INSTALL_CACHE_DIR", ".bun/install/cache"),
            ("DENO_DIR", ".cache/deno"),
        ],
        Os::Macos => &[
            ("npm_config_cache", ".npm"),
            ("UV_CACHE_DIR", ".cache/uv"),
            ("UV_PYTHON_INSTALL_DIR", ".local/share/uv/python"),
            ("UV_TOOL_DIR", ".local/share/uv/tools"),
            ("PIP_CACHE_DIR", "Library/Caches/pip"),
            ("PIPX_HOME", ".local/pipx"),
            ("BUN_INSTALL_CACHE_DIR", ".bun/install/cache"),
            ("DENO_DIR", "Library/Caches/deno"),
        ],
    }
}

/// The virtualenv a Python program as written belongs to: `…/bin/python`
/// (or any `…/bin/<entry>`) whose directory above holds `pyvenv.cfg`.
/// Judged on the path before symlinks are followed: a venv's `python` is a
/// link to the interpreter it was made from (`/usr/bin/python3.12`, a
/// uv-managed one), so its resolved path says nothing of the venv.
pub fn venv_root(program: &Path, exists: &dyn Fn(&Path) -> bool) -> Option<PathBuf> {
    let bin = program.parent()?;
    if !bin
        .file_name()
        .is_some_and(|n| n == "bin" || n == "Scripts")
    {
        return None;
    }
    let root = bin.parent()?;
    exists(&root.join("pyvenv.cfg")).then(|| root.to_path_buf())
}

/// The directory of the interpreter a venv was made from: `home = …` in
/// its `pyvenv.cfg` text. A venv made with `--copies` has its own `python`
/// binary, which still loads the standard library from beside that
/// interpreter; its [`program_rule`] is read like the venv (SPEC §25).
pub fn venv_home(pyvenv_cfg: &str) -> Option<PathBuf> {
    pyvenv_cfg.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        let v = v.trim();
        (k.trim() == "home" && Path::new(v).is_absolute()).then(|| PathBuf::from(v))
    })
}

/// Expands a leading `~` against `home`; other paths are returned as they are.
pub fn expand_home(path: &str, home: &Path) -> PathBuf {
    if path == "~" {
        home.to_path_buf()
    } else if let Some(rest) = path.strip_prefix("~/") {
        home.join(rest)
    } else {
        PathBuf::from(path)
    }
}

/// Shows `path` with the home directory as `~`, the way users write it.
pub fn tilde(path: &Path, home: &Path) -> String {
    match path.strip_prefix(home) {
        Ok(rest) if rest.as_os_str().is_empty() => "~".to_owned(),
        Ok(rest) => format!("~/{}", rest.display()),
        Err(_) => path.display().to_string(),
    }
}

/// Why a path is in the effective rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleSource {
    /// System library and binary directories, devices, `/proc`.
    System,
    /// The command's own directory and package (and its interpreter's).
    Program,
    /// The working directory.
    WorkingDir,
    /// The private temp dir (`TMPDIR`).
    Temp,
    /// `sandbox.read` / `sandbox.write` as written.
    Config,
    /// The server's private home and data dir (its `HOME`, SPEC §25).
    Data,
}

/// One path of the effective rules.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PathRule {
    /// The absolute path (everything beneath it is covered).
    pub path: PathBuf,
    /// Why it is there.
    pub source: RuleSource,
}

/// The OS whose system paths [`effective`] adds (a parameter, so both
/// lists are tested on Linux).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Os {
    /// Linux.
    Linux,
    /// macOS.
    Macos,
}

impl Os {
    /// The OS this build runs on.
    pub fn current() -> Os {
        if cfg!(target_os = "macos") {
            Os::Macos
        } else {
            Os::Linux
        }
    }
}

/// What a program needs to read on every system: libraries, binaries,
/// configuration (`/etc`: resolver, TLS roots, time zones), `/proc` and
/// `/sys` for runtimes that size themselves from them. Never `/home`,
/// `/root`, `/run` or `/tmp` wholesale: those hold other people's and
/// other servers' files, and xy's own socket.
pub fn system_read(os: Os) -> &'static [&'static str] {
    match os {
        Os::Linux => &[
            "/usr",
            "/lib",
            "/lib32",
            "/lib64",
            "/libx32",
            "/bin",
            "/sbin",
            "/etc",
            "/opt",
            "/nix/store",
            "/snap",
            "/proc",
            "/sys",
            "/dev",
            "/run/systemd/resolve",
        ],
        Os::Macos => &[
            "/System",
            "/usr",
            "/bin",
            "/sbin",
            "/Library/Apple",
            "/Library/Frameworks",
            "/Library/Preferences",
            "/opt/homebrew",
            "/usr/local",
            "/private/etc",
            "/etc",
            "/private/var/db/timezone",
            "/private/var/db/dyld",
            "/dev",
            "/Applications/Xcode.app/Contents/Developer",
            "/Library/Developer/CommandLineTools",
        ],
    }
}

/// Device files any program may write (the null sink, terminals).
pub fn system_write(os: Os) -> &'static [&'static str] {
    match os {
        Os::Linux => &[
            "/dev/null",
            "/dev/zero",
            "/dev/full",
            "/dev/tty",
            "/dev/pts",
            "/dev/shm",
        ],
        Os::Macos => &["/dev/null", "/dev/zero", "/dev/tty", "/dev/dtracehelper"],
    }
}

/// What [`effective`] needs to know about the spawn.
#[derive(Debug, Clone)]
pub struct SpawnFacts<'a> {
    /// The home directory the child gets (`~` expands against it).
    pub home: &'a Path,
    /// The resolved command, symlinks followed.
    pub program: &'a Path,
    /// The interpreter of a `#!` script (`/usr/bin/env node` → node's
    /// resolved path), symlinks followed.
    pub interpreter: Option<&'a Path>,
    /// The script an interpreter runs (`node /x/dist/index.js`: the first
    /// argument that is an existing file, from [`script_candidate`]),
    /// symlinks followed: its package is the program's as much as the
    /// interpreter's is.
    pub script: Option<&'a Path>,
    /// The working directory (the daemon's cwd when none is configured).
    pub working_dir: &'a Path,
    /// The private temp dir given as `TMPDIR`.
    pub temp_dir: &'a Path,
    /// The virtualenv of the command or of its `#!` interpreter as written
    /// ([`venv_root`]): readable as a whole.
    pub venv: Option<&'a Path>,
    /// The server's private home and data dir (`HOME`), writable.
    pub data_dir: Option<&'a Path>,
    /// The port a supervised HTTP server listens on (`None` for stdio).
    pub listen_port: Option<u16>,
    /// The OS.
    pub os: Os,
}

/// The rules a spawn gets: the block plus the defaults SPEC §21 promises.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rules {
    /// Readable paths (write paths are readable too, but listed only there).
    pub read: Vec<PathRule>,
    /// Writable (and readable) paths.
    pub write: Vec<PathRule>,
    /// The network mode.
    pub network: NetworkMode,
    /// `allow-host` lines.
    pub allow_hosts: Vec<HostPort>,
    /// The one port the child may listen on under `network "none"` or
    /// `"allow"` (a supervised HTTP server's own).
    pub listen_port: Option<u16>,
}

/// A program's package: the directory holding its file, and when that is a
/// `bin` directory (`…/node/v22/bin/node`, `…/venv/bin/python`), the
/// directory above, where its libraries live.
pub fn package_root(program: &Path) -> Option<PathBuf> {
    let dir = program.parent()?;
    if dir.file_name().is_some_and(|n| n == "bin" || n == ".bin") {
        // `node_modules/.bin/x` → the `node_modules` tree.
        return dir.parent().map(Path::to_path_buf);
    }
    Some(dir.to_path_buf())
}

/// Whether `program` (resolved) is a language runtime that runs a script
/// named as its first argument: `node`, `python3.12`, `bun`, …
pub fn is_interpreter(program: &Path) -> bool {
    const RUNTIMES: &[&str] = &[
        "node", "nodejs", "bun", "deno", "python", "pythonw", "pypy", "ruby", "perl", "php",
        "java", "tsx", "ts-node",
    ];
    let Some(name) = program.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    let base = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    RUNTIMES.contains(&base)
}

/// The script an interpreter would run: when `program` is one
/// ([`is_interpreter`]), its first argument that is not an option and
/// looks like a file path (has a `/` or a script extension), resolved
/// against `working_dir`. The caller checks that it exists. Any other
/// program's arguments open nothing: an argument naming a file is data,
/// and only a rule the user wrote may open it.
pub fn script_candidate(program: &Path, args: &[String], working_dir: &Path) -> Option<PathBuf> {
    const SCRIPT_EXT: &[&str] = &[
        "js", "mjs", "cjs", "ts", "mts", "py", "rb", "pl", "php", "jar",
    ];
    if !is_interpreter(program) {
        return None;
    }
    let arg = args.iter().find(|a| !a.starts_with('-'))?;
    let looks_like_file = arg.contains('/')
        || Path::new(arg)
            .extension()
            .is_some_and(|e| SCRIPT_EXT.iter().any(|x| e == *x));
    if !looks_like_file {
        return None;
    }
    Some(working_dir.join(arg))
}

/// What a script's rule covers: the outermost `node_modules` it lives in
/// (dependencies are hoisted beside it), else the `site-packages` it lives
/// in, else its [`program_rule`].
fn script_rule(script: &Path, home: &Path) -> Option<PathBuf> {
    let tree = script
        .ancestors()
        .filter(|a| a.file_name().is_some_and(|n| n == "node_modules"))
        .last()
        .or_else(|| {
            script.ancestors().find(|a| {
                a.file_name()
                    .is_some_and(|n| n == "site-packages" || n == "dist-packages")
            })
        });
    match tree {
        Some(t) => Some(t.to_path_buf()),
        // A script inside `~/.ssh`, `~/.aws`, … is not a program's package.
        None if script
            .strip_prefix(home)
            .ok()
            .and_then(|rest| rest.components().next())
            .is_some_and(|c| c.as_os_str().to_string_lossy().starts_with('.')) =>
        {
            None
        }
        None => Some(program_rule(script, home)),
    }
}

/// What a program's rule covers: its [`package_root`], unless that would
/// be the home dir, above it, or a dot dir straight under it (`~/.local`
/// holds xy's own state, `~/.config` every tool's tokens); then the
/// program's own directory, and when that is the home dir too, the file.
pub fn program_rule(program: &Path, home: &Path) -> PathBuf {
    let too_wide = |p: &Path| {
        home.starts_with(p)
            || (p.parent() == Some(home)
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('.')))
    };
    match package_root(program) {
        Some(root) if !too_wide(&root) => root,
        _ => match program.parent() {
            Some(dir) if !home.starts_with(dir) => dir.to_path_buf(),
            _ => program.to_path_buf(),
        },
    }
}

/// The effective rules of `config` for a spawn described by `facts`.
/// Paths are de-duplicated; a path already covered by an earlier rule of
/// the same list is kept (the source is what users read), the order is
/// system, program, working dir, temp, config.
pub fn effective(config: &SandboxConfig, facts: &SpawnFacts<'_>) -> Rules {
    let mut read: Vec<PathRule> = Vec::new();
    let mut write: Vec<PathRule> = Vec::new();
    let add = |list: &mut Vec<PathRule>, path: PathBuf, source: RuleSource| {
        if !list.iter().any(|r| r.path == path) {
            list.push(PathRule { path, source });
        }
    };
    for p in system_read(facts.os) {
        add(&mut read, PathBuf::from(p), RuleSource::System);
    }
    if let Some(script) = facts.script
        && let Some(rule) = script_rule(script, facts.home)
    {
        add(&mut read, rule, RuleSource::Program);
    }
    for p in [Some(facts.program), facts.interpreter]
        .into_iter()
        .flatten()
    {
        add(&mut read, program_rule(p, facts.home), RuleSource::Program);
    }
    if let Some(venv) = facts.venv {
        add(&mut read, venv.to_path_buf(), RuleSource::Program);
    }
    for p in &config.read {
        add(&mut read, expand_home(p, facts.home), RuleSource::Config);
    }
    for p in system_write(facts.os) {
        add(&mut write, PathBuf::from(p), RuleSource::System);
    }
    // A working dir that is `/`, the home dir or above it (a daemon started
    // from `~`, a service whose cwd is `/`) would open everything the
    // sandbox exists to close: it stays the child's cwd, but gets no rule.
    if !facts.home.starts_with(facts.working_dir) {
        add(
            &mut write,
            facts.working_dir.to_path_buf(),
            RuleSource::WorkingDir,
        );
    }
    add(&mut write, facts.temp_dir.to_path_buf(), RuleSource::Temp);
    if let Some(data) = facts.data_dir {
        add(&mut write, data.to_path_buf(), RuleSource::Data);
    }
    for p in &config.write {
        add(&mut write, expand_home(p, facts.home), RuleSource::Config);
    }
    Rules {
        read,
        write,
        network: config.network,
        allow_hosts: config.allow_hosts.clone(),
        listen_port: match config.network {
            NetworkMode::Any => None,
            NetworkMode::None | NetworkMode::Allow => facts.listen_port,
        },
    }
}

impl Rules {
    /// Whether `path` is readable under these rules.
    pub fn can_read(&self, path: &Path) -> bool {
        self.read
            .iter()
            .chain(&self.write)
            .any(|r| path.starts_with(&r.path))
    }

    /// Whether `path` is writable under these rules.
    pub fn can_write(&self, path: &Path) -> bool {
        self.write.iter().any(|r| path.starts_with(&r.path))
    }
}

/// An operation the kernel (or the child's own error line) says was denied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denied {
    /// Opening, listing or executing a path for reading.
    Read(PathBuf),
    /// Creating, writing or removing a path.
    Write(PathBuf),
    /// An outbound connection (`host:port` or an address as the child
    /// printed it).
    Connect(String),
    /// Listening on a port.
    Bind(u16),
    /// Anything else the child reported as denied (no path or address).
    Other(String),
}

/// One line explaining `denied` in terms of the block, e.g.
/// `sandbox: write to ~/.bashrc denied (not under sandbox.write)`.
///
/// When a line in the block would allow it, the explanation ends with it
/// (SPEC §25): `; fix: add `write "~/notes"` to the sandbox block`.
pub fn explain_denial(rules: &Rules, denied: &Denied, home: &Path) -> String {
    let what = what_was_denied(rules, denied, home);
    match fix_for(rules, denied, home) {
        Some(fix) => format!("{what}; fix: {fix}"),
        None => what,
    }
}

/// The line (or step) that would let `denied` through, if there is one;
/// `None` when the rules allow it already (the file's own permissions
/// refused it) or no line of the block can.
pub fn fix_for(rules: &Rules, denied: &Denied, home: &Path) -> Option<String> {
    let quoted = |p: &Path| format!("{:?}", tilde(p, home));
    match denied {
        Denied::Read(p) if !rules.can_read(p) => {
            Some(format!("add `read {}` to the sandbox block", quoted(p)))
        }
        Denied::Write(p) if !rules.can_write(p) => {
            // A create needs its directory writable; a missing directory
            // is created first (rules name existing paths).
            let (target, missing) = if p.exists() {
                (p.clone(), None)
            } else {
                let dir = p.parent().unwrap_or(p).to_path_buf();
                let missing = (!dir.exists()).then(|| dir.clone());
                (dir, missing)
            };
            let inside_code = rules.can_read(&target);
            let mut fix = String::new();
            if let Some(dir) = missing {
                fix.push_str(&format!("create {} first, then ", tilde(&dir, home)));
            }
            fix.push_str(&format!(
                "add `write {}` to the sandbox block",
                quoted(&target)
            ));
            if inside_code {
                fix.push_str(
                    " (it is inside what the server may only read, such as its own \
                     package: better point its data elsewhere, e.g. by an env variable)",
                );
            }
            Some(fix)
        }
        Denied::Connect(addr) => match rules.network {
            NetworkMode::Any => None,
            NetworkMode::None => Some(format!(
                "set `network \"allow\"` with `allow-host \"{addr}\"` (or `network \"any\"`)"
            )),
            NetworkMode::Allow if HostPort::parse(addr).is_ok() => {
                Some(format!("add `allow-host \"{addr}\"` to the sandbox block"))
            }
            NetworkMode::Allow => None,
        },
        _ => None,
    }
}

fn what_was_denied(rules: &Rules, denied: &Denied, home: &Path) -> String {
    match denied {
        Denied::Read(p) => {
            let reason = if rules.can_read(p) {
                "readable under the rules; the file's own permissions refused it"
            } else {
                "not under sandbox.read"
            };
            format!("sandbox: read of {} denied ({reason})", tilde(p, home))
        }
        Denied::Write(p) => {
            let reason = if rules.can_write(p) {
                "writable under the rules; the file's own permissions refused it"
            } else {
                "not under sandbox.write"
            };
            format!("sandbox: write to {} denied ({reason})", tilde(p, home))
        }
        Denied::Connect(addr) => {
            let reason = match rules.network {
                NetworkMode::Any => "network \"any\": not the sandbox; check a firewall".to_owned(),
                NetworkMode::None => "network \"none\"".to_owned(),
                NetworkMode::Allow => format!(
                    "network \"allow\": not an allow-host line ({})",
                    rules
                        .allow_hosts
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            format!("sandbox: connection to {addr} denied ({reason})")
        }
        Denied::Bind(port) => format!(
            "sandbox: listening on port {port} denied (network \"{}\" allows only {})",
            rules.network.as_str(),
            rules
                .listen_port
                .map_or_else(|| "no port".to_owned(), |p| format!("port {p}"))
        ),
        Denied::Other(what) => format!("sandbox: {what} denied"),
    }
}

#[cfg(test)]
mod tests;
