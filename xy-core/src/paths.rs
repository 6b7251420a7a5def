//! Where xy keeps things (SPEC §2): XDG resolution done by hand on Linux and
//! macOS alike, the `XY_SOCKET` override, the settings file's name, and the
//! socket-path length check.
//! `directories` is consulted for the home directory only.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Size of `sockaddr_un.sun_path` on this OS; a socket path must be shorter
/// (the terminating NUL takes the last byte).
#[cfg(target_os = "macos")]
pub const SOCKET_PATH_MAX: usize = 104;
/// Size of `sockaddr_un.sun_path` on this OS; a socket path must be shorter
/// (the terminating NUL takes the last byte).
#[cfg(not(target_os = "macos"))]
pub const SOCKET_PATH_MAX: usize = 108;

/// The daemon's settings file's name inside `$XDG_CONFIG_HOME/xy/`.
pub const SETTINGS_FILE: &str = "xy.kdl";

/// Every location xy reads or writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    /// `${XDG_CONFIG_HOME}/xy/servers`: one `<name>.kdl` per server.
    pub config_dir: PathBuf,
    /// `${XDG_CONFIG_HOME}/xy/xy.kdl`: the daemon's settings (SPEC §20),
    /// optional. `--config-dir` does not move it.
    pub settings_file: PathBuf,
    /// `${XDG_STATE_HOME}/xy`: pidfile, run records, logs.
    pub state_dir: PathBuf,
    /// `${XDG_STATE_HOME}/xy/logs`: `<name>.log` and `daemon.log`.
    pub log_dir: PathBuf,
    /// `${XDG_STATE_HOME}/xy/run`: one JSON record per live child (orphan sweep).
    pub run_dir: PathBuf,
    /// `${XDG_STATE_HOME}/xy/xy.pid`, flock-ed for the daemon's life.
    pub pidfile: PathBuf,
    /// The Unix socket (`XY_SOCKET`, else `${XDG_RUNTIME_DIR}/xy.sock`, else state dir).
    pub socket: PathBuf,
    /// `${XDG_DATA_HOME:-~/.local/share}/xy`: pinned installs (SPEC §22).
    /// With neither the variable nor a home, `<state dir>/data`, so a setup
    /// that names only the config and state homes keeps resolving.
    pub data_dir: PathBuf,
}

/// Why paths could not be resolved.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PathError {
    /// No home directory and no absolute XDG variable to stand in for it.
    #[error("cannot find the home directory (set HOME, or XDG_CONFIG_HOME and XDG_STATE_HOME)")]
    NoHome,
    /// The socket path would not fit in `sockaddr_un`.
    #[error(
        "socket path {path} is {len} bytes, too long for the OS limit of {max} bytes \
         (sun_path, including its NUL); set XY_SOCKET (or XDG_RUNTIME_DIR) to a shorter path"
    )]
    SocketPathTooLong {
        /// The offending path.
        path: PathBuf,
        /// Its length in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
}

impl Paths {
    /// Resolves from the process environment.
    pub fn from_env() -> Result<Paths, PathError> {
        let home = directories::BaseDirs::new().map(|b| b.home_dir().to_path_buf());
        Paths::resolve(|k| std::env::var_os(k), home)
    }

    /// Resolves from an environment lookup and a home directory; pure, for tests.
    ///
    /// Relative XDG values are ignored, as the XDG spec requires. The socket
    /// length is not checked here: a client only reading paths should not
    /// fail; call [`Paths::check_socket`] before binding or connecting.
    pub fn resolve(
        env: impl Fn(&str) -> Option<OsString>,
        home: Option<PathBuf>,
    ) -> Result<Paths, PathError> {
        let abs = |key: &str| env(key).map(PathBuf::from).filter(|p| p.is_absolute());
        let home = home.filter(|h| h.is_absolute());
        let from_home = |rel: &str| home.as_ref().map(|h| h.join(rel));

        let config_home = abs("XDG_CONFIG_HOME")
            .or_else(|| from_home(".config"))
            .ok_or(PathError::NoHome)?;
        let state_home = abs("XDG_STATE_HOME")
            .or_else(|| from_home(".local/state"))
            .ok_or(PathError::NoHome)?;

        let state_dir = state_home.join("xy");
        let data_dir = abs("XDG_DATA_HOME")
            .or_else(|| from_home(".local/share"))
            .map(|d| d.join("xy"))
            .unwrap_or_else(|| state_dir.join("data"));
        let socket = env("XY_SOCKET")
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
            .or_else(|| abs("XDG_RUNTIME_DIR").map(|r| r.join("xy.sock")))
            .unwrap_or_else(|| state_dir.join("xy.sock"));

        Ok(Paths {
            config_dir: config_home.join("xy").join("servers"),
            settings_file: config_home.join("xy").join(SETTINGS_FILE),
            log_dir: state_dir.join("logs"),
            run_dir: state_dir.join("run"),
            pidfile: state_dir.join("xy.pid"),
            socket,
            state_dir,
            data_dir,
        })
    }

