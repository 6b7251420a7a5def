#!/usr/bin/env python3
"""What xy adds to a call to a remote server (issue 31's bench, SPEC §23).

Two "remote" servers on loopback, started by this script, not by xy:
`xy-test-mcp --port P --tools echo` (rmcp's streamable HTTP, a 2025
session answered as SSE), and the same with `--require-auth "Bearer …"`
(a server behind a static token). One xyd (release build) has a server
file for each: `url "http://127.0.0.1:P/mcp"` at its own port, and the
bearer one with `headers { Authorization secret="TOKEN" }` from a
`secrets { TOKEN file=… }`. `tools/call echo` round trips from one
sequential keep-alive client with one 2025 session, `xy-mcp-load`
(xy-testbins: Rust, blocking socket, `httparse`), on four paths:

  plain direct    http://127.0.0.1:P/mcp    (no xy in the path)
  plain via xy    http://127.0.0.1:X/mcp    (the remote server's xy port)
  bearer direct   http://127.0.0.1:B/mcp    (the client sends the token itself)
  bearer via xy   http://127.0.0.1:Y/mcp    (xy adds the token)

The rows run interleaved for --rounds rounds; the table gives each row's
median p50 and p99 over the rounds and the load generator's CPU per
request (it must stay well under the latencies to not be the bottleneck),
then xy's added p50 per variant (via xy - direct; target <= 150 us) and
the load average before and after (the machine may be shared).

usage: python3 bench/remote_overhead.py [--requests 2000] [--rounds 7]
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
TOKEN = "Bearer bench-" + os.urandom(8).hex()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def load(port, n, header=None):
    env = dict(os.environ)
    if header:
        env["XY_MCP_LOAD_HEADER"] = header
    out = subprocess.run([os.path.join(BIN, "xy-mcp-load"), "http", str(port), "/mcp",
                          "latency", str(n)], check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout)


def wait_served(port, header=None, timeout=60):
    env = dict(os.environ)
    if header:
        env["XY_MCP_LOAD_HEADER"] = header
    end = time.time() + timeout
    while True:
        r = subprocess.run([os.path.join(BIN, "xy-mcp-load"), "http", str(port), "/mcp",
                            "latency", "1"], capture_output=True, text=True, env=env)
        if r.returncode == 0:
            return
        if time.time() > end:
            raise RuntimeError(f"127.0.0.1:{port}/mcp not served: {r.stderr.strip()}")
        time.sleep(0.2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    if PROFILE == "release" and not os.environ.get("XYBENCH_NO_BUILD"):
        subprocess.run(["cargo", "build", "--release", "-p", "xy-daemon", "-p", "xy-testbins",
                        "--bins"], cwd=ROOT, check=True)

    tmp = tempfile.mkdtemp(prefix="xyro", dir="/tmp")
    up_plain, up_bearer, own_plain, own_bearer = (free_port() for _ in range(4))
    child = os.path.join(BIN, "xy-test-mcp")
    ups = [
        subprocess.Popen([child, "--port", str(up_plain), "--tools", "echo"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
        subprocess.Popen([child, "--port", str(up_bearer), "--tools", "echo",
                          "--require-auth", TOKEN],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
    ]
    servers = os.path.join(tmp, "c", "xy", "servers")
    os.makedirs(servers)
    secret = os.path.join(tmp, "c", "xy", "token")
    with open(secret, "w") as f:
        f.write(TOKEN + "\n")
    os.chmod(secret, 0o600)
    # Both servers offer a tool named `echo`: with the firewall on, the
    # second one's would be held back as shadowing the first's, and xy
    # would answer its calls itself without the upstream. The bench times
    # the path, so the firewall is off (its cost is measured in issue 28's
    # section of performance-history.md).
    nofw = 'firewall {\n    mode "off"\n}\n'
    with open(os.path.join(servers, "plain.kdl"), "w") as f:
        f.write(f'url "http://127.0.0.1:{up_plain}/mcp"\nport {own_plain}\n' + nofw)
    with open(os.path.join(servers, "bearer.kdl"), "w") as f:
        f.write(f'url "http://127.0.0.1:{up_bearer}/mcp"\nport {own_bearer}\n'
                f'headers {{\n    Authorization secret="TOKEN"\n}}\n'
                f'secrets {{\n    TOKEN file="{secret}"\n}}\n' + nofw)
    env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(tmp, "c"),
               XDG_STATE_HOME=os.path.join(tmp, "s"), XY_SOCKET=os.path.join(tmp, "x.sock"),
               XY_LOG="warn")
    env.pop("XDG_RUNTIME_DIR", None)
    xyd = subprocess.Popen([os.path.join(BIN, "xyd")], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows = [
        ("plain direct", up_plain, None),
        ("plain via xy", own_plain, None),
        ("bearer direct", up_bearer, "Authorization: " + TOKEN),
        ("bearer via xy", own_bearer, None),
    ]
    figures = {name: [] for name, _, _ in rows}
    load_before = os.getloadavg()
    try:
        for _, port, header in rows:
            wait_served(port, header)
        for _ in range(args.rounds):
            for name, port, header in rows:
                figures[name].append(load(port, args.requests, header))
    finally:
        load_after = os.getloadavg()
        xyd.send_signal(signal.SIGTERM)
        xyd.wait()
        for u in ups:
            u.terminate()
            u.wait()
        shutil.rmtree(tmp, ignore_errors=True)

    med = {name: {k: statistics.median(r[k] for r in runs)
                  for k in ("p50_us", "p99_us", "client_cpu_us_per_request")}
           for name, runs in figures.items()}
    print(f"tools/call echo, {args.requests} sequential requests x {args.rounds} rounds "
          f"(median of the rounds), {PROFILE} build; load average "
          f"{load_before[0]:.2f} before, {load_after[0]:.2f} after (1 min), "
          f"{os.cpu_count()} CPUs\n")
    print("| path | p50 µs | p99 µs | load generator CPU µs/req |")
    print("|---|---:|---:|---:|")
    for name, _, _ in rows:
        m = med[name]
        print(f"| {name} | {m['p50_us']:.0f} | {m['p99_us']:.0f} | "
              f"{m['client_cpu_us_per_request']:.1f} |")
    print()
    for variant in ("plain", "bearer"):
        added = med[f"{variant} via xy"]["p50_us"] - med[f"{variant} direct"]["p50_us"]
        added99 = med[f"{variant} via xy"]["p99_us"] - med[f"{variant} direct"]["p99_us"]
        print(f"{variant}: xy adds {added:.0f} µs p50, {added99:.0f} µs p99 (target p50 <= 150 µs)")
    print("per-round p50s:", json.dumps({n: [round(r["p50_us"]) for r in runs]
                                         for n, runs in figures.items()}))


if __name__ == "__main__":
    sys.exit(main())
