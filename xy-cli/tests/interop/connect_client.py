"""Drives `xyctl connect NAME` with the official Python MCP SDK's stdio client.

Usage: connect_client.py XYCTL NAME
Connects in the SDK's default mode ("auto": `server/discover`, falling back
to `initialize` for a 2025-era server), lists the tools, calls `echo` when
offered, and prints one JSON line: {protocol_version, tools, echo}.
"""

import json
import os
import sys

import anyio
from mcp import Client, StdioServerParameters


async def main() -> None:
    xyctl, name = sys.argv[1], sys.argv[2]
    params = StdioServerParameters(command=xyctl, args=["connect", name], env=dict(os.environ))
    async with Client(params) as client:
        listed = await client.list_tools()
        names = [t.name for t in listed.tools]
        out = {"protocol_version": client.protocol_version, "tools": names, "echo": None}
        if "echo" in names:
            result = await client.call_tool("echo", {"text": "hello through xy"})
            out["echo"] = [getattr(block, "text", None) for block in result.content]
        print(json.dumps(out), flush=True)


anyio.run(main)
