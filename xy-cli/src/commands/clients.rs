//! `xyctl import <client>`, `xyctl clients [--json]`, `xyctl clients apply
//! <client>` and `xyctl clients undo <client>` (SPEC §14): the thin layer
//! over [`crate::clients`] that reads and writes the files, asks the daemon
//! which servers it runs, and prints what happened.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use xy_core::protocol::{ListEntry, ReloadResult, method};

use crate::cli::{ClientsArgs, ClientsCmd, ImportArgs};
use crate::clients::{self, ClientId, Entry, Home, Os, Pointer, Rewrite, Spec, file};
use crate::ctx::{CONTROL_TIMEOUT, Ctx, READ_TIMEOUT};
use crate::daemon_conn::daemon_and_dir;
use crate::error::{Exit, Failure};
use crate::packages::import::{Candidate, Outcome};
use crate::server_file::{self, ServerSpec};
use crate::{daemon_conn, output, render};
use xy_core::client::Client;
use xy_core::clients::{XyUrl, xy_name_for};

fn home() -> Result<Home, Failure> {
    Home::from_env().ok_or_else(|| Failure::new(Exit::Operational, "HOME is not set".to_owned()))
}

fn path_of(client: ClientId, file: Option<&PathBuf>) -> Result<PathBuf, Failure> {
    match file {
        Some(f) => Ok(f.clone()),
        None => Ok(client.default_path(Os::current(), &home()?)),
    }
}

/// The file's bytes and its entries.
fn read(client: ClientId, path: &Path) -> Result<(Vec<u8>, String, Vec<Entry>), Failure> {
    let bytes = std::fs::read(path).map_err(|e| {
        Failure::new(
            Exit::Operational,
            format!(
                "cannot read {}'s config {}: {e}",
                client.id(),
                path.display()
            ),
        )
    })?;
    let text = String::from_utf8(bytes.clone()).map_err(|_| {
        Failure::new(
            Exit::Operational,
            format!("{} is not UTF-8", path.display()),
        )
    })?;
    let entries = clients::entries(client, &text).map_err(|e| {
        Failure::new(
            Exit::Operational,
            format!("cannot read {}: {e}", path.display()),
        )
    })?;
    Ok((bytes, text, entries))
}

