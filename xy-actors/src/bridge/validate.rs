//! What a 2026-era server must refuse before it serves a request (SPEC §19,
//! MCP 2026-07-28 "Request Metadata" and "Server Validation"), checked on
//! the endpoint's HTTP side for every bridge and gateway route to one:
//! which POSTs are in 2026 form, a missing or malformed `_meta` envelope
//! (`400`, `-32602`) or a malformed MRTR retry (`inputResponses`,
//! `requestState`: `400`, `-32602`), headers that disagree with the body (`400`,
//! `-32020`), and the methods the 2026 era removed (`404`, `-32601`).
//! The version itself (`-32022`) is the BridgeActor's to check: the
//! versions it lists are the child's. Pure functions over the headers and
//! the parsed body.

use base64::Engine as _;
use hyper::StatusCode;
use serde_json::{Value, json};
use xy_core::protocol::mcp::wire;

use xy_core::protocol::mcp::wire::VERSION_2026;

/// The standard headers a 2026-era POST mirrors its body in.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Mirrored<'a> {
    /// `MCP-Protocol-Version`.
    pub(crate) version: Option<&'a str>,
    /// `Mcp-Method`.
    pub(crate) method: Option<&'a str>,
    /// `Mcp-Name`.
    pub(crate) name: Option<&'a str>,
}

/// A request refused before it reaches the BridgeActor.
#[derive(Debug, PartialEq)]
pub(crate) struct Refusal {
    pub(crate) status: StatusCode,
    pub(crate) body: Value,
}

