//! Linux `/proc`: the process ids, and the fields of `/proc/<pid>/stat` that
//! group liveness, PID-reuse checks, port forensics and resource figures
//! read. One parser, so `comm` (which may hold spaces and parens) is handled
//! once. The parser is pure and tested on every OS.

/// The fields of one `/proc/<pid>/stat` line that xy uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcStat {
    /// Field 3: `R`, `S`, `Z` (zombie), `X` (dead), …
    pub(crate) state: char,
    /// Field 4.
    pub(crate) ppid: u32,
    /// Field 5: the process group.
    pub(crate) pgrp: i32,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields() {
        let line = "4242 (node (v20) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 987654 12345678 3000 18446744073709551615";
        let s = parse_stat(line).unwrap();
        assert_eq!(s.state, 'S');
        assert_eq!(s.ppid, 1);
        assert_eq!(s.pgrp, 4242);
        assert_eq!(s.cpu_ticks, 300);
        assert_eq!(s.start_ticks, 987654);
        assert_eq!(s.rss_pages, 3000);
        assert_eq!(parse_stat("garbage"), None);
    }
}
