//! SPEC §14 end to end, on a temporary HOME with nothing in it: first run,
//! `add`/`remove`, `import`, `clients apply|undo` against real-shaped client
//! files, and `connect` driven by the official Python SDK. The real `xyctl`
//! starts the real `xyd` (detect-or-spawn); every wait polls with a deadline.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use xy_testbins::locate::free_port;

use serde_json::Value;

mod support;

use support::{Home, Run, XYCTL, wait_for};

/// A sleeper server on `port`, written as the user would.
fn write_sleeper(h: &Home, name: &str, port: u16) {
    let sleeper = xy_testbins::locate::testbin("xy-test-sleep");
    h.write_config(
        name,
        &format!(
            "command \"{}\"\nargs \"--interval-ms\" \"1000\"\nport {port}\nstop {{\n    grace \"2s\"\n}}\n",
            sleeper.display()
        ),
    );
}

#[test]
fn first_run_boots_empty_and_list_says_how_to_add_a_server() {
    let h = Home::new("xyo");
    assert!(!h.home().join(".config").exists());
    let r = h.run(&["list"]);
    r.ok();
    assert!(r.stdout().contains("No servers yet"), "{}", r.stdout());
    assert!(
        r.stdout().contains("xyctl add <name> -- <command>"),
        "{}",
        r.stdout()
    );
    let mode = std::fs::metadata(h.config_dir())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o700);
    let r = h.run(&["list", "--json"]);
    r.ok();
    assert_eq!(r.stdout().trim(), "[]");

    // A directory named on the command line that does not exist is still
    // a config error.
    let xyd = xy_testbins::locate::xyd();
    let other = Home::new("xyo");
    let out = Command::new(xyd)
        .args(["--config-dir", "/nonexistent/xy-servers"])
        .env_clear()
        .env("HOME", other.home())
        .env("XY_SOCKET", &other.socket)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!Path::new("/nonexistent/xy-servers").exists());
}

