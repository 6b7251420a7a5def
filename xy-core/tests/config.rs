//! SPEC §3: parsing, validation, diagnostics and loading of server configs.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod support;

use support::{DEMO, HEAD, errors, ok};
use xy_core::config::{
    CommandLookupError, DEFAULT_BACKOFF_INITIAL, DEFAULT_BACKOFF_MAX, DEFAULT_GRACE,
    DEFAULT_MAX_RETRIES_PER_MINUTE, RestartPolicy, load_dir, parse_server, resolve_command,
    resolve_command_in,
};
use xy_core::protocol::DiagnosticKind;

fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/config")
        .join(rel)
}

// ---- valid configs ----

#[test]
fn minimal_config_gets_defaults() {
    let c = ok(HEAD);
    assert_eq!(c.name, "demo");
    assert_eq!(c.source, Path::new(DEMO.file));
    assert_eq!(c.command, "/usr/bin/env");
    assert!(c.args.is_empty());
    assert_eq!(c.port, 8421);
    assert!(c.env.is_empty());
    assert_eq!(c.working_dir, None);
    assert_eq!(c.restart.policy, RestartPolicy::OnFailure);
    assert_eq!(c.restart.backoff_initial, DEFAULT_BACKOFF_INITIAL);
    assert_eq!(c.restart.backoff_max, DEFAULT_BACKOFF_MAX);
    assert_eq!(
        c.restart.max_retries_per_minute,
        DEFAULT_MAX_RETRIES_PER_MINUTE
    );
    assert_eq!(c.stop.grace, DEFAULT_GRACE);
    assert_eq!(DEFAULT_BACKOFF_INITIAL, Duration::from_secs(1));
    assert_eq!(DEFAULT_BACKOFF_MAX, Duration::from_secs(30));
    assert_eq!(DEFAULT_MAX_RETRIES_PER_MINUTE, 5);
    assert_eq!(DEFAULT_GRACE, Duration::from_secs(10));
}

