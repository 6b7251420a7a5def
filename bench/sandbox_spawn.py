#!/usr/bin/env python3
"""What a sandbox (SPEC §21) adds to a spawn (issue 29's bench).

One xyd (release build) supervising two identical HTTP servers
(`xy-test-mcp --port P`): `plain`, unconfined, and `boxed`, with
`sandbox { network "none" }` (Landlock files + TCP, seccomp, no_new_privs).
Each round restarts both, alternating which goes first, and times from the
`restart` request to the first answered `tools/list` on the server's port
(a user's "first call after start"), and the `restart` RPC alone (which
returns once the child is spawned: the sandbox's preparation and the
kernel's restriction are inside it).

The table gives p50 and p99 of each and the added p50 (target <= 5 ms).

`--block starter` confines `boxed` with what `xyctl add` writes for an npx
server instead (SPEC §25: `write "~/.npm"`, `network "any"`; a private
HOME, the built environment, Unix sockets with scoped abstract ones).

usage: python3 bench/sandbox_spawn.py [--rounds 200] [--block none|starter]
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


class Rpc:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(path)
        self.f = self.s.makefile("rb")
        self.n = 0

    def call(self, method, params=None):
        self.n += 1
        req = {"jsonrpc": "2.0", "id": self.n, "method": method}
        if params is not None:
            req["params"] = params
        self.s.sendall(json.dumps(req).encode() + b"\n")
        while True:
            msg = json.loads(self.f.readline())
            if msg.get("id") == self.n:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]


LIST = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                   "params": {"_meta": {
                       "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                       "io.modelcontextprotocol/clientCapabilities": {}}}}).encode()


def first_list(port, deadline):
    """Polls until a 2026 tools/list on `port` is answered with 200."""
    req = (b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
           b"Accept: application/json, text/event-stream\r\n"
           b"MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/list\r\n"
           b"Content-Length: " + str(len(LIST)).encode() + b"\r\nConnection: close\r\n\r\n"
           + LIST)
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as c:
                c.sendall(req)
                head = c.recv(64)
                if head.startswith(b"HTTP/1.1 200"):
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"port {port}: no tools/list answer")
        time.sleep(0.0005)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--block", choices=["none", "starter"], default="none")
    args = ap.parse_args()
    blocks = {
        "none": 'sandbox {\n    network "none"\n}\n',
        "starter": 'sandbox {\n    write "~/.npm"\n    network "any"\n}\n',
    }
    if PROFILE == "release" and not os.environ.get("XYBENCH_NO_BUILD"):
        subprocess.run(["cargo", "build", "--release", "-p", "xy-daemon", "-p", "xy-testbins",
                        "--bins"], cwd=ROOT, check=True)
    tmp = tempfile.mkdtemp(prefix="xysb", dir="/tmp")
    child = os.path.join(BIN, "xy-test-mcp")
    servers = os.path.join(tmp, "c", "xy", "servers")
    os.makedirs(servers)
    with open(os.path.join(tmp, "c", "xy", "xy.kdl"), "w") as f:
        f.write("gateway {\n    port 0\n}\n")
    ports = {"plain": free_port(), "boxed": free_port()}
    for name, port in ports.items():
        block = blocks[args.block] if name == "boxed" else ""
        with open(os.path.join(servers, f"{name}.kdl"), "w") as f:
            f.write(f'command "{child}"\nargs "--port" "{port}" "--tools" "echo"\n'
                    f'port {port}\nworking-dir "{tmp}"\n{block}')
    env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(tmp, "c"),
               XDG_STATE_HOME=os.path.join(tmp, "s"), XDG_DATA_HOME=os.path.join(tmp, "d"),
               XY_SOCKET=os.path.join(tmp, "x.sock"),
               XY_LOG="warn")
    env.pop("XDG_RUNTIME_DIR", None)
    xyd = subprocess.Popen([os.path.join(BIN, "xyd")], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rpc_ms = {n: [] for n in ports}
    first_ms = {n: [] for n in ports}
    try:
        end = time.monotonic() + 30
        while not os.path.exists(env["XY_SOCKET"]):
            if time.monotonic() > end:
                raise RuntimeError("xyd did not start")
            time.sleep(0.01)
        rpc = Rpc(env["XY_SOCKET"])
        for name, port in ports.items():
            first_list(port, time.monotonic() + 30)
        for i in range(args.rounds):
            order = list(ports) if i % 2 == 0 else list(reversed(list(ports)))
            for name in order:
                t0 = time.perf_counter()
                rpc.call("restart", {"name": name})
                t1 = time.perf_counter()
                first_list(ports[name], time.monotonic() + 30)
                t2 = time.perf_counter()
                rpc_ms[name].append((t1 - t0) * 1000)
                first_ms[name].append((t2 - t0) * 1000)
        st = rpc.call("status", {"name": "boxed"})
        enforcement = (st.get("sandbox") or {}).get("enforcement")
    finally:
        xyd.send_signal(signal.SIGTERM)
        xyd.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"restart → first tools/list answered, {args.rounds} rounds, {PROFILE} build")
    print(f"boxed server's enforcement: {enforcement}\n")
    print("| server | restart RPC p50 ms | p99 ms | to first answer p50 ms | p99 ms |")
    print("|---|---:|---:|---:|---:|")
    for name in ports:
        print(f"| {name} | {statistics.median(rpc_ms[name]):.2f} | {pct(rpc_ms[name], 99):.2f} "
              f"| {statistics.median(first_ms[name]):.2f} | {pct(first_ms[name], 99):.2f} |")
    added = statistics.median(first_ms["boxed"]) - statistics.median(first_ms["plain"])
    added_rpc = statistics.median(rpc_ms["boxed"]) - statistics.median(rpc_ms["plain"])
    print(f"\nthe sandbox adds {added:+.2f} ms p50 to the first answer, {added_rpc:+.2f} ms to "
          f"the restart RPC (target <= 5 ms)")


if __name__ == "__main__":
    sys.exit(main())
