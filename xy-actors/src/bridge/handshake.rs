//! xy's own handshake with each child (SPEC §13, §19): `server/discover`
//! first, as the 2026-07-28 stdio transport asks of a client of both eras
//! (SDK servers answer it before any lifecycle and stay open to either),
//! then `initialize` unless the child speaks only 2026. A child that
//! speaks both eras is kept in the 2025 era, the one xy serves to clients
//! of both eras as they are; a 2026-only child is never sent `initialize`
//! (some exit on it). A legacy child that does not answer `server/discover`
//! within [`HANDSHAKE_STEP`] gets `initialize` anyway; one that exits on
//! it gets `initialize` first from then on. A state machine over the
//! child's answers: the BridgeActor writes the messages it returns and arms
//! the step timeouts.

use std::time::Duration;

use serde_json::{Value, json};

use super::era::ChildEra;
use xy_core::protocol::mcp::wire::{META_PROTOCOL_VERSION, VERSION_2025, VERSION_2026};

/// After this long without an answer to a handshake step, xy logs a
/// warning (and keeps waiting: a child may be slow to start); a
/// `server/discover` unanswered this long is followed by `initialize`.
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
    /// A child of this server exited on `server/discover` (a legacy
    /// server that dies on a request before `initialize`): later children
    /// get `initialize` first.
    initialize_first: bool,
    /// The steps tried with the current child.
    tried_initialize: bool,
    tried_discover: bool,
    /// A `server/discover` left unanswered for `initialize`: its late
    /// answer still counts.
    late_discover: Option<u64>,
}

impl Default for Handshake {
    fn default() -> Handshake {
        Handshake {
            state: Hs::Detached,
            era: ChildEra::default(),
            initialize_first: false,
            tried_initialize: false,
            tried_discover: false,
            late_discover: None,
        }
    }
}

/// What a `server/discover` answer says about the child.
enum Discovered {
    /// Only the 2026 era: served as it is.
    Only2026(Value, Vec<String>),
    /// 2026 and 2025 (or no 2026 at all, or an error): `initialize` next.
    Not2026Only,
}

fn discovered(own: &Value) -> Discovered {
    let versions: Vec<String> = own
        .pointer("/result/supportedVersions")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    match own.get("result") {
        Some(r)
            if versions.iter().any(|v| v.as_str() >= VERSION_2026)
                && versions.iter().all(|v| v.as_str() >= VERSION_2026) =>
        {
            Discovered::Only2026(r.clone(), versions)
        }
        _ => Discovered::Not2026Only,
    }
}

impl Handshake {
    /// Requests flow to the child.
    pub(crate) fn ready(&self) -> bool {
        self.state == Hs::Ready
    }

    /// The command may have changed: learn its era again.
    pub(crate) fn relearn(&mut self) {
        self.initialize_first = false;
    }

    /// The child went away. One that died on `server/discover` gets
    /// `initialize` first next time.
    pub(crate) fn detached(&mut self) {
        if matches!(self.state, Hs::Discovering(_)) {
            self.initialize_first = true;
        }
        self.state = Hs::Detached;
    }

    /// Whether `id` is the step the handshake waits on.
    pub(crate) fn waits_for(&self, id: u64) -> bool {
        matches!(self.state, Hs::Initializing(i) | Hs::Discovering(i) if i == id)
    }

    /// A new child: its first step, with xy's own request id `id`.
    pub(crate) fn begin(&mut self, id: u64) -> Step {
        self.era = ChildEra::default();
        self.tried_initialize = false;
        self.tried_discover = false;
        self.late_discover = None;
        if self.initialize_first {
            self.initialize(id)
        } else {
            self.discover(id)
        }
    }

    /// Step `id` has had no answer for [`HANDSHAKE_STEP`]: a
    /// `server/discover` is followed by `initialize` (a legacy server may
    /// answer nothing before it); `None`: keep waiting.
    pub(crate) fn on_timeout(&mut self, id: u64, next_id: impl FnOnce() -> u64) -> Option<Step> {
        if self.state != Hs::Discovering(id) || self.tried_initialize {
            return None;
        }
        self.late_discover = Some(id);
        Some(self.initialize(next_id()))
    }

    /// An answer to one of xy's own requests; `None` when it is not the
    /// current step's. `next_id` gives the id of another step, if one is tried.
    pub(crate) fn on_answer(&mut self, own: &Value, next_id: impl FnOnce() -> u64) -> Option<Step> {
        let id = own.get("id").and_then(Value::as_u64);
        match self.state {
            Hs::Initializing(_) if id.is_some() && id == self.late_discover => {
                self.late_discover = None;
                match discovered(own) {
                    // The `initialize` it was sent after will be refused.
                    Discovered::Only2026(r, v) => Some(self.ready_2026(r, v)),
                    Discovered::Not2026Only => None,
                }
            }
            Hs::Initializing(i) if id == Some(i) => {
                if let Some(result) = own.get("result") {
                    let v = result
                        .get("protocolVersion")
                        .and_then(Value::as_str)
                        .unwrap_or(VERSION_2025)
                        .to_owned();
                    self.era.versions = vec![v];
                    self.era.init = Some(result.clone());
                    let notify = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
                    Some(self.done(Some(notify), Ok(())))
                } else {
                    Some(self.next_step(&error_text(own), next_id))
                }
            }
            Hs::Discovering(d) if id == Some(d) => match discovered(own) {
                Discovered::Only2026(r, v) => Some(self.ready_2026(r, v)),
                Discovered::Not2026Only => Some(self.next_step(&error_text(own), next_id)),
            },
            _ => None,
        }
    }

