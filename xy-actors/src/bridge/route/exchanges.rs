//! The MRTR side of the routing tables (SPEC §19): how a child's questions
//! reach a client that cannot be asked directly. A 2026 client's request to
//! a 2025 child waits here for the client's retry (its questions sealed
//! into `requestState`); a 2026 child's `InputRequiredResult` to a 2025
//! client is relayed as server-to-client requests and retried with the
//! answers. Bounded: at most `mrtr::MAX_WAITING` exchanges, each for
//! `mrtr::TTL`.

use serde_json::{Map, Value, json};
use tokio::time::Instant;
use xy_core::protocol::mcp::CallOutcome;

use super::{ChildAction, Outbox, Pending, Router, ServerRequest, cancelled, error};
use crate::bridge::mrtr::{self, Ask, Refused};
use crate::mcp::meta::unguessable;

/// How the child's requests to a client (elicitation, sampling, roots)
/// reach the client of a forwarded request (SPEC §19).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Asks {
    /// As server-to-client requests on the request's stream (both sides
    /// speak the 2025 era).
    Direct,
    /// A 2026 client, a 2025 child, a request that may take input: the
    /// client gets an `InputRequiredResult`, its retry's answers go to the
    /// child (MRTR).
    Mrtr(Box<MrtrCall>),
    /// A 2026 client and a request that takes no input: refused to the child.
    Refuse,
    /// A 2025 client, a 2026 child: the child's `InputRequiredResult`
    /// becomes server-to-client requests, their answers its retry. Holds
    /// the request as the child got it (retried with a fresh id).
    Relay(Box<Value>),
}

/// A client request carried over MRTR rounds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MrtrCall {
    /// Its method and name (a retry must name the same).
    pub(crate) method: String,
    pub(crate) name: Option<String>,
    /// Its exchange id and last round, once it has had one.
    pub(super) exchange: Option<(String, u32)>,
}

impl MrtrCall {
    pub(crate) fn new(method: &str, name: Option<String>) -> MrtrCall {
        MrtrCall {
            method: method.to_owned(),
            name,
            exchange: None,
        }
    }
}

/// A client request whose child asked its client something: waits, out of
/// the pending table (its response went out), for the client's retry.
pub(super) struct Waiting {
    pub(super) pending: Pending,
    /// The child-side id of the request.
    pub(super) child_req: u64,
    /// The round whose `requestState` is good (once).
    pub(super) round: u32,
    /// The child's questions not answered yet.
    pub(super) asks: Vec<Ask>,
    /// The child's answer to the request, if it came meanwhile: what the
    /// retry gets.
    pub(super) done: Option<Value>,
    pub(super) deadline: Instant,
    pub(super) bytes: usize,
}

/// A 2026 child's `InputRequiredResult` being asked of a 2025 client.
pub(super) struct Relay {
    pub(super) pending: Pending,
    /// The request as the child got it.
    pub(super) request: Value,
    pub(super) state: Option<Value>,
    pub(super) answers: Map<String, Value>,
    /// Keys not answered yet.
    pub(super) open: usize,
    pub(super) deadline: Instant,
}

impl Router {
    /// A 2025 client's answer to input request `key` of the relay of the
    /// child's request `n`: once every one is answered, the retry for the
    /// child.
    pub(super) fn relay_answer(&mut self, n: u64, key: String, msg: &Value) -> Option<Value> {
        let r = self.relays.get_mut(&n)?;
        match msg.get("result") {
            Some(result) => {
                if r.answers.insert(key, result.clone()).is_none() {
                    r.open = r.open.saturating_sub(1);
                }
                if r.open > 0 {
                    return None;
                }
                let r = self.relays.remove(&n)?;
                Some(self.relay_retry(n, r))
            }
            None => {
                // The client refused: so does its request.
                let r = self.relays.remove(&n)?;
                self.s2c
                    .retain(|_, q| q.relay.as_ref().is_none_or(|(m, _)| *m != n));
                let e = msg
                    .get("error")
                    .cloned()
                    .unwrap_or_else(|| json!({"code": -32603, "message": "no answer"}));
                self.ended(&r.pending, CallOutcome::RpcError);
                let _ = r.pending.outbox.try_send(
                    json!({"jsonrpc": "2.0", "id": r.pending.client_id, "error": e}).into(),
                );
                None
            }
        }
    }

