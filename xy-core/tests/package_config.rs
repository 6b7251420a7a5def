//! SPEC §22: the `package` node — an exact npm or PyPI version, every
//! mistake reported with its position, and its place in the settings
//! reload compares.

mod support;

use xy_core::package::Ecosystem;
use xy_core::protocol::DiagnosticKind;

use support::{DEMO, HEAD, ok};

#[test]
fn absent_unless_written() {
    assert_eq!(ok(HEAD).package, None);
    let c = ok(&format!(
        "{HEAD}package \"npm:@modelcontextprotocol/server-memory@2026.8.31\"\n"
    ));
    let p = c.package.unwrap();
    assert_eq!(p.ecosystem, Ecosystem::Npm);
    assert_eq!(p.name, "@modelcontextprotocol/server-memory");
    assert_eq!(p.version, "2026.8.31");
    let p = ok(&format!(
        "{HEAD}package \"pypi:mcp-server-time==2025.9.25\"\n"
    ))
    .package
    .unwrap();
    assert_eq!(
        (p.ecosystem, p.name.as_str(), p.version.as_str()),
        (Ecosystem::Pypi, "mcp-server-time", "2025.9.25")
    );
}

#[test]
fn mistakes_name_line_and_column() {
    let d = DEMO.one(
        &format!("{HEAD}package \"npm:left-pad@^1.3.0\"\n"),
        DiagnosticKind::InvalidValue,
        3,
        9,
        "not an exact npm version",
    );
    assert!(d.help.unwrap().contains("xyctl add --npm"));
    DEMO.one(
        &format!("{HEAD}package \"left-pad@1.3.0\"\n"),
        DiagnosticKind::InvalidValue,
        3,
        9,
        "names no ecosystem",
    );
    DEMO.one(
        &format!("{HEAD}package \"pypi:mcp\"\n"),
        DiagnosticKind::InvalidValue,
        3,
        9,
        "pins no version",
    );
    DEMO.one(
        &format!("{HEAD}package 1\n"),
        DiagnosticKind::WrongType,
        3,
        9,
        "",
    );
    DEMO.one(
        &format!("{HEAD}package \"npm:a@1.0.0\"\npackage \"npm:a@1.0.1\"\n"),
        DiagnosticKind::DuplicateNode,
        4,
        1,
        "",
    );
}

#[test]
fn a_changed_package_is_a_changed_setting() {
    let a = ok(&format!("{HEAD}package \"npm:a@1.0.0\"\n"));
    let b = ok(&format!("{HEAD}package \"npm:a@1.0.1\"\n"));
    let a2 = ok(&format!("{HEAD}// pinned\npackage \"npm:a@1.0.0\"\n"));
    assert!(a.settings() != b.settings());
    assert!(a.settings() == a2.settings());
    assert!(a.settings() != ok(HEAD).settings());
}
