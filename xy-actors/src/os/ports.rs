//! Port forensics: which process LISTENs on a server's configured port, and
//! whether xy owns it. Linux reads `/proc/net/tcp{,6}` and maps the socket
//! inode to a pid through `/proc/*/fd`; macOS asks `lsof`. Parsers are pure.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub use xy_core::protocol::PortHolder;

/// Longest command line shown in a holder description.
const MAX_COMMAND: usize = 160;

/// The process listening on `port` (on a wildcard or loopback address) that
/// xy does not own, if any. A process is xy's when it is in `own_pgid` or a
/// descendant of this process (children, and grandchildren reparented to
/// the subreaper). This process itself is not xy's child: a test (or a
/// confused user) binding the port from the daemon's own process counts as
/// foreign. Port 0 is never checked.
pub(crate) fn foreign_holder(port: u16, own_pgid: Option<i32>) -> Option<PortHolder> {
    if port == 0 || port_is_free(port) {
        return None;
    }
    let holders = holders(port);
    let me = std::process::id();
    let holder = holders.into_iter().find(|h| match h.pid {
        Some(pid) => !owned(pid, me, own_pgid),
        None => true,
    })?;
    // A listener no process owns by the time we look was transient (another
    // program's own bind probe, a socket being closed): look once more
    // rather than fail a start over it.
    if holder.pid.is_none() && port_is_free(port) {
        return None;
    }
    Some(holder)
}

/// Whether nothing listens on `port`, found by binding it for a moment on
/// each of [`PROBE_ADDRS`], one after the other. Microseconds, where reading
/// `/proc/net/tcp*` costs milliseconds on a busy machine: this keeps the
/// check off the restart path when the port is free, the usual case. Any
/// failure (in use, no IPv6) means "look closer". Each probe socket is
/// closed before the next binds (they would collide with each other) and
/// before we return, and a socket that never connected leaves no TIME_WAIT:
/// the probe cannot itself make the port look taken to the child.
fn port_is_free(port: u16) -> bool {
    PROBE_ADDRS
        .iter()
        .all(|ip| std::net::TcpListener::bind((*ip, port)).is_ok())
}

/// Where the bind probe looks. std binds with `SO_REUSEADDR`. On Linux a
/// wildcard bind with it still fails beside any listener on the port, so
/// the two wildcards suffice. BSD semantics (macOS) let it succeed beside a
/// listener on a *specific* address, so a `127.0.0.1` or `::1` listener
/// would pass the wildcard probes: there the loopbacks are probed too (a
/// specific bind beside a listener on that same address fails everywhere).
/// See D35.
#[cfg(not(target_os = "macos"))]
const PROBE_ADDRS: &[IpAddr] = &[
    IpAddr::V4(Ipv4Addr::UNSPECIFIED),
    IpAddr::V6(Ipv6Addr::UNSPECIFIED),
];
#[cfg(target_os = "macos")]
const PROBE_ADDRS: &[IpAddr] = &[
    IpAddr::V4(Ipv4Addr::UNSPECIFIED),
    IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    IpAddr::V4(Ipv4Addr::LOCALHOST),
    IpAddr::V6(Ipv6Addr::LOCALHOST),
];

/// Whether `pid` is in `own_pgid` or a strict descendant of `me`.
fn owned(pid: u32, me: u32, own_pgid: Option<i32>) -> bool {
    let mut cur = pid;
    // Deep enough for any real process tree; guards against ppid loops.
    for depth in 0..128 {
        let Some((ppid, pgid)) = os::parent(cur) else {
            return false;
        };
        if depth == 0 && own_pgid.is_some_and(|g| g == pgid) {
            return true;
        }
        if ppid == me {
            return true;
        }
        if ppid <= 1 {
            return false;
        }
        cur = ppid;
    }
    false
}

/// Every listener on `port` that could stop a child from binding it.
fn holders(port: u16) -> Vec<PortHolder> {
    os::holders(port)
}

/// Addresses whose listener conflicts with a child binding 127.0.0.1,
/// 0.0.0.0 or `::` on the same port.
fn conflicts(addr: IpAddr) -> bool {
    match addr {
        IpAddr::V4(a) => a.is_unspecified() || a.is_loopback(),
        IpAddr::V6(a) => {
            a.is_unspecified()
                || a.is_loopback()
                || a.to_ipv4_mapped()
                    .is_some_and(|v4| v4.is_unspecified() || v4.is_loopback())
        }
    }
}

/// A LISTEN socket from `/proc/net/tcp` or `/proc/net/tcp6`.
// Used on Linux; tested everywhere.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ListenSocket {
    pub(crate) addr: IpAddr,
    pub(crate) port: u16,
    pub(crate) uid: u32,
    pub(crate) inode: u64,
}

