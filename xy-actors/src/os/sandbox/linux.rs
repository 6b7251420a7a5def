//! Linux enforcement (SPEC §21, D101): a Landlock ruleset for files (and
//! TCP ports under `network "none"`/`"allow"`) and a seccomp filter for
//! what Landlock does not cover (AF_UNIX and non-TCP sockets, io_uring,
//! TCP Fast Open), both built in the parent; the child only calls
//! `landlock_restrict_self` and `seccomp` between fork and exec, which
//! follow it and every descendant and cannot be lifted (`no_new_privs`).

use std::collections::BTreeMap;
use std::path::Path;

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath,
    PathFd, Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope,
};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};
use xy_core::sandbox::{NetworkMode, Rules};

/// The Landlock ABI the running kernel offers (0: none), asked with
/// `landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`.
pub(crate) fn kernel_abi() -> i32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: the version query reads no memory (NULL attr, size 0).
    #[allow(unsafe_code)]
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    i32::try_from(v).unwrap_or(0).max(0)
}

/// The ruleset and the filter of one spawn, applied in the child.
pub(crate) struct Enforcer {
    /// Taken by the (`FnMut`) `pre_exec` closure: `restrict_self` consumes it.
    ruleset: Option<RulesetCreated>,
    filter: BpfProgram,
    /// An HTTP server's port under `network "none"`/`"allow"`: its every
    /// `listen()` is decided by xyd ([`ListenGuard`]).
    listen_guard: Option<u16>,
}

