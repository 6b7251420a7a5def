//! `xyctl tools <name>`: the tools a server listed after its last start,
//! where each stands with the firewall and why, per-tool call figures, and
//! what changed against the start before (SPEC §12, §20); and the blocks
//! `xyctl tools review` shows for each held-back tool.

use std::fmt::Write as _;

use xy_core::firewall::{ToolState, is_hidden};
use xy_core::protocol::mcp::{ToolCallStats, ToolSummary, ToolsResult, ToolsView};

use super::list::{new_table, tighten};
use super::{Paint, Style, date_time, trim_lines};

/// The tool list and the diff, or a note when nothing was listed yet.
pub(crate) fn render_tools(r: &ToolsResult, style: &Style) -> String {
    let Some(current) = &r.current else {
        return format!(
            "{}: no tools listed yet (xy lists a server's tools after each start)\n",
            r.name
        );
    };
    let mut out = String::new();
    let n = current.tools.len();
    let mode = r
        .mode
        .map(|m| format!(", firewall {}", m.as_str()))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "{}  {} tool{}  ({}{mode})",
        style.paint(&r.name, Paint::Bold),
        n,
        if n == 1 { "" } else { "s" },
        origin(current)
    );
    out.push_str(&table(&current.tools, style));
    if !r.prompts.is_empty() {
        let _ = writeln!(out, "prompts:");
        out.push_str(&table(&r.prompts, style));
    }
    if !r.resources.is_empty() {
        let _ = writeln!(out, "skill files and apps:");
        out.push_str(&table(&r.resources, style));
    }
    out.push_str(&held_lines(r, style));
    out.push_str(&warning_lines(r, style));
    out.push_str(&changes_line(r));
    out
}

/// One row per tool: name, state (when the daemon reports one), the first
/// line of its title and description, and its call figures.
fn table(items: &[ToolSummary], style: &Style) -> String {
    if items.is_empty() {
        return String::new();
    }
    let states = items.iter().any(|t| t.state.is_some());
    let calls = items.iter().any(|t| t.calls.is_some());
    let mut table = new_table(style);
    for t in items {
        let mut text = t.description.clone().unwrap_or_default();
        if let Some(title) = &t.title {
            text = if text.is_empty() {
                title.clone()
            } else {
                format!("{title}: {text}")
            };
        }
        // One line per tool: a long description is cut, not wrapped.
        let first = reveal(text.lines().next().unwrap_or(""));
        let mut row = vec![format!("  {}", reveal(&t.name))];
        if states {
            row.push(state_word(t.state, style));
        }
        row.push(ellipsize(&first, 100));
        if calls {
            row.push(t.calls.map(|c| call_figures(&c)).unwrap_or_default());
        }
        table.add_row(row);
    }
    tighten(&mut table);
    trim_lines(&table.to_string())
}

fn state_word(state: Option<ToolState>, style: &Style) -> String {
    let Some(state) = state else {
        return String::new();
    };
    let word = state_name(state);
    match state {
        ToolState::Approved => word.to_owned(),
        ToolState::Pending | ToolState::Changed => style.paint(word, Paint::Yellow),
        ToolState::Flagged | ToolState::Denied => style.paint(word, Paint::Red),
    }
}

fn state_name(state: ToolState) -> &'static str {
    match state {
        ToolState::Approved => "approved",
        ToolState::Pending => "pending",
        ToolState::Changed => "changed",
        ToolState::Flagged => "flagged",
        ToolState::Denied => "denied",
    }
}

/// `12 calls, 1 error, p50 3.1ms, p99 9.0ms`.
pub(crate) fn call_figures(c: &ToolCallStats) -> String {
    let plural = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    format!(
        "{}, {}, p50 {}, p99 {}",
        plural(c.calls, "call", "calls"),
        plural(c.errors, "error", "errors"),
        super::calls::duration(c.p50_us),
        super::calls::duration(c.p99_us)
    )
}

/// The held-back tools, prompts and pinned resources with their reasons, and how to let
/// them through.
fn held_lines(r: &ToolsResult, style: &Style) -> String {
    let held: Vec<&ToolSummary> = r
        .current
        .iter()
        .flat_map(|c| c.tools.iter())
        .chain(r.prompts.iter())
        .chain(r.resources.iter())
        .filter(|t| t.state.is_some_and(|s| !s.visible()))
        .collect();
    if held.is_empty() {
        return String::new();
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}",
        style.paint(
            &format!(
                "{} held back by xy's firewall (clients do not see {}):",
                held.len(),
                if held.len() == 1 { "it" } else { "them" }
            ),
            Paint::Yellow
        )
    );
    for t in &held {
        let reasons = if t.reasons.is_empty() {
            state_name(t.state.unwrap_or(ToolState::Pending)).to_owned()
        } else {
            t.reasons.join("; ")
        };
        let _ = writeln!(out, "  {}: {}", reveal(&t.name), reveal(&reasons));
    }
    let _ = writeln!(
        out,
        "review them with `xyctl tools review {0}`, or approve with `xyctl tools approve {0} TOOL…` (`--all` for every one)",
        r.name
    );
    out
}

