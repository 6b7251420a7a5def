#!/usr/bin/env python3
"""Side-by-side benchmark of stdio->streamable-HTTP bridges (issue 14):
xy's bridge (xyd), supergateway (npm) and mcp-proxy (PyPI), all bridging the
same stdio server (`xy-test-mcp --stdio --era 2025`), plus the child talked
to directly over its pipes and through `xy-relay-floor`, a relay that only
copies bytes (latency only: the least one more process adds here).

Measures, per bridge: `tools/call echo` round trip p50/p99 from one client
(sequential, keep-alive), requests/s with 8 concurrent clients (8 threads,
each its own 2025 session and connection), and the bridge process's RSS
after the run (the child's not included). The timed client is
`xy-mcp-load` (xy-testbins: Rust, a blocking socket per client with
`httparse` for the answer's head), the same for
every bridge and for the direct row over the child's pipes; it reports its
own CPU time per request, so it is visibly not the bottleneck. Read "added
latency" as bridge p50 minus direct p50.

Installs supergateway and mcp-proxy into target/bench/ (npm and pip).

usage: python3 bench/stdio_bridges.py [--requests 2000] [--seconds 5] [--rounds 1]
       [--only direct,floor,xy,supergateway,mcp-proxy]
       (run `cargo build --release -p xy-daemon -p xy-testbins` first;
       XY_BENCH_PROFILE=debug uses the debug builds)
"""

import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.path.join(ROOT, "target")
CACHE = os.path.join(TARGET, "bench")
PROFILE = os.environ.get("XY_BENCH_PROFILE", "release")
CHILD = [os.path.join(TARGET, PROFILE, "xy-test-mcp"), "--stdio", "--era", "2025"]
LOAD = os.path.join(TARGET, PROFILE, "xy-mcp-load")
FLOOR = os.path.join(TARGET, PROFILE, "xy-relay-floor")
SUPERGATEWAY = "4.0.0"
MCP_PROXY = "0.13.0"


def install():
    os.makedirs(CACHE, exist_ok=True)
    sg = os.path.join(CACHE, "supergateway", "node_modules", ".bin", "supergateway")
    if not os.path.exists(sg):
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel", "error",
                        "--prefix", os.path.join(CACHE, "supergateway"),
                        f"supergateway@{SUPERGATEWAY}"], check=True)
    venv = os.path.join(CACHE, "mcp-proxy-venv")
    mp = os.path.join(venv, "bin", "mcp-proxy")
    if not os.path.exists(mp):
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run([os.path.join(venv, "bin", "pip"), "install", "-q",
                        f"mcp-proxy=={MCP_PROXY}"], check=True)
    return sg, mp


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def rss_kib(pid):
    """VmRSS and RssAnon (the process's own heap and stacks, without the
    binary's and shared libraries' pages) in KiB."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key = line.split(":")[0]
            if key in ("VmRSS", "RssAnon"):
                out[key] = int(line.split()[1])
    return out.get("VmRSS", 0), out.get("RssAnon", 0)


INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "bench", "version": "1"}}}


def call(i):
    return {"jsonrpc": "2.0", "id": i, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "hello"}}}


class HttpClient:
    """One keep-alive connection and one 2025 session."""

    def __init__(self, port, path="/mcp"):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.path = path
        self.session = None
        self.post(INIT)
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def post(self, msg):
        h = {"Content-Type": "application/json",
             "Accept": "application/json, text/event-stream",
             "MCP-Protocol-Version": "2025-11-25"}
        if self.session:
            h["Mcp-Session-Id"] = self.session
        self.conn.request("POST", self.path, json.dumps(msg), h)
        r = self.conn.getresponse()
        body = r.read()
        sid = r.getheader("mcp-session-id")
        if sid:
            self.session = sid
        if "id" in msg and msg.get("method") != "notifications/initialized":
            text = body.decode()
            if r.getheader("content-type", "").startswith("text/event-stream"):
                text = [l[5:].strip() for l in text.splitlines() if l.startswith("data:")][-1]
            out = json.loads(text)
            assert "result" in out, out
            return out

    def rpc(self, i):
        return self.post(call(i))


def load(*args):
    """Runs xy-mcp-load and returns its JSON figures."""
    out = subprocess.run([LOAD, *map(str, args)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def wait_port(port, proc, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"bridge exited: {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("bridge did not listen")


def wait_ready(port, path, timeout=60):
    end = time.time() + timeout
    while True:
        try:
            HttpClient(port, path).rpc(1)
            return
        except Exception:
            if time.time() > end:
                raise
            time.sleep(0.2)


def cpu_ns(pid):
    """CPU time of every thread of the process so far, in ns (schedstat: exact,
    not the 10 ms ticks of /proc/<pid>/stat)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass  # the thread ended meanwhile
    return total


