//! The method table the transport calls: jsonrpsee's [`Methods`] plus
//! *direct* methods, which write their result once, straight into the reply
//! line. jsonrpsee's `MethodResponse::response` serialises a result and then
//! parses the whole reply again to check it is JSON (D38); for a large
//! `list` reply that second pass was a large share of the daemon's work.
//! A direct result may be JSON written ahead (`list`'s cached rows, D41).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use jsonrpsee::types::{ErrorObjectOwned, Id, Params};
use jsonrpsee::{MethodResponse, Methods};
use xy_core::protocol::ListRows;

use super::OutLine;

/// A direct method: the request's id and params in, the whole reply line
/// (a result or an error object) out.
pub(crate) type DirectMethod = Arc<
    dyn Fn(Id<'static>, Params<'static>) -> Pin<Box<dyn Future<Output = OutLine> + Send>>
        + Send
        + Sync,
>;

/// Every method the daemon serves; cheap to clone (one per connection).
#[derive(Clone, Default)]
pub(crate) struct Handlers {
    pub(crate) methods: Methods,
    direct: Arc<HashMap<&'static str, DirectMethod>>,
}

impl std::fmt::Debug for Handlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handlers")
            .field("methods", &self.methods.method_names().count())
            .field("direct", &self.direct.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl From<Methods> for Handlers {
    fn from(methods: Methods) -> Handlers {
        Handlers {
            methods,
            direct: Arc::default(),
        }
    }
}

impl Handlers {
    /// Registers `name` as a direct method.
    ///
    /// # Panics
    /// If `name` is taken (a programming error, like jsonrpsee's
    /// `AlreadyRegistered`).
    pub(crate) fn register_direct<T, F, Fut>(&mut self, name: &'static str, f: F)
    where
        T: WriteJson,
        F: Fn(Params<'static>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, ErrorObjectOwned>> + Send + 'static,
    {
        assert!(
            self.methods.method(name).is_none() && !self.direct.contains_key(name),
            "method {name} registered twice"
        );
        let f = Arc::new(f);
        let method: DirectMethod = Arc::new(move |id, params| {
            let fut = f(params);
            Box::pin(async move {
                match fut.await {
                    Ok(result) => success(id, &result),
                    Err(e) => MethodResponse::error(id, e).into_json().into(),
                }
            })
        });
        Arc::make_mut(&mut self.direct).insert(name, method);
    }

    /// The direct method called `name`, if it is one.
    pub(crate) fn direct(&self, name: &str) -> Option<&DirectMethod> {
        self.direct.get(name)
    }

    /// Whether `name` is served at all.
    #[cfg(test)]
    pub(crate) fn has(&self, name: &str) -> bool {
        self.methods.method(name).is_some() || self.direct.contains_key(name)
    }
}

/// A result that writes its own JSON.
pub(crate) trait WriteJson {
    /// Bytes [`WriteJson::write_json`] writes at most (the reply buffer is
    /// sized from it, so it never grows while being written).
    fn max_len(&self) -> usize;
    /// Appends exactly one JSON value.
    fn write_json(&self, out: &mut Vec<u8>);
}

impl WriteJson for ListRows {
    fn max_len(&self) -> usize {
        ListRows::max_len(self)
    }

    fn write_json(&self, out: &mut Vec<u8>) {
        self.write(out);
    }
}

/// Test methods answer with any value (max_len 0: the buffer grows).
#[cfg(test)]
impl WriteJson for serde_json::Value {
    fn max_len(&self) -> usize {
        0
    }

    fn write_json(&self, out: &mut Vec<u8>) {
        serde_json::to_writer(out, self).expect("a Value serialises");
    }
}

/// `{"jsonrpc":"2.0","id":…,"result":…}`, fields in jsonrpsee's order,
/// written once into a buffer of the right size.
fn success<T: WriteJson>(id: Id<'static>, result: &T) -> OutLine {
    const HEAD: &[u8] = br#"{"jsonrpc":"2.0","id":"#;
    const MID: &[u8] = br#","result":"#;
    // An id is a number or a string; a long string grows the buffer once.
    let mut out = Vec::with_capacity(HEAD.len() + 24 + MID.len() + result.max_len() + 1);
    out.extend_from_slice(HEAD);
    serde_json::to_writer(&mut out, &id).expect("an id serialises");
    out.extend_from_slice(MID);
    result.write_json(&mut out);
    out.push(b'}');
    OutLine::from_json_bytes(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_direct_reply_is_what_jsonrpsee_would_send() {
        let mut h = Handlers::default();
        h.register_direct("rows", |p: Params<'static>| async move {
            let n: Option<u32> = p.parse().ok();
            match n {
                Some(n) => Ok(serde_json::json!([{"n": n, "s": "a\"b\\c\u{1}é"}])),
                None => Err(jsonrpsee::types::ErrorObject::owned(
                    -32602,
                    "need a number",
                    Some(serde_json::json!({"field": "n"})),
                )),
            }
        });
        assert!(h.has("rows"));
        let call = h.direct("rows").unwrap();
        for id in [Id::Number(7), Id::Str("x\"y".into()), Id::Null] {
            let ok = call(id.clone(), Params::new(Some("3"))).await;
            let expected = MethodResponse::response(
                id.clone(),
                jsonrpsee::ResponsePayload::success(vec![
                    serde_json::json!({"n": 3, "s": "a\"b\\c\u{1}é"}),
                ]),
                usize::MAX,
            );
            assert_eq!(ok.as_bytes(), expected.as_json().get().as_bytes());
            let err = call(id.clone(), Params::new(Some("\"no\""))).await;
            let v: serde_json::Value = serde_json::from_slice(err.as_bytes()).unwrap();
            assert_eq!(v["error"]["code"], -32602);
            assert_eq!(v["error"]["data"]["field"], "n");
            assert_eq!(v["id"], serde_json::to_value(&id).unwrap());
        }
    }

    #[test]
    #[should_panic(expected = "registered twice")]
    fn a_name_is_registered_once() {
        let mut h = Handlers::default();
        h.register_direct("x", |_| async {
            Ok::<_, ErrorObjectOwned>(serde_json::json!(1))
        });
        h.register_direct("x", |_| async {
            Ok::<_, ErrorObjectOwned>(serde_json::json!(2))
        });
    }
}
