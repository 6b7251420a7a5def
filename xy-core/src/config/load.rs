//! Reading configs from disk: a config directory (every `*.kdl` file, all
//! errors at once, duplicate ports across files, the command lookup
//! warning), the daemon's settings file, and both together as `xyd` boots
//! and reloads.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fs;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::diagnostic::ConfigDiagnostic;
use super::parse::parse_file;
use super::parse::settings::{PortAt, parse_at};
use super::settings::DaemonSettings;
use super::{ConfigErrors, ConfigSet, ConfigWarning, ServerConfig};
use crate::protocol::DiagnosticKind;

/// Why a `command` could not be resolved to an executable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandLookupError {
    /// Not found (absolute path missing, or no such program on PATH).
    #[error("command not found: {0}")]
    NotFound(String),
    /// Exists but is not an executable file.
    #[error("not executable: {}", .0.display())]
    NotExecutable(PathBuf),
}

/// Loads and validates every `*.kdl` file in `dir`.
///
/// Files whose name starts with `.` (editor lock and backup files) and files
/// not ending in `.kdl` are ignored; a missing directory is an error, an
/// empty one is a valid set of zero servers. Every error of every file is
/// returned, sorted by file, line and column.
pub fn load_dir(dir: &Path) -> Result<ConfigSet, ConfigErrors> {
    let mut diags = Vec::new();
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            return Err(ConfigErrors::new(vec![
                ConfigDiagnostic::new(
                    DiagnosticKind::Io,
                    dir,
                    format!("cannot read config directory {}: {e}", dir.display()),
                )
                .with_help(
                    "create it, or name the directory that holds the *.kdl files \
                     (xyd --config-dir DIR, xyctl config check DIR)",
                ),
            ]));
        }
    };

    let mut files = Vec::new();
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                diags.push(ConfigDiagnostic::new(
                    DiagnosticKind::Io,
                    dir,
                    format!("cannot list config directory {}: {e}", dir.display()),
                ));
                continue;
            }
        };
        let path = entry.path();
        let hidden = entry.file_name().as_encoded_bytes().starts_with(b".");
        if hidden || path.extension() != Some(OsStr::new("kdl")) {
            continue;
        }
        // Follows symlinks: a dangling one is an error, a directory is skipped.
        match fs::metadata(&path) {
            Ok(meta) if meta.is_file() => files.push(path),
            Ok(_) => {}
            Err(e) => diags.push(ConfigDiagnostic::new(
                DiagnosticKind::Io,
                &path,
                format!("cannot read {}: {e}", path.display()),
            )),
        }
    }
    files.sort();

    let mut servers = BTreeMap::new();
    let mut ports: BTreeMap<u16, Vec<PortUse>> = BTreeMap::new();
    let stems: Vec<String> = files
        .iter()
        .filter_map(|p| p.file_stem())
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    for path in files {
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = match fs::read(&path).map(String::from_utf8) {
            Ok(Ok(text)) => text,
            Ok(Err(_)) => {
                diags.push(
                    ConfigDiagnostic::new(
                        DiagnosticKind::Io,
                        &path,
                        format!("cannot read {}: not valid UTF-8", path.display()),
                    )
                    .with_help("save the file as UTF-8"),
                );
                continue;
            }
            Err(e) => {
                diags.push(ConfigDiagnostic::new(
                    DiagnosticKind::Io,
                    &path,
                    format!("cannot read {}: {e}", path.display()),
                ));
                continue;
            }
        };
        let parsed = parse_file(&stem, &path, &text);
        if let Some((port, span)) = parsed.port {
            ports
                .entry(port)
                .or_default()
                .push((path.clone(), span, Arc::clone(&parsed.source)));
        }
        diags.extend(parsed.diagnostics);
        for (name, span) in &parsed.reach {
            if crate::config::is_valid_name(name) && !stems.contains(name) {
                let names: Vec<&str> = stems.iter().map(String::as_str).collect();
                let help = match crate::config::parse::suggest_name(name, &names) {
                    Some(s) => format!("did you mean reach \"{s}\"?"),
                    None => format!(
                        "reach names a server of this directory by its file name ({}.kdl)",
                        name
                    ),
                };
                diags.push(
                    ConfigDiagnostic::new(
                        DiagnosticKind::InvalidValue,
                        &path,
                        format!("`reach` names no configured server: {name:?}"),
                    )
                    .at(&parsed.source, span.clone())
                    .with_label("no such server")
                    .with_help(help),
                );
            }
        }
        if let Some(config) = parsed.config {
            servers.insert(config.name.clone(), config);
        }
    }

    for (port, users) in &ports {
        if users.len() < 2 {
            continue;
        }
        for (path, span, source) in users {
            let others: Vec<String> = users
                .iter()
                .filter(|(p, _, _)| p != path)
                .map(|(p, _, _)| display_name(p))
                .collect();
            let others = others.join(", ");
            diags.push(
                ConfigDiagnostic::new(
                    DiagnosticKind::DuplicatePort,
                    path,
                    format!("port {port} is also used by {others}"),
                )
                .at(source, span.clone())
                .with_label(format!("also in {others}"))
                .with_help("give each server its own port"),
            );
        }
    }

    if !diags.is_empty() {
        return Err(ConfigErrors::new(diags));
    }
    let warnings = servers.values().flat_map(warnings_for).collect();
    Ok(ConfigSet {
        dir: dir.to_path_buf(),
        servers,
        warnings,
        settings: DaemonSettings::default(),
    })
}

