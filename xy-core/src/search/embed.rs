//! The optional static-embedding model of tool search: a model2vec-style
//! file pair (`model.safetensors` with one `[vocab, dim]` matrix, and the
//! WordPiece `tokenizer.json` beside it) that the user names in `xy.kdl`.
//! A text's vector is the mean of its tokens' rows, so embedding is a
//! lookup and a sum: no inference engine, no network, no weights in xy.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::ToolDoc;

/// Why a model file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The reason.
        source: std::io::Error,
    },
    /// The file was read but is not what a model should be.
    #[error("{path}: {reason}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

/// A static-embedding model: one vector per vocabulary token.
#[derive(Clone)]
pub struct StaticEmbeddings {
    vocab: HashMap<String, u32>,
    unk: Option<u32>,
    prefix: String,
    lowercase: bool,
    dim: usize,
    /// Row-major `[vocab, dim]`, in f32.
    rows: Vec<f32>,
}

impl std::fmt::Debug for StaticEmbeddings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticEmbeddings")
            .field("vocab", &self.vocab.len())
            .field("dim", &self.dim)
            .finish_non_exhaustive()
    }
}

impl StaticEmbeddings {
    /// Loads a model from `path`: a directory holding `model.safetensors`
    /// and `tokenizer.json`, or the `.safetensors` file itself with
    /// `tokenizer.json` in the same directory.
    pub fn load(path: &Path) -> Result<Self, SearchError> {
        let (weights, tokenizer) = if path.is_dir() {
            (path.join("model.safetensors"), path.join("tokenizer.json"))
        } else {
            let dir = path.parent().unwrap_or(Path::new("."));
            (path.to_path_buf(), dir.join("tokenizer.json"))
        };
        let read = |p: &Path| {
            std::fs::read(p).map_err(|source| SearchError::Io {
                path: p.to_path_buf(),
                source,
            })
        };
        let (vocab_len, dim, rows) =
            safetensors_matrix(&read(&weights)?).map_err(|reason| SearchError::Format {
                path: weights.clone(),
                reason,
            })?;
        let tok = wordpiece(&read(&tokenizer)?).map_err(|reason| SearchError::Format {
            path: tokenizer.clone(),
            reason,
        })?;
        if let Some(&max) = tok.vocab.values().max()
            && max as usize >= vocab_len
        {
            return Err(SearchError::Format {
                path: tokenizer,
                reason: format!("token id {max} but the matrix has {vocab_len} rows"),
            });
        }
        Ok(Self {
            vocab: tok.vocab,
            unk: tok.unk,
            prefix: tok.prefix,
            lowercase: tok.lowercase,
            dim,
            rows,
        })
    }

    /// The vectors' length.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The unit-length mean of `text`'s token vectors (all zeros when no
    /// token is known).
    pub fn embed(&self, text: &str) -> Vec<f32> {
        let mut sum = vec![0f32; self.dim];
        let mut ids = Vec::new();
        for word in pre_tokenize(text, self.lowercase) {
            self.wordpiece_into(&word, &mut ids);
        }
        for &id in &ids {
            let row = &self.rows[id as usize * self.dim..(id as usize + 1) * self.dim];
            for (s, r) in sum.iter_mut().zip(row) {
                *s += r;
            }
        }
        normalise(&mut sum);
        sum
    }

    /// Greedy longest-match WordPiece of one word; unknown words add
    /// nothing (model2vec drops the unknown token too).
    fn wordpiece_into(&self, word: &str, out: &mut Vec<u32>) {
        let chars: Vec<usize> = word
            .char_indices()
            .map(|(i, _)| i)
            .chain([word.len()])
            .collect();
        let mut start = 0;
        let mut pieces = Vec::new();
        while start < chars.len() - 1 {
            let mut end = chars.len() - 1;
            let mut found = None;
            while end > start {
                let piece = &word[chars[start]..chars[end]];
                let key = if start > 0 {
                    format!("{}{piece}", self.prefix)
                } else {
                    piece.to_owned()
                };
                if let Some(&id) = self.vocab.get(&key) {
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
        out.extend(pieces.into_iter().filter(|&id| Some(id) != self.unk));
    }
}

/// Every tool's vector, built once with the index.
pub(super) struct DocVectors {
    model: StaticEmbeddings,
    vectors: Vec<Vec<f32>>,
}

impl std::fmt::Debug for DocVectors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DocVectors")
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl DocVectors {
    pub(super) fn build(model: StaticEmbeddings, docs: &[ToolDoc]) -> Self {
        let vectors = docs.iter().map(|d| model.embed(&doc_text(d))).collect();
        Self { model, vectors }
    }

    /// The cosine of `query` with every tool, in document order.
    pub(super) fn cosines(&self, query: &str) -> Vec<f32> {
        let q = self.model.embed(query);
        self.vectors
            .iter()
            .map(|v| v.iter().zip(&q).map(|(a, b)| a * b).sum())
            .collect()
    }
}

/// The text a tool is embedded from: its identifiers spelt as words, then
/// its prose.
fn doc_text(doc: &ToolDoc) -> String {
    let mut text = String::new();
    for part in [
        Some(&doc.server),
        Some(&doc.name),
        doc.title.as_ref(),
        doc.description.as_ref(),
    ]
    .into_iter()
    .flatten()
    {
        text.push_str(&words(part));
        text.push_str(". ");
    }
    for (name, _) in &doc.params {
        text.push_str(&words(name));
        text.push(' ');
    }
    text
}

/// `read_file` / `readFile` → `read file`, so identifiers meet the vocabulary.
fn words(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 4);
    let mut prev_lower = false;
    for c in s.chars() {
        if c == '_' || c == '-' {
            out.push(' ');
            prev_lower = false;
            continue;
        }
        if prev_lower && c.is_uppercase() {
            out.push(' ');
        }
        prev_lower = c.is_lowercase();
        out.push(c);
    }
    out
}

/// BERT's pre-tokenizer: split at whitespace, and every punctuation mark
/// is a word of its own.
fn pre_tokenize(text: &str, lowercase: bool) -> Vec<String> {
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

fn normalise(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

struct WordPiece {
    vocab: HashMap<String, u32>,
    unk: Option<u32>,
    prefix: String,
    lowercase: bool,
}

/// Reads the parts of a Hugging Face `tokenizer.json` a WordPiece model
/// needs.
fn wordpiece(bytes: &[u8]) -> Result<WordPiece, String> {
    let json: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    let model = json.get("model").ok_or("no `model`")?;
    let kind = model.get("type").and_then(|t| t.as_str()).unwrap_or("");
    if kind != "WordPiece" {
        return Err(format!(
            "tokenizer model {kind:?} is not supported (only WordPiece)"
        ));
    }
    let vocab: HashMap<String, u32> = model
        .get("vocab")
        .and_then(|v| v.as_object())
        .ok_or("no `model.vocab`")?
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), u32::try_from(v.as_u64()?).ok()?)))
        .collect();
    let unk = model
        .get("unk_token")
        .and_then(|u| u.as_str())
        .and_then(|u| vocab.get(u).copied());
    let prefix = model
        .get("continuing_subword_prefix")
        .and_then(|p| p.as_str())
        .unwrap_or("##")
        .to_owned();
    let lowercase = json
        .pointer("/normalizer/lowercase")
        .and_then(|l| l.as_bool())
        .unwrap_or(true);
    Ok(WordPiece {
        vocab,
        unk,
        prefix,
        lowercase,
    })
}

