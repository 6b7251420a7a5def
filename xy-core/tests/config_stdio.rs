//! SPEC §13 config: `transport`, `path` and `on-demand { idle-stop }`, with
//! the same file/line/column diagnostics as every other field.

use std::time::Duration;

mod support;

use support::Fixture;
use xy_core::config::{ConfigDiagnostic, DEFAULT_IDLE_STOP, ServerConfig};
use xy_core::protocol::DiagnosticKind;
use xy_core::protocol::Transport;

const HEAD: &str = "command \"/usr/bin/env\"\nport 8430\n";

/// `fs` in `servers/fs.kdl`.
const FS: Fixture = Fixture {
    name: "fs",
    file: "servers/fs.kdl",
};

#[track_caller]
fn ok(src: &str) -> ServerConfig {
    FS.ok(src)
}

#[track_caller]
fn one(src: &str, kind: DiagnosticKind, line: usize, column: usize, msg: &str) -> ConfigDiagnostic {
    FS.one(src, kind, line, column, msg)
}

#[test]
fn defaults_are_http_on_slash_mcp_without_on_demand() {
    let c = ok(HEAD);
    assert_eq!(c.transport, Transport::Http);
    assert_eq!(c.path, "/mcp");
    assert_eq!(c.on_demand, None);
    assert_eq!(c.url(), "http://127.0.0.1:8430/mcp");
}

#[test]
fn stdio_with_path_and_on_demand() {
    let c = ok(&format!(
        "{HEAD}transport \"stdio\"\npath \"/fs\"\non-demand {{\n    idle-stop \"90s\"\n}}\n"
    ));
    assert_eq!(c.transport, Transport::Stdio);
    assert_eq!(c.path, "/fs");
    assert_eq!(c.url(), "http://127.0.0.1:8430/fs");
    assert_eq!(c.on_demand.unwrap().idle_stop, Duration::from_secs(90));
}

#[test]
fn bare_identifier_and_empty_on_demand_block() {
    // KDL v2 bare identifier; an empty block takes the default idle-stop.
    let c = ok(&format!("{HEAD}transport stdio\non-demand {{ }}\n"));
    assert_eq!(c.transport, Transport::Stdio);
    assert_eq!(c.on_demand.unwrap().idle_stop, DEFAULT_IDLE_STOP);
    assert_eq!(DEFAULT_IDLE_STOP, Duration::from_secs(600));
}

#[test]
fn v1_file_with_stdio_loads() {
    let c = ok(&format!(
        "{HEAD}transport \"stdio\"\non-demand {{\n    idle-stop \"10m\"\n}}\nargs r\"C:\\x\"\n"
    ));
    assert_eq!(c.transport, Transport::Stdio);
}

#[test]
fn on_demand_on_an_http_server_is_an_error_at_the_block() {
    let d = one(
        &format!("{HEAD}on-demand {{\n    idle-stop \"1m\"\n}}\n"),
        DiagnosticKind::InvalidValue,
        3,
        1,
        "`on-demand` needs `transport \"stdio\"`",
    );
    assert!(d.help.unwrap().contains("add transport \"stdio\""));
    let d = one(
        &format!("{HEAD}transport \"http\"\non-demand {{ }}\n"),
        DiagnosticKind::InvalidValue,
        4,
        1,
        "`on-demand`",
    );
    assert!(d.help.unwrap().contains("remove `on-demand`"));
}

#[test]
fn unknown_transport_suggests() {
    let d = one(
        &format!("{HEAD}transport \"stdoi\"\n"),
        DiagnosticKind::InvalidValue,
        3,
        11,
        "unknown transport \"stdoi\"",
    );
    assert!(d.help.unwrap().starts_with("did you mean \"stdio\"?"));
}

#[test]
fn transport_of_wrong_type() {
    one(
        &format!("{HEAD}transport 1\n"),
        DiagnosticKind::WrongType,
        3,
        11,
        "`transport` expects a string",
    );
}

#[test]
fn bad_path() {
    for bad in ["mcp", "/a b", "/mcp?x=1", ""] {
        one(
            &format!("{HEAD}path {bad:?}\n"),
            DiagnosticKind::InvalidValue,
            3,
            6,
            "`path` must start with `/`",
        );
    }
}

