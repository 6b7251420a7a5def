//! The KDL walk of `xy.kdl` (the types are `config/settings.rs`): the same
//! diagnostics as a server file (unknown nodes with suggestions, duplicates,
//! wrong types, values out of range), every mistake in one pass.

use std::path::Path;
use std::sync::Arc;

use kdl::{KdlDocument, KdlNode};

use super::cx::Cx;
use crate::config::ConfigErrors;
use crate::config::diagnostic::ConfigDiagnostic;
use crate::config::settings::DaemonSettings;
use crate::protocol::DiagnosticKind;

/// Top-level nodes of `xy.kdl`.
pub(super) const SETTINGS_FIELDS: &[&str] = &[
    "gateway",
    "firewall",
    "min-age",
    "oauth-client-metadata-url",
    "search",
];
/// Children of `gateway { … }`.
const GATEWAY_FIELDS: &[&str] = &["port"];
/// Children of `search { … }`.
const SEARCH_FIELDS: &[&str] = &["model"];

/// Where `gateway { port … }` is written: its value's bytes in the text.
pub(in crate::config) type PortAt = (std::ops::Range<usize>, Arc<str>);

/// Parses the text of a settings file (`file` names it in diagnostics).
pub fn parse_settings(file: &Path, src: &str) -> Result<DaemonSettings, ConfigErrors> {
    parse_at(file, src).map(|(s, _)| s)
}

/// [`parse_settings`], and where the file sets the gateway port.
pub(in crate::config) fn parse_at(
    file: &Path,
    src: &str,
) -> Result<(DaemonSettings, Option<PortAt>), ConfigErrors> {
    let (settings, diags, at) = parse(file, src);
    if diags.is_empty() {
        Ok((settings, at))
    } else {
        Err(ConfigErrors::new(diags))
    }
}

/// The settings (defaults where a value had an error), every diagnostic,
/// and where the gateway port was set, if it was.
fn parse(file: &Path, src: &str) -> (DaemonSettings, Vec<ConfigDiagnostic>, Option<PortAt>) {
    let mut cx = Cx {
        file,
        source: Arc::from(src),
        diags: Vec::new(),
    };
    let mut settings = DaemonSettings::default();
    let doc = match KdlDocument::parse(src) {
        Ok(doc) => doc,
        Err(err) => {
            super::cx::syntax_errors(&mut cx, err);
            return (settings, cx.diags, None);
        }
    };
    let mut seen: Vec<(&str, usize)> = Vec::new();
    let mut port_at = None;
    for node in doc.nodes() {
        let key = node.name().value();
        if !SETTINGS_FIELDS.contains(&key) {
            cx.unknown_node(node, SETTINGS_FIELDS, "at the top level of xy.kdl");
            continue;
        }
        if cx.duplicate(node, &mut seen) {
            continue;
        }
        match key {
            "gateway" => {
                port_at = gateway(&mut cx, node, &mut settings)
                    .map(|span| (super::cx::range(span), Arc::clone(&cx.source)));
            }
            "firewall" => {
                if let Some(m) = super::firewall::parse_firewall(&mut cx, node) {
                    settings.firewall_default = m;
                }
            }
            "min-age" => {
                if let Some((d, _)) = cx.duration_node(node) {
                    settings.min_age = Some(d);
                }
            }
            "oauth-client-metadata-url" => {
                settings.oauth_client_metadata_url = client_metadata_url(&mut cx, node);
            }
            "search" => settings.search_model = search(&mut cx, node),
            _ => unreachable!("checked against SETTINGS_FIELDS"),
        }
    }
    (settings, cx.diags, port_at)
}

/// Reads `gateway { }`; returns the span of a valid port's value.
fn gateway(
    cx: &mut Cx<'_>,
    node: &KdlNode,
    settings: &mut DaemonSettings,
) -> Option<miette::SourceSpan> {
    let mut seen: Vec<(&str, usize)> = Vec::new();
    let mut at = None;
    for child in cx.block(node) {
        let key = child.name().value();
        if !GATEWAY_FIELDS.contains(&key) {
            cx.unknown_node(child, GATEWAY_FIELDS, "in `gateway { }`");
            continue;
        }
        if cx.duplicate(child, &mut seen) {
            continue;
        }
        let example = "port 8399";
        if let Some(e) = cx.single(child, example)
            && let Some(n) = cx.integer(child, e, example)
        {
            match u16::try_from(n) {
                Ok(p) => {
                    settings.gateway.port = p;
                    at = Some(e.span());
                }
                Err(_) => cx.push(
                    cx.diag(
                        DiagnosticKind::InvalidValue,
                        e.span(),
                        format!("gateway port {n} is out of range"),
                    )
                    .with_label("not in 0..=65535")
                    .with_help("use a TCP port between 1 and 65535, or 0 to turn the gateway off"),
                ),
            }
        }
    }
    at
}

