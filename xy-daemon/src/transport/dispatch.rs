//! One line in, at most one line out: JSON-RPC 2.0 envelope checks, batches,
//! notifications, and the call into the [`Handlers`] table. A line
//! is parsed once ([`parse_line`]); the transport decides from that parse
//! whether the call may wait, and the method parses only its params. Knows
//! nothing about sockets.

use std::borrow::Cow;

use jsonrpsee::types::{ErrorObject, ErrorObjectOwned, Id, Params};
use jsonrpsee::{ConnectionId, Extensions, MethodCallback, MethodResponse, MethodResponseNotifyTx};
use serde::Deserialize;
use serde_json::value::RawValue;
use xy_core::protocol::{ErrorCode, MAX_LINE_BYTES, method};

use super::OutLine;
use super::direct::Handlers;

/// What to write back for one line.
#[derive(Debug)]
pub(crate) struct Reply {
    /// One JSON value (an object, or an array for a batch).
    pub(crate) json: OutLine,
    /// Completion hooks of the responses inside (`logs` waits on these so its
    /// reply is written before its first notification).
    pub(crate) on_written: Vec<(MethodResponseNotifyTx, bool)>,
}

impl Reply {
    fn single(resp: MethodResponse) -> Reply {
        let success = resp.is_success();
        let (json, notify, _) = resp.into_parts();
        Reply {
            json: json.into(),
            on_written: notify.map(|n| (n, success)).into_iter().collect(),
        }
    }

    /// The line to send, and the hooks to fire once it is queued.
    pub(crate) fn split(self) -> (OutLine, Written) {
        (self.json, Written(self.on_written))
    }
}

/// Completion hooks of a sent reply.
#[derive(Debug)]
pub(crate) struct Written(Vec<(MethodResponseNotifyTx, bool)>);

impl Written {
    /// Tells every waiting method its response is queued ahead of anything
    /// it writes next.
    pub(crate) fn notify(self) {
        for (n, success) in self.0 {
            n.notify(success);
        }
    }
}

/// The error reply for a line longer than [`MAX_LINE_BYTES`].
pub(crate) fn line_too_long() -> Reply {
    let err = ErrorObject::owned(
        ErrorCode::InvalidRequest.code(),
        format!("request line exceeds the limit of {MAX_LINE_BYTES} bytes; the line was discarded"),
        Some(serde_json::json!({ "limit_bytes": MAX_LINE_BYTES })),
    );
    Reply::single(MethodResponse::error(Id::Null, err))
}

/// The error reply for a line that is not UTF-8.
pub(crate) fn invalid_utf8(e: &std::str::Utf8Error) -> Reply {
    let err = ErrorObject::owned(
        ErrorCode::ParseError.code(),
        format!(
            "parse error: the line is not valid UTF-8 (at byte {})",
            e.valid_up_to()
        ),
        None::<()>,
    );
    Reply::single(MethodResponse::error(Id::Null, err))
}

/// One request line, parsed once.
#[derive(Debug)]
pub(crate) enum Parsed {
    /// A blank line: nothing to do, nothing to send.
    Nothing,
    /// A line that is no request (a parse error, an empty batch, not a
    /// request object): the error reply.
    Invalid(MethodResponse),
    /// One request or notification.
    Single(Request),
    /// A batch: each item a request or its error reply.
    Batch(Vec<Result<Request, MethodResponse>>),
}

/// One parsed request envelope, owning its parts (it may move to a task).
#[derive(Debug)]
pub(crate) struct Request {
    /// `Some(Id::Null)` for `"id": null`, `None` when absent (a notification).
    /// [`VERBATIM_ID`] when the id is in `verbatim_id`.
    id: Option<Id<'static>>,
    /// An id jsonrpsee's [`Id`] cannot hold (a negative or fractional
    /// number: JSON-RPC 2.0 allows any number), echoed as it came.
    verbatim_id: Option<Box<RawValue>>,
    jsonrpc: bool,
    method: Method,
    /// The params as they came, for the method to parse into its type.
    params: Option<Box<RawValue>>,
}

/// The `method` member of a request.
#[derive(Debug)]
enum Method {
    Missing,
    NotAString,
    Name(String),
}

impl Method {
    fn name(&self) -> Option<&str> {
        match self {
            Method::Name(n) => Some(n),
            Method::Missing | Method::NotAString => None,
        }
    }
}

/// Stands in for a [`Request::verbatim_id`] while the method runs; the
/// reply's id is swapped back before it is sent ([`restore_id`]).
const VERBATIM_ID: &str = "\u{0}xy-verbatim-id\u{0}";