#[test]
fn add_writes_a_valid_config_and_starts_it_and_a_bad_one_leaves_nothing() {
    let h = Home::new("xyo");
    let mcp = xy_testbins::locate::testbin("xy-test-mcp");
    let p = free_port().to_string();
    let r = h.run(&[
        "add",
        "demo",
        "--port",
        &p,
        "--env",
        "RUST_LOG=info",
        "--health",
        "mcp",
        "--",
        mcp.to_str().unwrap(),
        "--port",
        "{port}",
    ]);
    r.ok();
    let url = format!("http://127.0.0.1:{p}/mcp");
    // SPEC §25: `add` waited for the listing and says what it found.
    assert!(
        r.stdout()
            .starts_with("demo  running, 1 tools (0 held back)  "),
        "{}",
        r.stdout()
    );
    assert!(r.stdout().contains(&url), "{}", r.stdout());
    let text = std::fs::read_to_string(h.config_dir().join("demo.kdl")).unwrap();
    assert!(
        text.contains(&format!("args \"--port\" \"{p}\"\n")),
        "{text}"
    );
    assert!(text.contains("env {\n    RUST_LOG \"info\"\n}\n"), "{text}");
    assert!(text.contains("health {\n    mcp \"/mcp\"\n}\n"), "{text}");
    assert_eq!(h.state_of("demo").as_deref(), Some("running"));
    h.run(&["config", "check", h.config_dir().to_str().unwrap()])
        .ok();

    // Same name again: refused without --force, file untouched.
    let r = h.run(&["add", "demo", "--", "/bin/true"]);
    assert_eq!(r.code(), 1, "{}", r.stderr());
    assert!(r.stderr().contains("--force"), "{}", r.stderr());
    assert_eq!(
        std::fs::read_to_string(h.config_dir().join("demo.kdl")).unwrap(),
        text
    );

    // Invalid: exit 3, the loader's diagnostics, and no file of any kind.
    let r = h.run(&["add", "broken", "--port", "0", "--", "/bin/true"]);
    assert_eq!(r.code(), 3, "{}", r.stderr());
    assert!(r.stderr().contains("broken.kdl"), "{}", r.stderr());
    let files: Vec<_> = std::fs::read_dir(h.config_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(files, ["demo.kdl"]);
    // A port another config has: exit 3 too.
    let r = h.run(&["add", "twin", "--port", &p, "--", "/bin/true"]);
    assert_eq!(r.code(), 3, "{}", r.stderr());
    assert!(!h.config_dir().join("twin.kdl").exists());

    // Without --port: the first port from 8400 no config uses (and nothing
    // listens on). --no-start (SPEC §18): the daemon knows it, `stopped`.
    let r = h.run(&["add", "later", "--no-start", "--", "/bin/sleep", "300"]);
    r.ok();
    assert!(r.stdout().contains("later  stopped"), "{}", r.stdout());
    let later = std::fs::read_to_string(h.config_dir().join("later.kdl")).unwrap();
    let chosen: u16 = later
        .lines()
        .find_map(|l| l.strip_prefix("port "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(chosen >= 8400, "{later}");
    assert!(later.contains("autostart #false"), "{later}");
    assert_eq!(h.state_of("later").as_deref(), Some("stopped"));
    // A reload leaves it stopped; `start` starts it (it used to say "no
    // such server", issue 26).
    h.run(&["reload"]).ok();
    assert_eq!(h.state_of("later").as_deref(), Some("stopped"));
    let r = h.run(&["start", "later", "--wait", "0"]);
    r.ok();
    assert!(r.stdout().contains("later: started"), "{}", r.stdout());
    assert_eq!(h.state_of("later").as_deref(), Some("running"));
    // A daemon restart leaves it stopped again.
    h.run(&["daemon", "stop"]).ok();
    h.run(&["list"]).ok();
    wait_for("demo back", Duration::from_secs(20), || {
        h.state_of("demo").as_deref() == Some("running")
    });
    assert_eq!(h.state_of("later").as_deref(), Some("stopped"));
}

/// SPEC §21: `add` writes a starter `sandbox` block (the launcher's cache,
/// the directories named in the arguments, network "any") that the
/// daemon's loader and `config check` accept; `--no-sandbox` writes none.
#[test]
fn add_writes_a_starter_sandbox_block_unless_no_sandbox() {
    let h = Home::new("xyo");
    let notes = h.home().join("notes");
    std::fs::create_dir_all(&notes).unwrap();
    let r = h.run(&[
        "add",
        "files",
        "--no-start",
        "--",
        "npx",
        "-y",
        "@modelcontextprotocol/server-filesystem",
        notes.to_str().unwrap(),
        "~/missing",
    ]);
    r.ok();
    let text = std::fs::read_to_string(h.config_dir().join("files.kdl")).unwrap();
    assert!(
        text.contains(
            "sandbox {\n    write \"~/.npm\"\n    write \"~/notes\"\n    network \"any\"\n}\n"
        ),
        "{text}"
    );
    assert!(
        !text.contains("missing\"\n    "),
        "only existing paths: {text}"
    );
    assert!(
        h.home().join(".npm").is_dir(),
        "the npm cache is created for the rule"
    );
    h.run(&["config", "check", h.config_dir().to_str().unwrap()])
        .ok();

    let r = h.run(&[
        "add",
        "open",
        "--no-start",
        "--no-sandbox",
        "--",
        "/bin/sleep",
        "300",
    ]);
    r.ok();
    let text = std::fs::read_to_string(h.config_dir().join("open.kdl")).unwrap();
    assert!(!text.contains("sandbox"), "{text}");
}

/// SPEC §25 (issue 39: `add` printed `running` for 9 servers that then
/// crash-looped): `add` and `start` wait until the server listed its tools
/// or failed, and say which; a child that exits at once is a failure with
/// its cause (exit 1), never `running`.
#[test]
fn add_and_start_say_what_the_server_came_to_never_running_for_a_crash_loop() {
    let h = Home::new("xyo");
    let mcp = xy_testbins::locate::testbin("xy-test-mcp");
    let r = h.run(&[
        "add",
        "good",
        "--stdio",
        "--",
        mcp.to_str().unwrap(),
        "--stdio",
    ]);
    r.ok();
    assert!(
        r.stdout()
            .starts_with("good  running, 1 tools (0 held back)  http://127.0.0.1:"),
        "{}",
        r.stdout()
    );
    let r = h.run(&[
        "add",
        "bad",
        "--stdio",
        "--",
        "/bin/sh",
        "-c",
        "echo 'Error: missing API_TOKEN' >&2; exit 1",
    ]);
    assert_eq!(r.code(), 1, "{} {}", r.stdout(), r.stderr());
    let out = r.stdout();
    assert!(!out.contains("running"), "{out}");
    assert!(out.starts_with("bad  crash-looping: "), "{out}");
    assert!(out.contains("Error: missing API_TOKEN"), "{out}");
    assert!(out.contains("xyctl status bad"), "{out}");

    h.run(&["stop", "good"]).ok();
    let r = h.run(&["start", "good"]);
    r.ok();
    assert_eq!(r.stdout(), "good: running, 1 tools (0 held back)\n");
    let r = h.run(&["restart", "good", "bad"]);
    assert_eq!(r.code(), 1, "{}", r.stdout());
    let out = r.stdout();
    assert!(
        out.contains("good: running, 1 tools (0 held back)\n"),
        "{out}"
    );
    assert!(out.contains("bad: crash-looping: "), "{out}");
    // `--wait 0`: the state at once, as before.
    h.run(&["stop", "good"]).ok();
    assert_eq!(
        h.run(&["start", "good", "--wait", "0"]).ok(),
        "good: started\n"
    );
}

/// SPEC §25 (issue 39: own server added with a relative path crash-looped,
/// resolved against xyd's directory): `xyctl add mine --stdio -- ./run.sh
/// serve.conf` from a project directory runs the project's `run.sh` there,
/// with the project as its working dir.
#[test]
fn relative_paths_in_add_resolve_against_the_directory_xyctl_ran_in() {
    let h = Home::new("xyo");
    let proj = h.home().join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    let mcp = xy_testbins::locate::testbin("xy-test-mcp");
    // The script reads a file named relative to its working dir, and execs
    // a test binary outside the home (not the subject here: no sandbox).
    std::fs::write(proj.join("serve.conf"), "--stdio\n").unwrap();
    let script = proj.join("run.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\nexec {} $(cat \"$1\")\n", mcp.display()),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = h
        .cmd(&[
            "add",
            "mine",
            "--stdio",
            "--no-sandbox",
            "--",
            "./run.sh",
            "serve.conf",
        ])
        .current_dir(&proj)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.starts_with("mine  running, 1 tools (0 held back)"),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(h.config_dir().join("mine.kdl")).unwrap();
    assert!(
        text.contains(&format!("command \"{}\"", script.display())),
        "{text}"
    );
    assert!(
        text.contains(&format!("working-dir \"{}\"", proj.display())),
        "{text}"
    );
    // From the home directory no working dir is written.
    let out = h
        .cmd(&["add", "athome", "--no-start", "--", "/bin/sleep", "300"])
        .current_dir(h.home())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = std::fs::read_to_string(h.config_dir().join("athome.kdl")).unwrap();
    assert!(!text.contains("working-dir"), "{text}");
}

#[test]
fn remove_keeps_the_file_recoverable() {
    let h = Home::new("xyo");
    write_sleeper(&h, "keep", free_port());
    write_sleeper(&h, "gone", free_port());
    h.run(&["list"]).ok();
    wait_for("both running", Duration::from_secs(20), || {
        h.state_of("gone").as_deref() == Some("running")
            && h.state_of("keep").as_deref() == Some("running")
    });
    let before = std::fs::read(h.config_dir().join("gone.kdl")).unwrap();
    let r = h.run(&["remove", "gone"]);
    r.ok();
    assert_eq!(h.state_of("gone"), None);
    assert_eq!(h.state_of("keep").as_deref(), Some("running"));
    let removed: Vec<_> = std::fs::read_dir(h.config_dir().join(".removed"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(removed.len(), 1);
    let name = removed[0].file_name().unwrap().to_str().unwrap().to_owned();
    assert!(name.starts_with("gone.kdl."), "{name}");
    assert!(r.stdout().contains(&name), "{}", r.stdout());
    assert_eq!(std::fs::read(&removed[0]).unwrap(), before);

    // Restore: move it back, reload.
    std::fs::rename(&removed[0], h.config_dir().join("gone.kdl")).unwrap();
    h.run(&["reload"]).ok();
    wait_for("gone back", Duration::from_secs(20), || {
        h.state_of("gone").as_deref() == Some("running")
    });

    let r = h.run(&["remove", "nosuch"]);
    assert_eq!(r.code(), 1, "{}", r.stderr());
}

/// The sample client files (`tests/data/clients/`).
fn sample(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/clients")
        .join(name)
}

#[test]
fn clients_apply_dry_run_backup_and_undo_for_every_client() {
    let h = Home::new("xyo");
    // xy servers standing for the samples' stdio entries (import's name for
    // "My Weather" is "My-Weather").
    let names = [
        "context7",
        "github",
        "filesystem",
        "My-Weather",
        "memory",
        "perplexity",
    ];
    for n in &names {
        write_sleeper(&h, n, free_port());
    }
    h.run(&["list"]).ok();
    let xy = h.list();
    assert_eq!(xy.len(), names.len());
    let xyctl = std::fs::canonicalize(XYCTL).unwrap();

    let work = tempfile::tempdir().unwrap();
    for (client, file) in [
        ("claude-desktop", "claude_desktop_config.json"),
        ("claude-code", "claude.json"),
        ("cursor", "cursor-mcp.json"),
        ("vscode", "vscode-mcp.json"),
        ("windsurf", "windsurf-mcp_config.json"),
        ("codex", "codex-config.toml"),
    ] {
        let path = work.path().join(file);
        std::fs::copy(sample(file), &path).unwrap();
        let original = std::fs::read(&path).unwrap();
        let p = path.to_str().unwrap();
        let count = || std::fs::read_dir(work.path()).unwrap().count();
        let files_before = count();

        let r = h.run(&["clients", "apply", client, "--file", p, "--dry-run"]);
        r.ok();
        assert!(
            r.stdout().starts_with(&format!("--- {p}\n+++ {p}\n@@ ")),
            "{client}: {}",
            r.stdout()
        );
        assert_eq!(
            std::fs::read(&path).unwrap(),
            original,
            "{client}: dry run wrote"
        );
        assert_eq!(count(), files_before, "{client}: dry run left a file");

        let r = h.run(&["clients", "apply", client, "--file", p]);
        r.ok();
        let applied = std::fs::read_to_string(&path).unwrap();
        assert_ne!(applied.as_bytes(), original, "{client}");
        let backups: Vec<_> = std::fs::read_dir(work.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|b| {
                b.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(&format!("{file}.xy-backup-"))
            })
            .collect();
        assert_eq!(backups.len(), 1, "{client}");
        assert_eq!(
            std::fs::read(&backups[0]).unwrap(),
            original,
            "{client}: backup"
        );
        if client == "claude-desktop" {
            assert!(
                applied.contains(&format!("\"command\": \"{}\"", xyctl.display())),
                "{applied}"
            );
            assert!(
                applied.contains("\"args\": [\"connect\", \"My-Weather\"]"),
                "{applied}"
            );
            assert!(
                applied.contains("\"url\": \"https://mcp.notion.com/mcp\""),
                "{applied}"
            );
        } else {
            let ctx7 = xy.iter().find(|e| e["name"] == "github").unwrap();
            let _ = ctx7;
            assert!(applied.contains("http://127.0.0.1:"), "{client}: {applied}");
        }
        // Applying twice changes nothing and makes no second backup.
        let r = h.run(&["clients", "apply", client, "--file", p]);
        r.ok();
        assert!(
            r.stdout().starts_with("nothing to change"),
            "{}",
            r.stdout()
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), applied);

        // The listing sees the entries pointing at xy now.
        h.run(&["clients", "undo", client, "--file", p]).ok();
        assert_eq!(std::fs::read(&path).unwrap(), original, "{client}: undo");
    }
}

/// SPEC §20: clients that speak HTTP get the gateway's URL; with the
/// gateway off, the server's own port (an entry written either way is
/// xy's, and is moved to the other).
#[test]
fn clients_apply_writes_the_gateway_url_and_the_own_port_when_it_is_off() {
    let h = Home::new("xyg");
    let gw = xy_testbins::locate::free_port();
    let settings = h.config_dir().parent().unwrap().join("xy.kdl");
    std::fs::create_dir_all(h.config_dir()).unwrap();
    std::fs::write(&settings, format!("gateway {{ port {gw}; }}\n")).unwrap();
    let own = free_port();
    write_sleeper(&h, "context7", own);
    h.run(&["list"]).ok();
    let gateway_url = format!("http://127.0.0.1:{gw}/context7/mcp");
    assert_eq!(h.list()[0]["gateway_url"], gateway_url.as_str());

    let work = tempfile::tempdir().unwrap();
    let path = work.path().join("cursor-mcp.json");
    std::fs::copy(sample("cursor-mcp.json"), &path).unwrap();
    let p = path.to_str().unwrap();
    h.run(&["clients", "apply", "cursor", "--file", p]).ok();
    let applied = std::fs::read_to_string(&path).unwrap();
    assert!(
        applied.contains(&format!("\"url\": \"{gateway_url}\"")),
        "{applied}"
    );
    // The entry counts as xy's.
    let r = h.run(&["clients", "apply", "cursor", "--file", p]);
    assert!(r.ok().starts_with("nothing to change"), "{}", r.stdout());

    std::fs::write(&settings, "gateway { port 0; }\n").unwrap();
    h.run(&["reload"]).ok();
    assert!(h.list()[0]["gateway_url"].is_null());
    h.run(&["clients", "apply", "cursor", "--file", p]).ok();
    let applied = std::fs::read_to_string(&path).unwrap();
    assert!(
        applied.contains(&format!("\"url\": \"http://127.0.0.1:{own}/mcp\"")),
        "{applied}"
    );
}

/// SPEC §26: `clients apply <client> --one [--profile P]` writes ONE entry
/// pointing at the aggregate (`xy-all` → `/mcp`, `xy-<P>` →
/// `/p/<P>/mcp`; a stdio-only client runs `xyctl connect --one
/// [--profile P]`) in place of the entries that stand for xy's servers,
/// leaves every other entry as it was, and `clients undo` restores the file.
#[test]
fn clients_apply_one_writes_one_entry_for_the_aggregate() {
    let h = Home::new("xy1");
    let gw = xy_testbins::locate::free_port();
    let settings = h.config_dir().parent().unwrap().join("xy.kdl");
    std::fs::create_dir_all(h.config_dir()).unwrap();
    std::fs::write(
        &settings,
        format!("gateway {{ port {gw}; }}\nprofile \"work\" {{\n    mode \"search\"\n}}\n"),
    )
    .unwrap();
    for n in ["context7", "filesystem", "github"] {
        write_sleeper(&h, n, free_port());
    }
    h.run(&["list"]).ok();
    let xyctl = std::fs::canonicalize(XYCTL).unwrap();
    let work = tempfile::tempdir().unwrap();
    let servers = |path: &Path| -> serde_json::Map<String, Value> {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        v["mcpServers"].as_object().unwrap().clone()
    };
    for (profile, entry, endpoint) in [
        (None, "xy-all", "/mcp".to_owned()),
        (Some("work"), "xy-work", "/p/work/mcp".to_owned()),
    ] {
        let path = work.path().join(format!("cursor-{entry}.json"));
        std::fs::copy(sample("cursor-mcp.json"), &path).unwrap();
        let original = std::fs::read(&path).unwrap();
        let p = path.to_str().unwrap();
        let mut args = vec!["clients", "apply", "cursor", "--one", "--file", p];
        if let Some(pr) = profile {
            args.extend(["--profile", pr]);
        }
        h.run(&args).ok();
        let after = servers(&path);
        let mut names: Vec<&str> = after.keys().map(String::as_str).collect();
        names.sort_unstable();
        let mut want = [entry, "linear"];
        want.sort_unstable();
        assert_eq!(names, want, "{after:?}");
        assert_eq!(
            after[entry]["url"],
            format!("http://127.0.0.1:{gw}{endpoint}"),
            "{after:?}"
        );
        let before: Value = serde_json::from_slice(&original).unwrap();
        assert_eq!(after["linear"], before["mcpServers"]["linear"]);
        let r = h.run(&args);
        assert!(r.ok().starts_with("nothing to change"), "{}", r.stdout());
        h.run(&["clients", "undo", "cursor", "--file", p]).ok();
        assert_eq!(std::fs::read(&path).unwrap(), original, "undo");
    }
    // A client that only launches stdio servers: `xyctl connect --one`.
    let path = work.path().join("claude_desktop_config.json");
    std::fs::copy(sample("claude_desktop_config.json"), &path).unwrap();
    let p = path.to_str().unwrap();
    h.run(&[
        "clients",
        "apply",
        "claude-desktop",
        "--one",
        "--profile",
        "work",
        "--file",
        p,
    ])
    .ok();
    let after = servers(&path);
    let mut names: Vec<&str> = after.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(names, ["My Weather", "notion", "xy-work"], "{after:?}");
    assert_eq!(after["xy-work"]["command"], xyctl.display().to_string());
    assert_eq!(
        after["xy-work"]["args"],
        serde_json::json!(["connect", "--one", "--profile", "work"])
    );
}

// Issue 26: a symlinked config (stow, chezmoi, home-manager) became a
// regular file; `apply` wrote the canonical build-tree path instead of the
// `xyctl` on PATH; `undo` overwrote edits made after `apply`.
#[test]
fn apply_keeps_a_symlinked_config_writes_the_xyctl_on_path_and_undo_keeps_a_hand_edit() {
    let h = Home::new("xyo");
    write_sleeper(&h, "github", free_port());
    h.run(&["list"]).ok();

    let work = tempfile::tempdir().unwrap();
    let dotfiles = work.path().join("dotfiles");
    std::fs::create_dir(&dotfiles).unwrap();
    let real = dotfiles.join("claude_desktop_config.json");
    std::fs::copy(sample("claude_desktop_config.json"), &real).unwrap();
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o640)).unwrap();
    let original = std::fs::read(&real).unwrap();
    let link = work.path().join("claude_desktop_config.json");
    std::os::unix::fs::symlink("dotfiles/claude_desktop_config.json", &link).unwrap();
    // The user's PATH has xyctl through a link, as Homebrew's bin/ does.
    let bin = work.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(XYCTL, bin.join("xyctl")).unwrap();
    let path_var = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );

    let p = link.to_str().unwrap();
    let out = h
        .cmd(&["clients", "apply", "claude-desktop", "--file", p])
        .env("PATH", &path_var)
        .output()
        .unwrap();
    let r = support::Run(out);
    r.ok();
    assert_eq!(r.stderr(), "", "no warning for the xyctl on PATH");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let applied = std::fs::read_to_string(&real).unwrap();
    assert!(
        applied.contains(&format!("\"command\": \"{}\"", bin.join("xyctl").display())),
        "{applied}"
    );
    assert_eq!(
        std::fs::metadata(&real).unwrap().permissions().mode() & 0o777,
        0o640
    );

    // A hand edit after apply, then undo: the edit is kept and named.
    let edited = applied.replace("Alt+Space", "Ctrl+Space");
    std::fs::write(&real, &edited).unwrap();
    let out = h
        .run(&["clients", "undo", "claude-desktop", "--file", p])
        .ok();
    let kept = out
        .lines()
        .find_map(|l| l.strip_prefix("kept the file as it was (edited since the backup) in "))
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(std::fs::read_to_string(kept).unwrap(), edited);
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read(&real).unwrap(), original);
}

