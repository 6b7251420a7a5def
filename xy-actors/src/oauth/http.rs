//! rmcp's OAuth requests (discovery, registration, token exchange and
//! refresh) on xy's one outbound client (`http_client.rs`, D115): the same
//! TLS, no redirects followed, bounded bodies. rmcp's own default client
//! would be a second reqwest setup.

use std::time::Duration;

use rmcp::transport::auth::{OAuthHttpClient, OAuthHttpClientFuture, OAuthHttpRequest};

/// How long one OAuth request may take, end to end.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Larger metadata or token responses are refused, not buffered.
const MAX_BODY: usize = 1024 * 1024;

/// The OAuth HTTP client rmcp's `AuthorizationManager` is given.
pub(crate) struct XyOAuthHttp {
    client: reqwest::Client,
}

impl XyOAuthHttp {
    pub(crate) fn new() -> Result<XyOAuthHttp, String> {
        let client = crate::http::client::builder()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|e| format!("cannot set up the HTTPS client: {e}"))?;
        Ok(XyOAuthHttp { client })
    }

    /// The underlying client, for the login's first unauthenticated probe.
    pub(crate) fn client(&self) -> &reqwest::Client {
        &self.client
    }
}

#[derive(Debug, thiserror::Error)]
#[error("response body larger than {MAX_BODY} bytes")]
struct TooLarge;

impl OAuthHttpClient for XyOAuthHttp {
    fn execute(&self, request: OAuthHttpRequest) -> OAuthHttpClientFuture<'_> {
        Box::pin(async move {
            // Both redirect policies get the same answer: xy never follows one
            // (D115), so a redirecting endpoint shows up as its 3xx status.
            let OAuthHttpRequest { request, .. } = request;
            let request = reqwest::Request::try_from(request)?;
            let mut response = self.client.execute(request).await?;
            let mut builder = oauth2::http::Response::builder().status(response.status());
            for (name, value) in response.headers() {
                builder = builder.header(name, value);
            }
            let mut body = Vec::new();
            while let Some(chunk) = response.chunk().await? {
                if body.len() + chunk.len() > MAX_BODY {
                    return Err(Box::new(TooLarge) as _);
                }
                body.extend_from_slice(&chunk);
            }
            Ok(builder.body(body)?)
        })
    }
}
