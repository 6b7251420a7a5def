//! The two Hugging Face `tokenizer.json` kinds static-embedding models ship
//! with, read and run by hand: WordPiece (BERT vocabularies, model2vec's
//! potion models) and SentencePiece-style BPE with byte fallback (Llama
//! vocabularies, WordLlama). Only what turning text into vocabulary ids
//! needs; no special tokens, no offsets.

use std::borrow::Cow;
use std::collections::HashMap;

/// A vocabulary as one sorted string and offsets, looked up by binary
/// search: a `HashMap<String, u32>` of a 32,000-token vocabulary keeps
/// several MiB resident (a heap string per token, a half-empty table),
/// which is most of an int8 model's memory budget.
#[derive(Debug, Clone)]
pub(crate) struct Vocab {
    /// Every token, sorted, end to end.
    text: Box<str>,
    /// `starts[i]..starts[i + 1]` is token `i` (in sorted order) in `text`.
    starts: Box<[u32]>,
    /// The id of each sorted token.
    ids: Box<[u32]>,
}

impl Vocab {
    fn new<'a>(tokens: impl IntoIterator<Item = (Cow<'a, str>, u32)>) -> Self {
        let mut tokens: Vec<(Cow<'a, str>, u32)> = tokens.into_iter().collect();
        tokens.sort_unstable();
        let mut text = String::with_capacity(tokens.iter().map(|(t, _)| t.len()).sum());
        let mut starts = Vec::with_capacity(tokens.len() + 1);
        let mut ids = Vec::with_capacity(tokens.len());
        for (token, id) in &tokens {
            starts.push(text.len() as u32);
            text.push_str(token);
            ids.push(*id);
        }
        starts.push(text.len() as u32);
        Self {
            text: text.into_boxed_str(),
            starts: starts.into_boxed_slice(),
            ids: ids.into_boxed_slice(),
        }
    }

    fn token(&self, i: usize) -> &str {
        &self.text[self.starts[i] as usize..self.starts[i + 1] as usize]
    }

    pub(crate) fn get(&self, token: &str) -> Option<u32> {
        let (mut lo, mut hi) = (0, self.ids.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.token(mid).cmp(token) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(self.ids[mid]),
            }
        }
        None
    }

    fn max_id(&self) -> Option<u32> {
        self.ids.iter().max().copied()
    }
}

/// BPE merges as a sorted list of `(left << 32 | right)` keys with their
/// `(rank, merged)`: a quarter of a hash table's memory.
#[derive(Debug, Clone)]
pub(crate) struct Merges {
    keys: Box<[u64]>,
    values: Box<[(u32, u32)]>,
}

impl Merges {
    fn get(&self, left: u32, right: u32) -> Option<(u32, u32)> {
        let key = (u64::from(left) << 32) | u64::from(right);
        self.keys.binary_search(&key).ok().map(|i| self.values[i])
    }
}

/// A tokenizer read from `tokenizer.json`.
#[derive(Debug, Clone)]
pub(crate) enum Tokenizer {
    /// Greedy longest-match WordPiece after BERT's pre-tokenizer.
    WordPiece {
        vocab: Vocab,
        unk: Option<u32>,
        prefix: String,
        lowercase: bool,
    },
    /// SentencePiece BPE: spaces become `▁`, pieces merge by rank within a
    /// word, characters outside the vocabulary fall back to `<0xNN>` bytes.
    Bpe {
        vocab: Vocab,
        /// `(left, right)` → `(rank, merged)`, all vocabulary ids.
        merges: Merges,
        unk: Option<u32>,
    },
}

/// The parts of `tokenizer.json` read; parsed straight into these types
/// (a `serde_json::Value` of a Llama vocabulary and its merges left tens of
/// MiB in the heap).
/// Strings borrow from the file's bytes where they can (no escapes), so
/// reading a vocabulary allocates little besides what is kept.
#[derive(serde::Deserialize)]
struct File<'a> {
    #[serde(borrow)]
    model: Model<'a>,
    normalizer: Option<Normalizer>,
}

#[derive(serde::Deserialize)]
struct Model<'a> {
    #[serde(rename = "type")]
    kind: String,
    #[serde(borrow)]
    vocab: HashMap<Cow<'a, str>, u32>,
    unk_token: Option<String>,
    continuing_subword_prefix: Option<String>,
    #[serde(default, borrow)]
    merges: Vec<Merge<'a>>,
}

#[derive(serde::Deserialize)]
struct Normalizer {
    lowercase: Option<bool>,
}

