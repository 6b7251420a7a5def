#!/usr/bin/env python3
"""SPEC §26's session-start figures (issue 40): 30 on-demand stdio servers
(`xy-test-tools`, 10 tools each), answered from the ledger while idle.

  1. Seed: a first xyd starts every server once (xy lists it), then exits;
     a fresh xyd starts with every server idle and only the ledger files.
  2. Session start: a client does `initialize`, `notifications/initialized`
     and `tools/list` on each of the 30 servers' own ports, the 30 in
     parallel as AI clients do (one thread per server), then sequentially;
     the wall time of all 30 (target <= 300 ms) and the children of xyd in
     the process table afterwards (target 0). Each answer must carry
     `_meta["xy/ledger"]`.
  3. A session that calls a tool of 2 servers: the children afterwards
     (target 2).
  4. The first call to an idle server (the session already started from
     the ledger) against the same child's cold start without xy (spawn,
     `initialize`, `notifications/initialized`, `tools/call` over its
     pipes): median over the idle servers (target: <= cold start + 5 ms).

Standard library only. usage: python3 bench/session_start.py [--servers 30]
  [--rounds 5] (run `cargo build --release -p xy-daemon -p xy-testbins`
  first, or XY_BENCH_PROFILE=debug for the debug builds)
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _xy import BIN, PROFILE, V2025, Client, Daemon, free_port, need, wait  # noqa: E402

TOOLS = os.path.join(BIN, "xy-test-tools")


def states(d):
    return {e["name"]: e["state"] for e in d.list()}


def cold_start(tools_file):
    """The child alone: spawn, initialize, initialized, tools/call (ms)."""
    t0 = time.perf_counter()
    p = subprocess.Popen([TOOLS, "--file", tools_file], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def send(m):
        p.stdin.write((json.dumps(m) + "\n").encode())
        p.stdin.flush()

    send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
          "params": {"protocolVersion": V2025, "capabilities": {},
                     "clientInfo": {"name": "bench", "version": "1"}}})
    p.stdout.readline()
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
          "params": {"name": "t0", "arguments": {}}})
    p.stdout.readline()
    ms = (time.perf_counter() - t0) * 1000
    p.kill()
    p.wait()
    return ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--servers", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    need("xyd", "xy-test-tools")
    d = Daemon(prefix="xyss", gateway=False)
    lists = os.path.join(d.tmp, "lists")
    os.makedirs(lists)
    servers = []
    for i in range(args.servers):
        name = f"s{i:02}"
        tools = [{"name": f"t{k}", "description": f"Tool {k} of server {i}: does a thing.",
                  "inputSchema": {"type": "object",
                                  "properties": {"q": {"type": "string"}}}}
                 for k in range(10)]
        tf = os.path.join(lists, f"{name}.json")
        with open(tf, "w") as f:
            json.dump({"tools": tools}, f)
        port = free_port()
        d.server(name, f'command "{TOOLS}"\nargs "--file" "{tf}"\ntransport "stdio"\n'
                       f'port {port}\non-demand {{\n    idle-stop "10m"\n}}\n')
        servers.append((name, port, tf))
    try:
        # 1. Seed the ledgers, then a fresh daemon.
        d.start()
        wait("servers idle", lambda: set(states(d).values()) == {"idle"})
        for name, _, _ in servers:
            d.rpc("start", {"name": name})
        for name, _, _ in servers:
            wait(f"{name} listed", lambda n=name: len(
                (d.rpc("tools", {"name": n})["result"].get("current") or {})
                .get("tools", [])) == 10)
            # The child's capability gates, kept beside the listing (D280).
            wait(f"{name} gates kept", lambda n=name: "gates" in json.load(
                open(os.path.join(d.state, "tools", f"{n}.json"))))
        d.stop()
        parallel, sequential, kids_after = [], [], []
        firsts, colds = [], []
        for rnd in range(args.rounds):
            d.start()
            wait("servers idle", lambda: len(states(d)) == len(servers)
                 and set(states(d).values()) == {"idle"})
            # 2. Session start, 30 in parallel.
            results = [None] * len(servers)

            def one(k, port):
                c = Client(port)
                results[k] = (c, c.start_session())

            t0 = time.perf_counter()
            threads = [threading.Thread(target=one, args=(k, port))
                       for k, (_, port, _) in enumerate(servers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            parallel.append((time.perf_counter() - t0) * 1000)
            for _, (init, listed) in results:
                assert "xy/ledger" in init["result"].get("_meta", {}), init
                assert "xy/ledger" in listed["result"].get("_meta", {}), listed
                assert len(listed["result"]["tools"]) == 10, listed
            t0 = time.perf_counter()
            for _, port, _ in servers:
                Client(port).start_session()
            sequential.append((time.perf_counter() - t0) * 1000)
            kids_after.append(len(d.children()))
            # 4. First calls to idle servers (sessions from the ledger).
            for k in range(2, len(servers)):
                c = results[k][0]
                t0 = time.perf_counter()
                r = c.request("tools/call", {"name": "t0", "arguments": {}})
                firsts.append((time.perf_counter() - t0) * 1000)
                assert r["result"]["content"][0]["text"] == "called t0", r
                colds.append(cold_start(servers[k][2]))
                if k == 2:
                    # 3. After calls to 2 servers' tools: 2 children (this
                    # one and the next, called below).
                    c1 = results[1][0]
                    c1.request("tools/call", {"name": "t0", "arguments": {}})
                    two = len(d.children())
                    print(f"round {rnd}: children after calls to 2 servers: {two}",
                          file=sys.stderr)
                    if rnd == 0:
                        children_two = two
            d.stop()
        print(f"{len(servers)} on-demand stdio servers (xy-test-tools, 10 tools each), "
              f"{PROFILE} build, {args.rounds} rounds\n")
        print("| figure | median | min | max | target |")
        print("|---|---:|---:|---:|---|")
        row = lambda label, xs, target: print(  # noqa: E731
            f"| {label} | {statistics.median(xs):.1f} | {min(xs):.1f} | {max(xs):.1f} | {target} |")
        row(f"session start, {len(servers)} servers in parallel (ms)", parallel, "<= 300 ms")
        row(f"session start, {len(servers)} servers one after another (ms)", sequential, "")
        row("children of xyd after the session starts", kids_after, "0")
        row("first call to an idle server, through xy (ms)", firsts, "")
        row("cold start of the same child alone (ms)", colds, "")
        print(f"\nchildren after calls to 2 servers: {children_two} (target 2)")
        print(f"first call - cold start: {statistics.median(firsts) - statistics.median(colds):+.1f}"
              " ms median (target <= +5 ms)")
    finally:
        d.remove()


if __name__ == "__main__":
    sys.exit(main())
