//! `xyctl list`: one aligned row per server.

use comfy_table::{ContentArrangement, Table, presets};
use xy_core::protocol::{HealthState, LastExit, ListEntry, ServerState};
use xy_core::time::human_secs;

use super::columns::{self, Cell};
use super::{Paint, Style};

/// What `list` says when no server is configured yet (SPEC §14).
pub(crate) const FIRST_RUN_HINT: &str = "\
No servers yet. Add one:
  xyctl add <name> -- <command> [args...]          an HTTP server (`{port}` in args: its port)
  xyctl add <name> --stdio -- <command> [args...]  a stdio server, served over HTTP by xy
Or bring the ones your AI clients already run:
  xyctl import claude-desktop                      (also: claude-code, cursor, vscode, windsurf, codex)
";

/// The table, or how to add a server when nothing is configured.
pub(crate) fn render_list(entries: &[ListEntry], style: &Style) -> String {
    if entries.is_empty() {
        return FIRST_RUN_HINT.to_owned();
    }
    // The TOOLS column appears once any server's `mcp` probe listed tools.
    let tools = entries.iter().any(|e| e.tool_count.is_some());
    let mut header = vec![
        "NAME",
        "STATE",
        "HEALTH",
        "PID",
        "PORT",
        "UPTIME",
        "CPU",
        "RSS",
        "RESTARTS",
        "LAST EXIT",
    ];
    if tools {
        header.insert(3, "TOOLS");
    }
    // SPEC §23: the REMOTE column appears once any server is remote.
    let remote = entries.iter().any(|e| e.remote_url.is_some());
    if remote {
        header.push("REMOTE");
    }
    let rows: Vec<Vec<Cell>> = entries
        .iter()
        .map(|e| {
            let mut row = vec![
                Cell::plain(e.name.as_str()),
                Cell::painted(e.state.as_str(), state_paint(e.state)),
                health_cell(e.health.state),
                Cell::plain(opt(e.pid)),
                Cell::plain(e.port.to_string()),
                Cell::plain(e.uptime_secs.map_or_else(|| "-".to_owned(), human_secs)),
                Cell::plain(e.cpu_percent.map_or_else(|| "-".to_owned(), format_cpu)),
                Cell::plain(e.rss_bytes.map_or_else(|| "-".to_owned(), format_bytes)),
                Cell::plain(e.restart_count.to_string()),
                Cell::plain(format_last_exit(e.last_exit.as_ref())),
            ];
            if tools {
                let paint = (e.tools_held > 0).then_some(Paint::Yellow);
                row.insert(
                    3,
                    Cell::painted(tools_cell(e.tool_count, e.tools_held), paint),
                );
            }
            if remote {
                row.push(Cell::plain(e.remote_url.as_deref().unwrap_or("-")));
            }
            row
        })
        .collect();
    columns::render(&header, &rows, style)
}

/// The TOOLS cell: `4`, or `4 (1 held)` when xy's firewall holds some back
/// (SPEC §20); `-` before the first listing.
pub(crate) fn tools_cell(count: Option<u32>, held: u32) -> String {
    match (count, held) {
        (None, 0) => "-".to_owned(),
        (None, h) => format!("- ({h} held)"),
        (Some(n), 0) => n.to_string(),
        (Some(n), h) => format!("{n} ({h} held)"),
    }
}

/// `0.4%`, `112%` (of one core).
pub(crate) fn format_cpu(p: f64) -> String {
    if p >= 100.0 {
        format!("{p:.0}%")
    } else {
        format!("{p:.1}%")
    }
}