/// `search { model "/abs/path" }` (SPEC §26): the static-embedding model
/// tool search may add. Only the path's form is checked here; the file is
/// read when the daemon builds its search index, which names the file in
/// its own error.
fn search(cx: &mut Cx<'_>, node: &KdlNode) -> Option<std::path::PathBuf> {
    let example = "model \"/opt/models/wordllama\"";
    let mut seen: Vec<(&str, usize)> = Vec::new();
    let mut model = None;
    for child in cx.block(node) {
        let key = child.name().value();
        if !SEARCH_FIELDS.contains(&key) {
            cx.unknown_node(child, SEARCH_FIELDS, "in `search { }`");
            continue;
        }
        if cx.duplicate(child, &mut seen) {
            continue;
        }
        let Some(e) = cx.single(child, example) else {
            continue;
        };
        let Some(s) = cx.string(child, e, example) else {
            continue;
        };
        if !cx.no_nul(e, &s, "a model path") {
            continue;
        }
        let path = std::path::PathBuf::from(&s);
        if path.is_absolute() {
            model = Some(path);
        } else {
            cx.push(
                cx.diag(
                    DiagnosticKind::InvalidValue,
                    e.span(),
                    format!("search model {s:?} is not an absolute path"),
                )
                .with_label("relative")
                .with_help("name the model's directory or .safetensors file by its absolute path"),
            );
        }
    }
    model
}

const CIMD_EXAMPLE: &str = "oauth-client-metadata-url \"https://example.com/xy/client.json\"";

