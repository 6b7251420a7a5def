//! The one place that writes to the terminal. Data goes to stdout, messages
//! to stderr; a closed stdout (`xyctl logs | head`) ends the process quietly
//! with status 0, since the reader got what it wanted.

use std::io::{self, Write};

use crate::error::Failure;
use crate::render::{Paint, Style};

/// Writes data to stdout.
pub(crate) fn stdout(text: &str) {
    stdout_bytes(text.as_bytes());
}

/// Writes raw bytes to stdout (completion scripts, JSON).
pub(crate) fn stdout_bytes(bytes: &[u8]) {
    let mut out = io::stdout().lock();
    if let Err(e) = out.write_all(bytes).and_then(|()| out.flush()) {
        if e.kind() == io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        // Nowhere left to report a failing stdout but stderr.
        stderr_line(&format!("xyctl: cannot write to stdout: {e}"));
        std::process::exit(1);
    }
}

/// A JSON result on one line.
pub(crate) fn json_line(raw: &str) {
    let mut s = String::with_capacity(raw.len() + 1);
    s.push_str(raw);
    s.push('\n');
    stdout(&s);
}

/// Writes a message to stderr; errors writing it are ignored (nowhere to report).
pub(crate) fn stderr(text: &str) {
    let _ = io::stderr().lock().write_all(text.as_bytes());
}

fn stderr_line(text: &str) {
    let mut s = text.to_owned();
    s.push('\n');
    stderr(&s);
}

/// `warning: …` on stderr.
pub(crate) fn warn(style: &Style, message: &str) {
    stderr_line(&format!(
        "{} {message}",
        style.paint("warning:", Paint::Yellow)
    ));
}

/// A status note on stderr (`xyctl: started xyd (pid 4242)`).
pub(crate) fn note(style: &Style, message: &str) {
    stderr_line(&style.paint(&format!("xyctl: {message}"), Paint::Dim));
}

/// `error: <sentence>` and the detail, on stderr.
pub(crate) fn failure(style: &Style, f: &Failure) {
    let mut s = format!("{} {}\n", style.paint("error:", Paint::Red), f.message);
    if let Some(d) = &f.detail {
        s.push_str(d);
        if !d.ends_with('\n') {
            s.push('\n');
        }
    }
    stderr(&s);
}
