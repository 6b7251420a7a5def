//! `status` of one server: the full [`StatusResult`] and the one-line
//! explanation of why it is `failed` or backing off (or why xy could not
//! list a running one), assembled from the
//! ServerActor's state, its config and the stderr ring.

use std::time::SystemTime;

use xy_core::config::HealthConfig;
use xy_core::protocol::{ServerState, StatusResult};

use super::ServerActorState;
use crate::explain;

impl ServerActorState {
    pub(super) fn status(&self) -> StatusResult {
        let c = &self.config;
        StatusResult {
            entry: self.snapshot.borrow().entry(&c.name),
            transitions: self.transitions.iter().cloned().collect(),
            command: c.command.clone(),
            args: c.args.clone(),
            working_dir: c.working_dir.as_ref().map(|d| d.display().to_string()),
            env_keys: c.env.keys().cloned().collect(),
            restart: c.restart_settings(),
            stop: c.stop_settings(),
            config_file: c.source.display().to_string(),
            explain: self.explain(),
            next_retry_at: self
                .why
                .next_retry
                .filter(|_| self.lc.phase == ServerState::Restarting)
                .map(xy_core::time::rfc3339_ms),
            health_config: c.effective_health().as_ref().map(HealthConfig::settings),
            health_history: self.health_history.iter().cloned().collect(),
            mcp: self.mcp.status(),
            secrets: c
                .secrets
                .iter()
                .map(|s| xy_core::protocol::SecretInfo {
                    name: s.name.clone(),
                    source: s.source.kind().to_owned(),
                })
                .collect(),
            sandbox: self.sandbox_status(),
            // SPEC §22: read from the install record at each `status`.
            package: c
                .package
                .as_ref()
                .map(|p| xy_core::package::status(&c.name, p)),
            remote: c.remote.as_ref().map(xy_core::config::RemoteConfig::status),
            dropped_notifications: self
                .bridge
                .as_ref()
                .map_or(0, |b| b.endpoint.flow.dropped()),
        }
    }

    /// One line on why the server is `failed` or backing off, or why xy
    /// could not list a running one (SPEC §20).
    pub(super) fn explain(&self) -> Option<String> {
        if self.lc.phase == ServerState::Running {
            // A denial since the spawn (on stderr, or in a tool result,
            // SPEC §25) is why a running server's calls fail.
            let denial = || {
                self.sandbox_status()
                    .and_then(|s| s.denials.last().cloned())
            };
            return self
                .mcp
                .why_not_listed()
                .map(|why| format!("xy could not list its tools: {why}"))
                .or_else(denial);
        }
        if !matches!(self.lc.phase, ServerState::Failed | ServerState::Restarting) {
            return None;
        }
        let stderr = self.stderr_tail();
        let holder = self.why.port_holder.as_ref().map(ToString::to_string);
        let input = explain::Input {
            spawn_error: self
                .last_spawn_error
                .as_ref()
                .map(|e| (e.kind, e.error.as_str(), e.path.as_str())),
            code: self.last_exit.as_ref().and_then(|e| e.code),
            signal: self.last_exit.as_ref().and_then(|e| e.signal.as_deref()),
            ran_for: self.why.ran_for,
            stderr: &stderr,
            port_holder: holder.as_deref(),
            killed_for: self.lc.killed_for.as_deref(),
            next_retry: self
                .why
                .next_retry
                .filter(|_| self.lc.phase == ServerState::Restarting),
        };
        let line = explain::explain(&input, SystemTime::now());
        // A denial is the likeliest reason a confined child failed: it
        // leads (SPEC §21).
        Some(
            match self
                .sandbox_status()
                .and_then(|s| s.denials.last().cloned())
            {
                Some(denial) => format!("{denial}; {line}"),
                None => line,
            },
        )
    }

    /// `status.sandbox` of the current (or last) spawn.
    fn sandbox_status(&self) -> Option<xy_core::protocol::SandboxStatus> {
        let run = self.sandbox.as_ref()?;
        Some(run.status(&self.recent_lines()))
    }

    fn recent_lines(&self) -> Vec<crate::logs::LogLine> {
        crate::log_router::sink::lock(&self.sink)
            .subscribe(Some(200), false)
            .0
    }

    /// The most recent stderr lines from the ring buffer.
    pub(super) fn stderr_tail(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .recent_lines()
            .into_iter()
            .rev()
            .filter(|l| l.stream == xy_core::protocol::LogStream::Stderr)
            .take(explain::STDERR_TAIL)
            .map(|l| l.line)
            .collect();
        lines.reverse();
        lines
    }
}
