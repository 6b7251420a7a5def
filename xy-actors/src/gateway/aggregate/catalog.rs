//! What the aggregate offers (SPEC §26): each visible server's tools,
//! prompts, resources and resource templates as its own endpoint lists
//! them (through [`Upstream`], so the firewall has filtered them and, where
//! the ledger answers, nothing was spawned), kept until the server's
//! published snapshot shows a change that can alter them; and the watcher
//! that tells open streams `list_changed` when a server appears, goes
//! (stopped, failed, removed) or its visible set changes.
//!
//! A server is visible while it is not `stopped` or `failed`: an idle
//! on-demand server is listed (its listing costs no child where the ledger
//! answers), a stopped one is not.

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{broadcast, mpsc, watch};
use xy_core::protocol::ServerState;

use super::upstream::{Failed, Upstream};
use crate::gateway::Routes;
use crate::snapshot::ServerSnapshot;

/// How long one server's listing may take.
const LIST_WAIT: Duration = Duration::from_secs(30);
/// Pages of one listing read at most.
const MAX_PAGES: usize = 100;

/// The lists a server has (`skills/list`: the skills extension, SPEC §27).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum List {
    Tools,
    Prompts,
    Resources,
    Templates,
    Skills,
}

impl List {
    pub(crate) const fn method(self) -> &'static str {
        match self {
            List::Tools => "tools/list",
            List::Prompts => "prompts/list",
            List::Resources => "resources/list",
            List::Templates => "resources/templates/list",
            List::Skills => "skills/list",
        }
    }

    pub(crate) const fn key(self) -> &'static str {
        match self {
            List::Tools => "tools",
            List::Prompts => "prompts",
            List::Resources => "resources",
            List::Templates => "resourceTemplates",
            List::Skills => "skills",
        }
    }
}

/// Whether a server in `state` is offered at all.
pub(crate) fn visible(state: ServerState) -> bool {
    !matches!(state, ServerState::Stopped | ServerState::Failed)
}

/// What can change what a server offers: whether it is visible, and its
/// firewall's verdicts (names and states) of tools, prompts and pinned
/// resources.
pub(crate) fn fingerprint(snap: &ServerSnapshot) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    visible(snap.state).hash(&mut h);
    if let Some(fw) = &snap.firewall {
        let v = fw.current();
        v.policy.mode.hash(&mut h);
        // Skill files and apps too: a held-back one leaves `resources/list`.
        for map in [&v.tools, &v.prompts, &v.resources] {
            let mut items: Vec<_> = map.iter().map(|(n, v)| (n, v.state.visible())).collect();
            items.sort();
            items.hash(&mut h);
        }
    }
    h.finish()
}

/// One server's list as last read, and the fingerprint it was read under.
struct Cached {
    fingerprint: u64,
    items: Arc<Vec<Value>>,
}

/// The cache of every server's lists, and the `list_changed` feed.
pub(crate) struct Catalog {
    pub(crate) routes: watch::Receiver<Routes>,
    pub(crate) upstream: Upstream,
    cache: Mutex<HashMap<(String, List), Cached>>,
    /// One message per change of what the aggregate offers.
    pub(crate) changed: broadcast::Sender<()>,
}

/// A server's list, or why it could not be had.
pub(crate) type Listed = Result<Arc<Vec<Value>>, Failed>;

impl Catalog {
    pub(crate) fn new(routes: watch::Receiver<Routes>, upstream: Upstream) -> Arc<Catalog> {
        let (changed, _) = broadcast::channel(16);
        let c = Arc::new(Catalog {
            routes,
            upstream,
            cache: Mutex::new(HashMap::new()),
            changed,
        });
        tokio::spawn(watch_changes(Arc::downgrade(&c), c.routes.clone()));
        c
    }

    /// The visible servers (of `only`, when given), by name, with their
    /// snapshot receivers.
    pub(crate) fn servers(
        &self,
        only: Option<&[String]>,
    ) -> BTreeMap<String, watch::Receiver<ServerSnapshot>> {
        let routes = self.routes.borrow();
        routes
            .iter()
            .filter(|(n, _)| only.is_none_or(|o| o.iter().any(|s| s == *n)))
            .filter(|(_, s)| visible(s.borrow().state))
            .map(|(n, s)| (n.clone(), s.clone()))
            .collect()
    }

