//! The daemon's descriptor budget: raising the soft `RLIMIT_NOFILE` to the
//! hard limit at boot (SPEC §18), so a flood of connections meets the
//! per-listener caps before it meets `EMFILE`, and the limit a child gets
//! back (the one xyd started with: a server written for the usual 1,024,
//! `select(2)` or a close-every-fd loop, must not see xyd's budget).
//! Returns what it did; the daemon logs it.

use std::sync::OnceLock;

use nix::sys::resource::{Resource, getrlimit, rlim_t, setrlimit};

/// The (soft, hard) limit children are given, set once by a raise that
/// changed the soft limit.
static CHILD_LIMIT: OnceLock<(rlim_t, rlim_t)> = OnceLock::new();

/// The soft descriptor limit before and after [`raise_nofile_limit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NofileLimit {
    /// The soft limit xyd started with.
    pub before: u64,
    /// The soft limit now (equal to `before` when there was nothing to raise).
    pub after: u64,
    /// The hard limit.
    pub hard: u64,
}

/// The highest soft limit to ask for. macOS refuses one above `OPEN_MAX`
/// (`<sys/syslimits.h>`) when the hard limit is `RLIM_INFINITY`, as it is
/// by default; elsewhere the hard limit is the ceiling.
#[cfg(target_os = "macos")]
fn ceiling(hard: rlim_t) -> rlim_t {
    hard.min(10_240)
}
#[cfg(not(target_os = "macos"))]
fn ceiling(hard: rlim_t) -> rlim_t {
    hard
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (on macOS to at most
/// `OPEN_MAX`). Children get the limit xyd started with back
/// ([`restore_for_child`]).
///
/// # Errors
///
/// The `getrlimit`/`setrlimit` error; the limit is then unchanged.
pub fn raise_nofile_limit() -> Result<NofileLimit, nix::Error> {
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    let target = ceiling(hard);
    if target > soft {
        setrlimit(Resource::RLIMIT_NOFILE, target, hard)?;
        let _ = CHILD_LIMIT.set((soft, hard));
    }
    Ok(NofileLimit {
        before: soft,
        after: target.max(soft),
        hard,
    })
}

/// Gives `cmd`'s child the descriptor limit xyd started with, when xyd
/// raised its own; nothing otherwise (the spawn then keeps std's
/// `posix_spawn` path).
pub(crate) fn restore_for_child(cmd: &mut tokio::process::Command) {
    let Some(&(soft, hard)) = CHILD_LIMIT.get() else {
        return;
    };
    // Between fork and exec only async-signal-safe calls are allowed:
    // setrlimit(2) is one, and nothing here allocates.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(move || {
            setrlimit(Resource::RLIMIT_NOFILE, soft, hard).map_err(std::io::Error::from)
        });
    }
}