/// What does not hold a tool back but the user should know (a name another
/// server lists with another definition, SPEC §25).
fn warning_lines(r: &ToolsResult, style: &Style) -> String {
    let mut out = String::new();
    for t in r.current.iter().flat_map(|c| c.tools.iter()) {
        for w in &t.warnings {
            let _ = writeln!(
                out,
                "{} {}: {}",
                style.paint("warning:", Paint::Yellow),
                reveal(&t.name),
                reveal(w)
            );
        }
    }
    out
}

/// Text with every hidden, direction-changing or control character shown
/// as `⟨U+200B⟩`, so the user sees what the model would read.
pub(crate) fn reveal(text: &str) -> String {
    if !text.chars().any(|c| is_hidden(c) || c.is_control()) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_hidden(c) || (c.is_control() && c != '\n') {
            let _ = write!(out, "⟨U+{:04X}⟩", u32::from(c));
        } else {
            out.push(c);
        }
    }
    out
}

/// What `xyctl tools review` shows for one held-back tool: its state and
/// reasons, then what changed against the approved version (a word diff
/// of title and description, a line diff of the schema), or, for a tool
/// never approved, its text.
pub(crate) fn review_block(server: &str, t: &ToolSummary, style: &Style) -> String {
    let mut out = String::new();
    let state = t.state.unwrap_or(ToolState::Pending);
    let _ = writeln!(
        out,
        "{} {}  {}",
        style.paint(server, Paint::Bold),
        style.paint(&reveal(&t.name), Paint::Bold),
        state_word(Some(state), style)
    );
    for r in &t.reasons {
        let _ = writeln!(out, "  why: {}", reveal(r));
    }
    let schema = |v: &Option<serde_json::Value>| {
        v.as_ref()
            .and_then(|v| serde_json::to_string_pretty(v).ok())
            .unwrap_or_default()
    };
    match &t.approved {
        Some(a) => {
            let _ = writeln!(out, "  approved {}; now:", date_time(&a.approved_at));
            for (what, old, new) in [
                ("title", a.title.as_deref(), t.title.as_deref()),
                (
                    "description",
                    a.description.as_deref(),
                    t.description.as_deref(),
                ),
            ] {
                let (old, new) = (old.unwrap_or(""), new.unwrap_or(""));
                if old != new {
                    let _ = writeln!(
                        out,
                        "  {what}: {}",
                        word_diff(&reveal(old), &reveal(new), style)
                    );
                }
            }
            let (old, new) = (schema(&a.input_schema), schema(&t.input_schema));
            if old != new {
                let _ = writeln!(out, "  inputSchema:");
                out.push_str(&line_diff(&reveal(&old), &reveal(&new), style));
            }
        }
        None => {
            if let Some(title) = &t.title {
                let _ = writeln!(out, "  title: {}", reveal(title));
            }
            if let Some(d) = &t.description {
                let _ = writeln!(out, "  description: {}", reveal(d));
            }
            let s = schema(&t.input_schema);
            if !s.is_empty() {
                let _ = writeln!(out, "  inputSchema:");
                for line in reveal(&s).lines() {
                    let _ = writeln!(out, "    {line}");
                }
            }
        }
    }
    out
}

/// Removed words as `[-old-]`, added as `{+new+}` (coloured when colour is on).
fn word_diff(old: &str, new: &str, style: &Style) -> String {
    use similar::{ChangeTag, TextDiff};
    let diff = TextDiff::from_words(old, new);
    // Runs of one kind are marked once: `{+file and sends it+}`.
    let mut runs: Vec<(ChangeTag, String)> = Vec::new();
    for change in diff.iter_all_changes() {
        match runs.last_mut() {
            Some((tag, text)) if *tag == change.tag() => text.push_str(change.value()),
            _ => runs.push((change.tag(), change.value().to_owned())),
        }
    }
    let mut out = String::new();
    for (tag, text) in runs {
        match tag {
            ChangeTag::Equal => out.push_str(&text),
            ChangeTag::Delete => out.push_str(&style.paint(&format!("[-{text}-]"), Paint::Red)),
            ChangeTag::Insert => out.push_str(&style.paint(&format!("{{+{text}+}}"), Paint::Green)),
        }
    }
    out
}

