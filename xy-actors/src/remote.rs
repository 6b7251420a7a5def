//! A remote server's upstream (SPEC §23): the one place xy sends a request
//! to a `url "https://…"` server, for the gateway's and the server port's
//! reverse proxy, the health probe and xy's own listing alike. It owns the
//! outbound client (hyper-util's pooled client over
//! `http_client::connector()`, or reqwest's when the proxy environment
//! routes the URL through a proxy: D146), which client headers go
//! upstream, the credentials of each request ([`Credentials`]: static
//! `headers { }` from §16 secrets, or the OAuth broker), and the one retry
//! after a `401` (or a `403` with `insufficient_scope`); a retry refused
//! too is the supplier's to judge (an OAuth grant then needs a login).
//!
//! What it learns goes to the server's actor as an [`UpstreamEvent`]: the
//! upstream answered (a `starting` remote is `running` from then on), or
//! credentials could not be had (the server is `unhealthy` with the
//! message as its why). Nothing here logs a header value.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use http_body_util::Full;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::proxy::matcher::Matcher;
use hyper_util::rt::TokioExecutor;
use xy_core::config::{HeaderSpec, HeaderValueSpec, RemoteConfig};

use crate::credentials::{BoxFuture, CredentialError, Credentials};
use crate::http::body::{BoxError, HttpBody, MAX_BODY, Response as ReadResponse};

/// How long one upstream exchange may take to start answering; a stream
/// then lasts as long as the upstream keeps it.
const RESPONSE_HEAD_TIMEOUT: Duration = Duration::from_secs(60);
/// Idle pooled connections to one upstream are closed after this.
const POOL_IDLE: Duration = Duration::from_secs(90);

/// Client headers that never go upstream: the client's credentials are for
/// xy (or nothing), not for the remote, and its `Host` names xy (D125).
const CLIENT_ONLY: &[HeaderName] = &[
    header::HOST,
    header::AUTHORIZATION,
    header::COOKIE,
    header::PROXY_AUTHORIZATION,
];

/// What a remote's upstream tells its ServerActor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum UpstreamEvent {
    /// The upstream answered HTTP (once per upstream, the first time).
    Answered,
    /// No credentials could be had; the message is safe to show.
    CredentialsFailed(String),
}

/// Where [`UpstreamEvent`]s go.
pub(crate) type Notify = Arc<dyn Fn(UpstreamEvent) + Send + Sync>;

/// Why an upstream exchange produced no upstream answer.
#[derive(Debug)]
pub(crate) enum UpstreamError {
    /// The credentials supplier failed (login needed, a secret lookup).
    Credentials(CredentialError),
    /// Connecting or sending failed; the text says why (no values).
    Unreachable(String),
}

/// How requests reach the upstream.
enum Transport {
    /// hyper-util's pooled HTTP/1.1 client: no redirect, retry or URL
    /// layers between the proxy and the connection.
    Direct(Box<Client<crate::http::client::Connector, Full<Bytes>>>),
    /// reqwest with the proxy the environment names for this URL.
    Proxied(reqwest::Client),
}

/// One remote server's upstream for one run (built at each connect, so
/// secrets are resolved again after a restart).
pub(crate) struct Upstream {
    name: String,
    url: reqwest::Url,
    /// `url` as a request target, and without its query and fragment (a
    /// request's own query replaces the configured one).
    uri: Uri,
    bare: String,
    transport: Transport,
    /// Headers of every request (static literals when OAuth supplies the
    /// credentials; empty otherwise).
    base: HeaderMap,
    creds: Option<Arc<dyn Credentials>>,
    notify: Notify,
    answered: AtomicBool,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("name", &self.name)
            .field("url", &self.url.as_str())
            .finish_non_exhaustive()
    }
}

impl Upstream {
    /// The upstream of `remote`, with `creds` for its requests.
    pub(crate) fn new(
        name: &str,
        remote: &RemoteConfig,
        base: HeaderMap,
        creds: Option<Arc<dyn Credentials>>,
        notify: Notify,
    ) -> Result<Upstream, String> {
        Upstream::with_proxies(
            name,
            remote,
            base,
            creds,
            notify,
            &crate::http::client::proxy_env(),
        )
    }

