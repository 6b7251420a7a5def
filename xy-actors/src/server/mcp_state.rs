//! One server's MCP view, owned by its ServerActor: the tool ledger in
//! memory (the file is [`crate::ledger`]'s), what the current spawn's `mcp`
//! probe learned (`status.mcp`), the `tools` change a new listing makes
//! (SPEC §12, §15), and the firewall's decisions (SPEC §20): each listed
//! tool's and prompt's state, approvals and denials, and the
//! [`Verdicts`] it publishes to the bridge.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use serde_json::Value;
use tokio::sync::watch;
use xy_core::firewall::{FirewallMode, Kind, Policy, ToolState, decide};
use xy_core::protocol::mcp::{
    ApprovedVersion, CanonicalJson, ChangedItem, ExpectedDigest, ItemLedger, ItemVerdict,
    LedgerTool, McpStatus, ToolLedger, ToolSnapshot, ToolsResult, diff_tools,
};

use crate::ledger::{self, Saver};
use crate::mcp::from_ledger::{self, FromLedger};
use crate::mcp::listing::Listing;
use crate::mcp::report::McpInfo;
use crate::mcp::verdicts::{Directory, DirectoryEntry, Verdict, Verdicts, without_meta};

/// An item the firewall newly holds back: what the `tools` event and the
/// notification say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Held {
    pub(crate) kind: Kind,
    pub(crate) name: String,
    pub(crate) state: ToolState,
    pub(crate) reason: String,
}

/// Why a `tools_approve`/`tools_deny` changed nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Names the server does not list.
    Unknown(Vec<String>),
    /// Items not listed with the digest the caller showed (SPEC §28).
    Changed(Vec<ChangedItem>),
}

/// What a `tools_approve` asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Approval {
    /// Items by name, approved as listed now.
    pub(crate) names: Vec<String>,
    /// Every held-back item.
    pub(crate) all: bool,
    /// Exactly the items listed with these digests, or none if one is not:
    /// checked and applied in one step of the actor, so no listing lands
    /// between what the user saw and what is approved.
    pub(crate) expect: Vec<ExpectedDigest>,
}

impl Approval {
    /// Every name it mentions.
    pub(crate) fn mentioned(&self) -> Vec<String> {
        let expected = self.expect.iter().map(|e| e.name.clone());
        self.names.iter().cloned().chain(expected).collect()
    }
}

/// A new snapshot whose tools differ from the previous one (or the first
/// snapshot ever): what the `tools` event reports (SPEC §15).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ToolsChange {
    /// The previous snapshot's tool count; `None` for the first snapshot.
    pub(crate) from: Option<usize>,
    pub(crate) to: usize,
    /// `added a, b; removed c; changed d`, or `first listing`.
    pub(crate) reason: String,
}

impl ToolsChange {
    fn new(from: Option<usize>, to: usize, d: &xy_core::protocol::mcp::ToolDiff) -> Option<Self> {
        let mut parts = Vec::new();
        for (what, names) in [
            ("added", &d.added),
            ("removed", &d.removed),
            ("changed", &d.changed),
        ] {
            if !names.is_empty() {
                parts.push(format!("{what} {}", names.join(", ")));
            }
        }
        let reason = match (from, parts.is_empty()) {
            (None, _) => "first listing".to_owned(),
            (Some(_), true) => return None,
            (Some(_), false) => parts.join("; "),
        };
        Some(ToolsChange { from, to, reason })
    }
}

