//! The daemon's descriptor budget: raising the soft `RLIMIT_NOFILE` to the
//! hard limit at boot (SPEC §18), so a flood of connections meets the
//! per-listener caps before it meets `EMFILE`. Returns what it did; the
//! daemon logs it.

use nix::sys::resource::{Resource, getrlimit, rlim_t, setrlimit};

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
/// `OPEN_MAX`). Children inherit the raised limit.
///
/// # Errors
///
/// The `getrlimit`/`setrlimit` error; the limit is then unchanged.
pub fn raise_nofile_limit() -> Result<NofileLimit, nix::Error> {
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    let target = ceiling(hard);
    if target > soft {
        setrlimit(Resource::RLIMIT_NOFILE, target, hard)?;
    }
    Ok(NofileLimit {
        before: soft,
        after: target.max(soft),
        hard,
    })
}
