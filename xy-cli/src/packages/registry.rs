//! `add --registry <server.json | name>`: an MCP Registry entry (schema
//! 2025-12-11), read from a local file or looked up by name in a registry's
//! API v0.1 (the official one by default, `--registry-url` for a private
//! one), turned into what `--npm`/`--pypi` would install: the first
//! `npm`/`pypi` package with a stdio transport, its `runtimeArguments`
//! (before the entry point) and `packageArguments` (after it), its plain
//! `environmentVariables` as `env`, and its secret ones as `secrets { NAME
//! file="…" }` placeholders the user fills in — never a value in the
//! server file.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use xy_core::package::Ecosystem;

use crate::error::{Exit, Failure};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ServerJson {
    #[serde(default)]
    packages: Vec<Package>,
    #[serde(default)]
    remotes: Vec<Remote>,
}

#[derive(Debug, Deserialize)]
struct Remote {
    #[serde(rename = "type")]
    kind: String,
    url: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Package {
    registry_type: String,
    registry_base_url: Option<String>,
    identifier: String,
    version: Option<String>,
    transport: Option<Transport>,
    #[serde(default)]
    runtime_arguments: Vec<Argument>,
    #[serde(default)]
    package_arguments: Vec<Argument>,
    #[serde(default)]
    environment_variables: Vec<EnvVar>,
}

#[derive(Debug, Deserialize)]
struct Transport {
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Argument {
    #[serde(rename = "type")]
    kind: String,
    name: Option<String>,
    value: Option<String>,
    default: Option<String>,
    value_hint: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct EnvVar {
    name: String,
    value: Option<String>,
    default: Option<String>,
    #[serde(default)]
    is_secret: bool,
    #[serde(default)]
    is_required: bool,
}

/// What a `server.json` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The ecosystem of the chosen package.
    pub(crate) ecosystem: Ecosystem,
    /// `<pkg>@<ver>` / `<pkg>==<ver>`, or the bare name.
    pub(crate) spec: String,
    /// Arguments for the runtime, before the entry point.
    pub(crate) runtime_args: Vec<String>,
    /// Arguments for the entry point.
    pub(crate) package_args: Vec<String>,
    /// Plain variables with a value or default.
    pub(crate) env: BTreeMap<String, String>,
    /// Secret variables: placeholders to fill in.
    pub(crate) secrets: Vec<String>,
    /// What the user must still provide (arguments without a value,
    /// required plain variables without one).
    pub(crate) todo: Vec<String>,
    /// Where it came from, for the plan: the file, or the registry entry
    /// (`<name> <version> from <registry>`).
    pub(crate) source: String,
    /// What the registry says about the entry (deprecated, …).
    pub(crate) notes: Vec<String>,
}

/// The official MCP Registry.
pub(crate) const DEFAULT_REGISTRY: &str = "https://registry.modelcontextprotocol.io";

/// How long one registry request may take.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(30);

/// How many search results are read (and listed when ambiguous).
const SEARCH_LIMIT: usize = 30;

/// `--registry <arg>`: a file when one exists there (or the argument ends
/// in `.json` or starts like a path), else a server name looked up in `base` (`None`: the
/// official registry). A name with a `/` (`io.github.owner/server`,
/// optionally `@<version>`) is fetched exactly; a bare word is searched
/// for and must match one server.
pub(crate) fn load(arg: &str, base: Option<&str>) -> Result<Entry, Failure> {
    let path = Path::new(arg);
    // Server names start with a letter or digit; a path-like word that is
    // no file is reported as a missing file, not looked up.
    if path.is_file() || arg.ends_with(".json") || arg.starts_with(['/', '.', '~']) {
        return read(path);
    }
    let base = base.unwrap_or(DEFAULT_REGISTRY).trim_end_matches('/');
    check_base(base).map_err(|e| Failure::new(Exit::Operational, e))?;
    let (name, version) = match arg.split_once('@') {
        Some((n, v)) => (n, Some(v)),
        None => (arg, None),
    };
    let found = if name.contains('/') {
        fetch(base, name, version)
    } else if version.is_some() {
        Err(format!(
            "{arg}: a version needs the server's full name (`<namespace>/<name>@<version>`)"
        ))
    } else {
        search(base, name)
    };
    let (detail, meta) = found.map_err(|e| Failure::new(Exit::Operational, e))?;
    let sj: ServerJson = serde_json::from_value(detail.clone()).map_err(|e| {
        Failure::new(
            Exit::Operational,
            format!("{base}: the entry for {name} is not a server.json: {e}"),
        )
    })?;
    let full = detail.get("name").and_then(|n| n.as_str()).unwrap_or(name);
    let ver = detail
        .get("version")
        .and_then(|n| n.as_str())
        .unwrap_or("?");
    let mut e = from_server_json(sj)
        .map_err(|e| Failure::new(Exit::Operational, format!("{full} {ver} ({base}): {e}")))?;
    e.source = format!("{full} {ver} from {base}");
    let status = status_notes(&meta)
        .map_err(|m| Failure::new(Exit::Operational, format!("{full} {ver} ({base}): {m}")))?;
    e.notes.extend(status);
    Ok(e)
}

/// A registry's base URL: `https://`, or plain `http://` for a loopback
/// host only (what it answers decides which package is installed).
fn check_base(base: &str) -> Result<(), String> {
    if base.starts_with("https://") {
        return Ok(());
    }
    let host = base
        .strip_prefix("http://")
        .map(|r| r.split(['/', '?']).next().unwrap_or(""))
        .map(|h| {
            // `[::1]:8080`, `127.0.0.1:8080`, `localhost`.
            match h.strip_prefix('[') {
                Some(v6) => v6.split(']').next().unwrap_or(""),
                None => h.rsplit_once(':').map_or(h, |(a, _)| a),
            }
        });
    match host {
        Some(h)
            if h == "localhost"
                || h.parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback()) =>
        {
            Ok(())
        }
        Some(_) => Err(format!(
            "--registry-url {base}: plain http is allowed only for a loopback host; use https://"
        )),
        None => Err(format!(
            "--registry-url {base}: not an http(s) URL (e.g. https://registry.example.com)"
        )),
    }
}

/// `GET /v0.1/servers/{name}/versions/{version|latest}`: the entry and
/// its registry `_meta`.
fn fetch(
    base: &str,
    name: &str,
    version: Option<&str>,
) -> Result<(serde_json::Value, serde_json::Value), String> {
    let url = format!(
        "{base}/v0.1/servers/{}/versions/{}",
        encode(name),
        encode(version.unwrap_or("latest"))
    );
    let (status, body) = crate::http::get_json(&url, LOOKUP_TIMEOUT)?;
    match (status, body) {
        (200, Some(mut b)) => {
            let detail = b
                .get_mut("server")
                .map(serde_json::Value::take)
                .ok_or_else(|| format!("{url} answered without a `server`"))?;
            let meta = b.get_mut("_meta").map(serde_json::Value::take);
            Ok((detail, meta.unwrap_or_default()))
        }
        (404, _) => {
            let what = match version {
                Some(v) => format!("{name} has no version {v} in {base}"),
                None => format!("{name} is not in {base}"),
            };
            // Names that look close, to save a round of guessing.
            let short = name.rsplit('/').next().unwrap_or(name);
            let close = list(base, short)
                .map(|l| l.into_iter().map(|(n, _)| n).take(5).collect::<Vec<_>>())
                .unwrap_or_default();
            Err(if close.is_empty() || version.is_some() {
                what
            } else {
                format!("{what}; similar names: {}", close.join(", "))
            })
        }
        (s, b) => Err(format!("{url} answered {s}{}", problem(b.as_ref()))),
    }
}

/// `GET /v0.1/servers?search=<word>&version=latest`: the one server whose
/// name contains `word`, else an error listing them.
fn search(base: &str, word: &str) -> Result<(serde_json::Value, serde_json::Value), String> {
    let mut found = list(base, word)?;
    match found.len() {
        0 => Err(format!("no server in {base} has {word:?} in its name")),
        1 => Ok(found.remove(0).1),
        n => {
            let names: Vec<String> = found
                .iter()
                .map(|(name, (d, _))| {
                    let desc = d.get("description").and_then(|v| v.as_str()).unwrap_or("");
                    format!("  {name}  {desc}")
                })
                .collect();
            Err(format!(
                "{} servers in {base} have {word:?} in their name; pass the full name                  (`--registry <namespace>/<name>`):\n{}",
                if n >= SEARCH_LIMIT {
                    format!("{n} or more")
                } else {
                    n.to_string()
                },
                names.join("\n")
            ))
        }
    }
}

/// The latest version of each server whose name contains `word`, by name,
/// deleted ones left out.
#[allow(clippy::type_complexity)]
fn list(
    base: &str,
    word: &str,
) -> Result<Vec<(String, (serde_json::Value, serde_json::Value))>, String> {
    let url = format!(
        "{base}/v0.1/servers?search={}&version=latest&limit={SEARCH_LIMIT}",
        encode(word)
    );
    let (status, body) = crate::http::get_json(&url, LOOKUP_TIMEOUT)?;
    let body = match (status, body) {
        (200, Some(b)) => b,
        (s, b) => return Err(format!("{url} answered {s}{}", problem(b.as_ref()))),
    };
    let servers = body
        .get("servers")
        .and_then(|s| s.as_array())
        .ok_or_else(|| format!("{url} answered without a `servers` list"))?;
    let mut out: BTreeMap<String, (serde_json::Value, serde_json::Value)> = BTreeMap::new();
    for r in servers {
        let Some(detail) = r.get("server") else {
            continue;
        };
        let meta = r.get("_meta").cloned().unwrap_or_default();
        if official(&meta, "status") == Some("deleted") {
            continue;
        }
        if let Some(n) = detail.get("name").and_then(|n| n.as_str()) {
            out.entry(n.to_owned())
                .or_insert_with(|| (detail.clone(), meta));
        }
    }
    Ok(out.into_iter().collect())
}

/// A field of the registry's own metadata about an entry.
fn official<'a>(meta: &'a serde_json::Value, key: &str) -> Option<&'a str> {
    meta.get("io.modelcontextprotocol.registry/official")?
        .get(key)?
        .as_str()
}