    /// [`Upstream::new`] with the proxy rules `proxies` instead of the
    /// environment's.
    fn with_proxies(
        name: &str,
        remote: &RemoteConfig,
        base: HeaderMap,
        creds: Option<Arc<dyn Credentials>>,
        notify: Notify,
        proxies: &Matcher,
    ) -> Result<Upstream, String> {
        let url = reqwest::Url::parse(&remote.url).map_err(|e| format!("url: {e}"))?;
        let mut target = url.clone();
        target.set_fragment(None);
        let uri: Uri = target.as_str().parse().map_err(|e| format!("url: {e}"))?;
        target.set_query(None);
        let bare = target.as_str().to_owned();
        let setup = |e: &dyn std::fmt::Display| format!("the HTTP client could not be set up: {e}");
        let transport = match crate::http::client::proxy_for(proxies, &uri) {
            None => Transport::Direct(Box::new(
                Client::builder(TokioExecutor::new())
                    .pool_idle_timeout(POOL_IDLE)
                    .build(crate::http::client::connector().map_err(|e| setup(&e))?),
            )),
            Some(via) => {
                let mut proxy =
                    reqwest::Proxy::all(via.uri().to_string()).map_err(|e| setup(&e))?;
                if let Some(auth) = via.basic_auth() {
                    proxy = proxy.custom_http_auth(auth.clone());
                }
                Transport::Proxied(
                    crate::http::client::builder()
                        .proxy(proxy)
                        .pool_idle_timeout(POOL_IDLE)
                        .tcp_nodelay(true)
                        .build()
                        .map_err(|e| setup(&e))?,
                )
            }
        };
        Ok(Upstream {
            name: name.to_owned(),
            url,
            uri,
            bare,
            transport,
            base,
            creds,
            notify,
            answered: AtomicBool::new(false),
        })
    }

    /// The upstream's URL.
    pub(crate) fn url(&self) -> &str {
        self.url.as_str()
    }

