//! The retrieval metrics `search_eval` scores `find_tools`' rankings with
//! (`--rankings`, `bench/retrieval.py`), on two hand-written tasks whose
//! figures are worked out by hand: the bench's numbers mean what
//! docs/search.md says they mean.

#[path = "../benches/search_eval/score.rs"]
#[allow(dead_code)]
mod score;

use score::{Offers, Ranked, Task, percentiles, score};

fn pairs(list: &[(&str, &str)]) -> Ranked {
    list.iter()
        .map(|(s, t)| ((*s).to_owned(), (*t).to_owned()))
        .collect()
}

fn task(id: &str, needs: &[&str]) -> Task {
    Task {
        id: id.into(),
        question: String::new(),
        needs: needs.iter().map(|n| (*n).to_owned()).collect(),
    }
}

#[test]
fn two_hand_written_rankings_score_as_worked_out() {
    // `fetch` is offered by two servers: found on either.
    let mut offers = Offers::new();
    for (tool, server) in [
        ("read", "fs"),
        ("write", "fs"),
        ("fetch", "web"),
        ("fetch", "npx_fetch"),
        ("price", "stocks"),
        ("weather", "wx"),
        ("time", "clock"),
    ] {
        offers.entry(tool.into()).or_default().insert(server.into());
    }
    let a = task("0a", &["write", "fetch"]);
    let b = task("8b", &["price"]);
    let rank = |t: &Task| match t.id.as_str() {
        // Servers in order: fs, npx_fetch, clock, wx. Tools: `write` 2nd,
        // `fetch` 3rd (on the other server that offers it).
        "0a" => pairs(&[
            ("fs", "read"),
            ("fs", "write"),
            ("npx_fetch", "fetch"),
            ("clock", "time"),
            ("wx", "weather"),
        ]),
        // `price`'s server is the 6th distinct one, its tool the 6th.
        _ => pairs(&[
            ("fs", "read"),
            ("web", "fetch"),
            ("clock", "time"),
            ("wx", "weather"),
            ("npx_fetch", "fetch"),
            ("stocks", "price"),
        ]),
    };
    let s = score(&[&a, &b], &offers, rank);
    assert_eq!(s.n, 2);
    // Server R@1: a finds `write` (fs) = 1/2, b nothing → 0.25.
    // R@3 and R@5: a finds both = 1, b's `stocks` is 6th → 0.5.
    assert_eq!(s.server, [0.25, 0.5, 0.5]);
    // Tool R@1: 0; R@5: a both (2nd, 3rd) = 1, b 6th = 0 → 0.5; R@10: 1.
    assert_eq!(s.tool, [0.0, 0.5, 1.0]);
    // Every need found: servers among 5 (a yes, b no), tools among 10 (both).
    assert_eq!(s.all_found, [0.5, 1.0]);
    // nDCG@5 of a: (1/log2 3 + 1/log2 4) / (1 + 1/log2 3); b: 0.
    let a5 = (1.0 / 3f64.log2() + 0.5) / (1.0 + 1.0 / 3f64.log2());
    assert!((s.ndcg[0] - a5 / 2.0).abs() < 1e-12, "{}", s.ndcg[0]);
    // nDCG@10 of b: `price` 6th, 1/log2 7 over the ideal 1.
    assert!(
        (s.ndcg[1] - (a5 + 1.0 / 7f64.log2()) / 2.0).abs() < 1e-12,
        "{}",
        s.ndcg[1]
    );
}

#[test]
fn percentiles_are_of_each_query_median_and_of_every_call() {
    let p = percentiles(&[vec![3.0, 1.0, 2.0], vec![10.0, 30.0, 20.0]]);
    assert_eq!(p["calls"], 6);
    assert_eq!(p["per_query_median"]["p50"], 20.0);
    assert_eq!(p["all_calls"]["max"], 30.0);
}
