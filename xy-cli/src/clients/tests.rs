//! Reading and rewriting real-shaped client files (`tests/data/clients/`):
//! each rewrite is compared with a reviewed golden file
//! (`tests/data/clients/applied/`), so every byte outside the rewritten
//! entries is checked. `XY_BLESS=1` rewrites the golden files.

use std::path::PathBuf;

use super::*;

const XYCTL: &str = "/opt/xy/bin/xyctl";

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/clients")
        .join(name)
}

pub(crate) fn sample_name(client: ClientId) -> &'static str {
    match client {
        ClientId::ClaudeDesktop => "claude_desktop_config.json",
        ClientId::ClaudeCode => "claude.json",
        ClientId::Cursor => "cursor-mcp.json",
        ClientId::Vscode => "vscode-mcp.json",
        ClientId::Windsurf => "windsurf-mcp_config.json",
        ClientId::Codex => "codex-config.toml",
    }
}

fn sample(client: ClientId) -> String {
    std::fs::read_to_string(data(sample_name(client))).unwrap()
}

/// Every stdio entry of the sample, pointed at xy.
fn rewrites(client: ClientId, es: &[Entry]) -> Vec<Rewrite> {
    es.iter()
        .filter(|e| matches!(e.spec, Spec::Stdio { .. }))
        .map(|e| Rewrite {
            entry: e.name.clone(),
            to: pointer(client, &e.name),
        })
        .collect()
}

fn pointer(client: ClientId, name: &str) -> Pointer {
    if client.stdio_only() {
        Pointer::Connect {
            xyctl: XYCTL.into(),
            server: name.into(),
        }
    } else {
        Pointer::Url(format!("http://127.0.0.1:8400/{name}"))
    }
}

#[test]
fn every_client_rewrites_only_its_stdio_entries() {
    for c in ClientId::ALL {
        let text = sample(c);
        let before = entries(c, &text).unwrap();
        let rw = rewrites(c, &before);
        assert!(!rw.is_empty(), "{c:?}: sample has stdio entries");
        let out = apply(c, &text, &rw).unwrap();

        let golden = data(&format!("applied/{}", sample_name(c)));
        if std::env::var_os("XY_BLESS").is_some() {
            std::fs::create_dir_all(golden.parent().unwrap()).unwrap();
            std::fs::write(&golden, &out).unwrap();
        }
        let want = std::fs::read_to_string(&golden).unwrap();
        assert_eq!(
            out,
            want,
            "{c:?}: rewrite differs from {}",
            golden.display()
        );

        // Rewritten entries point at xy; the others are untouched.
        let after = entries(c, &out).unwrap();
        assert_eq!(after.len(), before.len(), "{c:?}");
        for (b, a) in before.iter().zip(&after) {
            assert_eq!(a.name, b.name);
            match rw.iter().find(|r| r.entry == b.name) {
                Some(r) => assert!(r.to.matches(&a.spec), "{c:?} {}: {:?}", a.name, a.spec),
                None => assert_eq!(a, b, "{c:?}"),
            }
        }
        // Applying again changes nothing.
        assert_eq!(apply(c, &out, &rw).unwrap(), out, "{c:?}: not idempotent");
    }
}

#[test]
fn comments_and_foreign_keys_survive() {
    let out = apply(
        ClientId::Vscode,
        &sample(ClientId::Vscode),
        &rewrites(
            ClientId::Vscode,
            &entries(ClientId::Vscode, &sample(ClientId::Vscode)).unwrap(),
        ),
    )
    .unwrap();
    for kept in [
        "// Servers for Copilot agent mode.",
        "// The reference memory server.",
        "/* hosted */",
        "\"inputs\": [",
        "\"password\": true",
    ] {
        assert!(out.contains(kept), "lost {kept:?}:\n{out}");
    }
    let out = apply(
        ClientId::Codex,
        &sample(ClientId::Codex),
        &rewrites(
            ClientId::Codex,
            &entries(ClientId::Codex, &sample(ClientId::Codex)).unwrap(),
        ),
    )
    .unwrap();
    for kept in [
        "# Codex configuration",
        "startup_timeout_sec = 20 # slow on first run",
        "# Hosted docs search.",
        "[profiles.deep]",
    ] {
        assert!(out.contains(kept), "lost {kept:?}:\n{out}");
    }
    assert!(
        !out.contains("GITHUB_PERSONAL_ACCESS_TOKEN"),
        "env moved to xy:\n{out}"
    );
}

#[test]
fn entries_of_each_sample() {
    let es = entries(ClientId::ClaudeDesktop, &sample(ClientId::ClaudeDesktop)).unwrap();
    let stdio: Vec<_> = es
        .iter()
        .filter(|e| matches!(e.spec, Spec::Stdio { .. }))
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(stdio, ["My Weather", "filesystem", "github"]);
    let gh = es.iter().find(|e| e.name == "github").unwrap();
    let Spec::Stdio {
        command, args, env, ..
    } = &gh.spec
    else {
        panic!()
    };
    assert_eq!(command, "docker");
    assert_eq!(args[0], "run");
    assert_eq!(env["GITHUB_PERSONAL_ACCESS_TOKEN"], "ghp_example");
    assert!(es.iter().any(|e| e.name == "notion" && e.spec == Spec::Url("https://mcp.notion.com/mcp".into())));

    // Claude Code: the user scope only, not a project's servers.
    let es = entries(ClientId::ClaudeCode, &sample(ClientId::ClaudeCode)).unwrap();
    assert_eq!(es.len(), 2);
    let es = entries(ClientId::Windsurf, &sample(ClientId::Windsurf)).unwrap();
    assert!(
        es.iter()
            .any(|e| e.spec == Spec::Url("https://mcp.figma.com/mcp".into()))
    );
    let es = entries(ClientId::Codex, &sample(ClientId::Codex)).unwrap();
    let names: Vec<_> = es.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["context7", "github", "openai-docs"]);
    let Spec::Stdio { env, .. } = &es[1].spec else {
        panic!()
    };
    assert_eq!(env["GITHUB_PERSONAL_ACCESS_TOKEN"], "ghp_example");
}