    /// Sends one request: the client's `headers` minus [`CLIENT_ONLY`],
    /// then the credentials; on `401` (or `403` + `insufficient_scope`)
    /// the supplier is told once and the request is sent once more; a
    /// second rejection is the supplier's to judge (`rejected_again`).
    pub(crate) async fn send(
        &self,
        method: Method,
        query: Option<&str>,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Result<Response<HttpBody>, UpstreamError> {
        let uri = match query {
            None => self.uri.clone(),
            Some(q) => format!("{}?{q}", self.bare)
                .parse::<Uri>()
                .map_err(|e| UpstreamError::Unreachable(format!("the query: {e}")))?,
        };
        let mut sent = HeaderMap::with_capacity(headers.len() + self.base.len() + 3);
        for (k, v) in headers {
            if !CLIENT_ONLY.contains(k) {
                sent.append(k.clone(), v.clone());
            }
        }
        for (k, v) in &self.base {
            sent.insert(k.clone(), v.clone());
        }
        // What reqwest adds when the client sent none, kept for the direct path.
        if !sent.contains_key(header::USER_AGENT) {
            sent.insert(
                header::USER_AGENT,
                HeaderValue::from_static(crate::http::client::USER_AGENT),
            );
        }
        if !sent.contains_key(header::ACCEPT) {
            sent.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
        }
        let mut retried = false;
        loop {
            // Only a supplier's rejection sends again, so only then is a copy kept.
            let mut h = if self.creds.is_some() {
                sent.clone()
            } else {
                std::mem::take(&mut sent)
            };
            if let Some(c) = &self.creds {
                let extra = c.headers().await.map_err(|e| self.failed(e))?;
                for (k, v) in &extra {
                    h.insert(k.clone(), v.clone());
                }
            }
            // Which token a rejection refused: the supplier refreshes only
            // when it is still the current one.
            let carried = match &self.creds {
                Some(_) => h.get(header::AUTHORIZATION).cloned(),
                None => None,
            };
            let resp = tokio::time::timeout(
                RESPONSE_HEAD_TIMEOUT,
                self.request(method.clone(), uri.clone(), h, body.clone()),
            )
            .await
            .map_err(|_| {
                UpstreamError::Unreachable(format!(
                    "no answer from {} within {}",
                    self.url,
                    humantime::format_duration(RESPONSE_HEAD_TIMEOUT)
                ))
            })??;
            if !self.answered.swap(true, Ordering::Relaxed) {
                (self.notify)(UpstreamEvent::Answered);
            }
            let status = resp.status().as_u16();
            let challenge = resp
                .headers()
                .get(header::WWW_AUTHENTICATE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let rejected = status == 401
                || (status == 403
                    && challenge
                        .as_deref()
                        .is_some_and(|c| c.contains("insufficient_scope")));
            if rejected && let Some(c) = &self.creds {
                if !retried {
                    retried = true;
                    c.rejected(status, challenge, carried)
                        .await
                        .map_err(|e| self.failed(e))?;
                    continue;
                }
                // Refused with fresh credentials too: the supplier says
                // whether that ends them (the client is then told why,
                // not handed the bare `401`).
                c.rejected_again(status, challenge, carried)
                    .await
                    .map_err(|e| self.failed(e))?;
            }
            return Ok(resp);
        }
    }

    /// One exchange on the transport, up to the answer's head.
    async fn request(
        &self,
        method: Method,
        uri: Uri,
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<Response<HttpBody>, UpstreamError> {
        match &self.transport {
            Transport::Direct(client) => {
                let mut req = Request::new(Full::new(body));
                *req.method_mut() = method;
                *req.uri_mut() = uri;
                *req.headers_mut() = headers;
                let resp = client.request(req).await.map_err(|e| {
                    UpstreamError::Unreachable(format!(
                        "error sending request for url ({}): {}",
                        self.url,
                        describe(&e)
                    ))
                })?;
                Ok(resp.map(|b| b.map_err(BoxError::from).boxed_unsync()))
            }
            Transport::Proxied(client) => {
                let resp = client
                    .request(method, uri.to_string())
                    .headers(headers)
                    .body(body)
                    .send()
                    .await
                    .map_err(|e| UpstreamError::Unreachable(describe(&e)))?;
                let resp: Response<reqwest::Body> = resp.into();
                Ok(resp.map(|b| b.map_err(BoxError::from).boxed_unsync()))
            }
        }
    }

    /// A probe's or listing's exchange: the whole body read (bounded), or
    /// up to where `done` says the answer is in.
    pub(crate) async fn exchange(
        &self,
        method: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
        done: &(dyn Fn(&[u8]) -> bool + Sync),
    ) -> Result<ReadResponse, String> {
        let method = Method::from_bytes(method.as_bytes()).map_err(|e| e.to_string())?;
        let mut h = HeaderMap::new();
        h.insert(header::USER_AGENT, HeaderValue::from_static("xy-probe"));
        for (k, v) in headers {
            let name =
                HeaderName::from_bytes(k.as_bytes()).map_err(|e| format!("header {k}: {e}"))?;
            let value = HeaderValue::from_str(v).map_err(|e| format!("header {k}: {e}"))?;
            h.insert(name, value);
        }
        let body = Bytes::copy_from_slice(body.unwrap_or_default());
        let resp = self
            .send(method, None, &h, body)
            .await
            .map_err(|e| match e {
                UpstreamError::Credentials(e) => e.to_string(),
                UpstreamError::Unreachable(why) => why,
            })?;
        let (parts, mut incoming) = resp.into_parts();
        let mut out = Vec::new();
        while !done(&out) {
            let Some(frame) = incoming.frame().await else {
                break;
            };
            let frame = frame.map_err(|e| format!("reading the answer from {}: {e}", self.url))?;
            if let Some(data) = frame.data_ref() {
                if out.len() + data.len() > MAX_BODY * 4 {
                    return Err(format!("the answer from {} is too large", self.url));
                }
                out.extend_from_slice(data);
            }
        }
        Ok(ReadResponse {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body: out,
        })
    }

    fn failed(&self, e: CredentialError) -> UpstreamError {
        (self.notify)(UpstreamEvent::CredentialsFailed(e.to_string()));
        UpstreamError::Credentials(e)
    }
}

/// `e` and its sources, one line (reqwest puts the URL in its errors; ours
/// has no credentials in it, by config rule).
fn describe(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(cause) = src {
        s.push_str(": ");
        s.push_str(&cause.to_string());
        src = cause.source();
    }
    s
}

/// `headers { Name "literal" | Name secret="NAME" }` (SPEC §23) with the
/// secrets' values resolved for this run: the same headers on every
/// request. A rejection cannot be fixed by asking again.
pub(crate) struct StaticHeaders {
    headers: HeaderMap,
}

impl StaticHeaders {
    /// The headers of `specs`, each secret's value taken from `resolved`
    /// (the run's §16 lookup) as it is.
    pub(crate) fn new(
        specs: &[HeaderSpec],
        resolved: &[crate::secrets::Resolved],
    ) -> Result<StaticHeaders, String> {
        Ok(StaticHeaders {
            headers: header_map(specs, resolved)?,
        })
    }
}

/// The header map of `specs`; an error names the header, never its value.
pub(crate) fn header_map(
    specs: &[HeaderSpec],
    resolved: &[crate::secrets::Resolved],
) -> Result<HeaderMap, String> {
    let mut map = HeaderMap::new();
    for spec in specs {
        let name = HeaderName::from_bytes(spec.name.as_bytes())
            .map_err(|_| format!("header {}: not a header name", spec.name))?;
        let text = match &spec.value {
            HeaderValueSpec::Literal(v) => v.as_str(),
            HeaderValueSpec::Secret(secret) => resolved
                .iter()
                .find(|r| &r.name == secret)
                .map(|r| r.value.as_str())
                .ok_or_else(|| format!("header {}: secret {secret} was not resolved", spec.name))?,
        };
        let mut value =
            HeaderValue::from_str(text.trim_end_matches(['\r', '\n'])).map_err(|_| {
                format!(
                    "header {}: the value holds characters a header cannot carry",
                    spec.name
                )
            })?;
        value.set_sensitive(true);
        map.insert(name, value);
    }
    Ok(map)
}

impl Credentials for StaticHeaders {
    fn headers(&self) -> BoxFuture<'_, Result<HeaderMap, CredentialError>> {
        let h = self.headers.clone();
        Box::pin(async move { Ok(h) })
    }

    fn rejected(
        &self,
        status: u16,
        _www_authenticate: Option<String>,
        _sent: Option<HeaderValue>,
    ) -> BoxFuture<'_, Result<(), CredentialError>> {
        Box::pin(async move {
            Err(CredentialError::Unavailable(format!(
                "the remote refused the configured headers (HTTP {status}); \
                 check the secret they come from"
            )))
        })
    }
}

/// `auth { oauth }` with nothing to supply a grant (no broker wired in):
/// every request needs a login first.
pub(crate) struct NoGrant {
    pub(crate) server: String,
}

impl Credentials for NoGrant {
    fn headers(&self) -> BoxFuture<'_, Result<HeaderMap, CredentialError>> {
        let server = self.server.clone();
        Box::pin(async move {
            Err(CredentialError::LoginNeeded {
                server,
                reason: None,
            })
        })
    }

