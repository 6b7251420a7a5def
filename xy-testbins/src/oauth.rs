//! The OAuth test fixture (SPEC §23): a local authorization server and
//! protected MCP resource server in Python (`fixtures/oauth_fixture.py`,
//! stdlib only), started as a subprocess on a loopback port. Tests read its
//! log of code exchanges, registrations and refreshes, and change its options
//! while it runs.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};

use serde_json::Value;

/// How the fixture behaves.
#[derive(Debug, Clone)]
pub struct FixtureOptions {
    /// Access token lifetime, seconds.
    pub token_lifetime: u64,
    /// Advertise `client_id_metadata_document_supported` (and accept an
    /// `https://` client id without fetching it).
    pub cimd: bool,
    /// Offer RFC 7591 dynamic registration.
    pub dcr: bool,
    /// The `iss` in the authorization response: `right`, `wrong` or `none`
    /// (`none` also stops advertising `authorization_response_iss_parameter_supported`).
    pub iss: &'static str,
    /// Refuse every refresh (`invalid_grant`).
    pub refuse_refresh: bool,
    /// Leave `code_challenge_methods_supported` out of the AS metadata.
    pub no_pkce: bool,
    /// A scope the resource requires (`403 insufficient_scope` without it).
    pub required_scope: Option<String>,
    /// A scope only `tools/call` needs (`403 insufficient_scope` without
    /// it): a step-up that `initialize` and `tools/list` never show.
    pub call_scope: Option<String>,
    /// A pre-registered confidential client `(id, secret)`: the token
    /// endpoint then takes only `client_secret_basic` from it.
    pub confidential: Option<(String, String)>,
}

impl Default for FixtureOptions {
    fn default() -> Self {
        FixtureOptions {
            token_lifetime: 3600,
            cimd: false,
            dcr: true,
            iss: "right",
            refuse_refresh: false,
            no_pkce: false,
            required_scope: None,
            call_scope: None,
            confidential: None,
        }
    }
}

/// A running fixture; killed on drop.
#[derive(Debug)]
pub struct Fixture {
    child: Child,
    _stdin: ChildStdin,
    /// Its loopback port.
    pub port: u16,
    log: PathBuf,
    _dir: Option<tempfile_dir::Dir>,
}

/// A temp directory without a tempfile dependency: removed on drop.
mod tempfile_dir {
    #[derive(Debug)]
    pub(super) struct Dir(pub(super) std::path::PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// The fixture script's path.
pub fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/oauth_fixture.py")
}

impl Fixture {
    /// Starts the fixture; returns once it listens.
    pub fn start(opts: &FixtureOptions) -> Fixture {
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("xy-oauth-fixture-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("fixture temp dir");
        let log = dir.join("as.log");
        let mut cmd = Command::new("python3");
        cmd.arg(script())
            .arg("--log")
            .arg(&log)
            .args(["--token-lifetime", &opts.token_lifetime.to_string()])
            .args(["--iss", opts.iss]);
        if opts.cimd {
            cmd.arg("--cimd");
        }
        if opts.dcr {
            cmd.arg("--dcr");
        }
        if opts.refuse_refresh {
            cmd.arg("--refuse-refresh");
        }
        if opts.no_pkce {
            cmd.arg("--no-pkce");
        }
        if let Some(s) = &opts.required_scope {
            cmd.args(["--required-scope", s]);
        }
        if let Some(s) = &opts.call_scope {
            cmd.args(["--call-scope", s]);
        }
        if let Some((id, secret)) = &opts.confidential {
            cmd.args(["--confidential", &format!("{id}:{secret}")]);
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start python3 for the OAuth fixture");
        let stdin = child.stdin.take().expect("piped stdin");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped stdout"))
            .read_line(&mut line)
            .expect("read the fixture's port");
        let port = serde_json::from_str::<Value>(&line)
            .ok()
            .and_then(|v| v["port"].as_u64())
            .unwrap_or_else(|| panic!("the OAuth fixture did not start: {line:?}"))
            as u16;
        Fixture {
            child,
            _stdin: stdin,
            port,
            log,
            _dir: Some(tempfile_dir::Dir(dir)),
        }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The protected MCP endpoint.
    pub fn mcp_url(&self) -> String {
        format!("{}/mcp", self.base())
    }

    /// The authorization server's issuer.
    pub fn issuer(&self) -> String {
        format!("{}/as", self.base())
    }

    /// Every log entry so far, oldest first.
    pub fn log(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The log entries of one kind (`code_exchange`, `refresh`, `register`, `authorize`).
    pub fn log_of(&self, kind: &str) -> Vec<Value> {
        self.log()
            .into_iter()
            .filter(|e| e["kind"] == kind)
            .collect()
    }

    /// Changes options while it runs, e.g. `{"refuse_refresh": true}`.
    pub fn control(&self, options: Value) {
        let body = options.to_string();
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect to the fixture");
        write!(
            s,
            "POST /control HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .expect("write to the fixture");
        let mut reply = String::new();
        let _ = s.read_to_string(&mut reply);
        assert!(
            reply.starts_with("HTTP/1.1 200"),
            "control refused: {reply}"
        );
    }

    /// Checks the refresh log: no refresh token sent twice, no two
    /// refreshes overlapping in time. Returns how many refreshes there were.
    pub fn assert_refreshes_clean(&self) -> usize {
        let refreshes = self.log_of("refresh");
        let mut seen = std::collections::HashSet::new();
        for r in &refreshes {
            assert_eq!(r["reused"], false, "a refresh token was sent twice: {r}");
            assert!(
                seen.insert(r["refresh_token"].as_str().unwrap_or_default().to_owned()),
                "a refresh token was sent twice: {r}"
            );
        }
        let mut spans: Vec<(f64, f64)> = refreshes
            .iter()
            .map(|r| (r["start"].as_f64().unwrap(), r["end"].as_f64().unwrap()))
            .collect();
        spans.sort_by(|a, b| a.0.total_cmp(&b.0));
        for w in spans.windows(2) {
            assert!(w[1].0 >= w[0].1, "two refreshes overlapped: {w:?}");
        }
        refreshes.len()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
