//! Linux `/proc`: the process ids, and the fields of `/proc/<pid>/stat` that
//! group liveness, PID-reuse checks, port forensics and resource figures
//! read. One parser, so `comm` (which may hold spaces and parens) is handled
//! once. Also the process [`Table`]: one snapshot of every process's parent,
//! group, session and start, with the tree walks (descendants, ancestors)
//! that stopping a server's whole tree and the peer check need; loaded from
//! `/proc` on Linux and from libproc on macOS. The parser and the walks are
//! pure and tested on every OS.

use std::collections::{HashMap, HashSet};

/// The fields of one `/proc/<pid>/stat` line that xy uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcStat {
    /// Field 3: `R`, `S`, `Z` (zombie), `X` (dead), …
    pub(crate) state: char,
    /// Field 4.
    pub(crate) ppid: u32,
    /// Field 5: the process group.
    pub(crate) pgrp: i32,
    /// Field 6: the session.
    pub(crate) session: i32,
    /// utime + stime (fields 14, 15), in clock ticks.
    pub(crate) cpu_ticks: u64,
    /// Field 22: start time, in clock ticks after boot.
    pub(crate) start_ticks: u64,
    /// Field 24: resident set, in pages.
    pub(crate) rss_pages: u64,
}

impl ProcStat {
    /// Zombies and dead entries are not alive (SPEC §4).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) fn is_dead(&self) -> bool {
        self.state == 'Z' || self.state == 'X'
    }
}

/// Parses `/proc/<pid>/stat` after the last `)` (`comm` may hold anything).
// Read on Linux; tested everywhere.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) fn parse_stat(text: &str) -> Option<ProcStat> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // f[0] is field 3 (state): field n is f[n - 3].
    let num = |n: usize| f.get(n - 3).and_then(|s| s.parse::<u64>().ok());
    Some(ProcStat {
        state: f.first()?.chars().next()?,
        ppid: f.get(1)?.parse().ok()?,
        pgrp: f.get(2)?.parse().ok()?,
        session: f.get(3)?.parse().ok()?,
        cpu_ticks: num(14)? + num(15)?,
        start_ticks: num(22)?,
        rss_pages: num(24)?,
    })
}

/// `/proc/<pid>/stat` of one process, if it exists.
#[cfg(target_os = "linux")]
pub(crate) fn stat(pid: i32) -> Option<ProcStat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Every process id in `/proc` (an empty list if it cannot be read).
#[cfg(target_os = "linux")]
pub(crate) fn pids() -> impl Iterator<Item = i32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()))
}

/// One snapshot of the processes this user can see, by pid: what a walk of
/// the process tree reads. A snapshot ages at once (processes fork and
/// exit): callers that must see every member walk again until nothing new
/// appears.
#[derive(Debug, Clone, Default)]
pub(crate) struct Table {
    procs: HashMap<i32, ProcStat>,
}

impl Table {
    /// A table of the given entries (the OS loaders and tests build it).
    pub(crate) fn of(entries: impl IntoIterator<Item = (i32, ProcStat)>) -> Table {
        Table {
            procs: entries.into_iter().collect(),
        }
    }

    /// One process's entry.
    pub(crate) fn get(&self, pid: i32) -> Option<&ProcStat> {
        self.procs.get(&pid)
    }

