"""The official Python SDK's client (mcp 2.x) driving an MCP server over
stdio, for xy's interop tests of `xyctl connect`: it launches the given
command, negotiates the protocol, lists the tools and calls one, and prints
one JSON line with what it saw.

usage: python sdk_client.py --mode legacy|auto --tool NAME [--text T] -- COMMAND ARGS...

`--mode legacy` forces the 2025 `initialize` handshake; `--mode auto` probes
`server/discover` first (2026-07-28) and falls back to the handshake.
"""

import argparse
import asyncio
import json
import os
import sys

from mcp import Client, StdioServerParameters


async def run(args: argparse.Namespace) -> dict:
    params = StdioServerParameters(
        command=args.command[0], args=args.command[1:], env=dict(os.environ)
    )
    async with Client(params, mode=args.mode, raise_exceptions=True) as client:
        listed = await client.list_tools()
        called = await client.call_tool(args.tool, {"text": args.text})
        texts = [c.text for c in called.content if getattr(c, "type", None) == "text"]
        return {
            "protocol_version": client.protocol_version,
            "tools": [t.name for t in listed.tools],
            "call_text": texts,
            "call_is_error": bool(called.is_error),
        }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["legacy", "auto"], required=True)
    parser.add_argument("--tool", required=True)
    parser.add_argument("--text", default="hello from the python sdk")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    if not args.command:
        parser.error("a command to launch is required after --")
    print(json.dumps(asyncio.run(asyncio.wait_for(run(args), 60))), flush=True)


if __name__ == "__main__":
    sys.exit(main())