    /// The retry of relayed request `n` with its client's answers, under a
    /// fresh child-side id (MRTR: the retry is another request).
    pub(super) fn relay_retry(&mut self, n: u64, r: Relay) -> Value {
        let id = self.own_id();
        let mut msg = r.request;
        msg["id"] = json!(id);
        if !msg["params"].is_object() {
            msg["params"] = json!({});
        }
        let params = &mut msg["params"];
        params["inputResponses"] = Value::Object(r.answers);
        match r.state {
            Some(st) => params["requestState"] = st,
            None => {
                if let Some(o) = params.as_object_mut() {
                    o.remove("requestState");
                }
            }
        }
        for t in self.tokens.values_mut() {
            if *t == n {
                *t = id;
            }
        }
        let mut pending = r.pending;
        pending.asks = Asks::Relay(Box::new(msg.clone()));
        self.pending.insert(id, pending);
        msg
    }

    /// The child answered relayed request `n` with an `InputRequiredResult`:
    /// its input requests go to the 2025 client as server-to-client
    /// requests on the request's stream.
    pub(super) fn relay(&mut self, n: u64, p: Pending, msg: Value) -> ChildAction {
        let Asks::Relay(request) = &p.asks else {
            return ChildAction::Nothing;
        };
        let request = (**request).clone();
        let result = &msg["result"];
        let requests = result
            .get("inputRequests")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let state = result.get("requestState").cloned();
        for r in requests.values() {
            let method = r.get("method").and_then(Value::as_str).unwrap_or("");
            let need = p
                .caps
                .as_ref()
                .and_then(|c| mrtr::missing(method, r.get("params"), c));
            if let Some(need) = need {
                self.ended(&p, CallOutcome::RpcError);
                let m =
                    format!("xy: the server asked for {method}, which this client did not declare");
                let e = error(
                    &p.client_id,
                    -32603,
                    &m,
                    Some(json!({"requiredCapabilities": need})),
                );
                let _ = p.outbox.try_send(e.into());
                return ChildAction::Nothing;
            }
        }
        let relay = Relay {
            open: requests.len(),
            pending: p,
            request,
            state,
            answers: Map::new(),
            deadline: Instant::now() + mrtr::TTL,
        };
        if requests.is_empty() {
            // Only a state: retry at once.
            return ChildAction::ToChild(vec![self.relay_retry(n, relay)]);
        }
        // As many relays wait at most as exchanges do; the oldest goes.
        while self.relays.len() >= mrtr::MAX_WAITING {
            let Some(oldest) = self
                .relays
                .iter()
                .min_by_key(|(_, r)| r.deadline)
                .map(|(m, _)| *m)
            else {
                break;
            };
            if let Some(r) = self.relays.remove(&oldest) {
                self.s2c
                    .retain(|_, q| q.relay.as_ref().is_none_or(|(m, _)| *m != oldest));
                self.ended(&r.pending, CallOutcome::RpcError);
                let m =
                    "xy: too many requests wait for their clients' answers; the oldest was dropped";
                let _ = r
                    .pending
                    .outbox
                    .try_send(error(&r.pending.client_id, -32603, m, None).into());
            }
        }
        for (key, r) in requests {
            let ours = format!("xy-s2c-{}", unguessable());
            let method = r.get("method").cloned().unwrap_or(Value::Null);
            let mut ask = json!({"jsonrpc": "2.0", "id": ours, "method": method});
            if let Some(params) = r.get("params") {
                ask["params"] = params.clone();
            }
            self.s2c.insert(
                ours,
                ServerRequest {
                    child_id: Value::Null,
                    session: relay.pending.session.clone(),
                    relay: Some((n, key)),
                },
            );
            // A client whose queue has no room for the question would never
            // answer it: its request fails now, with the reason, rather
            // than wait out the relay's TTL (SPEC §24, D165–D167, D213).
            if relay.pending.outbox.try_send(ask.into()).is_err() {
                self.s2c
                    .retain(|_, q| q.relay.as_ref().is_none_or(|(m, _)| *m != n));
                self.ended(&relay.pending, CallOutcome::RpcError);
                let m = format!(
                    "xy: the client is not reading its stream; the server's {} was not sent, \
                     so the request cannot go on",
                    method.as_str().unwrap_or("request")
                );
                let _ = relay
                    .pending
                    .outbox
                    .try_send(error(&relay.pending.client_id, -32603, &m, None).into());
                return ChildAction::Nothing;
            }
        }
        self.relays.insert(n, relay);
        ChildAction::Nothing
    }

