//! Pinned installs (SPEC §22), the client side: resolve an exact version
//! with the real package manager, refuse one younger than `min-age`, show
//! what will be installed and run and ask, install into a temporary
//! directory renamed into `<data dir>/packages/<name>/<version>/` only when
//! complete, and write the `package` node with a command that runs the
//! entry point by absolute path. `upgrade` and `rollback` switch a server's
//! config between installed versions. The ecosystems' own steps are in
//! [`npm`] and [`pypi`]; the daemon never installs anything.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

use xy_core::package::{Ecosystem, INSTALL_RECORD, InstallRecord, PackageRef};
use xy_core::paths::Paths;
use xy_core::protocol::{ReloadResult, StatusResult, method};

use crate::cli::{AddArgs, InstallFlags, UpgradeArgs};
use crate::ctx::{CONTROL_TIMEOUT, Ctx, READ_TIMEOUT};
use crate::error::{Exit, Failure};
use crate::{output, server_file};

pub(crate) mod import;
pub(crate) mod npm;
pub(crate) mod pypi;
pub(crate) mod registry;

/// An exact version the registry knows, before anything is installed.
#[derive(Debug, Clone)]
pub(crate) struct Resolved {
    /// The exact package.
    pub(crate) pkg: PackageRef,
    /// When the registry says it was published.
    pub(crate) published: Option<SystemTime>,
    /// npm: the `bin` entry's path inside the package, known before the
    /// install; PyPI: `None` (console scripts are read after it).
    pub(crate) bin: Option<String>,
}

/// What an ecosystem's install produced in a version directory.
#[derive(Debug, Clone)]
pub(crate) struct Built {
    /// The runtime the config runs (absolute).
    pub(crate) runtime: PathBuf,
    /// The entry point, inside the final version directory.
    pub(crate) entry: PathBuf,
    /// The lockfile's name in the version directory.
    pub(crate) lockfile: &'static str,
}

/// A completed install, as `add` writes it into the server file.
#[derive(Debug, Clone)]
pub(crate) struct Installed {
    /// `command`: the runtime.
    pub(crate) command: String,
    /// `args`: the entry point, then the user's extra arguments.
    pub(crate) args: Vec<String>,
    /// `package`.
    pub(crate) package: PackageRef,
    /// `env` a `server.json` gives.
    pub(crate) env: std::collections::BTreeMap<String, String>,
    /// `secrets` placeholders: each name and the file to fill in.
    pub(crate) secrets: Vec<(String, PathBuf)>,
}

impl Installed {
    /// Appends the `package` node (and `secrets` placeholders) to a
    /// rendered server file.
    pub(crate) fn annotate(&self, text: &mut String) {
        text.push_str(&format!(
            "\n// Pinned install: `xyctl upgrade` / `xyctl rollback` switch versions.\n\
             package \"{}\"\n",
            self.package
        ));
        if !self.secrets.is_empty() {
            text.push_str(
                "\n// Placeholders: write each value into its file (or use keychain=/command=).\n\
                 secrets {\n",
            );
            for (name, file) in &self.secrets {
                text.push_str(&format!(
                    "    {name} file=\"{}\"\n",
                    file.display()
                        .to_string()
                        .replace('\\', "\\\\")
                        .replace('"', "\\\"")
                ));
            }
            text.push_str("}\n");
        }
    }
}

