//! The upstream's credential handling against a loopback HTTP server: one
//! retry after a `401` with the supplier told once, the client's own
//! credentials and `Host` never forwarded, and a supplier's failure
//! reported to the actor and returned at once.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderMap, HeaderValue};
use hyper::{Method, Request, Response};
use xy_core::config::RemoteConfig;

use super::*;
use crate::credentials::{BoxFuture, CredentialError, Credentials};

/// What the server saw of each request: its `Authorization`, `Cookie`, `Host`.
type Seen = Arc<Mutex<Vec<(Option<String>, Option<String>, Option<String>)>>>;

/// A server that answers `200` only to `Authorization: Bearer fresh`.
async fn server() -> (String, Seen) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen: Seen = Arc::default();
    let log = Arc::clone(&seen);
    tokio::spawn(async move {
        loop {
            let (s, _) = listener.accept().await.unwrap();
            let log = Arc::clone(&log);
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                    let log = Arc::clone(&log);
                    async move {
                        let h = |n: &str| {
                            req.headers()
                                .get(n)
                                .and_then(|v| v.to_str().ok())
                                .map(str::to_owned)
                        };
                        let auth = h("authorization");
                        log.lock()
                            .unwrap()
                            .push((auth.clone(), h("cookie"), h("host")));
                        let ok = auth.as_deref() == Some("Bearer fresh");
                        let mut r = Response::new(Full::new(Bytes::from_static(if ok {
                            b"{\"ok\":true}"
                        } else {
                            b""
                        })));
                        if !ok {
                            *r.status_mut() = hyper::StatusCode::UNAUTHORIZED;
                            r.headers_mut().insert(
                                "www-authenticate",
                                HeaderValue::from_static("Bearer error=\"invalid_token\""),
                            );
                        }
                        Ok::<_, Infallible>(r)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(s), svc)
                    .await;
            });
        }
    });
    (format!("http://{addr}/mcp"), seen)
}

/// A supplier holding `token`; a rejection turns it into `fresh` (or
/// fails with `refuse`), counted.
struct Fake {
    token: Mutex<String>,
    rejected: Mutex<Vec<(u16, Option<String>)>>,
    refuse: Option<CredentialError>,
}

impl Credentials for Fake {
    fn headers(&self) -> BoxFuture<'_, Result<HeaderMap, CredentialError>> {
        let t = self.token.lock().unwrap().clone();
        Box::pin(async move {
            let mut h = HeaderMap::new();
            h.insert("authorization", HeaderValue::from_str(&t).unwrap());
            Ok(h)
        })
    }

    fn rejected(
        &self,
        status: u16,
        www_authenticate: Option<String>,
        _sent: Option<HeaderValue>,
    ) -> BoxFuture<'_, Result<(), CredentialError>> {
        self.rejected
            .lock()
            .unwrap()
            .push((status, www_authenticate));
        let out = match &self.refuse {
            Some(e) => Err(e.clone()),
            None => {
                *self.token.lock().unwrap() = "Bearer fresh".to_owned();
                Ok(())
            }
        };
        Box::pin(async move { out })
    }
}

fn fake(token: &str, refuse: Option<CredentialError>) -> Arc<Fake> {
    Arc::new(Fake {
        token: Mutex::new(token.to_owned()),
        rejected: Mutex::default(),
        refuse,
    })
}

fn upstream(url: &str, creds: Arc<dyn Credentials>) -> (Upstream, Arc<Mutex<Vec<UpstreamEvent>>>) {
    let events: Arc<Mutex<Vec<UpstreamEvent>>> = Arc::default();
    let log = Arc::clone(&events);
    let remote = RemoteConfig {
        url: url.to_owned(),
        headers: vec![],
        auth: None,
    };
    let up = Upstream::new(
        "far",
        &remote,
        HeaderMap::new(),
        Some(creds),
        Arc::new(move |e| log.lock().unwrap().push(e)),
    )
    .unwrap();
    (up, events)
}

fn client_headers() -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        "authorization",
        HeaderValue::from_static("Bearer client-own"),
    );
    h.insert("cookie", HeaderValue::from_static("sid=client"));
    h.insert("host", HeaderValue::from_static("127.0.0.1:8399"));
    h.insert("content-type", HeaderValue::from_static("application/json"));
    h
}

#[tokio::test]
async fn a_401_is_told_once_and_retried_once_without_the_clients_credentials() {
    let (url, seen) = server().await;
    let creds = fake("Bearer stale", None);
    let (up, events) = upstream(&url, creds.clone());
    let r = up
        .send(
            Method::POST,
            None,
            &client_headers(),
            Bytes::from_static(b"{}"),
        )
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body = r.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&body[..], b"{\"ok\":true}");
    assert_eq!(
        *creds.rejected.lock().unwrap(),
        [(401, Some("Bearer error=\"invalid_token\"".to_owned()))]
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    let host = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    for (i, want) in ["Bearer stale", "Bearer fresh"].iter().enumerate() {
        assert_eq!(seen[i].0.as_deref(), Some(*want));
        assert_eq!(seen[i].1, None, "the client's cookie went upstream");
        assert_eq!(seen[i].2.as_deref(), Some(host.as_str()));
    }
    assert_eq!(*events.lock().unwrap(), [UpstreamEvent::Answered]);
}

