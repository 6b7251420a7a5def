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
#[derive(Debug)]
pub(crate) enum ConsoleState {
    /// `console { port 0 }`.
    Off,
    /// The port could not be bound: why.
    Failed(String),
    /// Listening.
    On(Arc<Console>),
}

/// The running console; dropping it closes the listener.
#[derive(Debug)]
pub(crate) struct Serving {
    _listening: Option<xy_actors::ConsoleListening>,
}

/// Binds and serves the console on `127.0.0.1:<port>` (`None`: off).
pub(crate) fn start(
    port: Option<u16>,
    methods: Handlers,
    closing: watch::Receiver<bool>,
) -> (ConsoleState, Serving) {
    let Some(port) = port else {
        return (ConsoleState::Off, Serving { _listening: None });
    };
    let bound = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, port));
    let listener = match bound {
        Ok(l) => l,
        Err(e) => {
            let why = format!("cannot listen on 127.0.0.1:{port}: {e}");
            tracing::warn!(
                "console: {why}; set another port with `console {{ port N }}` in xy.kdl (0 turns it off)"
            );
            return (ConsoleState::Failed(why), Serving { _listening: None });
        }
    };
    let console = Arc::new(Console {
        port,
        sessions: session::Sessions::new(session::code_ttl()),
        daemon: inproc::Daemon::new(methods, closing),
    });
    let handler = {
        let console = Arc::clone(&console);
        move |req| http::handle(req, Arc::clone(&console))
    };
    match xy_actors::listen_console(listener, handler) {
        Ok(l) => {
            tracing::info!(url = %format!("http://127.0.0.1:{port}/"), "console listening");
            (
                ConsoleState::On(console),
                Serving {
                    _listening: Some(l),
                },
            )
        }
        Err(e) => {
            let why = format!("cannot serve 127.0.0.1:{port}: {e}");
            tracing::warn!("console: {why}");
            (ConsoleState::Failed(why), Serving { _listening: None })
        }
    }
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
