//! Which of xy's servers the process behind a peer socket belongs to, and so
//! what it may reach (SPEC §24, D170–D172). The edge asks once per
//! connection, after the owner uid check.
//!
//! Every process a server starts stays in `xyd`'s process tree: the server
//! is xyd's child, and on Linux xyd is a child subreaper, so a descendant
//! whose parent died (a double fork, a `setsid`) is reparented to xyd. The
//! servers' root pids are registered here at spawn ([`register`]). A holder
//! of the socket is then:
//!
//! - under a registered root: a member of that server, confined if the
//!   server is sandboxed;
//! - under a child of xyd that is no registered root (a reparented orphan,
//!   a sandbox probe): confined, server unknown, if it shows a sandbox
//!   xyd lacks (`no_new_privs`, or more seccomp filters: every sandboxed
//!   child has both), else not confined;
//! - outside xyd's tree: not a member of any server.
//!
//! Linux finds a holder by the socket's inode in `/proc/<pid>/fd` — a
//! holder remembered from an earlier walk (checked by one `readlink`,
//! D310), else the processes that held the last accepted sockets, then
//! xyd's tree, then every other process — and classes it by its parent
//! chain. A socket
//! no process is found holding (it closed, it is in flight in a Unix
//! socket, its holder hides its descriptors) is refused. macOS walks the
//! parent chain of the process the socket scan found (D172).

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock};

use super::{PeerError, SocketKey};

/// What a connecting process may reach through xy's listeners.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reach {
    /// Not a process of any sandboxed server: every listener.
    All,
    /// A process of a sandboxed server (`None`: one whose server is not
    /// known, e.g. reparented to xyd): only the servers its block's `reach`
    /// lines name.
    Only {
        server: Option<String>,
        reach: Arc<[String]>,
    },
}

impl Reach {
    /// Whether requests for `server` may be served.
    pub(crate) fn allows(&self, server: &str) -> bool {
        match self {
            Reach::All => true,
            Reach::Only { reach, .. } => reach.iter().any(|r| r == server),
        }
    }

    /// Whether nothing at all may be served (refused at the edge).
    pub(crate) fn nothing(&self) -> bool {
        matches!(self, Reach::Only { reach, .. } if reach.is_empty())
    }

    /// The confined server, for logs and refusals.
    pub(crate) fn who(&self) -> String {
        match self {
            Reach::All => "an unconfined process".to_owned(),
            Reach::Only {
                server: Some(s), ..
            } => format!("a process of sandboxed server {s}"),
            Reach::Only { server: None, .. } => {
                "a sandboxed process reparented to xyd (its server unknown)".to_owned()
            }
        }
    }
}

/// One spawned server's root process.
#[derive(Debug, Clone)]
struct Root {
    /// Which registration: a guard removes only its own, not a later
    /// server's that got the same pid.
    serial: u64,
    server: String,
    /// `Some`: sandboxed, with its `reach` lines.
    confined: Option<Arc<[String]>>,
}

impl Root {
    fn reach(&self) -> Reach {
        match &self.confined {
            None => Reach::All,
            Some(reach) => Reach::Only {
                server: Some(self.server.clone()),
                reach: Arc::clone(reach),
            },
        }
    }
}

/// The servers' root pids. Process-wide like the subreaper itself: every
/// listener of this xyd consults the same tree.
static ROOTS: RwLock<BTreeMap<i32, Root>> = RwLock::new(BTreeMap::new());

/// Holds a root's registration; dropping it forgets the pid (its
/// descendants still alive then count as reparented orphans).
#[derive(Debug)]
pub(crate) struct RootGuard {
    pid: i32,
    serial: u64,
}

impl Drop for RootGuard {
    fn drop(&mut self) {
        let mut roots = ROOTS.write().unwrap_or_else(PoisonError::into_inner);
        if roots
            .get(&self.pid)
            .is_some_and(|r| r.serial == self.serial)
        {
            roots.remove(&self.pid);
        }
    }
}

static SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Registers `pid` as the root process of `server`; `reach` is `Some` (its
/// `reach` lines) when the server runs sandboxed.
pub(crate) fn register(pid: i32, server: &str, reach: Option<&[String]>) -> RootGuard {
    let serial = SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    ROOTS
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(
            pid,
            Root {
                serial,
                server: server.to_owned(),
                confined: reach.map(Arc::from),
            },
        );
    RootGuard { pid, serial }
}

fn roots() -> BTreeMap<i32, Root> {
    ROOTS.read().unwrap_or_else(PoisonError::into_inner).clone()
}

/// Bounds on the walk of xyd's tree: past either, the peer is refused.
const MAX_DEPTH: usize = 64;
const MAX_PROCESSES: usize = 8192;

/// Why a peer's process is not known; every variant refuses.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProcessError {
    #[error("no process was found holding the connection's socket")]
    NoHolder,
    #[error(
        "xyd's process tree is past its walk bounds ({MAX_PROCESSES} processes, depth {MAX_DEPTH})"
    )]
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    TooMany,
    #[error(transparent)]
    Peer(#[from] PeerError),
    #[error("cannot read /proc: {0}")]
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    Io(std::io::Error),
}

/// What the process holding the socket `key` may reach. Blocking (reads
/// `/proc`): call it from the blocking pool.
pub(crate) fn reach_of(key: SocketKey) -> Result<Reach, ProcessError> {
    sys::reach_of(key, &roots())
}

/// Whether process `pid` belongs to a sandboxed spawn of this xyd — a
/// sandboxed server's process or descendant, an orphan of one, a `sandbox
/// test` probe: the one decision behind xy's TCP listeners ([`reach_of`])
/// and xyd's control socket (SPEC §24, D170–D172, D178, D212). A process
/// that cannot be looked up counts as confined; one outside xyd's tree
/// does not. Blocking (reads `/proc`, or asks macOS for the parent chain).
pub fn is_confined_process(pid: i32) -> bool {
    !matches!(sys::class_of(pid, &roots()), Ok(Reach::All))
}

/// The class of a child of xyd (pure): a registered root's, else an
/// orphan's by whether it shows a sandbox (`confined`).
fn top_class(roots: &BTreeMap<i32, Root>, pid: i32, confined: bool) -> Reach {
    match roots.get(&pid) {
        Some(root) => root.reach(),
        None if confined => Reach::Only {
            server: None,
            reach: Arc::from(Vec::new()),
        },
        None => Reach::All,
    }
}

/// A field of a `/proc/<pid>/status` text (pure).
fn status_field<'a>(status: &'a str, field: &str) -> Option<&'a str> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .map(str::trim)
}

/// Whether a child of xyd that is no registered root shows a sandbox
/// (pure, on the `/proc/<pid>/status` texts of it and of xyd): every
/// sandboxed spawn sets `no_new_privs` and installs one seccomp filter
/// more than xyd has (filters are inherited and never removed), so either
/// beyond xyd's own is one. Unreadable counts as confined (fail closed).
// Read on Linux; tested everywhere.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn shows_sandbox(status: Option<&str>, xyd: Option<&str>) -> bool {
    let Some(text) = status else { return true };
    let nnp = |t: &str| status_field(t, "NoNewPrivs").is_none_or(|v| v != "0");
    let filters = |t: &str| {
        status_field(t, "Seccomp_filters")
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let (xyd_nnp, xyd_filters) = xyd.map_or((false, 0), |x| (nnp(x), filters(x)));
    (nnp(text) && !xyd_nnp) || filters(text) > xyd_filters
}

#[cfg(target_os = "linux")]
mod sys {
    use std::collections::{BTreeMap, HashMap, HashSet};
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    use std::sync::{Mutex, PoisonError};

