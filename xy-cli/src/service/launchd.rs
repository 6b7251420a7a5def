//! The launchd backend: a LaunchAgent plist in `~/Library/LaunchAgents`,
//! driven with `launchctl bootstrap/bootout/kickstart/print` in `gui/<uid>`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::backend::{ServiceBackend, Session};
use super::error::{ServiceError, command_failed};
use super::files::{create_private_dir, remove_if_exists, tail_lines, write_atomic};
use super::launch_agent::{self, parse_launchctl_print, read_plist, render_plist};
use super::{
    AgentSpec, Host, LOG_TAIL_LINES, RunState, ServiceStatus, StopOutcome, UninstallOutcome,
};

/// How long to wait for launchd to forget a booted-out job before loading it again.
const BOOTOUT_WAIT: Duration = Duration::from_secs(5);

/// launchd's LaunchAgents.
pub(crate) struct Launchd;

fn loaded(s: &Session<'_>) -> Result<bool, ServiceError> {
    Ok(s.run(&launch_agent::print_cmd(s.host.uid, s.label))?
        .success())
}

/// Boots the job out and waits (bounded) until launchd has forgotten it:
/// a `bootstrap` right behind a `bootout` can otherwise fail with EIO.
fn bootout(s: &Session<'_>) -> Result<(), ServiceError> {
    let argv = launch_agent::bootout_cmd(s.host.uid, s.label);
    let out = s.run(&argv)?;
    let deadline = Instant::now() + BOOTOUT_WAIT;
    loop {
        if !loaded(s)? {
            return Ok(());
        }
        if !out.success() || Instant::now() >= deadline {
            return Err(command_failed(argv, &out));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

impl ServiceBackend for Launchd {
    fn name<'a>(&self, label: &'a str) -> &'a str {
        label
    }

    fn file(&self, label: &str, host: &Host) -> PathBuf {
        host.home
            .join("Library/LaunchAgents")
            .join(format!("{label}.plist"))
    }

    fn domain(&self, host: &Host) -> String {
        launch_agent::domain(host.uid)
    }

    fn install(
        &self,
        s: &Session<'_>,
        spec: &AgentSpec,
        file: &Path,
        _existed: bool,
    ) -> Result<(), ServiceError> {
        let bytes = render_plist(spec)?;
        create_private_dir(&s.host.log_dir)?;
        write_atomic(file, &bytes)?;
        if loaded(s)? {
            bootout(s)?;
        }
        s.run_ok(&launch_agent::bootstrap_cmd(s.host.uid, file))?;
        Ok(())
    }

    fn uninstall(&self, s: &Session<'_>, file: &Path) -> Result<UninstallOutcome, ServiceError> {
        let is_loaded = loaded(s)?;
        if !is_loaded && !file.exists() {
            return Ok(UninstallOutcome::NotInstalled);
        }
        if is_loaded {
            bootout(s)?;
        }
        remove_if_exists(file)?;
        Ok(UninstallOutcome::Removed(file.to_path_buf()))
    }

    fn start(&self, s: &Session<'_>, file: &Path) -> Result<(), ServiceError> {
        if loaded(s)? {
            s.run_ok(&launch_agent::kickstart_cmd(s.host.uid, s.label))?;
        } else {
            s.run_ok(&launch_agent::bootstrap_cmd(s.host.uid, file))?;
        }
        Ok(())
    }

    fn stop(&self, s: &Session<'_>) -> Result<StopOutcome, ServiceError> {
        if !loaded(s)? {
            return Ok(StopOutcome::AlreadyStopped);
        }
        bootout(s)?;
        Ok(StopOutcome::Stopped)
    }

    fn observe(
        &self,
        s: &Session<'_>,
        bytes: &[u8],
        st: &mut ServiceStatus,
    ) -> Result<(), ServiceError> {
        match read_plist(bytes) {
            Ok(facts) => {
                st.program = facts.program;
                st.path_snapshot = facts.path_snapshot;
                st.log = facts.log_file;
            }
            Err(e) if st.file_error.is_none() => st.file_error = Some(e.to_string()),
            Err(_) => {}
        }
        let out = s.run(&launch_agent::print_cmd(s.host.uid, s.label))?;
        if out.success() {
            let p = parse_launchctl_print(&out.stdout);
            st.state = if p.is_running() {
                RunState::Running
            } else {
                RunState::Stopped
            };
            st.pid = p.pid.filter(|_| p.is_running());
            st.detail = p.state.filter(|s| s != "running");
            st.last_exit = p.last_exit;
        } else {
            st.state = RunState::Stopped;
            st.detail = Some("not loaded".to_owned());
        }
        if st.state != RunState::Running
            && let Some(log) = &st.log
        {
            st.log_tail = tail_lines(log, LOG_TAIL_LINES);
        }
        Ok(())
    }
}
