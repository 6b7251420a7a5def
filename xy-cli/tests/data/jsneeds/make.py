"""Builds, offline, a wheel shaped like readabilipy under mcp-server-fetch
(D290): `jsneeds` ships `jsneeds/js/package.json` with a dependency and,
at its tool's first call, runs `npm install` in that directory unless
`node_modules` is there, then runs node on it. Its dependency is a local
tarball shipped beside the manifest (`file:tiny-1.0.0.tgz`), so npm needs
no registry. Also writes PyPI's JSON document for it, for XY_PYPI_URL.

usage: make.py <out dir>  ->  <out>/wheels/jsneeds-1.0-py3-none-any.whl,
                              <out>/pypi/jsneeds/json
"""

import base64
import hashlib
import io
import json
import os
import sys
import tarfile
import zipfile

SERVER = r'''
"""A stdio MCP server with one tool that needs its JavaScript part."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
JS = os.path.join(HERE, "js")


def js_answer():
    # As readabilipy does: install the npm dependencies into the package's
    # own directory at the first use.
    if not os.path.exists(os.path.join(JS, "node_modules")):
        subprocess.run(["npm", "install"], cwd=JS, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    out = subprocess.run(["node", "-e", "process.stdout.write(require('tiny'))"],
                         cwd=JS, check=True, capture_output=True, text=True)
    return out.stdout


def answer(req):
    method = req.get("method")
    if method == "initialize":
        return {"protocolVersion": req["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "jsneeds", "version": "1.0"}}
    if method == "tools/list":
        return {"tools": [{"name": "js", "description": "Answers from its JavaScript part.",
                           "inputSchema": {"type": "object", "properties": {}}}]}
    if method == "tools/call":
        try:
            return {"content": [{"type": "text", "text": js_answer()}], "isError": False}
        except subprocess.CalledProcessError as e:
            why = (e.stderr or "").strip().splitlines()[-3:]
            return {"content": [{"type": "text", "text": f"{e}: {why}"}], "isError": True}
    if method == "ping":
        return {}
    return None


def main():
    for line in sys.stdin:
        req = json.loads(line)
        if "id" not in req:
            continue
        result = answer(req)
        if result is None:
            msg = {"jsonrpc": "2.0", "id": req["id"],
                   "error": {"code": -32601, "message": "no such method"}}
        else:
            msg = {"jsonrpc": "2.0", "id": req["id"], "result": result}
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()
'''


def tiny_tgz():
    """npm's tarball layout: everything under `package/`."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, text in [
            ("package/package.json", '{"name":"tiny","version":"1.0.0","main":"index.js"}\n'),
            ("package/index.js", 'module.exports = "tiny works";\n'),
        ]:
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 1_700_000_000
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def main(out):
    files = {
        "jsneeds/__init__.py": b"",
        "jsneeds/server.py": SERVER.encode(),
        "jsneeds/js/package.json": json.dumps(
            {"name": "jsneeds-js", "version": "1.0.0", "private": True,
             "dependencies": {"tiny": "file:tiny-1.0.0.tgz"}}, indent=2).encode() + b"\n",
        "jsneeds/js/tiny-1.0.0.tgz": tiny_tgz(),
        "jsneeds-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: jsneeds\nVersion: 1.0\n",
        "jsneeds-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: make.py\n"
                                       b"Root-Is-Purelib: true\nTag: py3-none-any\n",
        "jsneeds-1.0.dist-info/entry_points.txt": b"[console_scripts]\n"
                                                  b"jsneeds = jsneeds.server:main\n",
    }
    record = [record_line(n, d) for n, d in files.items()]
    record.append("jsneeds-1.0.dist-info/RECORD,,")
    files["jsneeds-1.0.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    wheels = os.path.join(out, "wheels")
    os.makedirs(wheels, exist_ok=True)
    with zipfile.ZipFile(os.path.join(wheels, "jsneeds-1.0-py3-none-any.whl"), "w") as z:
        for n, d in files.items():
            z.writestr(n, d)
    doc = {"info": {"name": "jsneeds", "version": "1.0"},
           "releases": {"1.0": [{"filename": "jsneeds-1.0-py3-none-any.whl",
                                 "upload_time_iso_8601": "2024-01-01T00:00:00.000000Z"}]}}
    api = os.path.join(out, "pypi", "jsneeds")
    os.makedirs(api, exist_ok=True)
    with open(os.path.join(api, "json"), "w") as f:
        json.dump(doc, f)


if __name__ == "__main__":
    main(sys.argv[1])