    fn ready_2026(&mut self, result: Value, versions: Vec<String>) -> Step {
        self.era.discover = Some(result);
        self.era.versions = versions;
        self.done(None, Ok(()))
    }

    /// The current step failed or was not enough: try the other era, or give up.
    fn next_step(&mut self, why: &str, next_id: impl FnOnce() -> u64) -> Step {
        if !self.tried_initialize {
            self.initialize(next_id())
        } else if !self.tried_discover {
            self.discover(next_id())
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
                META_PROTOCOL_VERSION: VERSION_2026,
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
                "protocolVersion": VERSION_2025,
                // Every capability a client can have (D112): what the child
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

    fn method(s: &Step) -> &str {
        match s {
            Step::Ask { msg, .. } => msg["method"].as_str().unwrap(),
            Step::Done { .. } => panic!("not a request: {s:?}"),
        }
    }

    const READY: Step = Step::Done {
        notify: None,
        outcome: Ok(()),
    };

    #[test]
    fn a_2026_only_child_is_discovered_and_never_sent_initialize() {
        let mut h = Handshake::default();
        let first = h.begin(1);
        assert_eq!(method(&first), "server/discover");
        let ok = json!({"jsonrpc":"2.0","id":1,"result":{"supportedVersions":[VERSION_2026]}});
        assert_eq!(
            h.on_answer(&ok, || panic!("no second step")).unwrap(),
            READY
        );
        assert!(h.ready() && h.era.discover.is_some() && h.era.init.is_none());
        assert_eq!(h.era.versions, [VERSION_2026]);
    }

    #[test]
    fn a_dual_child_and_a_2025_child_are_initialized_after_discover() {
        for discover in [
            json!({"jsonrpc":"2.0","id":1,"result":{"supportedVersions":[VERSION_2025, VERSION_2026]}}),
            json!({"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}),
            json!({"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"no",
                "data":{"supported":[VERSION_2025]}}}),
        ] {
            let mut h = Handshake::default();
            h.begin(1);
            let next = h.on_answer(&discover, || 2).unwrap();
            assert_eq!((ask_id(&next), method(&next)), (2, "initialize"));
            let init = json!({"jsonrpc":"2.0","id":2,"result":{"protocolVersion":VERSION_2025}});
            let done = h.on_answer(&init, || 3).unwrap();
            assert!(matches!(
                done,
                Step::Done {
                    notify: Some(_),
                    outcome: Ok(())
                }
            ));
            assert!(
                h.era.init.is_some() && h.era.discover.is_none(),
                "{discover}"
            );
        }
    }

    #[test]
    fn an_unanswered_discover_is_followed_by_initialize_and_its_late_answer_counts() {
        let mut h = Handshake::default();
        h.begin(1);
        assert!(h.on_timeout(7, || 2).is_none(), "not the step waited on");
        let next = h.on_timeout(1, || 2).unwrap();
        assert_eq!(method(&next), "initialize");
        assert!(h.on_timeout(2, || 3).is_none(), "initialize is waited for");
        // A slow 2026-only child answers discover, then refuses initialize.
        let ok = json!({"jsonrpc":"2.0","id":1,"result":{"supportedVersions":[VERSION_2026]}});
        assert_eq!(h.on_answer(&ok, || 3).unwrap(), READY);
        let refused = json!({"jsonrpc":"2.0","id":2,"error":{"code":-32600,"message":"no"}});
        assert!(h.on_answer(&refused, || 3).is_none());
        assert!(h.ready() && h.era.discover.is_some());
        // A slow legacy child: its late error is nothing, initialize decides.
        let mut h = Handshake::default();
        h.begin(1);
        h.on_timeout(1, || 2).unwrap();
        let no = json!({"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}});
        assert!(h.on_answer(&no, || 3).is_none());
        let init = json!({"jsonrpc":"2.0","id":2,"result":{"protocolVersion":VERSION_2025}});
        assert!(h.on_answer(&init, || 3).is_some() && h.era.init.is_some());
    }

    #[test]
    fn a_child_that_dies_on_discover_gets_initialize_first_until_relearned() {
        let mut h = Handshake::default();
        h.begin(1);
        h.detached();
        let next = h.begin(2);
        assert_eq!(method(&next), "initialize");
        // It refuses initialize after all: discover is tried.
        let refused = json!({"jsonrpc":"2.0","id":2,"error":{"code":-32600,"message":"no"}});
        let then = h.on_answer(&refused, || 3).unwrap();
        assert_eq!(method(&then), "server/discover");
        h.relearn();
        assert_eq!(method(&h.begin(4)), "server/discover");
        // A child that dies once ready teaches nothing.
        let ok = json!({"jsonrpc":"2.0","id":4,"result":{"supportedVersions":[VERSION_2026]}});
        h.on_answer(&ok, || 5);
        h.detached();
        assert_eq!(method(&h.begin(6)), "server/discover");
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
