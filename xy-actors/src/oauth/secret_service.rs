//! The freedesktop Secret Service (GNOME Keyring, KWallet) as a grant
//! store, through libsecret's `secret-tool` the way the macOS keychain is
//! used through `security`: one item per server, attributes `service
//! xy-oauth` and `account <server>`, a readable label. The record goes in
//! on stdin and comes back on stdout, never on a command line. Each call
//! is a child process with a deadline (a locked collection may prompt and
//! never answer); the process is killed when it passes.
//!
//! Also the probe that decides whether a Secret Service is reachable on
//! the session bus (D136).

use std::io;
use std::time::Duration;

use super::backend::{KEYCHAIN_SERVICE, TokenBackend, ToolOutput, run_tool};

/// The tool, looked up on `PATH` (Debian/Ubuntu `libsecret-tools`, Fedora
/// `libsecret`).
const SECRET_TOOL: &str = "secret-tool";

/// How long one `secret-tool` may run (the caller's bound is longer).
const CALL_DEADLINE: Duration = Duration::from_secs(15);
/// How long the start-up probe may take before the file store is chosen.
const PROBE_DEADLINE: Duration = Duration::from_secs(5);
/// An account no server can have (server names never start with `.`),
/// looked up by the probe.
const PROBE_ACCOUNT: &str = ".xy-probe";

/// `secret-tool` exits 1 with nothing on stderr when no item matched; a
/// real failure (no bus, no service, refused unlock) says why there.
fn is_no_match(o: &ToolOutput) -> bool {
    o.status.code() == Some(1) && o.stderr.trim().is_empty()
}

/// Whether a Secret Service answers on the session bus: there is a bus
/// (`DBUS_SESSION_BUS_ADDRESS`, or `$XDG_RUNTIME_DIR/bus` that libdbus
/// falls back to), `secret-tool` runs, and a lookup of an account no
/// server has gets "no match" rather than an error. Blocks up to a few
/// seconds: call it off the async thread.
pub(crate) fn reachable() -> bool {
    let bus = std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_some_and(|a| !a.is_empty())
        || std::env::var_os("XDG_RUNTIME_DIR")
            .is_some_and(|d| std::path::Path::new(&d).join("bus").exists());
    if !bus {
        return false;
    }
    let store = SecretServiceStore::new();
    match run_tool(
        &store.program,
        &lookup_args(PROBE_ACCOUNT),
        b"",
        PROBE_DEADLINE,
    ) {
        Ok(o) => o.status.success() || is_no_match(&o),
        Err(_) => false,
    }
}

fn lookup_args(server: &str) -> [&str; 5] {
    ["lookup", "service", KEYCHAIN_SERVICE, "account", server]
}

/// The Secret Service through `secret-tool`.
pub(crate) struct SecretServiceStore {
    program: String,
}

impl SecretServiceStore {
    pub(crate) fn new() -> SecretServiceStore {
        SecretServiceStore {
            program: SECRET_TOOL.to_owned(),
        }
    }
}

impl TokenBackend for SecretServiceStore {
    fn load(&self, server: &str) -> io::Result<Option<Vec<u8>>> {
        let o = run_tool(&self.program, &lookup_args(server), b"", CALL_DEADLINE)?;
        if is_no_match(&o) {
            return Ok(None);
        }
        o.check("secret-tool", "lookup")?;
        Ok(Some(o.stdout))
    }

    fn save(&self, server: &str, bytes: &[u8]) -> io::Result<()> {
        // An item with the same attributes is replaced in place.
        let label = format!("--label=xy OAuth grant for {server}");
        let o = run_tool(
            &self.program,
            &[
                "store",
                &label,
                "service",
                KEYCHAIN_SERVICE,
                "account",
                server,
            ],
            bytes,
            CALL_DEADLINE,
        )?;
        o.check("secret-tool", "store")
    }

    fn delete(&self, server: &str) -> io::Result<bool> {
        let o = run_tool(
            &self.program,
            &["clear", "service", KEYCHAIN_SERVICE, "account", server],
            b"",
            CALL_DEADLINE,
        )?;
        if is_no_match(&o) {
            return Ok(false);
        }
        o.check("secret-tool", "clear")?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn the_record_goes_on_stdin_and_failures_are_told_from_no_match() {
        // A fake `secret-tool`: one item in a file, argv logged.
        let d = tempfile::tempdir().unwrap();
        let fake = d.path().join("secret-tool");
        let item = d.path().join("item");
        let argv = d.path().join("argv");
        std::fs::write(
            &fake,
            format!(
                r#"#!/usr/bin/env python3
import os, sys
item, argv = {item:?}, {argv:?}
open(argv, "a").write(" ".join(sys.argv[1:]) + "\n")
cmd, attrs = sys.argv[1], sys.argv[2:]
if attrs[-1] == "broken":
    sys.stderr.write("Cannot autolaunch D-Bus without X11 $DISPLAY\n"); sys.exit(1)
if cmd == "store":
    open(item, "wb").write(sys.stdin.buffer.read())
elif cmd == "lookup":
    if not os.path.exists(item): sys.exit(1)
    sys.stdout.buffer.write(open(item, "rb").read())
elif cmd == "clear":
    if not os.path.exists(item): sys.exit(1)
    os.remove(item)
"#,
                item = item.display().to_string(),
                argv = argv.display().to_string()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let s = SecretServiceStore {
            program: fake.display().to_string(),
        };
        assert_eq!(s.load("gh").unwrap(), None);
        s.save("gh", br#"{"token":"tok-secret-1"}"#).unwrap();
        assert_eq!(
            s.load("gh").unwrap().unwrap(),
            br#"{"token":"tok-secret-1"}"#
        );
        assert!(s.delete("gh").unwrap());
        assert!(!s.delete("gh").unwrap());
        let e = s.load("broken").unwrap_err().to_string();
        assert!(e.contains("Cannot autolaunch"), "{e}");
        assert!(s.save("broken", b"x").is_err());
        let args = std::fs::read_to_string(&argv).unwrap();
        assert!(!args.contains("tok-secret-1"), "{args}");
        assert!(
            args.contains("store --label=xy OAuth grant for gh service xy-oauth account gh"),
            "{args}"
        );
    }
}
