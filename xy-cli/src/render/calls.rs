//! `xyctl calls`: one row per recorded call (SPEC §20), oldest first:
//! time, server, client, tool, duration, outcome. With `-f` the backlog's
//! table is followed by one row per new call at the same column widths.

use xy_core::protocol::mcp::{CallOutcome, CallRecord};

use super::columns::{self, Cell};
use super::{Paint, Style, date_time};

const HEADER: [&str; 6] = ["TIME", "SERVER", "CLIENT", "TOOL", "DURATION", "OUTCOME"];

/// Column widths for a follow: the backlog's, and room for common values.
pub(crate) struct CallColumns {
    widths: Vec<usize>,
}

/// The table, or a note when nothing was recorded.
pub(crate) fn render_calls(calls: &[CallRecord], style: &Style) -> String {
    if calls.is_empty() {
        return "no calls recorded yet\n".to_owned();
    }
    let rows: Vec<Vec<Cell>> = calls.iter().map(row).collect();
    columns::render(&HEADER, &rows, style)
}

impl CallColumns {
    /// Widths that fit the header, `calls` and typical names.
    pub(crate) fn new(calls: &[CallRecord]) -> CallColumns {
        let mut widths: Vec<usize> = HEADER.iter().map(|h| h.chars().count()).collect();
        let floor = [23, 12, 16, 16, 8, 10];
        for (w, f) in widths.iter_mut().zip(floor) {
            *w = (*w).max(f);
        }
        for c in calls {
            for (w, cell) in widths.iter_mut().zip(row(c)) {
                *w = (*w).max(cell.text.chars().count());
            }
        }
        CallColumns { widths }
    }

    /// The header line at these widths.
    pub(crate) fn header(&self, style: &Style) -> String {
        let mut out = String::new();
        let cells = HEADER.iter().map(|h| (*h, Some(Paint::Bold)));
        columns::line(&mut out, cells, &self.widths, style);
        out
    }

    /// One call's line, newline included.
    pub(crate) fn line(&self, c: &CallRecord, style: &Style) -> String {
        let mut out = String::new();
        let cells = row(c);
        let cells = cells.iter().map(|c| (c.text.as_str(), c.paint));
        columns::line(&mut out, cells, &self.widths, style);
        out
    }
}

fn row(c: &CallRecord) -> Vec<Cell> {
    let (word, paint) = outcome(c.outcome);
    vec![
        Cell::plain(time(&c.ts)),
        Cell::plain(c.server.as_str()),
        Cell::plain(c.client.as_deref().unwrap_or("-")),
        Cell::plain(c.tool.as_str()),
        Cell::plain(duration(c.duration_us)),
        Cell::painted(word, paint),
    ]
}

/// `2026-11-30 05:04:54.123` (UTC).
fn time(ts: &str) -> String {
    let ms = ts.get(19..23).filter(|f| f.starts_with('.')).unwrap_or("");
    format!("{}{ms}", date_time(ts))
}

/// `850µs`, `12.3ms`, `1.25s`, `3m 12s`.
pub(crate) fn duration(us: u64) -> String {
    if us < 1000 {
        format!("{us}µs")
    } else if us < 1_000_000 {
        format!("{:.1}ms", us as f64 / 1000.0)
    } else if us < 60_000_000 {
        format!("{:.2}s", us as f64 / 1_000_000.0)
    } else {
        xy_core::time::human_secs(us / 1_000_000)
    }
}

fn outcome(o: CallOutcome) -> (&'static str, Option<Paint>) {
    match o {
        CallOutcome::Ok => ("ok", Some(Paint::Green)),
        CallOutcome::ToolError => ("tool error", Some(Paint::Yellow)),
        CallOutcome::RpcError => ("rpc error", Some(Paint::Red)),
        CallOutcome::HeldBack => ("held back", Some(Paint::Magenta)),
        CallOutcome::ChildGone => ("child gone", Some(Paint::Red)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(tool: &str, client: Option<&str>, us: u64, outcome: CallOutcome) -> CallRecord {
        CallRecord {
            ts: "2026-11-30T05:04:54.123Z".into(),
            server: "notes".into(),
            client: client.map(str::to_owned),
            tool: tool.into(),
            duration_us: us,
            outcome,
        }
    }

    #[test]
    fn a_table_oldest_first() {
        let calls = [
            rec("search", Some("claude-code 1.0"), 850, CallOutcome::Ok),
            rec("write_file", None, 12_345, CallOutcome::ToolError),
            rec("x", Some("ureq/3"), 1_250_000, CallOutcome::ChildGone),
        ];
        assert_eq!(
            render_calls(&calls, &Style::PLAIN),
            "\
TIME                     SERVER  CLIENT           TOOL        DURATION  OUTCOME
2026-11-30 05:04:54.123  notes   claude-code 1.0  search      850µs     ok
2026-11-30 05:04:54.123  notes   -                write_file  12.3ms    tool error
2026-11-30 05:04:54.123  notes   ureq/3           x           1.25s     child gone
"
        );
        assert_eq!(render_calls(&[], &Style::PLAIN), "no calls recorded yet\n");
    }

    #[test]
    fn follow_lines_keep_their_columns_and_survive_long_cells() {
        let cols = CallColumns::new(&[]);
        let a = cols.line(&rec("echo", Some("c"), 5, CallOutcome::Ok), &Style::PLAIN);
        let long = "t".repeat(40);
        let b = cols.line(
            &rec(&long, Some("c"), 5, CallOutcome::HeldBack),
            &Style::PLAIN,
        );
        assert_eq!(a.find("echo"), cols.header(&Style::PLAIN).find("TOOL"));
        assert!(b.contains(&format!("{long}  5µs")), "{b}");
        assert_eq!(duration(192_000_000), "3m 12s");
    }
}
