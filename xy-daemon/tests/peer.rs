//! Socket access (SPEC §6, §2): the socket is `0600` in a `0700` state dir,
//! and a connection from another uid is closed by the peer uid check even
//! when the file modes would let it in.
// Skips go to stderr; the helper process reports its verdict on stdout.
#![allow(clippy::print_stderr, clippy::print_stdout)]

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::helper::*;

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn socket_is_0600_and_state_dirs_0700() {
    let d = TestDaemon::start(&[("a", sleep_config(port(1), 500))]);
    assert_eq!(mode(&d.env.socket), 0o600, "socket mode");
    let state = d.env.state_dir();
    for dir in [state.clone(), state.join("logs"), state.join("run")] {
        assert_eq!(mode(&dir), 0o700, "{} mode", dir.display());
    }
}

/// Env var that turns [`peer_client_helper`] into the foreign client.
const HELPER_ENV: &str = "XY_TEST_PEER_SOCKET";

/// Not a test: the body the other-uid client runs. `peer_uid_check_*`
/// re-executes this test binary under uid 65534 with only this test
/// selected; it prints `reply:<bytes>` with what the daemon sent back.
#[test]
#[ignore = "helper process for another_users_connection_is_closed"]
fn peer_client_helper() {
    let Some(path) = std::env::var_os(HELPER_ENV) else {
        return;
    };
    // A raw socket, not `xy_core::client`: the daemon is expected to close
    // without a reply, and we report exactly what (if anything) came back.
    let mut s = match UnixStream::connect(&path) {
        Ok(s) => s,
        Err(e) => {
            println!("connect-error:{e}");
            return;
        }
    };
    s.set_read_timeout(Some(xy_testbins::wait::scaled(Duration::from_secs(10))))
        .unwrap();
    // The daemon may already have closed: a failed write is fine too.
    let _ = s.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"list\"}\n");
    let mut got = Vec::new();
    match s.read_to_end(&mut got) {
        Ok(_) => println!("reply:{}", String::from_utf8_lossy(&got).trim()),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
            println!("reply:{}", String::from_utf8_lossy(&got).trim());
        }
        Err(e) => println!("read-error:{e}"),
    }
}

#[test]
fn another_users_connection_is_closed() {
    if !nix::unistd::getuid().is_root() {
        eprintln!(
            "SKIP another_users_connection_is_closed: needs root to run a client as uid 65534"
        );
        return;
    }
    let d = TestDaemon::start(&[("a", sleep_config(port(1), 500))]);
    // Open the file modes so only the uid check stands in the way.
    std::fs::set_permissions(d.env.root.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    std::fs::set_permissions(&d.env.socket, std::fs::Permissions::from_mode(0o666)).unwrap();

    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "peer::peer_client_helper",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(HELPER_ENV, &d.env.socket)
        .uid(65534)
        .gid(65534)
        .stdin(Stdio::null())
        .output()
        .expect("run the helper as uid 65534");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "helper failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // libtest prints `test … ... ` on the same line as the helper's output.
    let verdict = stdout
        .lines()
        .find_map(|l| {
            ["reply:", "connect-error:", "read-error:"]
                .iter()
                .find_map(|m| l.find(m).map(|i| &l[i..]))
        })
        .unwrap_or_else(|| panic!("no verdict from the helper: {stdout}"));
    assert_eq!(
        verdict, "reply:",
        "the foreign client connected (modes open) and got EOF with no reply"
    );
    wait_for("refusal logged", DEADLINE, || {
        d.env
            .daemon_log()
            .contains("connection from another user refused")
    });
    assert!(d.env.daemon_log().contains("peer_uid=65534"));
    // Our own uid still gets through the same socket.
    assert!(d.result("list", None).is_array());
}
