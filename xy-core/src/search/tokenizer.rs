//! The two Hugging Face `tokenizer.json` kinds static-embedding models ship
//! with, read and run by hand: WordPiece (BERT vocabularies, model2vec's
//! potion models) and SentencePiece-style BPE with byte fallback (Llama
//! vocabularies, WordLlama). Only what turning text into vocabulary ids
//! needs; no special tokens, no offsets.

use std::collections::HashMap;

/// A tokenizer read from `tokenizer.json`.
#[derive(Debug, Clone)]
pub(crate) enum Tokenizer {
    /// Greedy longest-match WordPiece after BERT's pre-tokenizer.
    WordPiece {
        vocab: HashMap<String, u32>,
        unk: Option<u32>,
        prefix: String,
        lowercase: bool,
    },
    /// SentencePiece BPE: spaces become `▁`, pieces merge by rank within a
    /// word, characters outside the vocabulary fall back to `<0xNN>` bytes.
    Bpe {
        vocab: HashMap<String, u32>,
        /// `(left, right)` → `(rank, merged)`, all vocabulary ids.
        merges: HashMap<(u32, u32), (u32, u32)>,
        unk: Option<u32>,
    },
}

/// The parts of `tokenizer.json` read; parsed straight into these types
/// (a `serde_json::Value` of a Llama vocabulary and its merges left tens of
/// MiB in the heap).
#[derive(serde::Deserialize)]
struct File {
    model: Model,
    normalizer: Option<Normalizer>,
}

#[derive(serde::Deserialize)]
struct Model {
    #[serde(rename = "type")]
    kind: String,
    vocab: HashMap<String, u32>,
    unk_token: Option<String>,
    continuing_subword_prefix: Option<String>,
    #[serde(default)]
    merges: Vec<Merge>,
}

#[derive(serde::Deserialize)]
struct Normalizer {
    lowercase: Option<bool>,
}

/// A merge is `"a b"` or `["a", "b"]`, by the file's format version.
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum Merge {
    Joined(String),
    Pair(String, String),
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
        let unk = unk_token.and_then(|u| vocab.get(&u).copied());
        match kind.as_str() {
            "WordPiece" => Ok(Self::WordPiece {
                unk,
                prefix: continuing_subword_prefix.unwrap_or_else(|| "##".to_owned()),
                lowercase: file.normalizer.and_then(|n| n.lowercase).unwrap_or(true),
                vocab,
            }),
            "BPE" => {
                let mut ranks = HashMap::with_capacity(merges.len());
                for (rank, m) in merges.into_iter().enumerate() {
                    let (a, b) = match m {
                        Merge::Pair(a, b) => (a, b),
                        Merge::Joined(s) => match s.split_once(' ') {
                            Some((a, b)) => (a.to_owned(), b.to_owned()),
                            None => return Err(format!("merge {rank} is not a pair")),
                        },
                    };
                    // A merge whose parts or result are not in the
                    // vocabulary can never apply.
                    let id = |s: &str| vocab.get(s).copied();
                    if let (Some(l), Some(r), Some(m)) = (id(&a), id(&b), id(&format!("{a}{b}"))) {
                        ranks.entry((l, r)).or_insert((rank as u32, m));
                    }
                }
                ranks.shrink_to_fit();
                Ok(Self::Bpe {
                    vocab,
                    merges: ranks,
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
            Self::WordPiece { vocab, .. } | Self::Bpe { vocab, .. } => {
                vocab.values().max().copied()
            }
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
fn wordpiece(vocab: &HashMap<String, u32>, prefix: &str, word: &str, out: &mut Vec<u32>) {
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
            if let Some(&id) = id {
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
fn bpe(
    vocab: &HashMap<String, u32>,
    merges: &HashMap<(u32, u32), (u32, u32)>,
    word: &str,
    out: &mut Vec<u32>,
) {
    // Skip pathological words (a pasted blob) rather than spend quadratic time.
    if word.len() > 256 {
        return;
    }
    let mut ids: Vec<u32> = Vec::with_capacity(word.len());
    let mut buf = [0u8; 4];
    for c in word.chars() {
        match vocab.get(c.encode_utf8(&mut buf) as &str) {
            Some(&id) => ids.push(id),
            None => ids.extend(
                c.encode_utf8(&mut buf)
                    .bytes()
                    .filter_map(|b| vocab.get(&format!("<0x{b:02X}>")).copied()),
            ),
        }
    }
    loop {
        let best = ids
            .windows(2)
            .enumerate()
            .filter_map(|(i, w)| merges.get(&(w[0], w[1])).map(|&(rank, m)| (rank, i, m)))
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
}
