//! The broker against the Python fixture (`xy_testbins::oauth`): a real
//! authorization server and protected resource on loopback. The upstream is
//! played by [`call`]: headers → request → on `401`/`403` `rejected` → one
//! retry, as the remote proxy does.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use xy_core::config::OAuthConfig;
use xy_core::protocol::{AuthState, ClientIdKind};
use xy_testbins::oauth::{Fixture, FixtureOptions};

use super::*;
use crate::credentials::{CredentialError, Credentials};

const SERVER: &str = "remote";

fn broker(dir: &std::path::Path) -> OAuthBroker {
    OAuthBroker::new(OAuthOptions {
        store: TokenStoreKind::File(dir.join("auth")),
        client_metadata_url: None,
        client_name: "xy-test".into(),
        login_timeout: Duration::from_secs(30),
    })
}

fn http() -> reqwest::Client {
    crate::http::client::builder()
        .redirect(reqwest::redirect::Policy::limited(5))
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// What a user's browser does: follow the authorization URL to the
/// loopback callback. Returns the callback page's status.
async fn follow(url: &str) -> u16 {
    http().get(url).send().await.unwrap().status().as_u16()
}

/// A full login; panics when it fails.
async fn login(
    b: &OAuthBroker,
    fx: &Fixture,
    cfg: &OAuthConfig,
) -> xy_core::protocol::AuthLoginResult {
    let started = b.login(SERVER, &fx.mcp_url(), cfg).await.unwrap();
    assert_eq!(follow(&started.url).await, 200);
    let done = b
        .login_wait(&started.login_id, Duration::from_secs(10))
        .await
        .unwrap();
    assert!(done.done, "{done:?}");
    started
}

/// One upstream call as the remote proxy makes it.
async fn call(
    c: &dyn Credentials,
    client: &reqwest::Client,
    url: &str,
) -> Result<(), CredentialError> {
    for attempt in 0..2 {
        let headers = c.headers().await?;
        let r = client
            .post(url)
            .headers(headers)
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
            .send()
            .await
            .map_err(|e| CredentialError::Unavailable(e.to_string()))?;
        let status = r.status().as_u16();
        if status == 200 {
            return Ok(());
        }
        if (status == 401 || status == 403) && attempt == 0 {
            let www = r
                .headers()
                .get("www-authenticate")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            c.rejected(status, www, None).await?;
            continue;
        }
        return Err(CredentialError::Unavailable(format!("status {status}")));
    }
    Err(CredentialError::Unavailable("rejected twice".into()))
}

#[tokio::test]
async fn login_with_dynamic_registration_then_calls_carry_the_grant() {
    let fx = Fixture::start(&FixtureOptions::default());
    let d = tempfile::tempdir().unwrap();
    let b = broker(d.path());
    let cfg = OAuthConfig::default();
    let c = b.credentials(SERVER, &fx.mcp_url(), &cfg).unwrap();
    assert_eq!(
        call(c.as_ref(), &http(), &fx.mcp_url()).await,
        Err(CredentialError::LoginNeeded {
            server: SERVER.into(),
            reason: None,
        })
    );

    let started = login(&b, &fx, &cfg).await;
    assert_eq!(started.client_id_kind, ClientIdKind::DynamicRegistration);
    assert!(
        started.redirect_uri.starts_with("http://127.0.0.1:"),
        "{}",
        started.redirect_uri
    );
    call(c.as_ref(), &http(), &fx.mcp_url()).await.unwrap();

    assert_eq!(fx.log_of("register").len(), 1);
    let auth = fx.log_of("authorize");
    assert_eq!(auth.len(), 1);
    assert_eq!(auth[0]["problems"], json!([]), "{auth:?}");
    // RFC 8707: the resource is the MCP endpoint, on authorize and token.
    assert_eq!(auth[0]["resource"], fx.mcp_url());
    let ex = fx.log_of("code_exchange");
    assert_eq!(ex.len(), 1);
    assert_eq!(ex[0]["ok"], true);
    assert_eq!(ex[0]["resource"], fx.mcp_url());

    let st = b.status(SERVER, &fx.mcp_url(), &cfg).await.unwrap();
    assert_eq!(st.state, AuthState::LoggedIn);
    let g = st.grant.unwrap();
    assert_eq!(g.issuer.as_deref(), Some(fx.issuer().as_str()));
    assert!(g.refreshable);
    assert!(g.expires_at.is_some());

    // The store: one private file; logout removes it.
    let file = d.path().join("auth/remote.json");
    assert!(file.is_file());
    assert!(b.logout(SERVER, &fx.mcp_url(), &cfg).await.unwrap());
    assert!(!file.exists());
    assert_eq!(
        b.status(SERVER, &fx.mcp_url(), &cfg).await.unwrap().state,
        AuthState::NotLoggedIn
    );
    assert!(matches!(
        c.headers().await,
        Err(CredentialError::LoginNeeded { .. })
    ));
    assert!(!b.logout(SERVER, &fx.mcp_url(), &cfg).await.unwrap());
}

#[tokio::test]
async fn client_id_metadata_document_when_supported_and_configured() {
    let fx = Fixture::start(&FixtureOptions {
        cimd: true,
        ..FixtureOptions::default()
    });
    let d = tempfile::tempdir().unwrap();
    // Without a document URL, xy falls back to registration.
    let plain = broker(d.path());
    let s = plain
        .login(SERVER, &fx.mcp_url(), &OAuthConfig::default())
        .await
        .unwrap();
    assert_eq!(s.client_id_kind, ClientIdKind::DynamicRegistration);

    let doc = "https://xy.example/oauth/client-metadata.json";
    let b = OAuthBroker::new(OAuthOptions {
        client_metadata_url: Some(doc.into()),
        ..OAuthOptions::new(d.path().join("auth2"))
    });
    let registered_before = fx.log_of("register").len();
    let s = b
        .login(SERVER, &fx.mcp_url(), &OAuthConfig::default())
        .await
        .unwrap();
    assert_eq!(s.client_id_kind, ClientIdKind::MetadataDocument);
    assert_eq!(follow(&s.url).await, 200);
    b.login_wait(&s.login_id, Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(
        fx.log_of("register").len(),
        registered_before,
        "no registration with CIMD"
    );
    let ex = fx.log_of("code_exchange");
    assert_eq!(ex.last().unwrap()["client_id"], doc);
    assert_eq!(ex.last().unwrap()["ok"], true);
}

#[tokio::test]
async fn a_preregistered_client_id_is_used_as_configured() {
    let fx = Fixture::start(&FixtureOptions {
        dcr: false,
        ..FixtureOptions::default()
    });
    let d = tempfile::tempdir().unwrap();
    let b = broker(d.path());
    // No DCR, no CIMD, no client id: the error says what to configure.
    let e = b
        .login(SERVER, &fx.mcp_url(), &OAuthConfig::default())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("client-id"), "{e}");
    let cfg = OAuthConfig {
        scopes: vec!["mcp:read".into()],
        client_id: Some("https://pre.example/client".into()),
        client_secret: None,
    };
    let s = b.login(SERVER, &fx.mcp_url(), &cfg).await.unwrap();
    assert_eq!(s.client_id_kind, ClientIdKind::Preregistered);
    assert!(s.url.contains("scope=mcp%3Aread"), "{}", s.url);
}

#[tokio::test]
async fn a_wrong_iss_fails_the_login_naming_it() {
    let fx = Fixture::start(&FixtureOptions {
        iss: "wrong",
        ..FixtureOptions::default()
    });
    let d = tempfile::tempdir().unwrap();
    let b = broker(d.path());
    let cfg = OAuthConfig::default();
    let s = b.login(SERVER, &fx.mcp_url(), &cfg).await.unwrap();
    assert_eq!(follow(&s.url).await, 400);
    let e = b
        .login_wait(&s.login_id, Duration::from_secs(10))
        .await
        .unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("http://evil.example/as"), "{msg}");
    assert!(msg.contains(&fx.issuer()), "{msg}");
    assert!(
        fx.log_of("code_exchange").is_empty(),
        "no code exchange after a wrong iss"
    );
    assert_eq!(
        b.status(SERVER, &fx.mcp_url(), &cfg).await.unwrap().state,
        AuthState::NotLoggedIn
    );
}

