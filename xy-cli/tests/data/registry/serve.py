"""A local MCP Registry (API v0.1, read side) for xy-cli's tests.

Usage: python3 serve.py <entries.json>. entries.json is a list of
ServerResponse objects (`{"server": <server.json>, "_meta": {...}}`) as the
official registry returns them. Binds 127.0.0.1 on a free port, prints the
port on its first stdout line, and serves until killed:

  GET /v0.1/servers?search=<s>&version=latest&limit=<n>
  GET /v0.1/servers/<url-encoded name>/versions/<version|latest>

Unknown servers and versions get the registry's 404 problem document.
Every request path is appended to <entries.json>.log, one per line.
"""

import json
import sys
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ENTRIES_FILE = sys.argv[1]
with open(ENTRIES_FILE) as f:
    ENTRIES = json.load(f)

OFFICIAL = "io.modelcontextprotocol.registry/official"


def is_latest(e):
    return e.get("_meta", {}).get(OFFICIAL, {}).get("isLatest", True)


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def send_json(self, status, doc, ctype="application/json"):
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def not_found(self, detail):
        self.send_json(
            404,
            {"title": "Not Found", "status": 404, "detail": detail},
            "application/problem+json",
        )

    def do_GET(self):
        with open(ENTRIES_FILE + ".log", "a") as log:
            log.write(self.path + "\n")
        url = urllib.parse.urlsplit(self.path)
        # The raw path: a name's `/` arrives as %2F and must stay one segment.
        parts = url.path.split("/")
        if url.path == "/v0.1/servers":
            q = urllib.parse.parse_qs(url.query)
            search = q.get("search", [""])[0]
            limit = int(q.get("limit", ["30"])[0])
            found = [
                e
                for e in ENTRIES
                if search in e["server"]["name"]
                and (q.get("version", [""])[0] != "latest" or is_latest(e))
            ][:limit]
            self.send_json(200, {"servers": found, "metadata": {"count": len(found)}})
        elif len(parts) == 6 and parts[1:3] == ["v0.1", "servers"] and parts[4] == "versions":
            name = urllib.parse.unquote(parts[3])
            version = urllib.parse.unquote(parts[5])
            for e in ENTRIES:
                s = e["server"]
                if s["name"] == name and (
                    s["version"] == version or (version == "latest" and is_latest(e))
                ):
                    self.send_json(200, e)
                    return
            self.not_found("Server not found")
        else:
            self.not_found("Not found")


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
