//! `xyctl service` end to end on any OS: the real `xyctl` binary against fake
//! `launchctl` and `systemctl` scripts (first on PATH) that record their
//! command lines and keep a loaded/active flag, in a temporary HOME.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use launchd::{KeepAliveType, Launchd};

const XYCTL: &str = env!("CARGO_BIN_EXE_xyctl");
const LABEL: &str = "se.aceofba.xy-test";

const FAKE_LAUNCHCTL: &str = r#"#!/bin/sh
printf 'launchctl %s\n' "$*" >> "@DIR@/calls"
loaded="@DIR@/launchd-loaded"
case "$1" in
print)
    if [ -e "$loaded" ]; then
        printf '%s = {\n\tactive count = 1\n\tstate = running\n\tjetsam coalition = {\n\t\tstate = active\n\t}\n\tpid = 4242\n\tlast exit code = (never exited)\n}\n' "$2"
        exit 0
    fi
    echo "Could not find service \"${2##*/}\" in domain for user gui: 501" >&2
    exit 113 ;;
bootstrap)
    if [ -e "@DIR@/fail-bootstrap" ] || [ -e "$loaded" ]; then
        echo "Bootstrap failed: 5: Input/output error" >&2
        exit 5
    fi
    [ -f "$3" ] || exit 2
    touch "$loaded" ;;
bootout)
    if [ ! -e "$loaded" ]; then echo "Boot-out failed: 3: No such process" >&2; exit 3; fi
    rm -f "$loaded" ;;
kickstart)
    [ -e "$loaded" ] || exit 113 ;;
*)
    exit 64 ;;
esac
"#;

const FAKE_SYSTEMCTL: &str = r#"#!/bin/sh
printf 'systemctl %s\n' "$*" >> "@DIR@/calls"
if [ -e "@DIR@/no-bus" ]; then
    echo "Failed to connect to bus: No medium found" >&2
    exit 1
fi
active="@DIR@/systemd-active"
[ "$1" = --user ] || exit 64
shift
case "$1" in
daemon-reload) ;;
enable) [ "$2" = --now ] && touch "$active" ;;
disable) rm -f "$active" ;;
start|restart) touch "$active" ;;
stop) rm -f "$active" ;;
show)
    if [ -e "$active" ]; then
        printf 'MainPID=4242\nExecMainStatus=0\nActiveState=active\nSubState=running\n'
    else
        printf 'MainPID=0\nExecMainStatus=1\nActiveState=inactive\nSubState=dead\n'
    fi ;;
*) exit 64 ;;
esac
exit 0
"#;

/// A temporary HOME with fake service managers and a fake `xyd` in `bin/`.
struct Sandbox {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    backend: &'static str,
}

