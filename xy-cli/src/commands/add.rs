//! `xyctl add` and `xyctl remove` (SPEC §14): write or retire a server's
//! config file in the daemon's config directory, then reload so xyd picks
//! the change up, and print what the server is doing now. A pinned install
//! (`--npm`, `--pypi`, `--registry`) is done through [`crate::packages`]
//! before anything is written.

use xy_core::client::Client;
use xy_core::protocol::{ListEntry, ReloadResult, StatusResult, StopResult, TargetParams, method};

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::outcome;
use crate::cli::AddArgs;
use crate::ctx::{CONTROL_TIMEOUT, Ctx, READ_TIMEOUT};
use crate::daemon_conn::daemon_and_dir;
use crate::error::{Exit, Failure};
use crate::output;
use crate::server_file::{self, ServerSpec};

pub(crate) fn run(ctx: &Ctx, a: &AddArgs) -> Result<Exit, Failure> {
    if !xy_core::config::is_valid_name(&a.name) {
        return Err(Failure::new(
            Exit::Operational,
            format!(
                "`{}` is not a server name: use letters, digits, `_`, `.` and `-` \
                 (try `{}`)",
                a.name,
                server_file::usable_name(&a.name)
            ),
        ));
    }
    let (client, dir) = daemon_and_dir(ctx)?;
    let port = match a.port {
        Some(p) => p,
        None => {
            let mut used = server_file::used_ports(&dir);
            // Replacing a server keeps its port free for itself.
            if a.force
                && let Ok(text) = std::fs::read_to_string(dir.join(format!("{}.kdl", a.name)))
                && let Ok(old) = xy_core::config::parse_server(&a.name, &dir, &text)
            {
                used.remove(&old.port);
            }
            server_file::choose_port(&used, server_file::port_is_free).ok_or_else(|| {
                Failure::new(Exit::Operational, "no free port from 8400 up".to_owned())
            })?
        }
    };
    if let Some(url) = &a.url {
        return add_remote(ctx, a, url, client, &dir, port);
    }
    // SPEC §22: resolve, confirm and install first; nothing is written
    // unless the install completed.
    let pinned = crate::packages::for_add(ctx, a, &dir, port)?;
    let (command, args) = match &pinned {
        Some(p) => (&p.command, &p.args[..]),
        None => a
            .command
            .split_first()
            .expect("clap requires a command without --npm/--pypi"),
    };
    // SPEC §25: relative paths mean the directory `xyctl` ran in.
    let here = if pinned.is_none() {
        std::env::current_dir().ok()
    } else {
        None
    };
    let spec = ServerSpec {
        command: here
            .as_deref()
            .map_or_else(|| command.clone(), |d| resolve_command(command, d)),
        args: args
            .iter()
            .map(|s| s.replace("{port}", &port.to_string()))
            .collect(),
        port,
        stdio: a.stdio || pinned.is_some(),
        // A pinned install's variables (`--registry`), then `--env` (wins).
        env: pinned
            .iter()
            .flat_map(|p| p.env.clone())
            .chain(a.env.iter().cloned())
            .collect(),
        working_dir: match &a.working_dir {
            Some(d) => Some(
                std::path::absolute(d)
                    .unwrap_or_else(|_| d.clone())
                    .display()
                    .to_string(),
            ),
            None => here
                .as_deref()
                .and_then(|d| default_working_dir(d, std::env::var_os("HOME").as_deref()))
                .map(|d| d.display().to_string()),
        },
        health: a.health.clone(),
    };
    let mut text = server_file::render(
        &spec,
        "Written by `xyctl add`; edit freely, then `xyctl reload`.",
    );
    if let Some(p) = &pinned {
        p.annotate(&mut text);
    }
    let mut create = Vec::new();
    if !a.no_sandbox
        && let Some((block, dirs)) = crate::starter::block_for(&spec, "xyctl add")
    {
        text.push_str(&block);
        create = dirs;
    }
    if a.no_start {
        server_file::no_autostart(&mut text);
    }
    server_file::write(&dir, &a.name, &text, a.force).map_err(|e| e.failure(ctx.err.color))?;
    let file = dir.join(format!("{}.kdl", a.name));
    output::note(&ctx.err, &format!("wrote {}", file.display()));
    for warning in crate::starter::create_dirs(&create) {
        output::note(&ctx.err, &warning);
    }
    match client {
        // The reload makes the daemon know it either way; `autostart #false`
        // leaves it `stopped`.
        Some(mut c) => {
            let _: ReloadResult = c.call::<(), _>(method::RELOAD, None, CONTROL_TIMEOUT)?;
            return report(&mut c, ctx, &a.name, port, a.wait.duration());
        }
        None if a.no_start => output::stdout(&format!(
            "{}  not started  {}  (`xyctl start {}` starts it)\n",
            a.name,
            fallback_url(port),
            a.name
        )),
        None => output::stdout(&format!(
            "{}  not started  {}  (starts at the next `xyctl reload`)\n",
            a.name,
            fallback_url(port)
        )),
    }
    Ok(Exit::Success)
}

