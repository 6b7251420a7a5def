//! A server's process tree: everything a stop must reach, beyond the process
//! group a `setsid` or a double fork leaves (SPEC §24 "Stop means stop",
//! D175). The root is made a child subreaper at spawn (Linux), so while it
//! lives every descendant hangs under it whatever it did; what outlives the
//! root is reparented to `xyd` (itself a subreaper) and is found there as an
//! adopted process. A SIGKILL freezes the tree first (SIGSTOP until a walk
//! finds nothing new), so nothing forks between the walk and the kill. Also
//! the reaping of what `xyd` adopts, by pid, never `waitpid(-1)`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::group;
use super::procfs::{self, ProcStat, Table};

/// Walks a freeze takes at most before it kills what it found: each walk
/// stops every member it meets, so only a process forked before its parent
/// was stopped can be new, and a fork chain cannot outrun many rounds.
const FREEZE_ROUNDS: usize = 64;

/// New members one census adds at most (a fork bomb must not make the
/// record, or the walk, unbounded; the stop's walk still sees them all).
const MAX_CENSUS: usize = 4096;

/// How soon a live child's tree is followed for its record after a spawn
/// or a change: a descendant born and orphaned within one period and then
/// lost with `xyd` and the root is the sweep's blind spot (D175).
pub(crate) const CENSUS_EVERY: Duration = Duration::from_secs(2);

/// The census's period once a tree has stopped changing: it doubles from
/// [`CENSUS_EVERY`] up to this, so an idle fleet does not wake xyd every
/// two seconds per server (issue 37's idle promise), while a server that
/// daemonises at its start is recorded within seconds.
pub(crate) const CENSUS_IDLE_EVERY: Duration = Duration::from_secs(64);

/// One spawned child's tree: its root (the group leader), its group, and
/// every member a walk met, so a member that outlived the root is still
/// found (by pid and start time, never a reused pid).
#[derive(Debug)]
pub(crate) struct Tree {
    root: i32,
    root_start: Option<u64>,
    pgid: i32,
    met: Mutex<HashMap<i32, u64>>,
}

impl Tree {
    /// The tree of a root known by its record (`start`: its start time).
    pub(crate) fn of(root: i32, start: Option<u64>, pgid: i32) -> Tree {
        Tree {
            root,
            root_start: start,
            pgid,
            met: Mutex::new(HashMap::new()),
        }
    }

    /// The live members of the tree, zombies included, the root included
    /// while it is the process we spawned: the group's members, the root's
    /// descendants, every member met before and its descendants, and the
    /// processes `xyd` adopted (see [`adopted`]).
    fn walk(&self, t: &Table) -> Vec<(i32, ProcStat)> {
        let me = own_pid();
        let mut met = self
            .met
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let same = |pid: i32, start: u64| t.get(pid).is_some_and(|s| s.start_ticks == start);
        let mut tops: Vec<i32> = met
            .iter()
            .filter(|(p, s)| same(**p, **s))
            .map(|(p, _)| *p)
            .collect();
        if self.root_start.is_some_and(|s| same(self.root, s)) {
            tops.push(self.root);
        }
        if self.pgid > 1 {
            tops.extend(
                t.iter()
                    .filter(|(_, s)| s.pgrp == self.pgid)
                    .map(|(p, _)| p),
            );
        }
        tops.extend(adopted(t));
        tops.sort_unstable();
        tops.dedup();
        let mut all = t.descendants(&tops);
        all.extend(tops);
        all.sort_unstable();
        all.dedup();
        let members: Vec<(i32, ProcStat)> = all
            .into_iter()
            .filter(|p| *p != me && *p > 1)
            .filter_map(|p| Some((p, *t.get(p)?)))
            .collect();
        for (p, s) in &members {
            if *p != self.root {
                met.insert(*p, s.start_ticks);
            }
        }
        members
    }

    /// Whether the root is still the live process we spawned.
    pub(crate) fn root_alive(&self) -> bool {
        self.root_start.is_some()
            && group::start_time(self.root) == self.root_start
            && group::pid_alive(self.root)
    }

