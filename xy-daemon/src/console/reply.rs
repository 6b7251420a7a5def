//! The console's answers: the headers every one carries (a strict
//! Content-Security-Policy with Trusted Types, no CORS header ever, no
//! caching, no framing, no sniffing), whole bodies and streamed ones.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Frame;
use hyper::header::{self, HeaderValue};
use hyper::{Response, StatusCode};
use serde_json::Value;
use tokio::sync::mpsc;
use xy_actors::ConsoleBody;

/// The policy on every answer: only the console's own files run, no
/// inline script or style, no plugin, no frame, no `<base>`, and every
/// sink that turns a string into markup (`innerHTML` and the like) throws
/// (Trusted Types), so a server's text can only ever be text.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'; require-trusted-types-for 'script'; trusted-types 'none'";

/// The headers every answer carries; `mime` is its content type.
pub(crate) fn with_headers(
    mut r: Response<ConsoleBody>,
    mime: &'static str,
) -> Response<ConsoleBody> {
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(mime));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    h.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("same-origin"),
    );
    r
}

pub(crate) fn full(b: Bytes) -> ConsoleBody {
    Full::new(b)
        .map_err(|e: Infallible| match e {})
        .boxed_unsync()
}

pub(crate) fn text(status: StatusCode, msg: &str) -> Response<ConsoleBody> {
    let mut r = Response::new(full(Bytes::from(format!("{msg}\n"))));
    *r.status_mut() = status;
    with_headers(r, "text/plain; charset=utf-8")
}

pub(crate) fn json_answer(status: StatusCode, v: &Value) -> Response<ConsoleBody> {
    let mut r = Response::new(full(Bytes::from(
        serde_json::to_vec(v).expect("a Value serialises"),
    )));
    *r.status_mut() = status;
    with_headers(r, "application/json")
}

/// A `200` whose body is JSON written elsewhere (the daemon's answer line).
pub(crate) fn json_bytes(json: Vec<u8>) -> Response<ConsoleBody> {
    with_headers(Response::new(full(Bytes::from(json))), "application/json")
}

/// A streamed answer: one JSON value per line, as the sender produces them.
pub(crate) fn ndjson_stream(rx: mpsc::Receiver<Bytes>) -> Response<ConsoleBody> {
    let r = Response::new(Lines(rx).boxed_unsync());
    with_headers(r, "application/x-ndjson")
}

/// A body fed from a channel; dropping it (the page went away) closes the
/// channel, which ends the task that feeds it.
struct Lines(mpsc::Receiver<Bytes>);

impl hyper::body::Body for Lines {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.0.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b))))
    }
}
