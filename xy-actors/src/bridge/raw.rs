//! The bridge's fast path (D49): the few fields routing needs, read from a
//! message's bytes without building a `serde_json::Value`, and the id
//! swapped in place. An ordinary request and its answer are forwarded as
//! the bytes they came in; anything else takes the `Value` path.

use std::borrow::Cow;
use std::ops::Range;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

/// The routing fields of one JSON-RPC message, borrowed from its bytes.
/// Deserialising it still checks the whole document is valid JSON.
#[derive(Deserialize)]
struct Peek<'a> {
    #[serde(borrow, default)]
    jsonrpc: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
}

/// `params._meta`, whose progress token or 2026 version needs the `Value`
/// path, and `params.name`, which the firewall decides a call by.
#[derive(Deserialize)]
struct Params<'a> {
    #[serde(rename = "_meta", borrow, default)]
    meta: Option<&'a RawValue>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
}

/// Reads the routing fields of a JSON object (`None` for anything else,
/// including a duplicate field: the `Value` path decides about those).
fn peek(bytes: &[u8]) -> Option<Peek<'_>> {
    // A struct also deserialises from a JSON array, field by field.
    if bytes.trim_ascii_start().first() != Some(&b'{') {
        return None;
    }
    // The whole text must be UTF-8, as the `Value` path demands: serde
    // skips the fields it ignores without checking them.
    let text = std::str::from_utf8(bytes).ok()?;
    serde_json::from_str(text).ok()
}

/// Where `raw` sits in `bytes` (it was borrowed from them).
fn span(bytes: &[u8], raw: &RawValue) -> Option<Range<usize>> {
    let start = (raw.get().as_ptr() as usize).checked_sub(bytes.as_ptr() as usize)?;
    let at = start..start + raw.get().len();
    (bytes.get(at.clone()) == Some(raw.get().as_bytes())).then_some(at)
}

/// A client's request that can go to the child as its own bytes.
pub(crate) struct RawRequest {
    pub(crate) bytes: Bytes,
    pub(crate) method: String,
    /// The client's id.
    pub(crate) id: Value,
    /// Where that id is in `bytes`.
    pub(crate) id_at: Range<usize>,
    /// `params.name` (a `tools/call`'s tool, a `prompts/get`'s prompt).
    pub(crate) name: Option<String>,
}

impl RawRequest {
    /// A POST body that is one JSON-RPC 2.0 request with a string or number
    /// id, on one line, and no `params._meta`; else `None`.
    pub(crate) fn parse(bytes: &Bytes) -> Option<RawRequest> {
        // The child reads one message per line.
        if memchr::memchr2(b'\n', b'\r', bytes).is_some() {
            return None;
        }
        let p = peek(bytes)?;
        if p.jsonrpc.as_deref() != Some("2.0") {
            return None;
        }
        let method = p.method?;
        let raw_id = p.id?;
        if !matches!(
            raw_id.get().as_bytes().first(),
            Some(b'"' | b'-' | b'0'..=b'9')
        ) {
            return None;
        }
        let mut name = None;
        if let Some(params) = p.params {
            if params.get().as_bytes().first() != Some(&b'{') {
                return None;
            }
            let params: Params<'_> = serde_json::from_str(params.get()).ok()?;
            if params.meta.is_some() {
                return None;
            }
            name = params.name.map(Cow::into_owned);
        }
        let id_at = span(bytes, raw_id)?;
        let id = serde_json::from_str(raw_id.get()).ok()?;
        Some(RawRequest {
            method: method.into_owned(),
            id,
            id_at,
            name,
            bytes: bytes.clone(),
        })
    }

    /// The line for the child: these bytes with xy's id for the request.
    pub(crate) fn line(&self, child_id: u64) -> Vec<u8> {
        let mut line = with_id(&self.bytes, &self.id_at, child_id.to_string().as_bytes());
        line.push(b'\n');
        line
    }
}

