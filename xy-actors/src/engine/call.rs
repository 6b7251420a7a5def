//! Bounded request/reply to the actors, and running one operation on many
//! servers concurrently. Every wait of the engine goes through [`ask`].

use std::time::Duration;

use ractor::{ActorRef, RpcReplyPort};
use tokio::task::JoinSet;

use super::error::{EngineError, internal};
use crate::server::{ServerMsg, StartOutcome, StopOutcome};
use crate::supervisor::ServerRef;

/// Bound on queries that never wait on a child (refs, status, diff).
pub(super) const QUERY_TIMEOUT: Duration = Duration::from_secs(5);
/// Added to a server's grace for calls that wait on its stop: SIGKILL and
/// the group's disappearance take milliseconds, this is the safety margin.
pub(super) const STOP_MARGIN: Duration = Duration::from_secs(5);

/// One request/reply to an actor with a bounded wait.
pub(super) async fn ask<M, T>(
    actor: &ActorRef<M>,
    what: &str,
    timeout: Duration,
    build: impl FnOnce(RpcReplyPort<T>) -> M,
) -> Result<T, EngineError>
where
    M: ractor::Message,
    T: Send + 'static,
{
    match actor.call(build, Some(timeout)).await {
        Ok(ractor::rpc::CallResult::Success(v)) => Ok(v),
        Ok(ractor::rpc::CallResult::Timeout) => Err(internal(
            what,
            format!("no answer within {}", humantime::format_duration(timeout)),
        )),
        Ok(ractor::rpc::CallResult::SenderError) => {
            Err(internal(what, "the actor dropped the request"))
        }
        Err(_) => Err(internal(what, "the actor is not running")),
    }
}

pub(super) async fn start_one(s: &ServerRef) -> Result<StartOutcome, EngineError> {
    // A start may first wait for a stop in progress.
    ask(
        &s.actor,
        &format!("start {}", s.name),
        s.grace + STOP_MARGIN * 2 + crate::secrets::TIMEOUT,
        |tx| ServerMsg::Start(Some(tx)),
    )
    .await
}

/// A restart as one lifecycle operation (stop then start; a stdio
/// server's endpoint and sessions stay): bounded like a start, which may
/// wait for a stop.
pub(super) async fn restart_one(
    s: &ServerRef,
    cause: crate::server::RestartCause,
) -> Result<StartOutcome, EngineError> {
    ask(
        &s.actor,
        &format!("restart {}", s.name),
        s.grace + STOP_MARGIN * 2 + crate::secrets::TIMEOUT,
        |reply| ServerMsg::Restart { cause, reply },
    )
    .await
}

pub(super) async fn stop_one(s: &ServerRef) -> Result<StopOutcome, EngineError> {
    ask(
        &s.actor,
        &format!("stop {}", s.name),
        s.grace + STOP_MARGIN,
        ServerMsg::Stop,
    )
    .await
}

/// Runs `f` for every target concurrently; results in target order.
pub(super) async fn for_each<T, F, Fut>(
    targets: Vec<ServerRef>,
    f: F,
) -> Result<Vec<(String, T)>, EngineError>
where
    T: Send + 'static,
    F: Fn(ServerRef) -> Fut,
    Fut: std::future::Future<Output = Result<T, EngineError>> + Send + 'static,
{
    let mut set = JoinSet::new();
    for (i, s) in targets.into_iter().enumerate() {
        let name = s.name.clone();
        let fut = f(s);
        set.spawn(async move { (i, name, fut.await) });
    }
    let mut out = Vec::new();
    let mut first_err = None;
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok((i, name, Ok(v))) => out.push((i, name, v)),
            Ok((_, _, Err(e))) => {
                first_err.get_or_insert(e);
            }
            Err(e) => {
                first_err.get_or_insert(internal("engine task", e));
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    out.sort_by_key(|(i, _, _)| *i);
    Ok(out.into_iter().map(|(_, n, v)| (n, v)).collect())
}