#[test]
fn clients_lists_what_points_at_xy() {
    let h = Home::new("xyo");
    write_sleeper(&h, "context7", free_port());
    h.run(&["list"]).ok();
    let cursor = h.home().join(".cursor/mcp.json");
    std::fs::create_dir_all(cursor.parent().unwrap()).unwrap();
    std::fs::copy(sample("cursor-mcp.json"), &cursor).unwrap();
    let r = h.run(&["clients", "--json"]);
    r.ok();
    let v: Value = serde_json::from_str(&r.stdout()).unwrap();
    let found = v.as_array().unwrap();
    assert_eq!(found.len(), 1, "{v}");
    assert_eq!(found[0]["client"], "cursor");
    let entry = |n: &str| {
        found[0]["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == n)
            .cloned()
            .unwrap()
    };
    assert_eq!(entry("context7")["uses"], "process");
    assert_eq!(entry("context7")["xy_server"], "context7");
    assert_eq!(entry("linear")["uses"], "url");
    h.run(&["clients", "apply", "cursor"]).ok();
    let r = h.run(&["clients", "--json"]);
    let v: Value = serde_json::from_str(&r.stdout()).unwrap();
    let e = v[0]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "context7")
        .cloned()
        .unwrap();
    assert_eq!(e["uses"], "xy");
    let r = h.run(&["clients"]);
    r.ok();
    assert!(r.stdout().contains("xy (context7)"), "{}", r.stdout());
}