    /// The child asked forwarded request `k`'s client for something it did
    /// not declare (`need`): refused on the client's behalf. A 2026 client's
    /// request fails with -32021 and the child's is cancelled; a 2025
    /// client's child gets an error, as such a client would answer. For
    /// `roots/list` only the child is told no at first: servers also ask
    /// for roots on their own (`server-everything` 350 ms after its
    /// handshake), so the request in flight may not be the cause. A 2026
    /// call it was asked during is marked, and fails with `-32021` if it
    /// then fails (SPEC §24); if it succeeds, the roots were not its need.
    pub(super) fn lacks(
        &mut self,
        k: u64,
        method: &str,
        need: Value,
        refuse: impl Fn(i64, String, Option<Value>) -> Value,
    ) -> ChildAction {
        let data = json!({"requiredCapabilities": need});
        let what = need
            .as_object()
            .and_then(|o| o.keys().next())
            .cloned()
            .unwrap_or_default();
        let m = format!("xy: the client did not declare the {what} capability {method} needs");
        let mut out = vec![refuse(-32601, m, Some(data.clone()))];
        if method == "roots/list" {
            if let Some(p) = self.pending.get_mut(&k)
                && matches!(p.asks, Asks::Mrtr(_))
            {
                p.lacked = Some(data);
            }
            return ChildAction::ToChild(out);
        }
        let mrtr = self
            .pending
            .get(&k)
            .is_some_and(|p| matches!(p.asks, Asks::Mrtr(_) | Asks::Refuse));
        if !mrtr {
            return ChildAction::ToChild(out);
        }
        let Some(p) = self.pending.remove(&k) else {
            return ChildAction::ToChild(out);
        };
        if let Some((_, ours)) = &p.token {
            self.tokens.remove(ours);
        }
        self.ended(&p, CallOutcome::RpcError);
        let text =
            format!("Missing required client capability: the server asked for {what} ({method})");
        let _ = p
            .outbox
            .try_send(error(&p.client_id, mrtr::MISSING_CAPABILITY, &text, Some(data)).into());
        for a in self.gathering.remove(&k).unwrap_or_default() {
            out.push(error(
                &a.child_id,
                -32603,
                "xy: the client's request ended",
                None,
            ));
        }
        out.push(cancelled(
            k,
            "xy: the client lacks a capability the request needs",
        ));
        ChildAction::ToChild(out)
    }

    /// The child asks more of a client whose request waits for its retry
    /// (the question missed the round's gathering): it joins the waiting
    /// questions, and the retry, which cannot answer it, asks it in the
    /// next round.
    pub(super) fn ask_later(
        &mut self,
        x: &str,
        method: &str,
        msg: Value,
        child_id: Value,
        refuse: impl Fn(i64, String, Option<Value>) -> Value,
    ) -> ChildAction {
        let Some(w) = self.waiting.get_mut(x) else {
            return ChildAction::Nothing;
        };
        if !mrtr::is_input_request(method) {
            let m = format!(
                "xy: the client speaks the 2026 era, which has no server-to-client {method}"
            );
            return ChildAction::ToChild(vec![refuse(-32601, m, None)]);
        }
        if let Some(need) = w
            .pending
            .caps
            .as_ref()
            .and_then(|c| mrtr::missing(method, msg.get("params"), c))
        {
            let data = json!({"requiredCapabilities": need});
            let m = format!("xy: the client did not declare the capability {method} needs");
            return ChildAction::ToChild(vec![refuse(-32601, m, Some(data))]);
        }
        let ask = Ask::new(&msg, method, child_id, |key| {
            w.asks.iter().any(|a| a.key == key)
        });
        w.bytes += ask.bytes;
        w.asks.push(ask);
        ChildAction::ToChild(self.bound_waiting())
    }

