//! `xyctl status <name>`: the list fields, the settings (env keys, never
//! values), the recorded transitions and the last few log lines.

use std::fmt::Write as _;

use xy_core::protocol::{LogNotification, StatusResult};
use xy_core::time::human_secs;

use super::list::{new_table, tighten};
use super::{
    LogPrefix, Paint, Style, date_time, format_last_exit, ms, render_log_line, trim_lines,
};

/// The whole status page.
pub(crate) fn render_status(s: &StatusResult, log: &[LogNotification], style: &Style) -> String {
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
    fields.push(("config", s.config_file.clone()));
    let width = fields.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (k, v) in &fields {
        let _ = writeln!(out, "  {k:<width$}  {v}");
    }

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
        LastExit, ListEntry, LogStream, RestartSettings, ServerState, StopSettings, Transition,
    };

    pub(crate) fn sample() -> StatusResult {
        StatusResult {
            entry: ListEntry {
                name: "insikt".into(),
                state: ServerState::Running,
                pid: Some(48213),
                port: 8421,
                uptime_secs: Some(192),
                restart_count: 1,
                last_exit: Some(LastExit {
                    code: Some(1),
                    signal: None,
                    ts: "2026-11-30T05:01:40.002Z".into(),
                }),
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
  uptime       3m 12s
  restarts     1
  last exit    code 1 at 2026-11-30 05:01:40
  command      /opt/insikt/bin/insikt-mcp --http --port 8421 'a b'
  working dir  /home/u/insikt
  env          API_TOKEN, RUST_LOG (values hidden)
  restart      on-failure, backoff 1s to 30s, at most 5 per minute
  stop grace   10s
  config       /home/u/.config/xy/servers/insikt.kdl

Transitions
  2026-11-30 05:01:38  stopped -> starting    daemon boot
  2026-11-30 05:01:38  starting -> running    spawned pid 48100
  2026-11-30 05:01:40  running -> restarting  exited with code 1
  2026-11-30 05:01:41  restarting -> running  spawned pid 48213

Recent log
  05:01:41.120 listening on 127.0.0.1:8421
  05:01:41.305 [err] warning: cache is cold
";
        assert_eq!(render_status(&sample(), &log(), &Style::PLAIN), want);
    }

    #[test]
    fn empty_sections() {
        let mut s = sample();
        s.transitions.clear();
        s.env_keys.clear();
        s.working_dir = None;
        s.entry.last_exit = None;
        let out = render_status(&s, &[], &Style::PLAIN);
        assert!(out.contains("  env          -\n"), "{out}");
        assert!(out.contains("  working dir  -\n"), "{out}");
        assert!(out.contains("  last exit    -\n"), "{out}");
        assert!(out.contains("Transitions\n  (none)\n"), "{out}");
        assert!(out.contains("Recent log\n  (no output yet)\n"), "{out}");
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("plain-1.0"), "plain-1.0");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }
}
