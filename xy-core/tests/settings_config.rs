//! `xy.kdl` loaded with a server directory (`config::load`): its mistakes
//! join the servers', and a server on the gateway's port is an error when
//! `xy.kdl` chose that port, a warning (gateway off) when it is the default.

use std::path::Path;

use xy_core::config::{AggregateMode, DEFAULT_GATEWAY_PORT, load, parse_settings};
use xy_core::firewall::FirewallMode;
use xy_core::protocol::DiagnosticKind;

fn server(dir: &Path, name: &str, port: u16) {
    std::fs::write(
        dir.join(format!("{name}.kdl")),
        format!("command \"/bin/true\"\nport {port}\n"),
    )
    .unwrap();
}

#[test]
fn settings_load_with_the_servers_and_their_mistakes_come_together() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("servers");
    std::fs::create_dir(&dir).unwrap();
    let file = t.path().join("xy.kdl");
    server(&dir, "a", 9001);

    // Absent: the defaults.
    let set = load(&dir, &file).unwrap();
    assert_eq!(set.settings.gateway.port, DEFAULT_GATEWAY_PORT);

    std::fs::write(
        &file,
        "gateway { port 9100; }\nfirewall { mode \"off\"; }\n",
    )
    .unwrap();
    let set = load(&dir, &file).unwrap();
    assert_eq!(set.settings.gateway.port(), Some(9100));
    assert_eq!(set.settings.firewall_default, FirewallMode::Off);
    // A server without its own block runs with the daemon's mode; one with
    // a block keeps its own.
    assert_eq!(set.servers["a"].firewall, Some(FirewallMode::Off));
    std::fs::write(
        dir.join("own.kdl"),
        "command \"/bin/true\"\nport 9003\nfirewall { mode \"review\"; }\n",
    )
    .unwrap();
    let set = load(&dir, &file).unwrap();
    assert_eq!(set.servers["a"].firewall, Some(FirewallMode::Off));
    assert_eq!(set.servers["own"].firewall, Some(FirewallMode::Review));
    std::fs::remove_file(dir.join("own.kdl")).unwrap();

    std::fs::write(&file, "gatway { }\n").unwrap();
    std::fs::write(dir.join("b.kdl"), "comand \"/bin/true\"\nport 9002\n").unwrap();
    let errs = load(&dir, &file).unwrap_err();
    let files: Vec<_> = errs
        .diagnostics
        .iter()
        .map(|d| d.file.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(files.contains(&"xy.kdl".to_owned()), "{files:?}");
    assert!(files.contains(&"b.kdl".to_owned()), "{files:?}");
}

#[test]
fn a_server_on_the_gateway_port() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("servers");
    std::fs::create_dir(&dir).unwrap();
    let file = t.path().join("xy.kdl");

    // On the default port: a warning, and the gateway stays off.
    server(&dir, "old", DEFAULT_GATEWAY_PORT);
    let set = load(&dir, &file).unwrap();
    assert_eq!(set.settings.gateway.port(), None);
    assert_eq!(set.warnings.len(), 1, "{:?}", set.warnings);
    assert!(set.warnings[0].message.contains("gateway's default port"));

    // On a port xy.kdl names: an error at that port's value.
    std::fs::write(
        &file,
        format!("gateway {{\n    port {DEFAULT_GATEWAY_PORT}\n}}\n"),
    )
    .unwrap();
    let errs = load(&dir, &file).unwrap_err();
    let d = &errs.diagnostics[0];
    assert_eq!(d.kind, DiagnosticKind::DuplicatePort);
    assert_eq!((d.line, d.column), (2, 10));
    assert!(d.message.contains("old"), "{}", d.message);

    // Off: no conflict.
    std::fs::write(&file, "gateway { port 0; }\n").unwrap();
    assert!(load(&dir, &file).unwrap().warnings.is_empty());
}

#[test]
fn search_model_is_an_absolute_path() {
    use xy_core::config::parse_settings;
    let file = Path::new("/cfg/xy.kdl");
    let s = parse_settings(file, "").unwrap();
    assert_eq!(s.search_model, None);
    let s = parse_settings(file, "search {\n    model \"/opt/models/wordllama\"\n}\n").unwrap();
    assert_eq!(
        s.search_model.as_deref(),
        Some(Path::new("/opt/models/wordllama"))
    );

    let errs = parse_settings(file, "search {\n    model \"models/w\"\n}\n").unwrap_err();
    let d = &errs.diagnostics[0];
    assert_eq!(d.kind, DiagnosticKind::InvalidValue);
    assert_eq!(d.line, 2, "{d:?}");
    assert!(d.message.contains("not an absolute path"), "{d:?}");

    let errs = parse_settings(file, "search {\n    modle \"/m\"\n}\n").unwrap_err();
    assert_eq!(errs.diagnostics[0].kind, DiagnosticKind::UnknownNode);
    assert!(parse_settings(file, "search {\n    model \"/a\"\n    model \"/b\"\n}\n").is_err());
}

#[test]
fn aggregate_profiles_and_the_default_mode_are_read() {
    let s = parse_settings(
        Path::new("/c/xy.kdl"),
        "aggregate { mode \"search\"; }\nprofile \"cursor\" {\n  servers \"a\" \"b\"\n  \
         mode \"full\"\n}\nprofile \"all\" { }\n",
    )
    .unwrap();
    assert_eq!(s.aggregate.mode, AggregateMode::Search);
    let c = &s.aggregate.profiles["cursor"];
    assert_eq!(
        c.servers.as_deref(),
        Some(&["a".to_owned(), "b".to_owned()][..])
    );
    assert_eq!(c.mode, Some(AggregateMode::Full));
    assert_eq!(s.aggregate.profiles["all"].servers, None);
    assert_eq!(s.aggregate.profiles["all"].mode, None);
}

#[test]
fn aggregate_mistakes_name_their_place() {
    let e = parse_settings(
        Path::new("/c/xy.kdl"),
        "profile \"p\" {\n  mode \"serch\"\n}\nprofile \"p\" { }\nprofile \"a/b\" { }\n\
         profile \"q\" { server \"x\" }\n",
    )
    .unwrap_err();
    let d = &e.diagnostics;
    assert_eq!(d.len(), 4, "{d:#?}");
    assert_eq!((d[0].line, d[0].column), (2, 8));
    assert_eq!(d[0].help.as_deref(), Some("did you mean \"search\"?"));
    assert_eq!(d[1].line, 4);
    assert!(
        d[2].message.contains("not a valid profile name"),
        "{:?}",
        d[2]
    );
    assert_eq!(d[3].help.as_deref(), Some("did you mean servers?"));
}

/// SPEC §26's own example, on one line as the spec writes it.
#[test]
fn the_specs_one_line_profile_is_read() {
    let s = parse_settings(
        Path::new("/c/xy.kdl"),
        "profile \"cursor\" { servers \"a\" \"b\"; mode \"search\" }\n",
    )
    .unwrap();
    let c = &s.aggregate.profiles["cursor"];
    assert_eq!(
        c.servers.as_deref(),
        Some(&["a".to_owned(), "b".to_owned()][..])
    );
    assert_eq!(c.mode, Some(AggregateMode::Search));
}
