//! The Unix-socket transport (SPEC §6): accepting with a connection cap and a
//! peer-uid check, newline framing with a bounded line length, one writer
//! task per connection draining an mpsc channel, and per-connection context
//! ([`Conn`]) handed to the RPC methods through jsonrpsee `Extensions`.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use jsonrpsee::{ConnectionId, Extensions};
use serde_json::value::RawValue;
use tokio::io::{
    AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader,
    BufWriter,
};
use tokio::net::UnixListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot, watch};
use xy_core::protocol::MAX_LINE_BYTES;

pub(crate) mod direct;
pub(crate) mod dispatch;

pub(crate) use direct::Handlers;

/// Open connections allowed at once; more wait in the kernel's backlog
/// until one closes (SPEC §18).
pub(crate) const MAX_CONNECTIONS: usize = 256;
/// Requests of one connection being handled at once; the reader waits for a
/// slot before reading on (backpressure instead of unbounded tasks).
const MAX_IN_FLIGHT: usize = 64;
/// Outbound messages queued per connection before senders wait.
const OUTBOUND_QUEUE: usize = 1024;
/// Bytes of outbound lines queued per connection before [`Conn::send`]
/// waits (SPEC §18: a client that never reads costs xyd this, not the
/// queue's count times the longest line). A line longer than this takes
/// the whole budget and goes alone.
const OUTBOUND_BYTES: usize = 4 * 1024 * 1024;

/// One outbound line, without its newline: one complete JSON value, as the
/// bytes the writer sends (a reply written straight into a `Vec` reaches
/// the socket without another copy).
#[derive(Debug)]
pub(crate) struct OutLine {
    bytes: Vec<u8>,
    /// Its share of the connection's [`OUTBOUND_BYTES`], given back when
    /// the line has been written (dropped).
    room: Option<OwnedSemaphorePermit>,
}

impl OutLine {
    /// `json` must be one complete JSON value (the direct methods' replies).
    pub(crate) fn from_json_bytes(json: Vec<u8>) -> OutLine {
        debug_assert!(serde_json::from_slice::<serde::de::IgnoredAny>(&json).is_ok());
        OutLine {
            bytes: json,
            room: None,
        }
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }
}

impl From<Box<RawValue>> for OutLine {
    fn from(json: Box<RawValue>) -> OutLine {
        // `Box<RawValue>` → `Box<str>` → `Vec<u8>`: no copy.
        OutLine::from_json_bytes(Box::<str>::from(json).into_boxed_bytes().into_vec())
    }
}

/// Which notification stream a subscription id names. Ids come from one
/// counter, so the kind is what keeps `events_cancel` off a `logs` stream
/// and `logs_cancel` off an `events` stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StreamKind {
    Logs,
    Events,
    Calls,
}

/// One client connection, as RPC methods see it (`Extensions` entry).
#[derive(Debug)]
pub(crate) struct Conn {
    id: usize,
    out: mpsc::Sender<OutLine>,
    /// [`OUTBOUND_BYTES`] of room in the outbound queue.
    room: Arc<Semaphore>,
    /// Live `logs` and `events` streams of this connection: cancelling one
    /// fires its sender.
    subs: Mutex<HashMap<u64, (StreamKind, oneshot::Sender<()>)>>,
}

impl Conn {
    /// Queues one outbound line; `false` once the client is gone.
    /// Waits while the queue holds [`OUTBOUND_BYTES`].
    pub(crate) async fn send(&self, msg: impl Into<OutLine>) -> bool {
        let mut line = msg.into();
        let want = u32::try_from(line.bytes.len().clamp(1, OUTBOUND_BYTES)).unwrap_or(u32::MAX);
        match Arc::clone(&self.room).acquire_many_owned(want).await {
            Ok(room) => line.room = Some(room),
            Err(_) => return false,
        }
        self.out.send(line).await.is_ok()
    }