    /// Replaces the config directory (`--config-dir`).
    pub fn with_config_dir(mut self, dir: impl Into<PathBuf>) -> Paths {
        self.config_dir = dir.into();
        self
    }

    /// The log file of one server.
    pub fn server_log(&self, name: &str) -> PathBuf {
        self.log_dir.join(format!("{name}.log"))
    }

    /// The daemon's own log file.
    pub fn daemon_log(&self) -> PathBuf {
        self.log_dir.join("daemon.log")
    }

    /// The child record of one server (orphan sweep).
    pub fn run_record(&self, name: &str) -> PathBuf {
        self.run_dir.join(format!("{name}.json"))
    }

    /// The private temp dir (`TMPDIR`) of one sandboxed server (SPEC §21):
    /// under xy's state dir, which the child cannot otherwise read.
    pub fn sandbox_temp(&self, name: &str) -> PathBuf {
        self.state_dir.join("sandbox").join(name).join("tmp")
    }

    /// `<data dir>/data`: the private home and data dirs of sandboxed
    /// servers, `<name>` each (SPEC §25), out of every other server's reach.
    pub fn server_data_root(&self) -> PathBuf {
        self.data_dir.join("data")
    }

    /// `<data dir>/packages/<name>`: every installed version of one
    /// server's pinned package (SPEC §22).
    pub fn packages_root(&self, name: &str) -> PathBuf {
        self.data_dir.join("packages").join(name)
    }

    /// `<data dir>/packages/<name>/<version>`: one installed version.
    pub fn packages_dir(&self, name: &str, version: &str) -> PathBuf {
        self.packages_root(name).join(version)
    }

    /// Fails when the socket path is too long for `sockaddr_un`.
    pub fn check_socket(&self) -> Result<(), PathError> {
        check_socket_path(&self.socket)
    }
}

