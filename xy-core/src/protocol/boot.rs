//! `daemon_status.boot`: what a daemon that answers but is not serving yet is
//! doing (the orphan sweep), so a client waits on progress instead of calling
//! a busy daemon wedged.

use serde::{Deserialize, Serialize};

/// A boot step that runs while the socket already answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BootPhase {
    /// Stopping the process groups a previous (crashed) daemon left behind;
    /// no server starts before it is done (SPEC §7).
    SweepingOrphans,
}

/// Present in `daemon_status` only while the daemon boots; every method but
/// `daemon_status` and `shutdown` waits for the boot to end before it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootProgress {
    /// What the daemon is doing.
    pub phase: BootPhase,
    /// Orphaned process groups found.
    pub orphans: usize,
    /// Of those, how many are still alive.
    pub orphans_left: usize,
    /// Seconds each orphan gets after SIGTERM before SIGKILL; a client
    /// waiting on the boot allows this much and then some.
    pub grace_secs: u64,
}
