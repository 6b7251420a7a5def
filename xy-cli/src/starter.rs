//! The starter `sandbox { }` block `xyctl add` and `xyctl import` write
//! (SPEC §21) unless `--no-sandbox`: what a server needs beyond the
//! defaults every sandbox has (system and program directories, working
//! dir, private `TMPDIR`) so it runs on the first try, and nothing more
//! of the home directory. Pure: the file system is asked through a
//! closure, so every rule is unit-tested.
//!
//! What goes in:
//! - the package cache of the command's launcher, writable (`npx`/`npm`:
//!   `~/.npm`; `uvx`/`uv`: `~/.cache/uv` and `~/.local/share/uv`; `pipx`,
//!   `pip`, `pnpm`, `yarn`, `bun`, `deno`: theirs), and the launcher's own
//!   config file when it exists (`~/.npmrc`, `~/.config/uv`), readable;
//! - every existing path named in the arguments or in an `env` value: a
//!   directory is writable (a directory handed to a server is usually its
//!   store: server-filesystem's roots, a git repo, a notes folder) except
//!   after `--from`/`--with`/`--project`/`--directory`/`--prefix`, where it
//!   is code and readable; a script (`.js`, `.py`, …) makes its project
//!   readable (the nearest directory above it with `package.json`,
//!   `pyproject.toml` or `node_modules`, so its dependencies load); any
//!   other file named in the arguments is readable, never writable (SPEC
//!   §25: the system `chromium`, a `--pypi` install's entry script — an
//!   argument naming a file says nothing about writing it); a file named
//!   in an `env` value is writable (`MEMORY_FILE_PATH`: the server's data),
//!   and one that does not exist yet makes its directory writable;
//! - `network "any"`: network rules break servers in ways a starter
//!   cannot guess; the comment says how to narrow it.
//!
//! Never the home directory itself, `/`, or a directory above the home.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use xy_core::sandbox::{Os, expand_home, tilde};

use crate::server_file::ServerSpec;

/// What a path is on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Nothing there.
    Missing,
    /// A regular file (or anything not a directory).
    File,
    /// A directory.
    Dir,
}

/// The file system as [`starter`] sees it.
pub(crate) fn kind_on_disk(p: &Path) -> Kind {
    match std::fs::metadata(p) {
        Ok(m) if m.is_dir() => Kind::Dir,
        Ok(_) => Kind::File,
        Err(_) => Kind::Missing,
    }
}

/// What the starter needs to know about the server.
#[derive(Debug, Clone)]
pub(crate) struct StarterInput<'a> {
    /// `command` as written.
    pub(crate) command: &'a str,
    /// `args`.
    pub(crate) args: &'a [String],
    /// `env`.
    pub(crate) env: &'a BTreeMap<String, String>,
    /// `working-dir`, absolute, if any (relative paths resolve against it).
    pub(crate) working_dir: Option<&'a Path>,
    /// The user's home directory.
    pub(crate) home: &'a Path,
    /// Whose cache locations to use.
    pub(crate) os: Os,
}

/// The starter rules: absolute paths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Starter {
    /// `read` lines.
    pub(crate) read: Vec<PathBuf>,
    /// `write` lines.
    pub(crate) write: Vec<PathBuf>,
    /// Cache directories among `write` that do not exist yet: `add`
    /// creates them, because a rule needs its path to exist to be enforced
    /// and the launcher would create them at its first run anyway.
    pub(crate) create: Vec<PathBuf>,
    /// Paths named in the command line that were left out, and why.
    pub(crate) skipped: Vec<(String, &'static str)>,
    /// `env-pass` lines: the trust-root variables set where `xyctl` ran
    /// (D223).
    pub(crate) env_pass: Vec<String>,
}

/// Variables that name the certificates a TLS client trusts. On a network
/// that inspects TLS with its own CA, a server that fetches works directly
/// only with them (`uvx` failed `invalid peer certificate: UnknownIssuer`
/// through xy, D223); they name public certificates, never a secret.
pub(crate) const TRUST_ROOT_VARS: &[&str] = &[
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "PIP_CERT",
];

/// Flags whose value is code to run, not data to work on.
const CODE_FLAGS: &[&str] = &["--from", "--with", "--project", "--directory", "--prefix"];

