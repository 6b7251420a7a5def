//! The install plan a user approves before anything is installed (SPEC
//! §22): the exact package, its publish time, where it goes, how the
//! ecosystem installs it, and the command line the config will run; then
//! the one question (`--yes` skips it; without a terminal nothing is
//! installed). `add`, `upgrade` and `import` all ask through here.

use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;

use xy_core::package::Ecosystem;

use super::{Resolved, npm, pypi};
use crate::cli::InstallFlags;
use crate::ctx::Ctx;
use crate::error::{Exit, Failure};
use crate::output;

/// What the user is asked to approve.
pub(crate) struct Plan<'a> {
    /// The server the install is for.
    pub(crate) server: &'a str,
    /// The `server.json` it comes from (`--registry`).
    pub(crate) source: Option<&'a str>,
    /// The exact version.
    pub(crate) resolved: &'a Resolved,
    /// The version directory it is installed into.
    pub(crate) dir: &'a Path,
    /// Arguments before the entry point (`server.json`'s runtime arguments).
    pub(crate) runtime_args: &'a [String],
    /// Arguments after the entry point.
    pub(crate) extra: &'a [String],
    /// The port it is served on, for a new server.
    pub(crate) port: Option<u16>,
    /// `--yes`, `--allow-scripts`, …
    pub(crate) flags: &'a InstallFlags,
    /// The server's data directory (D220), for a new server.
    pub(crate) data: Option<&'a Path>,
    /// The resolved tree's packages with an install script (D221).
    pub(crate) scripts: &'a [npm::Script],
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
                format!(
                    "python3 -m venv; pip download → requirements.lock (sha256 of every wheel); \
                     pip install --require-hashes --no-index\n          \
                     a package.json a wheel ships, where its code runs npm: its npm dependencies \
                     now, not at its first call (npm install{}{} → package-lock.json, \
                     integrity for every dependency)",
                    if self.flags.allow_scripts {
                        ", install scripts allowed,"
                    } else {
                        " --ignore-scripts"
                    },
                    if self.flags.allow_fresh {
                        ""
                    } else {
                        " --before min-age"
                    }
                ),
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
        // D220: the package dir stays read-only; its data goes here.
        if !self.scripts.is_empty() {
            let names: Vec<String> = self
                .scripts
                .iter()
                .map(|sc| {
                    if sc.native {
                        format!("{} (native add-on)", sc.package)
                    } else {
                        sc.package.clone()
                    }
                })
                .collect();
            if self.flags.allow_scripts {
                s.push_str(&format!("scripts   run at install: {}\n", names.join(", ")));
            } else {
                s.push_str(&format!(
                    "scripts   not run (--ignore-scripts): {}\n",
                    names.join(", ")
                ));
                if self.scripts.iter().any(|sc| sc.native) {
                    s.push_str(
                        "          a native add-on does not load without its install script, \
                         and the server may fail at start: add --allow-scripts to this command \
                         to run them\n",
                    );
                }
            }
        }
        if let Some(data) = self.data {
            s.push_str(&format!(
                "data      {}/\n          its home; each path-like variable its own code reads \
                 (…_PATH, …_FILE, …_DIR) and --env does not set points here\n",
                data.display()
            ));
        }
        Ok(s)
    }
}

/// Shows the plan and asks on a terminal; `--yes` skips the question;
/// without either nothing is installed.
pub(crate) fn confirm(ctx: &Ctx, plan: &Plan<'_>) -> Result<(), Failure> {
    confirm_all(ctx, std::slice::from_ref(plan), plan.flags)
}

/// [`confirm`] for several installs: every plan shown, one question.
pub(crate) fn confirm_all(
    ctx: &Ctx,
    plans: &[Plan<'_>],
    flags: &InstallFlags,
) -> Result<(), Failure> {
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
