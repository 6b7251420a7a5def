#!/usr/bin/env python3
"""The per-connection cost of the peer check (SPEC §24, D170): one stdio
server (`xy-test-mcp --stdio`) behind one `xyd`, and `tools/call echo`
round trips on its own port from this process, per round 200 on one
keep-alive connection and 50 each on a fresh connection. Prints the p50 of
each as JSON. Run it alternately with two `xyd` binaries (before/after).

usage: python3 bench/peer_check.py XYD XY_TEST_MCP [ROUNDS]
"""

import http.client, json, os, subprocess, sys, tempfile, time, socket, statistics

xyd, mcp = sys.argv[1], sys.argv[2]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
def free():
    s=socket.socket(); s.bind(("127.0.0.1",0)); p=s.getsockname()[1]; s.close(); return p
root=tempfile.mkdtemp(prefix="hpb", dir="/tmp")
cfg=os.path.join(root,"c"); st=os.path.join(root,"s"); os.makedirs(cfg+"/xy/servers")
open(cfg+"/xy/xy.kdl","w").write("gateway { port 0; }\n")
port=free()
open(cfg+"/xy/servers/b.kdl","w").write(f'command "{mcp}"\nargs "--stdio" "--tools" "echo"\ntransport "stdio"\nport {port}\n')
env=dict(os.environ, XDG_CONFIG_HOME=cfg, XDG_STATE_HOME=st, XY_SOCKET=root+"/x.sock", XY_LOG="warn")
env.pop("XDG_RUNTIME_DIR", None)
d=subprocess.Popen([xyd], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    t0=time.time()
    while True:
        try:
            c=http.client.HTTPConnection("127.0.0.1",port,timeout=10)
            c.request("POST","/mcp",json.dumps({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}),{"Content-Type":"application/json","Accept":"application/json, text/event-stream"})
            r=c.getresponse(); body=r.read()
            if r.status==200: break
        except Exception: pass
        if time.time()-t0>30: raise SystemExit("no answer")
        time.sleep(0.05)
    sess=r.getheader("mcp-session-id")
    H={"Content-Type":"application/json","Accept":"application/json, text/event-stream","MCP-Protocol-Version":"2025-06-18"}
    if sess: H["Mcp-Session-Id"]=sess
    c.request("POST","/mcp",json.dumps({"jsonrpc":"2.0","method":"notifications/initialized"}),H); c.getresponse().read()
    call=json.dumps({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}})
    keep=[];fresh=[]
    for _ in range(rounds):
        for _ in range(200):
            t=time.perf_counter(); c.request("POST","/mcp",call,H); c.getresponse().read(); keep.append(time.perf_counter()-t)
        for _ in range(50):
            t=time.perf_counter(); n=http.client.HTTPConnection("127.0.0.1",port,timeout=10); n.request("POST","/mcp",call,H); n.getresponse().read(); n.close(); fresh.append(time.perf_counter()-t)
    print(json.dumps({"keepalive_p50_us":round(statistics.median(keep)*1e6),"fresh_conn_p50_us":round(statistics.median(fresh)*1e6),"n":[len(keep),len(fresh)]}))
finally:
    d.terminate(); d.wait()