/// Parses the LISTEN (`0A`) lines of `/proc/net/tcp{,6}`. Addresses are hex
/// words in host byte order (the kernel prints the raw `__be32`s as u32s).
// Used on Linux; tested everywhere.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) fn parse_proc_net_tcp(text: &str) -> Vec<ListenSocket> {
    let mut out = Vec::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 10 || f[3] != "0A" {
            continue;
        }
        let Some((addr_hex, port_hex)) = f[1].split_once(':') else {
            continue;
        };
        let (Some(addr), Ok(port), Ok(uid), Ok(inode)) = (
            parse_hex_addr(addr_hex),
            u16::from_str_radix(port_hex, 16),
            f[7].parse::<u32>(),
            f[9].parse::<u64>(),
        ) else {
            continue;
        };
        out.push(ListenSocket {
            addr,
            port,
            uid,
            inode,
        });
    }
    out
}

// Used on Linux; tested everywhere.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) fn parse_hex_addr(hex: &str) -> Option<IpAddr> {
    let word = |s: &str| u32::from_str_radix(s, 16).ok().map(u32::to_ne_bytes);
    match hex.len() {
        8 => Some(IpAddr::V4(Ipv4Addr::from(word(hex)?))),
        32 => {
            let mut bytes = [0u8; 16];
            for i in 0..4 {
                bytes[i * 4..i * 4 + 4].copy_from_slice(&word(hex.get(i * 8..i * 8 + 8)?)?);
            }
            Some(IpAddr::V6(Ipv6Addr::from(bytes)))
        }
        _ => None,
    }
}

/// The inode of a `/proc/<pid>/fd/<n>` link target `socket:[12345]`.
// Used on Linux; tested everywhere.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) fn socket_inode(link: &str) -> Option<u64> {
    link.strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// `/proc/<pid>/cmdline` (NUL-separated) as one shortened line.
// Used on Linux; tested everywhere.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) fn cmdline_text(raw: &[u8]) -> Option<String> {
    let text: Vec<String> = raw
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    if text.is_empty() {
        return None;
    }
    // One line: a `python -c` script's newlines would break the message.
    let joined = text.join(" ");
    let one_line: Vec<&str> = joined
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
        .collect();
    Some(shorten(&one_line.join(" ")))
}

fn shorten(s: &str) -> String {
    if s.chars().count() <= MAX_COMMAND {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(MAX_COMMAND - 1).collect();
    out.push('…');
    out
}

/// One listener from `lsof -nP -iTCP:<port> -sTCP:LISTEN -Fpcn`: its pid,
/// short command name, and the addresses it listens on.
// Used on macOS; tested everywhere.
#[cfg_attr(target_os = "linux", allow(dead_code))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LsofListener {
    pub(crate) pid: u32,
    pub(crate) command: String,
    pub(crate) addrs: Vec<String>,
}

/// Parses `lsof -F pcn` output: `p<pid>` starts a process, `c<name>` names
/// it, `f<fd>` starts a file and `n<addr:port>` gives its address.
// Used on macOS; tested everywhere.
#[cfg_attr(target_os = "linux", allow(dead_code))]
pub(crate) fn parse_lsof(text: &str) -> Vec<LsofListener> {
    let mut out: Vec<LsofListener> = Vec::new();
    for line in text.lines() {
        let (tag, rest) = match line.chars().next() {
            Some(c) => (c, &line[c.len_utf8()..]),
            None => continue,
        };
        match tag {
            'p' => {
                if let Ok(pid) = rest.parse() {
                    out.push(LsofListener {
                        pid,
                        command: String::new(),
                        addrs: Vec::new(),
                    });
                }
            }
            'c' => {
                if let Some(l) = out.last_mut() {
                    l.command = rest.to_owned();
                }
            }
            'n' => {
                if let Some(l) = out.last_mut() {
                    l.addrs.push(rest.to_owned());
                }
            }
            _ => {}
        }
    }
    out
}

/// Whether an lsof address (`*:8421`, `127.0.0.1:8421`, `[::1]:8421`)
/// conflicts with a loopback or wildcard bind.
// Used on macOS; tested everywhere.
#[cfg_attr(target_os = "linux", allow(dead_code))]
pub(crate) fn lsof_addr_conflicts(addr: &str) -> bool {
    let Some((host, _)) = addr.rsplit_once(':') else {
        return true;
    };
    if host == "*" {
        return true;
    }
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.parse::<IpAddr>().map_or(true, conflicts)
}

#[cfg(target_os = "linux")]
mod os {
    use super::{PortHolder, cmdline_text, conflicts, parse_proc_net_tcp, socket_inode};