/// One server's MCP view, owned by its ServerActor: the ledger (loaded at
/// actor start) and what the current spawn's `mcp` probe learned.
#[derive(Debug)]
pub(crate) struct McpState {
    /// Writes the ledger file; `None` keeps the ledger in memory (unit tests).
    saver: Option<Saver>,
    name: String,
    ledger: ToolLedger,
    /// `status.mcp`: `None` until a probe of this spawn succeeded.
    status: Option<McpStatus>,
    /// The firewall mode in force.
    mode: FirewallMode,
    /// xy's latest listing of the current child (`None` before it).
    last: Option<Listing>,
    /// A snapshot was pushed for the current spawn (a later listing of the
    /// same spawn, after `list_changed`, replaces it).
    snapshot_this_spawn: bool,
    /// Why xy could not list the current spawn, for `status`'s `explain`.
    not_listed: Option<String>,
    /// Tools listed by xy this daemon run, for `list[].tool_count` of
    /// servers without an `mcp` probe.
    listed_count: Option<u32>,
    /// Every server's listed tools (shadowing), and this server's place in it.
    directory: Directory,
    entry: DirectoryEntry,
    /// The verdicts as published (the bridge and, later, the gateway read them).
    verdicts: watch::Sender<Arc<Verdicts>>,
    /// The ledger was written before tool digests covered `_meta.ui`: its
    /// approvals migrate at the next listing (`Policy::legacy`).
    legacy: bool,
}

impl McpState {
    /// The state of server `name`, its ledger read from `dir`.
    pub(crate) fn load(
        dir: Option<PathBuf>,
        name: &str,
        mode: FirewallMode,
        directory: Directory,
    ) -> McpState {
        let ledger = dir
            .as_deref()
            .map(|d| ledger::load(d, name))
            .unwrap_or_default();
        let entry = directory.entry(name);
        let (verdicts, _) = watch::channel(Arc::new(Verdicts::default()));
        let legacy = ledger.format != 0 && ledger.format < xy_core::protocol::mcp::DIGEST_UI_FORMAT;
        // The listing the ledger kept is xy's latest: its verdicts know
        // each item again, and clients are answered from it (SPEC §26).
        let last = ledger
            .served
            .as_ref()
            .map(|s| from_ledger::listing(s, ledger.snapshots.last()));
        let mut st = McpState {
            legacy,
            saver: dir.map(|d| Saver::new(d, name)),
            name: name.to_owned(),
            ledger,
            status: None,
            mode,
            last,
            snapshot_this_spawn: false,
            not_listed: None,
            listed_count: None,
            directory,
            entry,
            verdicts,
        };
        st.publish();
        st
    }

    /// A new spawn: nothing is known about it yet.
    pub(crate) fn on_spawn(&mut self) {
        self.status = None;
        self.snapshot_this_spawn = false;
        self.not_listed = None;
    }

    /// xy could not list the current spawn: `why`, and no tools in
    /// `status.mcp` (SPEC §12: `null` when listing failed).
    pub(crate) fn not_listed(&mut self, why: String) {
        self.not_listed = Some(why);
        if let Some(status) = &mut self.status
            && !self.snapshot_this_spawn
        {
            Self::listed_fields(None, status);
        }
    }

    /// Why xy could not list the current spawn, if it could not.
    pub(crate) fn why_not_listed(&self) -> Option<&str> {
        self.not_listed.as_deref()
    }

    /// The published verdicts.
    pub(crate) fn verdicts(&self) -> Arc<Verdicts> {
        self.verdicts.borrow().clone()
    }

    /// The published verdicts, as they change (the gateway's proxy reads
    /// an HTTP server's through its snapshot, SPEC §20).
    pub(crate) fn watch_verdicts(&self) -> watch::Receiver<Arc<Verdicts>> {
        self.verdicts.subscribe()
    }

    /// The firewall mode in force.
    pub(crate) fn mode(&self) -> FirewallMode {
        self.mode
    }

    /// A new mode (reload): the current listing is decided again.
    pub(crate) fn set_mode(&mut self, mode: FirewallMode, now: SystemTime) -> Vec<Held> {
        if mode == self.mode {
            return Vec::new();
        }
        self.mode = mode;
        let held = self.refresh(now);
        self.save();
        held
    }

