//! The routing tables' unit tests: ids, tokens, streams, MRTR rounds.
use super::*;
use crate::bridge::route::exchanges::MrtrCall;
use serde_json::Map;
use tokio::sync::mpsc;

/// What an exchange receives, as JSON values.
struct Rx(outbox::Inbox);

impl Rx {
    fn try_recv(&mut self) -> Result<Value, mpsc::error::TryRecvError> {
        self.0
            .try_recv()
            .map(|o| serde_json::from_slice(&o.into_bytes()).unwrap())
    }
}

fn outbox() -> (Outbox, Rx) {
    let (tx, rx) = outbox::channel(&Arc::default());
    (tx, Rx(rx))
}

#[test]
fn ids_are_rewritten_and_restored_per_client() {
    let mut r = Router::default();
    let (a, mut ra) = outbox();
    let (b, mut rb) = outbox();
    let ma = r.forward(
        json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}),
        None,
        a,
        Answer::AsIs,
    );
    let mb = r.forward(
        json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}),
        None,
        b,
        Answer::AsIs,
    );
    assert_ne!(ma["id"], mb["id"]);
    r.on_child(json!({"jsonrpc":"2.0","id":mb["id"],"result":{"who":"b"}}));
    r.on_child(json!({"jsonrpc":"2.0","id":ma["id"],"result":{"who":"a"}}));
    assert_eq!(
        ra.try_recv().unwrap(),
        json!({"jsonrpc":"2.0","id":1,"result":{"who":"a"}})
    );
    assert_eq!(
        rb.try_recv().unwrap(),
        json!({"jsonrpc":"2.0","id":1,"result":{"who":"b"}})
    );
    assert_eq!(r.in_flight(), 0);
}

#[test]
fn progress_reaches_only_its_request_with_the_token_restored() {
    let mut r = Router::default();
    let (a, mut ra) = outbox();
    let (b, mut rb) = outbox();
    let req = |id| {
        json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
        "params":{"name":"progress","_meta":{"progressToken":7}}})
    };
    let ma = r.forward(req(1), None, a, Answer::AsIs);
    let mb = r.forward(req(2), None, b, Answer::AsIs);
    let (ta, tb) = (
        ma["params"]["_meta"]["progressToken"].clone(),
        mb["params"]["_meta"]["progressToken"].clone(),
    );
    assert_ne!(ta, tb);
    r.on_child(json!({"jsonrpc":"2.0","method":"notifications/progress",
        "params":{"progressToken":tb,"progress":1}}));
    assert!(ra.try_recv().is_err());
    let got = rb.try_recv().unwrap();
    assert_eq!(got["params"]["progressToken"], json!(7));
}