/// `add --npm/--pypi`: `None` without those flags; else the install is done
/// (or refused) before the config is written.
pub(crate) fn for_add(
    ctx: &Ctx,
    a: &AddArgs,
    dir: &Path,
    port: u16,
) -> Result<Option<Installed>, Failure> {
    let from_json = match &a.pin.registry {
        Some(arg) => Some(registry::load(arg, a.pin.registry_url.as_deref())?),
        None => None,
    };
    let (ecosystem, spec) = match (&a.pin.npm, &a.pin.pypi, &from_json) {
        (Some(s), _, _) => (Ecosystem::Npm, s.clone()),
        (None, Some(s), _) => (Ecosystem::Pypi, s.clone()),
        (None, None, Some(e)) => (e.ecosystem, e.spec.clone()),
        (None, None, None) => return Ok(None),
    };
    let file = dir.join(format!("{}.kdl", a.name));
    if !a.force && file.exists() {
        return Err(Failure::new(
            Exit::Operational,
            format!(
                "{} already exists (use --force to replace it); nothing was installed",
                file.display()
            ),
        ));
    }
    let (name, want) = xy_core::package::split_spec(ecosystem, &spec)
        .map_err(|e| Failure::new(Exit::Operational, e.to_string()))?;
    let paths = data_paths()?;
    let resolved = resolve(ecosystem, &name, want.as_deref())?;
    check_age(
        &resolved,
        min_age(&paths, &a.pin.install),
        &a.pin.install,
        SystemTime::now(),
    )?;
    let (runtime_args, mut extra) = match &from_json {
        Some(e) => (e.runtime_args.clone(), e.package_args.clone()),
        None => (Vec::new(), Vec::new()),
    };
    extra.extend(
        a.command
            .iter()
            .map(|s| s.replace("{port}", &port.to_string())),
    );
    let target = paths.packages_dir(&a.name, &resolved.pkg.version);
    if let Some(e) = &from_json {
        for n in &e.notes {
            output::warn(&ctx.err, n);
        }
    }
    let plan = Plan {
        server: &a.name,
        source: from_json.as_ref().map(|e| e.source.as_str()),
        resolved: &resolved,
        dir: &target,
        runtime_args: &runtime_args,
        extra: &extra,
        port: Some(port),
        flags: &a.pin.install,
    };
    confirm(ctx, &plan)?;
    let (built, _) = install(&paths, &a.name, &resolved, &a.pin.install)?;
    let mut args = runtime_args;
    args.push(built.entry.display().to_string());
    args.extend(extra);
    let (env, secrets, todo) = match from_json {
        Some(e) => {
            let secrets_dir = paths
                .settings_file
                .parent()
                .unwrap_or(&paths.config_dir)
                .join("secrets")
                .join(&a.name);
            let secrets: Vec<(String, PathBuf)> = e
                .secrets
                .iter()
                .map(|n| (n.clone(), secrets_dir.join(n)))
                .collect();
            (e.env, secrets, e.todo)
        }
        None => Default::default(),
    };
    for (name, file) in &secrets {
        output::warn(
            &ctx.err,
            &format!(
                "fill in the secret {name}: write its value into {} (mode 0600), or give it \
                 another source in {}.kdl; then `xyctl restart {}`",
                file.display(),
                a.name,
                a.name
            ),
        );
    }
    for t in todo {
        output::warn(&ctx.err, &format!("server.json asks for {t}"));
    }
    Ok(Some(Installed {
        command: built.runtime.display().to_string(),
        args,
        package: resolved.pkg,
        env,
        secrets,
    }))
}

/// The paths, for the data directory (no socket check: installing needs
/// no daemon).
fn data_paths() -> Result<Paths, Failure> {
    Paths::from_env().map_err(|e| Failure::new(Exit::Operational, e.to_string()))
}

fn resolve(ecosystem: Ecosystem, name: &str, want: Option<&str>) -> Result<Resolved, Failure> {
    match ecosystem {
        Ecosystem::Npm => npm::resolve(name, want),
        Ecosystem::Pypi => pypi::resolve(name, want),
    }
}

/// `--min-age`, else `min-age` in xy.kdl, else the default.
fn min_age(paths: &Paths, flags: &InstallFlags) -> Duration {
    flags
        .min_age
        .or_else(|| {
            xy_core::config::load_settings(&paths.settings_file)
                .ok()
                .and_then(|s| s.min_age)
        })
        .unwrap_or(xy_core::package::DEFAULT_MIN_AGE)
}

/// Refuses a version younger than `min_age` (or of unknown age), naming
/// its publish time, unless `--allow-fresh`.
fn check_age(
    r: &Resolved,
    min_age: Duration,
    flags: &InstallFlags,
    now: SystemTime,
) -> Result<(), Failure> {
    if flags.allow_fresh {
        return Ok(());
    }
    let Some(published) = r.published else {
        return Err(Failure::new(
            Exit::Operational,
            format!(
                "{} has no publish time in the registry, so its age is unknown; nothing was \
                 installed (--allow-fresh installs it anyway)",
                r.pkg
            ),
        ));
    };
    let age = now.duration_since(published).unwrap_or_default();
    if age < min_age {
        return Err(Failure::new(
            Exit::Operational,
            format!(
                "{} was published {} ({} ago), less than min-age {} ago; nothing was installed \
                 (wait, pick an older version, or pass --allow-fresh)",
                r.pkg,
                xy_core::time::rfc3339_ms(published),
                human_age(age),
                humantime::format_duration(min_age),
            ),
        ));
    }
    Ok(())
}

