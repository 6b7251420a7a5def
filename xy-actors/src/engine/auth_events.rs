//! The one subscriber to the OAuth broker's grant changes (SPEC §23): each
//! goes to its server's actor, whose lifecycle decides what it means (an
//! ended grant makes a connected remote `unhealthy`, a login re-probes it).

use std::sync::Weak;

use tokio::sync::broadcast;
use xy_core::protocol::TargetParams;

use super::{Engine, Inner};
use crate::oauth::AuthEvent;
use crate::server::ServerMsg;

/// Forwards `rx` until the broker or the engine is gone.
pub(super) fn spawn(mut rx: broadcast::Receiver<AuthEvent>, engine: Weak<Inner>) {
    tokio::spawn(async move {
        loop {
            let event = match rx.recv().await {
                Ok(e) => e,
                // Missed changes are not replayed: the next probe or call
                // finds the grant as it is.
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(missed = n, "OAuth grant changes dropped");
                    continue;
                }
                Err(broadcast::error::RecvError::Closed) => break,
            };
            let Some(inner) = engine.upgrade() else {
                break;
            };
            let engine = Engine { inner };
            let server = match &event {
                AuthEvent::LoggedIn { server }
                | AuthEvent::LoginNeeded { server, .. }
                | AuthEvent::LoggedOut { server } => server.clone(),
            };
            // A server removed since has nothing to update.
            if let Ok(refs) = engine.select(&TargetParams::one(&server)).await {
                for r in refs {
                    let _ = r.actor.cast(ServerMsg::Auth(event.clone()));
                }
            }
        }
    });
}
