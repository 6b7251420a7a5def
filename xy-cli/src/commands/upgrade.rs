//! `xyctl upgrade` and `xyctl rollback` (SPEC §22): switch a pinned
//! server's config between installed versions. `upgrade` resolves, checks
//! the age of, confirms and installs a newer version through
//! [`crate::packages`], then keeps only the old and the new version;
//! `rollback` goes back to the other kept one. Either way the server file
//! is rewritten (runtime, version directory, `package`), validated,
//! written, and reloaded, and the pid change is printed.

use std::path::Path;
use std::time::SystemTime;

use xy_core::package::{Ecosystem, InstallRecord, PackageRef};
use xy_core::paths::Paths;
use xy_core::protocol::{ReloadResult, StatusResult, method};

use crate::cli::UpgradeArgs;
use crate::ctx::{CONTROL_TIMEOUT, Ctx, READ_TIMEOUT};
use crate::error::{Exit, Failure};
use crate::packages::plan::{Plan, confirm};
use crate::{daemon_conn, output, packages, server_file};

/// `upgrade <name> [--to V]`.
pub(crate) fn upgrade(ctx: &Ctx, a: &UpgradeArgs) -> Result<Exit, Failure> {
    let (client, dir) = daemon_conn::daemon_and_dir(ctx)?;
    let current = Current::read(&dir, &a.name)?;
    let paths = packages::data_paths()?;
    let resolved = packages::resolve(
        current.pkg.ecosystem,
        &current.pkg.name,
        Some(a.to.as_deref().unwrap_or("latest")).filter(|v| {
            // PyPI has no `latest` tag: no version means the newest.
            current.pkg.ecosystem == Ecosystem::Npm || *v != "latest"
        }),
    )?;
    if resolved.pkg.version == current.pkg.version {
        output::stdout(&format!("{} is already at {}\n", a.name, current.pkg));
        return Ok(Exit::Success);
    }
    packages::check_age(
        &resolved,
        packages::min_age(&paths, &a.install),
        &a.install,
        SystemTime::now(),
    )?;
    let target = paths.packages_dir(&a.name, &resolved.pkg.version);
    let extra = current.extra_args();
    let plan = Plan {
        server: &a.name,
        source: None,
        resolved: &resolved,
        dir: &target,
        runtime_args: &[],
        extra: &extra,
        port: None,
        flags: &a.install,
        data: None,
        scripts: &[],
    };
    confirm(ctx, &plan)?;
    let (built, _) = packages::install(&paths, &a.name, &resolved, &a.install)?;
    packages::tell_js(ctx, &a.name, &resolved, &built);
    let to = InstallRecord::read(&target).ok_or_else(|| {
        Failure::new(
            Exit::Operational,
            format!("the install in {} left no record", target.display()),
        )
    })?;
    switch(ctx, client, &dir, &current, &paths, &to)?;
    prune(&paths, &a.name, &[&current.pkg.version, &to.version]);
    Ok(Exit::Success)
}

/// `rollback <name>`: the other kept version.
pub(crate) fn rollback(ctx: &Ctx, name: &str) -> Result<Exit, Failure> {
    let (client, dir) = daemon_conn::daemon_and_dir(ctx)?;
    let current = Current::read(&dir, name)?;
    let paths = packages::data_paths()?;
    let to = installed(&paths, name)
        .into_iter()
        .filter(|r| r.version != current.pkg.version && r.name == current.pkg.name)
        .max_by(|a, b| a.installed_at.cmp(&b.installed_at))
        .ok_or_else(|| {
            Failure::new(
                Exit::Operational,
                format!(
                    "no other installed version of {} in {}",
                    current.pkg.name,
                    paths.packages_root(name).display()
                ),
            )
        })?;
    switch(ctx, client, &dir, &current, &paths, &to)?;
    Ok(Exit::Success)
}

/// A pinned server's config file as it is now.
struct Current {
    name: String,
    text: String,
    pkg: PackageRef,
    command: String,
    args: Vec<String>,
}

impl Current {
    fn read(dir: &Path, name: &str) -> Result<Current, Failure> {
        let file = dir.join(format!("{name}.kdl"));
        let text = std::fs::read_to_string(&file).map_err(|e| {
            Failure::new(
                Exit::Operational,
                format!("cannot read {}: {e}", file.display()),
            )
        })?;
        let config = xy_core::config::parse_server(name, &file, &text)
            .map_err(|e| Failure::config_invalid(dir, &e, false))?;
        let pkg = config.package.ok_or_else(|| {
            Failure::new(
                Exit::Operational,
                format!(
                    "`{name}` is not a pinned install ({} has no `package` node): \
                     `xyctl add {name} --npm …/--pypi … --force` pins it",
                    file.display()
                ),
            )
        })?;
        Ok(Current {
            name: name.to_owned(),
            text,
            pkg,
            command: config.command,
            args: config.args,
        })
    }

    /// The arguments after the entry point (the first one inside the
    /// packages directory; runtime arguments may come before it).
    fn extra_args(&self) -> Vec<String> {
        let at = self
            .args
            .iter()
            .position(|a| a.contains("/packages/"))
            .map_or(0, |i| i + 1);
        self.args.iter().skip(at).cloned().collect()
    }
}

/// Every complete install of `server`, newest last.
fn installed(paths: &Paths, server: &str) -> Vec<InstallRecord> {
    let Ok(entries) = std::fs::read_dir(paths.packages_root(server)) else {
        return Vec::new();
    };
    let mut v: Vec<InstallRecord> = entries
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .filter_map(|e| InstallRecord::read(&e.path()))
        .collect();
    v.sort_by(|a, b| a.installed_at.cmp(&b.installed_at));
    v
}

