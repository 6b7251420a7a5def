//! `xy-test-exfil`: the exfiltration child of the sandbox tests (SPEC §21).
//! Runs the probes given as a JSON list (`xy_core::sandbox::probe::Probe`),
//! prints one JSON line per probe (`{"who":"child",…}`), then re-runs
//! itself as a grandchild that does the same (`"who":"grandchild"`) and
//! reports whether it can lift the confinement (`no_new_privs`, seccomp
//! mode from `/proc/self/status`), then stays alive. `--read-or-die PATH`
//! (`--mkdir-or-die PATH`) instead reads PATH (creates directory PATH)
//! and, refused, exits 1 with Node's error line on stderr (what the
//! denial recogniser reads). `--tricks DIR` instead runs the socket tricks
//! of SPEC §24/§25 (a `listen()` without `bind()`, a datagram socketpair
//! sent to and connected to a Unix path, a Unix server/client pair under
//! DIR, a connect to the abstract socket `@<DIR's name>` the test opened)
//! and reports which of `--env NAME,…` it sees, one JSON line each
//! (`{"trick":…,"outcome":"allowed"|"blocked",…}`) on stderr, then stays
//! alive.

use std::sync::{Arc, Mutex};

use serde_json::json;
use xy_core::sandbox::probe::Probe;
use xy_testbins::args::Args;
use xy_testbins::out::{Shared, err, send};
use xy_testbins::sys;

const USAGE: &str = "xy-test-exfil [--probes JSON] [--grandchild] [--read-or-die PATH] \
                     [--mkdir-or-die PATH] [--tricks DIR] [--env NAME,…]";

/// `allowed`/`blocked` and the detail of one trick.
fn verdict<T: std::fmt::Debug>(r: nix::Result<T>) -> serde_json::Value {
    match r {
        Ok(v) => json!({"outcome": "allowed", "detail": format!("{v:?}")}),
        Err(e) => json!({"outcome": "blocked", "detail": e.to_string()}),
    }
}

/// The socket tricks (see the module doc); `dir` holds `dgram.sock` (a
/// datagram socket the test listens on) and room for a stream socket.
fn tricks(dir: &std::path::Path) {
    use nix::sys::socket::{
        AddressFamily, Backlog, MsgFlags, SockFlag, SockType, SockaddrIn, UnixAddr, connect,
        getsockname, listen, sendto, socket, socketpair,
    };
    use std::os::fd::AsRawFd;
    let report = |trick: &str, v: serde_json::Value| {
        let mut v = v;
        v["trick"] = json!(trick);
        err(&v.to_string());
    };
    // A listen without a bind: the kernel binds an ephemeral port on every
    // interface.
    let unbound = socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::empty(),
        None,
    )
    .and_then(|s| {
        listen(&s, Backlog::new(8)?)?;
        let addr: SockaddrIn = getsockname(s.as_raw_fd())?;
        std::mem::forget(s); // Keep listening: the test tries to reach it.
        Ok(addr.port())
    });
    report("listen_unbound", verdict(unbound));
    let target = UnixAddr::new(&dir.join("dgram.sock"));
    let pair = || {
        socketpair(
            AddressFamily::Unix,
            SockType::Datagram,
            None,
            SockFlag::empty(),
        )
    };
    let sent = target.and_then(|t| {
        let (a, _b) = pair()?;
        sendto(a.as_raw_fd(), b"sendto", &t, MsgFlags::empty())
    });
    report("dgram_sendto_path", verdict(sent));
    let connected = UnixAddr::new(&dir.join("dgram.sock")).and_then(|t| {
        let (a, _b) = pair()?;
        connect(a.as_raw_fd(), &t)?;
        nix::sys::socket::send(a.as_raw_fd(), b"connect", MsgFlags::empty())
    });
    report("dgram_connect_path", verdict(connected));
    // A Unix stream server and client of its own (a browser and its helpers).
    let path = dir.join(format!("own-{}.sock", std::process::id()));
    let own = (|| {
        use std::io::{Read, Write};
        let l = std::os::unix::net::UnixListener::bind(&path)?;
        let mut c = std::os::unix::net::UnixStream::connect(&path)?;
        let (mut s, _) = l.accept()?;
        c.write_all(b"ping")?;
        let mut b = [0u8; 4];
        s.read_exact(&mut b)?;
        Ok::<_, std::io::Error>(String::from_utf8_lossy(&b).into_owned())
    })();
    report(
        "unix_pair",
        match own {
            Ok(v) => json!({"outcome": "allowed", "detail": v}),
            Err(e) => json!({"outcome": "blocked", "detail": e.to_string()}),
        },
    );
    // The abstract socket the test (outside the sandbox) listens on.
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Abstract sockets are Linux's own.
    #[cfg(target_os = "linux")]
    let abstract_ = UnixAddr::new_abstract(name.as_bytes()).and_then(|a| {
        let s = socket(
            AddressFamily::Unix,
            SockType::Stream,
            SockFlag::empty(),
            None,
        )?;
        connect(s.as_raw_fd(), &a)
    });
    #[cfg(not(target_os = "linux"))]
    let abstract_: nix::Result<()> = {
        let _ = &name;
        Err(nix::errno::Errno::ENOTSUP)
    };
    report("abstract_outside", verdict(abstract_));
}

