//! The exfiltration probes (SPEC §21): what `sandbox_test` runs in a child
//! confined like the server (`xyd --sandbox-probe`) and what the tests'
//! exfiltration child runs. Each probe tries one thing a confined server
//! must not do and reports whether the OS let it through. Plain `std`, so
//! the daemon's hidden mode and the test child share it.

use std::io::Read;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::protocol::{ProbeOutcome, ProbeResult};

/// One probe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Probe {
    /// Read a file (one byte) or list a directory.
    Read {
        /// The path.
        path: PathBuf,
        /// How the result names it (`~/.ssh`), else the path.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        label: Option<String>,
    },
    /// Open an existing file `O_WRONLY|O_APPEND` and close it unwritten.
    Write {
        /// The path.
        path: PathBuf,
        /// How the result names it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        label: Option<String>,
    },
    /// A TCP connect.
    Connect {
        /// The address.
        addr: SocketAddr,
    },
    /// A UDP datagram sent.
    Udp {
        /// The address.
        addr: SocketAddr,
    },
    /// Listening on a TCP address.
    Listen {
        /// The address.
        addr: SocketAddr,
    },
    /// A connect to a Unix socket (xyd's control socket) and one request
    /// line: through only when an answer comes back (xyd accepts, then
    /// closes a confined peer's connection unanswered).
    Unix {
        /// The socket's path.
        path: PathBuf,
        /// How the result names it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        label: Option<String>,
    },
}

impl Probe {
    /// What the probe tries, as the result names it.
    pub fn describe(&self) -> String {
        let shown = |path: &PathBuf, label: &Option<String>| {
            label.clone().unwrap_or_else(|| path.display().to_string())
        };
        match self {
            Probe::Read { path, label } => format!("read {}", shown(path, label)),
            Probe::Write { path, label } => format!("write {}", shown(path, label)),
            Probe::Connect { addr } => format!("tcp connect {addr}"),
            Probe::Udp { addr } => format!("udp send {addr}"),
            Probe::Listen { addr } => format!("listen {addr}"),
            Probe::Unix { path, label } => format!("unix connect {}", shown(path, label)),
        }
    }

    fn attempt(&self) -> std::io::Result<()> {
        match self {
            Probe::Read { path, .. } => {
                if std::fs::metadata(path)?.is_dir() {
                    std::fs::read_dir(path)?.next().transpose()?;
                } else {
                    let mut b = [0u8; 1];
                    let _ = std::fs::File::open(path)?.read(&mut b)?;
                }
                Ok(())
            }
            Probe::Write { path, .. } => std::fs::OpenOptions::new()
                .append(true)
                .open(path)
                .map(drop),
            Probe::Connect { addr } => {
                std::net::TcpStream::connect_timeout(addr, Duration::from_secs(3)).map(drop)
            }
            Probe::Udp { addr } => {
                let any: SocketAddr = if addr.is_ipv4() {
                    ([127, 0, 0, 1], 0).into()
                } else {
                    (std::net::Ipv6Addr::LOCALHOST, 0).into()
                };
                let s = std::net::UdpSocket::bind(any)?;
                s.send_to(b"xy-probe", addr).map(drop)
            }
            Probe::Listen { addr } => std::net::TcpListener::bind(addr).map(drop),
            Probe::Unix { path, .. } => {
                use std::io::Write;
                let mut s = std::os::unix::net::UnixStream::connect(path)?;
                s.set_read_timeout(Some(Duration::from_secs(3)))?;
                let mut b = [0u8; 1];
                let answered = s
                    .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"xy.probe\"}\n")
                    .and_then(|()| s.read(&mut b));
                // Connected, then closed before an answer (EOF, EPIPE, reset):
                // the listener refused this process.
                let refused = || {
                    std::io::Error::new(
                        std::io::ErrorKind::PermissionDenied,
                        "closed unanswered (refused by the listener)",
                    )
                };
                match answered {
                    Ok(1..) => Ok(()),
                    Ok(0) => Err(refused()),
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
                        ) =>
                    {
                        Err(refused())
                    }
                    Err(e) => Err(e),
                }
            }
        }
    }

    /// Runs the probe. `EACCES`/`EPERM` is `blocked`; a missing target is
    /// `skipped`; success, and for network probes any other error (the
    /// attempt reached the network: refused, unreachable), is `allowed`.
    pub fn run(&self) -> ProbeResult {
        let probe = self.describe();
        let network = matches!(self, Probe::Connect { .. } | Probe::Udp { .. });
        let (outcome, detail) = match self.attempt() {
            Ok(()) => (ProbeOutcome::Allowed, "got through".to_owned()),
            Err(e)
                if matches!(e.raw_os_error(), Some(EACCES | EPERM))
                    || e.kind() == std::io::ErrorKind::PermissionDenied =>
            {
                (ProbeOutcome::Blocked, e.to_string())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !network => {
                (ProbeOutcome::Skipped, e.to_string())
            }
            Err(e) if network => (ProbeOutcome::Allowed, format!("reached the network: {e}")),
            Err(e) => (ProbeOutcome::Skipped, e.to_string()),
        };
        ProbeResult {
            probe,
            outcome,
            detail,
        }
    }
}

/// `EACCES` and `EPERM` (the same numbers on Linux and macOS).
const EACCES: i32 = 13;
const EPERM: i32 = 1;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unconfined_probes_get_through_and_missing_targets_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, "x").unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        for p in [
            Probe::Read {
                path: f.clone(),
                label: None,
            },
            Probe::Read {
                path: dir.path().to_path_buf(),
                label: None,
            },
            Probe::Write {
                path: f.clone(),
                label: Some("~/f".into()),
            },
            Probe::Connect { addr },
            Probe::Udp { addr },
        ] {
            let r = p.run();
            assert_eq!(r.outcome, ProbeOutcome::Allowed, "{r:?}");
        }
        let gone = Probe::Read {
            path: dir.path().join("gone"),
            label: None,
        }
        .run();
        assert_eq!(gone.outcome, ProbeOutcome::Skipped);
        assert_eq!(
            Probe::Write {
                path: f,
                label: Some("~/f".into())
            }
            .describe(),
            "write ~/f"
        );
        let line = serde_json::to_string(&Probe::Connect { addr }).unwrap();
        assert!(line.contains("\"op\":\"connect\""), "{line}");
    }
}
