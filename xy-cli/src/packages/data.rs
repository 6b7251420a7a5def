//! Data next to code (SPEC §25, D220): a pinned install's package
//! directory is read-only, yet some servers write their data beside their
//! own code unless an environment variable points elsewhere
//! (`@modelcontextprotocol/server-memory`'s `MEMORY_FILE_PATH`). After the
//! install, the package's own code (never its dependencies) is scanned for
//! the path-like variables it reads (`process.env.X_PATH`,
//! `os.environ.get("X_FILE")`, `os.getenv("X_DIR")`, …) whose fallback is
//! beside the code itself (`__dirname`, `import.meta.url`, `__file__`
//! nearby), and each one the user did not give is pointed into the
//! server's data directory (`$XDG_DATA_HOME/xy/data/<name>/`, writable
//! under the starter sandbox); a `server.json` shipped in the package
//! names the file through its declared default.
//! Works offline: no registry is asked.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use xy_core::package::Ecosystem;

/// Files read per package, and bytes per file: a package's own code is
/// small; a bundle past this is scanned as far as the limit.
const MAX_FILES: usize = 4000;
const MAX_FILE_BYTES: u64 = 4 << 20;

/// One variable pointed into the data directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DataVar {
    /// The variable's name.
    pub(crate) name: String,
    /// The path it is set to.
    pub(crate) value: PathBuf,
    /// Where it was found (`dist/index.js`, `server.json`), for the note.
    pub(crate) found_in: String,
}

/// Where a server's data goes: `<data dir>/data/<server>`, the directory
/// the daemon makes the confined server's home (`SandboxEnv::data_dir`).
pub(crate) fn data_dir(paths: &xy_core::paths::Paths, server: &str) -> PathBuf {
    paths.server_data_root().join(server)
}

/// The variables of the install in `version_dir` (package `name`) to point
/// into `data`, leaving out those in `given` (`--env`, `server.json`
/// values): sorted by name.
pub(crate) fn find(
    ecosystem: Ecosystem,
    version_dir: &Path,
    name: &str,
    data: &Path,
    given: &dyn Fn(&str) -> bool,
) -> Vec<DataVar> {
    let (root, files) = match ecosystem {
        Ecosystem::Npm => {
            let root = version_dir.join("node_modules").join(name);
            let files = npm_files(&root);
            (root, files)
        }
        Ecosystem::Pypi => pypi_files(version_dir, name),
    };
    let declared = shipped_server_json(&root);
    // name → (found in, file name hint).
    let mut found: BTreeMap<String, (String, Option<String>)> = BTreeMap::new();
    for file in &files {
        let Ok(text) = read_limited(file) else {
            continue;
        };
        for var in env_reads(&text) {
            if !is_data_path(&var) || found.contains_key(&var) || !defaults_beside_code(&text, &var)
            {
                continue;
            }
            let rel = file.strip_prefix(&root).unwrap_or(file);
            let hint = file_name_hint(&text, &var).or_else(|| {
                declared
                    .iter()
                    .find(|(n, _)| *n == var)
                    .and_then(|(_, d)| d.as_deref())
                    .and_then(|d| Path::new(d).file_name())
                    .map(|f| f.to_string_lossy().into_owned())
            });
            found.insert(var, (rel.display().to_string(), hint));
        }
    }
    found
        .into_iter()
        .filter(|(var, _)| !given(var))
        .map(|(var, (found_in, hint))| DataVar {
            value: value_for(&var, hint.as_deref(), data),
            name: var,
            found_in,
        })
        .collect()
}

/// The variable names read through an environment accessor in `text`:
/// JavaScript's `process.env.X` / `process.env["X"]`, Python's
/// `os.environ["X"]`, `environ.get("X"`, `getenv("X"`, Deno's
/// `Deno.env.get("X")`.
pub(crate) fn env_reads(text: &str) -> Vec<String> {
    const ACCESSORS: [&str; 6] = [
        "process.env.",
        "process.env[",
        "environ[",
        "environ.get(",
        "getenv(",
        "env.get(",
    ];
    let mut out = Vec::new();
    for acc in ACCESSORS {
        let mut from = 0;
        while let Some(at) = text[from..].find(acc) {
            let rest = &text[from + at + acc.len()..];
            from += at + acc.len();
            let rest = rest.trim_start();
            let quoted = !acc.ends_with('.');
            let rest = if quoted {
                match rest.strip_prefix(['"', '\'', '`']) {
                    Some(r) => r,
                    None => continue,
                }
            } else {
                rest
            };
            let n = rest
                .bytes()
                .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
                .count();
            let name = &rest[..n];
            let closed = !quoted || rest[n..].starts_with(['"', '\'', '`']);
            if n > 0 && closed && !out.iter().any(|o| o == name) {
                out.push(name.to_owned());
            }
        }
    }
    out
}