#[test]
fn list_changed_fans_out_to_every_listener_with_2026_meta() {
    let mut r = Router::default();
    let (a, mut ra) = outbox();
    let (b, mut rb) = outbox();
    let (c, mut rc) = outbox();
    r.listen(Some("s1".into()), None, None, a);
    let mut f = Map::new();
    f.insert("toolsListChanged".into(), json!(true));
    r.listen(None, Some(json!("L")), Some(f), b);
    let mut f = Map::new();
    f.insert("promptsListChanged".into(), json!(true));
    r.listen(None, Some(json!(9)), Some(f), c);
    r.on_child(json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"}));
    assert_eq!(
        ra.try_recv().unwrap()["method"],
        "notifications/tools/list_changed"
    );
    let got = rb.try_recv().unwrap();
    assert_eq!(got["params"]["_meta"][META_SUBSCRIPTION], json!("L"));
    assert!(rc.try_recv().is_err(), "filtered out");
}

#[test]
fn server_requests_go_to_the_cause_and_answers_back_to_the_child() {
    let mut r = Router::default();
    let (a, mut ra) = outbox();
    r.forward(
        json!({"jsonrpc":"2.0","id":"x","method":"tools/call"}),
        None,
        a,
        Answer::AsIs,
    );
    r.on_child(json!({"jsonrpc":"2.0","id":0,"method":"sampling/createMessage"}));
    let got = ra.try_recv().unwrap();
    let ours = got["id"].clone();
    assert!(ours.as_str().unwrap().starts_with("xy-s2c-"));
    let back = r
        .client_response(json!({"jsonrpc":"2.0","id":ours,"result":{}}), None)
        .unwrap()
        .unwrap();
    assert_eq!(back["id"], json!(0));
}

#[test]
fn a_server_request_is_answered_only_from_its_session_and_its_id_is_unguessable() {
    let mut r = Router::default();
    let (a, mut ra) = outbox();
    r.forward(
        json!({"jsonrpc":"2.0","id":1,"method":"tools/call"}),
        Some("A".into()),
        a,
        Answer::AsIs,
    );
    r.on_child(json!({"jsonrpc":"2.0","id":7,"method":"roots/list"}));
    let ours = ra.try_recv().unwrap()["id"].clone();
    let hex = ours.as_str().unwrap().strip_prefix("xy-s2c-").unwrap();
    assert_eq!(hex.len(), 32, "{ours}");
    let answer = json!({"jsonrpc":"2.0","id":ours,"result":{"roots":[]}});
    assert_eq!(r.client_response(answer.clone(), Some("B")), Err(NotYours));
    assert_eq!(r.client_response(answer.clone(), None), Err(NotYours));
    let back = r
        .client_response(answer.clone(), Some("A"))
        .unwrap()
        .unwrap();
    assert_eq!(back["id"], json!(7));
    assert_eq!(r.client_response(answer, Some("A")), Ok(None), "taken once");
    // A second request gets another id, not the next number.
    r.on_child(json!({"jsonrpc":"2.0","id":8,"method":"roots/list"}));
    assert_ne!(ra.try_recv().unwrap()["id"], ours);
}

#[test]
fn a_cancel_names_only_a_request_of_the_senders_session() {
    let mut r = Router::default();
    let (a, _ra) = outbox();
    let (b, _rb) = outbox();
    let ma = r.forward(
        json!({"jsonrpc":"2.0","id":5,"method":"tools/call"}),
        Some("A".into()),
        a,
        Answer::AsIs,
    );
    r.forward(
        json!({"jsonrpc":"2.0","id":5,"method":"tools/call"}),
        None,
        b,
        Answer::AsIs,
    );
    assert_eq!(r.cancel(Some("B"), &json!(5)), None);
    assert_eq!(r.cancel(None, &json!(5)), None, "sessionless names nothing");
    assert_eq!(r.cancel(Some("A"), &json!(5)), ma["id"].as_u64());
}

#[test]
fn a_closed_2026_stream_cancels_its_request_and_a_2025_one_does_not() {
    let mut r = Router::default();
    let (a, ra) = outbox();
    let (b, rb) = outbox();
    r.forward(
        json!({"jsonrpc":"2.0","id":1,"method":"tools/call"}),
        Some("A".into()),
        a,
        Answer::AsIs,
    );
    let mb = r.forward(
        json!({"jsonrpc":"2.0","id":1,"method":"tools/call"}),
        None,
        b,
        Answer::AsIs,
    );
    drop((ra, rb));
    assert_eq!(r.prune(), vec![mb["id"].as_u64().unwrap()]);
    assert_eq!(r.in_flight(), 0);
}

#[test]
fn server_request_without_a_cause_is_refused_to_the_child() {
    let mut r = Router::default();
    let (act, _) = r.on_child(json!({"jsonrpc":"2.0","id":3,"method":"roots/list"}));
    match act {
        ChildAction::ToChild(m) => {
            let m = &m[0];
            assert_eq!(m["id"], json!(3));
            assert_eq!(m["error"]["code"], json!(-32603));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn fail_all_answers_every_request_and_keeps_streams() {
    let mut r = Router::default();
    let (a, mut ra) = outbox();
    let (l, mut rl) = outbox();
    r.listen(Some("s".into()), None, None, l);
    r.forward(
        json!({"jsonrpc":"2.0","id":5,"method":"tools/list"}),
        None,
        a,
        Answer::AsIs,
    );
    r.fail_all("restarting");
    let got = ra.try_recv().unwrap();
    assert_eq!(
        got,
        json!({"jsonrpc":"2.0","id":5,"error":{"code":-32603,"message":"restarting"}})
    );
    assert_eq!(r.streams(), 1);
    r.close_all("stopped");
    assert_eq!(r.streams(), 0);
    assert!(rl.try_recv().is_err());
}

#[test]
fn fail_all_but_keeps_the_requests_that_never_reached_the_child() {
    let mut r = Router::default();
    let (a, mut ra) = outbox();
    let (b, mut rb) = outbox();
    let req = |id| json!({"jsonrpc":"2.0","id":id,"method":"tools/call"});
    r.forward(req(1), None, a, Answer::AsIs);
    let mb = r.forward(req(2), None, b, Answer::AsIs);
    let kept = mb["id"].as_u64().unwrap();
    r.fail_all_but("restarting", &[kept]);
    assert_eq!(ra.try_recv().unwrap()["error"]["code"], json!(-32603));
    assert!(rb.try_recv().is_err(), "kept for the next child");
    assert!(r.is_pending(kept));
    // The next child answers it with the same child-side id.
    r.on_child(json!({"jsonrpc":"2.0","id":kept,"result":{"ok":true}}));
    assert_eq!(rb.try_recv().unwrap()["id"], json!(2));
    assert_eq!(r.in_flight(), 0);
}

#[test]
fn an_answer_as_is_goes_on_as_its_bytes_and_a_translated_one_does_not() {
    let mut r = Router::default();
    let (a, mut ra) = outbox();
    let (b, mut rb) = outbox();
    let fast = r.forward_raw(json!("req-1"), Some("s".into()), a);
    let line = format!(r#"{{"jsonrpc":"2.0", "result":{{"id":9}}, "id":{fast}}}"#);
    let (id, at, said) = raw::answer_id(line.as_bytes()).unwrap();
    assert!(r.answer_raw(id, line.as_bytes(), &at, said));
    match ra.0.try_recv().unwrap() {
        Out::Answer(bytes) => assert_eq!(
            &bytes[..],
            br#"{"jsonrpc":"2.0", "result":{"id":9}, "id":"req-1"}"#
        ),
        other => panic!("not forwarded as bytes: {other:?}"),
    }
    assert_eq!(r.in_flight(), 0);
    // Answered already, or an id xy never sent: the Value path decides.
    assert!(!r.answer_raw(id, line.as_bytes(), &at, said));
    let m = r.forward(
        json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}),
        None,
        b,
        Answer::Complete { cacheable: true },
    );
    let child = m["id"].as_u64().unwrap();
    let line = format!(r#"{{"jsonrpc":"2.0","id":{child},"result":{{"tools":[]}}}}"#);
    let (id, at, said) = raw::answer_id(line.as_bytes()).unwrap();
    assert!(!r.answer_raw(id, line.as_bytes(), &at, said));
    assert!(r.is_pending(child));
    r.on_child(serde_json::from_str(&line).unwrap());
    assert_eq!(
        rb.try_recv().unwrap()["result"]["resultType"],
        json!("complete")
    );
}

#[test]
fn answers_are_completed_or_replaced_for_translated_requests() {
    let mut r = Router::default();
    let (a, mut ra) = outbox();
    let m = r.forward(
        json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}),
        None,
        a.clone(),
        Answer::Complete { cacheable: true },
    );
    r.on_child(json!({"jsonrpc":"2.0","id":m["id"],"result":{"tools":[]}}));
    assert_eq!(
        ra.try_recv().unwrap()["result"],
        json!({"tools":[],"resultType":"complete","ttlMs":0,"cacheScope":"private"})
    );
    let m = r.forward(
        json!({"jsonrpc":"2.0","id":4,"method":"tools/call"}),
        None,
        a.clone(),
        Answer::Complete { cacheable: false },
    );
    r.on_child(json!({"jsonrpc":"2.0","id":m["id"],"result":{"content":[]}}));
    assert_eq!(
        ra.try_recv().unwrap()["result"],
        json!({"content":[],"resultType":"complete"})
    );
    let m = r.forward(
        json!({"jsonrpc":"2.0","id":2,"method":"ping"}),
        None,
        a.clone(),
        Answer::Replace(json!({"supportedVersions":["2026-07-28"]})),
    );
    r.on_child(json!({"jsonrpc":"2.0","id":m["id"],"result":{}}));
    assert_eq!(
        ra.try_recv().unwrap()["result"]["supportedVersions"],
        json!(["2026-07-28"])
    );
    let m = r.forward(
        json!({"jsonrpc":"2.0","id":3,"method":"ping"}),
        None,
        a,
        Answer::Replace(json!({})),
    );
    r.on_child(json!({"jsonrpc":"2.0","id":m["id"],"error":{"code":-1,"message":"no"}}));
    assert_eq!(ra.try_recv().unwrap()["error"]["code"], json!(-1));
}

#[test]
fn a_tracked_call_is_recorded_once_however_it_ends() {
    let calls = crate::calls::Calls::new(None);
    let mut feed = calls.subscribe();
    let mut r = Router {
        recorder: Some(Recorder {
            calls: calls.clone(),
            server: "s".into(),
        }),
        ..Router::default()
    };
    let start = |tool: &str| CallStart {
        tool: tool.into(),
        client: Some("c 1".into()),
        at: std::time::SystemTime::now(),
        arrived: tokio::time::Instant::now(),
    };
    let (a, _ra) = outbox();
    let req = |id| json!({"jsonrpc":"2.0","id":id,"method":"tools/call"});
    // The Value path: a tool error.
    let m = r.forward(req(1), None, a.clone(), Answer::AsIs);
    let id = m["id"].as_u64().unwrap();
    r.track(id, start("v"));
    r.on_child(json!({"jsonrpc":"2.0","id":id,"result":{"isError":true}}));
    // The fast path: an error answer.
    let fast = r.forward_raw(json!(2), Some("x".into()), a.clone());
    r.track(fast, start("raw"));
    let line = format!(r#"{{"jsonrpc":"2.0","id":{fast},"error":{{"code":-1,"message":"m"}}}}"#);
    let (id, at, said) = raw::answer_id(line.as_bytes()).unwrap();
    assert!(r.answer_raw(id, line.as_bytes(), &at, said));
    // The child goes away; a 2026 client closes its stream.
    let m = r.forward(req(3), Some("x".into()), a.clone(), Answer::AsIs);
    r.track(m["id"].as_u64().unwrap(), start("gone"));
    r.fail_all("restarting");
    let (b, rb) = outbox();
    let m = r.forward(req(4), None, b, Answer::AsIs);
    r.track(m["id"].as_u64().unwrap(), start("closed"));
    drop(rb);
    r.prune();
    // Not tracked (not a call): not recorded.
    let m = r.forward(req(5), None, a, Answer::AsIs);
    r.on_child(json!({"jsonrpc":"2.0","id":m["id"],"result":{}}));
    let mut got = Vec::new();
    while let Ok(c) = feed.try_recv() {
        got.push((c.record.tool.clone(), c.record.outcome));
    }
    assert_eq!(
        got,
        [
            ("v".to_owned(), CallOutcome::ToolError),
            ("raw".to_owned(), CallOutcome::RpcError),
            ("gone".to_owned(), CallOutcome::ChildGone),
            ("closed".to_owned(), CallOutcome::RpcError),
        ]
    );
    assert_eq!(calls.total("s"), 4);
}

/// A 2026 client's `tools/call` of `name` forwarded to a 2025 child,
/// its client declaring `caps`; the child-side id.
fn mrtr_call(r: &mut Router, id: Value, name: &str, caps: Value, out: Outbox) -> u64 {
    let m = r.forward(
        json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":name}}),
        None,
        out,
        Answer::Complete { cacheable: false },
    );
    let k = m["id"].as_u64().unwrap();
    r.set_asks(
        k,
        Some(Arc::new(caps)),
        Asks::Mrtr(Box::new(MrtrCall::new("tools/call", Some(name.into())))),
    );
    k
}

fn retry_of(name: &str, id: u64, state: &Value, responses: Value) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":name,
        "inputResponses":responses,"requestState":state}})
}

