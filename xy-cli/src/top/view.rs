//! Draws the [`Model`] with ratatui: a title line, the server table, the log
//! pane of the selected server(s) and a footer (filter prompt, last event or
//! key hints); `?` lays the key help over it. Pure: a model and a size in,
//! cells out, so layouts are snapshot-tested on ratatui's `TestBackend`.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Row as TableRow, Table, TableState};
use xy_core::protocol::{HealthState, LogStream, ServerState};

use super::model::{LogTarget, Model, Row};

/// Colour or not (`NO_COLOR`, `--color`); selection and headers use
/// reverse video and bold either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Theme {
    pub(crate) color: bool,
}

impl Theme {
    fn fg(self, c: Color) -> Style {
        if self.color {
            Style::new().fg(c)
        } else {
            Style::new()
        }
    }

    fn state(self, s: ServerState) -> Style {
        self.fg(match s {
            ServerState::Running => Color::Green,
            ServerState::Failed => Color::Red,
            ServerState::Stopped => Color::DarkGray,
            // Listening with no child (on-demand stdio server).
            ServerState::Idle => Color::Cyan,
            ServerState::Starting | ServerState::Restarting | ServerState::Stopping => {
                Color::Yellow
            }
        })
    }

    fn health(self, h: HealthState) -> Style {
        self.fg(match h {
            HealthState::Healthy => Color::Green,
            HealthState::Unhealthy => Color::Red,
            HealthState::Starting => Color::Yellow,
            HealthState::Unknown => Color::DarkGray,
        })
    }
}

/// Rows the table keeps at least, and the log pane at least, when both show.
const MIN_TABLE: u16 = 4;
const MIN_LOG: u16 = 5;

const KEYS: &str = "↑↓ select  s start  x stop  r restart  l logs  / filter  ? help  q quit";

const HELP: [(&str, &str); 12] = [
    ("↑ ↓  j k", "select a server"),
    ("PgUp PgDn", "move by ten"),
    ("s", "start the selected server"),
    ("x", "stop it"),
    ("r", "restart it"),
    ("l  Enter", "log view: logs take the screen"),
    ("a", "follow every server's logs / the selected one's"),
    ("/", "filter by name or state (Enter keeps, Esc clears)"),
    ("Esc", "clear the filter, leave the log view"),
    ("?", "this help (any key closes it)"),
    ("q  Ctrl-C", "quit"),
    ("", "CPU and memory are sampled once a second."),
];

/// Draws everything.
pub(crate) fn draw(f: &mut Frame<'_>, m: &Model, theme: Theme) {
    let area = f.area();
    let [title, body, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(area);
    draw_title(f, title, m);
    if m.log_view {
        draw_log(f, body, m, theme);
    } else {
        let rows = u16::try_from(m.visible().len()).unwrap_or(u16::MAX);
        let want = rows.saturating_add(1).max(MIN_TABLE);
        let table_h = if body.height >= want + MIN_LOG {
            want
        } else {
            body.height
                .saturating_sub(MIN_LOG)
                .max(MIN_TABLE.min(body.height))
        };
        let [table, log] =
            Layout::vertical([Constraint::Length(table_h), Constraint::Min(0)]).areas(body);
        draw_table(f, table, m, theme);
        if log.height > 0 {
            draw_log(f, log, m, theme);
        }
    }
    draw_footer(f, footer, m, theme);
    if m.help {
        draw_help(f, area);
    }
}

fn draw_title(f: &mut Frame<'_>, area: Rect, m: &Model) {
    let count = |s: ServerState| m.rows.iter().filter(|r| r.state == s).count();
    let mut text = format!(
        " xy top · {} servers · {} running",
        m.rows.len(),
        count(ServerState::Running)
    );
    let failed = count(ServerState::Failed);
    if failed > 0 {
        text.push_str(&format!(" · {failed} failed"));
    }
    if !m.filter.is_empty() {
        text.push_str(&format!(" · filter \"{}\"", m.filter));
    }
    let style = Style::new().add_modifier(Modifier::REVERSED);
    f.render_widget(Paragraph::new(Line::from(text)).style(style), area);
}

/// NAME is cut beyond this many characters.
const NAME_MAX: u16 = 32;

/// The NAME column fits the longest name of every row (not only the
/// filtered ones, so columns stay put while typing a filter), within
/// [`NAME_MAX`]. Every column has its own width; spare width stays at the
/// right, instead of pushing the numbers away from the names on a wide
/// terminal.
fn name_width(m: &Model) -> u16 {
    let longest = m
        .rows
        .iter()
        .map(|r| r.name.chars().count())
        .max()
        .unwrap_or(0);
    u16::try_from(longest)
        .unwrap_or(u16::MAX)
        .clamp(4, NAME_MAX)
}

fn draw_table(f: &mut Frame<'_>, area: Rect, m: &Model, theme: Theme) {
    let header = TableRow::new([
        "NAME", "STATE", "HEALTH", "PID", "PORT", "CPU%", "RSS", "RST", "UPTIME", "TOOLS", "CALLS",
    ])
    .style(Style::new().add_modifier(Modifier::BOLD));
    let visible = m.visible();
    let rows: Vec<TableRow<'_>> = visible.iter().map(|r| table_row(r, theme)).collect();
    let widths = [
        Constraint::Length(name_width(m)),
        Constraint::Length(10),
        Constraint::Length(9),
        Constraint::Length(7),
        Constraint::Length(5),
        Constraint::Length(5),
        Constraint::Length(6),
        Constraint::Length(3),
        Constraint::Length(7),
        Constraint::Length(5),
        Constraint::Length(6),
    ];
    let table = Table::new(rows, widths)
        .header(header)
        .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED));
    let mut state = TableState::default().with_selected(m.selected_index());
    if visible.is_empty() {
        let msg = if m.rows.is_empty() {
            "no servers configured: add one with `xyctl add`, or a .kdl file in the config directory"
        } else {
            "no server matches the filter (Esc clears it)"
        };
        let [h, rest] = Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(area);
        f.render_stateful_widget(table, h, &mut state);
        f.render_widget(Paragraph::new(format!(" {msg}")), rest);
        return;
    }
    f.render_stateful_widget(table, area, &mut state);
}

