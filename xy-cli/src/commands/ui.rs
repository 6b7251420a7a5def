//! `xyctl ui [--print-url]` (SPEC §28): asks xyd for a one-time code
//! (`console_code`) and opens `http://127.0.0.1:<port>/#code=<code>` in the
//! browser, or prints it. The code rides in the fragment, which browsers
//! never send to a server; it works once, within 60 s.

use xy_core::protocol::{ConsoleCodeResult, method};

use crate::ctx::{CONTROL_TIMEOUT, Ctx};
use crate::error::{Exit, Failure};
use crate::{daemon_conn, output};

pub(crate) fn run(ctx: &Ctx, print_url: bool) -> Result<Exit, Failure> {
    let mut client = daemon_conn::connect(ctx)?;
    let raw = client.call_raw::<()>(method::CONSOLE_CODE, None, CONTROL_TIMEOUT)?;
    let r: ConsoleCodeResult = serde_json::from_str(raw.get())
        .map_err(|e| Failure::new(Exit::Operational, format!("bad `console_code` result: {e}")))?;
    let url = r.login_url();
    if print_url {
        output::stdout(&format!("{url}\n"));
        return Ok(Exit::Success);
    }
    match open(&url) {
        Ok(()) => {
            output::stdout(&format!(
                "opened the console ({}); the link works once, within {} s\n",
                r.url, r.expires_in_secs
            ));
            Ok(Exit::Success)
        }
        Err(why) => {
            output::stderr(&format!(
                "xyctl: cannot open a browser ({why}); open this link (it works once, within {} s):\n",
                r.expires_in_secs
            ));
            output::stdout(&format!("{url}\n"));
            Ok(Exit::Success)
        }
    }
}

/// Hands `url` to the desktop's opener (`open` on macOS, `xdg-open`
/// elsewhere) and waits for it, which returns once the browser has it.
fn open(url: &str) -> Result<(), String> {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let status = std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map_err(|e| format!("{opener}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{opener} exited with {status}"))
    }
}
