//! Which program a file that outlives this run points at: the `xyd` a
//! service runs (the one next to the running `xyctl`, else the first on
//! `PATH`, canonicalized), the `xyctl` a client config runs (the one on
//! `PATH` when it is this binary), and the one predicate behind both
//! warnings that such a path goes away (`cargo clean`, `brew upgrade`).

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

/// The daemon's executable name.
pub(crate) const XYD: &str = "xyd";

/// Finds `xyd` beside `exe` (the running `xyctl`), else on `path_var`.
/// The result is canonicalized (symlinks resolved), so the service keeps
/// pointing at the real file.
pub(crate) fn locate_xyd_from(exe: Option<&Path>, path_var: Option<&OsStr>) -> Option<PathBuf> {
    let beside = exe
        .and_then(Path::parent)
        .map(|dir| dir.join(XYD))
        .filter(|p| is_executable(p));
    let on_path = || path_var.and_then(|p| find_on_path(XYD, p));
    beside.or_else(on_path).and_then(|p| p.canonicalize().ok())
}

/// The first executable `name` in the absolute directories of `path_var`,
/// as found (links not resolved).
fn find_on_path(name: &str, path_var: &OsStr) -> Option<PathBuf> {
    std::env::split_paths(path_var)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
}

/// The client-facing executable's name.
pub(crate) const XYCTL: &str = "xyctl";

/// The `xyctl` path to write into a client's config, given the running
/// binary `exe` and `PATH`: the `PATH` entry as found (`/opt/homebrew/bin/xyctl`,
/// `~/.cargo/bin/xyctl`, which survive upgrades) when it is the same file as
/// `exe`; else `exe` itself, canonicalized, with a warning when that path
/// goes away or another `xyctl` comes first on `PATH`.
pub(crate) fn stable_xyctl_from(exe: &Path, path_var: Option<&OsStr>) -> (PathBuf, Option<String>) {
    let real = exe.canonicalize().unwrap_or_else(|_| exe.to_path_buf());
    let on_path = path_var.and_then(|p| find_on_path(XYCTL, p));
    match on_path {
        Some(p) if p.canonicalize().is_ok_and(|c| c == real) => (p, None),
        other => {
            let warning = unstable_program_warning(
                &real,
                &Unstable {
                    then: "the client config will break then",
                    fix_build: "install xyctl on PATH (e.g. `cargo install --path xy-cli`) and apply again",
                    fix_upgrade: "run it as the package's link on PATH (e.g. /opt/homebrew/bin/xyctl) and apply again",
                },
            )
            .or_else(|| {
                other.map(|p| {
                    format!(
                        "the xyctl on PATH ({}) is another binary than this one; the client config runs {}",
                        p.display(),
                        real.display()
                    )
                })
            });
            (real, warning)
        }
    }
}

/// [`stable_xyctl_from`] with this process's executable and `PATH`.
pub(crate) fn stable_xyctl() -> std::io::Result<(PathBuf, Option<String>)> {
    let exe = std::env::current_exe()?;
    Ok(stable_xyctl_from(&exe, std::env::var_os("PATH").as_deref()))
}

/// [`locate_xyd_from`] with this process's executable and `PATH`.
pub(crate) fn locate_xyd() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok();
    let path = std::env::var_os("PATH");
    locate_xyd_from(exe.as_deref(), path.as_deref())
}

fn is_executable(p: &Path) -> bool {
    p.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The names of `path`'s directories and file, in order (no root, `.` or `..`).
fn names(path: &Path) -> Vec<&OsStr> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s),
            _ => None,
        })
        .collect()
}

/// Whether `path` lies in a cargo build tree: a `target` component followed
/// by `debug` or `release`, directly or after a target triple
/// (`target/aarch64-apple-darwin/release`). `cargo clean` deletes such files.
pub(crate) fn is_build_tree(path: &Path) -> bool {
    let parts = names(path);
    let profile = |s: &OsStr| s == "debug" || s == "release";
    parts.iter().enumerate().any(|(i, part)| {
        *part == "target"
            && (parts.get(i + 1).is_some_and(|s| profile(s))
                || parts.get(i + 2).is_some_and(|s| profile(s)))
    })
}

/// Whether `path` is a versioned package-manager path that an upgrade
/// removes: Homebrew's `Cellar/<formula>/<version>/…` or the Nix store.
pub(crate) fn is_versioned_install(path: &Path) -> bool {
    let parts = names(path);
    parts.windows(2).any(|w| w[0] == "nix" && w[1] == "store")
        || parts
            .iter()
            .position(|p| *p == "Cellar")
            .is_some_and(|i| parts.len() > i + 3)
}

/// What a warning about an unstable path says.
pub(crate) struct Unstable<'a> {
    /// What breaks (`the service will break then`).
    pub(crate) then: &'a str,
    /// What to do about a cargo build tree.
    pub(crate) fix_build: &'a str,
    /// What to do about a versioned package path.
    pub(crate) fix_upgrade: &'a str,
}

/// Why `program`'s path will go away, if it will: the one predicate behind
/// the warnings of `service install` and `clients apply`.
pub(crate) fn unstable_program_warning(program: &Path, say: &Unstable<'_>) -> Option<String> {
    let (why, fix) = if is_build_tree(program) {
        (
            "inside a cargo build tree, which `cargo clean` deletes",
            say.fix_build,
        )
    } else if is_versioned_install(program) {
        (
            "a versioned package path, which the next upgrade removes",
            say.fix_upgrade,
        )
    } else {
        return None;
    };
    Some(format!(
        "{} is {why}: {}; {fix}",
        program.display(),
        say.then
    ))
}