pub(crate) fn import(ctx: &Ctx, a: &ImportArgs) -> Result<Exit, Failure> {
    let path = path_of(a.client, a.file.as_ref())?;
    let (_, _, entries) = read(a.client, &path)?;
    let (client, dir) = daemon_and_dir(ctx)?;
    // SPEC §22: `--pin` resolves, confirms and installs before any file
    // is written; the loop below then writes the pinned commands.
    let mut pins = if a.pin {
        crate::packages::import::prepare(
            ctx,
            &pin_candidates(&entries, &dir),
            &a.install,
            a.dry_run,
        )?
    } else {
        Default::default()
    };
    let mut used = server_file::used_ports(&dir);
    let mut taken: BTreeSet<String> = BTreeSet::new();
    let mut rows = Vec::new();
    let mut created = 0;
    let mut created_names = Vec::new();
    let mut invalid = Vec::new();
    let xy_ports = xy_ports(&dir, &used);
    for e in &entries {
        // SPEC §23: a URL entry, or `npx mcp-remote <url>`, becomes a remote server.
        let remote = clients::remote_of(e);
        let stdio = match (&e.spec, &remote) {
            (Spec::Url(url), _) if on_xy_port(url, &xy_ports) => {
                rows.push(row(
                    &e.name,
                    "-",
                    "-",
                    &format!("skipped: already points at xy ({url})"),
                ));
                continue;
            }
            (_, Some(_)) => None,
            (
                Spec::Stdio {
                    command,
                    args,
                    env,
                    cwd,
                },
                None,
            ) => Some((command, args, env, cwd)),
            (Spec::Url(_) | Spec::Other, None) => {
                rows.push(row(
                    &e.name,
                    "-",
                    "-",
                    "skipped: neither a command nor a URL",
                ));
                continue;
            }
        };
        let name = unique_name(&e.name, &mut taken);
        let shown = if name == e.name {
            name.clone()
        } else {
            format!("{name} (renamed)")
        };
        if dir.join(format!("{name}.kdl")).exists() {
            rows.push(row(
                &e.name,
                &shown,
                "-",
                "skipped: xy already has a server of that name",
            ));
            continue;
        }
        let Some(port) = server_file::choose_port(&used, server_file::port_is_free) else {
            rows.push(row(&e.name, &shown, "-", "skipped: no free port"));
            continue;
        };
        used.insert(port);
        let pin = pins.take(&name);
        let comment = format!(
            "Imported from {} entry \"{}\" ({}) by `xyctl import`.",
            a.client.id(),
            e.name,
            path.display()
        );
        let mut create = Vec::new();
        // A remote's header values go to secret files, written with the server.
        let mut secret_values = Vec::new();
        let mut pinned = String::new();
        let text = match (stdio, &remote) {
            (Some((command, args, env, cwd)), _) => {
                let (command, args) = match &pin {
                    Some(Outcome::Pinned(p)) => (&p.command, &p.args),
                    _ => (command, args),
                };
                let spec = ServerSpec {
                    command: command.clone(),
                    args: args.clone(),
                    port,
                    stdio: true,
                    env: env.clone(),
                    working_dir: cwd.clone(),
                    health: None,
                };
                let mut text = server_file::render(&spec, &comment);
                pinned = pin_note(pin.as_ref(), &mut text);
                if !a.no_sandbox
                    && let Some((block, dirs)) = crate::starter::block_for(&spec, "xyctl import")
                {
                    text.push_str(&block);
                    create = dirs;
                }
                text
            }
            (None, Some((url, headers))) => {
                let secrets_dir = server_file::secrets_dir(&dir, &name);
                let mut spec = server_file::RemoteSpec {
                    url: url.clone(),
                    port,
                    headers: Vec::new(),
                    secrets: Vec::new(),
                };
                for (header, value) in headers {
                    let secret = server_file::secret_name_for(header);
                    let file = secrets_dir.join(&secret);
                    spec.headers.push((
                        header.clone(),
                        server_file::HeaderSource::Secret(secret.clone()),
                    ));
                    spec.secrets.push((secret, file.clone()));
                    secret_values.push((file, value.clone()));
                }
                server_file::render_remote(&spec, &comment)
            }
            (None, None) => unreachable!("entries without either were skipped"),
        };
        let port_s = port.to_string();
        if a.dry_run {
            // Validated all the same, so a dry run shows what would fail.
            let result =
                match xy_core::config::parse_server(&name, &dir.join(format!("{name}.kdl")), &text)
                {
                    Ok(_) => format!("would be created{pinned}"),
                    Err(errs) => format!("invalid: {}", first_line(&errs.render(false))),
                };
            rows.push(row(&e.name, &shown, &port_s, &result));
            continue;
        }
        match server_file::write(&dir, &name, &text, false) {
            Ok(_) => {
                for (file, value) in &secret_values {
                    if let Err(err) = server_file::write_secret(file, value) {
                        output::warn(
                            &ctx.err,
                            &format!("cannot write the secret {}: {err}", file.display()),
                        );
                    }
                }
                created += 1;
                created_names.push(name.clone());
                for warning in crate::starter::create_dirs(&create) {
                    output::note(&ctx.err, &warning);
                }
                rows.push(row(&e.name, &shown, &port_s, &format!("created{pinned}")));
            }
            Err(err) => {
                rows.push(row(&e.name, &shown, &port_s, "invalid: nothing written"));
                invalid.push(err.failure(ctx.err.color));
            }
        }
    }
    output::stdout(&render::render_rows(
        &["ENTRY", "XY SERVER", "PORT", "RESULT"],
        &rows,
        &ctx.out,
    ));
    let mut exit = Exit::Success;
    if created > 0
        && let Some(mut c) = client
    {
        let _: ReloadResult = c.call::<(), _>(method::RELOAD, None, CONTROL_TIMEOUT)?;
        // SPEC §25: what each new server came to, not just that it exists.
        let wait = a.wait.duration();
        if !wait.is_zero() {
            let found = super::outcome::wait(&mut c, &created_names, wait)?;
            output::stdout("\n");
            for (name, o, _) in &found {
                output::stdout(&super::outcome::line(name, o, wait, &ctx.out));
            }
            exit = super::outcome::exit_of(found.iter().map(|(_, o, _)| o));
        }
    }
    if created > 0 {
        output::stdout(&format!(
            "\n{created} {} created in {}. Point {} at them with:\n  xyctl clients apply {}{}\n",
            if created == 1 { "server" } else { "servers" },
            dir.display(),
            a.client.id(),
            a.client.id(),
            a.file
                .as_ref()
                .map(|f| format!(" --file {}", f.display()))
                .unwrap_or_default()
        ));
    }
    match invalid.into_iter().next() {
        Some(f) => Err(f),
        None => Ok(exit),
    }
}

