//! xy's listing probes of a 2025-era stdio child (SPEC §19, §24, D210):
//! when the bridge has listed a child whose listing xy has not probed
//! yet, the ServerActor runs the same command, configured and confined as
//! the child was, as a short-lived process of its own (`<name>.probe`: its
//! own child record, temp and data dirs), `initialize`s it declaring less,
//! lists its tools and kills it — first declaring nothing, and, only when
//! that listing lacks tools, once per capability left out. What the
//! listings differ by becomes the bridge's [`Gates`]. Kept by the full
//! listing's key (its tools' names and digests) in the ledger (D280), so
//! a respawn, a daemon start and an idle child's first wake cost nothing.
//! A probe that cannot run leaves the gates failed (all is shown, and the
//! server's log says why).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;
use ractor::ActorRef;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use xy_core::config::ServerConfig;
use xy_core::protocol::mcp::ServedGates;

use super::process::{ChildHandle, ChildSpawner};
use super::{ServerActorState, ServerMsg};
use crate::bridge::BridgeMsg;
use crate::log_router::sink::SharedSink;
use crate::mcp::gates::{self, Atom, Gates};
use crate::mcp::listing::{MAX_ITEMS, MAX_PAGES};

/// How long one probe may take, from spawn to its last page.
const PROBE_WITHIN: Duration = Duration::from_secs(10);
/// How long all of a listing's probes may take: within the time a client
/// that waits for them is kept waiting (the bridge's 30 s).
const LEARN_WITHIN: Duration = Duration::from_secs(25);
/// The longest line a probe reads.
const MAX_LINE: usize = 4 << 20;

/// The probes of a server: learnt gates, and the probe running now.
#[derive(Default)]
pub(crate) struct Probes {
    learnt: HashMap<String, Arc<Gates>>,
    /// The config of the last spawn (its secrets included): the probes
    /// run what the child ran.
    pub(crate) spawned: Option<Arc<ServerConfig>>,
    running: Option<(String, Running)>,
}

