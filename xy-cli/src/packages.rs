//! Pinned installs (SPEC §22), the client side: resolve an exact version
//! with the real package manager, refuse one younger than `min-age`, show
//! the plan and ask ([`plan`]), install into a temporary directory renamed
//! into `<data dir>/packages/<name>/<version>/` only when complete, and
//! (for `add --npm/--pypi/--registry`) the `package` node and a command
//! that runs the entry point by absolute path. The subcommands that switch
//! versions (`commands::upgrade`) and import clients' servers
//! (`commands::clients`, through [`import`]) install through here; `list`'s
//! hint about unpinned servers is [`unpinned`]. The ecosystems' own steps
//! are in [`npm`] and [`pypi`], `server.json` in [`registry`], the
//! variables pointed into the server's data dir ([`data`], D220), a
//! wheel's own npm dependencies ([`js`], D290); the daemon never installs
//! anything.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

use xy_core::package::{Ecosystem, INSTALL_RECORD, InstallRecord, PackageRef};
use xy_core::paths::Paths;

use crate::cli::{AddArgs, InstallFlags};
use crate::ctx::Ctx;
use crate::error::{Exit, Failure};
use crate::{output, server_file};

pub(crate) mod data;
pub(crate) mod import;
pub(crate) mod js;
pub(crate) mod npm;
pub(crate) mod plan;
pub(crate) mod pypi;
pub(crate) mod registry;
pub(crate) mod unpinned;

use plan::{Plan, confirm};

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
    /// npm: the tree resolved for the plan ([`Tree`]), installed from.
    pub(crate) tree: Option<PathBuf>,
}

/// A tree resolved before the plan (D221): `package.json` and the
/// lockfile in a private temp dir, removed when dropped.
pub(crate) struct Tree(PathBuf);

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// D221: for npm, resolves `r`'s tree before the plan (metadata only) and
/// names the packages with an install script; `r` then installs from that
/// tree. PyPI has no install scripts for wheels: nothing to name.
pub(crate) fn resolve_tree(
    paths: &Paths,
    r: &mut Resolved,
    flags: &InstallFlags,
) -> Result<(Option<Tree>, Vec<npm::Script>), Failure> {
    if r.pkg.ecosystem != Ecosystem::Npm {
        return Ok((None, Vec::new()));
    }
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "xy-tree-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| {
                Failure::new(
                    Exit::Operational,
                    format!("cannot create {}: {e}", dir.display()),
                )
            })?;
    }
    let tree = Tree(dir.clone());
    let scripts = npm::resolve_tree(&dir, r, cutoff(paths, flags).as_ref())?;
    r.tree = Some(dir);
    Ok((Some(tree), scripts))
}