#[test]
fn full_config_reads_every_field() {
    let c = ok(r#"
command "/opt/mcp/bin/server"
args "--http" "--port" "9000"
port 9000
env {
    RUST_LOG "debug"
    TOKEN "s3cret"
}
working-dir "/srv/mcp"
restart {
    policy "always"
    backoff-initial "250ms"
    backoff-max "1m 30s"
    max-retries-per-minute 0
}
stop {
    grace "3s"
}
"#);
    assert_eq!(c.command, "/opt/mcp/bin/server");
    assert_eq!(c.args, ["--http", "--port", "9000"]);
    assert_eq!(c.port, 9000);
    let env: BTreeMap<String, String> = [("RUST_LOG", "debug"), ("TOKEN", "s3cret")]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    assert_eq!(c.env, env);
    assert_eq!(c.working_dir, Some(PathBuf::from("/srv/mcp")));
    assert_eq!(c.restart.policy, RestartPolicy::Always);
    assert_eq!(c.restart.backoff_initial, Duration::from_millis(250));
    assert_eq!(c.restart.backoff_max, Duration::from_secs(90));
    assert_eq!(c.restart.max_retries_per_minute, 0);
    assert_eq!(c.stop.grace, Duration::from_secs(3));
    // Env values are secrets: Debug shows keys only.
    let dbg = format!("{c:?}");
    assert!(dbg.contains("TOKEN") && !dbg.contains("s3cret"), "{dbg}");
    // status shows the settings in ms.
    assert_eq!(c.restart_settings().backoff_max_ms, 90_000);
    assert_eq!(c.stop_settings().grace_ms, 3_000);
}

#[test]
fn seed_example_loads_verbatim() {
    let src = include_str!("data/config/seed-insikt.kdl");
    let c = parse_server("insikt", Path::new("insikt.kdl"), src).unwrap();
    assert_eq!(c.command, "/Users/olsson/.cargo/bin/insikt-mcp");
    assert_eq!(c.args, ["--http", "--port", "8421"]);
    assert_eq!(c.port, 8421);
    assert_eq!(
        c.env["INSIKT_DATA_DIR"],
        "/Users/olsson/.local/share/insikt"
    );
    assert_eq!(c.env["RUST_LOG"], "info");
    assert_eq!(
        c.working_dir,
        Some(PathBuf::from("/Users/olsson/Laboratory/insikt"))
    );
    assert_eq!(c.restart.policy, RestartPolicy::OnFailure);
    assert_eq!(c.restart.backoff_initial, Duration::from_secs(1));
    assert_eq!(c.restart.backoff_max, Duration::from_secs(30));
    assert_eq!(c.restart.max_retries_per_minute, 5);
    assert_eq!(c.stop.grace, Duration::from_secs(10));
}

#[test]
fn v1_only_syntax_loads() {
    let src = include_str!("data/config/v1-only.kdl");
    assert!(
        kdl::KdlDocument::parse_v2(src).is_err(),
        "fixture must not be valid v2"
    );
    let c = parse_server("v1", Path::new("v1.kdl"), src).unwrap();
    assert_eq!(c.command, "/usr/bin/env");
    assert_eq!(c.args, ["--port", "8422", "--name=\"v1\""]);
    assert_eq!(c.port, 8422);
    assert_eq!(c.env["DEBUG"], "true");
    assert_eq!(c.env["QUIET"], "false");
    assert_eq!(c.restart.policy, RestartPolicy::Always);
    assert_eq!(c.restart.max_retries_per_minute, 3);
}

#[test]
fn v2_only_syntax_loads() {
    let src = include_str!("data/config/v2-only.kdl");
    assert!(
        kdl::KdlDocument::parse_v1(src).is_err(),
        "fixture must not be valid v1"
    );
    let c = parse_server("v2", Path::new("v2.kdl"), src).unwrap();
    assert_eq!(c.command, "/usr/bin/env");
    assert_eq!(c.args, ["--port", "8423", "--name=\"v2\""]);
    assert_eq!(c.port, 8423);
    assert_eq!(c.env["DEBUG"], "true");
    assert_eq!(c.env["GREETING"], "hello\nworld");
    assert_eq!(c.restart.policy, RestartPolicy::OnFailure);
    assert_eq!(c.restart.backoff_initial, Duration::from_millis(500));
    assert_eq!(c.restart.backoff_max, Duration::from_secs(60));
    assert_eq!(c.stop.grace, Duration::from_secs(2));
}

#[test]
fn policy_quoted_and_bare_both_load() {
    for (src, want) in [
        (
            "restart { policy \"on-failure\"; }",
            RestartPolicy::OnFailure,
        ),
        ("restart { policy on-failure; }", RestartPolicy::OnFailure),
        ("restart { policy always; }", RestartPolicy::Always),
        ("restart { policy \"never\"; }", RestartPolicy::Never),
    ] {
        assert_eq!(ok(&format!("{HEAD}{src}\n")).restart.policy, want, "{src}");
    }
}

#[test]
fn examples_parse() {
    for (name, src) in [
        (
            "mcp-demo",
            include_str!("../../examples/servers/mcp-demo.kdl"),
        ),
        ("insikt", include_str!("../../docs/examples/insikt.kdl")),
    ] {
        let c = parse_server(name, Path::new(name), src)
            .unwrap_or_else(|e| panic!("{name}:\n{}", e.render(false)));
        assert_eq!(c.port, 8421);
    }
    let demo = parse_server(
        "mcp-demo",
        Path::new("mcp-demo.kdl"),
        include_str!("../../examples/servers/mcp-demo.kdl"),
    )
    .unwrap();
    assert_eq!(demo.command, "xy-test-mcp");
    assert_eq!(demo.args, ["--port", "8421"]);
}

// ---- one test per invalid kind ----

#[test]
fn syntax_error_has_position() {
    let diags = errors("command \"/usr/bin/env\"\nport 8421\nenv {\n    A \"b\"\n");
    assert!(!diags.is_empty());
    assert!(
        diags.iter().all(|d| d.kind == DiagnosticKind::Syntax),
        "{diags:#?}"
    );
    assert_eq!(diags[0].file, Path::new(DEMO.file));
    assert_eq!((diags[0].line, diags[0].column), (3, 5));
    assert!(
        diags[0].message.starts_with("invalid KDL"),
        "{}",
        diags[0].message
    );
}

#[test]
fn unknown_node_suggests_the_field() {
    let d = DEMO.one(
        &format!("{HEAD}working_dir \"/tmp\"\n"),
        DiagnosticKind::UnknownNode,
        3,
        1,
        "unknown node `working_dir`",
    );
    assert_eq!(d.help.as_deref(), Some("did you mean working-dir?"));
}

#[test]
fn unknown_node_without_close_match_lists_fields() {
    let d = DEMO.one(
        &format!("{HEAD}colour \"red\"\n"),
        DiagnosticKind::UnknownNode,
        3,
        1,
        "`colour`",
    );
    assert!(d.help.unwrap().contains("command, args, port"));
}

#[test]
fn nested_field_at_top_level_points_to_its_block() {
    let d = DEMO.one(
        &format!("{HEAD}grace \"1s\"\n"),
        DiagnosticKind::UnknownNode,
        3,
        1,
        "`grace`",
    );
    assert_eq!(d.help.as_deref(), Some("`grace` belongs inside `stop { }`"));
}

#[test]
fn unknown_child_in_restart_and_stop() {
    let diags = errors(&format!(
        "{HEAD}restart {{\n    polcy \"never\"\n}}\nstop {{\n    grace-period \"1s\"\n}}\n"
    ));
    assert_eq!(diags.len(), 2, "{diags:#?}");
    assert_eq!(diags[0].kind, DiagnosticKind::UnknownNode);
    assert_eq!((diags[0].line, diags[0].column), (4, 5));
    assert_eq!(diags[0].help.as_deref(), Some("did you mean policy?"));
    assert_eq!(diags[1].kind, DiagnosticKind::UnknownNode);
    assert_eq!((diags[1].line, diags[1].column), (7, 5));
    assert!(diags[1].message.contains("in `stop { }`"));
}

#[test]
fn duplicate_node() {
    let d = DEMO.one(
        &format!("{HEAD}port 8422\n"),
        DiagnosticKind::DuplicateNode,
        3,
        1,
        "`port` is given twice (first on line 2)",
    );
    assert!(d.help.is_some());
}

#[test]
fn duplicate_env_key() {
    DEMO.one(
        &format!("{HEAD}env {{\n    A \"1\"\n    A \"2\"\n}}\n"),
        DiagnosticKind::DuplicateNode,
        5,
        5,
        "`A` is given twice",
    );
}

#[test]
fn wrong_type_port_string() {
    let d = DEMO.one(
        "command \"/usr/bin/env\"\nport \"8421\"\n",
        DiagnosticKind::WrongType,
        2,
        6,
        "`port` expects an integer, found a string",
    );
    assert_eq!(d.help.as_deref(), Some("remove the quotes: port 8421"));
}

#[test]
fn wrong_type_arg_integer() {
    let d = DEMO.one(
        &format!("{HEAD}args \"--port\" 8421\n"),
        DiagnosticKind::WrongType,
        3,
        15,
        "`args` expects a string, found an integer",
    );
    assert!(d.help.unwrap().contains("quote it: \"8421\""));
}

#[test]
fn wrong_arity_two_ports() {
    DEMO.one(
        "command \"/usr/bin/env\"\nport 8421 8422\n",
        DiagnosticKind::WrongType,
        2,
        11,
        "`port` takes exactly one value, found 2",
    );
}

#[test]
fn wrong_arity_no_value() {
    DEMO.one(
        "command \"/usr/bin/env\"\nport\n",
        DiagnosticKind::WrongType,
        2,
        1,
        "`port` needs a value",
    );
}

#[test]
fn block_where_value_belongs_and_value_where_block_belongs() {
    let diags = errors(&format!("{HEAD}stop \"10s\"\nargs \"a\" {{ b; }}\n"));
    assert_eq!(diags.len(), 2, "{diags:#?}");
    assert_eq!(diags[0].kind, DiagnosticKind::WrongType);
    assert_eq!((diags[0].line, diags[0].column), (3, 6));
    assert!(diags[0].message.contains("`stop` takes a `{ … }` block"));
    assert_eq!(diags[1].kind, DiagnosticKind::WrongType);
    assert_eq!(diags[1].line, 4);
    assert!(
        diags[1]
            .message
            .contains("`args` does not take a `{ … }` block")
    );
}

#[test]
fn property_not_allowed() {
    DEMO.one(
        "command \"/usr/bin/env\"\nport value=8421\n",
        DiagnosticKind::WrongType,
        2,
        6,
        "`port` does not take properties (found `value=…`)",
    );
}

#[test]
fn missing_command() {
    let d = DEMO.one(
        "port 8421\n",
        DiagnosticKind::MissingField,
        1,
        1,
        "missing required field `command`",
    );
    assert!(d.help.unwrap().contains("command \""));
}

#[test]
fn missing_port() {
    DEMO.one(
        "command \"/usr/bin/env\"\n",
        DiagnosticKind::MissingField,
        1,
        1,
        "missing required field `port`",
    );
}

#[test]
fn empty_file_misses_both_fields() {
    let diags = errors("");
    let kinds: Vec<_> = diags.iter().map(|d| (d.kind, d.message.as_str())).collect();
    assert_eq!(
        kinds,
        [
            (
                DiagnosticKind::MissingField,
                "missing required field `command`"
            ),
            (
                DiagnosticKind::MissingField,
                "missing required field `port`"
            ),
        ]
    );
}

#[test]
fn invalid_policy_names_allowed_values() {
    let d = DEMO.one(
        &format!("{HEAD}restart {{\n    policy \"sometimes\"\n}}\n"),
        DiagnosticKind::InvalidValue,
        4,
        12,
        "unknown restart policy \"sometimes\"",
    );
    let help = d.help.unwrap();
    assert!(
        help.contains("\"always\", \"on-failure\", \"never\""),
        "{help}"
    );
}

#[test]
fn policy_typo_suggests() {
    let d = DEMO.one(
        &format!("{HEAD}restart {{ policy on_failure; }}\n"),
        DiagnosticKind::InvalidValue,
        3,
        18,
        "unknown restart policy",
    );
    assert!(d.help.unwrap().starts_with("did you mean \"on-failure\"?"));
}

#[test]
fn port_out_of_range() {
    DEMO.one(
        "command \"/usr/bin/env\"\nport 70000\n",
        DiagnosticKind::InvalidValue,
        2,
        6,
        "port 70000 is out of range",
    );
    DEMO.one(
        "command \"/usr/bin/env\"\nport 0\n",
        DiagnosticKind::InvalidValue,
        2,
        6,
        "port 0 is out of range",
    );
    DEMO.one(
        "command \"/usr/bin/env\"\nport -1\n",
        DiagnosticKind::InvalidValue,
        2,
        6,
        "port -1 is out of range",
    );
}

#[test]
fn negative_retries() {
    DEMO.one(
        &format!("{HEAD}restart {{\n    max-retries-per-minute -1\n}}\n"),
        DiagnosticKind::InvalidValue,
        4,
        28,
        "`max-retries-per-minute` must not be negative, found -1",
    );
}

#[test]
fn relative_working_dir() {
    DEMO.one(
        &format!("{HEAD}working-dir \"project\"\n"),
        DiagnosticKind::InvalidValue,
        3,
        13,
        "`working-dir` must be an absolute path",
    );
}

#[test]
fn bad_duration_carries_humantime_text() {
    let d = DEMO.one(
        &format!("{HEAD}stop {{\n    grace \"ten seconds\"\n}}\n"),
        DiagnosticKind::BadDuration,
        4,
        11,
        "invalid duration \"ten seconds\" for `grace`: ",
    );
    let humantime_text = humantime::parse_duration("ten seconds")
        .unwrap_err()
        .to_string();
    assert!(d.message.ends_with(&humantime_text), "{}", d.message);
}

#[test]
fn duration_without_quotes_is_wrong_type() {
    let d = DEMO.one(
        &format!("{HEAD}stop {{ grace 10; }}\n"),
        DiagnosticKind::WrongType,
        3,
        14,
        "`grace` expects a duration string, found an integer",
    );
    assert_eq!(
        d.help.as_deref(),
        Some("add a unit and quotes: grace \"10s\"")
    );
}

#[test]
fn backoff_initial_over_max() {
    DEMO.one(
        &format!("{HEAD}restart {{\n    backoff-initial \"1m\"\n    backoff-max \"10s\"\n}}\n"),
        DiagnosticKind::InvalidValue,
        4,
        21,
        "`backoff-initial` (1m) is greater than `backoff-max` (10s)",
    );
    // Against the default max.
    DEMO.one(
        &format!("{HEAD}restart {{ backoff-initial \"45s\"; }}\n"),
        DiagnosticKind::InvalidValue,
        3,
        27,
        "(30s, the default)",
    );
}

#[test]
fn bad_name() {
    for bad in ["my server", "über", "a/b", "", ".", ".."] {
        let err = parse_server(bad, Path::new("x.kdl"), HEAD).unwrap_err();
        assert_eq!(err.diagnostics.len(), 1, "{bad:?}");
        let d = &err.diagnostics[0];
        assert_eq!(d.kind, DiagnosticKind::BadName, "{bad:?}");
        assert_eq!(d.file, Path::new("x.kdl"));
        assert!(d.message.contains("invalid server name"), "{}", d.message);
    }
    let err = parse_server("my server", Path::new("my server.kdl"), HEAD).unwrap_err();
    assert_eq!(
        err.diagnostics[0].help.as_deref(),
        Some("rename the file, e.g. to `my-server.kdl`")
    );
    for good in ["insikt", "a.b-c_d", "X9"] {
        assert!(
            parse_server(good, Path::new("x.kdl"), HEAD).is_ok(),
            "{good}"
        );
    }
}

#[test]
fn every_error_in_a_file_is_reported() {
    let diags = errors("port \"1\"\nworking_dir \"/tmp\"\nrestart {\n    policy \"x\"\n}\n");
    let got: Vec<_> = diags.iter().map(|d| (d.kind, d.line)).collect();
    assert_eq!(
        got,
        [
            (DiagnosticKind::MissingField, 1),
            (DiagnosticKind::WrongType, 1),
            (DiagnosticKind::UnknownNode, 2),
            (DiagnosticKind::InvalidValue, 4),
        ]
    );
}

// ---- directories ----

#[test]
fn two_broken_files_both_reported() {
    let dir = data("two-broken");
    let err = load_dir(&dir).unwrap_err();
    let got: Vec<_> = err
        .diagnostics
        .iter()
        .map(|d| {
            (
                d.file.file_name().unwrap().to_str().unwrap(),
                d.kind,
                d.line,
                d.column,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("a-broken.kdl", DiagnosticKind::WrongType, 2, 6),
            ("b-broken.kdl", DiagnosticKind::UnknownNode, 3, 1),
            ("b-broken.kdl", DiagnosticKind::InvalidValue, 5, 12),
        ]
    );
    assert_eq!(err.diagnostics[0].file, dir.join("a-broken.kdl"));
    assert!(!err.only_port_conflicts());
}

#[test]
fn duplicate_port_reported_on_each_file() {
    let dir = data("dup-port");
    let err = load_dir(&dir).unwrap_err();
    assert_eq!(err.diagnostics.len(), 2, "{err}");
    let (a, b) = (&err.diagnostics[0], &err.diagnostics[1]);
    assert_eq!(
        (a.kind, b.kind),
        (DiagnosticKind::DuplicatePort, DiagnosticKind::DuplicatePort)
    );
    assert_eq!(a.file, dir.join("alpha.kdl"));
    assert_eq!((a.line, a.column), (2, 6));
    assert_eq!(a.message, "port 9001 is also used by beta.kdl");
    assert_eq!(b.file, dir.join("beta.kdl"));
    assert_eq!((b.line, b.column), (3, 6));
    assert_eq!(b.message, "port 9001 is also used by alpha.kdl");
    assert!(err.only_port_conflicts());
}

#[test]
fn missing_dir_is_an_io_error_naming_it() {
    let dir = Path::new("/nonexistent/xy-config-test/servers");
    let err = load_dir(dir).unwrap_err();
    assert_eq!(err.diagnostics.len(), 1);
    let d = &err.diagnostics[0];
    assert_eq!(d.kind, DiagnosticKind::Io);
    assert_eq!(d.file, dir);
    assert!(
        d.message.contains("/nonexistent/xy-config-test/servers"),
        "{}",
        d.message
    );
}

#[test]
fn empty_dir_is_valid() {
    let tmp = tempfile::tempdir().unwrap();
    let set = load_dir(tmp.path()).unwrap();
    assert!(set.servers.is_empty());
    assert!(set.warnings.is_empty());
    assert_eq!(set.dir, tmp.path());
    assert_eq!(set.max_grace(), Duration::ZERO);
}

#[test]
fn only_kdl_files_are_read_and_hidden_ones_skipped() {
    let set = load_dir(&data("mixed")).unwrap();
    assert_eq!(set.servers.keys().collect::<Vec<_>>(), ["server-one"]);
}

#[test]
fn bad_file_name_in_dir() {
    let tmp = tempfile::tempdir().unwrap();
    fs::write(tmp.path().join("my server.kdl"), HEAD).unwrap();
    let err = load_dir(tmp.path()).unwrap_err();
    assert_eq!(err.diagnostics.len(), 1);
    assert_eq!(err.diagnostics[0].kind, DiagnosticKind::BadName);
    assert_eq!(err.diagnostics[0].file, tmp.path().join("my server.kdl"));
}

#[test]
fn load_warns_on_missing_command_but_loads() {
    let tmp = tempfile::tempdir().unwrap();
    fs::write(
        tmp.path().join("ghost.kdl"),
        "command \"/nonexistent/bin/ghost-mcp\"\nport 9300\n",
    )
    .unwrap();
    fs::write(
        tmp.path().join("fine.kdl"),
        "command \"/usr/bin/env\"\nport 9301\nstop { grace \"20s\"; }\n",
    )
    .unwrap();
    let set = load_dir(tmp.path()).unwrap();
    assert_eq!(set.servers.len(), 2);
    assert_eq!(set.max_grace(), Duration::from_secs(20));
    assert_eq!(set.warnings.len(), 1, "{:?}", set.warnings);
    let w = &set.warnings[0];
    assert_eq!(w.name, "ghost");
    assert_eq!(w.file, tmp.path().join("ghost.kdl"));
    assert!(
        w.message.contains("/nonexistent/bin/ghost-mcp"),
        "{}",
        w.message
    );
    assert_eq!(
        w.to_string(),
        format!("{}: {}", w.file.display(), w.message)
    );
}

#[test]
fn load_looks_bare_command_up_on_the_env_block_path() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    fs::create_dir(&bin).unwrap();
    make_exec(&bin.join("my-mcp"), 0o755);
    let conf = tmp.path().join("servers");
    fs::create_dir(&conf).unwrap();
    fs::write(
        conf.join("mine.kdl"),
        format!(
            "command \"my-mcp\"\nport 9400\nenv {{\n    PATH \"{}\"\n}}\n",
            bin.display()
        ),
    )
    .unwrap();
    let set = load_dir(&conf).unwrap();
    assert!(set.warnings.is_empty(), "{:?}", set.warnings);
}

// ---- command lookup ----

fn make_exec(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    fs::write(path, "#!/bin/sh\nexit 0\n").unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn command_absolute_ok() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("srv");
    make_exec(&p, 0o700);
    assert_eq!(resolve_command(p.to_str().unwrap(), None), Ok(p));
}

#[test]
fn command_absolute_missing() {
    assert_eq!(
        resolve_command("/nonexistent/bin/x", None),
        Err(CommandLookupError::NotFound("/nonexistent/bin/x".into()))
    );
}

#[test]
fn command_not_executable() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("srv");
    make_exec(&p, 0o644);
    assert_eq!(
        resolve_command(p.to_str().unwrap(), None),
        Err(CommandLookupError::NotExecutable(p))
    );
    // A directory is not an executable file either.
    assert_eq!(
        resolve_command(tmp.path().to_str().unwrap(), None),
        Err(CommandLookupError::NotExecutable(tmp.path().to_path_buf()))
    );
}

