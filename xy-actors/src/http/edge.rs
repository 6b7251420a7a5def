//! The admission edge of every HTTP listener xyd runs (SPEC §18): the stdio
//! bridge's per-server ports and the gateway (SPEC §20). It owns the accept
//! loop and each connection up to the request handler:
//!
//! 1. **How many**: at most [`MAX_CONNECTIONS`] connections are served at
//!    once per listener; up to [`MAX_QUEUED`] more wait [`QUEUE_WAIT`] for a
//!    slot and then get `503` with a JSON body. Past both, the loop stops
//!    accepting and new connections wait in the kernel's backlog. Accept
//!    errors back off ([`AcceptBackoff`]) instead of spinning.
//! 2. **Who**: only the daemon's own uid. The peer's socket is looked up in
//!    the kernel's socket table (`os::peer`: an exact lookup where there is
//!    one, else a scan on the blocking pool); another uid, or a peer that
//!    cannot be identified, gets `403` and is closed. Then the process
//!    holding the socket is mapped to xy's servers (`os::peer::process`,
//!    on the blocking pool, once per connection): a process of a sandboxed
//!    server gets `403` unless its `reach` lines name the server behind the
//!    listener ([`Behind`]); on the gateway, where that server is known per
//!    request, the connection's [`Reach`] rides in each request's
//!    extensions for the route to check (SPEC §24, D170).
//! 3. **How long**: hyper's `header_read_timeout` ([`HEAD_TIMEOUT`]) closes
//!    a connection that has not sent a complete request head in time, and
//!    the same timer bounds an idle keep-alive connection.
//!
//! What a request means is the caller's: it hands [`serve`] a factory of
//! hyper services. `docs/decisions.md` (D62) gives the reasons.

pub(crate) mod backoff;
mod refuse;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::{Body, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;

pub(crate) use crate::os::peer::process::Reach;
pub use backoff::AcceptBackoff;
use refuse::{Refusal, refuse};

/// Connections served at once per listener. An MCP client holds one or two
/// (a POST in flight, a GET stream per 2025 session), so this covers many
/// dozens of agents at once, while a flood costs at most this many
/// descriptors and hyper buffers per listener.
pub(crate) const MAX_CONNECTIONS: usize = 256;
/// Connections past [`MAX_CONNECTIONS`] held while they wait for a slot.
pub(crate) const MAX_QUEUED: usize = 64;
/// How long a queued connection waits for a slot before its `503`.
pub(crate) const QUEUE_WAIT: Duration = Duration::from_secs(1);
/// A request head must be complete this long after the connection is
/// admitted, or after the previous response on a keep-alive connection
/// (SPEC §18). Above the idle expiry of common HTTP clients' pools (a few
/// seconds), so clients drop idle connections before xyd does.
pub(crate) const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Socket-list scans running at once, across listeners: each reads the
/// whole list, and a flood must not fill the blocking pool with them.
const LOOKUPS: usize = 2;

static LOOKUP_SLOTS: Semaphore = Semaphore::const_new(LOOKUPS);

/// What the edge serves a connection with: a hyper service that answers
/// with bodies of type `B`, movable to the connection's task.
pub(crate) trait Served<B>:
    hyper::service::Service<
        Request<Incoming>,
        Response = Response<B>,
        Error = Infallible,
        Future: Send + 'static,
    > + Send
    + 'static
{
}

impl<S, B> Served<B> for S where
    S: hyper::service::Service<
            Request<Incoming>,
            Response = Response<B>,
            Error = Infallible,
            Future: Send + 'static,
        > + Send
        + 'static
{
}

/// A response body hyper can write from the connection's task.
pub(crate) trait Reply:
    Body<Data: Send, Error: Into<Box<dyn std::error::Error + Send + Sync>>> + Send + 'static
{
}

impl<B> Reply for B where
    B: Body<Data: Send, Error: Into<Box<dyn std::error::Error + Send + Sync>>> + Send + 'static
{
}

/// Which server a listener serves, for the `reach` check of each connection.
#[derive(Debug, Clone)]
pub(crate) enum Behind {
    /// One server's own port (a stdio bridge, a remote's port).
    Server(Arc<str>),
    /// The gateway: the server is known per request (see [`Reach`]).
    Gateway,
    /// The console (SPEC §28): no sandboxed server's process, whatever its
    /// `reach` lines say.
    Console,
}

/// Puts the connection's [`Reach`] into each request's extensions.
struct WithReach<S> {
    inner: S,
    reach: Arc<Reach>,
}

impl<S> hyper::service::Service<Request<Incoming>> for WithReach<S>
where
    S: hyper::service::Service<Request<Incoming>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn call(&self, mut req: Request<Incoming>) -> Self::Future {
        req.extensions_mut().insert(Arc::clone(&self.reach));
        self.inner.call(req)
    }
}