fn all_caps() -> Value {
    json!({"elicitation":{},"sampling":{},"roots":{}})
}

#[test]
fn a_2025_childs_questions_become_input_required_over_rounds() {
    let mut r = Router::default();
    let now = Instant::now();
    let (a, mut ra) = outbox();
    let k = mrtr_call(&mut r, json!(1), "ask", all_caps(), a);
    // Round 1: two questions in one burst, one InputRequiredResult.
    let (act, _) = r.on_child(
        json!({"jsonrpc":"2.0","id":"user_name","method":"elicitation/create",
        "params":{"message":"name?","requestedSchema":{"type":"object"}}}),
    );
    assert_eq!(act, ChildAction::Gather(k));
    let (act, _) = r.on_child(json!({"jsonrpc":"2.0","id":5,"method":"roots/list"}));
    assert_eq!(act, ChildAction::Nothing, "gathered with the first");
    assert!(r.ask(k, now).is_empty());
    let got = ra.try_recv().unwrap();
    assert_eq!(got["id"], json!(1));
    let res = &got["result"];
    assert_eq!(res["resultType"], "input_required");
    assert_eq!(
        res["inputRequests"]["user_name"]["method"],
        "elicitation/create"
    );
    assert_eq!(res["inputRequests"]["roots-5"]["method"], "roots/list");
    let state1 = res["requestState"].clone();
    assert_eq!(r.in_flight(), 1, "the child's request still waits");
    // The retry answers both: they go to the child with its ids.
    let (b, mut rb) = outbox();
    let retry = retry_of(
        "ask",
        2,
        &state1,
        json!({"user_name":{"action":"accept","content":{"name":"A"}},"roots-5":{"roots":[]}}),
    );
    let to_child = r.retry(&retry, json!(2), b.clone(), now).unwrap();
    assert_eq!(to_child.len(), 2);
    assert!(
        to_child
            .iter()
            .any(|m| m["id"] == "user_name" && m["result"]["action"] == "accept")
    );
    assert!(
        to_child
            .iter()
            .any(|m| m["id"] == 5 && m["result"]["roots"] == json!([]))
    );
    // The same state again: replayed, refused.
    let (c, _rc) = outbox();
    assert_eq!(
        r.retry(&retry, json!(3), c.clone(), now).unwrap_err().0,
        mrtr::BAD_STATE
    );
    // Round 2: another question, answered on the retry's stream.
    let (act, _) = r.on_child(json!({"jsonrpc":"2.0","id":6,"method":"sampling/createMessage","params":{"messages":[],"maxTokens":5}}));
    assert_eq!(act, ChildAction::Gather(k));
    r.ask(k, now);
    let got = rb.try_recv().unwrap();
    assert_eq!(got["id"], json!(2));
    let state2 = got["result"]["requestState"].clone();
    assert_ne!(state1, state2);
    // The round-1 state cannot stand in for round 2.
    assert_eq!(
        r.retry(&retry, json!(4), c.clone(), now).unwrap_err().0,
        mrtr::BAD_STATE
    );
    let (d, mut rd) = outbox();
    let to_child = r
        .retry(
            &retry_of(
                "ask",
                7,
                &state2,
                json!({"sampling-6":{"role":"assistant"}}),
            ),
            json!(7),
            d,
            now,
        )
        .unwrap();
    assert_eq!(to_child[0]["id"], json!(6));
    // The child's result answers the last retry, completed for 2026.
    r.on_child(json!({"jsonrpc":"2.0","id":k,"result":{"content":[]}}));
    let got = rd.try_recv().unwrap();
    assert_eq!(got["id"], json!(7));
    assert_eq!(got["result"]["resultType"], "complete");
    assert_eq!(r.in_flight(), 0);
}