#[test]
fn empty_and_broken_files() {
    assert_eq!(entries(ClientId::Cursor, "").unwrap(), []);
    assert_eq!(entries(ClientId::Cursor, "{}").unwrap(), []);
    assert_eq!(entries(ClientId::Codex, "").unwrap(), []);
    assert!(matches!(
        entries(ClientId::Cursor, "{\"mcpServers\": "),
        Err(ClientError::Parse(_))
    ));
    assert!(matches!(
        entries(ClientId::Cursor, "[1]"),
        Err(ClientError::Shape(_))
    ));
    assert!(matches!(
        entries(ClientId::Cursor, "{\"mcpServers\": 3}"),
        Err(ClientError::Shape(_))
    ));
    assert!(matches!(
        entries(ClientId::Codex, "mcp_servers = 3"),
        Err(ClientError::Shape(_))
    ));
    assert!(matches!(
        entries(ClientId::Codex, "[x"),
        Err(ClientError::Parse(_))
    ));
}

#[test]
fn locations_on_mac_and_linux() {
    let h = Home {
        home: "/home/u".into(),
        xdg_config: None,
        codex_home: None,
    };
    let p = |c: ClientId, os| c.default_path(os, &h).display().to_string();
    assert_eq!(
        p(ClientId::ClaudeDesktop, Os::Mac),
        "/home/u/Library/Application Support/Claude/claude_desktop_config.json"
    );
    assert_eq!(
        p(ClientId::ClaudeDesktop, Os::Linux),
        "/home/u/.config/Claude/claude_desktop_config.json"
    );
    assert_eq!(p(ClientId::ClaudeCode, Os::Mac), "/home/u/.claude.json");
    assert_eq!(p(ClientId::Cursor, Os::Linux), "/home/u/.cursor/mcp.json");
    assert_eq!(
        p(ClientId::Vscode, Os::Mac),
        "/home/u/Library/Application Support/Code/User/mcp.json"
    );
    assert_eq!(
        p(ClientId::Vscode, Os::Linux),
        "/home/u/.config/Code/User/mcp.json"
    );
    assert_eq!(
        p(ClientId::Windsurf, Os::Mac),
        "/home/u/.codeium/windsurf/mcp_config.json"
    );
    assert_eq!(p(ClientId::Codex, Os::Linux), "/home/u/.codex/config.toml");
    let h = Home {
        home: "/home/u".into(),
        xdg_config: Some("/xdg".into()),
        codex_home: Some("/ch".into()),
    };
    assert_eq!(
        ClientId::Vscode.default_path(Os::Linux, &h),
        Path::new("/xdg/Code/User/mcp.json")
    );
    assert_eq!(
        ClientId::Codex.default_path(Os::Mac, &h),
        Path::new("/ch/config.toml")
    );
}

#[test]
fn dry_run_diff_is_unified() {
    let d = diff(Path::new("/c.json"), "a\nb\n", "a\nc\n");
    assert!(
        d.starts_with("--- /c.json\n+++ /c.json\n@@ -1,2 +1,2 @@\n"),
        "{d}"
    );
    assert!(d.contains("-b\n+c\n"), "{d}");
}

/// `clients apply --one`: every stdio entry goes, one entry points at the
/// aggregate (a URL, or `xyctl connect --one` for stdio-only clients); the
/// result reads back as exactly that.
#[test]
fn one_entry_replaces_every_server_entry() {
    for c in ClientId::ALL {
        let text = sample(c);
        let before = entries(c, &text).unwrap();
        let mut rw: Vec<Rewrite> = before
            .iter()
            .filter(|e| matches!(e.spec, Spec::Stdio { .. }))
            .map(|e| Rewrite {
                entry: e.name.clone(),
                to: Pointer::Remove,
            })
            .collect();
        let gone: Vec<String> = rw.iter().map(|r| r.entry.clone()).collect();
        let one = if c.stdio_only() {
            Pointer::ConnectOne {
                xyctl: XYCTL.into(),
                profile: Some("cursor".into()),
            }
        } else {
            Pointer::Url("http://127.0.0.1:8399/p/cursor/mcp".into())
        };
        rw.push(Rewrite {
            entry: "xy-cursor".into(),
            to: one.clone(),
        });
        let new = apply(c, &text, &rw).unwrap();
        let after = entries(c, &new).unwrap();
        for g in &gone {
            assert!(after.iter().all(|e| &e.name != g), "{c:?}: {g} kept");
        }
        let e = after
            .iter()
            .find(|e| e.name == "xy-cursor")
            .unwrap_or_else(|| panic!("{c:?}: no xy-cursor entry in {new}"));
        assert!(one.matches(&e.spec), "{c:?}: {:?}", e.spec);
        // The entries that were no stdio server stay as they were.
        let kept = before.len() - gone.len();
        assert_eq!(after.len(), kept + 1, "{c:?}");
    }
}