/// The loopback ports xy's own listeners hold, so the egress proxy never
/// relays to one (D173): a relayed connection is xyd's own and would pass
/// the process check.
static OWN_PORTS: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());

/// Holds one entry of the own-ports list; dropping it removes the entry.
#[derive(Debug)]
pub(crate) struct OwnPort(u16);

impl OwnPort {
    pub(crate) fn hold(port: u16) -> OwnPort {
        OWN_PORTS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(port);
        OwnPort(port)
    }
}

impl Drop for OwnPort {
    fn drop(&mut self) {
        let mut ports = OWN_PORTS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(i) = ports.iter().position(|p| *p == self.0) {
            ports.swap_remove(i);
        }
    }
}

/// Whether `port` is held by one of xy's listeners.
pub(crate) fn is_own_port(port: u16) -> bool {
    OWN_PORTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .contains(&port)
}

/// How long open connections get to finish after a [`Listening`] is dropped.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// A running listener ([`listen`]); dropping it stops accepting and closes
/// every connection (after [`CLOSE_GRACE`] for responses still being
/// written).
pub(crate) struct Listening {
    shutdown: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    _port: Option<OwnPort>,
}

impl Drop for Listening {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        let task = self.task.abort_handle();
        // Give the connection tasks their grace, then cut what is left.
        tokio::spawn(async move {
            tokio::time::sleep(CLOSE_GRACE).await;
            task.abort();
        });
    }
}

/// Serves an already bound `listener` with [`serve`] on a task of its own
/// until the returned [`Listening`] is dropped.
pub(crate) fn listen<M, S, B>(
    listener: std::net::TcpListener,
    behind: Behind,
    service: M,
) -> std::io::Result<Listening>
where
    M: Fn() -> S + Send + 'static,
    S: Served<B>,
    B: Reply,
{
    listener.set_nonblocking(true)?;
    let port = listener.local_addr().ok().map(|a| OwnPort::hold(a.port()));
    let listener = TcpListener::from_std(listener)?;
    let (shutdown, stop) = watch::channel(false);
    let task = tokio::spawn(serve(listener, behind, service, stop));
    Ok(Listening {
        shutdown,
        task,
        _port: port,
    })
}

/// The body of a console response (`xy-daemon`'s console builds it).
pub type ConsoleBody = crate::http::body::HttpBody;

/// The console's listener (SPEC §28); dropping it stops the console.
pub struct ConsoleListening(#[allow(dead_code)] Listening);

impl std::fmt::Debug for ConsoleListening {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ConsoleListening")
    }
}

/// Serves the console on an already bound loopback `listener` behind this
/// edge (cap, head timeout, owner uid, no sandboxed server's process):
/// each admitted request goes to `handle`. The `Host`/`Origin` checks,
/// the session and everything a request means are the caller's.
pub fn listen_console<F, Fut>(
    listener: std::net::TcpListener,
    handle: F,
) -> std::io::Result<ConsoleListening>
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Response<ConsoleBody>> + Send + 'static,
{
    let service = move || {
        let handle = handle.clone();
        hyper::service::service_fn(move |req| {
            let answer = handle(req);
            async move { Ok::<_, Infallible>(answer.await) }
        })
    };
    listen(listener, Behind::Console, service).map(ConsoleListening)
}

