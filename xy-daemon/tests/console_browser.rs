//! The console in a real headless Chromium (SPEC §28, issue 42), driven
//! through the DevTools protocol over `--remote-debugging-pipe` (no
//! WebDriver, no crate: NUL-separated JSON on two pipes): sign in with the
//! one-time code, approve a held-back tool and see a client get
//! `list_changed`, restart a server, follow a log, see a call appear
//! live; every server-supplied string that tries to run (a tool
//! description, a stderr line, a skill file, an MCP App's HTML) must run
//! zero times, checked with a canary in the page. Screenshots of each page go to
//! `target/console-screenshots/` (CI artefacts). Skipped, loudly, where no
//! Chromium is installed (`.ci/run` installs it).
#![allow(clippy::print_stderr)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Instant;

use base64::Engine as _;
use serde_json::{Value, json};

use crate::helper::*;
use crate::stdio::client::{Era, Mcp};

/// A browser tab over the DevTools pipe.
struct Browser {
    child: Child,
    tx: ChildStdin,
    rx: mpsc::Receiver<Value>,
    next: u64,
    session: String,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn chromium() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs: Vec<_> = std::env::split_paths(&path).collect();
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|b| dirs.iter().map(move |d| d.join(b)))
        .find(|p| p.is_file())
}

impl Browser {
    fn launch(exe: &std::path::Path) -> Browser {
        let profile = tempfile::tempdir().unwrap();
        // The pipe is fds 3 (commands in) and 4 (replies out): the shell
        // moves our stdin and stdout there.
        let mut child = Command::new("sh")
            .arg("-c")
            .arg("exec \"$@\" 3<&0 4>&1 </dev/null >/dev/null")
            .arg("sh")
            .arg(exe)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--remote-debugging-pipe",
                "--window-size=1280,900",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromium");
        let tx = child.stdin.take().unwrap();
        let out = child.stdout.take().unwrap();
        let (send, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(out);
            let mut buf = Vec::new();
            while r.read_until(0, &mut buf).is_ok_and(|n| n > 0) {
                buf.pop();
                if let Ok(v) = serde_json::from_slice::<Value>(&buf)
                    && send.send(v).is_err()
                {
                    return;
                }
                buf.clear();
            }
        });
        let mut b = Browser {
            child,
            tx,
            rx,
            next: 1,
            session: String::new(),
            _profile: profile,
        };
        let target = b.browser_cmd("Target.createTarget", json!({"url": "about:blank"}));
        let id = target["targetId"].as_str().unwrap().to_owned();
        let attached = b.browser_cmd(
            "Target.attachToTarget",
            json!({"targetId": id, "flatten": true}),
        );
        b.session = attached["sessionId"].as_str().unwrap().to_owned();
        b.cmd("Page.enable", json!({}));
        b.cmd("Runtime.enable", json!({}));
        b.cmd(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": false}),
        );
        b
    }

    fn send(&mut self, method: &str, params: Value, session: bool) -> Value {
        let id = self.next;
        self.next += 1;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if session {
            msg["sessionId"] = json!(self.session);
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.tx.write_all(&bytes).unwrap();
        let until = Instant::now() + scaled(DEADLINE);
        loop {
            let left = until.saturating_duration_since(Instant::now());
            let m = self
                .rx
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no answer to {method}"));
            if m["id"] == id {
                assert!(m.get("error").is_none(), "{method}: {m}");
                return m["result"].clone();
            }
        }
    }

    fn browser_cmd(&mut self, method: &str, params: Value) -> Value {
        self.send(method, params, false)
    }

    fn cmd(&mut self, method: &str, params: Value) -> Value {
        self.send(method, params, true)
    }

    /// The value of a JavaScript expression in the page (awaited).
    fn eval(&mut self, expr: &str) -> Value {
        let r = self.cmd(
            "Runtime.evaluate",
            json!({"expression": expr, "returnByValue": true, "awaitPromise": true}),
        );
        r["result"]["value"].clone()
    }

    fn wait(&mut self, what: &str, expr: &str) {
        wait_for(what, DEADLINE, || self.eval(expr) == json!(true));
    }

    fn screenshot(&mut self, name: &str) {
        let r = self.cmd("Page.captureScreenshot", json!({"format": "png"}));
        let png = base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().unwrap())
            .unwrap();
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/console-screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
    }

    /// Nothing a server wrote ran: the canaries the poisoned strings set
    /// are unset, and no element they would have made exists.
    fn assert_no_script_ran(&mut self) {
        assert_eq!(self.eval("typeof window.__pwned"), json!("undefined"));
        assert_eq!(
            self.eval("document.querySelectorAll('main img, main script, main iframe').length"),
            json!(0)
        );
    }
}