/// The methods the 2026 era removed (2026-07-28 changelog): sent in 2026
/// form they are unknown methods.
pub(crate) const REMOVED: [&str; 5] = [
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// Whether a POST is in 2026 form: its `MCP-Protocol-Version` header names
/// a 2026-era version (a date from `2026-07-28` on), or its body carries
/// `_meta` with a protocol version. Everything else is served as the 2025
/// era (an unknown header there is the 2025 transport's `400`).
pub(crate) fn is_2026_form(header_version: Option<&str>, msg: &Value) -> bool {
    header_version.is_some_and(|v| dated(v.trim()) && v.trim() >= VERSION_2026)
        || msg
            .get("params")
            .and_then(|p| p.get("_meta"))
            .and_then(Value::as_object)
            .is_some_and(|m| m.contains_key(wire::META_PROTOCOL_VERSION))
}

/// `YYYY-MM-DD` (MCP versions are dates, which compare as text).
fn dated(v: &str) -> bool {
    v.len() == 10
        && v.bytes().enumerate().all(|(i, b)| {
            if i == 4 || i == 7 {
                b == b'-'
            } else {
                b.is_ascii_digit()
            }
        })
}

/// The `_meta` keys trace context travels in (2026-07-28 "`_meta`": the
/// OpenTelemetry exception to the key-prefix rule), which are also the
/// W3C Trace Context header names.
pub(crate) const TRACE_KEYS: [&str; 2] = ["traceparent", "tracestate"];

/// Checks a message in 2026 form. Requests must carry the envelope and
/// mirror their method (and name) in the headers; a notification's headers,
/// when sent, must agree with it; answers to server requests carry neither.
pub(crate) fn check_2026(h: Mirrored<'_>, msg: &Value) -> Result<(), Refusal> {
    let Some(method) = msg.get("method").and_then(Value::as_str) else {
        return Ok(());
    };
    let id = msg.get("id").cloned().unwrap_or(Value::Null);
    let request = msg.get("id").is_some();
    let meta = msg.pointer("/params/_meta");
    let meta_version = meta.and_then(|m| m.get(wire::META_PROTOCOL_VERSION));
    if request {
        envelope(msg, &id)?;
        retry_params(msg, method, &id)?;
    }
    // The version header mirrors `_meta`'s (checked above to be a string).
    if let Some(body) = meta_version.and_then(Value::as_str) {
        match h.version.map(str::trim) {
            None => return Err(mismatch(&id, "the MCP-Protocol-Version header is missing")),
            Some(head) if head != body => {
                return Err(mismatch(
                    &id,
                    &format!(
                        "the MCP-Protocol-Version header value {head:?} does not match \
                         _meta's {body:?}"
                    ),
                ));
            }
            Some(_) => {}
        }
    }
    match h.method.map(str::trim) {
        None if request => return Err(mismatch(&id, "the Mcp-Method header is missing")),
        Some(head) if head != method => {
            return Err(mismatch(
                &id,
                &format!(
                    "the Mcp-Method header value {head:?} does not match the body's {method:?}"
                ),
            ));
        }
        _ => {}
    }
    if request {
        name(h.name, msg, method, &id)?;
        if REMOVED.contains(&method) {
            return Err(Refusal {
                status: StatusCode::NOT_FOUND,
                body: error(
                    &id,
                    wire::METHOD_NOT_FOUND,
                    &format!("method not found: {method} is not a method of the 2026 era"),
                ),
            });
        }
    }
    Ok(())
}

/// `params._meta` must be an object carrying the protocol version (a
/// string) and the client's capabilities (an object); `clientInfo` is
/// optional (a SHOULD).
fn envelope(msg: &Value, id: &Value) -> Result<(), Refusal> {
    let invalid = |why: &str| Refusal {
        status: StatusCode::BAD_REQUEST,
        body: error(id, wire::INVALID_PARAMS, &format!("invalid params: {why}")),
    };
    let params = msg.get("params");
    if params.is_some_and(|p| !p.is_object()) {
        return Err(invalid("params must be an object"));
    }
    let Some(meta) = params.and_then(|p| p.get("_meta")) else {
        return Err(invalid("a 2026-era request carries _meta"));
    };
    let Some(meta) = meta.as_object() else {
        return Err(invalid("_meta must be an object"));
    };
    match meta.get(wire::META_PROTOCOL_VERSION) {
        Some(Value::String(_)) => {}
        Some(_) => return Err(invalid("_meta's protocolVersion must be a string")),
        None => {
            return Err(invalid(&format!(
                "_meta lacks {}",
                wire::META_PROTOCOL_VERSION
            )));
        }
    }
    match meta.get(wire::META_CLIENT_CAPABILITIES) {
        Some(Value::Object(_)) => {}
        Some(_) => return Err(invalid("_meta's clientCapabilities must be an object")),
        None => {
            return Err(invalid(&format!(
                "_meta lacks {}",
                wire::META_CLIENT_CAPABILITIES
            )));
        }
    }
    match meta.get(wire::META_CLIENT_INFO) {
        None | Some(Value::Object(_)) => Ok(()),
        Some(_) => Err(invalid("_meta's clientInfo must be an object")),
    }
}

/// A retry's MRTR fields (SEP-2322), where a request may carry them:
/// `inputResponses` an object of result objects, `requestState` a string.
/// Checked here, before the firewall or the child: a malformed retry is a
/// protocol error (`-32602`) whatever the tool, as an SDK server's own
/// parameter validation answers it.
fn retry_params(msg: &Value, method: &str, id: &Value) -> Result<(), Refusal> {
    if !matches!(method, "tools/call" | "prompts/get" | "resources/read") {
        return Ok(());
    }
    let invalid = |why: &str| Refusal {
        status: StatusCode::BAD_REQUEST,
        body: error(id, wire::INVALID_PARAMS, &format!("invalid params: {why}")),
    };
    let Some(params) = msg.get("params") else {
        return Ok(());
    };
    match params.get("inputResponses") {
        None => {}
        Some(Value::Object(answers)) => {
            if let Some((key, _)) = answers.iter().find(|(_, v)| !v.is_object()) {
                return Err(invalid(&format!(
                    "inputResponses[{key:?}] must be a result object"
                )));
            }
        }
        Some(_) => return Err(invalid("inputResponses must be an object")),
    }
    match params.get("requestState") {
        None | Some(Value::String(_)) => Ok(()),
        Some(_) => Err(invalid("requestState must be a string")),
    }
}

/// `Mcp-Name` mirrors `params.name` (`tools/call`, `prompts/get`) or
/// `params.uri` (`resources/read`), Base64-wrapped when it is not plain
/// ASCII; a header for a method without one is ignored.
fn name(header: Option<&str>, msg: &Value, method: &str, id: &Value) -> Result<(), Refusal> {
    let field = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        _ => return Ok(()),
    };
    let Some(body) = msg
        .pointer(&format!("/params/{field}"))
        .and_then(Value::as_str)
    else {
        return Ok(());
    };
    let Some(header) = header else {
        return Err(mismatch(id, "the Mcp-Name header is missing"));
    };
    let Some(decoded) = decode(header.trim()) else {
        return Err(mismatch(id, "the Mcp-Name header is not valid Base64"));
    };
    if decoded != body {
        return Err(mismatch(
            id,
            &format!("the Mcp-Name header value {decoded:?} does not match the body's {body:?}"),
        ));
    }
    Ok(())
}

