//! The child's notifications to clients: request-scoped ones (progress, log
//! messages) to the request's own stream, broadcast ones (`list_changed`,
//! task news) to every listening stream, and the streams themselves
//! (2025 GET streams, 2026 `subscriptions/listen`).

use serde_json::{Map, Value, json};
use tokio::time::Instant;

use super::{Cause, Outbox, Router};
use crate::mcp::meta::META_SUBSCRIPTION;

/// A stream that receives broadcast notifications.
pub(super) struct Listener {
    /// `None`: a 2025 session's GET stream, messages as they are.
    /// `Some(id)`: a 2026 `subscriptions/listen` stream (the client's request id).
    pub(super) subscription: Option<Value>,
    /// The 2026 filter (`toolsListChanged`, …); `None` takes everything.
    pub(super) filter: Option<Map<String, Value>>,
    /// The 2025 session owning a GET stream.
    pub(super) session: Option<String>,
    pub(super) outbox: Outbox,
}

impl Router {
    /// Registers a broadcast stream; returns its key.
    pub(crate) fn listen(
        &mut self,
        session: Option<String>,
        subscription: Option<Value>,
        filter: Option<Map<String, Value>>,
        outbox: Outbox,
    ) -> u64 {
        self.next_listener += 1;
        self.listeners.insert(
            self.next_listener,
            Listener {
                subscription,
                filter,
                session,
                outbox,
            },
        );
        self.next_listener
    }

    /// Whether `session` has a GET stream open already.
    pub(crate) fn has_stream(&self, session: &str) -> bool {
        self.listeners
            .values()
            .any(|l| l.session.as_deref() == Some(session) && !l.outbox.is_closed())
    }

    /// Ends a session: its GET stream closes, its requests stay in flight
    /// (their answers still reach the open POSTs).
    pub(crate) fn end_session(&mut self, session: &str) {
        self.listeners
            .retain(|_, l| l.session.as_deref() != Some(session));
    }

    pub(super) fn notification(&mut self, method: &str, mut msg: Value) {
        if matches!(method, "notifications/tasks" | "notifications/tasks/status")
            && let Some(p) = msg.get("params")
        {
            self.tasks.seen(p, Instant::now());
        }
        // Progress: back to the request that asked for it, its token restored.
        if method == "notifications/progress" {
            let token = msg
                .pointer("/params/progressToken")
                .and_then(Value::as_str)
                .and_then(|t| self.tokens.get(t))
                .copied();
            if let Some(p) = token.and_then(|id| self.pending.get(&id))
                && let Some((original, _)) = &p.token
            {
                msg["params"]["progressToken"] = original.clone();
                let _ = p.outbox.try_send(msg.into());
            }
            return;
        }
        // A 2026 child's notification on a forwarded `subscriptions/listen`.
        if let Some(sub) = msg
            .pointer(&format!(
                "/params/_meta/{}",
                META_SUBSCRIPTION.replace('/', "~1")
            ))
            .and_then(Value::as_u64)
        {
            if let Some(p) = self.pending.get(&sub) {
                msg["params"]["_meta"][META_SUBSCRIPTION] = p.client_id.clone();
                let _ = p.outbox.try_send(msg.into());
            }
            return;
        }
        // A log message during a request goes on that request's stream
        // (stdio carries no link between the two, so with several in
        // flight the newest one's, as for the child's questions), to the
        // extent its client asked for logs; with none in flight, to the
        // listeners, as before 2026 made logging request-scoped.
        if method == "notifications/message"
            && let Some(Cause::Request(k)) = self.cause(&msg)
        {
            let p = &self.pending[&k];
            let level = msg.pointer("/params/level").and_then(Value::as_str);
            if p.log.passes(level) {
                let _ = p.outbox.try_send(msg.into());
            }
            return;
        }
        // The child cancels one of its requests to a client.
        if method == "notifications/cancelled"
            && let Some(child_id) = msg.pointer("/params/requestId").cloned()
        {
            if let Some((ours, _)) = self.s2c.iter().find(|(_, r)| r.child_id == child_id) {
                let ours = ours.clone();
                self.s2c.remove(&ours);
                msg["params"]["requestId"] = json!(ours);
                self.broadcast(method, &msg);
            }
            return;
        }
        self.broadcast(method, &msg);
    }

    /// Tells every listener that follows task `id` its new state `task`:
    /// 2025 GET streams as `notifications/tasks/status`, 2026 listen
    /// streams whose `taskIds` name it as `notifications/tasks`.
    pub(crate) fn task_news(&mut self, id: &str, task: &Value) {
        self.listeners.retain(|_, l| !l.outbox.is_closed());
        for l in self.listeners.values() {
            let msg = match &l.subscription {
                None => {
                    json!({"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": task})
                }
                Some(sub) => {
                    let follows = l
                        .filter
                        .as_ref()
                        .and_then(|f| f.get("taskIds"))
                        .and_then(Value::as_array)
                        .is_some_and(|ids| ids.iter().any(|i| i == id));
                    if !follows {
                        continue;
                    }
                    let mut params = task.clone();
                    params["_meta"] = json!({META_SUBSCRIPTION: sub});
                    json!({"jsonrpc": "2.0", "method": "notifications/tasks", "params": params})
                }
            };
            let _ = l.outbox.try_send(msg.into());
        }
    }

    /// Fans a notification out to every listener that wants it.
    pub(crate) fn broadcast(&mut self, method: &str, msg: &Value) {
        let key = match method {
            "notifications/tools/list_changed" => Some("toolsListChanged"),
            "notifications/prompts/list_changed" => Some("promptsListChanged"),
            "notifications/resources/list_changed" => Some("resourcesListChanged"),
            _ => None,
        };
        self.listeners.retain(|_, l| !l.outbox.is_closed());
        for l in self.listeners.values() {
            match &l.subscription {
                None => {
                    let _ = l.outbox.try_send(msg.clone().into());
                }
                Some(sub) => {
                    let wanted = match (&l.filter, key) {
                        (None, _) => true,
                        // A task's news, to the streams that follow it.
                        (Some(f), None) if method == "notifications/tasks" => {
                            let id = msg.pointer("/params/taskId");
                            f.get("taskIds")
                                .and_then(Value::as_array)
                                .is_some_and(|ids| id.is_some_and(|id| ids.contains(id)))
                        }
                        (Some(f), Some(k)) => f.get(k).and_then(Value::as_bool) == Some(true),
                        // resources/updated and the rest: only with a
                        // resource subscription, which xy does not forward.
                        (Some(_), None) => false,
                    };
                    if wanted {
                        let mut m = msg.clone();
                        if !m["params"].is_object() {
                            m["params"] = json!({});
                        }
                        if !m["params"]["_meta"].is_object() {
                            m["params"]["_meta"] = json!({});
                        }
                        m["params"]["_meta"][META_SUBSCRIPTION] = sub.clone();
                        let _ = l.outbox.try_send(m.into());
                    }
                }
            }
        }
    }
}
