//! The sandbox as `xyctl` shows it (SPEC §21): the `Sandbox` section of
//! `xyctl status` (network mode, read and write paths grouped by why they
//! are there, enforcement, recent denials) and the `xyctl sandbox test`
//! table with what each probe was expected to do.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use xy_core::protocol::{ProbeOutcome, SandboxStatus, SandboxTestResult};
use xy_core::sandbox::{NetworkMode, PathRule, RuleSource, Rules, expand_home, tilde};

use super::{Paint, Style, render_rows};

/// What the sandbox section needs besides the status: the home directory
/// (paths under it are shown as `~/…`) and whether to list every system
/// path instead of counting them.
#[derive(Debug, Clone, Default)]
pub(crate) struct SandboxView {
    /// The user's home directory, if known.
    pub(crate) home: Option<PathBuf>,
    /// `--verbose`: every system path on its own line.
    pub(crate) verbose: bool,
}

impl SandboxView {
    /// The view for this process's user.
    pub(crate) fn from_env(verbose: bool) -> SandboxView {
        SandboxView {
            home: std::env::home_dir(),
            verbose,
        }
    }

    fn show(&self, p: &Path) -> String {
        match &self.home {
            Some(h) => tilde(p, h),
            None => p.display().to_string(),
        }
    }
}

/// The one-line summary for the status fields: `off (…)` or `on, network
/// "none"`.
pub(crate) fn sandbox_field(s: Option<&SandboxStatus>) -> String {
    match s {
        None => "off: no sandbox block, the server runs with your full rights".to_owned(),
        Some(s) => format!(
            "on, network \"{}\" (see Sandbox below)",
            s.rules.network.as_str()
        ),
    }
}

/// The network line: what the mode lets the child do.
fn network_line(r: &Rules) -> String {
    let listen = match r.listen_port {
        Some(p) => format!("; listening only on port {p}"),
        None => "; no listening".to_owned(),
    };
    match r.network {
        NetworkMode::Any => "any (no network rule)".to_owned(),
        NetworkMode::None => {
            format!(
                "none: no outbound connections, no UDP, no Unix sockets outside the paths below{listen}"
            )
        }
        NetworkMode::Allow => {
            let hosts: Vec<String> = r.allow_hosts.iter().map(ToString::to_string).collect();
            format!(
                "allow: outbound only to {} (through xy's proxy){listen}",
                hosts.join(", ")
            )
        }
    }
}

/// Why a path is there, as the user reads it.
fn source_word(source: RuleSource, write: bool) -> &'static str {
    match source {
        RuleSource::System => "system",
        RuleSource::Program => "program",
        RuleSource::WorkingDir => "working dir",
        RuleSource::Temp => "temp (TMPDIR)",
        RuleSource::Data => "home and data (HOME)",
        RuleSource::Config if write => "sandbox.write",
        RuleSource::Config => "sandbox.read",
    }
}

/// The order sources are shown in: what the user wrote first, what the
/// OS needs last.
const SOURCE_ORDER: [RuleSource; 6] = [
    RuleSource::Config,
    RuleSource::Program,
    RuleSource::WorkingDir,
    RuleSource::Data,
    RuleSource::Temp,
    RuleSource::System,
];

/// `(path, why)` rows of one list, grouped by source; system paths folded
/// into one row unless `view.verbose`.
fn path_rows(list: &[PathRule], write: bool, view: &SandboxView) -> Vec<(String, String)> {
    let mut rows = Vec::new();
    for source in SOURCE_ORDER {
        let of: Vec<&PathRule> = list.iter().filter(|r| r.source == source).collect();
        if of.is_empty() {
            continue;
        }
        if source == RuleSource::System && !view.verbose {
            let n = of.len();
            rows.push((
                format!("{n} system {}", if n == 1 { "path" } else { "paths" }),
                "system (--verbose lists them)".to_owned(),
            ));
            continue;
        }
        for r in of {
            rows.push((view.show(&r.path), source_word(source, write).to_owned()));
        }
    }
    rows
}