/// A merge is `"a b"` or `["a", "b"]`, by the file's format version.
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum Merge<'a> {
    Joined(#[serde(borrow)] Cow<'a, str>),
    Pair(#[serde(borrow)] Cow<'a, str>, #[serde(borrow)] Cow<'a, str>),
}

impl Tokenizer {
    /// Reads a `tokenizer.json`.
    pub(crate) fn parse(bytes: &[u8]) -> Result<Self, String> {
        let file: File =
            serde_json::from_slice(bytes).map_err(|e| format!("not a tokenizer: {e}"))?;
        let Model {
            kind,
            vocab,
            unk_token,
            continuing_subword_prefix,
            merges,
        } = file.model;
        let unk = unk_token.and_then(|u| vocab.get(u.as_str()).copied());
        match kind.as_str() {
            "WordPiece" => Ok(Self::WordPiece {
                unk,
                prefix: continuing_subword_prefix.unwrap_or_else(|| "##".to_owned()),
                lowercase: file.normalizer.and_then(|n| n.lowercase).unwrap_or(true),
                vocab: Vocab::new(vocab),
            }),
            "BPE" => {
                let mut ranks: Vec<(u64, (u32, u32))> = Vec::with_capacity(merges.len());
                for (rank, m) in merges.into_iter().enumerate() {
                    let (a, b) = match &m {
                        Merge::Pair(a, b) => (a.as_ref(), b.as_ref()),
                        Merge::Joined(s) => match s.split_once(' ') {
                            Some(pair) => pair,
                            None => return Err(format!("merge {rank} is not a pair")),
                        },
                    };
                    // A merge whose parts or result are not in the
                    // vocabulary can never apply.
                    let id = |s: &str| vocab.get(s).copied();
                    if let (Some(l), Some(r), Some(m)) = (id(a), id(b), id(&format!("{a}{b}"))) {
                        ranks.push(((u64::from(l) << 32) | u64::from(r), (rank as u32, m)));
                    }
                }
                // The first (best-ranked) merge of a pair wins.
                ranks.sort_by_key(|&(key, (rank, _))| (key, rank));
                ranks.dedup_by_key(|&mut (key, _)| key);
                let (keys, values): (Vec<u64>, Vec<(u32, u32)>) = ranks.into_iter().unzip();
                Ok(Self::Bpe {
                    vocab: Vocab::new(vocab),
                    merges: Merges {
                        keys: keys.into_boxed_slice(),
                        values: values.into_boxed_slice(),
                    },
                    unk,
                })
            }
            other => Err(format!(
                "tokenizer model {other:?} is not supported (WordPiece, BPE)"
            )),
        }
    }

    /// The largest id the tokenizer can produce.
    pub(crate) fn max_id(&self) -> Option<u32> {
        match self {
            Self::WordPiece { vocab, .. } | Self::Bpe { vocab, .. } => vocab.max_id(),
        }
    }

    /// The ids of `text`'s tokens; the unknown token is left out (as
    /// model2vec does), so an unknown word adds nothing to a mean.
    pub(crate) fn ids(&self, text: &str) -> Vec<u32> {
        let mut out = Vec::new();
        match self {
            Self::WordPiece {
                vocab,
                unk,
                prefix,
                lowercase,
            } => {
                for word in bert_words(text, *lowercase) {
                    wordpiece(vocab, prefix, &word, &mut out);
                }
                out.retain(|id| Some(*id) != *unk);
            }
            Self::Bpe { vocab, merges, unk } => {
                let normalised = format!("▁{}", text.replace(' ', "▁"));
                for word in split_keep_marker(&normalised) {
                    bpe(vocab, merges, word, &mut out);
                }
                out.retain(|id| Some(*id) != *unk);
            }
        }
        out
    }
}

/// BERT's pre-tokenizer: split at whitespace; each punctuation mark is a
/// word of its own.
fn bert_words(text: &str, lowercase: bool) -> Vec<String> {
    let text = if lowercase {
        text.to_lowercase()
    } else {
        text.to_owned()
    };
    let mut words = Vec::new();
    let mut cur = String::new();
    for c in text.chars() {
        if c.is_whitespace() || c.is_control() {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
        } else if c.is_ascii_punctuation() || (!c.is_alphanumeric() && !c.is_ascii()) {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            words.push(c.to_string());
        } else {
            cur.push(c);
        }
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

/// Greedy longest-match WordPiece of one word; a word with a piece not in
/// the vocabulary adds nothing.
fn wordpiece(vocab: &Vocab, prefix: &str, word: &str, out: &mut Vec<u32>) {
    let bounds: Vec<usize> = word
        .char_indices()
        .map(|(i, _)| i)
        .chain([word.len()])
        .collect();
    let mut start = 0;
    let mut pieces = Vec::new();
    while start + 1 < bounds.len() {
        let mut end = bounds.len() - 1;
        let mut found = None;
        while end > start {
            let piece = &word[bounds[start]..bounds[end]];
            let id = if start > 0 {
                vocab.get(&format!("{prefix}{piece}"))
            } else {
                vocab.get(piece)
            };
            if let Some(id) = id {
                found = Some(id);
                break;
            }
            end -= 1;
        }
        match found {
            Some(id) => pieces.push(id),
            None => return,
        }
        start = end;
    }
    out.extend(pieces);
}

/// Splits before every `▁`, so each word keeps its leading marker.
fn split_keep_marker(text: &str) -> Vec<&str> {
    let mut words = Vec::new();
    let mut start = 0;
    for (i, _) in text.match_indices('▁') {
        if i > start {
            words.push(&text[start..i]);
            start = i;
        }
    }
    if start < text.len() {
        words.push(&text[start..]);
    }
    words
}

/// BPE of one word: start from its characters' ids (the UTF-8 bytes'
/// `<0xNN>` ids for a character outside the vocabulary, which never
/// merge), then merge the best-ranked adjacent pair until none merges.
fn bpe(vocab: &Vocab, merges: &Merges, word: &str, out: &mut Vec<u32>) {
    // Skip pathological words (a pasted blob) rather than spend quadratic time.
    if word.len() > 256 {
        return;
    }
    let mut ids: Vec<u32> = Vec::with_capacity(word.len());
    let mut buf = [0u8; 4];
    for c in word.chars() {
        match vocab.get(c.encode_utf8(&mut buf) as &str) {
            Some(id) => ids.push(id),
            None => ids.extend(
                c.encode_utf8(&mut buf)
                    .bytes()
                    .filter_map(|b| vocab.get(&format!("<0x{b:02X}>"))),
            ),
        }
    }
    loop {
        let best = ids
            .windows(2)
            .enumerate()
            .filter_map(|(i, w)| merges.get(w[0], w[1]).map(|(rank, m)| (rank, i, m)))
            .min();
        let Some((_, i, merged)) = best else { break };
        ids[i] = merged;
        ids.remove(i + 1);
    }
    out.extend(ids);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wordpiece_splits_into_known_pieces() {
        let json = serde_json::json!({
            "normalizer": {"lowercase": true},
            "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                      "vocab": {"[UNK]": 0, "read": 1, "##ing": 2, "file": 3, ".": 4}}
        });
        let t = Tokenizer::parse(json.to_string().as_bytes()).unwrap();
        assert_eq!(t.ids("Reading file. zzz"), [1, 2, 3, 4]);
    }

    #[test]
    fn bpe_merges_by_rank_and_falls_back_to_bytes() {
        let json = serde_json::json!({
            "model": {"type": "BPE", "unk_token": "<unk>",
                      "vocab": {"<unk>": 0, "▁": 1, "r": 2, "e": 3, "a": 4, "d": 5, "▁r": 6,
                                "ea": 7, "▁rea": 8, "▁read": 9, "<0xC3>": 10, "<0xA9>": 11},
                      "merges": ["▁ r", "e a", "▁r ea", "▁rea d"]}
        });
        let t = Tokenizer::parse(json.to_string().as_bytes()).unwrap();
        assert_eq!(t.ids("read"), [9]);
        assert_eq!(t.ids("read é"), [9, 1, 10, 11]);
    }

    #[test]
    fn escaped_tokens_are_found_and_the_best_merge_of_a_pair_wins() {
        // `\u00e9` and `\"` cannot be borrowed from the file: the owned
        // copies must sort and look up like the rest.
        let text = r#"{"model": {"type": "BPE", "unk_token": "<unk>",
            "vocab": {"<unk>": 0, "\u2581": 1, "\u00e9": 2, "t": 3, "\u2581t": 4, "\"": 5,
                      "\u2581\u00e9": 6, "\u00e9t": 7},
            "merges": [["\u2581", "\u00e9"], "\u00e9 t", "\u2581 t", ["\u2581", "\u00e9"]]}}"#;
        let t = Tokenizer::parse(text.as_bytes()).unwrap();
        assert_eq!(t.ids("ét"), [6, 3]);
        assert_eq!(t.ids("t\""), [4, 5]);
        assert_eq!(t.max_id(), Some(7));
        let Tokenizer::Bpe { vocab, merges, .. } = &t else {
            panic!("a BPE tokenizer")
        };
        assert_eq!(vocab.get("\u{e9}t"), Some(7));
        assert_eq!(vocab.get("zz"), None);
        assert_eq!(merges.get(1, 2), Some((0, 6)));
        assert_eq!(merges.get(2, 3), Some((1, 7)));
        assert_eq!(merges.get(3, 2), None);
    }
}
