//! Which `xyd` a service runs: the one next to the running `xyctl`, else the
//! first on `PATH`, canonicalized; and the cargo-build-tree predicate behind
//! the "this agent breaks on `cargo clean`" warning.

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
    let on_path = || {
        path_var.and_then(|p| {
            std::env::split_paths(p)
                .filter(|dir| dir.is_absolute())
                .map(|dir| dir.join(XYD))
                .find(|p| is_executable(p))
        })
    };
    beside.or_else(on_path).and_then(|p| p.canonicalize().ok())
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

/// Whether `path` lies in a cargo build tree: a `target` component followed
/// by `debug` or `release`, directly or after a target triple
/// (`target/aarch64-apple-darwin/release`). `cargo clean` deletes such files.
pub(crate) fn is_build_tree(path: &Path) -> bool {
    let parts: Vec<&OsStr> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s),
            _ => None,
        })
        .collect();
    let profile = |s: &OsStr| s == "debug" || s == "release";
    parts.iter().enumerate().any(|(i, part)| {
        *part == "target"
            && (parts.get(i + 1).is_some_and(|s| profile(s))
                || parts.get(i + 2).is_some_and(|s| profile(s)))
    })
}

/// The warning to show for a build-tree program, if any.
pub(crate) fn program_warning(program: &Path) -> Option<String> {
    is_build_tree(program).then(|| {
        format!(
            "{} is inside a cargo build tree: the service will break on `cargo clean`; \
             install xyd (e.g. `cargo install --path xy-daemon`) and re-run with --force",
            program.display()
        )
    })
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