/// Rewrites the config from the current version to `to` (its runtime, its
/// version directory in every argument, its `package`), validates and
/// writes it, reloads (the changed settings restart the server) and prints
/// the change.
fn switch(
    ctx: &Ctx,
    client: Option<xy_core::client::Client>,
    dir: &Path,
    current: &Current,
    paths: &Paths,
    to: &InstallRecord,
) -> Result<(), Failure> {
    let from_dir = paths.packages_dir(&current.name, &current.pkg.version);
    let to_dir = paths.packages_dir(&current.name, &to.version);
    let to_pkg = PackageRef {
        ecosystem: current.pkg.ecosystem,
        name: to.name.clone(),
        version: to.version.clone(),
    };
    let text = rewrite(
        &current.text,
        &current.pkg,
        &to_pkg,
        (&current.command, &to.runtime),
        (&from_dir, &to_dir),
    );
    let file = dir.join(format!("{}.kdl", current.name));
    let config = xy_core::config::parse_server(&current.name, &file, &text)
        .map_err(|e| Failure::config_invalid(dir, &e, ctx.err.color))?;
    let to_dir_s = to_dir.display().to_string();
    if config.package.as_ref() != Some(&to_pkg)
        || !config
            .args
            .first()
            .is_some_and(|a| a.starts_with(&to_dir_s))
    {
        return Err(Failure::new(
            Exit::Operational,
            format!(
                "{} no longer runs its install's entry point by the path `xyctl add` wrote; \
                 edit it by hand (the new version is installed in {to_dir_s})",
                file.display()
            ),
        ));
    }
    server_file::write(dir, &current.name, &text, true).map_err(|e| e.failure(ctx.err.color))?;
    let before = client.as_ref().map(|_| ());
    let mut client = client;
    let old_pid = match client.as_mut() {
        Some(c) => pid_of(c, &current.name),
        None => None,
    };
    if let Some(c) = client.as_mut() {
        let _: ReloadResult = c.call::<(), _>(method::RELOAD, None, CONTROL_TIMEOUT)?;
    }
    let new_pid = match client.as_mut() {
        Some(c) => pid_of(c, &current.name),
        None => None,
    };
    let pid = |p: Option<u32>| p.map_or_else(|| "-".to_owned(), |p| p.to_string());
    output::stdout(&format!(
        "{}  {} → {}  pid {} → {}{}\n",
        current.name,
        current.pkg,
        to_pkg,
        pid(old_pid),
        pid(new_pid),
        if before.is_none() {
            "  (not started: no daemon)"
        } else {
            ""
        }
    ));
    Ok(())
}

/// The server's pid, from `status` (`None` when it runs none or the
/// daemon did not answer).
fn pid_of(c: &mut xy_core::client::Client, name: &str) -> Option<u32> {
    c.call::<_, StatusResult>(
        method::STATUS,
        Some(&xy_core::protocol::NameParams {
            name: name.to_owned(),
        }),
        READ_TIMEOUT,
    )
    .ok()
    .and_then(|s| s.entry.pid)
}

/// The server file's text moved from one installed version to another.
fn rewrite(
    text: &str,
    from: &PackageRef,
    to: &PackageRef,
    (from_cmd, to_cmd): (&str, &str),
    (from_dir, to_dir): (&Path, &Path),
) -> String {
    let q = |s: &str| format!("\"{s}\"");
    let mut out = text.replace(&q(&from.to_string()), &q(&to.to_string()));
    // The directory with its trailing separator, so `1.0` never matches
    // inside `1.0.1`.
    let (fd, td) = (
        format!("{}/", from_dir.display()),
        format!("{}/", to_dir.display()),
    );
    out = out.replace(&fd, &td);
    if from_cmd != to_cmd {
        out = out.replace(
            &format!("command {}", q(from_cmd)),
            &format!("command {}", q(to_cmd)),
        );
    }
    out
}

/// Removes the version directories of `server` but `keep`, and leftovers
/// of interrupted installs.
fn prune(paths: &Paths, server: &str, keep: &[&str]) {
    let Ok(entries) = std::fs::read_dir(paths.packages_root(server)) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let ours = name.starts_with(".tmp-") || name.starts_with(".old-");
        if (ours && !name.ends_with(&format!("-{}", std::process::id())))
            || (!name.starts_with('.') && !keep.contains(&name.as_str()))
        {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rewrite_moves_every_path_and_the_package() {
        let text = "transport \"stdio\"\ncommand \"/usr/bin/node\"\n\
                    args \"/d/packages/m/1.0.0/node_modules/m/i.js\" \"--x\"\nport 8400\n\
                    package \"npm:m@1.0.0\"\n";
        let out = rewrite(
            text,
            &"npm:m@1.0.0".parse().unwrap(),
            &"npm:m@1.0.1".parse().unwrap(),
            ("/usr/bin/node", "/opt/node"),
            (
                Path::new("/d/packages/m/1.0.0"),
                Path::new("/d/packages/m/1.0.1"),
            ),
        );
        assert_eq!(
            out,
            "transport \"stdio\"\ncommand \"/opt/node\"\n\
             args \"/d/packages/m/1.0.1/node_modules/m/i.js\" \"--x\"\nport 8400\n\
             package \"npm:m@1.0.1\"\n"
        );
    }
}