#[test]
fn a_forged_or_misplaced_state_is_refused_and_missing_answers_asked_again() {
    let mut r = Router::default();
    let now = Instant::now();
    let (a, mut ra) = outbox();
    let k = mrtr_call(&mut r, json!(1), "ask", all_caps(), a);
    r.on_child(
        json!({"jsonrpc":"2.0","id":1,"method":"elicitation/create","params":{"message":"?"}}),
    );
    r.on_child(json!({"jsonrpc":"2.0","id":2,"method":"roots/list"}));
    r.ask(k, now);
    let state = ra.try_recv().unwrap()["result"]["requestState"].clone();
    let (b, mut rb) = outbox();
    let s = state.as_str().unwrap();
    let forged = format!("{}0", &s[..s.len() - 1]);
    let forged = if forged == s {
        format!("{}1", &s[..s.len() - 1])
    } else {
        forged
    };
    let e = r
        .retry(
            &retry_of("ask", 2, &json!(forged), json!({})),
            json!(2),
            b.clone(),
            now,
        )
        .unwrap_err();
    assert_eq!(e.0, mrtr::BAD_STATE);
    assert!(e.1.contains("altered"), "{e:?}");
    let e = r
        .retry(
            &retry_of("other", 2, &state, json!({})),
            json!(2),
            b.clone(),
            now,
        )
        .unwrap_err();
    assert!(e.1.contains("another request"), "{e:?}");
    // One of two answered: that one goes on, the other is asked again.
    let to_child = r
        .retry(
            &retry_of(
                "ask",
                2,
                &state,
                json!({"elicitation-1":{"action":"decline"}}),
            ),
            json!(2),
            b,
            now,
        )
        .unwrap();
    assert_eq!(to_child.len(), 1);
    let again = rb.try_recv().unwrap();
    let asked: Vec<&String> = again["result"]["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(asked, ["roots-2"]);
    assert_ne!(again["result"]["requestState"], state);
}

#[test]
fn a_question_that_misses_the_round_is_asked_in_the_next() {
    let mut r = Router::default();
    let now = Instant::now();
    let (a, mut ra) = outbox();
    let k = mrtr_call(&mut r, json!(1), "ask", all_caps(), a);
    r.on_child(
        json!({"jsonrpc":"2.0","id":1,"method":"elicitation/create","params":{"message":"?"}}),
    );
    r.ask(k, now);
    let state = ra.try_recv().unwrap()["result"]["requestState"].clone();
    // Late: the client has its InputRequiredResult already.
    let (act, _) = r.on_child(json!({"jsonrpc":"2.0","id":2,"method":"roots/list"}));
    assert_eq!(act, ChildAction::ToChild(vec![]));
    let (b, mut rb) = outbox();
    let to_child = r
        .retry(
            &retry_of(
                "ask",
                2,
                &state,
                json!({"elicitation-1":{"action":"accept"}}),
            ),
            json!(2),
            b,
            now,
        )
        .unwrap();
    assert_eq!(to_child[0]["id"], json!(1));
    let next = rb.try_recv().unwrap();
    let keys: Vec<&String> = next["result"]["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(keys, ["roots-2"]);
}

#[test]
fn an_unanswered_question_expires_and_the_child_hears_of_it() {
    let mut r = Router::default();
    let now = Instant::now();
    let (a, _ra) = outbox();
    let k = mrtr_call(&mut r, json!(1), "ask", all_caps(), a);
    r.on_child(json!({"jsonrpc":"2.0","id":9,"method":"roots/list"}));
    r.ask(k, now);
    assert!(
        r.expire_waiting(now + mrtr::TTL - std::time::Duration::from_secs(1))
            .is_empty()
    );
    let out = r.expire_waiting(now + mrtr::TTL);
    assert_eq!(out[0]["id"], json!(9));
    assert_eq!(out[0]["error"]["code"], json!(-32603));
    assert_eq!(out[1]["method"], "notifications/cancelled");
    assert_eq!(out[1]["params"]["requestId"], json!(k));
    assert_eq!(r.in_flight(), 0);
}

#[test]
fn waiting_exchanges_are_bounded_the_oldest_going_first() {
    let mut r = Router::default();
    let t0 = Instant::now();
    let mut first = None;
    let mut dropped = Vec::new();
    for i in 0..=mrtr::MAX_WAITING {
        let (a, _ra) = outbox();
        let k = mrtr_call(&mut r, json!(i), "ask", all_caps(), a);
        first.get_or_insert(k);
        let pad = "p".repeat(200);
        r.on_child(
            json!({"jsonrpc":"2.0","id":1000 + i,"method":"roots/list","params":{"pad":pad}}),
        );
        dropped.extend(r.ask(k, t0 + std::time::Duration::from_millis(i as u64)));
    }
    assert_eq!(r.in_flight(), mrtr::MAX_WAITING);
    assert_eq!(dropped[0]["id"], json!(1000), "the oldest question");
    assert_eq!(dropped[1]["params"]["requestId"], json!(first.unwrap()));
    // Bytes bound too: one huge question evicts the rest.
    let (a, _ra) = outbox();
    let k = mrtr_call(&mut r, json!("big"), "ask", all_caps(), a);
    let big = "x".repeat(mrtr::MAX_WAITING_BYTES - 100);
    r.on_child(
        json!({"jsonrpc":"2.0","id":"big","method":"elicitation/create","params":{"message":big}}),
    );
    r.ask(k, t0 + std::time::Duration::from_secs(60));
    let bytes: usize = r.waiting.values().map(|w| w.bytes).sum();
    assert!(bytes <= mrtr::MAX_WAITING_BYTES);
    assert!(r.waiting.len() < mrtr::MAX_WAITING);
}

#[test]
fn a_question_the_client_cannot_answer_is_refused_on_its_behalf() {
    let mut r = Router::default();
    // 2026: the client's request fails -32021, the child's is cancelled.
    let (a, mut ra) = outbox();
    let k = mrtr_call(&mut r, json!(1), "ask", json!({"elicitation":{}}), a);
    let (act, _) =
        r.on_child(json!({"jsonrpc":"2.0","id":4,"method":"sampling/createMessage","params":{}}));
    let ChildAction::ToChild(out) = act else {
        panic!("{act:?}")
    };
    assert_eq!(out[0]["id"], json!(4));
    assert!(out[0]["error"].is_object());
    assert_eq!(out[1]["params"]["requestId"], json!(k));
    let got = ra.try_recv().unwrap();
    assert_eq!(got["error"]["code"], json!(mrtr::MISSING_CAPABILITY));
    assert_eq!(
        got["error"]["data"]["requiredCapabilities"],
        json!({"sampling":{}})
    );
    assert_eq!(r.in_flight(), 0);
    // Roots are asked for unprompted too: only the child hears no, and a
    // call that then succeeds is passed on ...
    let (a, mut ra) = outbox();
    let k = mrtr_call(&mut r, json!(1), "ask", json!({}), a);
    let (act, _) = r.on_child(json!({"jsonrpc":"2.0","id":3,"method":"roots/list"}));
    let ChildAction::ToChild(out) = act else {
        panic!("{act:?}")
    };
    assert_eq!(out.len(), 1);
    assert_eq!(
        out[0]["error"]["data"]["requiredCapabilities"],
        json!({"roots":{}})
    );
    assert!(ra.try_recv().is_err());
    r.on_child(json!({"jsonrpc":"2.0","id":k,"result":{"content":[]}}));
    assert!(ra.try_recv().unwrap()["result"].is_object());
    // ... while one that fails fails with -32021 (SPEC §24).
    let (a, mut ra) = outbox();
    let k = mrtr_call(&mut r, json!(1), "ask", json!({}), a);
    r.on_child(json!({"jsonrpc":"2.0","id":3,"method":"roots/list"}));
    r.on_child(json!({"jsonrpc":"2.0","id":k,"result":{"content":[],"isError":true}}));
    let got = ra.try_recv().unwrap();
    assert_eq!(got["error"]["code"], json!(mrtr::MISSING_CAPABILITY));
    assert_eq!(
        got["error"]["data"]["requiredCapabilities"],
        json!({"roots":{}})
    );
    assert_eq!(r.in_flight(), 0);
    // 2025: the child gets the error the client would give; nothing else.
    let (b, mut rb) = outbox();
    let m = r.forward(
        json!({"jsonrpc":"2.0","id":1,"method":"tools/call"}),
        Some("s".into()),
        b,
        Answer::AsIs,
    );
    let k = m["id"].as_u64().unwrap();
    r.set_asks(k, Some(Arc::new(json!({}))), Asks::Direct);
    let (act, _) = r.on_child(json!({"jsonrpc":"2.0","id":5,"method":"roots/list"}));
    let ChildAction::ToChild(out) = act else {
        panic!("{act:?}")
    };
    assert_eq!(out.len(), 1);
    assert_eq!(
        out[0]["error"]["data"]["requiredCapabilities"],
        json!({"roots":{}})
    );
    assert!(rb.try_recv().is_err());
    assert!(r.is_pending(k));
    // A 2026 request that takes no input: the child is told no.
    let (c, _rc) = outbox();
    let m = r.forward(
        json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}),
        None,
        c,
        Answer::AsIs,
    );
    r.fail(k, "x");
    let k2 = m["id"].as_u64().unwrap();
    r.set_asks(k2, Some(Arc::new(all_caps())), Asks::Refuse);
    let (act, _) = r.on_child(json!({"jsonrpc":"2.0","id":6,"method":"roots/list"}));
    let ChildAction::ToChild(out) = act else {
        panic!("{act:?}")
    };
    assert_eq!(out[0]["error"]["code"], json!(-32601));
}

