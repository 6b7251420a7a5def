//! The text side of tool search: how names, descriptions and queries become
//! terms. One function serves documents and queries alike, so a word is
//! spelled the same on both sides.

use rust_stemmers::{Algorithm, Stemmer};

/// English words too common to tell tools apart. A general list (the usual
/// function words), not one drawn from any tool corpus.
const STOPWORDS: &[&str] = &[
    "a", "about", "all", "also", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by",
    "can", "could", "do", "does", "each", "for", "from", "had", "has", "have", "he", "her", "here",
    "him", "his", "how", "i", "if", "in", "into", "is", "it", "its", "just", "me", "my", "no",
    "not", "of", "on", "or", "our", "please", "she", "should", "so", "some", "such", "than",
    "that", "the", "their", "them", "then", "there", "these", "they", "this", "those", "to", "us",
    "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will",
    "with", "would", "you", "your",
];

/// The longest run of letters and digits taken as a word, in bytes.
const MAX_WORD: usize = 64;

/// Turns text into terms: words split at non-alphanumerics and at case
/// changes (`readFile`, `HTTPServer`), lowercased, stop words dropped, each
/// stemmed (Snowball English), so `files`, `file_path` and `listFiles`
/// share `file`.
pub(crate) struct Analyzer {
    stemmer: Stemmer,
}

impl Default for Analyzer {
    fn default() -> Self {
        Self {
            stemmer: Stemmer::create(Algorithm::English),
        }
    }
}

impl Analyzer {
    /// Appends the terms of `text` to `out`.
    pub(crate) fn terms_into(&self, text: &str, out: &mut Vec<String>) {
        for word in text.split(|c: char| !c.is_alphanumeric()) {
            // No word is this long: a pasted blob (base64, a hash) would
            // only cost time and match nothing.
            if word.len() > MAX_WORD {
                continue;
            }
            for part in split_case(word) {
                let lower = part.to_lowercase();
                if lower.is_empty() || STOPWORDS.contains(&lower.as_str()) {
                    continue;
                }
                out.push(self.stemmer.stem(&lower).into_owned());
            }
        }
    }

    /// The terms of `text`, in order, repeats kept.
    pub(crate) fn terms(&self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        self.terms_into(text, &mut out);
        out
    }
}

/// Splits one alphanumeric word at case and digit changes: `readFile` →
/// `read`, `File`; `HTTPServer` → `HTTP`, `Server`; `v2api` → `v`, `2`, `api`.
fn split_case(word: &str) -> Vec<&str> {
    let chars: Vec<(usize, char)> = word.char_indices().collect();
    let mut parts = Vec::new();
    let mut start = 0;
    for i in 1..chars.len() {
        let (at, c) = chars[i];
        let prev = chars[i - 1].1;
        let next_lower = chars.get(i + 1).is_some_and(|&(_, n)| n.is_lowercase());
        let boundary = (prev.is_lowercase() && c.is_uppercase())
            || (prev.is_uppercase() && c.is_uppercase() && next_lower)
            || (prev.is_numeric() != c.is_numeric());
        if boundary {
            parts.push(&word[start..at]);
            start = at;
        }
    }
    if start < word.len() {
        parts.push(&word[start..]);
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_case_snake_and_kebab() {
        let a = Analyzer::default();
        assert_eq!(a.terms("readFile"), ["read", "file"]);
        assert_eq!(a.terms("list_files"), ["list", "file"]);
        assert_eq!(
            a.terms("get-weather-forecast"),
            ["get", "weather", "forecast"]
        );
        assert_eq!(a.terms("HTTPServer"), ["http", "server"]);
        assert_eq!(a.terms("the Files of a repo"), ["file", "repo"]);
        assert_eq!(a.terms("v2api"), ["v", "2", "api"]);
    }
}