/// A deleted entry is refused; a deprecated one is said.
fn status_notes(meta: &serde_json::Value) -> Result<Vec<String>, String> {
    let msg = official(meta, "statusMessage")
        .map(|m| format!(": {m}"))
        .unwrap_or_default();
    match official(meta, "status") {
        Some("deleted") => Err(format!("the registry marks it deleted{msg}")),
        Some("deprecated") => Ok(vec![format!("the registry marks it deprecated{msg}")]),
        _ => Ok(Vec::new()),
    }
}

/// `: <why>` from an error body (`{"error": …}` or RFC 9457's `detail`).
fn problem(body: Option<&serde_json::Value>) -> String {
    body.and_then(|b| {
        b.get("detail")
            .or_else(|| b.get("error"))
            .or_else(|| b.get("title"))
    })
    .and_then(|v| v.as_str())
    .map(|s| format!(": {s}"))
    .unwrap_or_default()
}

/// Percent-encodes `s` as one path segment or query value (RFC 3986
/// unreserved characters stay).
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Reads `file`.
pub(crate) fn read(file: &Path) -> Result<Entry, Failure> {
    let text = std::fs::read_to_string(file).map_err(|e| {
        Failure::new(
            Exit::Operational,
            format!("cannot read {}: {e}", file.display()),
        )
    })?;
    let mut e = parse(&text)
        .map_err(|e| Failure::new(Exit::Operational, format!("{}: {e}", file.display())))?;
    e.source = file.display().to_string();
    Ok(e)
}