#[test]
fn the_childs_answer_while_its_client_is_away_goes_to_the_retry_and_a_restart_fails_it() {
    let mut r = Router::default();
    let now = Instant::now();
    let (a, mut ra) = outbox();
    let k = mrtr_call(&mut r, json!(1), "ask", all_caps(), a.clone());
    r.on_child(json!({"jsonrpc":"2.0","id":1,"method":"roots/list"}));
    r.ask(k, now);
    let state = ra.try_recv().unwrap()["result"]["requestState"].clone();
    r.on_child(
        json!({"jsonrpc":"2.0","id":k,"result":{"content":[{"type":"text","text":"gave up"}]}}),
    );
    let (b, mut rb) = outbox();
    let to_child = r
        .retry(
            &retry_of("ask", 2, &state, json!({"roots-1":{"roots":[]}})),
            json!(2),
            b,
            now,
        )
        .unwrap();
    assert!(to_child.is_empty(), "the child is done with it");
    assert_eq!(
        rb.try_recv().unwrap()["result"]["content"][0]["text"],
        "gave up"
    );
    // A restart while waiting: the retry gets the failure.
    let k = mrtr_call(&mut r, json!(3), "ask", all_caps(), a);
    r.on_child(json!({"jsonrpc":"2.0","id":2,"method":"roots/list"}));
    r.ask(k, now);
    let state = ra.try_recv().unwrap()["result"]["requestState"].clone();
    r.fail_all("xy: restarting");
    let (c, mut rc) = outbox();
    r.retry(&retry_of("ask", 4, &state, json!({})), json!(4), c, now)
        .unwrap();
    let got = rc.try_recv().unwrap();
    assert_eq!(got["id"], json!(4));
    assert_eq!(got["error"]["message"], "xy: restarting");
}

