//! Who is on the other end of a loopback TCP connection: the uid that owns
//! the peer's socket (SPEC §18). Linux asks the kernel's socket table for
//! the one socket with the connection's four-tuple (`sock_diag` over
//! netlink, an exact lookup), and where netlink is unavailable finds the
//! same socket in `/proc/net/tcp` or `/proc/net/tcp6`, whose every read
//! walks every TCP socket of the network namespace. macOS walks the open
//! sockets of this user's processes (`proc_pidfdinfo`). All return data;
//! the edge decides. The message builders and parsers are pure and tested
//! on every OS.

use std::net::{IpAddr, SocketAddr};

pub(crate) mod process;

/// Why the peer's uid is unknown. Every variant means "refuse".
#[derive(Debug, thiserror::Error)]
pub(crate) enum PeerError {
    /// No socket with the connection's four-tuple (closed already, another
    /// network namespace, or a process this user may not inspect).
    #[error("no socket found for peer {peer}")]
    NotFound { peer: SocketAddr },
    /// The kernel's socket list could not be read.
    #[error("cannot read the socket list ({what}): {source}")]
    Io {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
}

/// The peer's socket as found: its owner, and what leads to the processes
/// holding it (`process` maps those to xy's servers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PeerSocket {
    pub(crate) uid: u32,
    pub(crate) key: SocketKey,
}

/// How the holders of a peer socket are found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SocketKey {
    /// Linux: the socket's inode, named by `/proc/<pid>/fd/*` links
    /// (`socket:[inode]`) of every process holding it.
    // Built on Linux; matched everywhere.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    Inode(u64),
    /// macOS: the process whose descriptor table the scan found it in.
    #[cfg_attr(not(target_os = "macos"), allow(dead_code))]
    Pid(i32),
}

/// The socket at `peer` that is connected to `local` (this process's end
/// of the connection), by an exact lookup in the kernel's socket table: one
/// netlink round trip, microseconds, fine on the async thread. `None` where
/// there is no such lookup (not Linux, or netlink unavailable): then
/// [`tcp_peer_by_scan`].
pub(crate) fn tcp_peer(
    peer: SocketAddr,
    local: SocketAddr,
) -> Option<Result<PeerSocket, PeerError>> {
    sys::exact(canonical(peer), canonical(local))
}

/// Like [`tcp_peer`], by walking every socket (`/proc/net/tcp{,6}` on
/// Linux, this user's processes on macOS). Blocking, milliseconds or more on
/// a busy machine: call it from the blocking pool.
pub(crate) fn tcp_peer_by_scan(
    peer: SocketAddr,
    local: SocketAddr,
) -> Result<PeerSocket, PeerError> {
    sys::scan(canonical(peer), canonical(local))
}

/// One line of `/proc/net/tcp{,6}`: the socket's two ends and its owner.
// Read on Linux; tested everywhere.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TcpEntry {
    pub(crate) local: SocketAddr,
    pub(crate) remote: SocketAddr,
    pub(crate) uid: u32,
    pub(crate) inode: u64,
}

/// Parses one entry line (`sl local rem st … uid …`); `None` for the
/// header or anything malformed.
// Read on Linux; tested everywhere.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) fn parse_tcp_line(line: &str) -> Option<TcpEntry> {
    let mut f = line.split_ascii_whitespace();
    let _sl = f.next()?;
    let local = parse_endpoint(f.next()?)?;
    let remote = parse_endpoint(f.next()?)?;
    // st, tx_queue:rx_queue, tr:tm->when, retrnsmt, then uid.
    let uid = f.nth(4)?.parse().ok()?;
    // timeout, then inode.
    let inode = f.nth(1)?.parse().ok()?;
    Some(TcpEntry {
        local,
        remote,
        uid,
        inode,
    })
}

/// `0100007F:1F90` (address words in host byte order, port big-endian hex).
fn parse_endpoint(text: &str) -> Option<SocketAddr> {
    let (addr, port) = text.split_once(':')?;
    let ip = super::ports::parse_hex_addr(addr)?;
    Some(SocketAddr::new(ip, u16::from_str_radix(port, 16).ok()?))
}

