//! Resource figures per server: CPU % and RSS summed over the whole process
//! group. Sampled only while `list`/`status` ask (no background polling): a
//! scan (one process-table pass for all groups) is reused for up to
//! [`MAX_AGE`], so figures are at most 1 s old; CPU % is averaged over the
//! interval between a group's two latest scans (since it started, for its
//! first).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use xy_core::protocol::ListEntry;

/// How long one scan's figures answer `list`/`status`: a tight `list` loop
/// costs one scan per second instead of one per call.
pub(crate) const MAX_AGE: Duration = Duration::from_secs(1);

/// A group scanned longer ago than this (it stopped, or nobody asked) is
/// forgotten, so the cache stays as small as the set of running servers.
const FORGET_AFTER: Duration = Duration::from_secs(60);

/// One process group's totals at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct GroupUsage {
    /// User + system CPU time of the group's live members.
    pub(crate) cpu: Duration,
    /// Resident memory of the group's live members.
    pub(crate) rss_bytes: u64,
    /// How long ago the group leader started, when known.
    pub(crate) leader_age: Option<Duration>,
}

/// The totals of every group in `pgids` that has a live member.
pub(crate) fn sample(pgids: &[i32]) -> HashMap<i32, GroupUsage> {
    if pgids.is_empty() {
        return HashMap::new();
    }
    os::sample(pgids)
}

/// The latest scan of one group.
#[derive(Debug, Clone, Copy)]
struct Scanned {
    at: Instant,
    /// Cumulative CPU time then, for the next delta.
    cpu: Duration,
    /// `(cpu_percent, rss_bytes)`; `None` when no live member was found.
    figures: Option<(f64, u64)>,
}

/// The latest scan of each group, keyed by pgid (a new child of the same
/// server is a new group and starts over).
#[derive(Debug, Default)]
pub(crate) struct Sampler {
    groups: HashMap<i32, Scanned>,
}

impl Sampler {
    /// Whether every group of `pgids` was scanned less than [`MAX_AGE`]
    /// before `now` (a group never scanned is not fresh).
    pub(crate) fn is_fresh(&self, pgids: &[i32], now: Instant) -> bool {
        pgids.iter().all(|g| {
            self.groups
                .get(g)
                .is_some_and(|s| now.saturating_duration_since(s.at) < MAX_AGE)
        })
    }

    /// Records a scan of `pgids` taken at `now`. `started` gives a group's
    /// run time when the scan could not tell (for a first CPU average).
    pub(crate) fn record(
        &mut self,
        pgids: &[i32],
        usage: &HashMap<i32, GroupUsage>,
        now: Instant,
        started: impl Fn(i32) -> Option<Duration>,
    ) {
        self.groups
            .retain(|_, s| now.saturating_duration_since(s.at) < FORGET_AFTER);
        for &pgid in pgids {
            let Some(u) = usage.get(&pgid) else {
                self.groups.insert(
                    pgid,
                    Scanned {
                        at: now,
                        cpu: Duration::ZERO,
                        figures: None,
                    },
                );
                continue;
            };
            let (cpu_before, wall) = match self.groups.get(&pgid) {
                Some(prev) if prev.figures.is_some() => {
                    (prev.cpu, now.saturating_duration_since(prev.at))
                }
                // First sample of this child: average since it started.
                _ => (
                    Duration::ZERO,
                    u.leader_age.or_else(|| started(pgid)).unwrap_or_default(),
                ),
            };
            let cpu_percent = percent(u.cpu.saturating_sub(cpu_before), wall);
            self.groups.insert(
                pgid,
                Scanned {
                    at: now,
                    cpu: u.cpu,
                    figures: Some((cpu_percent, u.rss_bytes)),
                },
            );
        }
    }

    /// Fills `cpu_percent` and `rss_bytes` of the running entries from the
    /// latest scans; others (and groups with no live member) get `null`.
    pub(crate) fn fill<T: Measured>(&self, entries: &mut [T]) {
        for e in entries.iter_mut() {
            let figures = e
                .pid()
                .and_then(|p| i32::try_from(p).ok())
                .and_then(|g| self.groups.get(&g))
                .and_then(|s| s.figures);
            e.set_figures(figures.map(|(c, _)| c), figures.map(|(_, r)| r));
        }
    }
}

/// A row showing one process group's figures: a [`ListEntry`], or a cached
/// `list` row with its per-call fields (`engine/listing.rs`).
pub(crate) trait Measured {
    /// The group leader (its pid is the pgid), when running.
    fn pid(&self) -> Option<u32>;
    /// How long it has run, for a first CPU average.
    fn uptime_secs(&self) -> Option<u64>;
    /// Sets `cpu_percent` and `rss_bytes`.
    fn set_figures(&mut self, cpu_percent: Option<f64>, rss_bytes: Option<u64>);
}

impl Measured for ListEntry {
    fn pid(&self) -> Option<u32> {
        self.pid
    }

    fn uptime_secs(&self) -> Option<u64> {
        self.uptime_secs
    }