fn status_field(name: &str) -> String {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_owned()))
        .unwrap_or_default()
}

fn main() {
    let mut args = Args::from_env(USAGE);
    let mut probes = String::from("[]");
    let mut grandchild = false;
    let mut or_die: Option<(&str, String)> = None;
    let mut tricks_dir: Option<String> = None;
    let mut env_names: Option<String> = None;
    while let Some(flag) = args.next_flag() {
        match flag.as_str() {
            "--probes" => probes = args.value(&flag),
            "--grandchild" => grandchild = true,
            "--read-or-die" => or_die = Some(("open", args.value(&flag))),
            "--mkdir-or-die" => or_die = Some(("mkdir", args.value(&flag))),
            "--tricks" => tricks_dir = Some(args.value(&flag)),
            "--env" => env_names = Some(args.value(&flag)),
            _ => args.unknown(&flag),
        }
    }
    if let Some((op, path)) = or_die {
        let done = if op == "open" {
            std::fs::read(&path).map(drop)
        } else {
            std::fs::create_dir(&path)
        };
        if let Err(e) = done {
            let (code, what) = if e.kind() == std::io::ErrorKind::PermissionDenied {
                ("EACCES", "permission denied")
            } else {
                ("ENOENT", "no such file or directory")
            };
            err(&format!("Error: {code}: {what}, {op} '{path}'"));
            std::process::exit(1);
        }
        err(&format!("{op} {path} succeeded"));
        sys::sleep_forever();
    }
    if tricks_dir.is_some() || env_names.is_some() {
        // On stderr: a stdio server's stdout is the protocol, not its log.
        if let Some(names) = env_names {
            let seen: serde_json::Map<String, serde_json::Value> = names
                .split(',')
                .map(|n| (n.to_owned(), json!(std::env::var_os(n).is_some())))
                .collect();
            let home = std::env::var("HOME").unwrap_or_default();
            err(&json!({"env": seen, "home": home}).to_string());
        }
        if let Some(dir) = tricks_dir {
            tricks(std::path::Path::new(&dir));
        }
        err(&json!({"done": true}).to_string());
        sys::sleep_forever();
    }
    let list: Vec<Probe> =
        serde_json::from_str(&probes).unwrap_or_else(|e| args.fail(&format!("--probes: {e}")));
    let out: Shared = Arc::new(Mutex::new(std::io::stdout()));
    let who = if grandchild { "grandchild" } else { "child" };
    for p in &list {
        let r = p.run();
        send(
            &out,
            &json!({"who": who, "probe": r.probe, "outcome": r.outcome, "detail": r.detail}),
        );
    }
    if grandchild {
        send(
            &out,
            &json!({
                "who": who,
                "no_new_privs": status_field("NoNewPrivs:"),
                "seccomp": status_field("Seccomp:"),
            }),
        );
        return;
    }
    let me = std::env::current_exe().unwrap_or_else(|e| args.fail(&e.to_string()));
    match std::process::Command::new(me)
        .args(["--grandchild", "--probes", &probes])
        .status()
    {
        Ok(s) => send(&out, &json!({"who": who, "grandchild_exit": s.code()})),
        Err(e) => send(
            &out,
            &json!({"who": who, "grandchild_error": e.to_string()}),
        ),
    }
    send(&out, &json!({"who": who, "done": true}));
    sys::sleep_forever();
}