/// `oauth-client-metadata-url "…"`: an `https://` URL with a path (a
/// Client ID Metadata Document's URL is the client id, SEP-991), no user
/// name, password or fragment.
fn client_metadata_url(cx: &mut Cx<'_>, node: &KdlNode) -> Option<String> {
    let e = cx.single(node, CIMD_EXAMPLE)?;
    let s = cx.string(node, e, CIMD_EXAMPLE)?;
    let problem = match url::Url::parse(&s) {
        Err(err) => Some((format!("{s:?} is not a URL: {err}"), "not a URL")),
        Ok(u) if u.scheme() != "https" || u.host_str().is_none_or(str::is_empty) => {
            Some((format!("{s:?} is not an https:// URL"), "not https"))
        }
        Ok(u) if u.path().len() <= 1 => Some((
            format!("{s:?} has no path: a Client ID Metadata Document URL names a document"),
            "no path",
        )),
        Ok(u) if !u.username().is_empty() || u.password().is_some() => Some((
            format!("{s:?} carries a user name or password"),
            "credentials in the URL",
        )),
        Ok(u) if u.fragment().is_some() => Some((format!("{s:?} has a #fragment"), "fragment")),
        Ok(_) => None,
    };
    match problem {
        None => Some(s),
        Some((message, label)) => {
            let d = cx
                .diag(
                    DiagnosticKind::InvalidValue,
                    e.span(),
                    format!("`oauth-client-metadata-url` {message}"),
                )
                .with_label(label)
                .with_help(format!("e.g. {CIMD_EXAMPLE}"));
            cx.push(d);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::firewall::FirewallMode;
    use std::path::Path;

    use super::*;
    use crate::config::load_settings;
    use crate::config::settings::DEFAULT_GATEWAY_PORT;

    fn errors(src: &str) -> Vec<ConfigDiagnostic> {
        parse(Path::new("/c/xy.kdl"), src).1
    }

    fn one_error(src: &str) -> ConfigDiagnostic {
        let mut d = errors(src);
        assert_eq!(d.len(), 1, "{d:#?}");
        d.pop().unwrap()
    }

    #[test]
    fn empty_is_the_defaults() {
        let s = parse_settings(Path::new("/c/xy.kdl"), "").unwrap();
        assert_eq!(s, DaemonSettings::default());
        assert_eq!(s.gateway.port, DEFAULT_GATEWAY_PORT);
        assert_eq!(s.firewall_default, FirewallMode::Pin);
    }

    #[test]
    fn every_setting_is_read() {
        let s = parse_settings(
            Path::new("/c/xy.kdl"),
            "gateway {\n  port 9000\n}\nfirewall { mode \"review\"; }\n",
        )
        .unwrap();
        assert_eq!(s.gateway.port, 9000);
        assert_eq!(s.gateway.port(), Some(9000));
        assert_eq!(s.firewall_default, FirewallMode::Review);
        assert_eq!(s.min_age, None);
        let s = parse_settings(Path::new("/c/xy.kdl"), "min-age \"7d\"\n").unwrap();
        assert_eq!(s.min_age, Some(std::time::Duration::from_secs(7 * 86400)));
        let d = one_error("min-age \"soon\"");
        assert_eq!(d.kind, DiagnosticKind::BadDuration);
        let off = parse_settings(Path::new("/c/xy.kdl"), "gateway { port 0; }").unwrap();
        assert_eq!(off.gateway.port(), None);
    }

    #[test]
    fn the_client_metadata_url_is_https_with_a_path() {
        let s = parse_settings(
            Path::new("/c/xy.kdl"),
            "oauth-client-metadata-url \"https://xy.example/oauth/client.json\"\n",
        )
        .unwrap();
        assert_eq!(
            s.oauth_client_metadata_url.as_deref(),
            Some("https://xy.example/oauth/client.json")
        );
        assert_eq!(DaemonSettings::default().oauth_client_metadata_url, None);
        for (bad, label) in [
            ("http://xy.example/client.json", "not https"),
            ("https://xy.example", "no path"),
            ("https://xy.example/", "no path"),
            ("https://u:p@xy.example/c.json", "credentials in the URL"),
            ("https://xy.example/c.json#x", "fragment"),
            ("client.json", "not a URL"),
        ] {
            let d = one_error(&format!("\n  oauth-client-metadata-url \"{bad}\"\n"));
            assert_eq!(d.kind, DiagnosticKind::InvalidValue, "{bad}");
            assert_eq!(d.label.as_deref(), Some(label), "{bad}");
            assert!(
                d.message.contains("oauth-client-metadata-url"),
                "{}",
                d.message
            );
            assert_eq!((d.line, d.column), (2, 29), "{bad}");
        }
        let d = one_error("oauth-client-metadata-url 1");
        assert_eq!(d.kind, DiagnosticKind::WrongType);
        let d =
            one_error("oauth-client-metadata-url \"https://a.example/1\" \"https://a.example/2\"");
        assert!(d.line == 1, "{d:?}");
    }

    #[test]
    fn kdl_v1_is_accepted() {
        let s = parse_settings(Path::new("/c/xy.kdl"), "firewall {\n mode \"off\"\n}\n").unwrap();
        assert_eq!(s.firewall_default, FirewallMode::Off);
    }

    #[test]
    fn an_unknown_node_gets_a_suggestion_and_its_place() {
        let d = one_error("gatway { port 1; }");
        assert_eq!(d.kind, DiagnosticKind::UnknownNode);
        assert_eq!(d.help.as_deref(), Some("did you mean gateway?"));
        assert_eq!((d.line, d.column), (1, 1));
        let d = one_error("gateway {\n  prot 9000\n}");
        assert_eq!(d.help.as_deref(), Some("did you mean port?"));
        assert_eq!((d.line, d.column), (2, 3));
    }

    #[test]
    fn bad_values_are_named() {
        let d = one_error("gateway { port 70000; }");
        assert!(d.message.contains("70000"), "{}", d.message);
        let d = one_error("gateway { port \"8399\"; }");
        assert_eq!(d.kind, DiagnosticKind::WrongType);
        let d = one_error("gateway { port -1; }");
        assert_eq!(d.kind, DiagnosticKind::InvalidValue);
        let d = one_error("firewall { mode \"pinn\"; }");
        assert_eq!(d.help.as_deref(), Some("did you mean \"pin\"?"));
        let d = one_error("firewall { mode \"strict\"; }");
        assert!(
            d.help
                .as_deref()
                .unwrap()
                .contains("\"review\" (hold every tool until approved)")
        );
        let d = one_error("firewall { mode 1; }");
        assert_eq!(d.kind, DiagnosticKind::WrongType);
        // KDL v2 takes a bare word as a string.
        assert!(errors("firewall { mode pin; }").is_empty());
        assert!(
            errors("gateway { port 1")
                .iter()
                .all(|d| d.kind == DiagnosticKind::Syntax)
        );
    }

    #[test]
    fn every_mistake_at_once() {
        let d = errors("gateway { port 1; port 2; }\ngateway { }\nfirewall \"pin\"\nnope 1\n");
        assert_eq!(d.len(), 4, "{d:#?}");
        assert!(d.iter().all(|d| d.line > 0 && d.column > 0));
    }

    #[test]
    fn a_missing_file_is_the_defaults_and_a_directory_is_an_error() {
        let dir = std::env::temp_dir();
        let missing = dir.join("xy-settings-test-does-not-exist.kdl");
        assert_eq!(load_settings(&missing).unwrap(), DaemonSettings::default());
        assert!(load_settings(&dir).is_err());
    }
}
