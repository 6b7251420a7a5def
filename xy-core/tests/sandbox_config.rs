//! SPEC §21: the `sandbox { … }` block — what parses, the defaults, every
//! mistake with its line and column, and a changed block is a setting that
//! restarts the server.

mod support;

use xy_core::protocol::DiagnosticKind;
use xy_core::sandbox::{HostPort, NetworkMode, SandboxConfig};

use support::{HEAD, errors, ok};

#[test]
fn no_block_is_unconfined_and_an_empty_block_is_the_defaults() {
    assert_eq!(ok(HEAD).sandbox, None);
    assert_eq!(
        ok(&format!("{HEAD}sandbox {{\n}}\n")).sandbox,
        Some(SandboxConfig::default())
    );
}

#[test]
fn paths_network_and_hosts_parse() {
    let src = format!(
        "{HEAD}sandbox {{\n  read \"~/notes\" \"/srv/data\"\n  read \"/opt/x\"\n  \
         write \"~/notes/inbox\"\n  network \"allow\"\n  allow-host \"API.github.com:443\" \
         \"[::1]:8080\"\n}}\n"
    );
    let s = ok(&src).sandbox.unwrap();
    assert_eq!(s.read, ["~/notes", "/srv/data", "/opt/x"]);
    assert_eq!(s.write, ["~/notes/inbox"]);
    assert_eq!(s.network, NetworkMode::Allow);
    assert_eq!(
        s.allow_hosts,
        [
            HostPort::parse("api.github.com:443").unwrap(),
            HostPort::parse("[::1]:8080").unwrap()
        ]
    );
    for (word, mode) in [("any", NetworkMode::Any), ("none", NetworkMode::None)] {
        let src = format!("{HEAD}sandbox {{\n  network \"{word}\"\n}}\n");
        assert_eq!(ok(&src).sandbox.unwrap().network, mode);
    }
    // allow-host with no network line implies "allow".
    let src = format!("{HEAD}sandbox {{\n  allow-host \"example.com:443\"\n}}\n");
    assert_eq!(ok(&src).sandbox.unwrap().network, NetworkMode::Allow);
}

#[test]
fn env_pass_names_variables_once() {
    let src = format!(
        "{HEAD}sandbox {{\n  env-pass \"GITHUB_TOKEN\" \"_X1\"\n  env-pass \"GITHUB_TOKEN\"\n}}\n"
    );
    let s = ok(&src).sandbox.unwrap();
    assert_eq!(s.env_pass, ["GITHUB_TOKEN", "_X1"]);
    assert!(xy_core::sandbox::passes_env("GITHUB_TOKEN", &s.env_pass));
    assert!(xy_core::sandbox::passes_env("LC_ALL", &[]));
    assert!(xy_core::sandbox::passes_env("PATH", &[]));
    assert!(!xy_core::sandbox::passes_env("GITHUB_TOKEN", &[]));
    assert!(
        !xy_core::sandbox::passes_env("HOME", &[]),
        "HOME is the sandbox's own"
    );
    assert!(!xy_core::sandbox::passes_env("XDG_RUNTIME_DIR", &[]));
    assert!(!xy_core::sandbox::is_env_name("1X"));
    assert!(!xy_core::sandbox::is_env_name(""));
}