    /// Members met so far (pid, start), for the child record.
    pub(crate) fn met(&self) -> Vec<(i32, u64)> {
        let met = self
            .met
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut v: Vec<(i32, u64)> = met.iter().map(|(p, s)| (*p, *s)).collect();
        v.sort_unstable();
        v
    }

    /// Adds members known from elsewhere (a record of a previous `xyd`).
    pub(crate) fn meet(&self, members: &[(i32, u64)]) {
        self.met
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend(members.iter().copied());
    }

    /// Follows the root's children links down (no scan of every process)
    /// and forgets members that ended: whether the members met changed.
    /// Run now and then while the child lives, so the record names the
    /// descendants a `kill -9` of `xyd` would otherwise lose once the root
    /// ends too (D175).
    pub(crate) fn census(&self) -> bool {
        let mut met = self
            .met
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let before = met.len();
        met.retain(|p, s| group::start_time(*p) == Some(*s));
        let mut changed = met.len() != before;
        let mut queue: Vec<i32> = met.keys().copied().collect();
        if self.root_alive() {
            queue.push(self.root);
        }
        let mut budget = MAX_CENSUS;
        while let Some(p) = queue.pop() {
            for c in procfs::children(p) {
                if met.contains_key(&c) || budget == 0 {
                    continue;
                }
                budget -= 1;
                if let Some(start) = group::start_time(c) {
                    met.insert(c, start);
                    queue.push(c);
                    changed = true;
                }
            }
        }
        changed
    }

    /// Sends `sig` to the group and to every member of the tree. SIGKILL
    /// freezes the tree first, then kills every frozen member at once.
    pub(crate) fn signal(&self, sig: Signal) {
        if sig == Signal::SIGKILL {
            self.kill();
            return;
        }
        // Walked before the group hears it: a root that exits on SIGTERM
        // hands its descendants to its reaper, out of the walk's reach.
        let members = self.walk(&procfs::table());
        let _ = group::signal_group(self.pgid, sig);
        for (pid, s) in members {
            if !s.is_dead() {
                signal_checked(pid, s.start_ticks, sig);
            }
        }
    }

    /// SIGSTOP until a walk meets no new member (bounded), then SIGKILL to
    /// the group and to every member stopped. A stopped process cannot
    /// fork, so what the last walk saw is the whole tree.
    fn kill(&self) {
        let mut frozen: HashMap<i32, u64> = HashMap::new();
        let _ = group::signal_group(self.pgid, Signal::SIGSTOP);
        for _ in 0..FREEZE_ROUNDS {
            let fresh: Vec<(i32, u64)> = self
                .walk(&procfs::table())
                .into_iter()
                .filter(|(p, s)| !s.is_dead() && !frozen.contains_key(p))
                .map(|(p, s)| (p, s.start_ticks))
                .collect();
            if fresh.is_empty() {
                break;
            }
            for (pid, start) in fresh {
                signal_checked(pid, start, Signal::SIGSTOP);
                frozen.insert(pid, start);
            }
        }
        let _ = group::signal_group(self.pgid, Signal::SIGKILL);
        for (pid, start) in frozen {
            signal_checked(pid, start, Signal::SIGKILL);
        }
    }

    /// Whether any member of the tree is alive (zombies are not). Zombies
    /// that are `xyd`'s are reaped by pid, except `skip` (the root, which
    /// its waiter reaps).
    pub(crate) fn alive(&self, skip: Option<i32>) -> bool {
        let me = u32::try_from(own_pid()).unwrap_or_default();
        let mut alive = false;
        for (pid, s) in self.walk(&procfs::table()) {
            if !s.is_dead() {
                alive = true;
            } else if s.ppid == me && Some(pid) != skip {
                reap(pid);
            }
        }
        alive
    }

    /// Polls until no member of the tree is alive. Starts fast and settles
    /// at 50 ms; each walk runs on the blocking pool (a `/proc` scan must
    /// not hold an async worker).
    pub(crate) async fn wait_gone(self: std::sync::Arc<Self>, skip: Option<i32>) {
        let mut delay = Duration::from_millis(2);
        loop {
            let tree = self.clone();
            let alive = tokio::task::spawn_blocking(move || tree.alive(skip))
                .await
                .unwrap_or(true);
            if !alive {
                return;
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_millis(50));
        }
    }
}

