//! xyd's memory policy towards glibc's allocator (Linux only): two arenas
//! instead of one per thread (D34), and a thread that gives freed heap pages
//! back after boot and then once a minute (D43). macOS's allocator needs
//! neither.

/// glibc gives every thread that allocates an arena of its own (up to 8 per
/// core), each keeping the pages it freed. The daemon's allocations are
/// small and its threads few and mostly idle: two arenas are enough, and an
/// idle daemon keeps less resident (D34; docs/performance-history.md, issue 13).
/// `MALLOC_ARENA_MAX` in the environment still decides if set.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn limit_malloc_arenas() {
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: called first in `main`, before any other thread exists;
        // `mallopt` only sets an allocator parameter.
        #[allow(unsafe_code)]
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 2);
        }
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn limit_malloc_arenas() {}

/// When the daemon gives freed heap pages back (D43): 10 and 20 s after it
/// starts (the boot's burst), then 40 and 80 s, then every 64 s. Never two
/// trims within 10 s: an idle daemon wakes at most once per 10 s (issue 8's
/// target), and once a minute for good.
#[cfg_attr(not(all(target_os = "linux", target_env = "gnu")), allow(dead_code))]
fn trim_delays() -> impl Iterator<Item = std::time::Duration> {
    [10, 10, 20, 40]
        .into_iter()
        .chain(std::iter::repeat(64))
        .map(std::time::Duration::from_secs)
}

/// glibc returns freed memory to the system only from the top of a heap:
/// pages freed between live allocations (the boot's burst of spawns, port
/// checks and tool lists; a flood's buffers) stay resident for good. A
/// thread of its own calls `malloc_trim(0)` on the schedule of
/// [`trim_delays`], kept off the async workers: what a fleet's probes freed
/// goes back to the kernel (D43, docs/performance-history.md).
/// macOS's allocator returns free pages by itself.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn start_trimmer() {
    let spawned = std::thread::Builder::new()
        .name("xyd-heap".into())
        .spawn(move || {
            for delay in trim_delays() {
                std::thread::sleep(delay);
                let started = std::time::Instant::now();
                let released = trim();
                let took_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
                tracing::debug!(released, took_us, "heap trimmed");
            }
        });
    if let Err(e) = spawned {
        // Only memory is at stake: run without.
        tracing::warn!("could not start the heap trimmer: {e}");
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn start_trimmer() {}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn trim() -> bool {
    false
}

/// Gives every page that lies wholly in freed heap memory back to the
/// system; true if any was.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn trim() -> bool {
    // SAFETY: `malloc_trim` takes each arena's lock itself and only
    // releases pages that no allocation uses; it is safe from any thread.
    #[allow(unsafe_code)]
    let released = unsafe { libc::malloc_trim(0) };
    released == 1
}

#[cfg(test)]
mod tests {
    #[test]
    fn trims_never_come_twice_within_ten_seconds() {
        let secs: Vec<u64> = super::trim_delays().take(7).map(|d| d.as_secs()).collect();
        assert_eq!(secs, [10, 10, 20, 40, 64, 64, 64]);
        assert!(super::trim_delays().take(100).all(|d| d.as_secs() >= 10));
    }
}