    fn rejected(
        &self,
        _status: u16,
        _www_authenticate: Option<String>,
        _sent: Option<HeaderValue>,
    ) -> BoxFuture<'_, Result<(), CredentialError>> {
        let server = self.server.clone();
        Box::pin(async move {
            Err(CredentialError::LoginNeeded {
                server,
                reason: None,
            })
        })
    }
}

/// The credentials of one run of a remote server: `auth { oauth }` asks
/// `credentials_for` (the broker), with the static headers on every
/// request as well; without `auth`, the static headers are the
/// credentials (refused ones are then reported, not retried forever).
pub(crate) fn credentials(
    config: &xy_core::config::ServerConfig,
    remote: &RemoteConfig,
    resolved: &[crate::secrets::Resolved],
    credentials_for: &crate::credentials::CredentialsFor,
) -> Result<(HeaderMap, Option<Arc<dyn Credentials>>), String> {
    if remote.auth.is_some() {
        let base = header_map(&remote.headers, resolved)?;
        let creds = credentials_for(config).unwrap_or_else(|| {
            Arc::new(NoGrant {
                server: config.name.clone(),
            })
        });
        return Ok((base, Some(creds)));
    }
    if remote.headers.is_empty() {
        return Ok((HeaderMap::new(), None));
    }
    let s: Arc<dyn Credentials> = Arc::new(StaticHeaders::new(&remote.headers, resolved)?);
    Ok((HeaderMap::new(), Some(s)))
}

/// The daemon's default: no OAuth broker (every `auth { oauth }` server
/// needs a login).
#[cfg(test)]
pub(crate) fn no_broker() -> crate::credentials::CredentialsFor {
    Arc::new(|_| None)
}

#[cfg(test)]
mod tests;