/// A probe task; dropping it (a stop, the actor's end) kills its process.
struct Running(tokio::task::JoinHandle<()>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Kills a probe's process tree when the probe ends, however it ends.
struct Kill(Arc<dyn ChildHandle>);

impl Drop for Kill {
    fn drop(&mut self) {
        self.0.signal_group(Signal::SIGKILL);
        let h = self.0.clone();
        // Reaped, and its child record removed, off the probe.
        tokio::spawn(async move {
            let _ = h.wait().await;
            h.wait_group_gone().await;
        });
    }
}

impl Probes {
    /// The gates the ledger kept (D280): their listing needs no probe.
    pub(crate) fn kept(&mut self, kept: Option<&ServedGates>) {
        if let Some(k) = kept {
            self.learnt
                .insert(k.listing.clone(), Arc::new(Gates::from_stored(k)));
        }
    }
}

impl ServerActorState {
    /// The bridge listed a 2025 child with these tools: its gates, known
    /// or learnt now.
    pub(super) fn probe_gates(
        &mut self,
        myself: &ActorRef<ServerMsg>,
        key: String,
        tools: Vec<String>,
    ) {
        let full: BTreeSet<String> = tools.into_iter().collect();
        if let Some(g) = self.probes.learnt.get(&key) {
            return self.send_gates(g.clone());
        }
        if self.probes.running.as_ref().is_some_and(|(k, _)| *k == key) {
            return;
        }
        let Some(config) = self.probes.spawned.clone() else {
            return self.send_gates(Arc::new(Gates::failed("no spawn to probe".into())));
        };
        let (spawner, sink, me) = (self.spawner.clone(), self.sink.clone(), myself.clone());
        let k = key.clone();
        let task = tokio::spawn(async move {
            let gates = tokio::time::timeout(LEARN_WITHIN, learn(spawner, &config, &sink, &full))
                .await
                .unwrap_or_else(|_| {
                    Gates::failed(format!("the probes took over {}s", LEARN_WITHIN.as_secs()))
                });
            let _ = me.cast(ServerMsg::Gated {
                key: k,
                gates: Box::new(gates),
            });
        });
        self.probes.running = Some((key, Running(task)));
    }

    /// The probes of `key` are done.
    pub(super) fn gated(&mut self, key: String, gates: Gates) {
        if self.probes.running.as_ref().is_some_and(|(k, _)| *k == key) {
            self.probes.running = None;
        }
        if let Some(why) = &gates.failed {
            tracing::warn!(server = %self.config.name, "xy could not probe which tools need a client capability: {why}; every client is shown every tool");
        } else if gates.any() {
            let mut shown: Vec<String> = gates
                .needs
                .iter()
                .map(|(t, n)| format!("{t} ({n:?})"))
                .collect();
            shown.sort();
            tracing::info!(server = %self.config.name, "tools offered only to clients of a capability: {}", shown.join(", "));
        }
        // The bridge's ledger answers use them from now on.
        if let Some(kept) = gates.stored(&key)
            && self.mcp.keep_gates(kept)
        {
            self.firewall_changed(Vec::new());
        }
        let gates = Arc::new(gates);
        self.probes.learnt.insert(key, gates.clone());
        self.send_gates(gates);
    }

    /// A stop: no probe outlives the child.
    pub(super) fn stop_probes(&mut self) {
        self.probes.running = None;
    }

    fn send_gates(&self, gates: Arc<Gates>) {
        if let Some(b) = &self.bridge {
            let _ = b.actor.cast(BridgeMsg::Gates(gates));
        }
    }
}

/// Runs the probes for a child whose full listing has `full`.
async fn learn(
    spawner: Arc<dyn ChildSpawner>,
    config: &ServerConfig,
    sink: &SharedSink,
    full: &BTreeSet<String>,
) -> Gates {
    let mut probe_config = config.clone();
    probe_config.name = format!("{}.probe", config.name);
    let probe_config = Arc::new(probe_config);
    // One round of probes, run together; dropping the set (the probe
    // task aborted) aborts them, and each kills its process.
    let round = |capss: Vec<Value>| {
        let mut set = tokio::task::JoinSet::new();
        for (i, caps) in capss.into_iter().enumerate() {
            let (spawner, sink, c) = (spawner.clone(), sink.clone(), probe_config.clone());
            set.spawn(async move {
                let r = tokio::time::timeout(PROBE_WITHIN, list_once(&*spawner, &c, &sink, caps))
                    .await
                    .unwrap_or_else(|_| {
                        Err(format!("no listing within {}s", PROBE_WITHIN.as_secs()))
                    });
                (i, r)
            });
        }
        async move {
            let mut out: Vec<Option<Result<BTreeSet<String>, String>>> = Vec::new();
            while let Some(j) = set.join_next().await {
                let Ok((i, r)) = j else { continue };
                if out.len() <= i {
                    out.resize(i + 1, None);
                }
                out[i] = Some(r);
            }
            out
        }
    };
    let bare = match round(vec![json!({})]).await.pop().flatten() {
        Some(Ok(b)) => b,
        Some(Err(why)) => return Gates::failed(why),
        None => return Gates::failed("the probe did not run".into()),
    };
    if full.is_subset(&bare) {
        return Gates::none();
    }
    let mut without = Vec::new();
    let mut probed = Vec::new();
    for first in [true, false] {
        let atoms: Vec<Atom> = if first {
            gates::TOP.to_vec()
        } else {
            gates::second_round(full, &without)
        };
        let results = round(atoms.iter().map(|a| gates::everything_but(*a)).collect()).await;
        for (i, a) in atoms.iter().enumerate() {
            probed.push(*a);
            match results.get(i).cloned().flatten() {
                Some(Ok(l)) => without.push((*a, l)),
                Some(Err(why)) => {
                    tracing::warn!(server = %config.name, "listing probe without {a:?}: {why}");
                }
                None => {}
            }
        }
    }
    Gates::learn(full, &bare, &without, &probed)
}

/// Spawns one probe, lists its tools declaring `caps`, kills it.
async fn list_once(
    spawner: &dyn ChildSpawner,
    config: &ServerConfig,
    sink: &SharedSink,
    caps: Value,
) -> Result<BTreeSet<String>, String> {
    let handle = spawner
        .spawn(config, sink)
        .map_err(|e| format!("{}: {}", e.path, e.error))?;
    let _kill = Kill(handle.clone());
    let io = handle
        .take_stdio()
        .ok_or_else(|| "the probe has no stdio pipes".to_owned())?;
    let (mut stdin, stdout) = (io.stdin, io.stdout);
    let mut lines = BufReader::new(stdout);
    let send = |m: Value| {
        let mut line = m.to_string().into_bytes();
        line.push(b'\n');
        line
    };
    stdin
        .write_all(&send(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": caps,
                "clientInfo": {"name": "xy-probe", "version": xy_core::VERSION},
            }}),
        ))
        .await
        .map_err(|e| format!("initialize: {e}"))?;
    read_answer(&mut lines, &mut stdin, 0, &mut false).await?;
    stdin
        .write_all(&send(
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        ))
        .await
        .map_err(|e| format!("initialized: {e}"))?;
    let mut tools = BTreeSet::new();
    let mut cursor: Option<String> = None;
    let mut changed = false;
    let mut relisted = false;
    let mut id = 1;
    let mut pages = 0;
    loop {
        let mut params = json!({});
        if let Some(c) = &cursor {
            params["cursor"] = json!(c);
        }
        stdin
            .write_all(&send(
                json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params}),
            ))
            .await
            .map_err(|e| format!("tools/list: {e}"))?;
        let r = read_answer(&mut lines, &mut stdin, id, &mut changed).await?;
        id += 1;
        pages += 1;
        if let Some(items) = r.get("tools").and_then(Value::as_array) {
            tools.extend(gates::names(items));
        }
        match r.get("nextCursor").and_then(Value::as_str) {
            Some(c) if pages < MAX_PAGES && tools.len() < MAX_ITEMS => {
                cursor = Some(c.to_owned());
            }
            // A child that registers tools as it learns the client's
            // capabilities announces them: its listing after that counts.
            _ if changed && !relisted => {
                relisted = true;
                changed = false;
                tools.clear();
                cursor = None;
                pages = 0;
            }
            _ => return Ok(tools),
        }
    }
}