/// The filter that hands each `listen()` to xyd as a seccomp user
/// notification (the arch check lets a foreign syscall ABI through to the
/// main filter's verdict).
fn listen_notify_filter() -> Vec<libc::sock_filter> {
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const RET_K: u16 = 0x06;
    // AUDIT_ARCH_X86_64 / AUDIT_ARCH_AARCH64.
    const ARCH: u32 = if cfg!(target_arch = "x86_64") {
        0xC000_003E
    } else {
        0xC000_00B7
    };
    let op = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    let listen = u32::try_from(libc::SYS_listen).unwrap_or(u32::MAX);
    vec![
        op(LD_W_ABS, 0, 0, 4), // seccomp_data.arch
        op(JEQ_K, 1, 0, ARCH),
        op(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
        op(LD_W_ABS, 0, 0, 0), // seccomp_data.nr
        op(JEQ_K, 0, 1, listen),
        op(RET_K, 0, 0, libc::SECCOMP_RET_USER_NOTIF),
        op(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
    ]
}

/// xyd's side of one spawn's `listen()` notifications (D181): the child
/// sends the listener fd over `parent`'s pair before exec; a thread then
/// answers each `listen()`: on a TCP socket bound to `port` xyd listens on
/// its own duplicate of the socket (`pidfd_getfd`: the same socket, so no
/// descriptor swapped in between can be listened on instead) and returns
/// the result; on anything else (an unbound socket, which `listen()` would
/// bind to an ephemeral port on every interface) `EACCES`.
struct ListenGuard;

#[allow(unsafe_code)]
impl ListenGuard {
    /// Starts the thread for a spawn whose child holds the pair's other end.
    fn start(parent: std::os::fd::OwnedFd, port: u16) {
        let spawned = std::thread::Builder::new()
            .name("xy-listen-guard".into())
            .spawn(move || {
                if let Some(listener) = Self::receive(&parent) {
                    drop(parent);
                    Self::serve(&listener, port);
                }
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot start the listen guard: the child's listen() calls will wait");
        }
    }

    /// The listener fd the child sent, or `None` when it exited first (the
    /// pair's EOF once the command is dropped) or sent nothing in time.
    fn receive(parent: &std::os::fd::OwnedFd) -> Option<std::os::fd::OwnedFd> {
        use std::os::fd::{AsRawFd, FromRawFd};
        let timeout = libc::timeval {
            tv_sec: 30,
            tv_usec: 0,
        };
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let mut space = [0u64; 8];
        // SAFETY: plain system calls on descriptors this thread owns, with
        // buffers that outlive them; the control message is read only when
        // the kernel says it holds one descriptor.
        unsafe {
            libc::setsockopt(
                parent.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&raw const timeout).cast(),
                u32::try_from(std::mem::size_of::<libc::timeval>()).unwrap_or(16),
            );
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &raw mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = space.as_mut_ptr().cast();
            msg.msg_controllen = std::mem::size_of_val(&space);
            if libc::recvmsg(parent.as_raw_fd(), &raw mut msg, libc::MSG_CMSG_CLOEXEC) <= 0 {
                return None;
            }
            let cmsg = libc::CMSG_FIRSTHDR(&raw const msg);
            if cmsg.is_null()
                || (*cmsg).cmsg_level != libc::SOL_SOCKET
                || (*cmsg).cmsg_type != libc::SCM_RIGHTS
            {
                return None;
            }
            let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>());
            (fd >= 0).then(|| std::os::fd::OwnedFd::from_raw_fd(fd))
        }
    }

    /// Answers notifications until every process under the filter is gone.
    fn serve(listener: &std::os::fd::OwnedFd, port: u16) {
        use std::os::fd::AsRawFd;
        let lfd = listener.as_raw_fd();
        loop {
            let mut poll = libc::pollfd {
                fd: lfd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one pollfd on the stack.
            let n = unsafe { libc::poll(&raw mut poll, 1, -1) };
            if n < 0 {
                if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return;
            }
            if poll.revents & libc::POLLIN == 0 {
                return; // POLLHUP: the sandbox's last process is gone.
            }
            // SAFETY: the kernel fills the zeroed notification.
            let mut notif: libc::seccomp_notif = unsafe { std::mem::zeroed() };
            if unsafe { libc::ioctl(lfd, libc::SECCOMP_IOCTL_NOTIF_RECV, &raw mut notif) } != 0 {
                continue; // The caller was killed meanwhile.
            }
            let error = Self::decide(lfd, &notif, port);
            let mut resp = libc::seccomp_notif_resp {
                id: notif.id,
                val: 0,
                error: -error,
                flags: 0,
            };
            // SAFETY: a filled response for the id just received.
            unsafe { libc::ioctl(lfd, libc::SECCOMP_IOCTL_NOTIF_SEND, &raw mut resp) };
        }
    }

    /// The errno for one `listen(fd, backlog)` (0: done, by xyd).
    fn decide(lfd: libc::c_int, notif: &libc::seccomp_notif, port: u16) -> libc::c_int {
        let pid = libc::c_int::try_from(notif.pid).unwrap_or(0);
        let target = libc::c_int::try_from(notif.data.args[0]).unwrap_or(-1);
        // The backlog is an int: its low 32 bits, sign included.
        #[allow(clippy::cast_possible_truncation)]
        let backlog = notif.data.args[1] as u32 as libc::c_int;
        // SAFETY: pidfd_open/pidfd_getfd return new descriptors (closed
        // below) or -1; getsockname writes at most `len` bytes.
        unsafe {
            let pidfd = libc::syscall(libc::SYS_pidfd_open, pid, 0);
            let Ok(pidfd) = libc::c_int::try_from(pidfd) else {
                return libc::EACCES;
            };
            if pidfd < 0 {
                return libc::EACCES;
            }
            let fd = libc::syscall(libc::SYS_pidfd_getfd, pidfd, target, 0);
            libc::close(pidfd);
            let Ok(fd) = libc::c_int::try_from(fd) else {
                return libc::EACCES;
            };
            if fd < 0 {
                return libc::EBADF;
            }
            // The id still names that task (the pid was not reused).
            let mut id = notif.id;
            let errno = if libc::ioctl(lfd, libc::SECCOMP_IOCTL_NOTIF_ID_VALID, &raw mut id) != 0 {
                libc::EACCES
            } else {
                let mut addr: libc::sockaddr_storage = std::mem::zeroed();
                let mut len =
                    u32::try_from(std::mem::size_of::<libc::sockaddr_storage>()).unwrap_or(128);
                let bound = if libc::getsockname(fd, (&raw mut addr).cast(), &raw mut len) != 0 {
                    None
                } else {
                    match libc::c_int::from(addr.ss_family) {
                        libc::AF_INET => {
                            let a: libc::sockaddr_in = std::ptr::read((&raw const addr).cast());
                            Some(u16::from_be(a.sin_port))
                        }
                        libc::AF_INET6 => {
                            let a: libc::sockaddr_in6 = std::ptr::read((&raw const addr).cast());
                            Some(u16::from_be(a.sin6_port))
                        }
                        _ => None,
                    }
                };
                if bound == Some(port) {
                    if libc::listen(fd, backlog) == 0 {
                        0
                    } else {
                        std::io::Error::last_os_error()
                            .raw_os_error()
                            .unwrap_or(libc::EACCES)
                    }
                } else {
                    libc::EACCES
                }
            };
            libc::close(fd);
            errno
        }
    }
}

/// What the seccomp filter of one spawn refuses beyond its network mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FilterFacts {
    /// The network mode.
    pub(crate) network: NetworkMode,
    /// Whether `network "any"` may create Unix sockets: only when Landlock
    /// scopes abstract ones to the sandbox (ABI 6); named ones, xyd's
    /// control socket among them, are guarded by xyd's peer check (D178).
    pub(crate) unix: bool,
    /// Whether the child may `listen()` at all under `"none"`/`"allow"`:
    /// only a supervised HTTP server, on its configured port.
    pub(crate) listen: bool,
}

/// The seccomp filter: `EACCES` for what a sandbox never allows and what
/// its network mode forbids, everything else allowed.
///
/// - Every sandbox: `io_uring_setup` (io_uring operations bypass seccomp).
/// - `network "any"`: `socket(AF_UNIX, …)` only where abstract Unix
///   sockets cannot be scoped (Landlock ABI < 6, [`FilterFacts::unix`]).
/// - `network "none"`/`"allow"`: every `socket()` but AF_INET/AF_INET6 +
///   SOCK_STREAM + protocol 0/TCP (so UDP, raw, SCTP, MPTCP, netlink,
///   packet and Unix sockets are refused: Landlock's rules cover TCP only),
///   `sendto`/`sendmsg` with `MSG_FASTOPEN` (a connect in disguise),
///   `socketpair(…, SOCK_DGRAM, …)` (a datagram socket can `connect` or
///   `sendto` any Unix socket path; stream and seqpacket pairs cannot:
///   they are connected for good), and `listen()` unless the server is a
///   supervised HTTP server (a listen without a bind binds an ephemeral
///   port on every interface, and Landlock sees no bind in it).
pub(crate) fn socket_filter(facts: FilterFacts) -> Result<BpfProgram, seccompiler::Error> {
    let network = facts.network;
    let arch: seccompiler::TargetArch = std::env::consts::ARCH.try_into()?;
    let cond = |arg: u8, op: SeccompCmpOp, value: u64| {
        SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value)
    };
    let af = |v: libc::c_int| u64::try_from(v).unwrap_or_default();
    let mut socket = Vec::new();
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    match network {
        NetworkMode::Any if facts.unix => {}
        NetworkMode::Any => {
            socket.push(SeccompRule::new(vec![cond(
                0,
                SeccompCmpOp::Eq,
                af(libc::AF_UNIX),
            )?])?);
        }
        NetworkMode::None | NetworkMode::Allow => {
            socket.push(SeccompRule::new(vec![
                cond(0, SeccompCmpOp::Ne, af(libc::AF_INET))?,
                cond(0, SeccompCmpOp::Ne, af(libc::AF_INET6))?,
            ])?);
            // The type's low nibble (SOCK_NONBLOCK/SOCK_CLOEXEC sit above it):
            // one rule per type that is not SOCK_STREAM.
            let stream = af(libc::SOCK_STREAM);
            for t in (0..16u64).filter(|t| *t != stream) {
                socket.push(SeccompRule::new(vec![cond(
                    1,
                    SeccompCmpOp::MaskedEq(0xf),
                    t,
                )?])?);
            }
            socket.push(SeccompRule::new(vec![
                cond(2, SeccompCmpOp::Ne, 0)?,
                cond(2, SeccompCmpOp::Ne, af(libc::IPPROTO_TCP))?,
            ])?);
            let fastopen = af(libc::MSG_FASTOPEN);
            rules.insert(
                libc::SYS_sendto,
                vec![SeccompRule::new(vec![cond(
                    3,
                    SeccompCmpOp::MaskedEq(fastopen),
                    fastopen,
                )?])?],
            );
            rules.insert(
                libc::SYS_socketpair,
                vec![SeccompRule::new(vec![cond(
                    1,
                    SeccompCmpOp::MaskedEq(0xf),
                    af(libc::SOCK_DGRAM),
                )?])?],
            );
            if !facts.listen {
                // No conditions: refused whatever the arguments.
                rules.insert(libc::SYS_listen, Vec::new());
            }
            rules.insert(
                libc::SYS_sendmsg,
                vec![SeccompRule::new(vec![cond(
                    2,
                    SeccompCmpOp::MaskedEq(fastopen),
                    fastopen,
                )?])?],
            );
        }
    }
    if !socket.is_empty() {
        rules.insert(libc::SYS_socket, socket);
    }
    // No conditions: refused whatever the arguments.
    rules.insert(libc::SYS_io_uring_setup, Vec::new());
    let eacces = u32::try_from(libc::EACCES).unwrap_or(13);
    SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(eacces),
        arch,
    )?
    .try_into()
    .map_err(seccompiler::Error::from)
}