    /// Every entry.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (i32, &ProcStat)> {
        self.procs.iter().map(|(p, s)| (*p, s))
    }

    /// Every descendant of `roots` (children, their children, …), roots
    /// excluded, zombies included (the caller decides what a zombie means).
    /// Parent links are the kernel's current ones: a process whose parent
    /// died hangs under its reaper (a subreaper, or PID 1), not its origin.
    pub(crate) fn descendants(&self, roots: &[i32]) -> Vec<i32> {
        let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
        for (pid, s) in &self.procs {
            if let Ok(ppid) = i32::try_from(s.ppid) {
                children.entry(ppid).or_default().push(*pid);
            }
        }
        let mut seen: HashSet<i32> = roots.iter().copied().collect();
        let mut out = Vec::new();
        let mut queue: Vec<i32> = roots.to_vec();
        while let Some(p) = queue.pop() {
            for &c in children.get(&p).map(Vec::as_slice).unwrap_or_default() {
                // A pid seen twice (a cycle in a torn snapshot) ends there.
                if seen.insert(c) {
                    out.push(c);
                    queue.push(c);
                }
            }
        }
        out
    }

    /// The parent chain of `pid`, nearest first, up to the first process
    /// the table does not hold (PID 1's parent 0 ends every chain). Bounded
    /// by the table's size, so a torn snapshot cannot loop.
    // The peer check's ancestry walk (issue 38) shares this table.
    #[allow(dead_code)]
    pub(crate) fn ancestors(&self, pid: i32) -> Vec<i32> {
        let mut out = Vec::new();
        let mut at = pid;
        while out.len() <= self.procs.len() {
            let Some(s) = self.procs.get(&at) else { break };
            let Ok(parent) = i32::try_from(s.ppid) else {
                break;
            };
            if parent <= 0 || parent == pid || out.contains(&parent) {
                break;
            }
            out.push(parent);
            at = parent;
        }
        out
    }
}

/// The children of `pid`, from each thread's `children` file (no scan of
/// every process; empty if the kernel lacks `CONFIG_PROC_CHILDREN` or the
/// process is gone).
#[cfg(target_os = "linux")]
pub(crate) fn children(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
    {
        if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
            out.extend(
                text.split_whitespace()
                    .filter_map(|c| c.parse::<i32>().ok()),
            );
        }
    }
    out
}

/// One process's parent, group, session, state and start (libproc;
/// `cpu_ticks` and `rss_pages` are not filled).
#[cfg(target_os = "macos")]
pub(crate) fn stat(pid: i32) -> Option<ProcStat> {
    macos::stat(pid)
}

/// The children of `pid` (libproc).
#[cfg(target_os = "macos")]
pub(crate) fn children(pid: i32) -> Vec<i32> {
    macos::children(pid)
}

/// A [`Table`] of every process in `/proc` (an empty one if it cannot be
/// read; a process that exits mid-walk is left out).
#[cfg(target_os = "linux")]
pub(crate) fn table() -> Table {
    Table::of(pids().filter_map(|p| Some((p, stat(p)?))))
}

/// A [`Table`] of every process libproc lists (`cpu_ticks` and
/// `rss_pages` are not filled: the tree walks do not read them).
#[cfg(target_os = "macos")]
pub(crate) fn table() -> Table {
    Table::of(
        macos::all_pids()
            .into_iter()
            .filter_map(|p| Some((p, macos::stat(p)?))),
    )
}

#[cfg(target_os = "macos")]
mod macos {
    use super::ProcStat;

    /// Every pid libproc lists (it may miss one born during the call).
    #[allow(unsafe_code)]
    pub(super) fn all_pids() -> Vec<i32> {
        // SAFETY: a null buffer asks only for the count.
        let n = unsafe { libc::proc_listallpids(std::ptr::null_mut(), 0) };
        let Ok(count) = usize::try_from(n) else {
            return Vec::new();
        };
        // Room for processes born since the count.
        let mut pids = vec![0i32; count + 64];
        let bytes = libc::c_int::try_from(pids.len() * std::mem::size_of::<i32>())
            .unwrap_or(libc::c_int::MAX);
        // SAFETY: `pids` is writable for `bytes` bytes; the call writes at
        // most that many and returns how many pids it wrote.
        let n = unsafe { libc::proc_listallpids(pids.as_mut_ptr().cast::<libc::c_void>(), bytes) };
        pids.truncate(usize::try_from(n).unwrap_or(0));
        pids.retain(|p| *p > 0);
        pids
    }

