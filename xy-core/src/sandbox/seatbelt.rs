//! The macOS Seatbelt (SBPL) profile generated from the effective rules
//! (SPEC §21). Pure text, so it is unit-tested on Linux; the daemon's
//! macOS spawn path hands it to `sandbox-exec -p`.

use super::{NetworkMode, Rules};

/// Quotes `s` as an SBPL string literal.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// The profile for `rules`: deny by default, allow process operations,
/// reads and writes beneath the rules' paths, and the network the mode
/// allows (`proxy_port`: xy's egress proxy under `network "allow"`).
pub fn profile(rules: &Rules, proxy_port: Option<u16>) -> String {
    let mut p = String::from(
        "(version 1)\n(deny default)\n(allow process*)\n(allow signal (target same-sandbox))\n(allow sysctl-read)\n(allow mach-lookup)\n(allow ipc-posix-shm)\n",
    );
    p.push_str("(allow file-read-metadata)\n");
    for r in rules.read.iter().chain(&rules.write) {
        p.push_str(&format!(
            "(allow file-read* (subpath {}))\n",
            quote(&r.path.display().to_string())
        ));
    }
    for r in &rules.write {
        p.push_str(&format!(
            "(allow file-write* (subpath {}))\n",
            quote(&r.path.display().to_string())
        ));
    }
    match rules.network {
        NetworkMode::Any => p.push_str("(allow network*)\n"),
        NetworkMode::None | NetworkMode::Allow => {
            if let Some(port) = rules.listen_port {
                p.push_str(&format!(
                    "(allow network-bind network-inbound (local ip \"localhost:{port}\"))\n"
                ));
            }
            if let (NetworkMode::Allow, Some(port)) = (rules.network, proxy_port) {
                p.push_str(&format!(
                    "(allow network-outbound (remote ip \"localhost:{port}\"))\n"
                ));
            }
        }
    }
    p
}