/// A usable xy name for client entry `entry`, made unique among `taken`
/// (`name-2`, `name-3`, …) and added to it.
fn unique_name(entry: &str, taken: &mut BTreeSet<String>) -> String {
    let base = server_file::usable_name(entry);
    let mut name = base.clone();
    let mut n = 2;
    while taken.contains(&name) {
        name = format!("{base}-{n}");
        n += 1;
    }
    taken.insert(name.clone());
    name
}

/// The stdio entries `import` will create, under the names it will give
/// them (the same walk as its loop).
fn pin_candidates(entries: &[Entry], dir: &Path) -> Vec<Candidate> {
    let xy_ports = xy_ports(dir, &server_file::used_ports(dir));
    let mut taken = BTreeSet::new();
    let mut out = Vec::new();
    for e in entries {
        // Named exactly when the loop names it: URL and remote entries take a
        // name too, so the names that follow them agree.
        let remote = clients::remote_of(e);
        match (&e.spec, &remote) {
            (Spec::Url(url), _) if on_xy_port(url, &xy_ports) => continue,
            (_, Some(_)) => {
                unique_name(&e.name, &mut taken);
            }
            (Spec::Stdio { command, args, .. }, None) => {
                let name = unique_name(&e.name, &mut taken);
                if !dir.join(format!("{name}.kdl")).exists() {
                    out.push(Candidate {
                        name,
                        command: command.clone(),
                        args: args.clone(),
                    });
                }
            }
            (Spec::Url(_) | Spec::Other, None) => continue,
        }
    }
    out
}

/// A pinned install's `package` node into `text`; the row's note.
fn pin_note(pin: Option<&Outcome>, text: &mut String) -> String {
    match pin {
        Some(Outcome::Pinned(p)) => {
            p.annotate(text);
            format!(", pinned {}", p.package)
        }
        Some(Outcome::WouldPin(pkg)) => format!(", pinned {pkg}"),
        Some(Outcome::Unpinned(why)) => format!(" (not pinned: {why})"),
        None => String::new(),
    }
}

/// The loopback ports xy serves on: every server's and the gateway's.
fn xy_ports(dir: &Path, used: &BTreeSet<u16>) -> BTreeSet<u16> {
    let mut ports = used.clone();
    let settings = dir
        .parent()
        .map(|d| d.join(xy_core::paths::SETTINGS_FILE))
        .and_then(|f| xy_core::config::load_settings(&f).ok())
        .unwrap_or_default();
    if let Some(p) = settings.gateway.port() {
        ports.insert(p);
    }
    ports
}

/// A loopback URL on one of xy's ports: an entry `clients apply` wrote.
fn on_xy_port(url: &str, xy_ports: &BTreeSet<u16>) -> bool {
    let Some(rest) = url.strip_prefix("http://127.0.0.1:") else {
        return false;
    };
    let port: String = rest.chars().take_while(char::is_ascii_digit).collect();
    port.parse::<u16>().is_ok_and(|p| xy_ports.contains(&p))
}

fn first_line(s: &str) -> String {
    s.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_owned()
}

fn row(a: &str, b: &str, c: &str, d: &str) -> Vec<String> {
    vec![a.to_owned(), b.to_owned(), c.to_owned(), d.to_owned()]
}

/// The servers xy runs: name → URLs.
fn xy_servers(c: &mut Client) -> Result<BTreeMap<String, XyUrl>, Failure> {
    let list: Vec<ListEntry> = c.call::<(), _>(method::LIST, None, READ_TIMEOUT)?;
    Ok(xy_core::clients::xy_urls(&list))
}

/// The entry `clients apply --with-xy` adds for `xyctl mcp`.
const XY_ENTRY: &str = "xy";

/// The one entry `clients apply --one` writes: `xy-all` for `/mcp`,
/// `xy-<profile>` for a profile's endpoint.
fn one_entry(profile: Option<&str>) -> String {
    match profile {
        Some(p) => format!("xy-{p}"),
        None => "xy-all".to_owned(),
    }
}

/// The `xyctl` a client config runs ([`crate::service::stable_xyctl`]);
/// its warning goes to stderr.
fn xyctl_path(ctx: &Ctx) -> Result<String, Failure> {
    let (path, warning) = crate::service::stable_xyctl().map_err(|e| {
        Failure::new(
            Exit::Operational,
            format!("cannot find xyctl's own path: {e}"),
        )
    })?;
    if let Some(w) = warning {
        output::warn(&ctx.err, &w);
    }
    Ok(path.display().to_string())
}

