//! The one door to `launchctl` and `systemctl`: a tiny trait so tests can
//! record command lines and answer with canned output, and the real
//! implementation over `std::process::Command`.

use std::io;
use std::process::{Command, Stdio};

/// What a finished service-manager command left behind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Output {
    /// The exit code; `None` when a signal ended the command.
    pub(crate) code: Option<i32>,
    /// Standard output, lossily decoded.
    pub(crate) stdout: String,
    /// Standard error, lossily decoded.
    pub(crate) stderr: String,
}

impl Output {
    /// Whether the command exited 0.
    pub(crate) fn success(&self) -> bool {
        self.code == Some(0)
    }
}

/// Runs one command line (`argv[0]` is looked up on `PATH`) to completion.
pub(crate) trait CommandRunner {
    /// Runs `argv` and returns its exit code and output; `Err` only when the
    /// command could not be started at all.
    fn run(&self, argv: &[String]) -> io::Result<Output>;
}

/// The real runner: `std::process::Command`, stdin on `/dev/null`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SystemRunner;

impl CommandRunner for SystemRunner {
    fn run(&self, argv: &[String]) -> io::Result<Output> {
        let (program, args) = argv
            .split_first()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "empty command line"))?;
        let out = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .output()?;
        Ok(Output {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_runner_reports_code_and_output() {
        let argv = ["sh", "-c", "echo out; echo err >&2; exit 3"].map(String::from);
        let out = SystemRunner.run(&argv).unwrap();
        assert_eq!(out.code, Some(3));
        assert_eq!(out.stdout, "out\n");
        assert_eq!(out.stderr, "err\n");
        assert!(!out.success());
    }

    #[test]
    fn system_runner_missing_program_is_err() {
        let argv = ["/nonexistent/xy-no-such-program".to_owned()];
        assert!(SystemRunner.run(&argv).is_err());
        assert!(SystemRunner.run(&[]).is_err());
    }
}
