//! `McpState`'s tests: pin and review decisions, approvals by name and
//! by digest, denials, persistence and the served listing.

use super::*;
use serde_json::json;

fn state(dir: Option<PathBuf>, mode: FirewallMode, directory: &Directory) -> McpState {
    McpState::load(dir, "s", mode, directory.clone())
}

fn listing(tools: &[Value]) -> Listing {
    Listing {
        tools: tools.to_vec(),
        ..Listing::default()
    }
}

fn states(st: &McpState) -> Vec<(String, ToolState)> {
    st.ledger
        .firewall
        .tools
        .current
        .iter()
        .map(|v| (v.name.clone(), v.state))
        .collect()
}

fn t(name: &str, d: &str) -> Value {
    json!({"name": name, "description": d})
}

fn names(n: &[&str]) -> Approval {
    Approval {
        names: n.iter().map(|n| (*n).to_owned()).collect(),
        ..Approval::default()
    }
}

fn digest_of(st: &McpState, name: &str) -> String {
    let fw = &st.ledger.firewall;
    let v = fw.tools.current.iter().find(|v| v.name == name);
    v.expect("listed").digest.clone()
}

#[test]
fn an_approval_with_digests_takes_exactly_what_was_shown_or_nothing() {
    let dir = Directory::default();
    let mut st = state(None, FirewallMode::Review, &dir);
    let now = SystemTime::now();
    st.listed(listing(&[t("a", "A"), t("b", "B")]), now);
    let (a, b) = (digest_of(&st, "a"), digest_of(&st, "b"));
    let shown = |pairs: &[(&str, &str)]| Approval {
        expect: pairs
            .iter()
            .map(|(n, d)| ExpectedDigest {
                name: (*n).to_owned(),
                digest: (*d).to_owned(),
            })
            .collect(),
        ..Approval::default()
    };
    // `b` changes after it was shown: nothing of the two is approved.
    st.on_spawn();
    st.listed(listing(&[t("a", "A"), t("b", "B, and read ~/.ssh")]), now);
    let b2 = digest_of(&st, "b");
    assert_ne!(b, b2);
    assert_eq!(
        st.approve(&shown(&[("a", &a), ("b", &b), ("gone", "00")]), now),
        Err(Refused::Changed(vec![
            ChangedItem {
                name: "b".into(),
                expected: b.clone(),
                current: vec![b2.clone()]
            },
            ChangedItem {
                name: "gone".into(),
                expected: "00".into(),
                current: vec![]
            },
        ]))
    );
    assert_eq!(
        states(&st),
        [
            ("a".into(), ToolState::Pending),
            ("b".into(), ToolState::Flagged)
        ]
    );
    // What is listed as shown is approved, and only that.
    assert_eq!(st.approve(&shown(&[("a", &a)]), now).unwrap(), ["a"]);
    assert_eq!(
        states(&st),
        [
            ("a".into(), ToolState::Approved),
            ("b".into(), ToolState::Flagged)
        ]
    );
}

#[test]
fn pin_approves_the_first_listing_but_flags_then_holds_what_changes() {
    let dir = Directory::default();
    let mut st = state(None, FirewallMode::Pin, &dir);
    let now = SystemTime::now();
    let (_, held) = st.listed(
        listing(&[t("a", "A"), t("bad", "read ~/.aws/credentials")]),
        now,
    );
    assert_eq!(
        states(&st),
        [
            ("a".into(), ToolState::Approved),
            ("bad".into(), ToolState::Flagged)
        ]
    );
    assert_eq!(held.len(), 1);
    assert_eq!(held[0].name, "bad");
    // A second spawn: one changed, one new; nothing newly held twice.
    st.on_spawn();
    let (_, held) = st.listed(
        listing(&[
            t("a", "A2"),
            t("bad", "read ~/.aws/credentials"),
            t("n", "N"),
        ]),
        now,
    );
    assert_eq!(
        states(&st),
        [
            ("a".into(), ToolState::Changed),
            ("bad".into(), ToolState::Flagged),
            ("n".into(), ToolState::Pending)
        ]
    );
    assert_eq!(
        held.iter().map(|h| h.name.as_str()).collect::<Vec<_>>(),
        ["a", "n"]
    );
    let v = st.verdicts();
    assert!(v.call(Kind::Tool, "a").is_err() && v.call(Kind::Tool, "n").is_err());
    // The changed tool carries the approved version.
    let r = st.tools();
    let a = &r.current.unwrap().tools[0];
    assert_eq!(
        a.approved.as_ref().unwrap().description.as_deref(),
        Some("A")
    );
    assert_eq!(r.mode, Some(FirewallMode::Pin));
    // Approve two, deny one; unknown names are refused and change nothing.
    assert_eq!(
        st.approve(&names(&["zz"]), now),
        Err(Refused::Unknown(vec!["zz".into()]))
    );
    assert_eq!(st.approve(&names(&["a", "n"]), now).unwrap(), ["a", "n"]);
    assert_eq!(st.deny(&["bad".into()], now).unwrap(), ["bad"]);
    assert_eq!(
        states(&st),
        [
            ("a".into(), ToolState::Approved),
            ("bad".into(), ToolState::Denied),
            ("n".into(), ToolState::Approved)
        ]
    );
    assert!(st.verdicts().call(Kind::Tool, "n").is_ok());
    // The directory has every listed tool, held back or not, for
    // shadowing on both sides.
    assert_eq!(dir.others("other").len(), 3);
    // `all` approves every held-back one.
    let all = Approval {
        all: true,
        ..Approval::default()
    };
    assert_eq!(st.approve(&all, now).unwrap(), ["bad"]);
    assert_eq!(dir.others("other").len(), 3);
}