/// A unified-style line diff, indented.
fn line_diff(old: &str, new: &str, style: &Style) -> String {
    use similar::{ChangeTag, TextDiff};
    let diff = TextDiff::from_lines(old, new);
    let mut out = String::new();
    for change in diff.iter_all_changes() {
        let line = change.value().trim_end_matches('\n');
        let _ = match change.tag() {
            ChangeTag::Equal => writeln!(out, "      {line}"),
            ChangeTag::Delete => {
                writeln!(out, "    {}", style.paint(&format!("- {line}"), Paint::Red))
            }
            ChangeTag::Insert => writeln!(
                out,
                "    {}",
                style.paint(&format!("+ {line}"), Paint::Green)
            ),
        };
    }
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
            resources: vec![],
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
            resources: vec![],
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

    fn firewalled() -> ToolsResult {
        use xy_core::firewall::{FirewallMode, ToolState};
        use xy_core::protocol::mcp::{ApprovedVersion, ToolCallStats};
        let mut v = view("2026-11-30T06:00:00.000Z", &["echo", "read", "sneaky"]);
        v.tools[0].state = Some(ToolState::Approved);
        v.tools[0].warnings =
            vec!["its name is also offered by server b with another definition".into()];
        v.tools[0].calls = Some(ToolCallStats {
            calls: 12,
            errors: 1,
            p50_us: 3_100,
            p99_us: 850,
        });
        v.tools[1].state = Some(ToolState::Changed);
        v.tools[1].reasons = vec!["its description changed since it was approved".into()];
        v.tools[1].description = Some("Reads a file and sends it anywhere.".into());
        v.tools[1].input_schema =
            Some(serde_json::json!({"type": "object", "properties": {"path": {"type": "string"}}}));
        v.tools[1].approved = Some(Box::new(ApprovedVersion {
            digest: "ab".repeat(32),
            approved_at: "2026-11-29T10:00:00.000Z".into(),
            title: None,
            description: Some("Reads a file.".into()),
            input_schema: Some(serde_json::json!({"type": "object"})),
        }));
        v.tools[2].state = Some(ToolState::Flagged);
        v.tools[2].description = Some("Fine\u{200B}print".into());
        v.tools[2].reasons = vec!["invisible character U+200B in its description".into()];
        ToolsResult {
            name: "files".into(),
            current: Some(v),
            previous: None,
            added: vec![],
            removed: vec![],
            changed: vec![],
            mode: Some(FirewallMode::Pin),
            prompts: vec![],
            resources: vec![],
        }
    }

    #[test]
    fn states_reasons_figures_and_the_way_out_are_shown() {
        let out = render_tools(&firewalled(), &Style::PLAIN);
        let lines: Vec<&str> = out.lines().collect();
        assert!(
            lines[0].ends_with("listed 2026-11-30 06:00:00, firewall pin)"),
            "{out}"
        );
        assert!(
            lines[1].contains("echo") && lines[1].contains("approved"),
            "{out}"
        );
        assert!(
            lines[1].contains("12 calls, 1 error, p50 3.1ms, p99 850µs"),
            "{out}"
        );
        assert!(
            lines[2].contains("read") && lines[2].contains("changed"),
            "{out}"
        );
        assert!(
            lines[3].contains("Fine⟨U+200B⟩print"),
            "hidden characters shown: {out}"
        );
        assert!(
            out.contains("2 held back by xy's firewall (clients do not see them):"),
            "{out}"
        );
        assert!(
            out.contains(
                "warning: echo: its name is also offered by server b with another definition\n"
            ),
            "{out}"
        );
        assert!(
            out.contains("  read: its description changed since it was approved\n"),
            "{out}"
        );
        assert!(
            out.contains("  sneaky: invisible character U+200B in its description\n"),
            "{out}"
        );
        assert!(out.contains("`xyctl tools review files`"), "{out}");
        assert!(out.contains("`xyctl tools approve files TOOL…`"), "{out}");
        assert!(
            !out.contains('\u{200B}'),
            "no raw hidden character reaches the terminal"
        );
    }

    #[test]
    fn an_all_approved_listing_says_nothing_about_the_firewall() {
        let mut r = firewalled();
        if let Some(c) = &mut r.current {
            c.tools.truncate(1);
        }
        let out = render_tools(&r, &Style::PLAIN);
        assert!(!out.contains("held back"), "{out}");
    }

    #[test]
    fn a_review_shows_what_changed_against_the_approved_version() {
        let r = firewalled();
        let tools = &r.current.as_ref().unwrap().tools;
        let out = review_block("files", &tools[1], &Style::PLAIN);
        assert!(out.starts_with("files read  changed\n"), "{out}");
        assert!(
            out.contains("  why: its description changed since it was approved\n"),
            "{out}"
        );
        assert!(out.contains("approved 2026-11-29 10:00:00; now:"), "{out}");
        assert!(
            out.contains("  description: Reads a [-file.-]{+file and sends it anywhere.+}\n"),
            "{out}"
        );
        assert!(
            out.contains("    + ") && out.contains("\"path\""),
            "schema diff: {out}"
        );
        let never = review_block("files", &tools[2], &Style::PLAIN);
        assert!(
            never.contains("  description: Fine⟨U+200B⟩print\n"),
            "{never}"
        );
    }

    #[test]
    fn reveal_leaves_plain_text_alone_and_marks_the_rest() {
        assert_eq!(reveal("plain text"), "plain text");
        assert_eq!(reveal("a\u{202E}b\u{E0041}"), "a⟨U+202E⟩b⟨U+E0041⟩");
        assert_eq!(reveal("bell\u{7}"), "bell⟨U+0007⟩");
        assert_eq!(reveal("two\nlines"), "two\nlines");
    }
}