#[test]
fn log_messages_go_on_the_requests_stream_as_far_as_its_client_asked() {
    let mut r = Router::default();
    let (a, mut ra) = outbox();
    let m = r.forward(
        json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"log"}}),
        None,
        a,
        Answer::Complete { cacheable: false },
    );
    let k = m["id"].as_u64().unwrap();
    let log = |level: &str| {
        json!({"jsonrpc":"2.0","method":"notifications/message",
            "params":{"level":level,"data":level}})
    };
    let meta = json!({"io.modelcontextprotocol/logLevel": "warning"});
    r.set_log(k, Log::of_2026(Some(&meta)));
    r.on_child(log("info"));
    r.on_child(log("error"));
    assert_eq!(ra.try_recv().unwrap()["params"]["data"], "error");
    assert!(ra.try_recv().is_err(), "info is below warning");
    // A 2026 client that did not opt in gets none.
    r.set_log(k, Log::of_2026(Some(&json!({}))));
    r.on_child(log("emergency"));
    assert!(ra.try_recv().is_err());
    // A 2025 client gets what the child sends (its setLevel is the child's).
    r.set_log(k, Log::Session);
    r.on_child(log("debug"));
    assert_eq!(ra.try_recv().unwrap()["params"]["data"], "debug");
}

#[test]
fn a_2026_childs_input_required_is_asked_of_a_2025_client_and_retried() {
    let mut r = Router::default();
    let (a, mut ra) = outbox();
    let req = json!({"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"ask","_meta":{"progressToken":"p"}}});
    let m = r.forward(req, Some("S".into()), a, Answer::AsIs);
    let k = m["id"].as_u64().unwrap();
    r.set_asks(
        k,
        Some(Arc::new(all_caps())),
        Asks::Relay(Box::new(m.clone())),
    );
    let line = format!(
        r#"{{"jsonrpc":"2.0","id":{k},"result":{{"resultType":"input_required",
        "inputRequests":{{"who":{{"method":"elicitation/create","params":{{"message":"?"}}}},
                         "where":{{"method":"roots/list"}}}},
        "requestState":"opaque"}}}}"#
    )
    .replace('\n', "");
    // Not the bytes fast path, though the answer would go as is.
    let (id, at, said) = raw::answer_id(line.as_bytes()).unwrap();
    assert!(!r.answer_raw(id, line.as_bytes(), &at, said));
    let (act, _) = r.on_child(serde_json::from_str(&line).unwrap());
    assert_eq!(act, ChildAction::Nothing);
    let q1 = ra.try_recv().unwrap();
    let q2 = ra.try_recv().unwrap();
    assert!(q1["id"].as_str().unwrap().starts_with("xy-s2c-"));
    let by = |m: &str| {
        if q1["method"] == m {
            q1["id"].clone()
        } else {
            q2["id"].clone()
        }
    };
    let e_id = by("elicitation/create");
    let r_id = by("roots/list");
    assert_eq!(
        r.client_response(
            json!({"jsonrpc":"2.0","id":e_id.clone(),"result":{}}),
            Some("T")
        ),
        Err(NotYours)
    );
    assert_eq!(
        r.client_response(
            json!({"jsonrpc":"2.0","id":e_id,"result":{"action":"accept","content":{"n":1}}}),
            Some("S")
        ),
        Ok(None)
    );
    let retry = r
        .client_response(
            json!({"jsonrpc":"2.0","id":r_id,"result":{"roots":[]}}),
            Some("S"),
        )
        .unwrap()
        .unwrap();
    let k2 = retry["id"].as_u64().unwrap();
    assert_ne!(k2, k, "a retry is another request");
    assert_eq!(retry["params"]["requestState"], "opaque");
    assert_eq!(retry["params"]["inputResponses"]["who"]["action"], "accept");
    assert_eq!(
        retry["params"]["inputResponses"]["where"]["roots"],
        json!([])
    );
    assert_eq!(retry["params"]["name"], "ask");
    // Progress of the retry still reaches the client, its token restored.
    let token = retry["params"]["_meta"]["progressToken"].clone();
    r.on_child(json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":token,"progress":1}}));
    assert_eq!(ra.try_recv().unwrap()["params"]["progressToken"], "p");
    r.on_child(json!({"jsonrpc":"2.0","id":k2,"result":{"content":[]}}));
    assert_eq!(ra.try_recv().unwrap()["id"], "c1");
    assert_eq!(r.in_flight(), 0);
}

