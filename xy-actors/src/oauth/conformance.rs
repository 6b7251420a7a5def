//! The official conformance suite's client authorization scenarios
//! (`conformance client --suite auth`) with the broker as the OAuth client.
//! The suite runs a small wrapper per scenario (`python3 client.py <url>`)
//! that hands the scenario to this test over a loopback socket; the test
//! plays what xy's remote upstream and a user do: MCP requests carrying the
//! grant's `Authorization` (`initialize`, `tools/list`, `tools/call`), a
//! `401`/`403` reported to `rejected` and retried once, and on `login
//! needed` a login whose URL is followed as a browser would (the suite's
//! authorization server approves at once), at most three logins per
//! scenario. This measures the broker alone; the same scenarios through a
//! real xyd and `xyctl` are `xy-daemon/tests/conformance_auth.rs`.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use xy_core::config::OAuthConfig;
use xy_testbins::interop::{self, Interop};
use xy_testbins::out::err;

use super::*;
use crate::credentials::{CredentialError, Credentials};

/// The Client ID Metadata Document URL the suite's CIMD scenario expects a
/// client to use (a document it "hosts" itself).
const SUITE_CIMD_URL: &str = "https://conformance-test.local/client-metadata.json";

/// Scenarios the broker is known to fail here, with why. Printed when hit;
/// any other failure fails the test.
const KNOWN_GAPS: &[(&str, &str)] = &[
    // The 2025-03-26 fallbacks xy refuses on purpose (D119).
    (
        "auth/2025-03-26-oauth-endpoint-fallback",
        "no guessed endpoints (D119)",
    ),
    // Extensions outside SPEC §23.
    ("auth/client-credentials-jwt", "extension"),
    ("auth/client-credentials-basic", "extension"),
    ("auth/enterprise-managed-authorization", "extension"),
    ("auth/dpop", "extension"),
    ("auth/dpop-nonce", "extension"),
    ("auth/wif-jwt-bearer", "extension"),
];

const WRAPPER: &str = r#"import json, os, socket, sys
s = socket.create_connection(("127.0.0.1", int(os.environ["XY_DRIVER_PORT"])))
ctx = os.environ.get("MCP_CONFORMANCE_CONTEXT")
s.sendall((json.dumps({"url": sys.argv[-1], "scenario": os.environ.get("MCP_CONFORMANCE_SCENARIO"),
                       "protocol": os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION"),
                       "context": json.loads(ctx) if ctx else None}) + "\n").encode())
sys.exit(int(s.makefile().readline().strip() or 1))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_client_auth_scenarios_through_the_broker() {
    let suite = match interop::conformance() {
        Interop::Ready(c) => c,
        Interop::Skip(skip) => {
            return skip.announce("conformance_client_auth_scenarios_through_the_broker");
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let wrapper = dir.path().join("client.py");
    std::fs::write(&wrapper, WRAPPER).unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((conn, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(serve_one(conn));
        }
    });
    let out = dir.path().join("out");
    let command = format!("python3 {}", wrapper.display());
    let results = tokio::task::spawn_blocking(move || {
        suite.run_client_auth(&command, &[("XY_DRIVER_PORT", port.to_string())], &out)
    })
    .await
    .unwrap();
    assert!(
        results.len() >= 14 + interop::CLIENT_AUTH_SCENARIOS_2026.len(),
        "only {} scenarios ran",
        results.len()
    );
    let unexpected = interop::report_client_results("through the broker", &results, KNOWN_GAPS);
    assert!(unexpected.is_empty(), "unexpected failures: {unexpected:?}");
}

async fn serve_one(conn: tokio::net::TcpStream) {
    let (r, mut w) = conn.into_split();
    let mut line = String::new();
    if BufReader::new(r).read_line(&mut line).await.is_err() {
        return;
    }
    let Ok(req) = serde_json::from_str::<Value>(&line) else {
        return;
    };
    let scenario = req["scenario"].as_str().unwrap_or("?").to_owned();
    let code = match tokio::time::timeout(Duration::from_secs(50), run_scenario(&req)).await {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => {
            err(&format!("  [{scenario}] client error: {e}"));
            1
        }
        Err(_) => {
            err(&format!("  [{scenario}] client timed out"));
            1
        }
    };
    let _ = w.write_all(format!("{code}\n").as_bytes()).await;
}

/// One MCP client session as xy would make it for the scenario's server.
async fn run_scenario(req: &Value) -> Result<(), String> {
    let url = req["url"].as_str().ok_or("no url")?.to_owned();
    let ctx = &req["context"];
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let broker = OAuthBroker::new(OAuthOptions {
        store: TokenStoreKind::File(dir.path().join("auth")),
        client_metadata_url: Some(SUITE_CIMD_URL.to_owned()),
        client_name: "xy".to_owned(),
        login_timeout: Duration::from_secs(30),
    });
    // A confidential client's secret (D149) is a §16 secret: here a file.
    let client_secret = match ctx["client_secret"].as_str() {
        Some(secret) => {
            let path = dir.path().join("client-secret");
            std::fs::write(&path, secret).map_err(|e| e.to_string())?;
            Some(xy_core::config::SecretSpec {
                name: "CLIENT_SECRET".to_owned(),
                source: xy_core::config::SecretSource::File(path),
            })
        }
        None => None,
    };
    let cfg = OAuthConfig {
        scopes: Vec::new(),
        client_id: ctx["client_id"].as_str().map(str::to_owned),
        client_secret,
    };
    let creds = broker
        .credentials("conformance", &url, &cfg)
        .map_err(|e| e.to_string())?;
    let mut s = Session {
        broker: &broker,
        creds: creds.as_ref(),
        cfg: &cfg,
        url: &url,
        http: crate::http::client::builder()
            .timeout(Duration::from_secs(20))
            .build()
            .map_err(|e| e.to_string())?,
        session_id: None,
        logins: 0,
        v2026: req["protocol"] == "2026-07-28",
    };
    if !s.v2026 {
        s.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "xy", "version": env!("CARGO_PKG_VERSION")}}),
        )
        .await?;
        s.notify("notifications/initialized").await?;
    }
    let tools = s.request("tools/list", json!({})).await?;
    if let Some(name) = tools["result"]["tools"][0]["name"].as_str() {
        s.request("tools/call", json!({"name": name, "arguments": {}}))
            .await?;
    }
    Ok(())
}