def run_bridge(name, start, path, n, seconds):
    port = free_port()
    proc, pid_of_bridge, stop = start(port)
    try:
        wait_port(port, proc)
        wait_ready(port, path)
        before = cpu_ns(pid_of_bridge())
        lat = load("http", port, path, "latency", n)
        # The bridge's own CPU per sequential request (its children not
        # included): what each request costs the bridge, apart from waits.
        bridge_cpu = (cpu_ns(pid_of_bridge()) - before) / 1000 / (n + 50)  # xy-mcp-load's 50 warm-up calls
        thr = load("http", port, path, "throughput", seconds, 8)
        rss = rss_kib(pid_of_bridge())
        cpu = (lat["client_cpu_us_per_request"], thr["client_cpu_us_per_request"], bridge_cpu)
        return name, lat["p50_us"], lat["p99_us"], thr["rps"], rss, cpu
    finally:
        stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--only", default="direct,floor,xy,supergateway,mcp-proxy",
                    help="comma-separated rows to run (default: all)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="run every row this many times, interleaved, and print the "
                         "median of each figure too (p50s on a VM move by tens of µs "
                         "from run to run)")
    args = ap.parse_args()
    only = set(args.only.split(","))
    sg, mp = install()
    rounds = []
    for r in range(args.rounds):
        rows = one_round(args, only, sg, mp)
        print_rows(f"round {r + 1}", rows)
        rounds.append(rows)
    if args.rounds > 1:
        print_rows(f"median of {args.rounds} rounds", medians(rounds))
        # The added latency per round (each round's bridge minus that same
        # round's direct row), and its median: the figure to quote.
        for name in [row[0] for row in rounds[0] if not row[0].startswith("direct")]:
            added = []
            for rows in rounds:
                direct = next((r[1] for r in rows if r[0].startswith("direct")), None)
                mine = next((r[1] for r in rows if r[0] == name), None)
                if direct is not None and mine is not None:
                    added.append(mine - direct)
            if added:
                per = ", ".join(f"{a:.0f}" for a in added)
                print(f"{name}: added p50 per round {per} µs; median {sorted(added)[len(added) // 2]:.0f} µs")


