#!/usr/bin/env python3
"""What an input request costs through xy's stdio bridge (issue 27, SPEC
§19): one client, sequential, keep-alive, against `xy-test-mcp --stdio
--era 2025 --tools echo,elicit` behind xyd. Three round trips, p50/p99 each:

- `echo 2026`: a 2026 client's `tools/call echo` (one POST): the baseline.
- `mrtr 2026`: a 2026 client's `tools/call elicit` with one elicitation:
  POST → `InputRequiredResult` (xy gathers the child's questions for its
  window first), POST the retry → the result. Two POSTs.
- `s2c 2025`: a 2025 client's `tools/call elicit`: POST (SSE), the child's
  `elicitation/create` on that stream, POST the answer (202), the result on
  the stream. Two POSTs too: the 2025 way, for comparison.

Read the MRTR round's added cost as `mrtr 2026` − 2 × `echo 2026` (what two
plain round trips cost) and its cost against the 2025 era as `mrtr 2026` −
`s2c 2025`. The client is Python's http.client (its own cost is in every
row alike).

usage: python3 bench/mrtr.py [--requests 500]
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
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.path.join(ROOT, "target")
PROFILE = os.environ.get("XY_BENCH_PROFILE", "release")
V2026 = "2026-07-28"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError("xyd exited")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"port {port} never answered")


class Client:
    def __init__(self, port):
        self.c = http.client.HTTPConnection("127.0.0.1", port)
        self.n = 0

    def post(self, body, headers):
        h = {"Content-Type": "application/json",
             "Accept": "application/json, text/event-stream", **headers}
        self.c.request("POST", "/mcp", json.dumps(body), h)
        return self.c.getresponse()


def messages(resp):
    """Every JSON-RPC message of an answer (JSON or SSE), read to its end."""
    body = resp.read().decode()
    if resp.getheader("Content-Type", "").startswith("application/json"):
        return [json.loads(body)] if body else []
    return [json.loads(line[5:]) for line in body.splitlines() if line.startswith("data:")]


def envelope(params):
    params = dict(params)
    params["_meta"] = {"io.modelcontextprotocol/protocolVersion": V2026,
                       "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
    return params


def call_2026(c, tool, args, extra=None):
    c.n += 1
    params = {"name": tool, "arguments": args, **(extra or {})}
    body = {"jsonrpc": "2.0", "id": c.n, "method": "tools/call", "params": envelope(params)}
    h = {"MCP-Protocol-Version": V2026, "Mcp-Method": "tools/call", "Mcp-Name": tool}
    return [m for m in messages(c.post(body, h)) if "method" not in m][0]


def echo_2026(c):
    r = call_2026(c, "echo", {"text": "x"})
    assert r["result"]["content"][0]["text"] == "x", r


def mrtr_2026(c):
    r = call_2026(c, "elicit", {})["result"]
    assert r["resultType"] == "input_required", r
    (key,) = r["inputRequests"]
    done = call_2026(c, "elicit", {}, {
        "inputResponses": {key: {"action": "accept", "content": {"answer": "a"}}},
        "requestState": r["requestState"]})
    assert done["result"]["content"][0]["text"] == "answers: a", done


class Session:
    def __init__(self, port):
        self.port = port
        c = Client(port)
        r = c.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "bench", "version": "1"}}}, {})
        self.sid = r.getheader("Mcp-Session-Id")
        r.read()
        self.h = {"MCP-Protocol-Version": "2025-11-25", "Mcp-Session-Id": self.sid}
        r = c.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, self.h)
        r.read()
        self.calls = c
        self.answers = Client(port)


def s2c_2025(s):
    s.calls.n += 1
    resp = s.calls.post({"jsonrpc": "2.0", "id": s.calls.n, "method": "tools/call",
                         "params": {"name": "elicit", "arguments": {}}}, s.h)
    # Read the SSE stream event by event (raw: chunk sizes are lines that
    # are skipped): the question comes before the end.
    while True:
        line = resp.fp.readline().decode()
        if line.startswith("data:"):
            m = json.loads(line[5:])
            if m.get("method") == "elicitation/create":
                break
    a = s.answers.post({"jsonrpc": "2.0", "id": m["id"],
                        "result": {"action": "accept", "content": {"answer": "a"}}}, s.h)
    a.read()
    while True:
        line = resp.fp.readline().decode()
        if line.startswith("data:"):
            m = json.loads(line[5:])
            if "method" not in m:
                break
    # The chunked body's end, read by hand too (the reads above were raw).
    while resp.fp.readline().strip() != b"0":
        pass
    resp.fp.readline()
    resp._close_conn()  # noqa: SLF001 - keeps the connection, ends the response
    assert m["result"]["content"][0]["text"] == "answers: a", m


def timed(fn, n):
    for _ in range(min(50, n)):
        fn()
    us = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        us.append((time.perf_counter() - t) * 1e6)
    us.sort()
    return us[len(us) // 2], us[int(len(us) * 0.99) - 1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=500)
    args = ap.parse_args()
    child = os.path.join(TARGET, PROFILE, "xy-test-mcp")
    xyd = os.path.join(TARGET, PROFILE, "xyd")
    port = free_port()
    tmp = tempfile.mkdtemp(prefix="xybench")
    cfg = os.path.join(tmp, "c", "xy", "servers")
    os.makedirs(cfg)
    with open(os.path.join(cfg, "ask.kdl"), "w") as f:
        f.write(f'command "{child}"\nargs "--stdio" "--era" "2025" "--tools" "echo,elicit"\n'
                f'transport "stdio"\nport {port}\n')
    env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(tmp, "c"),
               XDG_STATE_HOME=os.path.join(tmp, "s"),
               XY_SOCKET=os.path.join(tmp, "x.sock"), XY_LOG="warn")
    env.pop("XDG_RUNTIME_DIR", None)
    p = subprocess.Popen([xyd], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port, p)
        c = Client(port)
        for _ in range(100):
            try:
                echo_2026(c)
                break
            except Exception:  # noqa: BLE001 - the child may still be starting
                time.sleep(0.1)
                c = Client(port)
        s = Session(port)
        rows = [("echo 2026", timed(lambda: echo_2026(c), args.requests)),
                ("mrtr 2026", timed(lambda: mrtr_2026(c), args.requests)),
                ("s2c 2025", timed(lambda: s2c_2025(s), args.requests))]
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"profile {PROFILE}, {args.requests} each, load {open('/proc/loadavg').read().split()[:3]}")
    print(f"{'round trip':<12} {'p50 µs':>9} {'p99 µs':>9}")
    for name, (p50, p99) in rows:
        print(f"{name:<12} {p50:9.0f} {p99:9.0f}")
    echo, mrtr, s2c = (r[1][0] for r in rows)
    print(f"mrtr - 2 x echo: {mrtr - 2 * echo:.0f} µs; mrtr - s2c 2025: {mrtr - s2c:.0f} µs")


if __name__ == "__main__":
    main()
