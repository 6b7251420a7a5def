//! Spawning a server's child behind a trait, so the ServerActor runs against
//! real processes in the daemon and against a mock in unit tests. The real
//! spawner puts the child in its own process group, makes it the subreaper
//! of its descendants (Linux), wires its stdout/stderr to the log pumps and
//! writes the child record for the orphan sweep; its signals and its
//! "gone" reach the child's whole process tree (`os::tree`).

use std::future::Future;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use nix::sys::signal::Signal;
use xy_core::config::ServerConfig;
use xy_core::protocol::{LogStream, SpawnErrorKind};

use crate::log_router::pump::pump;
use crate::log_router::redact::Redactor;
use crate::log_router::sink::SharedSink;
use crate::os::group;
use crate::os::ports::PortHolder;
use crate::os::records::{self, ChildRecord};
use crate::os::spawn::{SpawnError, resolve};
use crate::os::tree::Tree;

/// A boxed `Send` future.
pub(crate) type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// How the group leader ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ExitInfo {
    /// Exit code on a normal exit.
    pub(crate) code: Option<i32>,
    /// Signal number when killed by a signal.
    pub(crate) signal: Option<i32>,
}

/// One spawned child and its process group.
pub(crate) trait ChildHandle: Send + Sync + 'static {
    /// The leader's pid.
    fn pid(&self) -> u32;
    /// The process group (the leader's pid).
    fn pgid(&self) -> i32;
    /// Signals every process of the group; a gone group is not an error.
    fn signal_group(&self, sig: Signal);
    /// Resolves when the leader exits. Called once, by the waiter task.
    fn wait(&self) -> BoxFuture<ExitInfo>;
    /// After the leader exited: resolves once no live process of the group
    /// is left (zombies reaped or ignored) and the child record is removed.
    fn wait_group_gone(&self) -> BoxFuture<()>;
    /// A stdio server's protocol pipes (stdin, stdout), taken once.
    fn take_stdio(&self) -> Option<crate::bridge::ChildStdio> {
        None
    }
    /// The sandbox this child runs in (`None`: unconfined).
    fn sandbox(&self) -> Option<Arc<crate::os::sandbox::SandboxRun>> {
        None
    }
}

/// Starts children.
pub(crate) trait ChildSpawner: Send + Sync + 'static {
    /// Spawns `config`'s command with its output going to `sink`.
    fn spawn(
        &self,
        config: &ServerConfig,
        sink: &SharedSink,
    ) -> Result<Arc<dyn ChildHandle>, SpawnError>;

    /// A process xy does not own listening on `port` (`own_pgid`: the
    /// group of the child just run, which does not count). Mocks see none.
    fn port_holder(&self, port: u16, own_pgid: Option<i32>) -> Option<PortHolder> {
        let _ = (port, own_pgid);
        None
    }

    /// [`ChildSpawner::port_holder`] on tokio's blocking pool: it may walk
    /// every process's open fds (or run `lsof`), which must never hold an
    /// actor's handler or an async worker.
    fn port_holder_off_thread(
        self: Arc<Self>,
        port: u16,
        own_pgid: Option<i32>,
    ) -> BoxFuture<Option<PortHolder>> {
        Box::pin(async move {
            tokio::task::spawn_blocking(move || self.port_holder(port, own_pgid))
                .await
                .ok()
                .flatten()
        })
    }
}

/// Real processes via `tokio::process`.
#[derive(Debug)]
pub(crate) struct RealSpawner {
    pub(crate) run_dir: PathBuf,
    /// Where sandboxed servers' temp dirs live, and the enforcement's knobs.
    pub(crate) sandbox: crate::os::sandbox::SandboxEnv,
}

impl ChildSpawner for RealSpawner {
    fn port_holder(&self, port: u16, own_pgid: Option<i32>) -> Option<PortHolder> {
        crate::os::ports::foreign_holder(port, own_pgid)
    }

