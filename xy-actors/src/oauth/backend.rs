//! What a grant store is to the broker ([`TokenBackend`]: load, save,
//! delete one server's record), the item name the OS stores use, and the
//! one child-process runner the tool-backed stores (`security`,
//! `secret-tool`) share: the record on stdin, never on the command line; a
//! deadline, the child killed at it.

use std::io;
use std::time::Duration;

/// The keychain item's service name (and the Secret Service item's
/// `service` attribute); the account is the server's name.
pub(crate) const KEYCHAIN_SERVICE: &str = "xy-oauth";

/// A grant store.
pub(crate) trait TokenBackend: Send + Sync + 'static {
    fn load(&self, server: &str) -> io::Result<Option<Vec<u8>>>;
    fn save(&self, server: &str, bytes: &[u8]) -> io::Result<()>;
    /// `Ok(false)`: there was nothing to delete.
    fn delete(&self, server: &str) -> io::Result<bool>;
}

/// What a finished store tool (`security`, `secret-tool`) said.
pub(crate) struct ToolOutput {
    pub(crate) status: std::process::ExitStatus,
    pub(crate) stdout: Vec<u8>,
    pub(crate) stderr: String,
}

impl ToolOutput {
    /// `Ok` on success, else an error naming `tool what`, its status and
    /// its stderr (which names the item, never the record).
    pub(crate) fn check(&self, tool: &str, what: &str) -> io::Result<()> {
        if self.status.success() {
            return Ok(());
        }
        Err(io::Error::other(format!(
            "{tool} {what} failed ({}): {}",
            self.status,
            self.stderr.trim()
        )))
    }
}

/// Runs `program args`, feeding `stdin` (the record never goes on the
/// command line), killed after `deadline`: a locked keyring or keychain
/// may prompt and never answer.
pub(crate) fn run_tool(
    program: &str,
    args: &[&str],
    stdin: &[u8],
    deadline: Duration,
) -> io::Result<ToolOutput> {
    use std::io::{Read, Write};
    use std::process::{Command, Stdio};
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    // Readers on their own threads: a full pipe must not stall the child.
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let out = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = out.read_to_end(&mut b);
        b
    });
    let err = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = err.read_to_end(&mut b);
        b
    });
    if let Some(mut pipe) = child.stdin.take() {
        // A child that exits early closes the pipe: its status says why.
        let _ = pipe.write_all(stdin);
    }
    let until = std::time::Instant::now() + deadline;
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if std::time::Instant::now() >= until {
            let _ = child.kill();
            let _ = child.wait();
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "{program} gave no answer within {}s (a locked keyring or keychain waiting for its password?)",
                    deadline.as_secs()
                ),
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Ok(ToolOutput {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: String::from_utf8_lossy(&err.join().unwrap_or_default()).into_owned(),
    })
}