/// Landlock ABI 4 (Linux 6.7) brought TCP rules.
const NET_ABI: i32 = 4;
/// Landlock ABI 6 (Linux 6.12) brought scopes: abstract Unix sockets and
/// signals confined to the sandbox.
const SCOPE_ABI: i32 = 6;

fn ll(e: impl std::fmt::Display) -> String {
    format!("sandbox: cannot build the Landlock ruleset: {e}")
}

impl Enforcer {
    /// Builds the ruleset and the filter for `rules` (`proxy_port`: the
    /// egress proxy the child may connect to under `network "allow"`;
    /// `fake_abi`: the ABI to pretend the kernel has). Returns the
    /// enforcement phrases `status` shows.
    ///
    /// # Errors
    ///
    /// The rule the kernel cannot enforce, as the `-32006` message.
    pub(crate) fn build(
        rules: &Rules,
        proxy_port: Option<u16>,
        fake_abi: Option<i32>,
    ) -> Result<(Enforcer, Vec<String>), String> {
        let n = fake_abi.unwrap_or_else(kernel_abi);
        if n < 1 {
            return Err(
                "sandbox.read/write needs Landlock (Linux ≥ 5.13 with Landlock enabled); \
                 this kernel has none, so the server is not run unconfined"
                    .to_owned(),
            );
        }
        let network = rules.network != NetworkMode::Any;
        if network && n < NET_ABI {
            return Err(format!(
                "sandbox.network \"{}\" needs Landlock ABI {NET_ABI} (Linux ≥ 6.7) for TCP rules; \
                 this kernel has ABI {n}",
                rules.network.as_str()
            ));
        }
        let abi = ABI::from(n);
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(abi))
            .map_err(ll)?;
        if network {
            ruleset = ruleset
                .handle_access(AccessNet::from_all(abi))
                .map_err(ll)?;
        }
        // Scopes (ABI 6): no signals to, and no abstract Unix sockets of,
        // processes outside the sandbox. Unix sockets are allowed under
        // "any" only with them (`FilterFacts::unix`).
        let scoped = n >= SCOPE_ABI;
        if scoped {
            ruleset = ruleset
                .set_compatibility(CompatLevel::BestEffort)
                .scope(Scope::from_all(abi))
                .map_err(ll)?;
        }
        let mut created = ruleset.create().map_err(ll)?.no_new_privs(true);
        let read = AccessFs::from_read(abi);
        let write = AccessFs::from_all(abi);
        let file_only = AccessFs::from_file(abi);
        let mut missing = Vec::new();
        let paths = rules
            .read
            .iter()
            .map(|r| (r, read))
            .chain(rules.write.iter().map(|r| (r, write)));
        for (rule, access) in paths {
            match path_rule(&rule.path, access, file_only) {
                Some(beneath) => created = created.add_rule(beneath).map_err(ll)?,
                None => missing.push(rule),
            }
        }
        if network {
            if let Some(port) = rules.listen_port {
                created = created
                    .add_rule(NetPort::new(port, AccessNet::BindTcp))
                    .map_err(ll)?;
            }
            if let Some(port) = proxy_port {
                created = created
                    .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
                    .map_err(ll)?;
            }
        }
        let facts = FilterFacts {
            network: rules.network,
            unix: scoped,
            listen: rules.listen_port.is_some(),
        };
        let filter = socket_filter(facts)
            .map_err(|e| format!("sandbox: cannot build the seccomp filter: {e}"))?;
        let mut phrases = vec![format!(
            "landlock abi {n}: files{}",
            if network { ", tcp" } else { "" }
        )];
        phrases.push(match rules.network {
            NetworkMode::Any if scoped => {
                "seccomp: no io_uring; unix sockets allowed (abstract ones scoped to the \
                 sandbox, xy's own refused by xyd)"
                    .to_owned()
            }
            NetworkMode::Any => format!(
                "seccomp: no unix sockets (landlock abi {n} cannot scope abstract ones), \
                 no io_uring"
            ),
            NetworkMode::None | NetworkMode::Allow => format!(
                "seccomp: tcp only (no udp, raw or unix sockets, no datagram socketpairs), \
                 {}no io_uring",
                if facts.listen {
                    "every listen checked by xyd, "
                } else {
                    "no listen, "
                }
            ),
        });
        phrases.push("no_new_privs".to_owned());
        let config_missing: Vec<String> = missing
            .iter()
            .filter(|r| r.source == xy_core::sandbox::RuleSource::Config)
            .map(|r| r.path.display().to_string())
            .collect();
        if !config_missing.is_empty() {
            phrases.push(format!(
                "not granted (missing at spawn): {}",
                config_missing.join(", ")
            ));
        }
        Ok((
            Enforcer {
                ruleset: Some(created),
                filter,
                listen_guard: if network { rules.listen_port } else { None },
            },
            phrases,
        ))
    }

    /// The command for `program` (as it is: Linux confines in `pre_exec`).
    pub(crate) fn command(&self, program: &Path) -> tokio::process::Command {
        tokio::process::Command::new(program)
    }

    /// Adds the `pre_exec` step that confines the child. It runs after the
    /// descriptor-limit step (`limits::restore_for_child`, added earlier),
    /// and only makes system calls: the ruleset and the BPF program were
    /// built here, in the parent.
    pub(crate) fn apply(&mut self, cmd: &mut tokio::process::Command) {
        use std::os::fd::AsRawFd;
        let mut ruleset = self.ruleset.take();
        let filter = std::mem::take(&mut self.filter);
        // The pair the child sends its listen-notification fd over; the
        // child's end lives in the closure, so it closes with the command.
        let guard = self.listen_guard.and_then(|port| {
            let (parent, child) = nix::sys::socket::socketpair(
                nix::sys::socket::AddressFamily::Unix,
                nix::sys::socket::SockType::SeqPacket,
                None,
                nix::sys::socket::SockFlag::SOCK_CLOEXEC,
            )
            .ok()?;
            ListenGuard::start(parent, port);
            Some(child)
        });
        let notify = listen_notify_filter();
        // No pair, no guard: the spawn fails rather than allow a listen unchecked.
        let unguarded = self.listen_guard.is_some() && guard.is_none();
        // Between fork and exec only async-signal-safe calls: no allocation
        // on the success paths, errors taken from errno.
        #[allow(unsafe_code)]
        unsafe {
            cmd.pre_exec(move || {
                let Some(ruleset) = ruleset.take() else {
                    return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
                };
                match ruleset.restrict_self() {
                    // Files and TCP are hard requirements: only the scopes may be partial.
                    Ok(s) if s.ruleset != RulesetStatus::NotEnforced && s.no_new_privs => {}
                    Ok(_) => return Err(std::io::Error::from_raw_os_error(libc::EPERM)),
                    Err(_) => return Err(std::io::Error::last_os_error()),
                }
                if unguarded {
                    return Err(std::io::Error::from_raw_os_error(libc::EMFILE));
                }
                if let Some(pair) = &guard {
                    send_listener(pair.as_raw_fd(), &notify)?;
                }
                seccompiler::apply_filter(&filter).map_err(|_| std::io::Error::last_os_error())
            });
        }
    }
}

