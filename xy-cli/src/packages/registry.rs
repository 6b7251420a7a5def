//! `add --registry <server.json>`: an MCP Registry entry (schema
//! 2025-12-11) read from a local file and turned into what `--npm`/`--pypi`
//! would install: the first `npm`/`pypi` package with a stdio transport,
//! its `runtimeArguments` (before the entry point) and `packageArguments`
//! (after it), its plain `environmentVariables` as `env`, and its secret
//! ones as `secrets { NAME file="…" }` placeholders the user fills in —
//! never a value in the server file.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use xy_core::package::Ecosystem;

use crate::error::{Exit, Failure};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ServerJson {
    #[serde(default)]
    packages: Vec<Package>,
    #[serde(default)]
    remotes: Vec<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Package {
    registry_type: String,
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
}

/// Reads `file`.
pub(crate) fn read(file: &Path) -> Result<Entry, Failure> {
    let text = std::fs::read_to_string(file).map_err(|e| {
        Failure::new(
            Exit::Operational,
            format!("cannot read {}: {e}", file.display()),
        )
    })?;
    parse(&text).map_err(|e| Failure::new(Exit::Operational, format!("{}: {e}", file.display())))
}

fn parse(text: &str) -> Result<Entry, String> {
    let sj: ServerJson =
        serde_json::from_str(text).map_err(|e| format!("not a server.json: {e}"))?;
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
        let mut why = if kinds.is_empty() {
            "it lists no packages".to_owned()
        } else {
            format!("its packages are {}", kinds.join(", "))
        };
        if !sj.remotes.is_empty() {
            why.push_str("; remotes are not supported yet");
        }
        return Err(format!(
            "no npm or pypi package with a stdio transport: {why} (not supported yet)"
        ));
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
        assert!(err.contains("remotes are not supported yet"), "{err}");
        assert!(parse("{").unwrap_err().contains("not a server.json"));
    }
}
