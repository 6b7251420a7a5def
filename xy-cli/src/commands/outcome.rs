//! Honest outcomes (SPEC §25, D190): after `add`, `import`, `start` and
//! `restart`, xyctl waits (bounded by `--wait`) until each server has
//! listed its tools for this spawn or failed, and says which — `running,
//! N tools (M held back)`, or the failure with `status`'s explanation —
//! never `running` for a server that is crash-looping. It follows the
//! daemon's `events` stream for the servers and reads their `status` (and
//! `tools`, for when the listing was made) at each event, and at a short
//! tick as well: a listing equal to the previous spawn's sends no event.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use xy_core::client::{Client, ClientError};
use xy_core::protocol::{
    EventsResult, NameParams, ServerState, StatusResult,
    mcp::{ToolsParams, ToolsResult},
    method,
};

use crate::ctx::READ_TIMEOUT;
use crate::error::{Exit, Failure};
use crate::render::{Paint, Style};

/// Longest sleep between two looks without an event.
const TICK: Duration = Duration::from_millis(250);
/// How long a spawn must have lived before its listing counts as
/// `running` (the daemon's "exited immediately" span): a server that
/// lists its tools and then dies at once is crash-looping, not running
/// (SPEC §25, D324). A wait that ends sooner says what was listed.
const SETTLE_SECS: u64 = 3;

/// What one server came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// It listed its tools for this spawn; `note`: what `status` says
    /// went wrong meanwhile (a sandbox denial and its fix).
    Listed {
        tools: u32,
        held: u32,
        note: Option<String>,
    },
    /// It runs, but xy could not list its tools (`why`), or had not yet
    /// when the wait ended (`None`).
    NotListed { why: Option<String> },
    /// It failed, or is backing off after exiting (crash-looping): `why`
    /// is `status`'s explanation.
    Failed { state: ServerState, why: String },
    /// A state with nothing to wait for (`stopped`, `idle`, …), or one the
    /// wait ended in (`starting`).
    State(ServerState),
}

impl Outcome {
    /// The words after the name: `running, 3 tools (0 held back)`.
    pub(crate) fn words(&self, name: &str, waited: Duration) -> String {
        match self {
            Outcome::Listed { tools, held, note } => {
                // SPEC §25's words exactly, whatever the counts (D320):
                // scripts match `running, N tools (M held back)`.
                let review = if *held > 0 {
                    format!("; review them: xyctl tools review {name}")
                } else {
                    String::new()
                };
                let note = note
                    .as_ref()
                    .map(|n| format!("; but {n}"))
                    .unwrap_or_default();
                format!("running, {tools} tools ({held} held back){review}{note}")
            }
            Outcome::NotListed { why: Some(why) } => {
                format!("running, but xy could not list its tools: {why}")
            }
            Outcome::NotListed { why: None } => format!(
                "running, tools not listed within {}s (xy keeps asking; see `xyctl status {name}`)",
                waited.as_secs()
            ),
            Outcome::Failed { state, why } => {
                let what = if *state == ServerState::Restarting {
                    "crash-looping"
                } else {
                    "failed"
                };
                format!("{what}: {why} (see `xyctl status {name}` and `xyctl logs {name}`)")
            }
            Outcome::State(ServerState::Idle) => "idle (starts at its first request)".to_owned(),
            Outcome::State(s) => s.as_str().to_owned(),
        }
    }

    /// The colour of [`Outcome::words`].
    pub(crate) fn paint(&self) -> Paint {
        match self {
            Outcome::Listed {
                held: 0,
                note: None,
                ..
            } => Paint::Green,
            Outcome::Listed { .. } | Outcome::NotListed { .. } => Paint::Yellow,
            Outcome::Failed { .. } => Paint::Red,
            Outcome::State(_) => Paint::Dim,
        }
    }

    /// A failure: the command exits 1.
    pub(crate) fn failed(&self) -> bool {
        matches!(self, Outcome::Failed { .. })
    }
}

/// `name: running, 3 tools (0 held back)`, one line.
pub(crate) fn line(name: &str, o: &Outcome, waited: Duration, style: &Style) -> String {
    format!(
        "{name}: {}\n",
        style.paint(&o.words(name, waited), o.paint())
    )
}

/// When the current spawn began: the newest transition into `starting`.
fn spawned_at(st: &StatusResult) -> Option<&str> {
    st.transitions
        .iter()
        .rev()
        .find(|t| t.to == ServerState::Starting)
        .map(|t| t.ts.as_str())
}