/// The `Sandbox` section of `xyctl status` (empty without a sandbox).
pub(crate) fn render_sandbox_section(
    s: Option<&SandboxStatus>,
    view: &SandboxView,
    style: &Style,
) -> String {
    let Some(s) = s else {
        return String::new();
    };
    let r = &s.rules;
    let read = path_rows(&r.read, false, view);
    let write = path_rows(&r.write, true, view);
    let path_width = read
        .iter()
        .chain(&write)
        .map(|(p, _)| p.chars().count())
        .max()
        .unwrap_or(0);
    let mut lines: Vec<(&str, String)> = vec![("network", network_line(r))];
    for (key, rows) in [("read", &read), ("write", &write)] {
        if rows.is_empty() {
            lines.push((key, "-".to_owned()));
        }
        for (i, (path, why)) in rows.iter().enumerate() {
            let pad = path_width - path.chars().count();
            lines.push((
                if i == 0 { key } else { "" },
                format!("{path}{}  {why}", " ".repeat(pad)),
            ));
        }
    }
    if s.enforcement.is_empty() {
        lines.push(("enforced by", "- (not spawned yet)".to_owned()));
    }
    for (i, e) in s.enforcement.iter().enumerate() {
        lines.push((if i == 0 { "enforced by" } else { "" }, e.clone()));
    }
    if s.denials.is_empty() {
        lines.push(("denials", "(none since the spawn)".to_owned()));
    }
    for (i, d) in s.denials.iter().enumerate() {
        lines.push((
            if i == 0 { "denials" } else { "" },
            style.paint(d, Paint::Red),
        ));
    }
    let mut out = String::new();
    out.push('\n');
    out.push_str(&style.paint("Sandbox", Paint::Bold));
    out.push('\n');
    let width = lines.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (k, v) in lines {
        let _ = writeln!(out, "  {k:<width$}  {v}");
    }
    out
}

