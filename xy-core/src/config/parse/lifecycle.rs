//! `restart { }`, `stop { }` and `on-demand { }` (SPEC §3): when xy
//! restarts, stops and starts the child.

use kdl::KdlNode;

use super::cx::{Cx, suggest};
use crate::config::{OnDemandConfig, RestartConfig, RestartPolicy, StopConfig};
use crate::protocol::DiagnosticKind;

/// Children of `restart { … }`.
pub(super) const RESTART_FIELDS: &[&str] = &[
    "policy",
    "backoff-initial",
    "backoff-max",
    "max-retries-per-minute",
];
/// Children of `on-demand { … }`.
pub(super) const ON_DEMAND_FIELDS: &[&str] = &["idle-stop"];
/// Children of `stop { … }`.
pub(super) const STOP_FIELDS: &[&str] = &["grace"];

pub(super) fn parse_restart(cx: &mut Cx<'_>, node: &KdlNode) -> RestartConfig {
    let mut r = RestartConfig::default();
    let mut seen: Vec<(&str, usize)> = Vec::new();
    let mut initial_span = None;
    let mut max_span = None;
    for child in cx.block(node) {
        let key = child.name().value();
        if !RESTART_FIELDS.contains(&key) {
            cx.unknown_node(child, RESTART_FIELDS, "in `restart { }`");
            continue;
        }
        if cx.duplicate(child, &mut seen) {
            continue;
        }
        match key {
            "policy" => {
                let example = "policy \"on-failure\"";
                if let Some(e) = cx.single(child, example)
                    && let Some(s) = cx.string(child, e, example)
                {
                    match RestartPolicy::from_name(&s) {
                        Some(p) => r.policy = p,
                        None => {
                            let mut help =
                                "allowed values: \"always\", \"on-failure\", \"never\"".to_owned();
                            if let Some(s) = suggest(&s, &["always", "on-failure", "never"]) {
                                help = format!("did you mean \"{s}\"? {help}");
                            }
                            cx.push(
                                cx.diag(
                                    DiagnosticKind::InvalidValue,
                                    e.span(),
                                    format!("unknown restart policy {s:?}"),
                                )
                                .with_label("not a policy")
                                .with_help(help),
                            );
                        }
                    }
                }
            }
            "backoff-initial" => {
                if let Some((d, span)) = cx.duration_node(child) {
                    r.backoff_initial = d;
                    initial_span = Some(span);
                }
            }
            "backoff-max" => {
                if let Some((d, span)) = cx.duration_node(child) {
                    r.backoff_max = d;
                    max_span = Some(span);
                }
            }
            "max-retries-per-minute" => {
                let example = "max-retries-per-minute 5";
                if let Some(e) = cx.single(child, example)
                    && let Some(n) = cx.integer(child, e, example)
                {
                    match u32::try_from(n) {
                        Ok(n) => r.max_retries_per_minute = n,
                        Err(_) => {
                            let (message, label) = if n < 0 {
                                (
                                    format!(
                                        "`max-retries-per-minute` must not be negative, found {n}"
                                    ),
                                    "negative",
                                )
                            } else {
                                (
                                    format!("`max-retries-per-minute` {n} is too large"),
                                    "too large",
                                )
                            };
                            cx.push(
                                cx.diag(DiagnosticKind::InvalidValue, e.span(), message)
                                    .with_label(label)
                                    .with_help("give a whole number from 0 up, e.g. max-retries-per-minute 5"),
                            );
                        }
                    }
                }
            }
            _ => unreachable!("every RESTART_FIELDS entry is matched"),
        }
    }
    if r.backoff_initial > r.backoff_max {
        let span = initial_span.or(max_span);
        if let Some(span) = span {
            let initial = humantime::format_duration(r.backoff_initial);
            let max = humantime::format_duration(r.backoff_max);
            let max_note = if max_span.is_none() {
                ", the default"
            } else {
                ""
            };
            cx.push(
                cx.diag(
                    DiagnosticKind::InvalidValue,
                    span,
                    format!(
                        "`backoff-initial` ({initial}) is greater than `backoff-max` \
                         ({max}{max_note})"
                    ),
                )
                .with_label("larger than backoff-max")
                .with_help("backoff-max caps the delay: make it at least backoff-initial"),
            );
        }
    }
    r
}

pub(super) fn parse_on_demand(cx: &mut Cx<'_>, node: &KdlNode) -> OnDemandConfig {
    let mut o = OnDemandConfig::default();
    let mut seen: Vec<(&str, usize)> = Vec::new();
    for child in cx.block(node) {
        let key = child.name().value();
        if !ON_DEMAND_FIELDS.contains(&key) {
            cx.unknown_node(child, ON_DEMAND_FIELDS, "in `on-demand { }`");
            continue;
        }
        if cx.duplicate(child, &mut seen) {
            continue;
        }
        if let Some((d, span)) = cx.duration_node(child) {
            if d.is_zero() {
                let d = cx
                    .diag(
                        DiagnosticKind::InvalidValue,
                        span,
                        "`idle-stop` must be longer than zero",
                    )
                    .with_label("zero")
                    .with_help("e.g. idle-stop \"10m\"");
                cx.push(d);
            } else {
                o.idle_stop = d;
            }
        }
    }
    o
}

pub(super) fn parse_stop(cx: &mut Cx<'_>, node: &KdlNode) -> StopConfig {
    let mut s = StopConfig::default();
    let mut seen: Vec<(&str, usize)> = Vec::new();
    for child in cx.block(node) {
        let key = child.name().value();
        if !STOP_FIELDS.contains(&key) {
            cx.unknown_node(child, STOP_FIELDS, "in `stop { }`");
            continue;
        }
        if cx.duplicate(child, &mut seen) {
            continue;
        }
        if let Some((d, _)) = cx.duration_node(child) {
            s.grace = d;
        }
    }
    s
}
