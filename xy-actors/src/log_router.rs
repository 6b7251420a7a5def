//! The LogRouterActor: owns every server's log sink (rotating file, ring
//! buffer, live broadcast), creates one per server for the RootSupervisor to
//! hand to the ServerActor, and serves `logs` subscriptions.
//!
//! Supervised by the RootSupervisor. On failure the root respawns it with the
//! sinks it asks the ServerActors for (each holds the one it writes to), so
//! no buffered line and no follower is lost.

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use std::collections::BTreeMap;
use tokio::sync::broadcast;

use crate::logs::LogLine;

pub(crate) mod chunk;
pub(crate) mod disk;
pub(crate) mod pump;
pub(crate) mod redact;
pub(crate) mod ring;
pub(crate) mod rotating;
pub(crate) mod sink;

use sink::{LogSink, SharedSink, SinkSettings, lock};

/// The buffered tail and live receivers of a subscription.
pub(crate) type Subscribed = (Vec<LogLine>, Vec<broadcast::Receiver<LogLine>>);

/// Messages of the LogRouterActor.
pub(crate) enum LogRouterMsg {
    /// Returns the sink of `name`, creating it (and opening its file) if new.
    CreateSink(String, RpcReplyPort<SharedSink>),
    /// Closes the sink of a removed server: its followers end.
    RemoveSink(String),
    /// A sink that reached a restored router late: kept unless the name
    /// already has one.
    AdoptSink(String, SharedSink),
    /// Fault injection: panic in the handler.
    InjectPanic,
    /// Tail and (if `follow`) live receivers of `names` (empty: all);
    /// `Err(unknown names)` if any name has no sink.
    Subscribe {
        /// Servers; empty means every server.
        names: Vec<String>,
        /// Lines per server from the ring; `None`: all.
        tail: Option<usize>,
        /// Whether to include live receivers.
        follow: bool,
        /// The answer.
        reply: RpcReplyPort<Result<Subscribed, Vec<String>>>,
    },
}

/// Startup arguments.
pub(crate) struct LogRouterArgs {
    pub(crate) settings: SinkSettings,
    /// Sinks that survive a restart of this actor.
    pub(crate) sinks: BTreeMap<String, SharedSink>,
}

/// See the module docs.
pub(crate) struct LogRouterActor;

impl Actor for LogRouterActor {
    type Msg = LogRouterMsg;
    type State = LogRouterArgs;
    type Arguments = LogRouterArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: LogRouterArgs,
    ) -> Result<LogRouterArgs, ActorProcessingErr> {
        Ok(args)
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            LogRouterMsg::CreateSink(name, reply) => {
                let sink = state
                    .sinks
                    .entry(name.clone())
                    .or_insert_with(|| LogSink::new(&name, &state.settings).shared())
                    .clone();
                if !reply.is_closed() {
                    let _ = reply.send(sink);
                }
            }
            LogRouterMsg::RemoveSink(name) => {
                if let Some(sink) = state.sinks.remove(&name) {
                    lock(&sink).close();
                }
            }
            LogRouterMsg::AdoptSink(name, sink) => {
                state.sinks.entry(name).or_insert(sink);
            }
            LogRouterMsg::InjectPanic => panic!("injected panic in the LogRouterActor"),
            LogRouterMsg::Subscribe {
                names,
                tail,
                follow,
                reply,
            } => {
                let result = subscribe(&state.sinks, &names, tail, follow);
                if !reply.is_closed() {
                    let _ = reply.send(result);
                }
            }
        }
        Ok(())
    }
}

fn subscribe(
    sinks: &BTreeMap<String, SharedSink>,
    names: &[String],
    tail: Option<usize>,
    follow: bool,
) -> Result<Subscribed, Vec<String>> {
    let unknown: Vec<String> = names
        .iter()
        .filter(|n| !sinks.contains_key(*n))
        .cloned()
        .collect();
    if !unknown.is_empty() {
        return Err(unknown);
    }
    let chosen: Vec<&SharedSink> = if names.is_empty() {
        sinks.values().collect()
    } else {
        names.iter().filter_map(|n| sinks.get(n)).collect()
    };
    let mut backlog = Vec::new();
    let mut receivers = Vec::new();
    for sink in chosen {
        let (lines, rx) = lock(sink).subscribe(tail, follow);
        backlog.extend(lines);
        receivers.extend(rx);
    }
    // Stable: lines of one server keep their order when timestamps tie.
    backlog.sort_by_key(|l| l.ts);
    Ok((backlog, receivers))
}

/// Waits until the log lines queued so far are in their files (a file stuck
/// on a hung filesystem aside), at most `timeout`: `xyd` calls it last, so
/// a child's final lines are not lost at exit. Whether everything was written.
pub fn flush_logs(timeout: std::time::Duration) -> bool {
    crate::writers::shared().flush(timeout)
}