/// Serves `listener` until `stop` turns true (or its sender is dropped),
/// then lets open connections finish their responses (graceful shutdown)
/// and returns once they have. `service` makes one hyper service per
/// admitted connection.
pub(crate) async fn serve<M, S, B>(
    listener: TcpListener,
    behind: Behind,
    service: M,
    mut stop: watch::Receiver<bool>,
) where
    M: Fn() -> S,
    S: Served<B>,
    B: Reply,
{
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let held = Arc::new(Semaphore::new(MAX_CONNECTIONS + MAX_QUEUED));
    let mut backoff = AcceptBackoff::new();
    let mut conns = JoinSet::new();
    loop {
        while conns.try_join_next().is_some() {}
        // Room to hold one more connection; until then new ones wait in the
        // kernel's backlog rather than being accepted and dropped.
        let hold = tokio::select! {
            p = Arc::clone(&held).acquire_owned() => p.expect("the semaphore is never closed"),
            _ = stop.changed() => break,
        };
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = stop.changed() => break,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                let (wait, first) = backoff.failed();
                if first {
                    tracing::warn!(error = %e, "accept failed; backing off until it succeeds");
                }
                drop(hold);
                tokio::select! {
                    () = tokio::time::sleep(wait) => continue,
                    _ = stop.changed() => break,
                }
            }
        };
        let failures = backoff.succeeded();
        if failures > 0 {
            tracing::info!(failures, "accepting again");
        }
        conns.spawn(connection(
            stream,
            peer,
            behind.clone(),
            hold,
            Arc::clone(&slots),
            service(),
            stop.clone(),
        ));
    }
    drop(listener);
    while conns.join_next().await.is_some() {}
}

/// One accepted connection: who, a slot, then HTTP until it closes.
async fn connection<S, B>(
    stream: TcpStream,
    peer: SocketAddr,
    behind: Behind,
    hold: OwnedSemaphorePermit,
    slots: Arc<Semaphore>,
    service: S,
    mut stop: watch::Receiver<bool>,
) where
    S: Served<B>,
    B: Reply,
{
    // Loopback only, even if a bind were ever widened.
    if !peer.ip().is_loopback() {
        return;
    }
    let uid = nix::unistd::getuid().as_raw();
    let socket = match peer_socket(&stream, peer).await {
        Ok(s) if s.uid == uid => s,
        Ok(s) => {
            let owner = s.uid;
            tracing::info!(%peer, peer_uid = owner, "connection from another user refused");
            // A refusal holds no place of the listener's (see `refuse`).
            drop(hold);
            return refuse(stream, Refusal::Forbidden).await;
        }
        Err(e) => {
            tracing::info!(%peer, error = %e, "connection refused: its user cannot be identified");
            drop(hold);
            return refuse(stream, Refusal::Forbidden).await;
        }
    };
    let reach = match peer_reach(socket.key).await {
        Ok(r) => r,
        Err(e) => {
            tracing::info!(%peer, error = %e, "connection refused: its process cannot be identified");
            drop(hold);
            return refuse(stream, Refusal::Forbidden).await;
        }
    };
    let refused = match &behind {
        Behind::Server(name) => !reach.allows(name),
        Behind::Gateway => reach.nothing(),
        Behind::Console => !matches!(reach, Reach::All),
    };
    if refused {
        tracing::info!(%peer, who = %reach.who(), listener = ?behind, "connection from a sandboxed server refused");
        drop(hold);
        return refuse(stream, Refusal::Confined).await;
    }
    let service = WithReach {
        inner: service,
        reach: Arc::new(reach),
    };
    let slot = match Arc::clone(&slots).try_acquire_owned() {
        Ok(p) => p,
        Err(_) => match tokio::time::timeout(QUEUE_WAIT, slots.acquire_owned()).await {
            Ok(Ok(p)) => p,
            _ => {
                tracing::debug!(%peer, limit = MAX_CONNECTIONS, "connection refused: listener busy");
                drop(hold);
                return refuse(
                    stream,
                    Refusal::Busy {
                        limit: MAX_CONNECTIONS,
                    },
                )
                .await;
            }
        },
    };
    let _ = stream.set_nodelay(true);
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .keep_alive(true)
        .serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = stop.changed() => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
    drop(slot);
    drop(hold);
}

/// The peer's socket and its owner. The exact lookup (Linux's sock_diag)
/// is a few microseconds and runs here; a scan of the whole socket list
/// (the `/proc` fallback, macOS) runs on the blocking pool, a few at a time.
pub(crate) async fn peer_socket(
    stream: &TcpStream,
    peer: SocketAddr,
) -> Result<crate::os::peer::PeerSocket, LookupError> {
    let local = stream.local_addr().map_err(LookupError::Local)?;
    if let Some(found) = crate::os::peer::tcp_peer(peer, local) {
        return found.map_err(LookupError::Peer);
    }
    let _turn = LOOKUP_SLOTS
        .acquire()
        .await
        .expect("the semaphore is never closed");
    tokio::task::spawn_blocking(move || crate::os::peer::tcp_peer_by_scan(peer, local))
        .await
        .map_err(|_| LookupError::Panicked)?
        .map_err(LookupError::Peer)
}

