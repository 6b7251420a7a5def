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
use xy_core::protocol::mcp::CallOutcome;

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
/// path, and `params.name`: the tool of a `tools/call` (its record, SPEC
/// §20, and what the firewall decides it by) or a `prompts/get`'s prompt,
/// read in the same pass, the arguments skipped unparsed.
#[derive(Deserialize)]
struct Params<'a> {
    #[serde(rename = "_meta", borrow, default)]
    meta: Option<&'a RawValue>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    uri: Option<Cow<'a, str>>,
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
    /// `params.uri` (a `resources/read`'s resource, a `skills/get`'s skill).
    pub(crate) uri: Option<String>,
}

impl RawRequest {
    /// The name the firewall decides a call of `kind` by (SPEC §20, §27).
    pub(crate) fn name_of(&self, kind: xy_core::firewall::Kind) -> &str {
        let n = if kind == xy_core::firewall::Kind::Resource {
            &self.uri
        } else {
            &self.name
        };
        n.as_deref().unwrap_or("")
    }

    /// What a call record names: the tool of a `tools/call`, the URI of a
    /// `resources/read` of a skill file or app (SPEC §27).
    pub(crate) fn tool(&self) -> Option<&str> {
        match self.method.as_str() {
            "tools/call" => self.name.as_deref(),
            "resources/read" => self
                .uri
                .as_deref()
                .filter(|u| xy_core::firewall::pins_uri(u)),
            _ => None,
        }
    }

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
        let mut uri = None;
        if let Some(params) = p.params {
            if params.get().as_bytes().first() != Some(&b'{') {
                return None;
            }
            let params: Params<'_> = serde_json::from_str(params.get()).ok()?;
            if params.meta.is_some() {
                return None;
            }
            name = params.name.map(Cow::into_owned);
            uri = params.uri.map(Cow::into_owned);
        }
        let id_at = span(bytes, raw_id)?;
        let id = serde_json::from_str(raw_id.get()).ok()?;
        Some(RawRequest {
            method: method.into_owned(),
            id,
            id_at,
            name,
            uri,
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

/// What an answer says about its call (SPEC §20 outcomes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Said {
    /// A result without `isError: true`.
    Ok,
    /// A result with `isError: true`.
    ToolError,
    /// An `error` answer.
    Error,
}

impl From<Said> for CallOutcome {
    fn from(s: Said) -> CallOutcome {
        match s {
            Said::Ok => CallOutcome::Ok,
            Said::ToolError => CallOutcome::ToolError,
            Said::Error => CallOutcome::RpcError,
        }
    }
}

impl Said {
    /// What a parsed answer says.
    pub(crate) fn of(msg: &Value) -> Said {
        if msg.get("error").is_some_and(|e| !e.is_null()) {
            Said::Error
        } else if msg.pointer("/result/isError") == Some(&Value::Bool(true)) {
            Said::ToolError
        } else {
            Said::Ok
        }
    }
}

/// The fields of an answer: [`Peek`]'s, and whether it is an error or a
/// tool error, read in the one pass that checks the line.
#[derive(Deserialize)]
struct AnswerPeek<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(default)]
    error: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    result: Option<Flag>,
}

/// A result object's `isError`, the rest skipped (anything else: `false`).
#[derive(Default)]
struct Flag(bool);

impl<'de> Deserialize<'de> for Flag {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Flag, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Flag;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a result")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Flag, A::Error> {
                let mut flag = false;
                while let Some(k) = m.next_key::<Cow<'de, str>>()? {
                    if k == "isError" {
                        flag = m.next_value::<Value>()? == Value::Bool(true);
                    } else {
                        m.next_value::<serde::de::IgnoredAny>()?;
                    }
                }
                Ok(Flag(flag))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut s: A) -> Result<Flag, A::Error> {
                while s.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(Flag(false))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Flag, E> {
                Ok(Flag(false))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Flag, E> {
                Ok(Flag(false))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Flag, E> {
                Ok(Flag(false))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Flag, E> {
                Ok(Flag(false))
            }
            fn visit_str<E>(self, _: &str) -> Result<Flag, E> {
                Ok(Flag(false))
            }
            fn visit_unit<E>(self) -> Result<Flag, E> {
                Ok(Flag(false))
            }
        }
        d.deserialize_any(V)
    }
}

/// A line from the child that answers a request (no method, a whole-number
/// id): that id, where it is in the line, and what it says.
pub(crate) fn answer_id(line: &[u8]) -> Option<(u64, Range<usize>, Said)> {
    if line.trim_ascii_start().first() != Some(&b'{') {
        return None;
    }
    let text = std::str::from_utf8(line).ok()?;
    let p: AnswerPeek<'_> = serde_json::from_str(text).ok()?;
    if p.method.is_some() {
        return None;
    }
    let raw_id = p.id?;
    let id = raw_id.get().parse::<u64>().ok()?;
    let said = match (p.error, p.result) {
        (Some(_), _) => Said::Error,
        (None, Some(Flag(true))) => Said::ToolError,
        _ => Said::Ok,
    };
    Some((id, span(line, raw_id)?, said))
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
        assert_eq!(r.tool(), Some("echo"));
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
        assert_eq!(r.tool(), None);
    }

    #[test]
    fn an_answer_says_how_its_call_ended() {
        for (line, want) in [
            (&br#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":true}}"#[..], Said::ToolError),
            (br#"{"jsonrpc":"2.0","id":1,"result":{"isError":false,"content":[{"isError":true}]}}"#, Said::Ok),
            (br#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"isError"}]}}"#, Said::Ok),
            (br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"no"}}"#, Said::Error),
            (br#"{"jsonrpc":"2.0","id":1,"result":[1,{"isError":true}]}"#, Said::Ok),
            (br#"{"jsonrpc":"2.0","id":1,"result":null}"#, Said::Ok),
        ] {
            let (_, _, said) = answer_id(line).expect("answer");
            assert_eq!(said, want, "{}", String::from_utf8_lossy(line));
            let v: Value = serde_json::from_slice(line).unwrap();
            assert_eq!(Said::of(&v), want, "the Value path agrees");
        }
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
        let (id, at, said) = answer_id(line).expect("answer");
        assert_eq!((id, said), (17, Said::Ok));
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

    /// What reading a record's fields costs on the fast path
    /// (`cargo test -p xy-actors --release --lib bridge::raw::tests::bench
    /// -- --ignored --nocapture`): a 1 MiB `tools/call` and a 1 MiB answer,
    /// against the peek the fast path made before call records.
    #[test]
    #[ignore = "a measurement, not a check"]
    #[allow(clippy::print_stderr)]
    fn bench_the_fields_of_a_record_cost_no_extra_pass() {
        let big = "x".repeat(1 << 20);
        let call = Bytes::from(
            json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":big}}})
                .to_string(),
        );
        let answer = json!({"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":big}],"isError":false}})
            .to_string()
            .into_bytes();
        let n = 200u32;
        let time = |f: &dyn Fn()| {
            let t = std::time::Instant::now();
            for _ in 0..n {
                f();
            }
            t.elapsed().as_secs_f64() * 1e6 / f64::from(n)
        };
        let parse = time(&|| assert!(RawRequest::parse(&call).unwrap().tool().is_some()));
        let old_answer = time(&|| assert!(peek(&answer).is_some()));
        let new_answer = time(&|| assert!(answer_id(&answer).is_some()));
        eprintln!(
            "raw bench: parse of a 1 MiB tools/call {parse:.0} µs; answer peek before {old_answer:.0} µs, with its outcome {new_answer:.0} µs"
        );
    }
}
