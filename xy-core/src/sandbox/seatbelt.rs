//! The macOS Seatbelt (SBPL) profile generated from the effective rules
//! (SPEC §21), and the `sandbox-exec` command line that applies it. Pure
//! text, so it is unit-tested on Linux; the daemon's macOS spawn path
//! hands [`sandbox_exec_argv`]'s argv to the process spawner.
//!
//! Shape of the profile: deny by default; allow what a process needs to
//! start (exec, fork, signals and process info within the sandbox, sysctl
//! reads, metadata of any path so path walking and `realpath` work, the
//! Mach services the C library, logging and TLS use); reads beneath the
//! rules' read and write paths, writes beneath the write paths; then the
//! network the mode allows. SBPL applies the last matching rule, so the
//! Unix-socket denial comes after every allow it must not be undone by.

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use super::{NetworkMode, PathRule, RuleSource, Rules};

/// `sandbox-exec`, by absolute path so a `PATH` entry cannot stand in for it.
pub const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// Mach services every runtime looks up: user and group lookups
/// (`getpwuid`, which Node's `os.homedir()` and Python's `pwd` use), the
/// logging and notification daemons, temp-dir and preference lookups, and
/// certificate evaluation (TLS clients call trustd even through a proxy).
const MACH_SERVICES: &[&str] = &[
    "com.apple.system.opendirectoryd.libinfo",
    "com.apple.system.opendirectoryd.membership",
    "com.apple.system.DirectoryService.libinfo_v1",
    "com.apple.system.logger",
    "com.apple.logd",
    "com.apple.diagnosticd",
    "com.apple.system.notification_center",
    "com.apple.bsd.dirhelper",
    "com.apple.cfprefsd.daemon",
    "com.apple.cfprefsd.agent",
    "com.apple.CoreServices.coreservicesd",
    "com.apple.coreservices.launchservicesd",
    "com.apple.lsd.mapdb",
    "com.apple.trustd",
    "com.apple.trustd.agent",
    "com.apple.SecurityServer",
    "com.apple.securityd.xpc",
    "com.apple.ocspd",
];

/// Mach services that resolve names or open connections on the child's
/// behalf: allowed only under `network "any"` (elsewhere they would be a
/// way around the network rule, e.g. DNS lookups as a side channel).
const NETWORK_MACH_SERVICES: &[&str] = &[
    "com.apple.SystemConfiguration.configd",
    "com.apple.SystemConfiguration.DNSConfiguration",
    "com.apple.dnssd.service",
    "com.apple.networkd",
    "com.apple.nsurlsessiond",
];

/// Files outside the rules' paths that processes read at start on macOS:
/// `/bin/sh`'s trampoline reads which shell to run, and the root directory
/// itself is listed by some path resolvers.
const EXTRA_READ_LITERALS: &[&str] = &["/", "/private/var/select/sh", "/private/var/select/X11"];

/// The socket macOS's resolver talks to: only under `network "any"`.
const RESOLVER_SOCKET: &str = "/private/var/run/mDNSResponder";

/// macOS's top-level symlinks into `/private`: Seatbelt matches the real
/// path a process opens, so a rule for `/tmp/x` must say `/private/tmp/x`.
const PRIVATE_LINKS: &[&str] = &["tmp", "var", "etc"];

/// `path` as Seatbelt sees it: `.` components dropped and `/tmp`, `/var`
/// and `/etc` replaced by their `/private/…` targets. Pure: no symlink is
/// read (the config parser refuses `..`, so this needs no file system).
pub fn real_path(path: &Path) -> PathBuf {
    let mut parts = path
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .peekable();
    let mut out = PathBuf::new();
    if let Some(Component::RootDir) = parts.peek() {
        out.push("/");
        parts.next();
        if let Some(Component::Normal(first)) = parts.peek()
            && PRIVATE_LINKS.iter().any(|l| first == l)
        {
            out.push("private");
        }
    }
    for c in parts {
        out.push(c.as_os_str());
    }
    out
}

/// Why `path` cannot be written into a profile: not UTF-8, or holding a
/// control character (a newline would end the string literal for some
/// readers and makes the rule unreadable for people). `None`: quotable.
pub fn unquotable(path: &Path) -> Option<String> {
    let Some(s) = path.to_str() else {
        return Some(format!(
            "{} is not valid UTF-8, which a Seatbelt profile cannot name",
            path.display()
        ));
    };
    s.chars().any(char::is_control).then(|| {
        format!(
            "{} holds a control character (newline, tab, …), which xy does not write into a \
             Seatbelt profile",
            s.escape_debug()
        )
    })
}

