//! One child's protocol pipes: the task that writes lines into its stdin
//! and the task that splits its stdout into messages. A line is read with
//! the strict reader (`crate::mcp::strict`); one over the body limit is
//! skipped in bounded memory. Either one not forwarded is a warning in the
//! server's log, and when it answers a request (its id can be made out),
//! that request gets a JSON-RPC error in its place at once.
//! Neither decides anything: lines come from the BridgeActor, which keeps
//! what is queued within its budget; messages go to whatever the actor
//! handed in as the delivery function, and the reader waits while what it
//! handed over and the actor has not handled fills [`IN_MAILBOX`].

use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::mpsc;
use xy_core::protocol::LogStream;

use super::raw;
use crate::log_router::redact::Redactor;
use crate::log_router::sink::{SharedSink, lock};
use crate::mcp::strict;

/// Longest line accepted from a child's stdout: no client could have sent
/// a longer message either (SPEC §18).
const MAX_CHILD_LINE: usize = crate::http::body::MAX_BODY;
/// How much of a non-JSON stdout line a debug log shows.
const SHOWN_LINE: usize = 512;
/// Bytes of the child's messages read and not yet handled by the actor
/// (SPEC §24 "Bounded children"): past it the reader waits, and so does a
/// child that floods (its stdout pipe fills).
const IN_MAILBOX: u32 = 8 * 1024 * 1024;
/// What a message costs of [`IN_MAILBOX`] beyond its bytes (its parsed
/// form, the actor's envelope).
const PER_MESSAGE: u32 = 1024;

/// Messages the reader takes from the pipe before it lets other tasks run.
const YIELD_EVERY: u32 = 32;

/// A message's share of [`IN_MAILBOX`], given back when the actor drops it.
pub(crate) type Held = tokio::sync::OwnedSemaphorePermit;

/// A child's protocol pipes, and where the bridge writes what it has to
/// say about the child's stdout (the server's log, secrets redacted).
pub(crate) struct ChildStdio {
    pub(crate) stdin: ChildStdin,
    pub(crate) stdout: ChildStdout,
    log: SharedSink,
    redactor: Option<Arc<Redactor>>,
}

impl ChildStdio {
    pub(crate) fn new(
        stdin: ChildStdin,
        stdout: ChildStdout,
        log: SharedSink,
        redactor: Option<Arc<Redactor>>,
    ) -> ChildStdio {
        ChildStdio {
            stdin,
            stdout,
            log,
            redactor,
        }
    }
}

/// What the stdout reader found.
pub(crate) enum FromChild {
    /// A JSON-RPC message other than an answer with a numeric id.
    Line(Value),
    /// An answer to request `id` (its id at `at` in `line`), unparsed (D49).
    Answer {
        id: u64,
        line: Vec<u8>,
        at: std::ops::Range<usize>,
        /// How it ends its call (a call record's outcome).
        said: raw::Said,
    },
    /// Stdout closed.
    Eof,
}

/// The running pipe tasks of one child; dropping it stops them.
pub(crate) struct ChildLink {
    /// The spawn number the link belongs to.
    pub(crate) run: u64,
    /// The child's secrets, for what xy repeats of its text.
    redactor: Option<Arc<Redactor>>,
    /// Lines for the child, in order. Unbounded here: the actor keeps
    /// what is queued within its budget ([`ChildLink::taken`]).
    stdin: mpsc::UnboundedSender<Bytes>,
    /// Bytes the kernel took into the child's stdin pipe so far.
    in_pipe: Arc<AtomicU64>,
    /// That pipe (held open by the writer task as long as this link lives).
    stdin_fd: RawFd,
    _tasks: Vec<AbortOnDrop>,
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl ChildLink {
    /// Starts the writer and the reader of spawn `run`. `deliver` gets
    /// every message read, in order, with its share of [`IN_MAILBOX`] to
    /// hold until it is handled; once it returns `false` (its actor is
    /// gone) the reader stops.
    pub(crate) fn spawn(
        run: u64,
        io: ChildStdio,
        name: String,
        deliver: impl Fn(FromChild, Held) -> bool + Send + 'static,
    ) -> ChildLink {
        let (tx, rx) = mpsc::unbounded_channel::<Bytes>();
        let in_pipe = Arc::new(AtomicU64::new(0));
        let stdin_fd = io.stdin.as_raw_fd();
        let writer = tokio::spawn(write_lines(io.stdin, rx, Arc::clone(&in_pipe)));
        let redactor = io.redactor.clone();
        let notes = Notes {
            name,
            log: io.log,
            redactor: io.redactor,
        };
        let reader = tokio::spawn(read_lines(io.stdout, notes, deliver));
        ChildLink {
            run,
            redactor,
            stdin: tx,
            in_pipe,
            stdin_fd,
            _tasks: vec![AbortOnDrop(writer), AbortOnDrop(reader)],
        }
    }

    /// The child's text (an error message it answered with) as it may go
    /// to `daemon.log` or a client's error: its secrets redacted, bounded.
    pub(crate) fn scrub(&self, text: String) -> String {
        crate::log_router::redact::scrub(text, self.redactor.as_deref())
    }

    /// Queues one line for the child's stdin.
    pub(crate) fn send(&self, line: Bytes) {
        let _ = self.stdin.send(line);
    }

    /// Bytes the kernel took into the child's stdin pipe so far: what was
    /// sent minus this is what waits in xyd.
    pub(crate) fn taken(&self) -> u64 {
        self.in_pipe.load(Ordering::Acquire)
    }

    /// Bytes of its stdin stream the child has read: what the pipe took
    /// minus what is still in it.
    pub(crate) fn read_by_child(&self) -> u64 {
        self.in_pipe
            .load(Ordering::Acquire)
            .saturating_sub(unread_bytes(self.stdin_fd))
    }
}

async fn write_lines(
    mut stdin: ChildStdin,
    mut rx: mpsc::UnboundedReceiver<Bytes>,
    took: Arc<AtomicU64>,
) {
    let mut batch = Vec::new();
    'lines: while let Some(line) = rx.recv().await {
        // Batch what is queued already: one write for all of it.
        batch.clear();
        batch.extend_from_slice(&line);
        while let Ok(line) = rx.try_recv() {
            batch.extend_from_slice(&line);
        }
        let mut off = 0;
        while off < batch.len() {
            match stdin.write(&batch[off..]).await {
                Ok(0) | Err(_) => break 'lines,
                Ok(n) => {
                    off += n;
                    took.fetch_add(n as u64, Ordering::AcqRel);
                }
            }
        }
    }
    // The child is gone (EPIPE): keep the pipe open until the link drops,
    // the actor asks it how much the child never read.
    while rx.recv().await.is_some() {}
    drop(stdin);
}

