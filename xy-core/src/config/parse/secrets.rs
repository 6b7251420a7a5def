//! Parsing the SPEC §16 nodes — `env-file`, `secrets { }`, `hooks { }` and
//! `notify` — kept apart from the core fields so that each stays small. An
//! env file is read here, at load: a missing one or a bad line in it is a
//! load error with the position (in the config, or in the env file).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kdl::{KdlEntry, KdlNode, KdlValue};

use super::cx::{Cx, suggest};
use crate::config::diagnostic::ConfigDiagnostic;
use crate::config::dotenv;
use crate::config::{HookEvent, HooksConfig, SecretSource, SecretSpec};
use crate::protocol::DiagnosticKind;

/// The source kinds of a secret (exactly one per entry).
const SECRET_SOURCES: &[&str] = &["command", "keychain", "file"];
/// The nodes inside `hooks { }`.
const HOOK_FIELDS: &[&str] = &[
    "on-failed",
    "on-unhealthy",
    "on-restart",
    "on-recovered",
    "notify",
];

/// `env-file "path"`: reads and parses the file; its variables are
/// appended to `out` in file order. `None` (with diagnostics) on failure.
pub(super) fn parse_env_file(
    cx: &mut Cx<'_>,
    node: &KdlNode,
    out: &mut Vec<(String, String)>,
) -> Option<PathBuf> {
    let example = "env-file \".env\"";
    let e = cx.single(node, example)?;
    let s = cx.string(node, e, example)?;
    if s.is_empty() || !cx.no_nul(e, &s, "`env-file`") {
        if s.is_empty() {
            let d = cx
                .diag(
                    DiagnosticKind::InvalidValue,
                    e.span(),
                    "`env-file` is empty",
                )
                .with_label("empty")
                .with_help("name a dotenv file, e.g. env-file \".env\"");
            cx.push(d);
        }
        return None;
    }
    let path = resolve_path(cx.file, &s);
    let text = match std::fs::read(&path).map(String::from_utf8) {
        Ok(Ok(text)) => text,
        Ok(Err(_)) => {
            let d = cx
                .diag(
                    DiagnosticKind::Io,
                    e.span(),
                    format!("env file {} is not valid UTF-8", path.display()),
                )
                .with_label("not UTF-8")
                .with_help("save the env file as UTF-8");
            cx.push(d);
            return None;
        }
        Err(err) => {
            let d = cx
                .diag(
                    DiagnosticKind::Io,
                    e.span(),
                    format!("cannot read env file {}: {err}", path.display()),
                )
                .with_label("cannot read")
                .with_help(
                    "create the file, or fix the path (relative paths are against the \
                     config directory; ~ is your home)",
                );
            cx.push(d);
            return None;
        }
    };
    match dotenv::parse(&text) {
        Ok(pairs) => {
            out.extend(pairs);
            Some(path)
        }
        Err(errors) => {
            let source: Arc<str> = Arc::from(text);
            for err in errors {
                cx.push(
                    ConfigDiagnostic::new(DiagnosticKind::Syntax, &path, err.message)
                        .at(&source, err.span)
                        .with_label(err.label)
                        .with_help(err.help),
                );
            }
            None
        }
    }
}

/// `~/x` → home, relative → against the config file's directory.
fn resolve_path(config_file: &Path, s: &str) -> PathBuf {
    if let Some(rest) = s.strip_prefix("~/")
        && let Some(home) = home_dir()
    {
        return home.join(rest);
    }
    let p = Path::new(s);
    if p.is_absolute() {
        return p.to_path_buf();
    }
    config_file
        .parent()
        .map_or_else(|| p.to_path_buf(), |dir| dir.join(p))
}

fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .or_else(|| directories::BaseDirs::new().map(|b| b.home_dir().to_path_buf()))
}