/// Parses one complete line (without its newline).
pub(crate) fn parse_line(line: &str) -> Parsed {
    let text = line.trim();
    if text.is_empty() {
        return Parsed::Nothing;
    }
    if !text.starts_with('[') {
        return match parse_request(text) {
            Ok(r) => Parsed::Single(r),
            Err(e) => Parsed::Invalid(e),
        };
    }
    // A batch's items are scanned twice (as raw values, then each as an
    // envelope): batches are rare, and this keeps one bad item from
    // failing the others.
    let items: Vec<&RawValue> = match serde_json::from_str(text) {
        Ok(items) => items,
        Err(e) => return Parsed::Invalid(parse_error(&e)),
    };
    if items.is_empty() {
        let err = ErrorObject::owned(
            ErrorCode::InvalidRequest.code(),
            "invalid request: empty batch",
            None::<()>,
        );
        return Parsed::Invalid(MethodResponse::error(Id::Null, err));
    }
    Parsed::Batch(items.into_iter().map(|i| parse_request(i.get())).collect())
}

impl Parsed {
    /// Whether the line calls a method that waits on a process lifecycle (a
    /// spawn, a grace period, a whole reload). Such requests run beside the
    /// reader so later requests on the connection are not held up (a
    /// `status` while a `stop` waits out its grace period, SPEC §4); every
    /// other line is answered in order before the next is read.
    pub(crate) fn may_wait(&self) -> bool {
        let waits = |r: &Request| {
            matches!(
                r.method.name(),
                Some(
                    method::START
                        | method::STOP
                        | method::RESTART
                        | method::RELOAD
                        | method::SHUTDOWN
                )
            )
        };
        match self {
            Parsed::Single(r) => waits(r),
            Parsed::Batch(items) => items.iter().flatten().any(waits),
            Parsed::Nothing | Parsed::Invalid(_) => false,
        }
    }
}

/// Handles one parsed line. `None`: nothing to send (a blank line, a
/// notification, a batch of notifications).
pub(crate) async fn handle(
    methods: &Handlers,
    conn: ConnectionId,
    ext: &Extensions,
    parsed: Parsed,
) -> Option<Reply> {
    match parsed {
        Parsed::Nothing => None,
        Parsed::Invalid(resp) => Some(Reply::single(resp)),
        Parsed::Single(r) => handle_request(methods, conn, ext, r).await,
        Parsed::Batch(items) => handle_batch(methods, conn, ext, items).await,
    }
}

async fn handle_batch(
    methods: &Handlers,
    conn: ConnectionId,
    ext: &Extensions,
    items: Vec<Result<Request, MethodResponse>>,
) -> Option<Reply> {
    let mut parts = Vec::with_capacity(items.len());
    let mut on_written = Vec::new();
    for item in items {
        let reply = match item {
            Ok(r) => handle_request(methods, conn, ext, r).await,
            Err(e) => Some(Reply::single(e)),
        };
        if let Some(reply) = reply {
            parts.push(reply.json);
            on_written.extend(reply.on_written);
        }
    }
    if parts.is_empty() {
        // A batch of notifications gets no reply at all (JSON-RPC 2.0 §6).
        for (n, ok) in on_written {
            n.notify(ok);
        }
        return None;
    }
    let mut out =
        Vec::with_capacity(parts.iter().map(|p| p.as_bytes().len() + 1).sum::<usize>() + 2);
    out.push(b'[');
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(p.as_bytes());
    }
    out.push(b']');
    // An array of JSON values is JSON.
    let json = OutLine::from_json_bytes(out);
    Some(Reply { json, on_written })
}

/// The request envelope, each member as raw JSON so that a member of the
/// wrong type is an invalid request that still echoes a readable `id`
/// (JSON-RPC 2.0 §5: the id is null only when it cannot be detected).
/// A member present as `null` is `Some`; an absent one is `None`.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    jsonrpc: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&'de RawValue>::deserialize(d).map(Some)
}

