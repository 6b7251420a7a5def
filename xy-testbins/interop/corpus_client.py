"""The official Python SDK's client (mcp 2.x) for xy's compatibility corpus
(SPEC §25): the same calls against a real server either launched directly
over stdio or reached through xy over streamable HTTP, so the two outcomes
can be compared line for line.

usage: python corpus_client.py --calls JSON [--list-only]
           (--url URL | [--cwd DIR] [--env JSON] -- COMMAND ARGS...)

`--calls` is a JSON list of `[tool, arguments]` or `[tool, arguments,
masks]` entries; `masks` is a list of regular expressions whose matches are
replaced by `<masked>` in the result's text (clock times, temp paths), so
what differs between two honest runs does not count. `--env` is the whole
environment of the launched command (a JSON object). Prints one JSON line
`{tools: [sorted names], results: [{tool, is_error, text}]}`; any failure
of the session itself prints `{error}` and exits 1.
"""

import argparse
import asyncio
import json
import os
import re
import sys

from mcp import Client, StdioServerParameters


def text_of(called) -> str:
    parts = []
    for c in called.content:
        kind = getattr(c, "type", None)
        if kind == "text":
            parts.append(c.text)
        else:
            parts.append(f"<{kind}>")
    return "\n".join(parts)


async def run(args: argparse.Namespace) -> dict:
    if args.url:
        target = args.url
    else:
        env = json.loads(args.env) if args.env else dict(os.environ)
        target = StdioServerParameters(
            command=args.command[0], args=args.command[1:], env=env, cwd=args.cwd
        )
    calls = json.loads(args.calls)
    async with Client(target, mode="legacy", raise_exceptions=True) as client:
        listed = await client.list_tools()
        results = []
        for entry in calls:
            tool, arguments = entry[0], entry[1]
            masks = entry[2] if len(entry) > 2 else []
            called = await client.call_tool(tool, arguments)
            text = text_of(called)
            for m in masks:
                text = re.sub(m, "<masked>", text)
            results.append(
                {"tool": tool, "is_error": bool(called.is_error), "text": text}
            )
        return {"tools": sorted(t.name for t in listed.tools), "results": results}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", required=True)
    parser.add_argument("--url")
    parser.add_argument("--cwd")
    parser.add_argument("--env")
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    if not args.url and not args.command:
        parser.error("--url or a command after -- is required")
    try:
        out = asyncio.run(asyncio.wait_for(run(args), args.timeout))
    except BaseException as e:  # the session's failure is the finding
        detail = e
        while isinstance(detail, BaseExceptionGroup) and detail.exceptions:
            detail = detail.exceptions[0]
        print(json.dumps({"error": f"{type(detail).__name__}: {detail}"}), flush=True)
        return 1
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
