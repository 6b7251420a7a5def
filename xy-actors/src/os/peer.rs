//! Who is on the other end of a loopback TCP connection: the uid that owns
//! the peer's socket (SPEC §18). Linux finds the peer's socket in
//! `/proc/net/tcp` or `/proc/net/tcp6` by its four-tuple and reads the
//! entry's uid; macOS walks the kernel's socket list of this user's
//! processes (`proc_pidfdinfo`). Both return data; the edge decides. The
//! `/proc` parser is pure and tested on every OS.

use std::net::{IpAddr, SocketAddr};

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

/// The uid owning the socket at `peer` that is connected to `local` (this
/// process's end of the connection). Blocking: reads the kernel's socket
/// list, so call it from the blocking pool.
pub(crate) fn tcp_peer_uid(peer: SocketAddr, local: SocketAddr) -> Result<u32, PeerError> {
    sys::tcp_peer_uid(peer, local)
}

/// One line of `/proc/net/tcp{,6}`: the socket's two ends and its owner.
// Read on Linux; tested everywhere.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TcpEntry {
    pub(crate) local: SocketAddr,
    pub(crate) remote: SocketAddr,
    pub(crate) uid: u32,
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
    Some(TcpEntry { local, remote, uid })
}

/// `0100007F:1F90` (address words in host byte order, port big-endian hex).
fn parse_endpoint(text: &str) -> Option<SocketAddr> {
    let (addr, port) = text.split_once(':')?;
    let ip = super::ports::parse_hex_addr(addr)?;
    Some(SocketAddr::new(ip, u16::from_str_radix(port, 16).ok()?))
}

/// The uid of the entry in `text` (a whole `/proc/net/tcp{,6}`) whose local
/// end is `peer` and whose remote end is `local`. Matching both ends keeps
/// a TIME_WAIT socket that reused the peer's port toward another address
/// from answering. IPv4-mapped IPv6 addresses compare as IPv4.
// Read on Linux; tested everywhere.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) fn find_owner(text: &str, peer: SocketAddr, local: SocketAddr) -> Option<u32> {
    let peer = canonical(peer);
    let local = canonical(local);
    text.lines()
        .skip(1)
        .filter_map(parse_tcp_line)
        .find(|e| canonical(e.local) == peer && canonical(e.remote) == local)
        .map(|e| e.uid)
}

fn canonical(a: SocketAddr) -> SocketAddr {
    SocketAddr::new(IpAddr::to_canonical(&a.ip()), a.port())
}

#[cfg(target_os = "linux")]
mod sys {
    use std::net::SocketAddr;

    use super::{PeerError, find_owner};

    pub(super) fn tcp_peer_uid(peer: SocketAddr, local: SocketAddr) -> Result<u32, PeerError> {
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
            if let Some(uid) = find_owner(&text, peer, local) {
                return Ok(uid);
            }
        }
        Err(PeerError::NotFound { peer })
    }
}

#[cfg(target_os = "macos")]
mod macos;
#[cfg(target_os = "macos")]
use macos as sys;

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
mod sys {
    use std::net::SocketAddr;

    use super::PeerError;

    /// No mechanism here: every peer is unidentified, so refused.
    pub(super) fn tcp_peer_uid(peer: SocketAddr, _local: SocketAddr) -> Result<u32, PeerError> {
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
                uid: 65534
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
        let e = parse_tcp_line(TCP6.lines().nth(2).unwrap()).unwrap();
        assert_eq!(e.local, addr("[::1]:41394"));
        assert_eq!(e.uid, 1001);
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn the_peer_is_found_by_both_ends() {
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
    #[cfg(target_os = "linux")]
    fn finds_our_own_connection() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, peer) = listener.accept().unwrap();
        assert_eq!(peer, client.local_addr().unwrap());
        let uid = tcp_peer_uid(peer, accepted.local_addr().unwrap()).unwrap();
        assert_eq!(uid, nix::unistd::getuid().as_raw());
        drop(client);
    }
}