#[test]
fn on_demand_typos_and_bad_values() {
    let d = one(
        &format!("{HEAD}transport \"stdio\"\non-demand {{\n    idle_stop \"1m\"\n}}\n"),
        DiagnosticKind::UnknownNode,
        5,
        5,
        "unknown node `idle_stop` in `on-demand { }`",
    );
    assert_eq!(d.help.as_deref(), Some("did you mean idle-stop?"));
    one(
        &format!("{HEAD}transport \"stdio\"\non-demand {{\n    idle-stop \"soon\"\n}}\n"),
        DiagnosticKind::BadDuration,
        5,
        15,
        "invalid duration \"soon\" for `idle-stop`",
    );
    one(
        &format!("{HEAD}transport \"stdio\"\non-demand {{\n    idle-stop \"0s\"\n}}\n"),
        DiagnosticKind::InvalidValue,
        5,
        15,
        "`idle-stop` must be longer than zero",
    );
    let d = one(
        &format!("{HEAD}transport \"stdio\"\nidle-stop \"1m\"\n"),
        DiagnosticKind::UnknownNode,
        4,
        1,
        "`idle-stop`",
    );
    assert_eq!(
        d.help.as_deref(),
        Some("`idle-stop` belongs inside `on-demand { }`")
    );
    one(
        &format!("{HEAD}transport \"stdio\"\non-demand \"5m\"\n"),
        DiagnosticKind::WrongType,
        4,
        11,
        "`on-demand` takes a `{ … }` block",
    );
}

#[test]
fn typo_of_a_new_top_level_field_suggests_it() {
    let d = one(
        &format!("{HEAD}transprt \"stdio\"\n"),
        DiagnosticKind::UnknownNode,
        3,
        1,
        "`transprt`",
    );
    assert_eq!(d.help.as_deref(), Some("did you mean transport?"));
    let d = one(
        &format!("{HEAD}on_demand {{ }}\n"),
        DiagnosticKind::UnknownNode,
        3,
        1,
        "`on_demand`",
    );
    assert_eq!(d.help.as_deref(), Some("did you mean on-demand?"));
}

#[test]
fn defaults_leave_the_settings_unchanged_and_changes_move_them() {
    let plain = ok(HEAD);
    let explicit = ok(&format!("{HEAD}transport \"http\"\npath \"/mcp\"\n"));
    assert!(plain.settings() == explicit.settings());
    let stdio = ok(&format!("{HEAD}transport \"stdio\"\n"));
    let path = ok(&format!("{HEAD}path \"/x\"\n"));
    let od = ok(&format!("{HEAD}transport \"stdio\"\non-demand {{ }}\n"));
    let all = [&plain, &stdio, &path, &od];
    for (i, a) in all.iter().enumerate() {
        for b in &all[i + 1..] {
            assert!(
                a.settings() != b.settings(),
                "{} vs {}",
                a.source.display(),
                b.source.display()
            );
        }
    }
}

#[test]
fn unknown_transport_with_on_demand_is_one_error() {
    one(
        &format!("{HEAD}transport \"stdoi\"\non-demand {{ }}\n"),
        DiagnosticKind::InvalidValue,
        3,
        11,
        "unknown transport",
    );
}

/// SPEC §18: `autostart #false` (what `xyctl add --no-start` writes).
#[test]
fn autostart_defaults_to_true_and_takes_a_boolean() {
    assert!(ok(HEAD).autostart);
    assert!(!ok(&format!("{HEAD}autostart #false\n")).autostart);
    assert!(ok(&format!("{HEAD}autostart #true\n")).autostart);
    // Not a setting of the child: changing it alone restarts nothing.
    assert!(ok(HEAD).settings() == ok(&format!("{HEAD}autostart #false\n")).settings());
    let d = one(
        &format!("{HEAD}autostart \"no\"\n"),
        DiagnosticKind::WrongType,
        3,
        11,
        "autostart",
    );
    assert!(d.to_string().contains("boolean"), "{d}");
}
