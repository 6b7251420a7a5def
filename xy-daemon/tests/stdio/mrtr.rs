//! SPEC §19 against the real `xyd`: a 2025-era child's questions to its
//! client (elicitation, sampling, roots) reach a 2026 client as an
//! `InputRequiredResult` and its retries' answers reach the child, over
//! rounds; a forged or replayed `requestState` is refused; a question the
//! asking client did not declare the capability for is refused on its
//! behalf, for clients of both eras. The child is the rmcp test server
//! in 2025 mode (`xy-test-mcp --era 2025`).

use serde_json::{Value, json};
use xy_testbins::interop::{self, Interop};

use super::client::{Era, Mcp};
use super::{stdio_config, url};
use crate::helper::{TestDaemon, free_port, testbin};

fn asking_config(port: u16) -> String {
    let args: Vec<String> = [
        "--stdio",
        "--era",
        "2025",
        "--tools",
        "echo,elicit,sample,roots,asks",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    stdio_config(&testbin("xy-test-mcp"), &args, port, "")
}

fn every_cap() -> Value {
    json!({"elicitation": {}, "sampling": {}, "roots": {}})
}

/// A `tools/call` of `tool`, as a retry when `retry` (its `inputResponses`
/// and the `requestState`) is given.
fn call(tool: &str, args: Value, retry: Option<(Value, &Value)>) -> Value {
    let mut p = json!({"name": tool, "arguments": args});
    if let Some((responses, state)) = retry {
        p["inputResponses"] = responses;
        p["requestState"] = state.clone();
    }
    p
}

/// The one key of an `InputRequiredResult`'s `inputRequests`, checked to
/// ask `method`.
#[track_caller]
fn only_key(result: &Value, method: &str) -> String {
    assert_eq!(result["resultType"], "input_required", "{result}");
    let reqs = result["inputRequests"].as_object().expect("inputRequests");
    assert_eq!(reqs.len(), 1, "{result}");
    let (k, v) = reqs.iter().next().unwrap();
    assert_eq!(v["method"], method, "{result}");
    k.clone()
}

fn roots() -> Value {
    json!({"roots": [{"uri": "file:///w", "name": "w"}]})
}

fn answer(text: &str) -> Value {
    json!({"action": "accept", "content": {"answer": text}})
}

/// Two rounds of elicitation; each state is good for one retry; a forged
/// one is refused; the last retry gets the child's result.
#[test]
fn a_2025_childs_elicitations_reach_a_2026_client_over_rounds() {
    let port = free_port();
    let d = TestDaemon::start(&[("ask", asking_config(port))]);
    d.running_pid("ask");
    let mut c = Mcp::declaring(&url(port), Era::V2026, every_cap());
    let r1 = c.result("tools/call", call("elicit", json!({"rounds": 2}), None));
    let k1 = only_key(&r1, "elicitation/create");
    assert_eq!(
        r1["inputRequests"][&k1]["params"]["message"],
        "Round 1: your answer?"
    );
    let s1 = r1["requestState"].clone();
    assert!(s1.is_string(), "{r1}");
    // A forged state (one character changed) is refused.
    let text = s1.as_str().unwrap();
    let last = if text.ends_with('0') { "1" } else { "0" };
    let forged = json!(format!("{}{last}", &text[..text.len() - 1]));
    let r = c.request(
        "tools/call",
        call(
            "elicit",
            json!({"rounds": 2}),
            Some((json!({&k1: answer("x")}), &forged)),
        ),
    );
    assert_eq!(r.response()["error"]["code"], -32602, "{r:?}");
    let retry1 = Some((json!({&k1: answer("one")}), &s1));
    let r2 = c.result(
        "tools/call",
        call("elicit", json!({"rounds": 2}), retry1.clone()),
    );
    let k2 = only_key(&r2, "elicitation/create");
    assert_eq!(
        r2["inputRequests"][&k2]["params"]["message"],
        "Round 2: your answer?"
    );
    let s2 = r2["requestState"].clone();
    assert_ne!(s1, s2);
    // Round 1's state again: a replay.
    let r = c.request("tools/call", call("elicit", json!({"rounds": 2}), retry1));
    let e = &r.response()["error"];
    assert_eq!(e["code"], -32602, "{r:?}");
    assert!(
        e["message"].as_str().unwrap_or("").contains("already used"),
        "{e}"
    );
    let done = c.result(
        "tools/call",
        call(
            "elicit",
            json!({"rounds": 2}),
            Some((json!({&k2: answer("two")}), &s2)),
        ),
    );
    assert_eq!(done["resultType"], "complete", "{done}");
    assert_eq!(done["content"][0]["text"], "answers: one,two", "{done}");
    // And s2 is spent too.
    let r = c.request(
        "tools/call",
        call(
            "elicit",
            json!({"rounds": 2}),
            Some((json!({&k2: answer("two")}), &s2)),
        ),
    );
    assert_eq!(r.response()["error"]["code"], -32602, "{r:?}");
}

/// Sampling and roots each take a round; two questions asked at once come
/// in one `InputRequiredResult`; an answer missing from the retry is
/// asked again.
#[test]
fn sampling_roots_and_questions_asked_at_once() {
    let port = free_port();
    let d = TestDaemon::start(&[("ask", asking_config(port))]);
    d.running_pid("ask");
    let mut c = Mcp::declaring(&url(port), Era::V2026, every_cap());
    let r = c.result("tools/call", call("sample", json!({}), None));
    let k = only_key(&r, "sampling/createMessage");
    let sampled = json!({"role": "assistant", "content": {"type": "text", "text": "hello"},
        "model": "m", "stopReason": "endTurn"});
    let done = c.result(
        "tools/call",
        call(
            "sample",
            json!({}),
            Some((json!({&k: sampled}), &r["requestState"])),
        ),
    );
    assert_eq!(done["content"][0]["text"], "sampled: hello", "{done}");

    let r = c.result("tools/call", call("asks", json!({}), None));
    let reqs = r["inputRequests"].as_object().expect("inputRequests");
    let key = |m: &str| {
        reqs.iter()
            .find(|(_, v)| v["method"] == m)
            .map(|(k, _)| k.clone())
    };
    // Asked at once: one round (a loaded machine may split the burst; the
    // gathering itself is unit-tested in route.rs).
    let done = match (key("elicitation/create"), key("roots/list")) {
        (Some(ke), Some(kr)) => {
            // Only the elicitation answered: the roots are asked again.
            let again = c.result(
                "tools/call",
                call(
                    "asks",
                    json!({}),
                    Some((json!({&ke: answer("yes")}), &r["requestState"])),
                ),
            );
            assert_eq!(only_key(&again, "roots/list"), kr);
            c.result(
                "tools/call",
                call(
                    "asks",
                    json!({}),
                    Some((json!({&kr: roots()}), &again["requestState"])),
                ),
            )
        }
        (Some(ke), None) => {
            let next = c.result(
                "tools/call",
                call(
                    "asks",
                    json!({}),
                    Some((json!({&ke: answer("yes")}), &r["requestState"])),
                ),
            );
            let kr = only_key(&next, "roots/list");
            c.result(
                "tools/call",
                call(
                    "asks",
                    json!({}),
                    Some((json!({&kr: roots()}), &next["requestState"])),
                ),
            )
        }
        other => panic!("{other:?} in {r}"),
    };
    let text = done["content"][0]["text"].as_str().unwrap_or("");
    assert!(
        text.starts_with("answer: yes; roots: ") && text.contains("file:///w"),
        "{done}"
    );
}

/// A question for a capability the asking client lacks: a 2026 client's
/// request fails with -32021 naming it; a 2025 client's child gets an
/// error (its tool fails); a 2025 client that declared it is asked on
/// the request's stream. The child serves on throughout.
#[test]
fn a_question_the_client_did_not_declare_is_refused_on_its_behalf() {
    let port = free_port();
    let d = TestDaemon::start(&[("ask", asking_config(port))]);
    d.running_pid("ask");
    let mut bare = Mcp::declaring(&url(port), Era::V2026, json!({"elicitation": {}}));
    let r = bare.request("tools/call", call("sample", json!({}), None));
    let e = &r.response()["error"];
    assert_eq!(e["code"], -32021, "{r:?}");
    assert_eq!(
        e["data"]["requiredCapabilities"],
        json!({"sampling": {}}),
        "{e}"
    );
    assert_eq!(r.status, 400, "{r:?}");
    // SPEC §24: roots too, when the child asks while serving the call.
    let r = bare.request("tools/call", call("roots", json!({}), None));
    let e = &r.response()["error"];
    assert_eq!((r.status, &e["code"]), (400, &json!(-32021)), "{r:?}");
    assert_eq!(
        e["data"]["requiredCapabilities"],
        json!({"roots": {}}),
        "{e}"
    );
    let echo = bare.result("tools/call", call("echo", json!({"text": "still"}), None));
    assert_eq!(echo["content"][0]["text"], "still");

    let mut old = Mcp::declaring(&url(port), Era::V2025, json!({}));
    let r = old.request("tools/call", call("roots", json!({}), None));
    let resp = r.response();
    let refused = resp.get("error").is_some() || resp["result"]["isError"] == true;
    assert!(refused, "the child's question was refused: {r:?}");
    assert!(
        r.messages.iter().all(|m| m["method"] != "roots/list"),
        "not asked: {r:?}"
    );

    let mut able = Mcp::declaring(&url(port), Era::V2025, json!({"roots": {}}));
    let s = able.start("tools/call", call("roots", json!({}), None));
    let ask = s.expect("roots/list");
    let reply =
        json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"roots": [{"uri": "file:///r"}]}});
    assert_eq!(able.post(&reply, &able.session_headers()).status, 202);
    let done = s.response();
    let text = done["result"]["content"][0]["text"].as_str().unwrap_or("");
    assert!(text.contains("file:///r"), "{done}");
    // The tool list is the same for every client, whatever it declared.
    assert_eq!(bare.tool_names(), old.tool_names());
}

