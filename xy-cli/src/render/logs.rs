//! `xyctl logs`: one output line per captured line. With one server:
//! `HH:MM:SS.mmm line`; with several, every line is prefixed with the
//! server's name, padded and coloured, as `docker compose logs` does.

use xy_core::protocol::{LogNotification, LogStream};

use super::{Paint, Style, clock_ms};

/// The name column for multi-server output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LogPrefix {
    /// The known names, in the order their colours are assigned.
    names: Vec<String>,
    /// Pad names to this many characters.
    width: usize,
}

impl LogPrefix {
    /// A prefix column sized for `names` (sorted for stable colours).
    pub(crate) fn new(mut names: Vec<String>) -> LogPrefix {
        names.sort();
        names.dedup();
        let width = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
        LogPrefix { names, width }
    }

    fn paint_for(&self, name: &str) -> Paint {
        let idx = self
            .names
            .iter()
            .position(|n| n == name)
            .unwrap_or_else(|| {
                // A server added after we started (follow + reload): a stable
                // colour from its name.
                name.bytes().map(usize::from).sum()
            });
        Paint::PREFIXES[idx % Paint::PREFIXES.len()]
    }
}

/// One line, newline included.
pub(crate) fn render_log_line(
    n: &LogNotification,
    prefix: Option<&LogPrefix>,
    style: &Style,
) -> String {
    let mut out = String::with_capacity(n.line.len() + 32);
    if let Some(p) = prefix {
        let padded = format!("{:<width$} |", n.name, width = p.width);
        out.push_str(&style.paint(&padded, p.paint_for(&n.name)));
        out.push(' ');
    }
    out.push_str(&style.paint(clock_ms(&n.ts), Paint::Dim));
    out.push(' ');
    if n.stream == LogStream::Stderr {
        out.push_str(&style.paint("[err]", Paint::Red));
        out.push(' ');
    }
    out.push_str(&n.line);
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(name: &str, stream: LogStream, text: &str, ts: &str) -> LogNotification {
        LogNotification {
            subscription_id: 7,
            name: name.into(),
            stream,
            line: text.into(),
            ts: ts.into(),
        }
    }

    #[test]
    fn single_server() {
        let a = line(
            "insikt",
            LogStream::Stdout,
            "tick 1",
            "2026-11-30T05:04:54.123Z",
        );
        let b = line(
            "insikt",
            LogStream::Stderr,
            "oops",
            "2026-11-30T05:04:55.000Z",
        );
        assert_eq!(
            render_log_line(&a, None, &Style::PLAIN),
            "05:04:54.123 tick 1\n"
        );
        assert_eq!(
            render_log_line(&b, None, &Style::PLAIN),
            "05:04:55.000 [err] oops\n"
        );
    }

    #[test]
    fn prefixed_and_padded() {
        let p = LogPrefix::new(vec!["search-mcp".into(), "insikt".into()]);
        let a = line(
            "insikt",
            LogStream::Stdout,
            "tick 1",
            "2026-11-30T05:04:54.123Z",
        );
        let b = line(
            "search-mcp",
            LogStream::Stderr,
            "boom",
            "2026-11-30T05:04:54.200Z",
        );
        let out = [a, b]
            .iter()
            .map(|n| render_log_line(n, Some(&p), &Style::PLAIN))
            .collect::<String>();
        assert_eq!(
            out,
            "insikt     | 05:04:54.123 tick 1\nsearch-mcp | 05:04:54.200 [err] boom\n"
        );
    }

    #[test]
    fn coloured_prefixes_differ() {
        let p = LogPrefix::new(vec!["a".into(), "b".into()]);
        let a = line("a", LogStream::Stdout, "x", "2026-11-30T05:04:54.123Z");
        let b = line("b", LogStream::Stdout, "x", "2026-11-30T05:04:54.123Z");
        let ra = render_log_line(&a, Some(&p), &Style::COLOR);
        let rb = render_log_line(&b, Some(&p), &Style::COLOR);
        assert_eq!(ra, "\x1b[36ma |\x1b[0m \x1b[2m05:04:54.123\x1b[0m x\n");
        assert_eq!(rb, "\x1b[33mb |\x1b[0m \x1b[2m05:04:54.123\x1b[0m x\n");
        // A name that appeared later still gets a colour and no padding loss.
        let c = line(
            "late-comer",
            LogStream::Stdout,
            "x",
            "2026-11-30T05:04:54.123Z",
        );
        assert!(render_log_line(&c, Some(&p), &Style::PLAIN).starts_with("late-comer | "));
    }
}