/// The warning to show for a service's program, if any.
pub(crate) fn program_warning(program: &Path) -> Option<String> {
    unstable_program_warning(
        program,
        &Unstable {
            then: "the service will break then",
            fix_build: "install xyd (e.g. `cargo install --path xy-daemon`) and re-run with --force",
            fix_upgrade: "run `xyctl service install --force` again after each upgrade",
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn build_tree_table() {
        let cases = [
            ("/home/u/src/xy/target/debug/xyd", true),
            ("/home/u/src/xy/target/release/xyd", true),
            ("/Users/u/xy/target/aarch64-apple-darwin/release/xyd", true),
            ("target/debug/xyd", true),
            ("/home/u/.cargo/bin/xyd", false),
            ("/opt/homebrew/bin/xyd", false),
            ("/home/u/target/xyd", false),
            ("/home/u/debug/target", false),
            ("/srv/targets/debug/xyd", false),
            ("/home/u/target/a/b/release/xyd", false),
        ];
        for (path, want) in cases {
            assert_eq!(is_build_tree(Path::new(path)), want, "{path}");
        }
        assert!(program_warning(Path::new("/x/target/debug/xyd")).is_some());
        assert!(program_warning(Path::new("/usr/local/bin/xyd")).is_none());
        assert!(program_warning(Path::new("/opt/homebrew/Cellar/xy/0.3.0/bin/xyd")).is_some());
        assert!(program_warning(Path::new("/nix/store/abc-xy-0.3/bin/xyd")).is_some());
        assert!(program_warning(Path::new("/opt/homebrew/bin/xyd")).is_none());
        assert!(program_warning(Path::new("/home/u/Cellar/xyd")).is_none());
    }

    fn xyctl(dir: &Path) -> PathBuf {
        fs::create_dir_all(dir).unwrap();
        let p = dir.join(XYCTL);
        fs::write(&p, "#!/bin/sh\n").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    // Issue 26: `clients apply` wrote the canonical path, which a cargo
    // build tree or a versioned Homebrew Cellar path loses on upgrade.
    #[test]
    fn a_client_config_gets_the_xyctl_on_path_when_it_is_this_binary() {
        let tmp = tempfile::tempdir().unwrap();
        let real = xyctl(&tmp.path().join("Cellar/xy/0.3.0/bin"));
        let bin = tmp.path().join("bin");
        fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink(&real, bin.join(XYCTL)).unwrap();
        let path_var = std::env::join_paths([&bin]).unwrap();
        let (p, warning) = stable_xyctl_from(&real, Some(&path_var));
        assert_eq!(p, bin.join(XYCTL));
        assert_eq!(warning, None);

        // Not on PATH: the real path, and the upgrade warning.
        let (p, warning) = stable_xyctl_from(&real, None);
        assert_eq!(p, real.canonicalize().unwrap());
        assert!(warning.unwrap().contains("next upgrade"));

        // Another xyctl on PATH: this one, and a warning naming the other.
        let other = xyctl(&tmp.path().join("other"));
        let mine = xyctl(&tmp.path().join("mine"));
        let path_var = std::env::join_paths([other.parent().unwrap()]).unwrap();
        let (p, warning) = stable_xyctl_from(&mine, Some(&path_var));
        assert_eq!(p, mine.canonicalize().unwrap());
        assert!(warning.unwrap().contains("another binary"));
    }

    fn exe(dir: &Path) -> PathBuf {
        fs::create_dir_all(dir).unwrap();
        let p = dir.join(XYD);
        fs::write(&p, "#!/bin/sh\n").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        p.canonicalize().unwrap()
    }

    #[test]
    fn prefers_sibling_then_path() {
        let tmp = tempfile::tempdir().unwrap();
        let bin = tmp.path().join("bin");
        let other = tmp.path().join("other");
        let on_path = exe(&other);
        let path_var = std::env::join_paths([Path::new("relative"), &other]).unwrap();
        let xyctl = bin.join("xyctl");
        assert_eq!(
            locate_xyd_from(Some(&xyctl), Some(&path_var)),
            Some(on_path)
        );
        let sibling = exe(&bin);
        assert_eq!(
            locate_xyd_from(Some(&xyctl), Some(&path_var)),
            Some(sibling)
        );
        assert_eq!(locate_xyd_from(None, None), None);
    }

    #[test]
    fn skips_non_executables_and_resolves_symlinks() {
        let tmp = tempfile::tempdir().unwrap();
        let plain = tmp.path().join("plain");
        fs::create_dir_all(&plain).unwrap();
        fs::write(plain.join(XYD), "not executable").unwrap();
        let real = exe(&tmp.path().join("real"));
        let links = tmp.path().join("links");
        fs::create_dir_all(&links).unwrap();
        std::os::unix::fs::symlink(&real, links.join(XYD)).unwrap();
        let path_var = std::env::join_paths([&plain, &links]).unwrap();
        assert_eq!(locate_xyd_from(None, Some(&path_var)), Some(real));
    }
}