    fn policy(&self) -> Policy {
        let fw = &self.ledger.firewall;
        Policy {
            mode: self.mode,
            seen: fw.seen,
            tools: fw.tools.approvals(),
            prompts: fw.prompts.approvals(),
            resources: fw.resources.approvals(),
            legacy: self.legacy,
            templates_seen: fw.templates_seen,
            foreign: self.directory.others(&self.name),
        }
    }

    fn save(&mut self) {
        if let Some(saver) = &mut self.saver {
            // A ledger not yet migrated keeps its format (and so its
            // migration) until a listing migrates it.
            if !self.legacy {
                self.ledger.format = xy_core::protocol::mcp::LEDGER_FORMAT;
            }
            saver.save(self.ledger.clone());
        }
    }

    /// xy's own listing of the current child: a snapshot (SPEC §12) and
    /// the firewall's decisions. Returns the `tools` change and the items
    /// newly held back.
    pub(crate) fn listed(
        &mut self,
        mut listing: Listing,
        now: SystemTime,
    ) -> (Option<ToolsChange>, Vec<Held>) {
        listing.pinned = crate::mcp::pinned::items(&listing);
        let tools: Vec<LedgerTool> = listing
            .tools
            .iter()
            .filter_map(LedgerTool::from_wire)
            .collect();
        let ts = xy_core::time::rfc3339_ms(now);
        if self.snapshot_this_spawn && !self.ledger.snapshots.is_empty() {
            self.ledger.snapshots.pop();
        }
        let previous = self.ledger.snapshots.last().map(|s| s.tools.as_slice());
        let d = diff_tools(previous, &tools);
        let change = ToolsChange::new(previous.map(<[_]>::len), tools.len(), &d);
        tracing::info!(
            server = %self.name, tools = tools.len(), added = ?d.added,
            removed = ?d.removed, changed = ?d.changed, "tools listed by xy"
        );
        self.listed_count = Some(u32::try_from(tools.len()).unwrap_or(u32::MAX));
        self.ledger.push(ToolSnapshot {
            ts,
            protocol_version: listing.protocol_version.clone(),
            server_name: listing.server_name.clone(),
            server_version: listing.server_version.clone(),
            tools,
        });
        self.snapshot_this_spawn = true;
        self.not_listed = None;
        if listing.handshake.is_some() {
            self.ledger.served = from_ledger::served(
                &listing,
                self.ledger
                    .snapshots
                    .last()
                    .map(|s| s.ts.clone())
                    .unwrap_or_default(),
            );
        }
        if let Some(mut status) = self.status.take() {
            Self::listed_fields(Some(self.ledger.snapshots.as_slice()), &mut status);
            self.status = Some(status);
        }
        self.last = Some(listing);
        let held = self.refresh(now);
        self.save();
        (change, held)
    }