/// File extensions of programs: their project is read, not the file written.
const SCRIPT_EXTENSIONS: &[&str] = &[
    "js", "mjs", "cjs", "ts", "mts", "cts", "jsx", "tsx", "py", "pyc", "pyz", "sh", "bash", "rb",
    "pl", "php", "jar", "wasm", "exe",
];

/// Files that mark a project's root.
const PROJECT_MARKERS: &[&str] = &["package.json", "pyproject.toml", "node_modules", "setup.py"];

/// The launcher's caches (written) and config files (read), home-relative.
fn launcher_paths(command: &str, os: Os) -> (&'static [&'static str], &'static [&'static str]) {
    let name = Path::new(command)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(command);
    let mac = os == Os::Macos;
    match name {
        "npx" | "npm" => (&[".npm"], &[".npmrc"]),
        "pnpm" | "pnpx" if mac => (&["Library/pnpm", "Library/Caches/pnpm"], &[".npmrc"]),
        "pnpm" | "pnpx" => (&[".local/share/pnpm", ".cache/pnpm"], &[".npmrc"]),
        "yarn" if mac => (&["Library/Caches/Yarn", ".yarn"], &[".yarnrc", ".npmrc"]),
        "yarn" => (&[".cache/yarn", ".yarn"], &[".yarnrc", ".npmrc"]),
        "bun" | "bunx" => (&[".bun"], &[".npmrc", ".bunfig.toml"]),
        "uv" | "uvx" => (&[".cache/uv", ".local/share/uv"], &[".config/uv"]),
        "pipx" if mac => (
            &[
                ".local/pipx",
                "Library/Application Support/pipx",
                "Library/Caches/pipx",
            ],
            &[],
        ),
        "pipx" => (&[".local/pipx", ".local/share/pipx", ".cache/pipx"], &[]),
        "pip" | "pip3" if mac => (&["Library/Caches/pip"], &[".config/pip"]),
        "pip" | "pip3" => (&[".cache/pip"], &[".config/pip"]),
        "deno" if mac => (&["Library/Caches/deno"], &[]),
        "deno" => (&[".cache/deno"], &[]),
        _ => (&[], &[]),
    }
}

/// The starter rules for `input`; `kind` tells what a path is on disk.
pub(crate) fn starter(input: &StarterInput<'_>, kind: &dyn Fn(&Path) -> Kind) -> Starter {
    let mut s = Starter::default();
    let home = input.home;
    let (caches, configs) = launcher_paths(input.command, input.os);
    for c in caches {
        let p = home.join(c);
        if kind(&p) == Kind::Missing {
            s.create.push(p.clone());
        }
        s.write.push(p);
    }
    for c in configs {
        let p = home.join(c);
        if kind(&p) != Kind::Missing {
            s.read.push(p);
        }
    }
    let mut previous: Option<&str> = None;
    for arg in input.args {
        let (flag, value) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with('-') => (Some(f), v),
            _ => (previous.filter(|p| p.starts_with('-')), arg.as_str()),
        };
        let code = flag.is_some_and(|f| CODE_FLAGS.contains(&f));
        named_path(&mut s, input, kind, value, code, false);
        previous = Some(arg);
    }
    for value in input.env.values() {
        named_path(&mut s, input, kind, value, false, true);
    }
    s.read.retain(|r| !s.write.iter().any(|w| r.starts_with(w)));
    dedupe(&mut s.read);
    dedupe(&mut s.write);
    s
}

/// Drops repeats and paths beneath another path of the same list.
fn dedupe(list: &mut Vec<PathBuf>) {
    let all = list.clone();
    let mut seen: Vec<PathBuf> = Vec::new();
    list.retain(|p| {
        let covered = all.iter().any(|q| q != p && p.starts_with(q)) || seen.contains(p);
        seen.push(p.clone());
        !covered
    });
}

