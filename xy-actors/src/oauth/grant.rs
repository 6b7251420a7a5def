//! One server's grant, shared by every client of that server (SPEC §23):
//! the persisted record, the access token handed out as `Authorization:
//! Bearer …`, and the refresh — ahead of expiry, one at a time, the rotated
//! refresh token stored before the new access token is used.
//!
//! rmcp's `AuthorizationManager` does the token requests; it reads and
//! writes the grant through [`GrantStore`], which writes through to the
//! [`TokenBackend`](super::backend::TokenBackend) before the in-memory copy
//! changes, so nobody holds a token that is not stored yet.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hyper::HeaderMap;
use hyper::header::{AUTHORIZATION, HeaderValue};
use oauth2::TokenResponse;
use rmcp::transport::auth::{
    AuthError, AuthorizationManager, CredentialStore, OAuthClientConfig, StoredCredentials,
    WWWAuthenticateParams,
};
use tokio::sync::broadcast;
use xy_core::config::OAuthConfig;
use xy_core::protocol::AuthGrantInfo;

use super::AuthEvent;
use super::backend::TokenBackend;
use super::http::XyOAuthHttp;
use super::store::{GrantRecord, run_blocking};
use crate::credentials::{BoxFuture, CredentialError, Credentials};

/// A token is refreshed once less than this much of its life is left …
const REFRESH_AHEAD_MAX: Duration = Duration::from_secs(60);
/// … or less than this fraction of it, whichever is smaller.
const REFRESH_AHEAD_FRACTION: u32 = 5;

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The state every handle on the grant shares.
pub(super) struct Shared {
    pub(super) server: String,
    pub(super) url: String,
    backend: Arc<dyn TokenBackend>,
    state: Mutex<State>,
    events: broadcast::Sender<AuthEvent>,
}

#[derive(Default)]
struct State {
    /// The backend has been read once.
    loaded: bool,
    record: Option<GrantRecord>,
    /// Bumped by every new token; single-flight callers compare it.
    generation: u64,
    /// Scopes a `403 insufficient_scope` asked for; the next login adds them.
    missing_scopes: Vec<String>,
    /// The last `WWW-Authenticate` the server answered a request with: the
    /// next login starts discovery from it (its `resource_metadata` and
    /// `scope`), which a request the server lets through unauthenticated
    /// (`initialize`, often) would not show.
    challenge: Option<String>,
}

/// What a caller needs from the current token, copied out of the lock.
pub(super) struct Snapshot {
    access: String,
    received_at_ms: u64,
    expires_at_ms: Option<u64>,
    generation: u64,
    refreshable: bool,
    login_needed: Option<String>,
}

impl Snapshot {
    /// Whether a request that carried `sent` as its `Authorization` used
    /// this token (no header: as good as this one).
    fn carried_by(&self, sent: Option<&HeaderValue>) -> bool {
        sent.is_none_or(|v| v.as_bytes().strip_prefix(b"Bearer ") == Some(self.access.as_bytes()))
    }

    fn expired(&self, now: u64) -> bool {
        self.expires_at_ms.is_some_and(|e| e <= now)
    }

