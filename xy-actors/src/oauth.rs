//! The OAuth broker (SPEC §23): xyd is the one OAuth client of the machine.
//! It owns one grant per remote server (`grant.rs`), shared by every client
//! of that server through the [`Credentials`](crate::credentials::Credentials)
//! seam; the interactive logins (`login.rs`); and the token store
//! (`store.rs`, the Secret Service in `secret_service.rs`). rmcp's `auth`
//! module does the protocol (discovery, PKCE, registration, token
//! requests, the `iss` check, D119); its HTTP goes
//! through xy's one client (`http.rs`).
//!
//! Tokens never leave this module except as the `Authorization` header the
//! upstream adds to a request: not in logs, results, events or errors.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::broadcast;
use xy_core::config::OAuthConfig;
use xy_core::config::ServerConfig;
use xy_core::protocol::{AuthLoginResult, AuthLoginWaitResult, AuthState, AuthStatusEntry};

mod backend;
#[cfg(test)]
mod conformance;
mod grant;
mod http;
mod login;
mod secret_service;
mod store;
#[cfg(test)]
mod tests;

pub use store::TokenStoreKind;

use grant::Grant;
use login::Login;

/// How long a login waits for the browser.
const LOGIN_TIMEOUT: Duration = Duration::from_secs(600);
/// A finished login's outcome stays readable this long.
const OUTCOME_KEPT: Duration = Duration::from_secs(120);
/// The longest one `auth_login_wait` call blocks.
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(600);

/// The broker's settings.
#[derive(Debug, Clone)]
pub struct OAuthOptions {
    /// Where grants live.
    pub store: TokenStoreKind,
    /// xy's Client ID Metadata Document URL (an `https://` URL with a path,
    /// SEP-991). `None`: xy has none and uses dynamic registration where
    /// the authorization server offers it (D120).
    pub client_metadata_url: Option<String>,
    /// The `client_name` sent with dynamic registration.
    pub client_name: String,
    /// How long a login waits for the browser.
    pub login_timeout: Duration,
}

impl OAuthOptions {
    /// The platform's store under `auth_dir`, no metadata document URL.
    pub fn new(auth_dir: impl Into<PathBuf>) -> OAuthOptions {
        OAuthOptions {
            store: TokenStoreKind::platform_default(auth_dir.into()),
            client_metadata_url: None,
            client_name: "xy".to_owned(),
            login_timeout: LOGIN_TIMEOUT,
        }
    }
}

/// A change of a server's grant, for the ServerActor (a recovered server
/// leaves `unhealthy`) and notifications. Never carries a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthEvent {
    /// A login completed: the server has a usable grant now.
    LoggedIn {
        /// The server.
        server: String,
    },
    /// The grant stopped working (refresh refused, more scopes needed).
    LoginNeeded {
        /// The server.
        server: String,
        /// Why, safe to show (it ends with the `xyctl auth login` hint or
        /// the daemon adds it).
        reason: String,
    },
    /// `auth_logout` forgot the grant.
    LoggedOut {
        /// The server.
        server: String,
    },
}

/// Why an OAuth operation failed; never holds a token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OAuthError {
    /// A login step failed; the message names it (`-32007`).
    #[error("login failed: {0}")]
    LoginFailed(String),
    /// No login with that id (finished long ago, or never started).
    #[error("no login {0} (it finished, expired or never started)")]
    NoSuchLogin(String),
    /// The token store failed.
    #[error("{0}")]
    Store(String),
}

/// The remote endpoint and OAuth block of a configured server, or `None`
/// when it does not use OAuth. The one place the broker reads a server's
/// config.
pub fn oauth_target(config: &ServerConfig) -> Option<(String, OAuthConfig)> {
    let remote = config.remote.as_ref()?;
    Some((remote.url.clone(), remote.auth.clone()?))
}

/// The broker; cheap to clone.
#[derive(Clone)]
pub struct OAuthBroker {
    inner: Arc<Inner>,
}

struct Inner {
    opts: OAuthOptions,
    backend: Arc<dyn backend::TokenBackend>,
    /// Built on first use (a remote server's grant, a login): a daemon
    /// without remote servers never sets up TLS or an HTTP client.
    http: std::sync::OnceLock<Result<Arc<http::XyOAuthHttp>, String>>,
    grants: Mutex<HashMap<String, Arc<Grant>>>,
    logins: Mutex<HashMap<String, Arc<Login>>>,
    events: broadcast::Sender<AuthEvent>,
    next_login: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for OAuthBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthBroker")
            .field("store", &self.inner.opts.store)
            .finish_non_exhaustive()
    }
}

impl OAuthBroker {
    /// A broker with no grants loaded yet (each is read on first use).
    pub fn new(opts: OAuthOptions) -> OAuthBroker {
        let (events, _) = broadcast::channel(64);
        OAuthBroker {
            inner: Arc::new(Inner {
                backend: store::backend(&opts.store),
                http: std::sync::OnceLock::new(),
                opts,
                grants: Mutex::new(HashMap::new()),
                logins: Mutex::new(HashMap::new()),
                events,
                next_login: std::sync::atomic::AtomicU64::new(1),
            }),
        }
    }

    /// Where grants are stored, in words.
    pub fn store_description(&self) -> String {
        self.inner.opts.store.describe()
    }

    /// Grant changes, for the ServerActor nudge and notifications.
    pub fn subscribe(&self) -> broadcast::Receiver<AuthEvent> {
        self.inner.events.subscribe()
    }

