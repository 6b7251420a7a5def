#!/usr/bin/env python3
"""Late interaction (MaxSim, ColBERT-style) with a static model, as a
prototype against xy's tool search (D335).

score(query, tool) = mean over the query's tokens of the best cosine
between that token's vector and any token vector of the tool's text (the
text xy embeds: server, name, title, description, parameter names).
Fused with xy's own BM25F and server BM25, taken from
`search_eval --dump-scores`; the rankings are scored by
`search_eval --rankings` (the metrics exist once, in Rust).

    cargo bench -p xy-core --bench search_eval --no-run
    (cd xy-core && ../target/release/deps/search_eval-* --model DIR --dump-scores /tmp/scores.json)
    python3 bench/maxsim.py DIR /tmp/scores.json target/release/deps/search_eval-HASH [--unit token]

A unit is a word (xy's analyzer split, unstemmed; its vector the mean of
its BPE pieces) or, with `--unit token`, a BPE piece. Queries drop xy's
function words. Each variant is scored alone, in place of xy's mean-vector
cosine and beside it; weights are chosen on the tuning half (task id 0-7)
only, the held-out half reported beside. Results: D335.
"""

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from distill_static import read_safetensors  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# xy's function words (xy-core/src/search/text.rs), dropped from queries.
STOPWORDS = set(
    """a about all also an and any are as at be been but by can could do does
    each for from had has have he her here him his how i if in into is it its
    just me my no not of on or our please she should so some such than that
    the their them then there these they this those to us was we were what
    when where which while who whom why will with would you your""".split()
)


def read_model(d):
    t = read_safetensors(d / "model.safetensors")
    m = t.get("embeddings", next(iter(v for k, v in t.items() if k != "scales")))
    if "scales" in t:
        m = m * t["scales"][:, None]
    norm = np.linalg.norm(m, axis=1, keepdims=True)
    norm[norm == 0] = 1
    return m / norm  # unit rows: a dot product is a cosine


def words(s):
    """xy's `words`: identifiers spelt as words (embed.rs)."""
    s = s.replace("_", " ").replace("-", " ")
    return re.sub(r"(?<=[a-z])(?=[A-Z])", " ", s)


def split_terms(text):
    """xy's analyzer split, without the stemmer: non-alphanumerics, case and
    digit changes; lowercased."""
    out = []
    for w in re.split(r"[^0-9A-Za-z\u00C0-\uFFFF]+", text):
        out += [p.lower() for p in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z\u00C0-\uFFFF]+|[0-9]+", w)]
    return [w for w in out if w]


class Embedder:
    def __init__(self, model_dir, unit):
        self.m = read_model(model_dir)
        self.tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.unit = unit  # "token": BPE pieces; "word": a word = mean of its pieces
        self.cache = {}

    def units(self, text, query):
        """(ids or words, matrix of unit vectors) of `text`."""
        if self.unit == "token":
            enc = self.tok.encode(text, add_special_tokens=False)
            # Group the pieces into words (a word starts at a `▁`); a query
            # drops its function words whole, any text its punctuation.
            groups = []
            for i, p in zip(enc.ids, enc.tokens):
                if p.startswith("▁") or not groups:
                    groups.append([])
                groups[-1].append((i, p))
            ids = []
            for g in groups:
                word = "".join(p for _, p in g).lstrip("▁").lower()
                core = "".join(c for c in word if c.isalnum())
                if query and core in STOPWORDS:
                    continue
                ids += [i for i, p in g if any(c.isalnum() for c in p)]
            return ids, self.m[ids]
        ws = [w for w in split_terms(text) if not (query and w in STOPWORDS)]
        vecs = []
        for w in ws:
            if w not in self.cache:
                ids = self.tok.encode(w, add_special_tokens=False).ids
                v = self.m[ids].mean(0) if ids else np.zeros(self.m.shape[1], np.float32)
                n = np.linalg.norm(v)
                self.cache[w] = v / n if n else v
            vecs.append(self.cache[w])
        return ws, np.array(vecs, np.float32).reshape(len(ws), self.m.shape[1])


def doc_text(server, tool):
    parts = [server, tool["name"], tool.get("description") or ""]
    text = "".join(words(p) + ". " for p in parts if p)
    text += "".join(words(p) + " " for p in (tool.get("parameter") or {}))
    return text


