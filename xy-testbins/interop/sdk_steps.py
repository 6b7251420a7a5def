"""The official Python SDK's client (mcp 2.x) driven step by step, for
xy's tests of sessions that outlive restarts: it launches the command over
stdio, lists the tools, then for each line on its own stdin (a JSON
`[tool, arguments]` pair) makes that call in the same session and prints
one JSON line `{tool, is_error, text}`. Any error the SDK sees (a JSON-RPC
error, a closed transport) ends it with a traceback and a non-zero exit.

usage: python sdk_steps.py --mode legacy|auto -- COMMAND ARGS...
"""

import argparse
import asyncio
import json
import os
import sys

from mcp import Client, StdioServerParameters


async def run(args: argparse.Namespace) -> None:
    params = StdioServerParameters(
        command=args.command[0], args=args.command[1:], env=dict(os.environ)
    )
    loop = asyncio.get_running_loop()
    async with Client(params, mode=args.mode, raise_exceptions=True) as client:
        listed = await client.list_tools()
        print(json.dumps({"tools": [t.name for t in listed.tools]}), flush=True)
        while True:
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if not line:
                return
            tool, arguments = json.loads(line)
            called = await asyncio.wait_for(client.call_tool(tool, arguments), 60)
            print(
                json.dumps(
                    {
                        "tool": tool,
                        "is_error": bool(called.is_error),
                        "text": "\n".join(
                            c.text
                            for c in called.content
                            if getattr(c, "type", None) == "text"
                        ),
                    }
                ),
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["legacy", "auto"], required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    if not args.command:
        parser.error("a command to launch is required after --")
    asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
