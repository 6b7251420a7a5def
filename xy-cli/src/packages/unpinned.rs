//! `list`'s hint about unpinned servers (SPEC §22): servers whose command
//! is `npx` or `uvx` fetch whatever is newest at every start; this finds
//! them in the config directory and reads the package off their command
//! line, so the hint (and `import`) can name the `xyctl add` line that pins
//! it.

use std::path::Path;

use xy_core::package::Ecosystem;
use xy_core::protocol::method;

use crate::ctx::READ_TIMEOUT;

/// `list`'s hint (SPEC §22): one line per server whose `command` is `npx`
/// or `uvx` (they resolve and may download new code at every start), with
/// the `xyctl add` line that pins it. Read from the daemon's config
/// directory; only files that mention either are parsed, so a large
/// directory costs a read per file.
pub(crate) fn hint(c: &mut xy_core::client::Client) -> Option<String> {
    let st: xy_core::protocol::DaemonStatus = c
        .call::<(), _>(method::DAEMON_STATUS, None, READ_TIMEOUT)
        .ok()?;
    let found = unpinned_in(Path::new(&st.config_dir));
    if found.is_empty() {
        return None;
    }
    let mut s = String::new();
    for (name, program, pin) in found {
        s.push_str(&format!(
            "hint: {name} runs {program}, which fetches whatever is newest at every start; pin it: {}\n",
            pin.unwrap_or_else(|| format!(
                "xyctl add {name} --npm <pkg> --force (or --pypi; docs/packages.md)"
            ))
        ));
    }
    Some(s)
}

/// The servers in `dir` that run `npx`/`uvx` unpinned: name, program,
/// and the `xyctl add` line that pins it when its package can be read off
/// the arguments.
fn unpinned_in(dir: &Path) -> Vec<(String, String, Option<String>)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(String, String, Option<String>)> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "kdl"))
        .filter_map(|p| {
            let text = std::fs::read_to_string(&p).ok()?;
            if !text.contains("npx") && !text.contains("uvx") {
                return None;
            }
            let stem = p.file_stem()?.to_string_lossy().into_owned();
            let c = xy_core::config::parse_server(&stem, &p, &text).ok()?;
            let program = Path::new(&c.command)
                .file_name()?
                .to_string_lossy()
                .into_owned();
            if !matches!(program.as_str(), "npx" | "uvx") || c.package.is_some() {
                return None;
            }
            let pin = pin_candidate(&program, &c.args).map(|(eco, spec, extra)| {
                let mut line = format!(
                    "xyctl add {stem} --{} {} --force",
                    eco.as_str(),
                    shell_word(&spec)
                );
                if !extra.is_empty() {
                    line.push_str(" --");
                    for a in extra {
                        line.push(' ');
                        line.push_str(&shell_word(&a));
                    }
                }
                line
            });
            Some((stem, program, pin))
        })
        .collect();
    found.sort();
    found
}

/// The package an `npx`/`uvx` command line runs, as `--npm`/`--pypi`
/// takes it, and the arguments after it: `npx -y @scope/pkg@1 --flag`,
/// `uvx mcp-server-time@2025.1 --tz UTC`, `uvx --from pkg==1 script`.
/// `None` when the line uses options this does not follow.
pub(crate) fn pin_candidate(
    program: &str,
    args: &[String],
) -> Option<(Ecosystem, String, Vec<String>)> {
    let mut it = args.iter();
    match program {
        "npx" => {
            for a in it.by_ref() {
                match a.as_str() {
                    "-y" | "--yes" | "-q" | "--quiet" => {}
                    s if s.starts_with('-') => return None,
                    spec => {
                        xy_core::package::split_spec(Ecosystem::Npm, spec).ok()?;
                        return Some((Ecosystem::Npm, spec.to_owned(), it.cloned().collect()));
                    }
                }
            }
            None
        }
        "uvx" => {
            let mut from = None;
            while let Some(a) = it.next() {
                match a.as_str() {
                    "--from" => from = Some(it.next()?.clone()),
                    s if s.starts_with('-') => return None,
                    first => {
                        // `uvx pkg@1.0` spells the pin with `@`.
                        let (spec, extra): (String, Vec<String>) = match &from {
                            // The script named after `--from` is the
                            // console script; xy picks it from the package.
                            Some(f) => (f.clone(), it.cloned().collect()),
                            None => (first.replacen('@', "==", 1), it.cloned().collect()),
                        };
                        xy_core::package::split_spec(Ecosystem::Pypi, &spec).ok()?;
                        return Some((Ecosystem::Pypi, spec, extra));
                    }
                }
            }
            None
        }
        _ => None,
    }
}

/// `s` as one shell word: bare when it is plainly safe, else single-quoted.
fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"@/._-=+:,".contains(&b))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npx_and_uvx_servers_are_unpinned() {
        let d = tempfile::tempdir().unwrap();
        let w = |n: &str, t: &str| std::fs::write(d.path().join(n), t).unwrap();
        w("a.kdl", "command \"npx\"\nargs \"-y\" \"x\"\nport 1\n");
        w(
            "b.kdl",
            "command \"/usr/local/bin/uvx\"\nargs \"y\"\nport 2\n",
        );
        w(
            "c.kdl",
            "command \"/usr/bin/node\"\nargs \"/npx/i.js\"\nport 3\n",
        );
        w(
            "d.kdl",
            "command \"node\"\nport 4\npackage \"npm:npx@1.0.0\"\n",
        );
        w(
            "e.kdl",
            "command \"npx\"\nport 5\npackage \"npm:x@1.0.0\"\n",
        );
        w("f.txt", "command \"npx\"\nport 6\n");
        let found = unpinned_in(d.path());
        assert_eq!(
            found,
            [
                (
                    "a".to_owned(),
                    "npx".to_owned(),
                    Some("xyctl add a --npm x --force".to_owned())
                ),
                (
                    "b".to_owned(),
                    "uvx".to_owned(),
                    Some("xyctl add b --pypi y --force".to_owned())
                ),
            ]
        );
    }

    #[test]
    fn npx_and_uvx_lines_name_their_package() {
        let v = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            pin_candidate("npx", &v(&["-y", "@s/p@1.2.3", "--root", "/a b"])),
            Some((Ecosystem::Npm, "@s/p@1.2.3".into(), v(&["--root", "/a b"])))
        );
        assert_eq!(
            pin_candidate("uvx", &v(&["mcp-server-time@2025.1.0", "--tz", "UTC"])),
            Some((
                Ecosystem::Pypi,
                "mcp-server-time==2025.1.0".into(),
                v(&["--tz", "UTC"])
            ))
        );
        assert_eq!(
            pin_candidate("uvx", &v(&["--from", "mcp-x==1.0", "mcp-x-serve", "--v"])),
            Some((Ecosystem::Pypi, "mcp-x==1.0".into(), v(&["--v"])))
        );
        assert_eq!(pin_candidate("npx", &v(&["--package=x", "y"])), None);
        assert_eq!(pin_candidate("npx", &v(&["-y"])), None);
        assert_eq!(shell_word("/a b"), "'/a b'");
        assert_eq!(shell_word("it's"), "'it'\\''s'");
        assert_eq!(shell_word("@s/p@1"), "@s/p@1");
    }
}