/// In the child, between fork and exec: installs the listen-notification
/// filter and sends its listener fd over `pair` (then closes it here).
/// No allocation: the program and buffers are the caller's or on the stack.
#[allow(unsafe_code)]
fn send_listener(pair: libc::c_int, notify: &[libc::sock_filter]) -> std::io::Result<()> {
    let prog = libc::sock_fprog {
        len: u16::try_from(notify.len()).unwrap_or(0),
        filter: notify.as_ptr().cast_mut(),
    };
    // SAFETY: `prog` points at `notify`, alive for the call; the message
    // buffers are on this stack frame.
    unsafe {
        let lfd = libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &raw const prog,
        );
        let Ok(lfd) = libc::c_int::try_from(lfd) else {
            return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
        };
        if lfd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let mut space = [0u64; 8];
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &raw mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = space.as_mut_ptr().cast();
        let fd_len = u32::try_from(std::mem::size_of::<libc::c_int>()).unwrap_or(4);
        msg.msg_controllen = libc::CMSG_SPACE(fd_len) as usize;
        let cmsg = libc::CMSG_FIRSTHDR(&raw const msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(fd_len) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>(), lfd);
        let sent = libc::sendmsg(pair, &raw const msg, 0);
        libc::close(lfd);
        if sent < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The rule for `path` with `access` (narrowed to file rights for a file),
/// or `None` when the path does not exist.
fn path_rule(
    path: &Path,
    access: BitFlags<AccessFs>,
    file_only: BitFlags<AccessFs>,
) -> Option<PathBeneath<PathFd>> {
    let meta = std::fs::metadata(path).ok()?;
    let fd = PathFd::new(path).ok()?;
    let access = if meta.is_dir() {
        access
    } else {
        access & file_only
    };
    Some(PathBeneath::new(fd, access))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_compiles_for_every_mode() {
        let f = |network, unix, listen| {
            socket_filter(FilterFacts {
                network,
                unix,
                listen,
            })
            .unwrap()
        };
        for mode in [NetworkMode::Any, NetworkMode::None, NetworkMode::Allow] {
            for (unix, listen) in [(true, true), (false, false)] {
                assert!(!f(mode, unix, listen).is_empty(), "{mode:?}");
            }
        }
        // The type rules make "none" much longer than "any".
        assert!(
            f(NetworkMode::None, false, false).len() > f(NetworkMode::Any, false, false).len() + 16
        );
        assert!(f(NetworkMode::Any, true, false).len() < f(NetworkMode::Any, false, false).len());
    }

    fn rules(network: NetworkMode) -> Rules {
        let config = xy_core::sandbox::SandboxConfig {
            read: vec!["/nonexistent/xy-test".into()],
            network,
            ..Default::default()
        };
        let facts = xy_core::sandbox::SpawnFacts {
            home: Path::new("/root"),
            script: None,
            program: Path::new("/bin/sh"),
            interpreter: None,
            working_dir: Path::new("/tmp"),
            temp_dir: Path::new("/tmp"),
            venv: None,
            data_dir: None,
            listen_port: Some(8421),
            os: xy_core::sandbox::Os::Linux,
        };
        xy_core::sandbox::effective(&config, &facts)
    }

    #[test]
    fn a_kernel_without_what_the_block_needs_refuses_it() {
        let e = Enforcer::build(&rules(NetworkMode::Any), None, Some(0))
            .err()
            .unwrap();
        assert!(e.contains("needs Landlock"), "{e}");
        let e = Enforcer::build(&rules(NetworkMode::None), None, Some(3))
            .err()
            .unwrap();
        assert!(
            e.contains("sandbox.network \"none\" needs Landlock ABI 4"),
            "{e}"
        );
        let e = Enforcer::build(&rules(NetworkMode::Allow), Some(1), Some(2))
            .err()
            .unwrap();
        assert!(e.contains("\"allow\""), "{e}");
    }

    #[test]
    fn the_phrases_say_what_is_enforced() {
        if kernel_abi() < NET_ABI {
            return; // Needs a kernel with Landlock TCP rules (CI has ABI 7).
        }
        let (_, p) = Enforcer::build(&rules(NetworkMode::Any), None, Some(3)).unwrap();
        assert_eq!(p[0], "landlock abi 3: files");
        assert!(p.iter().any(|x| x == "no_new_privs"), "{p:?}");
        assert!(
            p.iter().any(|x| x.contains("/nonexistent/xy-test")),
            "a missing read path is named: {p:?}"
        );
        let (_, p) = Enforcer::build(&rules(NetworkMode::None), None, Some(4)).unwrap();
        assert_eq!(p[0], "landlock abi 4: files, tcp");
        assert!(p[1].contains("tcp only"), "{p:?}");
    }

    #[test]
    fn a_child_with_one_filter_more_is_confined_one_without_is_not() {
        use std::os::unix::process::CommandExt;
        let filter = socket_filter(FilterFacts {
            network: NetworkMode::Any,
            unix: true,
            listen: true,
        })
        .unwrap();
        let mut confined = std::process::Command::new("/bin/sleep");
        confined.arg("30");
        // SAFETY: only prctl and seccomp between fork and exec.
        #[allow(unsafe_code)]
        unsafe {
            confined.pre_exec(move || {
                seccompiler::apply_filter(&filter).map_err(|_| std::io::Error::last_os_error())
            });
        }
        let mut confined = confined.spawn().unwrap();
        let mut plain = std::process::Command::new("/bin/sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = |c: &std::process::Child| i32::try_from(c.id()).unwrap();
        // The one helper (D212): an unregistered child of this process
        // (as a `sandbox test` probe is of xyd's) by its filters.
        use crate::os::peer::process::is_confined_process;
        assert!(is_confined_process(pid(&confined)));
        assert!(!is_confined_process(pid(&plain)));
        // This process and a shell's (init's) processes are not.
        assert!(!is_confined_process(
            i32::try_from(std::process::id()).unwrap()
        ));
        assert!(!is_confined_process(1));
        for c in [&mut confined, &mut plain] {
            c.kill().unwrap();
            c.wait().unwrap();
        }
        // Gone: refused.
        assert!(is_confined_process(pid(&confined)));
    }

    #[test]
    fn the_listen_filter_notifies_listen_only() {
        let f = listen_notify_filter();
        assert_eq!(f.len(), 7);
        assert_eq!(f[5].k, libc::SECCOMP_RET_USER_NOTIF);
        assert_eq!(i64::from(f[4].k), libc::SYS_listen);
    }

    #[test]
    fn this_kernel_reports_an_abi() {
        // The CI kernel has Landlock (ABI 7); elsewhere at least not negative.
        assert!(kernel_abi() >= 0);
    }
}