    /// `list` of every server in `servers`, in name order: cached lists
    /// as they are, the others read in parallel.
    pub(crate) async fn lists(
        self: &Arc<Self>,
        servers: &BTreeMap<String, watch::Receiver<ServerSnapshot>>,
        list: List,
    ) -> Vec<(String, Listed)> {
        let mut out = Vec::with_capacity(servers.len());
        let mut set = tokio::task::JoinSet::new();
        for (name, snap) in servers {
            if let Some(items) = self.cached(name, snap, list) {
                out.push((name.clone(), Ok(items)));
                continue;
            }
            let (me, name, snap) = (Arc::clone(self), name.clone(), snap.clone());
            set.spawn(async move {
                let got = me.list(&name, &snap, list).await;
                (name, got)
            });
        }
        while let Some(r) = set.join_next().await {
            if let Ok(r) = r {
                out.push(r);
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// One server's `list` from the cache, while its fingerprint holds.
    fn cached(
        &self,
        name: &str,
        snap: &watch::Receiver<ServerSnapshot>,
        list: List,
    ) -> Option<Arc<Vec<Value>>> {
        let print = fingerprint(&snap.borrow());
        let cache = self.lock();
        let c = cache.get(&(name.to_owned(), list))?;
        (c.fingerprint == print).then(|| Arc::clone(&c.items))
    }

    /// One server's `list`, from the cache while its fingerprint holds.
    pub(crate) async fn list(
        &self,
        name: &str,
        snap: &watch::Receiver<ServerSnapshot>,
        list: List,
    ) -> Listed {
        if let Some(items) = self.cached(name, snap, list) {
            return Ok(items);
        }
        let print = fingerprint(&snap.borrow());
        let key = (name.to_owned(), list);
        let items = Arc::new(self.read(name, snap, list).await?);
        // Kept under the fingerprint it was asked under: a change meanwhile
        // makes the next request read it again.
        self.lock().insert(
            key,
            Cached {
                fingerprint: print,
                items: Arc::clone(&items),
            },
        );
        Ok(items)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, List), Cached>> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every page of `list` from the server. A server without the method
    /// (`-32601`) has an empty list.
    async fn read(
        &self,
        name: &str,
        snap: &watch::Receiver<ServerSnapshot>,
        list: List,
    ) -> Result<Vec<Value>, Failed> {
        let mut items = Vec::new();
        let mut cursor: Option<Value> = None;
        for _ in 0..MAX_PAGES {
            let params = match &cursor {
                Some(c) => serde_json::json!({"cursor": c}),
                None => serde_json::json!({}),
            };
            let answer = self
                .upstream
                .request(name, snap, list.method(), params, LIST_WAIT)
                .await?;
            if let Some(e) = answer.get("error") {
                if e.get("code").and_then(Value::as_i64) == Some(-32601) {
                    return Ok(items);
                }
                return Err(Failed(format!(
                    "server {name} refused {}: {}",
                    list.method(),
                    e.get("message").and_then(Value::as_str).unwrap_or("error")
                )));
            }
            let result = answer.get("result");
            if let Some(page) = result
                .and_then(|r| r.get(list.key()))
                .and_then(Value::as_array)
            {
                items.extend(page.iter().filter(|i| i.is_object()).cloned());
            }
            cursor = result
                .and_then(|r| r.get("nextCursor"))
                .filter(|c| !c.is_null())
                .cloned();
            if cursor.is_none() {
                return Ok(items);
            }
        }
        Ok(items)
    }
}

/// Sends one `changed` message whenever what the aggregate offers may have
/// changed: a server added or removed, visible or not, its verdicts new.
/// Ends when the catalog is dropped.
async fn watch_changes(catalog: std::sync::Weak<Catalog>, mut routes: watch::Receiver<Routes>) {
    let mut last: BTreeMap<String, u64> = BTreeMap::new();
    loop {
        let (poke, mut poked) = mpsc::channel::<()>(1);
        let mut forwarders = tokio::task::JoinSet::new();
        let current: Routes = Arc::clone(&routes.borrow_and_update());
        for snap in current.values() {
            let (mut snap, poke) = (snap.clone(), poke.clone());
            forwarders.spawn(async move {
                // The verdicts have their own channel: a firewall decision
                // need not publish a new snapshot.
                let fresh = |snap: &mut watch::Receiver<ServerSnapshot>| {
                    snap.borrow_and_update().firewall.as_ref().map(|f| {
                        let mut v = f.verdicts.clone();
                        v.borrow_and_update();
                        v
                    })
                };
                let mut verdicts = fresh(&mut snap);
                loop {
                    // (a snapshot came, a verdicts channel ended)
                    let (snapshot_changed, gate_gone) = match verdicts.as_mut() {
                        Some(v) => tokio::select! {
                            r = snap.changed() => match r {
                                Ok(()) => (true, false),
                                Err(_) => return,
                            },
                            r = v.changed() => (false, r.is_err()),
                        },
                        None => match snap.changed().await {
                            Ok(()) => (true, false),
                            Err(_) => return,
                        },
                    };
                    if gate_gone {
                        verdicts = None;
                    }
                    if snapshot_changed {
                        verdicts = fresh(&mut snap);
                    }
                    let _ = poke.try_send(());
                }
            });
        }
        drop(poke);
        loop {
            let prints: BTreeMap<String, u64> = current
                .iter()
                .map(|(n, s)| (n.clone(), fingerprint(&s.borrow())))
                .collect();
            if prints != last {
                let Some(c) = catalog.upgrade() else { return };
                for gone in last.keys().filter(|n| !prints.contains_key(*n)) {
                    c.upstream.forget(gone);
                }
                if !last.is_empty() || !prints.is_empty() {
                    let _ = c.changed.send(());
                }
                last = prints;
            }
            tokio::select! {
                r = routes.changed() => {
                    if r.is_err() {
                        return;
                    }
                    break;
                }
                Some(()) = poked.recv() => {}
            }
        }
        forwarders.abort_all();
    }
}
