//! xy's own handshake with each child (SPEC §13): `initialize` first (the
//! 2025 era is the one xy can serve to clients of both eras), and
//! `server/discover` for a child that refuses it (first, for that child's
//! successors). A state machine over the child's answers: the BridgeActor
//! writes the messages it returns and arms the step timeouts.

use std::time::Duration;

use serde_json::{Value, json};

use super::era::{ChildEra, V2025};
use super::route::{META_VERSION, V2026};

/// After this long without an answer to a handshake step, xy logs a
/// warning (and keeps waiting: a child may be slow to start).
pub(crate) const HANDSHAKE_STEP: Duration = Duration::from_secs(10);

/// Where xy's handshake with the current child stands.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Hs {
    /// No child attached.
    Detached,
    /// `server/discover` sent (own id).
    Discovering(u64),
    /// `initialize` sent (own id).
    Initializing(u64),
    /// Requests flow.
    Ready,
    /// The child answered neither era; requests fail with this.
    Broken(String),
}

/// What to do next in the handshake.
#[derive(Debug, PartialEq)]
pub(crate) enum Step {
    /// Write this handshake request (xy's own id `id`) and arm its timeout.
    Ask { id: u64, msg: Value },
    /// The handshake is over: write `notify` first, if any.
    Done {
        notify: Option<Value>,
        outcome: Result<(), String>,
    },
}

/// The handshake with the current child and what it learnt.
pub(crate) struct Handshake {
    pub(crate) state: Hs,
    pub(crate) era: ChildEra,
    /// A child of this server refused `initialize` (2026 only): later
    /// children get `server/discover` first (an SDK server may exit after
    /// refusing the handshake it does not speak).
    discover_first: bool,
    /// The steps tried with the current child.
    tried_initialize: bool,
    tried_discover: bool,
}

impl Default for Handshake {
    fn default() -> Handshake {
        Handshake {
            state: Hs::Detached,
            era: ChildEra::default(),
            discover_first: false,
            tried_initialize: false,
            tried_discover: false,
        }
    }
}

impl Handshake {
    /// Requests flow to the child.
    pub(crate) fn ready(&self) -> bool {
        self.state == Hs::Ready
    }

    /// The command may have changed: learn its era again.
    pub(crate) fn relearn(&mut self) {
        self.discover_first = false;
    }

    /// Whether `id` is the step the handshake waits on.
    pub(crate) fn waits_for(&self, id: u64) -> bool {
        matches!(self.state, Hs::Initializing(i) | Hs::Discovering(i) if i == id)
    }

    /// A new child: its first step, with xy's own request id `id`.
    pub(crate) fn begin(&mut self, id: u64) -> Step {
        self.era = ChildEra::default();
        // SDK servers of both eras pick one era per stdio connection from
        // its first message (see the module docs for which goes first).
        self.tried_initialize = false;
        self.tried_discover = false;
        if self.discover_first {
            self.discover(id)
        } else {
            self.initialize(id)
        }
    }

    /// An answer to one of xy's own requests; `None` when it is not the
    /// current step's. `next_id` gives the id of another step, if one is tried.
    pub(crate) fn on_answer(&mut self, own: &Value, next_id: impl FnOnce() -> u64) -> Option<Step> {
        let id = own.get("id").and_then(Value::as_u64);
        match self.state {
            Hs::Initializing(i) if id == Some(i) => {
                if let Some(result) = own.get("result") {
                    let v = result
                        .get("protocolVersion")
                        .and_then(Value::as_str)
                        .unwrap_or(V2025)
                        .to_owned();
                    self.era.versions = vec![v];
                    self.era.init = Some(result.clone());
                    let notify = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
                    Some(self.done(Some(notify), Ok(())))
                } else {
                    // A 2026-only child refuses the handshake.
                    self.discover_first = true;
                    Some(self.next_step(&error_text(own), next_id))
                }
            }
            Hs::Discovering(d) if id == Some(d) => {
                let versions: Vec<String> = own
                    .pointer("/result/supportedVersions")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|v| v.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default();
                if own.get("result").is_some() && versions.iter().any(|v| v.as_str() >= V2026) {
                    self.era.discover = own.get("result").cloned();
                    self.era.versions = versions;
                    Some(self.done(None, Ok(())))
                } else {
                    self.discover_first = false;
                    Some(self.next_step(&error_text(own), next_id))
                }
            }
            _ => None,
        }
    }

