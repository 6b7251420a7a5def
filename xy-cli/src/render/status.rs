//! `xyctl status <name>`: the list fields, the settings (env keys, never
//! values), the recorded transitions and the last few log lines.

use std::fmt::Write as _;

use xy_core::protocol::{HealthState, LogNotification, StatusResult};
use xy_core::time::human_secs;

use super::list::{format_bytes, format_cpu, new_table, tighten};
use super::sandbox::{SandboxView, render_sandbox_section, sandbox_field};
use super::{
    LogPrefix, Paint, Style, date_time, format_last_exit, ms, render_log_line, trim_lines,
};

/// The whole status page; `view` says how to show the sandbox's paths.
pub(crate) fn render_status(
    s: &StatusResult,
    log: &[LogNotification],
    view: &SandboxView,
    style: &Style,
) -> String {
    let e = &s.entry;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}  {}",
        style.paint(&e.name, Paint::Bold),
        style.state(e.state)
    );

    let mut fields: Vec<(&str, String)> = vec![
        (
            "pid",
            e.pid.map_or_else(|| "-".to_owned(), |p| p.to_string()),
        ),
        ("port", e.port.to_string()),
        ("url", format!("{} ({})", e.url, e.transport)),
        (
            "gateway",
            e.gateway_url.clone().unwrap_or_else(|| "off".to_owned()),
        ),
        (
            "uptime",
            e.uptime_secs.map_or_else(|| "-".to_owned(), human_secs),
        ),
        ("restarts", e.restart_count.to_string()),
    ];
    let last = match &e.last_exit {
        Some(l) => format!("{} at {}", format_last_exit(Some(l)), date_time(&l.ts)),
        None => "-".to_owned(),
    };
    fields.push(("last exit", last));
    if let Some(why) = &s.explain {
        fields.push(("why", why.clone()));
    }
    fields.push((
        "cpu",
        e.cpu_percent.map_or_else(|| "-".to_owned(), format_cpu),
    ));
    fields.push((
        "memory",
        e.rss_bytes
            .map_or_else(|| "-".to_owned(), |b| format!("{} (RSS)", format_bytes(b))),
    ));
    fields.push(("health", health_line(s)));
    if s.dropped_notifications > 0 {
        // SPEC §24: a chatty child's notifications a slow client missed.
        fields.push((
            "dropped",
            format!(
                "{} notifications (a client read too slowly)",
                s.dropped_notifications
            ),
        ));
    }
    if let Some(m) = &s.mcp {
        fields.push(("mcp", mcp_line(m)));
        if m.tool_count.is_some() {
            fields.push(("tools", tools_line(m)));
        }
    }
    if let Some(h) = &s.health_config {
        let path = h
            .path
            .as_deref()
            .map(|p| format!(" {p}"))
            .unwrap_or_default();
        let restart = if h.restart_on_failure {
            ", restart on failure"
        } else {
            ""
        };
        fields.push((
            "probe",
            format!(
                "{}{path} every {}, timeout {}, unhealthy after {} failures, start period {}{restart}",
                h.probe,
                ms(h.interval_ms),
                ms(h.timeout_ms),
                h.failures,
                ms(h.start_period_ms)
            ),
        ));
    }
    if let Some(r) = &s.remote {
        // SPEC §23: no process; where it is and how xy authenticates.
        fields.push(("remote", r.url.clone()));
        let headers: Vec<String> = r
            .headers
            .iter()
            .map(|h| match &h.secret {
                Some(secret) => format!("{} secret=\"{secret}\"", h.name),
                None => format!("{} (value in the file)", h.name),
            })
            .collect();
        fields.push((
            "headers",
            if headers.is_empty() {
                "-".to_owned()
            } else {
                headers.join(", ")
            },
        ));
        let mut auth = r.auth.clone();
        if !r.scopes.is_empty() {
            auth.push_str(&format!(" (scopes {})", r.scopes.join(" ")));
        }
        if let Some(id) = &r.client_id {
            auth.push_str(&format!(", client id {id}"));
        }
        fields.push(("auth", auth));
    } else {
        fields.push(("command", command_line(&s.command, &s.args)));
        fields.push((
            "working dir",
            s.working_dir.clone().unwrap_or_else(|| "-".to_owned()),
        ));
        fields.push((
            "env",
            if s.env_keys.is_empty() {
                "-".to_owned()
            } else {
                format!("{} (values hidden)", s.env_keys.join(", "))
            },
        ));
    }
    if let Some(p) = &s.package {
        let sep = if p.ecosystem == "pypi" { "==" } else { "@" };
        fields.push((
            "package",
            format!(
                "{}:{}{sep}{} ({})",
                p.ecosystem,
                p.name,
                p.version,
                p.installed_at.as_deref().map_or_else(
                    || "not installed: `xyctl add --force` or `xyctl rollback`".to_owned(),
                    |t| format!("installed {t}")
                )
            ),
        ));
    }
    if !s.secrets.is_empty() {
        let list: Vec<String> = s
            .secrets
            .iter()
            .map(|x| format!("{} ({})", x.name, x.source))
            .collect();
        fields.push(("secrets", list.join(", ")));
    }
    let r = &s.restart;
    fields.push((
        "restart",
        format!(
            "{}, backoff {} to {}, at most {} per minute",
            r.policy,
            ms(r.backoff_initial_ms),
            ms(r.backoff_max_ms),
            r.max_retries_per_minute
        ),
    ));
    fields.push(("stop grace", ms(s.stop.grace_ms)));
    fields.push(("sandbox", sandbox_field(s.sandbox.as_ref())));
    fields.push(("config", s.config_file.clone()));
    let width = fields.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (k, v) in &fields {
        let _ = writeln!(out, "  {k:<width$}  {v}");
    }
    out.push_str(&render_sandbox_section(s.sandbox.as_ref(), view, style));

    out.push('\n');
    out.push_str(&style.paint("Transitions", Paint::Bold));
    out.push('\n');
    if s.transitions.is_empty() {
        out.push_str("  (none)\n");
    } else {
        let mut table = new_table(style);
        for t in &s.transitions {
            table.add_row(vec![
                format!("  {}", date_time(&t.ts)),
                format!("{} -> {}", t.from, t.to),
                t.reason.clone(),
            ]);
        }
        tighten(&mut table);
        out.push_str(&trim_lines(&table.to_string()));
    }

    if !s.health_history.is_empty() {
        out.push('\n');
        out.push_str(&style.paint("Health", Paint::Bold));
        out.push('\n');
        let mut table = new_table(style);
        for h in &s.health_history {
            table.add_row(vec![
                format!("  {}", date_time(&h.ts)),
                format!("{} -> {}", h.from, h.to),
                h.reason.clone(),
            ]);
        }
        tighten(&mut table);
        out.push_str(&trim_lines(&table.to_string()));
    }

    out.push('\n');
    out.push_str(&style.paint("Recent log", Paint::Bold));
    out.push('\n');
    if log.is_empty() {
        out.push_str("  (no output yet)\n");
    }
    for line in log {
        out.push_str("  ");
        out.push_str(&render_log_line(line, None::<&LogPrefix>, style));
    }
    out
}

