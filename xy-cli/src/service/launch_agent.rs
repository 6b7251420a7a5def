//! The macOS half, as pure functions: the LaunchAgent plist (written with the
//! `launchd` crate, read back with `plist`), the modern `launchctl` command
//! lines for the `gui/<uid>` domain, and a lenient `launchctl print` parser.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use launchd::{KeepAliveType, Launchd};

use super::{AgentSpec, ServiceError};

/// The plist of `spec`: Label, ProgramArguments `[xyd]`, EnvironmentVariables
/// `{PATH}`, WorkingDirectory `$HOME`, RunAtLoad, KeepAlive, and stdout and
/// stderr to the launchd log, so failures before the daemon's own logger
/// exists (missing binary, dyld errors) still leave a trace.
pub(crate) fn render_plist(spec: &AgentSpec) -> Result<Vec<u8>, ServiceError> {
    let program = utf8(&spec.program, "the xyd path")?;
    let env = HashMap::from([("PATH".to_owned(), spec.path_snapshot.clone())]);
    let plist = Launchd::default()
        .with_label(&spec.label)
        .with_program_arguments(vec![program.to_owned()])
        .with_environment_variables(env)
        .with_working_directory(&spec.home)
        .and_then(|p| p.with_standard_out_path(&spec.log_file))
        .and_then(|p| p.with_standard_error_path(&spec.log_file))
        .map_err(|e| ServiceError::Plist(e.to_string()))?
        .with_run_at_load(true)
        .with_keep_alive(KeepAliveType::Enabled(true));
    let mut out = Vec::new();
    plist
        .to_writer_xml(&mut out)
        .map_err(|e| ServiceError::Plist(e.to_string()))?;
    out.push(b'\n');
    Ok(out)
}

fn utf8<'a>(p: &'a Path, what: &'static str) -> Result<&'a str, ServiceError> {
    p.to_str().ok_or(ServiceError::NonUtf8 { what })
}

/// What `status` shows from an installed plist.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PlistFacts {
    /// `ProgramArguments[0]`, else `Program`.
    pub(crate) program: Option<PathBuf>,
    /// `EnvironmentVariables.PATH`.
    pub(crate) path_snapshot: Option<String>,
    /// `StandardOutPath`.
    pub(crate) log_file: Option<PathBuf>,
}

/// Reads the facts back from plist bytes (XML or binary). Unknown keys are
/// fine: the user may have edited the file.
pub(crate) fn read_plist(bytes: &[u8]) -> Result<PlistFacts, ServiceError> {
    let value = plist::Value::from_reader(std::io::Cursor::new(bytes))
        .map_err(|e| ServiceError::Plist(e.to_string()))?;
    let dict = value
        .as_dictionary()
        .ok_or_else(|| ServiceError::Plist("the plist is not a dictionary".to_owned()))?;
    let string = |key: &str| dict.get(key).and_then(plist::Value::as_string);
    let program = dict
        .get("ProgramArguments")
        .and_then(plist::Value::as_array)
        .and_then(|a| a.first())
        .and_then(plist::Value::as_string)
        .or_else(|| string("Program"))
        .map(PathBuf::from);
    let path_snapshot = dict
        .get("EnvironmentVariables")
        .and_then(plist::Value::as_dictionary)
        .and_then(|env| env.get("PATH"))
        .and_then(plist::Value::as_string)
        .map(str::to_owned);
    Ok(PlistFacts {
        program,
        path_snapshot,
        log_file: string("StandardOutPath").map(PathBuf::from),
    })
}

/// The per-user GUI domain, `gui/<uid>`.
pub(crate) fn domain(uid: u32) -> String {
    format!("gui/{uid}")
}

/// The service target, `gui/<uid>/<label>`.
pub(crate) fn target(uid: u32, label: &str) -> String {
    format!("gui/{uid}/{label}")
}

fn argv(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| (*s).to_owned()).collect()
}

/// `launchctl print gui/<uid>/<label>`: exit 0 iff the service is loaded.
pub(crate) fn print_cmd(uid: u32, label: &str) -> Vec<String> {
    argv(&["launchctl", "print", &target(uid, label)])
}

