//! Hooks and desktop notifications (SPEC §16): the `hooks { on-… }` command
//! of an event, and with `notify #true` a notification on `failed` and
//! `unhealthy`. Each runs as a detached task — never awaited by the
//! ServerActor — without a shell, with `XY_*` variables, bounded by
//! [`HOOK_TIMEOUT`] (then its whole process group is killed), its output
//! going to `daemon.log`; one event of one server fires at most once a
//! [`MIN_INTERVAL`].

use std::collections::HashMap;
use std::ffi::OsString;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use xy_core::config::{HookEvent, HooksConfig};

/// Longest a hook or notification may run before its group is killed.
pub(crate) const HOOK_TIMEOUT: Duration = Duration::from_secs(10);
/// One event of one server fires at most this often.
pub(crate) const MIN_INTERVAL: Duration = Duration::from_secs(60);

/// What a hook is told, through `XY_SERVER`, `XY_EVENT`, `XY_REASON`,
/// `XY_EXIT_CODE` (empty when there is none) and `XY_URL`.
#[derive(Debug, Clone)]
pub(crate) struct HookContext {
    pub(crate) server: String,
    pub(crate) event: HookEvent,
    pub(crate) reason: String,
    pub(crate) exit_code: Option<i32>,
    pub(crate) url: String,
}

impl HookContext {
    fn env(&self) -> [(&'static str, String); 5] {
        [
            ("XY_SERVER", self.server.clone()),
            ("XY_EVENT", self.event.as_str().to_owned()),
            ("XY_REASON", self.reason.clone()),
            (
                "XY_EXIT_CODE",
                self.exit_code.map(|c| c.to_string()).unwrap_or_default(),
            ),
            ("XY_URL", self.url.clone()),
        ]
    }
}

/// One server's hook state: when each event last fired. Owned by its
/// ServerActor (a respawned actor starts afresh).
#[derive(Debug, Default)]
pub(crate) struct Hooks {
    last: HashMap<HookEvent, Instant>,
}

impl Hooks {
    /// Fires `ctx.event`'s hook and notification, if configured and not
    /// fired within the last minute. Returns at once.
    pub(crate) fn fire(&mut self, cfg: &HooksConfig, ctx: HookContext) {
        let command = cfg.command(ctx.event).map(<[String]>::to_vec);
        let notify = cfg.notify
            && matches!(
                ctx.event,
                HookEvent::Failed | HookEvent::Unhealthy | HookEvent::ToolsHeld
            );
        if command.is_none() && !notify {
            return;
        }
        let now = Instant::now();
        if let Some(t) = self.last.get(&ctx.event)
            && now.duration_since(*t) < MIN_INTERVAL
        {
            tracing::info!(server = %ctx.server, event = ctx.event.as_str(), "{} hook not run: it fired less than a minute ago", ctx.event.node());
            return;
        }
        self.last.insert(ctx.event, now);
        if let Some(argv) = command {
            let ctx = ctx.clone();
            tokio::spawn(async move {
                run(&argv, &ctx, "hook", HOOK_TIMEOUT).await;
            });
        }
        if notify {
            tokio::spawn(async move { notify_desktop(&ctx).await });
        }
    }
}

/// Runs `argv` (no shell) with the context's variables, logs its output
/// lines and exit to `daemon.log`, and kills its group after `timeout`.
pub(crate) async fn run(argv: &[String], ctx: &HookContext, what: &'static str, timeout: Duration) {
    let Some((program, args)) = argv.split_first() else {
        return;
    };
    let (server, event) = (ctx.server.as_str(), ctx.event.as_str());
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .envs(ctx.env())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(server, event, program = %program, error = %e, "cannot run {what}");
            return;
        }
    };
    let pgid = child.id().and_then(|p| i32::try_from(p).ok());
    tracing::info!(server, event, program = %program, pid = ?pgid, "{what} started");
    let readers = [
        child
            .stdout
            .take()
            .map(|s| tokio::spawn(log_lines(s, ctx.server.clone(), event, "stdout", what))),
        child
            .stderr
            .take()
            .map(|s| tokio::spawn(log_lines(s, ctx.server.clone(), event, "stderr", what))),
    ];
    match tokio::time::timeout(timeout, child.wait()).await {
        Ok(Ok(status)) => {
            if status.success() {
                tracing::info!(server, event, "{what} exited with code 0");
            } else {
                tracing::warn!(server, event, "{what} ended: {status}");
            }
        }
        Ok(Err(e)) => tracing::warn!(server, event, error = %e, "waiting for {what} failed"),
        Err(_) => {
            tracing::warn!(
                server,
                event,
                "{what} still running after {}; killing its process group",
                humantime::format_duration(timeout)
            );
            if let Some(pgid) = pgid {
                let _ = crate::os::group::signal_group(pgid, Signal::SIGKILL);
            }
            let _ = child.wait().await;
        }
    }
    // Whatever the hook left behind in its group goes with it.
    if let Some(pgid) = pgid {
        let _ = crate::os::group::signal_group(pgid, Signal::SIGKILL);
    }
    for r in readers.into_iter().flatten() {
        // The pipes close once the group is gone; never wait long for that.
        let abort = r.abort_handle();
        if tokio::time::timeout(Duration::from_secs(1), r)
            .await
            .is_err()
        {
            abort.abort();
        }
    }
}

