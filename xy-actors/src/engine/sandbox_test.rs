//! `sandbox_test` (SPEC §21): the exfiltration probes, run in a child
//! confined exactly as the server's next spawn would be (the same
//! `os::sandbox::prepare` and enforcement), the child being xyd itself in
//! its hidden `--sandbox-probe` mode (present wherever xy is installed).
//! The probe re-runs itself once, so a grandchild's view is reported too.
//! Targets: the user's keys and credentials, xy's state, another server's
//! config and private data dir, `~/.bashrc`, xyd's socket, and loopback
//! listeners opened here.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use xy_core::config::ServerConfig;
use xy_core::protocol::{ProbeResult, SandboxTestResult};
use xy_core::sandbox::probe::Probe;
use xy_core::sandbox::tilde;

use crate::engine::EngineError;
use crate::os::sandbox::SandboxEnv;
use crate::os::spawn::SpawnError;
use crate::server::failure::SpawnFailure;

/// The probe child's whole run (it waits on connects of at most 3 s each).
const PROBE_DEADLINE: Duration = Duration::from_secs(60);

fn spawn_failed(config: &ServerConfig, e: SpawnError) -> EngineError {
    EngineError::SpawnFailed {
        failures: vec![SpawnFailure {
            name: config.name.clone(),
            path: e.path,
            error: e.error,
            kind: e.kind,
            port_holder: None,
            secret: None,
        }],
        started: Vec::new(),
        already_running: Vec::new(),
    }
}

/// The first entry of `dir` (sorted) that `keep` accepts.
fn first_in(dir: &Path, keep: impl Fn(&Path) -> bool) -> Option<PathBuf> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| keep(p))
        .collect();
    entries.sort();
    entries.into_iter().next()
}

/// The probes for `config`, against listeners at `tcp`, `other` and `udp`.
fn probes(
    config: &ServerConfig,
    home: &Path,
    state_dir: &Path,
    data_root: &Path,
    socket: &Path,
    addrs: [std::net::SocketAddr; 3],
) -> Vec<Probe> {
    let label = |p: &Path| Some(tilde(p, home));
    let ssh = home.join(".ssh");
    let ssh = first_in(&ssh, |p| p.is_file()).unwrap_or(ssh);
    let aws = home.join(".aws/credentials");
    let mut out = vec![
        Probe::Read {
            label: label(&ssh),
            path: ssh,
        },
        Probe::Read {
            label: label(&aws),
            path: aws,
        },
        Probe::Read {
            path: state_dir.to_path_buf(),
            label: Some(format!("xy's state dir {}", tilde(state_dir, home))),
        },
    ];
    if let Some(dir) = config.source.parent() {
        let other = first_in(dir, |p| {
            p != config.source && p.extension().is_some_and(|e| e == "kdl")
        })
        .unwrap_or_else(|| dir.to_path_buf());
        out.push(Probe::Read {
            label: Some(format!("another server's config {}", tilde(&other, home))),
            path: other,
        });
    }
    let own = data_root.join(&config.name);
    if let Some(other) = first_in(data_root, |p| p.is_dir() && p != own) {
        out.push(Probe::Read {
            label: Some(format!("another server's data dir {}", tilde(&other, home))),
            path: other,
        });
    }
    let bashrc = home.join(".bashrc");
    out.push(Probe::Write {
        label: label(&bashrc),
        path: bashrc,
    });
    out.push(Probe::Unix {
        path: socket.to_path_buf(),
        label: Some(format!("xyd's socket {}", tilde(socket, home))),
    });
    let [tcp, other, udp] = addrs;
    out.push(Probe::Connect { addr: tcp });
    out.push(Probe::Udp { addr: udp });
    out.push(Probe::Connect { addr: other });
    out
}

/// Runs the probes for `config` (see the module doc).
pub(crate) async fn run(
    config: &ServerConfig,
    env: &SandboxEnv,
    socket: &Path,
) -> Result<SandboxTestResult, EngineError> {
    let internal = |what: &str, e: std::io::Error| EngineError::Internal(format!("{what}: {e}"));
    let program = crate::os::spawn::resolve(config).map_err(|e| spawn_failed(config, e))?;
    let xyd = std::env::current_exe().map_err(|e| internal("locating xyd", e))?;
    let xyd_dir: Vec<PathBuf> = xyd.parent().map(Path::to_path_buf).into_iter().collect();
    // The probe's temp dir is its own: the server's may be in use.
    let probe_env = SandboxEnv {
        root: env.root.join(&config.name).join("probe"),
        ..env.clone()
    };
    let egress = crate::os::sandbox::egress::grant_for(config, &xyd.display().to_string())
        .map_err(|e| spawn_failed(config, e))?;
    let mut prepared = crate::os::sandbox::prepare(
        config,
        &program,
        &probe_env,
        egress.as_ref().map(|(g, _)| g),
        &xyd_dir,
    )
    .map_err(|e| spawn_failed(config, e))?;
    let tcp =
        std::net::TcpListener::bind(("127.0.0.1", 0)).map_err(|e| internal("probe listener", e))?;
    let other =
        std::net::TcpListener::bind(("127.0.0.1", 0)).map_err(|e| internal("probe listener", e))?;
    let udp =
        std::net::UdpSocket::bind(("127.0.0.1", 0)).map_err(|e| internal("probe socket", e))?;
    let addr =
        |r: std::io::Result<std::net::SocketAddr>| r.map_err(|e| internal("probe address", e));
    let home = crate::os::sandbox::child_home(config);
    let state_dir = env.root.parent().unwrap_or(&env.root).to_path_buf();
    let list = probes(
        config,
        &home,
        &state_dir,
        &env.data_root,
        socket,
        [
            addr(tcp.local_addr())?,
            addr(other.local_addr())?,
            addr(udp.local_addr())?,
        ],
    );
    let input = serde_json::to_vec(&list).map_err(|e| EngineError::Internal(e.to_string()))?;

    // The server's own spawn path: what confines the probe confines the server.
    let (mut cmd, run) = crate::os::sandbox::command(config, &xyd, prepared.as_mut(), egress);
    cmd.arg("--sandbox-probe")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().map_err(|e| internal("spawning the probe", e))?;
    let mut stdin = child.stdin.take();
    let mut stdout = child.stdout.take();
    let talk = async {
        if let Some(mut i) = stdin.take() {
            i.write_all(&input).await?;
            i.shutdown().await?;
        }
        let mut out = Vec::new();
        if let Some(o) = stdout.as_mut() {
            o.read_to_end(&mut out).await?;
        }
        child.wait().await?;
        Ok::<_, std::io::Error>(out)
    };
    let out = tokio::time::timeout(PROBE_DEADLINE, talk)
        .await
        .map_err(|_| EngineError::Internal("the sandbox probe did not finish in time".into()))?
        .map_err(|e| internal("running the probe", e))?;
    let probes: Vec<ProbeResult> = serde_json::from_slice(&out).map_err(|e| {
        EngineError::Internal(format!(
            "the sandbox probe's answer: {e}: {}",
            String::from_utf8_lossy(&out)
        ))
    })?;
    drop((tcp, other, udp));
    Ok(SandboxTestResult {
        name: config.name.clone(),
        sandbox: run.map(|r| r.status(&[])),
        probes,
    })
}
