//! The optional static-embedding model of tool search: a model2vec-style
//! file pair (`model.safetensors` with one `[vocab, dim]` matrix, and the
//! WordPiece `tokenizer.json` beside it) that the user names in `xy.kdl`.
//! A text's vector is the mean of its tokens' rows, so embedding is a
//! lookup and a sum: no inference engine, no network, no weights in xy.

use std::path::{Path, PathBuf};

use super::ToolDoc;
use super::tokenizer::Tokenizer;

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
    tokenizer: Tokenizer,
    dim: usize,
    rows: Rows,
}

/// The matrix as the file holds it, little-endian, decoded a row at a time
/// while summing: the file's bytes are the model's memory, no second copy.
#[derive(Clone)]
struct Rows {
    bytes: Vec<u8>,
    /// Where the matrix starts in `bytes`.
    start: usize,
    dtype: Dtype,
    /// Per-row factors of an I8 matrix (its `scales` tensor).
    scales: Vec<f32>,
}

#[derive(Clone, Copy)]
enum Dtype {
    F32,
    F16,
    Bf16,
    /// Symmetric int8, each row times its `scales` entry: a quarter of F32's
    /// memory, which is what fits a model in search's memory budget.
    I8,
}

impl Dtype {
    fn width(self) -> usize {
        match self {
            Dtype::F32 => 4,
            Dtype::F16 | Dtype::Bf16 => 2,
            Dtype::I8 => 1,
        }
    }
}

impl std::fmt::Debug for StaticEmbeddings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticEmbeddings")
            .field("dim", &self.dim)
            .finish_non_exhaustive()
    }
}

impl StaticEmbeddings {
    /// Loads a model from `path`: a directory holding `model.safetensors`
    /// and `tokenizer.json`, or a `.safetensors` file with its tokenizer
    /// beside it (`tokenizer.json`, else the one `*tokenizer*.json` there).
    pub fn load(path: &Path) -> Result<Self, SearchError> {
        let weights = if path.is_dir() {
            path.join("model.safetensors")
        } else {
            path.to_path_buf()
        };
        let tokenizer = tokenizer_beside(&weights)?;
        let read = |p: &Path| {
            std::fs::read(p).map_err(|source| SearchError::Io {
                path: p.to_path_buf(),
                source,
            })
        };
        let mut bytes = read(&weights)?;
        let Matrix {
            rows: vocab_len,
            dim,
            start,
            dtype,
            scales,
        } = safetensors_matrix(&bytes).map_err(|reason| SearchError::Format {
            path: weights.clone(),
            reason,
        })?;
        // Whatever follows the matrix is not needed.
        bytes.truncate(start + vocab_len * dim * dtype.width());
        bytes.shrink_to_fit();
        let rows = Rows {
            bytes,
            start,
            dtype,
            scales,
        };
        let tok = Tokenizer::parse(&read(&tokenizer)?).map_err(|reason| SearchError::Format {
            path: tokenizer.clone(),
            reason,
        })?;
        if let Some(max) = tok.max_id()
            && max as usize >= vocab_len
        {
            return Err(SearchError::Format {
                path: tokenizer,
                reason: format!("token id {max} but the matrix has {vocab_len} rows"),
            });
        }
        Ok(Self {
            tokenizer: tok,
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
        self.embed_weighted(&self.tokenizer.ids(text), |_| 1.0)
    }

    /// The unit-length weighted sum of the rows of `ids`.
    fn embed_weighted(&self, ids: &[u32], weight: impl Fn(u32) -> f32) -> Vec<f32> {
        let mut sum = vec![0f32; self.dim];
        for &id in ids {
            let w = weight(id);
            let r = &self.rows;
            let width = r.dtype.width();
            let w = match r.dtype {
                Dtype::I8 => w * r.scales[id as usize],
                _ => w,
            };
            let from = r.start + id as usize * self.dim * width;
            let row = &r.bytes[from..from + self.dim * width];
            for (s, c) in sum.iter_mut().zip(row.chunks_exact(width)) {
                let v = match r.dtype {
                    Dtype::F32 => f32::from_le_bytes([c[0], c[1], c[2], c[3]]),
                    Dtype::F16 => f16_to_f32(u16::from_le_bytes([c[0], c[1]])),
                    Dtype::Bf16 => {
                        f32::from_bits(u32::from(u16::from_le_bytes([c[0], c[1]])) << 16)
                    }
                    Dtype::I8 => f32::from(c[0] as i8),
                };
                *s += w * v;
            }
        }
        normalise(&mut sum);
        sum
    }
}

/// The tokenizer file that goes with a weights file.
fn tokenizer_beside(weights: &Path) -> Result<PathBuf, SearchError> {
    let dir = weights.parent().unwrap_or(Path::new("."));
    let plain = dir.join("tokenizer.json");
    if plain.is_file() {
        return Ok(plain);
    }
    let entries = std::fs::read_dir(dir).map_err(|source| SearchError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.contains("tokenizer") && n.ends_with(".json"))
        })
        .collect();
    found.sort();
    match found.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(SearchError::Format {
            path: dir.to_path_buf(),
            reason: "no tokenizer.json beside the model".into(),
        }),
        _ => Err(SearchError::Format {
            path: dir.to_path_buf(),
            reason: "several *tokenizer*.json beside the model; name one tokenizer.json".into(),
        }),
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
    /// Embeds every tool. Plain means: weighting tokens by their inverse
    /// document frequency among the tools scored no better (D252).
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

fn normalise(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// Where a model's matrix lies in its file, and how to read it.
#[derive(Debug)]
struct Matrix {
    rows: usize,
    dim: usize,
    /// Byte offset of the first row in the file.
    start: usize,
    dtype: Dtype,
    /// An I8 matrix's per-row factors; empty otherwise.
    scales: Vec<f32>,
}

impl std::fmt::Debug for Dtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Dtype::F32 => "F32",
            Dtype::F16 => "F16",
            Dtype::Bf16 => "BF16",
            Dtype::I8 => "I8",
        })
    }
}