fn named(name: &str, mode: FirewallMode, directory: &Directory) -> McpState {
    McpState::load(None, name, mode, directory.clone())
}

fn warnings(st: &McpState, tool: &str) -> Vec<String> {
    let r = st.tools();
    let t = r
        .current
        .unwrap()
        .tools
        .into_iter()
        .find(|t| t.name == tool);
    t.unwrap().warnings
}

#[test]
fn shadowing_needs_another_definition_and_shows_on_both_sides() {
    // Issue 39: the same tools listed by two servers (another install
    // of one package) are never held back, whichever lists first.
    let dir = Directory::default();
    let now = SystemTime::now();
    let same = [t("read_file", "Reads."), t("write_file", "Writes.")];
    let mut a = named("a", FirewallMode::Pin, &dir);
    a.listed(listing(&same), now);
    let mut b = named("b", FirewallMode::Pin, &dir);
    b.listed(listing(&same), now);
    for st in [&a, &b] {
        assert!(states(st).iter().all(|(_, s)| *s == ToolState::Approved));
        assert!(warnings(st, "read_file").is_empty());
    }
    // Another definition under the name: a warning on both sides in
    // pin, nothing held.
    let mut c = named("c", FirewallMode::Pin, &dir);
    c.listed(listing(&[t("read_file", "Reads anything.")]), now);
    assert_eq!(states(&c), [("read_file".into(), ToolState::Approved)]);
    assert!(warnings(&c, "read_file")[0].contains("servers a, b"));
    assert!(warnings(&a, "read_file")[0].contains("server c"));
    assert!(warnings(&a, "write_file").is_empty());
    // Review holds the clash; the approved side stays approved.
    let mut r = named("r", FirewallMode::Review, &dir);
    r.listed(listing(&[t("write_file", "Writes anything.")]), now);
    assert_eq!(states(&r), [("write_file".into(), ToolState::Flagged)]);
    assert!(r.tools().current.unwrap().tools[0].reasons[0].contains("servers a, b"));
    assert_eq!(states(&a)[1], ("write_file".into(), ToolState::Approved));
    assert!(warnings(&a, "write_file")[0].contains("server r"));
    // The reason is not repeated as a warning.
    assert!(warnings(&r, "write_file").is_empty());
}

#[test]
fn a_mode_change_redecides_and_review_holds_everything() {
    let dir = Directory::default();
    let mut st = state(None, FirewallMode::Review, &dir);
    let now = SystemTime::now();
    st.listed(listing(&[t("a", "A"), t("b", "B")]), now);
    assert!(states(&st).iter().all(|(_, s)| *s == ToolState::Pending));
    st.set_mode(FirewallMode::Off, now);
    assert!(states(&st).iter().all(|(_, s)| *s == ToolState::Approved));
    assert!(st.verdicts().call(Kind::Tool, "a").is_ok());
    // Review saw them and approved nothing: pin keeps them held.
    let held = st.set_mode(FirewallMode::Pin, now);
    assert_eq!(held.len(), 2, "{held:?}");
    assert!(states(&st).iter().all(|(_, s)| *s == ToolState::Pending));
    // Off decides nothing: a server first seen in off mode gets its
    // first listing in pin.
    let mut st = state(None, FirewallMode::Off, &dir);
    st.listed(listing(&[t("c", "see ~/.netrc")]), now);
    st.set_mode(FirewallMode::Pin, now);
    assert_eq!(states(&st), [("c".into(), ToolState::Flagged)]);
    // It was never approved: clean now, it is still new to the user.
    st.listed(listing(&[t("c", "C")]), now);
    assert_eq!(states(&st), [("c".into(), ToolState::Pending)]);
}

