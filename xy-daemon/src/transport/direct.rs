//! The method table the transport calls: jsonrpsee's [`Methods`] plus
//! *direct* methods, which serialise their result once, straight into the
//! reply line. jsonrpsee's `MethodResponse::response` serialises a result and
//! then parses the whole reply again to check it is JSON (D38); for `list` at
//! N=200 (a ~65 KB reply) that second pass was a fifth of the daemon's work.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use jsonrpsee::types::{ErrorObjectOwned, Id, Params};
use jsonrpsee::{MethodResponse, Methods};
use serde::Serialize;
use serde_json::value::RawValue;

/// A direct method: the request's id and params in, the whole reply line
/// (a result or an error object) out.
pub(crate) type DirectMethod = Arc<
    dyn Fn(Id<'static>, Params<'static>) -> Pin<Box<dyn Future<Output = Box<RawValue>> + Send>>
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
        T: Serialize,
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
                    Err(e) => MethodResponse::error(id, e).into_json(),
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

/// `{"jsonrpc":"2.0","id":…,"result":…}`, fields in jsonrpsee's order.
#[derive(Serialize)]
struct Success<'a, T> {
    jsonrpc: &'static str,
    id: &'a Id<'a>,
    result: &'a T,
}

/// The success reply, serialised once (`to_raw_value` does not re-parse
/// what it wrote). A result that cannot be serialised becomes `-32603`.
fn success<T: Serialize>(id: Id<'static>, result: &T) -> Box<RawValue> {
    let reply = Success {
        jsonrpc: "2.0",
        id: &id,
        result,
    };
    match serde_json::value::to_raw_value(&reply) {
        Ok(json) => json,
        Err(e) => {
            tracing::error!(error = %e, "cannot serialise a result");
            let err = jsonrpsee::types::ErrorObject::owned(
                xy_core::protocol::ErrorCode::InternalError.code(),
                format!("cannot serialise the result: {e}"),
                None::<()>,
            );
            MethodResponse::error(id, err).into_json()
        }
    }
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
                Some(n) => Ok(vec![serde_json::json!({"n": n, "s": "a\"b\\c\u{1}é"})]),
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
            assert_eq!(ok.get(), expected.as_json().get());
            let err = call(id.clone(), Params::new(Some("\"no\""))).await;
            let v: serde_json::Value = serde_json::from_str(err.get()).unwrap();
            assert_eq!(v["error"]["code"], -32602);
            assert_eq!(v["error"]["data"]["field"], "n");
            assert_eq!(v["id"], serde_json::to_value(&id).unwrap());
        }
    }

    #[test]
    #[should_panic(expected = "registered twice")]
    fn a_name_is_registered_once() {
        let mut h = Handlers::default();
        h.register_direct("x", |_| async { Ok::<_, ErrorObjectOwned>(1) });
        h.register_direct("x", |_| async { Ok::<_, ErrorObjectOwned>(2) });
    }
}
