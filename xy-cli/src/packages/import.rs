//! `xyctl import --pin` (SPEC §22): the client entries that run `npx -y
//! <pkg>[@ver]` or `uvx <pkg>[==ver]` become pinned installs through the
//! same steps as `add --npm`/`--pypi` (resolve, `min-age`, one plan shown
//! for every install and one confirmation, install), before `import`
//! writes any file. An entry that cannot be pinned (options xy does not
//! follow, a version too young, a package without a program, a failed
//! install) is imported as it is, and its row says why.

use std::collections::BTreeMap;
use std::path::Path;

use xy_core::package::{Ecosystem, PackageRef};

use super::plan::Plan;
use super::{Installed, Resolved};
use crate::cli::InstallFlags;
use crate::ctx::Ctx;
use crate::error::Failure;

/// One stdio entry `import` will create, under its xy name.
pub(crate) struct Candidate {
    /// The xy server's name (the packages directory is named after it).
    pub(crate) name: String,
    pub(crate) command: String,
    pub(crate) args: Vec<String>,
}

/// What became of one entry's pin.
pub(crate) enum Outcome {
    /// Installed: run this instead of the entry's command.
    Pinned(Installed),
    /// `--dry-run`: this would be installed.
    WouldPin(PackageRef),
    /// Imported as it is, for this reason.
    Unpinned(String),
}

/// The pins, by xy server name; entries that do not run `npx`/`uvx` have
/// none.
#[derive(Default)]
pub(crate) struct Pins(BTreeMap<String, Outcome>);

impl Pins {
    /// The outcome for server `name`, taken out.
    pub(crate) fn take(&mut self, name: &str) -> Option<Outcome> {
        self.0.remove(name)
    }
}

/// Resolves every `npx`/`uvx` candidate, shows one plan for all the
/// installs and asks once (`--yes` skips; without a terminal nothing is
/// installed and the import stops), then installs them. `dry_run`:
/// resolves only.
pub(crate) fn prepare(
    ctx: &Ctx,
    candidates: &[Candidate],
    flags: &InstallFlags,
    dry_run: bool,
) -> Result<Pins, Failure> {
    let mut pins = Pins::default();
    let mut pending: Vec<(&str, Resolved, Vec<String>)> = Vec::new();
    let paths = super::data_paths()?;
    let min_age = super::min_age(&paths, flags);
    for c in candidates {
        let Some(program) = Path::new(&c.command).file_name() else {
            continue;
        };
        let program = program.to_string_lossy();
        if !matches!(program.as_ref(), "npx" | "uvx") {
            continue;
        }
        let why = match super::unpinned::pin_candidate(&program, &c.args) {
            None => Err(format!(
                "its `{program}` arguments use options xy does not follow; pin it by hand \
                 (docs/packages.md)"
            )),
            Some((eco, spec, extra)) => resolve(eco, &spec, min_age, flags).map(|r| (r, extra)),
        };
        match why {
            Ok((r, extra)) => pending.push((&c.name, r, extra)),
            Err(why) => {
                pins.0.insert(c.name.clone(), Outcome::Unpinned(why));
            }
        }
    }
    if pending.is_empty() {
        return Ok(pins);
    }
    if dry_run {
        for (name, r, _) in pending {
            pins.0.insert(name.to_owned(), Outcome::WouldPin(r.pkg));
        }
        return Ok(pins);
    }
    // D221: each npm tree resolved before the plan; one that cannot be
    // resolved is imported as it is, like a failed install.
    let mut trees = Vec::new();
    let mut scripts = Vec::new();
    let mut kept = Vec::new();
    for (name, mut r, extra) in pending {
        match super::resolve_tree(&paths, &mut r, flags) {
            Ok((tree, found)) => {
                trees.push(tree);
                scripts.push(found);
                kept.push((name, r, extra));
            }
            Err(f) => {
                pins.0.insert(
                    name.to_owned(),
                    Outcome::Unpinned(format!(
                        "its dependencies cannot be resolved: {}",
                        f.message
                    )),
                );
            }
        }
    }
    let pending = kept;
    if pending.is_empty() {
        return Ok(pins);
    }
    let dirs: Vec<_> = pending
        .iter()
        .map(|(name, r, _)| paths.packages_dir(name, &r.pkg.version))
        .collect();
    let data_dirs: Vec<_> = pending
        .iter()
        .map(|(name, _, _)| super::data::data_dir(&paths, name))
        .collect();
    let plans: Vec<Plan<'_>> = pending
        .iter()
        .zip(dirs.iter().zip(data_dirs.iter().zip(&scripts)))
        .map(|((name, r, extra), (dir, (data, scripts)))| Plan {
            server: name,
            source: None,
            resolved: r,
            dir,
            runtime_args: &[],
            extra,
            port: None,
            flags,
            data: Some(data),
            scripts,
        })
        .collect();
    super::plan::confirm_all(ctx, &plans, flags)?;
    for (name, r, extra) in &pending {
        let outcome = match super::install(&paths, name, r, flags) {
            Ok((built, version_dir)) => {
                super::tell_js(ctx, name, r, &built);
                let found = super::data::find(
                    r.pkg.ecosystem,
                    &version_dir,
                    &r.pkg.name,
                    &super::data::data_dir(&paths, name),
                    &|_| false,
                );
                let env = super::point_data(ctx, name, &paths, found)
                    .into_iter()
                    .collect();
                let mut args = vec![built.entry.display().to_string()];
                args.extend(extra.iter().cloned());
                Outcome::Pinned(Installed {
                    command: built.runtime.display().to_string(),
                    args,
                    package: r.pkg.clone(),
                    env,
                    secrets: Vec::new(),
                })
            }
            Err(f) => Outcome::Unpinned(format!("the install failed: {}", f.message)),
        };
        pins.0.insert((*name).to_owned(), outcome);
    }
    Ok(pins)
}

/// The exact version `spec` names, old enough.
fn resolve(
    eco: Ecosystem,
    spec: &str,
    min_age: std::time::Duration,
    flags: &InstallFlags,
) -> Result<Resolved, String> {
    let (name, want) = xy_core::package::split_spec(eco, spec).map_err(|e| e.to_string())?;
    let r = super::resolve(eco, &name, want.as_deref()).map_err(|f| f.message)?;
    super::check_age(&r, min_age, flags, std::time::SystemTime::now()).map_err(|f| f.message)?;
    Ok(r)
}
