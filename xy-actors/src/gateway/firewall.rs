//! The firewall on an HTTP server's proxied traffic (SPEC §20): one
//! [`Exchange`] per POST the proxy reads, holding the server's
//! [`Verdicts`] as its snapshot published them. It decides the request
//! (`tools/call` and `prompts/get` of a held-back item are answered here,
//! with the stdio bridge's answer), filters the child's `tools/list` and
//! `prompts/list` results, and records every `tools/call` (its client,
//! duration and outcome) in [`Calls`].
//!
//! A server in mode `off` has only its `tools/call`s read (to record
//! them); a server the snapshot has no verdicts for yet is decided by the
//! default policy, exactly as [`Verdicts`] falls back to its policy for
//! items xy has not listed.

use std::sync::Arc;
use std::time::SystemTime;

use hyper::header::{self, HeaderMap};
use serde_json::Value;
use tokio::sync::Notify;
use tokio::time::Instant;
use xy_core::firewall::{FirewallMode, Kind};
use xy_core::protocol::mcp::CallOutcome;

use crate::calls::Calls;
use crate::mcp::record::{self, CallStart, Recorder};
use crate::mcp::verdicts::{HeldBack, Verdicts, held_back_answer};
use xy_core::protocol::mcp::wire::META_PROTOCOL_VERSION;

/// What the firewall has of one server: its verdicts (`None`: the
/// default policy) and how to ask xy to list it again.
#[derive(Default)]
pub(crate) struct Firewall {
    pub(crate) verdicts: Option<Arc<Verdicts>>,
    pub(crate) relist: Option<Arc<tokio::sync::Notify>>,
    /// Where a denial in a tool result is written (D222).
    pub(crate) log: Option<ServerLog>,
}

/// An HTTP server's log, for what xy learns of it from its answers.
#[derive(Clone)]
pub(crate) struct ServerLog {
    pub(crate) sink: crate::log_router::sink::SharedSink,
    pub(crate) redactor: Option<Arc<crate::log_router::redact::Redactor>>,
}

impl ServerLog {
    /// SPEC §25, D222: a denial an HTTP server reports only in a tool
    /// result's text goes to its log as `xy: a tool result said: …`, as
    /// the stdio bridge does (D193), so `status` explains it.
    fn tool_error(&self, server: &str, answer: &Value) {
        let Ok(bytes) = serde_json::to_vec(answer) else {
            return;
        };
        for l in crate::explain::denials_in_tool_error(&bytes) {
            let l = crate::log_router::redact::scrub(l, self.redactor.as_deref());
            let text = format!("xy: a tool result said: {l}");
            tracing::warn!(server = %server, "{text}");
            crate::log_router::sink::lock(&self.sink)
                .push_note(xy_core::protocol::LogStream::Stderr, &text);
        }
    }
}

/// What the proxy does with one inspected request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Verdict {
    /// Send the request to the child.
    Forward,
    /// Do not send it: answer the client with this JSON-RPC message.
    Answer(Value),
}

/// Whether the firewall reads requests of `method` (and their answers)
/// for a server in `mode`; `recording`: calls are recorded.
pub(crate) fn wanted(mode: FirewallMode, recording: bool, method: &str) -> bool {
    match method {
        "tools/call" => recording || mode != FirewallMode::Off,
        "tools/list"
        | "prompts/list"
        | "prompts/get"
        | "resources/list"
        | "resources/templates/list"
        | "resources/read"
        | "skills/list"
        | "skills/get" => mode != FirewallMode::Off,
        _ => false,
    }
}

/// Whether a call is recorded: a `tools/call`, or a `resources/read` of a
/// skill file or app (SPEC §27).
fn recorded(kind: Kind, method: &str, name: &str) -> bool {
    kind == Kind::Tool || (method == "resources/read" && xy_core::firewall::pins_uri(name))
}

/// One POST to an HTTP server, as the firewall sees it. Dropped with a
/// call still pending (the child's answer was no JSON-RPC, or its stream
/// ended first), the call is recorded as a JSON-RPC error.
pub(crate) struct Exchange {
    server: Arc<str>,
    verdicts: Arc<Verdicts>,
    /// Woken when the child lists what xy's listing does not have.
    relist: Option<Arc<Notify>>,
    log: Option<ServerLog>,
    /// Where its `tools/call` is recorded (`None`: calls are not).
    recorder: Option<Recorder>,
    /// The request's `User-Agent`: the client when `_meta` names none.
    agent: Option<Arc<str>>,
    at: SystemTime,
    arrived: Instant,
    call: Option<CallStart>,
}

