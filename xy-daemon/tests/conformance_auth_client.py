"""One client-authorization scenario of the MCP conformance suite, played
by xy: the suite runs `python3 conformance_auth_client.py <server url>` per
scenario (conformance_auth.rs). The scenario's server becomes a remote
server of the running xyd (a server file with `url` + `auth { oauth }`,
then `xyctl reload`); the login is `xyctl auth login <name> --no-browser`
with its printed URL followed as a browser would (the suite's
authorization server approves at once); the MCP calls go to the server's
port on xy, never to the scenario's server directly. A `login needed`
answer from xy (or a 401/403 it let through) means: log in again and retry,
three logins at most. Exit 0 when every call got an answer. The suite runs
several scenarios at once: each has its own server name and port, writes
its file atomically and retries a reload another one's reload refused.

Environment: XY_XYCTL (the xyctl binary), XY_SOCKET (xyd's socket),
XY_CONFIG_DIR (xyd's servers/ directory), plus the suite's
MCP_CONFORMANCE_* variables. Standard library only.
"""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

XYCTL = os.environ["XY_XYCTL"]
CONFIG_DIR = os.environ["XY_CONFIG_DIR"]
URL = sys.argv[-1]
SCENARIO = os.environ.get("MCP_CONFORMANCE_SCENARIO", "?")
CONTEXT = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "null") or {}
V2026 = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION") == "2026-07-28"
NAME = "conf%d" % os.getpid()
MAX_LOGINS = 3


def say(msg):
    line = "[%s via xyd] %s\n" % (SCENARIO, msg)
    sys.stderr.write(line)
    log = os.environ.get("XY_WRAPPER_LOG")
    if log:
        with open(log, "a") as f:
            f.write(line)


