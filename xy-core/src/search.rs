//! Tool search (SPEC §26): xy's own ranking of tools for a free-text query,
//! which the aggregate's `find_tools` and `xyctl tools search` answer with.
//!
//! Pure and in memory: the caller builds an [`Index`] from [`ToolDoc`]s
//! (one per tool, with its server's name and instructions) and asks it
//! [`Index::search`]. The ranking is BM25F over six fields (name, title,
//! description, parameters, server name, server instructions), fused with a
//! BM25 score of the tool's whole server, so a query that names what a
//! server is for lifts all of that server's tools. An optional local
//! static-embedding model ([`StaticEmbeddings`], a file the user names)
//! adds a cosine term; no weights are inside the binary and nothing is
//! fetched. The only I/O is [`StaticEmbeddings::load`] reading that file.
//!
//! How the weights were chosen, and what they score, is in `docs/search.md`.

mod embed;
mod text;
mod tokenizer;

use std::collections::HashMap;

pub use embed::{SearchError, StaticEmbeddings};
use text::Analyzer;

/// One tool as search sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolDoc {
    /// The server's name in xy.
    pub server: String,
    /// The server's `instructions` from `initialize`, if any.
    pub server_instructions: Option<String>,
    /// The tool's name as the server lists it.
    pub name: String,
    /// `title`, or else `annotations.title`.
    pub title: Option<String>,
    /// The tool's description.
    pub description: Option<String>,
    /// Each input parameter's name and description, in schema order.
    pub params: Vec<(String, Option<String>)>,
}

impl ToolDoc {
    /// Reads a tool as `tools/list` returns it: `name`, `title` (or
    /// `annotations.title`), `description` and each
    /// `inputSchema.properties.*` name with its `description`. Missing or
    /// mistyped members are left out, never an error: search ranks what it
    /// can read.
    pub fn from_tool(server: &str, instructions: Option<&str>, tool: &serde_json::Value) -> Self {
        let text = |v: Option<&serde_json::Value>| v.and_then(|v| v.as_str()).map(str::to_owned);
        let title = text(tool.get("title")).or_else(|| text(tool.pointer("/annotations/title")));
        let params = tool
            .pointer("/inputSchema/properties")
            .and_then(|p| p.as_object())
            .map(|props| {
                props
                    .iter()
                    .map(|(name, schema)| (name.clone(), text(schema.get("description"))))
                    .collect()
            })
            .unwrap_or_default();
        Self {
            server: server.to_owned(),
            server_instructions: instructions.map(str::to_owned),
            name: text(tool.get("name")).unwrap_or_default(),
            title,
            description: text(tool.get("description")),
            params,
        }
    }
}

/// One ranked tool: its position in the `Vec` the index was built from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    /// Index into [`Index::docs`].
    pub doc: usize,
    /// Higher is better; comparable within one query only.
    pub score: f32,
}

/// The fields of a tool, in the order of [`Weights::field`].
const FIELDS: usize = 6;
const NAME: usize = 0;
const TITLE: usize = 1;
const DESCRIPTION: usize = 2;
const PARAMS: usize = 3;
const SERVER: usize = 4;
const INSTRUCTIONS: usize = 5;

/// The ranking's parameters. [`Weights::default`] is the product's ranking;
/// `docs/search.md` says how each value was chosen.
#[derive(Debug, Clone, PartialEq)]
pub struct Weights {
    /// BM25's term-frequency saturation.
    pub k1: f32,
    /// Per field (name, title, description, params, server, instructions):
    /// how much one occurrence counts.
    pub field: [f32; FIELDS],
    /// Per field: BM25's length normalisation.
    pub b: [f32; FIELDS],
    /// How much the whole server's score adds to each of its tools, against
    /// the tool's own (both scaled to the best of the query).
    pub server: f32,
    /// How much the embedding's cosine adds, when a model is loaded.
    pub embedding: f32,
}

impl Default for Weights {
    fn default() -> Self {
        Self {
            k1: 0.9,
            field: [1.0, 2.0, 1.0, 0.25, 2.0, 0.5],
            b: [0.5, 0.5, 0.75, 0.75, 0.0, 0.75],
            server: 0.5,
            embedding: 2.0,
        }
    }
}

/// A term's occurrences in one document.
#[derive(Debug, Clone)]
struct Posting {
    doc: u32,
    tf: [u16; FIELDS],
}

/// A term's occurrences in one server's concatenated text.
#[derive(Debug, Clone, Copy)]
struct ServerPosting {
    server: u32,
    tf: u32,
}

/// The searchable form of a set of tools. Build once per listing change;
/// searching takes `&self`.
#[derive(Debug)]
pub struct Index {
    docs: Vec<ToolDoc>,
    weights: Weights,
    analyzer: Analyzer,
    vocab: HashMap<String, u32>,
    postings: Vec<Vec<Posting>>,
    lens: Vec<[u32; FIELDS]>,
    avg_len: [f32; FIELDS],
    /// Distinct server names, sorted; `doc_server[d]` indexes it.
    servers: Vec<String>,
    doc_server: Vec<u32>,
    server_postings: Vec<Vec<ServerPosting>>,
    server_len: Vec<u32>,
    server_avg_len: f32,
    model: Option<embed::DocVectors>,
}