    /// Decides xy's latest listing again (after a listing, an approval, a
    /// denial, a new mode) and publishes the verdicts. Returns the items
    /// held back now that were not held back (with that digest) before.
    fn refresh(&mut self, now: SystemTime) -> Vec<Held> {
        let mut held = Vec::new();
        if let Some(last) = self.last.take() {
            let policy = self.policy();
            let first = !policy.seen && self.mode != FirewallMode::Off;
            for (kind, items) in [
                (Kind::Tool, Some(&last.tools)),
                (Kind::Prompt, last.prompts.as_ref()),
                (Kind::Resource, Some(&last.pinned)),
            ] {
                let Some(items) = items else {
                    if kind == Kind::Prompt {
                        self.ledger.firewall.prompts.current.clear();
                    }
                    continue;
                };
                let section = section(&mut self.ledger.firewall, kind);
                // A ledger from before resources were pinned: their first
                // listing is a first listing (`decide` says the same).
                let first = first
                    || (kind == Kind::Resource && policy.legacy && self.mode != FirewallMode::Off);
                let mut current = Vec::with_capacity(items.len());
                for item in items {
                    let Some(name) = item.get("name").and_then(Value::as_str) else {
                        continue;
                    };
                    let d = decide(&policy, kind, item);
                    if d.state == ToolState::Approved
                        && let Some(a) = section.approved.get_mut(name)
                        && a.digest != d.digest
                    {
                        // Approved by a ledger from before `_meta.ui` was
                        // pinned: the same tool, recorded with its new digest.
                        a.digest.clone_from(&d.digest);
                    }
                    // Likewise a ledger from before templates were pinned.
                    let first = first || policy.unseen_template(kind, name);
                    if first
                        && d.state == ToolState::Approved
                        && !section.approved.contains_key(name)
                    {
                        // Pin: what a server lists the first time xy sees it is approved.
                        section.approved.insert(
                            name.to_owned(),
                            approved_version(kind, item, &d.digest, now),
                        );
                    }
                    let v = verdict(kind, item, name, d.digest, d.state, d.reasons);
                    let before = section.current.iter().find(|p| p.name == v.name);
                    if !v.state.visible()
                        && before.is_none_or(|b| b.digest != v.digest || b.state != v.state)
                    {
                        held.push(Held {
                            kind,
                            name: v.name.clone(),
                            state: v.state,
                            reason: v.reasons.first().cloned().unwrap_or_default(),
                        });
                    }
                    current.push(v);
                }
                section.current = current;
            }
            if self.mode != FirewallMode::Off {
                self.ledger.firewall.seen = true;
                self.ledger.firewall.templates_seen = true;
            }
            self.legacy = false;
            self.last = Some(last);
        }
        self.publish();
        held
    }

    /// Publishes the verdicts and this server's offered tool names.
    fn publish(&mut self) {
        let fw = &self.ledger.firewall;
        let objects = |kind: Kind| -> std::collections::HashMap<&str, &Value> {
            let items = self.last.as_ref().and_then(|l| match kind {
                Kind::Tool => Some(&l.tools),
                Kind::Prompt => l.prompts.as_ref(),
                Kind::Resource => Some(&l.pinned),
            });
            items
                .into_iter()
                .flatten()
                .filter_map(|i| Some((i.get("name")?.as_str()?, i)))
                .collect()
        };
        let table = |kind: Kind, section: &ItemLedger| {
            let objs = objects(kind);
            section
                .current
                .iter()
                .map(|v| {
                    (
                        v.name.clone(),
                        Verdict {
                            object: objs.get(v.name.as_str()).and_then(|o| without_meta(o)),
                            state: v.state,
                            reason: v.reasons.first().cloned().unwrap_or_default(),
                        },
                    )
                })
                .collect()
        };
        let tools = table(Kind::Tool, &fw.tools);
        let prompts = table(Kind::Prompt, &fw.prompts);
        let resources = table(Kind::Resource, &fw.resources);
        let raw = |kind: Kind, table: &std::collections::HashMap<String, Verdict>| {
            let Some(l) = &self.last else {
                return std::collections::HashMap::new();
            };
            let (items, texts) = match kind {
                Kind::Tool => (l.tools.as_slice(), l.raw_tools.as_slice()),
                Kind::Prompt => (
                    l.prompts.as_deref().unwrap_or_default(),
                    l.raw_prompts.as_slice(),
                ),
                // Decided by URI on the `Value` path: no texts kept.
                Kind::Resource => (&[][..], &[][..]),
            };
            items
                .iter()
                .zip(texts)
                .filter(|(_, t)| !t.is_empty())
                .filter_map(|(i, t)| {
                    let name = i.get("name")?.as_str()?;
                    Some((t.clone(), table.get(name)?.state.visible()))
                })
                .collect()
        };
        let raw_tools = raw(Kind::Tool, &tools);
        let raw_prompts = raw(Kind::Prompt, &prompts);
        // Pages every item of which clients see pass as the child's bytes.
        let pages = self
            .last
            .iter()
            .flat_map(|l| &l.pages)
            .filter(|(kind, line, _)| {
                let raw = match kind {
                    Kind::Tool => &raw_tools,
                    Kind::Prompt | Kind::Resource => &raw_prompts,
                };
                crate::mcp::verdicts::raw_items(line, *kind)
                    .is_some_and(|items| items.iter().all(|t| raw.get(*t) == Some(&true)))
            })
            .filter_map(|(kind, line, at)| {
                Some(crate::mcp::verdicts::Page {
                    kind: *kind,
                    before: line.get(..at.start)?.into(),
                    after: line.get(at.end..)?.into(),
                })
            })
            .collect();
        let mut verdicts = Verdicts {
            ledger: None,
            server: self.name.clone(),
            policy: self.policy(),
            pages,
            raw_tools,
            raw_prompts,
            tools,
            prompts,
            resources,
            skills: self
                .last
                .as_ref()
                .map(crate::mcp::pinned::skills)
                .unwrap_or_default(),
        };
        let shown = |kind: Kind, name: &str| verdicts.shows(kind, name);
        let gates = self.ledger.gates.as_ref();
        verdicts.ledger = (self.ledger.served.as_ref())
            .and_then(|s| FromLedger::build(s, gates, shown).map(Arc::new));
        // Every listed tool, held back or not, so that a clash shows on
        // both sides whichever server listed first (SPEC §24).
        let listed: Vec<(String, String)> = fw
            .tools
            .current
            .iter()
            .map(|v| (v.name.clone(), v.digest.clone()))
            .collect();
        self.entry.set(listed);
        self.verdicts.send_replace(Arc::new(verdicts));
    }

