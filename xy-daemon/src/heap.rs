//! xyd's memory policy (Linux only): towards glibc's allocator, two arenas
//! instead of one per thread (D34) and a thread that gives freed heap pages
//! back after boot and then once a minute (D43); towards the kernel, the
//! code pages only the boot ran are released once the boot is over (D158),
//! as a kernel frees its init sections. macOS needs none of it (its
//! allocator returns free pages by itself, and its memory footprint does not
//! count clean code pages).

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
            for (n, delay) in trim_delays().enumerate() {
                std::thread::sleep(delay);
                let started = std::time::Instant::now();
                let released = trim();
                let took_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
                tracing::debug!(released, took_us, "heap trimmed");
                if n < BOOT_TRIMS {
                    let code_bytes = release_boot_code();
                    tracing::debug!(code_bytes, "boot-only code pages released");
                }
            }
        });
    if let Err(e) = spawned {
        // Only memory is at stake: run without.
        tracing::warn!("could not start the heap trimmer: {e}");
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn start_trimmer() {}

/// The trims that fall in the boot's burst (10, 20, 40 and 80 s after the
/// start): each also releases the code pages the daemon has not used since
/// the last one. Later trims leave code alone: by then what is resident is
/// the idle working set, and releasing it again would only cost refaults.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const BOOT_TRIMS: usize = 4;

/// Drops xyd's own code and read-only data from its page tables (D158): the
/// boot runs much code once (flags, config parsing, the orphan sweep, the
/// first spawns and listings) that an idle daemon never runs again, yet it
/// stays mapped, and counted in RSS, for the daemon's life. What the daemon
/// still uses faults back in from the page cache on its next use (a minor
/// fault: `MADV_DONTNEED` leaves the page cache alone, unlike
/// `MADV_PAGEOUT`, whose refaults read the disk). Only the mappings that are
/// never written are touched — the executable segment and the read-only
/// segment at file offset 0 — so their contents are the file's, and
/// dropping them loses nothing. Returns the bytes of the mappings advised (0
/// if `/proc` is unreadable: only memory is at stake).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn release_boot_code() -> usize {
    let Ok(exe) = std::fs::read_link("/proc/self/exe") else {
        return 0;
    };
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return 0;
    };
    code_mappings(&maps, &exe.to_string_lossy())
        .filter(|&(start, len)| {
            // SAFETY: the range is a whole mapping of our own executable,
            // read from /proc/self/maps, never unmapped while xyd runs and
            // never written (no text relocations; the RELRO segment is not
            // in the set): a dropped page faults back in from the file with
            // the very bytes it had, so no memory's contents change.
            #[allow(unsafe_code)]
            let advised =
                unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_DONTNEED) };
            advised == 0
        })
        .map(|(_, len)| len)
        .sum()
}

/// The `(start, length)` of the never-written mappings of `exe` in a
/// `/proc/<pid>/maps` text: the executable one, and the read-only one that
/// begins at file offset 0 (headers and `.rodata`; the read-only mapping
/// after the code is the RELRO segment, written by relocation).
#[cfg_attr(not(all(target_os = "linux", target_env = "gnu")), allow(dead_code))]
fn code_mappings<'a>(maps: &'a str, exe: &'a str) -> impl Iterator<Item = (usize, usize)> + 'a {
    maps.lines().filter_map(move |line| {
        let mut fields = line.splitn(6, ' ');
        let range = fields.next()?;
        let perms = fields.next()?;
        let offset = fields.next()?;
        let path = fields.nth(2)?.trim_start();
        let never_written =
            perms == "r-xp" || (perms == "r--p" && offset.trim_start_matches('0').is_empty());
        if path != exe || !never_written {
            return None;
        }
        let (start, end) = range.split_once('-')?;
        let start = usize::from_str_radix(start, 16).ok()?;
        let end = usize::from_str_radix(end, 16).ok()?;
        Some((start, end.checked_sub(start)?))
    })
}

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

    #[test]
    fn only_the_never_written_mappings_of_the_executable_are_released() {
        let maps = "\
55b30e294000-55b30e4c7000 r--p 00000000 fd:01 123 /opt/x y/xyd
55b30e4c7000-55b30e978000 r-xp 00233000 fd:01 123 /opt/x y/xyd
55b30e978000-55b30e9ad000 r--p 006e4000 fd:01 123 /opt/x y/xyd
55b30e9ad000-55b30e9b2000 rw-p 00719000 fd:01 123 /opt/x y/xyd
7f0000000000-7f0000100000 r-xp 00000000 fd:01 456 /usr/lib/libc.so.6
7f0000200000-7f0000300000 r-xp 00000000 fd:01 123 /opt/x y/xyd (deleted)
7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0                          [stack]
";
        let found: Vec<_> = super::code_mappings(maps, "/opt/x y/xyd").collect();
        assert_eq!(
            found,
            [(0x55b3_0e29_4000, 0x23_3000), (0x55b3_0e4c_7000, 0x4b_1000)]
        );
    }
}