/// `healthy (3 ms, checked 2026-11-30 05:01:41)`, `unhealthy: why (…)`,
/// `starting`, or why it is `unknown`.
fn health_line(s: &StatusResult) -> String {
    let h = &s.entry.health;
    if s.health_config.is_none() {
        return "- (no probe configured)".to_owned();
    }
    let mut detail: Vec<String> = Vec::new();
    if let Some(l) = h.latency_ms {
        detail.push(format!("{l} ms"));
    }
    if let Some(at) = &h.checked_at {
        detail.push(format!("checked {}", date_time(at)));
    }
    let detail = if detail.is_empty() {
        String::new()
    } else {
        format!(" ({})", detail.join(", "))
    };
    match (h.state, &h.error) {
        (HealthState::Unknown, _) => "unknown (not running)".to_owned(),
        (state, Some(err)) => format!("{state}: {err}{detail}"),
        (state, None) => format!("{state}{detail}"),
    }
}

/// `2026-07-28 (era 2026), insikt 0.4.1, 3 tools`.
fn mcp_line(m: &xy_core::protocol::mcp::McpStatus) -> String {
    let server = match (&m.server_name, &m.server_version) {
        (Some(n), Some(v)) => format!(", {n} {v}"),
        (Some(n), None) => format!(", {n}"),
        _ => String::new(),
    };
    let tools = match m.tool_count {
        Some(1) => ", 1 tool".to_owned(),
        Some(n) => format!(", {n} tools"),
        None => ", tools not listed".to_owned(),
    };
    format!("{} (era {}){server}{tools}", m.protocol_version, m.era)
}