/// `3d 4h`, `5m`: the two largest units of an age.
fn human_age(d: Duration) -> String {
    let s = d.as_secs();
    let (days, hours, mins) = (s / 86_400, s % 86_400 / 3600, s % 3600 / 60);
    match (days, hours) {
        (0, 0) => format!("{mins}m"),
        (0, h) => format!("{h}h {mins}m"),
        (d, h) => format!("{d}d {h}h"),
    }
}

/// What the user is asked to approve.
struct Plan<'a> {
    server: &'a str,
    /// The `server.json` it comes from (`--registry`).
    source: Option<&'a str>,
    resolved: &'a Resolved,
    dir: &'a Path,
    runtime_args: &'a [String],
    extra: &'a [String],
    port: Option<u16>,
    flags: &'a InstallFlags,
}

impl Plan<'_> {
    fn render(&self) -> Result<String, Failure> {
        let r = self.resolved;
        let published = r
            .published
            .map_or_else(|| "unknown".to_owned(), xy_core::time::rfc3339_ms);
        let (runtime, entry, how) = match r.pkg.ecosystem {
            Ecosystem::Npm => (
                npm::node()?.display().to_string(),
                match &r.bin {
                    Some(bin) => npm::entry_path(self.dir, &r.pkg.name, bin)
                        .display()
                        .to_string(),
                    None => "(the package has no `bin`: it cannot be run)".to_owned(),
                },
                format!(
                    "npm install{} → package-lock.json (integrity for every dependency)",
                    if self.flags.allow_scripts {
                        " (install scripts allowed)"
                    } else {
                        " --ignore-scripts"
                    }
                ),
            ),
            Ecosystem::Pypi => (
                pypi::venv_python(self.dir).display().to_string(),
                format!(
                    "{}/<console script of {}, read after the install>",
                    pypi::venv_bin(self.dir).display(),
                    r.pkg.name
                ),
                "python3 -m venv; pip download → requirements.lock (sha256 of every wheel); \
                 pip install --require-hashes --no-index"
                    .to_owned(),
            ),
        };
        let mut s = format!("server    {}\n", self.server);
        if let Some(src) = self.source {
            s.push_str(&format!("registry  {src}\n"));
        }
        s.push_str(&format!(
            "package   {} (published {published})\ninstall   {}/\n          {how}\n\
             command   {runtime}\nargs      ",
            r.pkg,
            self.dir.display()
        ));
        for a in self.runtime_args {
            s.push_str(a);
            s.push(' ');
        }
        s.push_str(&entry);
        for a in self.extra {
            s.push(' ');
            s.push_str(a);
        }
        s.push('\n');
        if let Some(port) = self.port {
            s.push_str(&format!("transport stdio, served on port {port}\n"));
        }
        Ok(s)
    }
}

/// Shows the plan and asks on a terminal; `--yes` skips the question;
/// without either nothing is installed.
fn confirm(ctx: &Ctx, plan: &Plan<'_>) -> Result<(), Failure> {
    confirm_all(ctx, std::slice::from_ref(plan), plan.flags)
}

/// [`confirm`] for several installs: every plan shown, one question.
fn confirm_all(ctx: &Ctx, plans: &[Plan<'_>], flags: &InstallFlags) -> Result<(), Failure> {
    let mut text = String::new();
    for (i, p) in plans.iter().enumerate() {
        if i > 0 {
            text.push('\n');
        }
        text.push_str(&p.render()?);
    }
    output::stdout(&text);
    if flags.yes {
        return Ok(());
    }
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return Err(Failure::new(
            Exit::Operational,
            "not installed: confirming needs a terminal; pass --yes to install without asking",
        ));
    }
    if plans.len() > 1 {
        output::stderr(&format!("Install these {} packages? [y/N] ", plans.len()));
    } else {
        output::stderr("Install? [y/N] ");
    }
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    stdin
        .lock()
        .read_line(&mut line)
        .map_err(|e| Failure::new(Exit::Operational, format!("cannot read the answer: {e}")))?;
    if matches!(line.trim(), "y" | "Y" | "yes" | "Yes") {
        Ok(())
    } else {
        output::note(&ctx.err, "not installed");
        Err(Failure::new(Exit::Operational, "not installed: declined"))
    }
}

