//! The console (SPEC §28): xy's web page on loopback, its own port in
//! `xy.kdl` (`console { port 8398 }`, `0` off). It owns the listener
//! (behind the HTTP edge of `xy-actors`: connection cap, head timeout,
//! owner uid, no sandboxed server's process), the one-time codes and
//! sessions, and the console's answers; what a page may ask is an
//! allow-list of the control socket's own methods, run in process. With no
//! page open it costs an idle listener: nothing polls, nothing is cached.
//!
//! - `session.rs`: codes, sessions, the cookie and the token (D270).
//! - `http.rs`: Host/Origin checks, method rules, the session check.
//! - `reply.rs`: the answers and their headers (CSP, no CORS).
//! - `api.rs`: the allow-list, approvals by digest, the live streams.
//! - `inproc.rs`: in-memory connections to the socket's transport.
//! - `assets.rs`: the page's files, embedded at build time.

mod api;
mod assets;
mod http;
mod inproc;
mod reply;
mod session;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use xy_core::protocol::{CONSOLE_CODE_TTL_SECS, ConsoleCodeResult};

use crate::transport::Handlers;

/// One console: its port, its sessions, its way into the methods.
#[derive(Debug)]
pub(crate) struct Console {
    port: u16,
    sessions: session::Sessions,
    daemon: inproc::Daemon,
}

/// Where the console stands, for `console_code`.
#[derive(Debug, Clone)]
pub(crate) enum ConsoleState {
    /// `console { port 0 }`.
    Off,
    /// The port could not be bound (yet): why. Tried again with backoff.
    Failed(String),
    /// Listening.
    On(Arc<Console>),
}

/// The running console: its state, and the port it should serve (a reload
/// sets it). Dropping it closes the listener.
#[derive(Debug)]
pub(crate) struct Serving {
    state: watch::Receiver<ConsoleState>,
    port: watch::Sender<Option<u16>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Serving {
    /// Where the console stands now.
    pub(crate) fn state(&self) -> ConsoleState {
        self.state.borrow().clone()
    }

    /// `xy.kdl`'s port after a reload (`None`: off); the same port changes
    /// nothing, another one is bound and the old one closed.
    pub(crate) fn set_port(&self, port: Option<u16>) {
        self.port.send_if_modified(|p| {
            let changed = *p != port;
            *p = port;
            changed
        });
    }
}

/// First wait before binding a taken port again; doubles up to [`RETRY_MAX`]
/// (the gateway's backoff, D302).
const RETRY_FIRST: Duration = Duration::from_millis(250);
/// Longest wait between two binds of a taken port.
const RETRY_MAX: Duration = Duration::from_secs(5);

/// Serves the console on `127.0.0.1:<port>` (`None`: off) from a task of
/// its own: a taken port is reported in the state and bound again with
/// backoff; a new port from a reload moves it.
pub(crate) fn start(
    port: Option<u16>,
    methods: Handlers,
    closing: watch::Receiver<bool>,
) -> Serving {
    let (port_tx, mut port_rx) = watch::channel(port);
    let first = match port {
        None => ConsoleState::Off,
        Some(p) => ConsoleState::Failed(format!("not bound to 127.0.0.1:{p} yet")),
    };
    let (state_tx, state_rx) = watch::channel(first);
    let task = tokio::spawn(async move {
        loop {
            let want = *port_rx.borrow_and_update();
            // Held while this port is wanted; dropping it closes the listener.
            let mut _listening = None;
            if let Some(port) = want {
                let mut wait = RETRY_FIRST;
                let mut logged = None;
                loop {
                    match bind(port, &methods, &closing) {
                        Ok((console, l)) => {
                            tracing::info!(url = %format!("http://127.0.0.1:{port}/"), "console listening");
                            _listening = Some(l);
                            state_tx.send_replace(ConsoleState::On(console));
                            break;
                        }
                        Err(why) => {
                            // Logged when it starts failing, not at every retry.
                            if logged.as_ref() != Some(&why) {
                                tracing::warn!(
                                    "console: {why}; retrying (free the port, or set another with \
                                     `console {{ port N }}` in xy.kdl and `xyctl reload`; 0 turns it off)"
                                );
                                logged = Some(why.clone());
                            }
                            state_tx.send_replace(ConsoleState::Failed(why));
                        }
                    }
                    tokio::select! {
                        () = tokio::time::sleep(wait) => wait = (wait * 2).min(RETRY_MAX),
                        r = port_rx.changed() => match r {
                            Ok(()) => break,
                            Err(_) => return,
                        },
                    }
                }
                if _listening.is_none() {
                    continue;
                }
            } else {
                tracing::info!("console off (xy.kdl: console {{ port 0 }})");
                state_tx.send_replace(ConsoleState::Off);
            }
            if port_rx.changed().await.is_err() {
                return;
            }
        }
    });
    Serving {
        state: state_rx,
        port: port_tx,
        task,
    }
}

/// One bind of `port`, with a console of its own (new sessions: a page of
/// the old port is another origin anyway).
fn bind(
    port: u16,
    methods: &Handlers,
    closing: &watch::Receiver<bool>,
) -> Result<(Arc<Console>, xy_actors::ConsoleListening), String> {
    let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, port))
        .map_err(|e| format!("cannot listen on 127.0.0.1:{port}: {e}"))?;
    let console = Arc::new(Console {
        port,
        sessions: session::Sessions::new(session::code_ttl()),
        daemon: inproc::Daemon::new(methods.clone(), closing.clone()),
    });
    let handler = {
        let console = Arc::clone(&console);
        move |req| http::handle(req, Arc::clone(&console))
    };
    let l = xy_actors::listen_console(listener, handler)
        .map_err(|e| format!("cannot serve 127.0.0.1:{port}: {e}"))?;
    Ok((console, l))
}

impl Console {
    /// A new one-time code and the URL `xyctl ui` hands the browser.
    pub(crate) fn code(&self) -> ConsoleCodeResult {
        ConsoleCodeResult {
            url: format!("http://127.0.0.1:{}/", self.port),
            code: self.sessions.issue_code(),
            expires_in_secs: CONSOLE_CODE_TTL_SECS,
        }
    }
}
