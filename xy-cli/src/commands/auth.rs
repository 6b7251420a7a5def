//! `xyctl auth login|status|logout` (SPEC §23). The daemon does the OAuth
//! work and holds the grant; this command only opens the browser at the URL
//! it returns (`open` on macOS, `xdg-open` elsewhere; `--no-browser` prints
//! it) and waits for the login to complete, in `auth_login_wait` calls of
//! bounded length so a daemon restart or Ctrl-C never leaves it hanging.

use std::time::Duration;

use xy_core::protocol::{
    AuthLoginParams, AuthLoginResult, AuthLoginWaitParams, AuthLoginWaitResult, AuthLogoutParams,
    AuthLogoutResult, AuthStatusParams, AuthStatusResult, method,
};

use crate::cli::AuthCmd;
use crate::ctx::{CONTROL_TIMEOUT, Ctx, READ_TIMEOUT};
use crate::error::{Exit, Failure};
use crate::{daemon_conn, output, render};

/// One `auth_login_wait` call waits this long on the daemon's side …
const WAIT_SLICE: Duration = Duration::from_secs(30);
/// … and the client this much longer for its answer.
const WAIT_SLACK: Duration = Duration::from_secs(10);

pub(crate) fn run(ctx: &Ctx, cmd: &AuthCmd) -> Result<Exit, Failure> {
    match cmd {
        AuthCmd::Login {
            name,
            no_browser,
            json,
        } => login(ctx, name, *no_browser, json.json),
        AuthCmd::Status { name, json } => status(ctx, name.as_deref(), json.json),
        AuthCmd::Logout { name, json } => logout(ctx, name, json.json),
    }
}

fn login(ctx: &Ctx, name: &str, no_browser: bool, json: bool) -> Result<Exit, Failure> {
    let mut client = daemon_conn::connect(ctx)?;
    let started: AuthLoginResult = client.call(
        method::AUTH_LOGIN,
        Some(&AuthLoginParams {
            name: name.to_owned(),
        }),
        CONTROL_TIMEOUT,
    )?;
    let opened = !no_browser && open_browser(&started.url);
    if opened {
        output::stderr(&format!(
            "Opened the browser to log in to {name}; waiting for it to come back to {} …\n\
             If no browser opened, visit:\n  {}\n",
            started.redirect_uri, started.url
        ));
    } else {
        // stdout, alone on its line: a script (or a test) follows it.
        output::stderr(&format!(
            "Open this URL in a browser to log in to {name}:\n"
        ));
        output::stdout(&format!("{}\n", started.url));
        output::stderr("Waiting for the login to complete (Ctrl-C stops waiting) …\n");
    }
    loop {
        let raw = client.call_raw(
            method::AUTH_LOGIN_WAIT,
            Some(&AuthLoginWaitParams {
                login_id: started.login_id.clone(),
                timeout_ms: Some(WAIT_SLICE.as_millis() as u64),
            }),
            WAIT_SLICE + WAIT_SLACK,
        )?;
        let waited: AuthLoginWaitResult = serde_json::from_str(raw.get()).map_err(|e| {
            Failure::new(
                Exit::Operational,
                format!("bad `auth_login_wait` result: {e}"),
            )
        })?;
        let Some(grant) = waited.grant.filter(|_| waited.done) else {
            continue;
        };
        if json {
            output::json_line(raw.get());
        } else {
            output::stdout(&render::render_login_done(name, &grant, &ctx.out));
        }
        return Ok(Exit::Success);
    }
}

/// Starts the platform's URL opener, detached; `false` when there is none.
fn open_browser(url: &str) -> bool {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .is_ok()
}

fn status(ctx: &Ctx, name: Option<&str>, json: bool) -> Result<Exit, Failure> {
    let mut client = daemon_conn::connect(ctx)?;
    let raw = client.call_raw(
        method::AUTH_STATUS,
        Some(&AuthStatusParams {
            name: name.map(str::to_owned),
        }),
        READ_TIMEOUT,
    )?;
    if json {
        output::json_line(raw.get());
        return Ok(Exit::Success);
    }
    let result: AuthStatusResult = serde_json::from_str(raw.get())
        .map_err(|e| Failure::new(Exit::Operational, format!("bad `auth_status` result: {e}")))?;
    output::stdout(&render::render_auth_status(&result, &ctx.out));
    Ok(Exit::Success)
}

fn logout(ctx: &Ctx, name: &str, json: bool) -> Result<Exit, Failure> {
    let mut client = daemon_conn::connect(ctx)?;
    let raw = client.call_raw(
        method::AUTH_LOGOUT,
        Some(&AuthLogoutParams {
            name: name.to_owned(),
        }),
        CONTROL_TIMEOUT,
    )?;
    if json {
        output::json_line(raw.get());
        return Ok(Exit::Success);
    }
    let r: AuthLogoutResult = serde_json::from_str(raw.get())
        .map_err(|e| Failure::new(Exit::Operational, format!("bad `auth_logout` result: {e}")))?;
    output::stdout(&if r.logged_out {
        format!("{}: logged out (grant deleted)\n", r.name)
    } else {
        format!("{}: not logged in\n", r.name)
    });
    Ok(Exit::Success)
}