/// [`load_dir`] plus the daemon's settings file (`xy.kdl`, optional): what
/// `xyd` boots and reloads with and `xyctl config check` checks. Every
/// error of both is returned at once.
///
/// A server on the gateway's port: when `xy.kdl` sets that port, an error
/// (`duplicate_port`, on `xy.kdl`); when it is only the default, a warning,
/// and the gateway is off (an existing server keeps its port). A server
/// without a `firewall` block gets the settings' default mode.
pub fn load(dir: &Path, settings_file: &Path) -> Result<ConfigSet, ConfigErrors> {
    let servers = load_dir(dir);
    let settings = load_settings_at(settings_file);
    match (servers, settings) {
        (Ok(mut set), Ok((settings, port_at))) => {
            // A server whose file sets no firewall mode runs with the
            // daemon's: resolved here, so the engine and `status` see the
            // mode in force, and a reload that changes the default is a
            // change of those servers' configs like any other.
            for server in set.servers.values_mut() {
                server.firewall.get_or_insert(settings.firewall_default);
            }
            set.settings = settings;
            gateway_port_check(&mut set, settings_file, port_at)?;
            Ok(set)
        }
        (Ok(_), Err(e)) | (Err(e), Ok(_)) => Err(e),
        (Err(a), Err(b)) => Err(ConfigErrors::new(
            a.diagnostics.into_iter().chain(b.diagnostics).collect(),
        )),
    }
}

/// Loads `file`: absent is [`DaemonSettings::default`]; unreadable, not UTF-8 or
/// invalid is every error found.
pub fn load_settings(file: &Path) -> Result<DaemonSettings, ConfigErrors> {
    load_settings_at(file).map(|(s, _)| s)
}

/// [`load_settings`], and where the file sets the gateway port.
fn load_settings_at(file: &Path) -> Result<(DaemonSettings, Option<PortAt>), ConfigErrors> {
    let io = |message: String| {
        ConfigErrors::new(vec![ConfigDiagnostic::new(
            DiagnosticKind::Io,
            file,
            message,
        )])
    };
    match std::fs::read(file) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(text) => parse_at(file, &text),
            Err(_) => Err(ConfigErrors::new(vec![
                ConfigDiagnostic::new(
                    DiagnosticKind::Io,
                    file,
                    format!("cannot read {}: not valid UTF-8", file.display()),
                )
                .with_help("save the file as UTF-8"),
            ])),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((DaemonSettings::default(), None)),
        Err(e) => Err(io(format!("cannot read {}: {e}", file.display()))),
    }
}