    fn needs_refresh(&self, now: u64) -> bool {
        let Some(exp) = self.expires_at_ms else {
            return false;
        };
        let life = exp.saturating_sub(self.received_at_ms);
        let ahead =
            (REFRESH_AHEAD_MAX.as_millis() as u64).min(life / REFRESH_AHEAD_FRACTION as u64);
        exp.saturating_sub(now) <= ahead
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reads the backend once (off the async thread).
    pub(super) async fn ensure_loaded(&self) -> Result<(), String> {
        if self.lock().loaded {
            return Ok(());
        }
        let backend = Arc::clone(&self.backend);
        let server = self.server.clone();
        let bytes = run_blocking("read", move || backend.load(&server)).await?;
        let record = bytes.and_then(|b| match serde_json::from_slice::<GrantRecord>(&b) {
            Ok(r) if r.url == self.url => Some(r),
            Ok(_) => {
                tracing::warn!(server = %self.server, "stored grant is for another URL; ignored");
                None
            }
            Err(e) => {
                tracing::warn!(server = %self.server, error = %e, "stored grant unreadable; ignored");
                None
            }
        });
        let mut st = self.lock();
        if !st.loaded {
            st.loaded = true;
            st.record = record;
        }
        Ok(())
    }

    pub(super) fn snapshot(&self) -> Option<Snapshot> {
        let st = self.lock();
        let r = st.record.as_ref()?;
        let tr = r.credentials.token_response.as_ref()?;
        Some(Snapshot {
            access: tr.access_token().secret().clone(),
            received_at_ms: r.received_at_ms,
            expires_at_ms: tr
                .expires_in()
                .map(|d| r.received_at_ms + d.as_millis() as u64),
            generation: st.generation,
            refreshable: tr.refresh_token().is_some(),
            login_needed: r.login_needed.clone(),
        })
    }

    fn generation(&self) -> u64 {
        self.lock().generation
    }

    /// Persists `record`, then makes it current (see the module docs).
    async fn store(&self, record: GrantRecord) -> Result<(), String> {
        let bytes = serde_json::to_vec(&record).map_err(|e| e.to_string())?;
        let backend = Arc::clone(&self.backend);
        let server = self.server.clone();
        let saved = run_blocking("write", move || backend.save(&server, &bytes)).await;
        {
            let mut st = self.lock();
            st.loaded = true;
            st.record = Some(record);
            st.generation += 1;
        }
        if let Err(e) = &saved {
            // Kept in memory anyway: dropping a rotated refresh token would
            // lose the grant now instead of at the next restart.
            tracing::warn!(server = %self.server, error = %e, "grant not persisted");
        }
        saved
    }

    async fn forget(&self) -> Result<bool, String> {
        let had = {
            let mut st = self.lock();
            st.loaded = true;
            st.generation += 1;
            st.missing_scopes.clear();
            st.record.take().is_some()
        };
        let backend = Arc::clone(&self.backend);
        let server = self.server.clone();
        let deleted = run_blocking("delete", move || backend.delete(&server)).await?;
        Ok(had || deleted)
    }

    /// Marks the grant dead (refresh refused) and tells whoever listens.
    async fn login_needed(&self, reason: &str) {
        let record = {
            let mut st = self.lock();
            st.generation += 1;
            st.record.as_mut().map(|r| {
                r.login_needed = Some(reason.to_owned());
                r.clone()
            })
        };
        if let Some(record) = record
            && let Ok(bytes) = serde_json::to_vec(&record)
        {
            let backend = Arc::clone(&self.backend);
            let server = self.server.clone();
            if let Err(e) = run_blocking("write", move || backend.save(&server, &bytes)).await {
                tracing::warn!(server = %self.server, error = %e, "login-needed mark not persisted");
            }
        }
        tracing::warn!(server = %self.server, reason, "OAuth login needed");
        let _ = self.events.send(AuthEvent::LoginNeeded {
            server: self.server.clone(),
            reason: reason.to_owned(),
        });
    }
}

/// rmcp's view of the grant (one per manager; all share [`Shared`]).
pub(super) struct GrantStore(pub(super) Arc<Shared>);

#[async_trait::async_trait]
impl CredentialStore for GrantStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        self.0
            .ensure_loaded()
            .await
            .map_err(AuthError::CredentialStoreError)?;
        Ok(self.0.lock().record.as_ref().map(|r| r.credentials.clone()))
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let record = GrantRecord {
            url: self.0.url.clone(),
            credentials,
            received_at_ms: now_ms(),
            login_needed: None,
        };
        // A failed write is logged by `store` and the grant kept in memory.
        let _ = self.0.store(record).await;
        Ok(())
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.0
            .forget()
            .await
            .map(|_| ())
            .map_err(AuthError::CredentialStoreError)
    }
}

/// One remote server's grant.
pub(crate) struct Grant {
    pub(super) cfg: OAuthConfig,
    pub(super) shared: Arc<Shared>,
    /// Held across a refresh (the single flight); holds the manager that
    /// refreshes, built from the store on first need after a restart.
    refresher: tokio::sync::Mutex<Option<Arc<AuthorizationManager>>>,
    http: Arc<XyOAuthHttp>,
}

