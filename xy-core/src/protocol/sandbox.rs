//! The sandbox on the wire (SPEC §21): the effective rules `status`
//! reports, and `sandbox_test`'s probe results.

use serde::{Deserialize, Serialize};

/// `status.sandbox`: the rules the current (or next) spawn gets, how the
/// OS enforces them, and the denials seen since the spawn, explained.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxStatus {
    /// The effective rules, defaults included.
    pub rules: crate::sandbox::Rules,
    /// The mechanisms in force, one phrase each (e.g. `landlock abi 7:
    /// files, tcp`), empty before the first spawn.
    #[serde(default)]
    pub enforcement: Vec<String>,
    /// The private temp dir the child gets as `TMPDIR`.
    pub temp_dir: String,
    /// Denials since the last spawn (newest last, at most 10), each one
    /// line from [`crate::sandbox::explain_denial`].
    #[serde(default)]
    pub denials: Vec<String>,
}

/// `sandbox_test {name}` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxTestParams {
    /// The server whose effective rules are probed.
    pub name: String,
}

/// What one probe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeOutcome {
    /// The operation was refused by the sandbox.
    Blocked,
    /// The operation got through.
    Allowed,
    /// The probe could not be run (e.g. no such target on this machine).
    Skipped,
}

/// One exfiltration probe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeResult {
    /// What was tried, e.g. `read ~/.ssh`, `connect 127.0.0.1:<port>`.
    pub probe: String,
    /// The outcome.
    pub outcome: ProbeOutcome,
    /// The OS error or a note.
    pub detail: String,
}

/// `sandbox_test` → the probes, run in a child confined exactly as the
/// server's next spawn would be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxTestResult {
    /// The server.
    pub name: String,
    /// `null` when the server has no `sandbox` block (then every probe is
    /// expected to be allowed).
    pub sandbox: Option<SandboxStatus>,
    /// One per probe, in order.
    pub probes: Vec<ProbeResult>,
}