/// A header value as text: `=?base64?…?=` decoded (standard alphabet,
/// padded, UTF-8), anything else literal; `None` for a broken encoding.
pub(crate) fn decode(v: &str) -> Option<String> {
    let Some(inner) = v
        .strip_prefix("=?base64?")
        .and_then(|r| r.strip_suffix("?="))
    else {
        return Some(v.to_owned());
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(inner)
        .ok()?;
    String::from_utf8(bytes).ok()
}

fn mismatch(id: &Value, why: &str) -> Refusal {
    Refusal {
        status: StatusCode::BAD_REQUEST,
        body: error(
            id,
            wire::HEADER_MISMATCH,
            &format!("header mismatch: {why}"),
        ),
    }
}

fn error(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// The HTTP status of a JSON-RPC error answering a 2026-form request
/// (2026-07-28 Streamable HTTP): an unknown method is `404`; the
/// protocol's own refusals (header mismatch, a missing client capability,
/// an unsupported version) are `400`. Anything else is an answer (`200`).
pub(crate) fn status_of_error(code: i64) -> StatusCode {
    match code {
        wire::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        wire::HEADER_MISMATCH | wire::MISSING_CAPABILITY | wire::UNSUPPORTED_VERSION => {
            StatusCode::BAD_REQUEST
        }
        _ => StatusCode::OK,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = "2026-07-28";

    fn meta() -> Value {
        json!({
            wire::META_PROTOCOL_VERSION: VALID,
            wire::META_CLIENT_CAPABILITIES: {},
            wire::META_CLIENT_INFO: {"name": "t", "version": "1"},
        })
    }

    fn req(method: &str, params: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
    }

    fn heads<'a>(method: &'a str, name: Option<&'a str>) -> Mirrored<'a> {
        Mirrored {
            version: Some(VALID),
            method: Some(method),
            name,
        }
    }

    #[track_caller]
    fn refused(r: Result<(), Refusal>, status: u16, code: i64) -> Value {
        let r = r.expect_err("refused");
        assert_eq!(r.status.as_u16(), status, "{:?}", r.body);
        assert_eq!(r.body["error"]["code"], code, "{:?}", r.body);
        assert_eq!(r.body["id"], 7, "the request's id: {:?}", r.body);
        r.body
    }

    #[test]
    fn the_2026_form_is_the_header_or_the_meta_version() {
        let plain = req("tools/list", json!({}));
        assert!(!is_2026_form(None, &plain));
        assert!(!is_2026_form(Some("2025-11-25"), &plain));
        assert!(is_2026_form(Some(VALID), &plain));
        assert!(is_2026_form(Some("2027-01-01"), &plain));
        assert!(
            !is_2026_form(Some("v999.0.0"), &plain),
            "not a date: the 2025 transport's 400"
        );
        assert!(!is_2026_form(Some("banana"), &plain));
        assert!(is_2026_form(
            None,
            &req("tools/list", json!({"_meta": meta()}))
        ));
        let token_only = req("tools/call", json!({"_meta": {"progressToken": 1}}));
        assert!(!is_2026_form(Some("2025-06-18"), &token_only));
    }

    #[test]
    fn a_valid_request_passes() {
        let m = req("tools/call", json!({"name": "echo", "_meta": meta()}));
        assert_eq!(check_2026(heads("tools/call", Some("echo")), &m), Ok(()));
        // clientInfo is a SHOULD; whitespace around header values is not part of them.
        let mut bare = meta();
        bare.as_object_mut().unwrap().remove(wire::META_CLIENT_INFO);
        let m = req("tools/call", json!({"name": "echo", "_meta": bare}));
        assert_eq!(
            check_2026(heads(" tools/call ", Some("  echo  ")), &m),
            Ok(())
        );
    }

    #[test]
    fn a_missing_or_invalid_envelope_is_400_invalid_params() {
        for params in [
            json!({}),
            json!({"_meta": "x"}),
            json!({"_meta": {wire::META_CLIENT_CAPABILITIES: {}}}),
            json!({"_meta": {wire::META_PROTOCOL_VERSION: VALID}}),
            json!({"_meta": {wire::META_PROTOCOL_VERSION: 2026, wire::META_CLIENT_CAPABILITIES: {}}}),
            json!({"_meta": {wire::META_PROTOCOL_VERSION: VALID, wire::META_CLIENT_CAPABILITIES: []}}),
            json!([]),
        ] {
            refused(
                check_2026(heads("tools/list", None), &req("tools/list", params)),
                400,
                -32602,
            );
        }
        let none = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"});
        refused(check_2026(heads("tools/list", None), &none), 400, -32602);
    }

    #[test]
    fn a_malformed_retry_is_400_invalid_params_and_a_good_one_passes() {
        let call = |extra: Value| {
            let mut p = json!({"name": "ask", "_meta": meta()});
            for (k, v) in extra.as_object().unwrap() {
                p[k] = v.clone();
            }
            req("tools/call", p)
        };
        let h = heads("tools/call", Some("ask"));
        for bad in [
            json!({"inputResponses": {"user_name": 12345}}),
            json!({"inputResponses": null}),
            json!({"inputResponses": []}),
            json!({"inputResponses": {"k": {}}, "requestState": 3}),
        ] {
            refused(check_2026(h, &call(bad)), 400, -32602);
        }
        let good = json!({"inputResponses": {"k": {"action": "accept"}}, "requestState": "s"});
        assert_eq!(check_2026(h, &call(good)), Ok(()));
        // Only where a retry can be: elsewhere the fields are the method's own business.
        let list = req("tools/list", json!({"_meta": meta(), "inputResponses": 1}));
        assert_eq!(check_2026(heads("tools/list", None), &list), Ok(()));
    }

    #[test]
    fn headers_that_disagree_with_the_body_are_400_header_mismatch() {
        let list = req("tools/list", json!({"_meta": meta()}));
        refused(check_2026(heads("prompts/list", None), &list), 400, -32020);
        refused(check_2026(heads("TOOLS/LIST", None), &list), 400, -32020);
        let no_method = Mirrored {
            method: None,
            ..heads("", None)
        };
        refused(check_2026(no_method, &list), 400, -32020);
        // The version header against _meta's, and a missing one.
        let mut odd = meta();
        odd[wire::META_PROTOCOL_VERSION] = json!("v999.0.0");
        let m = req("server/discover", json!({"_meta": odd}));
        refused(check_2026(heads("server/discover", None), &m), 400, -32020);
        let m = req("server/discover", json!({"_meta": meta()}));
        let no_version = Mirrored {
            version: None,
            ..heads("server/discover", None)
        };
        refused(check_2026(no_version, &m), 400, -32020);
        // Mcp-Name: missing, different, broken Base64.
        let call = req("tools/call", json!({"name": "echo", "_meta": meta()}));
        refused(check_2026(heads("tools/call", None), &call), 400, -32020);
        refused(
            check_2026(heads("tools/call", Some("wrong")), &call),
            400,
            -32020,
        );
        refused(
            check_2026(heads("tools/call", Some("=?base64?ZWNo?=")), &call),
            400,
            -32020,
        );
        let read = req(
            "resources/read",
            json!({"uri": "file:///a", "_meta": meta()}),
        );
        refused(
            check_2026(heads("resources/read", Some("file:///b")), &read),
            400,
            -32020,
        );
        assert_eq!(
            check_2026(heads("resources/read", Some("file:///a")), &read),
            Ok(())
        );
    }

    #[test]
    fn a_base64_name_is_decoded_before_it_is_compared() {
        let call = req("tools/call", json!({"name": "héllo", "_meta": meta()}));
        let wrapped = format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode("héllo")
        );
        assert_eq!(
            check_2026(heads("tools/call", Some(&wrapped)), &call),
            Ok(())
        );
        assert_eq!(decode("plain").as_deref(), Some("plain"));
        assert_eq!(decode("=?base64?SGVsbG8?="), None, "unpadded");
        assert_eq!(decode("=?base64?SGVs!!!bG8=?="), None);
    }

    #[test]
    fn removed_methods_in_2026_form_are_404_method_not_found() {
        for m in REMOVED {
            let body = refused(
                check_2026(heads(m, None), &req(m, json!({"_meta": meta()}))),
                404,
                -32601,
            );
            assert!(body["error"]["message"].as_str().unwrap().contains(m));
        }
    }

    #[test]
    fn notifications_and_answers_need_no_envelope() {
        let note = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 1}});
        assert_eq!(check_2026(Mirrored::default(), &note), Ok(()));
        let wrong = Mirrored {
            method: Some("tools/list"),
            ..Mirrored::default()
        };
        let r = check_2026(wrong, &note).expect_err("a header that names another method");
        assert_eq!(r.body["error"]["code"], -32020);
        let answer = json!({"jsonrpc": "2.0", "id": "s1", "result": {}});
        assert_eq!(check_2026(wrong, &answer), Ok(()));
    }

    #[test]
    fn error_statuses() {
        assert_eq!(status_of_error(-32601), StatusCode::NOT_FOUND);
        for c in [-32020, -32021, -32022] {
            assert_eq!(status_of_error(c), StatusCode::BAD_REQUEST);
        }
        assert_eq!(status_of_error(-32603), StatusCode::OK);
        assert_eq!(status_of_error(-32602), StatusCode::OK);
    }
}