/// Fails when `path` is too long to bind or connect to.
pub fn check_socket_path(path: &Path) -> Result<(), PathError> {
    let len = path.as_os_str().len();
    if len >= SOCKET_PATH_MAX {
        return Err(PathError::SocketPathTooLong {
            path: path.to_path_buf(),
            len,
            max: SOCKET_PATH_MAX,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn resolve(vars: &[(&str, &str)], home: Option<&str>) -> Result<Paths, PathError> {
        let map: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), OsString::from(v)))
            .collect();
        Paths::resolve(|k| map.get(k).cloned(), home.map(PathBuf::from))
    }

    #[test]
    fn defaults_come_from_home() {
        let p = resolve(&[], Some("/home/u")).unwrap();
        assert_eq!(p.config_dir, Path::new("/home/u/.config/xy/servers"));
        assert_eq!(p.settings_file, Path::new("/home/u/.config/xy/xy.kdl"));
        assert_eq!(p.state_dir, Path::new("/home/u/.local/state/xy"));
        assert_eq!(p.log_dir, Path::new("/home/u/.local/state/xy/logs"));
        assert_eq!(p.run_dir, Path::new("/home/u/.local/state/xy/run"));
        assert_eq!(p.pidfile, Path::new("/home/u/.local/state/xy/xy.pid"));
        assert_eq!(p.socket, Path::new("/home/u/.local/state/xy/xy.sock"));
        assert_eq!(p.data_dir, Path::new("/home/u/.local/share/xy"));
        assert_eq!(
            p.packages_dir("mem", "1.2.3"),
            Path::new("/home/u/.local/share/xy/packages/mem/1.2.3")
        );
        assert_eq!(
            p.server_log("a"),
            Path::new("/home/u/.local/state/xy/logs/a.log")
        );
        assert_eq!(
            p.daemon_log(),
            Path::new("/home/u/.local/state/xy/logs/daemon.log")
        );
        assert_eq!(
            p.run_record("a"),
            Path::new("/home/u/.local/state/xy/run/a.json")
        );
    }

    /// Every combination of XDG_CONFIG_HOME / XDG_STATE_HOME / XDG_RUNTIME_DIR
    /// being unset, relative (ignored) or absolute, with and without XY_SOCKET.
    #[test]
    fn resolution_table() {
        let choices = [None, Some("rel/dir"), Some("/abs")];
        for cfg in choices {
            for state in choices {
                for run in choices {
                    for sock in [None, Some("/tmp/x.sock")] {
                        let mut vars = Vec::new();
                        if let Some(v) = cfg {
                            vars.push(("XDG_CONFIG_HOME", v));
                        }
                        if let Some(v) = state {
                            vars.push(("XDG_STATE_HOME", v));
                        }
                        if let Some(v) = run {
                            vars.push(("XDG_RUNTIME_DIR", v));
                        }
                        if let Some(v) = sock {
                            vars.push(("XY_SOCKET", v));
                        }
                        let p = resolve(&vars, Some("/h")).unwrap();
                        let want_cfg = if cfg == Some("/abs") {
                            "/abs/xy/servers"
                        } else {
                            "/h/.config/xy/servers"
                        };
                        let want_state = if state == Some("/abs") {
                            "/abs/xy"
                        } else {
                            "/h/.local/state/xy"
                        };
                        let want_sock = match (sock, run) {
                            (Some(s), _) => s.to_owned(),
                            (None, Some("/abs")) => "/abs/xy.sock".to_owned(),
                            _ => format!("{want_state}/xy.sock"),
                        };
                        assert_eq!(p.config_dir, Path::new(want_cfg), "{vars:?}");
                        assert_eq!(p.state_dir, Path::new(want_state), "{vars:?}");
                        assert_eq!(p.socket, Path::new(&want_sock), "{vars:?}");
                        assert_eq!(p.pidfile, Path::new(want_state).join("xy.pid"));
                    }
                }
            }
        }
    }

    #[test]
    fn no_home_needs_absolute_xdg() {
        assert_eq!(resolve(&[], None), Err(PathError::NoHome));
        assert_eq!(resolve(&[], Some("relative/home")), Err(PathError::NoHome));
        assert_eq!(
            resolve(&[("XDG_CONFIG_HOME", "/c")], None),
            Err(PathError::NoHome)
        );
        let p = resolve(&[("XDG_CONFIG_HOME", "/c"), ("XDG_STATE_HOME", "/s")], None).unwrap();
        assert_eq!(p.socket, Path::new("/s/xy/xy.sock"));
        assert_eq!(p.data_dir, Path::new("/s/xy/data"));
        let p = resolve(&[("XDG_DATA_HOME", "/d")], Some("/h")).unwrap();
        assert_eq!(p.data_dir, Path::new("/d/xy"));
    }

    #[test]
    fn empty_xy_socket_is_ignored() {
        let p = resolve(&[("XY_SOCKET", "")], Some("/h")).unwrap();
        assert_eq!(p.socket, Path::new("/h/.local/state/xy/xy.sock"));
    }

    #[test]
    fn config_dir_override() {
        let p = resolve(&[], Some("/h")).unwrap().with_config_dir("/etc/xy");
        assert_eq!(p.config_dir, Path::new("/etc/xy"));
    }

    #[test]
    fn socket_length_limit() {
        let ok = format!("/{}", "a".repeat(SOCKET_PATH_MAX - 2));
        assert!(check_socket_path(Path::new(&ok)).is_ok());
        let long = format!("/{}", "a".repeat(SOCKET_PATH_MAX - 1));
        let err = check_socket_path(Path::new(&long)).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains(&long), "{msg}");
        assert!(msg.contains(&SOCKET_PATH_MAX.to_string()), "{msg}");
    }
}