#[tokio::test]
async fn an_authorization_server_without_pkce_s256_is_refused() {
    let fx = Fixture::start(&FixtureOptions {
        no_pkce: true,
        ..FixtureOptions::default()
    });
    let d = tempfile::tempdir().unwrap();
    let e = broker(d.path())
        .login(SERVER, &fx.mcp_url(), &OAuthConfig::default())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("PKCE"), "{e}");
}

#[tokio::test]
async fn two_logins_at_once_get_their_own_ports() {
    let fx = Fixture::start(&FixtureOptions::default());
    let d = tempfile::tempdir().unwrap();
    let b = broker(d.path());
    let cfg = OAuthConfig::default();
    let one = b.login("one", &fx.mcp_url(), &cfg).await.unwrap();
    let two = b.login("two", &fx.mcp_url(), &cfg).await.unwrap();
    assert_ne!(one.redirect_uri, two.redirect_uri);
    // Completed in the other order: each callback reaches its own login.
    assert_eq!(follow(&two.url).await, 200);
    assert_eq!(follow(&one.url).await, 200);
    for s in [&one, &two] {
        assert!(
            b.login_wait(&s.login_id, Duration::from_secs(10))
                .await
                .unwrap()
                .done
        );
    }
    // A stray hit with a made-up state is answered and ignored.
    let three = b.login("one", &fx.mcp_url(), &cfg).await.unwrap();
    let stray = format!("{}?code=x&state=forged", three.redirect_uri);
    assert_eq!(follow(&stray).await, 400);
    let w = b
        .login_wait(&three.login_id, Duration::from_millis(200))
        .await
        .unwrap();
    assert!(!w.done);
    assert_eq!(follow(&three.url).await, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_callers_for_20s_on_3s_tokens_see_no_error_and_refreshes_never_overlap() {
    let fx = Fixture::start(&FixtureOptions {
        token_lifetime: 3,
        ..FixtureOptions::default()
    });
    let d = tempfile::tempdir().unwrap();
    let b = broker(d.path());
    let cfg = OAuthConfig::default();
    login(&b, &fx, &cfg).await;
    let c = b.credentials(SERVER, &fx.mcp_url(), &cfg).unwrap();
    let end = Instant::now() + Duration::from_secs(20);
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let c = Arc::clone(&c);
        let url = fx.mcp_url();
        tasks.push(tokio::spawn(async move {
            let client = http();
            let mut n = 0u32;
            while Instant::now() < end {
                call(c.as_ref(), &client, &url)
                    .await
                    .expect("a call failed");
                n += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            n
        }));
    }
    let mut calls = 0;
    for t in tasks {
        calls += t.await.unwrap();
    }
    let refreshes = fx.assert_refreshes_clean();
    assert!(
        refreshes >= 5,
        "only {refreshes} refreshes in 20 s of 3 s tokens"
    );
    assert_eq!(
        fx.log_of("code_exchange").len(),
        1,
        "one grant for every caller"
    );
    assert!(calls > 100, "only {calls} calls");
}

#[tokio::test]
async fn a_refused_refresh_means_login_needed_within_5s_then_a_login_recovers() {
    let fx = Fixture::start(&FixtureOptions {
        token_lifetime: 3,
        ..FixtureOptions::default()
    });
    let d = tempfile::tempdir().unwrap();
    let b = broker(d.path());
    let mut events = b.subscribe();
    let cfg = OAuthConfig::default();
    login(&b, &fx, &cfg).await;
    assert_eq!(
        events.recv().await.unwrap(),
        AuthEvent::LoggedIn {
            server: SERVER.into()
        }
    );
    let c = b.credentials(SERVER, &fx.mcp_url(), &cfg).unwrap();
    call(c.as_ref(), &http(), &fx.mcp_url()).await.unwrap();
    fx.control(json!({"refuse_refresh": true}));
    let refused_from = Instant::now();
    let err = loop {
        match call(c.as_ref(), &http(), &fx.mcp_url()).await {
            Ok(()) => tokio::time::sleep(Duration::from_millis(100)).await,
            Err(e) => break e,
        }
        assert!(
            refused_from.elapsed() < Duration::from_secs(10),
            "never refused"
        );
    };
    assert_eq!(
        err,
        CredentialError::LoginNeeded {
            server: SERVER.into(),
            reason: Some("the authorization server refused the refresh".into()),
        }
    );
    assert!(err.to_string().contains("xyctl auth login remote"), "{err}");
    // The refresh is tried before the token's 3 s run out; the refusal then
    // answers at once.
    assert!(refused_from.elapsed() < Duration::from_secs(3 + 5));
    let refused = fx.log_of("refresh");
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(matches!(
        events.recv().await.unwrap(),
        AuthEvent::LoginNeeded { .. }
    ));
    let t = Instant::now();
    assert!(matches!(
        c.headers().await,
        Err(CredentialError::LoginNeeded { .. })
    ));
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "no hang once refused"
    );
    let st = b.status(SERVER, &fx.mcp_url(), &cfg).await.unwrap();
    assert_eq!(st.state, AuthState::LoginNeeded);
    assert!(st.reason.unwrap().contains("refused"));

    fx.control(json!({"refuse_refresh": false}));
    login(&b, &fx, &cfg).await;
    assert_eq!(
        events.recv().await.unwrap(),
        AuthEvent::LoggedIn {
            server: SERVER.into()
        }
    );
    call(c.as_ref(), &http(), &fx.mcp_url()).await.unwrap();
    assert_eq!(
        b.status(SERVER, &fx.mcp_url(), &cfg).await.unwrap().state,
        AuthState::LoggedIn
    );
}

#[tokio::test]
async fn a_grant_survives_a_restart_and_refreshes_after_it() {
    let fx = Fixture::start(&FixtureOptions {
        token_lifetime: 3,
        ..FixtureOptions::default()
    });
    let d = tempfile::tempdir().unwrap();
    let cfg = OAuthConfig::default();
    login(&broker(d.path()), &fx, &cfg).await;
    // A new broker on the same store: what xyd sees after a restart.
    let b = broker(d.path());
    let c = b.credentials(SERVER, &fx.mcp_url(), &cfg).unwrap();
    call(c.as_ref(), &http(), &fx.mcp_url()).await.unwrap();
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        call(c.as_ref(), &http(), &fx.mcp_url()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(fx.assert_refreshes_clean() >= 1);
    // The grant is for this URL only: another endpoint does not get it.
    let other = b
        .credentials("other", &format!("{}/other", fx.base()), &cfg)
        .unwrap();
    assert!(matches!(
        other.headers().await,
        Err(CredentialError::LoginNeeded { .. })
    ));
}

#[tokio::test]
async fn insufficient_scope_asks_for_a_login_with_the_union_of_scopes() {
    let fx = Fixture::start(&FixtureOptions {
        required_scope: Some("mcp:write".into()),
        ..FixtureOptions::default()
    });
    let d = tempfile::tempdir().unwrap();
    let b = broker(d.path());
    let cfg = OAuthConfig {
        scopes: vec!["mcp:read".into()],
        client_id: None,
        client_secret: None,
    };
    login(&b, &fx, &cfg).await;
    let c = b.credentials(SERVER, &fx.mcp_url(), &cfg).unwrap();
    assert_eq!(
        call(c.as_ref(), &http(), &fx.mcp_url()).await,
        Err(CredentialError::LoginNeeded {
            server: SERVER.into(),
            reason: Some("the server needs more scopes (mcp:write)".into()),
        })
    );
    let st = b.status(SERVER, &fx.mcp_url(), &cfg).await.unwrap();
    assert_eq!(st.state, AuthState::LoginNeeded);
    assert_eq!(st.missing_scopes, vec!["mcp:write".to_owned()]);
    login(&b, &fx, &cfg).await;
    let scope = fx.log_of("authorize").last().unwrap()["scope"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        scope.contains("mcp:read") && scope.contains("mcp:write"),
        "{scope}"
    );
    call(c.as_ref(), &http(), &fx.mcp_url()).await.unwrap();
}

/// D149: a pre-registered confidential client authenticates every token
/// request (code exchange, and the refresh after a restart) with its
/// secret, looked up from its §16 source; the secret is never stored.
#[tokio::test]
async fn a_confidential_client_authenticates_the_exchange_and_the_refresh() {
    const ID: &str = "xy-confidential";
    const SECRET: &str = "s3cret-v@lue";
    let fx = Fixture::start(&FixtureOptions {
        token_lifetime: 3,
        dcr: false,
        confidential: Some((ID.into(), SECRET.into())),
        ..FixtureOptions::default()
    });
    let d = tempfile::tempdir().unwrap();
    let secret_file = d.path().join("client-secret");
    let mut cfg = OAuthConfig {
        scopes: Vec::new(),
        client_id: Some(ID.into()),
        client_secret: Some(xy_core::config::SecretSpec {
            name: "CLIENT_SECRET".into(),
            source: xy_core::config::SecretSource::File(secret_file.clone()),
        }),
    };
    // The secret cannot be read: the login fails naming it, before any
    // request reaches the authorization server's token endpoint.
    let e = b_login_err(&broker(d.path()), &fx, &cfg).await;
    assert!(e.contains("CLIENT_SECRET"), "{e}");
    assert!(fx.log_of("client_auth").is_empty());

    std::fs::write(&secret_file, format!("{SECRET}\n")).unwrap();
    login(&broker(d.path()), &fx, &cfg).await;
    // After a restart the refresh needs the secret too.
    let b = broker(d.path());
    let c = b.credentials(SERVER, &fx.mcp_url(), &cfg).unwrap();
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        call(c.as_ref(), &http(), &fx.mcp_url()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(fx.assert_refreshes_clean() >= 1);
    let auths = fx.log_of("client_auth");
    assert!(
        auths.iter().any(|a| a["grant"] == "authorization_code")
            && auths.iter().any(|a| a["grant"] == "refresh_token"),
        "{auths:?}"
    );
    assert!(
        auths
            .iter()
            .all(|a| a["ok"] == true && a["secret_in_body"] == false),
        "{auths:?}"
    );
    for entry in walk(&d.path().join("auth")) {
        let text = std::fs::read(&entry).unwrap();
        assert!(
            !String::from_utf8_lossy(&text).contains(SECRET),
            "the client secret was stored in {}",
            entry.display()
        );
    }

    // A wrong secret: the authorization server refuses the exchange, and
    // the error does not carry the secret.
    std::fs::write(&secret_file, "n0t-the-s3cret").unwrap();
    cfg.scopes = vec!["mcp:read".into()];
    let d2 = tempfile::tempdir().unwrap();
    let b = broker(d2.path());
    let started = b.login(SERVER, &fx.mcp_url(), &cfg).await.unwrap();
    follow(&started.url).await;
    let e = b
        .login_wait(&started.login_id, Duration::from_secs(10))
        .await
        .unwrap_err()
        .to_string();
    assert!(!e.contains("n0t-the-s3cret"), "{e}");
    assert!(
        fx.log_of("client_auth").iter().any(|a| a["ok"] == false),
        "the wrong secret never reached the token endpoint"
    );
}

async fn b_login_err(b: &OAuthBroker, fx: &Fixture, cfg: &OAuthConfig) -> String {
    b.login(SERVER, &fx.mcp_url(), cfg)
        .await
        .unwrap_err()
        .to_string()
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// The callback URL the authorization server sends the browser to (its
/// redirect, not followed).
async fn callback_of(auth_url: &str) -> String {
    let r = crate::http::client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
        .get(auth_url)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_redirection(), "{}", r.status());
    r.headers()["location"].to_str().unwrap().to_owned()
}

/// `curl` on `url` as `uid`: the HTTP status, or `000` when it could not
/// connect.
#[cfg(unix)]
async fn curl_as(uid: Option<u32>, url: &str) -> String {
    use std::os::unix::process::CommandExt;
    let url = url.to_owned();
    tokio::task::spawn_blocking(move || {
        let mut cmd = std::process::Command::new("curl");
        cmd.args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--max-time",
            "10",
        ])
        .arg(&url);
        if let Some(uid) = uid {
            cmd.uid(uid).gid(uid);
        }
        let out = cmd.output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    })
    .await
    .unwrap()
}

/// SPEC §24: another local user cannot finish the owner's login, a wrong
/// `state` is ignored, and after the valid callback the port is closed.
#[tokio::test]
#[cfg(unix)]
#[allow(clippy::print_stderr)]
async fn only_the_owners_callback_with_the_logins_state_counts_and_only_once() {
    if std::process::Command::new("curl")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: no curl");
        return;
    }
    let fx = Fixture::start(&FixtureOptions::default());
    let d = tempfile::tempdir().unwrap();
    let b = broker(d.path());
    let cfg = OAuthConfig::default();
    let started = b.login(SERVER, &fx.mcp_url(), &cfg).await.unwrap();
    let callback = callback_of(&started.url).await;
    assert!(callback.starts_with(&started.redirect_uri), "{callback}");
    let not_done = || async {
        !b.login_wait(&started.login_id, Duration::from_millis(100))
            .await
            .unwrap()
            .done
    };

    // Another uid (needs root to become one; the uid decision itself is
    // the edge's, `os::peer`, tested there).
    if nix::unistd::getuid().is_root() {
        assert_eq!(curl_as(Some(65534), &callback).await, "403");
        assert!(
            not_done().await,
            "another user's callback finished the login"
        );
    } else {
        eprintln!("another uid not tried: not root");
    }
    // The owner's, with a state that is not the login's.
    let forged = callback.replace("state=", "state=x");
    assert_eq!(curl_as(None, &forged).await, "400");
    assert!(not_done().await);
    // The valid one ends it, and the listener with it.
    assert_eq!(curl_as(None, &callback).await, "200");
    assert!(
        b.login_wait(&started.login_id, Duration::from_secs(10))
            .await
            .unwrap()
            .done
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let again = curl_as(None, &callback).await;
        if again == "000" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "a second callback was answered {again}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// SPEC §24: a sandboxed server's process cannot deliver the callback
/// either. The child plays one: registered as a sandboxed server's root
/// before it connects (it waits for a line on stdin).
#[tokio::test]
#[cfg(target_os = "linux")]
async fn a_sandboxed_servers_process_cannot_deliver_the_callback() {
    use std::io::Write;
    if std::process::Command::new("curl")
        .arg("--version")
        .output()
        .is_err()
    {
        return;
    }
    let fx = Fixture::start(&FixtureOptions::default());
    let d = tempfile::tempdir().unwrap();
    let b = broker(d.path());
    let cfg = OAuthConfig::default();
    let started = b.login(SERVER, &fx.mcp_url(), &cfg).await.unwrap();
    let callback = callback_of(&started.url).await;
    let status = tokio::task::spawn_blocking(move || {
        let mut child = std::process::Command::new("sh")
            .args([
                "-c",
                "read go; exec curl -s -o /dev/null -w '%{http_code}' --max-time 10 \"$0\"",
            ])
            .arg(&callback)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        let _root = crate::os::peer::process::register(pid, "boxed", Some(&[]));
        child.stdin.take().unwrap().write_all(b"go\n").unwrap();
        let out = child.wait_with_output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    })
    .await
    .unwrap();
    assert_eq!(status, "403");
    assert!(
        !b.login_wait(&started.login_id, Duration::from_millis(100))
            .await
            .unwrap()
            .done
    );
}
