//! SPEC §21 with servers nobody here wrote: the reference servers from npm
//! keep working confined, through a direct `node` command and through
//! `npx`, and what their `sandbox` block leaves out is refused by the
//! kernel even where the server itself would allow it.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use xy_testbins::interop::{self, Interop, NpmServer};

use super::client::{Era, Mcp};
use super::{stdio_config, url};
use crate::helper::{DEADLINE, Env, TestDaemon, free_port, wait_some};

fn npm(package: &str) -> Option<NpmServer> {
    let version = interop::REFERENCE_SERVERS
        .iter()
        .find(|(p, _)| *p == package)
        .map(|(_, v)| *v)
        .expect("a pinned reference server");
    match interop::npm_server(package, version) {
        Interop::Ready(s) => Some(s),
        Interop::Skip(skip) => {
            skip.announce(&format!("sandboxed real servers: {package}"));
            None
        }
    }
}

/// `tools/call` → (isError, the text of its content).
fn call(c: &mut Mcp, tool: &str, arguments: Value) -> (bool, String) {
    let r = c.result("tools/call", json!({"name": tool, "arguments": arguments}));
    let text = r["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    (r["isError"] == true, text)
}

/// A 2026 client of `port`, once the bridge answers `tools/list`.
fn client(port: u16) -> Mcp {
    wait_some(&format!("port {port} lists tools"), DEADLINE * 3, || {
        let mut c = Mcp::connected(&url(port), Era::V2026);
        let r = c.request("tools/list", json!({}));
        r.response()
            .get("result")
            .is_some_and(|r| r["tools"].as_array().is_some_and(|t| !t.is_empty()))
            .then_some(c)
    })
}

fn kdl_path(p: &Path) -> String {
    format!("{:?}", p.display().to_string())
}

/// The filesystem server is told it may use `data/` and `other/`, but its
/// sandbox lets it at `data/` only: inside, it lists, reads and writes; in
/// `other/`, the kernel refuses what the server itself would have allowed.
fn filesystem_confined(name: &str, program: &Path, args: Vec<String>, working_dir: Option<&Path>) {
    let env = Env::new();
    let root: PathBuf = env.root.path().to_path_buf();
    let data = root.join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("inside.txt"), "inside").unwrap();
    let other = root.join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("outside.txt"), "a secret").unwrap();
    let port = free_port();
    let mut extra = format!(
        "sandbox {{\n    write {}\n    network \"none\"\n}}\n",
        kdl_path(&data)
    );
    if let Some(dir) = working_dir {
        extra.push_str(&format!("working-dir {}\n", kdl_path(dir)));
    }
    let mut args = args;
    args.push(data.display().to_string());
    args.push(other.display().to_string());
    env.write_config(name, &stdio_config(program, &args, port, &extra));
    let d = TestDaemon::start_in(env);
    let mut c = client(port);

    let (err, text) = call(&mut c, "list_directory", json!({"path": data}));
    assert!(
        !err && text.contains("inside.txt"),
        "{name}: list inside: {text}"
    );
    let (err, text) = call(
        &mut c,
        "read_text_file",
        json!({"path": data.join("inside.txt")}),
    );
    assert!(
        !err && text.contains("inside"),
        "{name}: read inside: {text}"
    );
    let (err, text) = call(
        &mut c,
        "write_file",
        json!({"path": data.join("new.txt"), "content": "written"}),
    );
    assert!(!err, "{name}: write inside: {text}");
    assert_eq!(
        std::fs::read_to_string(data.join("new.txt")).unwrap(),
        "written"
    );

    let (err, text) = call(
        &mut c,
        "read_text_file",
        json!({"path": other.join("outside.txt")}),
    );
    assert!(
        err && !text.contains("a secret"),
        "{name}: read outside must fail: {text}"
    );
    assert!(
        text.to_ascii_lowercase().contains("permission denied") || text.contains("EACCES"),
        "{name}: refused by the kernel, not by the server: {text}"
    );
    let (err, text) = call(&mut c, "list_directory", json!({"path": other}));
    assert!(
        err && !text.contains("outside.txt"),
        "{name}: list outside must fail: {text}"
    );
    let (err, text) = call(
        &mut c,
        "write_file",
        json!({"path": other.join("planted.txt"), "content": "x"}),
    );
    assert!(err, "{name}: write outside must fail: {text}");
    assert!(!other.join("planted.txt").exists(), "{name}");

    let status = d.result("status", Some(json!({"name": name})));
    assert_eq!(status["sandbox"]["rules"]["network"], "none", "{status:#}");
}

