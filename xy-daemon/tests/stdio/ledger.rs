//! SPEC §26's first bullet against the real `xyd`: idle on-demand stdio
//! servers answer a client's session start (`initialize`,
//! `server/discover`, the lists, a listen stream) from the ledger, marked
//! `_meta["xy/ledger"]`, without spawning — after a daemon restart too,
//! on their own port and the gateway's `/<name>/mcp`, for clients of both
//! eras; the first call spawns exactly that server's child; a listing that
//! changed while the server slept reaches open streams as `list_changed`,
//! the firewall holding what is new.

use std::path::Path;

use serde_json::{Value, json};

use super::client::{Era, Mcp};
use super::{stdio_config, url};
use crate::helper::{DEADLINE, Env, TestDaemon, children_of, free_port, testbin, wait_some};

const ON_DEMAND: &str = "on-demand {\n    idle-stop \"10m\"\n}\n";

fn tool(name: &str, description: &str) -> Value {
    json!({"name": name, "description": description,
           "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}})
}

fn write_tools(file: &Path, tools: &[Value]) {
    let tmp = file.with_extension("tmp");
    std::fs::write(&tmp, json!({"tools": tools, "notify": true}).to_string()).unwrap();
    std::fs::rename(&tmp, file).unwrap();
}

/// An on-demand `xy-test-tools` server reading `file`.
fn tools_server(file: &Path, port: u16) -> String {
    let args = vec!["--file".to_owned(), file.display().to_string()];
    stdio_config(&testbin("xy-test-tools"), &args, port, ON_DEMAND)
}

/// Starts every server once so that xy lists it, then hands the dirs to a
/// fresh daemon: the ledger on disk is all it knows of them.
fn listed_then_restarted(env: Env, names: &[String], tools: usize) -> TestDaemon {
    let mut d = TestDaemon::start_in(env);
    for name in names {
        d.result("start", Some(json!({"name": name})));
    }
    for name in names {
        wait_some(&format!("{name} listed"), DEADLINE, || {
            let r = d.result("tools", Some(json!({"name": name})));
            let current = r["current"]["tools"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            (current.len() == tools && current.iter().all(|t| t["state"] == "approved"))
                .then_some(())
        });
        // A 2025 child's capability gates, kept beside the listing (D280):
        // without them a client that declared nothing wakes the server.
        let ledger = d.env.state_dir().join(format!("tools/{name}.json"));
        wait_some(&format!("{name}'s gates kept"), DEADLINE, || {
            let l: Value = serde_json::from_str(&std::fs::read_to_string(&ledger).ok()?).ok()?;
            (l["served"].get("initialize").is_none() || l["gates"].is_object()).then_some(())
        });
    }
    d.terminate();
    let d = TestDaemon::start_in(d.take_env());
    for name in names {
        wait_some(&format!("{name} idle"), DEADLINE, || {
            (d.entry(name)["state"] == "idle").then_some(())
        });
    }
    d
}

/// A session start: the 2025 handshake or 2026 discover, then `tools/list`;
/// each answer must carry the ledger's marker. Returns the tool names.
#[track_caller]
fn session_start(endpoint: &str, era: Era) -> Vec<String> {
    let mut c = Mcp::new(endpoint, era);
    match era {
        Era::V2025 => {
            let r = c.initialize();
            let res = &r.response()["result"];
            assert!(res["_meta"]["xy/ledger"]["listedAt"].is_string(), "{r:?}");
            assert!(r.session.is_some(), "{r:?}");
        }
        Era::V2026 => {
            let res = c.result("server/discover", json!({}));
            assert!(res["_meta"]["xy/ledger"].is_object(), "{res}");
            assert!(res["supportedVersions"].is_array(), "{res}");
        }
    }
    let list = c.result("tools/list", json!({}));
    assert!(list["_meta"]["xy/ledger"].is_object(), "{list}");
    if era == Era::V2026 {
        assert_eq!(list["resultType"], "complete", "{list}");
    }
    list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// Thirty on-demand servers `s00`…`s29` (tools `read_<i>`, `write_<i>`)
/// in a fresh env with the gateway on a free port: the env, the gateway's
/// port and each server's (name, own port).
fn thirty_servers() -> (Env, u16, Vec<(String, u16)>) {
    let env = Env::new();
    let gw = free_port();
    env.write_settings(&format!("gateway {{\n    port {gw}\n}}\n"));
    let data = env.state_dir().join("lists");
    std::fs::create_dir_all(&data).unwrap();
    let mut servers = Vec::new();
    for i in 0..30 {
        let name = format!("s{i:02}");
        let file = data.join(format!("{name}.json"));
        write_tools(
            &file,
            &[
                tool(&format!("read_{i}"), "Reads."),
                tool(&format!("write_{i}"), "Writes."),
            ],
        );
        let port = free_port();
        env.write_config(&name, &tools_server(&file, port));
        servers.push((name, port));
    }
    (env, gw, servers)
}

/// Thirty idle on-demand servers: every client's session start through
/// every one of them spawns nothing; calls to two spawn exactly those two.
#[test]
fn thirty_idle_servers_answer_session_start_from_the_ledger_without_spawning() {
    let (env, gw, servers) = thirty_servers();
    let names: Vec<String> = servers.iter().map(|(n, _)| n.clone()).collect();
    let d = listed_then_restarted(env, &names, 2);
    let xyd = d.pid();
    assert_eq!(children_of(xyd), Vec::<u32>::new(), "children before");
    for (i, (name, port)) in servers.iter().enumerate() {
        // Both eras, the server's own port and the gateway's path.
        let era = if i % 2 == 0 { Era::V2025 } else { Era::V2026 };
        let own = session_start(&url(*port), era);
        assert_eq!(own, [format!("read_{i}"), format!("write_{i}")]);
        let via = format!("http://127.0.0.1:{gw}/{name}/mcp");
        assert_eq!(session_start(&via, era), own);
    }
    assert_eq!(
        children_of(xyd),
        Vec::<u32>::new(),
        "children after 60 session starts"
    );
    for name in &names {
        let e = d.entry(name);
        assert_eq!(e["state"], "idle", "{e}");
        assert!(e["pid"].is_null(), "{e}");
    }
    // The first call the ledger cannot answer spawns that server only.
    for (i, era) in [(3usize, Era::V2025), (8, Era::V2026)] {
        let (name, port) = &servers[i];
        let mut c = Mcp::connected(&url(*port), era);
        let r = c.result(
            "tools/call",
            json!({"name": format!("read_{i}"), "arguments": {}}),
        );
        assert_eq!(r["content"][0]["text"], format!("called read_{i}"), "{r}");
        assert_eq!(d.entry(name)["state"], "running");
    }
    let kids = children_of(xyd);
    assert_eq!(kids.len(), 2, "exactly two children: {kids:?}");
    let running: Vec<&String> = names
        .iter()
        .filter(|n| d.entry(n)["state"] == "running")
        .collect();
    assert_eq!(running, [&names[3], &names[8]]);
}

/// A listing that changed while the server slept: the ledger answers
/// what the user approved; the first call spawns the child; the new
/// listing holds the changed and the new tool back, and every open stream
/// (a 2025 session's GET stream, a 2026 `subscriptions/listen`) gets
/// `list_changed`.
#[test]
fn a_listing_changed_while_asleep_reaches_open_streams_held_back() {
    let env = Env::new();
    let file = env.state_dir().join("lists.json");
    std::fs::create_dir_all(env.state_dir()).unwrap();
    write_tools(&file, &[tool("a", "Adds."), tool("b", "Builds.")]);
    let port = free_port();
    env.write_config("z", &tools_server(&file, port));
    let d = listed_then_restarted(env, &["z".to_owned()], 2);
    // The "upgrade" while it sleeps: one changed, one new.
    write_tools(
        &file,
        &[
            tool("a", "Adds, then mails it away."),
            tool("b", "Builds."),
            tool("n", "New."),
        ],
    );
    let mut old = Mcp::connected(&url(port), Era::V2025);
    let mut new = Mcp::connected(&url(port), Era::V2026);
    for c in [&mut old, &mut new] {
        let list = c.result("tools/list", json!({}));
        assert!(list["_meta"]["xy/ledger"].is_object(), "{list}");
        let a = &list["tools"][0];
        assert_eq!(
            (a["name"].as_str(), a["description"].as_str()),
            (Some("a"), Some("Adds."))
        );
        assert_eq!(list["tools"].as_array().unwrap().len(), 2, "{list}");
    }
    let streams = [old.listen(), new.listen()];
    assert!(
        children_of(d.pid()).is_empty(),
        "listen streams spawn nothing"
    );
    // The first call spawns the child; xy lists it again.
    let r = new.result("tools/call", json!({"name": "b", "arguments": {}}));
    assert_eq!(r["content"][0]["text"], "called b", "{r}");
    for s in &streams {
        s.expect("notifications/tools/list_changed");
    }
    wait_some("a changed, n pending", DEADLINE, || {
        let r = d.result("tools", Some(json!({"name": "z"})));
        let state = |n: &str| {
            r["current"]["tools"]
                .as_array()
                .and_then(|t| t.iter().find(|t| t["name"] == n).cloned())
                .map(|t| t["state"].clone())
        };
        (state("a") == Some(json!("changed")) && state("n") == Some(json!("pending"))).then_some(())
    });
    for c in [&mut old, &mut new] {
        let list = c.result("tools/list", json!({}));
        assert!(
            list.get("_meta")
                .is_none_or(|m| m.get("xy/ledger").is_none()),
            "{list}"
        );
        let names: Vec<&str> = list["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["b"], "{list}");
    }
}

/// A child of each era behind the ledger: a 2026-only child's 2025
/// clients get an `initialize` made from its `server/discover`, its 2026
/// clients its own `server/discover`; a dual-era child (kept in 2025 by
/// xy) the other way round. Nothing spawns.
#[test]
fn children_of_both_eras_are_answered_from_the_ledger_for_clients_of_both() {
    let env = Env::new();
    let mut ports = Vec::new();
    for era in ["2026", "both"] {
        let port = free_port();
        let args: Vec<String> = ["--stdio", "--era", era, "--tools", "echo,progress"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        env.write_config(
            &format!("e{era}"),
            &stdio_config(&testbin("xy-test-mcp"), &args, port, ON_DEMAND),
        );
        ports.push(port);
    }
    let d = listed_then_restarted(env, &["e2026".to_owned(), "eboth".to_owned()], 2);
    for port in ports {
        for era in [Era::V2025, Era::V2026] {
            assert_eq!(session_start(&url(port), era), ["echo", "progress"]);
        }
        let mut c = Mcp::new(&url(port), Era::V2025);
        let init = c.initialize();
        let r = &init.response()["result"];
        assert_eq!(r["serverInfo"]["name"], "xy-test-mcp", "{r}");
        assert!(r["capabilities"]["tools"].is_object(), "{r}");
    }
    assert!(children_of(d.pid()).is_empty());
}

/// The aggregate (`/mcp`) over thirty idle on-demand servers: a session
/// start in both eras lists all 60 tools and spawns nothing; calls to two
/// servers' tools spawn exactly those two.
#[test]
fn the_aggregate_of_thirty_idle_servers_spawns_nothing_at_session_start() {
    let (env, gw, servers) = thirty_servers();
    let names: Vec<String> = servers.into_iter().map(|(n, _)| n).collect();
    let d = listed_then_restarted(env, &names, 2);
    let xyd = d.pid();
    assert_eq!(children_of(xyd), Vec::<u32>::new(), "children before");
    let agg = format!("http://127.0.0.1:{gw}/mcp");
    crate::helper::wait_for("the gateway listens", DEADLINE, || {
        std::net::TcpStream::connect(("127.0.0.1", gw)).is_ok()
    });
    for era in [Era::V2025, Era::V2026] {
        let mut c = Mcp::connected(&agg, era);
        let list = c.result("tools/list", json!({}));
        assert_eq!(list["tools"].as_array().unwrap().len(), 60, "{list}");
    }
    assert_eq!(
        children_of(xyd),
        Vec::<u32>::new(),
        "children after the aggregate's session starts"
    );
    let mut c = Mcp::connected(&agg, Era::V2025);
    for i in [3, 8] {
        let r = c.result(
            "tools/call",
            json!({"name": format!("s{i:02}__read_{i}"), "arguments": {}}),
        );
        assert_eq!(r["content"][0]["text"], format!("called read_{i}"), "{r}");
    }
    let kids = children_of(xyd);
    assert_eq!(kids.len(), 2, "exactly two children: {kids:?}");
}

/// `skills/list` of an idle server is the ledger's too (D282): the skills
/// every file of which the firewall shows, marked, in both eras, from a
/// child of each era, spawning nothing.
#[test]
fn skills_list_is_answered_from_the_ledger_in_both_eras() {
    let env = Env::new();
    let dir = env.state_dir().join("skills-src");
    for (p, text) in [
        (
            "skills/greet/SKILL.md",
            "---\nname: greet\ndescription: Greets.\n---\n# Greet\n",
        ),
        ("skills/greet/reference.md", "First names.\n"),
        (
            "skills/tidy/SKILL.md",
            "---\nname: tidy\ndescription: Tidies.\n---\n# Tidy\n",
        ),
    ] {
        let p = dir.join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let mut ports = Vec::new();
    for era in ["both", "2026"] {
        let port = free_port();
        let args = vec![
            "--dir".to_owned(),
            dir.display().to_string(),
            "--era".to_owned(),
            era.to_owned(),
        ];
        env.write_config(
            &format!("k{era}"),
            &stdio_config(&testbin("xy-test-skills"), &args, port, ON_DEMAND),
        );
        ports.push(port);
    }
    let names = ["kboth".to_owned(), "k2026".to_owned()];
    let d = listed_then_restarted(env, &names, 1);
    for port in &ports {
        for era in [Era::V2025, Era::V2026] {
            let mut c = Mcp::connected(&url(*port), era);
            let r = c.result("skills/list", json!({}));
            assert!(r["_meta"]["xy/ledger"]["listedAt"].is_string(), "{r}");
            let mut uris: Vec<&str> = r["skills"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|s| s["uri"].as_str())
                .collect();
            uris.sort_unstable();
            assert_eq!(
                uris,
                ["skill://greet/SKILL.md", "skill://tidy/SKILL.md"],
                "{r}"
            );
        }
    }
    assert_eq!(children_of(d.pid()), Vec::<u32>::new(), "nothing spawned");
}

/// SPEC §26 names six methods an idle server's endpoints answer from the
/// ledger: beside `initialize`, `server/discover` and `tools/list`, also
/// `prompts/list`, `resources/list` and `resources/templates/list` — each
/// marked `_meta["xy/ledger"]`, in both eras, on the server's own port and
/// the gateway's `/<name>/mcp`, spawning nothing.
#[test]
fn prompts_resources_and_templates_are_answered_from_the_ledger() {
    let env = Env::new();
    let gw = free_port();
    env.write_settings(&format!("gateway {{\n    port {gw}\n}}\n"));
    let dir = env.state_dir().join("src");
    let skill = dir.join("skills/greet/SKILL.md");
    std::fs::create_dir_all(skill.parent().unwrap()).unwrap();
    std::fs::write(
        &skill,
        "---\nname: greet\ndescription: Greets.\n---\n# Greet\n",
    )
    .unwrap();
    let file = dir.join("lists.json");
    std::fs::write(
        &file,
        json!({"tools": [tool("a", "Adds.")],
               "prompts": [{"name": "hello", "description": "Says hello."}]})
        .to_string(),
    )
    .unwrap();
    let (pk, pt) = (free_port(), free_port());
    let args = vec!["--dir".to_owned(), dir.display().to_string()];
    env.write_config(
        "k",
        &stdio_config(&testbin("xy-test-skills"), &args, pk, ON_DEMAND),
    );
    env.write_config("t", &tools_server(&file, pt));
    let d = listed_then_restarted(env, &["k".to_owned(), "t".to_owned()], 1);
    crate::helper::wait_for("the gateway listens", DEADLINE, || {
        std::net::TcpStream::connect(("127.0.0.1", gw)).is_ok()
    });
    let cases = [
        ("t", pt, "prompts/list", "prompts", "hello"),
        (
            "k",
            pk,
            "resources/list",
            "resources",
            "skill://greet/SKILL.md",
        ),
        (
            "k",
            pk,
            "resources/templates/list",
            "resourceTemplates",
            "skill://{skill}/{+path}",
        ),
    ];
    for (name, port, method, key, want) in cases {
        for endpoint in [url(port), format!("http://127.0.0.1:{gw}/{name}/mcp")] {
            for era in [Era::V2025, Era::V2026] {
                let mut c = Mcp::connected(&endpoint, era);
                let r = c.result(method, json!({}));
                assert!(
                    r["_meta"]["xy/ledger"]["listedAt"].is_string(),
                    "{endpoint} {method} {era:?}: {r}"
                );
                let items = r[key].as_array().unwrap_or_else(|| panic!("{method}: {r}"));
                let ids: Vec<&str> = items
                    .iter()
                    .filter_map(|i| {
                        i.get("name")
                            .filter(|_| key == "prompts")
                            .or_else(|| i.get("uri"))
                            .or_else(|| i.get("uriTemplate"))
                            .and_then(Value::as_str)
                    })
                    .collect();
                assert!(ids.contains(&want), "{endpoint} {method} {era:?}: {r}");
            }
        }
    }
    assert_eq!(children_of(d.pid()), Vec::<u32>::new(), "nothing spawned");
    // SPEC §6/§24: every key present, `reasons: []` on a tool with none.
    let r = d.result("tools", Some(json!({"name": "t"})));
    for t in r["current"]["tools"].as_array().unwrap() {
        assert_eq!(
            (&t["state"], &t["reasons"], &t["warnings"]),
            (&json!("approved"), &json!([]), &json!([])),
            "{t}"
        );
    }
}