    fn set_figures(&mut self, cpu_percent: Option<f64>, rss_bytes: Option<u64>) {
        self.cpu_percent = cpu_percent;
        self.rss_bytes = rss_bytes;
    }
}

/// `cpu / wall` in percent of one core, one decimal; 0 for no wall time.
pub(crate) fn percent(cpu: Duration, wall: Duration) -> f64 {
    if wall.is_zero() {
        return 0.0;
    }
    let p = cpu.as_secs_f64() / wall.as_secs_f64() * 100.0;
    (p * 10.0).round() / 10.0
}

/// One row of `ps -A -o pgid=,rss=,time=` (macOS): group, KiB, CPU time.
// Used on macOS; tested everywhere.
#[cfg_attr(target_os = "linux", allow(dead_code))]
pub(crate) fn parse_ps_row(line: &str) -> Option<(i32, u64, Duration)> {
    let mut f = line.split_whitespace();
    let pgid = f.next()?.parse().ok()?;
    let rss_kib: u64 = f.next()?.parse().ok()?;
    let time = parse_cpu_time(f.next()?)?;
    Some((pgid, rss_kib * 1024, time))
}

/// `ps` CPU time: `[[dd-]hh:]mm:ss[.cc]`.
#[cfg_attr(target_os = "linux", allow(dead_code))]
pub(crate) fn parse_cpu_time(s: &str) -> Option<Duration> {
    let (days, rest) = match s.split_once('-') {
        Some((d, r)) => (d.parse::<u64>().ok()?, r),
        None => (0, s),
    };
    let parts: Vec<&str> = rest.split(':').collect();
    let (h, m, sec) = match parts.as_slice() {
        [m, s] => (0, m.parse::<u64>().ok()?, *s),
        [h, m, s] => (h.parse::<u64>().ok()?, m.parse::<u64>().ok()?, *s),
        _ => return None,
    };
    let sec: f64 = sec.parse().ok()?;
    if !sec.is_finite() || sec < 0.0 {
        return None;
    }
    Some(Duration::from_secs((days * 24 + h) * 3600 + m * 60) + Duration::from_secs_f64(sec))
}

#[cfg(target_os = "linux")]
mod os {
    use std::collections::HashMap;
    use std::sync::OnceLock;
    use std::time::Duration;

    use super::GroupUsage;
    use crate::os::procfs::parse_stat;

    /// (clock ticks per second, page size).
    fn units() -> (u64, u64) {
        static UNITS: OnceLock<(u64, u64)> = OnceLock::new();
        *UNITS.get_or_init(|| {
            (
                sysconf(libc::_SC_CLK_TCK, 100),
                sysconf(libc::_SC_PAGESIZE, 4096),
            )
        })
    }

    #[allow(unsafe_code)]
    fn sysconf(name: libc::c_int, fallback: u64) -> u64 {
        // SAFETY: sysconf only reads a system constant; any name is valid
        // input (an unknown one returns -1, handled below).
        let v = unsafe { libc::sysconf(name) };
        u64::try_from(v).ok().filter(|v| *v > 0).unwrap_or(fallback)
    }

    fn uptime() -> Option<Duration> {
        let text = std::fs::read_to_string("/proc/uptime").ok()?;
        let secs: f64 = text.split_whitespace().next()?.parse().ok()?;
        Some(Duration::from_secs_f64(secs))
    }

    pub(super) fn sample(pgids: &[i32]) -> HashMap<i32, GroupUsage> {
        let (hz, page) = units();
        let ticks = |t: u64| Duration::from_nanos(t.saturating_mul(1_000_000_000) / hz);
        let up = uptime();
        let mut out: HashMap<i32, GroupUsage> = HashMap::new();
        for pid in crate::os::procfs::pids() {
            let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            let Some(st) = parse_stat(&text) else {
                continue;
            };
            if !pgids.contains(&st.pgrp) || st.is_dead() {
                continue;
            }
            let u = out.entry(st.pgrp).or_default();
            u.cpu += ticks(st.cpu_ticks);
            u.rss_bytes += st.rss_pages * page;
            if pid == st.pgrp {
                u.leader_age = up.map(|up| up.saturating_sub(ticks(st.start_ticks)));
            }
        }
        out
    }
}

#[cfg(not(target_os = "linux"))]
mod os {
    use std::collections::HashMap;

    use super::{GroupUsage, parse_ps_row};