impl std::fmt::Debug for Analyzer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Analyzer")
    }
}

impl Index {
    /// Builds the index with the default [`Weights`].
    pub fn build(docs: Vec<ToolDoc>) -> Self {
        Self::build_with(docs, Weights::default())
    }

    /// Builds the index with the given weights (for tuning and benches).
    pub fn build_with(docs: Vec<ToolDoc>, weights: Weights) -> Self {
        let analyzer = Analyzer::default();
        let mut servers: Vec<String> = docs.iter().map(|d| d.server.clone()).collect();
        servers.sort();
        servers.dedup();
        let doc_server: Vec<u32> = docs
            .iter()
            .map(|d| servers.binary_search(&d.server).unwrap_or_default() as u32)
            .collect();

        let mut vocab: HashMap<String, u32> = HashMap::new();
        let mut postings: Vec<Vec<Posting>> = Vec::new();
        let mut server_tf: Vec<HashMap<u32, u32>> = vec![HashMap::new(); servers.len()];
        let mut server_len = vec![0u32; servers.len()];
        let mut server_seen = vec![false; servers.len()];
        let mut lens = Vec::with_capacity(docs.len());
        let mut terms = Vec::new();
        for (d, doc) in docs.iter().enumerate() {
            let s = doc_server[d] as usize;
            let mut tf: HashMap<u32, [u16; FIELDS]> = HashMap::new();
            let mut len = [0u32; FIELDS];
            for (field, text) in fields(doc) {
                terms.clear();
                analyzer.terms_into(text, &mut terms);
                len[field] += terms.len() as u32;
                // The server's own name and instructions count once per
                // server in its server document, not once per tool.
                let once_per_server = field == SERVER || field == INSTRUCTIONS;
                for term in &terms {
                    let id = term_id(&mut vocab, &mut postings, term);
                    let slot = &mut tf.entry(id).or_insert([0; FIELDS])[field];
                    *slot = slot.saturating_add(1);
                    if !once_per_server || !server_seen[s] {
                        *server_tf[s].entry(id).or_default() += 1;
                        server_len[s] += 1;
                    }
                }
            }
            server_seen[s] = true;
            lens.push(len);
            let mut tf: Vec<_> = tf.into_iter().collect();
            tf.sort_unstable_by_key(|(id, _)| *id);
            for (id, tf) in tf {
                postings[id as usize].push(Posting { doc: d as u32, tf });
            }
        }
        let mut server_postings = vec![Vec::new(); postings.len()];
        for (s, tfs) in server_tf.into_iter().enumerate() {
            let mut tfs: Vec<_> = tfs.into_iter().collect();
            tfs.sort_unstable_by_key(|(id, _)| *id);
            for (id, tf) in tfs {
                server_postings[id as usize].push(ServerPosting {
                    server: s as u32,
                    tf,
                });
            }
        }
        let n = docs.len().max(1) as f32;
        let mut avg_len = [0f32; FIELDS];
        for len in &lens {
            for (avg, &l) in avg_len.iter_mut().zip(len) {
                *avg += l as f32 / n;
            }
        }
        let server_avg_len =
            server_len.iter().map(|&l| l as f32).sum::<f32>() / servers.len().max(1) as f32;
        Self {
            docs,
            weights,
            analyzer,
            vocab,
            postings,
            lens,
            avg_len,
            servers,
            doc_server,
            server_postings,
            server_len,
            server_avg_len,
            model: None,
        }
    }

    /// Adds a static-embedding model: every tool is embedded now, each
    /// query at search time, and the cosine joins the score.
    pub fn with_model(mut self, model: StaticEmbeddings) -> Self {
        self.model = Some(embed::DocVectors::build(model, &self.docs));
        self
    }

    /// The tools, in the order they were given; [`Hit::doc`] indexes this.
    pub fn docs(&self) -> &[ToolDoc] {
        &self.docs
    }

    /// The weights this index ranks with.
    pub fn weights(&self) -> &Weights {
        &self.weights
    }