async fn log_lines<R: AsyncRead + Unpin>(
    r: R,
    server: String,
    event: &'static str,
    stream: &'static str,
    what: &'static str,
) {
    let mut lines = BufReader::new(r).lines();
    let mut n = 0usize;
    while let Ok(Some(line)) = lines.next_line().await {
        // Bounded: a chatty hook must not flood the daemon's log.
        n += 1;
        if n <= 100 {
            tracing::info!(server = %server, event, stream, "{what} output: {line}");
        }
    }
}

/// Warned once per daemon: no notifier on this machine.
static NO_NOTIFIER_WARNED: AtomicBool = AtomicBool::new(false);

/// The notification command for this OS (macOS: `osascript`, else
/// `notify-send`); platform independent so both are tested everywhere.
pub(crate) fn notify_command(macos: bool, title: &str, body: &str) -> Vec<String> {
    if macos {
        let script = format!(
            "display notification {} with title {}",
            applescript_string(body),
            applescript_string(title)
        );
        vec!["osascript".into(), "-e".into(), script]
    } else {
        vec![
            "notify-send".into(),
            "--app-name=xy".into(),
            title.into(),
            body.into(),
        ]
    }
}

/// An AppleScript string literal (only `\` and `"` need escaping).
fn applescript_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '\\' | '"' => {
                out.push('\\');
                out.push(c);
            }
            '\n' | '\r' => out.push(' '),
            _ => out.push(c),
        }
    }
    out.push('"');
    out
}

async fn notify_desktop(ctx: &HookContext) {
    let title = format!("xy: {} {}", ctx.server, ctx.event.as_str());
    let argv = notify_command(cfg!(target_os = "macos"), &title, &ctx.reason);
    let path: Option<OsString> = std::env::var_os("PATH");
    if xy_core::config::resolve_command_in(&argv[0], path.as_deref(), None).is_err() {
        if !NO_NOTIFIER_WARNED.swap(true, Ordering::Relaxed) {
            tracing::warn!(program = %argv[0], "desktop notifications are on (notify #true) but `{}` is not on PATH; skipping them", argv[0]);
        }
        return;
    }
    run(&argv, ctx, "notification", HOOK_TIMEOUT).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notify_commands() {
        assert_eq!(
            notify_command(false, "xy: a failed", "boom"),
            ["notify-send", "--app-name=xy", "xy: a failed", "boom"]
        );
        assert_eq!(
            notify_command(true, "t \"q\"", "a\\b"),
            [
                "osascript",
                "-e",
                "display notification \"a\\\\b\" with title \"t \\\"q\\\"\""
            ]
        );
    }

    fn ctx(event: HookEvent) -> HookContext {
        HookContext {
            server: "s".into(),
            event,
            reason: "r".into(),
            exit_code: Some(3),
            url: xy_core::protocol::endpoint_url(8421, "/mcp"),
        }
    }

    #[tokio::test]
    async fn env_and_rate_limit() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let script = format!(
            "echo \"$XY_SERVER|$XY_EVENT|$XY_REASON|$XY_EXIT_CODE|$XY_URL\" >> {}",
            out.display()
        );
        let cfg = HooksConfig {
            commands: vec![(
                HookEvent::Failed,
                vec!["/bin/sh".into(), "-c".into(), script],
            )],
            notify: false,
        };
        let mut hooks = Hooks::default();
        hooks.fire(&cfg, ctx(HookEvent::Failed));
        hooks.fire(&cfg, ctx(HookEvent::Failed));
        hooks.fire(&cfg, ctx(HookEvent::Restart));
        let text = xy_testbins::wait::poll("the hook to run", Duration::from_secs(20), || async {
            std::fs::read_to_string(&out)
                .ok()
                .filter(|text| text.ends_with('\n'))
        })
        .await;
        assert_eq!(text, "s|failed|r|3|http://127.0.0.1:8421/mcp\n");
        assert!(hooks.last.contains_key(&HookEvent::Failed));
        assert!(!hooks.last.contains_key(&HookEvent::Restart));
    }

    #[tokio::test]
    async fn a_hanging_hook_is_killed_with_its_group() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let script = format!("sleep 60 & echo $! > {}; wait", pidfile.display());
        let argv = vec!["/bin/sh".to_owned(), "-c".to_owned(), script];
        let started = Instant::now();
        run(
            &argv,
            &ctx(HookEvent::Failed),
            "hook",
            Duration::from_millis(300),
        )
        .await;
        assert!(started.elapsed() < xy_testbins::wait::scaled(Duration::from_secs(10)));
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        xy_testbins::wait::poll(
            "the hook's grandchild to be killed",
            Duration::from_secs(10),
            || async { (!crate::os::group::pid_alive(pid)).then_some(()) },
        )
        .await;
    }
}