def xyctl(*args, **kw):
    return subprocess.run(
        [XYCTL, "--no-spawn", *args],
        env={**os.environ, "NO_COLOR": "1"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        **kw,
    )


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def configure():
    """Writes the server file, reloads, waits until xy listens on its port."""
    port = free_port()
    auth = ["    oauth"]
    extra = ""
    if CONTEXT.get("client_id"):
        auth.append("    client-id %s" % json.dumps(CONTEXT["client_id"]))
    if CONTEXT.get("client_secret"):
        # A confidential client (D149): the secret goes in a §16 secret
        # file, never in the server file.
        secret_path = os.path.join(os.path.dirname(CONFIG_DIR), NAME + ".client-secret")
        with open(secret_path, "w") as f:
            f.write(CONTEXT["client_secret"])
        auth.append('    client-secret secret="CLIENT_SECRET"')
        extra = "secrets {\n    CLIENT_SECRET file=%s\n}\n" % json.dumps(secret_path)
    kdl = "url %s\nport %d\nauth {\n%s\n}\n%sfirewall {\n    mode \"off\"\n}\n" % (
        json.dumps(URL),
        port,
        "\n".join(auth),
        extra,
    )
    path = os.path.join(CONFIG_DIR, NAME + ".kdl")
    # The suite runs scenarios side by side, each reloading: a half-written
    # file seen by another scenario's reload would fail that reload.
    tmp = os.path.join(os.path.dirname(CONFIG_DIR), NAME + ".kdl.tmp")
    with open(tmp, "w") as f:
        f.write(kdl)
    os.replace(tmp, path)
    reload()
    deadline = time.monotonic() + 15
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return path, "http://127.0.0.1:%d/mcp" % port
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError("xy does not listen on %d after the reload" % port)
            time.sleep(0.05)


def reload():
    """`xyctl reload`, tried again while another scenario's reload runs."""
    for attempt in range(5):
        r = xyctl("reload")
        if r.returncode == 0:
            return
        say("xyctl reload (attempt %d): %s" % (attempt + 1, (r.stdout + r.stderr).strip()))
        time.sleep(0.2)
    raise RuntimeError("xyctl reload failed five times")


def unconfigure(path):
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
    try:
        reload()
    except RuntimeError as e:
        say(str(e))


def login():
    """`xyctl auth login --no-browser`, its URL followed as a browser would."""
    p = subprocess.Popen(
        [XYCTL, "--no-spawn", "auth", "login", NAME, "--no-browser"],
        env={**os.environ, "NO_COLOR": "1"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    first = p.stdout.readline().strip()
    if first.startswith("http"):
        try:
            # urllib follows the authorization server's redirect to xyd's
            # loopback callback, as a browser would.
            urllib.request.urlopen(first, timeout=20).read()
        except urllib.error.HTTPError as e:
            say("the callback page answered %d" % e.code)
        except OSError as e:
            say("following the login URL: %s" % e)
    try:
        out, err = p.communicate(timeout=40)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    if p.returncode != 0:
        raise RuntimeError("xyctl auth login: %s %s" % (first, (out + err).strip()))
    say("logged in")


class Session:
    def __init__(self, url):
        self.url = url
        self.session_id = None
        self.logins = 0
        self.next_id = 1

    def post(self, body):
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2026-07-28" if V2026 else "2025-11-25",
        }
        if V2026 and "method" in body:
            headers["Mcp-Method"] = body["method"]
            name = body.get("params", {}).get("name")
            if name:
                headers["Mcp-Name"] = name
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        req = urllib.request.Request(
            self.url, data=json.dumps(body).encode(), headers=headers, method="POST"
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                sid = r.headers.get("Mcp-Session-Id")
                if sid:
                    self.session_id = sid
                return r.status, r.headers.get("Content-Type", ""), r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.headers.get("Content-Type", ""), e.read().decode(errors="replace")

    def login_again(self, why):
        self.logins += 1
        if self.logins > MAX_LOGINS:
            raise RuntimeError("%d logins did not get through (%s)" % (MAX_LOGINS, why))
        say("login %d: %s" % (self.logins, why))
        login()

    def request(self, method, params):
        if V2026:
            params = dict(params)
            params["_meta"] = {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "xy-conformance", "version": "0"},
            }
        while True:
            body = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
            self.next_id += 1
            status, ctype, text = self.post(body)
            if status in (401, 403):
                self.login_again("%s: HTTP %d" % (method, status))
                continue
            if status >= 300:
                raise RuntimeError("%s: HTTP %d: %s" % (method, status, text[:200]))
            msg = parse(ctype, text)
            why = login_needed(msg)
            if why:
                self.login_again(why)
                continue
            if "error" in msg:
                raise RuntimeError("%s: %s" % (method, msg["error"].get("message")))
            return msg

    def notify(self, method):
        status, _, text = self.post({"jsonrpc": "2.0", "method": method})
        if status >= 300:
            raise RuntimeError("%s: HTTP %d: %s" % (method, status, text[:200]))


def parse(ctype, text):
    if ctype.startswith("text/event-stream"):
        for line in text.splitlines():
            if line.startswith("data:") and '"id"' in line:
                return json.loads(line[5:].strip())
        return {}
    return json.loads(text) if text.strip() else {}


def login_needed(msg):
    """xy's answer when the grant is missing or no longer enough."""
    texts = [msg.get("error", {}).get("message", "")]
    result = msg.get("result") or {}
    if result.get("isError"):
        texts += [c.get("text", "") for c in result.get("content", [])]
    return next((t for t in texts if "login needed" in t), None)


def main():
    try:
        path, xy_url = configure()
    except Exception as e:
        say("configuring the server: %s" % e)
        return 1
    try:
        s = Session(xy_url)
        s.login_again("no grant yet")
        if not V2026:
            s.request(
                "initialize",
                {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "xy-conformance", "version": "0"},
                },
            )
            s.notify("notifications/initialized")
        tools = s.request("tools/list", {})
        listed = (tools.get("result") or {}).get("tools") or []
        if listed:
            s.request("tools/call", {"name": listed[0]["name"], "arguments": {}})
        return 0
    except Exception as e:  # the suite only reads the exit status
        say("client error: %s" % e)
        return 1
    finally:
        unconfigure(path)


if __name__ == "__main__":
    sys.exit(main())
