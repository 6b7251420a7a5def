//! The Linux half, as pure functions: the systemd user unit text (with
//! systemd's quoting and `%`/`$` escaping), reading it back, the
//! `systemctl --user` command lines, and the `systemctl show` parser.

use std::path::PathBuf;

use super::{AgentSpec, ServiceError};

/// The unit's file name under `systemd/user/`.
pub(crate) const UNIT: &str = "xyd.service";

/// The unit text of `spec`. systemd user services start in `$HOME` and log
/// to the journal by default, so neither needs a line here.
pub(crate) fn render_unit(spec: &AgentSpec) -> Result<String, ServiceError> {
    let program = spec.program.to_str().ok_or(ServiceError::NonUtf8 {
        what: "the xyd path",
    })?;
    Ok(format!(
        "# Written by `xyctl service install`; re-run it with --force to update.\n\
         [Unit]\n\
         Description=xy MCP server supervisor\n\
         \n\
         [Service]\n\
         ExecStart={}\n\
         Environment={}\n\
         Restart=always\n\
         RestartSec=2\n\
         \n\
         [Install]\n\
         WantedBy=default.target\n",
        quote(program, true),
        quote(&format!("PATH={}", spec.path_snapshot), false),
    ))
}

/// One systemd word: `%` doubled (specifiers), `$` doubled in `ExecStart`
/// (variable expansion), and double quotes with C escapes when the value has
/// blanks, quotes, backslashes or control characters.
fn quote(value: &str, exec: bool) -> String {
    let mut v = value.replace('%', "%%");
    if exec {
        v = v.replace('$', "$$");
    }
    let needs_quotes = v
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '"' | '\'' | '\\'));
    if !needs_quotes {
        return v;
    }
    let mut out = String::with_capacity(v.len() + 2);
    out.push('"');
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The inverse of [`quote`] for the values [`render_unit`] writes.
fn unquote(word: &str, exec: bool) -> String {
    let inner = word.strip_prefix('"').and_then(|w| w.strip_suffix('"'));
    let mut v = match inner {
        None => word.to_owned(),
        Some(inner) => {
            let mut out = String::with_capacity(inner.len());
            let mut chars = inner.chars();
            while let Some(c) = chars.next() {
                if c != '\\' {
                    out.push(c);
                    continue;
                }
                match chars.next() {
                    Some('n') => out.push('\n'),
                    Some('t') => out.push('\t'),
                    Some('x') => {
                        let hex: String = chars.by_ref().take(2).collect();
                        if let Some(c) = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32)
                        {
                            out.push(c);
                        }
                    }
                    Some(other) => out.push(other),
                    None => {}
                }
            }
            out
        }
    };
    if exec {
        v = v.replace("$$", "$");
    }
    v.replace("%%", "%")
}

/// What `status` shows from an installed unit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct UnitFacts {
    /// `ExecStart=`'s program.
    pub(crate) program: Option<PathBuf>,
    /// `Environment=PATH=…`.
    pub(crate) path_snapshot: Option<String>,
}

/// Reads the facts back from a unit's text.
pub(crate) fn read_unit(text: &str) -> UnitFacts {
    let mut facts = UnitFacts::default();
    for line in text.lines().map(str::trim) {
        if let Some(v) = line.strip_prefix("ExecStart=") {
            facts.program = Some(PathBuf::from(unquote(v.trim(), true)));
        } else if let Some(v) = line.strip_prefix("Environment=")
            && let Some(path) = unquote(v.trim(), false).strip_prefix("PATH=")
        {
            facts.path_snapshot = Some(path.to_owned());
        }
    }
    facts
}

fn systemctl(args: &[&str]) -> Vec<String> {
    ["systemctl", "--user"]
        .iter()
        .chain(args)
        .map(|s| (*s).to_owned())
        .collect()
}

/// `systemctl --user daemon-reload`.
pub(crate) fn daemon_reload_cmd() -> Vec<String> {
    systemctl(&["daemon-reload"])
}

/// `systemctl --user enable --now xyd.service`.
pub(crate) fn enable_now_cmd() -> Vec<String> {
    systemctl(&["enable", "--now", UNIT])
}

/// `systemctl --user enable xyd.service`.
pub(crate) fn enable_cmd() -> Vec<String> {
    systemctl(&["enable", UNIT])
}

/// `systemctl --user restart xyd.service`: picks up a rewritten unit.
pub(crate) fn restart_cmd() -> Vec<String> {
    systemctl(&["restart", UNIT])
}

/// `systemctl --user disable --now xyd.service`.
pub(crate) fn disable_now_cmd() -> Vec<String> {
    systemctl(&["disable", "--now", UNIT])
}

/// `systemctl --user start xyd.service`.
pub(crate) fn start_cmd() -> Vec<String> {
    systemctl(&["start", UNIT])
}

/// `systemctl --user stop xyd.service`.
pub(crate) fn stop_cmd() -> Vec<String> {
    systemctl(&["stop", UNIT])
}

/// `systemctl --user show -p ActiveState,SubState,MainPID,ExecMainStatus xyd.service`.
pub(crate) fn show_cmd() -> Vec<String> {
    systemctl(&[
        "show",
        "-p",
        "ActiveState,SubState,MainPID,ExecMainStatus",
        UNIT,
    ])
}

/// The properties `status` asks `systemctl show` for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SystemctlShow {
    /// `ActiveState` (`active`, `inactive`, `activating`, `failed`, …).
    pub(crate) active_state: Option<String>,
    /// `SubState` (`running`, `dead`, `auto-restart`, …).
    pub(crate) sub_state: Option<String>,
    /// `MainPID`, `None` when 0.
    pub(crate) main_pid: Option<u32>,
    /// `ExecMainStatus`: the last exit status of the main process.
    pub(crate) exec_main_status: Option<i32>,
}