pub(crate) fn run(ctx: &Ctx, a: &ClientsArgs) -> Result<Exit, Failure> {
    match &a.action {
        None => list(ctx, a.json),
        Some(ClientsCmd::Apply {
            client,
            dry_run,
            file,
            with_xy,
            one,
            profile,
        }) => {
            let one = one.then_some(profile.as_deref());
            apply(ctx, *client, *dry_run, file.as_ref(), *with_xy, one)
        }
        Some(ClientsCmd::Undo { client, file }) => {
            let path = path_of(*client, file.as_ref())?;
            let stamp = server_file::stamp(std::time::SystemTime::now());
            let done = file::undo(&path, &stamp)
                .map_err(|e| Failure::new(Exit::Operational, e.to_string()))?;
            if let Some(saved) = &done.saved {
                output::stdout(&format!(
                    "kept the file as it was (edited since the backup) in {}\n",
                    saved.display()
                ));
            }
            output::stdout(&format!(
                "restored {} from {}\n",
                path.display(),
                done.restored.display()
            ));
            Ok(Exit::Success)
        }
    }
}

fn apply(
    ctx: &Ctx,
    client: ClientId,
    dry_run: bool,
    file: Option<&PathBuf>,
    with_xy: bool,
    one: Option<Option<&str>>,
) -> Result<Exit, Failure> {
    let path = path_of(client, file)?;
    let (bytes, text, entries) = read(client, &path)?;
    let mut c = daemon_conn::connect(ctx)?;
    let xy = xy_servers(&mut c)?;
    let one = match one {
        Some(profile) => Some((profile, super::connect::aggregate_url(&mut c, profile)?)),
        None => None,
    };
    // Found once, so its warning shows once.
    let xyctl = if client.stdio_only() || with_xy {
        Some(xyctl_path(ctx)?)
    } else {
        None
    };
    let mut rewrites = Vec::new();
    let mut rows = Vec::new();
    for e in &entries {
        // With `--with-xy` the entry `xy` is xy itself, handled below.
        if with_xy && e.name == XY_ENTRY {
            continue;
        }
        let Some((server, url)) = xy_name_for(&e.name, &xy) else {
            continue;
        };
        // With `--one`, the one aggregate entry stands for every server.
        if one.is_some() {
            if e.name == one_entry(one.as_ref().and_then(|o| o.0)) {
                continue;
            }
            rows.push(vec![
                e.name.clone(),
                "(the aggregate entry)".to_owned(),
                if dry_run {
                    "would be removed"
                } else {
                    "removed"
                }
                .to_owned(),
            ]);
            rewrites.push(Rewrite {
                entry: e.name.clone(),
                to: Pointer::Remove,
            });
            continue;
        }
        let to = match xyctl.as_ref().filter(|_| client.stdio_only()) {
            Some(x) => Pointer::Connect {
                xyctl: x.clone(),
                server: server.clone(),
            },
            None => Pointer::Url(url.url.clone()),
        };
        let shown = match &to {
            Pointer::Url(u) => u.clone(),
            Pointer::Connect { xyctl, server } => format!("{xyctl} connect {server}"),
            Pointer::XyMcp { xyctl } => format!("{xyctl} mcp"),
            Pointer::ConnectOne { .. } | Pointer::Remove => String::new(),
        };
        if to.matches(&e.spec) {
            rows.push(vec![
                e.name.clone(),
                shown,
                "already points at xy".to_owned(),
            ]);
            continue;
        }
        rows.push(vec![
            e.name.clone(),
            shown,
            if dry_run {
                "would point at xy"
            } else {
                "points at xy"
            }
            .to_owned(),
        ]);
        rewrites.push(Rewrite {
            entry: e.name.clone(),
            to,
        });
    }
    if let Some((profile, url)) = &one {
        let name = one_entry(*profile);
        let to = match xyctl.as_ref().filter(|_| client.stdio_only()) {
            Some(x) => Pointer::ConnectOne {
                xyctl: x.clone(),
                profile: profile.map(str::to_owned),
            },
            None => Pointer::Url(url.clone()),
        };
        let shown = match &to {
            Pointer::ConnectOne { xyctl, profile } => match profile {
                Some(p) => format!("{xyctl} connect --one --profile {p}"),
                None => format!("{xyctl} connect --one"),
            },
            _ => url.clone(),
        };
        let existing = entries.iter().find(|e| e.name == name);
        let result = match existing {
            Some(e) if to.matches(&e.spec) => "already points at the aggregate",
            Some(_) if dry_run => "would point at the aggregate",
            Some(_) => "points at the aggregate",
            None if dry_run => "would be added",
            None => "added",
        };
        rows.push(vec![name.clone(), shown, result.to_owned()]);
        if !existing.is_some_and(|e| to.matches(&e.spec)) {
            rewrites.push(Rewrite { entry: name, to });
        }
    }
    if let Some(xyctl) = xyctl.filter(|_| with_xy) {
        let to = Pointer::XyMcp {
            xyctl: xyctl.clone(),
        };
        let shown = format!("{xyctl} mcp");
        let existing = entries.iter().find(|e| e.name == XY_ENTRY);
        let result = match existing {
            Some(e) if to.matches(&e.spec) => "already runs xyctl mcp",
            Some(_) if dry_run => "would run xyctl mcp",
            Some(_) => "runs xyctl mcp",
            None if dry_run => "would be added",
            None => "added",
        };
        rows.push(vec![XY_ENTRY.to_owned(), shown, result.to_owned()]);
        if !existing.is_some_and(|e| to.matches(&e.spec)) {
            rewrites.push(Rewrite {
                entry: XY_ENTRY.to_owned(),
                to,
            });
        }
    }
    if rewrites.is_empty() {
        output::stdout(&format!(
            "nothing to change in {}: no entry stands for a server xy runs that does not already point at xy\n",
            path.display()
        ));
        return Ok(Exit::Success);
    }
    let new = clients::apply(client, &text, &rewrites).map_err(|e| {
        Failure::new(
            Exit::Operational,
            format!("cannot edit {}: {e}", path.display()),
        )
    })?;
    if dry_run {
        output::stdout(&clients::diff(&path, &text, &new));
        return Ok(Exit::Success);
    }
    let stamp = server_file::stamp(std::time::SystemTime::now());
    let backup = file::replace(&path, &bytes, new.as_bytes(), &stamp)
        .map_err(|e| Failure::new(Exit::Operational, e.to_string()))?;
    output::stdout(&render::render_rows(
        &["ENTRY", "NOW", "RESULT"],
        &rows,
        &ctx.out,
    ));
    output::stdout(&format!(
        "\nwrote {}\nbackup {}\nrestart {} to pick the change up; undo with `xyctl clients undo {}`\n",
        path.display(),
        backup.display(),
        client.id(),
        client.id()
    ));
    Ok(Exit::Success)
}