/// Installs `r` for server `server` into its version directory: built in a
/// hidden sibling, the install record written last, then renamed into
/// place (replacing an earlier install of the same version, whose lockfile
/// is reused). Returns what was built and the directory.
fn install(
    paths: &Paths,
    server: &str,
    r: &Resolved,
    flags: &InstallFlags,
) -> Result<(Built, PathBuf), Failure> {
    let root = paths.packages_root(server);
    let target = paths.packages_dir(server, &r.pkg.version);
    let io = |what: &str, p: &Path, e: std::io::Error| {
        Failure::new(
            Exit::Operational,
            format!("cannot {what} {}: {e}", p.display()),
        )
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .create(&root)
        .map_err(|e| io("create", &root, e))?;
    let tmp = root.join(format!(".tmp-{}-{}", r.pkg.version, std::process::id()));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(|e| io("remove", &tmp, e))?;
    }
    std::fs::create_dir(&tmp).map_err(|e| io("create", &tmp, e))?;
    let previous = target
        .join(INSTALL_RECORD)
        .exists()
        .then_some(target.as_path());
    let built = match r.pkg.ecosystem {
        Ecosystem::Npm => npm::install(&tmp, &target, previous, r, flags),
        Ecosystem::Pypi => pypi::install(&tmp, &target, previous, r),
    };
    let built = match built {
        Ok(b) => b,
        Err(f) => {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(f);
        }
    };
    let record = InstallRecord {
        ecosystem: r.pkg.ecosystem.as_str().to_owned(),
        name: r.pkg.name.clone(),
        version: r.pkg.version.clone(),
        installed_at: xy_core::time::now_rfc3339(),
        published_at: r.published.map(xy_core::time::rfc3339_ms),
        runtime: built.runtime.display().to_string(),
        entry: built.entry.display().to_string(),
        lockfile: built.lockfile.to_owned(),
    };
    let json = serde_json::to_string_pretty(&record).expect("a record serializes");
    std::fs::write(tmp.join(INSTALL_RECORD), json + "\n")
        .map_err(|e| io("write", &tmp.join(INSTALL_RECORD), e))?;
    if target.exists() {
        let old = root.join(format!(".old-{}-{}", r.pkg.version, std::process::id()));
        std::fs::rename(&target, &old).map_err(|e| io("move", &target, e))?;
        std::fs::rename(&tmp, &target).map_err(|e| io("move", &tmp, e))?;
        let _ = std::fs::remove_dir_all(&old);
    } else {
        std::fs::rename(&tmp, &target).map_err(|e| io("move", &tmp, e))?;
    }
    Ok((built, target))
}

/// Runs a package manager step; a failure carries its stderr.
pub(crate) fn run(cmd: &mut Command, what: &str) -> Result<Output, Failure> {
    let out = cmd
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| Failure::new(Exit::Operational, format!("cannot run {what}: {e}")))?;
    if out.status.success() {
        return Ok(out);
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let tail: Vec<&str> = stderr.lines().rev().take(20).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    Err(
        Failure::new(Exit::Operational, format!("{what} failed ({})", out.status))
            .with_detail(tail.join("\n")),
    )
}

/// `program` on PATH, or a failure naming what to install.
pub(crate) fn program(name: &str, install_hint: &str) -> Result<PathBuf, Failure> {
    xy_core::config::resolve_command(name, None).map_err(|_| {
        Failure::new(
            Exit::Operational,
            format!("`{name}` is not on PATH: {install_hint}"),
        )
    })
}