/// A variable that names where a server keeps data: upper case, ending in
/// `_PATH`, `_FILE`, `_DIR`, `_DIRECTORY` or `_FOLDER`; not one of the
/// system's or a runtime's own (`PATH`, `NODE_PATH`, `PYTHONPATH`, `XDG_*`,
/// `SSL_CERT_FILE`, …), and not one naming an input the user provides (a
/// config, a key or certificate, a credential, a program to run): pointing
/// those at an empty file would break the server's own default.
pub(crate) fn is_data_path(name: &str) -> bool {
    const SUFFIXES: [&str; 5] = ["_PATH", "_FILE", "_DIR", "_DIRECTORY", "_FOLDER"];
    const SYSTEM_PREFIXES: [&str; 12] = [
        "XDG_",
        "NODE_",
        "NPM_",
        "PYTHON",
        "PIP_",
        "UV_",
        "VIRTUAL_ENV",
        "CONDA_",
        "LD_",
        "DYLD_",
        "SSL_",
        "GIT_",
    ];
    const INPUT_WORDS: [&str; 20] = [
        "CONFIG",
        "CONF",
        "CFG",
        "SETTINGS",
        "CERT",
        "CA",
        "KEY",
        "PEM",
        "CREDENTIAL",
        "CREDENTIALS",
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "AUTH",
        "EXECUTABLE",
        "EXE",
        "BIN",
        "BINARY",
        "BROWSER",
        "CHROME",
    ];
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
        || !name.as_bytes()[0].is_ascii_uppercase()
    {
        return false;
    }
    let Some(suffix) = SUFFIXES.iter().find(|s| name.ends_with(*s)) else {
        return false;
    };
    let stem = &name[..name.len() - suffix.len()];
    if stem.is_empty() || SYSTEM_PREFIXES.iter().any(|p| name.starts_with(p)) {
        return false;
    }
    !stem
        .split('_')
        .any(|w| INPUT_WORDS.contains(&w) || w == "CHROMIUM" || w == "SOCKET")
}

/// Lines around a mention of the variable searched for the code's own
/// location.
const NEAR_LINES: usize = 40;

/// Whether the code that reads `var` falls back to a path beside itself:
/// within [`NEAR_LINES`] of a mention, it takes its own location
/// (`__dirname`, `__filename`, `import.meta.url`, `import.meta.dirname`,
/// `__file__`). Only such a default is data next to code; a variable whose
/// default lies elsewhere (an allow-list of folders, a file in HOME) keeps
/// it, as pointing it would change what the server does.
pub(crate) fn defaults_beside_code(text: &str, var: &str) -> bool {
    const SELF: [&str; 5] = [
        "__dirname",
        "__filename",
        "import.meta.url",
        "import.meta.dirname",
        "__file__",
    ];
    let lines: Vec<&str> = text.lines().collect();
    lines.iter().enumerate().any(|(i, l)| {
        l.contains(var)
            && lines[i.saturating_sub(NEAR_LINES)..(i + NEAR_LINES + 1).min(lines.len())]
                .iter()
                .any(|l| SELF.iter().any(|s| l.contains(s)))
    })
}

/// The name a file variable's file gets: a quoted literal `<stem>.<ext>`
/// in the code that reads it (`'memory.jsonl'` beside
/// `MEMORY_FILE_PATH`), the one nearest the variable's first mention.
fn file_name_hint(text: &str, var: &str) -> Option<String> {
    let stem = stem_of(var)?.to_ascii_lowercase().replace('_', "-");
    let lower = text.to_ascii_lowercase();
    let mention = lower.find(&var.to_ascii_lowercase())?;
    let mut best: Option<(usize, String)> = None;
    for q in ['"', '\''] {
        let needle = format!("{q}{stem}.");
        let alt = format!("{q}{}.", stem.replace('-', "_"));
        for n in [needle, alt] {
            let mut from = 0;
            while let Some(at) = lower[from..].find(&n) {
                let start = from + at + 1;
                from = start;
                let rest = &lower[start..];
                let len = rest
                    .bytes()
                    .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
                    .count();
                let lit = &rest[..len];
                let ext = lit.rsplit_once('.').map_or("", |(_, e)| e);
                if !rest[len..].starts_with(q) || ext.is_empty() || ext.len() > 8 {
                    continue;
                }
                let dist = mention.abs_diff(start);
                if best.as_ref().is_none_or(|(d, _)| dist < *d) {
                    best = Some((dist, text[start..start + len].to_owned()));
                }
            }
        }
    }
    best.map(|(_, s)| s)
}

