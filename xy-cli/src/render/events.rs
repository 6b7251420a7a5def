//! `xyctl events`: one line per change, `HH:MM:SS.mmm name kind from → to
//! (reason)`, with the name column padded like `logs`' prefix and the new
//! state coloured.

use xy_core::protocol::{EventKind, EventNotification, ServerState};

use super::{Paint, Style, clock_ms};

/// One event, newline included. `width` pads the name column.
pub(crate) fn render_event(e: &EventNotification, width: usize, style: &Style) -> String {
    let name = format!("{:<width$}", e.name);
    let kind = format!("{:<6}", e.kind.as_str());
    let to = e.to.as_deref().unwrap_or("-");
    let paint = match e.kind {
        EventKind::State => state_paint(to),
        EventKind::Health => match to {
            "healthy" => Some(Paint::Green),
            "unhealthy" => Some(Paint::Red),
            _ => Some(Paint::Yellow),
        },
        EventKind::Tools | EventKind::Config => Some(Paint::Cyan),
    };
    let to = match paint {
        Some(p) => style.paint(to, p),
        None => to.to_owned(),
    };
    let change = match &e.from {
        Some(from) => format!("{from} → {to}"),
        None => to,
    };
    let mut out = format!(
        "{} {} {} {change}",
        style.paint(clock_ms(&e.ts), Paint::Dim),
        style.paint(&name, Paint::Bold),
        kind
    );
    if !e.reason.is_empty() {
        out.push_str(&style.paint(&format!(" ({})", e.reason), Paint::Dim));
    }
    out.push('\n');
    out
}

fn state_paint(to: &str) -> Option<Paint> {
    let state: ServerState = serde_json::from_value(serde_json::Value::from(to)).ok()?;
    Paint::for_state(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(kind: EventKind, from: Option<&str>, to: &str, reason: &str) -> EventNotification {
        EventNotification {
            subscription_id: 1,
            name: "web".into(),
            kind,
            ts: "2026-11-30T05:04:54.123Z".into(),
            from: from.map(str::to_owned),
            to: Some(to.into()),
            reason: reason.into(),
        }
    }

    #[test]
    fn plain_lines() {
        let e = ev(
            EventKind::State,
            Some("running"),
            "restarting",
            "killed by SIGKILL",
        );
        assert_eq!(
            render_event(&e, 5, &Style::PLAIN),
            "05:04:54.123 web   state  running → restarting (killed by SIGKILL)\n"
        );
        let e = ev(EventKind::Config, None, "added", "reload: web.kdl added");
        assert_eq!(
            render_event(&e, 3, &Style::PLAIN),
            "05:04:54.123 web config added (reload: web.kdl added)\n"
        );
        let e = ev(EventKind::Health, Some("starting"), "healthy", "");
        assert_eq!(
            render_event(&e, 3, &Style::PLAIN),
            "05:04:54.123 web health starting → healthy\n"
        );
    }

    #[test]
    fn colour_marks_the_new_state() {
        let e = ev(
            EventKind::State,
            Some("running"),
            "failed",
            "exited with code 1",
        );
        let s = render_event(&e, 3, &Style::COLOR);
        assert!(s.contains("\x1b[1;31mfailed\x1b[0m"), "{s:?}");
    }
}
