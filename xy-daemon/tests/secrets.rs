//! SPEC §16 end to end: secrets reach the child and never the log file, the
//! tail, a live follower, `status`, `daemon.log` or the run record; a failed
//! lookup is `-32006` naming the secret; env-file precedence; hooks and
//! notifications.

use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::helper::*;

/// The value, long enough to be redacted; never appears in any output.
const SECRET: &str = "tok-7Hq2-Zr9v-XXX";

/// A file secret (the value in a file outside the config) and a child that
/// prints it whole, then split across two writes, then its env, and sleeps.
fn printer_config(dir: &Path, port: u16) -> String {
    let secret_file = dir.join("token.txt");
    std::fs::write(&secret_file, format!("{SECRET}\n")).unwrap();
    let script = "printf 'whole %s\\n' \"$TOKEN\"; \
                  a=$(printf %s \"$TOKEN\" | cut -c1-6); b=$(printf %s \"$TOKEN\" | cut -c7-); \
                  printf 'split %s' \"$a\"; sleep 0.3; printf '%s end\\n' \"$b\"; \
                  printf 'stderr %s\\n' \"$TOKEN\" >&2; \
                  printf 'env A=%s B=%s C=%s\\n' \"$A\" \"$B\" \"$C\"; exec sleep 60";
    format!(
        "command \"/bin/sh\"\nargs \"-c\" {script:?}\nport {port}\nenv-file \"one.env\"\n\
         env-file \"two.env\"\nenv {{\n    C \"block\"\n}}\nsecrets {{\n    TOKEN file=\"{}\"\n}}\n\
         stop {{\n    grace \"2s\"\n}}\n",
        secret_file.display()
    )
}

fn assert_redacted(what: &str, text: &str) {
    assert!(!text.contains(SECRET), "{what} shows the secret:\n{text}");
    // Neither half of the split write may be there alone either.
    assert!(!text.contains("tok-7Hq2-Zr9v"), "{what}:\n{text}");
}

#[test]
fn secret_values_are_redacted_everywhere_and_env_precedence_holds() {
    let env = Env::new();
    let dir = env.config_dir();
    std::fs::write(dir.join("one.env"), "A=one\nB=one\nC=one\n").unwrap();
    std::fs::write(dir.join("two.env"), "# later file wins\nexport B=\"two\"\n").unwrap();
    env.write_config("printer", &printer_config(env.root.path(), port(1)));
    let d = TestDaemon::start_in(env);
    let pid = d.running_pid("printer");

    let want_end = |lines: &[String]| lines.iter().any(|l| l.starts_with("env "));
    let tail = wait_some("the printer's output", DEADLINE, || {
        let lines = log_lines(&d, "printer", json!({"tail": 100}));
        want_end(&lines).then_some(lines)
    });
    let text = tail.join("\n");
    assert_redacted("logs --tail", &text);
    assert!(text.contains("whole [redacted:TOKEN]"), "{text}");
    assert!(text.contains("split [redacted:TOKEN] end"), "{text}");
    assert!(text.contains("stderr [redacted:TOKEN]"), "{text}");
    // daemon env < env files in order < env block.
    assert!(text.contains("env A=one B=two C=block"), "{text}");

    // A live follower sees the next run's output redacted too.
    let mut follower = d.client();
    let id = follower.request(
        "logs",
        Some(json!({"name": "printer", "follow": true, "tail": 0})),
    );
    assert_eq!(follower.recv()["id"], id);
    d.result("restart", Some(json!({"name": "printer"})));
    let mut live = Vec::new();
    while !want_end(&live) {
        let v = follower.recv();
        if v["method"] == "log" {
            live.push(v["params"]["line"].as_str().unwrap().to_owned());
        }
    }
    let live = live.join("\n");
    assert_redacted("a live follower", &live);
    assert!(live.contains("split [redacted:TOKEN] end"), "{live}");

    // The run record of the running child, status, the log file, daemon.log.
    let _ = pid;
    let record =
        std::fs::read_to_string(d.env.state_dir().join("run/printer.json")).unwrap_or_default();
    assert_redacted("the run record", &record);
    let status = d.result("status", Some(json!({"name": "printer"})));
    assert_eq!(
        status["secrets"],
        json!([{"name": "TOKEN", "source": "file"}])
    );
    assert_redacted("status", &status.to_string());
    let file = std::fs::read_to_string(d.env.state_dir().join("logs/printer.log")).unwrap();
    assert!(file.contains("[out] whole [redacted:TOKEN]"), "{file}");
    assert_redacted("the log file", &file);
    assert_redacted("daemon.log", &d.env.daemon_log());
    assert_redacted("xyd's stderr", &d.stderr());
}