    /// Waits for room for one outbound line; `None` once the client is gone.
    /// Unlike [`Conn::send`] it is cancel-safe: a stream can wait for room
    /// and for new input at once without losing the line it holds. Lines
    /// sent this way (events: small, and counted by the queue) take no
    /// share of [`OUTBOUND_BYTES`].
    pub(crate) async fn reserve(&self) -> Option<mpsc::Permit<'_, OutLine>> {
        self.out.reserve().await.ok()
    }

    /// Resolves when the writer is gone (client disconnected or write failed).
    pub(crate) async fn closed(&self) {
        self.out.closed().await;
    }

    /// Registers a stream; the receiver fires on [`Conn::cancel_stream`].
    pub(crate) fn add_stream(&self, id: u64, kind: StreamKind) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        self.subs_guard().insert(id, (kind, tx));
        rx
    }

    /// Cancels one of this connection's streams of `kind`; `false` if
    /// unknown, ended, or a stream of the other kind.
    pub(crate) fn cancel_stream(&self, id: u64, kind: StreamKind) -> bool {
        let mut subs = self.subs_guard();
        if subs.get(&id).is_none_or(|(k, _)| *k != kind) {
            return false;
        }
        match subs.remove(&id) {
            Some((_, tx)) => tx.send(()).is_ok(),
            None => false,
        }
    }

    /// Forgets a stream that ended on its own.
    pub(crate) fn remove_stream(&self, id: u64) {
        self.subs_guard().remove(&id);
    }

    fn subs_guard(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<u64, (StreamKind, oneshot::Sender<()>)>> {
        // Held for a map operation only, never across an await; a poisoned
        // map is still a valid map.
        self.subs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Accepts connections until `stop` turns true. Each connection stops
/// reading when `closing` turns true; it closes once its in-flight calls and
/// streams are done. Returns the semaphore whose permits the open
/// connections hold, so shutdown can wait for them.
pub(crate) async fn serve(
    listener: UnixListener,
    methods: Handlers,
    mut stop: watch::Receiver<bool>,
    closing: watch::Receiver<bool>,
) -> Arc<Semaphore> {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let uid = nix::unistd::getuid().as_raw();
    let next_id = AtomicUsize::new(1);
    let mut backoff = xy_actors::AcceptBackoff::new();
    loop {
        // The slot is taken before `accept`: with every slot in use, a new
        // client waits in the kernel's backlog until one frees. Closing it
        // instead turned away the client arriving right after a flood,
        // whose connections still held their slots until their EOFs were read.
        let permit = tokio::select! {
            p = Arc::clone(&slots).acquire_owned() => p.expect("the semaphore is never closed"),
            () = crate::flag::until_set(&mut stop) => break,
        };
        let accepted = tokio::select! {
            r = listener.accept() => r,
            () = crate::flag::until_set(&mut stop) => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // EMFILE and friends leave the client in the backlog: back
                // off instead of spinning, and log once per burst.
                let (wait, first) = backoff.failed();
                if first {
                    tracing::warn!(error = %e, "accept failed; backing off until it succeeds");
                }
                drop(permit);
                tokio::select! {
                    () = tokio::time::sleep(wait) => continue,
                    () = crate::flag::until_set(&mut stop) => break,
                }
            }
        };
        let failures = backoff.succeeded();
        if failures > 0 {
            tracing::info!(failures, "accepting again");
        }
        match stream.peer_cred() {
            // A sandboxed server runs as the owner, and may open Unix sockets
            // under network "any": its processes are refused (SPEC §24).
            Ok(cred)
                if cred.uid() == uid && cred.pid().is_some_and(xy_actors::is_confined_process) =>
            {
                tracing::warn!(peer_pid = ?cred.pid(), "connection from a sandboxed server's process refused");
                continue;
            }
            Ok(cred) if cred.uid() == uid => {}
            Ok(cred) => {
                tracing::warn!(peer_uid = cred.uid(), peer_pid = ?cred.pid(), "connection from another user refused");
                continue;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot read peer credentials; connection refused");
                continue;
            }
        }
        let id = next_id.fetch_add(1, Ordering::Relaxed);
        let (read, write) = stream.into_split();
        tokio::spawn(connection(
            id,
            read,
            write,
            methods.clone(),
            closing.clone(),
            permit,
        ));
    }
    slots
}

/// Serves one connection over any pair of byte-stream halves (a Unix socket
/// in the daemon, an in-memory duplex in fuzzers); resolves once it is
/// closed: input ended (or `closing`), every reply and stream written.
pub(crate) async fn connection<R, W>(
    id: usize,
    read: R,
    write: W,
    methods: Handlers,
    closing: watch::Receiver<bool>,
    permit: OwnedSemaphorePermit,
) where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, rx) = mpsc::channel(OUTBOUND_QUEUE);
    let conn = Arc::new(Conn {
        id,
        out: tx,
        room: Arc::new(Semaphore::new(OUTBOUND_BYTES)),
        subs: Mutex::new(HashMap::new()),
    });
    tracing::debug!(conn = id, "connection opened");
    tokio::spawn(read_loop(read, conn, methods, closing));
    write_loop(id, rx, write, permit).await;
}

/// Drains the outbound channel into the socket. Ends when every sender is
/// gone (reader done, calls and streams finished) or a write fails; then the
/// receiver drops, which wakes every `Conn::closed` waiter.
async fn write_loop<W: AsyncWrite + Unpin>(
    id: usize,
    mut rx: mpsc::Receiver<OutLine>,
    write: W,
    _slot: OwnedSemaphorePermit,
) {
    let mut w = BufWriter::with_capacity(16 * 1024, write);
    'outer: while let Some(first) = rx.recv().await {
        let mut next = Some(first);
        while let Some(msg) = next {
            if let Err(e) = write_line(&mut w, &msg).await {
                tracing::debug!(conn = id, error = %e, "client gone");
                break 'outer;
            }
            next = rx.try_recv().ok();
        }
        if let Err(e) = w.flush().await {
            tracing::debug!(conn = id, error = %e, "client gone");
            break;
        }
    }
    let _ = w.shutdown().await;
    tracing::debug!(conn = id, "connection closed");
}