#[test]
fn mistakes_name_line_and_column() {
    let cases: &[(&str, DiagnosticKind, usize, usize, &str)] = &[
        (
            "  read \"notes\"\n",
            DiagnosticKind::InvalidValue,
            4,
            8,
            "not absolute",
        ),
        (
            "  write \"/a/../b\"\n",
            DiagnosticKind::InvalidValue,
            4,
            9,
            "contains `..`",
        ),
        (
            "  network \"off\"\n",
            DiagnosticKind::InvalidValue,
            4,
            11,
            "unknown network mode",
        ),
        (
            "  network \"none\"\n  allow-host \"a.b:1\"\n",
            DiagnosticKind::InvalidValue,
            4,
            11,
            "need network \"allow\"",
        ),
        (
            "  network \"allow\"\n",
            DiagnosticKind::MissingField,
            4,
            11,
            "allows nothing",
        ),
        (
            "  allow-host \"example.com\"\n",
            DiagnosticKind::InvalidValue,
            4,
            14,
            "has no port",
        ),
        (
            "  allow-host \"*.x.com:443\"\n",
            DiagnosticKind::InvalidValue,
            4,
            14,
            "not a host",
        ),
        (
            "  reads \"/x\"\n",
            DiagnosticKind::UnknownNode,
            4,
            3,
            "reads",
        ),
        ("  read\n", DiagnosticKind::WrongType, 4, 3, "needs a value"),
        (
            "  env-pass \"GH_TOKEN\" \"A-B\"\n",
            DiagnosticKind::InvalidValue,
            4,
            23,
            "not a variable name",
        ),
        (
            "  env-pass\n",
            DiagnosticKind::WrongType,
            4,
            3,
            "needs a value",
        ),
        (
            "  read 1\n",
            DiagnosticKind::WrongType,
            4,
            8,
            "expects a string",
        ),
    ];
    for (body, kind, line, column, needle) in cases {
        let src = format!("{HEAD}sandbox {{\n{body}}}\n");
        let d = errors(&src);
        assert_eq!(d.len(), 1, "{body:?}: {d:#?}");
        assert_eq!(
            (d[0].kind, d[0].line, d[0].column),
            (*kind, *line, *column),
            "{body:?}: {d:#?}"
        );
        assert!(d[0].message.contains(needle), "{body:?}: {}", d[0].message);
    }
    let d = errors(&format!(
        "{HEAD}sandbox {{\n  network \"any\"\n  network \"none\"\n}}\n"
    ));
    assert_eq!(d[0].kind, DiagnosticKind::DuplicateNode, "{d:?}");
    let d = errors(&format!("{HEAD}network \"none\"\n"));
    assert!(
        d[0].help.as_deref().unwrap_or("").contains("sandbox"),
        "a sandbox field at the top level points at the block: {d:?}"
    );
}

#[test]
fn a_changed_block_changes_the_settings() {
    let a = ok(HEAD);
    let b = ok(&format!("{HEAD}sandbox {{\n  network \"none\"\n}}\n"));
    let c = ok(&format!("{HEAD}sandbox {{\n  network \"none\"\n}}\n"));
    assert!(a.settings() != b.settings());
    assert!(b.settings() == c.settings());
}

#[test]
fn reach_names_servers_and_an_unknown_one_is_an_error_at_its_place() {
    let src = format!("{HEAD}sandbox {{\n  reach \"github\" \"notes\"\n  reach \"github\"\n}}\n");
    assert_eq!(ok(&src).sandbox.unwrap().reach, ["github", "notes"]);
    assert!(
        ok(&format!("{HEAD}sandbox {{\n}}\n"))
            .sandbox
            .unwrap()
            .reach
            .is_empty()
    );
    let d = errors(&format!("{HEAD}sandbox {{\n  reach \"a/b\"\n}}\n"));
    assert_eq!(
        (d[0].kind, d[0].line, d[0].column),
        (DiagnosticKind::InvalidValue, 4, 9),
        "{d:#?}"
    );
    assert!(d[0].message.contains("not a server name"), "{d:?}");

    // Across files: a name with no file in the directory.
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, port: u16, body: &str| {
        std::fs::write(
            dir.path().join(format!("{name}.kdl")),
            format!("command \"/bin/true\"\nport {port}\n{body}"),
        )
        .unwrap();
    };
    file("github", 41001, "");
    file(
        "boxed",
        41002,
        "sandbox {\n  reach \"github\"\n  reach \"githb\"\n}\n",
    );
    let e = xy_core::config::load_dir(dir.path()).unwrap_err();
    let d = &e.diagnostics;
    assert_eq!(d.len(), 1, "{d:#?}");
    assert!(d[0].file.ends_with("boxed.kdl"), "{d:?}");
    assert_eq!((d[0].line, d[0].column), (5, 9), "{d:?}");
    assert!(
        d[0].message.contains("no configured server: \"githb\""),
        "{d:?}"
    );
    assert!(
        d[0].help
            .as_deref()
            .unwrap_or("")
            .contains("reach \"github\""),
        "{d:?}"
    );
    file("boxed", 41002, "sandbox {\n  reach \"github\"\n}\n");
    let set = xy_core::config::load_dir(dir.path()).unwrap();
    assert_eq!(
        set.servers["boxed"].sandbox.as_ref().unwrap().reach,
        ["github"]
    );
}
