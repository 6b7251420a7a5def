//! The ServerActor's side of a stdio server (SPEC §13): it keeps a
//! BridgeActor linked under itself, binds the port before each spawn (so a
//! held port fails the start with its holder named, as for HTTP servers),
//! hands every new child's stdin/stdout to the bridge, and carries out the
//! lifecycle's endpoint actions: close the listener on a stop, hold requests
//! for the next child on a restart, listen again after a bridge panic.

use ractor::{Actor, ActorRef};
use tokio::sync::watch;
use xy_core::protocol::{ServerState, Transport};

use super::ServerSnapshot;
use super::failure::SpawnFailure;
use super::{ServerActorState, ServerMsg};
use crate::bridge::{self, BridgeActor, BridgeArgs, BridgeMsg, ChildStdio};
use crate::os::ports::PortHolder;

/// The bridge of a stdio server; stops it when dropped (the ServerActor's
/// state is dropped on a panic too, and the bridge must not outlive it).
pub(crate) struct BridgeLink {
    pub(crate) actor: ActorRef<BridgeMsg>,
    /// Whether the bridge has a listener bound now.
    pub(crate) listening: bool,
    /// The bridge as the gateway reaches it (the same body budget as its
    /// own port).
    pub(crate) endpoint: bridge::http::Endpoint,
}

/// The bridge's view of its ServerActor: the published state and the actor.
struct Owner {
    snapshot: watch::Receiver<ServerSnapshot>,
    server: ActorRef<ServerMsg>,
}

impl bridge::Owner for Owner {
    fn state(&self) -> ServerState {
        self.snapshot.borrow().state
    }

    fn child_coming(&self) -> bool {
        self.snapshot.borrow().child_coming
    }

    fn demand(&self) {
        let _ = self.server.cast(ServerMsg::Demand);
    }

    fn idle_stop(&self) {
        let _ = self.server.cast(ServerMsg::IdleStop);
    }

    fn listed(&self, listing: crate::mcp::listing::Listing) {
        let _ = self.server.cast(ServerMsg::Listed(Box::new(listing)));
    }

    fn probe_gates(&self, key: String, tools: Vec<String>) {
        let _ = self.server.cast(ServerMsg::ProbeGates { key, tools });
    }
}

impl Drop for BridgeLink {
    fn drop(&mut self) {
        self.actor.stop(None);
    }
}

impl ServerActorState {
    /// Starts the bridge when the config is stdio (and there is none), or
    /// drops it when the config no longer is.
    pub(super) async fn ensure_bridge(&mut self, myself: &ActorRef<ServerMsg>) {
        if self.config.transport != Transport::Stdio {
            self.bridge = None;
            return;
        }
        if let Some(b) = &self.bridge {
            let _ = b.actor.cast(BridgeMsg::Configure {
                port: self.config.port,
                path: self.config.path.clone(),
                idle_stop: self.config.on_demand.as_ref().map(|o| o.idle_stop),
            });
            return;
        }
        let bodies = std::sync::Arc::new(tokio::sync::Semaphore::new(bridge::http::BODIES));
        let flow = std::sync::Arc::new(bridge::route::outbox::Flow::default());
        let args = BridgeArgs {
            bodies: std::sync::Arc::clone(&bodies),
            flow: std::sync::Arc::clone(&flow),
            name: self.config.name.clone(),
            port: self.config.port,
            path: self.config.path.clone(),
            owner: Box::new(Owner {
                snapshot: self.snapshot.subscribe(),
                server: myself.clone(),
            }),
            idle_stop: self.config.on_demand.as_ref().map(|o| o.idle_stop),
            calls: self.calls.clone(),
            verdicts: self.mcp.verdicts(),
        };
        match Actor::spawn_linked(None, BridgeActor, args, myself.get_cell()).await {
            Ok((actor, _)) => {
                self.bridge = Some(BridgeLink {
                    endpoint: bridge::http::Endpoint {
                        path: self.config.path.clone(),
                        actor: actor.clone(),
                        bodies,
                        flow,
                    },
                    actor,
                    listening: false,
                });
            }
            Err(e) => {
                tracing::error!(server = %self.config.name, error = %e, "cannot start the stdio bridge");
            }
        }
    }

