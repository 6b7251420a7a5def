//! The ServerActor's side of a remote server (SPEC §23): no process. Its
//! "spawn" is a connect — credentials built from the run's resolved
//! secrets (or the OAuth broker), an [`Upstream`] published in the
//! snapshot for the gateway, and the server's own `port` listening on
//! loopback with the same proxy — after which the lifecycle waits for the
//! upstream's first answer ([`Event::Reached`]) to call it `running`. A
//! stop drops the upstream and closes the port at once. The OAuth broker's
//! grant changes arrive here too and go through the lifecycle (D131).

use std::sync::Arc;

use ractor::ActorRef;
use xy_core::protocol::SpawnErrorKind;

use super::failure::SpawnFailure;
use super::lifecycle::Event;
use super::{ServerActorState, ServerMsg};
use crate::log_router::redact::Redactor;
use crate::oauth::AuthEvent;
use crate::os::ports::PortHolder;
use crate::remote::{Upstream, UpstreamEvent};

/// The listener of a remote server's own port, and what it was bound for.
pub(super) struct RemotePort {
    port: u16,
    path: String,
    _listening: crate::http::edge::Listening,
}

impl ServerActorState {
    /// Connects run `run`: see the module docs. `Connected`, or
    /// `SpawnFailed` naming what is wrong (never a secret's value).
    pub(super) fn connect(
        &mut self,
        myself: &ActorRef<ServerMsg>,
        run: u64,
        secrets: &[crate::secrets::Resolved],
        holder: Option<PortHolder>,
    ) -> Event {
        let Some(remote) = self.config.remote.clone() else {
            return self.connect_failed("no url configured".to_owned(), SpawnErrorKind::Other);
        };
        if let Err(failure) = self.listen_remote(holder) {
            let text = failure.error.clone();
            tracing::warn!(server = %self.config.name, "{text}");
            self.why.port_holder = failure.port_holder.clone();
            self.last_spawn_error = Some(*failure);
            return Event::SpawnFailed(text);
        }
        let made =
            crate::remote::credentials(&self.config, &remote, secrets, &self.credentials_for)
                .and_then(|(base, creds)| {
                    let me = myself.clone();
                    let notify: crate::remote::Notify = Arc::new(move |event| {
                        let _ = me.cast(ServerMsg::Upstream { run, event });
                    });
                    Upstream::new(&self.config.name, &remote, base, creds, notify)
                });
        let up = match made {
            Ok(up) => Arc::new(up),
            Err(e) => return self.connect_failed(e, SpawnErrorKind::Other),
        };
        tracing::info!(server = %self.config.name, url = %remote.url, "remote server connected");
        self.upstream = Some(up);
        self.last_spawn_error = None;
        self.sandbox = None;
        let redactor = Redactor::new(secrets.iter().map(|r| (r.name.as_str(), r.value.as_str())));
        self.start_probe(myself, run, redactor);
        Event::Connected
    }

    fn connect_failed(&mut self, error: String, kind: SpawnErrorKind) -> Event {
        tracing::warn!(server = %self.config.name, "cannot connect: {error}");
        self.last_spawn_error = Some(self.remote_failure(error.clone(), kind, None));
        Event::SpawnFailed(error)
    }

    /// A remote's start failure, named by its url (it has no program path).
    fn remote_failure(
        &self,
        error: String,
        kind: SpawnErrorKind,
        port_holder: Option<PortHolder>,
    ) -> SpawnFailure {
        SpawnFailure {
            name: self.config.name.clone(),
            path: self
                .config
                .remote
                .as_ref()
                .map(|r| r.url.clone())
                .unwrap_or_default(),
            error,
            kind,
            port_holder,
            secret: None,
        }
    }

