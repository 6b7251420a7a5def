//! SPEC §16 config: `env-file` (dotenv, precedence, errors with positions in
//! the config and inside the env file), `secrets { }`, `hooks { }` and
//! `notify`, in both KDL versions.

use std::path::{Path, PathBuf};

use xy_core::config::{
    ConfigDiagnostic, HookEvent, SecretSource, ServerConfig, load_dir, parse_server,
};
use xy_core::protocol::DiagnosticKind;

const HEAD: &str = "command \"/usr/bin/env\"\nport 8421\n";

fn parse_in(dir: &Path, src: &str) -> Result<ServerConfig, Vec<ConfigDiagnostic>> {
    let file = dir.join("demo.kdl");
    parse_server("demo", &file, &format!("{HEAD}{src}")).map_err(|e| e.diagnostics)
}

#[track_caller]
fn ok(dir: &Path, src: &str) -> ServerConfig {
    parse_in(dir, src).unwrap_or_else(|d| panic!("expected valid, got {d:#?}"))
}

#[track_caller]
fn errors(dir: &Path, src: &str) -> Vec<ConfigDiagnostic> {
    match parse_in(dir, src) {
        Ok(c) => panic!("expected errors, got {c:?}"),
        Err(d) => d,
    }
}

#[test]
fn env_precedence_files_in_order_then_block() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.env"), "A=from-a\nB=from-a\nC=from-a\n").unwrap();
    std::fs::write(
        dir.path().join("b.env"),
        "# second\nexport B=\"from b\"\nC='from-b'\n",
    )
    .unwrap();
    let c = ok(
        dir.path(),
        "env-file \"a.env\"\nenv {\n  C \"from-block\"\n}\nenv-file \"b.env\"\n",
    );
    assert_eq!(c.env["A"], "from-a");
    assert_eq!(c.env["B"], "from b");
    assert_eq!(c.env["C"], "from-block");
    assert_eq!(
        c.env_files,
        vec![dir.path().join("a.env"), dir.path().join("b.env")]
    );
}

#[test]
fn missing_env_file_names_the_node_position() {
    let dir = tempfile::tempdir().unwrap();
    let d = errors(dir.path(), "env-file \"nope.env\"\n");
    assert_eq!(d.len(), 1, "{d:#?}");
    assert_eq!(d[0].kind, DiagnosticKind::Io);
    assert_eq!(d[0].file, dir.path().join("demo.kdl"));
    assert_eq!((d[0].line, d[0].column), (3, 10));
    assert!(d[0].message.contains("nope.env"), "{}", d[0].message);
}

#[test]
fn bad_line_in_env_file_names_the_env_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let env = dir.path().join("bad.env");
    std::fs::write(&env, "OK=1\n  not a pair\nQ=\"x\" trailing\n").unwrap();
    let d = errors(dir.path(), "env-file \"bad.env\"\n");
    assert_eq!(d.len(), 2, "{d:#?}");
    assert_eq!(d[0].file, env);
    assert_eq!((d[0].line, d[0].column), (2, 3));
    assert_eq!((d[1].line, d[1].column), (3, 7));
    assert!(d[0].message.contains("expected `not=value`"), "{d:#?}");
}

#[test]
fn secrets_of_every_kind_v2_and_v1() {
    let dir = tempfile::tempdir().unwrap();
    let src = "secrets {\n  GH_TOKEN command=\"op\" \"read\" \"op://vault/item/field\"\n  \
               API_KEY keychain=\"svc\" account=\"me\"\n  RAW file=\"tok.txt\"\n}\n";
    for text in [src.to_owned(), format!("/- x\n{src}")] {
        let c = ok(dir.path(), &text);
        let got: Vec<(&str, &SecretSource)> = c
            .secrets
            .iter()
            .map(|s| (s.name.as_str(), &s.source))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "GH_TOKEN",
                    &SecretSource::Command {
                        program: "op".into(),
                        args: vec!["read".into(), "op://vault/item/field".into()],
                    }
                ),
                (
                    "API_KEY",
                    &SecretSource::Keychain {
                        service: "svc".into(),
                        account: Some("me".into()),
                    }
                ),
                ("RAW", &SecretSource::File(dir.path().join("tok.txt"))),
            ]
        );
    }
    // KDL v1 spelling loads too (the v1 fallback).
    let v1 = "secrets {\n  T command=\"op\" \"read\"\n}\nhooks {\n  notify true\n}\n";
    let c = ok(dir.path(), v1);
    assert_eq!(c.secrets.len(), 1);
    assert!(c.hooks.notify);
}

