//! Where the engine writes and how large its logs grow.

use std::path::PathBuf;

use crate::log_router::ring::DEFAULT_RING_BYTES;
use crate::log_router::rotating::RotatingWriter;
use crate::log_router::sink::DEFAULT_FOLLOW_BUFFER;

/// Where the engine writes, and the log sizes.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// `<name>.log` files go here.
    pub log_dir: PathBuf,
    /// Child records for the orphan sweep go here.
    pub run_dir: PathBuf,
    /// Tool ledgers (`<name>.json`, SPEC §12) go here; `None` keeps them in
    /// memory. [`EngineOptions::new`] puts them in `tools/` beside `run_dir`.
    pub tools_dir: Option<PathBuf>,
    /// Call records (`<name>.jsonl`, SPEC §20) go here; `None` keeps only
    /// the figures. [`EngineOptions::new`] puts them in `calls/` beside `run_dir`.
    pub calls_dir: Option<PathBuf>,
    /// Sandboxed servers' private temp dirs (`<name>/tmp`, SPEC §21).
    /// [`EngineOptions::new`] puts them in `sandbox/` beside `run_dir`.
    pub sandbox_dir: PathBuf,
    /// Sandboxed servers' private home and data dirs (`<name>`, SPEC §25).
    /// [`EngineOptions::new`] puts them in `data/` beside `run_dir`; xyd
    /// uses `Paths::server_data_root`.
    pub server_data_dir: PathBuf,
    /// Size at which `<name>.log` rotates (SPEC §5: 10 MB, taken as 10 MiB); tests lower it.
    pub rotate_bytes: u64,
    /// Bytes of line text kept in each server's ring buffer (~1 MiB).
    pub ring_bytes: usize,
    /// Lines of a server's live broadcast (room for a burst).
    pub follow_buffer: usize,
    /// Bytes of lines a live follower may have waiting for it; one more
    /// and it is dropped (`Lagged`). 4 MiB (SPEC §18).
    pub follow_bytes: usize,
    /// Events an `events` subscriber may fall behind before it is dropped.
    pub event_buffer: usize,
    /// The OAuth broker's settings (SPEC §23). [`EngineOptions::new`] keeps
    /// grants in `auth/` beside `run_dir` (or the macOS keychain).
    pub oauth: crate::oauth::OAuthOptions,
}

impl EngineOptions {
    /// The given directories with the SPEC's default sizes.
    pub fn new(log_dir: impl Into<PathBuf>, run_dir: impl Into<PathBuf>) -> EngineOptions {
        let run_dir: PathBuf = run_dir.into();
        EngineOptions {
            log_dir: log_dir.into(),
            tools_dir: run_dir.parent().map(|p| p.join("tools")),
            calls_dir: run_dir.parent().map(|p| p.join("calls")),
            sandbox_dir: run_dir
                .parent()
                .map_or_else(|| run_dir.join("sandbox"), |p| p.join("sandbox")),
            server_data_dir: run_dir
                .parent()
                .map_or_else(|| run_dir.join("data"), |p| p.join("data")),
            oauth: crate::oauth::OAuthOptions::new(
                run_dir
                    .parent()
                    .map_or_else(|| run_dir.join("auth"), |p| p.join("auth")),
            ),
            run_dir,
            ..EngineOptions::default()
        }
    }
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            log_dir: PathBuf::new(),
            run_dir: PathBuf::new(),
            tools_dir: None,
            calls_dir: None,
            sandbox_dir: std::env::temp_dir().join("xy-sandbox"),
            server_data_dir: std::env::temp_dir().join("xy-data"),
            rotate_bytes: RotatingWriter::DEFAULT_MAX_BYTES,
            ring_bytes: DEFAULT_RING_BYTES,
            follow_buffer: DEFAULT_FOLLOW_BUFFER,
            follow_bytes: crate::logs::FOLLOW_BEHIND,
            event_buffer: crate::events::DEFAULT_EVENT_BUFFER,
            oauth: crate::oauth::OAuthOptions::new(std::env::temp_dir().join("xy-auth")),
        }
    }
}