/// What the rules say a probe should do; `None` when the probe's text is
/// not one this client understands (it then never counts as a mismatch).
///
/// Probe texts are those of `xy_core::sandbox::probe::Probe::describe`,
/// optionally after `grandchild: `: `read <path>`, `write <path>`, `tcp
/// connect <addr>`, `udp send <addr>`, `unix connect <path>` (a path may be
/// `~/…`), and `bind <port>`. Without a sandbox every probe is expected to
/// get through.
pub(crate) fn expected(
    sandbox: Option<&SandboxStatus>,
    probe: &str,
    home: Option<&Path>,
) -> Option<ProbeOutcome> {
    let text = probe
        .strip_prefix("grandchild: ")
        .or_else(|| probe.strip_prefix("grandchild "))
        .unwrap_or(probe);
    let (op, target) = [
        ("read ", Op::Read),
        ("write ", Op::Write),
        ("tcp connect ", Op::Tcp),
        ("connect ", Op::Tcp),
        ("udp send ", Op::Udp),
        ("unix connect ", Op::Unix),
        ("bind ", Op::Bind),
        ("listen ", Op::Bind),
    ]
    .into_iter()
    .find_map(|(prefix, op)| text.strip_prefix(prefix).map(|t| (op, t.trim())))?;
    // A labelled target (`xy's state dir ~/.local/state/xy`, `xyd's socket
    // /run/user/1000/xy.sock`): the path is what follows the label.
    let own_socket = target.starts_with("xyd's socket ");
    let target = if target.starts_with('/') || target.starts_with('~') {
        target
    } else {
        [" /", " ~/", " ~"]
            .iter()
            .filter_map(|m| target.find(m))
            .min()
            .map_or(target, |i| &target[i + 1..])
    };
    let is_path = target.starts_with('/') || target == "~" || target.starts_with("~/");
    if target.is_empty() || (matches!(op, Op::Read | Op::Write | Op::Unix) && !is_path) {
        return None;
    }
    let Some(s) = sandbox else {
        return Some(ProbeOutcome::Allowed);
    };
    let r = &s.rules;
    let path = |t: &str| match home {
        Some(h) => expand_home(t, h),
        None => PathBuf::from(t),
    };
    let verdict = |ok: bool| {
        if ok {
            ProbeOutcome::Allowed
        } else {
            ProbeOutcome::Blocked
        }
    };
    Some(match op {
        Op::Read => verdict(r.can_read(&path(target))),
        Op::Write => verdict(r.can_write(&path(target))),
        Op::Unix => {
            // Reachable beneath the rules' own paths; what `network "any"`
            // does outside them differs by OS.
            let p = path(target);
            let own = r
                .read
                .iter()
                .chain(&r.write)
                .any(|rule| rule.source != RuleSource::System && p.starts_with(&rule.path));
            // xyd refuses its own socket to every sandboxed process (SPEC
            // §24); under "any" other sockets are reachable where the
            // enforcement allows Unix sockets at all (Linux with scoped
            // abstract sockets), and only beneath the rules elsewhere.
            let unix_any = s
                .enforcement
                .iter()
                .any(|e| e.contains("unix sockets allowed"));
            match (own_socket, own, r.network) {
                (true, _, _) => ProbeOutcome::Blocked,
                (false, true, _) => ProbeOutcome::Allowed,
                (false, false, NetworkMode::Any) => verdict(unix_any),
                (false, false, _) => ProbeOutcome::Blocked,
            }
        }
        Op::Tcp => match r.network {
            NetworkMode::Any => ProbeOutcome::Allowed,
            NetworkMode::None => ProbeOutcome::Blocked,
            NetworkMode::Allow => {
                // Everything but the proxy is refused; a direct connect to
                // an allow-host address depends on how it is filtered.
                let target = target.to_ascii_lowercase();
                if r.allow_hosts.iter().any(|h| h.to_string() == target) {
                    return None;
                }
                ProbeOutcome::Blocked
            }
        },
        Op::Udp => verdict(r.network == NetworkMode::Any),
        Op::Bind => {
            let port: u16 = target.rsplit(':').next()?.parse().ok()?;
            verdict(r.network == NetworkMode::Any || r.listen_port == Some(port))
        }
    })
}

/// The probe kinds [`expected`] knows.
#[derive(Debug, Clone, Copy)]
enum Op {
    Read,
    Write,
    Tcp,
    Udp,
    Unix,
    Bind,
}

/// How a `sandbox test` run went against the rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Verdict {
    /// Probes that got through.
    pub(crate) allowed: usize,
    /// Probes run (not skipped).
    pub(crate) run: usize,
    /// Probes whose outcome differs from what the rules say.
    pub(crate) mismatches: usize,
}

/// Counts `result`'s probes against [`expected`].
pub(crate) fn verdict(result: &SandboxTestResult, home: Option<&Path>) -> Verdict {
    let mut v = Verdict {
        allowed: 0,
        run: 0,
        mismatches: 0,
    };
    for p in &result.probes {
        if p.outcome == ProbeOutcome::Skipped {
            continue;
        }
        v.run += 1;
        if p.outcome == ProbeOutcome::Allowed {
            v.allowed += 1;
        }
        if expected(result.sandbox.as_ref(), &p.probe, home).is_some_and(|e| e != p.outcome) {
            v.mismatches += 1;
        }
    }
    v
}

fn outcome_word(o: ProbeOutcome) -> &'static str {
    match o {
        ProbeOutcome::Allowed => "allowed",
        ProbeOutcome::Blocked => "blocked",
        ProbeOutcome::Skipped => "skipped",
    }
}

