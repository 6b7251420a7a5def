//! xy's egress proxy for `network "allow"` (SPEC §21, D104): one loopback
//! HTTP proxy per daemon, started on first use. Each sandboxed spawn gets a
//! token, named in the proxy URL's userinfo (`http://<server>:<token>@
//! 127.0.0.1:<port>`, so clients send it as `Proxy-Authorization: Basic`);
//! the token selects the spawn's `allow-host` lines. `CONNECT host:port`
//! and absolute-form `http://` requests to an allowed `host:port` are
//! relayed (names resolved by xyd); everything else is answered `403` and
//! recorded as a denial of that spawn, and so is a target that is one of
//! xy's own listeners, whatever `allow-host` says (D173). The child's own
//! sockets can reach nothing but this port (Landlock, `os/sandbox/linux.rs`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use xy_core::sandbox::{Denied, HostPort};

use crate::os::sandbox::{ProxyGrant, SandboxRun};

/// Request heads larger than this are refused.
const MAX_HEAD: usize = 16 * 1024;

/// One spawn's permission.
struct Grant {
    allow: Vec<HostPort>,
    run: Weak<SandboxRun>,
}

/// The daemon's egress proxy.
#[derive(Default)]
pub(crate) struct EgressProxy {
    port: OnceLock<u16>,
    grants: Arc<Mutex<HashMap<String, Grant>>>,
}

impl std::fmt::Debug for EgressProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EgressProxy")
            .field("port", &self.port.get())
            .finish_non_exhaustive()
    }
}

/// The daemon's one proxy.
pub(crate) fn proxy() -> &'static EgressProxy {
    static PROXY: OnceLock<EgressProxy> = OnceLock::new();
    PROXY.get_or_init(EgressProxy::default)
}

/// A grant for `config`'s spawn when its sandbox says `network "allow"`
/// (`shown`: the command, for the error).
///
/// # Errors
///
/// `SandboxUnavailable` when the proxy cannot be started.
pub(crate) fn grant_for(
    config: &xy_core::config::ServerConfig,
    shown: &str,
) -> Result<Option<(ProxyGrant, String)>, crate::os::spawn::SpawnError> {
    let allow = config
        .sandbox
        .as_ref()
        .is_some_and(|s| s.network == xy_core::sandbox::NetworkMode::Allow);
    if !allow {
        return Ok(None);
    }
    proxy()
        .grant(&config.name)
        .map(Some)
        .map_err(|e| crate::os::spawn::SpawnError {
            path: shown.to_owned(),
            error: format!("sandbox.network \"allow\": cannot start xy's egress proxy: {e}"),
            kind: xy_core::protocol::SpawnErrorKind::SandboxUnavailable,
        })
}

impl EgressProxy {
    /// The proxy's port, binding it on first use (inside the runtime).
    fn ensure_started(&self) -> std::io::Result<u16> {
        if let Some(p) = self.port.get() {
            return Ok(*p);
        }
        let std_listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
        std_listener.set_nonblocking(true)?;
        let port = std_listener.local_addr()?.port();
        let listener = TcpListener::from_std(std_listener)?;
        if self.port.set(port).is_err() {
            // Another spawn started it first: use that one.
            return self
                .port
                .get()
                .copied()
                .ok_or(std::io::ErrorKind::Other.into());
        }
        tracing::info!(port, "sandbox egress proxy listening");
        let grants = self.grants.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                tokio::spawn(serve(stream, grants.clone()));
            }
        });
        Ok(port)
    }

    /// A new token for server `name`'s next spawn: the grant to give the
    /// sandbox, and the key [`EgressProxy::activate`] takes once the spawn's
    /// [`SandboxRun`] exists.
    pub(crate) fn grant(&self, name: &str) -> std::io::Result<(ProxyGrant, String)> {
        let port = self.ensure_started()?;
        let token = crate::mcp::meta::random_hex()?;
        let url = format!("http://{name}:{token}@127.0.0.1:{port}");
        let authorization = format!("Basic {}", STANDARD.encode(format!("{name}:{token}")));
        Ok((ProxyGrant { port, url }, authorization))
    }

    /// Lets the spawn of `run` through, for as long as `run` lives.
    pub(crate) fn activate(&self, authorization: String, run: &Arc<SandboxRun>) {
        let mut g = self
            .grants
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        g.retain(|_, grant| grant.run.strong_count() > 0);
        g.insert(
            authorization,
            Grant {
                allow: run.allow_hosts().to_vec(),
                run: Arc::downgrade(run),
            },
        );
    }
}

/// What the head of one proxied request asks for.
struct Ask {
    connect: bool,
    target: HostPort,
    authorization: Option<String>,
    /// The head to send upstream (absolute-form requests only).
    forward: Vec<u8>,
}