fn parse(text: &str) -> Result<Entry, String> {
    let sj: ServerJson =
        serde_json::from_str(text).map_err(|e| format!("not a server.json: {e}"))?;
    from_server_json(sj)
}

fn from_server_json(sj: ServerJson) -> Result<Entry, String> {
    let supported = |p: &&Package| {
        matches!(p.registry_type.as_str(), "npm" | "pypi")
            && p.transport.as_ref().is_none_or(|t| t.kind == "stdio")
    };
    let Some(p) = sj.packages.iter().find(supported) else {
        let kinds: Vec<String> = sj
            .packages
            .iter()
            .map(|p| {
                format!(
                    "{} ({})",
                    p.registry_type,
                    p.transport.as_ref().map_or("stdio", |t| t.kind.as_str())
                )
            })
            .collect();
        // Remote servers are `xyctl add <name> --url` (SPEC §23), not an install.
        let remote = sj.remotes.first().map(|r| {
            format!(
                "it is offered as a remote server ({} {}): add it with `xyctl add <name> --url {}`",
                r.kind, r.url, r.url
            )
        });
        return Err(match (kinds.is_empty(), remote) {
            (true, Some(remote)) => format!("not a package to install: {remote}"),
            (true, None) => "it lists no packages and no remotes".to_owned(),
            (false, remote) => format!(
                "no npm or pypi package with a stdio transport: its packages are {} (not \
                 supported yet){}",
                kinds.join(", "),
                remote.map(|r| format!("; {r}")).unwrap_or_default()
            ),
        });
    };
    let ecosystem = if p.registry_type == "npm" {
        Ecosystem::Npm
    } else {
        Ecosystem::Pypi
    };
    let spec = match &p.version {
        Some(v) => format!("{}{}{v}", p.identifier, ecosystem.separator()),
        None => p.identifier.clone(),
    };
    let mut notes = Vec::new();
    let public = match ecosystem {
        Ecosystem::Npm => ("https://registry.npmjs.org", "npm"),
        Ecosystem::Pypi => ("https://pypi.org", "pip"),
    };
    if let Some(u) = &p.registry_base_url
        && u.trim_end_matches('/') != public.0
    {
        notes.push(format!(
            "the entry names the package registry {u}; the package is installed from {}'s \
             configured registry",
            public.1
        ));
    }
    let mut todo = Vec::new();
    let runtime_args = arguments(&p.runtime_arguments, &mut todo);
    let package_args = arguments(&p.package_arguments, &mut todo);
    let mut env = BTreeMap::new();
    let mut secrets = Vec::new();
    for v in &p.environment_variables {
        if v.is_secret {
            secrets.push(v.name.clone());
        } else if let Some(val) = v.value.as_ref().or(v.default.as_ref()) {
            env.insert(v.name.clone(), val.clone());
        } else if v.is_required {
            todo.push(format!(
                "the environment variable {} (`--env {}=…`)",
                v.name, v.name
            ));
        }
    }
    Ok(Entry {
        ecosystem,
        spec,
        runtime_args,
        package_args,
        env,
        secrets,
        todo,
        source: String::new(),
        notes,
    })
}

