//! Input requests across the bridge (MRTR, SEP-2322; SPEC §19): the pure
//! parts of carrying a child's question to a client of the other era. What
//! a client must have declared for a child to ask it something
//! ([`missing`]), the keys and shape of the `InputRequiredResult` xy
//! answers a 2026 client with for a 2025 child ([`input_required`]), the
//! HMAC seal on the `requestState` it hands out ([`Seal`]), and the bounds
//! on what waits for a client's retry. The routing tables
//! ([`super::route::Router`]) hold the waiting exchanges.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Map, Value, json};
use sha2::Sha256;

/// How long xy gathers a child's questions before answering the client
/// with them: a child that asks several at once (in one burst) gets them
/// into one `InputRequiredResult`, one round (D111).
pub(crate) const GATHER: Duration = Duration::from_millis(2);
/// How long a child's question waits for the client's retry; then the
/// child gets an error and its request is cancelled (D111). A person may
/// be filling in a form.
pub(crate) const TTL: Duration = Duration::from_secs(10 * 60);
/// Exchanges waiting for a retry, at most, per endpoint (the oldest goes).
pub(crate) const MAX_WAITING: usize = 256;
/// Bytes of the questions waiting for retries, at most, per endpoint.
pub(crate) const MAX_WAITING_BYTES: usize = 16 << 20;

/// The JSON-RPC error code of a refused `requestState` (what the
/// conformance suite checks: invalid params).
pub(crate) const BAD_STATE: i64 = -32602;
/// Missing Required Client Capability (2026-07-28).
pub(crate) const MISSING_CAPABILITY: i64 = -32021;

/// The requests a server may make of a client that MRTR carries.
pub(crate) fn is_input_request(method: &str) -> bool {
    matches!(
        method,
        "elicitation/create" | "sampling/createMessage" | "roots/list"
    )
}

/// The client requests an `InputRequiredResult` may answer (the MRTR
/// spec's table): a child's question during any other is refused.
pub(crate) fn takes_input(method: &str) -> bool {
    matches!(method, "tools/call" | "prompts/get" | "resources/read")
}

/// What names a request for MRTR (the retry must carry the same): the
/// tool or prompt name, or the resource URI.
pub(crate) fn request_name(msg: &Value) -> Option<String> {
    let p = msg.get("params")?;
    p.get("name")
        .or_else(|| p.get("uri"))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// The capability `method` (with `params`) needs of a client that
/// declared `caps`, as a `requiredCapabilities` object, when `caps` lack
/// it; `None` when the client can be asked.
pub(crate) fn missing(method: &str, params: Option<&Value>, caps: &Value) -> Option<Value> {
    let has = |path: &str| caps.pointer(path).is_some_and(Value::is_object);
    match method {
        "roots/list" => (!has("/roots")).then(|| json!({"roots": {}})),
        "sampling/createMessage" => {
            if !has("/sampling") {
                return Some(json!({"sampling": {}}));
            }
            // Tool use in sampling is a sub-capability (2025-11-25).
            let tools = params
                .and_then(|p| p.get("tools"))
                .and_then(Value::as_array)
                .is_some_and(|t| !t.is_empty());
            (tools && !has("/sampling/tools")).then(|| json!({"sampling": {"tools": {}}}))
        }
        "elicitation/create" => {
            if !has("/elicitation") {
                return Some(json!({"elicitation": {}}));
            }
            let mode = params
                .and_then(|p| p.get("mode"))
                .and_then(Value::as_str)
                .unwrap_or("form");
            let e = &caps["elicitation"];
            let declared_none = e.as_object().is_some_and(Map::is_empty);
            // `elicitation: {}` is form mode only (2025-11-25).
            let ok = match mode {
                "url" => has("/elicitation/url"),
                _ => declared_none || has("/elicitation/form"),
            };
            (!ok).then(|| json!({"elicitation": {mode: {}}}))
        }
        _ => None,
    }
}

/// The capabilities xy declares to a 2025 child it initialises: every
/// one a client can have, so the child offers all it has; a request for
/// one the asking client lacks is refused on that client's behalf
/// ([`missing`], D112), and a tool the child offers only to clients of a
/// capability is shown only to them (`mcp::gates`, D210).
pub(crate) fn all_client_capabilities() -> Value {
    crate::mcp::gates::everything()
}

/// One question of the child's, waiting for the client.
#[derive(Debug, Clone)]
pub(crate) struct Ask {
    /// Its key in `inputRequests` / `inputResponses`.
    pub(crate) key: String,
    /// The id the child gave its request.
    pub(crate) child_id: Value,
    pub(crate) method: String,
    pub(crate) params: Option<Value>,
    /// What it costs to keep (its params as JSON).
    pub(crate) bytes: usize,
}

impl Ask {
    /// The child's request `msg` (`method`, id `child_id`), keyed so no two
    /// questions of one exchange share a key (`taken`).
    pub(crate) fn new(
        msg: &Value,
        method: &str,
        child_id: Value,
        taken: impl Fn(&str) -> bool,
    ) -> Ask {
        let params = msg.get("params").cloned();
        let bytes = params
            .as_ref()
            .map_or(0, |p| serde_json::to_vec(p).map_or(0, |v| v.len()));
        // A child that gives its requests string ids names its own keys;
        // else the key says what is asked.
        let base = match &child_id {
            Value::String(s) if !s.is_empty() => s.clone(),
            other => {
                let what = method.split('/').next().unwrap_or("input");
                format!("{what}-{other}")
            }
        };
        let mut key = base.clone();
        let mut n = 1;
        while taken(&key) {
            n += 1;
            key = format!("{base}-{n}");
        }
        Ask {
            key,
            child_id,
            method: method.to_owned(),
            params,
            bytes,
        }
    }
}

/// The `InputRequiredResult` carrying `asks`, with `state`.
pub(crate) fn input_required(asks: &[Ask], state: &str) -> Value {
    let requests: Map<String, Value> = asks
        .iter()
        .map(|a| {
            let mut r = json!({"method": a.method});
            if let Some(p) = &a.params {
                r["params"] = p.clone();
            }
            (a.key.clone(), r)
        })
        .collect();
    json!({
        "resultType": "input_required",
        "inputRequests": requests,
        "requestState": state,
    })
}

/// Why a `requestState` is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Not one xy issued, or altered.
    Forged,
    /// Past its expiry.
    Expired,
    /// Used once already, or its exchange ended.
    Used,
    /// Issued for another request.
    Elsewhere,
}

