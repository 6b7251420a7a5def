//! Line output for the child programs: every line is written and flushed at
//! once, so a reader at the other end of a pipe sees it immediately.
//! Write errors are ignored: a closed pipe must not kill a supervised child.

use std::io::Write;

/// Writes `line` plus a newline to stdout and flushes.
pub fn out(line: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}");
    let _ = stdout.flush();
}

/// Writes `line` plus a newline to stderr and flushes.
pub fn err(line: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "{line}");
    let _ = stderr.flush();
}

/// Stdout shared by a child's threads: one JSON-RPC message per line.
pub type Shared = std::sync::Arc<std::sync::Mutex<std::io::Stdout>>;

/// Writes `msg` as one line to the shared stdout and flushes.
pub fn send(out: &Shared, msg: &serde_json::Value) {
    let mut o = out
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let _ = writeln!(o, "{msg}");
    let _ = o.flush();
}
