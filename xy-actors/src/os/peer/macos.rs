//! macOS: the peer's socket is looked for among the open sockets of this
//! user's processes (`proc_listpids(PROC_UID_ONLY)`, `PROC_PIDLISTFDS`,
//! `proc_pidfdinfo(PROC_PIDFDSOCKETINFO)`), matched by both ends of the
//! connection. Another user's processes cannot be inspected without root,
//! so their sockets are never found: such a peer is refused, as wanted.
//! The process found is also the one `process` maps to a server (D172).
//! The structs mirror `<sys/proc_info.h>` (as the `libproc` crate's
//! `net_info.rs` does); only the fields read here are named.
// FFI, and structs whose fields are there for their layout, not to be read.
#![allow(unsafe_code, dead_code)]

use std::mem::size_of;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use libc::{c_int, c_short, c_ushort};

use super::{PeerError, PeerSocket, SocketKey, canonical};

const PROC_UID_ONLY: u32 = 4;
const PROC_PIDLISTFDS: c_int = 1;
const PROC_PIDFDSOCKETINFO: c_int = 3;
const PROX_FDTYPE_SOCKET: u32 = 2;
const SOCKINFO_TCP: c_int = 2;
const INI_IPV4: u8 = 0x1;

#[repr(C)]
#[derive(Clone, Copy)]
struct ProcFileInfo {
    fi_openflags: u32,
    fi_status: u32,
    fi_offset: i64,
    fi_type: i32,
    rfu_1: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct VInfoStat {
    vst_dev: u32,
    vst_mode: u16,
    vst_nlink: u16,
    vst_ino: u64,
    vst_uid: u32,
    vst_gid: u32,
    vst_times: [i64; 8],
    vst_size: i64,
    vst_blocks: i64,
    vst_blksize: i32,
    vst_flags: u32,
    vst_gen: u32,
    vst_rdev: u32,
    vst_qspare: [i64; 2],
}

#[repr(C)]
#[derive(Clone, Copy)]
struct SockBufInfo {
    sbi_cc: u32,
    sbi_hiwat: u32,
    sbi_mbcnt: u32,
    sbi_mbmax: u32,
    sbi_lowat: u32,
    sbi_flags: c_short,
    sbi_timeo: c_short,
}

/// `struct in_sockinfo`; the address unions (`in4in6_addr` / `in6_addr`)
/// are four 32-bit words holding the address in network order.
#[repr(C)]
#[derive(Clone, Copy)]
struct InSockInfo {
    insi_fport: c_int,
    insi_lport: c_int,
    insi_gencnt: u64,
    insi_flags: u32,
    insi_flow: u32,
    insi_vflag: u8,
    insi_ip_ttl: u8,
    rfu_1: u32,
    insi_faddr: [u32; 4],
    insi_laddr: [u32; 4],
    insi_v4_tos: u8,
    insi_v6: InSiV6,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct InSiV6 {
    in6_hlim: u8,
    in6_cksum: c_int,
    in6_ifindex: c_ushort,
    in6_hops: c_short,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct TcpSockInfo {
    tcpsi_ini: InSockInfo,
    tcpsi_state: c_int,
    tcpsi_timer: [c_int; 4],
    tcpsi_mss: c_int,
    tcpsi_flags: u32,
    rfu_1: u32,
    tcpsi_tp: u64,
}

/// `soi_proto`: as large as its largest member (`un_sockinfo`, 528 bytes),
/// so the kernel's size check passes.
#[repr(C)]
union SocketInfoProto {
    pri_tcp: TcpSockInfo,
    _largest: [u64; 66],
}

#[repr(C)]
struct SocketInfo {
    soi_stat: VInfoStat,
    soi_so: u64,
    soi_pcb: u64,
    soi_type: c_int,
    soi_protocol: c_int,
    soi_family: c_int,
    soi_options: c_short,
    soi_linger: c_short,
    soi_state: c_short,
    soi_qlen: c_short,
    soi_incqlen: c_short,
    soi_qlimit: c_short,
    soi_timeo: c_short,
    soi_error: c_ushort,
    soi_oobmark: u32,
    soi_rcv: SockBufInfo,
    soi_snd: SockBufInfo,
    soi_kind: c_int,
    rfu_1: u32,
    soi_proto: SocketInfoProto,
}

#[repr(C)]
struct SocketFdInfo {
    pfi: ProcFileInfo,
    psi: SocketInfo,
}

/// macOS has no exact lookup by four-tuple open to an unprivileged user.
// The sizes `<sys/proc_info.h>` gives these structs on 64-bit macOS
// (`PROC_PIDFDSOCKETINFO_SIZE` is `sizeof(struct socket_fdinfo)`).
const _: () = assert!(size_of::<InSockInfo>() == 80);
const _: () = assert!(size_of::<TcpSockInfo>() == 120);
const _: () = assert!(size_of::<SocketInfoProto>() == 528);
const _: () = assert!(std::mem::offset_of!(SocketInfo, soi_proto) == 240);
const _: () = assert!(size_of::<SocketFdInfo>() == 792);

pub(super) fn exact(
    _peer: SocketAddr,
    _local: SocketAddr,
) -> Option<Result<PeerSocket, PeerError>> {
    None
}

/// `peer` and `local` are canonical (IPv4-mapped addresses as IPv4).
pub(super) fn scan(peer: SocketAddr, local: SocketAddr) -> Result<PeerSocket, PeerError> {
    let uid = nix::unistd::getuid().as_raw();
    for pid in own_pids(uid)? {
        for fd in socket_fds(pid) {
            if let Some(owner) = tcp_owner(pid, fd, peer, local) {
                return Ok(PeerSocket {
                    uid: owner,
                    key: SocketKey::Pid(pid),
                });
            }
        }
    }
    Err(PeerError::NotFound { peer })
}

/// The pids whose uid is `uid`.
fn own_pids(uid: u32) -> Result<Vec<c_int>, PeerError> {
    let io = |what| PeerError::Io {
        what,
        source: std::io::Error::last_os_error(),
    };
    // SAFETY: a null buffer asks for the size needed.
    let need = unsafe { libc::proc_listpids(PROC_UID_ONLY, uid, std::ptr::null_mut(), 0) };
    if need <= 0 {
        return Err(io("proc_listpids"));
    }
    // Room for processes started since the size was asked.
    let mut pids = vec![0 as c_int; need as usize / size_of::<c_int>() + 32];
    let bytes = c_int::try_from(pids.len() * size_of::<c_int>()).unwrap_or(c_int::MAX);
    // SAFETY: the buffer holds `bytes` bytes of `c_int`s.
    let got = unsafe { libc::proc_listpids(PROC_UID_ONLY, uid, pids.as_mut_ptr().cast(), bytes) };
    if got <= 0 {
        return Err(io("proc_listpids"));
    }
    pids.truncate(got as usize / size_of::<c_int>());
    pids.retain(|p| *p > 0);
    Ok(pids)
}

/// The socket descriptors of `pid` (none if it cannot be inspected).
fn socket_fds(pid: c_int) -> Vec<c_int> {
    let entry = size_of::<libc::proc_fdinfo>();
    // SAFETY: a null buffer asks for the size needed.
    let need = unsafe { libc::proc_pidinfo(pid, PROC_PIDLISTFDS, 0, std::ptr::null_mut(), 0) };
    if need <= 0 {
        return Vec::new();
    }
    let mut fds = vec![
        libc::proc_fdinfo {
            proc_fd: 0,
            proc_fdtype: 0,
        };
        need as usize / entry + 16
    ];
    let bytes = c_int::try_from(fds.len() * entry).unwrap_or(c_int::MAX);
    // SAFETY: the buffer holds `bytes` bytes of `proc_fdinfo`s.
    let got =
        unsafe { libc::proc_pidinfo(pid, PROC_PIDLISTFDS, 0, fds.as_mut_ptr().cast(), bytes) };
    if got <= 0 {
        return Vec::new();
    }
    fds.truncate(got as usize / entry);
    fds.iter()
        .filter(|f| f.proc_fdtype == PROX_FDTYPE_SOCKET)
        .map(|f| f.proc_fd)
        .collect()
}

/// The owner uid of `pid`'s descriptor `fd` if it is the TCP socket whose
/// local end is `peer` and whose remote end is `local`.
fn tcp_owner(pid: c_int, fd: c_int, peer: SocketAddr, local: SocketAddr) -> Option<u32> {
    // SAFETY: all-zero is a valid value of these plain C structs.
    let mut info: SocketFdInfo = unsafe { std::mem::zeroed() };
    let size = c_int::try_from(size_of::<SocketFdInfo>()).ok()?;
    // SAFETY: `info` is `size` bytes, written by the kernel.
    let got = unsafe {
        libc::proc_pidfdinfo(pid, fd, PROC_PIDFDSOCKETINFO, (&raw mut info).cast(), size)
    };
    if got <= 0 || info.psi.soi_kind != SOCKINFO_TCP {
        return None;
    }
    // SAFETY: `soi_kind` says the union holds a `tcp_sockinfo`.
    let ini = unsafe { info.psi.soi_proto.pri_tcp.tcpsi_ini };
    let v4 = ini.insi_vflag & INI_IPV4 != 0;
    let end = |addr: [u32; 4], port: c_int| {
        let mut b = [0u8; 16];
        for (i, w) in addr.iter().enumerate() {
            b[i * 4..i * 4 + 4].copy_from_slice(&w.to_ne_bytes());
        }
        let ip = if v4 {
            IpAddr::V4(Ipv4Addr::new(b[12], b[13], b[14], b[15]))
        } else {
            IpAddr::V6(Ipv6Addr::from(b))
        };
        // The port is the network-order `in_port_t` widened to an int.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let port = u16::from_be(port as u16);
        canonical(SocketAddr::new(ip, port))
    };
    let matches =
        end(ini.insi_laddr, ini.insi_lport) == peer && end(ini.insi_faddr, ini.insi_fport) == local;
    matches.then_some(info.psi.soi_stat.vst_uid)
}

/// The parent of `pid` (`proc_pidinfo(PROC_PIDTBSDINFO)`), if it can be read.
pub(crate) fn parent(pid: c_int) -> Option<c_int> {
    // SAFETY: all-zero is a valid value of this plain C struct.
    let mut info: libc::proc_bsdinfo = unsafe { std::mem::zeroed() };
    let size = c_int::try_from(size_of::<libc::proc_bsdinfo>()).ok()?;
    // SAFETY: `info` is `size` bytes, written by the kernel.
    let got =
        unsafe { libc::proc_pidinfo(pid, libc::PROC_PIDTBSDINFO, 0, (&raw mut info).cast(), size) };
    (got == size)
        .then(|| c_int::try_from(info.pbi_ppid).ok())
        .flatten()
}

unsafe extern "C" {
    /// libsystem_sandbox (in libSystem): with no operation, `1` when `pid`
    /// runs under any Seatbelt sandbox.
    fn sandbox_check(pid: libc::pid_t, operation: *const libc::c_char, kind: c_int, ...) -> c_int;
}

/// Whether `pid` runs in a Seatbelt sandbox; unknown counts as yes.
pub(crate) fn sandboxed(pid: c_int) -> bool {
    // SAFETY: a null operation with SANDBOX_FILTER_NONE (0) takes no
    // further arguments.
    let r = unsafe { sandbox_check(pid, std::ptr::null(), 0) };
    r != 0
}