/// Reads until the answer to `id`; the child's requests meanwhile are
/// answered as a client with nothing would (no roots, nothing else).
async fn read_answer(
    lines: &mut BufReader<tokio::process::ChildStdout>,
    stdin: &mut tokio::process::ChildStdin,
    id: u64,
    changed: &mut bool,
) -> Result<Value, String> {
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = (&mut *lines)
            .take(MAX_LINE as u64)
            .read_until(b'\n', &mut buf)
            .await
            .map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("the probe exited before it answered".into());
        }
        let Ok(msg) = serde_json::from_slice::<Value>(&buf) else {
            continue;
        };
        let method = msg.get("method").and_then(Value::as_str);
        if method == Some("notifications/tools/list_changed") {
            *changed = true;
        }
        if let (Some(m), Some(their)) = (method, msg.get("id")) {
            let answer = if m == "roots/list" {
                json!({"jsonrpc": "2.0", "id": their, "result": {"roots": []}})
            } else {
                json!({"jsonrpc": "2.0", "id": their, "error": {"code": -32601, "message": "xy's listing probe answers nothing"}})
            };
            let mut line = answer.to_string().into_bytes();
            line.push(b'\n');
            let _ = stdin.write_all(&line).await;
            continue;
        }
        if method.is_none() && msg.get("id").and_then(Value::as_u64) == Some(id) {
            if let Some(r) = msg.get("result") {
                return Ok(r.clone());
            }
            let why = msg
                .pointer("/error/message")
                .and_then(Value::as_str)
                .unwrap_or("no result");
            return Err(why.chars().take(200).collect());
        }
    }
}