    fn http(&self) -> Result<Arc<http::XyOAuthHttp>, OAuthError> {
        self.inner
            .http
            .get_or_init(|| http::XyOAuthHttp::new().map(Arc::new))
            .clone()
            .map_err(OAuthError::LoginFailed)
    }

    /// Whether the HTTP client has been built (tests: nothing builds it
    /// before a remote server or a login needs it).
    #[cfg(test)]
    pub(crate) fn http_built(&self) -> bool {
        self.inner.http.get().is_some()
    }

    /// The server's one grant; a changed `url` or OAuth block starts a new
    /// one (the stored record is kept only for the same `url`).
    fn grant(&self, server: &str, url: &str, cfg: &OAuthConfig) -> Result<Arc<Grant>, OAuthError> {
        let http = self.http()?;
        let mut grants = self.inner.grants.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(g) = grants.get(server)
            && g.url() == url
            && &g.cfg == cfg
        {
            return Ok(Arc::clone(g));
        }
        let g = Arc::new(Grant::new(
            server,
            url,
            cfg,
            Arc::clone(&self.inner.backend),
            http,
            self.inner.events.clone(),
        ));
        grants.insert(server.to_owned(), Arc::clone(&g));
        Ok(g)
    }

    /// The credentials the remote upstream of `server` uses: its one grant.
    pub(crate) fn credentials(
        &self,
        server: &str,
        url: &str,
        cfg: &OAuthConfig,
    ) -> Result<Arc<dyn crate::credentials::Credentials>, OAuthError> {
        Ok(self.grant(server, url, cfg)? as Arc<dyn crate::credentials::Credentials>)
    }

    /// Starts a login for `server`; a login already pending for it is
    /// cancelled (its port closed).
    pub async fn login(
        &self,
        server: &str,
        url: &str,
        cfg: &OAuthConfig,
    ) -> Result<AuthLoginResult, OAuthError> {
        let grant = self.grant(server, url, cfg)?;
        let n = self
            .inner
            .next_login
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = format!("{server}-{n}");
        let (login, result) = login::start(login::LoginSetup {
            grant,
            http: self.http()?,
            client_name: self.inner.opts.client_name.clone(),
            client_metadata_url: self.inner.opts.client_metadata_url.clone(),
            timeout: self.inner.opts.login_timeout,
            id: id.clone(),
        })
        .await?;
        let now = SystemTime::now();
        let mut logins = self.inner.logins.lock().unwrap_or_else(|e| e.into_inner());
        logins.retain(|_, l| {
            let stale = l.expires + OUTCOME_KEPT < now;
            let replaced = l.server == server && l.pending();
            if replaced {
                l.cancel();
            }
            !stale && !replaced
        });
        logins.insert(id, Arc::new(login));
        Ok(result)
    }

    /// Waits up to `timeout` for login `id` to finish.
    pub async fn login_wait(
        &self,
        id: &str,
        timeout: Duration,
    ) -> Result<AuthLoginWaitResult, OAuthError> {
        let login = self
            .inner
            .logins
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned()
            .ok_or_else(|| OAuthError::NoSuchLogin(id.to_owned()))?;
        debug_assert_eq!(login.id, id);
        let mut rx = login.outcome.clone();
        let outcome = tokio::time::timeout(timeout.min(MAX_WAIT), rx.wait_for(Option::is_some))
            .await
            .ok()
            .and_then(|r| r.ok().map(|o| o.clone()))
            .flatten();
        match outcome {
            None if login.task_finished() => Err(OAuthError::LoginFailed(
                "the login was cancelled (another login for this server started)".to_owned(),
            )),
            None => Ok(AuthLoginWaitResult {
                done: false,
                grant: None,
            }),
            Some(Ok(info)) => Ok(AuthLoginWaitResult {
                done: true,
                grant: Some(info),
            }),
            Some(Err(e)) => Err(OAuthError::LoginFailed(e)),
        }
    }

    /// One server's state for `auth_status`.
    pub async fn status(
        &self,
        server: &str,
        url: &str,
        cfg: &OAuthConfig,
    ) -> Result<AuthStatusEntry, OAuthError> {
        let grant = self.grant(server, url, cfg)?;
        let info = grant.info().await.map_err(OAuthError::Store)?;
        let missing = grant.missing_scopes();
        let login_pending = self
            .inner
            .logins
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .any(|l| l.server == server && l.pending());
        let (state, grant_info, reason) = match info {
            None => (AuthState::NotLoggedIn, None, None),
            Some((info, Some(why))) => (AuthState::LoginNeeded, Some(info), Some(why)),
            Some((info, None)) if !missing.is_empty() => (
                AuthState::LoginNeeded,
                Some(info),
                Some(format!(
                    "the server needs more scopes ({})",
                    missing.join(" ")
                )),
            ),
            Some((info, None)) => (AuthState::LoggedIn, Some(info), None),
        };
        Ok(AuthStatusEntry {
            name: server.to_owned(),
            url: url.to_owned(),
            state,
            grant: grant_info,
            reason,
            missing_scopes: missing,
            login_pending,
            store: self.store_description(),
        })
    }

    /// Forgets `server`'s grant (and cancels a pending login). The tokens
    /// are not revoked at the authorization server (docs/remote.md).
    pub async fn logout(
        &self,
        server: &str,
        url: &str,
        cfg: &OAuthConfig,
    ) -> Result<bool, OAuthError> {
        self.inner
            .logins
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|_, l| {
                if l.server == server {
                    l.cancel();
                }
                l.server != server
            });
        let grant = self.grant(server, url, cfg)?;
        grant.logout().await.map_err(OAuthError::Store)
    }
}