/// The tool changes since the previous start, in one line.
fn tools_line(m: &xy_core::protocol::mcp::McpStatus) -> String {
    if m.tools_added.is_empty() && m.tools_removed.is_empty() && m.tools_changed.is_empty() {
        return "no change since the previous start (xyctl tools NAME lists them)".to_owned();
    }
    format!(
        "since the previous start: {}",
        super::tools::diff_words(&m.tools_added, &m.tools_removed, &m.tools_changed)
    )
}

/// The command and its arguments as a shell would need them typed.
fn command_line(command: &str, args: &[String]) -> String {
    std::iter::once(command)
        .chain(args.iter().map(String::as_str))
        .map(shell_quote)
        .collect::<Vec<_>>()
        .join(" ")
}

fn shell_quote(s: &str) -> String {
    let safe = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./:=@%+,".contains(c));
    if safe {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use xy_core::protocol::{
        Health, HealthSettings, HealthTransition, LastExit, ListEntry, LogStream, RestartSettings,
        ServerState, StopSettings, Transition,
    };

    pub(crate) fn sample() -> StatusResult {
        StatusResult {
            entry: ListEntry {
                name: "insikt".into(),
                state: ServerState::Running,
                pid: Some(48213),
                port: 8421,
                transport: xy_core::protocol::Transport::Http,
                url: "http://127.0.0.1:8421/mcp".into(),
                uptime_secs: Some(192),
                restart_count: 1,
                last_exit: Some(LastExit {
                    code: Some(1),
                    signal: None,
                    ts: "2026-11-30T05:01:40.002Z".into(),
                }),
                health: Health {
                    state: HealthState::Healthy,
                    latency_ms: Some(3),
                    error: None,
                    checked_at: Some("2026-11-30T05:04:50.010Z".into()),
                },
                cpu_percent: Some(0.4),
                rss_bytes: Some(12_897_485),
                tool_count: None,
                tools_held: 0,
                agent_allow_restart: false,
                remote_url: None,
                gateway_url: None,
            },
            transitions: vec![
                Transition {
                    from: ServerState::Stopped,
                    to: ServerState::Starting,
                    ts: "2026-11-30T05:01:38.250Z".into(),
                    reason: "daemon boot".into(),
                },
                Transition {
                    from: ServerState::Starting,
                    to: ServerState::Running,
                    ts: "2026-11-30T05:01:38.251Z".into(),
                    reason: "spawned pid 48100".into(),
                },
                Transition {
                    from: ServerState::Running,
                    to: ServerState::Restarting,
                    ts: "2026-11-30T05:01:40.002Z".into(),
                    reason: "exited with code 1".into(),
                },
                Transition {
                    from: ServerState::Restarting,
                    to: ServerState::Running,
                    ts: "2026-11-30T05:01:41.010Z".into(),
                    reason: "spawned pid 48213".into(),
                },
            ],
            command: "/opt/insikt/bin/insikt-mcp".into(),
            args: vec![
                "--http".into(),
                "--port".into(),
                "8421".into(),
                "a b".into(),
            ],
            working_dir: Some("/home/u/insikt".into()),
            env_keys: vec!["API_TOKEN".into(), "RUST_LOG".into()],
            restart: RestartSettings {
                policy: "on-failure".into(),
                backoff_initial_ms: 1000,
                backoff_max_ms: 30_000,
                max_retries_per_minute: 5,
            },
            stop: StopSettings { grace_ms: 10_000 },
            config_file: "/home/u/.config/xy/servers/insikt.kdl".into(),
            explain: None,
            next_retry_at: None,
            health_config: Some(HealthSettings {
                probe: "mcp".into(),
                path: Some("/mcp".into()),
                interval_ms: 10_000,
                timeout_ms: 2000,
                failures: 3,
                start_period_ms: 30_000,
                restart_on_failure: true,
            }),
            health_history: vec![HealthTransition {
                from: HealthState::Starting,
                to: HealthState::Healthy,
                ts: "2026-11-30T05:01:42.001Z".into(),
                reason: "initialize and ping answered in 4 ms".into(),
            }],
            mcp: None,
            secrets: Vec::new(),
            sandbox: None,
            package: None,
            remote: None,
            dropped_notifications: 0,
        }
    }

    pub(crate) fn log() -> Vec<LogNotification> {
        vec![
            LogNotification {
                subscription_id: 1,
                name: "insikt".into(),
                stream: LogStream::Stdout,
                line: "listening on 127.0.0.1:8421".into(),
                ts: "2026-11-30T05:01:41.120Z".into(),
            },
            LogNotification {
                subscription_id: 1,
                name: "insikt".into(),
                stream: LogStream::Stderr,
                line: "warning: cache is cold".into(),
                ts: "2026-11-30T05:01:41.305Z".into(),
            },
        ]
    }

    #[test]
    fn plain_page() {
        let want = "\
insikt  running
  pid          48213
  port         8421
  url          http://127.0.0.1:8421/mcp (http)
  gateway      off
  uptime       3m 12s
  restarts     1
  last exit    code 1 at 2026-11-30 05:01:40
  cpu          0.4%
  memory       12.3 MiB (RSS)
  health       healthy (3 ms, checked 2026-11-30 05:04:50)
  probe        mcp /mcp every 10s, timeout 2s, unhealthy after 3 failures, start period 30s, restart on failure
  command      /opt/insikt/bin/insikt-mcp --http --port 8421 'a b'
  working dir  /home/u/insikt
  env          API_TOKEN, RUST_LOG (values hidden)
  restart      on-failure, backoff 1s to 30s, at most 5 per minute
  stop grace   10s
  sandbox      off: no sandbox block, the server runs with your full rights
  config       /home/u/.config/xy/servers/insikt.kdl

Transitions
  2026-11-30 05:01:38  stopped -> starting    daemon boot
  2026-11-30 05:01:38  starting -> running    spawned pid 48100
  2026-11-30 05:01:40  running -> restarting  exited with code 1
  2026-11-30 05:01:41  restarting -> running  spawned pid 48213

Health
  2026-11-30 05:01:42  starting -> healthy  initialize and ping answered in 4 ms

Recent log
  05:01:41.120 listening on 127.0.0.1:8421
  05:01:41.305 [err] warning: cache is cold
";
        assert_eq!(
            render_status(&sample(), &log(), &SandboxView::default(), &Style::PLAIN),
            want
        );
    }

    #[test]
    fn dropped_notifications_show_only_when_some_were() {
        let mut s = sample();
        let out = render_status(&s, &[], &SandboxView::default(), &Style::PLAIN);
        assert!(!out.contains("dropped"), "{out}");
        s.dropped_notifications = 1200;
        let out = render_status(&s, &[], &SandboxView::default(), &Style::PLAIN);
        assert!(
            out.contains("  dropped      1200 notifications (a client read too slowly)\n"),
            "{out}"
        );
    }

    #[test]
    fn empty_sections() {
        let mut s = sample();
        s.transitions.clear();
        s.env_keys.clear();
        s.working_dir = None;
        s.entry.last_exit = None;
        let out = render_status(&s, &[], &SandboxView::default(), &Style::PLAIN);
        assert!(out.contains("  env          -\n"), "{out}");
        assert!(out.contains("  working dir  -\n"), "{out}");
        assert!(out.contains("  last exit    -\n"), "{out}");
        assert!(out.contains("Transitions\n  (none)\n"), "{out}");
        assert!(out.contains("Recent log\n  (no output yet)\n"), "{out}");
    }

    #[test]
    fn failed_server_explains_itself_and_has_no_figures() {
        let mut s = sample();
        s.entry.state = ServerState::Failed;
        s.entry.pid = None;
        s.entry.cpu_percent = None;
        s.entry.rss_bytes = None;
        s.entry.health = Health::default();
        s.explain = Some("port in use: port 8421 is held by pid 4242 (node s.js)".into());
        let out = render_status(&s, &[], &SandboxView::default(), &Style::PLAIN);
        assert!(
            out.contains("  why          port in use: port 8421 is held by pid 4242 (node s.js)\n"),
            "{out}"
        );
        assert!(
            out.contains("  cpu          -\n  memory       -\n"),
            "{out}"
        );
        assert!(
            out.contains("  health       unknown (not running)\n"),
            "{out}"
        );
        s.health_config = None;
        s.health_history.clear();
        let out = render_status(&s, &[], &SandboxView::default(), &Style::PLAIN);
        assert!(
            out.contains("  health       - (no probe configured)\n"),
            "{out}"
        );
        assert!(
            !out.contains("  probe  ") && !out.contains("\nHealth\n"),
            "{out}"
        );
        s.entry.health.state = HealthState::Unhealthy;
        s.health_config = sample().health_config;
        s.entry.health.error = Some("no answer within 2s".into());
        let out = render_status(&s, &[], &SandboxView::default(), &Style::PLAIN);
        assert!(
            out.contains("  health       unhealthy: no answer within 2s\n"),
            "{out}"
        );
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("plain-1.0"), "plain-1.0");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }
}