    /// The capability gates the ledger keeps (D280).
    pub(crate) fn kept_gates(&self) -> Option<&xy_core::protocol::mcp::ServedGates> {
        self.ledger.gates.as_ref()
    }

    /// Keeps the gates learnt for a listing (D280): the ledger answers
    /// with them, and the next daemon start needs no probe for it.
    /// Returns whether they are new (the verdicts were published again).
    pub(crate) fn keep_gates(&mut self, gates: xy_core::protocol::mcp::ServedGates) -> bool {
        if self.ledger.gates.as_ref() == Some(&gates) {
            return false;
        }
        self.ledger.gates = Some(gates);
        self.publish();
        self.save();
        true
    }

    /// The names that are no listed tool or prompt.
    pub(crate) fn unknown(&self, names: &[String]) -> Vec<String> {
        let fw = &self.ledger.firewall;
        let listed = |n: &str| {
            fw.tools
                .current
                .iter()
                .chain(&fw.prompts.current)
                .chain(&fw.resources.current)
                .any(|v| v.name == n)
        };
        names.iter().filter(|n| !listed(n)).cloned().collect()
    }

    /// Every name is a listed tool or prompt; else the ones that are not.
    fn all_listed(&self, names: &[String]) -> Result<(), Refused> {
        let unknown = self.unknown(names);
        if unknown.is_empty() {
            Ok(())
        } else {
            Err(Refused::Unknown(unknown))
        }
    }

    /// The expected items not listed with the digest expected.
    fn changed(&self, expect: &[ExpectedDigest]) -> Vec<ChangedItem> {
        let fw = &self.ledger.firewall;
        let listed = || {
            fw.tools
                .current
                .iter()
                .chain(&fw.prompts.current)
                .chain(&fw.resources.current)
        };
        expect
            .iter()
            .filter_map(|e| {
                let current: Vec<String> = listed()
                    .filter(|v| v.name == e.name)
                    .map(|v| v.digest.clone())
                    .collect();
                (!current.contains(&e.digest)).then(|| ChangedItem {
                    name: e.name.clone(),
                    expected: e.digest.clone(),
                    current,
                })
            })
            .collect()
    }