/// Adds the rule a path-looking `value` asks for.
fn named_path(
    s: &mut Starter,
    input: &StarterInput<'_>,
    kind: &dyn Fn(&Path) -> Kind,
    value: &str,
    code: bool,
    from_env: bool,
) {
    let home = input.home;
    let path = if value == "~" || value.starts_with("~/") {
        expand_home(value, home)
    } else if value.starts_with('/') {
        PathBuf::from(value)
    } else if value.starts_with("./") || value.starts_with("../") {
        match input.working_dir {
            Some(w) => normalize(&w.join(value)),
            None => return,
        }
    } else {
        return;
    };
    let path = normalize(&path);
    let too_wide = path == Path::new("/") || home.starts_with(&path);
    let k = kind(&path);
    if too_wide {
        if k != Kind::Missing {
            s.skipped
                .push((value.to_owned(), "the whole home directory or above it"));
        }
        return;
    }
    match k {
        Kind::Dir if code => s.read.push(path),
        Kind::Dir => s.write.push(path),
        Kind::File if is_script(&path) => s.read.push(project_of(&path, home, kind)),
        Kind::File if from_env => s.write.push(path),
        Kind::File => s.read.push(path),
        Kind::Missing if from_env => {
            if let Some(parent) = path.parent()
                && kind(parent) == Kind::Dir
                && !home.starts_with(parent)
            {
                s.write.push(parent.to_path_buf());
            }
        }
        Kind::Missing => {}
    }
}

/// `.` and `..` resolved lexically (the parser refuses `..` in rules).
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            c => out.push(c.as_os_str()),
        }
    }
    out
}

fn is_script(p: &Path) -> bool {
    p.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| SCRIPT_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}

/// The nearest directory above `script` with a project marker, stopping
/// below the home directory; the script's own directory without one.
fn project_of(script: &Path, home: &Path, kind: &dyn Fn(&Path) -> Kind) -> PathBuf {
    let dir = script.parent().unwrap_or(script).to_path_buf();
    let mut at = dir.as_path();
    loop {
        if PROJECT_MARKERS
            .iter()
            .any(|m| kind(&at.join(m)) != Kind::Missing)
        {
            return at.to_path_buf();
        }
        match at.parent() {
            Some(up) if !home.starts_with(up) && up != Path::new("/") => at = up,
            _ => return dir,
        }
    }
}

/// The starter block for `spec` on this machine (this user's home, this
/// OS, the real disk) and the cache directories to create once the file is
/// written; `None` without a home directory to anchor the rules.
pub(crate) fn block_for(spec: &ServerSpec, by: &str) -> Option<(String, Vec<PathBuf>)> {
    let home = std::env::home_dir()?;
    let working_dir = spec.working_dir.as_deref().map(Path::new);
    let mut s = starter(
        &StarterInput {
            command: &spec.command,
            args: &spec.args,
            env: &spec.env,
            working_dir,
            home: &home,
            os: Os::current(),
        },
        &kind_on_disk,
    );
    for var in TRUST_ROOT_VARS {
        if spec.env.contains_key(*var) {
            continue;
        }
        let Some(value) = std::env::var_os(var).filter(|v| !v.is_empty()) else {
            continue;
        };
        s.env_pass.push((*var).to_owned());
        // A bundle in the home directory must be readable too; the
        // system's (`/etc/ssl`) already is.
        let path = PathBuf::from(value);
        if path.is_absolute() && path.starts_with(&home) && !s.read.contains(&path) {
            s.read.push(path);
        }
    }
    Some((render_block(&s, &home, by), s.create))
}

/// Creates the starter's missing cache directories (private, like the
/// launchers make them). A failure is only a warning: the spawn reports a
/// rule it cannot apply.
pub(crate) fn create_dirs(dirs: &[PathBuf]) -> Vec<String> {
    use std::os::unix::fs::DirBuilderExt;
    dirs.iter()
        .filter_map(|d| {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(d)
                .err()
                .map(|e| format!("cannot create {}: {e}", d.display()))
        })
        .collect()
}

