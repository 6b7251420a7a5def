//! Unit tests for the service manager's sequencing, against an in-process
//! fake of `launchctl` and `systemctl` that keeps a loaded/active flag.

use std::cell::{Cell, RefCell};
use std::ffi::OsStr;
use std::fs;
use std::io;
use std::path::Path;

use super::*;

#[derive(Default)]
struct Fake {
    calls: RefCell<Vec<String>>,
    loaded: Cell<bool>,
    fail_verb: Option<&'static str>,
}

impl CommandRunner for Fake {
    fn run(&self, argv: &[String]) -> io::Result<Output> {
        self.calls.borrow_mut().push(argv.join(" "));
        let verb = if argv[0] == "systemctl" {
            argv[2].as_str()
        } else {
            argv[1].as_str()
        };
        let ok = |stdout: &str| Output {
            code: Some(0),
            stdout: stdout.to_owned(),
            stderr: String::new(),
        };
        if self.fail_verb == Some(verb) {
            return Ok(Output {
                code: Some(5),
                stdout: String::new(),
                stderr: format!("{verb} failed: 5: Input/output error\n"),
            });
        }
        Ok(match verb {
            "print" if self.loaded.get() => ok("x = {\n\tstate = running\n\tpid = 77\n}\n"),
            "print" => Output {
                code: Some(113),
                stdout: String::new(),
                stderr: "Could not find service\n".to_owned(),
            },
            "bootstrap" | "kickstart" | "start" | "restart" => {
                self.loaded.set(true);
                ok("")
            }
            "enable" => {
                if argv.iter().any(|a| a == "--now") {
                    self.loaded.set(true);
                }
                ok("")
            }
            "bootout" | "stop" | "disable" => {
                self.loaded.set(false);
                ok("")
            }
            "show" if self.loaded.get() => {
                ok("MainPID=77\nActiveState=active\nSubState=running\nExecMainStatus=0\n")
            }
            "show" => ok("MainPID=0\nActiveState=inactive\nSubState=dead\nExecMainStatus=1\n"),
            _ => ok(""),
        })
    }
}

impl Fake {
    fn take(&self) -> Vec<String> {
        self.calls.take()
    }
}

fn host(root: &Path) -> Host {
    Host::resolve(|_| None, Some(root.join("home")), 501).unwrap()
}

fn manager(backend: Backend, root: &Path, fake: Fake) -> ServiceManager<Fake> {
    ServiceManager::new(backend, "se.aceofba.xy-test", host(root), fake)
}

#[test]
fn host_resolution() {
    let h = Host::resolve(|_| None, Some(PathBuf::from("/h")), 7).unwrap();
    assert_eq!(h.config_home, Path::new("/h/.config"));
    assert_eq!(h.log_dir, Path::new("/h/.local/state/xy/logs"));
    let env = |k: &str| match k {
        "XDG_CONFIG_HOME" => Some(OsString::from("/c")),
        "XDG_STATE_HOME" => Some(OsString::from("/s")),
        _ => None,
    };
    let h = Host::resolve(env, Some(PathBuf::from("/h")), 7).unwrap();
    assert_eq!(h.config_home, Path::new("/c"));
    assert_eq!(h.log_dir, Path::new("/s/xy/logs"));
    let relative = |k: &str| (k == "XDG_CONFIG_HOME").then(|| OsString::from("rel"));
    assert_eq!(
        Host::resolve(relative, Some(PathBuf::from("/h")), 7)
            .unwrap()
            .config_home,
        Path::new("/h/.config")
    );
    assert!(matches!(
        Host::resolve(|_| None, None, 7),
        Err(ServiceError::NoHome)
    ));
    assert!(matches!(
        Host::resolve(|_| None, Some(PathBuf::from("rel")), 7),
        Err(ServiceError::NoHome)
    ));
}

#[test]
fn backend_names() {
    for b in [Backend::Launchd, Backend::Systemd] {
        assert_eq!(Backend::parse(b.name()), Some(b));
    }
    assert_eq!(Backend::parse("upstart"), None);
}

