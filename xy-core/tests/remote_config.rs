//! SPEC §23: a remote server's `url`, `headers { }` and `auth { }` — what
//! parses, the rules that need the whole file (url xor command, secrets
//! declared, no process settings), every mistake with its line and column,
//! and a changed url/headers/auth is a setting that reconnects.

mod support;

use xy_core::config::{HeaderSpec, HeaderValueSpec, OAuthConfig, RemoteConfig};
use xy_core::protocol::DiagnosticKind;
use xy_core::protocol::Transport;

use support::{DEMO, errors, ok};

const REMOTE: &str = "url \"https://mcp.example.com/mcp\"\nport 8421\n";

#[test]
fn a_url_makes_a_remote_server() {
    let c = ok(REMOTE);
    assert_eq!(c.transport, Transport::Remote);
    assert_eq!(c.command, "");
    assert_eq!(
        c.remote,
        Some(RemoteConfig {
            url: "https://mcp.example.com/mcp".into(),
            headers: vec![],
            auth: None,
        })
    );
    // Written out, the transport is accepted.
    let c = ok(&format!("{REMOTE}transport \"remote\"\n"));
    assert_eq!(c.transport, Transport::Remote);
    // Loopback hosts may use plain http.
    for host in ["127.0.0.1:9000", "[::1]:9000", "localhost"] {
        let c = ok(&format!("url \"http://{host}/mcp\"\nport 8421\n"));
        assert_eq!(c.remote.unwrap().url, format!("http://{host}/mcp"));
    }
    // A local server has none.
    assert_eq!(ok("command \"/usr/bin/env\"\nport 8421\n").remote, None);
}

#[test]
fn headers_and_auth_parse() {
    let src = format!(
        "{REMOTE}secrets {{\n  TOKEN file=\"/tmp/token\"\n}}\nheaders {{\n  \
         Authorization secret=\"TOKEN\"\n  X-Team \"core\"\n}}\nauth {{\n  oauth\n  \
         scopes \"repo\" \"read:org\"\n  client-id \"xy-test\"\n}}\n"
    );
    let r = ok(&src).remote.unwrap();
    assert_eq!(
        r.headers,
        vec![
            HeaderSpec {
                name: "Authorization".into(),
                value: HeaderValueSpec::Secret("TOKEN".into())
            },
            HeaderSpec {
                name: "X-Team".into(),
                value: HeaderValueSpec::Literal("core".into())
            },
        ]
    );
    assert_eq!(
        r.auth,
        Some(OAuthConfig {
            scopes: vec!["repo".into(), "read:org".into()],
            client_id: Some("xy-test".into()),
            client_secret: None,
        })
    );
    // The block may come before the secrets it names.
    let src = format!(
        "{REMOTE}headers {{\n  Authorization secret=\"T\"\n}}\nsecrets {{\n  T file=\"/t\"\n}}\n"
    );
    assert_eq!(ok(&src).remote.unwrap().headers.len(), 1);
    assert_eq!(
        ok(&format!("{REMOTE}auth {{\n  oauth\n}}\n"))
            .remote
            .unwrap()
            .auth,
        Some(OAuthConfig::default())
    );
}

/// D149: a confidential client's secret is a §16 secret of the same file;
/// the parsed config carries where to look it up, never a value.
#[test]
fn a_client_secret_names_a_declared_secret() {
    let src = format!(
        "{REMOTE}auth {{\n  oauth\n  client-id \"Iv1.abc\"\n  client-secret secret=\"GH_CLIENT_SECRET\"\n}}\n\
         secrets {{\n  GH_CLIENT_SECRET file=\"/run/gh-secret\"\n}}\n"
    );
    let c = ok(&src);
    let auth = c.remote.clone().unwrap().auth.unwrap();
    assert_eq!(auth.client_id.as_deref(), Some("Iv1.abc"));
    let spec = auth.client_secret.expect("client_secret parsed");
    assert_eq!(spec.name, "GH_CLIENT_SECRET");
    assert_eq!(
        &spec,
        c.secrets
            .iter()
            .find(|s| s.name == "GH_CLIENT_SECRET")
            .unwrap()
    );
    // Naming another secret, or none, is another setting.
    let without = ok(&format!(
        "{REMOTE}auth {{\n  oauth\n  client-id \"Iv1.abc\"\n}}\n\
         secrets {{\n  GH_CLIENT_SECRET file=\"/run/gh-secret\"\n}}\n"
    ));
    assert!(c.settings() != without.settings());
}