    pub(super) fn sample(pgids: &[i32]) -> HashMap<i32, GroupUsage> {
        let mut out: HashMap<i32, GroupUsage> = HashMap::new();
        let Ok(o) = std::process::Command::new("ps")
            .args(["-A", "-o", "pgid=,rss=,time="])
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
        else {
            return out;
        };
        for line in String::from_utf8_lossy(&o.stdout).lines() {
            if let Some((pgid, rss, cpu)) = parse_ps_row(line)
                && pgids.contains(&pgid)
            {
                let u = out.entry(pgid).or_default();
                u.cpu += cpu;
                u.rss_bytes += rss;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xy_core::protocol::{Health, ServerState};

    fn entry(name: &str, pid: Option<u32>) -> ListEntry {
        ListEntry {
            name: name.into(),
            state: ServerState::Running,
            pid,
            port: 1,
            transport: xy_core::protocol::Transport::Http,
            url: "http://127.0.0.1:1/mcp".into(),
            uptime_secs: Some(10),
            restart_count: 0,
            last_exit: None,
            health: Health::default(),
            cpu_percent: None,
            rss_bytes: None,
            tool_count: None,
            tools_held: 0,
            agent_allow_restart: false,
            remote_url: None,
            gateway_url: None,
        }
    }

    #[test]
    fn ps_rows_and_cpu_times() {
        assert_eq!(
            parse_ps_row("  4242  13104   0:01.50"),
            Some((4242, 13104 * 1024, Duration::from_millis(1500)))
        );
        assert_eq!(parse_cpu_time("1:02:03"), Some(Duration::from_secs(3723)));
        assert_eq!(
            parse_cpu_time("2-01:00:00.25"),
            Some(Duration::from_secs(49 * 3600) + Duration::from_millis(250))
        );
        assert_eq!(parse_cpu_time("x"), None);
        assert_eq!(parse_ps_row("PGID RSS TIME"), None);
    }

    #[test]
    fn percent_is_cpu_over_wall_rounded() {
        assert_eq!(
            percent(Duration::from_millis(50), Duration::from_secs(1)),
            5.0
        );
        assert_eq!(
            percent(Duration::from_millis(1), Duration::from_secs(3)),
            0.0
        );
        assert_eq!(
            percent(Duration::from_secs(2), Duration::from_secs(1)),
            200.0
        );
        assert_eq!(percent(Duration::from_secs(1), Duration::ZERO), 0.0);
    }

    fn usage(pgid: i32, cpu_ms: u64, age_s: u64) -> HashMap<i32, GroupUsage> {
        HashMap::from([(
            pgid,
            GroupUsage {
                cpu: Duration::from_millis(cpu_ms),
                rss_bytes: 64 << 20,
                leader_age: Some(Duration::from_secs(age_s)),
            },
        )])
    }

    #[test]
    fn deltas_per_group_and_nulls_when_not_running() {
        let mut s = Sampler::default();
        let t0 = Instant::now();
        let none = |_| None;
        let mut es = vec![entry("a", Some(100)), entry("b", None)];
        s.record(&[100], &usage(100, 1000, 10), t0, none);
        s.fill(&mut es);
        // First sample: since the leader started (1 s of CPU in 10 s).
        assert_eq!(es[0].cpu_percent, Some(10.0));
        assert_eq!(es[0].rss_bytes, Some(64 << 20));
        assert_eq!((es[1].cpu_percent, es[1].rss_bytes), (None, None));
        // Second: the delta between the two scans (0.5 s of CPU in 2 s).
        s.record(
            &[100],
            &usage(100, 1500, 12),
            t0 + Duration::from_secs(2),
            none,
        );
        s.fill(&mut es);
        assert_eq!(es[0].cpu_percent, Some(25.0));
        // A new group under the same name starts over.
        es[0].pid = Some(200);
        s.fill(&mut es);
        assert_eq!(es[0].cpu_percent, None, "not scanned yet");
        s.record(
            &[200],
            &usage(200, 100, 1),
            t0 + Duration::from_secs(3),
            none,
        );
        s.fill(&mut es);
        assert_eq!(es[0].cpu_percent, Some(10.0));
        // A group with no live member reads as null.
        s.record(&[200], &HashMap::new(), t0 + Duration::from_secs(4), none);
        s.fill(&mut es);
        assert_eq!((es[0].cpu_percent, es[0].rss_bytes), (None, None));
    }

    #[test]
    fn a_scan_answers_for_one_second() {
        let mut s = Sampler::default();
        let t0 = Instant::now();
        assert!(!s.is_fresh(&[100], t0), "never scanned");
        assert!(s.is_fresh(&[], t0), "nothing to scan");
        s.record(&[100], &usage(100, 1000, 10), t0, |_| None);
        assert!(s.is_fresh(&[100], t0 + Duration::from_millis(999)));
        assert!(!s.is_fresh(&[100], t0 + MAX_AGE));
        assert!(!s.is_fresh(&[100, 101], t0), "a new group needs a scan");
        // Without a leader age the entry's uptime gives the first average.
        let mut u = usage(101, 500, 0);
        u.get_mut(&101).unwrap().leader_age = None;
        s.record(&[101], &u, t0, |_| Some(Duration::from_secs(5)));
        let mut es = vec![entry("x", Some(101))];
        s.fill(&mut es);
        assert_eq!(es[0].cpu_percent, Some(10.0));
        // Long-unasked groups are forgotten.
        s.record(&[], &HashMap::new(), t0 + FORGET_AFTER, |_| None);
        assert!(s.groups.is_empty());
    }

    #[test]
    fn samples_this_process_group() {
        let me = nix::unistd::getpgrp().as_raw();
        let u = sample(&[me]);
        let g = u.get(&me).expect("own group sampled");
        assert!(g.rss_bytes > 1 << 20, "{g:?}");
        assert!(sample(&[]).is_empty());
    }
}