/// `launchctl bootstrap gui/<uid> <plist>`: load (and, with RunAtLoad, start).
pub(crate) fn bootstrap_cmd(uid: u32, plist: &Path) -> Vec<String> {
    vec![
        "launchctl".to_owned(),
        "bootstrap".to_owned(),
        domain(uid),
        plist.to_string_lossy().into_owned(),
    ]
}

/// `launchctl bootout gui/<uid>/<label>`: stop and unload.
pub(crate) fn bootout_cmd(uid: u32, label: &str) -> Vec<String> {
    argv(&["launchctl", "bootout", &target(uid, label)])
}

/// `launchctl kickstart gui/<uid>/<label>`: start a loaded service now.
pub(crate) fn kickstart_cmd(uid: u32, label: &str) -> Vec<String> {
    argv(&["launchctl", "kickstart", &target(uid, label)])
}

/// The parts of `launchctl print` that `status` uses. The format is
/// explicitly unstable, so every field is optional.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LaunchctlPrint {
    /// `state = …` (`running`, `waiting`, `not running`, `spawn scheduled`).
    pub(crate) state: Option<String>,
    /// `pid = N`.
    pub(crate) pid: Option<u32>,
    /// `last exit code = …`, verbatim (`1`, `(never exited)`, `78: EX_CONFIG`).
    pub(crate) last_exit: Option<String>,
}

impl LaunchctlPrint {
    /// Whether launchd reports the job as running.
    pub(crate) fn is_running(&self) -> bool {
        self.state.as_deref() == Some("running")
    }
}

/// Parses `launchctl print gui/<uid>/<label>` output. Only the service's own
/// top-level keys count: nested blocks (coalitions, endpoints) carry their
/// own `state =` lines.
pub(crate) fn parse_launchctl_print(text: &str) -> LaunchctlPrint {
    let mut out = LaunchctlPrint::default();
    let mut depth = 0usize;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('}') {
            depth = depth.saturating_sub(1);
            continue;
        }
        let opens = line.ends_with('{');
        if depth <= 1
            && let Some((key, value)) = line.split_once(" = ")
            && !opens
        {
            let value = value.trim();
            match key.trim() {
                "state" => out.state = Some(value.to_owned()),
                "pid" => out.pid = value.parse().ok(),
                "last exit code" => out.last_exit = Some(value.to_owned()),
                _ => {}
            }
        }
        if opens {
            depth += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> AgentSpec {
        AgentSpec {
            label: "se.aceofba.xy".to_owned(),
            program: PathBuf::from("/Users/u/.cargo/bin/xyd"),
            path_snapshot: "/opt/homebrew/bin:/usr/bin:/bin".to_owned(),
            home: PathBuf::from("/Users/u"),
            log_file: PathBuf::from("/Users/u/.local/state/xy/logs/launchd.log"),
        }
    }

    #[test]
    fn plist_round_trips_through_the_launchd_crate() {
        let bytes = render_plist(&spec()).unwrap();
        let parsed = Launchd::from_bytes(&bytes).unwrap();
        let want = Launchd::default()
            .with_label("se.aceofba.xy")
            .with_program_arguments(vec!["/Users/u/.cargo/bin/xyd".to_owned()])
            .with_environment_variables(HashMap::from([(
                "PATH".to_owned(),
                "/opt/homebrew/bin:/usr/bin:/bin".to_owned(),
            )]))
            .with_working_directory("/Users/u")
            .unwrap()
            .with_standard_out_path("/Users/u/.local/state/xy/logs/launchd.log")
            .unwrap()
            .with_standard_error_path("/Users/u/.local/state/xy/logs/launchd.log")
            .unwrap()
            .with_run_at_load(true)
            .with_keep_alive(KeepAliveType::Enabled(true));
        assert_eq!(parsed, want);
    }

    #[test]
    fn plist_keys_are_exactly_these() {
        let bytes = render_plist(&spec()).unwrap();
        let value = plist::Value::from_reader_xml(bytes.as_slice()).unwrap();
        let dict = value.as_dictionary().unwrap();
        let mut keys: Vec<&str> = dict.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "EnvironmentVariables",
                "KeepAlive",
                "Label",
                "ProgramArguments",
                "RunAtLoad",
                "StandardErrorPath",
                "StandardOutPath",
                "WorkingDirectory",
            ]
        );
        assert_eq!(dict["KeepAlive"].as_boolean(), Some(true));
        assert_eq!(dict["RunAtLoad"].as_boolean(), Some(true));
        assert!(String::from_utf8(bytes).unwrap().starts_with("<?xml"));
    }

    #[test]
    fn plist_facts_read_back() {
        let facts = read_plist(&render_plist(&spec()).unwrap()).unwrap();
        assert_eq!(
            facts,
            PlistFacts {
                program: Some(PathBuf::from("/Users/u/.cargo/bin/xyd")),
                path_snapshot: Some("/opt/homebrew/bin:/usr/bin:/bin".to_owned()),
                log_file: Some(PathBuf::from("/Users/u/.local/state/xy/logs/launchd.log")),
            }
        );
        assert!(read_plist(b"not a plist").is_err());
    }

    #[test]
    fn non_utf8_program_is_an_error() {
        use std::os::unix::ffi::OsStrExt;
        let mut s = spec();
        s.program = PathBuf::from(std::ffi::OsStr::from_bytes(b"/bin/\xff"));
        assert!(matches!(
            render_plist(&s),
            Err(ServiceError::NonUtf8 { .. })
        ));
    }

    #[test]
    fn command_lines() {
        assert_eq!(print_cmd(501, "l"), ["launchctl", "print", "gui/501/l"]);
        assert_eq!(
            bootstrap_cmd(501, Path::new("/p/l.plist")),
            ["launchctl", "bootstrap", "gui/501", "/p/l.plist"]
        );
        assert_eq!(bootout_cmd(501, "l"), ["launchctl", "bootout", "gui/501/l"]);
        assert_eq!(
            kickstart_cmd(501, "l"),
            ["launchctl", "kickstart", "gui/501/l"]
        );
    }

    const RUNNING: &str = "gui/501/se.aceofba.xy = {