impl Grant {
    pub(super) fn new(
        server: &str,
        url: &str,
        cfg: &OAuthConfig,
        backend: Arc<dyn TokenBackend>,
        http: Arc<XyOAuthHttp>,
        events: broadcast::Sender<AuthEvent>,
    ) -> Grant {
        Grant {
            cfg: cfg.clone(),
            shared: Arc::new(Shared {
                server: server.to_owned(),
                url: url.to_owned(),
                backend,
                state: Mutex::new(State::default()),
                events,
            }),
            refresher: tokio::sync::Mutex::new(None),
            http,
        }
    }

    pub(super) fn server(&self) -> &str {
        &self.shared.server
    }

    pub(super) fn url(&self) -> &str {
        &self.shared.url
    }

    fn login_needed_error(&self, reason: Option<&str>) -> CredentialError {
        CredentialError::LoginNeeded {
            server: self.shared.server.clone(),
            reason: reason.map(str::to_owned),
        }
    }

    /// The confidential client's secret (D149), looked up when the broker
    /// is about to use it (a login, a refresh manager built from the store),
    /// so a rotated secret is picked up without a reload. The error names
    /// the secret and its source, never a value.
    pub(super) async fn client_secret(&self) -> Result<Option<String>, String> {
        let Some(spec) = &self.cfg.client_secret else {
            return Ok(None);
        };
        let mut found = crate::secrets::resolve_all(vec![spec.clone()], crate::secrets::TIMEOUT)
            .await
            .map_err(|e| format!("the OAuth client secret: {e}"))?;
        Ok(found.pop().map(|r| r.value))
    }

    /// The scopes the next login asks for: the configured ones, what the
    /// grant had, and what the server asked for since.
    pub(super) fn login_scopes(&self) -> Vec<String> {
        let st = self.shared.lock();
        let mut scopes = self.cfg.scopes.clone();
        let granted = st
            .record
            .as_ref()
            .map(|r| r.credentials.granted_scopes.clone())
            .unwrap_or_default();
        if !st.missing_scopes.is_empty() {
            // A step-up keeps what was granted: the union, not a swap.
            scopes.extend(granted);
        }
        scopes.extend(st.missing_scopes.iter().cloned());
        let mut seen = std::collections::HashSet::new();
        scopes.retain(|s| seen.insert(s.clone()));
        scopes
    }

    /// A login completed: `manager` refreshes from now on.
    pub(super) async fn logged_in(&self, manager: AuthorizationManager) {
        *self.refresher.lock().await = Some(Arc::new(manager));
        self.shared.lock().missing_scopes.clear();
        let _ = self.shared.events.send(AuthEvent::LoggedIn {
            server: self.shared.server.clone(),
        });
    }

    pub(super) async fn logout(&self) -> Result<bool, String> {
        let mut slot = self.refresher.lock().await;
        *slot = None;
        let had = self.shared.forget().await?;
        let _ = self.shared.events.send(AuthEvent::LoggedOut {
            server: self.shared.server.clone(),
        });
        Ok(had)
    }

    /// What `auth_status` and `auth_login_wait` show: never the tokens.
    pub(super) async fn info(&self) -> Result<Option<(AuthGrantInfo, Option<String>)>, String> {
        self.shared.ensure_loaded().await?;
        let st = self.shared.lock();
        let Some(r) = st.record.as_ref() else {
            return Ok(None);
        };
        let Some(tr) = r.credentials.token_response.as_ref() else {
            return Ok(None);
        };
        let expires_at = tr.expires_in().map(|d| {
            xy_core::time::rfc3339_ms(UNIX_EPOCH + Duration::from_millis(r.received_at_ms) + d)
        });
        let info = AuthGrantInfo {
            issuer: r.credentials.issuer.clone(),
            scopes: r.credentials.granted_scopes.clone(),
            expires_at,
            refreshable: tr.refresh_token().is_some(),
        };
        let mut why = r.login_needed.clone();
        if why.is_none()
            && !info.refreshable
            && tr
                .expires_in()
                .is_some_and(|d| r.received_at_ms + d.as_millis() as u64 <= now_ms())
        {
            why = Some("the access token expired and there is no refresh token".to_owned());
        }
        Ok(Some((info, why)))
    }