    use super::{
        MAX_DEPTH, MAX_PROCESSES, ProcessError, Reach, Root, SocketKey, shows_sandbox, top_class,
    };

    /// Outside holders remembered, tried first for the next connection.
    const HINTS: usize = 8;

    static HINT: Mutex<Vec<i32>> = Mutex::new(Vec::new());

    /// Remembers `pid` as a recent outside holder.
    fn hint(pid: i32) {
        let mut h = HINT.lock().unwrap_or_else(PoisonError::into_inner);
        h.retain(|p| *p != pid);
        h.insert(0, pid);
        h.truncate(HINTS);
    }

    fn hints() -> Vec<i32> {
        HINT.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    #[cfg(test)]
    pub(super) fn forget_hints() {
        HINT.lock().unwrap_or_else(PoisonError::into_inner).clear();
        SEEN.lock().unwrap_or_else(PoisonError::into_inner).take();
    }

    /// Sockets seen while walking descriptor tables, by inode: the process
    /// and descriptor that held each. One process opening many connections
    /// at once then costs one walk of its table rather than one per
    /// connection (quadratic in a flood); a remembered holder is believed
    /// only after one `readlink` shows it still holds the socket.
    static SEEN: Mutex<Option<HashMap<u64, (i32, u32)>>> = Mutex::new(None);

    /// Sockets remembered at most; past it the memory starts over.
    const SEEN_MAX: usize = 16_384;

    fn remember(pid: i32, sockets: &[(u64, u32)]) {
        let mut seen = SEEN.lock().unwrap_or_else(PoisonError::into_inner);
        let seen = seen.get_or_insert_with(HashMap::new);
        if seen.len() + sockets.len() > SEEN_MAX {
            seen.clear();
        }
        for &(inode, fd) in sockets.iter().take(SEEN_MAX) {
            seen.insert(inode, (pid, fd));
        }
    }

    /// The remembered holder of `inode`, if it still holds it.
    pub(super) fn recalled(inode: u64) -> Option<i32> {
        let (pid, fd) = *SEEN
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()?
            .get(&inode)?;
        let target = std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).ok()?;
        (socket_inode(target.as_os_str()) == Some(inode)).then_some(pid)
    }

    /// `socket:[N]` → N.
    fn socket_inode(link: &OsStr) -> Option<u64> {
        let digits = link
            .as_bytes()
            .strip_prefix(b"socket:[")?
            .strip_suffix(b"]")?;
        std::str::from_utf8(digits).ok()?.parse().ok()
    }

    pub(super) fn reach_of(
        key: SocketKey,
        roots: &BTreeMap<i32, Root>,
    ) -> Result<Reach, ProcessError> {
        let SocketKey::Inode(inode) = key else {
            return Err(ProcessError::NoHolder);
        };
        let me = i32::try_from(std::process::id()).unwrap_or_default();
        let found = |pid: i32| -> Result<Reach, ProcessError> {
            let reach = ancestry(pid, me, roots)?;
            if reach == Reach::All {
                hint(pid);
            }
            Ok(reach)
        };
        if let Some(pid) = recalled(inode) {
            return found(pid);
        }
        // The last outside holders first: a client that connects again.
        let hinted = hints();
        for pid in hinted.iter().copied() {
            if holds(pid, inode)? {
                return found(pid);
            }
        }
        // Then xyd's tree, where every confined process is.
        let mut tree: HashSet<i32> = HashSet::new();
        let mut stack: Vec<(i32, usize)> = children(me).into_iter().map(|c| (c, 1)).collect();
        while let Some((pid, depth)) = stack.pop() {
            if !tree.insert(pid) {
                continue;
            }
            if tree.len() > MAX_PROCESSES || depth > MAX_DEPTH {
                return Err(ProcessError::TooMany);
            }
            if holds(pid, inode)? {
                return found(pid);
            }
            stack.extend(children(pid).into_iter().map(|c| (c, depth + 1)));
        }
        // Then everyone else (xyd itself included: its own connections,
        // in tests that serve in-process, are no server's).
        let rest = crate::os::procfs::pids().filter(|p| !hinted.contains(p) && !tree.contains(p));
        for pid in rest {
            if holds(pid, inode)? {
                return found(pid);
            }
        }
        Err(ProcessError::NoHolder)
    }

