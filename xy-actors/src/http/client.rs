//! The one outbound HTTP client setup (SPEC §23: remote servers' upstream,
//! OAuth discovery, registration and token requests). TLS comes from the
//! platform: Security.framework on macOS; rustls with the ring provider and
//! the platform's certificate verifier elsewhere (D115). Redirects are not
//! followed: an MCP endpoint or a token endpoint that redirects is reported,
//! not chased to a host the user never configured.
//!
//! Two clients come from here: reqwest's (`builder()`, for OAuth and for a
//! remote the proxy environment routes through a proxy) and hyper-util's
//! pooled client over [`connector()`] for a remote's direct data path
//! (D146), which never follows a redirect since it has no redirect layer.

use std::time::Duration;

use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::proxy::matcher::{Intercept, Matcher};

/// How long a connection attempt may take before the request fails.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The `User-Agent` of xy's own requests when the client sent none.
pub(crate) const USER_AGENT: &str = concat!("xy/", env!("CARGO_PKG_VERSION"));

/// A client builder with xy's TLS, redirect and timeout choices; callers
/// add per-use settings (a request timeout, pool sizes) and `build()`.
pub(crate) fn builder() -> reqwest::ClientBuilder {
    xy_core::tls::install_provider();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(CONNECT_TIMEOUT)
        .user_agent(USER_AGENT)
}

/// The connector of the direct data path: `http` and `https` URLs, TLS as
/// reqwest sets it up (D115), HTTP/1.1 offered by ALPN.
#[cfg(not(target_os = "macos"))]
pub(crate) type Connector = hyper_rustls::HttpsConnector<HttpConnector>;
#[cfg(target_os = "macos")]
pub(crate) type Connector = hyper_tls::HttpsConnector<HttpConnector>;

/// A [`Connector`] with xy's connect timeout and `TCP_NODELAY`.
pub(crate) fn connector() -> Result<Connector, String> {
    connector_trusting(&[])
}

/// [`connector()`], trusting the DER certificates `extra_roots` as well as
/// the platform's (tests' own CA).
fn connector_trusting(extra_roots: &[Vec<u8>]) -> Result<Connector, String> {
    let mut http = HttpConnector::new();
    // The TLS layer takes `https` URLs; the TCP layer must let them through.
    http.enforce_http(false);
    http.set_connect_timeout(Some(CONNECT_TIMEOUT));
    http.set_nodelay(true);
    with_tls(http, extra_roots)
}

#[cfg(not(target_os = "macos"))]
fn with_tls(http: HttpConnector, extra_roots: &[Vec<u8>]) -> Result<Connector, String> {
    use std::sync::Arc;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = if extra_roots.is_empty() {
        rustls_platform_verifier::Verifier::new(Arc::clone(&provider))
    } else {
        let roots = extra_roots.iter().map(|der| der.clone().into());
        rustls_platform_verifier::Verifier::new_with_extra_roots(roots, Arc::clone(&provider))
    }
    .map_err(|e| format!("the platform's certificate verifier: {e}"))?;
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS versions: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    Ok(hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_or_http()
        .enable_http1()
        .wrap_connector(http))
}

#[cfg(target_os = "macos")]
fn with_tls(http: HttpConnector, extra_roots: &[Vec<u8>]) -> Result<Connector, String> {
    use tokio_native_tls::native_tls;
    let mut b = native_tls::TlsConnector::builder();
    for der in extra_roots {
        let cert = native_tls::Certificate::from_der(der).map_err(|e| format!("a root: {e}"))?;
        b.add_root_certificate(cert);
    }
    let tls = b.build().map_err(|e| format!("the system's TLS: {e}"))?;
    Ok(hyper_tls::HttpsConnector::from((http, tls.into())))
}

/// The proxy the environment (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`,
/// `NO_PROXY`, read as reqwest reads them) names for `url`, if any.
pub(crate) fn proxy_for(matcher: &Matcher, url: &hyper::Uri) -> Option<Intercept> {
    matcher.intercept(url)
}

/// The proxy environment's rules, as reqwest's clients take them.
pub(crate) fn proxy_env() -> Matcher {
    Matcher::from_system()
}

#[cfg(test)]
mod tests {
    use http_body_util::{BodyExt, Empty};