#[test]
fn import_claude_desktop_creates_one_stdio_server_per_stdio_entry() {
    let h = Home::new("xyo");
    let child = xy_testbins::locate::testbin("xy-test-sleep");
    let child = child.to_str().unwrap();
    let dir = h.home().join("Library/Application Support/Claude");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("claude_desktop_config.json");
    let text = format!(
        r#"{{
  "mcpServers": {{
    "alpha": {{ "command": "{child}", "args": ["--interval-ms", "1000"] }},
    "beta": {{ "command": "{child}", "args": ["--interval-ms", "1000"], "env": {{ "API_KEY": "s3cret" }} }},
    "My Gamma!": {{ "command": "{child}" }},
    "remote": {{ "url": "https://mcp.example.com/mcp" }}
  }},
  "globalShortcut": ""
}}
"#
    );
    std::fs::write(&file, &text).unwrap();
    let f = file.to_str().unwrap();

    let r = h.run(&["import", "claude-desktop", "--file", f, "--dry-run"]);
    r.ok();
    assert!(r.stdout().contains("would be created"), "{}", r.stdout());
    assert!(!h.config_dir().join("alpha.kdl").exists(), "dry run wrote");

    // Sleepers never answer MCP: nothing to wait for here (`--wait 0`).
    let r = h.run(&["import", "claude-desktop", "--file", f, "--wait", "0"]);
    r.ok();
    let out = r.stdout();
    assert!(out.contains("My-Gamma (renamed)"), "{out}");
    // SPEC §23: a URL entry becomes a remote server.
    assert!(out.contains("4 servers created"), "{out}");
    let remote = std::fs::read_to_string(h.config_dir().join("remote.kdl")).unwrap();
    assert!(
        remote.contains("url \"https://mcp.example.com/mcp\"\n"),
        "{remote}"
    );
    let beta = std::fs::read_to_string(h.config_dir().join("beta.kdl")).unwrap();
    assert!(beta.contains("transport \"stdio\"\n"), "{beta}");
    assert!(beta.contains("API_KEY \"s3cret\""), "{beta}");
    assert!(
        beta.contains("// Starter sandbox from `xyctl import`")
            && beta.contains("network \"any\"\n}\n"),
        "{beta}"
    );
    let mode = std::fs::metadata(h.config_dir().join("beta.kdl"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    let mut names: Vec<String> = h
        .list()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["My-Gamma", "alpha", "beta", "remote"]);
    assert!(
        h.list().iter().all(|e| e["transport"]
            == if e["name"] == "remote" {
                "remote"
            } else {
                "stdio"
            }),
        "{:?}",
        h.list()
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        text,
        "import does not touch the client file"
    );

    // Importing again creates nothing and overwrites nothing.
    let r = h.run(&["import", "claude-desktop", "--file", f]);
    r.ok();
    assert!(r.stdout().contains("xy already has"), "{}", r.stdout());
    assert_eq!(
        std::fs::read_to_string(h.config_dir().join("beta.kdl")).unwrap(),
        beta
    );
}

