#!/usr/bin/env python3
"""What a client pays in tool definitions, in tokens (SPEC §26,
docs/aggregate.md): LiveMCPBench's 70 servers / 526 tools served by a
release xyd from its ledger (0 children, as `bench/retrieval.py` sets it
up), listed four ways:

  per server   one client entry per server: every server's own
               `tools/list` at `/<server>/mcp` (the sum)
  full         one entry, the aggregate `/mcp` in mode `full`
  search       one entry, mode `search`: the first `tools/list`
               (`find_tools` + `call_tool`)
  find_tools   what one `find_tools {query}` answers at its default
               limit (8), median and p90 over the 95 task questions: the
               definitions a `search` client then adds to its context

The definitions are counted as the compact JSON of the `tools` array
(what a client turns into its model API's tool list), with three
tokenizers from the PyPI wheel `litellm` (1.110.2; the files' sha256 are
checked): OpenAI's `o200k_base` and `cl100k_base` (through `tiktoken`) and
the Claude tokenizer Anthropic published (`anthropic_tokenizer.json`,
through `tokenizers`; today's Claude models count differently, so read
that column as an estimate). `tiktoken` and `tokenizers` are installed
into the cache (`$XY_BENCH_CACHE`, default `target/bench-cache/`).

    python3 bench/tool_tokens.py [--json]

Needs `cargo build --release -p xy-daemon -p xy-cli -p xy-testbins`.
"""

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _xy  # noqa: E402
import retrieval  # noqa: E402

LITELLM = "1.110.2"
TOKENIZERS = {  # file in the wheel's litellm/litellm_core_utils/tokenizers/ -> sha256
    # tiktoken's cache names its files by the SHA-1 of their download URL.
    "fb374d419588a4632f3f557e76b4b70aebbca790":
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",  # o200k_base
    "9b5ad71b2ce5302211f9c61530b329a4922fc6a4":
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",  # cl100k_base
    "anthropic_tokenizer.json":
        "c241737df24b4e7f7c9af4fdcee29a0ca903dcb288a8b753bc346a3092911767",
}
PYLIBS = ["tiktoken==0.12.0", "tokenizers==0.22.1"]


def say(msg=""):
    print(msg, file=sys.stderr, flush=True)


def counters(cache):
    """name -> function(text) -> tokens, for the three tokenizers."""
    lib, tok = cache / "pylib", cache / f"litellm-{LITELLM}-tokenizers"
    if not (lib / "tiktoken").exists() or not (lib / "tokenizers").exists():
        say(f"pip install --target {lib} {' '.join(PYLIBS)}")
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--target", str(lib)]
                       + PYLIBS, check=True, timeout=900)
    if not all((tok / f).exists() for f in TOKENIZERS):
        dl = cache / "litellm-wheel"
        say(f"pip download --no-deps litellm=={LITELLM} -d {dl}")
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                        "--only-binary=:all:", f"litellm=={LITELLM}", "-d", str(dl)],
                       check=True, timeout=900)
        wheel = next(dl.glob(f"litellm-{LITELLM}-*.whl"))
        tok.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheel) as z:
            for f in TOKENIZERS:
                (tok / f).write_bytes(z.read(f"litellm/litellm_core_utils/tokenizers/{f}"))
    for f, want in TOKENIZERS.items():
        got = hashlib.sha256((tok / f).read_bytes()).hexdigest()
        if got != want:
            raise SystemExit(f"{tok / f}: sha256 {got}, expected {want}: refused")
    sys.path.insert(0, str(lib))
    os.environ["TIKTOKEN_CACHE_DIR"] = str(tok)
    import tiktoken
    from tokenizers import Tokenizer
    o200k, cl100k = tiktoken.get_encoding("o200k_base"), tiktoken.get_encoding("cl100k_base")
    claude = Tokenizer.from_file(str(tok / "anthropic_tokenizer.json"))
    return {"o200k": lambda s: len(o200k.encode(s, disallowed_special=())),
            "cl100k": lambda s: len(cl100k.encode(s, disallowed_special=())),
            "claude": lambda s: len(claude.encode(s).ids)}


def measure(count, tools):
    text = json.dumps(tools, separators=(",", ":"), ensure_ascii=False)
    return {"tools": len(tools), "bytes": len(text.encode())} | {k: f(text) for k, f in count.items()}


def listings(d, servers, names, tasks):
    """Every listing the table reads, from a freshly started xyd whose
    servers are all idle; the children before and after."""
    d.start()
    _xy.wait("servers idle", lambda: retrieval.idle_count(d, len(servers)), 120)
    out = {"children_before": len(d.children())}
    per = []
    for s in servers:
        c = _xy.Client(d.gateway_port, f"/{names[s['server']]}/mcp")
        _, listed = c.start_session()
        per.append(listed["result"]["tools"])
    _, full = _xy.Client(d.gateway_port, "/p/full/mcp").start_session()
    c = _xy.Client(d.gateway_port)
    _, search = c.start_session()
    found = []
    for t in tasks:
        r = c.request("tools/call", {"name": "find_tools", "arguments": {"query": t["question"]}})
        found.append(r["result"]["structuredContent"]["tools"])
    out.update(per_server=per, full=full["result"]["tools"], search=search["result"]["tools"],
               found=found, children_after=len(d.children()))
    d.stop()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print every figure as JSON")
    args = ap.parse_args()
    _xy.need("xyd", "xy-test-tools")
    cache = retrieval.bench_cache()
    count = counters(cache)
    _, source, servers, tasks, names, files = retrieval.prepare(cache)
    d = _xy.Daemon(prefix="xytok")
    try:
        retrieval.configure(d, servers, names, files, None)
        say(f"seeding the ledger of {len(servers)} servers…")
        retrieval.seed(d, servers, names)
        say("restarting xyd: the listings come from the ledger")
        got = listings(d, servers, names, tasks)
    finally:
        d.remove()
    if got["children_before"] or got["children_after"]:
        raise SystemExit(f"children of xyd while listing: {got['children_before']} before, "
                         f"{got['children_after']} after (expected 0)")
    per = [measure(count, tools) for tools in got["per_server"]]
    rows = {"per server": {k: sum(p[k] for p in per) for k in per[0]},
            "full": measure(count, got["full"]),
            "search": measure(count, got["search"])}
    found = sorted((measure(count, tools) for tools in got["found"]), key=lambda m: m["o200k"])
    rows["find_tools median"] = found[len(found) // 2]
    rows["find_tools p90"] = found[int(len(found) * 0.9)]
    figures = {"corpus": source, "servers": len(servers), "rows": rows,
               "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"{len(servers)} servers from the ledger, 0 children ({source})")
    print(f"{'listing':20} {'tools':>6} {'bytes':>9} {'o200k':>8} {'cl100k':>8} {'claude':>8}")
    for name, m in rows.items():
        print(f"{name:20} {m['tools']:6} {m['bytes']:9,} {m['o200k']:8,} {m['cl100k']:8,} "
              f"{m['claude']:8,}")
    print(f"({figures['date']}; find_tools rows: its answer's definitions at the default limit, "
          "ordered by o200k)")


if __name__ == "__main__":
    sys.exit(main())