def medians(rounds):
    """Per row name, the median of each figure over the rounds."""
    def med(xs):
        xs = sorted(x for x in xs if x is not None)
        return xs[len(xs) // 2] if xs else None
    out = []
    for name in [row[0] for row in rounds[0]]:
        rows = [row for rs in rounds for row in rs if row[0] == name]
        rss = [row[4] for row in rows if row[4] is not None]
        out.append((name, med([r[1] for r in rows]), med([r[2] for r in rows]),
                    med([r[3] for r in rows]),
                    (med([x[0] for x in rss]), med([x[1] for x in rss])) if rss else None,
                    tuple(med([r[5][i] for r in rows]) for i in range(3))))
    return out


def one_round(args, only, sg, mp):
    rows = []
    if "direct" in only:
        lat = load("direct", args.requests, "--", *CHILD)
        rows.append(("direct (pipes)", lat["p50_us"], lat["p99_us"], None, None,
                     (lat["client_cpu_us_per_request"], None, None)))

    if "floor" in only:
        # The yardstick: a relay that only copies bytes (one client, blocking
        # I/O, no sessions or JSON). What it adds over the pipes is what
        # one more process and loopback TCP cost on this machine.
        port = free_port()
        p = subprocess.Popen([FLOOR, str(port), "--", *CHILD],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_port(port, p)
            lat = load("http", port, "/mcp", "latency", args.requests)
            rows.append(("floor relay", lat["p50_us"], lat["p99_us"], None, None,
                         (lat["client_cpu_us_per_request"], None, None)))
        finally:
            p.kill()
            p.wait()

    def xy(port):
        tmp = tempfile.mkdtemp(prefix="xybench")
        cfg = os.path.join(tmp, "c", "xy", "servers")
        os.makedirs(cfg)
        with open(os.path.join(cfg, "echo.kdl"), "w") as f:
            f.write(f'command "{CHILD[0]}"\nargs "--stdio" "--era" "2025"\n'
                    f'transport "stdio"\nport {port}\n')
        env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(tmp, "c"),
                   XDG_STATE_HOME=os.path.join(tmp, "s"),
                   XY_SOCKET=os.path.join(tmp, "x.sock"), XY_LOG="warn")
        env.pop("XDG_RUNTIME_DIR", None)
        xyd = os.path.join(TARGET, PROFILE, "xyd")
        p = subprocess.Popen([xyd], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def stop():
            p.send_signal(signal.SIGTERM)
            p.wait()
            shutil.rmtree(tmp, ignore_errors=True)
        return p, lambda: p.pid, stop

    def peer(argv):
        """Starts a peer bridge in its own process group (it spawns the child)."""
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)

        def stop():
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        return p, lambda: p.pid, stop

    def supergateway(port):
        return peer([sg, "--stdio", " ".join(CHILD), "--outputTransport",
                     "streamableHttp", "--stateful", "--port", str(port)])

    def mcp_proxy(port):
        return peer([mp, "--port", str(port), "--", *CHILD])

    for key, name, start in (("xy", "xy (xyd)", xy),
                             ("supergateway", "supergateway", supergateway),
                             ("mcp-proxy", "mcp-proxy", mcp_proxy)):
        if key not in only:
            continue
        try:
            rows.append(run_bridge(name, start, "/mcp", args.requests, args.seconds))
        except Exception as e:  # noqa: BLE001 - report and go on
            print(f"{name}: failed: {e}", file=sys.stderr)
    return rows


def print_rows(title, rows):
    print(f"{title}: load {open('/proc/loadavg').read().split()[:3]}, child {CHILD[0]}")
    print(f"{'bridge':<16} {'p50 µs':>9} {'p99 µs':>9} {'req/s (8 clients)':>18} "
          f"{'RSS MiB':>8} {'anon MiB':>9} {'client CPU µs/req (lat, thr)':>29} "
          f"{'bridge CPU µs/req':>18}")
    for name, p50, p99, rps, rss, cpu in rows:
        cpus = ", ".join("-" if c is None else f"{c:.0f}" for c in cpu[:2])
        bridge = "-" if cpu[2] is None else f"{cpu[2]:.0f}"
        print(f"{name:<16} {p50:9.0f} {p99:9.0f} "
              f"{'-' if rps is None else f'{rps:18.0f}':>18} "
              f"{'-' if rss is None else f'{rss[0] / 1024:8.1f}':>8} "
              f"{'-' if rss is None else f'{rss[1] / 1024:9.1f}':>9} {cpus:>29} {bridge:>18}")
    direct = next((r[1] for r in rows if r[0].startswith("direct")), None)
    if direct is not None:
        added = [f"{r[0].split(' ')[0]} {r[1] - direct:.0f}" for r in rows if r[0] != rows[0][0]]
        print("added p50 over direct (µs): " + ", ".join(added))
    floor = next((r[1] for r in rows if r[0].startswith("floor")), None)
    xy = next((r[1] for r in rows if r[0].startswith("xy")), None)
    if floor is not None and xy is not None:
        print(f"xy's p50 over the floor relay's (µs): {xy - floor:.0f}")


if __name__ == "__main__":
    main()
