//! Pinned packages (SPEC §22): the `package "npm:<pkg>@<ver>"` /
//! `"pypi:<pkg>==<ver>"` reference a server file carries, the spelling
//! rules of package names and exact versions, and the `xy-install.json`
//! record an installer leaves in a version directory, which `status` reads.
//!
//! Installing is `xyctl`'s (it runs the real `npm`/`pip`); this module only
//! names things and reads the one small record, so the daemon and the CLI
//! agree on both without the daemon ever running a package manager.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::paths::Paths;
use crate::protocol::PackageStatus;

/// The install record's file name inside a version directory.
pub const INSTALL_RECORD: &str = "xy-install.json";

/// `min-age` when neither `xy.kdl` nor the command sets one: a version must
/// have been public this long before `xyctl add` installs it, so a
/// compromised release has time to be noticed and pulled.
pub const DEFAULT_MIN_AGE: Duration = Duration::from_secs(3 * 24 * 3600);

/// Where a package comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Ecosystem {
    /// npmjs.com, installed with `npm`.
    Npm,
    /// pypi.org, installed with `pip` into a venv.
    Pypi,
}

impl Ecosystem {
    /// `npm` / `pypi`, as written before the `:`.
    pub fn as_str(self) -> &'static str {
        match self {
            Ecosystem::Npm => "npm",
            Ecosystem::Pypi => "pypi",
        }
    }

    /// The separator between name and version: `@` (npm), `==` (PyPI).
    pub fn separator(self) -> &'static str {
        match self {
            Ecosystem::Npm => "@",
            Ecosystem::Pypi => "==",
        }
    }
}

/// An exact package version, as a server file pins it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PackageRef {
    /// Where it comes from.
    pub ecosystem: Ecosystem,
    /// `@scope/name` or `name` (npm); a project name (PyPI).
    pub name: String,
    /// The exact version.
    pub version: String,
}

impl fmt::Display for PackageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}{}{}",
            self.ecosystem.as_str(),
            self.name,
            self.ecosystem.separator(),
            self.version
        )
    }
}

/// Why a package reference or spec does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PackageRefError {
    /// No `npm:` / `pypi:` prefix.
    #[error(
        "{0:?} names no ecosystem: write \"npm:<package>@<version>\" or \"pypi:<package>==<version>\""
    )]
    NoEcosystem(String),
    /// A prefix other than `npm:` / `pypi:`.
    #[error("unknown ecosystem {0:?}: xy installs from \"npm\" and \"pypi\"")]
    UnknownEcosystem(String),
    /// The name breaks the ecosystem's spelling rules.
    #[error("{name:?} is not a valid {ecosystem} package name")]
    BadName {
        /// `npm` / `pypi`.
        ecosystem: &'static str,
        /// The name.
        name: String,
    },
    /// No version where one is required.
    #[error("{0:?} pins no version: write the exact version after {1:?}")]
    NoVersion(String, &'static str),
    /// A range, tag or otherwise inexact version.
    #[error(
        "{version:?} is not an exact {ecosystem} version (a range or tag is resolved by `xyctl add`, not written here)"
    )]
    NotExact {
        /// `npm` / `pypi`.
        ecosystem: &'static str,
        /// The version.
        version: String,
    },
}

impl std::str::FromStr for PackageRef {
    type Err = PackageRefError;

    /// `npm:<pkg>@<exact version>` or `pypi:<pkg>==<exact version>`.
    fn from_str(s: &str) -> Result<PackageRef, PackageRefError> {
        let (eco, rest) = s
            .split_once(':')
            .ok_or_else(|| PackageRefError::NoEcosystem(s.to_owned()))?;
        let ecosystem = match eco {
            "npm" => Ecosystem::Npm,
            "pypi" => Ecosystem::Pypi,
            other => return Err(PackageRefError::UnknownEcosystem(other.to_owned())),
        };
        let (name, version) = split_spec(ecosystem, rest)?;
        let version = version
            .ok_or_else(|| PackageRefError::NoVersion(s.to_owned(), ecosystem.separator()))?;
        if !is_exact_version(ecosystem, &version) {
            return Err(PackageRefError::NotExact {
                ecosystem: ecosystem.as_str(),
                version,
            });
        }
        Ok(PackageRef {
            ecosystem,
            name,
            version,
        })
    }
}