    /// A loopback server that answers one request with `answer`.
    async fn answer_once(answer: &'static [u8]) -> std::net::SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf).await;
            let _ = s.write_all(answer).await;
        });
        addr
    }

    const REDIRECT: &[u8] =
        b"HTTP/1.1 302 Found\r\nLocation: http://example.invalid/\r\nContent-Length: 0\r\n\r\n";

    #[tokio::test]
    async fn builds_a_client_and_refuses_to_follow_redirects() {
        let addr = answer_once(REDIRECT).await;
        let client = super::builder().build().unwrap();
        let r = client.get(format!("http://{addr}/")).send().await.unwrap();
        assert_eq!(r.status(), 302);
    }

    fn direct() -> hyper_util::client::legacy::Client<super::Connector, Empty<bytes::Bytes>> {
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build(super::connector().unwrap())
    }

    #[tokio::test]
    async fn the_direct_connector_answers_a_redirect_as_it_is() {
        let addr = answer_once(REDIRECT).await;
        let uri: hyper::Uri = format!("http://{addr}/").parse().unwrap();
        let r = direct().get(uri).await.unwrap();
        assert_eq!(r.status(), 302);
        let _ = r.into_body().collect().await;
    }

    #[tokio::test]
    async fn the_direct_connector_speaks_tls_to_an_https_url() {
        // Not a TLS server: the handshake must fail (a plain-HTTP answer to
        // an https URL would mean TLS was skipped).
        let addr = answer_once(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").await;
        let uri: hyper::Uri = format!("https://localhost:{}/", addr.port())
            .parse()
            .unwrap();
        let e = direct().get(uri).await.expect_err("no TLS server there");
        assert!(e.is_connect(), "{e:?}");
    }

    /// A TLS server for `localhost`/`127.0.0.1` with a certificate from the
    /// test CA in `testdata/tls`, answering one request with `200 tls`.
    #[cfg(not(target_os = "macos"))]
    async fn tls_server() -> u16 {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        use std::sync::Arc;
        let certs = vec![
            CertificateDer::from_pem_slice(include_bytes!("../../testdata/tls/leaf.pem")).unwrap(),
        ];
        let key =
            PrivateKeyDer::from_pem_slice(include_bytes!("../../testdata/tls/leaf.key")).unwrap();
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let (s, _) = listener.accept().await.unwrap();
            let mut s = acceptor.accept(s).await.unwrap();
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf).await;
            let _ = s
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\ntls")
                .await;
            let _ = s.shutdown().await;
        });
        port
    }

    #[cfg(not(target_os = "macos"))]
    #[tokio::test]
    async fn the_direct_connector_verifies_and_talks_tls() {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject;
        let ca =
            CertificateDer::from_pem_slice(include_bytes!("../../testdata/tls/ca.pem")).unwrap();
        // Trusted: the CA is added to the platform's roots.
        let port = tls_server().await;
        let trusting =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build::<_, Empty<bytes::Bytes>>(
                    super::connector_trusting(&[ca.to_vec()]).unwrap(),
                );
        let uri: hyper::Uri = format!("https://localhost:{port}/mcp").parse().unwrap();
        let r = trusting.get(uri).await.unwrap();
        assert_eq!(r.status(), 200);
        let body = r.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"tls");
        // Not trusted: the platform's roots alone refuse the test CA.
        let port = tls_server().await;
        let uri: hyper::Uri = format!("https://localhost:{port}/mcp").parse().unwrap();
        let e = direct().get(uri).await.expect_err("an unknown CA");
        let mut why = format!("{e}");
        let mut src = std::error::Error::source(&e);
        while let Some(s) = src {
            why.push_str(&format!(": {s}"));
            src = s.source();
        }
        assert!(why.contains("certificate"), "{why}");
    }

    #[test]
    fn the_proxy_rules_pick_a_proxy_per_url() {
        let m = hyper_util::client::proxy::matcher::Matcher::builder()
            .https("http://user:pw@127.0.0.1:3128")
            .no("internal.example")
            .build();
        let far: hyper::Uri = "https://far.example/mcp".parse().unwrap();
        let p = super::proxy_for(&m, &far).expect("https goes through the proxy");
        assert_eq!(p.uri().port_u16(), Some(3128));
        assert!(p.basic_auth().is_some());
        let near: hyper::Uri = "https://internal.example/mcp".parse().unwrap();
        assert!(super::proxy_for(&m, &near).is_none(), "NO_PROXY");
        let plain: hyper::Uri = "http://far.example/mcp".parse().unwrap();
        assert!(super::proxy_for(&m, &plain).is_none(), "no HTTP_PROXY");
    }
}