/// The `sandbox { }` block in the house style (KDL v2), after a blank
/// line; `by` names the command that wrote it.
pub(crate) fn render_block(s: &Starter, home: &Path, by: &str) -> String {
    let mut out = String::from("\n");
    out.push_str(&format!(
        "// Starter sandbox from `{by}`: besides what is below, the server may read the\n\
         // system and its program's directories (a venv whole) and write its working\n\
         // dir, a private TMPDIR and its own HOME (~/.local/share/xy/data/<name>); the\n\
         // rest of your home directory is out of reach. When it breaks, the\n\
         // `why` in `xyctl status` names the path: add a read or write line for it.\n\
         // `network \"none\"` (or \"allow\" with allow-host lines) also cuts the network.\n"
    ));
    out.push_str("sandbox {\n");
    for (key, list) in [("read", &s.read), ("write", &s.write)] {
        for p in list {
            out.push_str(&format!(
                "    {key} {}\n",
                crate::server_file::quote(&tilde(p, home))
            ));
        }
    }
    for (value, why) in &s.skipped {
        out.push_str(&format!(
            "    // not added: {} ({why}); name the directories it needs\n",
            value.escape_debug()
        ));
    }
    if !s.env_pass.is_empty() {
        out.push_str(
            "    // the certificates your shell trusts (set where xyctl ran), so TLS checks\n\
             // as it does there\n",
        );
        out.push_str("    env-pass");
        for v in &s.env_pass {
            out.push(' ');
            out.push_str(&crate::server_file::quote(v));
        }
        out.push('\n');
    }
    out.push_str("    network \"any\"\n}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake disk: directories end with `/`.
    fn disk(entries: &[&'static str]) -> impl Fn(&Path) -> Kind {
        let entries: Vec<&'static str> = entries.to_vec();
        move |p: &Path| {
            let s = p.to_str().unwrap();
            if s == "/"
                || entries
                    .iter()
                    .any(|e| e.strip_suffix('/') == Some(s) || e.starts_with(&format!("{s}/")))
            {
                Kind::Dir
            } else if entries.contains(&s) {
                Kind::File
            } else {
                Kind::Missing
            }
        }
    }

    fn run(command: &str, args: &[&str], env: &[(&str, &str)], fs: &[&'static str]) -> Starter {
        let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        let env: BTreeMap<String, String> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        starter(
            &StarterInput {
                command,
                args: &args,
                env: &env,
                working_dir: Some(Path::new("/home/me/work")),
                home: Path::new("/home/me"),
                os: Os::Linux,
            },
            &disk(fs),
        )
    }

    fn paths(v: &[PathBuf]) -> Vec<&str> {
        v.iter().map(|p| p.to_str().unwrap()).collect()
    }

    #[test]
    fn npx_filesystem_server_gets_the_npm_cache_and_its_directories() {
        let s = run(
            "npx",
            &[
                "-y",
                "@modelcontextprotocol/server-filesystem",
                "/home/me/notes",
                "~/projects/site",
            ],
            &[],
            &[
                "/home/me/.npm/",
                "/home/me/.npmrc",
                "/home/me/notes/",
                "/home/me/projects/site/",
            ],
        );
        assert_eq!(
            paths(&s.write),
            ["/home/me/.npm", "/home/me/notes", "/home/me/projects/site"]
        );
        assert_eq!(paths(&s.read), ["/home/me/.npmrc"]);
        assert!(s.create.is_empty());
    }

    #[test]
    fn uvx_caches_are_created_when_missing_and_code_flags_read() {
        let s = run(
            "/usr/local/bin/uvx",
            &[
                "--from",
                "/home/me/src/mcp-git",
                "mcp-server-git",
                "--repository",
                "/home/me/src/site",
            ],
            &[],
            &["/home/me/src/mcp-git/", "/home/me/src/site/"],
        );
        assert_eq!(
            paths(&s.write),
            [
                "/home/me/.cache/uv",
                "/home/me/.local/share/uv",
                "/home/me/src/site"
            ]
        );
        assert_eq!(paths(&s.read), ["/home/me/src/mcp-git"]);
        assert_eq!(
            paths(&s.create),
            ["/home/me/.cache/uv", "/home/me/.local/share/uv"]
        );
        let mac = starter(
            &StarterInput {
                command: "pip",
                args: &[],
                env: &BTreeMap::new(),
                working_dir: None,
                home: Path::new("/Users/me"),
                os: Os::Macos,
            },
            &disk(&[]),
        );
        assert_eq!(paths(&mac.write), ["/Users/me/Library/Caches/pip"]);
    }

    #[test]
    fn scripts_make_their_project_readable_and_argument_files_only_readable() {
        let s = run(
            "node",
            &[
                "/home/me/srv/dist/index.js",
                "--db=/home/me/data/app.sqlite",
                "./local.json",
            ],
            &[],
            &[
                "/home/me/srv/package.json",
                "/home/me/srv/dist/index.js",
                "/home/me/data/app.sqlite",
                "/home/me/work/local.json",
            ],
        );
        assert_eq!(
            paths(&s.read),
            [
                "/home/me/srv",
                "/home/me/data/app.sqlite",
                "/home/me/work/local.json"
            ]
        );
        assert!(s.write.is_empty(), "{:?}", s.write);
        // An executable and an entry script named in the arguments stay
        // read-only (issue 39: the system chromium, a --pypi entry point).
        let s = run(
            "npx",
            &[
                "@playwright/mcp",
                "--executable-path",
                "/usr/bin/chromium",
                "/home/me/.local/share/xy/packages/t/1/venv/bin/mcp-server-time",
            ],
            &[],
            &[
                "/home/me/.npm/",
                "/usr/bin/chromium",
                "/home/me/.local/share/xy/packages/t/1/venv/bin/mcp-server-time",
            ],
        );
        assert_eq!(paths(&s.write), ["/home/me/.npm"]);
        assert!(s.read.iter().any(|p| p == Path::new("/usr/bin/chromium")));
        // No marker: the script's own directory.
        let s = run(
            "python3",
            &["/home/me/tools/server.py"],
            &[],
            &["/home/me/tools/server.py"],
        );
        assert_eq!(paths(&s.read), ["/home/me/tools"]);
    }

    #[test]
    fn env_paths_and_files_to_be_created() {
        let s = run(
            "npx",
            &["-y", "@modelcontextprotocol/server-memory"],
            &[
                ("MEMORY_FILE_PATH", "/home/me/.mcp/memory.json"),
                ("LOG", "info"),
            ],
            &["/home/me/.npm/", "/home/me/.mcp/"],
        );
        assert_eq!(paths(&s.write), ["/home/me/.npm", "/home/me/.mcp"]);
        // A file in the home itself: the home is never added.
        let s = run("x", &[], &[("F", "/home/me/memory.json")], &["/home/me/"]);
        assert!(s.write.is_empty(), "{s:?}");
    }

    #[test]
    fn never_the_home_root_or_missing_argument_paths() {
        let s = run(
            "server",
            &[
                "~",
                "/",
                "/home",
                "/home/me/gone",
                "stdio",
                "--port",
                "8080",
            ],
            &[],
            &["/home/me/x"],
        );
        assert!(s.read.is_empty() && s.write.is_empty(), "{s:?}");
        assert_eq!(s.skipped.len(), 3, "{s:?}");
        // A path beneath another one is covered by it.
        let s = run("server", &["/data", "/data/sub"], &[], &["/data/sub/"]);
        assert_eq!(paths(&s.write), ["/data"]);
    }

    #[test]
    fn the_block_parses_and_says_what_it_allows() {
        let s = Starter {
            read: vec!["/home/me/.npmrc".into()],
            write: vec!["/home/me/.npm".into(), "/srv/a \"b\"".into()],
            create: vec![],
            skipped: vec![("~".into(), "the whole home directory or above it")],
            env_pass: vec!["SSL_CERT_FILE".into(), "NODE_EXTRA_CA_CERTS".into()],
        };
        let block = render_block(&s, Path::new("/home/me"), "xyctl add");
        assert!(block.contains("    read \"~/.npmrc\"\n"), "{block}");
        assert!(block.contains("    write \"~/.npm\"\n"), "{block}");
        assert!(
            block.contains("    write \"/srv/a \\\"b\\\"\"\n"),
            "{block}"
        );
        assert!(block.ends_with("    network \"any\"\n}\n"), "{block}");
        let text = format!("command \"/bin/true\"\nport 8400\n{block}");
        let c = xy_core::config::parse_server("demo", Path::new("demo.kdl"), &text)
            .unwrap_or_else(|e| panic!("{}\n{text}", e.render(false)));
        let sb = c.sandbox.expect("a sandbox block");
        assert_eq!(sb.read, ["~/.npmrc"]);
        assert_eq!(sb.write, ["~/.npm", "/srv/a \"b\""]);
        assert_eq!(sb.network, xy_core::sandbox::NetworkMode::Any);
        assert_eq!(sb.env_pass, ["SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS"]);
        let empty = render_block(&Starter::default(), Path::new("/home/me"), "xyctl import");
        xy_core::config::parse_server(
            "e",
            Path::new("e.kdl"),
            &format!("command \"x\"\nport 1\n{empty}"),
        )
        .unwrap_or_else(|e| panic!("{}", e.render(false)));
    }
}