/// Splits what a user types after `--npm` / `--pypi` into a checked name
/// and the version part, if any (`@scope/pkg@^1`, `pkg==1.0`, `pkg`). The
/// version is not checked: it may be a tag or range to resolve.
pub fn split_spec(
    ecosystem: Ecosystem,
    spec: &str,
) -> Result<(String, Option<String>), PackageRefError> {
    let (name, version) = match ecosystem {
        // A scope's leading `@` is not the separator.
        Ecosystem::Npm => match spec.get(1..).and_then(|r| r.rfind('@')) {
            Some(i) => (&spec[..=i], Some(&spec[i + 2..])),
            None => (spec, None),
        },
        Ecosystem::Pypi => match spec.split_once("==") {
            Some((n, v)) => (n, Some(v)),
            None => (spec, None),
        },
    };
    let ok = match ecosystem {
        Ecosystem::Npm => is_npm_name(name),
        Ecosystem::Pypi => is_pypi_name(name),
    };
    if !ok {
        return Err(PackageRefError::BadName {
            ecosystem: ecosystem.as_str(),
            name: name.to_owned(),
        });
    }
    Ok((name.to_owned(), version.map(str::to_owned)))
}

/// npm's rules for a name: `name` or `@scope/name`, each part of URL-safe
/// lower-case characters, not starting with `.` or `_`, at most 214 bytes.
pub fn is_npm_name(name: &str) -> bool {
    let part = |p: &str| {
        !p.is_empty()
            && !p.starts_with(['.', '_'])
            && p.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-._~".contains(&b))
    };
    if name.is_empty() || name.len() > 214 {
        return false;
    }
    match name.strip_prefix('@') {
        Some(scoped) => match scoped.split_once('/') {
            Some((scope, pkg)) => part(scope) && part(pkg),
            None => false,
        },
        None => part(name),
    }
}

/// PEP 508's rule for a project name: ASCII letters and digits, with `.`,
/// `_` and `-` only between them.
pub fn is_pypi_name(name: &str) -> bool {
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    alnum(name.chars().next())
        && alnum(name.chars().last())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

/// True for an exact version: semver `1.2.3[-pre][+build]` (npm), a PEP 440
/// release like `1.0`, `2.1.0rc1`, `1!2.0.post1` (PyPI). Ranges, tags and
/// wildcards are not exact.
pub fn is_exact_version(ecosystem: Ecosystem, v: &str) -> bool {
    match ecosystem {
        Ecosystem::Npm => {
            let core_end = v.find(['-', '+']).unwrap_or(v.len());
            let (core, rest) = v.split_at(core_end);
            let parts: Vec<&str> = core.split('.').collect();
            parts.len() == 3
                && parts
                    .iter()
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
                && rest
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-+.".contains(&b))
                && !rest.ends_with(['-', '+', '.'])
        }
        Ecosystem::Pypi => {
            let release = v.split_once('!').map_or(v, |(epoch, r)| {
                if epoch.bytes().all(|b| b.is_ascii_digit()) && !epoch.is_empty() {
                    r
                } else {
                    ""
                }
            });
            release.starts_with(|c: char| c.is_ascii_digit())
                && release
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b))
                && !release.ends_with(['.', '+', '-', '_'])
        }
    }
}

/// `xy-install.json`: what an installer writes last, once a version
/// directory is complete (its presence means the install finished).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstallRecord {
    /// `npm` / `pypi`.
    pub ecosystem: String,
    /// The package.
    pub name: String,
    /// The exact version.
    pub version: String,
    /// When the install finished (RFC 3339 UTC).
    pub installed_at: String,
    /// When the registry says this version was published (RFC 3339).
    pub published_at: Option<String>,
    /// The runtime the config runs (absolute `node`, the venv's python).
    pub runtime: String,
    /// The entry point's absolute path.
    pub entry: String,
    /// The lockfile pinning every dependency, relative to the directory.
    pub lockfile: String,
}

impl InstallRecord {
    /// Reads `<dir>/xy-install.json`; `None` when absent or unreadable.
    pub fn read(dir: &Path) -> Option<InstallRecord> {
        let text = std::fs::read_to_string(dir.join(INSTALL_RECORD)).ok()?;
        serde_json::from_str(&text).ok()
    }
}

