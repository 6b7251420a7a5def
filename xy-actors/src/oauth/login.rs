//! One interactive login (SPEC §23): discovery from the resource's `401`
//! (RFC 9728, then RFC 8414 / OpenID discovery), the client id (configured,
//! Client ID Metadata Document, or RFC 7591 registration), PKCE `S256`, the
//! authorization URL with `resource` (RFC 8707), and a loopback redirect
//! listener on a port chosen for this login only, which takes the browser's
//! callback (from an unconfined process of xyd's own uid only: SPEC §24),
//! checks `state` and `iss` (RFC 9207), exchanges the code and closes.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationRequest, AuthorizationSession,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use xy_core::protocol::{AuthGrantInfo, AuthLoginResult, ClientIdKind};

use super::OAuthError;
use super::grant::{Grant, GrantStore};
use super::http::XyOAuthHttp;

/// The largest callback request head read.
const MAX_HEAD: usize = 16 * 1024;
/// A connection to the callback port that says nothing is dropped after this.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The outcome, once known: the grant, or why the login failed.
pub(super) type Outcome = Option<Result<AuthGrantInfo, String>>;

/// A login in progress (or just finished, for a late `auth_login_wait`).
pub(super) struct Login {
    pub(super) id: String,
    pub(super) server: String,
    pub(super) expires: SystemTime,
    pub(super) outcome: watch::Receiver<Outcome>,
    task: tokio::task::AbortHandle,
}

impl Login {
    pub(super) fn pending(&self) -> bool {
        self.outcome.borrow().is_none()
    }

    /// Cancelled before it had an outcome.
    pub(super) fn task_finished(&self) -> bool {
        self.pending() && self.task.is_finished()
    }

    pub(super) fn cancel(&self) {
        self.task.abort();
    }
}

