#!/usr/bin/env python3
"""The console's costs (SPEC §28, issue 42's closing figures).

One xyd (release build) with one stdio server (`xy-test-mcp --stdio`):

  idle RSS        xyd's VmRSS settled, console off (`console { port 0 }`) and
                  on with no page open (median of samples over --settle s)
  idle CPU        xyd's CPU ticks over --settle s, console on, no page open
  first answer    10,000 call records (`xy-mcp-load` through the bridge), then
                  the Calls page's first read as the page makes it: POST
                  /api/rpc {calls, limit 10000}, timed from the request to the
                  last byte (first call, then the median and max of 20)
  browser         headless Chromium over the DevTools pipe: from navigating to
                  `#/calls` to the page showing the calls table (the 200
                  newest rows, figures and chart from all 10,000)

usage: python3 bench/console.py [--settle 5]
       (builds `cargo build --release -p xy-daemon -p xy-testbins --bins`
       unless XYBENCH_NO_BUILD=1; XY_BENCH_PROFILE=debug uses debug builds)
"""

import argparse
import base64
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _xy  # noqa: E402
from _xy import BIN, PROFILE, ROOT, free_port, rpc  # noqa: E402


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def start_daemon(console_port):
    """xyd (`_xy.Daemon`, gateway off) with one bridged stdio server,
    returned once that server runs with its tools listed."""
    d = _xy.Daemon(prefix="xycon", gateway=False, console=console_port)
    d.bridge = free_port()
    d.server("bridged", f'command "{BIN}/xy-test-mcp"\nargs "--stdio" "--tools" "echo"\n'
                        f'transport "stdio"\nport {d.bridge}\n')
    d.start()
    _xy.wait("the bridged server running with its tools", lambda: (
        (rows := d.list()) and rows[0]["state"] == "running" and rows[0].get("tool_count")))
    return d


def settled_rss(pid, seconds):
    time.sleep(1)
    samples = []
    end = time.time() + seconds
    while time.time() < end:
        samples.append(rss_kib(pid))
        time.sleep(0.25)
    return statistics.median(samples)


def post(port, path, body, headers):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 method="POST", headers=dict(headers, **{
                                     "Content-Type": "application/json",
                                     "Origin": f"http://127.0.0.1:{port}"}))
    with urllib.request.urlopen(req) as r:
        return r.read(), r.headers


class Chromium:
    """One tab over --remote-debugging-pipe (fds 3 and 4)."""

    def __init__(self, exe):
        self.profile = tempfile.mkdtemp(prefix="xycr")
        # The shell moves our pipes to the fds Chromium reads and writes.
        self.proc = subprocess.Popen(
            ["sh", "-c", 'exec "$@" 3<&0 4>&1 </dev/null >/dev/null', "sh",
             exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--remote-debugging-pipe", f"--user-data-dir={self.profile}", "about:blank"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.w = self.proc.stdin
        self.r = self.proc.stdout
        self.buf = b""
        self.next = 1
        self.session = None
        t = self.send("Target.createTarget", {"url": "about:blank"})
        a = self.send("Target.attachToTarget", {"targetId": t["targetId"], "flatten": True})
        self.session = a["sessionId"]

    def send(self, method, params):
        i = self.next
        self.next += 1
        msg = {"id": i, "method": method, "params": params}
        if self.session:
            msg["sessionId"] = self.session
        self.w.write(json.dumps(msg).encode() + b"\0")
        self.w.flush()
        while True:
            while b"\0" not in self.buf:
                chunk = os.read(self.r.fileno(), 1 << 16)
                if not chunk:
                    raise RuntimeError("chromium closed the pipe")
                self.buf += chunk
            line, self.buf = self.buf.split(b"\0", 1)
            m = json.loads(line)
            if m.get("id") == i:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m["result"]

    def eval(self, expr):
        r = self.send("Runtime.evaluate", {"expression": expr, "returnByValue": True,
                                           "awaitPromise": True})
        return r["result"].get("value")

    def wait(self, expr, timeout=30):
        end = time.time() + timeout
        while not self.eval(expr):
            if time.time() > end:
                raise RuntimeError(f"timed out: {expr}")
            time.sleep(0.005)

    def close(self):
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--settle", type=float, default=5)
    args = ap.parse_args()
    if PROFILE == "release" and not os.environ.get("XYBENCH_NO_BUILD"):
        subprocess.run(["cargo", "build", "--release", "-p", "xy-daemon", "-p", "xy-testbins",
                        "--bins"], cwd=ROOT, check=True)
    out = {"profile": PROFILE}

    d = start_daemon(0)
    try:
        out["idle_rss_kib_console_off"] = settled_rss(d.proc.pid, args.settle)
    finally:
        d.remove()

    port = free_port()
    d = start_daemon(port)
    try:
        out["idle_rss_kib_console_on"] = settled_rss(d.proc.pid, args.settle)
        t0 = cpu_ticks(d.proc.pid)
        time.sleep(args.settle)
        out["idle_cpu_ticks_console_on"] = cpu_ticks(d.proc.pid) - t0
        out["idle_seconds"] = args.settle

        subprocess.run([os.path.join(BIN, "xy-mcp-load"), "http", str(d.bridge), "/mcp",
                        "latency", "10000"], check=True, capture_output=True)
        code = rpc(d.sock, "console_code")["result"]
        body, headers = post(port, "/api/login", {"code": code["code"]}, {})
        token = json.loads(body)["token"]
        cookie = headers["Set-Cookie"].split(";")[0]
        auth = {"Cookie": cookie, "X-XY-Token": token}
        times = []
        for i in range(21):
            t = time.perf_counter()
            body, _ = post(port, "/api/rpc", {"method": "calls", "params": {"limit": 10000}}, auth)
            times.append((time.perf_counter() - t) * 1000)
            if i == 0:
                out["calls_records"] = len(json.loads(body)["result"]["calls"])
                out["calls_bytes"] = len(body)
        out["first_answer_ms_first"] = round(times[0], 1)
        out["first_answer_ms_median"] = round(statistics.median(times[1:]), 1)
        out["first_answer_ms_max"] = round(max(times[1:]), 1)

        exe = shutil.which("chromium") or shutil.which("chromium-browser")
        if exe:
            c = Chromium(exe)
            try:
                link = f"{code['url']}#code={rpc(d.sock, 'console_code')['result']['code']}"
                c.send("Page.navigate", {"url": link})
                c.wait("document.querySelector('#banner') !== null && "
                       "document.querySelector('main h2') !== null")
                loads = []
                for _ in range(5):
                    c.eval("location.hash = '#/review'; true")
                    c.wait("document.querySelector('main h2') && "
                           "document.querySelector('main h2').textContent === 'Review queue'")
                    t = time.perf_counter()
                    c.eval("location.hash = '#/calls'; true")
                    c.wait("document.querySelectorAll('#calls tr').length === 200")
                    loads.append((time.perf_counter() - t) * 1000)
                out["browser_calls_page_ms"] = [round(x) for x in loads]
                out["after_page_rss_kib"] = rss_kib(d.proc.pid)
            finally:
                c.close()
            out["after_page_closed_rss_kib"] = settled_rss(d.proc.pid, args.settle)
    finally:
        d.remove()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    sys.exit(main())
