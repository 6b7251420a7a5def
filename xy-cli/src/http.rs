//! The one place xyctl's HTTP agent is built (`ureq`, blocking): the relay
//! behind `xyctl connect` (loopback, plain HTTP) and the HTTPS lookups of
//! pinned installs (the MCP Registry, PyPI's JSON API). TLS comes from the
//! platform, as for xyd's client (D115): Security.framework (`native-tls`)
//! on macOS; rustls with the ring provider and the platform's certificate
//! verifier elsewhere. Either way the roots are the system's, so a
//! corporate CA the system trusts is trusted here, and none are bundled.

use std::time::Duration;

/// How long a connection attempt may take before the request fails.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Each connection's input and output buffer, and the largest response
/// header read. ureq fills its buffers with zeros when a connection first
/// uses them, so their size is resident memory of every `xyctl connect`
/// (one per AI-client session, each with a POST and a GET connection);
/// bodies stream through them, so only headers must fit.
const BUFFER: usize = 16 * 1024;

/// An agent with xy's TLS and connect timeout. A non-2xx status is an
/// answer, not an error: callers read the body of a `404` (the registry
/// explains it) and the relay passes statuses on. No overall timeout here:
/// the relay's streams last as long as the server keeps them; one-shot
/// lookups set theirs per request ([`get_json`]).
pub(crate) fn agent() -> ureq::Agent {
    xy_core::tls::install_provider();
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_connect(Some(CONNECT_TIMEOUT))
        .input_buffer_size(BUFFER)
        .output_buffer_size(BUFFER)
        .max_response_header_size(BUFFER)
        .user_agent(concat!("xyctl/", env!("CARGO_PKG_VERSION")))
        .tls_config(
            ureq::tls::TlsConfig::builder()
                .provider(TLS_PROVIDER)
                .root_certs(ureq::tls::RootCerts::PlatformVerifier)
                .build(),
        )
        .build()
        .into()
}

#[cfg(target_os = "macos")]
const TLS_PROVIDER: ureq::tls::TlsProvider = ureq::tls::TlsProvider::NativeTls;
#[cfg(not(target_os = "macos"))]
const TLS_PROVIDER: ureq::tls::TlsProvider = ureq::tls::TlsProvider::Rustls;

/// The status and the JSON body of `GET url` (`Ok(None)` body: not JSON).
/// A transport failure (DNS, TLS, timeout) is an `Err` naming the URL.
pub(crate) fn get_json(
    url: &str,
    timeout: Duration,
) -> Result<(u16, Option<serde_json::Value>), String> {
    let mut resp = agent()
        .get(url)
        .header("Accept", "application/json")
        .config()
        .timeout_global(Some(timeout))
        .build()
        .call()
        .map_err(|e| format!("cannot fetch {url}: {e}"))?;
    let status = resp.status().as_u16();
    let body = resp
        .body_mut()
        .with_config()
        // Registry documents are small; PyPI's for a project with many
        // releases runs to a few MiB.
        .limit(64 * 1024 * 1024)
        .read_to_string()
        .map_err(|e| format!("cannot read the answer of {url}: {e}"))?;
    Ok((status, serde_json::from_str(&body).ok()))
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    #[test]
    fn a_status_is_an_answer_and_the_body_is_read() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf).unwrap();
            let body = r#"{"error":"Server not found"}"#;
            write!(
                s,
                "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
        });
        let (status, body) = super::get_json(
            &format!("http://{addr}/x"),
            xy_testbins::wait::scaled(std::time::Duration::from_secs(5)),
        )
        .unwrap();
        t.join().unwrap();
        assert_eq!(status, 404);
        assert_eq!(body.unwrap()["error"], "Server not found");
    }

    #[test]
    fn an_unreachable_host_names_the_url() {
        // A port nothing listens on: bind, learn it, close.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{port}/v0.1/servers");
        let e = super::get_json(&url, std::time::Duration::from_secs(5)).unwrap_err();
        assert!(e.contains(&url), "{e}");
    }
}
