#!/usr/bin/env python3
"""Spawn to first `tools/list` answer (issue 30, SPEC §22), over pipes, for
@modelcontextprotocol/server-memory@2026.8.31 started three ways:

  npx     `npx -y <pkg>@<ver>`, npm's cache warm (one untimed start first)
  pinned  the command `xyctl add --npm` writes: the absolute `node` and the
          entry point inside $XDG_DATA_HOME/xy/packages/<name>/<version>/
          (installed here into a temp data dir by the release `xyctl`)
  node    `node <entry>` of a separate install of the same version (the
          interop cache's, else a plain `npm install` into target/bench/)

Each timed run: spawn, write `initialize`, read its answer, write
`notifications/initialized` and `tools/list`, read that answer; the wall
time from before the spawn to the `tools/list` answer. The variants are
interleaved run by run, so load drifts hit all three alike. Prints median,
min and mean per variant, and pinned's median against node's.

usage: python3 bench/pinned_start.py [--runs 10]
       (run `cargo build --release -p xy-cli` first; needs npm and the
       npm registry for the install and the warm-up)
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.path.join(ROOT, "target")
XYCTL = os.path.join(TARGET, os.environ.get("XY_BENCH_PROFILE", "release"), "xyctl")
PKG = "@modelcontextprotocol/server-memory"
VER = "2026.8.31"
ENTRY = os.path.join("node_modules", PKG, "dist", "index.js")

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "pinned-bench", "version": "1"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


def node_install():
    """A second install of the same version, outside xy's data dir."""
    cache = os.environ.get("XY_INTEROP_CACHE", os.path.join(TARGET, "interop"))
    d = os.path.join(cache, f"server-memory-{VER}")
    if os.path.exists(os.path.join(d, ENTRY)):
        return d
    d = os.path.join(TARGET, "bench", f"server-memory-{VER}")
    if not os.path.exists(os.path.join(d, ENTRY)):
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel", "error",
                        "--prefix", d, f"{PKG}@{VER}"], check=True)
    return d


def pinned_install(work):
    """`xyctl add --npm` into a private data dir; the command it wrote."""
    env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(work, "c"),
               XDG_STATE_HOME=os.path.join(work, "s"), XDG_DATA_HOME=os.path.join(work, "d"),
               XY_SOCKET=os.path.join(work, "x.sock"))
    os.makedirs(os.path.join(work, "c", "xy", "servers"))
    subprocess.run([XYCTL, "--no-spawn", "add", "mem", "--npm", f"{PKG}@{VER}", "--yes",
                    "--no-start", "--port", "8999"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    rec = os.path.join(work, "d", "xy", "packages", "mem", VER, "xy-install.json")
    with open(rec) as f:
        r = json.load(f)
    return [r["runtime"], r["entry"]]


def one(cmd, env):
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=env)
    try:
        p.stdin.write((json.dumps(INIT) + "\n").encode())
        p.stdin.flush()
        while json.loads(p.stdout.readline()).get("id") != 1:
            pass
        p.stdin.write((json.dumps(INITIALIZED) + "\n" + json.dumps(LIST) + "\n").encode())
        p.stdin.flush()
        while True:
            line = p.stdout.readline()
            if not line:
                raise RuntimeError(f"{cmd[0]} closed before answering tools/list")
            m = json.loads(line)
            if m.get("id") == 2:
                break
        dt = (time.perf_counter() - t0) * 1e3
        assert m["result"]["tools"], m
        return dt
    finally:
        p.kill()
        p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    a = ap.parse_args()
    if not os.path.exists(XYCTL):
        sys.exit(f"{XYCTL} missing: cargo build --release -p xy-cli")
    work = tempfile.mkdtemp(prefix="xy-pinned-bench-")
    try:
        memfile = os.path.join(work, "memory.json")
        env = dict(os.environ, MEMORY_FILE_PATH=memfile, npm_config_update_notifier="false")
        node = shutil.which("node")
        variants = {
            "npx": ["npx", "-y", f"{PKG}@{VER}"],
            "pinned": pinned_install(work),
            "node": [node, os.path.join(node_install(), ENTRY)],
        }
        for cmd in variants.values():  # warm: npm's cache, the page cache
            one(cmd, env)
        times = {k: [] for k in variants}
        for _ in range(a.runs):
            for k, cmd in variants.items():
                times[k].append(one(cmd, env))
        for k, ts in times.items():
            print(f"{k:7} median {statistics.median(ts):6.1f} ms  min {min(ts):6.1f}  "
                  f"mean {statistics.mean(ts):6.1f}  (n={len(ts)})  {' '.join(variants[k])}")
        ratio = statistics.median(times["pinned"]) / statistics.median(times["node"])
        print(f"pinned/node median: {ratio:.3f}  npx/pinned median: "
              f"{statistics.median(times['npx']) / statistics.median(times['pinned']):.2f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