    /// Binds the server's own port (kept across reconnects; bound again
    /// when the port or path changed).
    fn listen_remote(&mut self, holder: Option<PortHolder>) -> Result<(), Box<SpawnFailure>> {
        let (port, path) = (self.config.port, self.config.path.clone());
        if self
            .remote_port
            .as_ref()
            .is_some_and(|p| p.port == port && p.path == path)
        {
            return Ok(());
        }
        self.remote_port = None;
        let failure = |error: String, holder: Option<PortHolder>| {
            let kind = if holder.is_some() {
                SpawnErrorKind::PortHeld
            } else {
                SpawnErrorKind::Other
            };
            Box::new(self.remote_failure(error, kind, holder))
        };
        let listener = match std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, port)) {
            Ok(l) => l,
            Err(e) => {
                let error = match &holder {
                    Some(h) => h.to_string(),
                    None => format!("cannot listen on 127.0.0.1:{port}: {e}"),
                };
                return Err(failure(error, holder));
            }
        };
        let (name, snap, proxy) = (
            self.config.name.clone(),
            self.snapshot.subscribe(),
            self.proxy.clone(),
        );
        let served_path = path.clone();
        let service = move || {
            let (name, path, snap, proxy) = (
                name.clone(),
                served_path.clone(),
                snap.clone(),
                proxy.clone(),
            );
            hyper::service::service_fn(move |req| {
                let (name, path, snap, proxy) =
                    (name.clone(), path.clone(), snap.clone(), proxy.clone());
                async move {
                    Ok::<_, std::convert::Infallible>(
                        crate::gateway::route::serve_remote_port(&name, &path, &snap, &proxy, req)
                            .await,
                    )
                }
            })
        };
        let behind = crate::http::edge::Behind::Server(self.config.name.as_str().into());
        match crate::http::edge::listen(listener, behind, service) {
            Ok(l) => {
                self.remote_port = Some(RemotePort {
                    port,
                    path,
                    _listening: l,
                });
                Ok(())
            }
            Err(e) => Err(failure(
                format!("cannot listen on 127.0.0.1:{port}: {e}"),
                None,
            )),
        }
    }

    /// A stop: the upstream is dropped, the port closed, the probe ended.
    pub(super) fn disconnect(&mut self) {
        if self.config.transport != xy_core::protocol::Transport::Remote && self.upstream.is_none()
        {
            return;
        }
        self.end_probe();
        self.upstream = None;
        self.remote_port = None;
    }

    /// The broker's word on this server's grant, as a lifecycle event (it
    /// acts only while the remote is connected). A logout ends the grant
    /// like a refused refresh: the server cannot answer until a login. A
    /// login lifts the hold a `login needed` put on the verdict
    /// ([`ServerActorState::auth_hold`]).
    pub(super) fn on_auth(&mut self, myself: &ActorRef<ServerMsg>, event: AuthEvent) {
        if matches!(event, AuthEvent::LoggedIn { .. }) {
            // A new grant: what the old one lacked no longer holds the
            // verdict (the probe it asks for decides).
            self.auth_hold = None;
        }
        if self.upstream.is_none() {
            return;
        }
        let event = match event {
            AuthEvent::LoggedIn { .. } => Event::LoggedIn,
            AuthEvent::LoginNeeded { reason, .. } => {
                let hint = self.login_hint();
                // The step-up reason ends with the hint already.
                let tail = format!(": xyctl auth login {}", self.config.name);
                let reason = reason.strip_suffix(&tail).unwrap_or(&reason);
                Event::LoginNeeded(format!("{hint} ({reason})"))
            }
            AuthEvent::LoggedOut { .. } => {
                Event::LoginNeeded(format!("{} (logged out)", self.login_hint()))
            }
        };
        self.apply(myself, event);
    }

    /// `login needed: xyctl auth login <name>`, the words of SPEC §23.
    fn login_hint(&self) -> String {
        crate::credentials::CredentialError::LoginNeeded {
            server: self.config.name.clone(),
            reason: None,
        }
        .to_string()
    }

    /// What run `run`'s upstream learned.
    pub(super) fn on_upstream(&mut self, myself: &ActorRef<ServerMsg>, event: UpstreamEvent) {
        match event {
            UpstreamEvent::Answered => self.apply(myself, Event::Reached),
            UpstreamEvent::CredentialsFailed(why) => {
                // Not reached, but as far as xy can go: the server is
                // there for every client, which gets the message at once.
                self.apply(myself, Event::Reached);
                self.credentials_failed(myself, &why);
            }
        }
    }
}
