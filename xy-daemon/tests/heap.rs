//! `malloc_trim` gives freed pages back (D43, D66). A test binary of its
//! own: it measures this process's RSS, which tests running beside it in
//! one binary would move.

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn trimming_gives_freed_pages_between_live_blocks_back() {
    fn resident_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }
    // 16 MiB in 64 KiB blocks below the mmap threshold's reach of a
    // single block, each page written; then every other block freed,
    // so the freed pages sit between live ones, not at the heap's top.
    let mut blocks: Vec<Vec<u8>> = (0..256).map(|i| vec![i as u8; 60 * 1024]).collect();
    let mut kept = Vec::new();
    for (i, b) in blocks.drain(..).enumerate() {
        if i % 2 == 0 {
            kept.push(b);
        }
    }
    let before = resident_kib();
    assert!(xy_daemon::heap::trim(), "malloc_trim released nothing");
    let after = resident_kib();
    assert!(
        after + 4 * 1024 <= before,
        "expected ≥ 4 MiB back, RSS {before} → {after} KiB"
    );
    assert_eq!(kept.len(), 128);
    assert!(kept.iter().enumerate().all(|(i, b)| b[0] == (2 * i) as u8));
}
