//! Server config files written by `xyctl add`, `import`, `upgrade` and
//! `rollback`: the KDL text in the house style (v2), the port choice, where
//! a server's secret placeholders live ([`secrets_dir`], the one place that
//! computes it), validation with the daemon's own loader, the atomic write
//! (and the failure a refused write exits with), and `remove`'s recoverable
//! move.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use xy_core::config::{ConfigErrors, ServerConfig, load_dir, parse_server};

use crate::atomic_file::{self, Mode};
use crate::error::{Exit, Failure};

/// The first port `add` tries when none is given (SPEC §14).
pub(crate) const FIRST_PORT: u16 = 8400;

/// The health probe `--health` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Health {
    /// `mcp "/mcp"`.
    Mcp,
    /// `tcp`.
    Tcp,
    /// `http "/path"`.
    Http(String),
}

impl std::str::FromStr for Health {
    type Err = String;

    fn from_str(s: &str) -> Result<Health, String> {
        match s {
            "mcp" => Ok(Health::Mcp),
            "tcp" => Ok(Health::Tcp),
            _ => match s.strip_prefix("http:") {
                Some(path) if path.starts_with('/') => Ok(Health::Http(path.to_owned())),
                _ => Err(format!("`{s}` is not a probe: use mcp, tcp or http:/path")),
            },
        }
    }
}

/// What a new server file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServerSpec {
    /// `command`.
    pub(crate) command: String,
    /// `args`.
    pub(crate) args: Vec<String>,
    /// `port`.
    pub(crate) port: u16,
    /// `transport "stdio"` when true.
    pub(crate) stdio: bool,
    /// `env { … }`.
    pub(crate) env: BTreeMap<String, String>,
    /// `working-dir`.
    pub(crate) working_dir: Option<String>,
    /// `health { … }`.
    pub(crate) health: Option<Health>,
}

/// The KDL v2 text of a server file, in the layout of `examples/servers/`.
pub(crate) fn render(spec: &ServerSpec, comment: &str) -> String {
    let mut s = String::new();
    for line in comment.lines() {
        s.push_str("// ");
        s.push_str(line);
        s.push('\n');
    }
    if spec.stdio {
        s.push_str("transport \"stdio\"\n");
    }
    s.push_str(&format!("command {}\n", quote(&spec.command)));
    if !spec.args.is_empty() {
        s.push_str("args");
        for a in &spec.args {
            s.push(' ');
            s.push_str(&quote(a));
        }
        s.push('\n');
    }
    s.push_str(&format!("port {}\n", spec.port));
    if let Some(dir) = &spec.working_dir {
        s.push_str(&format!("working-dir {}\n", quote(dir)));
    }
    if !spec.env.is_empty() {
        s.push_str("\nenv {\n");
        for (k, v) in &spec.env {
            s.push_str(&format!("    {} {}\n", node_name(k), quote(v)));
        }
        s.push_str("}\n");
    }
    if let Some(h) = &spec.health {
        let probe = match h {
            Health::Mcp => "mcp \"/mcp\"".to_owned(),
            Health::Tcp => "tcp".to_owned(),
            Health::Http(p) => format!("http {}", quote(p)),
        };
        s.push_str(&format!("\nhealth {{\n    {probe}\n}}\n"));
    }
    s
}

/// A remote server's file (SPEC §23): what `add --url` and `import` of a
/// URL or `mcp-remote` entry write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RemoteSpec {
    /// `url`.
    pub(crate) url: String,
    /// `port` (where xy serves it on loopback).
    pub(crate) port: u16,
    /// `headers { }`: each name and either a literal or `secret="NAME"`.
    pub(crate) headers: Vec<(String, HeaderSource)>,
    /// `secrets { NAME file="…" }` for the headers' secrets.
    pub(crate) secrets: Vec<(String, PathBuf)>,
}

/// Where one written header's value comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HeaderSource {
    /// Written in the file.
    Literal(String),
    /// A §16 secret of the same file.
    Secret(String),
}