impl Drop for Login {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What the broker gives a login.
pub(super) struct LoginSetup {
    pub(super) grant: Arc<Grant>,
    pub(super) http: Arc<XyOAuthHttp>,
    pub(super) client_name: String,
    pub(super) client_metadata_url: Option<String>,
    pub(super) timeout: Duration,
    pub(super) id: String,
}

/// Starts a login: everything up to the authorization URL happens here, so
/// a server without OAuth metadata fails the RPC itself.
pub(super) async fn start(setup: LoginSetup) -> Result<(Login, AuthLoginResult), OAuthError> {
    let grant = Arc::clone(&setup.grant);
    let url = grant.url().to_owned();
    let failed = |step: &str, e: AuthError| OAuthError::LoginFailed(format!("{step}: {e}"));

    // The resource's own `401` names its metadata (RFC 9728 §5.1): the one
    // a request through xy got, else an unauthenticated `initialize`'s.
    let challenge = match grant.challenge() {
        Some(c) => Some(c),
        None => probe(&setup.http, &url).await?,
    };
    let http: Arc<dyn rmcp::transport::auth::OAuthHttpClient> = setup.http.clone();
    let mut manager = AuthorizationManager::new_with_oauth_http_client(url.as_str(), http)
        .await
        .map_err(|e| failed("OAuth setup", e))?;
    let resolution = manager
        .resolve_metadata_from_challenge(challenge.as_deref())
        .await
        .map_err(|e| failed(&format!("OAuth discovery for {url}"), e))?;
    if !resolution.source.is_discovered() {
        return Err(OAuthError::LoginFailed(format!(
            "{url} publishes no OAuth metadata (neither protected resource metadata nor \
             authorization server metadata)"
        )));
    }
    let metadata = resolution.metadata;
    let issuer = metadata
        .issuer
        .clone()
        .unwrap_or_else(|| metadata.authorization_endpoint.clone());
    // MCP authorization: without `code_challenge_methods_supported` the
    // server does not support PKCE, and a client MUST NOT go on.
    if !metadata
        .code_challenge_methods_supported
        .as_ref()
        .is_some_and(|m| m.iter().any(|m| m == "S256"))
    {
        return Err(OAuthError::LoginFailed(format!(
            "the authorization server {issuer} does not advertise PKCE S256 \
             (code_challenge_methods_supported); refusing to log in without it"
        )));
    }
    let cimd = metadata
        .additional_fields
        .get("client_id_metadata_document_supported")
        .and_then(|v| v.as_bool())
        .unwrap_or(false);
    let kind = if grant.cfg.client_id.is_some() {
        ClientIdKind::Preregistered
    } else if cimd && setup.client_metadata_url.is_some() {
        ClientIdKind::MetadataDocument
    } else if metadata.registration_endpoint.is_some() {
        ClientIdKind::DynamicRegistration
    } else {
        return Err(OAuthError::LoginFailed(format!(
            "the authorization server {issuer} offers no way for xy to get a client id \
             ({}no dynamic registration): set `client-id` in the server's `auth {{ }}` block",
            if cimd {
                "no Client ID Metadata Document URL is configured for xy, "
            } else {
                "no Client ID Metadata Documents, "
            }
        )));
    };
    manager.set_metadata(metadata);
    manager.set_credential_store(GrantStore(Arc::clone(&grant.shared)));

    // A port of its own per login: two logins never share a callback.
    let listener = TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(|e| OAuthError::LoginFailed(format!("cannot bind the loopback redirect: {e}")))?;
    let port = listener
        .local_addr()
        .map_err(|e| OAuthError::LoginFailed(e.to_string()))?
        .port();
    let redirect_uri = format!("http://127.0.0.1:{port}/callback");

    let mut request =
        AuthorizationRequest::new(redirect_uri.clone()).with_client_name(&setup.client_name);
    let scopes = grant.login_scopes();
    if !scopes.is_empty() {
        request = request.with_scopes(scopes);
    }
    match kind {
        ClientIdKind::Preregistered => {
            request =
                request.with_preregistered_client(grant.cfg.client_id.clone().unwrap_or_default());
            // D149: rmcp picks basic or post from the AS metadata's
            // `token_endpoint_auth_methods_supported`.
            if let Some(secret) = grant
                .client_secret()
                .await
                .map_err(OAuthError::LoginFailed)?
            {
                request = request.with_client_secret(secret);
            }
        }
        ClientIdKind::MetadataDocument => {
            request = request
                .with_client_metadata_url(setup.client_metadata_url.clone().unwrap_or_default());
        }
        ClientIdKind::DynamicRegistration => {}
    }
    if let Some(c) = &challenge {
        request = request.with_challenge(c.clone());
    }
    let session = AuthorizationSession::new(manager, request)
        .await
        .map_err(|(_, e)| failed("starting the authorization", e))?;
    let auth_url = session.get_authorization_url().to_owned();
    let state = reqwest::Url::parse(&auth_url)
        .ok()
        .and_then(|u| {
            u.query_pairs()
                .find(|(k, _)| k == "state")
                .map(|(_, v)| v.into_owned())
        })
        .ok_or_else(|| OAuthError::LoginFailed("the authorization URL has no state".into()))?;

    let expires = SystemTime::now() + setup.timeout;
    let (tx, rx) = watch::channel(None);
    let server = grant.server().to_owned();
    let task = tokio::spawn(serve_callback(
        listener,
        session,
        state,
        grant,
        setup.timeout,
        tx,
    ))
    .abort_handle();
    tracing::info!(server = %server, port, client_id = ?kind, "OAuth login started");
    let result = AuthLoginResult {
        name: server.clone(),
        login_id: setup.id.clone(),
        url: auth_url,
        redirect_uri,
        expires_at: xy_core::time::rfc3339_ms(expires),
        client_id_kind: kind,
    };
    Ok((
        Login {
            id: setup.id,
            server,
            expires,
            outcome: rx,
            task,
        },
        result,
    ))
}

/// An unauthenticated `initialize` to the endpoint: its `401` carries the
/// `WWW-Authenticate` challenge discovery starts from (`None` when the
/// server answers otherwise; discovery then tries the well-known URLs).
async fn probe(http: &XyOAuthHttp, url: &str) -> Result<Option<String>, OAuthError> {
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "xy", "version": env!("CARGO_PKG_VERSION")}}
    });
    let resp = http
        .client()
        .post(url)
        .header("Accept", "application/json, text/event-stream")
        .json(&body)
        .send()
        .await
        .map_err(|e| OAuthError::LoginFailed(format!("cannot reach {url}: {e}")))?;
    Ok(resp
        .headers()
        .get(reqwest::header::WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned))
}

