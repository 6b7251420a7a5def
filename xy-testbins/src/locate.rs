//! Where the tests and benches of the other crates find these programs (and
//! `xyd`): next to the running test executable, in `target/<profile>/`.
//! Cargo builds only the bins of the package under test, so a missing binary
//! is built once per process with `cargo build -p …` for that profile.
//! Also [`free_port`], the ports those tests give the servers they run.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// `target/<profile>/`: the parent of the running test's `deps/` directory.
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent()
        .and_then(Path::parent)
        .expect("the test executable lives in target/<profile>/deps")
        .to_path_buf()
}

/// Runs `cargo build -p <package> --bins` for the running test's profile.
/// One build at a time within a process: concurrent tests would otherwise
/// each start cargo.
pub fn build(package: &str) {
    static BUILDING: Mutex<()> = Mutex::new(());
    let _guard = BUILDING.lock().unwrap_or_else(|e| e.into_inner());
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "-q", "-p", package, "--bins"]);
    if target_dir().file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("running cargo build -p {package}: {e}"));
    assert!(status.success(), "cargo build -p {package} failed");
}

/// The path of binary `name` from package `package`, building the package
/// if the binary is missing.
pub fn bin_of(package: &str, name: &str) -> PathBuf {
    let path = target_dir().join(name);
    if !path.is_file() {
        build(package);
    }
    assert!(
        path.is_file(),
        "{} missing after building {package}",
        path.display()
    );
    path
}

/// The path of one of this package's programs (`xy-test-sleep`, …).
pub fn testbin(name: &str) -> PathBuf {
    bin_of("xy-testbins", name)
}

/// The path of a current `xyd`, for tests outside `xy-daemon`: built once
/// per process even when present, because a stale `xyd` left over from an
/// earlier build would be tested against a newer client.
pub fn xyd() -> PathBuf {
    static BUILT: std::sync::Once = std::sync::Once::new();
    BUILT.call_once(|| build("xy-daemon"));
    bin_of("xy-daemon", "xyd")
}

/// A port nothing listens on right now, never handed out before in this
/// process. It is drawn from below the kernel's ephemeral range (Linux
/// 32768–60999, macOS 49152–65535): a port the kernel handed out and took
/// back can be handed out again at once — to a test daemon's gateway bound
/// to port 0, or as the source port of a connection — before the test's
/// child binds it, and the child then crash-loops while xy probes whoever
/// holds the port.
pub fn free_port() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    static GIVEN: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    const RANGE: std::ops::Range<u16> = 20_000..32_000;
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    // `RandomState` is seeded per instance: a random start per call
    // without a dependency, so parallel test processes rarely probe alike.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    let span = RANGE.end - RANGE.start;
    let start = (h.finish() % u64::from(span)) as u16;
    for i in 0..span {
        let port = RANGE.start + (start + i) % span;
        if given.contains(&port) {
            continue;
        }
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            given.push(port);
            return port;
        }
    }
    panic!("no free port in {RANGE:?}");
}