/// The gateway's base URL, when it is on (`/mcp` entries point there).
fn gateway_base(c: &mut Client) -> Option<String> {
    let status: serde_json::Value = c
        .call::<(), _>(method::DAEMON_STATUS, None, READ_TIMEOUT)
        .ok()?;
    status
        .pointer("/gateway/url")
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned)
}

fn list(ctx: &Ctx, json: bool) -> Result<Exit, Failure> {
    let h = home()?;
    let mut c = daemon_conn::connect(ctx)?;
    let xy = xy_servers(&mut c)?;
    let gateway = gateway_base(&mut c);
    let found = xy_core::clients::find(&h, Os::current(), &xy, gateway.as_deref());
    if json {
        output::json_line(&serde_json::to_string(&found).unwrap_or_default());
        return Ok(Exit::Success);
    }
    if found.is_empty() {
        output::stdout(
            "no AI client config found on this machine (see docs/clients.md for the places looked at)\n",
        );
        return Ok(Exit::Success);
    }
    let mut rows = Vec::new();
    for f in &found {
        if let Some(e) = &f.error {
            rows.push(vec![
                f.client.to_owned(),
                "-".to_owned(),
                format!("unreadable: {e}"),
            ]);
        }
        if f.entries.is_empty() && f.error.is_none() {
            rows.push(vec![
                f.client.to_owned(),
                "-".to_owned(),
                "no servers".to_owned(),
            ]);
        }
        for e in &f.entries {
            let what = match (e.uses.as_str(), &e.xy_server) {
                ("xy", Some(s)) => format!("xy ({s})"),
                ("xy", None) => "xy itself (xyctl mcp)".to_owned(),
                ("process", Some(s)) => format!(
                    "own process; xy runs `{s}`: `xyctl clients apply {}`",
                    f.client
                ),
                ("process", None) => "own process".to_owned(),
                ("aggregate", _) => format!(
                    "xy's one endpoint ({})",
                    e.endpoint.as_deref().unwrap_or("/mcp")
                ),
                ("url", _) => "another URL".to_owned(),
                _ => "unrecognised entry".to_owned(),
            };
            rows.push(vec![f.client.to_owned(), e.name.clone(), what]);
        }
    }
    output::stdout(&render::render_rows(
        &["CLIENT", "ENTRY", "USES"],
        &rows,
        &ctx.out,
    ));
    let files: Vec<_> = found
        .iter()
        .map(|f| format!("  {}: {}", f.client, f.file))
        .collect();
    output::stdout(&format!("\nfiles:\n{}\n", files.join("\n")));
    Ok(Exit::Success)
}
