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
//!
//!
//! `--mcp URL` (repeatable) instead tries to use xy's listeners from inside
//! the sandbox (SPEC §24): it POSTs `initialize` to each URL (through the
//! egress proxy when the sandbox set `HTTP_PROXY`) and prints
//! `{"who":…,"mcp":URL,"answered":…,"status":…}` (`answered`: an MCP result
//! came back); then a grandchild calls `setsid` and forks an orphan, which
//! waits until it has been reparented (to xyd, the subreaper) and tries the
//! same URLs (`"who":"orphan"`, then `{"who":"orphan","done":true}`).

use std::sync::{Arc, Mutex};

use serde_json::json;
use xy_core::sandbox::probe::Probe;
use xy_testbins::args::Args;
use xy_testbins::out::{Shared, err, send};
use xy_testbins::sys;

const USAGE: &str = "xy-test-exfil [--probes JSON] [--grandchild] [--read-or-die PATH] \
                     [--mkdir-or-die PATH] [--tricks DIR] [--env NAME,…] [--mcp URL]… [--mcp-role grandchild|orphan]";

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

/// Standard base64 with padding (the proxy's `Basic` credentials).
fn base64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(A[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// `HTTP_PROXY`'s address and `Proxy-Authorization` value, when the
/// sandbox gave one (`network "allow"`).
fn proxy() -> Option<(std::net::SocketAddr, String)> {
    let url = std::env::var("HTTP_PROXY").ok()?;
    let rest = url.strip_prefix("http://")?;
    let (userinfo, host) = rest.trim_end_matches('/').rsplit_once('@')?;
    Some((
        host.parse().ok()?,
        format!("Basic {}", base64(userinfo.as_bytes())),
    ))
}

/// POSTs `initialize` to `url` (plain HTTP/1.1 on loopback; through xy's
/// egress proxy when the sandbox set `HTTP_PROXY`): the status line's
/// code, and whether an MCP `initialize` result came back.
fn try_mcp(url: &str) -> (String, bool) {
    use std::io::{Read, Write};
    use std::time::Duration;
    let Some(rest) = url.strip_prefix("http://") else {
        return ("bad url".into(), false);
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let Ok(addr) = authority.parse::<std::net::SocketAddr>() else {
        return ("bad url".into(), false);
    };
    let via = proxy();
    let (addr, target, auth) = match &via {
        Some((p, auth)) => (
            *p,
            url.to_owned(),
            format!("Proxy-Authorization: {auth}\r\n"),
        ),
        None => (addr, path.to_owned(), String::new()),
    };
    let mut s = match std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
        Ok(s) => s,
        Err(e) => return (format!("connect: {e}"), false),
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "exfil", "version": "1"}}})
    .to_string();
    let head = format!(
        "POST {target} HTTP/1.1\r\nHost: {authority}\r\n{auth}Content-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    if let Err(e) = s.write_all(head.as_bytes()) {
        return (format!("write: {e}"), false);
    }
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
        if got.windows(15).any(|w| w == b"protocolVersion") {
            break;
        }
    }
    let text = String::from_utf8_lossy(&got);
    let status = text
        .split_ascii_whitespace()
        .nth(1)
        .unwrap_or("no answer")
        .to_owned();
    let answered = text.contains("\"result\"") && text.contains("protocolVersion");
    (status, answered)
}

fn mcp_mode(urls: &[String], role: Option<&str>, args: &Args) -> ! {
    let out: Shared = Arc::new(Mutex::new(std::io::stdout()));
    let me = std::env::current_exe().unwrap_or_else(|e| args.fail(&e.to_string()));
    let with_urls = |cmd: &mut std::process::Command| {
        for u in urls {
            cmd.args(["--mcp", u]);
        }
    };
    match role {
        Some("grandchild") => {
            // A new session and no parent left: what a daemonising server does.
            let _ = nix::unistd::setsid();
            let mut cmd = std::process::Command::new(&me);
            with_urls(&mut cmd);
            cmd.args(["--mcp-role", "orphan"]);
            let code = i32::from(cmd.spawn().is_err());
            std::process::exit(code);
        }
        Some("orphan") => {
            let first = nix::unistd::getppid();
            let start = std::time::Instant::now();
            while nix::unistd::getppid() == first
                && start.elapsed() < std::time::Duration::from_secs(10)
            {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            send(
                &out,
                &json!({"who": "orphan", "ppid": nix::unistd::getppid().as_raw(),
                        "sid": nix::unistd::getsid(None).map(|p| p.as_raw()).unwrap_or(-1)}),
            );
            for u in urls {
                let (status, answered) = try_mcp(u);
                send(
                    &out,
                    &json!({"who": "orphan", "mcp": u, "status": status, "answered": answered}),
                );
            }
            send(&out, &json!({"who": "orphan", "done": true}));
            std::process::exit(0);
        }
        _ => {
            for u in urls {
                let (status, answered) = try_mcp(u);
                send(
                    &out,
                    &json!({"who": "child", "mcp": u, "status": status, "answered": answered}),
                );
            }
            let mut cmd = std::process::Command::new(&me);
            with_urls(&mut cmd);
            cmd.args(["--mcp-role", "grandchild"]);
            let _ = cmd.status();
            send(&out, &json!({"who": "child", "done": true}));
            sys::sleep_forever();
        }
    }
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
    let mut mcp: Vec<String> = Vec::new();
    let mut role: Option<String> = None;
    while let Some(flag) = args.next_flag() {
        match flag.as_str() {
            "--probes" => probes = args.value(&flag),
            "--grandchild" => grandchild = true,
            "--read-or-die" => or_die = Some(("open", args.value(&flag))),
            "--mkdir-or-die" => or_die = Some(("mkdir", args.value(&flag))),
            "--tricks" => tricks_dir = Some(args.value(&flag)),
            "--env" => env_names = Some(args.value(&flag)),
            "--mcp" => mcp.push(args.value(&flag)),
            "--mcp-role" => role = Some(args.value(&flag)),
            _ => args.unknown(&flag),
        }
    }
    if !mcp.is_empty() {
        mcp_mode(&mcp, role.as_deref(), &args);
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