/// `512 B`, `12.3 KiB`, `64.0 MiB`, `1.5 GiB`.
pub(crate) fn format_bytes(b: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if b < 1024 {
        return format!("{b} B");
    }
    let mut v = b as f64 / 1024.0;
    let mut unit = UNITS[0];
    for u in &UNITS[1..] {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    format!("{v:.1} {unit}")
}

/// `code 1`, `SIGKILL`, or `-` when the server never exited.
pub(crate) fn format_last_exit(last: Option<&LastExit>) -> String {
    match last {
        Some(LastExit {
            signal: Some(sig), ..
        }) => sig.clone(),
        Some(LastExit {
            code: Some(code), ..
        }) => format!("code {code}"),
        _ => "-".to_owned(),
    }
}

/// A borderless, left-aligned table with two blanks between columns that
/// never wraps (scripts and snapshots need stable output).
pub(super) fn new_table(style: &Style) -> Table {
    let mut table = Table::new();
    table
        .load_preset(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled);
    if style.color {
        table.enforce_styling();
    } else {
        table.force_no_tty();
    }
    table
}

/// After the rows are in, tighten the padding: none on the left, two blanks
/// on the right.
pub(super) fn tighten(table: &mut Table) {
    for col in table.column_iter_mut() {
        col.set_padding((0, 2));
    }
}

/// A state's colour in `list` (as [`Paint::for_state`], and cyan for idle).
fn state_paint(state: ServerState) -> Option<Paint> {
    match state {
        ServerState::Idle => Some(Paint::Cyan),
        s => Paint::for_state(s),
    }
}

/// `unknown` shows as `-`: no probe, or not running.
fn health_cell(state: HealthState) -> Cell {
    let (text, paint) = match state {
        HealthState::Unknown => ("-", None),
        HealthState::Healthy => (state.as_str(), Some(Paint::Green)),
        HealthState::Starting => (state.as_str(), Some(Paint::Yellow)),
        HealthState::Unhealthy => (state.as_str(), Some(Paint::Red)),
    };
    Cell::painted(text, paint)
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

#[cfg(test)]
pub(crate) mod tests {
    #[test]
    fn the_tools_cell_says_how_many_are_held_back() {
        assert_eq!(super::tools_cell(None, 0), "-");
        assert_eq!(super::tools_cell(Some(4), 0), "4");
        assert_eq!(super::tools_cell(Some(4), 1), "4 (1 held)");
        assert_eq!(super::tools_cell(None, 2), "- (2 held)");
    }

    use super::*;
    use xy_core::protocol::Health;

    pub(crate) fn sample() -> Vec<ListEntry> {
        vec![
            ListEntry {
                name: "insikt".into(),
                state: ServerState::Running,
                pid: Some(48213),
                port: 8421,
                transport: xy_core::protocol::Transport::Http,
                url: "http://127.0.0.1:8421/mcp".into(),
                uptime_secs: Some(7380),
                restart_count: 0,
                last_exit: None,
                health: Health {
                    state: HealthState::Healthy,
                    latency_ms: Some(3),
                    error: None,
                    checked_at: Some("2026-11-30T05:04:54.123Z".into()),
                },
                cpu_percent: Some(0.4),
                rss_bytes: Some(12_897_485),
                tool_count: None,
                tools_held: 0,
                agent_allow_restart: false,
                remote_url: None,
                gateway_url: None,
            },
            ListEntry {
                name: "search-mcp".into(),
                state: ServerState::Failed,
                pid: None,
                port: 8422,
                transport: xy_core::protocol::Transport::Http,
                url: "http://127.0.0.1:8422/mcp".into(),
                uptime_secs: None,
                restart_count: 5,
                last_exit: Some(LastExit {
                    code: Some(1),
                    signal: None,
                    ts: "2026-11-30T05:04:54.123Z".into(),
                }),
                health: Health::default(),
                cpu_percent: None,
                rss_bytes: None,
                tool_count: None,
                tools_held: 0,
                agent_allow_restart: false,
                remote_url: None,
                gateway_url: None,
            },
            ListEntry {
                name: "notes".into(),
                state: ServerState::Restarting,
                pid: None,
                port: 9000,
                transport: xy_core::protocol::Transport::Http,
                url: "http://127.0.0.1:9000/mcp".into(),
                uptime_secs: None,
                restart_count: 2,
                last_exit: Some(LastExit {
                    code: None,
                    signal: Some("SIGKILL".into()),
                    ts: "2026-11-30T05:04:54.123Z".into(),
                }),
                health: Health::default(),
                cpu_percent: None,
                rss_bytes: None,
                tool_count: None,
                tools_held: 0,
                agent_allow_restart: false,
                remote_url: None,
                gateway_url: None,
            },
            ListEntry {
                name: "idle".into(),
                state: ServerState::Stopped,
                pid: None,
                port: 9001,
                transport: xy_core::protocol::Transport::Http,
                url: "http://127.0.0.1:9001/mcp".into(),
                uptime_secs: None,
                restart_count: 0,
                last_exit: Some(LastExit {
                    code: Some(0),
                    signal: None,
                    ts: "2026-11-30T05:04:54.123Z".into(),
                }),
                health: Health::default(),
                cpu_percent: None,
                rss_bytes: None,
                tool_count: None,
                tools_held: 0,
                agent_allow_restart: false,
                remote_url: None,
                gateway_url: None,
            },
        ]
    }

    #[test]
    fn plain_table() {
        let want = "\
NAME        STATE       HEALTH   PID    PORT  UPTIME  CPU   RSS       RESTARTS  LAST EXIT
insikt      running     healthy  48213  8421  2h 3m   0.4%  12.3 MiB  0         -
search-mcp  failed      -        -      8422  -       -     -         5         code 1
notes       restarting  -        -      9000  -       -     -         2         SIGKILL
idle        stopped     -        -      9001  -       -     -         0         code 0
";
        assert_eq!(render_list(&sample(), &Style::PLAIN), want);
    }

    #[test]
    fn colour_only_on_states_and_header() {
        let out = render_list(&sample(), &Style::COLOR);
        assert!(out.contains("\x1b["), "{out}");
        let stripped = strip_ansi(&out);
        assert_eq!(stripped, render_list(&sample(), &Style::PLAIN));
    }

    #[test]
    fn units() {
        assert_eq!(format_bytes(0), "0 B");
        assert_eq!(format_bytes(1023), "1023 B");
        assert_eq!(format_bytes(1536), "1.5 KiB");
        assert_eq!(format_bytes(64 << 20), "64.0 MiB");
        assert_eq!(format_bytes(3 << 30), "3.0 GiB");
        assert_eq!(format_cpu(0.0), "0.0%");
        assert_eq!(format_cpu(12.34), "12.3%");
        assert_eq!(format_cpu(250.4), "250%");
    }

    #[test]
    fn empty() {
        assert_eq!(render_list(&[], &Style::PLAIN), FIRST_RUN_HINT);
    }

    #[test]
    fn last_exit() {
        assert_eq!(format_last_exit(None), "-");
        let e = LastExit {
            code: None,
            signal: None,
            ts: String::new(),
        };
        assert_eq!(format_last_exit(Some(&e)), "-");
    }

    /// Removes CSI sequences (`ESC [ … final-byte`).
    pub(crate) fn strip_ansi(s: &str) -> String {
        let mut out = String::new();
        let mut chars = s.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '\x1b' && chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            } else {
                out.push(c);
            }
        }
        out
    }
}