    /// The children of `pid`.
    #[allow(unsafe_code)]
    pub(super) fn children(pid: i32) -> Vec<i32> {
        let mut pids = vec![0i32; 1024];
        let bytes = libc::c_int::try_from(pids.len() * std::mem::size_of::<i32>())
            .unwrap_or(libc::c_int::MAX);
        // SAFETY: `pids` is writable for `bytes` bytes; the call writes at
        // most that many and returns how many pids it wrote.
        let n = unsafe {
            libc::proc_listchildpids(pid, pids.as_mut_ptr().cast::<libc::c_void>(), bytes)
        };
        pids.truncate(usize::try_from(n).unwrap_or(0));
        pids.retain(|p| *p > 0);
        pids
    }

    /// One process's parent, group, session, state and start.
    #[allow(unsafe_code)]
    pub(super) fn stat(pid: i32) -> Option<ProcStat> {
        let mut info: libc::proc_bsdinfo = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::proc_bsdinfo>() as libc::c_int;
        // SAFETY: `info` is a properly sized, writable proc_bsdinfo; the call
        // writes at most `size` bytes into it and returns how many it wrote.
        let n = unsafe {
            libc::proc_pidinfo(
                pid,
                libc::PROC_PIDTBSDINFO,
                0,
                (&raw mut info).cast::<libc::c_void>(),
                size,
            )
        };
        if n != size {
            return None;
        }
        // SZOMB (5) is a zombie; the rest count as alive.
        let state = if info.pbi_status == 5 { 'Z' } else { 'S' };
        let session = nix::unistd::getsid(Some(nix::unistd::Pid::from_raw(pid)))
            .map(nix::unistd::Pid::as_raw)
            .unwrap_or(-1);
        Some(ProcStat {
            state,
            ppid: info.pbi_ppid,
            pgrp: i32::try_from(info.pbi_pgid).unwrap_or(-1),
            session,
            cpu_ticks: 0,
            start_ticks: info.pbi_start_tvsec * 1_000_000 + info.pbi_start_tvusec,
            rss_pages: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(ppid: u32) -> ProcStat {
        ProcStat {
            state: 'S',
            ppid,
            pgrp: 1,
            session: 1,
            cpu_ticks: 0,
            start_ticks: 0,
            rss_pages: 0,
        }
    }

    #[test]
    fn descendants_and_ancestors() {
        // 1 ─ 10 ─ 11 ─ 12
        //       └─ 13
        // 20 (another tree); 30 ↔ 31 (a torn snapshot's cycle)
        let t = Table::of([
            (1, entry(0)),
            (10, entry(1)),
            (11, entry(10)),
            (12, entry(11)),
            (13, entry(10)),
            (20, entry(1)),
            (30, entry(31)),
            (31, entry(30)),
        ]);
        let mut d = t.descendants(&[10]);
        d.sort_unstable();
        assert_eq!(d, vec![11, 12, 13]);
        assert!(t.descendants(&[12]).is_empty());
        assert_eq!(t.ancestors(12), vec![11, 10, 1]);
        assert!(t.ancestors(1).is_empty());
        assert_eq!(t.descendants(&[30]), vec![31]);
        assert_eq!(t.ancestors(30), vec![31]);
    }

    #[cfg(any(target_os = "linux", target_os = "macos"))]
    #[test]
    fn the_live_table_holds_us_under_our_parent() {
        let me = i32::try_from(std::process::id()).unwrap();
        let t = table();
        let parent = i32::try_from(std::os::unix::process::parent_id()).unwrap();
        assert_eq!(t.ancestors(me).first(), Some(&parent));
        assert!(t.descendants(&[parent]).contains(&me));
        assert_eq!(
            t.get(me).map(|s| s.session),
            nix::unistd::getsid(None).ok().map(nix::unistd::Pid::as_raw)
        );
    }

    #[test]
    fn stat_fields() {
        let line = "4242 (node (v20) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 987654 12345678 3000 18446744073709551615";
        let s = parse_stat(line).unwrap();
        assert_eq!(s.state, 'S');
        assert_eq!(s.ppid, 1);
        assert_eq!(s.pgrp, 4242);
        assert_eq!(s.session, 4242);
        assert_eq!(s.cpu_ticks, 300);
        assert_eq!(s.start_ticks, 987654);
        assert_eq!(s.rss_pages, 3000);
        assert_eq!(parse_stat("garbage"), None);
    }
}