/// Whether the peer of `stream` is an unconfined process of xyd's own uid:
/// the test of a listener no sandboxed server may ever reach (the OAuth
/// callback). `Err` says why not, for the log.
pub(crate) async fn owner_unconfined(stream: &TcpStream, peer: SocketAddr) -> Result<(), String> {
    if !peer.ip().is_loopback() {
        return Err(format!("{peer} is not loopback"));
    }
    let socket = peer_socket(stream, peer).await.map_err(|e| e.to_string())?;
    let uid = nix::unistd::getuid().as_raw();
    if socket.uid != uid {
        return Err(format!("its socket belongs to uid {}", socket.uid));
    }
    match peer_reach(socket.key).await.map_err(|e| e.to_string())? {
        Reach::All => Ok(()),
        confined => Err(confined.who()),
    }
}

/// What the process holding the peer's socket may reach: a walk of `/proc`
/// (Linux) or of the parent chain (macOS), on the blocking pool.
pub(crate) async fn peer_reach(key: crate::os::peer::SocketKey) -> Result<Reach, LookupError> {
    let _turn = LOOKUP_SLOTS
        .acquire()
        .await
        .expect("the semaphore is never closed");
    tokio::task::spawn_blocking(move || crate::os::peer::process::reach_of(key))
        .await
        .map_err(|_| LookupError::Panicked)?
        .map_err(LookupError::Process)
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum LookupError {
    #[error("cannot read the connection's local address: {0}")]
    Local(std::io::Error),
    #[error(transparent)]
    Peer(crate::os::peer::PeerError),
    #[error(transparent)]
    Process(crate::os::peer::process::ProcessError),
    #[error("the lookup panicked")]
    Panicked,
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bytes::Bytes;
    use http_body_util::Full;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    use super::*;

    /// An edge around a service that answers every request `200 ok`.
    async fn start() -> (SocketAddr, watch::Sender<bool>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop_tx, stop) = watch::channel(false);
        let service = || {
            hyper::service::service_fn(|_req| async {
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
            })
        };
        tokio::spawn(serve(listener, Behind::Gateway, service, stop));
        (addr, stop_tx)
    }

    async fn read_all(s: &mut TcpStream) -> String {
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out).await;
        String::from_utf8_lossy(&out).into_owned()
    }

    async fn round_trip(s: &mut TcpStream) -> String {
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut buf = [0u8; 256];
        let n = s.read(&mut buf).await.unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    #[tokio::test(start_paused = true)]
    async fn a_half_sent_head_is_closed_after_the_head_timeout() {
        let (addr, _stop) = start().await;
        let mut s = TcpStream::connect(addr).await.unwrap();
        let started = tokio::time::Instant::now();
        s.write_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-")
            .await
            .unwrap();
        read_all(&mut s).await;
        let waited = started.elapsed();
        assert!(
            waited >= HEAD_TIMEOUT && waited < HEAD_TIMEOUT + Duration::from_secs(1),
            "{waited:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_keep_alive_connection_is_closed_after_the_head_timeout() {
        let (addr, _stop) = start().await;
        let mut s = TcpStream::connect(addr).await.unwrap();
        assert!(round_trip(&mut s).await.starts_with("HTTP/1.1 200"));
        let idle = tokio::time::Instant::now();
        read_all(&mut s).await;
        assert!(idle.elapsed() >= HEAD_TIMEOUT, "{:?}", idle.elapsed());
    }

    #[tokio::test(start_paused = true)]
    async fn past_the_cap_a_connection_waits_then_gets_503() {
        let (addr, _stop) = start().await;
        let mut held = Vec::new();
        for _ in 0..MAX_CONNECTIONS {
            let mut s = TcpStream::connect(addr).await.unwrap();
            assert!(round_trip(&mut s).await.starts_with("HTTP/1.1 200"));
            held.push(s);
        }
        let mut extra = TcpStream::connect(addr).await.unwrap();
        let asked = tokio::time::Instant::now();
        extra
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let answer = read_all(&mut extra).await;
        assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
        assert!(answer.contains("\"error\""), "{answer}");
        assert!(asked.elapsed() >= QUEUE_WAIT, "{:?}", asked.elapsed());

        // A slot that frees within the wait is taken instead.
        let mut waiting = TcpStream::connect(addr).await.unwrap();
        waiting
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        drop(held.pop());
        let mut buf = [0u8; 64];
        let n = waiting.read(&mut buf).await.unwrap();
        assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
    }
}