impl Exchange {
    /// The exchange for a POST to `server` with these headers.
    pub(crate) fn begin(
        server: &str,
        fw: Firewall,
        calls: Option<&Calls>,
        headers: &HeaderMap,
    ) -> Exchange {
        let verdicts = fw.verdicts.unwrap_or_else(|| {
            Arc::new(Verdicts {
                server: server.to_owned(),
                ..Verdicts::default()
            })
        });
        Exchange {
            server: server.into(),
            verdicts,
            relist: fw.relist,
            log: fw.log,
            recorder: calls.map(|calls| Recorder {
                calls: calls.clone(),
                server: server.into(),
            }),
            agent: headers
                .get(header::USER_AGENT)
                .and_then(|v| v.to_str().ok())
                .map(Into::into),
            at: SystemTime::now(),
            arrived: Instant::now(),
            call: None,
        }
    }

    /// Whether requests of `method` are read (and their answers).
    pub(crate) fn wants(&self, method: &str) -> bool {
        wanted(self.verdicts.policy.mode, self.recorder.is_some(), method)
    }

    /// Decides a request [`Exchange::wants`] took.
    pub(crate) fn request(&mut self, msg: &mut Value) -> Verdict {
        let method = msg.get("method").and_then(Value::as_str).unwrap_or("");
        let kind = match method {
            "tools/call" => Kind::Tool,
            "prompts/get" => Kind::Prompt,
            "resources/read" | "skills/get" => Kind::Resource,
            _ => return Verdict::Forward,
        };
        let name = if kind == Kind::Resource {
            msg.pointer("/params/uri")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        } else {
            record::tool_of(msg).unwrap_or("").to_owned()
        };
        let client = record::meta_client(msg).or_else(|| self.agent.clone());
        if let Err(HeldBack(text)) = self.verdicts.call(kind, &name) {
            tracing::info!(server = %self.server, "{text}");
            if recorded(kind, method, &name) {
                self.call = Some(self.start(name, client));
                self.finish(CallOutcome::HeldBack);
            }
            let id = msg.get("id").cloned().unwrap_or(Value::Null);
            let era2026 = msg
                .pointer("/params/_meta")
                .and_then(|m| m.get(META_PROTOCOL_VERSION))
                .is_some();
            return Verdict::Answer(held_back_answer(kind, &id, &text, era2026));
        }
        if recorded(kind, method, &name) {
            self.call = Some(self.start(name, client));
        }
        Verdict::Forward
    }

    /// The child's answer to the request (of `method`), changed in place.
    /// `false`: `msg` is as it came (only listings are ever filtered), so
    /// the caller forwards the bytes it read rather than writing them anew.
    pub(crate) fn response(&mut self, method: &str, msg: &mut Value) -> bool {
        match method {
            "tools/list" | "prompts/list" => {
                let kind = if method == "tools/list" {
                    Kind::Tool
                } else {
                    Kind::Prompt
                };
                let Some(result) = msg.get_mut("result") else {
                    return false;
                };
                let key = if kind == Kind::Tool {
                    "tools"
                } else {
                    "prompts"
                };
                let changed = result
                    .get(key)
                    .and_then(Value::as_array)
                    .is_some_and(|items| items.iter().any(|i| !self.verdicts.knows(kind, i)));
                if changed && let Some(r) = &self.relist {
                    r.notify_one();
                }
                // The child's bytes go on unless something was held back
                // (SPEC §27: tools' `_meta.ui` byte for byte).
                self.verdicts.filter(kind, result) > 0
            }
            "resources/list" | "resources/templates/list" | "skills/list" => {
                let Some(result) = msg.get_mut("result") else {
                    return false;
                };
                let key = match method {
                    "skills/list" => "skills",
                    "resources/templates/list" => "resourceTemplates",
                    _ => "resources",
                };
                let changed = result
                    .get(key)
                    .and_then(Value::as_array)
                    .is_some_and(|items| {
                        items
                            .iter()
                            .any(|i| !self.verdicts.knows(Kind::Resource, i))
                    });
                if changed && let Some(r) = &self.relist {
                    r.notify_one();
                }
                // The child's bytes go on unless something was held back.
                self.verdicts.filter(Kind::Resource, result) > 0
            }
            "tools/call" | "resources/read" => {
                let outcome = outcome(msg);
                if method == "tools/call"
                    && outcome == CallOutcome::ToolError
                    && let Some(log) = &self.log
                {
                    log.tool_error(&self.server, msg);
                }
                self.finish(outcome);
                false
            }
            _ => false,
        }
    }

    /// The child could not be reached: a pending call is recorded so.
    pub(crate) fn unreachable(&mut self) {
        self.finish(CallOutcome::ChildGone);
    }

    fn start(&self, tool: String, client: Option<Arc<str>>) -> CallStart {
        CallStart {
            tool,
            client,
            at: self.at,
            arrived: self.arrived,
        }
    }

    /// The one place this exchange's call is recorded (at most once).
    fn finish(&mut self, outcome: CallOutcome) {
        if let (Some(call), Some(r)) = (self.call.take(), &self.recorder) {
            r.finish(&call, outcome);
        }
    }
}

impl Drop for Exchange {
    fn drop(&mut self) {
        self.finish(CallOutcome::RpcError);
    }
}