#[test]
fn server_filesystem_confined_through_node() {
    let Some(s) = npm("@modelcontextprotocol/server-filesystem") else {
        return;
    };
    filesystem_confined(
        "fs-node",
        &s.node,
        vec![s.entry.display().to_string()],
        None,
    );
}

#[test]
fn server_filesystem_confined_through_npx() {
    let Some(s) = npm("@modelcontextprotocol/server-filesystem") else {
        return;
    };
    let Some(npx) = interop::which("npx") else {
        interop::Skip {
            reason: "npx is not on PATH".to_owned(),
        }
        .announce("sandboxed server-filesystem through npx");
        return;
    };
    // The npm prefix the package was installed into: `npx --no-install`
    // runs its `node_modules/.bin` entry without the network.
    let prefix = s
        .entry
        .ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "node_modules"))
        .and_then(Path::parent)
        .unwrap()
        .to_path_buf();
    filesystem_confined(
        "fs-npx",
        &npx,
        vec!["--no-install".into(), "mcp-server-filesystem".into()],
        Some(&prefix),
    );
}

/// server-memory writes its memory file where the block allows, and a
/// second one, pointed outside, fails to save.
#[test]
fn server_memory_writes_its_file_only_where_the_block_allows() {
    let Some(s) = npm("@modelcontextprotocol/server-memory") else {
        return;
    };
    let env = Env::new();
    let root = env.root.path().to_path_buf();
    let data = root.join("mem");
    std::fs::create_dir_all(&data).unwrap();
    let (ok_port, bad_port) = (free_port(), free_port());
    let args = vec![s.entry.display().to_string()];
    // Two copies of one server offer the same tools: the firewall would
    // hold them back as shadowing (SPEC §20), which is not under test here.
    let block = format!(
        "sandbox {{\n    write {}\n    network \"none\"\n}}\nfirewall {{\n    mode \"off\"\n}}\n",
        kdl_path(&data)
    );
    env.write_config(
        "mem",
        &stdio_config(
            &s.node,
            &args,
            ok_port,
            &format!(
                "env {{\n    MEMORY_FILE_PATH {}\n}}\n{block}",
                kdl_path(&data.join("memory.jsonl"))
            ),
        ),
    );
    env.write_config(
        "mem-outside",
        &stdio_config(
            &s.node,
            &args,
            bad_port,
            &format!(
                "env {{\n    MEMORY_FILE_PATH {}\n}}\n{block}",
                kdl_path(&root.join("memory.jsonl"))
            ),
        ),
    );
    let _d = TestDaemon::start_in(env);
    let entity = json!({"entities": [{"name": "xy", "entityType": "project",
                                       "observations": ["runs MCP servers"]}]});
    let mut c = client(ok_port);
    let (err, text) = call(&mut c, "create_entities", entity.clone());
    assert!(!err, "{text}");
    let saved = std::fs::read_to_string(data.join("memory.jsonl")).unwrap();
    assert!(saved.contains("runs MCP servers"), "{saved}");

    // Pointed outside, it runs, but saving is refused by the kernel.
    let mut c = client(bad_port);
    let (err, text) = call(&mut c, "create_entities", entity);
    assert!(
        err,
        "a memory file outside sandbox.write must not be written: {text}"
    );
    assert!(text.contains("EACCES"), "{text}");
    assert!(!root.join("memory.jsonl").exists());
}

/// server-everything, the protocol's showcase, works under `network "none"`.
#[test]
fn server_everything_works_confined() {
    let se = match interop::server_everything() {
        Interop::Ready(se) => se,
        Interop::Skip(skip) => {
            skip.announce("sandboxed server-everything");
            return;
        }
    };
    let env = Env::new();
    let port = free_port();
    let (node, args) = se.stdio_command();
    env.write_config(
        "everything",
        &stdio_config(&node, &args, port, "sandbox {\n    network \"none\"\n}\n"),
    );
    let _d = TestDaemon::start_in(env);
    let mut c = client(port);
    let tools = c.tool_names();
    assert!(tools.len() >= 10, "{tools:?}");
    let (err, text) = call(&mut c, "echo", json!({"message": "confined"}));
    assert!(!err && text.contains("confined"), "{text}");
}
