//! The daemon's own log: `tracing` to stderr and to `logs/daemon.log`
//! (size-rotated like the server logs, written off the hot path through
//! `tracing_appender::non_blocking`), filtered by `XY_LOG`, plus a panic hook
//! that routes panics into the same log. What reaches `daemon.log` is
//! escaped ([`Escaping`]): tool names, descriptions, errors and whatever else
//! a server wrote travel in log fields, and none of it may forge a line or
//! make the file binary (SPEC §24).

use std::io::{self, IsTerminal};

use tracing_appender::non_blocking::WorkerGuard;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use xy_core::paths::Paths;

use crate::error::DaemonError;

/// Environment variable holding the filter (`info`, `xy_actors=debug`, …).
pub const LOG_ENV: &str = "XY_LOG";

/// Lines queued for `daemon.log` before new ones are dropped.
const LOG_QUEUE_LINES: usize = 4096;

/// Keeps the file writer alive; dropping it flushes what is queued.
#[derive(Debug)]
pub struct LogGuard {
    _file: WorkerGuard,
}

/// Installs the global subscriber and the panic hook. Call once, after the
/// lock is held (two processes must not rotate the same file).
pub fn init(paths: &Paths) -> Result<LogGuard, DaemonError> {
    let log_path = paths.daemon_log();
    let writer = open_daemon_log(paths).map_err(|source| DaemonError::Io {
        action: "open",
        path: log_path,
        source,
    })?;
    // The default queue (128k lines) is preallocated and touched: megabytes
    // of RSS for a log that writes a few lines a minute. When it is full, the
    // event is dropped rather than stalling a worker thread.
    let (file, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .buffered_lines_limit(LOG_QUEUE_LINES)
        .lossy(true)
        .finish(Escaping(writer));
    let filter = filter_from(std::env::var(LOG_ENV).ok().as_deref());
    let stderr_layer = tracing_subscriber::fmt::layer()
        .with_writer(io::stderr)
        .with_ansi(io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none())
        .with_target(false);
    let file_layer = tracing_subscriber::fmt::layer()
        .with_writer(file)
        .with_ansi(false)
        .with_target(true);
    // A second init (only possible in tests) keeps the first subscriber.
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(stderr_layer)
        .with(file_layer)
        .try_init();
    install_panic_hook();
    Ok(LogGuard { _file: guard })
}

/// Writes each formatted event with its control, invisible and
/// direction-changing characters escaped (`\u{0}`, `\n`, `\u{202e}`), so
/// one event is one line of text whatever a server put in its fields. The
/// non-blocking worker hands the inner writer one whole event per write.
pub(crate) struct Escaping<W>(pub(crate) W);

impl<W: io::Write> io::Write for Escaping<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match escape_event(buf) {
            None => self.0.write_all(buf)?,
            Some(escaped) => self.0.write_all(escaped.as_bytes())?,
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// One formatted event (ending in `\n`) with every character that is not
/// plain text escaped; `None` when there is none (the common case, checked
/// without decoding).
fn escape_event(buf: &[u8]) -> Option<String> {
    let (body, end) = match buf.split_last() {
        Some((b'\n', body)) => (body, "\n"),
        _ => (buf, ""),
    };
    if body.iter().all(|&b| (0x20..0x7f).contains(&b)) {
        return None;
    }
    let text = String::from_utf8_lossy(body);
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() || xy_core::firewall::is_hidden(c) => {
                use std::fmt::Write as _;
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push_str(end);
    Some(out)
}

/// `XY_LOG` as `tracing`'s target directives (`warn`, `xy_actors=debug,info`).
/// A `Targets` filter rather than an `EnvFilter`: the latter's span and
/// field matching drags in a regex engine, code that every xyd would keep
/// resident for a filter set once at boot (D40). Unset or
/// unparsable means `info`.
fn filter_from(value: Option<&str>) -> Targets {
    value
        .and_then(|v| v.parse::<Targets>().ok())
        .unwrap_or_else(|| Targets::new().with_default(LevelFilter::INFO))
}

fn open_daemon_log(paths: &Paths) -> io::Result<xy_actors::RotatingWriter> {
    xy_actors::RotatingWriter::open_buffered(
        paths.daemon_log(),
        xy_actors::RotatingWriter::DEFAULT_MAX_BYTES,
    )
}

/// Panics (a ServerActor's, caught by ractor; or a task's) go to the daemon
/// log instead of only to a stderr nobody reads under launchd.
fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let location = info
            .location()
            .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
            .unwrap_or_default();
        let payload = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "<non-string panic payload>".to_owned());
        let backtrace = std::backtrace::Backtrace::capture();
        tracing::error!(
            panic.location = %location,
            panic.thread = std::thread::current().name().unwrap_or("<unnamed>"),
            backtrace = %backtrace,
            "panic: {payload}"
        );
    }));
}

#[cfg(test)]
mod tests {
    use tracing::Level;

    use super::{Escaping, escape_event, filter_from};

    #[test]
    fn server_text_cannot_forge_a_line_or_make_the_log_binary() {
        assert_eq!(escape_event(b"plain line\n"), None);
        let evil = "tool ev\0il\nFAKE xyd: ok\r\u{202e}txt.exe \u{7f}\u{85}é\n";
        assert_eq!(
            escape_event(evil.as_bytes()).unwrap(),
            "tool ev\\u{0}il\\nFAKE xyd: ok\\r\\u{202e}txt.exe \\u{7f}\\u{85}é\n"
        );
        // Through the writer: one line, no NUL.
        let mut w = Escaping(Vec::new());
        std::io::Write::write_all(&mut w, evil.as_bytes()).unwrap();
        let out = String::from_utf8(w.0).unwrap();
        assert_eq!(out.lines().count(), 1, "{out}");
        assert!(!out.contains('\0'));
    }

    #[test]
    fn xy_log_takes_levels_and_per_target_directives() {
        let unset = filter_from(None);
        assert!(unset.would_enable("xy_actors::server", &Level::INFO));
        assert!(!unset.would_enable("xy_actors::server", &Level::DEBUG));

        let warn = filter_from(Some("warn"));
        assert!(warn.would_enable("xy_daemon", &Level::WARN));
        assert!(!warn.would_enable("xy_daemon", &Level::INFO));

        let mixed = filter_from(Some("xy_actors=debug,info"));
        assert!(mixed.would_enable("xy_actors::health", &Level::DEBUG));
        assert!(!mixed.would_enable("xy_daemon::rpc", &Level::DEBUG));
        assert!(mixed.would_enable("xy_daemon::rpc", &Level::INFO));
    }

    #[test]
    fn an_unparsable_xy_log_means_info() {
        let bad = filter_from(Some("xy_actors=loud"));
        assert!(bad.would_enable("xy_actors", &Level::INFO));
        assert!(!bad.would_enable("xy_actors", &Level::DEBUG));
    }
}
