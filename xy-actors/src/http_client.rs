//! The one outbound HTTP client setup (SPEC §23: remote servers' upstream,
//! OAuth discovery, registration and token requests). TLS comes from the
//! platform: Security.framework on macOS; rustls with the ring provider and
//! the platform's certificate verifier elsewhere (D115). Redirects are not
//! followed: an MCP endpoint or a token endpoint that redirects is reported,
//! not chased to a host the user never configured.

use std::time::Duration;

/// How long a connection attempt may take before the request fails.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A client builder with xy's TLS, redirect and timeout choices; callers
/// add per-use settings (a request timeout, pool sizes) and `build()`.
pub(crate) fn builder() -> reqwest::ClientBuilder {
    install_tls_provider();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(CONNECT_TIMEOUT)
        .user_agent(concat!("xy/", env!("CARGO_PKG_VERSION")))
}

/// rustls without a default provider needs one installed once per process.
#[cfg(not(target_os = "macos"))]
fn install_tls_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Err only when another provider was installed first, which is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

#[cfg(target_os = "macos")]
fn install_tls_provider() {}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn builds_a_client_and_refuses_to_follow_redirects() {
        // A loopback server that answers every request with a redirect.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf).await;
            let _ = s
                .write_all(b"HTTP/1.1 302 Found\r\nLocation: http://example.invalid/\r\nContent-Length: 0\r\n\r\n")
                .await;
        });
        let client = super::builder().build().unwrap();
        let r = client.get(format!("http://{addr}/")).send().await.unwrap();
        assert_eq!(r.status(), 302);
    }
}