/// `upgrade <name> [--to V]`.
pub(crate) fn upgrade(ctx: &Ctx, a: &UpgradeArgs) -> Result<Exit, Failure> {
    let (client, dir) = crate::commands::add::daemon_and_dir(ctx)?;
    let current = Current::read(&dir, &a.name)?;
    let paths = data_paths()?;
    let resolved = resolve(
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
    check_age(
        &resolved,
        min_age(&paths, &a.install),
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
    };
    confirm(ctx, &plan)?;
    install(&paths, &a.name, &resolved, &a.install)?;
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
    let (client, dir) = crate::commands::add::daemon_and_dir(ctx)?;
    let current = Current::read(&dir, name)?;
    let paths = data_paths()?;
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
    server_file::write(dir, &current.name, &text, true)
        .map_err(|e| crate::commands::add::write_failure(e, ctx.err.color))?;
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

/// `list`'s hint (SPEC §22): one line per server whose `command` is `npx`
/// or `uvx` (they resolve and may download new code at every start), with
/// the `xyctl add` line that pins it. Read from the daemon's config
/// directory; only files that mention either are parsed, so a large
/// directory costs a read per file.
pub(crate) fn unpinned_hint(c: &mut xy_core::client::Client) -> Option<String> {
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
fn pin_candidate(program: &str, args: &[String]) -> Option<(Ecosystem, String, Vec<String>)> {
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

/// Parses an RFC 3339 timestamp as registries write it
/// (`2026-09-01T22:46:36.382000+00:00`, `2025-01-01T12:00:00.123456Z`).
pub(crate) fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    let digits = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(r)?;
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        part.parse().ok()
    };
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let (y, mo, d) = (digits(0..4)?, digits(5..7)?, digits(8..10)?);
    let (h, mi, sec) = (digits(11..13)?, digits(14..16)?, digits(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut rest = &s[19..];
    let mut nanos: u32 = 0;
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return None;
        }
        let mut digits9 = frac[..n.min(9)].to_owned();
        while digits9.len() < 9 {
            digits9.push('0');
        }
        nanos = digits9.parse().ok()?;
        rest = &frac[n..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let t = &rest[1..];
            if t.len() != 5 || t.as_bytes()[2] != b':' {
                return None;
            }
            let (oh, om): (i64, i64) = (t[..2].parse().ok()?, t[3..].parse().ok()?);
            sign * (oh * 3600 + om * 60)
        }
    };
    // Days from the civil date (proleptic Gregorian), epoch 1970-01-01.
    let yy = if mo <= 2 { y - 1 } else { y };
    let era = yy.div_euclid(400);
    let yoe = yy - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec - offset;
    let secs = u64::try_from(secs).ok()?;
    Some(SystemTime::UNIX_EPOCH + Duration::new(secs, nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64, nanos: u32) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::new(secs, nanos)
    }

    #[test]
    fn registry_timestamps_parse() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(at(0, 0)));
        // npm's spelling.
        assert_eq!(
            parse_rfc3339("2026-09-01T22:46:36.382000+00:00"),
            Some(at(1_788_302_796, 382_000_000))
        );
        // PyPI's.
        assert_eq!(
            parse_rfc3339("2024-02-29T12:00:00.123456Z"),
            Some(at(1_709_208_000, 123_456_000))
        );
        assert_eq!(
            parse_rfc3339("2024-02-29T14:30:00+02:30"),
            parse_rfc3339("2024-02-29T12:00:00Z")
        );
        for bad in [
            "",
            "2024-02-29",
            "2024-02-29T12:00:00",
            "2024-13-01T00:00:00Z",
            "2024-02-29T12:00:00.Z",
            "2024-02-29T12:00:00+0200",
            "+024-02-29T12:00:00Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    fn resolved(published: Option<SystemTime>) -> Resolved {
        Resolved {
            pkg: "npm:x@1.0.0".parse().unwrap(),
            published,
            bin: None,
        }
    }

    #[test]
    fn young_versions_are_refused_with_their_publish_time() {
        let now = at(1_000_000, 0);
        let day = Duration::from_secs(86_400);
        let flags = InstallFlags::default();
        let ok = resolved(Some(now - 4 * day));
        assert!(check_age(&ok, 3 * day, &flags, now).is_ok());
        let fresh = resolved(Some(now - day));
        let f = check_age(&fresh, 3 * day, &flags, now).unwrap_err();
        assert!(
            f.message
                .contains("published 1970-01-11T13:46:40.000Z (1d 0h ago)"),
            "{}",
            f.message
        );
        assert!(f.message.contains("--allow-fresh"), "{}", f.message);
        assert!(check_age(&resolved(None), 3 * day, &flags, now).is_err());
        let allow = InstallFlags {
            allow_fresh: true,
            ..InstallFlags::default()
        };
        assert!(check_age(&fresh, 3 * day, &allow, now).is_ok());
    }

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
