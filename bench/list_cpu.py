#!/usr/bin/env python3
"""CPU per `list` call in xyd, wall-clock free (docs/performance.md; its history in docs/performance-history.md, issue 12).

Usage: bench/list_cpu.py <xyd> <N> <calls>. Boots <xyd> with N release
`xy-test-sleep` servers in a temp dir, waits until all run, then runs
`perf stat -e task-clock,instructions -p <xyd>` over <calls> `list` calls.
"""
import os, socket, subprocess, sys, tempfile, time
xyd, n, calls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sleep_bin = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../target/release/xy-test-sleep")
d = tempfile.mkdtemp(prefix="xyc", dir="/tmp")
srv = os.path.join(d, "c/xy/servers"); os.makedirs(srv)
for i in range(n):
    open(os.path.join(srv, "s%03d.kdl" % i), "w").write(
        'command "%s"\nargs "--interval-ms" "3600000"\nport %d\nstop {\n    grace "2s"\n}\n' % (sleep_bin, 21000 + i))
sock = os.path.join(d, "x.sock")
env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(d, "c"), XDG_STATE_HOME=os.path.join(d, "s"), XY_SOCKET=sock, XY_LOG="warn")
env.pop("XDG_RUNTIME_DIR", None)
p = subprocess.Popen([xyd], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
def connect():
    s = socket.socket(socket.AF_UNIX); s.connect(sock); return s, s.makefile("rb", buffering=1 << 20)
req = b'{"jsonrpc":"2.0","id":1,"method":"list"}\n'
deadline = time.time() + 120
while True:
    try:
        s, f = connect(); s.sendall(req); line = f.readline()
        if line.count(b'"state":"running"') == n: break
        s.close()
    except OSError: pass
    assert time.time() < deadline, "not ready"
    time.sleep(0.05)
for _ in range(200): s.sendall(req); f.readline()
perf = subprocess.Popen(["perf", "stat", "-x,", "-e", "task-clock,instructions", "-p", str(p.pid)], stderr=subprocess.PIPE, text=True)
time.sleep(0.3)
t = time.time()
for _ in range(calls): s.sendall(req); f.readline()
el = time.time() - t
perf.send_signal(2); out = perf.communicate()[1]
vals = {}
for l in out.strip().splitlines():
    parts = l.split(",")
    if len(parts) > 3 and not parts[0].startswith("<"): vals[parts[2]] = float(parts[0])
ins = "%.0f" % (vals["instructions"] / calls) if "instructions" in vals else "n/a (no hardware counters)"
print("%s N=%d: %.1f us task-clock/call, instructions/call %s, client round trip %.1f us/call, reply %d B" % (
    os.path.basename(xyd), n, vals.get("task-clock", 0) * 1000 / calls, ins, el * 1e6 / calls, len(line)))
s.close()
p.terminate(); p.wait(60)
subprocess.run(["rm", "-rf", d])