#[test]
fn command_bare_name_on_given_path() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    fs::create_dir(&a).unwrap();
    fs::create_dir(&b).unwrap();
    make_exec(&a.join("tool"), 0o644); // found first but not executable
    make_exec(&b.join("tool"), 0o755);
    let path = std::env::join_paths([&a, &b]).unwrap();
    assert_eq!(resolve_command("tool", Some(&path)), Ok(b.join("tool")));
    let only_a = std::env::join_paths([&a]).unwrap();
    assert_eq!(
        resolve_command("tool", Some(&only_a)),
        Err(CommandLookupError::NotExecutable(a.join("tool")))
    );
    assert!(matches!(
        resolve_command("no-such-tool-xy", Some(&path)),
        Err(CommandLookupError::NotFound(_))
    ));
    // Empty PATH entries are not the current directory.
    assert!(matches!(
        resolve_command("tool", Some(OsStr::new(""))),
        Err(CommandLookupError::NotFound(_))
    ));
}

#[test]
fn command_relative_resolves_against_working_dir() {
    let tmp = tempfile::tempdir().unwrap();
    fs::create_dir(tmp.path().join("bin")).unwrap();
    make_exec(&tmp.path().join("bin/srv"), 0o755);
    assert_eq!(
        resolve_command_in("./bin/srv", None, Some(tmp.path())),
        Ok(tmp.path().join("./bin/srv"))
    );
    assert!(resolve_command_in("./bin/srv", None, Some(Path::new("/nonexistent"))).is_err());
}