const POISON: &str = "Echoes <img src=x onerror=\"window.__pwned=1\"> and </script><script>window.__pwned=2</script>";

#[test]
fn the_console_in_a_real_browser() {
    let Some(exe) = chromium() else {
        eprintln!("SKIP the_console_in_a_real_browser: no chromium on PATH (.ci/run installs it)");
        return;
    };
    let env = Env::new();
    let port = free_port();
    let bridge = free_port();
    env.write_settings(&format!(
        "gateway {{ port 0; }}\nconsole {{ port {port}; }}\nfirewall {{ mode \"review\"; }}\n"
    ));
    let tools = env.root.path().join("tools.txt");
    std::fs::write(&tools, format!("echo = {POISON}\nadd = Adds numbers\n")).unwrap();
    // A stderr line with markup, then the MCP server.
    let script = format!(
        "echo '<img src=x onerror=\"window.__pwned=3\"> stderr says hi' >&2; exec {:?} --stdio --tools-file {:?}",
        testbin("xy-test-mcp").display().to_string(),
        tools.display().to_string()
    );
    env.write_config(
        "demo",
        &crate::stdio::stdio_config(
            std::path::Path::new("/bin/sh"),
            &["-c".to_owned(), script],
            bridge,
            "",
        ),
    );
    let d = TestDaemon::start_in(env);
    wait_for("demo's tools are held", DEADLINE, || {
        d.entry("demo")["tools_held"] == 2
    });
    wait_for("the console listens", DEADLINE, || port_answers(port));

    // A client of demo, listening for list_changed.
    let url = format!("http://127.0.0.1:{bridge}/mcp");
    let mut client = Mcp::connected(&url, Era::V2025);
    assert_eq!(
        client.tool_names(),
        Vec::<String>::new(),
        "held tools are hidden"
    );
    let notes = client.listen();

    let mut b = Browser::launch(&exe);
    let login = d.result("console_code", None);
    let link = format!(
        "{}#code={}",
        login["url"].as_str().unwrap(),
        login["code"].as_str().unwrap()
    );
    b.cmd("Page.navigate", json!({"url": link}));
    b.wait("the review queue shows echo and add", "!!document.querySelector('[data-item=echo]') && !!document.querySelector('[data-item=add]')");
    assert_eq!(
        b.eval("location.hash"),
        json!("#/review"),
        "the code left the address bar"
    );
    assert_eq!(
        b.eval("document.querySelector('#banner').textContent"),
        json!("2 pending approval")
    );
    let shown = b.eval("document.querySelector('[data-item=echo] .text').textContent");
    assert_eq!(shown, json!(POISON), "the description is shown as its text");
    b.assert_no_script_ran();
    b.screenshot("review");

    // Approve `add`: the client is told its list changed and sees it.
    b.eval("document.querySelector('[data-item=add] button.primary').click(); true");
    wait_for("add approved", DEADLINE, || {
        d.entry("demo")["tools_held"] == 1
    });
    notes.expect("notifications/tools/list_changed");
    assert_eq!(client.tool_names(), vec!["add".to_owned()]);
    b.wait("the queue shows only echo", "!document.querySelector('[data-item=add]') && !!document.querySelector('[data-item=echo]')");
    b.wait(
        "the banner counts one",
        "document.querySelector('#banner').textContent === '1 pending approval'",
    );

    // Servers: restart demo from the page.
    let pid = d.running_pid("demo");
    b.eval("location.hash = '#/servers'; true");
    b.wait(
        "the servers table",
        "!!document.querySelector('tr[data-server=demo]')",
    );
    b.screenshot("servers");
    b.eval("[...document.querySelectorAll('tr[data-server=demo] button')].find(x => x.textContent === 'restart').click(); true");
    wait_for("demo restarted", DEADLINE, || {
        d.entry("demo")["state"] == "running"
            && d.entry("demo")["pid"].as_i64() != Some(i64::from(pid))
    });

    // One server's page: its status.
    b.eval("location.hash = '#/servers/demo'; true");
    b.wait(
        "demo's page",
        "document.querySelector('main h2') && document.querySelector('main h2').textContent === 'demo' && document.querySelector('main table').textContent.includes('running')",
    );
    b.screenshot("server");

    // Logs: the poisoned stderr line is text; a new line arrives live.
    b.eval("location.hash = '#/logs'; true");
    b.wait("log lines", "document.querySelector('#logs') && document.querySelector('#logs').textContent.includes('stderr says hi')");
    let before = b.eval("document.querySelector('#logs').children.length");
    d.result("restart", Some(json!({"name": "demo"})));
    wait_for("a followed line arrives", DEADLINE, || {
        b.eval("document.querySelector('#logs').children.length")
            .as_u64()
            > before.as_u64()
    });
    b.assert_no_script_ran();
    b.screenshot("logs");

    // Calls: a call through xy appears live.
    wait_for("demo runs again", DEADLINE, || {
        d.entry("demo")["state"] == "running"
    });
    b.eval("location.hash = '#/calls'; true");
    b.wait("the calls page follows", "!!document.querySelector('#calls') && document.querySelector('#live').classList.contains('on')");
    let mut caller = Mcp::connected(&url, Era::V2025);
    caller.result("tools/call", json!({"name": "add", "arguments": {}}));
    b.wait(
        "the call is shown",
        "[...document.querySelectorAll('#calls tr')].some(r => r.textContent.includes('add'))",
    );
    b.screenshot("calls");

    b.eval("location.hash = '#/clients'; true");
    b.wait("the clients page", "document.querySelector('main h2') && document.querySelector('main h2').textContent === 'Clients'");
    b.screenshot("clients");
    b.eval("location.hash = '#/review'; true");
    b.wait(
        "the queue again",
        "!!document.querySelector('[data-item=echo]')",
    );
    b.assert_no_script_ran();

    // A new tab without the token is not signed in, even with the cookie.
    b.eval("sessionStorage.clear(); location.hash = '#/servers'; location.reload(); true");
    b.wait("signed out", "document.querySelector('main h2') && document.querySelector('main h2').textContent === 'Not signed in'");
    b.screenshot("signed-out");
}