#[test]
fn a_failing_command_secret_fails_the_spawn_naming_it_and_not_its_output() {
    let kdl = format!(
        "command \"{}\"\nport {}\nsecrets {{\n    API_KEY command=\"/bin/sh\" \"-c\" \
         \"echo leaked-lookup-output; echo more-leak >&2; exit 7\"\n}}\n",
        testbin("xy-test-sleep").display(),
        port(2)
    );
    let d = TestDaemon::start(&[("locked", kdl)]);
    wait_for("locked failed", DEADLINE, || {
        d.entry("locked")["state"] == "failed"
    });
    let err = d
        .client()
        .error("start", Some(json!({"name": "locked"})), -32006);
    let text = err.to_string();
    assert!(text.contains("API_KEY"), "{text}");
    assert!(text.contains("exited with code 7"), "{text}");
    assert!(!text.contains("leak"), "{text}");
    let f = &err["data"]["failures"][0];
    assert_eq!(f["secret"]["name"], "API_KEY");
    assert_eq!(f["secret"]["kind"], "command");
    assert_eq!(f["secret"]["exit_code"], 7);
    let status = d.result("status", Some(json!({"name": "locked"})));
    assert!(!status.to_string().contains("leak"), "{status}");
    assert!(!d.env.daemon_log().contains("leak"));
}

/// A failing child with one hook that appends its `XY_*` variables to `out`.
fn failing_with_hook(port: u16, hook: &str, extra: &str) -> String {
    format!(
        "command \"{}\"\nargs \"--code\" \"3\"\nport {port}\nrestart {{\n    \
         backoff-initial \"50ms\"\n    max-retries-per-minute 1\n}}\nhooks {{\n    \
         on-failed \"/bin/sh\" \"-c\" {hook:?}\n}}\n{extra}",
        testbin("xy-test-exit").display()
    )
}

#[test]
fn on_failed_runs_once_with_the_xy_variables() {
    let env = Env::new();
    let out = env.root.path().join("hook.out");
    let hook = format!(
        "printf '%s|%s|%s|%s|%s\\n' \"$XY_SERVER\" \"$XY_EVENT\" \"$XY_EXIT_CODE\" \"$XY_URL\" \
         \"$XY_REASON\" >> {}",
        out.display()
    );
    env.write_config("crashy", &failing_with_hook(port(3), &hook, ""));
    let d = TestDaemon::start_in(env);
    let line = wait_some("the on-failed hook", DEADLINE, || {
        std::fs::read_to_string(&out)
            .ok()
            .filter(|t| t.ends_with('\n'))
    });
    assert_eq!(d.entry("crashy")["state"], "failed");
    let fields: Vec<&str> = line.trim_end().split('|').collect();
    assert_eq!(
        fields[..4],
        [
            "crashy",
            "failed",
            "3",
            &format!("http://127.0.0.1:{}/mcp", port(3))
        ],
        "{line}"
    );
    assert!(fields[4].contains("restart limit reached"), "{line}");

    // Failing again within the minute: the hook is not run again.
    d.result("start", Some(json!({"name": "crashy"})));
    wait_for("the second failure", DEADLINE, || {
        d.env.daemon_log().contains("fired less than a minute ago")
    });
    assert_eq!(std::fs::read_to_string(&out).unwrap().lines().count(), 1);
}