    /// The questions gathered for forwarded request `k` go to its 2026
    /// client as an `InputRequiredResult`; the request waits for the
    /// retry. Returns messages for the child (errors, when the client or
    /// room is gone).
    pub(crate) fn ask(&mut self, k: u64, now: Instant) -> Vec<Value> {
        let asks = self.gathering.remove(&k).unwrap_or_default();
        if asks.is_empty() {
            return Vec::new();
        }
        let Some(mut p) = self.pending.remove(&k) else {
            return asks
                .iter()
                .map(|a| error(&a.child_id, -32603, "xy: the client's request ended", None))
                .collect();
        };
        let Asks::Mrtr(call) = &mut p.asks else {
            self.pending.insert(k, p);
            return Vec::new();
        };
        let (xid, round) = match &call.exchange {
            Some((x, r)) => (x.clone(), r + 1),
            None => (unguessable(), 1),
        };
        call.exchange = Some((xid.clone(), round));
        let state = self.seal.seal(&xid, round, mrtr::unix_after(mrtr::TTL));
        let answer = json!({"jsonrpc": "2.0", "id": p.client_id, "result": mrtr::input_required(&asks, &state)});
        let _ = p.outbox.try_send(answer.into());
        let bytes = asks.iter().map(|a| a.bytes).sum();
        self.waiting.insert(
            xid,
            Waiting {
                pending: p,
                child_req: k,
                round,
                asks,
                done: None,
                deadline: now + mrtr::TTL,
                bytes,
            },
        );
        self.bound_waiting()
    }

    /// Past [`mrtr::MAX_WAITING`] exchanges or [`mrtr::MAX_WAITING_BYTES`],
    /// the oldest go.
    pub(super) fn bound_waiting(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        loop {
            let bytes: usize = self.waiting.values().map(|w| w.bytes).sum();
            if self.waiting.len() <= mrtr::MAX_WAITING && bytes <= mrtr::MAX_WAITING_BYTES {
                return out;
            }
            let Some(oldest) = self
                .waiting
                .iter()
                .min_by_key(|(_, w)| w.deadline)
                .map(|(x, _)| x.clone())
            else {
                return out;
            };
            if let Some(w) = self.waiting.remove(&oldest) {
                out.extend(self.drop_waiting(
                    w,
                    "xy: too many requests wait for their clients' answers; the oldest was dropped",
                ));
            }
        }
    }

    /// A waiting exchange is given up: the child's questions get `why` as
    /// an error, its request is cancelled.
    pub(super) fn drop_waiting(&mut self, w: Waiting, why: &str) -> Vec<Value> {
        let mut out: Vec<Value> = w
            .asks
            .iter()
            .map(|a| error(&a.child_id, -32603, why, None))
            .collect();
        if w.done.is_none() {
            out.push(cancelled(w.child_req, why));
        }
        if let Some((_, ours)) = &w.pending.token {
            self.tokens.remove(ours);
        }
        self.ended(&w.pending, CallOutcome::RpcError);
        out
    }