/// The cutoff every dependency's publish time must be before.
fn cutoff(paths: &Paths, flags: &InstallFlags) -> Option<Cutoff> {
    (!flags.allow_fresh)
        .then(|| Cutoff::of(min_age(paths, flags), SystemTime::now()))
        .flatten()
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
    /// Packages whose install script `--ignore-scripts` skipped (SPEC
    /// §25: a native add-on then fails at start).
    pub(crate) skipped_scripts: Vec<String>,
    /// PyPI: the JavaScript parts whose npm dependencies were installed
    /// with the venv (D290).
    pub(crate) js: Vec<js::Done>,
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
    let mut resolved = resolve(ecosystem, &name, want.as_deref())?;
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
    let (_tree, scripts) = resolve_tree(&paths, &mut resolved, &a.pin.install)?;
    let plan = Plan {
        server: &a.name,
        source: from_json.as_ref().map(|e| e.source.as_str()),
        resolved: &resolved,
        dir: &target,
        runtime_args: &runtime_args,
        extra: &extra,
        port: Some(port),
        flags: &a.pin.install,
        data: Some(&data::data_dir(&paths, &a.name)),
        scripts: &scripts,
    };
    confirm(ctx, &plan)?;
    let (built, version_dir) = install(&paths, &a.name, &resolved, &a.pin.install)?;
    tell_js(ctx, &a.name, &resolved, &built);
    if !built.skipped_scripts.is_empty() {
        output::warn(
            &ctx.err,
            &format!(
                "install scripts were skipped (--ignore-scripts) for {}: a native add-on among \
                 them will not load and the server will fail at start; if it does, install \
                 with scripts: xyctl add {} --npm {}@{} --allow-scripts --force",
                built.skipped_scripts.join(", "),
                a.name,
                resolved.pkg.name,
                resolved.pkg.version
            ),
        );
    }
    let mut args = runtime_args;
    args.push(built.entry.display().to_string());
    args.extend(extra);
    let (mut env, secrets, todo) = match from_json {
        Some(e) => {
            let secrets_dir = server_file::secrets_dir(dir, &a.name);
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
    let given = |n: &str| env.contains_key(n) || a.env.iter().any(|(k, _)| k == n);
    let found = data::find(
        ecosystem,
        &version_dir,
        &resolved.pkg.name,
        &data::data_dir(&paths, &a.name),
        &given,
    );
    env.extend(point_data(ctx, &a.name, &paths, found));
    Ok(Some(Installed {
        command: built.runtime.display().to_string(),
        args,
        package: resolved.pkg,
        env,
        secrets,
    }))
}

/// D290: says which JavaScript parts of a Python install got their npm
/// dependencies, and which of those skipped an install script.
pub(crate) fn tell_js(ctx: &Ctx, server: &str, r: &Resolved, built: &Built) {
    for d in &built.js {
        output::note(&ctx.err, &js::told(d));
        if !d.skipped_scripts.is_empty() {
            output::warn(
                &ctx.err,
                &format!(
                    "install scripts were skipped (--ignore-scripts) for {} (npm dependencies of \
                     {}): a native add-on among them will not load; if the server fails, install \
                     with scripts: xyctl add {server} --pypi {}=={} --allow-scripts --force",
                    d.skipped_scripts.join(", "),
                    d.part.shown,
                    r.pkg.name,
                    r.pkg.version
                ),
            );
        }
    }
}

/// D220: the data variables found in a fresh install, as `env` entries,
/// each said on stderr; the data directory is created for them.
pub(crate) fn point_data(
    ctx: &Ctx,
    server: &str,
    paths: &Paths,
    found: Vec<data::DataVar>,
) -> Vec<(String, String)> {
    if found.is_empty() {
        return Vec::new();
    }
    let dir = data::data_dir(paths, server);
    if let Err(e) = data::create(&dir) {
        output::warn(&ctx.err, &format!("cannot create {}: {e}", dir.display()));
    }
    found
        .into_iter()
        .map(|v| {
            output::note(
                &ctx.err,
                &format!(
                    "env {}={}: its data outside its package (its code reads the variable, in \
                     {}; --env {}=… chooses another place)",
                    v.name,
                    v.value.display(),
                    v.found_in,
                    v.name
                ),
            );
            (v.name, v.value.display().to_string())
        })
        .collect()
}

/// The paths, for the data directory (no socket check: installing needs
/// no daemon).
pub(crate) fn data_paths() -> Result<Paths, Failure> {
    Paths::from_env().map_err(|e| Failure::new(Exit::Operational, e.to_string()))
}

/// The exact version `want` names (the newest without one), from the
/// ecosystem's registry.
pub(crate) fn resolve(
    ecosystem: Ecosystem,
    name: &str,
    want: Option<&str>,
) -> Result<Resolved, Failure> {
    match ecosystem {
        Ecosystem::Npm => npm::resolve(name, want),
        Ecosystem::Pypi => pypi::resolve(name, want),
    }
}

/// `--min-age`, else `min-age` in xy.kdl, else the default.
pub(crate) fn min_age(paths: &Paths, flags: &InstallFlags) -> Duration {
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
pub(crate) fn check_age(
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

/// The newest publish time `min-age` allows for a dependency, and the
/// `min-age` it comes from (for the message that names a dependency).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cutoff {
    pub(crate) at: SystemTime,
    pub(crate) min_age: Duration,
}

impl Cutoff {
    /// `now - min_age`; `None` for a zero `min-age` (nothing to hold back).
    pub(crate) fn of(min_age: Duration, now: SystemTime) -> Option<Cutoff> {
        (!min_age.is_zero()).then(|| Cutoff {
            at: now.checked_sub(min_age).unwrap_or(SystemTime::UNIX_EPOCH),
            min_age,
        })
    }

    /// The refusal for dependency `what`, published at `published`
    /// (`None`: the registry gives no time).
    pub(crate) fn too_new(&self, what: &str, published: Option<SystemTime>) -> Failure {
        let when = match published {
            Some(p) => format!(
                "was published {} ({} ago)",
                xy_core::time::rfc3339_ms(p),
                human_age(SystemTime::now().duration_since(p).unwrap_or_default())
            ),
            None => "has no publish time in the registry".to_owned(),
        };
        Failure::new(
            Exit::Operational,
            format!(
                "the dependency {what} {when}, newer than min-age {} allows (published before \
                 {}); nothing was installed (wait, pick an older version, or pass --allow-fresh)",
                humantime::format_duration(self.min_age),
                xy_core::time::rfc3339_ms(self.at),
            ),
        )
    }
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

/// Installs `r` for server `server` into its version directory: built in a
/// hidden sibling, the install record written last, then renamed into
/// place (replacing an earlier install of the same version, whose lockfile
/// is reused). Returns what was built and the directory.
pub(crate) fn install(
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
    // An earlier install of this version, else the tree the plan showed.
    let previous = target
        .join(INSTALL_RECORD)
        .exists()
        .then_some(target.as_path())
        .or(r.tree.as_deref());
    // Every dependency a fresh resolution picks must be older than
    // min-age too (SPEC §24): npm resolves before the date, PyPI's files
    // are checked one by one.
    let before = cutoff(paths, flags);
    let built = match r.pkg.ecosystem {
        Ecosystem::Npm => npm::install(&tmp, &target, previous, r, flags, before.as_ref()),
        Ecosystem::Pypi => pypi::install(&tmp, &target, previous, r, flags, before.as_ref()),
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
            tree: None,
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
}
