#!/usr/bin/env python3
"""What xy's gateway (SPEC §20) adds to a request (issue 28's bench).

One xyd (release build) with the gateway on, serving two servers:
`web`, an HTTP server (`xy-test-mcp --port P`, rmcp's streamable HTTP, 2025
session answered as SSE), and `bridged`, a stdio server (`xy-test-mcp
--stdio`) behind xy's bridge. For each, `tools/call echo` round trips from
one sequential keep-alive client with one 2025 session, `xy-mcp-load`
(xy-testbins: Rust, blocking socket, `httparse`), on four paths:

  web direct       http://127.0.0.1:P/mcp            (no xy in the path)
  web gateway      http://127.0.0.1:G/web/mcp        (xy's reverse proxy)
  bridged own      http://127.0.0.1:S/mcp            (the bridge's own port)
  bridged gateway  http://127.0.0.1:G/bridged/mcp    (the gateway, same bridge)

The rows run interleaved for --rounds rounds; the table gives each row's
median p50 and p99 over the rounds, the load generator's CPU per request
(it must stay well under the latencies to not be the bottleneck), and the
gateway's added p50: web gateway - web direct (target <= 100 us) and
bridged gateway / bridged own (target within 10 %).

usage: python3 bench/gateway.py [--requests 2000] [--rounds 5]
       (builds `cargo build --release -p xy-daemon -p xy-testbins --bins`
       unless XYBENCH_NO_BUILD=1; XY_BENCH_PROFILE=debug uses debug builds)
"""

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROFILE = os.environ.get("XY_BENCH_PROFILE", "release")
BIN = os.path.join(ROOT, "target", PROFILE)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def load(port, path, n):
    out = subprocess.run([os.path.join(BIN, "xy-mcp-load"), "http", str(port), path,
                          "latency", str(n)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def wait_served(port, path, timeout=60):
    end = time.time() + timeout
    while True:
        r = subprocess.run([os.path.join(BIN, "xy-mcp-load"), "http", str(port), path,
                            "latency", "1"], capture_output=True, text=True)
        if r.returncode == 0:
            return
        if time.time() > end:
            raise RuntimeError(f"127.0.0.1:{port}{path} not served: {r.stderr.strip()}")
        time.sleep(0.2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    if PROFILE == "release" and not os.environ.get("XYBENCH_NO_BUILD"):
        subprocess.run(["cargo", "build", "--release", "-p", "xy-daemon", "-p", "xy-testbins",
                        "--bins"], cwd=ROOT, check=True)

    tmp = tempfile.mkdtemp(prefix="xygw", dir="/tmp")
    gw, web, bridged = free_port(), free_port(), free_port()
    child = os.path.join(BIN, "xy-test-mcp")
    servers = os.path.join(tmp, "c", "xy", "servers")
    os.makedirs(servers)
    with open(os.path.join(tmp, "c", "xy", "xy.kdl"), "w") as f:
        f.write(f"gateway {{\n    port {gw}\n}}\n")
    with open(os.path.join(servers, "web.kdl"), "w") as f:
        f.write(f'command "{child}"\nargs "--port" "{web}" "--tools" "echo"\nport {web}\n')
    with open(os.path.join(servers, "bridged.kdl"), "w") as f:
        f.write(f'command "{child}"\nargs "--stdio" "--era" "2025" "--tools" "echo"\n'
                f'transport "stdio"\nport {bridged}\n')
    env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(tmp, "c"),
               XDG_STATE_HOME=os.path.join(tmp, "s"), XY_SOCKET=os.path.join(tmp, "x.sock"),
               XY_LOG="warn")
    env.pop("XDG_RUNTIME_DIR", None)
    xyd = subprocess.Popen([os.path.join(BIN, "xyd")], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows = [
        ("web direct", web, "/mcp"),
        ("web gateway", gw, "/web/mcp"),
        ("bridged own port", bridged, "/mcp"),
        ("bridged gateway", gw, "/bridged/mcp"),
    ]
    figures = {name: [] for name, _, _ in rows}
    try:
        for _, port, path in rows:
            wait_served(port, path)
        for _ in range(args.rounds):
            for name, port, path in rows:
                figures[name].append(load(port, path, args.requests))
    finally:
        xyd.send_signal(signal.SIGTERM)
        xyd.wait()
        shutil.rmtree(tmp, ignore_errors=True)

    med = {name: {k: statistics.median(r[k] for r in runs)
                  for k in ("p50_us", "p99_us", "client_cpu_us_per_request")}
           for name, runs in figures.items()}
    print(f"tools/call echo, {args.requests} sequential requests x {args.rounds} rounds "
          f"(median of the rounds), {PROFILE} build\n")
    print("| path | p50 µs | p99 µs | load generator CPU µs/req |")
    print("|---|---:|---:|---:|")
    for name, _, _ in rows:
        m = med[name]
        print(f"| {name} | {m['p50_us']:.0f} | {m['p99_us']:.0f} | "
              f"{m['client_cpu_us_per_request']:.1f} |")
    added = med["web gateway"]["p50_us"] - med["web direct"]["p50_us"]
    ratio = med["bridged gateway"]["p50_us"] / med["bridged own port"]["p50_us"] - 1
    print(f"\nHTTP server: the gateway adds {added:.0f} µs p50 (target <= 100 µs)")
    print(f"stdio server: gateway vs own port {ratio * 100:+.1f} % p50 (target within 10 %)")
    print("per-round p50s:", json.dumps({n: [round(r["p50_us"]) for r in runs]
                                         for n, runs in figures.items()}))


if __name__ == "__main__":
    sys.exit(main())