/// The `xyctl sandbox test` output: one row per probe (what happened,
/// what the rules say, the detail), then the summary.
pub(crate) fn render_sandbox_test(
    result: &SandboxTestResult,
    home: Option<&Path>,
    style: &Style,
) -> String {
    let rows: Vec<Vec<String>> = result
        .probes
        .iter()
        .map(|p| {
            let want = expected(result.sandbox.as_ref(), &p.probe, home);
            let outcome = outcome_word(p.outcome);
            let differs =
                p.outcome != ProbeOutcome::Skipped && want.is_some_and(|w| w != p.outcome);
            let outcome = match (differs, p.outcome) {
                (true, _) => style.paint(&format!("{outcome} !"), Paint::Red),
                (false, ProbeOutcome::Allowed) if result.sandbox.is_some() => {
                    style.paint(outcome, Paint::Yellow)
                }
                (false, ProbeOutcome::Blocked) => style.paint(outcome, Paint::Green),
                _ => outcome.to_owned(),
            };
            vec![
                p.probe.clone(),
                outcome,
                want.map_or("?", outcome_word).to_owned(),
                p.detail.clone(),
            ]
        })
        .collect();
    let mut out = render_rows(&["PROBE", "OUTCOME", "RULES SAY", "DETAIL"], &rows, style);
    let v = verdict(result, home);
    let skipped = result.probes.len() - v.run;
    out.push('\n');
    let _ = write!(
        out,
        "{} of {} {} got through",
        v.allowed,
        v.run,
        if v.run == 1 { "probe" } else { "probes" }
    );
    if skipped > 0 {
        let _ = write!(out, " ({skipped} skipped)");
    }
    if v.mismatches == 0 {
        out.push_str("; every outcome is what the rules say.\n");
    } else {
        let _ = writeln!(
            out,
            "; {} {} from what the rules say (marked !).",
            v.mismatches,
            if v.mismatches == 1 {
                "differs"
            } else {
                "differ"
            }
        );
    }
    if result.sandbox.is_none() {
        let _ = writeln!(
            out,
            "{} has no sandbox block, so nothing is confined: add `sandbox {{ network \"none\" }}` \
             to its file (docs/sandbox.md).",
            result.name
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use xy_core::protocol::ProbeResult;
    use xy_core::sandbox::HostPort;

    fn rule(p: &str, source: RuleSource) -> PathRule {
        PathRule {
            path: p.into(),
            source,
        }
    }

    pub(crate) fn status(network: NetworkMode) -> SandboxStatus {
        SandboxStatus {
            rules: Rules {
                read: vec![
                    rule("/usr", RuleSource::System),
                    rule("/etc", RuleSource::System),
                    rule("/home/me/.nvm/versions/node/v22", RuleSource::Program),
                    rule("/home/me/notes", RuleSource::Config),
                ],
                write: vec![
                    rule("/dev/null", RuleSource::System),
                    rule("/home/me/work", RuleSource::WorkingDir),
                    rule(
                        "/home/me/.local/state/xy/sandbox/notes/tmp",
                        RuleSource::Temp,
                    ),
                    rule("/home/me/notes/inbox", RuleSource::Config),
                ],
                network,
                allow_hosts: if network == NetworkMode::Allow {
                    vec![HostPort::parse("api.github.com:443").unwrap()]
                } else {
                    vec![]
                },
                listen_port: (network != NetworkMode::Any).then_some(8421),
            },
            enforcement: vec![
                "landlock abi 7: files, tcp".into(),
                "seccomp: udp, unix sockets".into(),
            ],
            temp_dir: "/home/me/.local/state/xy/sandbox/notes/tmp".into(),
            denials: vec!["sandbox: read of ~/.ssh/id_rsa denied (not under sandbox.read)".into()],
        }
    }

    fn view(verbose: bool) -> SandboxView {
        SandboxView {
            home: Some("/home/me".into()),
            verbose,
        }
    }

    #[test]
    fn section_groups_paths_by_source_and_folds_the_system_ones() {
        let s = status(NetworkMode::None);
        let out = render_sandbox_section(Some(&s), &view(false), &Style::PLAIN);
        let want = "
Sandbox
  network      none: no outbound connections, no UDP, no Unix sockets outside the paths below; listening only on port 8421
  read         ~/notes                              sandbox.read
               ~/.nvm/versions/node/v22             program
               2 system paths                       system (--verbose lists them)
  write        ~/notes/inbox                        sandbox.write
               ~/work                               working dir
               ~/.local/state/xy/sandbox/notes/tmp  temp (TMPDIR)
               1 system path                        system (--verbose lists them)
  enforced by  landlock abi 7: files, tcp
               seccomp: udp, unix sockets
  denials      sandbox: read of ~/.ssh/id_rsa denied (not under sandbox.read)
";
        assert_eq!(out, want);
        let verbose = render_sandbox_section(Some(&s), &view(true), &Style::PLAIN);
        assert!(verbose.contains("               /usr  "), "{verbose}");
        assert!(verbose.contains("               /etc  "), "{verbose}");
        assert!(verbose.contains("               /dev/null  "), "{verbose}");
        assert!(!verbose.contains("system paths"), "{verbose}");
        assert_eq!(
            render_sandbox_section(None, &view(false), &Style::PLAIN),
            ""
        );
    }

    #[test]
    fn network_lines_say_what_each_mode_allows() {
        let mut s = status(NetworkMode::Allow);
        let out = render_sandbox_section(Some(&s), &view(false), &Style::PLAIN);
        assert!(
            out.contains("  network      allow: outbound only to api.github.com:443 (through xy's proxy); listening only on port 8421\n"),
            "{out}"
        );
        s.rules.network = NetworkMode::Any;
        s.rules.listen_port = None;
        s.enforcement.clear();
        s.denials.clear();
        let out = render_sandbox_section(Some(&s), &view(false), &Style::PLAIN);
        assert!(
            out.contains("  network      any (no network rule)\n"),
            "{out}"
        );
        assert!(
            out.contains("  enforced by  - (not spawned yet)\n"),
            "{out}"
        );
        assert!(
            out.contains("  denials      (none since the spawn)\n"),
            "{out}"
        );
        // Without a home the paths are shown whole.
        let out = render_sandbox_section(Some(&s), &SandboxView::default(), &Style::PLAIN);
        assert!(out.contains("/home/me/notes "), "{out}");
    }

    #[test]
    fn expectations_follow_the_rules() {
        let home = Some(Path::new("/home/me"));
        let none = status(NetworkMode::None);
        let allow = status(NetworkMode::Allow);
        let any = status(NetworkMode::Any);
        use ProbeOutcome::{Allowed, Blocked};
        for (s, probe, want) in [
            (&none, "read ~/.ssh/id_rsa", Some(Blocked)),
            (&none, "grandchild: read ~/.ssh/id_rsa", Some(Blocked)),
            (&none, "read ~/notes/a.md", Some(Allowed)),
            (&none, "read /usr/lib/libc.so.6", Some(Allowed)),
            (&none, "write ~/.bashrc", Some(Blocked)),
            (&none, "write ~/notes/a.md", Some(Blocked)),
            (&none, "write ~/notes/inbox/new.md", Some(Allowed)),
            (&none, "tcp connect 127.0.0.1:4242", Some(Blocked)),
            (
                &none,
                "grandchild: tcp connect 127.0.0.1:4242",
                Some(Blocked),
            ),
            (&none, "udp send 127.0.0.1:53", Some(Blocked)),
            (&none, "unix connect /run/user/1000/xy.sock", Some(Blocked)),
            (&none, "unix connect ~/work/agent.sock", Some(Allowed)),
            (&none, "unix connect xy's socket", None),
            (&none, "read another server's files", None),
            (&none, "bind 8421", Some(Allowed)),
            (&none, "bind 127.0.0.1:9999", Some(Blocked)),
            (&any, "tcp connect 127.0.0.1:4242", Some(Allowed)),
            (&any, "udp send 127.0.0.1:53", Some(Allowed)),
            (&any, "unix connect /run/user/1000/xy.sock", Some(Blocked)),
            (
                &any,
                "grandchild: unix connect xyd's socket /run/user/1000/xy.sock",
                Some(Blocked),
            ),
            (
                &none,
                "read xy's state dir ~/.local/state/xy",
                Some(Blocked),
            ),
            (
                &none,
                "grandchild: read another server's config ~/.config/xy/servers/b.kdl",
                Some(Blocked),
            ),
            (&none, "read xy's state dir ~/notes/x", Some(Allowed)),
            (&any, "bind 9999", Some(Allowed)),
            (&allow, "tcp connect api.github.com:443", None),
            (&allow, "connect API.github.com:443", None),
            (&allow, "tcp connect 127.0.0.1:4242", Some(Blocked)),
            (&allow, "udp send 1.1.1.1:53", Some(Blocked)),
            (&none, "resolve example.com", None),
            (&none, "read", None),
        ] {
            assert_eq!(
                expected(Some(s), probe, home),
                want,
                "{probe} under {:?}",
                s.rules.network
            );
        }
        assert_eq!(expected(None, "read ~/.ssh/id_rsa", home), Some(Allowed));
        assert_eq!(expected(None, "dance", home), None);
    }

    fn probe(p: &str, outcome: ProbeOutcome, detail: &str) -> ProbeResult {
        ProbeResult {
            probe: p.into(),
            outcome,
            detail: detail.into(),
        }
    }

    pub(crate) fn test_result() -> SandboxTestResult {
        SandboxTestResult {
            name: "notes".into(),
            sandbox: Some(status(NetworkMode::None)),
            probes: vec![
                probe("read ~/.ssh/id_rsa", ProbeOutcome::Blocked, "EACCES"),
                probe("write ~/.bashrc", ProbeOutcome::Blocked, "EACCES"),
                probe("read ~/notes/a.md", ProbeOutcome::Allowed, "read 12 bytes"),
                probe(
                    "tcp connect 127.0.0.1:4242",
                    ProbeOutcome::Blocked,
                    "EACCES",
                ),
                probe(
                    "grandchild: read ~/.ssh/id_rsa",
                    ProbeOutcome::Skipped,
                    "no fork",
                ),
            ],
        }
    }

    #[test]
    fn test_table_counts_and_marks_mismatches() {
        let home = Some(Path::new("/home/me"));
        let r = test_result();
        let out = render_sandbox_test(&r, home, &Style::PLAIN);
        let want = "\
PROBE                           OUTCOME  RULES SAY  DETAIL
read ~/.ssh/id_rsa              blocked  blocked    EACCES
write ~/.bashrc                 blocked  blocked    EACCES
read ~/notes/a.md               allowed  allowed    read 12 bytes
tcp connect 127.0.0.1:4242      blocked  blocked    EACCES
grandchild: read ~/.ssh/id_rsa  skipped  blocked    no fork

1 of 4 probes got through (1 skipped); every outcome is what the rules say.
";
        assert_eq!(out, want);
        assert_eq!(
            verdict(&r, home),
            Verdict {
                allowed: 1,
                run: 4,
                mismatches: 0
            }
        );
        let mut leaky = r.clone();
        leaky.probes[0].outcome = ProbeOutcome::Allowed;
        leaky.probes[0].detail = "read 1679 bytes".into();
        let out = render_sandbox_test(&leaky, home, &Style::PLAIN);
        assert!(
            out.contains("read ~/.ssh/id_rsa              allowed !  blocked    read 1679 bytes\n"),
            "{out}"
        );
        assert!(out.ends_with("2 of 4 probes got through (1 skipped); 1 differs from what the rules say (marked !).\n"), "{out}");
        assert_eq!(verdict(&leaky, home).mismatches, 1);
        let mut open = r.clone();
        open.sandbox = None;
        let out = render_sandbox_test(&open, home, &Style::PLAIN);
        assert!(out.contains("notes has no sandbox block"), "{out}");
        assert_eq!(
            verdict(&open, home).mismatches,
            3,
            "blocked probes without a sandbox differ"
        );
    }
}