def spread(x):
    lo, hi = x.min(), x.max()
    return (x - lo) / (hi - lo) if hi > lo else x


def rank(docs, score):
    order = sorted(
        (i for i in range(len(docs)) if score[i] > 0),
        key=lambda i: (-score[i], docs[i][0], docs[i][1]),
    )
    return [{"server": docs[i][0], "tool": docs[i][1]} for i in order[:100]]


def evaluate(binary, rankings):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(rankings, f)
    out = subprocess.run(
        [str(Path(binary).resolve()), "--rankings", f.name],
        cwd=ROOT / "xy-core", capture_output=True, text=True, check=True,
    ).stdout
    res = {}
    for line in out.splitlines():
        p = line.split()
        if p and p[0] in ("tune", "held-out", "all") and p[0] not in res:
            res[p[0]] = (float(p[3]), float(p[6]))  # sR@5, tR@10
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", type=Path)
    ap.add_argument("scores", type=Path, help="search_eval --dump-scores output (with --model)")
    ap.add_argument("binary", help="the search_eval bench binary")
    ap.add_argument("--verbose", action="store_true", help="every weight of each sweep")
    ap.add_argument("--unit", choices=["token", "word"], default="word")
    args = ap.parse_args()

    emb = Embedder(args.model, args.unit)
    dump = json.loads(args.scores.read_text())
    docs = [tuple(d) for d in dump["docs"]]
    servers = json.loads((ROOT / "bench/livemcpbench/tools.json").read_text())
    tasks = {t["task_id"]: t["question"] for t in json.loads((ROOT / "bench/livemcpbench/tasks.json").read_text())}

    # Every tool's units, in the dump's document order; a server's are all its tools'.
    by_key = {}
    for s in servers:
        for t in s["tools"]:
            by_key[(s["server"], t["name"])] = emb.units(doc_text(s["server"], t), False)
    dunits = [by_key[d] for d in docs]
    assert all(len(d[0]) for d in dunits), "a tool with no unit"
    srv_names = sorted({d[0] for d in docs})
    srv_of = np.array([srv_names.index(d[0]) for d in docs])
    srv_units = [np.concatenate([dunits[i][1] for i in range(len(docs)) if srv_of[i] == s]) for s in range(len(srv_names))]
    # Inverse document frequency of each unit among the tools.
    n = len(docs)
    df = {}
    for keys, _ in dunits:
        for k in set(keys):
            df[k] = df.get(k, 0) + 1
    idf = lambda k: np.log(1 + (n - df.get(k, 0) + 0.5) / (df.get(k, 0) + 0.5))
    distinct = len(df)
    print(f"unit {args.unit}: {distinct} distinct units in the tools, "
          f"{sum(len(u[0]) for u in dunits)} in all; dims {emb.m.shape[1]}")

    # All tools' unit vectors in one matrix, each tool a run of rows.
    allv = np.concatenate([d[1] for d in dunits])
    starts = np.cumsum([0] + [len(d[1]) for d in dunits[:-1]])
    sstarts = np.cumsum([0] + [len(u) for u in srv_units[:-1]])
    allsv = np.concatenate(srv_units)

    # Each tool's baseline: the mean over every distinct tool unit u of
    # u's best cosine within the tool. A long text is near anything; this
    # is what it scores for a query about nothing in particular.
    uniq = np.unique(allv, axis=0)
    base = sum(
        np.maximum.reduceat(allv @ uniq[i : i + 256].T, starts, axis=0).sum(1)
        for i in range(0, len(uniq), 256)
    ) / len(uniq)
    print(f"corr(baseline, log units) {np.corrcoef(base, np.log([len(d[1]) for d in dunits]))[0, 1]:.2f}")

    per = {}
    qlens = []
    for tid, e in dump["tasks"].items():
        # xy reads a query up to its first 1,024 bytes (MAX_QUERY).
        q = tasks[tid].encode()[:1024].decode(errors="ignore")
        qk, qv = emb.units(q, True)
        qlens.append(len(qk))
        if len(qk) == 0:
            best = np.zeros((len(docs), 1), np.float32)
            sbest = np.zeros((len(srv_names), 1), np.float32)
            w = np.ones(1, np.float32)
            dq = np.zeros(len(docs), np.float32)
        else:
            # best[d, t]: the best cosine of query unit t with any unit of tool d.
            best = np.maximum.reduceat(allv @ qv.T, starts, axis=0)
            sbest = np.maximum.reduceat(allsv @ qv.T, sstarts, axis=0)
            w = np.array([idf(k) for k in qk], np.float32)
            # The other direction: each tool unit's best cosine with the query.
            lens = np.diff(np.append(starts, len(allv)))
            dq = np.add.reduceat((allv @ qv.T).max(1), starts) / lens
        # Centred: each query unit's best less its mean over the tools, over
        # its spread, so a piece that is near everything counts for nothing.
        z = (best - best.mean(0)) / (best.std(0) + 1e-6)
        per[tid] = {
            "tool": np.array(e["tool"]), "server": np.array(e["server"]), "cos": np.array(e["cosine"]),
            "ms": spread(best.mean(1)),
            "msi": spread((best * w).sum(1) / w.sum()),
            "msz": spread(z.mean(1)),
            "msb": spread(best.mean(1) - base),
            "mst3": spread(np.maximum(best - 0.3, 0).mean(1)),
            "mst5": spread(np.maximum(best - 0.5, 0).mean(1)),
            "mssym": spread(0.5 * best.mean(1) + 0.5 * dq),
            "mssymi": spread(0.5 * (best * w).sum(1) / w.sum() + 0.5 * dq),
            "sms": spread(sbest.mean(1))[srv_of],
        }
    print(f"query units: mean {np.mean(qlens):.1f}, max {max(qlens)}; per query, against the "
          f"distinct tool units: {np.mean(qlens):.0f} x {distinct} x {emb.m.shape[1]} dims "
          f"= {np.mean(qlens) * distinct * emb.m.shape[1] / 1e6:.1f} M multiply-adds")

    def fused(f):
        return {tid: rank(docs, f(p)) for tid, p in per.items()}

    def show(name, r):
        print(f"{name:<48} " + "  ".join(f"{k} {r[k][0]:.3f}/{r[k][1]:.3f}" for k in ("tune", "held-out", "all")), flush=True)

    def sweep(name, make, grid):
        best = None
        for g in grid:
            r = evaluate(args.binary, fused(make(g)))
            t = r["tune"][0] + r["tune"][1]
            if args.verbose:
                print(f"  {name} {g}: tune {r['tune'][0]:.3f}/{r['tune'][1]:.3f}", flush=True)
            if best is None or t > best[0] + 1e-9:
                best = (t, g, r)
        show(f"{name} (best on tune: {best[1]})", best[2])

    show("xy default (BM25 + 0.5 server + 2.0 cosine)", evaluate(args.binary, fused(lambda p: p["tool"] + 0.5 * p["server"] + 2.0 * p["cos"])))
    show("BM25 + 0.5 server (no model)", evaluate(args.binary, fused(lambda p: p["tool"] + 0.5 * p["server"])))
    show("mean-vector cosine alone", evaluate(args.binary, fused(lambda p: p["cos"] + 1e-9)))
    variants = {
        "ms": "MaxSim",
        "msi": "MaxSim, IDF-weighted over query units",
        "msz": "MaxSim, centred per query unit",
        "msb": "MaxSim less the tool's baseline",
        "mst3": "MaxSim, cosines over 0.3 only",
        "mst5": "MaxSim, cosines over 0.5 only",
        "mssym": "MaxSim, both directions",
        "mssymi": "MaxSim, both directions, query side IDF-weighted",
    }
    W = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0]
    for k, name in variants.items():
        show(f"{name}: alone", evaluate(args.binary, fused(lambda p: p[k] + 1e-9)))
        sweep(f"{name}: replaces cosine, w", lambda w: lambda p: p["tool"] + 0.5 * p["server"] + w * p[k], W)
        sweep(f"{name}: added to default, w", lambda w: lambda p: p["tool"] + 0.5 * p["server"] + 2.0 * p["cos"] + w * p[k], W)
    sweep("MaxSim, both directions, with cosine c and MaxSim w, (c, w)",
          lambda g: lambda p: p["tool"] + 0.5 * p["server"] + g[0] * p["cos"] + g[1] * p["mssym"],
          [(c, w) for c in (0.5, 1.0, 2.0, 4.0) for w in (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)])
    sweep("server MaxSim added to default, w", lambda w: lambda p: p["tool"] + 0.5 * p["server"] + 2.0 * p["cos"] + w * p["sms"], W)


if __name__ == "__main__":
    main()