#[test]
fn files_per_backend() {
    let tmp = tempfile::tempdir().unwrap();
    let m = manager(Backend::Launchd, tmp.path(), Fake::default());
    assert_eq!(
        m.file(),
        tmp.path()
            .join("home/Library/LaunchAgents/se.aceofba.xy-test.plist")
    );
    assert_eq!(m.name(), "se.aceofba.xy-test");
    assert_eq!(
        m.log_file(),
        tmp.path().join("home/.local/state/xy/logs/launchd.log")
    );
    let m = manager(Backend::Systemd, tmp.path(), Fake::default());
    assert_eq!(
        m.file(),
        tmp.path().join("home/.config/systemd/user/xyd.service")
    );
    assert_eq!(m.name(), "xyd.service");
}

#[test]
fn spec_snapshots_path_with_fallback() {
    let tmp = tempfile::tempdir().unwrap();
    let m = manager(Backend::Launchd, tmp.path(), Fake::default());
    let s = m
        .spec("/bin/xyd".into(), Some(OsStr::new("/a:/b")))
        .unwrap();
    assert_eq!(s.path_snapshot, "/a:/b");
    assert_eq!(s.home, tmp.path().join("home"));
    assert_eq!(s.label, "se.aceofba.xy-test");
    assert_eq!(
        m.spec("/bin/xyd".into(), None).unwrap().path_snapshot,
        FALLBACK_PATH
    );
    assert_eq!(
        m.spec("/bin/xyd".into(), Some(OsStr::new("")))
            .unwrap()
            .path_snapshot,
        FALLBACK_PATH
    );
    use std::os::unix::ffi::OsStrExt;
    assert!(matches!(
        m.spec("/bin/xyd".into(), Some(OsStr::from_bytes(b"/\xff"))),
        Err(ServiceError::NonUtf8 { what: "PATH" })
    ));
}

#[test]
fn launchd_cycle() {
    let tmp = tempfile::tempdir().unwrap();
    let m = manager(Backend::Launchd, tmp.path(), Fake::default());
    let plist = m.file().display().to_string();
    let st = m.status().unwrap();
    assert_eq!((st.installed, st.state), (false, RunState::NotInstalled));
    assert!(matches!(m.start(), Err(ServiceError::NotInstalled { .. })));
    assert!(matches!(m.stop(), Err(ServiceError::NotInstalled { .. })));
    assert!(m.runner.take().is_empty());

    let spec = m
        .spec("/opt/xyd".into(), Some(OsStr::new("/a:/b")))
        .unwrap();
    let report = m.install(&spec, false).unwrap();
    assert!(!report.replaced);
    assert_eq!(
        m.runner.take(),
        [
            "launchctl print gui/501/se.aceofba.xy-test".to_owned(),
            format!("launchctl bootstrap gui/501 {plist}"),
        ]
    );
    assert!(
        m.host.log_dir.is_dir(),
        "launchd needs the log directory to exist"
    );
    assert!(matches!(
        m.install(&spec, false),
        Err(ServiceError::AlreadyInstalled { .. })
    ));

    let st = m.status().unwrap();
    assert_eq!(
        (st.installed, st.state, st.pid),
        (true, RunState::Running, Some(77))
    );
    assert_eq!(st.program.as_deref(), Some(Path::new("/opt/xyd")));
    assert_eq!(st.path_snapshot.as_deref(), Some("/a:/b"));
    assert_eq!(st.log, Some(m.log_file()));
    assert!(st.snapshot_date.is_some());
    assert_eq!(st.domain, "gui/501");
    m.runner.take();

    assert_eq!(m.stop().unwrap(), StopOutcome::Stopped);
    assert_eq!(
        m.runner.take(),
        [
            "launchctl print gui/501/se.aceofba.xy-test",
            "launchctl bootout gui/501/se.aceofba.xy-test",
            "launchctl print gui/501/se.aceofba.xy-test",
        ]
    );
    assert!(m.file().exists(), "stop keeps the plist");
    assert_eq!(m.stop().unwrap(), StopOutcome::AlreadyStopped);
    m.runner.take();

    fs::write(m.log_file(), "one\ntwo\ndyld: Library not loaded\n").unwrap();
    let st = m.status().unwrap();
    assert_eq!(
        (st.state, st.detail.as_deref()),
        (RunState::Stopped, Some("not loaded"))
    );
    assert_eq!(st.log_tail, ["one", "two", "dyld: Library not loaded"]);
    m.runner.take();

    m.start().unwrap();
    assert_eq!(
        m.runner.take(),
        [
            "launchctl print gui/501/se.aceofba.xy-test".to_owned(),
            format!("launchctl bootstrap gui/501 {plist}")
        ]
    );
    m.start().unwrap();
    assert_eq!(
        m.runner.take(),
        [
            "launchctl print gui/501/se.aceofba.xy-test",
            "launchctl kickstart gui/501/se.aceofba.xy-test"
        ]
    );

    let spec2 = m.spec("/opt/xyd2".into(), Some(OsStr::new("/c"))).unwrap();
    assert!(m.install(&spec2, true).unwrap().replaced);
    assert_eq!(
        m.runner.take(),
        [
            "launchctl print gui/501/se.aceofba.xy-test".to_owned(),
            "launchctl bootout gui/501/se.aceofba.xy-test".to_owned(),
            "launchctl print gui/501/se.aceofba.xy-test".to_owned(),
            format!("launchctl bootstrap gui/501 {plist}"),
        ]
    );
    assert_eq!(
        read_plist(&fs::read(m.file()).unwrap())
            .unwrap()
            .path_snapshot
            .as_deref(),
        Some("/c")
    );

    assert_eq!(m.uninstall().unwrap(), UninstallOutcome::Removed(m.file()));
    assert!(!m.file().exists());
    m.runner.take();
    assert_eq!(m.uninstall().unwrap(), UninstallOutcome::NotInstalled);
    assert_eq!(
        m.runner.take(),
        ["launchctl print gui/501/se.aceofba.xy-test"]
    );
}