#[tokio::test]
async fn a_second_401_is_the_answer_not_a_loop() {
    let (url, seen) = server().await;
    // The fresh token is refused as well: the server never accepts it.
    let creds = fake("Bearer stale", None);
    *creds.token.lock().unwrap() = "Bearer other".to_owned();
    struct Stubborn(Arc<Fake>);
    impl Credentials for Stubborn {
        fn headers(&self) -> BoxFuture<'_, Result<HeaderMap, CredentialError>> {
            self.0.headers()
        }
        fn rejected(
            &self,
            status: u16,
            w: Option<String>,
            _sent: Option<HeaderValue>,
        ) -> BoxFuture<'_, Result<(), CredentialError>> {
            self.0.rejected.lock().unwrap().push((status, w));
            Box::pin(async { Ok(()) })
        }
    }
    let (up, _) = upstream(&url, Arc::new(Stubborn(creds.clone())));
    let r = up
        .send(Method::POST, None, &HeaderMap::new(), Bytes::new())
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(creds.rejected.lock().unwrap().len(), 1);
    assert_eq!(seen.lock().unwrap().len(), 2);
}

/// A retry refused as well goes to the supplier, with the token each try
/// carried; its verdict (a login needed) is what the caller gets, not the
/// bare `401`.
#[tokio::test]
async fn a_refused_retry_is_the_suppliers_to_judge() {
    let (url, seen) = server().await;
    struct Judge {
        tries: Mutex<Vec<(&'static str, Option<HeaderValue>)>>,
    }
    impl Credentials for Judge {
        fn headers(&self) -> BoxFuture<'_, Result<HeaderMap, CredentialError>> {
            let mut h = HeaderMap::new();
            h.insert("authorization", HeaderValue::from_static("Bearer other"));
            Box::pin(async move { Ok(h) })
        }
        fn rejected(
            &self,
            _status: u16,
            _w: Option<String>,
            sent: Option<HeaderValue>,
        ) -> BoxFuture<'_, Result<(), CredentialError>> {
            self.tries.lock().unwrap().push(("rejected", sent));
            Box::pin(async { Ok(()) })
        }
        fn rejected_again(
            &self,
            _status: u16,
            _w: Option<String>,
            sent: Option<HeaderValue>,
        ) -> BoxFuture<'_, Result<(), CredentialError>> {
            self.tries.lock().unwrap().push(("again", sent));
            Box::pin(async {
                Err(CredentialError::LoginNeeded {
                    server: "far".into(),
                    reason: Some("refused twice".into()),
                })
            })
        }
    }
    let judge = Arc::new(Judge {
        tries: Mutex::default(),
    });
    let (up, events) = upstream(&url, judge.clone());
    let e = up
        .send(Method::POST, None, &HeaderMap::new(), Bytes::new())
        .await
        .unwrap_err();
    let text = match e {
        UpstreamError::Credentials(e) => e.to_string(),
        other => panic!("{other:?}"),
    };
    assert_eq!(text, "login needed: xyctl auth login far (refused twice)");
    let other = Some(HeaderValue::from_static("Bearer other"));
    assert_eq!(
        *judge.tries.lock().unwrap(),
        [("rejected", other.clone()), ("again", other)]
    );
    assert_eq!(seen.lock().unwrap().len(), 2);
    assert!(
        events
            .lock()
            .unwrap()
            .contains(&UpstreamEvent::CredentialsFailed(text)),
        "{events:?}"
    );
}