/// A skill file and an MCP App (`ui://`) held back for review: the queue
/// shows their text as source, and nothing in them runs.
#[test]
fn skills_and_apps_in_the_review_queue_are_shown_as_source() {
    let Some(exe) = chromium() else {
        eprintln!(
            "SKIP skills_and_apps_in_the_review_queue_are_shown_as_source: no chromium on PATH (.ci/run installs it)"
        );
        return;
    };
    let env = Env::new();
    let port = free_port();
    env.write_settings(&format!(
        "gateway {{ port 0; }}\nconsole {{ port {port}; }}\nfirewall {{ mode \"review\"; }}\n"
    ));
    let dir = env.root.path().join("skills-dir");
    let app = "<!doctype html><html><body><script>window.__pwned=4</script><img src=x onerror=\"window.__pwned=5\"><iframe srcdoc=\"<script>parent.__pwned=6</script>\"></iframe></body></html>\n";
    let skill = "---\nname: evil\ndescription: A skill <img src=x onerror=\"window.__pwned=7\">\n---\n<script>window.__pwned=8</script> Do things.\n";
    for (p, text) in [("apps/evil.html", app), ("skills/evil/SKILL.md", skill)] {
        let p = dir.join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let args = [
        "--dir".to_owned(),
        dir.display().to_string(),
        "--era".to_owned(),
        "both".to_owned(),
    ];
    env.write_config(
        "apps",
        &crate::stdio::stdio_config(&testbin("xy-test-skills"), &args, free_port(), ""),
    );
    let d = TestDaemon::start_in(env);
    wait_for("the app and the skill are held", DEADLINE, || {
        let t = d.result("tools", Some(json!({"name": "apps"})));
        let uris: Vec<String> = t["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| r["state"] != "approved")
            .filter_map(|r| r["name"].as_str().map(str::to_owned))
            .collect();
        uris.iter().any(|u| u == "ui://evil") && uris.iter().any(|u| u.starts_with("skill://evil/"))
    });
    wait_for("the console listens", DEADLINE, || port_answers(port));
    let mut b = Browser::launch(&exe);
    let login = d.result("console_code", None);
    let link = format!(
        "{}#code={}",
        login["url"].as_str().unwrap(),
        login["code"].as_str().unwrap()
    );
    b.cmd("Page.navigate", json!({"url": link}));
    b.wait(
        "the queue shows the app and the skill file",
        "!!document.querySelector('[data-item=\"ui://evil\"]') && [...document.querySelectorAll('[data-item]')].some(e => e.dataset.item.startsWith('skill://evil/'))",
    );
    let shown = b.eval("document.querySelector('[data-item=\"ui://evil\"] .text').textContent");
    assert_eq!(shown, json!(app), "the app's HTML is shown as its source");
    let skill_shown = b.eval(
        "[...document.querySelectorAll('[data-item]')].find(e => e.dataset.item === 'skill://evil/SKILL.md').querySelector('.text').textContent",
    );
    assert!(
        skill_shown
            .as_str()
            .is_some_and(|t| t.contains("<script>window.__pwned=8</script>")),
        "the skill file is shown as its text: {skill_shown}"
    );
    b.assert_no_script_ran();
    b.screenshot("review-apps");
}