    /// Gives up what waited for a client past its deadline. Returns
    /// messages for the child.
    pub(crate) fn expire_waiting(&mut self, now: Instant) -> Vec<Value> {
        let late: Vec<String> = self
            .waiting
            .iter()
            .filter(|(_, w)| now >= w.deadline)
            .map(|(x, _)| x.clone())
            .collect();
        let mut out = Vec::new();
        let why = format!(
            "xy: the client did not answer within {}",
            humantime::format_duration(mrtr::TTL)
        );
        for x in late {
            if let Some(w) = self.waiting.remove(&x) {
                out.extend(self.drop_waiting(w, &why));
            }
        }
        let late: Vec<u64> = self
            .relays
            .iter()
            .filter(|(_, r)| now >= r.deadline || r.pending.outbox.is_closed())
            .map(|(n, _)| *n)
            .collect();
        for n in late {
            if let Some(r) = self.relays.remove(&n) {
                self.s2c
                    .retain(|_, q| q.relay.as_ref().is_none_or(|(m, _)| *m != n));
                self.ended(&r.pending, CallOutcome::RpcError);
                let _ = r
                    .pending
                    .outbox
                    .try_send(error(&r.pending.client_id, -32603, &why, None).into());
            }
        }
        out
    }

    /// A 2026 client's retry carrying a `requestState` xy issued: the
    /// answers in its `inputResponses` go to the child's waiting questions
    /// (returned, for the child), and the request carries on with this
    /// retry as its client request. A refused state: the JSON-RPC error
    /// code and message for the client.
    pub(crate) fn retry(
        &mut self,
        msg: &Value,
        client_id: Value,
        outbox: Outbox,
        now: Instant,
    ) -> Result<Vec<Value>, (i64, &'static str)> {
        let refused = |r: Refused| (mrtr::BAD_STATE, r.message());
        let state = msg
            .pointer("/params/requestState")
            .and_then(Value::as_str)
            .ok_or(refused(Refused::Forged))?;
        let (xid, round) = self.seal.open(state, mrtr::unix_now()).map_err(refused)?;
        let w = self.waiting.get(&xid).ok_or(refused(Refused::Used))?;
        if w.round != round {
            return Err(refused(Refused::Used));
        }
        let Asks::Mrtr(call) = &w.pending.asks else {
            return Err(refused(Refused::Used));
        };
        if msg.get("method").and_then(Value::as_str) != Some(call.method.as_str())
            || mrtr::request_name(msg) != call.name
        {
            return Err(refused(Refused::Elsewhere));
        }
        let Some(mut w) = self.waiting.remove(&xid) else {
            return Err(refused(Refused::Used));
        };
        let responses = msg
            .pointer("/params/inputResponses")
            .and_then(Value::as_object);
        let mut to_child = Vec::new();
        let mut left = Vec::new();
        for a in std::mem::take(&mut w.asks) {
            match responses.and_then(|r| r.get(&a.key)) {
                Some(v) => to_child.push(json!({"jsonrpc": "2.0", "id": a.child_id, "result": v})),
                None => left.push(a),
            }
        }
        w.pending.client_id = client_id;
        w.pending.outbox = outbox;
        if let Some(done) = w.done.take() {
            self.finish(w.pending, done);
            return Ok(to_child);
        }
        if !left.is_empty() {
            // What is still missing is asked again (the MRTR spec prefers
            // that to an error), in the next round.
            let round = round + 1;
            if let Asks::Mrtr(call) = &mut w.pending.asks {
                call.exchange = Some((xid.clone(), round));
            }
            let state = self.seal.seal(&xid, round, mrtr::unix_after(mrtr::TTL));
            let answer = json!({"jsonrpc": "2.0", "id": w.pending.client_id, "result": mrtr::input_required(&left, &state)});
            let _ = w.pending.outbox.try_send(answer.into());
            w.round = round;
            w.bytes = left.iter().map(|a| a.bytes).sum();
            w.asks = left;
            w.deadline = now + mrtr::TTL;
            self.waiting.insert(xid, w);
            return Ok(to_child);
        }
        if let Asks::Mrtr(call) = &mut w.pending.asks {
            call.exchange = Some((xid, round));
        }
        self.pending.insert(w.child_req, w.pending);
        Ok(to_child)
    }
}