/// Positional: its value; named: `--name value`, or the bare flag.
fn arguments(args: &[Argument], todo: &mut Vec<String>) -> Vec<String> {
    let mut out = Vec::new();
    for a in args {
        let value = a.value.as_ref().or(a.default.as_ref());
        match (a.kind.as_str(), &a.name, value) {
            ("named", Some(n), Some(v)) => {
                out.push(n.clone());
                out.push(v.clone());
            }
            ("named", Some(n), None) => out.push(n.clone()),
            (_, _, Some(v)) => out.push(v.clone()),
            (_, _, None) => todo.push(format!(
                "an argument {} (add it after `--`)",
                a.value_hint
                    .as_deref()
                    .or(a.name.as_deref())
                    .unwrap_or("without a value")
            )),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_json_becomes_an_install() {
        let e = parse(
            r#"{"$schema":"https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
               "name":"io.github.x/mem","version":"1.0.0",
               "packages":[
                 {"registryType":"oci","identifier":"x/mem","version":"1.0.0"},
                 {"registryType":"npm","identifier":"@x/mem","version":"1.0.0",
                  "transport":{"type":"stdio"},
                  "runtimeArguments":[{"type":"named","name":"--max-old-space-size=256"}],
                  "packageArguments":[{"type":"positional","value":"serve"},
                                      {"type":"named","name":"--mode","default":"fast"},
                                      {"type":"positional","valueHint":"data_dir"}],
                  "environmentVariables":[
                    {"name":"API_KEY","isSecret":true,"isRequired":true},
                    {"name":"LOG","default":"info"},
                    {"name":"REGION","isRequired":true},
                    {"name":"OPTIONAL"}]}]}"#,
        )
        .unwrap();
        assert_eq!(e.ecosystem, Ecosystem::Npm);
        assert_eq!(e.spec, "@x/mem@1.0.0");
        assert_eq!(e.runtime_args, ["--max-old-space-size=256"]);
        assert_eq!(e.package_args, ["serve", "--mode", "fast"]);
        assert_eq!(e.env, BTreeMap::from([("LOG".into(), "info".into())]));
        assert_eq!(e.secrets, ["API_KEY"]);
        assert_eq!(e.todo.len(), 2, "{:?}", e.todo);
        assert!(e.todo[0].contains("data_dir"));
        assert!(e.todo[1].contains("REGION"));
    }

    #[test]
    fn pypi_and_unsupported_entries() {
        let e = parse(r#"{"packages":[{"registryType":"pypi","identifier":"mcp-server-time","version":"2026.10.19"}]}"#)
            .unwrap();
        assert_eq!(
            (e.ecosystem, e.spec.as_str()),
            (Ecosystem::Pypi, "mcp-server-time==2026.10.19")
        );
        let err = parse(
            r#"{"packages":[{"registryType":"npm","identifier":"a","transport":{"type":"streamable-http"}}],
               "remotes":[{"type":"streamable-http","url":"https://x"}]}"#,
        )
        .unwrap_err();
        assert!(err.contains("npm (streamable-http)"), "{err}");
        assert!(err.contains("--url https://x"), "{err}");
        assert!(parse("{").unwrap_err().contains("not a server.json"));
    }

    #[test]
    fn another_package_registry_is_said() {
        let e = parse(
            r#"{"packages":[{"registryType":"npm","registryBaseUrl":"https://npm.example.com",
               "identifier":"a","version":"1.0.0"}]}"#,
        )
        .unwrap();
        assert_eq!(e.notes.len(), 1, "{:?}", e.notes);
        assert!(e.notes[0].contains("https://npm.example.com"));
        let e = parse(
            r#"{"packages":[{"registryType":"npm","registryBaseUrl":"https://registry.npmjs.org/",
               "identifier":"a","version":"1.0.0"}]}"#,
        )
        .unwrap();
        assert!(e.notes.is_empty());
    }

    #[test]
    fn names_and_versions_are_encoded_as_one_segment() {
        assert_eq!(encode("io.github.x/mem"), "io.github.x%2Fmem");
        assert_eq!(encode("1.0.0+build"), "1.0.0%2Bbuild");
        assert_eq!(encode("a b"), "a%20b");
    }

    #[test]
    fn a_registry_is_https_or_loopback() {
        assert!(check_base("https://registry.example.com").is_ok());
        assert!(check_base("http://127.0.0.1:8080").is_ok());
        assert!(check_base("http://[::1]:8080/r").is_ok());
        assert!(check_base("http://localhost").is_ok());
        assert!(check_base("http://registry.example.com").is_err());
        assert!(check_base("ftp://x").is_err());
    }

    #[test]
    fn deleted_entries_are_refused_deprecated_ones_said() {
        let meta = |st: &str| {
            serde_json::json!({"io.modelcontextprotocol.registry/official":
                {"status": st, "statusMessage": "use v2"}})
        };
        assert!(status_notes(&meta("active")).unwrap().is_empty());
        assert_eq!(
            status_notes(&meta("deprecated")).unwrap(),
            ["the registry marks it deprecated: use v2"]
        );
        assert!(status_notes(&meta("deleted")).is_err());
        assert!(status_notes(&serde_json::Value::Null).unwrap().is_empty());
        assert_eq!(
            problem(Some(
                &serde_json::json!({"title": "Not Found", "detail": "Server not found"})
            )),
            ": Server not found"
        );
    }
}