    /// See [`super::is_confined_process`].
    pub(super) fn class_of(pid: i32, roots: &BTreeMap<i32, Root>) -> Result<Reach, ProcessError> {
        let me = i32::try_from(std::process::id()).unwrap_or_default();
        ancestry(pid, me, roots)
    }

    /// The class of `pid` by its parent chain: a descendant of xyd takes
    /// the class of the child of xyd it descends from; anything else is no
    /// server's. A process that is gone by now is refused.
    fn ancestry(pid: i32, me: i32, roots: &BTreeMap<i32, Root>) -> Result<Reach, ProcessError> {
        if pid == me {
            return Ok(Reach::All);
        }
        let mut p = pid;
        for _ in 0..MAX_DEPTH {
            let stat = crate::os::procfs::stat(p).ok_or(ProcessError::NoHolder)?;
            let parent = i32::try_from(stat.ppid).map_err(|_| ProcessError::NoHolder)?;
            if parent == me {
                if roots.contains_key(&p) {
                    return Ok(top_class(roots, p, true));
                }
                let status = std::fs::read_to_string(format!("/proc/{p}/status")).ok();
                let xyd = std::fs::read_to_string("/proc/self/status").ok();
                return Ok(top_class(
                    roots,
                    p,
                    shows_sandbox(status.as_deref(), xyd.as_deref()),
                ));
            }
            if parent <= 1 {
                return Ok(Reach::All);
            }
            p = parent;
        }
        Err(ProcessError::TooMany)
    }

    /// The children of every thread of `pid` (a child belongs to the thread
    /// that forked it; an orphan to a thread of its reaper). Where the
    /// kernel lists no `children`, the whole `/proc` is searched by ppid.
    fn children(pid: i32) -> Vec<i32> {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for task in tasks.flatten() {
            let mut path = task.path();
            path.push("children");
            match std::fs::read_to_string(&path) {
                Ok(text) => out.extend(
                    text.split_ascii_whitespace()
                        .filter_map(|p| p.parse::<i32>().ok()),
                ),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return by_ppid(pid),
                Err(_) => {}
            }
        }
        out
    }

    fn by_ppid(pid: i32) -> Vec<i32> {
        crate::os::procfs::pids()
            .filter(|p| {
                crate::os::procfs::stat(*p).is_some_and(|s| i64::from(s.ppid) == i64::from(pid))
            })
            .collect()
    }

    /// Whether one of `pid`'s descriptors is the socket `inode`; every
    /// socket of the table is remembered on the way (see [`SEEN`]). Out of
    /// descriptors ourselves, the walk stops at once (refused) rather than
    /// finding nothing in every process.
    fn holds(pid: i32, inode: u64) -> Result<bool, ProcessError> {
        let fds = match std::fs::read_dir(format!("/proc/{pid}/fd")) {
            Ok(fds) => fds,
            Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                return Err(ProcessError::Io(e));
            }
            Err(_) => return Ok(false),
        };
        let mut held = false;
        let mut sockets = Vec::new();
        for fd in fds.flatten() {
            let Ok(target) = std::fs::read_link(fd.path()) else {
                continue;
            };
            let Some(n) = socket_inode(target.as_os_str()) else {
                continue;
            };
            held |= n == inode;
            if let Some(fd) = fd.file_name().to_str().and_then(|f| f.parse().ok()) {
                sockets.push((n, fd));
            }
        }
        remember(pid, &sockets);
        Ok(held)
    }
}

#[cfg(target_os = "macos")]
mod sys {
    use std::collections::BTreeMap;