fn parse_head(head: &[u8]) -> Result<Option<(Ask, usize)>, ()> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    let len = match req.parse(head) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err(()),
    };
    let method = req.method.ok_or(())?;
    let path = req.path.ok_or(())?;
    let authorization = req
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("proxy-authorization"))
        .and_then(|h| std::str::from_utf8(h.value).ok())
        .map(|v| v.trim().to_owned());
    if method.eq_ignore_ascii_case("CONNECT") {
        let target = HostPort::parse(path).map_err(|_| ())?;
        return Ok(Some((
            Ask {
                connect: true,
                target,
                authorization,
                forward: Vec::new(),
            },
            len,
        )));
    }
    let rest = path.strip_prefix("http://").ok_or(())?;
    let (authority, origin) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let target = if authority.contains(':') && !authority.ends_with(']') {
        HostPort::parse(authority).map_err(|_| ())?
    } else {
        HostPort::parse(&format!("{authority}:80")).map_err(|_| ())?
    };
    let mut forward = format!("{method} {origin} HTTP/1.1\r\n").into_bytes();
    for h in req.headers.iter() {
        let n = h.name.to_ascii_lowercase();
        if n.starts_with("proxy-") || n == "connection" {
            continue;
        }
        forward.extend_from_slice(h.name.as_bytes());
        forward.extend_from_slice(b": ");
        forward.extend_from_slice(h.value);
        forward.extend_from_slice(b"\r\n");
    }
    // One request per upstream connection: a kept-alive proxy connection
    // must not carry a second request to another host past the check.
    forward.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok(Some((
        Ask {
            connect: false,
            target,
            authorization,
            forward,
        },
        len,
    )))
}

async fn reply(stream: &mut TcpStream, status: &str, extra: &str) {
    let msg = format!("HTTP/1.1 {status}\r\n{extra}Content-Length: 0\r\nConnection: close\r\n\r\n");
    let _ = stream.write_all(msg.as_bytes()).await;
    let _ = stream.shutdown().await;
}

async fn serve(mut stream: TcpStream, grants: Arc<Mutex<HashMap<String, Grant>>>) {
    let mut buf = Vec::with_capacity(1024);
    let (ask, used) = loop {
        let mut chunk = [0u8; 2048];
        let n = match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        match parse_head(&buf) {
            Ok(Some(a)) => break a,
            Ok(None) if buf.len() < MAX_HEAD => {}
            _ => return reply(&mut stream, "400 Bad Request", "").await,
        }
    };
    let found = {
        let g = grants
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        ask.authorization
            .as_ref()
            .and_then(|a| g.get(a))
            .and_then(|grant| Some((grant.run.upgrade()?, grant.allow.clone())))
    };
    let Some((run, allow)) = found else {
        return reply(
            &mut stream,
            "407 Proxy Authentication Required",
            "Proxy-Authenticate: Basic realm=\"xy\"\r\n",
        )
        .await;
    };
    if !allow.contains(&ask.target) {
        run.record(&Denied::Connect(ask.target.to_string()));
        return reply(&mut stream, "403 Forbidden", "").await;
    }
    let upstream = match TcpStream::connect((ask.target.host.as_str(), ask.target.port)).await {
        Ok(u) => u,
        Err(e) => {
            tracing::debug!(target = %ask.target, error = %e, "egress upstream unreachable");
            return reply(&mut stream, "502 Bad Gateway", "").await;
        }
    };
    // Never to one of xy's own listeners (D173): the connection would be
    // xyd's and pass their process check. Checked on the address connected
    // to, so a name that resolves to loopback is caught too.
    if upstream
        .peer_addr()
        .is_ok_and(|a| a.ip().is_loopback() && crate::http::edge::is_own_port(a.port()))
    {
        run.record(&Denied::Other(format!(
            "connection to {} (one of xy's own listeners: a sandboxed server \
             reaches xy only through its block's reach lines)",
            ask.target
        )));
        return reply(&mut stream, "403 Forbidden", "").await;
    }
    let mut upstream = upstream;
    if ask.connect {
        if stream
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await
            .is_err()
        {
            return;
        }
    } else if upstream.write_all(&ask.forward).await.is_err() {
        return;
    }
    // Bytes the client sent after the head (a body, or TLS's first flight).
    if buf.len() > used && upstream.write_all(&buf[used..]).await.is_err() {
        return;
    }
    let _ = tokio::io::copy_bidirectional(&mut stream, &mut upstream).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_parse_to_their_targets() {
        let (a, _) = parse_head(b"CONNECT api.github.com:443 HTTP/1.1\r\nHost: x\r\nProxy-Authorization: Basic abc\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(a.connect);
        assert_eq!(a.target.to_string(), "api.github.com:443");
        assert_eq!(a.authorization.as_deref(), Some("Basic abc"));
        let (a, _) = parse_head(
            b"GET http://Example.com/x?y HTTP/1.1\r\nHost: example.com\r\nProxy-Connection: keep-alive\r\n\r\n",
        )
        .unwrap()
        .unwrap();
        assert!(!a.connect);
        assert_eq!(a.target.to_string(), "example.com:80");
        let fwd = String::from_utf8(a.forward).unwrap();
        assert!(fwd.starts_with("GET /x?y HTTP/1.1\r\n"), "{fwd}");
        assert!(!fwd.to_ascii_lowercase().contains("proxy-"), "{fwd}");
        assert!(parse_head(b"GET /relative HTTP/1.1\r\n\r\n").is_err());
        assert!(parse_head(b"GET http://x").unwrap().is_none());
    }
}