// ---- settings (what reload compares) ----

#[test]
fn settings_ignore_comments_whitespace_order_and_kdl_version() {
    let base = ok("command \"/usr/bin/env\"\nport 8421\nenv { A \"1\"; B \"2\"; }\n");
    let same = [
        "// a comment\ncommand \"/usr/bin/env\"   // trailing\n\n\nport 8421\nenv {\n  B \"2\"\n  A \"1\"\n}\n",
        "port 8421\ncommand #\"/usr/bin/env\"#\nenv { A \"1\"; B \"2\"; }\n/- stop { grace \"1s\"; }\n",
        "port 8421\ncommand r\"/usr/bin/env\"\nenv { A \"1\"; B \"2\"; }\n",
        // Explicit defaults are the same settings.
        "command \"/usr/bin/env\"\nport 8421\nenv { A \"1\"; B \"2\"; }\nrestart { policy on-failure; }\nstop { grace \"10s\"; }\n",
    ];
    for src in same {
        assert!(ok(src).settings() == base.settings(), "{src}");
    }
}

#[test]
fn settings_change_with_any_value() {
    let changed = [
        HEAD,
        "command \"/usr/bin/envx\"\nport 8421\n",
        "command \"/usr/bin/env\"\nport 8422\n",
        "command \"/usr/bin/env\"\nport 8421\nargs \"x\"\n",
        "command \"/usr/bin/env\"\nport 8421\nenv { A \"\"; }\n",
        "command \"/usr/bin/env\"\nport 8421\nworking-dir \"/\"\n",
        "command \"/usr/bin/env\"\nport 8421\nrestart { policy never; }\n",
        "command \"/usr/bin/env\"\nport 8421\nrestart { backoff-initial \"2s\"; }\n",
        "command \"/usr/bin/env\"\nport 8421\nrestart { backoff-max \"31s\"; }\n",
        "command \"/usr/bin/env\"\nport 8421\nrestart { max-retries-per-minute 6; }\n",
        "command \"/usr/bin/env\"\nport 8421\nstop { grace \"11s\"; }\n",
    ];
    let configs: Vec<_> = changed.iter().map(|src| ok(src)).collect();
    for (i, a) in configs.iter().enumerate() {
        for (j, b) in configs.iter().enumerate().skip(i + 1) {
            assert!(
                a.settings() != b.settings(),
                "{} vs {}",
                changed[i],
                changed[j]
            );
        }
    }
    // Moving a character between args is a change.
    assert!(
        ok(&format!("{HEAD}args \"ab\" \"c\"\n")).settings()
            != ok(&format!("{HEAD}args \"a\" \"bc\"\n")).settings()
    );
}