/// The owner and inode of the entry in `text` (a whole `/proc/net/tcp{,6}`) whose local
/// end is `peer` and whose remote end is `local`. Matching both ends keeps
/// a TIME_WAIT socket that reused the peer's port toward another address
/// from answering. IPv4-mapped IPv6 addresses compare as IPv4.
// Read on Linux; tested everywhere.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) fn find_owner(text: &str, peer: SocketAddr, local: SocketAddr) -> Option<PeerSocket> {
    let peer = canonical(peer);
    let local = canonical(local);
    text.lines()
        .skip(1)
        .filter_map(parse_tcp_line)
        .find(|e| canonical(e.local) == peer && canonical(e.remote) == local)
        .map(|e| PeerSocket {
            uid: e.uid,
            key: SocketKey::Inode(e.inode),
        })
}

fn canonical(a: SocketAddr) -> SocketAddr {
    SocketAddr::new(IpAddr::to_canonical(&a.ip()), a.port())
}

/// `sock_diag` (`<linux/sock_diag.h>`, `<linux/inet_diag.h>`): one
/// `SOCK_DIAG_BY_FAMILY` request naming the socket by its four-tuple; the
/// kernel answers with that socket's `inet_diag_msg` or an `NLMSG_ERROR`.
// Used on Linux; tested everywhere.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
mod diag {
    use std::net::{IpAddr, SocketAddr};

    const SOCK_DIAG_BY_FAMILY: u16 = 20;
    const NLMSG_ERROR: u16 = 2;
    const NLM_F_REQUEST: u16 = 1;
    const AF_INET: u8 = 2;
    const AF_INET6: u8 = 10;
    const IPPROTO_TCP: u8 = 6;
    const ENOENT: i32 = 2;
    /// `nlmsghdr` (16) + `inet_diag_req_v2` (56).
    pub(super) const REQUEST_LEN: usize = 72;
    /// Where `idiag_uid` sits in a reply: `nlmsghdr` (16), then
    /// `inet_diag_msg`'s family, state, timer, retrans (4), sockid (48),
    /// expires, rqueue, wqueue (12); `idiag_inode` follows it.
    const UID_AT: usize = 80;
    const INODE_AT: usize = 84;

    /// The request for the socket whose local end is `peer` and whose
    /// remote end is `local`; `None` when the two are of different families.
    pub(super) fn request(peer: SocketAddr, local: SocketAddr) -> Option<[u8; REQUEST_LEN]> {
        let mut m = [0u8; REQUEST_LEN];
        m[0..4].copy_from_slice(&(REQUEST_LEN as u32).to_ne_bytes());
        m[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        m[6..8].copy_from_slice(&NLM_F_REQUEST.to_ne_bytes());
        // seq and pid stay 0: the kernel fills in the sender.
        let family = match (peer.ip(), local.ip()) {
            (IpAddr::V4(_), IpAddr::V4(_)) => AF_INET,
            (IpAddr::V6(_), IpAddr::V6(_)) => AF_INET6,
            _ => return None,
        };
        m[16] = family;
        m[17] = IPPROTO_TCP;
        // idiag_states: every state.
        m[20..24].copy_from_slice(&u32::MAX.to_ne_bytes());
        // inet_diag_sockid at 24: ports and addresses in network order.
        m[24..26].copy_from_slice(&peer.port().to_be_bytes());
        m[26..28].copy_from_slice(&local.port().to_be_bytes());
        let put = |m: &mut [u8], at: usize, ip: IpAddr| match ip {
            IpAddr::V4(a) => m[at..at + 4].copy_from_slice(&a.octets()),
            IpAddr::V6(a) => m[at..at + 16].copy_from_slice(&a.octets()),
        };
        put(&mut m, 28, peer.ip());
        put(&mut m, 44, local.ip());
        // idiag_if 0 (any); idiag_cookie INET_DIAG_NOCOOKIE.
        m[64..72].copy_from_slice(&[0xff; 8]);
        Some(m)
    }

    /// What the kernel answered.
    #[derive(Debug, PartialEq, Eq)]
    pub(super) enum Reply {
        Found {
            uid: u32,
            inode: u32,
        },
        NotFound,
        /// An errno, or a reply too short to read.
        Failed(i32),
    }

    pub(super) fn parse(reply: &[u8]) -> Reply {
        let u16_at = |at: usize| {
            reply
                .get(at..at + 2)
                .map(|b| u16::from_ne_bytes([b[0], b[1]]))
        };
        let u32_at = |at: usize| {
            reply
                .get(at..at + 4)
                .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        };
        match u16_at(4) {
            Some(SOCK_DIAG_BY_FAMILY) => match (u32_at(UID_AT), u32_at(INODE_AT)) {
                (Some(uid), Some(inode)) => Reply::Found { uid, inode },
                _ => Reply::Failed(0),
            },
            Some(NLMSG_ERROR) => match u32_at(16).map(|e| -(e as i32)) {
                Some(ENOENT) => Reply::NotFound,
                Some(errno) => Reply::Failed(errno),
                None => Reply::Failed(0),
            },
            _ => Reply::Failed(0),
        }
    }
}

#[cfg(target_os = "linux")]
mod sys {
    use std::net::SocketAddr;
    use std::os::fd::AsRawFd;
    use std::time::Duration;