#[test]
fn a_hanging_hook_is_killed_after_10s_while_others_are_supervised() {
    let env = Env::new();
    let pidfile = env.root.path().join("hook.pid");
    let hook = format!("echo $$ > {}; exec sleep 60", pidfile.display());
    env.write_config("crashy", &failing_with_hook(port(4), &hook, ""));
    env.write_config("steady", &sleep_config(port(5), 50));
    let d = TestDaemon::start_in(env);
    let hook_pid: i32 = wait_some("the hook to start", DEADLINE, || {
        std::fs::read_to_string(&pidfile).ok()?.trim().parse().ok()
    });
    let started = Instant::now();
    // Supervision goes on meanwhile: another server restarts promptly.
    let before = d.running_pid("steady");
    let t = Instant::now();
    d.result("restart", Some(json!({"name": "steady"})));
    assert_ne!(d.running_pid("steady"), before);
    assert!(pid_alive(hook_pid), "the hook should still run");
    assert!(t.elapsed() < Duration::from_secs(8), "restart was delayed");
    wait_for("the hook to be killed", Duration::from_secs(40), || {
        !pid_alive(hook_pid)
    });
    let ran = started.elapsed();
    assert!(ran >= Duration::from_secs(8), "killed too early: {ran:?}");
    // daemon.log is written by a background writer: poll, don't race it.
    wait_for("the hook kill in daemon.log", DEADLINE, || {
        d.env.daemon_log().contains("killing its process group")
    });
}

#[test]
fn notify_calls_notify_send_on_path() {
    let env = Env::new();
    let bin = env.root.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let args_out = env.root.path().join("notify.args");
    let fake = bin.join("notify-send");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done >> {}\n",
            args_out.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let kdl = failing_with_hook(port(6), "true", "notify #true\n");
    env.write_config("crashy", &kdl);
    let mut path = OsString::from(&bin);
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    let d = TestDaemon::start_in_with(env, &[("PATH", path)]);
    let got = wait_some("notify-send to be called", DEADLINE, || {
        std::fs::read_to_string(&args_out)
            .ok()
            .filter(|t| t.lines().count() >= 3)
    });
    let lines: Vec<&str> = got.lines().collect();
    assert_eq!(lines[..2], ["--app-name=xy", "xy: crashy failed"], "{got}");
    assert!(lines[2].contains("restart limit reached"), "{got}");
    drop(d);
}