#[test]
fn task_news_reach_2025_streams_and_the_2026_streams_following_the_task() {
    let mut r = Router::default();
    let (a, mut ra) = outbox();
    let (b, mut rb) = outbox();
    let (c, mut rc) = outbox();
    r.listen(Some("s".into()), None, None, a);
    let mut f = Map::new();
    f.insert("taskIds".into(), json!(["t1"]));
    r.listen(None, Some(json!("L")), Some(f), b);
    let mut f = Map::new();
    f.insert("taskIds".into(), json!(["t2"]));
    r.listen(None, Some(json!("M")), Some(f), c);
    r.task_news("t1", &crate::bridge::tasks::failed("t1", "gone"));
    let got = ra.try_recv().unwrap();
    assert_eq!(got["method"], "notifications/tasks/status");
    assert_eq!(got["params"]["status"], "failed");
    let got = rb.try_recv().unwrap();
    assert_eq!(got["method"], "notifications/tasks");
    assert_eq!(got["params"]["_meta"][META_SUBSCRIPTION], "L");
    assert!(rc.try_recv().is_err(), "follows another task");
    // A child's own task notification: to the stream following it.
    r.on_child(json!({"jsonrpc":"2.0","method":"notifications/tasks",
        "params":{"taskId":"t2","status":"working"}}));
    assert_eq!(
        rc.try_recv().unwrap()["params"]["_meta"][META_SUBSCRIPTION],
        "M"
    );
    assert!(rb.try_recv().is_err());
    assert_eq!(r.tasks.open(), 1, "followed as it passed");
}

