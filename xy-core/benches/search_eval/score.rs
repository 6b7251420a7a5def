//! The retrieval metrics of issue 40, once: what `search_eval` prints for
//! `xy_core::search` in process and for the rankings `find_tools` returned
//! over MCP (`--rankings`, from `bench/retrieval.py`), and what
//! `xy-core/tests/search_rankings.rs` checks on a hand-written case.
//!
//! A task's needs are its annotated tools found in the corpus; a name
//! several servers offer counts as found on any of them. Tool Recall@k is
//! the share of needs among the first k tools ranked; server Recall@k the
//! share of needs with a server among the first k distinct servers ranked;
//! both averaged over tasks. `sAll@5` and `tAll@10` are the stricter
//! reading: the share of tasks with every need found.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

pub(crate) struct Task {
    pub(crate) id: String,
    pub(crate) question: String,
    pub(crate) needs: BTreeSet<String>,
}

/// One ranked tool: its server's name in the corpus, and its own name.
pub(crate) type Ranked = Vec<(String, String)>;

/// Tool name → the corpus servers that offer it.
pub(crate) type Offers = BTreeMap<String, BTreeSet<String>>;

#[derive(Default, Clone, Copy)]
pub(crate) struct Scores {
    pub(crate) server: [f64; 3],
    pub(crate) tool: [f64; 3],
    pub(crate) ndcg: [f64; 2],
    /// The stricter reading: the share of tasks with every need found
    /// (server among the first 5, tool among the first 10).
    pub(crate) all_found: [f64; 2],
    pub(crate) n: usize,
}

pub(crate) const SERVER_K: [usize; 3] = [1, 3, 5];
pub(crate) const TOOL_K: [usize; 3] = [1, 5, 10];
pub(crate) const NDCG_K: [usize; 2] = [5, 10];

impl Scores {
    pub(crate) fn json(&self) -> Value {
        let at = |ks: &[usize], v: &[f64]| -> Value {
            ks.iter()
                .zip(v)
                .map(|(k, v)| (k.to_string(), Value::from(*v)))
                .collect::<serde_json::Map<_, _>>()
                .into()
        };
        serde_json::json!({
            "tasks": self.n,
            "server_recall": at(&SERVER_K, &self.server),
            "tool_recall": at(&TOOL_K, &self.tool),
            "ndcg": at(&NDCG_K, &self.ndcg),
            "server_all_found_5": self.all_found[0],
            "tool_all_found_10": self.all_found[1],
        })
    }
}

/// The scores of `tasks` ranked by `rank`.
pub(crate) fn score(
    tasks: &[&Task],
    offers: &Offers,
    mut rank: impl FnMut(&Task) -> Ranked,
) -> Scores {
    let none = BTreeSet::new();
    let mut total = Scores::default();
    for t in tasks {
        let ranked = rank(t);
        let n = t.needs.len() as f64;
        let mut servers: Vec<&str> = Vec::new();
        for (s, _) in &ranked {
            if !servers.contains(&s.as_str()) {
                servers.push(s);
            }
        }
        for (i, &k) in SERVER_K.iter().enumerate() {
            let top: BTreeSet<&str> = servers.iter().take(k).copied().collect();
            let found = t
                .needs
                .iter()
                .filter(|need| {
                    offers
                        .get(need.as_str())
                        .unwrap_or(&none)
                        .iter()
                        .any(|s| top.contains(s.as_str()))
                })
                .count();
            total.server[i] += found as f64 / n;
            if k == 5 && found == t.needs.len() {
                total.all_found[0] += 1.0;
            }
        }
        for (i, &k) in TOOL_K.iter().enumerate() {
            let found = t
                .needs
                .iter()
                .filter(|need| ranked.iter().take(k).any(|(_, d)| d == *need))
                .count();
            total.tool[i] += found as f64 / n;
            if k == 10 && found == t.needs.len() {
                total.all_found[1] += 1.0;
            }
        }
        for (i, &k) in NDCG_K.iter().enumerate() {
            let mut seen = BTreeSet::new();
            let mut dcg = 0.0;
            for (pos, (_, name)) in ranked.iter().take(k).enumerate() {
                if t.needs.contains(name) && seen.insert(name.as_str()) {
                    dcg += 1.0 / ((pos + 2) as f64).log2();
                }
            }
            let ideal: f64 = (0..t.needs.len().min(k))
                .map(|pos| 1.0 / ((pos + 2) as f64).log2())
                .sum();
            total.ndcg[i] += dcg / ideal;
        }
        total.n += 1;
    }
    let n = total.n.max(1) as f64;
    total
        .server
        .iter_mut()
        .chain(&mut total.tool)
        .chain(&mut total.ndcg)
        .chain(&mut total.all_found)
        .for_each(|x| *x /= n);
    total
}

/// Percentiles of timings in µs, one list of runs per query: each query's
/// median, and every call (the machine is shared: a median shows the
/// query's own cost, the raw p99 also what preemption adds).
pub(crate) fn percentiles(per_query: &[Vec<f64>]) -> Value {
    let mut all: Vec<f64> = per_query.iter().flatten().copied().collect();
    let mut medians: Vec<f64> = per_query
        .iter()
        .filter(|s| !s.is_empty())
        .map(|s| {
            let mut s = s.clone();
            s.sort_by(f64::total_cmp);
            s[s.len() / 2]
        })
        .collect();
    all.sort_by(f64::total_cmp);
    medians.sort_by(f64::total_cmp);
    let at = |v: &[f64], q: f64| {
        if v.is_empty() {
            f64::NAN
        } else {
            v[((v.len() - 1) as f64 * q).round() as usize]
        }
    };
    serde_json::json!({
        "calls": all.len(),
        "per_query_median": {"p50": at(&medians, 0.5), "p99": at(&medians, 0.99)},
        "all_calls": {"p50": at(&all, 0.5), "p99": at(&all, 0.99), "max": at(&all, 1.0)},
    })
}