/// Writes `msg` and its newline. One vectored write, so a reply larger than
/// the buffer (a `list` of a large fleet) reaches the socket in one
/// `writev` with its newline rather than as the body and then a 1-byte write,
/// which would wake the client a second time before it has its line.
async fn write_line<W: AsyncWrite + Unpin>(w: &mut BufWriter<W>, msg: &OutLine) -> io::Result<()> {
    let mut slices = [io::IoSlice::new(msg.as_bytes()), io::IoSlice::new(b"\n")];
    let mut bufs = &mut slices[..];
    while !bufs.is_empty() {
        let n = w.write_vectored(bufs).await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        io::IoSlice::advance_slices(&mut bufs, n);
    }
    Ok(())
}

/// Reads lines until EOF or shutdown; each request runs in its own task.
/// Returning drops this task's `Conn`: the connection closes once the last
/// call or stream holding one is done, which is what lets
/// `echo req | socat - UNIX-CONNECT:…` (half-closed input) end by itself.
async fn read_loop<R: AsyncRead + Unpin>(
    read: R,
    conn: Arc<Conn>,
    methods: Handlers,
    mut closing: watch::Receiver<bool>,
) {
    let mut reader = BufReader::with_capacity(16 * 1024, read);
    let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let mut ext = Extensions::new();
    ext.insert(Arc::clone(&conn));
    loop {
        let mut buf = Vec::new();
        let read = tokio::select! {
            r = read_line(&mut reader, &mut buf) => r,
            () = crate::flag::until_set(&mut closing) => break,
        };
        match read {
            Ok(Line::Eof) => break,
            Ok(Line::TooLong) => {
                tracing::debug!(conn = conn.id, "request line over the limit discarded");
                let reply = dispatch::line_too_long();
                if !conn.send(reply.json).await {
                    break;
                }
            }
            Ok(Line::Complete) => {
                let text = match String::from_utf8(buf) {
                    Ok(t) => t,
                    Err(e) => {
                        let reply = dispatch::invalid_utf8(&e.utf8_error());
                        if !conn.send(reply.json).await {
                            break;
                        }
                        continue;
                    }
                };
                let parsed = dispatch::parse_line(&text);
                drop(text);
                if !parsed.may_wait() {
                    if !answer(&conn, &methods, &ext, parsed).await {
                        break;
                    }
                    continue;
                }
                let Ok(slot) = Arc::clone(&in_flight).acquire_owned().await else {
                    break;
                };
                let conn = Arc::clone(&conn);
                let methods = methods.clone();
                let ext = ext.clone();
                tokio::spawn(async move {
                    answer(&conn, &methods, &ext, parsed).await;
                    drop(slot);
                });
            }
            Err(e) => {
                tracing::debug!(conn = conn.id, error = %e, "read failed");
                break;
            }
        }
    }
}

/// Handles one parsed request line and queues its reply; `false` once the
/// client is gone.
async fn answer(
    conn: &Conn,
    methods: &Handlers,
    ext: &Extensions,
    parsed: dispatch::Parsed,
) -> bool {
    let cid = ConnectionId(conn.id);
    match dispatch::handle(methods, cid, ext, parsed).await {
        Some(reply) => {
            let (json, written) = reply.split();
            let sent = conn.send(json).await;
            if sent {
                written.notify();
            }
            sent
        }
        None => true,
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Line {
    /// `buf` holds one line (newline stripped).
    Complete,
    /// The line was over the limit and has been skipped through its newline.
    TooLong,
    /// End of input.
    Eof,
}

/// Reads one line of at most [`MAX_LINE_BYTES`] (newline excluded) into
/// `buf`. Unlike `lines()`, neither a huge line nor invalid UTF-8 ends the
/// connection or buffers without limit.
async fn read_line<R: AsyncBufRead + Unpin>(r: &mut R, buf: &mut Vec<u8>) -> io::Result<Line> {
    let limit = MAX_LINE_BYTES as u64 + 1;
    let n = (&mut *r).take(limit).read_until(b'\n', buf).await?;
    if n == 0 {
        return Ok(Line::Eof);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
        return Ok(Line::Complete);
    }
    if buf.len() as u64 >= limit {
        buf.clear();
        discard_through_newline(r).await?;
        return Ok(Line::TooLong);
    }
    // A last line without a newline before EOF.
    Ok(Line::Complete)
}

async fn discard_through_newline<R: AsyncBufRead + Unpin>(r: &mut R) -> io::Result<()> {
    loop {
        let chunk = r.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(());
        }
        if let Some(i) = chunk.iter().position(|b| *b == b'\n') {
            r.consume(i + 1);
            return Ok(());
        }
        let n = chunk.len();
        r.consume(n);
    }
}

#[cfg(test)]
mod tests;