#[test]
fn launchd_bootstrap_failure_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let fake = Fake {
        fail_verb: Some("bootstrap"),
        ..Fake::default()
    };
    let m = manager(Backend::Launchd, tmp.path(), fake);
    let spec = m.spec("/opt/xyd".into(), None).unwrap();
    let err = m.install(&spec, false).unwrap_err().to_string();
    assert!(err.contains("launchctl bootstrap gui/501"), "{err}");
    assert!(err.contains("exit status 5"), "{err}");
    assert!(err.contains("Input/output error"), "{err}");
    // Nothing half-installed is left behind.
    assert!(!m.file().exists());
    assert!(!m.is_installed());
}

#[test]
fn a_failed_systemd_install_leaves_no_unit_behind() {
    for verb in ["daemon-reload", "enable"] {
        let tmp = tempfile::tempdir().unwrap();
        let fake = Fake {
            fail_verb: Some(verb),
            ..Fake::default()
        };
        let m = manager(Backend::Systemd, tmp.path(), fake);
        let spec = m.spec("/opt/xyd".into(), None).unwrap();
        let err = m.install(&spec, false).unwrap_err().to_string();
        assert!(err.contains(&format!("systemctl --user {verb}")), "{err}");
        assert!(!m.file().exists(), "{verb}: unit left behind");
        // So a retry is a plain install, not "already installed".
        let ok = manager(Backend::Systemd, tmp.path(), Fake::default());
        ok.install(&spec, false).unwrap();
        assert!(ok.file().exists());
    }
}

#[test]
fn launchd_uninstall_boots_out_a_loaded_job_without_plist() {
    let tmp = tempfile::tempdir().unwrap();
    let fake = Fake::default();
    fake.loaded.set(true);
    let m = manager(Backend::Launchd, tmp.path(), fake);
    assert_eq!(m.uninstall().unwrap(), UninstallOutcome::Removed(m.file()));
    assert!(m.runner.take().iter().any(|c| c.contains("bootout")));
}