/// The KDL v2 text of a remote server's file.
pub(crate) fn render_remote(spec: &RemoteSpec, comment: &str) -> String {
    let mut s = String::new();
    for line in comment.lines() {
        s.push_str("// ");
        s.push_str(line);
        s.push('\n');
    }
    s.push_str(&format!("url {}\nport {}\n", quote(&spec.url), spec.port));
    if !spec.headers.is_empty() {
        s.push_str("\nheaders {\n");
        for (name, v) in &spec.headers {
            let value = match v {
                HeaderSource::Literal(l) => quote(l),
                HeaderSource::Secret(n) => format!("secret={}", quote(n)),
            };
            s.push_str(&format!("    {} {value}\n", node_name(name)));
        }
        s.push_str("}\n");
    }
    if !spec.secrets.is_empty() {
        s.push_str("\nsecrets {\n");
        for (name, file) in &spec.secrets {
            s.push_str(&format!(
                "    {} file={}\n",
                node_name(name),
                quote(&file.display().to_string())
            ));
        }
        s.push_str("}\n");
    }
    s
}

/// The secret name for a header's value: `Authorization` → `AUTHORIZATION`,
/// `X-Api-Key` → `X_API_KEY`.
pub(crate) fn secret_name_for(header: &str) -> String {
    header
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// Where a server's secret placeholders live: `<config>/xy/secrets/<name>/`
/// beside `servers/` (as `add --registry` writes them).
pub(crate) fn secrets_dir(config_dir: &Path, name: &str) -> PathBuf {
    config_dir
        .parent()
        .unwrap_or(config_dir)
        .join("secrets")
        .join(name)
}

/// Writes a secret's value into `file` (`0600`, its directory `0700`).
pub(crate) fn write_secret(file: &Path, value: &str) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if let Some(dir) = file.parent() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    atomic_file::write(file, value.as_bytes(), Mode::Exactly(0o600), None)
        .map(|_| ())
        .map_err(|e| e.into_io())
}

/// Marks a rendered server file `autostart #false` (`xyctl add
/// --no-start`, SPEC §18): the daemon knows the server but leaves it
/// `stopped` at boot and reload until `xyctl start`.
pub(crate) fn no_autostart(text: &mut String) {
    text.push_str(
        "\n// Not started at boot or reload: `xyctl start` starts it.\nautostart #false\n",
    );
}

/// A KDL v2 quoted string.
pub(crate) fn quote(v: &str) -> String {
    let mut s = String::with_capacity(v.len() + 2);
    s.push('"');
    for c in v.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            '\r' => s.push_str("\\r"),
            '\t' => s.push_str("\\t"),
            '\u{8}' => s.push_str("\\b"),
            '\u{c}' => s.push_str("\\f"),
            c if c.is_control() => s.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

/// An `env` key as a node name: bare when it is a plain identifier, quoted
/// otherwise (KDL v2 reserves `true`, `null`, `inf`, … as bare words).
fn node_name(k: &str) -> String {
    let plain = k
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
        && !matches!(k, "true" | "false" | "null" | "inf" | "nan");
    if plain { k.to_owned() } else { quote(k) }
}

/// Ports the configs in `dir` use; a file that does not parse is skipped
/// (its port is unknown), so a broken neighbour does not block `add`.
pub(crate) fn used_ports(dir: &Path) -> BTreeSet<u16> {
    if let Ok(set) = load_dir(dir) {
        return set.servers.values().map(|s| s.port).collect();
    }
    let Ok(entries) = fs::read_dir(dir) else {
        return BTreeSet::new();
    };
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "kdl"))
        .filter_map(|p| {
            let stem = p.file_stem()?.to_string_lossy().into_owned();
            let text = fs::read_to_string(&p).ok()?;
            parse_server(&stem, &p, &text).ok().map(|c| c.port)
        })
        .collect()
}

/// The first port from [`FIRST_PORT`] up that no config uses, that is not
/// in `taken`, and that nothing on this machine listens on right now.
pub(crate) fn choose_port(used: &BTreeSet<u16>, bindable: impl Fn(u16) -> bool) -> Option<u16> {
    (FIRST_PORT..=u16::MAX).find(|p| !used.contains(p) && bindable(*p))
}