/// A stdio MCP server (Python's standard library only) whose one tool,
/// `save`, writes the file named in its first argument and, when that
/// fails, says so only in its tool result (`isError`), as server-memory
/// does.
const SAVING_SERVER: &str = r#"
import json, sys
target = sys.argv[1]
def send(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    msg = json.loads(line)
    m, i = msg.get("method"), msg.get("id")
    if i is None: continue
    if m == "initialize":
        send({"jsonrpc": "2.0", "id": i, "result": {"protocolVersion": msg["params"]["protocolVersion"],
              "capabilities": {"tools": {}}, "serverInfo": {"name": "saver", "version": "1"}}})
    elif m == "tools/list":
        send({"jsonrpc": "2.0", "id": i, "result": {"tools": [{"name": "save", "inputSchema": {"type": "object"}}]}})
    elif m == "tools/call":
        try:
            with open(target, "w") as f: f.write("x")
            send({"jsonrpc": "2.0", "id": i, "result": {"content": [{"type": "text", "text": "saved"}]}})
        except OSError as e:
            send({"jsonrpc": "2.0", "id": i, "result": {"content": [{"type": "text", "text": "Error: " + str(e)}], "isError": True}})
    else:
        send({"jsonrpc": "2.0", "id": i, "result": {}})
"#;

/// SPEC §25 (issue 39: server-memory's `EACCES … dist/memory.jsonl` came
/// back in a tool result and `status` said "denials (none since the
/// spawn)"): a denial a confined server reports only in a tool result is
/// in `status` — the path, the rule, and the line to add.
#[test]
fn a_denial_in_a_tool_result_is_explained_by_status() {
    use std::io::{BufRead, BufReader, Write};
    let h = Home::new("xyo");
    let data = h.home().join("x");
    std::fs::create_dir_all(&data).unwrap();
    let script = h.home().join("proj/saver.py");
    std::fs::create_dir_all(script.parent().unwrap()).unwrap();
    std::fs::write(&script, SAVING_SERVER).unwrap();
    let p = free_port();
    // `~/x` readable, not writable: the write is refused by the sandbox.
    // The system's python (a pyenv shim would need its own read line).
    h.write_config(
        "mine",
        &format!(
            "command \"/usr/bin/python3\"\nargs {:?} {:?}\ntransport \"stdio\"\nport {p}\n\
             sandbox {{\n    read \"~/proj\"\n    read \"~/x\"\n}}\n",
            script.display().to_string(),
            data.join("data.json").display().to_string()
        ),
    );
    h.run(&["list"]).ok();
    wait_for("mine listed", Duration::from_secs(60), || {
        h.list()
            .iter()
            .any(|e| e["name"] == "mine" && e["tool_count"].is_u64())
    });
    let mut child = h
        .cmd(&["connect", "mine"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    stdin
        .write_all(
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"save","arguments":{}}}
"#,
        )
        .unwrap();
    let mut line = String::new();
    let answer = loop {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "no answer");
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["id"] == 2 {
            break v;
        }
    };
    drop(stdin);
    let _ = child.wait();
    denial_explained(&h, "mine", &answer);
}