/// Reads the one 2-D tensor of a safetensors file (named `embeddings`, or
/// the only one there is) as f32.
fn safetensors_matrix(bytes: &[u8]) -> Result<(usize, usize, Vec<f32>), String> {
    let head_len = bytes
        .get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()) as usize)
        .ok_or("shorter than a safetensors header")?;
    let data_start = 8usize
        .checked_add(head_len)
        .ok_or("header length overflows")?;
    let head = bytes
        .get(8..data_start)
        .ok_or("header longer than the file")?;
    let head: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(head).map_err(|e| format!("header is not JSON: {e}"))?;
    let tensors: Vec<(&String, &serde_json::Value)> =
        head.iter().filter(|(k, _)| *k != "__metadata__").collect();
    let (_, tensor) = tensors
        .iter()
        .find(|(k, _)| *k == "embeddings")
        .or_else(|| {
            if tensors.len() == 1 {
                tensors.first()
            } else {
                None
            }
        })
        .ok_or("no tensor named `embeddings`")?;
    let dtype = tensor.get("dtype").and_then(|d| d.as_str()).unwrap_or("");
    let shape: Vec<usize> = tensor
        .get("shape")
        .and_then(|s| s.as_array())
        .map(|s| {
            s.iter()
                .filter_map(|d| d.as_u64().map(|d| d as usize))
                .collect()
        })
        .unwrap_or_default();
    let &[rows, dim] = shape.as_slice() else {
        return Err(format!(
            "the embeddings' shape is {shape:?}, not [vocab, dim]"
        ));
    };
    let offsets: Vec<usize> = tensor
        .get("data_offsets")
        .and_then(|s| s.as_array())
        .map(|s| {
            s.iter()
                .filter_map(|d| d.as_u64().map(|d| d as usize))
                .collect()
        })
        .unwrap_or_default();
    let &[from, to] = offsets.as_slice() else {
        return Err("no data_offsets".into());
    };
    let data = bytes
        .get(data_start + from..data_start + to)
        .ok_or("data_offsets past the end of the file")?;
    let width = match dtype {
        "F32" => 4,
        "F16" | "BF16" => 2,
        other => return Err(format!("dtype {other} is not supported (F32, F16, BF16)")),
    };
    if data.len() != rows * dim * width {
        return Err(format!(
            "{} bytes for a {rows}×{dim} {dtype} matrix",
            data.len()
        ));
    }
    let values = data
        .chunks_exact(width)
        .map(|c| match dtype {
            "F32" => f32::from_le_bytes([c[0], c[1], c[2], c[3]]),
            "BF16" => f32::from_bits(u32::from(u16::from_le_bytes([c[0], c[1]])) << 16),
            _ => f16_to_f32(u16::from_le_bytes([c[0], c[1]])),
        })
        .collect();
    Ok((rows, dim, values))
}

fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1f);
    let frac = u32::from(h & 0x3ff);
    let bits = match (exp, frac) {
        (0, 0) => sign,
        (0, _) => {
            // Subnormal: scale into a normal f32.
            return f32::from_bits(sign)
                + (if sign != 0 { -1.0 } else { 1.0 }) * frac as f32 * 2f32.powi(-24);
        }
        (0x1f, _) => sign | 0x7f80_0000 | (frac << 13),
        _ => sign | ((exp + 112) << 23) | (frac << 13),
    };
    f32::from_bits(bits)
}
