//! The `events` stream (SPEC §15): its params and result, the `event` and
//! `event_end` notifications, and the kinds of change they report. One
//! subscription sees state, health, tools and config changes as they happen.

use serde::{Deserialize, Serialize};

use super::{LogEndReason, LogsCancelParams, LogsCancelResult, LogsResult};

/// Params of `events`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsParams {
    /// Only these servers; absent (or `null`) means every server, including
    /// ones a later `reload` adds. An empty list is refused (`-32602`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub names: Option<Vec<String>>,
}

impl EventsParams {
    /// The explicit names asked for, de-duplicated; empty means every server.
    pub fn requested_names(&self) -> Vec<String> {
        super::requested_names(None, self.names.as_deref())
    }
}

/// Result of `events`: `{subscription_id}`; `event` notifications follow.
pub type EventsResult = LogsResult;

/// Params of `events_cancel`: `{subscription_id}`.
pub type EventsCancelParams = LogsCancelParams;

/// Result of `events_cancel`: `{cancelled}`, false for an unknown or
/// finished subscription.
pub type EventsCancelResult = LogsCancelResult;

/// What changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A lifecycle transition; `from`/`to` are [`super::ServerState`] names.
    State,
    /// A health verdict change; `from`/`to` are [`super::HealthState`] names.
    Health,
    /// The tool list changed since the previous spawn; `from`/`to` are the
    /// tool counts (as strings, `null` when unknown), `reason` names the
    /// tools added, removed and changed.
    Tools,
    /// `reload` added, removed or changed the server's config: `from` is
    /// `null`, `to` is `"added"`, `"removed"` or `"changed"`.
    Config,
}

impl EventKind {
    /// Every kind.
    pub const ALL: [EventKind; 4] = [
        EventKind::State,
        EventKind::Health,
        EventKind::Tools,
        EventKind::Config,
    ];

    /// The wire spelling (`"state"`, …).
    pub const fn as_str(self) -> &'static str {
        match self {
            EventKind::State => "state",
            EventKind::Health => "health",
            EventKind::Tools => "tools",
            EventKind::Config => "config",
        }
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What `to` says for a [`EventKind::Config`] event.
pub mod config_change {
    /// A new config file: the server was added and started.
    pub const ADDED: &str = "added";
    /// The config file is gone: the server was stopped and forgotten.
    pub const REMOVED: &str = "removed";
    /// The config changed: the server was stopped and started with it.
    pub const CHANGED: &str = "changed";
}

/// Params of the `event` notification: one change of one server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventNotification {
    /// The stream this event belongs to.
    pub subscription_id: u64,
    /// The server that changed.
    pub name: String,
    /// What kind of change.
    pub kind: EventKind,
    /// When (RFC 3339 UTC, ms); for `state` and `health` the same `ts` as the
    /// matching entry of `status`'s `transitions` / `health_history`.
    pub ts: String,
    /// The value before (see [`EventKind`]); `null` where there is none.
    pub from: Option<String>,
    /// The value after (see [`EventKind`]).
    pub to: Option<String>,
    /// Why, in a few words (`"exited with code 1"`, the probe's finding).
    pub reason: String,
}

/// Why an event stream ended; the same reasons as `log_end`'s. `events`
/// streams end `cancelled`, `lagged` (a subscriber that fell behind) or
/// `shutdown`.
pub type EventEndReason = LogEndReason;

/// Params of the `event_end` notification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventEndNotification {
    /// The stream that ended.
    pub subscription_id: u64,
    /// Why.
    pub reason: EventEndReason,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::de::DeserializeOwned;
    use serde_json::{Value, json};

    fn pin<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(v: &T, want: Value) {
        assert_eq!(serde_json::to_value(v).unwrap(), want, "serialised shape");
        let back: T = serde_json::from_value(want).unwrap();
        assert_eq!(&back, v, "round trip");
    }

    #[test]
    fn events_params() {
        pin(&EventsParams::default(), json!({}));
        pin(
            &EventsParams {
                names: Some(vec!["a".into(), "b".into()]),
            },
            json!({"names": ["a", "b"]}),
        );
        let p: EventsParams = serde_json::from_value(json!({"names": null})).unwrap();
        assert!(p.requested_names().is_empty());
        let p: EventsParams = serde_json::from_value(json!({"names": ["a", "a"]})).unwrap();
        assert_eq!(p.requested_names(), ["a"]);
        assert!(serde_json::from_value::<EventsParams>(json!({"name": "a"})).is_err());
    }

    #[test]
    fn result_and_cancel() {
        pin(
            &EventsResult { subscription_id: 7 },
            json!({"subscription_id": 7}),
        );
        pin(
            &EventsCancelParams { subscription_id: 7 },
            json!({"subscription_id": 7}),
        );
        pin(
            &EventsCancelResult { cancelled: true },
            json!({"cancelled": true}),
        );
    }

    #[test]
    fn event_notification() {
        pin(
            &EventNotification {
                subscription_id: 3,
                name: "insikt".into(),
                kind: EventKind::State,
                ts: "2026-11-30T05:04:54.123Z".into(),
                from: Some("running".into()),
                to: Some("restarting".into()),
                reason: "exited with code 1".into(),
            },
            json!({
                "subscription_id": 3,
                "name": "insikt",
                "kind": "state",
                "ts": "2026-11-30T05:04:54.123Z",
                "from": "running",
                "to": "restarting",
                "reason": "exited with code 1"
            }),
        );
        pin(
            &EventNotification {
                subscription_id: 3,
                name: "new".into(),
                kind: EventKind::Config,
                ts: "2026-11-30T05:04:54.123Z".into(),
                from: None,
                to: Some(config_change::ADDED.into()),
                reason: "reload: new.kdl added".into(),
            },
            json!({
                "subscription_id": 3,
                "name": "new",
                "kind": "config",
                "ts": "2026-11-30T05:04:54.123Z",
                "from": null,
                "to": "added",
                "reason": "reload: new.kdl added"
            }),
        );
        let kinds: Vec<Value> = EventKind::ALL
            .iter()
            .map(|k| serde_json::to_value(k).unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                json!("state"),
                json!("health"),
                json!("tools"),
                json!("config")
            ]
        );
        for k in EventKind::ALL {
            assert_eq!(serde_json::to_value(k).unwrap(), json!(k.as_str()));
        }
    }

    #[test]
    fn event_end() {
        pin(
            &EventEndNotification {
                subscription_id: 3,
                reason: EventEndReason::Lagged,
            },
            json!({"subscription_id": 3, "reason": "lagged"}),
        );
        pin(
            &EventEndNotification {
                subscription_id: 3,
                reason: EventEndReason::Cancelled,
            },
            json!({"subscription_id": 3, "reason": "cancelled"}),
        );
    }
}
