//! Each console request at the HTTP level (SPEC §28): the `Host` and
//! `Origin` checks against DNS rebinding and cross-site requests, the
//! session on every `/api/` request, the method rules (static files by
//! `GET`, everything else by `POST` with a JSON body); the answers'
//! headers are `reply.rs`'s.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};
use xy_actors::ConsoleBody;

use super::Console;
use super::reply::{full, json_answer, text, with_headers};
use super::session::{COOKIE, cookie_value};

/// The header the page sends its session token in.
pub(crate) const TOKEN_HEADER: &str = "x-xy-token";
/// Largest request body the console reads.
const MAX_REQUEST: usize = 64 * 1024;
/// Answers one request.
pub(crate) async fn handle(req: Request<Incoming>, console: Arc<Console>) -> Response<ConsoleBody> {
    let host = match checked_host(&req, console.port) {
        Ok(h) => h,
        Err(why) => return text(StatusCode::FORBIDDEN, why),
    };
    if let Err(why) = checked_origin(&req, &host) {
        return text(StatusCode::FORBIDDEN, why);
    }
    let path = req.uri().path().to_owned();
    match (req.method(), path.as_str()) {
        (&Method::GET, _) if !path.starts_with("/api/") => match super::assets::file(&path) {
            Some((mime, body)) => with_headers(Response::new(full(Bytes::from_static(body))), mime),
            None => text(StatusCode::NOT_FOUND, "not found"),
        },
        (&Method::POST, _) if path.starts_with("/api/") => post(req, &path, &console).await,
        _ => text(
            StatusCode::METHOD_NOT_ALLOWED,
            "the console's files are read with GET and its API is POST /api/…",
        ),
    }
}

async fn post(req: Request<Incoming>, path: &str, console: &Console) -> Response<ConsoleBody> {
    // Every POST names its origin (browsers always send it); a request
    // without one is not from the console's page.
    if req.headers().get(header::ORIGIN).is_none() {
        return text(StatusCode::FORBIDDEN, "a POST must carry an Origin header");
    }
    // A cross-site form can send only a few content types; JSON is not one.
    let json_body = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|t| t.trim() == "application/json")
        });
    if !json_body {
        return text(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "the console's API takes application/json",
        );
    }
    let signed_in = path == "/api/login" || session_ok(&req, console);
    if !signed_in {
        return json_answer(
            StatusCode::UNAUTHORIZED,
            &json!({"error": {"message": "not signed in: run `xyctl ui` for a new link"}}),
        );
    }
    let body = match Limited::new(req.into_body(), MAX_REQUEST).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return text(StatusCode::PAYLOAD_TOO_LARGE, "request body too large"),
    };
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return text(StatusCode::BAD_REQUEST, "the body is not JSON");
    };
    match path {
        "/api/login" => login(console, &body),
        "/api/rpc" => super::api::rpc(console, body).await,
        "/api/approve" => super::api::approve(console, body).await,
        "/api/stream" => super::api::stream(console, body).await,
        _ => text(StatusCode::NOT_FOUND, "no such API"),
    }
}

/// Exchanges the one-time code for a session: the cookie in `Set-Cookie`,
/// the token in the body (for the page's tab only).
fn login(console: &Console, body: &Value) -> Response<ConsoleBody> {
    let code = body.get("code").and_then(Value::as_str).unwrap_or("");
    match console.sessions.exchange(code) {
        Ok(s) => {
            let mut r = json_answer(StatusCode::OK, &json!({"token": s.token}));
            let cookie = format!("{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/", s.cookie);
            r.headers_mut().insert(
                header::SET_COOKIE,
                HeaderValue::from_str(&cookie).expect("base64url is a valid header value"),
            );
            r
        }
        Err(e) => {
            tracing::info!(error = %e, "console: a one-time code was refused");
            json_answer(
                StatusCode::UNAUTHORIZED,
                &json!({"error": {"message": e.to_string()}}),
            )
        }
    }
}

fn session_ok<B>(req: &Request<B>, console: &Console) -> bool {
    let cookie = req
        .headers()
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|h| cookie_value(h, COOKIE));
    let token = req
        .headers()
        .get(TOKEN_HEADER)
        .and_then(|v| v.to_str().ok());
    match (cookie, token) {
        (Some(c), Some(t)) => console.sessions.check(c, t),
        _ => false,
    }
}

/// `Host` must name loopback and the console's port (DNS rebinding: a
/// page of another site resolved to 127.0.0.1 sends its own name).
fn checked_host<B>(req: &Request<B>, port: u16) -> Result<String, &'static str> {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    let (name, p) = match host.rsplit_once(':') {
        Some((n, p)) => (n, p),
        None => return Err("Host must be 127.0.0.1:<port>, localhost:<port> or [::1]:<port>"),
    };
    if !matches!(name, "127.0.0.1" | "localhost" | "[::1]") || p != port.to_string() {
        return Err("Host must be 127.0.0.1:<port>, localhost:<port> or [::1]:<port>");
    }
    Ok(host.to_owned())
}

/// An `Origin`, when sent, must be the console's own; `Sec-Fetch-Site`,
/// when sent, must not say another site made the request.
fn checked_origin<B>(req: &Request<B>, host: &str) -> Result<(), &'static str> {
    if let Some(origin) = req.headers().get(header::ORIGIN)
        && origin.to_str().ok() != Some(&format!("http://{host}"))
    {
        return Err("Origin is not the console's own");
    }
    let site = req
        .headers()
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok());
    if site.is_some_and(|s| s == "cross-site" || s == "same-site") {
        return Err("the request came from another site");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(headers: &[(&str, &str)]) -> Request<()> {
        let mut b = Request::builder().uri("/");
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).unwrap()
    }

    #[test]
    fn the_host_names_loopback_and_the_console_port() {
        for ok in ["127.0.0.1:8398", "localhost:8398", "[::1]:8398"] {
            assert_eq!(checked_host(&req(&[("host", ok)]), 8398).as_deref(), Ok(ok));
        }
        for bad in [
            "127.0.0.1",
            "127.0.0.1:8399",
            "evil.example:8398",
            "127.0.0.1.evil.example:8398",
            "localhost.:8398",
            "",
        ] {
            assert!(checked_host(&req(&[("host", bad)]), 8398).is_err(), "{bad}");
        }
        assert!(checked_host(&req(&[]), 8398).is_err());
    }

    #[test]
    fn the_origin_is_the_consoles_own_and_no_other_site_sent_it() {
        let host = "127.0.0.1:8398";
        assert!(checked_origin(&req(&[]), host).is_ok());
        assert!(checked_origin(&req(&[("origin", "http://127.0.0.1:8398")]), host).is_ok());
        for bad in [
            "http://localhost:8398",
            "https://127.0.0.1:8398",
            "http://127.0.0.1:8399",
            "null",
        ] {
            assert!(
                checked_origin(&req(&[("origin", bad)]), host).is_err(),
                "{bad}"
            );
        }
        for site in ["cross-site", "same-site"] {
            assert!(checked_origin(&req(&[("sec-fetch-site", site)]), host).is_err());
        }
        assert!(checked_origin(&req(&[("sec-fetch-site", "same-origin")]), host).is_ok());
        assert!(checked_origin(&req(&[("sec-fetch-site", "none")]), host).is_ok());
    }
}