    use nix::sys::socket::{
        AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType, recv, sendto,
        setsockopt, socket, sockopt,
    };

    use super::{PeerError, PeerSocket, SocketKey, diag, find_owner};

    pub(super) fn exact(
        peer: SocketAddr,
        local: SocketAddr,
    ) -> Option<Result<PeerSocket, PeerError>> {
        match ask_kernel(peer, local) {
            Ok(diag::Reply::Found { uid, inode }) => Some(Ok(PeerSocket {
                uid,
                key: SocketKey::Inode(u64::from(inode)),
            })),
            Ok(diag::Reply::NotFound) => Some(Err(PeerError::NotFound { peer })),
            // No netlink here (a seccomp filter, a kernel without
            // sock_diag): the caller scans /proc instead.
            Ok(diag::Reply::Failed(_)) | Err(_) => None,
        }
    }

    pub(super) fn ask_kernel(peer: SocketAddr, local: SocketAddr) -> nix::Result<diag::Reply> {
        let Some(request) = diag::request(peer, local) else {
            return Ok(diag::Reply::Failed(0));
        };
        let fd = socket(
            AddressFamily::Netlink,
            SockType::Datagram,
            SockFlag::SOCK_CLOEXEC,
            SockProtocol::NetlinkSockDiag,
        )?;
        // The kernel answers within the sendto; a bound for safety only.
        setsockopt(
            &fd,
            sockopt::ReceiveTimeout,
            &nix::sys::time::TimeVal::from(libc::timeval {
                tv_sec: Duration::from_secs(1).as_secs() as libc::time_t,
                tv_usec: 0,
            }),
        )?;
        sendto(
            fd.as_raw_fd(),
            &request,
            &NetlinkAddr::new(0, 0),
            MsgFlags::empty(),
        )?;
        let mut reply = [0u8; 1024];
        let n = recv(fd.as_raw_fd(), &mut reply, MsgFlags::empty())?;
        Ok(diag::parse(&reply[..n]))
    }

    pub(super) fn scan(peer: SocketAddr, local: SocketAddr) -> Result<PeerSocket, PeerError> {
        // An IPv4 peer is usually an AF_INET socket (`tcp`), but a dual-stack
        // AF_INET6 socket connected to 127.0.0.1 is listed in `tcp6` under
        // its mapped address: look there second.
        let files: &[&'static str] = if peer.is_ipv4() {
            &["/proc/net/tcp", "/proc/net/tcp6"]
        } else {
            &["/proc/net/tcp6"]
        };
        for path in files {
            let text = match std::fs::read_to_string(path) {
                Ok(t) => t,
                // A kernel without IPv6 has no `tcp6`.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && *path != files[0] => {
                    continue;
                }
                Err(source) => return Err(PeerError::Io { what: path, source }),
            };
            if let Some(found) = find_owner(&text, peer, local) {
                return Ok(found);
            }
        }
        Err(PeerError::NotFound { peer })
    }
}