#[tokio::test]
async fn a_login_needed_is_reported_and_returned_at_once() {
    let (url, seen) = server().await;
    let creds = fake(
        "Bearer stale",
        Some(CredentialError::LoginNeeded {
            server: "far".into(),
            reason: None,
        }),
    );
    let (up, events) = upstream(&url, creds);
    let started = std::time::Instant::now();
    let e = up
        .send(Method::POST, None, &HeaderMap::new(), Bytes::new())
        .await
        .unwrap_err();
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    match e {
        UpstreamError::Credentials(e) => {
            assert_eq!(e.to_string(), "login needed: xyctl auth login far");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(seen.lock().unwrap().len(), 1);
    assert_eq!(
        *events.lock().unwrap(),
        [
            UpstreamEvent::Answered,
            UpstreamEvent::CredentialsFailed("login needed: xyctl auth login far".into())
        ]
    );
    // The gateway's answer to a tool call: a tool error with the message.
    let body = Bytes::from_static(
        br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x"}}"#,
    );
    let r = crate::gateway::proxy::credentials_answer(
        "login needed: xyctl auth login far",
        &body,
        &HeaderMap::new(),
    );
    let v: serde_json::Value =
        serde_json::from_slice(&r.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!(v["id"], 3);
    assert_eq!(v["result"]["isError"], true);
}

#[test]
fn static_headers_come_from_the_resolved_secrets_and_are_sensitive() {
    use xy_core::config::{HeaderSpec, HeaderValueSpec};
    let specs = vec![
        HeaderSpec {
            name: "Authorization".into(),
            value: HeaderValueSpec::Secret("TOKEN".into()),
        },
        HeaderSpec {
            name: "X-Team".into(),
            value: HeaderValueSpec::Literal("core".into()),
        },
    ];
    let resolved = vec![crate::secrets::Resolved {
        name: "TOKEN".into(),
        value: "Bearer abc".into(),
    }];
    let map = header_map(&specs, &resolved).unwrap();
    assert_eq!(map["authorization"], "Bearer abc");
    assert!(map["authorization"].is_sensitive());
    assert_eq!(map["x-team"], "core");
    let e = header_map(&specs, &[]).unwrap_err();
    assert!(e.contains("TOKEN") && !e.contains("abc"), "{e}");
}

#[tokio::test]
async fn without_credentials_the_clients_authorization_still_stays_behind() {
    let (url, seen) = server().await;
    let remote = RemoteConfig {
        url: url.clone(),
        headers: vec![],
        auth: None,
    };
    let up = Upstream::new("far", &remote, HeaderMap::new(), None, Arc::new(|_| {})).unwrap();
    let r = up
        .send(Method::POST, None, &client_headers(), Bytes::new())
        .await
        .unwrap();
    // No supplier: the 401 is the answer.
    assert_eq!(r.status(), 401);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!((seen[0].0.as_deref(), seen[0].1.as_deref()), (None, None));
}

/// What a forward proxy saw of each request: its target and its
/// `Proxy-Authorization`.
type ProxySeen = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// A forward proxy that answers every request itself with `200 {}`.
async fn proxy() -> (u16, ProxySeen) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen: ProxySeen = Arc::default();
    let log = Arc::clone(&seen);
    tokio::spawn(async move {
        loop {
            let (s, _) = listener.accept().await.unwrap();
            let log = Arc::clone(&log);
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                    let auth = req
                        .headers()
                        .get("proxy-authorization")
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned);
                    log.lock().unwrap().push((req.uri().to_string(), auth));
                    async {
                        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"{}"))))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(s), svc)
                    .await;
            });
        }
    });
    (port, seen)
}

fn through(url: &str, rules: &Matcher) -> Upstream {
    let remote = RemoteConfig {
        url: url.to_owned(),
        headers: vec![],
        auth: None,
    };
    Upstream::with_proxies(
        "far",
        &remote,
        HeaderMap::new(),
        None,
        Arc::new(|_| {}),
        rules,
    )
    .unwrap()
}

#[tokio::test]
async fn a_url_the_proxy_rules_name_goes_through_that_proxy_with_its_credentials() {
    let (port, seen) = proxy().await;
    let rules = Matcher::builder()
        .http(format!("http://u:p@127.0.0.1:{port}"))
        .build();
    // Not resolvable: only the proxy can answer for it.
    let up = through("http://far.invalid/mcp?configured=1", &rules);
    let r = up
        .send(
            Method::POST,
            Some("session=2"),
            &client_headers(),
            Bytes::new(),
        )
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![(
            "http://far.invalid/mcp?session=2".to_owned(),
            Some("Basic dTpw".to_owned())
        )]
    );
}

#[tokio::test]
async fn a_url_the_proxy_rules_exclude_goes_direct() {
    let (port, via_proxy) = proxy().await;
    let (url, direct) = server().await;
    let rules = Matcher::builder()
        .http(format!("http://127.0.0.1:{port}"))
        .no("127.0.0.1")
        .build();
    let remote = RemoteConfig {
        url,
        headers: vec![],
        auth: None,
    };
    let up = Upstream::with_proxies(
        "far",
        &remote,
        HeaderMap::new(),
        Some(fake("Bearer fresh", None)),
        Arc::new(|_| {}),
        &rules,
    )
    .unwrap();
    assert!(matches!(up.transport, Transport::Direct(_)));
    let r = up
        .send(Method::POST, None, &client_headers(), Bytes::new())
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(direct.lock().unwrap().len(), 1);
    assert!(via_proxy.lock().unwrap().is_empty());
}

#[tokio::test]
async fn an_unreachable_upstream_says_where_and_why() {
    let port = xy_testbins::locate::free_port();
    let up = through(
        &format!("http://127.0.0.1:{port}/mcp"),
        &Matcher::builder().build(),
    );
    let Err(UpstreamError::Unreachable(why)) = up
        .send(Method::POST, None, &HeaderMap::new(), Bytes::new())
        .await
    else {
        panic!("a closed port answered");
    };
    assert!(why.contains(&format!("127.0.0.1:{port}/mcp")), "{why}");
    assert!(why.to_lowercase().contains("connect"), "{why}");
}