/// `status.package` for server `server` pinning `pkg`: the record of
/// `<data dir>/packages/<server>/<version>/`, looked up now (the daemon's
/// environment decides the data dir, as for every other path).
pub fn status(server: &str, pkg: &PackageRef) -> PackageStatus {
    let installed_at = Paths::from_env()
        .ok()
        .and_then(|p| InstallRecord::read(&p.packages_dir(server, &pkg.version)))
        .filter(|r| r.name == pkg.name && r.version == pkg.version)
        .map(|r| r.installed_at);
    PackageStatus {
        ecosystem: pkg.ecosystem.as_str().to_owned(),
        name: pkg.name.clone(),
        version: pkg.version.clone(),
        installed_at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<PackageRef, PackageRefError> {
        s.parse()
    }

    #[test]
    fn references_round_trip() {
        for s in [
            "npm:@modelcontextprotocol/server-memory@2026.8.31",
            "npm:left-pad@1.3.0",
            "npm:x@1.0.0-rc.1+build.5",
            "pypi:mcp-server-time==2025.9.25",
            "pypi:mcp==1.0",
            "pypi:a.b_c==1!2.0.post1",
        ] {
            assert_eq!(p(s).unwrap().to_string(), s);
        }
        let r = p("npm:@a/b@1.2.3").unwrap();
        assert_eq!(
            (r.ecosystem, r.name.as_str(), r.version.as_str()),
            (Ecosystem::Npm, "@a/b", "1.2.3")
        );
    }

    #[test]
    fn bad_references_say_why() {
        assert!(matches!(
            p("left-pad@1.3.0"),
            Err(PackageRefError::NoEcosystem(_))
        ));
        assert!(matches!(
            p("cargo:x@1.0.0"),
            Err(PackageRefError::UnknownEcosystem(_))
        ));
        assert!(matches!(p("npm:@a/b"), Err(PackageRefError::NoVersion(..))));
        assert!(matches!(
            p("npm:Foo@1.0.0"),
            Err(PackageRefError::BadName { .. })
        ));
        assert!(matches!(
            p("pypi:-x==1"),
            Err(PackageRefError::BadName { .. })
        ));
        for v in ["^1.0.0", "latest", "1.0", "1.x", "1.0.0 || 2.0.0", ""] {
            assert!(
                matches!(
                    p(&format!("npm:x@{v}")),
                    Err(PackageRefError::NotExact { .. })
                ),
                "{v}"
            );
        }
        for v in [">=1.0", "1.*", "latest", "~=1.0", ""] {
            assert!(
                matches!(
                    p(&format!("pypi:x=={v}")),
                    Err(PackageRefError::NotExact { .. })
                ),
                "{v}"
            );
        }
    }

    #[test]
    fn specs_split_name_and_version() {
        let npm = |s| split_spec(Ecosystem::Npm, s).unwrap();
        assert_eq!(npm("@a/b"), ("@a/b".into(), None));
        assert_eq!(npm("@a/b@^1"), ("@a/b".into(), Some("^1".into())));
        assert_eq!(npm("b@latest"), ("b".into(), Some("latest".into())));
        assert_eq!(npm("b"), ("b".into(), None));
        let pypi = |s| split_spec(Ecosystem::Pypi, s).unwrap();
        assert_eq!(pypi("mcp-x==1.2"), ("mcp-x".into(), Some("1.2".into())));
        assert_eq!(pypi("Mcp_X"), ("Mcp_X".into(), None));
        assert!(split_spec(Ecosystem::Npm, "@a").is_err());
        assert!(split_spec(Ecosystem::Npm, "a b").is_err());
        assert!(split_spec(Ecosystem::Pypi, "a>=1").is_err());
    }

    #[test]
    fn records_are_read_back() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(InstallRecord::read(dir.path()), None);
        let r = InstallRecord {
            ecosystem: "npm".into(),
            name: "x".into(),
            version: "1.0.0".into(),
            installed_at: "2026-12-01T00:00:00.000Z".into(),
            published_at: None,
            runtime: "/usr/bin/node".into(),
            entry: "/d/node_modules/x/index.js".into(),
            lockfile: "package-lock.json".into(),
        };
        std::fs::write(
            dir.path().join(INSTALL_RECORD),
            serde_json::to_string(&r).unwrap(),
        )
        .unwrap();
        assert_eq!(InstallRecord::read(dir.path()), Some(r));
    }
}