/// A gateway port that a server uses too (see [`load`]).
fn gateway_port_check(
    set: &mut ConfigSet,
    settings_file: &Path,
    port_at: Option<PortAt>,
) -> Result<(), ConfigErrors> {
    let Some(port) = set.settings.gateway.port() else {
        return Ok(());
    };
    let users: Vec<&ServerConfig> = set.servers.values().filter(|s| s.port == port).collect();
    if users.is_empty() {
        return Ok(());
    }
    let names = users
        .iter()
        .map(|s| s.name.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    match port_at {
        Some((span, source)) => Err(ConfigErrors::new(vec![
            ConfigDiagnostic::new(
                DiagnosticKind::DuplicatePort,
                settings_file,
                format!("gateway port {port} is also the port of {names}"),
            )
            .at(&source, span)
            .with_label(format!("also {names}'s"))
            .with_help("give the gateway a port no server uses (or 0 to turn it off)"),
        ])),
        None => {
            for s in users {
                set.warnings.push(ConfigWarning {
                    file: s.source.clone(),
                    name: s.name.clone(),
                    message: format!(
                        "port {port} is the gateway's default port: the gateway stays off \
                         (set another in {}: gateway {{ port N }})",
                        settings_file.display()
                    ),
                });
            }
            set.settings.gateway.port = 0;
            Ok(())
        }
    }
}

/// Where one file declares a port (for the duplicate check).
type PortUse = (PathBuf, Range<usize>, Arc<str>);

fn display_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// The load-time checks that cannot fail a load: the server may be fixed
/// (program installed, directory created) before it is started.
fn warnings_for(config: &ServerConfig) -> Vec<ConfigWarning> {
    let mut out = Vec::new();
    // A remote server runs no program.
    if config.remote.is_some() {
        return out;
    }
    let warn = |message: String| ConfigWarning {
        file: config.source.clone(),
        name: config.name.clone(),
        message,
    };
    let path: Option<OsString> = match config.env.get("PATH") {
        Some(p) => Some(p.into()),
        None => std::env::var_os("PATH"),
    };
    if let Err(e) = resolve_command_in(
        &config.command,
        path.as_deref(),
        config.working_dir.as_deref(),
    ) {
        out.push(warn(format!("{e} (`{}` will fail to start)", config.name)));
    }
    if let Some(dir) = &config.working_dir
        && !dir.is_dir()
    {
        out.push(warn(format!(
            "working-dir {} is not a directory (`{}` will fail to start)",
            dir.display(),
            config.name
        )));
    }
    out
}

/// Resolves `command` as the child will see it: absolute as-is, else looked
/// up on `path` (the env block's PATH, else the daemon's). A relative path
/// containing `/` is taken relative to the current directory; see
/// [`resolve_command_in`] to resolve it against a `working-dir`.
pub fn resolve_command(command: &str, path: Option<&OsStr>) -> Result<PathBuf, CommandLookupError> {
    resolve_command_in(command, path, None)
}

/// [`resolve_command`] with the server's `working-dir`:
///
/// - an absolute path must be an executable regular file;
/// - a relative path with a `/` (`./bin/server`) is taken relative to
///   `working_dir` (the child's cwd), else to the current directory;
/// - a bare name (no `/`) is searched in each directory of `path` in order
///   (empty entries are skipped, never taken as the cwd); when `path` is
///   `None` the daemon's own `PATH` is used.
///
/// Executable means a regular file with any `x` bit set (`mode & 0o111`).
pub fn resolve_command_in(
    command: &str,
    path: Option<&OsStr>,
    working_dir: Option<&Path>,
) -> Result<PathBuf, CommandLookupError> {
    if command.is_empty() {
        return Err(CommandLookupError::NotFound(String::new()));
    }
    if command.contains('/') {
        let p = Path::new(command);
        let full = match working_dir {
            Some(dir) if p.is_relative() => dir.join(p),
            _ => p.to_path_buf(),
        };
        return match check_executable(&full) {
            Found::Yes => Ok(full),
            Found::NotExecutable => Err(CommandLookupError::NotExecutable(full)),
            Found::No => Err(CommandLookupError::NotFound(full.display().to_string())),
        };
    }
    let daemon_path;
    let path = match path {
        Some(p) => p,
        None => {
            daemon_path = std::env::var_os("PATH").unwrap_or_default();
            &daemon_path
        }
    };
    let mut not_executable = None;
    for dir in std::env::split_paths(path) {
        if dir.as_os_str().is_empty() {
            continue;
        }
        let candidate = dir.join(command);
        match check_executable(&candidate) {
            Found::Yes => return Ok(candidate),
            Found::NotExecutable => {
                not_executable.get_or_insert(candidate);
            }
            Found::No => {}
        }
    }
    match not_executable {
        Some(p) => Err(CommandLookupError::NotExecutable(p)),
        None => Err(CommandLookupError::NotFound(format!(
            "{command} (not on PATH)"
        ))),
    }
}

enum Found {
    Yes,
    NotExecutable,
    No,
}

fn check_executable(path: &Path) -> Found {
    match fs::metadata(path) {
        Ok(meta) if meta.is_file() && is_exec(&meta) => Found::Yes,
        Ok(_) => Found::NotExecutable,
        Err(_) => Found::No,
    }
}

#[cfg(unix)]
fn is_exec(meta: &fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn is_exec(_meta: &fs::Metadata) -> bool {
    true
}
