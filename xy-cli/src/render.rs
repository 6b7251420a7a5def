//! Pure rendering: each function turns a protocol DTO into the exact text
//! `xyctl` prints, given a [`Style`]. No I/O here, so every output is
//! snapshot-tested with fixed inputs.

mod auth;
mod calls;
mod columns;
mod control;
mod daemon;
mod events;
pub(crate) mod list;
mod logs;
mod rows;
mod sandbox;
mod status;
mod style;
mod tools;

pub(crate) use auth::{render_auth_status, render_login_done};
pub(crate) use calls::{CallColumns, render_calls};
pub(crate) use control::{render_reload, render_restart, render_start, render_stop};
pub(crate) use daemon::render_daemon_status;
pub(crate) use events::render_event;
pub(crate) use list::{format_last_exit, render_list};
pub(crate) use logs::{LogPrefix, render_log_line};
pub(crate) use rows::render_rows;
pub(crate) use sandbox::{SandboxView, render_sandbox_test, verdict as sandbox_verdict};
pub(crate) use status::render_status;
pub(crate) use style::{Paint, Style};
pub(crate) use tools::{render_tools, reveal, review_block};

/// `HH:MM:SS.mmm` from an RFC 3339 timestamp (`2026-11-30T05:04:54.123Z`);
/// anything else is shown as it came.
pub(crate) fn clock_ms(ts: &str) -> &str {
    ts.get(11..23)
        .filter(|_| ts.as_bytes().get(10) == Some(&b'T'))
        .unwrap_or(ts)
}

/// `2026-11-30 05:04:54` (UTC) from an RFC 3339 timestamp.
pub(crate) fn date_time(ts: &str) -> String {
    match (ts.get(..10), ts.get(11..19)) {
        (Some(d), Some(t)) if ts.as_bytes().get(10) == Some(&b'T') => format!("{d} {t}"),
        _ => ts.to_owned(),
    }
}

/// Milliseconds as humantime writes them: `10s`, `250ms`, `1m 30s`.
pub(crate) fn ms(ms: u64) -> String {
    humantime::format_duration(std::time::Duration::from_millis(ms)).to_string()
}

/// Removes trailing blanks from every line: comfy-table pads the last
/// column, inside its styling when the cell is styled (`LAST EXIT  \e[0m`).
fn trim_lines(s: &str) -> String {
    const RESET: &str = "\x1b[0m";
    let mut out = String::with_capacity(s.len());
    for line in s.lines() {
        let line = line.trim_end();
        match line.strip_suffix(RESET) {
            Some(styled) => {
                out.push_str(styled.trim_end());
                out.push_str(RESET);
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        assert_eq!(clock_ms("2026-11-30T05:04:54.123Z"), "05:04:54.123");
        assert_eq!(clock_ms("garbage"), "garbage");
        assert_eq!(date_time("2026-11-30T05:04:54.123Z"), "2026-11-30 05:04:54");
        assert_eq!(date_time("x"), "x");
        assert_eq!(ms(10_000), "10s");
        assert_eq!(ms(250), "250ms");
        assert_eq!(ms(90_000), "1m 30s");
    }
}