    use super::{MAX_DEPTH, ProcessError, Reach, Root, SocketKey, top_class};

    pub(super) fn reach_of(
        key: SocketKey,
        roots: &BTreeMap<i32, Root>,
    ) -> Result<Reach, ProcessError> {
        let SocketKey::Pid(holder) = key else {
            return Err(ProcessError::NoHolder);
        };
        class_of(holder, roots)
    }

    /// The class of `holder` by its parent chain, and its Seatbelt
    /// sandbox where the chain does not name a registered root.
    pub(super) fn class_of(
        holder: i32,
        roots: &BTreeMap<i32, Root>,
    ) -> Result<Reach, ProcessError> {
        let me = i32::try_from(std::process::id()).unwrap_or_default();
        let mut pid = holder;
        let mut child_of_me = None;
        for _ in 0..MAX_DEPTH {
            if let Some(root) = roots.get(&pid) {
                return Ok(root.reach());
            }
            let Some(parent) = crate::os::peer::macos::parent(pid) else {
                return Err(ProcessError::NoHolder);
            };
            if parent == me {
                child_of_me = Some(pid);
                break;
            }
            if parent <= 1 {
                break;
            }
            pid = parent;
        }
        // Orphans go to launchd here: a confined process that daemonised
        // is told by its Seatbelt sandbox, not its ancestry (D172).
        let sandboxed = crate::os::peer::macos::sandboxed(holder);
        Ok(match child_of_me {
            Some(top) => top_class(roots, top, sandboxed),
            None => top_class(roots, -1, sandboxed),
        })
    }
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
mod sys {
    use std::collections::BTreeMap;

    use super::{ProcessError, Reach, Root, SocketKey};

    /// No mechanism here: every peer is refused.
    pub(super) fn reach_of(
        _key: SocketKey,
        _roots: &BTreeMap<i32, Root>,
    ) -> Result<Reach, ProcessError> {
        Err(ProcessError::NoHolder)
    }

