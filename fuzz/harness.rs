//! The properties the fuzz targets check, shared with their stable replay
//! test (`xy-daemon/tests/fuzz_corpus.rs`, which `#[path]`-includes this
//! file): any bytes on a connection get only well-formed JSON-RPC lines
//! back and the connection ends; any text as a config file parses or yields
//! renderable diagnostics. A panic or a hang is a finding.

use std::path::Path;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use xy_actors::{Engine, EngineOptions};
use xy_core::config::ConfigSet;
use xy_core::paths::Paths;

/// How long one input may keep a connection busy before it counts as a hang.
const INPUT_DEADLINE: Duration = Duration::from_secs(20);

/// A daemon's method table over an engine with no servers, on temp dirs.
pub struct Transport {
    rt: tokio::runtime::Runtime,
    engine: Engine,
    paths: Paths,
    _dir: tempfile::TempDir,
}

impl Transport {
    pub fn new() -> Transport {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().to_path_buf();
        let paths = Paths::resolve(
            |k| match k {
                "XDG_CONFIG_HOME" => Some(root.join("c").into_os_string()),
                "XDG_STATE_HOME" => Some(root.join("s").into_os_string()),
                "XY_SOCKET" => Some(root.join("x.sock").into_os_string()),
                _ => None,
            },
            Some(root.clone()),
        )
        .expect("absolute paths");
        std::fs::create_dir_all(&paths.config_dir).expect("config dir");
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let opts = EngineOptions::new(&paths.log_dir, &paths.run_dir);
        let engine = rt
            .block_on(Engine::start(
                ConfigSet {
                    settings: xy_core::config::DaemonSettings::without_gateway(),
                    ..ConfigSet::default()
                },
                opts,
            ))
            .expect("engine with no servers");
        Transport {
            rt,
            engine,
            paths,
            _dir: dir,
        }
    }

    /// Sends `data` then EOF; returns the reply lines after checking each is
    /// a JSON-RPC object (or a batch array of them).
    pub fn run(&self, data: &[u8]) -> Vec<serde_json::Value> {
        let out = self.rt.block_on(async {
            let (mut client, server) = tokio::io::duplex(64 * 1024);
            let served = tokio::spawn(xy_daemon::serve_stream(
                self.engine.clone(),
                self.paths.clone(),
                server,
            ));
            let talk = async {
                let mut out = Vec::new();
                let (mut r, mut w) = tokio::io::split(&mut client);
                let write = async {
                    w.write_all(data)
                        .await
                        .expect("daemon side never closes early");
                    w.shutdown().await.expect("half-close");
                };
                let read = r.read_to_end(&mut out);
                let ((), n) = tokio::join!(write, read);
                n.expect("read replies");
                out
            };
            let out = tokio::time::timeout(INPUT_DEADLINE, talk)
                .await
                .expect("the connection ends after the input does");
            tokio::time::timeout(INPUT_DEADLINE, served)
                .await
                .expect("serve_stream returns")
                .expect("serve_stream does not panic");
            out
        });
        let text = String::from_utf8(out).expect("replies are UTF-8");
        text.lines()
            .map(|line| {
                let v: serde_json::Value = serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("reply is not JSON ({e}): {line}"));
                let items = match &v {
                    serde_json::Value::Array(items) => items.clone(),
                    other => vec![other.clone()],
                };
                for item in &items {
                    assert_eq!(item["jsonrpc"], "2.0", "{line}");
                    let notification = item.get("id").is_none();
                    assert!(
                        notification
                            || (item.get("result").is_some() != item.get("error").is_some()),
                        "a reply carries exactly one of result/error: {line}"
                    );
                }
                v
            })
            .collect()
    }
}

/// Parses `data` as one server's KDL file; errors must render.
pub fn config(data: &[u8]) {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    match xy_core::config::parse_server("fuzz", Path::new("fuzz.kdl"), src) {
        Ok(config) => {
            let _ = format!("{config:?}");
        }
        Err(errors) => {
            assert!(!errors.diagnostics.is_empty(), "an error has diagnostics");
            let plain = errors.render(false);
            let _ = errors.render(true);
            assert!(!plain.is_empty());
        }
    }
}
