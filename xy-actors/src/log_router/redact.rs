//! Redaction of a child's resolved secrets in its captured output (SPEC
//! §16): every value of [`MIN_SECRET`] bytes or more becomes
//! `[redacted:NAME]` before a line reaches the file, the ring or a follower.
//! It works on whole lines, which the splitter has already joined across
//! reads, so a value written in two pieces is caught too.

use std::sync::Arc;

use memchr::memmem::Finder;
use xy_core::config::ServerConfig;

/// Shorter values are not redacted: they would match ordinary words.
pub(crate) const MIN_SECRET: usize = 6;

/// The secrets of one child. A child has a handful, so one SIMD substring
/// search per value (`memchr::memmem`, already linked) replaces a
/// multi-pattern automaton and the code it kept resident in xyd (D50).
pub(crate) struct Redactor {
    /// One searcher per value.
    finders: Vec<Finder<'static>>,
    /// `[redacted:NAME]` per value.
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
        let mut finders = Vec::new();
        let mut labels = Vec::new();
        for (name, value) in secrets {
            if value.len() >= MIN_SECRET {
                finders.push(Finder::new(value.as_bytes()).into_owned());
                labels.push(format!("[redacted:{name}]"));
            }
        }
        if finders.is_empty() {
            return None;
        }
        Some(Arc::new(Redactor { finders, labels }))
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
        self.finders.iter().any(|f| f.find(bytes).is_some())
    }

    /// `line` with every secret replaced, or `None` when it holds none.
    /// Leftmost first; where two values match at the same place (one
    /// contains the other), the longer one wins.
    pub(crate) fn redact_bytes(&self, line: &[u8]) -> Option<Vec<u8>> {
        // Each value's next match at or after `at`.
        let mut next: Vec<Option<usize>> = self.finders.iter().map(|f| f.find(line)).collect();
        if next.iter().all(Option::is_none) {
            return None;
        }
        let mut out = Vec::with_capacity(line.len());
        let mut at = 0;
        loop {
            let best = next
                .iter()
                .enumerate()
                .filter_map(|(i, p)| p.map(|p| (p, i)))
                .min_by_key(|&(p, i)| (p, std::cmp::Reverse(self.finders[i].needle().len())));
            let Some((start, i)) = best else { break };
            out.extend_from_slice(&line[at..start]);
            out.extend_from_slice(self.labels[i].as_bytes());
            at = start + self.finders[i].needle().len();
            // Matches that began inside the replaced value are gone.
            for (j, p) in next.iter_mut().enumerate() {
                if p.is_some_and(|p| p < at) {
                    *p = self.finders[j].find(&line[at..]).map(|p| p + at);
                }
            }
        }
        out.extend_from_slice(&line[at..]);
        Some(out)
    }
}

/// A report's text is cut to this many characters: a server's error message
/// has no length limit, and xy keeps it in `status` and every event and
/// writes it to `daemon.log`.
pub(crate) const MAX_TEXT: usize = 300;

/// A child's or server's text as xy repeats it (a probe's report, a
/// handshake's error): `text` with the child's secrets replaced by `[redacted:NAME]`, then cut
/// to [`MAX_TEXT`] characters (after redaction, so a cut never leaves half a
/// value behind).
pub(crate) fn scrub(text: String, redactor: Option<&Redactor>) -> String {
    let text = match redactor.and_then(|r| r.redact_bytes(text.as_bytes())) {
        Some(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        None => text,
    };
    if text.chars().count() <= MAX_TEXT {
        return text;
    }
    let mut cut: String = text.chars().take(MAX_TEXT - 1).collect();
    cut.push('…');
    cut
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
    fn overlapping_and_repeated_values() {
        let r = Redactor::new([("A", "aaaaaa"), ("B", "bbbbbbb"), ("C", "aaabbbb")]).unwrap();
        // "aaaaaa" starts first and wins; "aaabbbb" began inside it.
        assert_eq!(red(&r, "aaaaaabbbb"), "[redacted:A]bbbb");
        assert_eq!(red(&r, "aaabbbbbbbbbbb!"), "[redacted:C][redacted:B]!");
        assert_eq!(
            red(&r, "aaaaaaaaaaaa bbbbbbb"),
            "[redacted:A][redacted:A] [redacted:B]"
        );
        assert!(r.is_match(b"..bbbbbbb.."));
        assert!(!r.is_match(b"aaaaa bbbbbb"));
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