    /// The best `limit` tools for `query`, best first, only `server`'s if
    /// given. Tools that match no query term score nothing and are left
    /// out (unless a model finds them close). Equal scores are ordered by
    /// server, then tool name, so the answer is the same on every run.
    pub fn search(&self, query: &str, limit: usize, server: Option<&str>) -> Vec<Hit> {
        if limit == 0 || self.docs.is_empty() {
            return Vec::new();
        }
        let query = head(query, MAX_QUERY);
        let only = match server {
            Some(name) => match self.servers.binary_search_by(|s| s.as_str().cmp(name)) {
                Ok(s) => Some(s as u32),
                Err(_) => return Vec::new(),
            },
            None => None,
        };
        let mut ids: Vec<u32> = self
            .analyzer
            .terms(query)
            .iter()
            .filter_map(|t| self.vocab.get(t).copied())
            .collect();
        ids.sort_unstable();
        ids.dedup();

        let tool = self.tool_scores(&ids);
        let server_scores = self.server_scores(&ids);
        // Cosines of mean-pooled vectors crowd into a narrow band; spread
        // each query's over [0, 1] so the weight means the same for every
        // query and model.
        let cosines = self.model.as_ref().map(|m| {
            let mut c = m.cosines(query);
            let lo = c.iter().copied().fold(f32::INFINITY, f32::min);
            let hi = c.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            if hi > lo {
                c.iter_mut().for_each(|x| *x = (*x - lo) / (hi - lo));
            }
            c
        });
        let max_tool = tool.iter().copied().fold(0f32, f32::max);
        let max_server = server_scores.iter().copied().fold(0f32, f32::max);

        let w = &self.weights;
        let mut hits: Vec<Hit> = (0..self.docs.len())
            .filter(|&d| only.is_none_or(|s| self.doc_server[d] == s))
            .filter_map(|d| {
                let s = self.doc_server[d] as usize;
                let mut score = 0.0;
                if max_tool > 0.0 {
                    score += tool[d] / max_tool;
                }
                if max_server > 0.0 {
                    score += w.server * server_scores[s] / max_server;
                }
                if let Some(c) = &cosines {
                    score += w.embedding * c[d];
                }
                (score > 0.0).then_some(Hit { doc: d, score })
            })
            .collect();
        hits.sort_by(|a, b| {
            b.score.total_cmp(&a.score).then_with(|| {
                let (x, y) = (&self.docs[a.doc], &self.docs[b.doc]);
                (&x.server, &x.name, a.doc).cmp(&(&y.server, &y.name, b.doc))
            })
        });
        hits.truncate(limit);
        hits
    }

    /// BM25F per tool: each field's count weighted and length-normalised,
    /// summed, then saturated once.
    fn tool_scores(&self, ids: &[u32]) -> Vec<f32> {
        let w = &self.weights;
        let n = self.docs.len() as f32;
        let mut scores = vec![0f32; self.docs.len()];
        for &id in ids {
            let list = &self.postings[id as usize];
            let idf = idf(n, list.len() as f32);
            for p in list {
                let len = &self.lens[p.doc as usize];
                let tf: f32 = (p.tf.iter().zip(len))
                    .zip(w.field.iter().zip(&w.b).zip(&self.avg_len))
                    .filter(|((tf, _), _)| **tf > 0)
                    .map(|((&tf, &len), ((&weight, &b), &avg))| {
                        weight * tf as f32 / (1.0 - b + b * len as f32 / avg.max(1.0))
                    })
                    .sum();
                scores[p.doc as usize] += idf * tf * (w.k1 + 1.0) / (w.k1 + tf);
            }
        }
        scores
    }

    /// Plain BM25 per server over all its tools' text, its name and its
    /// instructions.
    fn server_scores(&self, ids: &[u32]) -> Vec<f32> {
        let k1 = self.weights.k1;
        let b = 0.75;
        let n = self.servers.len() as f32;
        let mut scores = vec![0f32; self.servers.len()];
        for &id in ids {
            let list = &self.server_postings[id as usize];
            let idf = idf(n, list.len() as f32);
            for p in list {
                let len = self.server_len[p.server as usize] as f32;
                let tf = p.tf as f32;
                let norm = k1 * (1.0 - b + b * len / self.server_avg_len.max(1.0));
                scores[p.server as usize] += idf * tf * (k1 + 1.0) / (tf + norm);
            }
        }
        scores
    }
}

/// How much of a query is read, in bytes: enough for any question a
/// client asks; a pasted document or blob past it would cost time and
/// rank by noise.
pub const MAX_QUERY: usize = 1024;

/// The longest prefix of `s` of at most `max` bytes that ends on a
/// character boundary.
fn head(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// BM25's inverse document frequency (the always-positive form).
fn idf(n: f32, df: f32) -> f32 {
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

fn term_id(vocab: &mut HashMap<String, u32>, postings: &mut Vec<Vec<Posting>>, term: &str) -> u32 {
    if let Some(&id) = vocab.get(term) {
        return id;
    }
    let id = postings.len() as u32;
    vocab.insert(term.to_owned(), id);
    postings.push(Vec::new());
    id
}

/// A tool's text, field by field.
fn fields(doc: &ToolDoc) -> Vec<(usize, &str)> {
    let mut out = vec![(NAME, doc.name.as_str()), (SERVER, doc.server.as_str())];
    if let Some(t) = &doc.title {
        out.push((TITLE, t));
    }
    if let Some(t) = &doc.description {
        out.push((DESCRIPTION, t));
    }
    for (name, description) in &doc.params {
        out.push((PARAMS, name));
        if let Some(t) = description {
            out.push((PARAMS, t));
        }
    }
    if let Some(t) = &doc.server_instructions {
        out.push((INSTRUCTIONS, t));
    }
    out
}

#[cfg(test)]
mod tests;
