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
import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROFILE = os.environ.get("XY_BENCH_PROFILE", "release")
BIN = os.path.join(ROOT, "target", PROFILE)
TOOLS = os.path.join(BIN, "xy-test-tools")
V2025 = "2025-11-25"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def children(pid):
    r = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return [int(x) for x in r.stdout.split()]


class Client:
    """One 2025-era client of one endpoint, keep-alive."""

    def __init__(self, port):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.session = None
        self.next = 0

    def post(self, msg):
        headers = {"Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": V2025}
        if self.session:
            headers["Mcp-Session-Id"] = self.session
        self.conn.request("POST", "/mcp", json.dumps(msg), headers)
        r = self.conn.getresponse()
        body = r.read().decode()
        self.session = r.getheader("Mcp-Session-Id") or self.session
        if r.status == 202:
            return None
        if (r.getheader("Content-Type") or "").startswith("text/event-stream"):
            for line in body.splitlines():
                if line.startswith("data:"):
                    m = json.loads(line[5:])
                    if "method" not in m:
                        return m
            raise RuntimeError(f"no answer in {body!r}")
        return json.loads(body)

    def request(self, method, params=None):
        self.next += 1
        return self.post({"jsonrpc": "2.0", "id": self.next, "method": method,
                          "params": params or {}})

    def start_session(self):
        init = self.request("initialize", {"protocolVersion": V2025, "capabilities": {},
                                           "clientInfo": {"name": "bench", "version": "1"}})
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        listed = self.request("tools/list")
        return init, listed


def rpc(env, method, params=None):
    """One call on xyd's socket."""
    s = socket.socket(socket.AF_UNIX)
    s.connect(env["XY_SOCKET"])
    s.sendall((json.dumps({"jsonrpc": "2.0", "id": 1, "method": method,
                           "params": params or {}}) + "\n").encode())
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = s.recv(1 << 20)
        if not chunk:
            break
        buf += chunk
    s.close()
    return json.loads(buf)


def wait(what, pred, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        try:
            if pred():
                return
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {what}")


def states(env):
    return {e["name"]: e["state"] for e in rpc(env, "list")["result"]}


def start_xyd(env):
    p = subprocess.Popen([os.path.join(BIN, "xyd")], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait("xyd serving", lambda: "result" in rpc(env, "list"))
    return p


def stop_xyd(p):
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=60)


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
    for b in ("xyd", "xy-test-tools"):
        if not os.path.exists(os.path.join(BIN, b)):
            sys.exit(f"{BIN}/{b} missing: cargo build --{PROFILE} -p xy-daemon -p xy-testbins")
    tmp = tempfile.mkdtemp(prefix="xyss", dir="/tmp")
    conf = os.path.join(tmp, "c", "xy", "servers")
    os.makedirs(conf)
    lists = os.path.join(tmp, "lists")
    os.makedirs(lists)
    env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(tmp, "c"),
               XDG_STATE_HOME=os.path.join(tmp, "s"), XY_SOCKET=os.path.join(tmp, "x.sock"),
               XY_LOG="warn")
    env.pop("XDG_RUNTIME_DIR", None)
    with open(os.path.join(tmp, "c", "xy", "xy.kdl"), "w") as f:
        f.write("gateway {\n    port 0\n}\n")
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
        with open(os.path.join(conf, f"{name}.kdl"), "w") as f:
            f.write(f'command "{TOOLS}"\nargs "--file" "{tf}"\ntransport "stdio"\n'
                    f'port {port}\non-demand {{\n    idle-stop "10m"\n}}\n')
        servers.append((name, port, tf))
    xyd = None
    try:
        # 1. Seed the ledgers, then a fresh daemon.
        xyd = start_xyd(env)
        wait("servers idle", lambda: set(states(env).values()) == {"idle"})
        for name, _, _ in servers:
            rpc(env, "start", {"name": name})
        for name, _, _ in servers:
            wait(f"{name} listed", lambda n=name: len(
                (rpc(env, "tools", {"name": n})["result"].get("current") or {})
                .get("tools", [])) == 10)
            # The child's capability gates, kept beside the listing (D280).
            wait(f"{name} gates kept", lambda n=name: "gates" in json.load(
                open(os.path.join(tmp, "s", "xy", "tools", f"{n}.json"))))
        stop_xyd(xyd)
        parallel, sequential, kids_after = [], [], []
        firsts, colds = [], []
        for rnd in range(args.rounds):
            xyd = start_xyd(env)
            wait("servers idle", lambda: len(states(env)) == len(servers)
                 and set(states(env).values()) == {"idle"})
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
            kids_after.append(len(children(xyd.pid)))
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
                    two = len(children(xyd.pid))
                    print(f"round {rnd}: children after calls to 2 servers: {two}",
                          file=sys.stderr)
                    if rnd == 0:
                        children_two = two
            stop_xyd(xyd)
            xyd = None
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
        if xyd is not None:
            stop_xyd(xyd)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