/// A command written as a relative path (`.venv/bin/python`,
/// `./server`) made absolute against `here`, the directory `xyctl` ran in;
/// a bare name (`node`) is left for `PATH`.
fn resolve_command(command: &str, here: &Path) -> String {
    let p = Path::new(command);
    if p.is_absolute() || !command.contains('/') {
        return command.to_owned();
    }
    here.join(p)
        .components()
        .filter(|c| *c != std::path::Component::CurDir)
        .collect::<PathBuf>()
        .display()
        .to_string()
}

/// The `working-dir` a command server gets when `add` names none: the
/// directory `xyctl` ran in, so `server.py` means the one there — unless
/// that is the home directory (or `/`), which a server should not run in
/// (the starter sandbox would make it writable).
fn default_working_dir(here: &Path, home: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    if here == Path::new("/") || home.is_some_and(|h| Path::new(h) == here) {
        return None;
    }
    Some(here.to_path_buf())
}

/// `add --url` (SPEC §23): a remote server's file, its secret
/// placeholders named, then the reload and state line as for any server.
fn add_remote(
    ctx: &Ctx,
    a: &AddArgs,
    url: &str,
    client: Option<Client>,
    dir: &std::path::Path,
    port: u16,
) -> Result<Exit, Failure> {
    if !a.command.is_empty() {
        return Err(Failure::new(
            Exit::Operational,
            "`--url` adds a remote server: give no command after `--`".to_owned(),
        ));
    }
    let secrets_dir = server_file::secrets_dir(dir, &a.name);
    let mut headers: Vec<(String, server_file::HeaderSource)> = a
        .header
        .iter()
        .map(|(k, v)| (k.clone(), server_file::HeaderSource::Literal(v.clone())))
        .collect();
    let mut secrets = Vec::new();
    for (header, secret) in &a.header_secret {
        headers.push((
            header.clone(),
            server_file::HeaderSource::Secret(secret.clone()),
        ));
        if !secrets.iter().any(|(n, _)| n == secret) {
            secrets.push((secret.clone(), secrets_dir.join(secret)));
        }
    }
    let spec = server_file::RemoteSpec {
        url: url.to_owned(),
        port,
        headers,
        secrets,
    };
    let mut text = server_file::render_remote(
        &spec,
        "Written by `xyctl add`; edit freely, then `xyctl reload`.",
    );
    if a.no_start {
        server_file::no_autostart(&mut text);
    }
    server_file::write(dir, &a.name, &text, a.force).map_err(|e| e.failure(ctx.err.color))?;
    let file = dir.join(format!("{}.kdl", a.name));
    output::note(&ctx.err, &format!("wrote {}", file.display()));
    for (name, path) in &spec.secrets {
        if !path.exists() {
            output::warn(
                &ctx.err,
                &format!(
                    "fill in the secret {name}: write the header's whole value (e.g. `Bearer …`) \
                     into {} (mode 0600), or give it another source in {}.kdl; then \
                     `xyctl restart {}`",
                    path.display(),
                    a.name,
                    a.name
                ),
            );
        }
    }
    if let Some(mut c) = client {
        let _: ReloadResult = c.call::<(), _>(method::RELOAD, None, CONTROL_TIMEOUT)?;
        return report(&mut c, ctx, &a.name, port, a.wait.duration());
    } else {
        output::stdout(&format!(
            "{}  not started  {}  (starts at the next `xyctl reload`)\n",
            a.name,
            fallback_url(port)
        ));
    }
    Ok(Exit::Success)
}

