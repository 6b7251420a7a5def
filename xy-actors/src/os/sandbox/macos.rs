//! macOS enforcement (SPEC §21): the Seatbelt profile generated from the
//! rules (`xy_core::sandbox::seatbelt`), applied by running the command
//! under `/usr/bin/sandbox-exec -p <profile>`; the profile follows every
//! descendant and cannot be lifted from inside.

use std::path::Path;

use xy_core::sandbox::{Rules, seatbelt};

/// The profile of one spawn.
pub(crate) struct Enforcer {
    profile: String,
}

impl Enforcer {
    /// The profile for `rules` and the enforcement phrase `status` shows;
    /// a path the profile language cannot hold fails the spawn (leaving it
    /// out would silently narrow, never widen, but the child would break
    /// in ways the user cannot see).
    pub(crate) fn build(
        rules: &Rules,
        proxy_port: Option<u16>,
    ) -> Result<(Enforcer, Vec<String>), String> {
        if let Some((path, why)) = seatbelt::unquotable_paths(rules).into_iter().next() {
            return Err(format!(
                "sandbox path {} cannot be written in a Seatbelt profile: {why}",
                path.display()
            ));
        }
        let profile = seatbelt::profile(rules, proxy_port);
        Ok((
            Enforcer { profile },
            vec!["seatbelt (sandbox-exec)".to_owned()],
        ))
    }

    /// `sandbox-exec -p <profile> -- <program>`; the caller adds the args.
    pub(crate) fn command(&self, program: &Path) -> tokio::process::Command {
        let argv = seatbelt::sandbox_exec_argv(&self.profile, program, std::iter::empty::<&str>());
        let mut cmd = tokio::process::Command::new(&argv[0]);
        cmd.args(&argv[1..]);
        cmd
    }

    /// Nothing to add: `sandbox-exec` applies the profile before exec.
    pub(crate) fn apply(&mut self, cmd: &mut tokio::process::Command) {
        let _ = cmd;
    }
}