    /// `tools_approve`: approves the named items (tools and prompts of
    /// that name) as currently listed, or with `all` every held-back one,
    /// or exactly the items listed with the digests expected (none if one
    /// is not).
    pub(crate) fn approve(
        &mut self,
        ask: &Approval,
        now: SystemTime,
    ) -> Result<Vec<String>, Refused> {
        let changed = self.changed(&ask.expect);
        if !changed.is_empty() {
            tracing::warn!(server = %self.name, ?changed, "approval refused: not listed as shown");
            return Err(Refused::Changed(changed));
        }
        self.all_listed(&ask.names)?;
        let mut approved = Vec::new();
        for kind in [Kind::Tool, Kind::Prompt, Kind::Resource] {
            let section = section(&mut self.ledger.firewall, kind);
            for v in &mut section.current {
                let wanted = ask.names.contains(&v.name)
                    || (ask.all && !v.state.visible())
                    || ask
                        .expect
                        .iter()
                        .any(|e| e.name == v.name && e.digest == v.digest);
                if !wanted {
                    continue;
                }
                section.denied.remove(&v.name);
                section.approved.insert(
                    v.name.clone(),
                    ApprovedVersion {
                        digest: v.digest.clone(),
                        approved_at: xy_core::time::rfc3339_ms(now),
                        title: v.title.clone(),
                        description: v.description.clone(),
                        input_schema: v
                            .input_schema
                            .as_ref()
                            .and_then(|c| serde_json::from_str(c.as_str()).ok()),
                    },
                );
                v.state = ToolState::Approved;
                v.reasons.clear();
                if !approved.contains(&v.name) {
                    approved.push(v.name.clone());
                }
            }
        }
        self.ledger.firewall.seen |= self.mode != FirewallMode::Off;
        tracing::info!(server = %self.name, ?approved, "approved by the user");
        self.refresh(now);
        self.save();
        Ok(approved)
    }

    /// `tools_deny`: the named items are held back until approved.
    pub(crate) fn deny(
        &mut self,
        names: &[String],
        now: SystemTime,
    ) -> Result<Vec<String>, Refused> {
        self.all_listed(names)?;
        let mut denied = Vec::new();
        for kind in [Kind::Tool, Kind::Prompt, Kind::Resource] {
            let section = section(&mut self.ledger.firewall, kind);
            for v in &mut section.current {
                if !names.contains(&v.name) {
                    continue;
                }
                section.approved.remove(&v.name);
                section.denied.insert(v.name.clone());
                v.state = ToolState::Denied;
                v.reasons = vec![format!("you denied this {}", kind.word())];
                if !denied.contains(&v.name) {
                    denied.push(v.name.clone());
                }
            }
        }
        tracing::info!(server = %self.name, ?denied, "denied by the user");
        self.refresh(now);
        self.save();
        Ok(denied)
    }

    /// `status.mcp`.
    pub(crate) fn status(&self) -> Option<McpStatus> {
        self.status.clone()
    }

    /// `list[].tool_count`: the tools listed after this spawn.
    pub(crate) fn tool_count(&self) -> Option<u32> {
        self.status
            .as_ref()
            .and_then(|s| s.tool_count)
            .or(self.listed_count)
    }

    /// `list[].tools_held`: listed tools and prompts clients do not see.
    pub(crate) fn held_count(&self) -> u32 {
        let v = self.verdicts.borrow();
        let held = v
            .tools
            .values()
            .chain(v.prompts.values())
            .chain(v.resources.values())
            .filter(|x| !x.state.visible())
            .count();
        u32::try_from(held).unwrap_or(u32::MAX)
    }

    /// The `tools` result: the newest snapshot against the one before,
    /// with the firewall's states.
    pub(crate) fn tools(&self) -> ToolsResult {
        let mut r = self.ledger.result(&self.name);
        r.mode = Some(self.mode);
        // Shadowing as it stands now, on both sides of a clash: a server
        // that listed first learns of a later one without a new decision.
        if self.mode != FirewallMode::Off
            && let Some(current) = &mut r.current
        {
            let foreign = self.directory.others(&self.name);
            for t in &mut current.tools {
                let warning = t
                    .digest
                    .as_deref()
                    .and_then(|d| xy_core::firewall::shadowing(&foreign, &t.name, d));
                if let Some(w) = warning
                    && !t.reasons.contains(&w)
                {
                    t.warnings.push(w);
                }
            }
        }
        r
    }