/// How a `tools/call` answer ended.
fn outcome(msg: &Value) -> CallOutcome {
    if msg.get("error").is_some() {
        return CallOutcome::RpcError;
    }
    match msg.pointer("/result/isError") {
        Some(Value::Bool(true)) => CallOutcome::ToolError,
        _ => CallOutcome::Ok,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use xy_core::firewall::Policy;

    fn exchange(mode: FirewallMode, calls: &Calls) -> Exchange {
        let v = Verdicts {
            server: "web".into(),
            policy: Policy {
                mode,
                seen: true,
                ..Policy::default()
            },
            ..Verdicts::default()
        };
        let mut h = HeaderMap::new();
        h.insert(header::USER_AGENT, "agent/1".parse().unwrap());
        let fw = Firewall {
            verdicts: Some(Arc::new(v)),
            relist: Some(Arc::new(Notify::new())),
            log: None,
        };
        Exchange::begin("web", fw, Some(calls), &h)
    }

    fn last(
        feed: &mut tokio::sync::broadcast::Receiver<Arc<crate::calls::LiveCall>>,
    ) -> (Option<String>, String, CallOutcome) {
        let c = feed.try_recv().expect("a record");
        let r = &c.record;
        (r.client.clone(), r.tool.clone(), r.outcome)
    }

    #[test]
    fn an_unlisted_tool_is_refused_with_the_bridges_answer_and_recorded() {
        let calls = Calls::new(None);
        let mut feed = calls.subscribe();
        let mut ex = exchange(FirewallMode::Pin, &calls);
        assert!(ex.wants("tools/call") && ex.wants("tools/list") && !ex.wants("ping"));
        let mut msg = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "new", "_meta": {META_PROTOCOL_VERSION: "2026-07-28"}}});
        let Verdict::Answer(a) = ex.request(&mut msg) else {
            panic!("held back");
        };
        assert_eq!(a["id"], 7);
        assert_eq!(a["result"]["isError"], true);
        assert_eq!(a["result"]["resultType"], "complete");
        let text = a["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("xyctl tools approve web new"), "{text}");
        assert_eq!(
            last(&mut feed),
            (Some("agent/1".into()), "new".into(), CallOutcome::HeldBack)
        );
        let mut get = json!({"id": 8, "method": "prompts/get", "params": {"name": "p"}});
        let Verdict::Answer(e) = ex.request(&mut get) else {
            panic!("held back");
        };
        assert_eq!(e["error"]["data"]["heldBack"], true);
    }

    #[test]
    fn mode_off_reads_only_calls_and_records_each_outcome() {
        let calls = Calls::new(None);
        let mut feed = calls.subscribe();
        let mut ex = exchange(FirewallMode::Off, &calls);
        assert!(ex.wants("tools/call") && !ex.wants("tools/list"));
        for (answer, want) in [
            (json!({"id": 1, "result": {"content": []}}), CallOutcome::Ok),
            (
                json!({"id": 1, "result": {"isError": true}}),
                CallOutcome::ToolError,
            ),
            (
                json!({"id": 1, "error": {"code": -1, "message": "x"}}),
                CallOutcome::RpcError,
            ),
        ] {
            let mut msg = json!({"id": 1, "method": "tools/call", "params": {"name": "t",
                "_meta": {"io.modelcontextprotocol/clientInfo": {"name": "cli", "version": "2"}}}});
            assert_eq!(ex.request(&mut msg), Verdict::Forward);
            let mut a = answer;
            ex.response("tools/call", &mut a);
            assert_eq!(last(&mut feed), (Some("cli 2".into()), "t".into(), want));
        }
        let mut msg = json!({"id": 2, "method": "tools/call", "params": {"name": "gone"}});
        ex.request(&mut msg);
        ex.unreachable();
        assert_eq!(
            last(&mut feed),
            (
                Some("agent/1".into()),
                "gone".into(),
                CallOutcome::ChildGone
            )
        );
        let mut msg = json!({"id": 3, "method": "tools/call", "params": {"name": "cut"}});
        ex.request(&mut msg);
        drop(ex);
        assert_eq!(last(&mut feed).2, CallOutcome::RpcError);
    }

    #[test]
    fn a_listing_loses_what_is_held_back() {
        let calls = Calls::new(None);
        let mut ex = exchange(FirewallMode::Review, &calls);
        let relist = Arc::clone(ex.relist.as_ref().unwrap());
        let mut a = json!({"id": 1, "result": {"tools": [{"name": "x"}], "nextCursor": "c"}});
        ex.response("tools/list", &mut a);
        assert_eq!(a["result"]["tools"], json!([]));
        assert_eq!(a["result"]["nextCursor"], "c");
        // An item xy's listing does not have asks for a new listing.
        let woken = relist.notified();
        tokio::pin!(woken);
        assert!(woken.as_mut().enable(), "relist was not asked for");
    }
}
