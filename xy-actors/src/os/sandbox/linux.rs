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
}

/// The seccomp filter: `EACCES` for what a sandbox never allows and what
/// its network mode forbids, everything else allowed.
///
/// - Every sandbox: `socket(AF_UNIX, …)` (Landlock up to ABI 8 does not
///   confine Unix `connect`, and xyd's control socket must stay out of
///   reach: D102) and `io_uring_setup` (io_uring operations bypass seccomp).
///   `socketpair` stays allowed: runtimes use it for their own pipes.
/// - `network "none"`/`"allow"`: every `socket()` but AF_INET/AF_INET6 +
///   SOCK_STREAM + protocol 0/TCP (so UDP, raw, SCTP, MPTCP, netlink and
///   packet sockets are refused: Landlock's rules cover TCP only), and
///   `sendto`/`sendmsg` with `MSG_FASTOPEN` (a connect in disguise).
pub(crate) fn socket_filter(network: NetworkMode) -> Result<BpfProgram, seccompiler::Error> {
    let arch: seccompiler::TargetArch = std::env::consts::ARCH.try_into()?;
    let cond = |arg: u8, op: SeccompCmpOp, value: u64| {
        SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value)
    };
    let af = |v: libc::c_int| u64::try_from(v).unwrap_or_default();
    let mut socket = Vec::new();
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    match network {
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
                libc::SYS_sendmsg,
                vec![SeccompRule::new(vec![cond(
                    2,
                    SeccompCmpOp::MaskedEq(fastopen),
                    fastopen,
                )?])?],
            );
        }
    }
    rules.insert(libc::SYS_socket, socket);
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
        // processes outside the sandbox. Extra, so best effort.
        if n >= 6 {
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
        let filter = socket_filter(rules.network)
            .map_err(|e| format!("sandbox: cannot build the seccomp filter: {e}"))?;
        let mut phrases = vec![format!(
            "landlock abi {n}: files{}",
            if network { ", tcp" } else { "" }
        )];
        phrases.push(match rules.network {
            NetworkMode::Any => "seccomp: no unix sockets, no io_uring".to_owned(),
            NetworkMode::None | NetworkMode::Allow => {
                "seccomp: tcp only (no udp, raw or unix sockets), no io_uring".to_owned()
            }
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
        let mut ruleset = self.ruleset.take();
        let filter = std::mem::take(&mut self.filter);
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
                seccompiler::apply_filter(&filter).map_err(|_| std::io::Error::last_os_error())
            });
        }
    }
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
        for mode in [NetworkMode::Any, NetworkMode::None, NetworkMode::Allow] {
            let prog = socket_filter(mode).unwrap();
            assert!(!prog.is_empty(), "{mode:?}");
        }
        // The type rules make "none" much longer than "any".
        assert!(
            socket_filter(NetworkMode::None).unwrap().len()
                > socket_filter(NetworkMode::Any).unwrap().len() + 16
        );
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
    fn this_kernel_reports_an_abi() {
        // The CI kernel has Landlock (ABI 7); elsewhere at least not negative.
        assert!(kernel_abi() >= 0);
    }
}