    /// The challenge of the last rejected request, if any.
    pub(super) fn challenge(&self) -> Option<String> {
        self.shared.lock().challenge.clone()
    }

    pub(super) fn missing_scopes(&self) -> Vec<String> {
        self.shared.lock().missing_scopes.clone()
    }

    /// A `403` with `insufficient_scope` (SPEC §23 step-up), on whatever
    /// request it came: the scopes it names join those the next login asks
    /// for, the server is told to need a login, and the caller gets the
    /// error naming them. `None` for any other rejection. The challenge is
    /// kept either way: the next login starts discovery from it.
    fn step_up(&self, www_authenticate: Option<String>) -> Option<CredentialError> {
        let www_authenticate = www_authenticate?;
        self.shared.lock().challenge = Some(www_authenticate.clone());
        let params = reqwest::Url::parse(&self.shared.url)
            .ok()
            .map(|u| WWWAuthenticateParams::parse(&www_authenticate, &u))?;
        if !params.is_insufficient_scope() {
            return None;
        }
        let wanted: Vec<String> = params
            .scope
            .map(|s| s.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default();
        let reason = format!("the server needs more scopes ({})", wanted.join(" "));
        {
            let mut st = self.shared.lock();
            for s in wanted {
                if !st.missing_scopes.contains(&s) {
                    st.missing_scopes.push(s);
                }
            }
        }
        let _ = self.shared.events.send(AuthEvent::LoginNeeded {
            server: self.shared.server.clone(),
            reason: format!("{reason}: xyctl auth login {}", self.shared.server),
        });
        Some(self.login_needed_error(Some(&reason)))
    }

    /// The current token, loading the store first.
    async fn current(&self) -> Result<Snapshot, CredentialError> {
        self.shared
            .ensure_loaded()
            .await
            .map_err(CredentialError::Unavailable)?;
        let snap = self
            .shared
            .snapshot()
            .ok_or_else(|| self.login_needed_error(None))?;
        if let Some(why) = &snap.login_needed {
            return Err(self.login_needed_error(Some(why)));
        }
        Ok(snap)
    }

    /// Refreshes unless someone did since `seen` (single flight).
    async fn refresh(&self, seen: u64) -> Result<(), CredentialError> {
        let mut slot = self.refresher.lock().await;
        if self.shared.generation() != seen {
            return Ok(());
        }
        let manager = match slot.as_ref() {
            Some(m) => Arc::clone(m),
            None => {
                let m = Arc::new(self.manager_from_store().await?);
                *slot = Some(Arc::clone(&m));
                m
            }
        };
        match manager.refresh_token().await {
            Ok(_) => {
                tracing::debug!(server = %self.shared.server, "OAuth token refreshed");
                Ok(())
            }
            Err(AuthError::TokenRefreshRejected(_) | AuthError::AuthorizationRequired) => {
                let why = "the authorization server refused the refresh";
                self.shared.login_needed(why).await;
                Err(self.login_needed_error(Some(why)))
            }
            Err(e) => Err(CredentialError::Unavailable(format!(
                "refreshing the OAuth grant of {} failed: {e}",
                self.shared.server
            ))),
        }
    }

    /// After a restart: discovery again, then the stored client id. A grant
    /// from another issuer than the one the resource names now is dropped
    /// (rmcp's `initialize_from_store`): credentials are per issuer.
    async fn manager_from_store(&self) -> Result<AuthorizationManager, CredentialError> {
        let unavailable = |e: AuthError| {
            CredentialError::Unavailable(format!(
                "OAuth discovery for {} ({}) failed: {e}",
                self.shared.server, self.shared.url
            ))
        };
        let http: Arc<dyn rmcp::transport::auth::OAuthHttpClient> = self.http.clone();
        let mut m =
            AuthorizationManager::new_with_oauth_http_client(self.shared.url.as_str(), http)
                .await
                .map_err(unavailable)?;
        m.set_credential_store(GrantStore(Arc::clone(&self.shared)));
        let res = m.resolve_metadata().await.map_err(unavailable)?;
        if !res.source.is_discovered() {
            return Err(CredentialError::Unavailable(format!(
                "{} publishes no OAuth metadata",
                self.shared.url
            )));
        }
        m.set_metadata(res.metadata);
        match m.initialize_from_store().await {
            Ok(true) => {
                // rmcp restores only the client id; a confidential client's
                // refresh needs its secret too, paired with the id it was
                // registered with (a grant from another `client-id` is not).
                let stored_id = self
                    .shared
                    .lock()
                    .record
                    .as_ref()
                    .map(|r| r.credentials.client_id.clone());
                if let Some(id) = stored_id.filter(|id| self.cfg.client_id.as_ref() == Some(id))
                    && let Some(secret) = self
                        .client_secret()
                        .await
                        .map_err(CredentialError::Unavailable)?
                {
                    m.configure_client(
                        OAuthClientConfig::new(id, self.shared.url.as_str())
                            .with_client_secret(secret),
                    )
                    .map_err(unavailable)?;
                }
                Ok(m)
            }
            Ok(false) => Err(self.login_needed_error(None)),
            Err(e) => Err(unavailable(e)),
        }
    }
}

fn bearer(access: &str) -> Result<HeaderMap, CredentialError> {
    let mut v = HeaderValue::from_str(&format!("Bearer {access}")).map_err(|_| {
        CredentialError::Unavailable("the access token is not a valid header value".to_owned())
    })?;
    v.set_sensitive(true);
    let mut h = HeaderMap::new();
    h.insert(AUTHORIZATION, v);
    Ok(h)
}

impl Credentials for Grant {
    fn headers(&self) -> BoxFuture<'_, Result<HeaderMap, CredentialError>> {
        Box::pin(async move {
            let mut snap = self.current().await?;
            let now = now_ms();
            if snap.needs_refresh(now) {
                if snap.refreshable {
                    match self.refresh(snap.generation).await {
                        Ok(()) => snap = self.current().await?,
                        // Still valid for a moment: use it, the next call retries.
                        Err(CredentialError::Unavailable(e)) if !snap.expired(now_ms()) => {
                            tracing::warn!(server = %self.shared.server, error = %e, "early refresh failed");
                        }
                        Err(e) => return Err(e),
                    }
                } else if snap.expired(now) {
                    return Err(self.login_needed_error(Some(
                        "the access token expired and there is no refresh token",
                    )));
                }
            }
            bearer(&snap.access)
        })
    }