impl Refused {
    pub(crate) fn message(self) -> &'static str {
        match self {
            Refused::Forged => "invalid requestState: xy did not issue it, or it was altered",
            Refused::Expired => "requestState expired: send the request again without it",
            Refused::Used => {
                "requestState already used (each is good for one retry) or its exchange ended"
            }
            Refused::Elsewhere => "requestState belongs to another request",
        }
    }
}

/// A random HMAC-SHA256 key (one per endpoint and daemon run: a state
/// issued for one server opens at no other) that seals `requestState`s: the
/// exchange id, the round and the expiry, so a client can neither forge
/// one nor move one to another exchange or round.
pub(crate) struct Seal {
    key: Vec<u8>,
}

impl Default for Seal {
    fn default() -> Seal {
        // 256 random bits (as hex text, which HMAC takes as well as bytes).
        let key = format!("{}{}", super::unguessable(), super::unguessable());
        Seal {
            key: key.into_bytes(),
        }
    }
}

const PREFIX: &str = "xy1";

impl Seal {
    fn mac(&self) -> Hmac<Sha256> {
        // HMAC takes a key of any length.
        <Hmac<Sha256> as KeyInit>::new_from_slice(&self.key).expect("HMAC takes any key length")
    }

    /// The `requestState` of round `round` of exchange `xid` (hex),
    /// good until `expires` (seconds since the epoch).
    pub(crate) fn seal(&self, xid: &str, round: u32, expires: u64) -> String {
        let body = format!("{PREFIX}.{xid}.{round}.{expires}");
        let mut m = self.mac();
        m.update(body.as_bytes());
        let tag: String = m
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        format!("{body}.{tag}")
    }

