//! The systemd backend: a user unit in `${XDG_CONFIG_HOME}/systemd/user`,
//! driven with `systemctl --user`.

use std::path::{Path, PathBuf};

use super::backend::{ServiceBackend, Session};
use super::error::ServiceError;
use super::files::{remove_if_exists, write_atomic};
use super::systemd_unit::{self, parse_systemctl_show, read_unit, render_unit};
use super::{AgentSpec, Host, RunState, ServiceStatus, StopOutcome, UninstallOutcome};

/// systemd's user manager.
pub(crate) struct Systemd;

impl ServiceBackend for Systemd {
    fn name<'a>(&self, _label: &'a str) -> &'a str {
        systemd_unit::UNIT
    }

    fn file(&self, _label: &str, host: &Host) -> PathBuf {
        host.config_home
            .join("systemd/user")
            .join(systemd_unit::UNIT)
    }

    fn domain(&self, _host: &Host) -> String {
        "user".to_owned()
    }

    fn install(
        &self,
        s: &Session<'_>,
        spec: &AgentSpec,
        file: &Path,
        existed: bool,
    ) -> Result<(), ServiceError> {
        let text = render_unit(spec)?;
        write_atomic(file, text.as_bytes())?;
        s.run_ok(&systemd_unit::daemon_reload_cmd())?;
        if existed {
            // `enable --now` leaves a running daemon on the old unit.
            s.run_ok(&systemd_unit::enable_cmd())?;
            s.run_ok(&systemd_unit::restart_cmd())?;
        } else {
            s.run_ok(&systemd_unit::enable_now_cmd())?;
        }
        Ok(())
    }

    fn uninstall(&self, s: &Session<'_>, file: &Path) -> Result<UninstallOutcome, ServiceError> {
        if !file.exists() {
            return Ok(UninstallOutcome::NotInstalled);
        }
        s.run_ok(&systemd_unit::disable_now_cmd())?;
        remove_if_exists(file)?;
        s.run_ok(&systemd_unit::daemon_reload_cmd())?;
        Ok(UninstallOutcome::Removed(file.to_path_buf()))
    }

    fn start(&self, s: &Session<'_>, _file: &Path) -> Result<(), ServiceError> {
        s.run_ok(&systemd_unit::start_cmd())?;
        Ok(())
    }

    fn stop(&self, s: &Session<'_>) -> Result<StopOutcome, ServiceError> {
        s.run_ok(&systemd_unit::stop_cmd())?;
        Ok(StopOutcome::Stopped)
    }

    fn observe(
        &self,
        s: &Session<'_>,
        bytes: &[u8],
        st: &mut ServiceStatus,
    ) -> Result<(), ServiceError> {
        let facts = read_unit(&String::from_utf8_lossy(bytes));
        st.program = facts.program;
        st.path_snapshot = facts.path_snapshot;
        let show = parse_systemctl_show(&s.run_ok(&systemd_unit::show_cmd())?.stdout);
        st.state = if show.is_running() {
            RunState::Running
        } else {
            RunState::Stopped
        };
        st.pid = show.main_pid.filter(|_| show.is_running());
        if !show.is_running() {
            st.detail = match (&show.active_state, &show.sub_state) {
                (Some(a), Some(s)) => Some(format!("{a}/{s}")),
                (Some(a), None) => Some(a.clone()),
                _ => None,
            };
        }
        st.last_exit = show.exec_main_status.map(|c| c.to_string());
        Ok(())
    }
}