/// True when `127.0.0.1:port` can be bound now.
pub(crate) fn port_is_free(port: u16) -> bool {
    std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
}

/// Why a server file was not written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WriteError {
    /// The file exists and `--force` was not given.
    #[error("{} already exists (use --force to replace it)", .0.display())]
    Exists(PathBuf),
    /// The daemon's loader rejected the text.
    #[error("the new config for `{name}` is invalid")]
    Invalid {
        /// The server.
        name: String,
        /// The loader's diagnostics.
        errors: ConfigErrors,
    },
    /// The port is another config's.
    #[error("port {port} is already used by {other}")]
    PortTaken {
        /// The port.
        port: u16,
        /// The config that has it.
        other: String,
    },
    /// Reading or writing failed.
    #[error("cannot {action} {}: {source}", .path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// Where.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

impl WriteError {
    /// The command's failure for a file that was not written: an invalid
    /// config (or a taken port) exits 3 with the loader's diagnostics.
    pub(crate) fn failure(self, color: bool) -> Failure {
        match self {
            WriteError::Invalid { name, errors } => Failure::new(
                Exit::ConfigInvalid,
                format!("config for `{name}` is invalid; nothing was written"),
            )
            .with_detail(errors.render(color)),
            WriteError::PortTaken { .. } => Failure::new(Exit::ConfigInvalid, self.to_string()),
            e => Failure::new(Exit::Operational, e.to_string()),
        }
    }
}

/// Validates `text` as `<dir>/<name>.kdl` with the daemon's loader (and
/// against the other configs' ports), then writes it atomically: a hidden
/// temporary file in `dir` (the loader ignores dot files), renamed over the
/// target. Nothing is left behind on any failure.
pub(crate) fn write(
    dir: &Path,
    name: &str,
    text: &str,
    force: bool,
) -> Result<ServerConfig, WriteError> {
    let path = dir.join(format!("{name}.kdl"));
    if !force && path.exists() {
        return Err(WriteError::Exists(path));
    }
    let config = parse_server(name, &path, text).map_err(|errors| WriteError::Invalid {
        name: name.to_owned(),
        errors,
    })?;
    if let Ok(set) = load_dir(dir)
        && let Some(other) = set
            .servers
            .values()
            .find(|s| s.port == config.port && s.name != name)
    {
        return Err(WriteError::PortTaken {
            port: config.port,
            other: other.source.display().to_string(),
        });
    }
    let io = |action, path: &Path| {
        let path = path.to_path_buf();
        move |source| WriteError::Io {
            action,
            path,
            source,
        }
    };
    fs::DirBuilder::new()
        .recursive(true)
        .create(dir)
        .map_err(io("create", dir))?;
    // A server file may hold tokens: a new one is private.
    atomic_file::write(&path, text.as_bytes(), Mode::KeepOr(0o600), None)
        .map_err(|e| io("write", &path)(e.into_io()))?;
    Ok(config)
}

/// Moves `<dir>/<name>.kdl` to `<dir>/.removed/<name>.kdl.<stamp>` and
/// returns the new path; `None` when there is no such file.
pub(crate) fn retire(dir: &Path, name: &str, stamp: &str) -> Result<Option<PathBuf>, WriteError> {
    let path = dir.join(format!("{name}.kdl"));
    if !path.exists() {
        return Ok(None);
    }
    let removed = dir.join(".removed");
    fs::DirBuilder::new()
        .recursive(true)
        .create(&removed)
        .map_err(|source| WriteError::Io {
            action: "create",
            path: removed.clone(),
            source,
        })?;
    let to = removed.join(format!("{name}.kdl.{stamp}"));
    fs::rename(&path, &to).map_err(|source| WriteError::Io {
        action: "move",
        path: path.clone(),
        source,
    })?;
    Ok(Some(to))
}

/// A UTC timestamp for file names that sorts by time:
/// `20261130T134501.123Z`.
pub(crate) fn stamp(now: std::time::SystemTime) -> String {
    humantime::format_rfc3339_millis(now)
        .to_string()
        .chars()
        .filter(|c| *c != '-' && *c != ':')
        .collect()
}