    pub(super) fn holders(port: u16) -> Vec<PortHolder> {
        let mut sockets = Vec::new();
        for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
            if let Ok(text) = std::fs::read_to_string(file) {
                sockets.extend(
                    parse_proc_net_tcp(&text)
                        .into_iter()
                        .filter(|s| s.port == port && conflicts(s.addr)),
                );
            }
        }
        if sockets.is_empty() {
            return Vec::new();
        }
        let mut found: Vec<PortHolder> = Vec::new();
        // Only now walk every process's fds: the expensive part runs only
        // when the port really is taken.
        if let Ok(dir) = std::fs::read_dir("/proc") {
            for entry in dir.flatten() {
                let Some(pid) = entry
                    .file_name()
                    .to_str()
                    .and_then(|s| s.parse::<u32>().ok())
                else {
                    continue;
                };
                let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
                    continue;
                };
                let holds = fds.flatten().any(|fd| {
                    std::fs::read_link(fd.path())
                        .ok()
                        .and_then(|l| socket_inode(&l.to_string_lossy()))
                        .is_some_and(|ino| sockets.iter().any(|s| s.inode == ino))
                });
                if holds && !found.iter().any(|h| h.pid == Some(pid)) {
                    let command = std::fs::read(format!("/proc/{pid}/cmdline"))
                        .ok()
                        .and_then(|raw| cmdline_text(&raw));
                    let uid = sockets.first().map(|s| s.uid);
                    found.push(PortHolder {
                        port,
                        pid: Some(pid),
                        command,
                        uid,
                    });
                }
            }
        }
        if found.is_empty() {
            // Another user's process: the socket is listed, its fds are not.
            found.push(PortHolder {
                port,
                pid: None,
                command: None,
                uid: sockets.first().map(|s| s.uid),
            });
        }
        found
    }

    /// `(ppid, pgid)` of `pid` from `/proc/<pid>/stat`.
    pub(super) fn parent(pid: u32) -> Option<(u32, i32)> {
        let s = crate::os::procfs::stat(i32::try_from(pid).ok()?)?;
        Some((s.ppid, s.pgrp))
    }
}

#[cfg(not(target_os = "linux"))]
mod os {
    use super::{PortHolder, lsof_addr_conflicts, parse_lsof, shorten};

    pub(super) fn holders(port: u16) -> Vec<PortHolder> {
        let out = std::process::Command::new("lsof")
            .args(["-nP", &format!("-iTCP:{port}"), "-sTCP:LISTEN", "-Fpcn"])
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output();
        let Ok(out) = out else {
            return Vec::new();
        };
        parse_lsof(&String::from_utf8_lossy(&out.stdout))
            .into_iter()
            .filter(|l| l.addrs.is_empty() || l.addrs.iter().any(|a| lsof_addr_conflicts(a)))
            .map(|l| PortHolder {
                port,
                pid: Some(l.pid),
                command: ps(l.pid, "args=")
                    .map(|s| shorten(&s))
                    .or(Some(l.command).filter(|c| !c.is_empty())),
                uid: None,
            })
            .collect()
    }

    fn ps(pid: u32, field: &str) -> Option<String> {
        let out = std::process::Command::new("ps")
            .args(["-o", field, "-p", &pid.to_string()])
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .ok()?;
        let s = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        (!s.is_empty()).then_some(s)
    }

