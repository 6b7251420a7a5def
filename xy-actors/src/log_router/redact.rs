//! Redaction of a child's resolved secrets in its captured output (SPEC
//! §16): every value of [`MIN_SECRET`] bytes or more becomes
//! `[redacted:NAME]` before a line reaches the file, the ring or a follower.
//! It works on whole lines, which the splitter has already joined across
//! reads, so a value written in two pieces is caught too.

use std::sync::Arc;

use aho_corasick::{AhoCorasick, MatchKind};
use xy_core::config::ServerConfig;

/// Shorter values are not redacted: they would match ordinary words.
pub(crate) const MIN_SECRET: usize = 6;

/// The secrets of one child, compiled into one automaton.
pub(crate) struct Redactor {
    ac: AhoCorasick,
    /// `[redacted:NAME]` per pattern.
    labels: Vec<String>,
}

/// The values are not shown.
impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor")
            .field("labels", &self.labels)
            .finish_non_exhaustive()
    }
}

impl Redactor {
    /// A redactor for `(name, value)` pairs; `None` when no value is long
    /// enough (the pump then does no work at all).
    pub(crate) fn new<'a>(
        secrets: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Option<Arc<Redactor>> {
        let mut values = Vec::new();
        let mut labels = Vec::new();
        for (name, value) in secrets {
            if value.len() >= MIN_SECRET {
                values.push(value.to_owned());
                labels.push(format!("[redacted:{name}]"));
            }
        }
        if values.is_empty() {
            return None;
        }
        // The longest match wins where one secret contains another.
        let ac = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(&values)
            .ok()?;
        Some(Arc::new(Redactor { ac, labels }))
    }

    /// The redactor for a child spawned with `config`, whose `env` holds
    /// the resolved secret values.
    pub(crate) fn for_spawn(config: &ServerConfig) -> Option<Arc<Redactor>> {
        Redactor::new(config.secrets.iter().filter_map(|s| {
            config
                .env
                .get(&s.name)
                .map(|v| (s.name.as_str(), v.as_str()))
        }))
    }

    /// True when a secret occurs anywhere in `bytes`.
    pub(crate) fn is_match(&self, bytes: &[u8]) -> bool {
        self.ac.is_match(bytes)
    }

    /// `line` with every secret replaced, or `None` when it holds none.
    pub(crate) fn redact_bytes(&self, line: &[u8]) -> Option<Vec<u8>> {
        if !self.ac.is_match(line) {
            return None;
        }
        Some(self.ac.replace_all_bytes(line, &self.labels))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn red(r: &Redactor, s: &str) -> String {
        String::from_utf8(r.redact_bytes(s.as_bytes()).unwrap_or_else(|| s.into())).unwrap()
    }

    #[test]
    fn short_values_are_left_alone() {
        assert!(Redactor::new([("A", "12345")]).is_none());
        assert!(Redactor::new([("A", "123456")]).is_some());
    }

    #[test]
    fn replaces_every_value() {
        let r = Redactor::new([("TOKEN", "s3cr3t-v4lue"), ("SHORT", "abc")]).unwrap();
        assert_eq!(
            red(&r, "token=s3cr3t-v4lue ok abc"),
            "token=[redacted:TOKEN] ok abc"
        );
        assert!(r.redact_bytes(b"clean").is_none());
    }

    #[test]
    fn longest_wins_and_debug_hides_values() {
        let r = Redactor::new([("A", "abcdef"), ("B", "abcdefgh")]).unwrap();
        assert_eq!(red(&r, "x abcdefgh abcdef"), "x [redacted:B] [redacted:A]");
        assert!(!format!("{r:?}").contains("abcdef"));
    }

    #[test]
    fn a_chunk_split_across_reads_is_redacted_whole() {
        use super::super::chunk::Chunk;
        let r = Redactor::new([("TOKEN", "s3cr3t-v4lue")]).unwrap();
        let data = b"first s3cr3t-v4lue\nsecond\n";
        let mut c = Chunk::default();
        let used = c.cut(data, false);
        c.redact(&data[..used], &r);
        let got: Vec<&[u8]> = c.lines(data).collect();
        assert_eq!(got, [&b"first [redacted:TOKEN]"[..], b"second"]);
        assert_eq!(c.text_len(), "first [redacted:TOKEN]".len() + 6);
    }
}
