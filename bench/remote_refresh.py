#!/usr/bin/env python3
"""Token refresh under load, through xy (issue 31's bench, SPEC §23).

Two OAuth fixtures (`xy-testbins/fixtures/oauth_fixture.py`: an
authorization server and a protected MCP resource in one Python process),
one issuing 3 s access tokens (`--token-lifetime`, so xy refreshes about
every 2.4 s: when less than a fifth of the lifetime is left) and one 1 h
tokens (no refresh during the run). One xyd (release build) has a server
file for each, `url "http://127.0.0.1:F/mcp"` + `auth { oauth }`, logged
in headlessly: `xyctl auth login <name> --no-browser` prints the
authorization URL, which this script follows as a browser would (the
fixture approves at once and redirects to xyd's loopback callback).

Then, for --rounds rounds, alternating the two servers: --clients
concurrent clients (`xy-mcp-load ... soak`: one keep-alive connection and
one 2025 session each) call `tools/call` through xy's port for --seconds
seconds. Reported: calls, errors (a non-2xx answer, a JSON-RPC error or a
tool error; must be 0), refreshes from the fixture's log (and reused
refresh tokens: must be 0), and p50/p99 of the calls that overlapped a
refresh, of those that did not, and of the 1 h server's calls. The
fixture's token endpoint sleeps 50 ms per refresh, so the calls waiting
for a refresh show it. The load generator's CPU per call is reported as
the other benches do.

usage: python3 bench/remote_refresh.py [--clients 4] [--seconds 20] [--rounds 3]
       (builds `cargo build --release -p xy-daemon -p xy-cli -p xy-testbins --bins`
       unless XYBENCH_NO_BUILD=1; XY_BENCH_PROFILE=debug uses debug builds)
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROFILE = os.environ.get("XY_BENCH_PROFILE", "release")
BIN = os.path.join(ROOT, "target", PROFILE)
FIXTURE = os.path.join(ROOT, "xy-testbins", "fixtures", "oauth_fixture.py")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Fixture:
    def __init__(self, tmp, name, lifetime):
        self.log = os.path.join(tmp, f"{name}-as.log")
        self.proc = subprocess.Popen(
            ["python3", FIXTURE, "--log", self.log, "--token-lifetime", str(lifetime), "--dcr"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.port = json.loads(self.proc.stdout.readline())["port"]

    def entries(self, kind):
        with open(self.log) as f:
            return [e for e in map(json.loads, f) if e["kind"] == kind]

    def stop(self):
        self.proc.stdin.close()
        self.proc.wait()


def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(int(len(xs) * q), len(xs) - 1)] if xs else float("nan")


def login(env, name):
    """`xyctl auth login <name> --no-browser`, following the printed URL."""
    p = subprocess.Popen([os.path.join(BIN, "xyctl"), "--no-spawn", "auth", "login", name,
                          "--no-browser"], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    url = p.stdout.readline().strip()
    if not url.startswith("http://127.0.0.1:"):
        p.kill()
        raise RuntimeError(f"no authorization URL from xyctl: {url!r} {p.stderr.read()}")
    with urllib.request.urlopen(url, timeout=30) as r:
        r.read()
    out, err = p.communicate(timeout=60)
    if p.returncode != 0:
        raise RuntimeError(f"login of {name} failed: {out}{err}")


def wait_for(what, check, timeout=60):
    end = time.time() + timeout
    while not check():
        if time.time() > end:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.1)


def soak(port, seconds, clients, times):
    out = subprocess.run([os.path.join(BIN, "xy-mcp-load"), "http", str(port), "/mcp", "soak",
                          str(seconds), str(clients), times],
                         check=True, capture_output=True, text=True)
    report = json.loads(out.stdout)
    with open(times) as f:
        calls = [(int(s) / 1e6, int(lat), ok == "1") for s, lat, ok in
                 (line.split() for line in f)]
    return report, calls


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if PROFILE == "release" and not os.environ.get("XYBENCH_NO_BUILD"):
        subprocess.run(["cargo", "build", "--release", "-p", "xy-daemon", "-p", "xy-cli",
                        "-p", "xy-testbins", "--bins"], cwd=ROOT, check=True)

    tmp = tempfile.mkdtemp(prefix="xyrr", dir="/tmp")
    fast = Fixture(tmp, "fast", 3)
    slow = Fixture(tmp, "slow", 3600)
    ports = {"fast": free_port(), "slow": free_port()}
    servers = os.path.join(tmp, "c", "xy", "servers")
    os.makedirs(servers)
    for name, fx in (("fast", fast), ("slow", slow)):
        with open(os.path.join(servers, f"{name}.kdl"), "w") as f:
            # The fixture's resource lists no tools; the firewall would hold
            # back a call to one it never listed.
            f.write(f'url "http://127.0.0.1:{fx.port}/mcp"\nport {ports[name]}\n'
                    f'auth {{\n    oauth\n}}\nfirewall {{\n    mode "off"\n}}\n')
    sock = os.path.join(tmp, "x.sock")
    env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(tmp, "c"),
               XDG_STATE_HOME=os.path.join(tmp, "s"), XY_SOCKET=sock, XY_LOG="warn",
               XY_AUTH_STORE="file", NO_COLOR="1")
    env.pop("XDG_RUNTIME_DIR", None)
    xyd = subprocess.Popen([os.path.join(BIN, "xyd")], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # CLOCK_MONOTONIC is system-wide: the fixture's refresh times, plus this
    # offset, are on the load generator's wall clock.
    offset = time.time() - time.monotonic()
    results = {"fast": [], "slow": []}
    load_before = os.getloadavg()
    try:
        wait_for("xyd's socket", lambda: os.path.exists(sock))
        for name in ("fast", "slow"):
            login(env, name)
        for r in range(args.rounds):
            for name in ("fast", "slow"):
                times = os.path.join(tmp, f"{name}-{r}.times")
                results[name].append(soak(ports[name], args.seconds, args.clients, times))
    finally:
        load_after = os.getloadavg()
        xyd.send_signal(signal.SIGTERM)
        xyd.wait()
        fast_refreshes = fast.entries("refresh")
        slow_refreshes = slow.entries("refresh")
        fast.stop()
        slow.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    windows = [(e["start"] + offset, e["end"] + offset) for e in fast_refreshes]

    def during(call):
        start, lat, _ = call
        end = start + lat / 1e6
        return any(start <= we and end >= ws for ws, we in windows)

    fast_calls = [c for _, calls in results["fast"] for c in calls]
    slow_calls = [c for _, calls in results["slow"] for c in calls]
    with_refresh = [c[1] for c in fast_calls if during(c)]
    without = [c[1] for c in fast_calls if not during(c)]
    slow_lat = [c[1] for c in slow_calls]
    errors = {n: sum(rep["errors"] for rep, _ in rs) for n, rs in results.items()}
    cpu = {n: sum(rep["client_cpu_us_per_request"] for rep, _ in rs) / len(rs)
           for n, rs in results.items()}
    seconds = args.seconds * args.rounds
    ok_refreshes = sum(1 for e in fast_refreshes if e["ok"])
    reused = sum(1 for e in fast_refreshes + slow_refreshes if e["reused"])

    print(f"{args.clients} clients x {args.seconds:g} s x {args.rounds} rounds per server "
          f"(rounds alternate), {PROFILE} build; load average {load_before[0]:.2f} before, "
          f"{load_after[0]:.2f} after (1 min), {os.cpu_count()} CPUs\n")
    print(f"3 s tokens: {len(fast_calls)} calls, {errors['fast']} errors, "
          f"{len(fast_refreshes)} refreshes in {seconds:g} s ({ok_refreshes} ok, "
          f"{reused} reused refresh tokens); 1 h tokens: {len(slow_calls)} calls, "
          f"{errors['slow']} errors, {len(slow_refreshes)} refreshes\n")
    print("| calls | n | p50 µs | p99 µs | load generator CPU µs/call |")
    print("|---|---:|---:|---:|---:|")
    for label, xs, c in (("3 s tokens, overlapping a refresh", with_refresh, cpu["fast"]),
                         ("3 s tokens, no refresh in flight", without, cpu["fast"]),
                         ("1 h tokens (no refresh)", slow_lat, cpu["slow"])):
        print(f"| {label} | {len(xs)} | {percentile(xs, 0.5):.0f} | "
              f"{percentile(xs, 0.99):.0f} | {c:.1f} |")
    firsts = [e for rep, _ in results["fast"] + results["slow"] for e in rep["first_errors"]]
    if firsts:
        print("\nfirst errors:", json.dumps(firsts[:5]))
    return 1 if errors["fast"] or errors["slow"] or reused else 0


if __name__ == "__main__":
    sys.exit(main())