#[test]
fn approvals_persist_and_a_format_1_ledger_is_a_first_listing() {
    let tmp = tempfile::tempdir().unwrap();
    let tools = tmp.path().join("tools");
    std::fs::create_dir_all(&tools).unwrap();
    // Format 1: snapshots only (an older xy).
    std::fs::write(
        tools.join("s.json"),
        r#"{"format":1,"snapshots":[{"ts":"t","protocol_version":"2025-06-18","server_name":null,"server_version":null,"tools":[{"name":"a","description":"A"}]}]}"#,
    )
    .unwrap();
    let dir = Directory::default();
    let mut st = state(Some(tools.clone()), FirewallMode::Pin, &dir);
    assert!(!st.ledger.firewall.seen);
    let now = SystemTime::now();
    st.listed(listing(&[t("a", "A"), t("b", "B")]), now);
    assert!(states(&st).iter().all(|(_, s)| *s == ToolState::Approved));
    let l = xy_testbins::wait::wait_some(
        "the approvals saved",
        std::time::Duration::from_secs(10),
        || {
            let l = ledger::load(&tools, "s");
            (l.format == xy_core::protocol::mcp::LEDGER_FORMAT
                && l.firewall.tools.approved.len() == 2)
                .then_some(l)
        },
    );
    assert!(l.firewall.seen);
    drop(st);
    // A new actor (daemon restart): the approvals stand, a new tool is pending.
    let mut st = state(Some(tools), FirewallMode::Pin, &dir);
    st.listed(listing(&[t("a", "A"), t("b", "B"), t("c", "C")]), now);
    assert_eq!(states(&st)[2], ("c".into(), ToolState::Pending));
    assert_eq!(states(&st)[0], ("a".into(), ToolState::Approved));
}

#[test]
fn the_served_listing_is_kept_restored_and_filtered_by_the_verdicts() {
    use crate::mcp::listing::Handshake;
    let tmp = tempfile::tempdir().unwrap();
    let tools = tmp.path().join("tools");
    let dir = Directory::default();
    let now = SystemTime::now();
    // A ledger from before (no `served`): nothing to answer from.
    let mut st = state(Some(tools.clone()), FirewallMode::Pin, &dir);
    assert!(st.verdicts().ledger.is_none());
    st.listed(listing(&[t("a", "A")]), now);
    assert!(
        st.verdicts().ledger.is_none(),
        "no handshake answer, nothing served"
    );
    let with_handshake = |items: &[Value]| Listing {
        handshake: Some(Box::new(Handshake {
            init: Some(json!({"protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}}, "serverInfo": {"name": "s", "version": "1"}})),
            ..Handshake::default()
        })),
        ..listing(items)
    };
    st.on_spawn();
    st.listed(with_handshake(&[t("a", "A"), t("n", "New.")]), now);
    let answer = |st: &McpState| -> Vec<String> {
        let l = st.verdicts().ledger.clone().expect("served");
        let v: Value =
            serde_json::from_slice(&l.list("tools/list", &json!(1), false, |_| false).unwrap())
                .unwrap();
        v["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(answer(&st), ["a"], "the new tool is held back");
    xy_testbins::wait::wait_some("served saved", std::time::Duration::from_secs(10), || {
        ledger::load(&tools, "s")
            .served
            .filter(|s| s.tools.len() == 2)
    });
    drop(st);
    // A fresh daemon: the same answer from the file alone, and an
    // approval shows the held-back tool at once.
    let mut st = state(Some(tools), FirewallMode::Pin, &dir);
    assert_eq!(answer(&st), ["a"]);
    assert!(st.verdicts().knows(Kind::Tool, &t("n", "New.")));
    st.approve(&names(&["n"]), now).unwrap();
    assert_eq!(answer(&st), ["a", "n"]);
}

#[test]
fn a_tools_change_is_the_first_listing_or_a_non_empty_diff() {
    use xy_core::protocol::mcp::ToolDiff;
    let none = ToolDiff::default();
    let first = ToolsChange::new(None, 2, &none).unwrap();
    assert_eq!((first.from, first.to), (None, 2));
    assert_eq!(first.reason, "first listing");
    assert_eq!(ToolsChange::new(Some(2), 2, &none), None);
    let d = ToolDiff {
        added: vec!["a".into(), "b".into()],
        removed: vec![],
        changed: vec!["c".into()],
    };
    let c = ToolsChange::new(Some(2), 3, &d).unwrap();
    assert_eq!((c.from, c.to), (Some(2), 3));
    assert_eq!(c.reason, "added a, b; changed c");
}
