//! SPEC §23 through the real `xyctl`: `add --url` with headers and a
//! secret placeholder, `import` of an `npx mcp-remote <url> --header …`
//! entry and of a URL entry with `headers` (each becomes a remote server,
//! header values in `0600` secret files, not in the server file),
//! `status`/`list` rendering the remote, and `xyctl connect <name>` to a
//! remote (a loopback `xy-test-mcp` the test runs).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use xy_testbins::locate::free_port;

use serde_json::Value;

mod support;

use support::{Home, wait_for};

struct Upstream(Child);

impl Drop for Upstream {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn upstream(port: u16, args: &[&str]) -> Upstream {
    let child = Command::new(xy_testbins::locate::testbin("xy-test-mcp"))
        .args(["--port", &port.to_string()])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the upstream listens", Duration::from_secs(30), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    Upstream(child)
}

#[test]
fn add_url_then_status_list_and_connect() {
    let h = Home::new("xyr");
    let up_port = free_port();
    let _up = upstream(
        up_port,
        &["--require-auth", "Bearer t0k3n-abc", "--tools", "echo"],
    );
    let own = free_port().to_string();
    let url = format!("http://127.0.0.1:{up_port}/mcp");
    let r = h.run(&[
        "add",
        "far",
        "--url",
        &url,
        "--port",
        &own,
        "--header",
        "X-Team: core",
        "--header-secret",
        "Authorization=TOKEN",
    ]);
    // SPEC §25: `add` says the server failed, and why (the placeholder
    // is not filled in yet), exit 1.
    assert_eq!(r.code(), 1, "{}", r.stderr());
    assert!(
        r.stdout().starts_with("far  failed: secret `TOKEN`"),
        "{}",
        r.stdout()
    );
    assert!(
        r.stderr().contains("fill in the secret TOKEN"),
        "{}",
        r.stderr()
    );
    let text = std::fs::read_to_string(h.config_dir().join("far.kdl")).unwrap();
    assert!(text.contains(&format!("url \"{url}\"\n")), "{text}");
    assert!(text.contains("Authorization secret=\"TOKEN\""), "{text}");
    assert!(text.contains("X-Team \"core\""), "{text}");
    // Fill in the placeholder the way the warning says, then restart.
    let secret_file = h.config_dir().parent().unwrap().join("secrets/far/TOKEN");
    std::fs::create_dir_all(secret_file.parent().unwrap()).unwrap();
    std::fs::write(&secret_file, "Bearer t0k3n-abc\n").unwrap();
    h.run(&["restart", "far"]).ok();
    wait_for("far healthy", Duration::from_secs(30), || {
        h.list()
            .iter()
            .any(|e| e["name"] == "far" && e["health"]["state"] == "healthy")
    });
    let status = h.run(&["status", "far"]).ok();
    assert!(status.contains(&url), "{status}");
    assert!(
        status.contains("Authorization secret=\"TOKEN\""),
        "{status}"
    );
    assert!(!status.contains("t0k3n"), "{status}");
    let list = h.run(&["list"]).ok();
    assert!(list.contains(&url), "{list}");

    // A stdio client through `xyctl connect`.
    let mut child = h
        .cmd(&["connect", "far"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{}},"clientInfo":{{"name":"t","version":"1"}}}}}}"#
    )
    .unwrap();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .unwrap();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"via connect"}}}}}}"#
    )
    .unwrap();
    let mut line = String::new();
    let v: Value = loop {
        line.clear();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "connect closed");
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["id"] == 2 {
            break v;
        }
    };
    assert_eq!(v["result"]["content"][0]["text"], "via connect", "{v}");
    drop(stdin);
    let _ = child.wait();
}

#[test]
fn import_turns_mcp_remote_and_url_entries_into_remote_servers() {
    let h = Home::new("xyr");
    let file = h.home().join("claude_desktop_config.json");
    std::fs::write(
        &file,
        r#"{
  "mcpServers": {
    "linear": {
      "command": "npx",
      "args": ["-y", "mcp-remote", "https://mcp.linear.app/mcp", "--header", "Authorization:${AUTH}"],
      "env": { "AUTH": "Bearer lin-s3cret" }
    },
    "notion": { "type": "http", "url": "https://mcp.notion.com/mcp", "headers": { "X-Api-Key": "n0t-s3cret" } }
  }
}
"#,
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let r = h.run(&["import", "claude-desktop", "--file", f, "--dry-run"]);
    r.ok();
    assert!(!h.config_dir().join("linear.kdl").exists(), "dry run wrote");
    let r = h.run(&["import", "claude-desktop", "--file", f]);
    let out = r.ok();
    assert!(out.contains("2 servers created"), "{out}");
    let linear = std::fs::read_to_string(h.config_dir().join("linear.kdl")).unwrap();
    assert!(
        linear.contains("url \"https://mcp.linear.app/mcp\"\n"),
        "{linear}"
    );
    assert!(
        linear.contains("Authorization secret=\"AUTHORIZATION\""),
        "{linear}"
    );
    assert!(!linear.contains("lin-s3cret"), "{linear}");
    let notion = std::fs::read_to_string(h.config_dir().join("notion.kdl")).unwrap();
    assert!(
        notion.contains("X-Api-Key secret=\"X_API_KEY\""),
        "{notion}"
    );
    let secrets = h.config_dir().parent().unwrap().join("secrets");
    let value = std::fs::read_to_string(secrets.join("linear/AUTHORIZATION")).unwrap();
    assert_eq!(value, "Bearer lin-s3cret");
    let mode = std::fs::metadata(secrets.join("notion/X_API_KEY"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    let entries = h.list();
    for name in ["linear", "notion"] {
        let e = entries.iter().find(|e| e["name"] == name).unwrap();
        assert_eq!(e["transport"], "remote", "{e}");
    }
}