\tactive count = 1
\tpath = /Users/u/Library/LaunchAgents/se.aceofba.xy.plist
\ttype = LaunchAgent
\tstate = running

\tprogram = /Users/u/.cargo/bin/xyd
\targuments = {
\t\t/Users/u/.cargo/bin/xyd
\t}

\tjetsam coalition = {
\t\tID = 1234
\t\ttype = jetsam
\t\tstate = active
\t}

\tpid = 4821
\timmediate reason = speculative
\tlast exit code = (never exited)
}
";

    #[test]
    fn parses_a_running_service() {
        let p = parse_launchctl_print(RUNNING);
        assert_eq!(p.state.as_deref(), Some("running"));
        assert_eq!(p.pid, Some(4821));
        assert_eq!(p.last_exit.as_deref(), Some("(never exited)"));
        assert!(p.is_running());
    }

    #[test]
    fn parses_a_waiting_service_and_ignores_nested_state() {
        let text = "gui/501/x = {\n\tresource coalition = {\n\t\tstate = active\n\t}\n\
                    \tstate = spawn scheduled\n\tlast exit code = 78: EX_CONFIG\n}\n";
        let p = parse_launchctl_print(text);
        assert_eq!(p.state.as_deref(), Some("spawn scheduled"));
        assert_eq!(p.pid, None);
        assert_eq!(p.last_exit.as_deref(), Some("78: EX_CONFIG"));
        assert!(!p.is_running());
    }

    #[test]
    fn lenient_on_garbage() {
        assert_eq!(parse_launchctl_print(""), LaunchctlPrint::default());
        let p = parse_launchctl_print("state = running\npid = notanumber\n");
        assert!(p.is_running());
        assert_eq!(p.pid, None);
    }
}
