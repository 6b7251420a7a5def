//! SPEC §17: the `agent { … }` block — default off, both KDL versions, every
//! mistake reported with its position, and its place in the settings reload compares.

use std::path::Path;

mod support;

use xy_core::protocol::DiagnosticKind;

use support::{HEAD, errors, ok};

#[test]
fn off_unless_allowed() {
    assert!(!ok(HEAD).agent.allow_restart);
    assert!(!ok(&format!("{HEAD}agent {{\n}}\n")).agent.allow_restart);
    assert!(
        ok(&format!("{HEAD}agent {{\n  allow-restart #true\n}}\n"))
            .agent
            .allow_restart
    );
    assert!(
        !ok(&format!("{HEAD}agent {{\n  allow-restart #false\n}}\n"))
            .agent
            .allow_restart
    );
    // KDL v1 (the seed's dialect) spells booleans bare.
    assert!(
        ok(&format!("{HEAD}agent {{\n  allow-restart true\n}}\n"))
            .agent
            .allow_restart
    );
}

#[test]
fn mistakes_name_line_and_column() {
    let src = format!(
        "{HEAD}agent {{\n  allow-restart \"yes\"\n  allow_restart #true\n  \
         allow-restart #true\n  allow-stop #true\n}}\n"
    );
    let diags = errors(&src);
    let got: Vec<(DiagnosticKind, usize, usize, &str)> = diags
        .iter()
        .map(|d| (d.kind, d.line, d.column, d.message.as_str()))
        .collect();
    assert_eq!(diags.len(), 4, "{got:#?}");
    assert_eq!(got[0].0, DiagnosticKind::WrongType, "{got:?}");
    assert!(got[0].3.contains("expects a boolean"), "{got:?}");
    assert_eq!((got[0].1, got[0].2), (4, 17), "{got:?}");
    assert_eq!(got[1].0, DiagnosticKind::UnknownNode, "{got:?}");
    assert_eq!((got[1].1, got[1].2), (5, 3), "{got:?}");
    assert_eq!(
        diags[1].help.as_deref(),
        Some("did you mean allow-restart?")
    );
    assert_eq!(got[2].0, DiagnosticKind::DuplicateNode, "{got:?}");
    assert_eq!(got[2].1, 6, "{got:?}");
    assert_eq!(got[3].0, DiagnosticKind::UnknownNode, "{got:?}");
    assert_eq!(got[3].1, 7, "{got:?}");
    // Every diagnostic names the file.
    assert!(
        diags
            .iter()
            .all(|d| d.file == Path::new(support::DEMO.file)),
        "{diags:#?}"
    );
}

#[test]
fn values_and_misplacement() {
    let d = errors(&format!("{HEAD}agent #true\n"));
    assert!(d[0].message.contains("takes a `{ … }` block"), "{d:?}");
    let d = errors(&format!("{HEAD}allow-restart #true\n"));
    assert_eq!(
        d[0].help.as_deref(),
        Some("`allow-restart` belongs inside `agent { }`")
    );
    let d = errors(&format!("{HEAD}agent {{\n  allow-restart\n}}\n"));
    assert_eq!(d.len(), 1, "{d:?}");
}

#[test]
fn only_an_allowed_agent_changes_the_settings() {
    let none = ok(HEAD);
    let empty = ok(&format!("{HEAD}agent {{\n}}\n"));
    let off = ok(&format!("{HEAD}agent {{\n  allow-restart #false\n}}\n"));
    let on = ok(&format!("{HEAD}agent {{\n  allow-restart #true\n}}\n"));
    assert!(none.settings() == empty.settings());
    assert!(none.settings() == off.settings());
    assert!(none.settings() != on.settings());
}