fn table_row(r: &Row, theme: Theme) -> TableRow<'static> {
    let dash = || "-".to_owned();
    TableRow::new([
        Span::raw(r.name.clone()),
        Span::styled(r.state.as_str(), theme.state(r.state)),
        Span::styled(r.health.as_str(), theme.health(r.health)),
        Span::raw(r.pid.map_or_else(dash, |p| p.to_string())),
        Span::raw(r.port.to_string()),
        Span::raw(r.cpu_percent.map_or_else(dash, cpu)),
        Span::raw(r.rss_bytes.map_or_else(dash, bytes)),
        Span::raw(r.restarts.to_string()),
        Span::raw(r.uptime_secs.map_or_else(dash, xy_core::time::human_secs)),
        Span::styled(
            crate::render::list::tools_cell(
                r.tools.map(|t| u32::try_from(t).unwrap_or(u32::MAX)),
                r.held,
            ),
            if r.held > 0 {
                theme.fg(Color::Yellow)
            } else {
                ratatui::style::Style::new()
            },
        ),
        Span::raw(r.calls.map_or_else(dash, |c| c.to_string())),
    ])
}

/// `0.5`, `12`, `180`: one decimal below 10 %.
fn cpu(p: f64) -> String {
    if p < 10.0 {
        format!("{p:.1}")
    } else {
        format!("{p:.0}")
    }
}

/// `812K`, `12.0M`, `1.2G`.
fn bytes(b: u64) -> String {
    const K: f64 = 1024.0;
    #[allow(clippy::cast_precision_loss)] // a display figure
    let b = b as f64;
    if b < K * K {
        format!("{:.0}K", b / K)
    } else if b < K * K * K {
        format!("{:.1}M", b / (K * K))
    } else {
        format!("{:.1}G", b / (K * K * K))
    }
}

fn draw_log(f: &mut Frame<'_>, area: Rect, m: &Model, theme: Theme) {
    let title = match &m.log_target {
        LogTarget::None => " logs ".to_owned(),
        LogTarget::One(n) => format!(" logs: {n} "),
        LogTarget::All => " logs: every server ".to_owned(),
    };
    let block = Block::new().borders(Borders::TOP).title(title);
    let inner = block.inner(area);
    f.render_widget(block, area);
    let n = usize::from(inner.height);
    let skip = m.log.len().saturating_sub(n);
    let all = m.log_target == LogTarget::All;
    let lines: Vec<Line<'_>> = m
        .log
        .iter()
        .skip(skip)
        .map(|l| {
            let mut spans = vec![Span::styled(
                crate::render::clock_ms(&l.ts)
                    .get(..8)
                    .unwrap_or_default()
                    .to_owned(),
                theme.fg(Color::DarkGray),
            )];
            spans.push(Span::raw(" "));
            if all {
                spans.push(Span::styled(format!("{} ", l.name), theme.fg(Color::Cyan)));
            }
            if l.stream == LogStream::Stderr {
                spans.push(Span::styled("[err] ", theme.fg(Color::Red)));
            }
            spans.push(Span::raw(l.line.as_str()));
            Line::from(spans)
        })
        .collect();
    f.render_widget(Paragraph::new(lines), inner);
}

