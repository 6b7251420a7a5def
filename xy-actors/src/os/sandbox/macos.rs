//! macOS enforcement (SPEC §21): the Seatbelt profile generated from the
//! rules (`xy_core::sandbox::seatbelt`), applied by running the command
//! under `/usr/bin/sandbox-exec -p <profile>`; the profile follows every
//! descendant and cannot be lifted from inside.

use std::path::Path;

use xy_core::sandbox::Rules;

/// The profile of one spawn.
pub(crate) struct Enforcer {
    profile: String,
}

impl Enforcer {
    /// The profile for `rules` and the enforcement phrase `status` shows.
    pub(crate) fn build(rules: &Rules, proxy_port: Option<u16>) -> (Enforcer, Vec<String>) {
        let profile = xy_core::sandbox::seatbelt::profile(rules, proxy_port);
        (
            Enforcer { profile },
            vec!["seatbelt (sandbox-exec)".to_owned()],
        )
    }

    /// `sandbox-exec -p <profile> <program>`; the caller adds the args.
    pub(crate) fn command(&self, program: &Path) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new("/usr/bin/sandbox-exec");
        cmd.arg("-p").arg(&self.profile).arg(program);
        cmd
    }

    /// Nothing to add: `sandbox-exec` applies the profile before exec.
    pub(crate) fn apply(&mut self, cmd: &mut tokio::process::Command) {
        let _ = cmd;
    }
}