/// The official Python SDK's client answers two rounds of elicitation
/// through xy from a 2025 child: in 2026 mode the SDK drives the
/// `InputRequiredResult` rounds xy makes, in legacy mode it answers the
/// child's own requests.
#[test]
fn the_python_sdk_answers_a_2025_childs_elicitations_in_both_eras() {
    let sdk = match interop::python_sdk() {
        Interop::Ready(sdk) => sdk,
        Interop::Skip(skip) => {
            return skip.announce("the_python_sdk_answers_a_2025_childs_elicitations_in_both_eras");
        }
    };
    let port = free_port();
    let d = TestDaemon::start(&[("ask", asking_config(port))]);
    d.running_pid("ask");
    for mode in ["2026-07-28", "legacy"] {
        let (python, args) = sdk.elicit_command(mode, &url(port), "elicit", &json!({"rounds": 2}));
        let out = std::process::Command::new(&python)
            .args(&args)
            .output()
            .expect("python runs");
        assert!(
            out.status.success(),
            "{mode}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got: Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
        assert_eq!(
            got["asked"],
            json!(["Round 1: your answer?", "Round 2: your answer?"]),
            "{mode}: {got}"
        );
        assert_eq!(got["text"], json!(["answers: py-1,py-2"]), "{mode}: {got}");
        assert_eq!(got["is_error"], false, "{mode}: {got}");
    }
}

/// At most 256 exchanges wait for retries per endpoint: past that the
/// oldest is given up (its state refused, its question answered with an
/// error at the child), the newest still completes, the child serves on.
#[test]
fn waiting_exchanges_are_bounded_and_the_oldest_given_up() {
    let port = free_port();
    let d = TestDaemon::start(&[("ask", asking_config(port))]);
    d.running_pid("ask");
    let mut c = Mcp::declaring(&url(port), Era::V2026, every_cap());
    let mut first = None;
    let mut last = None;
    for _ in 0..=256 {
        let r = c.result("tools/call", call("elicit", json!({}), None));
        let k = only_key(&r, "elicitation/create");
        first.get_or_insert((k.clone(), r["requestState"].clone()));
        last = Some((k, r["requestState"].clone()));
    }
    let (k, s) = first.unwrap();
    let r = c.request(
        "tools/call",
        call("elicit", json!({}), Some((json!({&k: answer("a")}), &s))),
    );
    assert_eq!(r.response()["error"]["code"], -32602, "{r:?}");
    let (k, s) = last.unwrap();
    let done = c.result(
        "tools/call",
        call("elicit", json!({}), Some((json!({&k: answer("a")}), &s))),
    );
    assert_eq!(done["content"][0]["text"], "answers: a", "{done}");
    let echo = c.result("tools/call", call("echo", json!({"text": "on"}), None));
    assert_eq!(echo["content"][0]["text"], "on");
}
