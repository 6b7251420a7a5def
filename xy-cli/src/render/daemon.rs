//! `xyctl daemon status`: version, pid, uptime and paths of the running xyd.

use std::fmt::Write as _;

use xy_core::protocol::DaemonStatus;
use xy_core::time::human_secs;

use super::{Paint, Style, date_time};

/// The status block.
pub(crate) fn render_daemon_status(d: &DaemonStatus, style: &Style) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "xyd {} {} (pid {}, up {})",
        d.version,
        style.paint("running", Paint::Green),
        d.pid,
        human_secs(d.uptime_secs)
    );
    let rows = [
        ("started", format!("{} UTC", date_time(&d.started_at))),
        ("protocol", d.protocol.to_string()),
        ("socket", d.socket.clone()),
        ("config dir", d.config_dir.clone()),
        ("log dir", d.log_dir.clone()),
        ("servers", d.servers.to_string()),
    ];
    for (k, v) in rows {
        let _ = writeln!(out, "  {k:<10}  {v}");
    }
    let gateway = match &d.gateway {
        None if d.boot.is_none() => Some("off (xy.kdl: gateway { port 0 })".to_owned()),
        None => None,
        Some(g) => Some(match &g.error {
            None => format!("{}<name>/mcp", g.url),
            Some(e) => format!("{} not listening: {e} (retrying)", g.url),
        }),
    };
    if let Some(g) = gateway {
        let _ = writeln!(out, "  {:<10}  {g}", "gateway");
    }
    if let Some(b) = &d.boot {
        let _ = writeln!(
            out,
            "  {:<10}  stopping orphans of a previous daemon: {} of {} left (grace {}s); no server started yet",
            "booting", b.orphans_left, b.orphans, b.grace_secs
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block() {
        let d = DaemonStatus {
            version: "0.1.0".into(),
            protocol: 1,
            pid: 4242,
            started_at: "2026-11-30T05:00:00.000Z".into(),
            uptime_secs: 3725,
            socket: "/run/user/1000/xy.sock".into(),
            config_dir: "/home/u/.config/xy/servers".into(),
            log_dir: "/home/u/.local/state/xy/logs".into(),
            servers: 3,
            boot: None,
            gateway: None,
        };
        let want = "\
xyd 0.1.0 running (pid 4242, up 1h 2m)
  started     2026-11-30 05:00:00 UTC
  protocol    1
  socket      /run/user/1000/xy.sock
  config dir  /home/u/.config/xy/servers
  log dir     /home/u/.local/state/xy/logs
  servers     3
  gateway     off (xy.kdl: gateway { port 0 })
";
        assert_eq!(render_daemon_status(&d, &Style::PLAIN), want);
    }
}