/// Reads the 2-D tensor of a safetensors file (named `embeddings`, or the
/// only one there is; an I8 one with its F32 `scales`, one per row).
fn safetensors_matrix(bytes: &[u8]) -> Result<Matrix, String> {
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
    let tensors: Vec<(&String, &serde_json::Value)> = head
        .iter()
        .filter(|(k, _)| *k != "__metadata__" && *k != "scales")
        .collect();
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
    let (from, to) = offsets_of(tensor)?;
    let data = bytes
        .get(data_start + from..data_start + to)
        .ok_or("data_offsets past the end of the file")?;
    let dtype = match dtype {
        "F32" => Dtype::F32,
        "F16" => Dtype::F16,
        "BF16" => Dtype::Bf16,
        "I8" => Dtype::I8,
        other => {
            return Err(format!(
                "dtype {other} is not supported (F32, F16, BF16, I8)"
            ));
        }
    };
    if Some(data.len())
        != rows
            .checked_mul(dim)
            .and_then(|n| n.checked_mul(dtype.width()))
    {
        return Err(format!(
            "{} bytes for a {rows}×{dim} {dtype:?} matrix",
            data.len()
        ));
    }
    let scales = match dtype {
        Dtype::I8 => {
            let scales = head
                .get("scales")
                .ok_or("an I8 matrix needs an F32 `scales` tensor, one per row")?;
            let (from, to) = offsets_of(scales)?;
            let ok = scales.get("dtype").and_then(|d| d.as_str()) == Some("F32")
                && to.checked_sub(from) == rows.checked_mul(4);
            let data = bytes
                .get(data_start + from..data_start + to)
                .filter(|_| ok)
                .ok_or(format!("`scales` is not {rows} F32 values in the file"))?;
            data.chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect()
        }
        _ => Vec::new(),
    };
    Ok(Matrix {
        rows,
        dim,
        start: data_start + from,
        dtype,
        scales,
    })
}

/// A tensor's `data_offsets`.
fn offsets_of(tensor: &serde_json::Value) -> Result<(usize, usize), String> {
    let offsets: Vec<usize> = tensor
        .get("data_offsets")
        .and_then(|s| s.as_array())
        .map(|s| {
            s.iter()
                .filter_map(|d| d.as_u64().map(|d| d as usize))
                .collect()
        })
        .unwrap_or_default();
    match offsets.as_slice() {
        &[from, to] if from <= to => Ok((from, to)),
        _ => Err("no data_offsets".into()),
    }
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

#[cfg(test)]
mod tests {
    #[test]
    fn f16_values() {
        assert_eq!(super::f16_to_f32(0x3c00), 1.0);
        assert_eq!(super::f16_to_f32(0xc000), -2.0);
        assert_eq!(super::f16_to_f32(0x0000), 0.0);
        assert_eq!(super::f16_to_f32(0x3555), 0.333_251_95);
        assert_eq!(super::f16_to_f32(0x0001), 2f32.powi(-24));
    }
}
