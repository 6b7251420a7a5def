//! `xyctl service`: parses the verbs, calls [`crate::service`] (which does the
//! work and returns data), formats the outcome as text and maps failures to
//! exit 1; `crate::output` does the printing.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::cli::{InstallArgs, ServiceCmd};
use crate::ctx::Ctx;
use crate::error::{Exit, Failure};
use crate::output;
use crate::service::{
    self, Backend, CommandRunner, InstallReport, RunState, ServiceError, ServiceManager,
    ServiceStatus, StopOutcome, UninstallOutcome,
};

/// Runs one `xyctl service` verb against the real service manager. Never
/// touches the daemon's socket, so it works while xyd is down; every failure
/// is an operational error (exit 1).
pub(crate) fn run(ctx: &Ctx, cmd: ServiceCmd) -> Result<Exit, Failure> {
    let failure = |e: ServiceError| Failure::new(Exit::Operational, e.to_string());
    let mgr = ServiceManager::from_env(cmd.label()).map_err(failure)?;
    let env = Invocation {
        path: std::env::var_os("PATH"),
        home: std::env::home_dir(),
    };
    let mut warnings = Vec::new();
    let done = execute(cmd, &mgr, &env, &mut warnings);
    // Warnings found before a failure still matter (an install from a
    // build tree that then failed to load, say).
    for w in &warnings {
        output::warn(&ctx.err, w);
    }
    output::stdout(&done.map_err(failure)?);
    Ok(Exit::Success)
}

/// What `execute` takes from the invoking process.
pub(crate) struct Invocation {
    /// `PATH` to snapshot.
    pub(crate) path: Option<OsString>,
    /// `$HOME`, to shorten displayed paths to `~/…`.
    pub(crate) home: Option<PathBuf>,
}

/// Runs `cmd` on `mgr` and returns the text for stdout; what it warns
/// about goes to `warnings` (one sentence each, for `warning: …` lines),
/// also when it then fails.
pub(crate) fn execute<R: CommandRunner>(
    cmd: ServiceCmd,
    mgr: &ServiceManager<R>,
    env: &Invocation,
    warnings: &mut Vec<String>,
) -> Result<String, ServiceError> {
    let home = env.home.as_deref();
    Ok(match cmd {
        ServiceCmd::Install(args) => install(&args, mgr, env, warnings)?,
        ServiceCmd::Uninstall(_) => match mgr.uninstall()? {
            UninstallOutcome::Removed(file) => {
                format!(
                    "uninstalled {} (removed {})\n",
                    mgr.name(),
                    tilde(&file, home)
                )
            }
            UninstallOutcome::NotInstalled => "not installed\n".to_owned(),
        },
        ServiceCmd::Start(_) => {
            mgr.start()?;
            format!("started {}\n", mgr.name())
        }
        ServiceCmd::Stop(_) => match mgr.stop()? {
            StopOutcome::Stopped => format!(
                "stopped {} (it starts again at next login; `xyctl service uninstall` disables that)\n",
                mgr.name()
            ),
            StopOutcome::AlreadyStopped => format!("{} is not running\n", mgr.name()),
        },
        ServiceCmd::Status(args) => {
            let st = mgr.status()?;
            if args.json {
                serde_json::to_string(&st).unwrap_or_default() + "\n"
            } else {
                render_status(&st, home)
            }
        }
    })
}

fn install<R: CommandRunner>(
    args: &InstallArgs,
    mgr: &ServiceManager<R>,
    env: &Invocation,
    warnings: &mut Vec<String>,
) -> Result<String, ServiceError> {
    // Checked before looking for xyd, so a repeated install says the useful thing.
    if !args.force && mgr.is_installed() {
        return Err(ServiceError::AlreadyInstalled { file: mgr.file() });
    }
    let program = match &args.xyd {
        Some(p) => p.canonicalize().map_err(|source| ServiceError::Io {
            path: p.clone(),
            source,
        })?,
        None => service::locate_xyd().ok_or(ServiceError::NoXyd)?,
    };
    warnings.extend(service::program_warning(&program));
    let spec = mgr.spec(program, env.path.as_deref())?;
    let InstallReport { file, replaced } = mgr.install(&spec, args.force)?;
    Ok(format!(
        "{} {} ({})\n  program: {}\n  path:    {}\n",
        if replaced { "reinstalled" } else { "installed" },
        mgr.name(),
        tilde(&file, env.home.as_deref()),
        spec.program.display(),
        spec.path_snapshot,
    ))
}