fn write_exe(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

impl Sandbox {
    fn new(backend: &'static str) -> Sandbox {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let dir = root.display().to_string();
        write_exe(
            &root.join("bin/launchctl"),
            &FAKE_LAUNCHCTL.replace("@DIR@", &dir),
        );
        write_exe(
            &root.join("bin/systemctl"),
            &FAKE_SYSTEMCTL.replace("@DIR@", &dir),
        );
        write_exe(&root.join("bin/xyd"), "#!/bin/sh\nexit 0\n");
        fs::create_dir_all(root.join("home")).unwrap();
        Sandbox {
            _tmp: tmp,
            root,
            backend,
        }
    }

    fn home(&self) -> PathBuf {
        self.root.join("home")
    }

    fn xyd(&self) -> PathBuf {
        self.root.join("bin/xyd")
    }

    /// The PATH xyctl runs with: the fakes first.
    fn path(&self, extra: &str) -> String {
        format!("{}/bin:{extra}:/usr/bin:/bin", self.root.display())
    }

    fn xyctl_with_path(&self, args: &[&str], path: &str) -> Output {
        Command::new(XYCTL)
            .arg("service")
            .args(args)
            .env("HOME", self.home())
            .env("PATH", path)
            .env("XY_SERVICE_BACKEND", self.backend)
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("XDG_STATE_HOME")
            .env_remove("XDG_RUNTIME_DIR")
            .output()
            .unwrap()
    }

    fn xyctl(&self, args: &[&str]) -> Output {
        self.xyctl_with_path(args, &self.path("/opt/tools/bin"))
    }

    /// The command lines recorded since the last call.
    fn calls(&self) -> Vec<String> {
        let path = self.root.join("calls");
        let text = fs::read_to_string(&path).unwrap_or_default();
        let _ = fs::remove_file(&path);
        text.lines().map(str::to_owned).collect()
    }

    fn plist(&self) -> PathBuf {
        self.home()
            .join(format!("Library/LaunchAgents/{LABEL}.plist"))
    }

    fn unit(&self) -> PathBuf {
        self.home().join(".config/systemd/user/xyd.service")
    }

    fn log(&self) -> PathBuf {
        self.home().join(".local/state/xy/logs/launchd.log")
    }
}

#[track_caller]
fn ok(out: &Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

#[track_caller]
fn fails(out: &Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(1),
        "stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stderr.clone()).unwrap()
}

fn uid() -> u32 {
    nix::unistd::getuid().as_raw()
}

fn expected_plist(sb: &Sandbox, program: &Path, path: &str) -> Launchd {
    let log = sb.log();
    Launchd::default()
        .with_label(LABEL)
        .with_program_arguments(vec![program.display().to_string()])
        .with_environment_variables([("PATH".to_owned(), path.to_owned())].into())
        .with_working_directory(sb.home())
        .unwrap()
        .with_standard_out_path(&log)
        .unwrap()
        .with_standard_error_path(&log)
        .unwrap()
        .with_run_at_load(true)
        .with_keep_alive(KeepAliveType::Enabled(true))
}

fn expected_unit(program: &Path, path: &str) -> String {
    format!(
        "# Written by `xyctl service install`; re-run it with --force to update.\n\
         [Unit]\n\
         Description=xy MCP server supervisor\n\
         \n\
         [Service]\n\
         ExecStart={}\n\
         Environment=PATH={path}\n\
         Restart=always\n\
         RestartSec=2\n\
         \n\
         [Install]\n\
         WantedBy=default.target\n",
        program.display()
    )
}

#[test]
fn launchd_full_cycle() {
    let sb = Sandbox::new("launchd");
    let (uid, xyd) = (uid(), sb.xyd());
    let print = format!("launchctl print gui/{uid}/{LABEL}");
    let bootstrap = format!("launchctl bootstrap gui/{uid} {}", sb.plist().display());
    let bootout = format!("launchctl bootout gui/{uid}/{LABEL}");
    let xyd_s = xyd.to_str().unwrap();

    let out = ok(&sb.xyctl(&["install", "--label", LABEL, "--xyd", xyd_s]));
    assert!(
        out.starts_with(&format!(
            "installed {LABEL} (~/Library/LaunchAgents/{LABEL}.plist)\n"
        )),
        "{out}"
    );
    assert_eq!(sb.calls(), [print.clone(), bootstrap.clone()]);
    let plist = Launchd::from_bytes(&fs::read(sb.plist()).unwrap()).unwrap();
    assert_eq!(plist, expected_plist(&sb, &xyd, &sb.path("/opt/tools/bin")));
    assert!(sb.log().parent().unwrap().is_dir());

    let out = ok(&sb.xyctl(&["status", "--label", LABEL]));
    assert!(
        out.starts_with(&format!("  agent:   {LABEL} (launchd, gui/{uid})\n")),
        "{out}"
    );
    assert!(out.contains("  state:   running (pid 4242)\n"), "{out}");
    assert!(out.contains(&format!("  program: {xyd_s}\n")), "{out}");
    assert!(
        out.contains(&format!(
            "  path:    {} (snapshotted ",
            sb.path("/opt/tools/bin")
        )),
        "{out}"
    );
    assert!(
        out.contains("  log:     ~/.local/state/xy/logs/launchd.log\n"),
        "{out}"
    );
    assert_eq!(sb.calls(), [print.as_str()]);

    let out = ok(&sb.xyctl(&["stop", "--label", LABEL]));
    assert!(out.contains("starts again at next login"), "{out}");
    assert_eq!(sb.calls(), [print.clone(), bootout.clone(), print.clone()]);
    assert!(sb.plist().exists(), "stop keeps the plist");
    ok(&sb.xyctl(&["stop", "--label", LABEL]));
    assert_eq!(
        sb.calls(),
        [print.as_str()],
        "stopping a stopped agent does nothing"
    );

    fs::write(sb.log(), "xyd: config error in insikt.kdl\n").unwrap();
    let out = ok(&sb.xyctl(&["status", "--label", LABEL]));
    assert!(out.contains("  state:   stopped (not loaded)\n"), "{out}");
    assert!(out.contains("last lines of ~/.local/state/xy/logs/launchd.log:\n    xyd: config error in insikt.kdl\n"), "{out}");
    sb.calls();

    ok(&sb.xyctl(&["start", "--label", LABEL]));
    assert_eq!(sb.calls(), [print.clone(), bootstrap.clone()]);
    ok(&sb.xyctl(&["start", "--label", LABEL]));
    assert_eq!(
        sb.calls(),
        [
            print.clone(),
            format!("launchctl kickstart gui/{uid}/{LABEL}")
        ]
    );

    let json: serde_json::Value =
        serde_json::from_str(&ok(&sb.xyctl(&["status", "--label", LABEL, "--json"]))).unwrap();
    assert_eq!(json["state"], "running");
    assert_eq!(json["pid"], 4242);
    assert_eq!(json["program"], xyd_s);
    sb.calls();

    let out = ok(&sb.xyctl(&["uninstall", "--label", LABEL]));
    assert!(out.starts_with(&format!("uninstalled {LABEL}")), "{out}");
    assert_eq!(sb.calls(), [print.clone(), bootout, print.clone()]);
    assert!(!sb.plist().exists());

    assert_eq!(
        ok(&sb.xyctl(&["uninstall", "--label", LABEL])),
        "not installed\n"
    );
    assert_eq!(sb.calls(), [print.as_str()]);
    let out = ok(&sb.xyctl(&["status", "--label", LABEL]));
    assert!(out.contains("  state:   not installed\n"), "{out}");
}

#[test]
fn launchd_install_needs_force_and_force_resnapshots() {
    let sb = Sandbox::new("launchd");
    let uid = uid();
    let xyd = sb.xyd();
    ok(&sb.xyctl(&["install", "--label", LABEL, "--xyd", xyd.to_str().unwrap()]));
    sb.calls();
    let before = fs::read(sb.plist()).unwrap();

    let err = fails(&sb.xyctl(&["install", "--label", LABEL, "--xyd", xyd.to_str().unwrap()]));
    assert!(
        err.contains("already installed") && err.contains("--force"),
        "{err}"
    );
    assert!(sb.calls().is_empty());
    assert_eq!(fs::read(sb.plist()).unwrap(), before);

    let xyd2 = sb.root.join("other/xyd");
    write_exe(&xyd2, "#!/bin/sh\n");
    let new_path = sb.path("/opt/new-toolchain/bin");
    let out = ok(&sb.xyctl_with_path(
        &[
            "install",
            "--force",
            "--label",
            LABEL,
            "--xyd",
            xyd2.to_str().unwrap(),
        ],
        &new_path,
    ));
    assert!(out.starts_with("reinstalled "), "{out}");
    let print = format!("launchctl print gui/{uid}/{LABEL}");
    assert_eq!(
        sb.calls(),
        [
            print.clone(),
            format!("launchctl bootout gui/{uid}/{LABEL}"),
            print,
            format!("launchctl bootstrap gui/{uid} {}", sb.plist().display()),
        ]
    );
    let plist = Launchd::from_bytes(&fs::read(sb.plist()).unwrap()).unwrap();
    assert_eq!(plist, expected_plist(&sb, &xyd2, &new_path));
}

#[test]
fn launchctl_failure_is_exit_1_with_its_message() {
    let sb = Sandbox::new("launchd");
    fs::write(sb.root.join("fail-bootstrap"), "").unwrap();
    let err = fails(&sb.xyctl(&[
        "install",
        "--label",
        LABEL,
        "--xyd",
        sb.xyd().to_str().unwrap(),
    ]));
    assert!(err.contains("launchctl bootstrap"), "{err}");
    assert!(
        err.contains("Bootstrap failed: 5: Input/output error"),
        "{err}"
    );
    // The plist launchctl would not load is not left behind as "installed".
    assert!(!sb.plist().exists());
}

#[test]
fn systemd_full_cycle() {
    let sb = Sandbox::new("systemd");
    let xyd = sb.xyd();
    let xyd_s = xyd.to_str().unwrap();
    let show = "systemctl --user show -p ActiveState,SubState,MainPID,ExecMainStatus xyd.service";

    let out = ok(&sb.xyctl(&["install", "--xyd", xyd_s]));
    assert!(
        out.starts_with("installed xyd.service (~/.config/systemd/user/xyd.service)\n"),
        "{out}"
    );
    assert_eq!(
        sb.calls(),
        [
            "systemctl --user daemon-reload",
            "systemctl --user enable --now xyd.service"
        ]
    );
    assert_eq!(
        fs::read_to_string(sb.unit()).unwrap(),
        expected_unit(&xyd, &sb.path("/opt/tools/bin"))
    );

    let out = ok(&sb.xyctl(&["status"]));
    assert!(out.starts_with("  service: xyd.service (systemd --user)\n  unit:    ~/.config/systemd/user/xyd.service\n"), "{out}");
    assert!(out.contains("  state:   running (pid 4242)\n"), "{out}");
    assert!(out.contains(&format!("  program: {xyd_s}\n")), "{out}");
    assert!(
        out.contains("  log:     journalctl --user -u xyd.service\n"),
        "{out}"
    );
    assert_eq!(sb.calls(), [show]);

    ok(&sb.xyctl(&["stop"]));
    assert_eq!(sb.calls(), ["systemctl --user stop xyd.service"]);
    assert!(sb.unit().exists());
    let out = ok(&sb.xyctl(&["status"]));
    assert!(
        out.contains("  state:   stopped (inactive/dead, last exit 1)\n"),
        "{out}"
    );
    sb.calls();

    ok(&sb.xyctl(&["start"]));
    assert_eq!(sb.calls(), ["systemctl --user start xyd.service"]);

    let out = ok(&sb.xyctl(&["uninstall"]));
    assert!(out.starts_with("uninstalled xyd.service"), "{out}");
    assert_eq!(
        sb.calls(),
        [
            "systemctl --user disable --now xyd.service",
            "systemctl --user daemon-reload"
        ]
    );
    assert!(!sb.unit().exists());

    assert_eq!(ok(&sb.xyctl(&["uninstall"])), "not installed\n");
    assert!(sb.calls().is_empty());
}

#[test]
fn systemd_install_needs_force_and_force_resnapshots() {
    let sb = Sandbox::new("systemd");
    let xyd = sb.xyd();
    ok(&sb.xyctl(&["install", "--xyd", xyd.to_str().unwrap()]));
    sb.calls();
    let err = fails(&sb.xyctl(&["install", "--xyd", xyd.to_str().unwrap()]));
    assert!(
        err.contains("already installed") && err.contains("--force"),
        "{err}"
    );
    assert!(sb.calls().is_empty());

    let new_path = sb.path("/opt/new toolchain/bin");
    ok(&sb.xyctl_with_path(
        &["install", "--force", "--xyd", xyd.to_str().unwrap()],
        &new_path,
    ));
    assert_eq!(
        sb.calls(),
        [
            "systemctl --user daemon-reload",
            "systemctl --user enable xyd.service",
            "systemctl --user restart xyd.service"
        ]
    );
    // A blank in PATH makes systemd need quotes around the assignment.
    let want = expected_unit(&xyd, &new_path).replace(
        &format!("Environment=PATH={new_path}\n"),
        &format!("Environment=\"PATH={new_path}\"\n"),
    );
    assert_eq!(fs::read_to_string(sb.unit()).unwrap(), want);
    let out = ok(&sb.xyctl(&["status"]));
    assert!(
        out.contains(&format!("  path:    {new_path} (snapshotted ")),
        "{out}"
    );
}

/// An installed service whose manager cannot be used (no user bus, as in
/// an ssh session): detect-or-spawn warns and starts `xyd` itself, and
/// `daemon stop` warns and still stops it.
#[test]
fn an_unusable_service_manager_falls_back_to_running_xyd_directly() {
    let sb = Sandbox::new("systemd");
    let xyd = xy_testbins::locate::xyd();
    ok(&sb.xyctl(&["install", "--xyd", xyd.to_str().unwrap()]));
    sb.calls();
    fs::write(sb.root.join("no-bus"), "").unwrap();
    let xyctl = |args: &[&str]| {
        Command::new(XYCTL)
            .args(args)
            .env("HOME", sb.home())
            .env("PATH", sb.path("/usr/local/bin"))
            .env("XY_SERVICE_BACKEND", "systemd")
            .env_remove("XY_SOCKET")
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("XDG_STATE_HOME")
            .env_remove("XDG_RUNTIME_DIR")
            .output()
            .unwrap()
    };
    // Whatever happens below, no daemon outlives the test.
    struct Stop<F: Fn(&[&str]) -> Output>(F);
    impl<F: Fn(&[&str]) -> Output> Drop for Stop<F> {
        fn drop(&mut self) {
            let _ = (self.0)(&["daemon", "stop"]);
        }
    }
    let guard = Stop(xyctl);

    let out = (guard.0)(&["list", "--json"]);
    ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot start xyd through the login service")
            && err.contains("No medium found")
            && err.contains("starting xyd directly"),
        "{err}"
    );
    assert_eq!(sb.calls(), ["systemctl --user start xyd.service"]);
    let status = ok(&(guard.0)(&["daemon", "status"]));
    assert!(status.contains("running"), "{status}");

    let out = (guard.0)(&["daemon", "stop"]);
    ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot stop the login service") && err.contains("stopping xyd directly"),
        "{err}"
    );
    let out = (guard.0)(&["--no-spawn", "daemon", "status"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

/// A warning found before a failure is still printed with it.
#[test]
fn a_failed_install_still_prints_its_warnings() {
    let sb = Sandbox::new("systemd");
    let dev = sb.root.join("src/xy/target/debug/xyd");
    write_exe(&dev, "#!/bin/sh\n");
    fs::write(sb.root.join("no-bus"), "").unwrap();
    let err = fails(&sb.xyctl(&["install", "--xyd", dev.to_str().unwrap()]));
    assert!(
        err.contains("warning: ") && err.contains("cargo clean"),
        "{err}"
    );
    assert!(err.contains("No medium found"), "{err}");
    assert!(!sb.unit().exists(), "a failed install leaves no unit");
}

#[test]
fn start_and_stop_need_an_installed_service() {
    for backend in ["launchd", "systemd"] {
        let sb = Sandbox::new(backend);
        for verb in ["start", "stop"] {
            let err = fails(&sb.xyctl(&[verb, "--label", LABEL]));
            assert!(err.contains("not installed"), "{backend} {verb}: {err}");
        }
        assert!(sb.calls().is_empty(), "{backend}");
    }
}

#[test]
fn build_tree_program_warns_but_installs() {
    let sb = Sandbox::new("systemd");
    let dev = sb.root.join("src/xy/target/debug/xyd");
    write_exe(&dev, "#!/bin/sh\n");
    let out = sb.xyctl(&["install", "--xyd", dev.to_str().unwrap()]);
    ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("warning: ") && err.contains("cargo clean"),
        "{err}"
    );
    let out = sb.xyctl(&["install", "--force", "--xyd", sb.xyd().to_str().unwrap()]);
    ok(&out);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn default_xyd_is_beside_xyctl_else_on_path() {
    let sb = Sandbox::new("systemd");
    ok(&sb.xyctl(&["install"]));
    let sibling = Path::new(XYCTL).parent().unwrap().join("xyd");
    let want = if sibling.is_file() {
        sibling.canonicalize().unwrap()
    } else {
        sb.xyd()
    };
    let text = fs::read_to_string(sb.unit()).unwrap();
    assert!(
        text.contains(&format!("\nExecStart={}\n", want.display())),
        "{text}"
    );
}

#[test]
fn missing_xyd_and_bad_backend_are_errors() {
    let sb = Sandbox::new("systemd");
    let err = fails(&sb.xyctl(&["install", "--xyd", "/nonexistent/xyd"]));
    assert!(err.contains("/nonexistent/xyd"), "{err}");
    let out = Command::new(XYCTL)
        .args(["service", "status"])
        .env("HOME", sb.home())
        .env("XY_SERVICE_BACKEND", "upstart")
        .output()
        .unwrap();
    let err = fails(&out);
    assert!(err.contains("XY_SERVICE_BACKEND=\"upstart\""), "{err}");
}

/// The real launchd cycle, under a test label and with a `sleep` script as
/// the program, so it never touches the user's own agent or daemon. Run on
/// a Mac with `cargo test -p xy-cli --test service -- --ignored`.
#[cfg(target_os = "macos")]
#[test]
#[ignore = "installs a real LaunchAgent"]
fn real_launchd_cycle() {
    use std::time::{Duration, Instant};

    struct Cleanup(PathBuf);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = Command::new("launchctl")
                .args(["bootout", &format!("gui/{}/{LABEL}", uid())])
                .output();
            let _ = fs::remove_file(&self.0);
        }
    }

    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let program = root.join("fake-xyd");
    write_exe(&program, "#!/bin/sh\nexec sleep 600\n");
    let home = std::env::home_dir().unwrap();
    let plist = home.join(format!("Library/LaunchAgents/{LABEL}.plist"));
    let _cleanup = Cleanup(plist.clone());
    let xyctl = |args: &[&str]| {
        Command::new(XYCTL)
            .arg("service")
            .args(args)
            .args(["--label", LABEL])
            .env("XDG_STATE_HOME", root.join("state"))
            .env_remove("XY_SERVICE_BACKEND")
            .output()
            .unwrap()
    };
    let wait_for = |want: &str| {
        let deadline = xy_testbins::wait::deadline(Duration::from_secs(10));
        loop {
            let out = ok(&xyctl(&["status"]));
            if out.contains(want) {
                return out;
            }
            assert!(Instant::now() < deadline, "never saw {want:?}:\n{out}");
            std::thread::sleep(Duration::from_millis(200));
        }
    };

    ok(&xyctl(&["install", "--xyd", program.to_str().unwrap()]));
    assert!(plist.exists());
    wait_for("state:   running (pid ");
    ok(&xyctl(&["stop"]));
    wait_for("state:   stopped (not loaded)");
    ok(&xyctl(&["start"]));
    wait_for("state:   running (pid ");
    ok(&xyctl(&[
        "install",
        "--force",
        "--xyd",
        program.to_str().unwrap(),
    ]));
    wait_for("state:   running (pid ");
    ok(&xyctl(&["uninstall"]));
    assert!(!plist.exists());
    let out = Command::new("launchctl")
        .args(["print", &format!("gui/{}/{LABEL}", uid())])
        .output()
        .unwrap();
    assert!(!out.status.success(), "still loaded after uninstall");
}