    fn spawn(
        &self,
        config: &ServerConfig,
        sink: &SharedSink,
    ) -> Result<Arc<dyn ChildHandle>, SpawnError> {
        let program = resolve(config)?;
        let shown = program.display().to_string();
        if let Some(dir) = &config.working_dir
            && let Err(e) = std::fs::metadata(dir)
        {
            return Err(SpawnError {
                path: shown,
                error: format!("working directory {}: {e}", dir.display()),
                kind: SpawnErrorKind::WorkingDir,
            });
        }
        let stdio = config.transport == xy_core::protocol::Transport::Stdio;
        let egress = crate::os::sandbox::egress::grant_for(config, &shown)?;
        let mut sandbox = crate::os::sandbox::prepare(
            config,
            &program,
            &self.sandbox,
            egress.as_ref().map(|(g, _)| g),
            &[],
        )?;
        let (mut cmd, run) =
            crate::os::sandbox::command(config, &program, sandbox.as_mut(), egress);
        #[cfg(target_os = "linux")]
        #[allow(unsafe_code)]
        // SAFETY: the closure makes one prctl call, async-signal-safe, and
        // touches no memory of the parent.
        unsafe {
            cmd.pre_exec(crate::os::tree::subreaper_in_child);
        }
        cmd.args(&config.args)
            .stdin(if stdio { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(|e| SpawnError {
            path: shown.clone(),
            error: e.to_string(),
            kind: SpawnErrorKind::of_io(&e),
        })?;
        let pid = child.id().unwrap_or_default();
        let pgid = i32::try_from(pid).unwrap_or_default();
        // xy's listeners map a peer's process to its server through this
        // (SPEC §24). Until it is in, the child counts as an unregistered
        // child of xyd: refused if sandboxed (`no_new_privs`).
        let root = crate::os::peer::process::register(
            pgid,
            &config.name,
            run.as_ref().map(|_| {
                config
                    .sandbox
                    .as_ref()
                    .map_or(&[][..], |s| s.reach.as_slice())
            }),
        );
        // A stdio server's stdout is the protocol: the bridge reads it, and
        // it is not logged.
        let mut protocol = None;
        if stdio && let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) {
            group::enlarge_pipe(std::os::fd::AsFd::as_fd(&stdout));
            protocol = Some(crate::bridge::ChildStdio::new(
                stdin,
                stdout,
                sink.clone(),
                Redactor::for_spawn(config),
            ));
        }
        let redactor = Redactor::for_spawn(config);
        if protocol.is_none()
            && let Some(out) = child.stdout.take()
        {
            group::enlarge_pipe(std::os::fd::AsFd::as_fd(&out));
            tokio::spawn(pump(out, LogStream::Stdout, sink.clone(), redactor.clone()));
        }
        if let Some(err) = child.stderr.take() {
            group::enlarge_pipe(std::os::fd::AsFd::as_fd(&err));
            tokio::spawn(pump(err, LogStream::Stderr, sink.clone(), redactor));
        }
        let record_path = records::record_path(&self.run_dir, &config.name);
        let record = ChildRecord {
            pid: pgid,
            pgid,
            start_time: group::start_time(pgid),
            command: shown,
            descendants: Vec::new(),
        };
        let record_path = match records::write(&record_path, &record) {
            Ok(()) => Some(record_path),
            Err(e) => {
                tracing::warn!(server = %config.name, path = %record_path.display(), error = %e, "cannot write child record");
                None
            }
        };
        let tree = Arc::new(Tree::of(pgid, record.start_time, pgid));
        if let Some(path) = &record_path {
            tokio::spawn(census(tree.clone(), record, path.clone()));
        }
        Ok(Arc::new(RealChild {
            pid,
            pgid,
            tree,
            child: Mutex::new(Some(child)),
            record_path,
            stdio: Mutex::new(protocol),
            sandbox: run,
            _root: root,
        }))
    }
}

/// Follows the child's tree while its root lives and rewrites its record
/// when the descendants change (D175): every 2 s after the spawn or a
/// change, backing off to once a minute while nothing changes. Ends with
/// the root.
async fn census(tree: Arc<Tree>, mut record: ChildRecord, path: PathBuf) {
    let mut every = crate::os::tree::CENSUS_EVERY;
    loop {
        tokio::time::sleep(every).await;
        // A few small procfs reads (the root's stat and children lists),
        // which never wait on a disk: inline, not on the blocking pool,
        // which kept a thread alive per server of a fleet.
        let changed = tree.census();
        if !tree.root_alive() {
            return;
        }
        every = if changed {
            crate::os::tree::CENSUS_EVERY
        } else {
            (every * 2).min(crate::os::tree::CENSUS_IDLE_EVERY)
        };
        if changed {
            record.descendants = tree.met();
            // Only while the record is still this child's (a stop removes it).
            if let Err(e) = records::rewrite(&path, &record) {
                tracing::warn!(path = %path.display(), error = %e, "cannot update child record");
            }
        }
    }
}

struct RealChild {
    pid: u32,
    pgid: i32,
    /// Everything the child started, its group and beyond (D175).
    tree: Arc<Tree>,
    /// Taken by the waiter task; `kill_on_drop` fires if that task is dropped.
    child: Mutex<Option<tokio::process::Child>>,
    record_path: Option<PathBuf>,
    stdio: Mutex<Option<crate::bridge::ChildStdio>>,
    sandbox: Option<Arc<crate::os::sandbox::SandboxRun>>,
    /// The root's registration for xy's listeners, held as long as the
    /// child is.
    _root: crate::os::peer::process::RootGuard,
}

impl ChildHandle for RealChild {
    fn pid(&self) -> u32 {
        self.pid
    }

    fn pgid(&self) -> i32 {
        self.pgid
    }

    fn signal_group(&self, sig: Signal) {
        self.tree.signal(sig);
    }

    fn wait(&self) -> BoxFuture<ExitInfo> {
        let child = self
            .child
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        Box::pin(async move {
            let Some(mut child) = child else {
                return ExitInfo {
                    code: None,
                    signal: None,
                };
            };
            match child.wait().await {
                Ok(status) => ExitInfo {
                    code: status.code(),
                    signal: status.signal(),
                },
                Err(e) => {
                    tracing::warn!(error = %e, "waiting for child failed");
                    ExitInfo {
                        code: None,
                        signal: None,
                    }
                }
            }
        })
    }

    fn take_stdio(&self) -> Option<crate::bridge::ChildStdio> {
        self.stdio
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    fn sandbox(&self) -> Option<Arc<crate::os::sandbox::SandboxRun>> {
        self.sandbox.clone()
    }

    fn wait_group_gone(&self) -> BoxFuture<()> {
        let (pgid, leader) = (self.pgid, i32::try_from(self.pid).ok());
        let record = self.record_path.clone();
        let tree = self.tree.clone();
        Box::pin(async move {
            tree.wait_gone(leader).await;
            if let Some(path) = record {
                records::remove_if_pid(&path, pgid);
            }
        })
    }
}