/// The outcome `st` (and, for a running server, `listed_at` of its
/// newest tool snapshot with that snapshot's size) already shows, if final.
pub(crate) fn decide(st: &StatusResult, listed: Option<(&str, u32)>) -> Option<Outcome> {
    match st.entry.state {
        ServerState::Failed | ServerState::Restarting => Some(Outcome::Failed {
            state: st.entry.state,
            why: st.explain.clone().unwrap_or_else(|| describe_last_exit(st)),
        }),
        ServerState::Running => {
            // RFC 3339 with milliseconds, both from xyd's clock: the text
            // order is the time order.
            let this_spawn = match (listed, spawned_at(st)) {
                (Some((at, _)), Some(spawn)) => at >= spawn,
                (Some(_), None) => true,
                (None, _) => false,
            };
            if this_spawn && let Some((_, tools)) = listed {
                return Some(Outcome::Listed {
                    tools,
                    held: st.entry.tools_held,
                    note: st.explain.clone(),
                });
            }
            // Any other `explain` of a running server (a denial) is said
            // with its listing.
            st.explain
                .as_ref()
                .and_then(|why| why.strip_prefix("xy could not list its tools: "))
                .map(|why| Outcome::NotListed {
                    why: Some(why.to_owned()),
                })
        }
        ServerState::Starting => None,
        s @ (ServerState::Stopped | ServerState::Stopping | ServerState::Idle) => {
            Some(Outcome::State(s))
        }
    }
}

fn describe_last_exit(st: &StatusResult) -> String {
    st.entry.last_exit.as_ref().map_or_else(
        || "no reason recorded".to_owned(),
        |e| xy_core::protocol::describe_exit(e.code, e.signal.as_deref()),
    )
}

/// Waits up to `within` for each of `names`; returns every name with its
/// outcome (and its last `status`), in the order given.
pub(crate) fn wait(
    c: &mut Client,
    names: &[String],
    within: Duration,
) -> Result<Vec<(String, Outcome, Option<StatusResult>)>, Failure> {
    let deadline = Instant::now() + within;
    let mut done: BTreeMap<String, (Outcome, Option<StatusResult>)> = BTreeMap::new();
    let mut last: BTreeMap<String, StatusResult> = BTreeMap::new();
    // Listed, but the spawn is younger than SETTLE_SECS: said if the wait
    // ends before it settles.
    let mut young: BTreeMap<String, (Outcome, StatusResult)> = BTreeMap::new();
    let sub: Option<EventsResult> = if within.is_zero() || names.is_empty() {
        None
    } else {
        c.call(
            method::EVENTS,
            Some(&xy_core::protocol::EventsParams {
                names: Some(names.to_vec()),
            }),
            READ_TIMEOUT,
        )
        .ok()
    };
    loop {
        for name in names {
            if done.contains_key(name) {
                continue;
            }
            let st = status(c, name)?;
            let listed = if st.entry.state == ServerState::Running {
                tools_listed(c, name)?
            } else {
                None
            };
            let found = decide(&st, listed.as_ref().map(|(ts, n)| (ts.as_str(), *n)));
            let settled = st.entry.uptime_secs.is_none_or(|u| u >= SETTLE_SECS);
            match found {
                Some(o @ Outcome::Listed { .. }) if !settled && !within.is_zero() => {
                    young.insert(name.clone(), (o, st));
                }
                Some(o) => {
                    young.remove(name);
                    done.insert(name.clone(), (o, Some(st)));
                }
                None if within.is_zero() => {
                    done.insert(name.clone(), (Outcome::State(st.entry.state), Some(st)));
                }
                None => {
                    young.remove(name);
                    last.insert(name.clone(), st);
                }
            }
        }
        if done.len() == names.len() {
            break;
        }
        let now = Instant::now();
        if now >= deadline {
            for name in names {
                if done.contains_key(name) {
                    continue;
                }
                if let Some((o, st)) = young.remove(name) {
                    done.insert(name.clone(), (o, Some(st)));
                    continue;
                }
                let st = last.remove(name);
                let o = match st.as_ref().map(|s| s.entry.state) {
                    Some(ServerState::Running) => Outcome::NotListed { why: None },
                    Some(s) => Outcome::State(s),
                    None => Outcome::State(ServerState::Starting),
                };
                done.insert(name.clone(), (o, st));
            }
            break;
        }
        // An event (a state change, a listing) ends the nap early; a
        // crash is seen at its `restarting` event, before the backoff ends.
        if let Some(sub) = &sub {
            // Any event of ours, or the tick, means: look again.
            match c.next_notification(Some(deadline.min(now + TICK))) {
                Ok(_) | Err(ClientError::Timeout { .. }) => {}
                Err(e) => return Err(e.into()),
            }
            let _ = sub;
        } else {
            std::thread::sleep(TICK.min(deadline.saturating_duration_since(now)));
        }
    }
    if let Some(sub) = sub {
        let _ = c.call::<_, serde_json::Value>(
            method::EVENTS_CANCEL,
            Some(&xy_core::protocol::EventsCancelParams {
                subscription_id: sub.subscription_id,
            }),
            READ_TIMEOUT,
        );
    }
    Ok(names
        .iter()
        .map(|n| {
            let (o, st) = done.remove(n).expect("every name decided");
            (n.clone(), o, st)
        })
        .collect())
}