/// What the reader says about the child's stdout, and where.
struct Notes {
    name: String,
    log: SharedSink,
    redactor: Option<Arc<Redactor>>,
}

impl Notes {
    /// A warning for the server's log (`xyctl logs <name>`), where the user
    /// looks for what went wrong with that server.
    fn warn(&self, text: &str) {
        tracing::warn!(server = %self.name, "{text}");
        lock(&self.log).push_note(LogStream::Stderr, text);
    }

    /// A debug log of a line that is not JSON-RPC: secrets redacted, at
    /// most [`SHOWN_LINE`] bytes of it.
    fn not_json(&self, line: &[u8]) {
        if !tracing::enabled!(tracing::Level::DEBUG) {
            return;
        }
        let redacted = self.redactor.as_ref().and_then(|r| r.redact_bytes(line));
        let line = redacted.as_deref().unwrap_or(line);
        let shown = &line[..line.len().min(SHOWN_LINE)];
        let text = String::from_utf8_lossy(shown);
        let text = text.trim();
        if !text.is_empty() {
            let more = line.len().saturating_sub(shown.len());
            tracing::debug!(server = %self.name, line = %text, more_bytes = more, "child wrote a non-JSON-RPC line on stdout");
        }
    }
}

/// How many of an overlong line's last bytes are kept: enough for the
/// `"id":N}` an encoder that writes `result` first ends it with.
const KEPT_TAIL: usize = 64;

/// Discards the rest of an overlong line, a buffer at a time; the bytes
/// skipped, and the last [`KEPT_TAIL`] of them.
async fn skip_line(out: &mut BufReader<ChildStdout>) -> (u64, Vec<u8>) {
    let mut skipped = 0u64;
    let mut tail = Vec::with_capacity(2 * KEPT_TAIL);
    let keep = |tail: &mut Vec<u8>, b: &[u8]| {
        tail.extend_from_slice(&b[b.len().saturating_sub(KEPT_TAIL)..]);
        let extra = tail.len().saturating_sub(KEPT_TAIL);
        tail.drain(..extra);
    };
    loop {
        let buf = match out.fill_buf().await {
            Ok([]) | Err(_) => return (skipped, tail),
            Ok(b) => b,
        };
        if let Some(nl) = memchr::memchr(b'\n', buf) {
            keep(&mut tail, &buf[..nl]);
            out.consume(nl + 1);
            return (skipped + nl as u64 + 1, tail);
        }
        keep(&mut tail, buf);
        let n = buf.len();
        out.consume(n);
        skipped += n as u64;
    }
}

/// The line that answers child request `id` in place of one xy did not
/// forward (SPEC §24: the request fails at once, never hangs): a JSON-RPC
/// error naming the server and why.
fn failed_answer(id: u64, server: &str, why: &str) -> FromChild {
    let msg = serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {
        "code": -32603,
        "message": format!("xy: server {server} answered with {why}; not forwarded"),
        "data": {"server": server},
    }});
    let line = serde_json::to_vec(&msg).unwrap_or_default();
    let digits = id.to_string();
    // The id as written by `to_vec`: `"id":N` (keys in insertion order).
    let at = memchr::memmem::find(&line, b"\"id\":")
        .map(|i| i + 5..i + 5 + digits.len())
        .unwrap_or(0..0);
    FromChild::Answer {
        id,
        line,
        at,
        said: raw::Said::Error,
    }
}

