//! `xyctl tools <name>`: the tools a server listed after its last start,
//! and what changed against the start before (SPEC §12).

use std::fmt::Write as _;

use xy_core::protocol::mcp::{ToolsResult, ToolsView};

use super::list::{new_table, tighten};
use super::{Paint, Style, date_time, trim_lines};

/// The tool list and the diff, or a note when nothing was listed yet.
pub(crate) fn render_tools(r: &ToolsResult, style: &Style) -> String {
    let Some(current) = &r.current else {
        return format!(
            "{}: no tools listed yet (an `mcp` health probe lists them after each start)\n",
            r.name
        );
    };
    let mut out = String::new();
    let n = current.tools.len();
    let _ = writeln!(
        out,
        "{}  {} tool{}  ({})",
        style.paint(&r.name, Paint::Bold),
        n,
        if n == 1 { "" } else { "s" },
        origin(current)
    );
    if n > 0 {
        let mut table = new_table(style);
        for t in &current.tools {
            let mut text = t.description.clone().unwrap_or_default();
            if let Some(title) = &t.title {
                text = if text.is_empty() {
                    title.clone()
                } else {
                    format!("{title}: {text}")
                };
            }
            // One line per tool: a long description is cut, not wrapped.
            let first = text.lines().next().unwrap_or("");
            table.add_row(vec![format!("  {}", t.name), ellipsize(first, 100)]);
        }
        tighten(&mut table);
        out.push_str(&trim_lines(&table.to_string()));
    }
    out.push_str(&changes_line(r));
    out
}

/// `2026-07-28, insikt 0.4.1, listed 2026-11-30 05:06:59`.
fn origin(v: &ToolsView) -> String {
    let server = match (&v.server_name, &v.server_version) {
        (Some(n), Some(ver)) => format!(", {n} {ver}"),
        (Some(n), None) => format!(", {n}"),
        _ => String::new(),
    };
    format!(
        "{}{server}, listed {}",
        v.protocol_version,
        date_time(&v.ts)
    )
}

/// The diff against the previous start, in one line.
pub(crate) fn changes_line(r: &ToolsResult) -> String {
    let Some(previous) = &r.previous else {
        return "no earlier start recorded: nothing to compare\n".to_owned();
    };
    let since = date_time(&previous.ts);
    if r.added.is_empty() && r.removed.is_empty() && r.changed.is_empty() {
        return format!("unchanged since the previous start ({since})\n");
    }
    format!(
        "since the previous start ({since}): {}\n",
        diff_words(&r.added, &r.removed, &r.changed)
    )
}

/// `added: a, b; removed: c; changed: d` (empty parts left out).
pub(crate) fn diff_words(added: &[String], removed: &[String], changed: &[String]) -> String {
    [("added", added), ("removed", removed), ("changed", changed)]
        .iter()
        .filter(|(_, names)| !names.is_empty())
        .map(|(what, names)| format!("{what}: {}", names.join(", ")))
        .collect::<Vec<_>>()
        .join("; ")
}

fn ellipsize(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let cut: String = s.chars().take(max - 1).collect();
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    use super::*;
    use xy_core::protocol::mcp::ToolSummary;

    fn view(ts: &str, names: &[&str]) -> ToolsView {
        ToolsView {
            ts: ts.into(),
            protocol_version: "2026-07-28".into(),
            server_name: Some("insikt".into()),
            server_version: Some("0.4.1".into()),
            tools: names
                .iter()
                .map(|n| ToolSummary {
                    name: (*n).into(),
                    title: None,
                    description: Some(format!("The {n} tool.")),
                    ..ToolSummary::default()
                })
                .collect(),
        }
    }

    #[test]
    fn tools_and_changes() {
        let r = ToolsResult {
            name: "insikt".into(),
            current: Some(view("2026-11-30T06:00:00.000Z", &["echo", "search"])),
            previous: Some(view("2026-11-30T05:00:00.000Z", &["echo", "old"])),
            added: vec!["search".into()],
            removed: vec!["old".into()],
            changed: vec!["echo".into()],
            mode: None,
            prompts: vec![],
        };
        assert_eq!(
            render_tools(&r, &Style::PLAIN),
            "insikt  2 tools  (2026-07-28, insikt 0.4.1, listed 2026-11-30 06:00:00)\n  echo    The echo tool.\n  search  The search tool.\nsince the previous start (2026-11-30 05:00:00): added: search; removed: old; changed: echo\n"
        );
    }

    #[test]
    fn nothing_listed_first_start_and_unchanged() {
        let mut r = ToolsResult {
            name: "a".into(),
            current: None,
            previous: None,
            added: vec![],
            removed: vec![],
            changed: vec![],
            mode: None,
            prompts: vec![],
        };
        assert!(render_tools(&r, &Style::PLAIN).starts_with("a: no tools listed yet"));
        r.current = Some(view("2026-11-30T06:00:00.000Z", &["x"]));
        assert!(
            render_tools(&r, &Style::PLAIN)
                .ends_with("no earlier start recorded: nothing to compare\n")
        );
        r.previous = Some(view("2026-11-30T05:00:00.000Z", &["x"]));
        assert!(
            render_tools(&r, &Style::PLAIN)
                .ends_with("unchanged since the previous start (2026-11-30 05:00:00)\n")
        );
    }
}