#[test]
fn secret_mistakes_have_positions() {
    let dir = tempfile::tempdir().unwrap();
    let d = errors(
        dir.path(),
        "secrets {\n  bad-name file=\"x\"\n  NONE\n  TWO file=\"a\" command=\"b\"\n  \
         TYPO comand=\"op\"\n  ACC file=\"x\" account=\"me\"\n}\n",
    );
    let found: Vec<(usize, &str)> = d.iter().map(|d| (d.line, d.message.as_str())).collect();
    assert_eq!(d.len(), 5, "{found:#?}");
    assert!(d[0].message.contains("invalid secret name"));
    assert!(d[1].message.contains("needs a source"));
    assert!(d[2].message.contains("more than one source"));
    assert!(d[3].message.contains("unknown secret source `comand=`"));
    assert_eq!(d[3].help.as_deref(), Some("did you mean command=…?"));
    assert!(
        d[4].message
            .contains("`account=` belongs to a keychain secret")
    );
}

#[test]
fn hooks_and_notify() {
    let dir = tempfile::tempdir().unwrap();
    let c = ok(
        dir.path(),
        "hooks {\n  on-failed \"/bin/page\" \"--who\" \"me\"\n  on-recovered \"true\"\n}\nnotify #true\n",
    );
    assert_eq!(
        c.hooks.command(HookEvent::Failed),
        Some(&["/bin/page".to_owned(), "--who".into(), "me".into()][..])
    );
    assert_eq!(
        c.hooks.command(HookEvent::Recovered),
        Some(&["true".to_owned()][..])
    );
    assert_eq!(c.hooks.command(HookEvent::Restart), None);
    assert!(c.hooks.notify);

    let d = errors(
        dir.path(),
        "hooks {\n  on-fail \"x\"\n  on-restart\n}\nnotify \"yes\"\n",
    );
    assert_eq!(d.len(), 3, "{d:#?}");
    assert_eq!(d[0].help.as_deref(), Some("did you mean on-failed?"));
    assert!(d[1].message.contains("`on-restart` needs a command"));
    assert!(d[2].message.contains("expects a boolean"));
}

#[test]
fn settings_change_with_the_new_settings_only() {
    let dir = tempfile::tempdir().unwrap();
    let base = ok(dir.path(), "");
    let same = |s: &str| ok(dir.path(), s).settings() == base.settings();
    assert!(same("// comment\n"));
    assert!(!same("secrets {\n  A file=\"x\"\n}\n"));
    assert!(!same("hooks {\n  on-failed \"x\"\n}\n"));
    assert!(!same("notify #true\n"));
    std::fs::write(dir.path().join("e.env"), "K=1\n").unwrap();
    let one = ok(dir.path(), "env-file \"e.env\"\n");
    std::fs::write(dir.path().join("e.env"), "K=2\n").unwrap();
    assert!(
        ok(dir.path(), "env-file \"e.env\"\n").settings() != one.settings(),
        "an env file's values count"
    );
}

#[test]
fn load_dir_resolves_env_files_against_the_config_dir() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("shared.env"), "X=1\n").unwrap();
    std::fs::write(
        dir.path().join("demo.kdl"),
        format!("{HEAD}env-file \"shared.env\"\n"),
    )
    .unwrap();
    let set = load_dir(dir.path()).unwrap_or_else(|e| panic!("{}", e.render(false)));
    assert_eq!(set.servers["demo"].env["X"], "1");
    // `.env` files are not server configs.
    assert_eq!(set.servers.len(), 1);
    let _: PathBuf = dir.path().join("shared.env");
}