/// The envelope of one request, owned; or the error reply for a value that
/// is none.
fn parse_request(text: &str) -> Result<Request, MethodResponse> {
    let env = match serde_json::from_str::<Envelope<'_>>(text) {
        Ok(env) => env,
        Err(e) => {
            // Valid JSON that is not a request object is -32600, not -32700.
            if serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok() {
                return Err(invalid_request(
                    Id::Null,
                    &format!("not a JSON-RPC request object: {e}"),
                ));
            }
            return Err(parse_error(&e));
        }
    };
    let (id, verbatim_id) = match env.id {
        None => (None, None),
        Some(raw) => match serde_json::from_str::<Id<'_>>(raw.get()) {
            Ok(id) => (Some(id.into_owned()), None),
            Err(_) if serde_json::from_str::<serde_json::Number>(raw.get()).is_ok() => (
                Some(Id::Str(Cow::Borrowed(VERBATIM_ID))),
                Some(raw.to_owned()),
            ),
            Err(_) => {
                return Err(invalid_request(
                    Id::Null,
                    "\"id\" must be a string, a number or null",
                ));
            }
        },
    };
    let jsonrpc = env
        .jsonrpc
        .and_then(|raw| serde_json::from_str::<Cow<'_, str>>(raw.get()).ok())
        .is_some_and(|v| v == "2.0");
    let method = match env.method {
        None => Method::Missing,
        Some(raw) => match serde_json::from_str::<String>(raw.get()) {
            Ok(name) => Method::Name(name),
            Err(_) => Method::NotAString,
        },
    };
    Ok(Request {
        id,
        verbatim_id,
        jsonrpc,
        method,
        params: env.params.map(RawValue::to_owned),
    })
}

async fn handle_request(
    methods: &Handlers,
    conn: ConnectionId,
    ext: &Extensions,
    mut r: Request,
) -> Option<Reply> {
    let verbatim_id = r.verbatim_id.take();
    let reply = answer(methods, conn, ext, r).await?;
    Some(match verbatim_id {
        Some(raw) => restore_id(reply, &raw),
        None => reply,
    })
}

async fn answer(
    methods: &Handlers,
    conn: ConnectionId,
    ext: &Extensions,
    r: Request,
) -> Option<Reply> {
    let Request {
        id,
        jsonrpc,
        method,
        params,
        ..
    } = r;
    if !jsonrpc {
        return Some(Reply::single(invalid_request(
            id.unwrap_or(Id::Null),
            "\"jsonrpc\" must be \"2.0\"",
        )));
    }
    let method = match method {
        Method::Name(name) => name,
        Method::Missing => {
            return Some(Reply::single(invalid_request(
                id.unwrap_or(Id::Null),
                "\"method\" is missing",
            )));
        }
        Method::NotAString => {
            return Some(Reply::single(invalid_request(
                id.unwrap_or(Id::Null),
                "\"method\" must be a string",
            )));
        }
    };
    let params = Params::new(params.as_deref().map(RawValue::get));
    let response = call(
        methods,
        conn,
        ext,
        id.clone().unwrap_or(Id::Null),
        &method,
        params,
    )
    .await;
    // A notification runs but is never answered, errors included.
    id.map(|_| response)
}

/// Puts a verbatim id back in place of [`VERBATIM_ID`]. Every reply object
/// starts `{"jsonrpc":"2.0","id":` (jsonrpsee's field order, which the
/// direct methods keep), so the placeholder sits right there.
fn restore_id(reply: Reply, raw: &RawValue) -> Reply {
    const HEAD: &[u8] = br#"{"jsonrpc":"2.0","id":"#;
    let placeholder = serde_json::to_vec(VERBATIM_ID).expect("a string serialises");
    let bytes = reply.json.as_bytes();
    let Some(rest) = bytes
        .strip_prefix(HEAD)
        .and_then(|b| b.strip_prefix(placeholder.as_slice()))
    else {
        debug_assert!(false, "reply without the placeholder id");
        return reply;
    };
    let mut out = Vec::with_capacity(bytes.len() + raw.get().len());
    out.extend_from_slice(HEAD);
    out.extend_from_slice(raw.get().as_bytes());
    out.extend_from_slice(rest);
    Reply {
        json: OutLine::from_json_bytes(out),
        on_written: reply.on_written,
    }
}

/// A direct method's reply line as it comes; otherwise jsonrpsee's method.
async fn call(
    methods: &Handlers,
    conn: ConnectionId,
    ext: &Extensions,
    id: Id<'_>,
    method: &str,
    params: Params<'_>,
) -> Reply {
    if let Some(direct) = methods.direct(method) {
        return Reply {
            json: direct(id.into_owned(), params.into_owned()).await,
            on_written: Vec::new(),
        };
    }
    let Some((_, callback)) = methods.methods.method_with_name(method) else {
        let err = ErrorObject::owned(
            ErrorCode::MethodNotFound.code(),
            format!("method not found: {method}"),
            None::<()>,
        );
        return Reply::single(MethodResponse::error(id, err));
    };
    let ext = ext.clone();
    Reply::single(match callback {
        MethodCallback::Sync(cb) => (cb)(id, params, usize::MAX, ext),
        MethodCallback::Async(cb) => {
            (cb)(id.into_owned(), params.into_owned(), conn, usize::MAX, ext).await
        }
        // xy registers no jsonrpsee subscriptions: their `{subscription,
        // result}` wrapping cannot produce the `log` notification shape.
        MethodCallback::Subscription(_) | MethodCallback::Unsubscription(_) => {
            MethodResponse::error(
                id,
                internal("subscription methods are not served over this transport"),
            )
        }
    })
}