/// Waits for the browser's callback on `listener` until the login expires.
/// A request with another `state` (a stray or forged hit on the port) is
/// answered and ignored; the right one ends the login either way.
async fn serve_callback(
    listener: TcpListener,
    session: AuthorizationSession,
    state: String,
    grant: Arc<Grant>,
    timeout: Duration,
    tx: watch::Sender<Outcome>,
) {
    let deadline = tokio::time::Instant::now() + timeout;
    let port = listener.local_addr().map(|a| a.port()).unwrap_or_default();
    let _own = crate::http::edge::OwnPort::hold(port);
    loop {
        let conn = tokio::select! {
            c = listener.accept() => c,
            () = tokio::time::sleep_until(deadline) => {
                tracing::warn!(server = %grant.server(), "OAuth login timed out");
                tx.send_replace(Some(Err(format!(
                    "the login timed out after {}s without the browser coming back",
                    timeout.as_secs()
                ))));
                return;
            }
        };
        let Ok((mut stream, peer)) = conn else {
            continue;
        };
        // Only the owner's own, unconfined processes (the browser) may
        // deliver the code: another user's would bind this xy to their
        // account (SPEC §24). Refused before a byte is read.
        if let Err(why) = crate::http::edge::owner_unconfined(&stream, peer).await {
            tracing::warn!(server = %grant.server(), %peer, %why, "OAuth callback refused");
            respond(
                &mut stream,
                403,
                "Forbidden: xy takes this login's callback only from its own user's browser.",
            )
            .await;
            continue;
        }
        let Some(target) = read_target(&mut stream).await else {
            continue;
        };
        let full = format!("http://127.0.0.1:{port}{target}");
        let Ok(parsed) = reqwest::Url::parse(&full) else {
            respond(&mut stream, 400, "Bad request.").await;
            continue;
        };
        if parsed.path() != "/callback" {
            respond(&mut stream, 404, "Not found.").await;
            continue;
        }
        let q: std::collections::HashMap<String, String> = parsed
            .query_pairs()
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        if q.get("state") != Some(&state) {
            respond(&mut stream, 400, "This is not the login xy is waiting for.").await;
            continue;
        }
        let outcome = if let Some(err) = q.get("error") {
            let desc = q
                .get("error_description")
                .map(|d| format!(" ({d})"))
                .unwrap_or_default();
            Err(format!(
                "the authorization server refused the login: {err}{desc}"
            ))
        } else {
            match session.handle_callback_url(&full).await {
                Ok(_) => match grant.info().await {
                    Ok(Some((info, _))) => Ok(info),
                    Ok(None) => Err("the token exchange returned no grant".to_owned()),
                    Err(e) => Err(e),
                },
                Err(e) => Err(describe(&e)),
            }
        };
        match &outcome {
            Ok(_) => {
                respond(
                    &mut stream,
                    200,
                    &format!("Logged in to {}. You can close this tab.", grant.server()),
                )
                .await;
                grant.logged_in(session.auth_manager).await;
                tracing::info!(server = %grant.server(), "OAuth login completed");
            }
            Err(e) => {
                respond(&mut stream, 400, &format!("Login failed: {e}")).await;
                tracing::warn!(server = %grant.server(), error = %e, "OAuth login failed");
            }
        }
        tx.send_replace(Some(outcome));
        return;
    }
}

/// A login failure in words (never a token: rmcp's errors carry none).
fn describe(e: &AuthError) -> String {
    match e {
        AuthError::AuthorizationServerMismatch {
            expected_issuer,
            received_issuer,
        } => format!(
            "the authorization response came from issuer `{received_issuer}`, expected \
             `{expected_issuer}` (RFC 9207 iss check): refused"
        ),
        AuthError::AuthorizationServerMissingIssuer { expected_issuer } => format!(
            "the authorization response lacks the `iss` parameter that `{expected_issuer}` \
             promised (RFC 9207): refused"
        ),
        other => other.to_string(),
    }
}

/// The request target of one HTTP request head, or `None` (answered 400).
async fn read_target(stream: &mut TcpStream) -> Option<String> {
    let mut buf = Vec::with_capacity(1024);
    let read = tokio::time::timeout(READ_TIMEOUT, async {
        let mut chunk = [0u8; 2048];
        loop {
            let n = stream.read(&mut chunk).await.ok()?;
            if n == 0 {
                return None;
            }
            buf.extend_from_slice(&chunk[..n]);
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut req = httparse::Request::new(&mut headers);
            match req.parse(&buf) {
                Ok(httparse::Status::Complete(_)) => {
                    return (req.method == Some("GET")).then(|| req.path.map(str::to_owned))?;
                }
                Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD => {}
                _ => return None,
            }
        }
    })
    .await
    .ok()
    .flatten();
    if read.is_none() {
        respond(stream, 400, "Bad request.").await;
    }
    read
}

async fn respond(stream: &mut TcpStream, status: u16, text: &str) {
    let reason = match status {
        200 => "OK",
        403 => "Forbidden",
        404 => "Not Found",
        _ => "Bad Request",
    };
    let body = format!(
        "<!doctype html><meta charset=utf-8><title>xy</title><p>{}</p>\n",
        html_escape(text)
    );
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\n\
         Content-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(body.as_bytes()).await;
    let _ = stream.shutdown().await;
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