/// `path` with the home directory shown as `~`.
fn tilde(path: &Path, home: Option<&Path>) -> String {
    match home.and_then(|h| path.strip_prefix(h).ok()) {
        Some(rest) if !rest.as_os_str().is_empty() => format!("~/{}", rest.display()),
        _ => path.display().to_string(),
    }
}

/// The human `status` text, one `key: value` line each.
pub(crate) fn render_status(st: &ServiceStatus, home: Option<&Path>) -> String {
    let mut lines: Vec<(&str, String)> = Vec::new();
    let (kind, file_key) = match st.backend {
        Backend::Launchd => (
            format!("{} ({}, {})", st.name, st.backend.name(), st.domain),
            "plist",
        ),
        Backend::Systemd => (
            format!("{} ({} --user)", st.name, st.backend.name()),
            "unit",
        ),
    };
    lines.push((
        if st.backend == Backend::Launchd {
            "agent"
        } else {
            "service"
        },
        kind,
    ));
    let mut file = tilde(&st.file, home);
    if !st.installed {
        file.push_str(" (absent)");
    } else if let Some(e) = &st.file_error {
        file.push_str(&format!(" (unreadable: {e})"));
    }
    lines.push((file_key, file));
    let state = match st.state {
        RunState::NotInstalled => "not installed".to_owned(),
        RunState::Running => match st.pid {
            Some(pid) => format!("running (pid {pid})"),
            None => "running".to_owned(),
        },
        RunState::Stopped => {
            let mut why: Vec<String> = st.detail.iter().cloned().collect();
            if let Some(code) = &st.last_exit {
                why.push(format!("last exit {code}"));
            }
            if why.is_empty() {
                "stopped".to_owned()
            } else {
                format!("stopped ({})", why.join(", "))
            }
        }
    };
    lines.push(("state", state));
    if st.installed {
        let unknown = || "?".to_owned();
        lines.push((
            "program",
            st.program
                .as_ref()
                .map_or_else(unknown, |p| p.display().to_string()),
        ));
        let mut path = st.path_snapshot.clone().unwrap_or_else(unknown);
        if let Some(t) = st.snapshot_date {
            let date = xy_core::time::rfc3339_ms(t);
            path.push_str(&format!(" (snapshotted {})", &date[..10]));
        }
        lines.push(("path", path));
        let log = match (st.backend, &st.log) {
            (Backend::Systemd, _) => format!("journalctl --user -u {}", st.name),
            (Backend::Launchd, Some(log)) => tilde(log, home),
            (Backend::Launchd, None) => unknown(),
        };
        lines.push(("log", log));
    }
    let mut text = String::new();
    for (key, value) in lines {
        text.push_str(&format!("  {:<8} {value}\n", format!("{key}:")));
    }
    if !st.log_tail.is_empty()
        && let Some(log) = &st.log
    {
        text.push_str(&format!("\n  last lines of {}:\n", tilde(log, home)));
        for line in &st.log_tail {
            text.push_str(&format!("    {line}\n"));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::StatusArgs;
    use std::time::{Duration, SystemTime};

    fn status(backend: Backend) -> ServiceStatus {
        ServiceStatus {
            backend,
            name: "se.aceofba.xy".to_owned(),
            domain: "gui/501".to_owned(),
            installed: true,
            state: RunState::Running,
            pid: Some(4821),
            detail: None,
            last_exit: None,
            file: PathBuf::from("/Users/u/Library/LaunchAgents/se.aceofba.xy.plist"),
            file_error: None,
            program: Some(PathBuf::from("/Users/u/.cargo/bin/xyd")),
            path_snapshot: Some("/opt/homebrew/bin:/usr/bin".to_owned()),
            // 2026-07-31T12:00:00Z
            snapshot_date: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_785_499_200)),
            log: Some(PathBuf::from("/Users/u/.local/state/xy/logs/launchd.log")),
            log_tail: Vec::new(),
        }
    }

    #[test]
    fn renders_a_running_agent() {
        let text = render_status(&status(Backend::Launchd), Some(Path::new("/Users/u")));
        assert_eq!(
            text,
            "  agent:   se.aceofba.xy (launchd, gui/501)\n\
             \x20 plist:   ~/Library/LaunchAgents/se.aceofba.xy.plist\n\
             \x20 state:   running (pid 4821)\n\
             \x20 program: /Users/u/.cargo/bin/xyd\n\
             \x20 path:    /opt/homebrew/bin:/usr/bin (snapshotted 2026-07-31)\n\
             \x20 log:     ~/.local/state/xy/logs/launchd.log\n"
        );
    }

    #[test]
    fn renders_a_stopped_agent_with_its_log_tail() {
        let mut st = status(Backend::Launchd);
        st.state = RunState::Stopped;
        st.pid = None;
        st.detail = Some("spawn scheduled".to_owned());
        st.last_exit = Some("78: EX_CONFIG".to_owned());
        st.log_tail = vec!["dyld: Library not loaded".to_owned()];
        let text = render_status(&st, None);
        assert!(
            text.contains("  state:   stopped (spawn scheduled, last exit 78: EX_CONFIG)\n"),
            "{text}"
        );
        assert!(
            text.ends_with(
                "\n  last lines of /Users/u/.local/state/xy/logs/launchd.log:\n    dyld: Library not loaded\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn renders_a_systemd_unit_and_absence() {
        let mut st = status(Backend::Systemd);
        st.name = "xyd.service".to_owned();
        st.file = PathBuf::from("/home/u/.config/systemd/user/xyd.service");
        st.log = None;
        let text = render_status(&st, Some(Path::new("/home/u")));
        assert!(text.starts_with("  service: xyd.service (systemd --user)\n  unit:    ~/.config/systemd/user/xyd.service\n"), "{text}");
        assert!(
            text.contains("  log:     journalctl --user -u xyd.service\n"),
            "{text}"
        );

        st.installed = false;
        st.state = RunState::NotInstalled;
        let text = render_status(&st, Some(Path::new("/home/u")));
        assert_eq!(
            text,
            "  service: xyd.service (systemd --user)\n\
             \x20 unit:    ~/.config/systemd/user/xyd.service (absent)\n\
             \x20 state:   not installed\n"
        );
    }

    #[test]
    fn tilde_only_strips_a_real_prefix() {
        let home = Some(Path::new("/home/u"));
        assert_eq!(tilde(Path::new("/home/u/x"), home), "~/x");
        assert_eq!(tilde(Path::new("/home/user/x"), home), "/home/user/x");
        assert_eq!(tilde(Path::new("/home/u"), home), "/home/u");
        assert_eq!(tilde(Path::new("/home/u/x"), None), "/home/u/x");
    }

    #[test]
    fn verbs_parse() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(subcommand)]
            cmd: ServiceCmd,
        }
        let cli = Cli::try_parse_from([
            "t", "install", "--force", "--label", "x.y", "--xyd", "/bin/xyd",
        ])
        .unwrap();
        let ServiceCmd::Install(a) = cli.cmd else {
            panic!()
        };
        assert!(a.force);
        assert_eq!(a.target.label, "x.y");
        assert_eq!(a.xyd.as_deref(), Some(Path::new("/bin/xyd")));
        let cli = Cli::try_parse_from(["t", "status"]).unwrap();
        assert_eq!(cli.cmd.label(), service::DEFAULT_LABEL);
        let cli = Cli::try_parse_from(["t", "status", "--json"]).unwrap();
        assert!(matches!(
            cli.cmd,
            ServiceCmd::Status(StatusArgs { json: true, .. })
        ));
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