/// SPEC §16 `keychain=`: the lookup runs `security find-generic-password -s
/// SERVICE -a ACCOUNT -w` (a fake `security` on PATH here, as on a Mac
/// without the item); the child gets the value, the log shows only
/// `[redacted:NAME]`; a missing item fails the spawn with `-32006` naming the
/// secret and its source, never the tool's output.
#[test]
fn keychain_secrets_use_security_and_a_missing_item_fails_the_spawn() {
    let env = Env::new();
    let bin = env.root.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let fake = bin.join("security");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\n\
             if [ \"$*\" = \"find-generic-password -s xy-demo -a me -w\" ]; then echo '{SECRET}'; exit 0; fi\n\
             echo \"security: SecKeychainSearchCopyNext: leaked-tool-output $*\" >&2\nexit 44\n"
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let child = "printf 'got %s (%s chars)\\n' \"$TOKEN\" \"${#TOKEN}\"; exec sleep 60";
    env.write_config(
        "kc",
        &format!(
            "command \"/bin/sh\"\nargs \"-c\" {child:?}\nport {}\nsecrets {{\n    TOKEN keychain=\"xy-demo\" account=\"me\"\n}}\nstop {{\n    grace \"2s\"\n}}\n",
            port(7)
        ),
    );
    env.write_config(
        "missing",
        &format!(
            "command \"{}\"\nport {}\nsecrets {{\n    TOKEN keychain=\"xy-demo\" account=\"nobody\"\n}}\n",
            testbin("xy-test-sleep").display(),
            port(8)
        ),
    );
    let mut path = OsString::from(&bin);
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    let d = TestDaemon::start_in_with(env, &[("PATH", path), ("XY_TEST_SECURITY", "1".into())]);
    let line = wait_some("kc's line", DEADLINE, || {
        log_lines(&d, "kc", json!({"tail": 10}))
            .into_iter()
            .find(|l| l.starts_with("got "))
    });
    assert_eq!(
        line,
        format!("got [redacted:TOKEN] ({} chars)", SECRET.len()),
        "the child got the keychain value; the log shows only its name"
    );
    let status = d.result("status", Some(json!({"name": "kc"})));
    assert_redacted("status", &status.to_string());
    assert_eq!(status["secrets"][0]["name"], "TOKEN", "{status}");
    assert_eq!(status["secrets"][0]["source"], "keychain", "{status}");

    wait_for("missing failed", DEADLINE, || {
        d.entry("missing")["state"] == "failed"
    });
    let err = d
        .client()
        .error("start", Some(json!({"name": "missing"})), -32006);
    let text = err.to_string();
    assert!(text.contains("TOKEN"), "{text}");
    assert!(!text.contains("leaked-tool-output"), "{text}");
    let f = &err["data"]["failures"][0];
    assert_eq!(f["secret"]["name"], "TOKEN", "{err}");
    assert_eq!(f["secret"]["kind"], "keychain", "{err}");
    assert!(!d.env.daemon_log().contains("leaked-tool-output"));
    assert_redacted("daemon.log", &d.env.daemon_log());
}

// Issue 26: a probe's JSON-RPC error text went unredacted into daemon.log,
// `status` (health history, the explanation) and `health` events.
#[test]
fn a_probe_error_echoing_a_secret_is_redacted_everywhere() {
    let env = Env::new();
    let secret_file = env.root.path().join("token.txt");
    std::fs::write(&secret_file, format!("{SECRET}\n")).unwrap();
    let port = free_port();
    env.write_config(
        "echoer",
        &format!(
            "command \"{}\"\nargs \"--port\" \"{port}\" \"--fault\" \"rpc-error\" \"--echo-env\" \"TOKEN\"\n\
             port {port}\nsecrets {{\n    TOKEN file=\"{}\"\n}}\nstop {{\n    grace \"2s\"\n}}\n\
             health {{\n    mcp \"/mcp\"\n    interval \"100ms\"\n    timeout \"1s\"\n    failures 2\n    start-period \"0s\"\n}}\n",
            testbin("xy-test-mcp").display(),
            secret_file.display()
        ),
    );
    let d = TestDaemon::start_in(env);
    let mut events = d.client();
    events.request("events", Some(json!({"names": ["echoer"]})));
    assert!(events.recv()["result"]["subscription_id"].is_u64());
    d.result("restart", Some(json!({"name": "echoer"})));
    let unhealthy = loop {
        let v = events.recv();
        if v["params"]["kind"] == "health" && v["params"]["to"] == "unhealthy" {
            break v["params"].clone();
        }
    };
    let reason = unhealthy["reason"].as_str().unwrap_or_default().to_owned();
    assert_redacted("the health event", &unhealthy.to_string());
    assert!(
        reason.contains("upstream refused the token [redacted:TOKEN]"),
        "{reason}"
    );
    let status = d.result("status", Some(json!({"name": "echoer"})));
    assert!(
        status.to_string().contains("[redacted:TOKEN]"),
        "the probe error is in status: {status}"
    );
    assert_redacted("status", &status.to_string());
    let log = d.env.daemon_log();
    assert!(log.contains("[redacted:TOKEN]"), "{log}");
    assert_redacted("daemon.log", &log);
    assert_redacted("xyd's stderr", &d.stderr());
}