    /// Takes a successful probe's findings: the server's self-description
    /// (`status.mcp`, SPEC §12). Its tools are xy's own listing's: the
    /// probe does not list them again.
    pub(crate) fn observe(&mut self, info: &McpInfo) {
        let first = self.status.is_none();
        let mut status = self.status.take().unwrap_or(McpStatus {
            protocol_version: String::new(),
            era: info.era,
            server_name: None,
            server_version: None,
            tool_count: None,
            tools_added: Vec::new(),
            tools_removed: Vec::new(),
            tools_changed: Vec::new(),
            listed_at: None,
        });
        status.protocol_version = info.protocol_version.clone();
        status.era = info.era;
        status.server_name = info.server_name.clone();
        status.server_version = info.server_version.clone();
        if first {
            let listed = self
                .snapshot_this_spawn
                .then_some(self.ledger.snapshots.as_slice());
            Self::listed_fields(listed, &mut status);
        }
        self.status = Some(status);
    }

    /// `status.mcp`'s tool fields: this spawn's snapshot (the newest of
    /// `snapshots`) against the one before, or none.
    fn listed_fields(snapshots: Option<&[ToolSnapshot]>, status: &mut McpStatus) {
        let Some((current, before)) = snapshots.and_then(|s| s.split_last()) else {
            status.tool_count = None;
            status.listed_at = None;
            status.tools_added.clear();
            status.tools_removed.clear();
            status.tools_changed.clear();
            return;
        };
        let d = diff_tools(before.last().map(|s| s.tools.as_slice()), &current.tools);
        status.tool_count = Some(u32::try_from(current.tools.len()).unwrap_or(u32::MAX));
        status.listed_at = Some(current.ts.clone());
        status.tools_added = d.added;
        status.tools_removed = d.removed;
        status.tools_changed = d.changed;
    }
}

fn section(fw: &mut xy_core::protocol::mcp::FirewallLedger, kind: Kind) -> &mut ItemLedger {
    match kind {
        Kind::Tool => &mut fw.tools,
        Kind::Prompt => &mut fw.prompts,
        Kind::Resource => &mut fw.resources,
    }
}

/// The schema text a review diffs: a tool's `inputSchema`, a prompt's
/// `arguments`, a pinned resource's `_meta.ui` (an app's CSP).
fn schema_of(kind: Kind, item: &Value) -> Option<&Value> {
    item.get(match kind {
        Kind::Tool => "inputSchema",
        Kind::Prompt => "arguments",
        Kind::Resource => "ui",
    })
}

fn text(item: &Value, key: &str) -> Option<String> {
    item.get(key).and_then(Value::as_str).map(str::to_owned)
}

fn approved_version(kind: Kind, item: &Value, digest: &str, now: SystemTime) -> ApprovedVersion {
    ApprovedVersion {
        digest: digest.to_owned(),
        approved_at: xy_core::time::rfc3339_ms(now),
        title: text(item, "title"),
        description: text(item, "description"),
        input_schema: schema_of(kind, item).cloned(),
    }
}

fn verdict(
    kind: Kind,
    item: &Value,
    name: &str,
    digest: String,
    state: ToolState,
    reasons: Vec<String>,
) -> ItemVerdict {
    ItemVerdict {
        name: name.to_owned(),
        digest,
        state,
        reasons,
        title: text(item, "title"),
        description: text(item, "description"),
        input_schema: schema_of(kind, item).map(CanonicalJson::new),
    }
}

#[cfg(test)]
#[path = "mcp_state_tests.rs"]
mod tests;