fn draw_footer(f: &mut Frame<'_>, area: Rect, m: &Model, theme: Theme) {
    let line = if m.editing_filter {
        Line::from(vec![
            Span::styled("filter: ", Style::new().add_modifier(Modifier::BOLD)),
            Span::raw(format!("{}▏", m.filter)),
            Span::styled("  Enter keep · Esc clear", theme.fg(Color::DarkGray)),
        ])
    } else if let Some(why) = &m.lost {
        Line::from(Span::styled(
            format!("xyd connection lost: {why} (q quits)"),
            theme.fg(Color::Red).add_modifier(Modifier::BOLD),
        ))
    } else if let Some(msg) = &m.message {
        Line::from(vec![
            Span::raw(msg.clone()),
            Span::styled("   ? help  q quit", theme.fg(Color::DarkGray)),
        ])
    } else {
        Line::from(Span::styled(KEYS, theme.fg(Color::DarkGray)))
    };
    f.render_widget(Paragraph::new(line), area);
}

fn draw_help(f: &mut Frame<'_>, area: Rect) {
    let w = area.width.min(66);
    let h = (u16::try_from(HELP.len()).unwrap_or(0) + 2).min(area.height);
    let popup = Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    };
    let lines: Vec<Line<'_>> = HELP
        .iter()
        .map(|(k, v)| {
            Line::from(vec![
                Span::styled(
                    format!(" {k:<10} "),
                    Style::new().add_modifier(Modifier::BOLD),
                ),
                Span::raw(*v),
            ])
        })
        .collect();
    f.render_widget(Clear, popup);
    f.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" xy top: keys ")),
        popup,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::top::model::tests::row;
    use crate::top::model::{Key, Msg};
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use xy_core::protocol::LogNotification;

    fn render(m: &Model, w: u16, h: u16) -> String {
        let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
        t.draw(|f| draw(f, m, Theme { color: false })).unwrap();
        let buf = t.backend().buffer();
        let mut out = String::new();
        for y in 0..h {
            let mut line = String::new();
            for x in 0..w {
                line.push_str(buf[(x, y)].symbol());
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }

    fn model() -> Model {
        let mut web = row("web", ServerState::Running);
        web.health = HealthState::Healthy;
        web.tools = Some(4);
        web.calls = Some(1234);
        web.restarts = 2;
        let mut db = row("db", ServerState::Failed);
        db.cpu_percent = None;
        db.rss_bytes = None;
        db.uptime_secs = None;
        let mut api = row("api", ServerState::Running);
        api.pid = Some(4100);
        api.port = 8400;
        api.cpu_percent = Some(12.25);
        api.rss_bytes = Some(800 * 1024);
        api.uptime_secs = Some(7380);
        let mut m = Model::new(vec![web, db, api]);
        m.start();
        for (i, text) in ["listening on 127.0.0.1:8400", "GET /mcp 200"]
            .iter()
            .enumerate()
        {
            m.update(Msg::Log {
                generation: 1,
                line: LogNotification {
                    subscription_id: 1,
                    name: "api".into(),
                    stream: if i == 1 {
                        LogStream::Stderr
                    } else {
                        LogStream::Stdout
                    },
                    line: (*text).into(),
                    ts: format!("2026-11-30T05:04:5{i}.123Z"),
                },
            });
        }
        m
    }

    #[test]
    fn dashboard_at_80x24() {
        let got = render(&model(), 80, 24);
        let rule = "─".repeat(69);
        let mut want = vec![
            " xy top · 3 servers · 2 running · 1 failed".to_owned(),
            "NAME STATE      HEALTH    PID     PORT  CPU%  RSS    RST UPTIME  TOOLS CALLS"
                .to_owned(),
            "api  running    unknown   4100    8400  12    800K   0   2h 3m   -     -".to_owned(),
            "db   failed     unknown   -       8421  -     -      0   -       -     -".to_owned(),
            "web  running    healthy   4242    8421  0.5   12.0M  2   2m 5s   4     1234"
                .to_owned(),
            format!(" logs: api {rule}"),
            "05:04:50 listening on 127.0.0.1:8400".to_owned(),
            "05:04:51 [err] GET /mcp 200".to_owned(),
        ];
        want.resize(23, String::new());
        want.push(
            "↑↓ select  s start  x stop  r restart  l logs  / filter  ? help  q quit".to_owned(),
        );
        let want = want.join("\n") + "\n";
        assert_eq!(got, want, "\n{got}");
    }

    // Issue 26: NAME took every spare column, so on a wide terminal the
    // numbers sat far from the names.
    #[test]
    fn spare_width_goes_to_no_column() {
        let wide = render(&model(), 200, 24);
        let header = wide.lines().nth(1).unwrap();
        assert_eq!(
            header,
            "NAME STATE      HEALTH    PID     PORT  CPU%  RSS    RST UPTIME  TOOLS CALLS"
        );
        let mut m = model();
        m.rows[0].name = "a-server-with-a-very-long-name-indeed-yes".into();
        let got = render(&m, 200, 24);
        let header = got.lines().nth(1).unwrap();
        assert_eq!(
            header.find("STATE"),
            Some(usize::from(NAME_MAX) + 1),
            "{got}"
        );
    }

    #[test]
    fn filter_prompt_help_and_log_view() {
        let mut m = model();
        m.update(Msg::Key(Key::Char('/')));
        m.update(Msg::Key(Key::Char('w')));
        let got = render(&m, 80, 24);
        let lines: Vec<&str> = got.lines().collect();
        assert_eq!(
            lines[0],
            r#" xy top · 3 servers · 2 running · 1 failed · filter "w""#
        );
        assert!(lines[2].starts_with("web "), "{got}");
        assert!(lines[3].trim().is_empty(), "{got}");
        assert!(lines.iter().any(|l| l.starts_with(" logs: web")), "{got}");
        assert_eq!(lines[23], "filter: w▏  Enter keep · Esc clear");

        m.update(Msg::Key(Key::Esc));
        m.update(Msg::Key(Key::Char('?')));
        let got = render(&m, 80, 24);
        assert!(got.contains("xy top: keys"), "{got}");
        assert!(got.contains("r          restart it"), "{got}");

        m.update(Msg::Key(Key::Esc));
        m.update(Msg::Key(Key::Char('l')));
        let got = render(&model_with_log_view(), 80, 24);
        assert!(
            got.lines().nth(1).unwrap().starts_with(" logs: api"),
            "{got}"
        );
    }

    fn model_with_log_view() -> Model {
        let mut m = model();
        m.update(Msg::Key(Key::Char('l')));
        m
    }

    #[test]
    fn small_and_large_terminals_do_not_panic() {
        let m = model();
        for (w, h) in [(1, 1), (20, 5), (80, 6), (200, 60), (80, 24)] {
            let _ = render(&m, w, h);
        }
        let mut many: Vec<Row> = (0..40)
            .map(|i| row(&format!("s{i:02}"), ServerState::Running))
            .collect();
        many[0].state = ServerState::Failed;
        let mut m = Model::new(many);
        m.start();
        m.update(Msg::Key(Key::End));
        let got = render(&m, 80, 24);
        // The table scrolls to keep the selection visible; the log pane stays.
        assert!(got.contains("s39"), "{got}");
        assert!(got.contains(" logs: s39"), "{got}");
    }

    #[test]
    fn empty_states() {
        let m = Model::new(vec![]);
        let got = render(&m, 80, 24);
        assert!(got.contains("no servers configured"), "{got}");
        let mut m = model();
        m.update(Msg::Key(Key::Char('/')));
        m.update(Msg::Key(Key::Char('z')));
        assert!(render(&m, 80, 24).contains("no server matches"));
    }

    #[test]
    fn figures() {
        assert_eq!(cpu(0.25), "0.2");
        assert_eq!(cpu(99.6), "100");
        assert_eq!(bytes(812 * 1024), "812K");
        assert_eq!(bytes(12 << 20), "12.0M");
        assert_eq!(bytes(3 << 30), "3.0G");
    }
}