fn status(c: &mut Client, name: &str) -> Result<StatusResult, Failure> {
    c.call(
        method::STATUS,
        Some(&NameParams {
            name: name.to_owned(),
        }),
        READ_TIMEOUT,
    )
    .map_err(Failure::from)
}

/// When xy last listed `name`'s tools, and how many there were.
fn tools_listed(c: &mut Client, name: &str) -> Result<Option<(String, u32)>, Failure> {
    let r: ToolsResult = c.call(
        method::TOOLS,
        Some(&ToolsParams {
            name: name.to_owned(),
        }),
        READ_TIMEOUT,
    )?;
    Ok(r.current
        .map(|v| (v.ts, u32::try_from(v.tools.len()).unwrap_or(u32::MAX))))
}

/// The exit a set of outcomes makes: 1 when any failed.
pub(crate) fn exit_of<'a>(outcomes: impl IntoIterator<Item = &'a Outcome>) -> Exit {
    if outcomes.into_iter().any(Outcome::failed) {
        Exit::Operational
    } else {
        Exit::Success
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status_json(
        state: &str,
        explain: Option<&str>,
        transitions: &[(&str, &str)],
    ) -> StatusResult {
        let t: Vec<serde_json::Value> = transitions
            .iter()
            .map(|(to, ts)| serde_json::json!({"from": "stopped", "to": to, "ts": ts, "reason": "r"}))
            .collect();
        serde_json::from_value(serde_json::json!({
            "name": "s", "state": state, "pid": null, "port": 8400, "uptime_secs": null,
            "restart_count": 0, "last_exit": null, "tools_held": 2,
            "transitions": t, "command": "x", "args": [], "working_dir": null,
            "env_keys": [], "restart": {"policy": "on-failure", "backoff_initial_ms": 1000,
            "backoff_max_ms": 30000, "max_retries_per_minute": 5}, "stop": {"grace_ms": 1000},
            "config_file": "/x.kdl", "explain": explain,
        }))
        .unwrap()
    }

    #[test]
    fn a_listing_counts_only_when_it_is_of_this_spawn() {
        let st = status_json(
            "running",
            None,
            &[
                ("starting", "2026-12-04T10:00:00.000Z"),
                ("running", "2026-12-04T10:00:00.010Z"),
            ],
        );
        assert_eq!(decide(&st, None), None);
        // The previous spawn's listing.
        assert_eq!(decide(&st, Some(("2026-12-04T09:59:59.999Z", 3))), None);
        assert_eq!(
            decide(&st, Some(("2026-12-04T10:00:00.500Z", 3))),
            Some(Outcome::Listed {
                tools: 3,
                held: 2,
                note: None
            })
        );
    }

    #[test]
    fn a_crash_loop_is_a_failure_never_running() {
        let st = status_json(
            "restarting",
            Some("exited immediately with code 1; last stderr: boom"),
            &[("starting", "2026-12-04T10:00:00.000Z")],
        );
        let o = decide(&st, None).unwrap();
        assert!(o.failed());
        let w = o.words("s", Duration::from_secs(15));
        assert!(
            w.starts_with("crash-looping: exited immediately with code 1"),
            "{w}"
        );
        assert!(!w.contains("running"), "{w}");
        let st = status_json("failed", None, &[]);
        assert!(decide(&st, None).unwrap().failed());
    }

    #[test]
    fn words() {
        let d = Duration::from_secs(15);
        assert_eq!(
            Outcome::Listed {
                tools: 3,
                held: 0,
                note: None
            }
            .words("s", d),
            "running, 3 tools (0 held back)"
        );
        assert_eq!(
            Outcome::Listed {
                tools: 1,
                held: 1,
                note: None
            }
            .words("s", d),
            "running, 1 tools (1 held back); review them: xyctl tools review s"
        );
        let st = status_json(
            "running",
            Some("xy could not list its tools: it never answered initialize"),
            &[],
        );
        assert_eq!(
            decide(&st, None).unwrap().words("s", d),
            "running, but xy could not list its tools: it never answered initialize"
        );
    }
}
