//! A mock child for ServerActor unit tests: no processes. The test decides
//! when the leader exits; the mock reacts to signals like a well-behaved
//! child (exit 0 on SIGTERM) or one that ignores SIGTERM.

use std::sync::{Arc, Mutex};

use nix::sys::signal::Signal;
use tokio::sync::watch;
use tokio::time::Instant;
use xy_core::config::ServerConfig;

use super::process::{BoxFuture, ChildHandle, ChildSpawner, ExitInfo};
use crate::log_router::sink::SharedSink;
use crate::os::spawn::SpawnError;

#[derive(Default)]
struct Inner {
    children: Vec<Arc<MockChild>>,
    spawn_times: Vec<Instant>,
    fail_next: usize,
    ignore_term: bool,
    exit_on_spawn: Option<i32>,
}

/// Hands out [`MockChild`]ren and remembers them.
#[derive(Default)]
pub(crate) struct MockSpawner {
    inner: Mutex<Inner>,
}

impl MockSpawner {
    pub(crate) fn new() -> Arc<MockSpawner> {
        Arc::new(MockSpawner::default())
    }

    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        f(&mut self.inner.lock().unwrap())
    }

    /// Children spawned from now on ignore SIGTERM.
    pub(crate) fn ignore_term(&self, yes: bool) {
        self.with(|i| i.ignore_term = yes);
    }

    /// The next `n` spawns fail.
    pub(crate) fn fail_next(&self, n: usize) {
        self.with(|i| i.fail_next = n);
    }

    /// Children spawned from now on exit with `code` at once.
    pub(crate) fn exit_on_spawn(&self, code: Option<i32>) {
        self.with(|i| i.exit_on_spawn = code);
    }

    pub(crate) fn spawn_times(&self) -> Vec<Instant> {
        self.with(|i| i.spawn_times.clone())
    }

    pub(crate) fn spawns(&self) -> usize {
        self.with(|i| i.spawn_times.len())
    }

    pub(crate) fn last(&self) -> Arc<MockChild> {
        self.with(|i| i.children.last().cloned())
            .expect("nothing spawned")
    }
}

impl ChildSpawner for MockSpawner {
    fn spawn(
        &self,
        config: &ServerConfig,
        _sink: &SharedSink,
    ) -> Result<Arc<dyn ChildHandle>, SpawnError> {
        self.with(|i| {
            i.spawn_times.push(Instant::now());
            if i.fail_next > 0 {
                i.fail_next -= 1;
                return Err(SpawnError {
                    path: config.command.clone(),
                    error: "No such file or directory (os error 2)".into(),
                    kind: xy_core::protocol::SpawnErrorKind::NotFound,
                });
            }
            let child = Arc::new(MockChild {
                pid: 1000 + u32::try_from(i.children.len()).unwrap(),
                ignore_term: i.ignore_term,
                signals: Mutex::new(Vec::new()),
                exit: watch::channel(None).0,
                gone: watch::channel(false).0,
            });
            if let Some(code) = i.exit_on_spawn {
                child.exit(code);
            }
            i.children.push(child.clone());
            Ok(child as Arc<dyn ChildHandle>)
        })
    }
}

/// One fake child; its group is gone as soon as the leader is.
pub(crate) struct MockChild {
    pid: u32,
    ignore_term: bool,
    signals: Mutex<Vec<Signal>>,
    exit: watch::Sender<Option<ExitInfo>>,
    gone: watch::Sender<bool>,
}

impl MockChild {
    /// The leader exits with `code`.
    pub(crate) fn exit(&self, code: i32) {
        self.die(ExitInfo {
            code: Some(code),
            signal: None,
        });
    }

    /// The leader is killed by `sig`.
    pub(crate) fn kill_by(&self, sig: Signal) {
        self.die(ExitInfo {
            code: None,
            signal: Some(sig as i32),
        });
    }

    fn die(&self, info: ExitInfo) {
        self.exit.send_if_modified(|v| {
            if v.is_none() {
                *v = Some(info);
                true
            } else {
                false
            }
        });
        self.gone.send_replace(true);
    }

    pub(crate) fn signals(&self) -> Vec<Signal> {
        self.signals.lock().unwrap().clone()
    }
}

impl ChildHandle for MockChild {
    fn pid(&self) -> u32 {
        self.pid
    }

    fn pgid(&self) -> i32 {
        i32::try_from(self.pid).unwrap()
    }

    fn signal_group(&self, sig: Signal) {
        self.signals.lock().unwrap().push(sig);
        match sig {
            Signal::SIGTERM if !self.ignore_term => self.exit(0),
            Signal::SIGKILL => self.kill_by(Signal::SIGKILL),
            _ => {}
        }
    }

    fn wait(&self) -> BoxFuture<ExitInfo> {
        let mut rx = self.exit.subscribe();
        Box::pin(async move {
            let v = rx
                .wait_for(Option::is_some)
                .await
                .map(|v| *v)
                .ok()
                .flatten();
            v.unwrap_or(ExitInfo {
                code: None,
                signal: None,
            })
        })
    }

    fn wait_group_gone(&self) -> BoxFuture<()> {
        let mut rx = self.gone.subscribe();
        Box::pin(async move {
            let _ = rx.wait_for(|g| *g).await;
        })
    }
}