#[test]
fn mistakes_name_line_and_column() {
    let cases: &[(&str, DiagnosticKind, usize, usize, &str)] = &[
        (
            "url \"http://example.com/mcp\"\nport 8421\n",
            DiagnosticKind::InvalidValue,
            1,
            5,
            "only loopback hosts",
        ),
        (
            "url \"ftp://example.com/mcp\"\nport 8421\n",
            DiagnosticKind::InvalidValue,
            1,
            5,
            "must be https://",
        ),
        (
            "url \"not a url\"\nport 8421\n",
            DiagnosticKind::InvalidValue,
            1,
            5,
            "is not a URL",
        ),
        (
            "url \"https://me:pw@example.com/mcp\"\nport 8421\n",
            DiagnosticKind::InvalidValue,
            1,
            5,
            "user name or password",
        ),
        (
            "url \"https://example.com/mcp\"\ncommand \"/bin/x\"\nport 8421\n",
            DiagnosticKind::InvalidValue,
            2,
            1,
            "given together",
        ),
        (
            "url \"https://example.com/mcp\"\ntransport \"stdio\"\nport 8421\n",
            DiagnosticKind::InvalidValue,
            2,
            11,
            "transport \"remote\"",
        ),
        (
            "command \"/bin/x\"\ntransport \"remote\"\nport 8421\n",
            DiagnosticKind::MissingField,
            2,
            11,
            "needs `url",
        ),
        (
            "command \"/bin/x\"\nport 8421\nheaders {\n  X-A \"b\"\n}\n",
            DiagnosticKind::InvalidValue,
            3,
            1,
            "remote servers",
        ),
        (
            "url \"https://example.com/mcp\"\nport 8421\nargs \"--x\"\n",
            DiagnosticKind::InvalidValue,
            3,
            1,
            "does not apply to a remote server",
        ),
        (
            "url \"https://example.com/mcp\"\nport 8421\nsandbox {\n}\n",
            DiagnosticKind::InvalidValue,
            3,
            1,
            "does not apply to a remote server",
        ),
        (
            "url \"https://example.com/mcp\"\nport 8421\non-demand {\n}\n",
            DiagnosticKind::InvalidValue,
            3,
            1,
            "does not apply to a remote server",
        ),
        (
            "url \"https://example.com/mcp\"\nport 8421\nheaders {\n  Authorization secret=\"NOPE\"\n}\n",
            DiagnosticKind::InvalidValue,
            4,
            17,
            "does not declare",
        ),
        (
            "url \"https://example.com/mcp\"\nport 8421\nheaders {\n  Host \"x\"\n}\n",
            DiagnosticKind::InvalidValue,
            4,
            3,
            "set by xy itself",
        ),
        (
            "url \"https://example.com/mcp\"\nport 8421\nheaders {\n  X-A 1\n}\n",
            DiagnosticKind::WrongType,
            4,
            7,
            "expects a string",
        ),
        (
            "url \"https://example.com/mcp\"\nport 8421\nauth {\n  scopes \"a\"\n}\n",
            DiagnosticKind::MissingField,
            3,
            1,
            "needs `oauth`",
        ),
        (
            "url \"https://example.com/mcp\"\nport 8421\nauth {\n  oauth\n  client-secret secret=\"S\"\n}\nsecrets {\n  S file=\"/s\"\n}\n",
            DiagnosticKind::MissingField,
            5,
            17,
            "needs `client-id`",
        ),
        (
            "url \"https://example.com/mcp\"\nport 8421\nauth {\n  oauth\n  client-id \"c\"\n  client-secret secret=\"NOPE\"\n}\n",
            DiagnosticKind::InvalidValue,
            6,
            17,
            "`client-secret` names secret \"NOPE\", which `secrets { }` does not declare",
        ),
        (
            "url \"https://example.com/mcp\"\nport 8421\nauth {\n  oauth\n  client-id \"c\"\n  client-secret \"hunter2\"\n}\n",
            DiagnosticKind::WrongType,
            6,
            17,
            "never written in the file",
        ),
        (
            "url \"https://example.com/mcp\"\nport 8421\nauth {\n  oauth\n  scope \"a\"\n}\n",
            DiagnosticKind::UnknownNode,
            5,
            3,
            "scope",
        ),
    ];
    for (src, kind, line, column, needle) in cases {
        let d = DEMO.one(src, *kind, *line, *column, needle);
        assert!(d.help.is_some(), "{src:?}: every mistake has help");
    }
    // Neither `command` nor `url`: the missing field names both.
    let d = errors("port 8421\n");
    assert!(
        d.iter().any(|d| d.kind == DiagnosticKind::MissingField
            && d.help.as_deref().unwrap_or("").contains("url")),
        "{d:#?}"
    );
}

#[test]
fn a_changed_url_header_or_auth_changes_the_settings() {
    let a = ok(REMOTE);
    let b = ok("url \"https://mcp.example.com/other\"\nport 8421\n");
    assert!(a.settings() != b.settings());
    let c = ok(&format!("{REMOTE}headers {{\n  X-A \"1\"\n}}\n"));
    assert!(a.settings() != c.settings());
    let d = ok(&format!("{REMOTE}auth {{\n  oauth\n}}\n"));
    assert!(a.settings() != d.settings());
    // Formatting alone changes nothing.
    let e = ok("// a comment\nurl  \"https://mcp.example.com/mcp\"\n\nport 8421\n");
    assert!(a.settings() == e.settings());
}

/// `status` shows the probe xy runs, so a remote without `health { }` has
/// one (an `mcp` probe of its upstream) and a local server without it none.
#[test]
fn a_remote_is_always_probed_and_a_health_block_still_wins() {
    use xy_core::config::ProbeKind;
    let h = ok(REMOTE).effective_health().expect("a remote is probed");
    assert_eq!(h.probe, ProbeKind::Mcp("/mcp".into()));
    let c = ok(&format!(
        "{REMOTE}health {{\n    tcp\n    interval \"3s\"\n}}\n"
    ));
    let h = c.effective_health().unwrap();
    assert_eq!(h.probe, ProbeKind::Tcp);
    assert_eq!(h.interval, std::time::Duration::from_secs(3));
    assert_eq!(
        ok("command \"/usr/bin/env\"\nport 8421\n").effective_health(),
        None
    );
}