impl SystemctlShow {
    /// `ActiveState=active`.
    pub(crate) fn is_running(&self) -> bool {
        self.active_state.as_deref() == Some("active")
    }
}

/// Parses `KEY=value` lines; unknown keys and malformed lines are ignored.
pub(crate) fn parse_systemctl_show(text: &str) -> SystemctlShow {
    let mut out = SystemctlShow::default();
    for (key, value) in text.lines().filter_map(|l| l.trim().split_once('=')) {
        match key {
            "ActiveState" => out.active_state = Some(value.to_owned()),
            "SubState" => out.sub_state = Some(value.to_owned()),
            "MainPID" => out.main_pid = value.parse().ok().filter(|p| *p != 0),
            "ExecMainStatus" => out.exec_main_status = value.parse().ok(),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(program: &str, path: &str) -> AgentSpec {
        AgentSpec {
            label: "se.aceofba.xy".to_owned(),
            program: PathBuf::from(program),
            path_snapshot: path.to_owned(),
            home: PathBuf::from("/home/u"),
            log_file: PathBuf::from("/home/u/.local/state/xy/logs/launchd.log"),
        }
    }

    #[test]
    fn unit_text_is_exact() {
        let text = render_unit(&spec(
            "/home/u/.cargo/bin/xyd",
            "/home/u/.cargo/bin:/usr/bin",
        ))
        .unwrap();
        assert_eq!(
            text,
            "# Written by `xyctl service install`; re-run it with --force to update.\n\
             [Unit]\n\
             Description=xy MCP server supervisor\n\
             \n\
             [Service]\n\
             ExecStart=/home/u/.cargo/bin/xyd\n\
             Environment=PATH=/home/u/.cargo/bin:/usr/bin\n\
             Restart=always\n\
             RestartSec=2\n\
             \n\
             [Install]\n\
             WantedBy=default.target\n"
        );
    }

    #[test]
    fn awkward_values_are_quoted_and_read_back() {
        let program = "/home/u/my tools/100%/$bin/xyd";
        let path = "/home/u/My Apps/bin:/opt/a\"b\\c:/x%y:/$z";
        let text = render_unit(&spec(program, path)).unwrap();
        assert!(
            text.contains("ExecStart=\"/home/u/my tools/100%%/$$bin/xyd\"\n"),
            "{text}"
        );
        assert!(
            text.contains("Environment=\"PATH=/home/u/My Apps/bin:/opt/a\\\"b\\\\c:/x%%y:/$z\"\n"),
            "{text}"
        );
        let facts = read_unit(&text);
        assert_eq!(facts.program, Some(PathBuf::from(program)));
        assert_eq!(facts.path_snapshot.as_deref(), Some(path));
    }

    #[test]
    fn control_characters_round_trip() {
        let path = "/a\nb:/c\td:/e\u{1}f";
        let text = render_unit(&spec("/bin/xyd", path)).unwrap();
        assert_eq!(text.lines().count(), 12, "{text}");
        assert_eq!(read_unit(&text).path_snapshot.as_deref(), Some(path));
    }

    #[test]
    fn read_unit_ignores_other_environment_lines() {
        let facts = read_unit("[Service]\nEnvironment=FOO=1\nExecStart=/x/xyd\n");
        assert_eq!(facts.program, Some(PathBuf::from("/x/xyd")));
        assert_eq!(facts.path_snapshot, None);
    }

    #[test]
    fn command_lines() {
        assert_eq!(
            daemon_reload_cmd(),
            ["systemctl", "--user", "daemon-reload"]
        );
        assert_eq!(
            enable_now_cmd(),
            ["systemctl", "--user", "enable", "--now", "xyd.service"]
        );
        assert_eq!(
            enable_cmd(),
            ["systemctl", "--user", "enable", "xyd.service"]
        );
        assert_eq!(
            restart_cmd(),
            ["systemctl", "--user", "restart", "xyd.service"]
        );
        assert_eq!(
            disable_now_cmd(),
            ["systemctl", "--user", "disable", "--now", "xyd.service"]
        );
        assert_eq!(start_cmd(), ["systemctl", "--user", "start", "xyd.service"]);
        assert_eq!(stop_cmd(), ["systemctl", "--user", "stop", "xyd.service"]);
        assert_eq!(
            show_cmd(),
            [
                "systemctl",
                "--user",
                "show",
                "-p",
                "ActiveState,SubState,MainPID,ExecMainStatus",
                "xyd.service"
            ]
        );
    }

    #[test]
    fn parses_show() {
        let running = parse_systemctl_show(
            "MainPID=4821\nExecMainStatus=0\nActiveState=active\nSubState=running\n",
        );
        assert_eq!(
            running,
            SystemctlShow {
                active_state: Some("active".to_owned()),
                sub_state: Some("running".to_owned()),
                main_pid: Some(4821),
                exec_main_status: Some(0),
            }
        );
        assert!(running.is_running());
        let restarting = parse_systemctl_show(
            "ActiveState=activating\nSubState=auto-restart\nMainPID=0\nExecMainStatus=3\nnoise\n",
        );
        assert!(!restarting.is_running());
        assert_eq!(restarting.main_pid, None);
        assert_eq!(restarting.exec_main_status, Some(3));
        assert_eq!(parse_systemctl_show(""), SystemctlShow::default());
    }
}
