"""The official Python SDK's client (mcp 2.x) making a sequence of tool
calls to an MCP server over stdio, for xy's tests of `xyctl mcp`: it
launches the command, negotiates the protocol, lists the tools, makes each
call in order in the same session, and prints one JSON line with everything
it saw.

usage: python sdk_calls.py --mode legacy|auto --calls JSON -- COMMAND ARGS...

`--calls` is a JSON list of `[tool, arguments]` pairs. `--mode legacy`
forces the 2025 `initialize` handshake; `--mode auto` probes
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
    calls = json.loads(args.calls)
    async with Client(params, mode=args.mode, raise_exceptions=True) as client:
        listed = await client.list_tools()
        results = []
        for tool, arguments in calls:
            called = await client.call_tool(tool, arguments)
            results.append(
                {
                    "tool": tool,
                    "is_error": bool(called.is_error),
                    "text": "\n".join(
                        c.text for c in called.content if getattr(c, "type", None) == "text"
                    ),
                    "structured": called.structured_content,
                }
            )
        return {
            "protocol_version": client.protocol_version,
            "tools": [
                {"name": t.name, "description": t.description} for t in listed.tools
            ],
            "results": results,
        }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["legacy", "auto"], required=True)
    parser.add_argument("--calls", required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    if not args.command:
        parser.error("a command to launch is required after --")
    print(json.dumps(asyncio.run(asyncio.wait_for(run(args), 120))), flush=True)


if __name__ == "__main__":
    sys.exit(main())