/// A line from the child that answers a request (no method, a whole-number
/// id): that id and where it is in the line.
pub(crate) fn answer_id(line: &[u8]) -> Option<(u64, Range<usize>)> {
    let p = peek(line)?;
    if p.method.is_some() {
        return None;
    }
    let raw_id = p.id?;
    let id = raw_id.get().parse::<u64>().ok()?;
    Some((id, span(line, raw_id)?))
}

/// `bytes` with the part at `at` replaced by `id`.
pub(crate) fn with_id(bytes: &[u8], at: &Range<usize>, id: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() - at.len() + id.len() + 1);
    out.extend_from_slice(&bytes[..at.start]);
    out.extend_from_slice(id);
    out.extend_from_slice(&bytes[at.end..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(s: &str) -> Option<RawRequest> {
        RawRequest::parse(&Bytes::copy_from_slice(s.as_bytes()))
    }

    #[test]
    fn an_ordinary_request_keeps_its_bytes_with_the_id_swapped() {
        let body = r#"{"method":"tools/call", "id" : "a\"b","jsonrpc":"2.0","params":{"name":"echo","arguments":{"text":"é"}}}"#;
        let r = request(body).expect("fast");
        assert_eq!(r.method, "tools/call");
        assert_eq!(r.id, json!("a\"b"));
        assert_eq!(r.name.as_deref(), Some("echo"));
        let line = r.line(42);
        assert_eq!(line.last(), Some(&b'\n'));
        let v: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(v["id"], json!(42));
        assert_eq!(v["params"]["arguments"]["text"], json!("é"));
        assert_eq!(
            String::from_utf8(line).unwrap(),
            format!("{}\n", body.replace(r#""a\"b""#, "42"))
        );
        let r = request(r#"{"jsonrpc":"2.0","id":-7,"method":"ping"}"#).expect("fast");
        assert_eq!(r.id, json!(-7));
    }

    #[test]
    fn anything_unusual_takes_the_value_path() {
        for body in [
            // Not one line.
            "{\"jsonrpc\":\"2.0\",\n\"id\":1,\"method\":\"ping\"}",
            // `_meta` (progress token, 2026 envelope), even escaped.
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"progressToken":1}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"\u005fmeta":{}}}"#,
            // Not a request: a notification, a response, a null or odd id.
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#,
            // Not JSON-RPC 2.0, not an object, not JSON, two of a field.
            r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
            r#"{"id":1,"method":"ping"}"#,
            r#"["2.0",1,"ping"]"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping""#,
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}"#,
        ] {
            assert!(request(body).is_none(), "{body}");
        }
        // Not UTF-8, in a field the fast path does not otherwise read.
        let mut bad = br#"{"jsonrpc":"2.0","id":1,"method":"ping","x":"#.to_vec();
        bad.extend_from_slice(b"\"\xff\"}");
        assert!(RawRequest::parse(&Bytes::from(bad.clone())).is_none());
        assert!(
            serde_json::from_slice::<Value>(&bad).is_err(),
            "the Value path refuses it too"
        );
    }

    #[test]
    fn an_answer_is_found_with_its_id() {
        let line = br#"{"jsonrpc":"2.0","result":{"id":"inner"},"id":17}"#;
        let (id, at) = answer_id(line).expect("answer");
        assert_eq!(id, 17);
        let out = with_id(line, &at, br#""client-1""#);
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            v,
            json!({"jsonrpc":"2.0","result":{"id":"inner"},"id":"client-1"})
        );
        for other in [
            &br#"{"jsonrpc":"2.0","id":1,"method":"roots/list"}"#[..],
            br#"{"jsonrpc":"2.0","method":"notifications/progress"}"#,
            br#"{"jsonrpc":"2.0","id":"s","result":{}}"#,
            br#"{"jsonrpc":"2.0","id":1.5,"result":{}}"#,
            br#"[{"jsonrpc":"2.0","id":1,"result":{}}]"#,
            b"not json",
        ] {
            assert!(
                answer_id(other).is_none(),
                "{}",
                String::from_utf8_lossy(other)
            );
        }
    }
}