/// True for a name a child can get in its environment and that reads
/// well in `[redacted:NAME]`: `[A-Za-z_][A-Za-z0-9_]*`.
fn is_env_name(name: &str) -> bool {
    let mut b = name.bytes();
    b.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// `secrets { NAME command="op" "read" "op://…"; NAME keychain="svc"
/// account="me"; NAME file="~/.secret" }`.
pub(super) fn parse_secrets(cx: &mut Cx<'_>, node: &KdlNode) -> Vec<SecretSpec> {
    let mut out = Vec::new();
    let mut seen: Vec<(&str, usize)> = Vec::new();
    for child in cx.block(node) {
        if cx.duplicate(child, &mut seen) {
            continue;
        }
        let name = child.name().value();
        if !is_env_name(name) {
            let d = cx
                .diag(
                    DiagnosticKind::InvalidValue,
                    child.name().span(),
                    format!("invalid secret name {name:?}"),
                )
                .with_label("not a variable name")
                .with_help(
                    "a secret is given to the server as an environment variable: letters, \
                     digits and `_`, not starting with a digit (e.g. GITHUB_TOKEN)",
                );
            cx.push(d);
            continue;
        }
        if let Some(source) = parse_secret_source(cx, child) {
            out.push(SecretSpec {
                name: name.to_owned(),
                source,
            });
        }
    }
    out
}

fn parse_secret_source(cx: &mut Cx<'_>, node: &KdlNode) -> Option<SecretSource> {
    let name = node.name().value();
    cx.no_children(node);
    let example = format!(
        "{name} command=\"op\" \"read\" \"op://vault/item/field\" | {name} keychain=\"service\" \
         account=\"me\" | {name} file=\"~/.secret\""
    );
    let props: Vec<&KdlEntry> = node
        .entries()
        .iter()
        .filter(|e| e.name().is_some())
        .collect();
    let args: Vec<&KdlEntry> = node
        .entries()
        .iter()
        .filter(|e| e.name().is_none())
        .collect();
    let prop_name = |e: &KdlEntry| e.name().map_or("", |n| n.value()).to_owned();

    let sources: Vec<&KdlEntry> = props
        .iter()
        .copied()
        .filter(|e| SECRET_SOURCES.contains(&prop_name(e).as_str()))
        .collect();
    let mut ok = true;
    for e in &props {
        let key = prop_name(e);
        let allowed = SECRET_SOURCES.contains(&key.as_str()) || key == "account";
        if !allowed {
            let help = match suggest(&key, &["command", "keychain", "file", "account"]) {
                Some(s) => format!("did you mean {s}=…?"),
                None => format!("e.g. {example}"),
            };
            let d = cx
                .diag(
                    DiagnosticKind::UnknownNode,
                    e.span(),
                    format!("unknown secret source `{key}=` for `{name}`"),
                )
                .with_label("unknown property")
                .with_help(help);
            cx.push(d);
            ok = false;
        }
    }
    let first = match sources.as_slice() {
        [] => {
            if ok {
                let d = cx
                    .diag(
                        DiagnosticKind::MissingField,
                        node.name().span(),
                        format!("secret `{name}` needs a source: command=, keychain= or file="),
                    )
                    .with_label("no source")
                    .with_help(format!("e.g. {example}"));
                cx.push(d);
            }
            return None;
        }
        [one] => *one,
        [_, second, ..] => {
            let d = cx
                .diag(
                    DiagnosticKind::DuplicateNode,
                    second.span(),
                    format!("secret `{name}` has more than one source"),
                )
                .with_label("second source")
                .with_help("keep exactly one of command=, keychain=, file=");
            cx.push(d);
            return None;
        }
    };
    let kind = prop_name(first);
    let value = prop_string(cx, node, first, &example)?;
    let account = props.iter().find(|e| prop_name(e) == "account");
    if kind != "keychain"
        && let Some(a) = account
    {
        let d = cx
            .diag(
                DiagnosticKind::WrongType,
                a.span(),
                format!("`account=` belongs to a keychain secret, not a {kind} one"),
            )
            .with_label("only with keychain=")
            .with_help(format!("e.g. {name} keychain=\"service\" account=\"me\""));
        cx.push(d);
        ok = false;
    }
    if kind != "command"
        && let (Some(f), Some(l)) = (args.first(), args.last())
    {
        let span = miette::SourceSpan::from(f.span().offset()..l.span().offset() + l.span().len());
        let d = cx
            .diag(
                DiagnosticKind::WrongType,
                span,
                format!("a {kind} secret takes no arguments"),
            )
            .with_label("unexpected value")
            .with_help("only command= secrets take arguments, after the program");
        cx.push(d);
        ok = false;
    }
    if value.is_empty() {
        let d = cx
            .diag(
                DiagnosticKind::InvalidValue,
                first.span(),
                format!("`{kind}=` of secret `{name}` is empty"),
            )
            .with_label("empty")
            .with_help(format!("e.g. {example}"));
        cx.push(d);
        return None;
    }
    let source = match kind.as_str() {
        "command" => {
            let mut argv = Vec::new();
            for a in &args {
                match cx.string(node, a, &example) {
                    Some(s) if cx.no_nul(a, &s, "an argument") => argv.push(s),
                    _ => ok = false,
                }
            }
            SecretSource::Command {
                program: value,
                args: argv,
            }
        }
        "keychain" => {
            let account = match account {
                Some(a) => Some(prop_string(cx, node, a, &example)?),
                None => None,
            };
            SecretSource::Keychain {
                service: value,
                account,
            }
        }
        _ => SecretSource::File(resolve_path(cx.file, &value)),
    };
    ok.then_some(source)
}

fn prop_string(cx: &mut Cx<'_>, node: &KdlNode, e: &KdlEntry, example: &str) -> Option<String> {
    let s = cx.string(node, e, example)?;
    cx.no_nul(e, &s, "a secret source").then_some(s)
}

/// `hooks { on-failed "cmd" "arg"…; …; notify #true }`.
pub(super) fn parse_hooks(cx: &mut Cx<'_>, node: &KdlNode, hooks: &mut HooksConfig) {
    let mut seen: Vec<(&str, usize)> = Vec::new();
    for child in cx.block(node) {
        let key = child.name().value();
        if !HOOK_FIELDS.contains(&key) {
            cx.unknown_node(child, HOOK_FIELDS, "in `hooks { }`");
            continue;
        }
        if cx.duplicate(child, &mut seen) {
            continue;
        }
        if key == "notify" {
            if let Some(b) = parse_notify(cx, child) {
                hooks.notify = b;
            }
            continue;
        }
        let Some(event) = HookEvent::ALL.into_iter().find(|e| e.node() == key) else {
            continue;
        };
        let example = format!("{key} \"/usr/local/bin/page-me\" \"--server\" \"x\"");
        cx.no_props(child);
        cx.no_children(child);
        let mut argv = Vec::new();
        let mut ok = true;
        for e in child.entries().iter().filter(|e| e.name().is_none()) {
            match cx.string(child, e, &example) {
                Some(s) if cx.no_nul(e, &s, "a hook argument") => argv.push(s),
                _ => ok = false,
            }
        }
        if argv.first().is_some_and(String::is_empty) || (ok && argv.is_empty()) {
            let d = cx
                .diag(
                    DiagnosticKind::WrongType,
                    child.name().span(),
                    format!("`{key}` needs a command"),
                )
                .with_label("no command")
                .with_help(format!(
                    "e.g. {example} (run without a shell; use \"sh\" \"-c\" \"…\" for one)"
                ));
            cx.push(d);
            continue;
        }
        if ok {
            hooks.commands.push((event, argv));
        }
    }
}

/// `notify #true` (top level or inside `hooks { }`).
pub(super) fn parse_notify(cx: &mut Cx<'_>, node: &KdlNode) -> Option<bool> {
    let example = "notify #true";
    let e = cx.single(node, example)?;
    match e.value() {
        KdlValue::Bool(b) => Some(*b),
        _ => {
            cx.wrong_type(
                node,
                e,
                "a boolean",
                "write #true or #false (KDL v1 files: true or false)".to_owned(),
            );
            None
        }
    }
}

/// The child's env from the env files (in order, later wins) under the
/// `env` block (wins over every file).
pub(super) fn merge_env(
    files: Vec<(String, String)>,
    block: BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = files.into_iter().collect();
    env.extend(block);
    env
}