    /// The current step failed: try the other era, or give up.
    fn next_step(&mut self, why: &str, next_id: impl FnOnce() -> u64) -> Step {
        if !self.tried_discover {
            self.discover(next_id())
        } else if !self.tried_initialize {
            self.initialize(next_id())
        } else {
            let e = format!("the child accepted neither initialize nor server/discover ({why})");
            self.done(None, Err(e))
        }
    }

    fn done(&mut self, notify: Option<Value>, outcome: Result<(), String>) -> Step {
        self.state = match &outcome {
            Ok(()) => Hs::Ready,
            Err(e) => Hs::Broken(e.clone()),
        };
        Step::Done { notify, outcome }
    }

    fn discover(&mut self, id: u64) -> Step {
        self.tried_discover = true;
        self.state = Hs::Discovering(id);
        let msg = json!({
            "jsonrpc": "2.0", "id": id, "method": "server/discover",
            "params": {"_meta": {
                META_VERSION: V2026,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "xy", "version": xy_core::VERSION},
            }},
        });
        Step::Ask { id, msg }
    }

    fn initialize(&mut self, id: u64) -> Step {
        self.tried_initialize = true;
        self.state = Hs::Initializing(id);
        let msg = json!({
            "jsonrpc": "2.0", "id": id, "method": "initialize",
            "params": {
                "protocolVersion": V2025,
                // Every capability a client can have (D-E2): what the child
                // offers does not depend on xy; xy refuses per client.
                "capabilities": super::mrtr::all_client_capabilities(),
                "clientInfo": {"name": "xy", "version": xy_core::VERSION},
            },
        });
        Step::Ask { id, msg }
    }
}

/// The message of a JSON-RPC error answer, for logs.
fn error_text(answer: &Value) -> String {
    answer
        .pointer("/error/message")
        .and_then(Value::as_str)
        .unwrap_or("no usable result")
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask_id(s: &Step) -> u64 {
        match s {
            Step::Ask { id, .. } => *id,
            Step::Done { .. } => panic!("not a request: {s:?}"),
        }
    }

    #[test]
    fn a_2026_only_child_gets_discover_after_initialize_and_first_next_time() {
        let mut h = Handshake::default();
        let first = h.begin(1);
        assert!(matches!(&first, Step::Ask { msg, .. } if msg["method"] == "initialize"));
        let refused = json!({"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"no"}});
        let second = h.on_answer(&refused, || 2).unwrap();
        assert_eq!(ask_id(&second), 2);
        let ok = json!({"jsonrpc":"2.0","id":2,"result":{"supportedVersions":[V2026]}});
        let done = h.on_answer(&ok, || 3).unwrap();
        assert_eq!(
            done,
            Step::Done {
                notify: None,
                outcome: Ok(())
            }
        );
        assert!(h.ready() && h.era.discover.is_some());
        let next = h.begin(4);
        assert!(matches!(&next, Step::Ask { msg, .. } if msg["method"] == "server/discover"));
    }

    #[test]
    fn a_child_refusing_both_breaks_the_handshake() {
        let mut h = Handshake::default();
        h.begin(1);
        let no = |id: u64| json!({"jsonrpc":"2.0","id":id,"error":{"code":-1,"message":"nope"}});
        h.on_answer(&no(1), || 2).unwrap();
        let done = h.on_answer(&no(2), || 3).unwrap();
        assert!(matches!(done, Step::Done { outcome: Err(e), .. } if e.contains("nope")));
        assert!(matches!(h.state, Hs::Broken(_)));
        assert!(h.on_answer(&no(2), || 4).is_none());
    }
}