struct Session<'a> {
    broker: &'a OAuthBroker,
    creds: &'a dyn Credentials,
    cfg: &'a OAuthConfig,
    url: &'a str,
    http: reqwest::Client,
    session_id: Option<String>,
    logins: u32,
    /// Speak 2026-07-28 (stateless: no `initialize`, `_meta` on each request).
    v2026: bool,
}

impl Session<'_> {
    /// A login, its URL followed as a browser would.
    async fn login(&mut self) -> Result<(), String> {
        self.logins += 1;
        if self.logins > 3 {
            return Err("three logins did not get through; giving up".into());
        }
        let started = self
            .broker
            .login("conformance", self.url, self.cfg)
            .await
            .map_err(|e| e.to_string())?;
        let browser = crate::http::client::builder()
            .redirect(reqwest::redirect::Policy::limited(5))
            .timeout(Duration::from_secs(20))
            .build()
            .map_err(|e| e.to_string())?;
        let _ = browser.get(&started.url).send().await;
        let done = self
            .broker
            .login_wait(&started.login_id, Duration::from_secs(20))
            .await
            .map_err(|e| e.to_string())?;
        if done.done {
            Ok(())
        } else {
            Err("the login did not complete".into())
        }
    }

    async fn send(&mut self, body: &Value) -> Result<reqwest::Response, String> {
        let mut rounds = 0;
        loop {
            rounds += 1;
            let headers = match self.creds.headers().await {
                Ok(h) => h,
                // No grant yet: the request goes out bare, so its `401`
                // names the metadata and scopes the login starts from.
                Err(CredentialError::LoginNeeded { .. }) => Default::default(),
                Err(e) => return Err(e.to_string()),
            };
            let mut r = self
                .http
                .post(self.url)
                .headers(headers)
                .header("Accept", "application/json, text/event-stream")
                .header(
                    "MCP-Protocol-Version",
                    if self.v2026 {
                        "2026-07-28"
                    } else {
                        "2025-11-25"
                    },
                )
                .json(body);
            if self.v2026
                && let Some(m) = body["method"].as_str()
            {
                r = r.header("Mcp-Method", m);
                if let Some(n) = body["params"]["name"].as_str() {
                    r = r.header("Mcp-Name", n);
                }
            }
            if let Some(id) = &self.session_id {
                r = r.header("Mcp-Session-Id", id);
            }
            let resp = r.send().await.map_err(|e| e.to_string())?;
            let status = resp.status().as_u16();
            if (status == 401 || status == 403) && rounds < 6 {
                let www = resp
                    .headers()
                    .get("www-authenticate")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                match self.creds.rejected(status, www, None).await {
                    Ok(()) if rounds % 2 == 1 => continue,
                    Ok(()) | Err(CredentialError::LoginNeeded { .. }) => {
                        self.login().await?;
                        continue;
                    }
                    Err(e) => return Err(e.to_string()),
                }
            }
            return Ok(resp);
        }
    }

    async fn request(&mut self, method: &str, mut params: Value) -> Result<Value, String> {
        if self.v2026 {
            params["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "xy", "version": env!("CARGO_PKG_VERSION")},
            });
        }
        let resp = self
            .send(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
            .await?;
        if let Some(id) = resp
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
        {
            self.session_id = Some(id.to_owned());
        }
        let status = resp.status();
        let sse = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|c| c.starts_with("text/event-stream"));
        let text = resp.text().await.map_err(|e| e.to_string())?;
        if !status.is_success() {
            return Err(format!("{method}: HTTP {status}"));
        }
        let json_text = if sse {
            text.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim)
                .find(|d| d.contains("\"id\""))
                .unwrap_or("{}")
                .to_owned()
        } else {
            text
        };
        serde_json::from_str(&json_text).map_err(|e| format!("{method}: {e}"))
    }

    async fn notify(&mut self, method: &str) -> Result<(), String> {
        let resp = self
            .send(&json!({"jsonrpc": "2.0", "method": method}))
            .await?;
        if resp.status().is_success() {
            Ok(())
        } else {
            Err(format!("{method}: HTTP {}", resp.status()))
        }
    }
}