/// [`SAVING_SERVER`] over streamable HTTP (Python's standard library
/// only): `python3 saver.py <port> <file>`.
const SAVING_HTTP_SERVER: &str = r#"
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
target = sys.argv[2]
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def send(self, code, body=None):
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(code)
        if body is not None: self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def do_DELETE(self): self.send(200)
    def do_GET(self): self.send(405)
    def do_POST(self):
        msg = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        m, i = msg.get("method"), msg.get("id")
        if i is None: return self.send(202)
        if m == "initialize":
            return self.send(200, {"jsonrpc": "2.0", "id": i, "result": {
                "protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                "serverInfo": {"name": "saver", "version": "1"}}})
        if m == "tools/list":
            return self.send(200, {"jsonrpc": "2.0", "id": i, "result": {"tools": [
                {"name": "save", "inputSchema": {"type": "object"}}]}})
        if m == "tools/call":
            try:
                with open(target, "w") as f: f.write("x")
                return self.send(200, {"jsonrpc": "2.0", "id": i, "result": {"content": [{"type": "text", "text": "saved"}]}})
            except OSError as e:
                return self.send(200, {"jsonrpc": "2.0", "id": i, "result": {"content": [
                    {"type": "text", "text": "Error: " + str(e)}], "isError": True}})
        self.send(200, {"jsonrpc": "2.0", "id": i, "result": {}})
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"#;

/// The tool result carries the server's own "Permission denied", and
/// `status` explains it: the refused write and the line that fixes it.
fn denial_explained(h: &Home, name: &str, answer: &Value) {
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let text = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("Permission denied"), "{text}");
    let mut why = String::new();
    wait_for("the denial in status", Duration::from_secs(10), || {
        let st: Value = serde_json::from_str(&h.run(&["status", name, "--json"]).ok()).unwrap();
        why = st["explain"].as_str().unwrap_or_default().to_owned();
        why.contains("denied")
    });
    assert!(
        why.starts_with("sandbox: write to ~/x/data.json denied (not under sandbox.write)"),
        "{why}"
    );
    assert!(
        why.contains("fix: add `write \"~/x\"` to the sandbox block"),
        "{why}"
    );
}

/// D222: the same for an HTTP server — a denial it reports only in a tool
/// result that passed through xy's gateway is in `status`, with the fix
/// (on `main` before D222, `status` said "denials (none since the spawn)").
#[test]
fn a_denial_in_an_http_servers_tool_result_is_explained_by_status() {
    let h = Home::new("xyo");
    let data = h.home().join("x");
    std::fs::create_dir_all(&data).unwrap();
    let script = h.home().join("proj/saver.py");
    std::fs::create_dir_all(script.parent().unwrap()).unwrap();
    std::fs::write(&script, SAVING_HTTP_SERVER).unwrap();
    let p = free_port();
    // A gateway of its own: the default port is one per machine, and the
    // other tests' daemons (`Home::new` writes no xy.kdl) race for it.
    let gw = free_port();
    std::fs::create_dir_all(h.config_dir()).unwrap();
    std::fs::write(
        h.config_dir().parent().unwrap().join("xy.kdl"),
        format!("gateway {{ port {gw}; }}\nconsole {{ port 0; }}\n"),
    )
    .unwrap();
    h.write_config(
        "web",
        &format!(
            "command \"/usr/bin/python3\"\nargs {:?} \"{p}\" {:?}\nport {p}\n\
             firewall {{ mode \"off\"; }}\n\
             sandbox {{\n    read \"~/proj\"\n    read \"~/x\"\n}}\n",
            script.display().to_string(),
            data.join("data.json").display().to_string()
        ),
    );
    h.run(&["list"]).ok();
    wait_for("web listed", Duration::from_secs(60), || {
        h.list()
            .iter()
            .any(|e| e["name"] == "web" && e["tool_count"].is_u64())
    });
    // Through the gateway, where xy sees the answer (`connect` and a
    // client of the server's own port talk to the server itself).
    let url = h
        .list()
        .iter()
        .find(|e| e["name"] == "web")
        .and_then(|e| e["gateway_url"].as_str().map(str::to_owned))
        .expect("a gateway URL");
    let client = r#"
import json, sys, urllib.error, urllib.request
url = sys.argv[1]
def post(m):
    req = urllib.request.Request(url, data=json.dumps(m).encode(), method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-06-18"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            body = r.read().decode()
    except urllib.error.HTTPError as e:
        sys.exit(f"{url}: {m.get('method')}: HTTP {e.code}: {e.read().decode()}")
    for line in body.splitlines():
        if line.startswith("data:"): body = line[5:]
    return body
post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
      "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
post({"jsonrpc": "2.0", "method": "notifications/initialized"})
print(post({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "save", "arguments": {}}}))
"#;
    let out = std::process::Command::new("python3")
        .args(["-c", client, &url])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    denial_explained(&h, "web", &answer);
}

/// A strict streamable-HTTP MCP server (Python's standard library only):
/// it takes a request only after the session's `notifications/initialized`
/// and answers `-32600 Received request before initialization was
/// complete` otherwise, as the Python SDK does; it takes its time to accept
/// that notification, so a request sent beside it arrives first.
const STRICT_SERVER: &str = r#"
import json, sys, threading, time, uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
ready = set()
lock = threading.Lock()
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def send(self, code, body=None, sid=None):
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(code)
        if body is not None: self.send_header("Content-Type", "application/json")
        if sid: self.send_header("Mcp-Session-Id", sid)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def do_DELETE(self): self.send(200)
    def do_GET(self): self.send(405)
    def do_POST(self):
        msg = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        sid = self.headers.get("Mcp-Session-Id")
        m, i = msg.get("method"), msg.get("id")
        if m == "initialize":
            sid = uuid.uuid4().hex
            return self.send(200, {"jsonrpc": "2.0", "id": i, "result": {
                "protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                "serverInfo": {"name": "strict", "version": "1"}}}, sid)
        if m == "notifications/initialized":
            time.sleep(0.05)
            with lock: ready.add(sid)
            return self.send(202)
        if i is None: return self.send(202)
        with lock: ok = sid in ready
        if not ok:
            return self.send(400, {"jsonrpc": "2.0", "id": i, "error": {"code": -32600,
                "message": "Received request before initialization was complete"}})
        if m == "tools/list":
            return self.send(200, {"jsonrpc": "2.0", "id": i, "result": {"tools": [
                {"name": "echo", "inputSchema": {"type": "object"}}]}})
        self.send(200, {"jsonrpc": "2.0", "id": i, "result": {}})
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"#;

/// SPEC §25 (issue 39: a strict HTTP server answered `-32600 Received
/// request before initialization was complete` about one session start in
/// three): `xyctl connect` delivers the client's `notifications/initialized`
/// before it sends the next request. A client that writes both at once,
/// 50 session starts in a row, against [`STRICT_SERVER`]: every
/// `tools/list` gets its result.
#[test]
fn connect_delivers_a_notification_before_the_next_request() {
    use std::io::{BufRead, BufReader, Write};
    let h = Home::new("xyo");
    let p = free_port();
    let script = h.home().join("strict.py");
    std::fs::write(&script, STRICT_SERVER).unwrap();
    h.write_config(
        "web",
        &format!(
            "command \"python3\"\nargs {:?} \"{p}\"\nport {p}\n",
            script.display().to_string()
        ),
    );
    h.run(&["list"]).ok();
    // Listed: it answers MCP.
    wait_for("web listed", Duration::from_secs(60), || {
        h.list()
            .iter()
            .any(|e| e["name"] == "web" && e["tool_count"].is_u64())
    });
    for round in 0..50 {
        let mut child = h
            .cmd(&["connect", "web"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        stdin
            .write_all(
                br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}
"#,
            )
            .unwrap();
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert!(line.contains("\"result\""), "round {round}: {line}");
        // Both at once, as an SDK client writes them.
        stdin
            .write_all(
                b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n\
                  {\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}\n",
            )
            .unwrap();
        let answer = loop {
            line.clear();
            assert!(
                out.read_line(&mut line).unwrap() > 0,
                "round {round}: no answer"
            );
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == 2 {
                break v;
            }
        };
        assert!(answer.get("result").is_some(), "round {round}: {answer}");
        drop(stdin);
        assert!(child.wait().unwrap().success(), "round {round}");
    }
}

/// SPEC §14: `xyctl connect` driven by the official Python SDK's stdio
/// client, against a dual-era HTTP server and a dual-era stdio server (served
/// by xy's bridge): the 2025 handshake (`initialize`, `tools/list`,
/// `tools/call`) and the 2026 way (`server/discover`, `tools/list`,
/// `tools/call`) both round-trip through each.
#[test]
fn connect_round_trips_both_eras_for_the_python_sdk_client() {
    use xy_testbins::interop::{self, Interop};
    let sdk = match interop::python_sdk() {
        Interop::Ready(sdk) => sdk,
        Interop::Skip(skip) => return skip.announce("connect_round_trips_both_eras"),
    };
    // One daemon per server: both offer `echo` and `progress`, and in one
    // daemon the firewall holds back the later lister's as shadowing the
    // other's (SPEC §20), which one depending on which child answers first.
    let (hw, hl) = (Home::new("xyo"), Home::new("xyo"));
    let (p, ps) = (free_port(), free_port());
    let mcp = xy_testbins::locate::testbin("xy-test-mcp");
    hw.write_config(
        "web",
        &format!(
            "command \"{}\"\nargs \"--port\" \"{p}\" \"--era\" \"both\" \"--tools\" \"echo,progress\"\nport {p}\nstop {{\n    grace \"2s\"\n}}\n",
            mcp.display()
        ),
    );
    hl.write_config(
        "local",
        &format!(
            "command \"{}\"\nargs \"--stdio\" \"--era\" \"both\" \"--tools\" \"echo,progress\"\ntransport \"stdio\"\nport {ps}\nstop {{\n    grace \"2s\"\n}}\n",
            mcp.display()
        ),
    );
    let home = |name: &str| if name == "web" { &hw } else { &hl };
    for name in ["web", "local"] {
        let h = home(name);
        h.run(&["list"]).ok();
        wait_for(&format!("{name} running"), Duration::from_secs(30), || {
            h.state_of(name).as_deref() == Some("running")
        });
    }
    for (name, mode, want_version) in [
        ("web", "legacy", "2025-"),
        ("web", "auto", "2026-07-28"),
        ("local", "legacy", "2025-"),
        ("local", "auto", "2026-07-28"),
    ] {
        let (python, args) = sdk.client_command(
            mode,
            "echo",
            &[XYCTL.to_owned(), "connect".into(), name.into()],
        );
        let h = home(name);
        let log = h.home().join(format!(".local/state/xy/logs/{name}.log"));
        let before = std::fs::read_to_string(&log).unwrap_or_default().len();
        // The SDK passes its own environment on to `xyctl connect`.
        let out = Command::new(python)
            .args(&args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", h.home())
            .env("XY_SOCKET", &h.socket)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let run = Run(out);
        run.ok();
        let seen: Value = serde_json::from_str(run.stdout().trim())
            .unwrap_or_else(|e| panic!("{name} {mode}: {e}: {}\n{}", run.stdout(), run.stderr()));
        assert!(
            seen["protocol_version"]
                .as_str()
                .is_some_and(|v| v.starts_with(want_version)),
            "{name} {mode}: {seen}"
        );
        assert_eq!(
            seen["tools"],
            serde_json::json!(["echo", "progress"]),
            "{name} {mode}: {seen}"
        );
        assert_eq!(
            seen["call_text"],
            serde_json::json!(["hello from the python sdk"]),
            "{name} {mode}: {seen}"
        );
        if name == "web" {
            // What reached the HTTP server, as its own request log shows.
            let mut text = String::new();
            wait_for("the server's request log", Duration::from_secs(10), || {
                text = std::fs::read_to_string(&log).unwrap_or_default()[before..].to_owned();
                text.contains("tools/call")
            });
            let first = if mode == "legacy" {
                "POST /mcp initialize 200"
            } else {
                "POST /mcp server/discover 200"
            };
            assert!(text.contains(first), "{mode}: {text}");
            assert!(text.contains("POST /mcp tools/list 200"), "{mode}: {text}");
            if mode == "auto" {
                assert!(!text.contains("initialize"), "{mode}: {text}");
            }
        }
    }
    // One stdio child served every session.
    assert_eq!(hl.state_of("local").as_deref(), Some("running"));
}

/// A stdio MCP server on Python's standard library only: one tool, `where`,
/// answering its `HOME` and working dir.
const WHERE_SERVER: &str = r#"
import json, os, sys
def send(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    msg = json.loads(line)
    m, i = msg.get("method"), msg.get("id")
    if i is None: continue
    if m == "initialize":
        send({"jsonrpc": "2.0", "id": i, "result": {"protocolVersion": msg["params"]["protocolVersion"],
              "capabilities": {"tools": {}}, "serverInfo": {"name": "where", "version": "1"}}})
    elif m == "tools/list":
        send({"jsonrpc": "2.0", "id": i, "result": {"tools": [{"name": "where", "inputSchema": {"type": "object"}}]}})
    elif m == "tools/call":
        text = json.dumps({"home": os.environ.get("HOME"), "cwd": os.getcwd()})
        send({"jsonrpc": "2.0", "id": i, "result": {"content": [{"type": "text", "text": text}]}})
    else:
        send({"jsonrpc": "2.0", "id": i, "result": {}})
"#;

/// SPEC §25, as the README tells a user to add their own server: from the
/// project directory, `xyctl add mine --stdio -- .venv/bin/python
/// server.py`, the starter sandbox included. The venv is readable whichever
/// way its `python` links (a symlink to the interpreter it was made from,
/// or a copy), the relative paths resolve against the project, `add` says
/// `running, 1 tools (0 held back)`, and the server's `HOME` is its private
/// data dir `$XDG_DATA_HOME/xy/data/<name>/`, `0700`.
#[test]
fn a_project_venv_server_added_by_relative_paths_runs_under_the_starter_sandbox() {
    let h = Home::new("xyo");
    let proj = h.home().join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    std::fs::write(proj.join("server.py"), WHERE_SERVER).unwrap();
    let data_home = h.home().join("data");
    for (name, venv, how) in [
        ("linked", ".venv", &[][..]),
        ("copied", ".venvc", &["--copies"][..]),
    ] {
        let made = Command::new("python3")
            .args(["-m", "venv", "--without-pip"])
            .args(how)
            .arg(proj.join(venv))
            .output()
            .unwrap();
        assert!(made.status.success(), "{made:?}");
        let python = format!("{venv}/bin/python");
        let out = h
            .cmd(&[
                "add",
                name,
                "--stdio",
                "--port",
                &free_port().to_string(),
                "--",
                &python,
                "server.py",
            ])
            .env("XDG_DATA_HOME", &data_home)
            .current_dir(&proj)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success()
                && stdout.starts_with(&format!("{name}  running, 1 tools (0 held back)  ")),
            "{name}: {stdout} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = std::fs::read_to_string(h.config_dir().join(format!("{name}.kdl"))).unwrap();
        assert!(text.contains("sandbox {"), "the starter block: {text}");
        let data = data_home.join("xy/data").join(name);
        let mode = std::fs::metadata(&data).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", data.display());
        // Through `connect`: HOME is the data dir, the project the cwd.
        let answer = connect_call(&h, name, "where");
        let seen: Value =
            serde_json::from_str(answer["result"]["content"][0]["text"].as_str().unwrap())
                .unwrap_or_else(|_| panic!("{answer}"));
        assert_eq!(seen["home"], data.display().to_string(), "{answer}");
        assert_eq!(seen["cwd"], proj.display().to_string(), "{answer}");
    }
}

/// One `tools/call` of `tool` through `xyctl connect <name>`: the answer.
fn connect_call(h: &Home, name: &str, tool: &str) -> Value {
    use std::io::{BufRead, BufReader, Write};
    let mut child = h
        .cmd(&["connect", name])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let call = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": tool, "arguments": {}}});
    stdin
        .write_all(
            format!(
                "{}\n{}\n{call}\n",
                r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
            )
            .as_bytes(),
        )
        .unwrap();
    let mut line = String::new();
    let answer = loop {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "no answer");
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["id"] == 2 {
            break v;
        }
    };
    drop(stdin);
    let _ = child.wait();
    answer
}

/// SPEC §25: `import` waits like `add` and says what each server came to:
/// `running, N tools (M held back)`, or a crash loop with its cause (exit
/// 1), never `running` for it.
#[test]
fn import_says_what_each_server_came_to_never_running_for_a_crash_loop() {
    let h = Home::new("xyo");
    let mcp = xy_testbins::locate::testbin("xy-test-mcp");
    let dir = h.home().join(".config/Claude");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("claude_desktop_config.json");
    std::fs::write(
        &file,
        serde_json::json!({"mcpServers": {
            "good": {"command": mcp, "args": ["--stdio"]},
            "bad": {"command": "/bin/sh", "args": ["-c", "echo 'Error: missing API_TOKEN' >&2; exit 1"]},
        }})
        .to_string(),
    )
    .unwrap();
    let r = h.run(&["import", "claude-desktop", "--file", file.to_str().unwrap()]);
    let out = r.stdout();
    assert_eq!(r.code(), 1, "{out} {}", r.stderr());
    assert!(
        out.contains("good: running, 1 tools (0 held back)\n"),
        "{out}"
    );
    assert!(out.contains("bad: crash-looping: "), "{out}");
    assert!(out.contains("Error: missing API_TOKEN"), "{out}");
    assert!(!out.contains("bad: running"), "{out}");
}

/// [`SAVING_SERVER`] with several targets: `save` writes each in turn and
/// reports the first failure in its tool result.
const SAVING_EACH_SERVER: &str = r#"
import json, sys
targets = sys.argv[1:]
def send(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    msg = json.loads(line)
    m, i = msg.get("method"), msg.get("id")
    if i is None: continue
    if m == "initialize":
        send({"jsonrpc": "2.0", "id": i, "result": {"protocolVersion": msg["params"]["protocolVersion"],
              "capabilities": {"tools": {}}, "serverInfo": {"name": "saver", "version": "1"}}})
    elif m == "tools/list":
        send({"jsonrpc": "2.0", "id": i, "result": {"tools": [{"name": "save", "inputSchema": {"type": "object"}}]}})
    elif m == "tools/call":
        try:
            for t in targets:
                with open(t, "w") as f: f.write("x")
            send({"jsonrpc": "2.0", "id": i, "result": {"content": [{"type": "text", "text": "saved"}]}})
        except OSError as e:
            send({"jsonrpc": "2.0", "id": i, "result": {"content": [{"type": "text", "text": "Error: " + str(e)}], "isError": True}})
    else:
        send({"jsonrpc": "2.0", "id": i, "result": {}})
"#;

/// SPEC §25: "the next denial after a fix is explained the same way". A
/// server refused a write to `~/x` is explained with `write "~/x"`; once
/// that line is added (and `reload` restarts it), its next refused write,
/// to `~/y`, is explained with `write "~/y"` — not the old one, and not
/// "none".
#[test]
fn the_next_denial_after_a_fix_is_explained_the_same_way() {
    let h = Home::new("xyo");
    for d in ["x", "y", "proj"] {
        std::fs::create_dir_all(h.home().join(d)).unwrap();
    }
    let script = h.home().join("proj/saver.py");
    std::fs::write(&script, SAVING_EACH_SERVER).unwrap();
    let p = free_port();
    let config = |extra: &str| {
        format!(
            "command \"/usr/bin/python3\"\nargs {:?} {:?} {:?}\ntransport \"stdio\"\nport {p}\n\
             sandbox {{\n    read \"~/proj\"\n    read \"~/x\"\n    read \"~/y\"\n{extra}}}\n",
            script.display().to_string(),
            h.home().join("x/a.json").display().to_string(),
            h.home().join("y/b.json").display().to_string(),
        )
    };
    h.write_config("mine", &config(""));
    h.run(&["list"]).ok();
    let explained = |path: &str, fix: &str| {
        let answer = connect_call(&h, "mine", "save");
        assert_eq!(answer["result"]["isError"], true, "{answer}");
        let mut why = String::new();
        wait_for(
            &format!("the denial of {path}"),
            Duration::from_secs(20),
            || {
                let st: Value =
                    serde_json::from_str(&h.run(&["status", "mine", "--json"]).ok()).unwrap();
                why = st["explain"].as_str().unwrap_or_default().to_owned();
                why.contains(path)
            },
        );
        assert!(
            why.starts_with(&format!(
                "sandbox: write to {path} denied (not under sandbox.write)"
            )),
            "{why}"
        );
        assert!(
            why.contains(&format!("fix: add `write {fix:?}` to the sandbox block")),
            "{why}"
        );
    };
    wait_for("mine listed", Duration::from_secs(60), || {
        h.list()
            .iter()
            .any(|e| e["name"] == "mine" && e["tool_count"].is_u64())
    });
    explained("~/x/a.json", "~/x");
    // The fix the line said, then the next denial.
    h.write_config("mine", &config("    write \"~/x\"\n"));
    let before = h.list()[0]["pid"].clone();
    h.run(&["reload"]).ok();
    wait_for("mine restarted and listed", Duration::from_secs(60), || {
        h.list().iter().any(|e| {
            e["name"] == "mine"
                && e["pid"] != before
                && e["pid"].is_u64()
                && e["tool_count"].is_u64()
        })
    });
    explained("~/y/b.json", "~/y");
    assert!(h.home().join("x/a.json").exists());
}

/// SPEC §25: a Node server that dies on a refused write is explained by
/// `add` at once — the path, the rule and the line to add — and with no
/// sandbox in the way, a Node stack's `Error:` line is quoted, never the
/// `}` of the error's properties or the `Node.js v…` trailer.
#[test]
#[allow(clippy::print_stderr)] // the loud skip without node
fn a_node_crash_is_explained_by_its_error_line_or_the_denial() {
    let h = Home::new("xyo");
    if Command::new("node").arg("--version").output().is_err() {
        eprintln!("SKIPPED a_node_crash_is_explained_by_its_error_line_or_the_denial: no node");
        return;
    }
    let proj = h.home().join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    std::fs::create_dir_all(h.home().join("notes")).unwrap();
    std::fs::write(
        proj.join("writer.js"),
        "require('fs').writeFileSync(process.argv[2], 'x');\nsetInterval(() => {}, 1000);\n",
    )
    .unwrap();
    std::fs::write(
        proj.join("thrower.js"),
        "const e = new Error('missing API_TOKEN: set it in the env block');\n\
         Object.assign(e, { code: 'ENOTOKEN', hint: 'see the README' });\nthrow e;\n",
    )
    .unwrap();
    let target = h.home().join("notes/db.json");
    let run = |args: &[&str]| h.cmd(args).current_dir(&proj).output().unwrap();
    let out = run(&[
        "add",
        "writer",
        "--stdio",
        "--port",
        &free_port().to_string(),
        "--",
        "node",
        "writer.js",
        target.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.starts_with("writer  crash-looping: "), "{stdout}");
    assert!(
        stdout.contains("sandbox: write to ~/notes/db.json denied (not under sandbox.write)")
            && stdout.contains("fix: add `write \"~/notes\"` to the sandbox block"),
        "{stdout}"
    );
    let out = run(&[
        "add",
        "thrower",
        "--stdio",
        "--no-sandbox",
        "--port",
        &free_port().to_string(),
        "--",
        "node",
        "thrower.js",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("Error: missing API_TOKEN: set it in the env block"),
        "{stdout}"
    );
    assert!(!stdout.contains("Node.js v"), "{stdout}");
    assert!(!stdout.contains("last stderr: }"), "{stdout}");
}

/// A stdio server that answers `initialize` and `tools/list`, then dies a
/// moment later: a crash loop once it is restarted, whatever it listed.
const LIST_THEN_DIE: &str = r#"
import json, sys, threading, os
def send(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
def die():
    sys.stderr.write("Error: lost the database connection\n"); sys.stderr.flush()
    os._exit(1)
for line in sys.stdin:
    msg = json.loads(line)
    m, i = msg.get("method"), msg.get("id")
    if i is None: continue
    if m == "initialize":
        send({"jsonrpc": "2.0", "id": i, "result": {"protocolVersion": msg["params"]["protocolVersion"],
              "capabilities": {"tools": {}}, "serverInfo": {"name": "flaky", "version": "1"}}})
    elif m == "tools/list":
        send({"jsonrpc": "2.0", "id": i, "result": {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}})
        threading.Timer(0.5, die).start()
    else:
        send({"jsonrpc": "2.0", "id": i, "result": {}})
"#;

/// SPEC §25: "never `running` for a server that is crash-looping" — also
/// one that lists its tools and dies half a second later (D324).
#[test]
fn add_never_says_running_for_a_server_that_lists_and_then_dies() {
    let h = Home::new("xyo");
    let proj = h.home().join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    std::fs::write(proj.join("flaky.py"), LIST_THEN_DIE).unwrap();
    let out = h
        .cmd(&[
            "add",
            "flaky",
            "--stdio",
            "--port",
            &free_port().to_string(),
            "--",
            "/usr/bin/python3",
            "flaky.py",
        ])
        .current_dir(&proj)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.starts_with("flaky  crash-looping: "), "{stdout}");
    assert!(!stdout.contains("running"), "{stdout}");
    assert!(stdout.contains("lost the database connection"), "{stdout}");
}