// ---- rendering ----

#[test]
fn render_shows_file_position_source_line_caret_and_help() {
    let err = DEMO
        .parse(&format!("{HEAD}working_dir \"/tmp\"\n"))
        .unwrap_err();
    let out = err.render(false);
    assert!(out.contains("servers/demo.kdl:3:1"), "{out}");
    assert!(out.contains("working_dir \"/tmp\""), "{out}");
    assert!(
        out.contains("unknown node `working_dir` at the top level"),
        "{out}"
    );
    assert!(out.contains("help: did you mean working-dir?"), "{out}");
    assert!(out.contains("╰── unknown node"), "{out}");
    assert!(
        !out.contains('\u{1b}'),
        "no ANSI escapes without color: {out}"
    );
    let colored = err.render(true);
    assert!(colored.contains('\u{1b}'), "{colored}");
}

#[test]
fn render_without_position_names_the_file() {
    let err = load_dir(Path::new("/nonexistent/xy-render")).unwrap_err();
    let out = err.render(false);
    assert!(
        out.contains("cannot read config directory /nonexistent/xy-render"),
        "{out}"
    );
    let err = parse_server("bad name", Path::new("servers/bad name.kdl"), HEAD).unwrap_err();
    let out = err.render(false);
    assert!(
        out.contains("servers/bad name.kdl: invalid server name"),
        "{out}"
    );
}