fn parse_error(e: &serde_json::Error) -> MethodResponse {
    let err = ErrorObject::owned(
        ErrorCode::ParseError.code(),
        format!("parse error: {e}"),
        None::<()>,
    );
    MethodResponse::error(Id::Null, err)
}

fn invalid_request(id: Id<'_>, why: &str) -> MethodResponse {
    let err = ErrorObject::owned(
        ErrorCode::InvalidRequest.code(),
        format!("invalid request: {why}"),
        None::<()>,
    );
    MethodResponse::error(id, err)
}

fn internal(msg: &str) -> ErrorObjectOwned {
    ErrorObject::owned(ErrorCode::InternalError.code(), msg.to_owned(), None::<()>)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_parse_decides_waiting_and_keeps_the_params() {
        let p = parse_line(r#" {"jsonrpc":"2.0","id":7,"method":"stop","params":{"name":"a"}} "#);
        assert!(p.may_wait());
        let Parsed::Single(r) = &p else {
            panic!("{p:?}")
        };
        assert_eq!(r.id, Some(Id::Number(7)));
        assert_eq!(
            r.params.as_deref().map(RawValue::get),
            Some(r#"{"name":"a"}"#)
        );
        assert!(!parse_line(r#"{"jsonrpc":"2.0","id":1,"method":"list"}"#).may_wait());
        assert!(
            parse_line(
                r#"[{"jsonrpc":"2.0","id":1,"method":"list"},{"jsonrpc":"2.0","method":"reload"}]"#
            )
            .may_wait()
        );
        assert!(matches!(parse_line("   "), Parsed::Nothing));
        assert!(matches!(parse_line("{nope"), Parsed::Invalid(_)));
        assert!(matches!(parse_line("[]"), Parsed::Invalid(_)));
        let notification = parse_line(r#"{"jsonrpc":"2.0","method":"list"}"#);
        assert!(matches!(&notification, Parsed::Single(r) if r.id.is_none()));
        let null_id = parse_line(r#"{"jsonrpc":"2.0","id":null,"method":"list"}"#);
        assert!(matches!(&null_id, Parsed::Single(r) if r.id == Some(Id::Null)));
    }

    #[test]
    fn any_json_number_is_an_id_and_comes_back_as_it_came() {
        for raw in ["-5", "1.5", "-0", "1e3", "-18446744073709551616"] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{raw},"method":"list"}}"#);
            let Parsed::Single(r) = parse_line(&line) else {
                panic!("{raw}: not a request")
            };
            assert_eq!(r.verbatim_id.as_deref().map(RawValue::get), Some(raw));
            let reply = Reply::single(MethodResponse::error(r.id.clone().unwrap(), internal("x")));
            let back = restore_id(reply, r.verbatim_id.as_deref().unwrap());
            let text = std::str::from_utf8(back.json.as_bytes()).unwrap();
            assert!(
                text.starts_with(&format!(r#"{{"jsonrpc":"2.0","id":{raw},"error""#)),
                "{text}"
            );
        }
        // Ids jsonrpsee holds need no swap.
        let Parsed::Single(r) = parse_line(r#"{"jsonrpc":"2.0","id":"a","method":"list"}"#) else {
            panic!()
        };
        assert!(r.verbatim_id.is_none());
    }

    #[test]
    fn a_readable_id_is_echoed_when_another_member_is_wrong() {
        let Parsed::Single(r) = parse_line(r#"{"jsonrpc":"2.0","id":4,"method":5}"#) else {
            panic!()
        };
        assert_eq!(r.id, Some(Id::Number(4)));
        assert!(matches!(r.method, Method::NotAString));
        let Parsed::Single(r) = parse_line(r#"{"jsonrpc":2,"id":"x","method":"list"}"#) else {
            panic!()
        };
        assert!(!r.jsonrpc && r.id == Some(Id::Str("x".into())));
        // An id that is no string, number or null cannot be echoed.
        for line in [
            r#"{"jsonrpc":"2.0","id":true,"method":"list"}"#,
            r#"{"jsonrpc":"2.0","id":{"a":1},"method":"list"}"#,
        ] {
            assert!(matches!(parse_line(line), Parsed::Invalid(_)), "{line}");
        }
    }
}