    fn rejected(
        &self,
        status: u16,
        www_authenticate: Option<String>,
        sent: Option<HeaderValue>,
    ) -> BoxFuture<'_, Result<(), CredentialError>> {
        Box::pin(async move {
            if let Some(e) = self.step_up(www_authenticate) {
                return Err(e);
            }
            if status != 401 {
                return Err(CredentialError::Unavailable(format!(
                    "{} refused the request ({status})",
                    self.shared.server
                )));
            }
            let snap = self.current().await?;
            if !snap.carried_by(sent.as_ref()) {
                // The request went out with an older token (a refresh came
                // in between): the retry carries the current one.
                return Ok(());
            }
            if !snap.refreshable {
                let why = "the server refused the access token and there is no refresh token";
                self.shared.login_needed(why).await;
                return Err(self.login_needed_error(Some(why)));
            }
            self.refresh(snap.generation).await
        })
    }

    fn rejected_again(
        &self,
        status: u16,
        www_authenticate: Option<String>,
        sent: Option<HeaderValue>,
    ) -> BoxFuture<'_, Result<(), CredentialError>> {
        Box::pin(async move {
            if let Some(e) = self.step_up(www_authenticate) {
                return Err(e);
            }
            if status != 401 {
                return Ok(());
            }
            let snap = self.current().await?;
            if !snap.carried_by(sent.as_ref()) {
                // Another refresh came in between: the next request has
                // its turn with the new token.
                return Ok(());
            }
            // The token the refresh just gave (or the one the server
            // refused twice) does not work: only a login can fix that, and
            // `status` and every client are told so rather than handed a
            // bare `401` per call.
            let why = "the server refused the access token after a refresh";
            self.shared.login_needed(why).await;
            Err(self.login_needed_error(Some(why)))
        })
    }
}