    /// Likewise every process counts as confined.
    pub(super) fn class_of(_pid: i32, _roots: &BTreeMap<i32, Root>) -> Result<Reach, ProcessError> {
        Err(ProcessError::NoHolder)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reach_allows_only_its_lines() {
        assert!(Reach::All.allows("x") && !Reach::All.nothing());
        let only = Reach::Only {
            server: Some("a".into()),
            reach: Arc::from(vec!["x".to_owned()]),
        };
        assert!(only.allows("x") && !only.allows("y") && !only.nothing());
        let none = Reach::Only {
            server: None,
            reach: Arc::from(Vec::new()),
        };
        assert!(none.nothing() && !none.allows("x"));
    }

    #[test]
    fn a_child_of_xyd_is_classed_by_its_registration_then_its_sandbox() {
        let mut roots = BTreeMap::new();
        roots.insert(
            10,
            Root {
                serial: 0,
                server: "boxed".into(),
                confined: Some(Arc::from(vec!["x".to_owned()])),
            },
        );
        roots.insert(
            11,
            Root {
                serial: 1,
                server: "free".into(),
                confined: None,
            },
        );
        assert_eq!(
            top_class(&roots, 10, false),
            Reach::Only {
                server: Some("boxed".into()),
                reach: Arc::from(vec!["x".to_owned()])
            }
        );
        assert_eq!(top_class(&roots, 11, true), Reach::All);
        assert!(top_class(&roots, 12, true).nothing());
        assert_eq!(top_class(&roots, 12, false), Reach::All);
    }

    #[test]
    fn a_sandbox_is_what_xyd_lacks_and_unknown_counts_as_one() {
        let plain = "Name:\tx\nNoNewPrivs:\t0\nSeccomp_filters:\t0\n";
        let boxed = "NoNewPrivs:\t1\nSeccomp_filters:\t1\n";
        assert!(!shows_sandbox(Some(plain), Some(plain)));
        assert!(shows_sandbox(Some(boxed), Some(plain)));
        assert!(shows_sandbox(Some("NoNewPrivs:\t1\n"), Some(plain)));
        assert!(
            shows_sandbox(Some("Name:\tx\n"), Some(plain)),
            "no field: set"
        );
        assert!(shows_sandbox(None, Some(plain)));
        // xyd itself under no_new_privs (a hardened service): the filter
        // count decides.
        let hardened = "NoNewPrivs:\t1\nSeccomp_filters:\t2\n";
        assert!(!shows_sandbox(Some(hardened), Some(hardened)));
        assert!(shows_sandbox(
            Some("NoNewPrivs:\t1\nSeccomp_filters:\t3\n"),
            Some(hardened)
        ));
    }

    #[test]
    fn registrations_end_with_their_guard() {
        let g = register(-77, "s", Some(&["x".to_owned()]));
        assert!(!roots()[&-77].reach().allows("y"));
        drop(g);
        assert!(!roots().contains_key(&-77));
        // A pid reused by a later server: the old guard leaves it alone.
        let old = register(-78, "old", None);
        let new = register(-78, "new", None);
        drop(old);
        assert_eq!(roots()[&-78].server, "new");
        drop(new);
    }

    #[test]
    #[cfg(target_os = "linux")]
    // `XY_PEER_TIMING=1 … -- --nocapture` prints what a lookup costs.
    #[allow(clippy::print_stderr)]
    fn our_own_connection_is_held_outside_xyds_tree() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, peer) = listener.accept().unwrap();
        let found = super::super::tcp_peer(peer, accepted.local_addr().unwrap())
            .unwrap()
            .unwrap();
        // The test process holds both ends and is no child of itself.
        assert_eq!(reach_of(found.key).unwrap(), Reach::All);
        if std::env::var_os("XY_PEER_TIMING").is_some() {
            let t = std::time::Instant::now();
            for _ in 0..200 {
                reach_of(found.key).unwrap();
            }
            let hinted = t.elapsed() / 200;
            // Without the hint: the walk of every process.
            let t = std::time::Instant::now();
            for _ in 0..20 {
                sys::forget_hints();
                reach_of(found.key).unwrap();
            }
            let cold = t.elapsed() / 20;
            let procs = crate::os::procfs::pids().count();
            eprintln!(
                "[peer] reach_of: {hinted:?} with the hint, {cold:?} without ({procs} processes)"
            );
        }
        drop(client);
        // Closed: nobody holds the client's socket any more.
        assert!(reach_of(found.key).is_err());
    }

    /// A flood from one process: the first lookup walks its descriptor
    /// table, and every other connection's holder is then known from it
    /// (checked with one `readlink`), not from one walk per connection.
    #[cfg(target_os = "linux")]
    #[test]
    fn one_process_with_many_connections_costs_one_walk_of_its_table() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut held = Vec::new();
        let inodes: Vec<u64> = (0..200)
            .map(|_| {
                let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
                let (accepted, peer) = listener.accept().unwrap();
                let found = super::super::tcp_peer(peer, accepted.local_addr().unwrap())
                    .unwrap()
                    .unwrap();
                held.push((client, accepted));
                let SocketKey::Inode(inode) = found.key else {
                    panic!("no inode on Linux")
                };
                inode
            })
            .collect();
        // The last one: a walk that found it (this one, or another test's
        // meanwhile) saw every other, all opened before it.
        let (last, others) = inodes.split_last().unwrap();
        assert_eq!(reach_of(SocketKey::Inode(*last)).unwrap(), Reach::All);
        let me = i32::try_from(std::process::id()).unwrap();
        let known = others
            .iter()
            .filter(|i| sys::recalled(**i) == Some(me))
            .count();
        assert_eq!(known, others.len(), "known after one walk");
        drop(held);
        assert_eq!(
            sys::recalled(inodes[1]),
            None,
            "a closed socket is not believed"
        );
    }
}
