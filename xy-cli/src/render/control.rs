//! `start`/`stop`/`restart`/`reload` results: one line per server saying what
//! happened to it.

use std::fmt::Write as _;

use xy_core::protocol::{ReloadResult, RestartResult, StartResult, StopResult};

use super::{Paint, Style};

fn lines(out: &mut String, names: &[String], what: &str, paint: Paint, style: &Style) {
    for n in names {
        let _ = writeln!(out, "{n}: {}", style.paint(what, paint));
    }
}

/// `insikt: started` / `notes: already running`.
pub(crate) fn render_start(r: &StartResult, style: &Style) -> String {
    let mut out = String::new();
    lines(&mut out, &r.started, "started", Paint::Green, style);
    lines(
        &mut out,
        &r.already_running,
        "already running",
        Paint::Dim,
        style,
    );
    lines(
        &mut out,
        &r.cancelled,
        "not started (a stop came first)",
        Paint::Red,
        style,
    );
    out
}

/// `insikt: stopped` / `notes: not running`.
pub(crate) fn render_stop(r: &StopResult, style: &Style) -> String {
    let mut out = String::new();
    lines(&mut out, &r.stopped, "stopped", Paint::Green, style);
    lines(&mut out, &r.not_running, "not running", Paint::Dim, style);
    out
}

/// `insikt: restarted`.
pub(crate) fn render_restart(r: &RestartResult, style: &Style) -> String {
    let mut out = String::new();
    lines(&mut out, &r.restarted, "restarted", Paint::Green, style);
    lines(
        &mut out,
        &r.cancelled,
        "not restarted (a stop came first)",
        Paint::Red,
        style,
    );
    out
}

/// Four aligned lines (`added`, `removed`, `changed`, `unchanged`), `-` for none.
pub(crate) fn render_reload(r: &ReloadResult, style: &Style) -> String {
    let mut out = String::new();
    for (label, names) in [
        ("added", &r.added),
        ("removed", &r.removed),
        ("changed", &r.changed),
        ("unchanged", &r.unchanged),
    ] {
        let list = if names.is_empty() {
            "-".to_owned()
        } else {
            names.join(", ")
        };
        let _ = writeln!(
            out,
            "{}  {list}",
            style.paint(&format!("{label:<9}"), Paint::Bold)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn start_stop_restart() {
        let s = StartResult {
            started: v(&["a", "b"]),
            already_running: v(&["c"]),
            cancelled: v(&["d"]),
        };
        assert_eq!(
            render_start(&s, &Style::PLAIN),
            "a: started\nb: started\nc: already running\nd: not started (a stop came first)\n"
        );
        let s = StopResult {
            stopped: v(&["a"]),
            not_running: v(&["b"]),
        };
        assert_eq!(
            render_stop(&s, &Style::PLAIN),
            "a: stopped\nb: not running\n"
        );
        let r = RestartResult {
            restarted: v(&["a"]),
            cancelled: v(&["b"]),
        };
        assert_eq!(
            render_restart(&r, &Style::PLAIN),
            "a: restarted\nb: not restarted (a stop came first)\n"
        );
        assert_eq!(
            render_start(&StartResult::default(), &Style::COLOR),
            "",
            "nothing to say for an empty result"
        );
        assert_eq!(
            render_restart(&r, &Style::COLOR),
            "a: \x1b[32mrestarted\x1b[0m\nb: \x1b[1;31mnot restarted (a stop came first)\x1b[0m\n"
        );
    }

    #[test]
    fn reload() {
        let r = ReloadResult {
            added: v(&["new"]),
            removed: vec![],
            changed: v(&["a", "b"]),
            unchanged: v(&["c"]),
        };
        assert_eq!(
            render_reload(&r, &Style::PLAIN),
            "added      new\nremoved    -\nchanged    a, b\nunchanged  c\n"
        );
    }
}