/// `MEMORY_FILE_PATH` → `MEMORY`.
fn stem_of(var: &str) -> Option<&str> {
    [
        "_FILE_PATH",
        "_PATH",
        "_FILE",
        "_DIRECTORY",
        "_DIR",
        "_FOLDER",
    ]
    .iter()
    .find_map(|s| var.strip_suffix(s))
    .filter(|s| !s.is_empty())
}

/// A directory variable is the data directory itself; a file (or an
/// ambiguous `_PATH`) a name inside it: the code's own file name when it
/// names one, else the stem in lower case (`CACHE_PATH` → `cache`).
fn value_for(var: &str, hint: Option<&str>, data: &Path) -> PathBuf {
    if ["_DIR", "_DIRECTORY", "_FOLDER"]
        .iter()
        .any(|s| var.ends_with(s))
    {
        return data.to_path_buf();
    }
    let name = hint
        .map(str::to_owned)
        .unwrap_or_else(|| stem_of(var).unwrap_or(var).to_ascii_lowercase());
    data.join(name)
}

/// A file's text up to the limit; binary files are skipped by the caller
/// through their extension.
fn read_limited(p: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut buf = Vec::new();
    std::fs::File::open(p)?
        .take(MAX_FILE_BYTES)
        .read_to_end(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// The package's own script files: everything under its directory but
/// nested `node_modules` (dependencies), type declarations and maps.
fn npm_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut entries: Vec<_> = rd.flatten().collect();
        entries.sort_by_key(std::fs::DirEntry::file_name);
        for e in entries {
            if out.len() >= MAX_FILES {
                return out;
            }
            let name = e.file_name();
            let name = name.to_string_lossy();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                if name != "node_modules" && !name.starts_with('.') {
                    stack.push(e.path());
                }
            } else if ft.is_file()
                && [".js", ".mjs", ".cjs"].iter().any(|x| name.ends_with(x))
                && !name.ends_with(".d.ts")
            {
                out.push(e.path());
            }
        }
    }
    out
}

/// The distribution's own `.py` files, from its `RECORD` in the venv's
/// `site-packages`; the root they are relative to.
fn pypi_files(version_dir: &Path, name: &str) -> (PathBuf, Vec<PathBuf>) {
    let want = normalized(name);
    let lib = version_dir.join("venv").join("lib");
    let site = std::fs::read_dir(&lib)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("site-packages"))
        .find(|p| p.is_dir());
    let Some(site) = site else {
        return (lib, Vec::new());
    };
    let record = std::fs::read_dir(&site)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|f| f.to_str())
                .and_then(|f| f.strip_suffix(".dist-info"))
                .and_then(|f| f.rsplit_once('-'))
                .is_some_and(|(n, _)| normalized(n) == want)
        })
        .map(|d| d.join("RECORD"));
    let text = record
        .and_then(|r| std::fs::read_to_string(r).ok())
        .unwrap_or_default();
    let files = text
        .lines()
        .filter_map(|l| l.split(',').next())
        .filter(|p| p.ends_with(".py") && !p.starts_with("..") && !p.starts_with('/'))
        .take(MAX_FILES)
        .map(|p| site.join(p))
        .collect();
    (site, files)
}