/// The processes `xyd` adopted (their parent died and `xyd`, the
/// subreaper, inherited them), told from the children `xyd` spawned itself:
/// those stay in `xyd`'s session and are either a group leader (servers,
/// hooks, helpers: `process_group(0)`) or in `xyd`'s own group. An adopted
/// process that left the session (`setsid`) or sits in another process's
/// group is not one of them. With every server root a subreaper, an
/// adopted process is what outlived its root: nothing of a live server.
pub(crate) fn adopted(t: &Table) -> Vec<i32> {
    let me = own_pid();
    let Ok(me_u) = u32::try_from(me) else {
        return Vec::new();
    };
    let sid = nix::unistd::getsid(None).map(Pid::as_raw).unwrap_or(-1);
    let pgrp = nix::unistd::getpgrp().as_raw();
    t.iter()
        .filter(|(pid, s)| {
            s.ppid == me_u && (s.session != sid || (s.pgrp != *pid && s.pgrp != pgrp))
        })
        .map(|(pid, _)| pid)
        .collect()
}

/// Stops every process `xyd` adopted and their descendants (the end of a
/// shutdown: no server is left to own them) and waits up to `within` for
/// them to go, reaping them. Returns how many were stopped.
pub(crate) fn kill_adopted(within: Duration) -> usize {
    let tree = Tree::of(0, None, 0);
    let found = tree
        .walk(&procfs::table())
        .iter()
        .filter(|(_, s)| !s.is_dead())
        .count();
    if found == 0 {
        return 0;
    }
    tree.kill();
    let deadline = std::time::Instant::now() + within;
    let mut delay = Duration::from_millis(2);
    while tree.alive(None) && std::time::Instant::now() < deadline {
        std::thread::sleep(delay);
        delay = (delay * 2).min(Duration::from_millis(50));
    }
    found
}

/// Reaps the zombies among the processes `xyd` adopted.
pub(crate) fn reap_adopted() {
    let t = procfs::table();
    for pid in adopted(&t) {
        if t.get(pid).is_some_and(ProcStat::is_dead) {
            reap(pid);
        }
    }
}

/// Reaps adopted zombies each time a child of `xyd` ends (SIGCHLD), for
/// as long as the runtime runs. Spawn it once, after becoming a subreaper.
pub async fn reap_adopted_forever() {
    let Ok(mut sigchld) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::child())
    else {
        tracing::warn!("cannot listen for SIGCHLD; adopted processes are reaped only at stops");
        return;
    };
    while sigchld.recv().await.is_some() {
        let _ = tokio::task::spawn_blocking(reap_adopted).await;
    }
}

/// Makes the calling process a child subreaper (Linux); call it in the
/// child between fork and exec: the setting survives `execve`, so the
/// server's orphans stay under it instead of escaping to `xyd` or PID 1.
/// Async-signal-safe (one `prctl`).
#[cfg(target_os = "linux")]
pub(crate) fn subreaper_in_child() -> std::io::Result<()> {
    nix::sys::prctl::set_child_subreaper(true).map_err(std::io::Error::from)
}

fn own_pid() -> i32 {
    i32::try_from(std::process::id()).unwrap_or_default()
}

/// Signals `pid` if it is still the process that started at `start`.
fn signal_checked(pid: i32, start: u64, sig: Signal) {
    if pid <= 1 || group::start_time(pid) != Some(start) {
        return;
    }
    match kill(Pid::from_raw(pid), sig) {
        Ok(()) | Err(Errno::ESRCH) => {}
        Err(e) => {
            tracing::warn!(pid, signal = %sig, error = %e, "cannot signal a server's process")
        }
    }
}

/// Collects the exit status of `pid` if it is our zombie (ECHILD otherwise).
fn reap(pid: i32) {
    use nix::sys::wait::{WaitPidFlag, waitpid};
    let _ = waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG));
}
