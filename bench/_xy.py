"""What the benches share: an `xyd` on temp XDG dirs, its socket, and a
kept-alive 2025-era MCP client over HTTP. Standard library only.

    from _xy import Daemon, Client
    d = Daemon(xy_kdl="aggregate {\n    mode \"search\"\n}\n")
    d.server("fs", 'command "…"\ntransport "stdio"\nport 4000\n')
    d.start()
    c = Client(d.gateway_port)          # the gateway's /mcp
    c.start_session()
    d.stop(); d.remove()

`XY_BENCH_PROFILE=debug` uses the debug builds (default: release).
"""

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
PROFILE = os.environ.get("XY_BENCH_PROFILE", "release")
BIN = os.path.join(ROOT, "target", PROFILE)
V2025 = "2025-11-25"


_GIVEN = set()


def free_port():
    """A port free now and not handed out before by this process (the
    kernel may give a just-closed port again, and xy refuses two servers
    on one port)."""
    while True:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        if port not in _GIVEN:
            _GIVEN.add(port)
            return port


def need(*bins):
    """Exits naming the build to run when a binary is missing."""
    for b in bins:
        if not os.path.exists(os.path.join(BIN, b)):
            raise SystemExit(f"{BIN}/{b} missing: cargo build --{PROFILE} "
                             "-p xy-daemon -p xy-cli -p xy-testbins")


def rpc(sock, method, params=None):
    """One call on xyd's socket."""
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    msg = {"jsonrpc": "2.0", "id": 1, "method": method}
    if params is not None:
        msg["params"] = params
    s.sendall((json.dumps(msg) + "\n").encode())
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = s.recv(1 << 20)
        if not chunk:
            break
        buf += chunk
    s.close()
    return json.loads(buf)


def wait(what, pred, timeout=60):
    """Polls `pred` until it is true, or fails naming `what`."""
    end = time.time() + timeout
    while time.time() < end:
        try:
            if pred():
                return
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {what}")


def children(pid):
    r = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return [int(x) for x in r.stdout.split()]


def memory_kib(pid):
    """(RSS, PSS) of a process in KiB, from /proc/PID/smaps_rollup."""
    rss = pss = None
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Rss:"):
                rss = int(line.split()[1])
            elif line.startswith("Pss:"):
                pss = int(line.split()[1])
    return rss, pss


def cpu_seconds(pid):
    """User plus system CPU time a process has used, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Daemon:
    """One xyd on its own temp XDG dirs and socket; the gateway on a free
    port (`gateway_port`; off with `gateway=False`), the console off
    unless given a port. `xy_kdl` is added to `xy.kdl` after those two
    blocks."""

    def __init__(self, xy_kdl="", prefix="xybench", gateway=True, console=0):
        self.tmp = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
        self.config = os.path.join(self.tmp, "c", "xy")
        self.servers = os.path.join(self.config, "servers")
        self.state = os.path.join(self.tmp, "s", "xy")
        os.makedirs(self.servers)
        self.sock = os.path.join(self.tmp, "x.sock")
        self.gateway_port = free_port() if gateway else 0
        self.env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(self.tmp, "c"),
                        XDG_STATE_HOME=os.path.join(self.tmp, "s"),
                        XDG_DATA_HOME=os.path.join(self.tmp, "d"),
                        XY_SOCKET=self.sock, XY_LOG="warn")
        self.env.pop("XDG_RUNTIME_DIR", None)
        self.proc = None
        self.console_port = console
        self.write_xy_kdl(xy_kdl)

    def write_xy_kdl(self, extra):
        with open(os.path.join(self.config, "xy.kdl"), "w") as f:
            f.write(f"gateway {{\n    port {self.gateway_port}\n}}\n"
                    f"console {{\n    port {self.console_port}\n}}\n{extra}")

    def server(self, name, kdl):
        with open(os.path.join(self.servers, f"{name}.kdl"), "w") as f:
            f.write(kdl)

    def rpc(self, method, params=None):
        return rpc(self.sock, method, params)

    def list(self):
        return self.rpc("list")["result"]

    def start(self):
        log = open(os.path.join(self.tmp, "xyd.stderr"), "ab")
        self.proc = subprocess.Popen([os.path.join(BIN, "xyd")], env=self.env,
                                     stdout=subprocess.DEVNULL, stderr=log)
        log.close()
        try:
            wait("xyd serving", lambda: self.proc.poll() is None and "result" in self.rpc("list"))
        except RuntimeError:
            with open(os.path.join(self.tmp, "xyd.stderr"), errors="replace") as f:
                tail = f.read()[-2000:]
            raise RuntimeError(f"xyd did not serve (exit {self.proc.poll()}): {tail}") from None
        return self.proc

    def children(self):
        return children(self.proc.pid)

    def stop(self):
        if self.proc is not None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=60)
            self.proc = None

    def remove(self):
        self.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


class Client:
    """One 2025-era client of one endpoint (`path` on `port`), kept alive."""

    def __init__(self, port, path="/mcp"):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.path = path
        self.session = None
        self.next = 0

    def post(self, msg):
        headers = {"Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": V2025}
        if self.session:
            headers["Mcp-Session-Id"] = self.session
        self.conn.request("POST", self.path, json.dumps(msg), headers)
        r = self.conn.getresponse()
        body = r.read().decode()
        self.session = r.getheader("Mcp-Session-Id") or self.session
        if r.status == 202:
            return None
        if r.status != 200:
            raise RuntimeError(f"{self.path}: HTTP {r.status}: {body[:500]}")
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