/// PEP 503's normalized name.
fn normalized(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// The variables a `server.json` shipped at the package's root declares,
/// each with its default.
fn shipped_server_json(root: &Path) -> Vec<(String, Option<String>)> {
    let Ok(text) = std::fs::read_to_string(root.join("server.json")) else {
        return Vec::new();
    };
    let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for p in v
        .get("packages")
        .and_then(|p| p.as_array())
        .into_iter()
        .flatten()
    {
        for e in p
            .get("environmentVariables")
            .and_then(|e| e.as_array())
            .into_iter()
            .flatten()
        {
            if e.get("isSecret").and_then(serde_json::Value::as_bool) == Some(true) {
                continue;
            }
            if let Some(n) = e.get("name").and_then(|n| n.as_str()) {
                let default = e.get("default").and_then(|d| d.as_str()).map(str::to_owned);
                out.push((n.to_owned(), default));
            }
        }
    }
    out
}

/// Creates the data directory (0700) when a variable points into it, so a
/// server run without the sandbox finds it too.
pub(crate) fn create(data: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_reads_in_javascript_and_python_are_found() {
        let js = r#"if (process.env.MEMORY_FILE_PATH) { x = process.env["DB_DIR"]; }
                    const y = process.env[ 'LOG_FILE' ]; process.env.dynamic[k];"#;
        assert_eq!(
            env_reads(js),
            ["MEMORY_FILE_PATH", "dynamic", "DB_DIR", "LOG_FILE"]
        );
        let py = r#"p = os.environ.get("STORE_PATH", "x"); q = os.getenv('CACHE_DIR')
                    r = os.environ["HISTORY_FILE"]; s = os.getenv(name)"#;
        assert_eq!(env_reads(py), ["HISTORY_FILE", "STORE_PATH", "CACHE_DIR"]);
    }

    #[test]
    fn only_data_paths_count() {
        for yes in [
            "MEMORY_FILE_PATH",
            "DB_DIR",
            "HISTORY_FILE",
            "STORAGE_FOLDER",
        ] {
            assert!(is_data_path(yes), "{yes}");
        }
        for no in [
            "PATH",
            "NODE_PATH",
            "PYTHONPATH",
            "XDG_DATA_DIR",
            "SSL_CERT_FILE",
            "CONFIG_PATH",
            "MCP_CONFIG_FILE",
            "TLS_KEY_FILE",
            "GOOGLE_CREDENTIALS_FILE",
            "CHROME_PATH",
            "BROWSER_EXECUTABLE_PATH",
            "memory_file_path",
            "_PATH",
            "PORT",
        ] {
            assert!(!is_data_path(no), "{no}");
        }
    }

    #[test]
    fn a_file_variable_takes_the_codes_own_file_name() {
        // server-memory 2026.8.31, shortened.
        let js = "export const defaultMemoryPath = path.join(dir, 'memory.jsonl');\n\
                  if (process.env.MEMORY_FILE_PATH) { return process.env.MEMORY_FILE_PATH; }\n\
                  const oldMemoryPath = path.join(dir, 'memory.json');\n";
        assert_eq!(
            file_name_hint(js, "MEMORY_FILE_PATH").as_deref(),
            Some("memory.jsonl")
        );
        let d = Path::new("/d");
        assert_eq!(
            value_for("MEMORY_FILE_PATH", Some("memory.jsonl"), d),
            Path::new("/d/memory.jsonl")
        );
        assert_eq!(value_for("CACHE_PATH", None, d), Path::new("/d/cache"));
        assert_eq!(value_for("DB_DIR", None, d), Path::new("/d"));
    }

    #[test]
    fn the_packages_own_code_is_scanned_not_its_dependencies() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("node_modules").join("@x/srv");
        std::fs::create_dir_all(root.join("dist")).unwrap();
        std::fs::create_dir_all(root.join("node_modules/dep")).unwrap();
        let far = "\n".repeat(NEAR_LINES + 2);
        std::fs::write(
            root.join("dist/index.js"),
            format!(
                "const f = process.env.NOTES_FILE_PATH || path.join(__dirname, 'notes.db');\n\
                 const g = process.env.GIVEN_DIR;\n\
                 const h = process.env.HISTORY_FILE || path.join(__dirname, 'h');{far}\
                 const allowed = (process.env.ALLOWED_FILES_PATH || '').split(':');"
            ),
        )
        .unwrap();
        std::fs::write(
            root.join("node_modules/dep/i.js"),
            "process.env.DEP_CACHE_DIR",
        )
        .unwrap();
        std::fs::write(
            root.join("server.json"),
            r#"{"packages":[{"environmentVariables":[
                {"name":"HISTORY_FILE","default":"~/.srv/history.txt"},
                {"name":"API_KEY_FILE","isSecret":true}]}]}"#,
        )
        .unwrap();
        let data = Path::new("/data/srv");
        let found = find(Ecosystem::Npm, t.path(), "@x/srv", data, &|n| {
            n == "GIVEN_DIR"
        });
        assert_eq!(
            found,
            [
                DataVar {
                    name: "HISTORY_FILE".into(),
                    value: data.join("history.txt"),
                    found_in: "dist/index.js".into(),
                },
                DataVar {
                    name: "NOTES_FILE_PATH".into(),
                    value: data.join("notes.db"),
                    found_in: "dist/index.js".into(),
                },
            ]
        );
    }
}