#[test]
fn display_is_one_line_per_diagnostic() {
    let err = DEMO.parse("port \"1\"\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "servers/demo.kdl:1:1: missing required field `command` (add a line like: command \"/usr/local/bin/my-mcp\" (or url \"https://…/mcp\" for a remote server))\n\
         servers/demo.kdl:1:6: `port` expects an integer, found a string (remove the quotes: port 1)"
    );
    let _: &dyn std::error::Error = &err;
}

#[test]
fn json_shape() {
    let err = DEMO
        .parse(&format!("{HEAD}working_dir \"/tmp\"\n"))
        .unwrap_err();
    assert_eq!(
        err.to_json(),
        serde_json::json!([{
            "kind": "unknown_node",
            "file": "servers/demo.kdl",
            "line": 3,
            "column": 1,
            "message": "unknown node `working_dir` at the top level",
            "help": "did you mean working-dir?",
        }])
    );
}

#[test]
fn diagnostic_debug_hides_source_text() {
    let err = DEMO
        .parse("command \"/usr/bin/env\"\nport 1\nenv { TOKEN 1.5; }\n")
        .unwrap_err();
    let dbg = format!("{err:?}");
    assert!(!dbg.contains("/usr/bin/env"), "{dbg}");
}

/// Every `*.kdl` shipped as an example loads, including ones added later
/// without a matching `include_str!` above.
#[test]
fn every_example_file_loads() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut n = 0;
    for dir in ["examples/servers", "docs/examples"] {
        for entry in fs::read_dir(root.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension() != Some(OsStr::new("kdl")) {
                continue;
            }
            let stem = path.file_stem().unwrap().to_str().unwrap();
            let src = fs::read_to_string(&path).unwrap();
            if let Err(e) = parse_server(stem, &path, &src) {
                panic!("{}:\n{}", path.display(), e.render(false));
            }
            n += 1;
        }
    }
    assert!(n >= 2, "found only {n} examples");
}