#[cfg(target_os = "macos")]
pub(crate) mod macos;
#[cfg(target_os = "macos")]
use macos as sys;

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
mod sys {
    use std::net::SocketAddr;

    use super::{PeerError, PeerSocket};

    pub(super) fn exact(
        _peer: SocketAddr,
        _local: SocketAddr,
    ) -> Option<Result<PeerSocket, PeerError>> {
        None
    }

    /// No mechanism here: every peer is unidentified, so refused.
    pub(super) fn scan(peer: SocketAddr, _local: SocketAddr) -> Result<PeerSocket, PeerError> {
        Err(PeerError::NotFound { peer })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Fixture lines as a little-endian kernel prints them.
    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1670 1 0000000000000000 100 0 0 10 0
   1: 0100007F:D431 0100007F:1F90 01 00000000:00000000 00:00000000 00000000 65534        0 99321 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 99322 1 0000000000000000 20 4 30 10 -1
   3: 0100007F:D431 0100007F:2328 06 00000000:00000000 03:00000F9C 00000000     0        0 0 3 0000000000000000
";

    const TCP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0000000000000000FFFF00000100007F:E0F2 0000000000000000FFFF00000100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 20 4 30 10 -1
   1: 00000000000000000000000001000000:A1B2 00000000000000000000000001000000:1F91 01 00000000:00000000 00:00000000 00000000  1001        0 4243 1 0000000000000000 20 4 30 10 -1
";

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn ipv4_lines() {
        let e = parse_tcp_line(TCP.lines().nth(2).unwrap()).unwrap();
        assert_eq!(
            e,
            TcpEntry {
                local: addr("127.0.0.1:54321"),
                remote: addr("127.0.0.1:8080"),
                uid: 65534,
                inode: 99321,
            }
        );
        assert_eq!(parse_tcp_line(TCP.lines().next().unwrap()), None);
        assert_eq!(parse_tcp_line("garbage"), None);
        assert_eq!(parse_tcp_line("   0: 0100007F:1F90 zz:0000 0A"), None);
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn ipv6_and_mapped_lines() {
        let e = parse_tcp_line(TCP6.lines().nth(1).unwrap()).unwrap();
        assert_eq!(e.local, addr("[::ffff:127.0.0.1]:57586"));
        assert_eq!(e.remote, addr("[::ffff:127.0.0.1]:8080"));
        assert_eq!(e.uid, 1000);
        assert_eq!(e.inode, 4242);
        let e = parse_tcp_line(TCP6.lines().nth(2).unwrap()).unwrap();
        assert_eq!(e.local, addr("[::1]:41394"));
        assert_eq!(e.uid, 1001);
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn the_peer_is_found_by_both_ends() {
        let find_owner = |text, peer, local| find_owner(text, peer, local).map(|f| f.uid);
        let server = addr("127.0.0.1:8080");
        // The client's socket, not the server's accepted one (same ports,
        // ends swapped) nor the TIME_WAIT one toward port 9000 (uid 0).
        assert_eq!(
            find_owner(TCP, addr("127.0.0.1:54321"), server),
            Some(65534)
        );
        assert_eq!(find_owner(TCP, addr("127.0.0.1:54322"), server), None);
        // A dual-stack client socket, listed under its mapped address.
        assert_eq!(
            find_owner(TCP6, addr("127.0.0.1:57586"), server),
            Some(1000)
        );
        assert_eq!(
            find_owner(TCP6, addr("[::1]:41394"), addr("[::1]:8081")),
            Some(1001)
        );
        assert_eq!(find_owner(TCP6, addr("[::1]:41394"), server), None);
        assert_eq!(find_owner("", addr("[::1]:41394"), server), None);
    }

    #[test]
    fn diag_request_names_the_peer_socket() {
        let m = diag::request(addr("127.0.0.1:54321"), addr("127.0.0.1:8080")).unwrap();
        assert_eq!(u32::from_ne_bytes(m[0..4].try_into().unwrap()), 72);
        assert_eq!((m[16], m[17]), (2, 6));
        assert_eq!(&m[24..28], &[0xD4, 0x31, 0x1F, 0x90]);
        assert_eq!(&m[28..32], &[127, 0, 0, 1]);
        assert_eq!(&m[44..48], &[127, 0, 0, 1]);
        let m = diag::request(addr("[::1]:1"), addr("[::1]:2")).unwrap();
        assert_eq!(m[16], 10);
        assert_eq!(m[43], 1);
        assert!(diag::request(addr("[::1]:1"), addr("127.0.0.1:2")).is_none());
    }

    #[test]
    fn diag_replies() {
        let mut ok = vec![0u8; 88];
        ok[4..6].copy_from_slice(&20u16.to_ne_bytes());
        ok[80..84].copy_from_slice(&65534u32.to_ne_bytes());
        ok[84..88].copy_from_slice(&777u32.to_ne_bytes());
        assert_eq!(
            diag::parse(&ok),
            diag::Reply::Found {
                uid: 65534,
                inode: 777
            }
        );
        let mut err = vec![0u8; 36];
        err[4..6].copy_from_slice(&2u16.to_ne_bytes());
        err[16..20].copy_from_slice(&(-2i32).to_ne_bytes());
        assert_eq!(diag::parse(&err), diag::Reply::NotFound);
        err[16..20].copy_from_slice(&(-13i32).to_ne_bytes());
        assert_eq!(diag::parse(&err), diag::Reply::Failed(13));
        assert_eq!(diag::parse(&ok[..40]), diag::Reply::Failed(0));
        assert_eq!(diag::parse(&[]), diag::Reply::Failed(0));
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn finds_a_dual_stack_client_connected_to_ipv4() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        // An AF_INET6 socket, connected through the IPv4-mapped address.
        let Ok(client) = std::net::TcpStream::connect(("::ffff:127.0.0.1", port)) else {
            return; // no IPv6 on this machine
        };
        assert!(client.local_addr().unwrap().is_ipv6());
        let (accepted, peer) = listener.accept().unwrap();
        assert!(peer.is_ipv4());
        let local = accepted.local_addr().unwrap();
        let me = nix::unistd::getuid().as_raw();
        let exact = tcp_peer(peer, local).unwrap().unwrap();
        assert_eq!(exact.uid, me);
        assert_eq!(tcp_peer_by_scan(peer, local).unwrap(), exact);
    }

    #[test]
    #[cfg(target_os = "linux")]
    // `XY_PEER_TIMING=1 … -- --nocapture` prints what a lookup costs.
    #[allow(clippy::print_stderr)]
    fn finds_our_own_connection_both_ways() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, peer) = listener.accept().unwrap();
        assert_eq!(peer, client.local_addr().unwrap());
        let local = accepted.local_addr().unwrap();
        let me = nix::unistd::getuid().as_raw();
        let exact = tcp_peer(peer, local).unwrap().unwrap();
        assert_eq!(exact.uid, me);
        assert_eq!(tcp_peer_by_scan(peer, local).unwrap(), exact);
        // The netlink answer itself, not the /proc fallback.
        let SocketKey::Inode(inode) = exact.key else {
            panic!("{exact:?}")
        };
        assert_eq!(
            sys::ask_kernel(peer, local),
            Ok(diag::Reply::Found {
                uid: me,
                inode: u32::try_from(inode).unwrap()
            })
        );
        if std::env::var_os("XY_PEER_TIMING").is_some() {
            let t = std::time::Instant::now();
            for _ in 0..200 {
                tcp_peer(peer, local).unwrap().unwrap();
            }
            let diag = t.elapsed() / 200;
            let t = std::time::Instant::now();
            for _ in 0..20 {
                tcp_peer_by_scan(peer, local).unwrap();
            }
            let proc = t.elapsed() / 20;
            eprintln!("[peer] sock_diag {diag:?} per lookup, /proc/net/tcp {proc:?}");
        }
        let gone = SocketAddr::new(peer.ip(), peer.port().wrapping_add(1));
        assert_eq!(sys::ask_kernel(gone, local), Ok(diag::Reply::NotFound));
        drop(client);
        drop(accepted);
    }
}
