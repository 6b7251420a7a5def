//! SPEC §20: the `firewall { mode … }` block — unset means the daemon's
//! default, each mode parses, every mistake names its line and column, and
//! a mode change is not a setting that restarts the server.

mod support;

use xy_core::firewall::FirewallMode;
use xy_core::protocol::DiagnosticKind;

use support::{HEAD, errors, ok};

#[test]
fn unset_is_the_daemons_default_and_each_mode_parses() {
    assert_eq!(ok(HEAD).firewall, None);
    assert_eq!(ok(&format!("{HEAD}firewall {{\n}}\n")).firewall, None);
    for m in [FirewallMode::Pin, FirewallMode::Review, FirewallMode::Off] {
        let src = format!("{HEAD}firewall {{\n  mode \"{}\"\n}}\n", m.as_str());
        assert_eq!(ok(&src).firewall, Some(m));
    }
}

#[test]
fn mistakes_name_line_and_column() {
    let src = format!(
        "{HEAD}firewall {{\n  mode \"strict\"\n  mode \"pin\"\n  mood \"pin\"\n}}\nmode \"off\"\n"
    );
    let diags = errors(&src);
    let got: Vec<(DiagnosticKind, usize, usize, &str)> = diags
        .iter()
        .map(|d| (d.kind, d.line, d.column, d.message.as_str()))
        .collect();
    assert_eq!(diags.len(), 4, "{got:#?}");
    assert_eq!(got[0].0, DiagnosticKind::InvalidValue, "{got:?}");
    assert!(
        got[0].3.contains("unknown firewall mode \"strict\""),
        "{got:?}"
    );
    assert_eq!((got[0].1, got[0].2), (4, 8), "{got:?}");
    assert_eq!(got[1].0, DiagnosticKind::DuplicateNode, "{got:?}");
    assert_eq!(got[2].0, DiagnosticKind::UnknownNode, "{got:?}");
    assert!(diags[2].help.as_deref().unwrap_or("").contains("mode"));
    assert_eq!(got[3].0, DiagnosticKind::UnknownNode, "{got:?}");
    assert_eq!(got[3].1, 8, "{got:?}");
    assert!(
        diags[3].help.as_deref().unwrap_or("").contains("firewall"),
        "{:?}",
        diags[3].help
    );
    let wrong = errors(&format!("{HEAD}firewall {{\n  mode 1\n}}\n"));
    assert_eq!(wrong[0].kind, DiagnosticKind::WrongType, "{wrong:?}");
}

#[test]
fn a_mode_change_keeps_the_settings() {
    let a = ok(HEAD);
    let b = ok(&format!("{HEAD}firewall {{\n  mode \"review\"\n}}\n"));
    assert!(a.settings() == b.settings());
}
