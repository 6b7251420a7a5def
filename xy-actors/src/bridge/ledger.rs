//! The bridge's answers from the ledger (SPEC §26, D231): while an
//! on-demand server is idle (never woken, or idle-stopped), a client's
//! session start — `initialize`, `server/discover`, `ping`, the lists,
//! `subscriptions/listen` — is answered from the firewall's
//! [`FromLedger`] without spawning; the first request it cannot answer
//! wakes the child as before. A 2025 child's `tools/list` leaves out the
//! tools the asking client may not call, by the gates the ledger kept for
//! the listing (D280).

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Value, json};
use xy_core::protocol::ServerState;

use super::era::ChildEra;
use super::request::Routed;
use super::route::Out;
use super::{Ack, BridgeState, Post};
use crate::mcp::from_ledger::{FromLedger, META_LEDGER};
use crate::mcp::gates::Gates;
use crate::mcp::listing::offers;

/// The methods the ledger may answer.
fn answerable(method: &str) -> bool {
    matches!(
        method,
        "initialize"
            | "server/discover"
            | "ping"
            | "subscriptions/listen"
            | "tools/list"
            | "prompts/list"
            | "resources/list"
            | "resources/templates/list"
            | "skills/list"
    )
}

/// Puts the ledger's marker in `result._meta`.
fn mark(result: &mut Value, ledger: &FromLedger) {
    if let Some(r) = result.as_object_mut() {
        let meta = r.entry("_meta").or_insert_with(|| json!({}));
        if let Some(m) = meta.as_object_mut() {
            m.insert(META_LEDGER.to_owned(), ledger.marker());
        }
    }
}

impl BridgeState {
    /// The ledger's answers, when they stand in for the server now: no
    /// child, the server idle, and xy has listed it before.
    fn ledger_now(&self) -> Option<Arc<FromLedger>> {
        if self.hs.ready() || self.child.is_some() || self.owner.state() != ServerState::Idle {
            return None;
        }
        self.router.firewall.ledger.clone()
    }

    /// Answers `p` from the ledger if it can (see the module docs);
    /// gives `p` back when the server must answer it.
    pub(super) fn answer_from_ledger(
        &mut self,
        p: Box<Post>,
        method: &str,
        id: &Value,
    ) -> Result<Routed, Box<Post>> {
        if !answerable(method) {
            return Err(p);
        }
        let Some(ledger) = self.ledger_now() else {
            return Err(p);
        };
        let era = ChildEra {
            init: ledger.init.clone(),
            discover: ledger.discover.clone(),
            versions: ledger.versions.clone(),
        };
        match method {
            "initialize" => Ok(self.initialize(p, id, &era, Some(&ledger))),
            "subscriptions/listen" => Ok(self.listen(p, id)),
            "ping" => {
                let mut r = json!({});
                mark(&mut r, &ledger);
                self.reply(p, json!({"jsonrpc": "2.0", "id": id, "result": r}), None);
                Ok(Routed::Taken)
            }
            "server/discover" => {
                let mut r = if era.init.is_some() {
                    era.discover_from_init()
                } else {
                    era.discover.clone().unwrap_or_else(|| json!({}))
                };
                mark(&mut r, &ledger);
                self.reply(p, json!({"jsonrpc": "2.0", "id": id, "result": r}), None);
                Ok(Routed::Taken)
            }
            _ => {
                if p.msg
                    .pointer("/params/cursor")
                    .is_some_and(|c| !c.is_null())
                {
                    return Err(p);
                }
                // Tools this client may not be shown (D210, D280): the
                // gates the ledger kept for this listing leave them out;
                // without them, a 2025 child's client that lacks a
                // capability is answered by the child (after its probes).
                let caps = self.client_caps(&p);
                let gates = ledger.gates.clone().or_else(|| {
                    (self.router.gates.failed.is_some()).then(|| self.router.gates.clone())
                });
                if method == "tools/list"
                    && gates.is_none()
                    && ledger.init.is_some()
                    && offers(ledger.capabilities(), "tools")
                    && Gates::unknown().must_wait(caps.as_deref(), None)
                {
                    return Err(p);
                }
                let hidden = |t: &str| {
                    gates
                        .as_ref()
                        .is_some_and(|g| g.missing(t, caps.as_deref()).is_some())
                };
                let Some(bytes) = ledger.list(method, id, p.era2026, hidden) else {
                    return Err(p);
                };
                tracing::debug!(server = %self.name, %method, "answered from the ledger");
                let _ = p.ack.send(Ack::Exchange { session: None });
                let _ = p.outbox.try_send(Out::Answer(Bytes::from(bytes)));
                Ok(Routed::Taken)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_and_reads_are_never_the_ledgers() {
        for m in [
            "tools/call",
            "resources/read",
            "prompts/get",
            "completion/complete",
        ] {
            assert!(!answerable(m), "{m}");
        }
        let l = FromLedger {
            listed_at: "t".into(),
            ..FromLedger::default()
        };
        let mut r = json!({"protocolVersion": "2025-11-25", "_meta": {"k": 1}});
        mark(&mut r, &l);
        assert_eq!(r["_meta"], json!({"k": 1, META_LEDGER: {"listedAt": "t"}}));
    }
}