async fn read_lines(
    stdout: ChildStdout,
    notes: Notes,
    deliver: impl Fn(FromChild, Held) -> bool + Send + 'static,
) {
    let gate = Arc::new(tokio::sync::Semaphore::new(IN_MAILBOX as usize));
    // Waits while the actor has a mailbox's worth to handle.
    let held = |len: usize| {
        let cost = u32::try_from(len)
            .unwrap_or(u32::MAX)
            .saturating_add(PER_MESSAGE)
            .min(IN_MAILBOX);
        Arc::clone(&gate).acquire_many_owned(cost)
    };
    let mut out = BufReader::with_capacity(64 * 1024, stdout);
    let mut buf = Vec::new();
    let mut read = 0u32;
    loop {
        buf.clear();
        // A flood: xyd's one thread serves the RPCs and the other servers
        // between every few messages, not after a whole buffer of them.
        read = read.wrapping_add(1);
        if read.is_multiple_of(YIELD_EVERY) {
            tokio::task::yield_now().await;
        }
        let n = (&mut out)
            .take(MAX_CHILD_LINE as u64 + 1)
            .read_until(b'\n', &mut buf)
            .await
            .unwrap_or_default();
        if n == 0 {
            break;
        }
        if buf.len() > MAX_CHILD_LINE && buf.last() != Some(&b'\n') {
            let (more, tail) = skip_line(&mut out).await;
            let id = strict::glimpse(&buf)
                .number_id(&buf)
                .or_else(|| strict::trailing_id(&tail));
            // The buffer it took goes back: a flood must not stay allocated.
            buf = Vec::new();
            let total = MAX_CHILD_LINE as u64 + 1 + more;
            let why = format!(
                "a line of {total} bytes on stdout, over the {} MiB limit",
                MAX_CHILD_LINE >> 20
            );
            notes.warn(&format!("xy: the child wrote {why}; skipped"));
            if let Some(id) = id {
                let Ok(h) = held(0).await else { return };
                if !deliver(failed_answer(id, &notes.name, &why), h) {
                    return;
                }
            }
            continue;
        }
        let len = buf.trim_ascii_end().len();
        buf.truncate(len);
        if buf.is_empty() {
            continue;
        }
        // Only what xy reads exactly goes on (SPEC §24, D160); an answer
        // xy cannot read fails its request at once.
        if let Err(e) = strict::check(&buf) {
            let id = strict::glimpse(&buf).number_id(&buf);
            match id {
                Some(id) => {
                    let why = format!("a message xy cannot read exactly ({e})");
                    notes.warn(&format!(
                        "xy: the child answered request {id} with {why}; not forwarded"
                    ));
                    let Ok(h) = held(0).await else { return };
                    if !deliver(failed_answer(id, &notes.name, &why), h) {
                        return;
                    }
                }
                None => notes.not_json(&buf),
            }
            continue;
        }
        // An answer goes on unparsed; the actor decides (D49).
        if let Some((id, at, said)) = raw::answer_id(&buf) {
            // SPEC §25: a denial a server reports only in a tool result
            // goes to its log, where `status` finds denials.
            if said == raw::Said::ToolError {
                for l in crate::explain::denials_in_tool_error(&buf) {
                    let l = crate::log_router::redact::scrub(l, notes.redactor.as_deref());
                    notes.warn(&format!("xy: a tool result said: {l}"));
                }
            }
            let Ok(h) = held(buf.len()).await else { return };
            let line = std::mem::replace(&mut buf, Vec::with_capacity(256));
            if !deliver(FromChild::Answer { id, line, at, said }, h) {
                return;
            }
            continue;
        }
        match serde_json::from_slice::<Value>(&buf) {
            Ok(msg) if msg.is_object() => {
                let Ok(h) = held(buf.len()).await else { return };
                if !deliver(FromChild::Line(msg), h) {
                    return;
                }
            }
            _ => notes.not_json(&buf),
        }
    }
    if let Ok(h) = held(0).await {
        let _ = deliver(FromChild::Eof, h);
    }
}

/// Bytes written into a pipe that its reader has not read (`FIONREAD`,
/// asked on the write end; Linux answers for the pipe's one buffer). 0 when
/// the system does not say (macOS answers for the write end's own, empty
/// buffer): then every written request counts as read.
#[allow(unsafe_code)]
fn unread_bytes(fd: RawFd) -> u64 {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD stores one c_int at the pointer; `fd` is the child's
    // stdin pipe, held open by the writer task while its ChildLink lives.
    let r = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut n) };
    if r == 0 {
        u64::try_from(n).unwrap_or(0)
    } else {
        0
    }
}

/// One message as a line for the child's stdin. `serde_json::to_writer`
/// writes straight into the buffer; `Value::to_string` goes through
/// `fmt::Display` a piece at a time (D49).
pub(crate) fn line_of(msg: &Value) -> Vec<u8> {
    let mut line = Vec::with_capacity(256);
    // A `Value` always serialises (its keys are strings).
    let _ = serde_json::to_writer(&mut line, msg);
    line.push(b'\n');
    line
}