    /// The exchange and round of a `requestState` xy sealed, if it is
    /// intact and not expired at `now` (seconds since the epoch).
    pub(crate) fn open(&self, state: &str, now: u64) -> Result<(String, u32), Refused> {
        let (body, tag) = state.rsplit_once('.').ok_or(Refused::Forged)?;
        let tag = unhex(tag).ok_or(Refused::Forged)?;
        let mut m = self.mac();
        m.update(body.as_bytes());
        // Constant time.
        m.verify_slice(&tag).map_err(|_| Refused::Forged)?;
        let mut parts = body.split('.');
        let (Some(PREFIX), Some(xid), Some(round), Some(expires), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return Err(Refused::Forged);
        };
        let round: u32 = round.parse().map_err(|_| Refused::Forged)?;
        let expires: u64 = expires.parse().map_err(|_| Refused::Forged)?;
        if now >= expires {
            return Err(Refused::Expired);
        }
        Ok((xid.to_owned(), round))
    }
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Seconds since the epoch, `after` from now.
pub(crate) fn unix_after(after: Duration) -> u64 {
    (SystemTime::now() + after)
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Seconds since the epoch now.
pub(crate) fn unix_now() -> u64 {
    unix_after(Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_state_opens_and_any_change_is_refused() {
        let s = Seal::default();
        let state = s.seal("abc", 2, 100);
        assert_eq!(s.open(&state, 99), Ok(("abc".to_owned(), 2)));
        assert_eq!(s.open(&state, 100), Err(Refused::Expired));
        // Another round, exchange or expiry with the old tag.
        let tag = state.rsplit_once('.').unwrap().1;
        for body in ["xy1.abc.3.100", "xy1.abd.2.100", "xy1.abc.2.999"] {
            assert_eq!(
                s.open(&format!("{body}.{tag}"), 0),
                Err(Refused::Forged),
                "{body}"
            );
        }
        // One flipped digit of the tag; no tag; garbage.
        let mut flipped = state.clone().into_bytes();
        let last = flipped.len() - 1;
        flipped[last] = if flipped[last] == b'0' { b'1' } else { b'0' };
        let flipped = String::from_utf8(flipped).unwrap();
        for bad in [
            flipped.as_str(),
            "xy1.abc.2.100",
            "",
            "..",
            "xy1.abc.2.100.zz",
        ] {
            assert_eq!(s.open(bad, 0), Err(Refused::Forged), "{bad:?}");
        }
        // Another daemon's key.
        assert_eq!(Seal::default().open(&state, 0), Err(Refused::Forged));
    }

    #[test]
    fn missing_capabilities_name_what_is_needed() {
        let none = json!({});
        assert_eq!(
            missing("roots/list", None, &none),
            Some(json!({"roots": {}}))
        );
        assert_eq!(
            missing("sampling/createMessage", None, &none),
            Some(json!({"sampling": {}}))
        );
        assert_eq!(
            missing("elicitation/create", None, &none),
            Some(json!({"elicitation": {}}))
        );
        let basic = json!({"roots": {}, "sampling": {}, "elicitation": {}});
        assert_eq!(missing("roots/list", None, &basic), None);
        assert_eq!(missing("elicitation/create", None, &basic), None);
        let url = json!({"mode": "url", "url": "https://x", "message": "m"});
        assert_eq!(
            missing("elicitation/create", Some(&url), &basic),
            Some(json!({"elicitation": {"url": {}}}))
        );
        let url_only = json!({"elicitation": {"url": {}}});
        assert_eq!(missing("elicitation/create", Some(&url), &url_only), None);
        assert_eq!(
            missing("elicitation/create", None, &url_only),
            Some(json!({"elicitation": {"form": {}}}))
        );
        let tools = json!({"messages": [], "maxTokens": 1, "tools": [{"name": "t"}]});
        assert_eq!(
            missing("sampling/createMessage", Some(&tools), &basic),
            Some(json!({"sampling": {"tools": {}}}))
        );
        assert_eq!(
            missing(
                "sampling/createMessage",
                Some(&tools),
                &all_client_capabilities()
            ),
            None
        );
        assert_eq!(missing("ping", None, &none), None);
    }

    #[test]
    fn keys_are_the_childs_string_ids_or_say_what_is_asked_and_never_repeat() {
        let msg = json!({"params": {"message": "?"}});
        let a = Ask::new(&msg, "elicitation/create", json!("user_name"), |_| false);
        assert_eq!(a.key, "user_name");
        let b = Ask::new(&msg, "sampling/createMessage", json!(7), |_| false);
        assert_eq!(b.key, "sampling-7");
        let c = Ask::new(&msg, "roots/list", json!(7), |k| {
            k == "roots-7" || k == "roots-7-2"
        });
        assert_eq!(c.key, "roots-7-3");
        let r = input_required(&[a, b], "S");
        assert_eq!(r["resultType"], "input_required");
        assert_eq!(r["requestState"], "S");
        assert_eq!(
            r["inputRequests"]["user_name"],
            json!({"method": "elicitation/create", "params": {"message": "?"}})
        );
        assert_eq!(
            r["inputRequests"]["sampling-7"]["method"],
            "sampling/createMessage"
        );
    }
}