    /// `(ppid, pgid)` of `pid` via `ps`.
    pub(super) fn parent(pid: u32) -> Option<(u32, i32)> {
        let s = ps(pid, "ppid=,pgid=")?;
        let mut f = s.split_whitespace();
        Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_free_port_is_seen_free_and_a_held_one_is_not() {
        // Every address a child's bind conflicts with, the specific ones
        // included (on macOS the wildcard probes alone pass those).
        for addr in ["127.0.0.1:0", "0.0.0.0:0", "[::1]:0", "[::]:0"] {
            let Ok(l) = std::net::TcpListener::bind(addr) else {
                // No IPv6 on this machine: nothing to hold.
                assert!(addr.starts_with('['), "cannot bind {addr}");
                continue;
            };
            let port = l.local_addr().unwrap().port();
            assert!(!super::port_is_free(port), "held on {addr}");
            drop(l);
            assert!(super::port_is_free(port), "free again after {addr}");
            // The probe left nothing bound: the child's own bind (std's,
            // like most servers') succeeds right after it.
            let child = std::net::TcpListener::bind(("127.0.0.1", port));
            assert!(child.is_ok(), "probe left {port} taken: {child:?}");
        }
    }

    use super::*;

    const TCP: &str = "\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:20E5 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 424242 1 0000000000000000 100 0 0 10 0
   1: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1111 1 0000000000000000 100 0 0 10 0
   2: 0100007F:20E5 0100007F:C350 01 00000000:00000000 00:00000000 00000000  1000        0 5555 1 0000000000000000 20 4 30 10 -1
   3: 0501A8C0:20E6 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 7777 1 0000000000000000 100 0 0 10 0
";

    const TCP6: &str = "\
  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:20E5 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000   501        0 9999 1 0000000000000000 100 0 0 10 0
   1: 00000000000000000000000001000000:1F91 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000   501        0 8888 1 0000000000000000 100 0 0 10 0
   2: 0000000000000000FFFF00000100007F:1F92 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000   501        0 6666 1 0000000000000000 100 0 0 10 0
";

    #[test]
    #[cfg(target_endian = "little")]
    fn proc_net_tcp_listen_lines() {
        let s = parse_proc_net_tcp(TCP);
        assert_eq!(s.len(), 3, "{s:?}");
        assert_eq!(
            s[0],
            ListenSocket {
                addr: "127.0.0.1".parse().unwrap(),
                port: 8421,
                uid: 1000,
                inode: 424242
            }
        );
        assert_eq!(s[1].addr, "0.0.0.0".parse::<IpAddr>().unwrap());
        assert_eq!(s[1].port, 8080);
        // 192.168.1.5 does not stop a loopback bind.
        assert_eq!(s[2].addr, "192.168.1.5".parse::<IpAddr>().unwrap());
        assert!(conflicts(s[0].addr) && conflicts(s[1].addr) && !conflicts(s[2].addr));

        let s6 = parse_proc_net_tcp(TCP6);
        assert_eq!(s6.len(), 3);
        assert_eq!(s6[0].addr, "::".parse::<IpAddr>().unwrap());
        assert_eq!(s6[0].port, 8421);
        assert_eq!(s6[1].addr, "::1".parse::<IpAddr>().unwrap());
        assert_eq!(s6[2].addr, "::ffff:127.0.0.1".parse::<IpAddr>().unwrap());
        assert!(s6.iter().all(|s| conflicts(s.addr)));
    }

    #[test]
    fn fd_links_and_cmdlines() {
        assert_eq!(socket_inode("socket:[424242]"), Some(424242));
        assert_eq!(socket_inode("pipe:[1]"), None);
        assert_eq!(socket_inode("/dev/null"), None);
        assert_eq!(
            cmdline_text(b"node\0/srv/app/server.js\0--port\08421\0"),
            Some("node /srv/app/server.js --port 8421".to_owned())
        );
        assert_eq!(
            cmdline_text(b"python3\0-c\0import os\n\tos.exit(1)\0"),
            Some("python3 -c import os os.exit(1)".to_owned())
        );
        assert_eq!(cmdline_text(b""), None);
        let long = cmdline_text(&vec![b'x'; 500]).unwrap();
        assert_eq!(long.chars().count(), MAX_COMMAND);
        assert!(long.ends_with('…'));
    }

    #[test]
    fn lsof_output() {
        let text = "p4242\ncnode\nf23\nn*:8421\np4300\ncpython3.12\nf5\nn127.0.0.1:8421\nf6\nn[::1]:8421\np77\ncother\nf3\nn192.168.1.5:8421\n";
        let l = parse_lsof(text);
        assert_eq!(l.len(), 3);
        assert_eq!(l[0].pid, 4242);
        assert_eq!(l[0].command, "node");
        assert_eq!(l[0].addrs, ["*:8421"]);
        assert_eq!(l[1].addrs, ["127.0.0.1:8421", "[::1]:8421"]);
        assert!(lsof_addr_conflicts("*:8421"));
        assert!(lsof_addr_conflicts("[::1]:8421"));
        assert!(lsof_addr_conflicts("127.0.0.1:8421"));
        assert!(!lsof_addr_conflicts("192.168.1.5:8421"));
        assert!(parse_lsof("").is_empty());
    }

    #[test]
    fn holder_text() {
        let h = PortHolder {
            port: 8421,
            pid: Some(4242),
            command: Some("node /srv/server.js".into()),
            uid: Some(1000),
        };
        assert_eq!(
            h.to_string(),
            "port 8421 is held by pid 4242 (node /srv/server.js)"
        );
        let h = PortHolder {
            pid: None,
            command: None,
            ..h
        };
        assert_eq!(
            h.to_string(),
            "port 8421 is held by another process (uid 1000; its pid is not visible to xy)"
        );
    }

    #[test]
    fn finds_this_process_as_a_foreign_holder() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let h = foreign_holder(port, None).expect("holder found");
        assert_eq!(h.pid, Some(std::process::id()));
        assert!(
            h.to_string()
                .contains(&format!("pid {}", std::process::id()))
        );
        drop(l);
        assert_eq!(foreign_holder(port, None), None);
        assert_eq!(foreign_holder(0, None), None);
    }
}