/// After the reload (SPEC §25): `name  running, 3 tools (0 held back)
/// http://127.0.0.1:8400/mcp` once the server listed its tools, or the
/// failure with its cause (exit 1); with `--wait 0`, the state at once.
fn report(
    c: &mut Client,
    ctx: &Ctx,
    name: &str,
    port: u16,
    wait: Duration,
) -> Result<Exit, Failure> {
    if wait.is_zero() {
        output::stdout(&state_line(c, name, port)?);
        return Ok(Exit::Success);
    }
    let found = outcome::wait(c, &[name.to_owned()], wait)?;
    let (_, o, st) = found.into_iter().next().expect("one name, one outcome");
    let url = st
        .as_ref()
        .map_or_else(|| fallback_url(port), |s| server_url(&s.entry));
    let words = ctx.out.paint(&o.words(name, wait), o.paint());
    if o.failed() {
        output::stdout(&format!("{name}  {words}\n"));
        Ok(Exit::Operational)
    } else {
        output::stdout(&format!("{name}  {words}  {url}\n"));
        Ok(Exit::Success)
    }
}

/// `name  running  http://127.0.0.1:8400/mcp` from `status`.
fn state_line(c: &mut Client, name: &str, port: u16) -> Result<String, Failure> {
    let raw = c.call_raw(
        method::STATUS,
        Some(&xy_core::protocol::NameParams {
            name: name.to_owned(),
        }),
        READ_TIMEOUT,
    )?;
    Ok(match serde_json::from_str::<StatusResult>(raw.get()) {
        Ok(st) => format!("{name}  {}  {}\n", st.entry.state, server_url(&st.entry)),
        Err(_) => format!("{name}  unknown  {}\n", fallback_url(port)),
    })
}

/// The server's xy URL from a `list`/`status` entry: its `url` field, else
/// (a daemon from before §13, which sends none) `http://127.0.0.1:<port>/mcp`.
pub(crate) fn server_url(entry: &ListEntry) -> String {
    xy_core::clients::own_url(entry)
}

fn fallback_url(port: u16) -> String {
    xy_core::clients::port_url(port)
}

/// `remove <name>`.
pub(crate) fn remove(ctx: &Ctx, name: &str) -> Result<Exit, Failure> {
    let (client, dir) = daemon_and_dir(ctx)?;
    if !dir.join(format!("{name}.kdl")).exists() {
        return Err(Failure::new(
            Exit::Operational,
            format!("no server `{name}` in {}", dir.display()),
        ));
    }
    let mut client = client;
    if let Some(c) = client.as_mut() {
        // Stop first, so the port is free before the file is gone; a server
        // the daemon never loaded (an invalid file) is fine.
        match c.call::<_, StopResult>(
            method::STOP,
            Some(&TargetParams::one(name.to_owned())),
            CONTROL_TIMEOUT,
        ) {
            Ok(_) => {}
            Err(xy_core::client::ClientError::Rpc(e))
                if e.kind() == Some(xy_core::protocol::ErrorCode::ServerNotFound) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let stamp = server_file::stamp(std::time::SystemTime::now());
    let moved = server_file::retire(&dir, name, &stamp)
        .map_err(|e| Failure::new(Exit::Operational, e.to_string()))?
        .expect("checked above");
    if let Some(c) = client.as_mut() {
        let _: ReloadResult = c.call::<(), _>(method::RELOAD, None, CONTROL_TIMEOUT)?;
    }
    output::stdout(&format!(
        "removed {name}; its config is kept at {}\n(move it back and run `xyctl reload` to restore it)\n",
        moved.display()
    ));
    Ok(Exit::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_mean_the_directory_xyctl_ran_in() {
        let here = Path::new("/home/me/proj");
        assert_eq!(
            resolve_command(".venv/bin/python", here),
            "/home/me/proj/.venv/bin/python"
        );
        assert_eq!(resolve_command("./server", here), "/home/me/proj/server");
        assert_eq!(resolve_command("node", here), "node");
        assert_eq!(resolve_command("/usr/bin/node", here), "/usr/bin/node");
        let home = Some(std::ffi::OsStr::new("/home/me"));
        assert_eq!(default_working_dir(here, home), Some(here.to_path_buf()));
        assert_eq!(default_working_dir(Path::new("/home/me"), home), None);
        assert_eq!(default_working_dir(Path::new("/"), None), None);
    }
}