#[test]
fn systemd_cycle() {
    let tmp = tempfile::tempdir().unwrap();
    let m = manager(Backend::Systemd, tmp.path(), Fake::default());
    assert_eq!(m.uninstall().unwrap(), UninstallOutcome::NotInstalled);
    assert_eq!(m.status().unwrap().state, RunState::NotInstalled);
    assert!(m.runner.take().is_empty());

    let spec = m
        .spec("/opt/xyd".into(), Some(OsStr::new("/a:/b")))
        .unwrap();
    m.install(&spec, false).unwrap();
    assert_eq!(
        m.runner.take(),
        [
            "systemctl --user daemon-reload",
            "systemctl --user enable --now xyd.service"
        ]
    );
    assert_eq!(
        fs::read_to_string(m.file()).unwrap(),
        render_unit(&spec).unwrap()
    );
    assert!(matches!(
        m.install(&spec, false),
        Err(ServiceError::AlreadyInstalled { .. })
    ));

    let st = m.status().unwrap();
    assert_eq!(
        (st.state, st.pid, st.domain.as_str()),
        (RunState::Running, Some(77), "user")
    );
    assert_eq!(st.program.as_deref(), Some(Path::new("/opt/xyd")));
    assert_eq!(st.path_snapshot.as_deref(), Some("/a:/b"));
    assert_eq!(st.log, None);
    assert_eq!(
        m.runner.take(),
        ["systemctl --user show -p ActiveState,SubState,MainPID,ExecMainStatus xyd.service"]
    );

    assert_eq!(m.stop().unwrap(), StopOutcome::Stopped);
    let st = m.status().unwrap();
    assert_eq!(
        (st.state, st.detail.as_deref(), st.last_exit.as_deref()),
        (RunState::Stopped, Some("inactive/dead"), Some("1"))
    );
    m.start().unwrap();
    assert_eq!(
        m.runner.take()[..],
        [
            "systemctl --user stop xyd.service",
            "systemctl --user show -p ActiveState,SubState,MainPID,ExecMainStatus xyd.service",
            "systemctl --user start xyd.service"
        ]
    );

    m.install(
        &m.spec("/opt/xyd2".into(), Some(OsStr::new("/c"))).unwrap(),
        true,
    )
    .unwrap();
    assert_eq!(
        m.runner.take(),
        [
            "systemctl --user daemon-reload",
            "systemctl --user enable xyd.service",
            "systemctl --user restart xyd.service"
        ]
    );
    assert_eq!(
        read_unit(&fs::read_to_string(m.file()).unwrap())
            .path_snapshot
            .as_deref(),
        Some("/c")
    );

    assert_eq!(m.uninstall().unwrap(), UninstallOutcome::Removed(m.file()));
    assert_eq!(
        m.runner.take(),
        [
            "systemctl --user disable --now xyd.service",
            "systemctl --user daemon-reload"
        ]
    );
    assert!(!m.file().exists());
}

#[test]
fn systemd_status_fails_when_systemctl_cannot_answer() {
    let tmp = tempfile::tempdir().unwrap();
    let fake = Fake {
        fail_verb: Some("show"),
        ..Fake::default()
    };
    let m = manager(Backend::Systemd, tmp.path(), fake);
    m.install(&m.spec("/opt/xyd".into(), None).unwrap(), false)
        .unwrap();
    assert!(matches!(
        m.status(),
        Err(ServiceError::CommandFailed { .. })
    ));
}

#[test]
fn spawn_error_names_the_program() {
    struct Missing;
    impl CommandRunner for Missing {
        fn run(&self, _: &[String]) -> io::Result<Output> {
            Err(io::Error::from(io::ErrorKind::NotFound))
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let m = ServiceManager::new(Backend::Launchd, "l", host(tmp.path()), Missing);
    let err = m.uninstall().unwrap_err().to_string();
    assert!(err.starts_with("cannot run `launchctl`"), "{err}");
}

#[test]
fn tail_lines_keeps_the_end() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("log");
    assert!(tail_lines(&p, 3).is_empty());
    fs::write(&p, "a\nb\nc\nd\n").unwrap();
    assert_eq!(tail_lines(&p, 3), ["b", "c", "d"]);
    assert_eq!(tail_lines(&p, 10), ["a", "b", "c", "d"]);
    let big: String = (0..20_000).map(|i| format!("line {i}\n")).collect();
    fs::write(&p, big).unwrap();
    assert_eq!(tail_lines(&p, 2), ["line 19998", "line 19999"]);
}