/// A name xy can use for a client's entry name: characters outside
/// `[A-Za-z0-9_.-]` become `-`, runs of them collapse, and the ends are
/// trimmed; nothing left gives `server`.
pub(crate) use xy_core::clients::usable_name;

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ServerSpec {
        ServerSpec {
            command: "/usr/bin/python3".into(),
            args: vec!["-m".into(), "srv \"x\"".into()],
            port: 8400,
            stdio: false,
            env: BTreeMap::new(),
            working_dir: None,
            health: None,
        }
    }

    #[test]
    fn renders_loadable_kdl_in_house_style() {
        let mut s = spec();
        s.env.insert("API_KEY".into(), "a\\b".into());
        s.env.insert("null".into(), "x".into());
        s.env.insert("has space".into(), "y".into());
        s.working_dir = Some("/tmp".into());
        s.health = Some(Health::Http("/healthz".into()));
        let text = render(&s, "added by xyctl add");
        assert_eq!(
            text,
            "// added by xyctl add\n\
             command \"/usr/bin/python3\"\n\
             args \"-m\" \"srv \\\"x\\\"\"\n\
             port 8400\n\
             working-dir \"/tmp\"\n\
             \n\
             env {\n    API_KEY \"a\\\\b\"\n    \"has space\" \"y\"\n    \"null\" \"x\"\n}\n\
             \n\
             health {\n    http \"/healthz\"\n}\n"
        );
        let c = parse_server("demo", Path::new("demo.kdl"), &text).unwrap();
        assert_eq!(c.args, ["-m", "srv \"x\""]);
        assert_eq!(c.env["API_KEY"], "a\\b");
        assert_eq!(c.env["has space"], "y");
        assert_eq!(c.env["null"], "x");
        assert_eq!(c.port, 8400);
    }

    #[test]
    fn health_flag_parses() {
        assert_eq!("mcp".parse::<Health>(), Ok(Health::Mcp));
        assert_eq!("tcp".parse::<Health>(), Ok(Health::Tcp));
        assert_eq!("http:/h".parse::<Health>(), Ok(Health::Http("/h".into())));
        assert!("http:h".parse::<Health>().is_err());
        assert!("udp".parse::<Health>().is_err());
    }

    #[test]
    fn port_choice_skips_used_and_bound_ports() {
        let used: BTreeSet<u16> = [8400, 8401].into();
        assert_eq!(choose_port(&used, |_| true), Some(8402));
        assert_eq!(choose_port(&used, |p| p != 8402), Some(8403));
        assert_eq!(choose_port(&BTreeSet::new(), |_| true), Some(8400));
    }

    #[test]
    fn usable_names() {
        assert_eq!(usable_name("github"), "github");
        assert_eq!(usable_name("My Server!"), "My-Server");
        assert_eq!(usable_name("a/b@c"), "a-b-c");
        assert_eq!(usable_name("..."), "server");
        assert_eq!(usable_name("日本"), "server");
    }

    #[test]
    fn write_validates_and_leaves_nothing_on_failure() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let good = render(&spec(), "x");
        write(d, "a", &good, false).unwrap();
        assert!(matches!(
            write(d, "a", &good, false),
            Err(WriteError::Exists(_))
        ));
        write(d, "a", &good, true).unwrap();
        // Same port as `a`.
        assert!(matches!(
            write(d, "b", &good, false),
            Err(WriteError::PortTaken { port: 8400, .. })
        ));
        assert!(matches!(
            write(
                d,
                "c",
                "command \"/bin/true\"\nport 1\nworking_dir \"/\"\n",
                false
            ),
            Err(WriteError::Invalid { .. })
        ));
        let names: Vec<_> = fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, ["a.kdl"]);
        let to = retire(d, "a", "20261130T000000.000Z").unwrap().unwrap();
        assert_eq!(to, d.join(".removed/a.kdl.20261130T000000.000Z"));
        assert!(!d.join("a.kdl").exists());
        assert_eq!(retire(d, "a", "x").unwrap(), None);
    }

    #[test]
    fn stamps_sort_by_time() {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(1_700_000_000_123);
        assert_eq!(stamp(t), "20231114T221320.123Z");
    }
}