#[test]
fn own_answers_are_handed_back() {
    let mut r = Router::default();
    let id = r.own_id();
    let (_, own) = r.on_child(json!({"jsonrpc":"2.0","id":id,"result":{}}));
    assert_eq!(own.unwrap()["id"], json!(id));
}

#[test]
fn a_client_that_does_not_read_gets_its_answer_and_its_child_hears_no_room() {
    let mut r = Router::default();
    let (a, mut ra) = outbox();
    let m = r.forward(
        json!({"jsonrpc":"2.0","id":"call","method":"tools/call",
            "params":{"_meta":{"progressToken":"t"}}}),
        None,
        a,
        Answer::AsIs,
    );
    let token = m["params"]["_meta"]["progressToken"].clone();
    for n in 0..1000 {
        r.on_child(json!({"jsonrpc":"2.0","method":"notifications/progress",
            "params":{"progressToken":token,"progress":n}}));
    }
    // Questions until there is no room left for them: the child is told.
    let mut refused = None;
    for n in 0..1000 {
        let (act, _) = r.on_child(json!({"jsonrpc":"2.0","id":n,"method":"roots/list"}));
        if let ChildAction::ToChild(m) = act {
            refused = Some(m[0].clone());
            break;
        }
    }
    let refused = refused.expect("a full queue refuses the child's request");
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("not reading")),
        "{refused}"
    );
    // The answer still fits, after everything queued before it.
    r.on_child(json!({"jsonrpc":"2.0","id":m["id"],"result":{"done":true}}));
    let mut last = Value::Null;
    while let Ok(v) = ra.try_recv() {
        last = v;
    }
    assert_eq!(last["id"], "call");
    assert_eq!(last["result"]["done"], true);
}