/// The rules' paths that [`profile`] leaves out because [`unquotable`]
/// refuses them, each with the reason. The spawn path fails the spawn
/// (`sandbox_unavailable`) when this is not empty, so a dropped rule never
/// goes unnoticed; the profile without them is narrower, never wider.
pub fn unquotable_paths(rules: &Rules) -> Vec<(PathBuf, String)> {
    rules
        .read
        .iter()
        .chain(&rules.write)
        .filter_map(|r| unquotable(&r.path).map(|why| (r.path.clone(), why)))
        .collect()
}

/// Quotes `s` as an SBPL string literal: `"` and `\` are escaped; callers
/// have refused control characters ([`unquotable`]).
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// The quoted real paths of `rules`, the unquotable ones left out,
/// duplicates (after `/private` canonicalisation) removed.
fn quoted_paths<'a>(rules: impl Iterator<Item = &'a PathRule>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in rules {
        if unquotable(&r.path).is_some() {
            continue;
        }
        let q = quote(&real_path(&r.path).to_string_lossy());
        if !out.contains(&q) {
            out.push(q);
        }
    }
    out
}

/// One `(allow <ops> (subpath …) …)` form over `paths`, or nothing.
fn allow_subpaths(p: &mut String, ops: &str, paths: &[String]) {
    if paths.is_empty() {
        return;
    }
    p.push_str(&format!("(allow {ops}"));
    for q in paths {
        p.push_str(&format!("\n    (subpath {q})"));
    }
    p.push_str(")\n");
}

/// The profile for `rules`: deny by default, allow process operations,
/// reads and writes beneath the rules' paths, and the network the mode
/// allows (`proxy_port`: xy's egress proxy on localhost under `network
/// "allow"`; without one, `"allow"` gets no network at all).
pub fn profile(rules: &Rules, proxy_port: Option<u16>) -> String {
    let mut p = String::from(
        "(version 1)\n\
         (deny default)\n\
         ; Process basics: run programs, fork, and signal or inspect only\n\
         ; processes inside this sandbox.\n\
         (allow process-exec process-fork)\n\
         (allow signal (target same-sandbox))\n\
         (allow process-info* (target same-sandbox))\n\
         (allow sysctl-read)\n\
         (allow user-preference-read)\n\
         (allow ipc-posix-sem ipc-posix-shm)\n\
         (allow pseudo-tty)\n\
         ; Metadata of any path (existence, size, times; not contents), so\n\
         ; path walking, realpath and module resolution work.\n\
         (allow file-read-metadata)\n",
    );
    p.push_str("(allow mach-lookup");
    let network_any = rules.network == NetworkMode::Any;
    let services = MACH_SERVICES.iter().chain(
        network_any
            .then_some(NETWORK_MACH_SERVICES)
            .into_iter()
            .flatten(),
    );
    for s in services {
        p.push_str(&format!("\n    (global-name {})", quote(s)));
    }
    p.push_str(")\n");

    let readable = quoted_paths(rules.read.iter().chain(&rules.write));
    let writable = quoted_paths(rules.write.iter());
    p.push_str(
        "; sandbox.read, sandbox.write and the defaults (system, program, working dir, temp).\n",
    );
    p.push_str("(allow file-read*");
    for l in EXTRA_READ_LITERALS {
        p.push_str(&format!("\n    (literal {})", quote(l)));
    }
    for q in &readable {
        p.push_str(&format!("\n    (subpath {q})"));
    }
    p.push_str(")\n");
    allow_subpaths(&mut p, "file-map-executable", &readable);
    allow_subpaths(&mut p, "file-write* file-ioctl", &writable);

    p.push_str(&format!("; network \"{}\".\n", rules.network.as_str()));
    // Creating sockets is harmless on its own; what they reach is decided
    // by the network-outbound / network-bind rules below.
    p.push_str("(allow system-socket)\n");
    match rules.network {
        NetworkMode::Any => {
            p.push_str("(allow network*)\n");
        }
        NetworkMode::None | NetworkMode::Allow => {
            if let Some(port) = rules.listen_port {
                p.push_str(&format!(
                    "(allow network-bind network-inbound (local ip \"*:{port}\"))\n"
                ));
            }
            if let (NetworkMode::Allow, Some(port)) = (rules.network, proxy_port) {
                p.push_str(&format!(
                    "(allow network-outbound (remote ip \"localhost:{port}\"))\n"
                ));
            }
        }
    }
    // Unix sockets: only beneath the rules' paths (and, with network
    // "any", the resolver's), whatever the mode, so xy's own control socket
    // and other programs' agents stay out of reach. Last, so it wins over
    // `(allow network*)`.
    p.push_str(
        "(deny network-outbound (remote unix-socket))\n(deny network-bind (local unix-socket))\n",
    );
    let mut unix = Vec::new();
    if network_any {
        unix.push(format!("(path-literal {})", quote(RESOLVER_SOCKET)));
    }
    // Not the system directories: sockets there belong to other programs
    // (Homebrew services, say), not to this server.
    let own = |r: &&PathRule| r.source != RuleSource::System;
    let own_readable = quoted_paths(rules.read.iter().chain(&rules.write).filter(own));
    let own_writable = quoted_paths(rules.write.iter().filter(own));
    unix.extend(own_readable.iter().map(|q| format!("(subpath {q})")));
    if !unix.is_empty() {
        p.push_str("(allow network-outbound");
        for u in &unix {
            p.push_str(&format!("\n    (remote unix-socket {u})"));
        }
        p.push_str(")\n");
    }
    if !own_writable.is_empty() {
        p.push_str("(allow network-bind");
        for q in &own_writable {
            p.push_str(&format!("\n    (local unix-socket (subpath {q}))"));
        }
        p.push_str(")\n");
    }
    p
}

