//! Spawning a test binary with its output read line by line on background
//! threads, and deadline-based waiting (no fixed sleeps).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

pub(crate) const DEADLINE: Duration = Duration::from_secs(10);

/// A running child whose stdout and stderr lines arrive on channels.
pub(crate) struct Proc {
    pub(crate) child: Child,
    stdout: Receiver<String>,
    stderr: Receiver<String>,
}

impl Proc {
    /// Spawns `bin` with `args`, stdout/stderr piped; `setup` may adjust the command.
    pub(crate) fn spawn(bin: &str, args: &[&str], setup: impl FnOnce(&mut Command)) -> Self {
        let mut cmd = Command::new(bin);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        setup(&mut cmd);
        let mut child = cmd.spawn().expect("spawn test binary");
        let stdout = lines(child.stdout.take().expect("stdout"));
        let stderr = lines(child.stderr.take().expect("stderr"));
        Self {
            child,
            stdout,
            stderr,
        }
    }

    pub(crate) fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id() as i32)
    }

    pub(crate) fn signal(&self, signal: Signal) {
        kill(self.pid(), signal).expect("signal child");
    }

    /// The first stdout line matching `pred`, skipping others.
    #[track_caller]
    pub(crate) fn stdout_line(&self, pred: impl Fn(&str) -> bool) -> String {
        wait_line(&self.stdout, pred, "stdout")
    }

    /// The first stderr line matching `pred`, skipping others.
    #[track_caller]
    pub(crate) fn stderr_line(&self, pred: impl Fn(&str) -> bool) -> String {
        wait_line(&self.stderr, pred, "stderr")
    }

    /// Every remaining stdout line until EOF.
    #[track_caller]
    pub(crate) fn stdout_to_end(&self) -> Vec<String> {
        let deadline = xy_testbins::wait::deadline(DEADLINE);
        let mut all = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stdout.recv_timeout(left) {
                Ok(line) => all.push(line),
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return all,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("stdout never ended"),
            }
        }
    }

    /// Waits for the child to exit.
    #[track_caller]
    pub(crate) fn wait_exit(&mut self) -> ExitStatus {
        let mut status = None;
        wait_for("child exit", DEADLINE, || {
            status = self.child.try_wait().expect("try_wait");
            status.is_some()
        });
        status.expect("exit status")
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn lines(stream: impl std::io::Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

#[track_caller]
fn wait_line(rx: &Receiver<String>, pred: impl Fn(&str) -> bool, what: &str) -> String {
    let deadline = xy_testbins::wait::deadline(DEADLINE);
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if pred(&line) => return line,
            Ok(line) => seen.push(line),
            Err(e) => panic!("no matching {what} line ({e}); saw {seen:?}"),
        }
    }
}

pub(crate) use xy_testbins::wait::wait_for;

/// Alive and not a zombie (orphans are not reaped on these machines).
pub(crate) fn alive(pid: Pid) -> bool {
    if kill(pid, None).is_err() {
        return false;
    }
    #[cfg(target_os = "linux")]
    {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            return false;
        };
        let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
        !matches!(state.and_then(|s| s.chars().next()), Some('Z' | 'X'))
    }
    #[cfg(not(target_os = "linux"))]
    true
}

/// A fresh path in the temp dir for this test process.
pub(crate) fn temp_path(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("xy-testbins-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    let _ = std::fs::remove_file(&path);
    path
}