    /// Before a spawn: the bridge must listen. A bind failure fails the
    /// spawn, naming `holder`, the process that held the port when it was
    /// looked up off the actor (`begin_spawn`); the actor never walks
    /// `/proc` itself.
    pub(super) fn ensure_listening(
        &mut self,
        holder: Option<PortHolder>,
    ) -> Result<(), Box<SpawnFailure>> {
        let port = self.config.port;
        let Some(bridge) = &mut self.bridge else {
            return Err(Box::new(SpawnFailure {
                name: self.config.name.clone(),
                path: self.config.command.clone(),
                error: "the stdio bridge is not running".to_owned(),
                kind: xy_core::protocol::SpawnErrorKind::Other,
                port_holder: None,
                secret: None,
            }));
        };
        if bridge.listening {
            return Ok(());
        }
        match std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, port)) {
            Ok(l) => {
                let _ = bridge.actor.cast(BridgeMsg::Serve(l));
                bridge.listening = true;
                Ok(())
            }
            Err(e) => {
                let error = match &holder {
                    Some(h) => h.to_string(),
                    None => format!("cannot listen on 127.0.0.1:{port}: {e}"),
                };
                Err(Box::new(SpawnFailure {
                    name: self.config.name.clone(),
                    path: self.config.command.clone(),
                    error,
                    kind: if holder.is_some() {
                        xy_core::protocol::SpawnErrorKind::PortHeld
                    } else {
                        xy_core::protocol::SpawnErrorKind::Other
                    },
                    port_holder: holder,
                    secret: None,
                }))
            }
        }
    }

    /// Listen now (the lifecycle's `OpenEndpoint`). The bind can fail for a
    /// moment after a bridge panic, until the dead bridge's listener task
    /// has closed its socket: then it is tried again shortly, a bounded
    /// number of times.
    pub(super) fn open_endpoint(&mut self, myself: &ActorRef<ServerMsg>, attempt: u32) {
        const TRIES: u32 = 50;
        const PAUSE: std::time::Duration = std::time::Duration::from_millis(100);
        match self.ensure_listening(None) {
            Ok(()) => {}
            Err(_) if attempt + 1 < TRIES => {
                let attempt = attempt + 1;
                myself.send_after(PAUSE, move || ServerMsg::Relisten { attempt });
            }
            Err(failure) => {
                tracing::warn!(server = %self.config.name, "{}", failure.error);
            }
        }
    }

    /// After a spawn: the child's protocol pipes go to the bridge.
    pub(super) fn attach(&self, run: u64, io: Option<ChildStdio>) {
        if let (Some(b), Some(io)) = (&self.bridge, io) {
            let _ = b.actor.cast(BridgeMsg::Attach { run, io });
        }
    }

    /// The child is being restarted by xy: new requests wait for the next
    /// child; what is in flight fails naming the restart unless the child
    /// answers it before it exits.
    pub(super) fn hold_bridge(&self) {
        if let Some(b) = &self.bridge {
            let _ = b.actor.cast(BridgeMsg::Hold);
        }
    }

    /// A stop: the listener closes and every stream ends.
    pub(super) fn close_bridge(&mut self, why: &str) {
        if let Some(b) = &mut self.bridge
            && b.listening
        {
            let _ = b.actor.cast(BridgeMsg::Close(why.to_owned()));
            b.listening = false;
        }
    }
}

impl ServerActorState {
    /// The bridge panicked: start a new one, and let the lifecycle decide
    /// the rest (the child lost its pipes with the old bridge: it is killed
    /// and restarted by its policy; the new bridge listens at once if the
    /// endpoint was open, an idle on-demand server's included).
    pub(super) async fn bridge_failed(
        &mut self,
        myself: &ActorRef<ServerMsg>,
        id: ractor::ActorId,
        error: &str,
    ) {
        if self.bridge.as_ref().is_none_or(|b| b.actor.get_id() != id) {
            return;
        }
        tracing::error!(server = %self.config.name, %error, "stdio bridge failed; starting a new one");
        self.bridge = None;
        self.ensure_bridge(myself).await;
        self.apply(myself, super::Event::BridgeFailed);
    }
}

impl ServerActorState {
    /// An on-demand stdio server (SPEC §13).
    pub(super) fn on_demand(&self) -> bool {
        self.config.on_demand.is_some() && self.config.transport == Transport::Stdio
    }

    /// Listen without a child: `idle`. If the port cannot be bound, the
    /// normal start path runs and reports it as a spawn failure.
    pub(super) fn listen_idle(
        &mut self,
        myself: &ActorRef<ServerMsg>,
        reply: Option<ractor::RpcReplyPort<super::StartOutcome>>,
    ) {
        match self.ensure_listening(None) {
            Ok(()) => {
                self.apply(myself, super::Event::IdleRequested);
                if let Some(reply) = reply
                    && !reply.is_closed()
                {
                    let _ = reply.send(super::StartOutcome::Started);
                }
            }
            Err(_) => {
                self.start_waiters.extend(reply);
                self.apply(myself, super::Event::StartRequested);
            }
        }
    }
}
