#!/usr/bin/env python3
"""The fleet figure of issue 30 (SPEC §22, README): K AI-client sessions
each using the same S stdio MCP servers, summed PSS
(`/proc/<pid>/smaps_rollup`) of every process involved.

  npx   each session spawns its own copies as client configs say:
        `npx -y <pkg>@<ver>` (npm's cache warm): K*S npm-exec processes
        plus the node server each one starts
  node  each session spawns its own copies of `node <entry>` (what a
        pinned client config would run without xy): K*S processes
  xy    one release `xyd` running one copy of each server, and one
        `xyctl connect <server>` per session per server (K*S bridges)
  one   the same `xyd`, and one `xyctl connect --one` per session (K
        bridges to the aggregate `/mcp`, what `xyctl clients apply
        <client> --one` writes for a stdio-only client)

Every session is real: each process (or bridge) gets `initialize`,
`notifications/initialized` and `tools/list` answered before the
measurement, and keeps its pipes open while PSS is read: 3 s after the
answers ("busy") and 20 s after them ("idle", once node's memory reducer
has shrunk every idle V8 heap). Servers: @modelcontextprotocol/server-{memory,filesystem,
everything,sequential-thinking}@2026.8.31 from the interop cache
($XY_INTEROP_CACHE, else target/interop; `.ci/run` installs it).

usage: python3 bench/fleet_pss.py [--sessions 6]
       (run `cargo build --release -p xy-daemon -p xy-cli` first)
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.path.join(ROOT, "target", os.environ.get("XY_BENCH_PROFILE", "release"))
CACHE = os.environ.get("XY_INTEROP_CACHE", os.path.join(ROOT, "target", "interop"))
VER = "2026.8.31"
SERVERS = ["memory", "filesystem", "everything", "sequential-thinking"]

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "fleet-bench", "version": "1"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


def entry(s):
    p = os.path.join(CACHE, f"server-{s}-{VER}", "node_modules", "@modelcontextprotocol",
                     f"server-{s}", "dist", "index.js")
    if not os.path.exists(p):
        sys.exit(f"{p} missing: install the interop cache (.ci/run) or set XY_INTEROP_CACHE")
    return p


def server_args(s, work):
    return [work] if s == "filesystem" else []


def session(cmd, env):
    """A process that has answered initialize and tools/list; left open."""
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=env)
    p.stdin.write((json.dumps(INIT) + "\n").encode())
    p.stdin.flush()
    while json.loads(p.stdout.readline()).get("id") != 1:
        pass
    p.stdin.write((json.dumps(INITIALIZED) + "\n" + json.dumps(LIST) + "\n").encode())
    p.stdin.flush()
    while True:
        line = p.stdout.readline()
        if not line:
            raise RuntimeError(f"{cmd} closed before answering tools/list")
        if json.loads(line).get("id") == 2:
            return p


def children():
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                kids.setdefault(ppid, []).append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    return kids


def tree(pids):
    kids = children()
    out, todo = set(), list(pids)
    while todo:
        p = todo.pop()
        if p not in out:
            out.add(p)
            todo.extend(kids.get(p, []))
    return out


def pss_kib(pid):
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    return 0


# When PSS is read: 3 s after the sessions' first answers (their listings
# just built), and again when every process has been idle long enough for
# node's memory reducer to shrink its V8 heap (it runs after ~8-12 s
# without JavaScript work): what a fleet of sessions weighs most of the day.
READINGS = (("busy", 3), ("idle", 20))


def reading(pids):
    all_pids = tree(pids)
    total = sum(pss_kib(p) for p in all_pids)
    if os.environ.get("XY_FLEET_DETAIL"):
        by = {}
        for p in all_pids:
            with open(f"/proc/{p}/comm") as f:
                comm = f.read().strip()
            n, kib = by.get(comm, (0, 0))
            by[comm] = (n + 1, kib + pss_kib(p))
        for comm, (n, kib) in sorted(by.items()):
            print(f"    {comm:20} x{n:<3} {kib / 1024:8.1f} MiB", file=sys.stderr)
    return total, len(all_pids)


def measure(pids):
    """The summed PSS of `pids` and their descendants at each of READINGS."""
    start, out = time.time(), {}
    for name, at in READINGS:
        time.sleep(max(0.0, start + at - time.time()))
        if os.environ.get("XY_FLEET_DETAIL"):
            print(f"  {name}:", file=sys.stderr)
        out[name] = reading(pids)
    return out


def stop(procs):
    for p in procs:
        p.kill()
    for p in procs:
        p.wait()


def own_copies(k, work, env, npx):
    procs = []
    try:
        for i in range(k):
            for s in SERVERS:
                e = dict(env, MEMORY_FILE_PATH=os.path.join(work, f"mem-{i}.json"))
                cmd = (["npx", "-y", f"@modelcontextprotocol/server-{s}@{VER}"] if npx
                       else ["node", entry(s)]) + server_args(s, work)
                procs.append(session(cmd, e))
        return measure([p.pid for p in procs])
    finally:
        stop(procs)


def free_port():
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def with_xy(k, work, env, one=False):
    work = os.path.join(work, "one" if one else "each")
    xenv = dict(env, XDG_CONFIG_HOME=os.path.join(work, "c"),
                XDG_STATE_HOME=os.path.join(work, "s"), XDG_DATA_HOME=os.path.join(work, "d"),
                XY_SOCKET=os.path.join(work, "x.sock"), XY_LOG="warn",
                MEMORY_FILE_PATH=os.path.join(work, "mem-xy.json"))
    os.makedirs(os.path.join(work, "c", "xy", "servers"), exist_ok=True)
    with open(os.path.join(work, "c", "xy", "xy.kdl"), "w") as f:
        # The aggregate lives on the gateway; per-server bridges need none.
        gateway = free_port() if one else 0
        f.write(f"gateway {{ port {gateway}; }}\nconsole {{ port 0; }}\n")
    xyd = subprocess.Popen([os.path.join(TARGET, "xyd")], env=xenv,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs = []
    try:
        xyctl = os.path.join(TARGET, "xyctl")
        deadline = time.time() + 30
        while subprocess.run([xyctl, "--no-spawn", "list"], env=xenv, capture_output=True
                             ).returncode != 0:
            if time.time() > deadline:
                raise RuntimeError("xyd did not come up")
            time.sleep(0.1)
        for n, s in enumerate(SERVERS):
            subprocess.run([xyctl, "--no-spawn", "add", s, "--stdio", "--no-sandbox",
                            "--port", str(47100 + n), "--", "node", entry(s)]
                           + server_args(s, work), env=xenv, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(k):
            if one:
                procs.append(session([xyctl, "--no-spawn", "connect", "--one"], xenv))
                continue
            for s in SERVERS:
                procs.append(session([xyctl, "--no-spawn", "connect", s], xenv))
        return measure([xyd.pid] + [p.pid for p in procs])
    finally:
        stop(procs)
        xyd.terminate()
        xyd.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=6)
    a = ap.parse_args()
    k, s = a.sessions, len(SERVERS)
    env = dict(os.environ, npm_config_update_notifier="false")
    work = tempfile.mkdtemp(prefix="xy-fleet-")
    try:
        # Warm npm's cache for the npx row.
        for srv in SERVERS:
            session(["npx", "-y", f"@modelcontextprotocol/server-{srv}@{VER}"]
                    + server_args(srv, work), env).kill()
        rows = [
            (f"own copies via npx ({k}x{s})", own_copies(k, work, env, True)),
            (f"own copies via node ({k}x{s})", own_copies(k, work, env, False)),
            (f"xy: {s} servers + {k * s} xyctl connect", with_xy(k, work, env)),
            (f"xy: {s} servers + {k} xyctl connect --one", with_xy(k, work, env, one=True)),
        ]
        for when, _ in READINGS:
            print(f"{when}:")
            for name, r in rows:
                kib, n = r[when]
                print(f"  {name:40} {kib / 1024:8.1f} MiB PSS  ({n} processes)")
            t = [r[when][0] for _, r in rows]
            print(f"  npx / xy: {t[0] / t[2]:.1f}x, node / xy: {t[1] / t[2]:.1f}x, "
                  f"node / xy --one: {t[1] / t[3]:.2f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
