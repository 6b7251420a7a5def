//! A deliberately tiny flag parser (`--flag`, `--flag value`, `--flag=value`,
//! `--` ends flags) so the test binaries stay free of heavy dependencies.
//! Bad input prints the reason and a one-line usage to stderr and exits 2.

use std::str::FromStr;

use crate::out::{err, out};

/// Command-line arguments being consumed flag by flag.
#[derive(Debug)]
pub struct Args {
    rest: std::vec::IntoIter<String>,
    usage: &'static str,
    /// Value given inline as `--flag=value`, waiting for [`Args::value`].
    inline: Option<String>,
    /// Everything after `--`.
    trailing: Vec<String>,
}

impl Args {
    /// Arguments of this process, without the program name.
    pub fn from_env(usage: &'static str) -> Self {
        Self::new(std::env::args().skip(1).collect(), usage)
    }

    /// Arguments from a list (without the program name).
    pub fn new(args: Vec<String>, usage: &'static str) -> Self {
        Self {
            rest: args.into_iter(),
            usage,
            inline: None,
            trailing: Vec::new(),
        }
    }

    /// The next flag name (e.g. `--port`), or `None` at the end or after `--`.
    /// `-h`/`--help` prints the usage and exits 0; a positional argument is a
    /// usage error.
    pub fn next_flag(&mut self) -> Option<String> {
        if let Some(value) = self.inline.take() {
            self.fail(&format!("unexpected value {value:?}"));
        }
        let arg = self.rest.next()?;
        if arg == "--" {
            self.trailing = self.rest.by_ref().collect();
            return None;
        }
        if arg == "-h" || arg == "--help" {
            out(&format!("usage: {}", self.usage));
            std::process::exit(0);
        }
        if !arg.starts_with("--") {
            self.fail(&format!("unexpected argument {arg:?}"));
        }
        match arg.split_once('=') {
            Some((flag, value)) => {
                self.inline = Some(value.to_owned());
                Some(flag.to_owned())
            }
            None => Some(arg),
        }
    }

    /// The value of `flag`, parsed; a missing or unparsable value is a usage error.
    pub fn value<T: FromStr>(&mut self, flag: &str) -> T {
        let Some(raw) = self.inline.take().or_else(|| self.rest.next()) else {
            self.fail(&format!("{flag} needs a value"));
        };
        raw.parse()
            .unwrap_or_else(|_| self.fail(&format!("bad value {raw:?} for {flag}")))
    }

    /// Arguments given after `--` (available once `next_flag` returned `None`).
    pub fn trailing(&self) -> &[String] {
        &self.trailing
    }

    /// Prints `reason` and the usage line to stderr and exits 2.
    pub fn fail(&self, reason: &str) -> ! {
        err(&format!("error: {reason}"));
        err(&format!("usage: {}", self.usage));
        std::process::exit(2);
    }

    /// Usage error for a flag this program does not know.
    pub fn unknown(&self, flag: &str) -> ! {
        self.fail(&format!("unknown option {flag}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Args {
        Args::new(list.iter().map(|s| (*s).to_owned()).collect(), "t")
    }

    #[test]
    fn flags_values_inline_and_trailing() {
        let mut a = args(&["--port", "8", "--path=/x", "--hang", "--", "a", "--b"]);
        assert_eq!(a.next_flag().as_deref(), Some("--port"));
        assert_eq!(a.value::<u16>("--port"), 8);
        assert_eq!(a.next_flag().as_deref(), Some("--path"));
        assert_eq!(a.value::<String>("--path"), "/x");
        assert_eq!(a.next_flag().as_deref(), Some("--hang"));
        assert_eq!(a.next_flag(), None);
        assert_eq!(a.trailing(), ["a", "--b"]);
    }
}