/// The argv that runs `program args…` confined by `profile`:
/// `/usr/bin/sandbox-exec -p <profile> -- <program> <args…>`. The first
/// element is the program to execute.
pub fn sandbox_exec_argv(
    profile: &str,
    program: impl Into<OsString>,
    args: impl IntoIterator<Item = impl Into<OsString>>,
) -> Vec<OsString> {
    let mut argv: Vec<OsString> = vec![
        SANDBOX_EXEC.into(),
        "-p".into(),
        profile.into(),
        "--".into(),
        program.into(),
    ];
    argv.extend(args.into_iter().map(Into::into));
    argv
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::{HostPort, Os, SandboxConfig, SpawnFacts, effective};

    fn rules(config: &SandboxConfig, listen_port: Option<u16>) -> Rules {
        effective(
            config,
            &SpawnFacts {
                home: Path::new("/Users/me"),
                script: None,
                program: Path::new("/opt/homebrew/Cellar/node/22.1.0/bin/node"),
                interpreter: None,
                working_dir: Path::new("/Users/me/work"),
                temp_dir: Path::new("/var/folders/xy/T/notes"),
                venv: None,
                data_dir: None,
                listen_port,
                os: Os::Macos,
            },
        )
    }

    fn notes() -> SandboxConfig {
        SandboxConfig {
            read: vec!["~/notes".into()],
            write: vec!["~/notes/inbox".into(), "/tmp/scratch".into()],
            ..SandboxConfig::default()
        }
    }

    /// The `(allow <op> …)` form that starts with `head`, up to its closing
    /// line, so assertions look at one rule and not the whole text.
    fn form<'a>(p: &'a str, head: &str) -> &'a str {
        let start = p.find(head).unwrap_or_else(|| panic!("no {head} in\n{p}"));
        let rest = &p[start..];
        let (mut depth, mut in_string, mut escaped) = (0, false, false);
        for (i, c) in rest.char_indices() {
            match (in_string, escaped, c) {
                (true, true, _) => escaped = false,
                (true, false, '\\') => escaped = true,
                (true, false, '"') => in_string = false,
                (true, false, _) => {}
                (false, _, '"') => in_string = true,
                (false, _, '(') => depth += 1,
                (false, _, ')') => {
                    depth -= 1;
                    if depth == 0 {
                        return &rest[..=i];
                    }
                }
                _ => {}
            }
        }
        panic!("unbalanced {head} in\n{p}")
    }

    #[test]
    fn real_paths_go_through_private() {
        for (given, want) in [
            ("/tmp/x", "/private/tmp/x"),
            ("/var/folders/ab/T", "/private/var/folders/ab/T"),
            ("/etc", "/private/etc"),
            ("/private/tmp", "/private/tmp"),
            ("/Users/me/./tmp", "/Users/me/tmp"),
            ("/tmpfoo", "/tmpfoo"),
            ("/", "/"),
        ] {
            assert_eq!(real_path(Path::new(given)), PathBuf::from(want), "{given}");
        }
    }

    #[test]
    fn deny_default_and_process_basics() {
        let p = profile(&rules(&notes(), None), None);
        assert!(p.starts_with("(version 1)\n(deny default)\n"), "{p}");
        for line in [
            "(allow process-exec process-fork)\n",
            "(allow signal (target same-sandbox))\n",
            "(allow sysctl-read)\n",
            "(allow file-read-metadata)\n",
        ] {
            assert!(p.contains(line), "missing {line}in\n{p}");
        }
        let mach = form(&p, "(allow mach-lookup");
        assert!(mach.contains("(global-name \"com.apple.system.opendirectoryd.libinfo\")"));
        assert!(mach.contains("(global-name \"com.apple.trustd.agent\")"));
        assert!(!p.contains("(allow mach-lookup)"), "never every service");
        assert!(!p.contains("(allow default)"), "{p}");
    }

    #[test]
    fn each_path_rule_reads_and_only_write_rules_write() {
        let p = profile(&rules(&notes(), None), None);
        let read = form(&p, "(allow file-read*");
        let write = form(&p, "(allow file-write* file-ioctl");
        for path in [
            "/System",
            "/usr",
            "/opt/homebrew/Cellar/node/22.1.0",
            "/Users/me/notes",
            "/Users/me/notes/inbox",
            "/Users/me/work",
            "/private/var/folders/xy/T/notes",
            "/private/tmp/scratch",
            "/private/etc",
        ] {
            assert!(
                read.contains(&format!("(subpath \"{path}\")")),
                "{path} not readable in\n{read}"
            );
        }
        for path in [
            "/Users/me/notes/inbox",
            "/Users/me/work",
            "/private/var/folders/xy/T/notes",
            "/private/tmp/scratch",
        ] {
            assert!(
                write.contains(&format!("(subpath \"{path}\")")),
                "{path} not writable in\n{write}"
            );
        }
        assert!(write.contains("(subpath \"/dev/null\")"), "{write}");
        for not_writable in ["\"/Users/me/notes\"", "\"/usr\"", "\"/System\""] {
            assert!(!write.contains(not_writable), "{not_writable} in\n{write}");
        }
        // `/etc` and `/private/etc` are one rule once canonicalised.
        assert_eq!(read.matches("(subpath \"/private/etc\")").count(), 1);
        assert!(!read.contains("(subpath \"/etc\")"));
        // The home itself, and what is beneath it that no rule names, is
        // neither readable nor writable.
        for absent in ["\"/Users/me\")", "\"/Users\")", "\"/Users/me/.ssh"] {
            assert!(!p.contains(absent), "{absent} in\n{p}");
        }
        assert!(
            form(&p, "(allow file-map-executable").contains("(subpath \"/usr\")"),
            "{p}"
        );
    }

    #[test]
    fn network_any_allows_everything_but_foreign_unix_sockets() {
        let p = profile(&rules(&notes(), Some(8421)), None);
        assert!(p.contains("(allow network*)\n"), "{p}");
        let mach = form(&p, "(allow mach-lookup");
        assert!(mach.contains("com.apple.dnssd.service"), "{mach}");
        // The denial comes after the broad allow (SBPL: last match wins).
        let deny = p
            .find("(deny network-outbound (remote unix-socket))\n(deny network-bind (local unix-socket))\n")
            .unwrap();
        assert!(deny > p.find("(allow network*)").unwrap());
        let unix = form(&p[deny..], "(allow network-outbound");
        assert!(
            unix.contains("(remote unix-socket (path-literal \"/private/var/run/mDNSResponder\"))")
        );
        assert!(unix.contains("(remote unix-socket (subpath \"/Users/me/work\"))"));
        assert!(!unix.contains("/Users/me/.local/state"), "{unix}");
        assert!(
            !unix.contains("\"/usr\""),
            "no system directory's sockets: {unix}"
        );
        assert!(unix.contains("(remote unix-socket (subpath \"/Users/me/notes\"))"));
        let bind = form(&p[deny..], "(allow network-bind");
        assert!(bind.contains("(local unix-socket (subpath \"/Users/me/work\"))"));
        assert!(
            !bind.contains("\"/usr\""),
            "binds only where it may write: {bind}"
        );
    }

    #[test]
    fn network_none_listens_only_on_its_port_and_reaches_nothing() {
        let config = SandboxConfig {
            network: NetworkMode::None,
            ..notes()
        };
        let p = profile(&rules(&config, Some(8421)), Some(9999));
        assert!(!p.contains("(allow network*)"), "{p}");
        assert!(!p.contains("(remote ip"), "no outbound IP at all: {p}");
        assert!(p.contains("(allow network-bind network-inbound (local ip \"*:8421\"))\n"));
        assert_eq!(p.matches("(local ip").count(), 1);
        assert!(!p.contains("mDNSResponder"), "no resolver: {p}");
        let mach = form(&p, "(allow mach-lookup");
        for s in NETWORK_MACH_SERVICES {
            assert!(!mach.contains(s), "{s} in\n{mach}");
        }
        assert!(p.contains("(deny network-outbound (remote unix-socket))"));
        // A stdio server (no port) may not listen at all.
        let p = profile(&rules(&config, None), None);
        assert!(!p.contains("(local ip"), "{p}");
    }

    #[test]
    fn network_allow_reaches_only_the_proxy() {
        let config = SandboxConfig {
            network: NetworkMode::Allow,
            allow_hosts: vec![HostPort::parse("api.github.com:443").unwrap()],
            ..notes()
        };
        let r = rules(&config, Some(8421));
        let p = profile(&r, Some(47001));
        assert!(p.contains("(allow network-outbound (remote ip \"localhost:47001\"))\n"));
        assert_eq!(p.matches("(remote ip").count(), 1, "{p}");
        assert!(
            !p.contains("api.github.com"),
            "Seatbelt cannot filter by name: {p}"
        );
        assert!(p.contains("(local ip \"*:8421\")"));
        assert!(!p.contains("(allow network*)"));
        // No proxy running: no network rather than open network.
        let p = profile(&r, None);
        assert!(!p.contains("(remote ip"), "{p}");
    }

    #[test]
    fn hostile_paths_are_escaped_or_left_out() {
        let mut r = rules(&notes(), None);
        let push = |r: &mut Rules, p: &str| {
            r.write.push(PathRule {
                path: PathBuf::from(p),
                source: RuleSource::Config,
            });
        };
        push(&mut r, "/Users/me/a\"b");
        push(&mut r, "/Users/me/back\\slash");
        push(&mut r, "/Users/me/x\"))(allow default)(\"");
        push(&mut r, "/Users/me/new\nline");
        push(&mut r, "/Users/me/tab\there");
        let p = profile(&r, None);
        assert!(p.contains("(subpath \"/Users/me/a\\\"b\")"), "{p}");
        assert!(p.contains("(subpath \"/Users/me/back\\\\slash\")"), "{p}");
        assert!(
            p.contains("(subpath \"/Users/me/x\\\"))(allow default)(\\\"\")"),
            "an injection stays inside its string: {p}"
        );
        assert!(!p.contains("\n(allow default)"));
        assert!(!p.contains("/Users/me/new"), "{p}");
        assert!(!p.contains("/Users/me/tab"), "{p}");
        // Every string literal closes on its own line: no line has an odd
        // number of unescaped quotes.
        for line in p.lines() {
            let unescaped = line
                .replace("\\\\", "")
                .replace("\\\"", "")
                .matches('"')
                .count();
            assert_eq!(unescaped % 2, 0, "unbalanced quotes in {line:?}");
        }
        let refused = unquotable_paths(&r);
        assert_eq!(refused.len(), 2, "{refused:?}");
        assert!(refused[0].1.contains("control character"), "{refused:?}");
        assert!(unquotable_paths(&rules(&notes(), None)).is_empty());
    }

    #[cfg(unix)]
    #[test]
    fn non_utf8_paths_are_refused() {
        use std::os::unix::ffi::OsStrExt;
        let p = Path::new(std::ffi::OsStr::from_bytes(b"/Users/me/\xff"));
        assert!(unquotable(p).unwrap().contains("UTF-8"));
    }

    #[test]
    fn argv_runs_the_program_under_sandbox_exec() {
        let argv = sandbox_exec_argv("(version 1)", "/usr/bin/node", ["server.js", "--port"]);
        assert_eq!(
            argv,
            [
                "/usr/bin/sandbox-exec",
                "-p",
                "(version 1)",
                "--",
                "/usr/bin/node",
                "server.js",
                "--port"
            ]
            .map(OsString::from)
        );
        let none: [&str; 0] = [];
        assert_eq!(sandbox_exec_argv("p", "/bin/x", none).len(), 5);
    }
}
