"""The official Python SDK's client (mcp 2.x) answering elicitations over
streamable HTTP, for xy's MRTR interop test: it connects to the given URL,
calls the given tool, answers each elicitation with `py-<n>` (n counting
from 1), and prints one JSON line: `{protocol_version, asked, text,
is_error}`. In a 2026 mode the SDK drives the InputRequiredResult rounds
itself; in `legacy` mode the elicitations arrive as server-to-client
requests.

usage: python sdk_elicit.py --mode legacy|2026-07-28 --url URL --tool NAME [--args JSON]
"""

import argparse
import asyncio
import json
import sys

from mcp import Client
from mcp import types


async def run(args: argparse.Namespace) -> dict:
    asked = []

    async def elicit(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"answer": f"py-{len(asked)}"})

    async with Client(
        args.url, mode=args.mode, raise_exceptions=True, elicitation_callback=elicit
    ) as client:
        called = await client.call_tool(args.tool, json.loads(args.args))
        texts = [c.text for c in called.content if getattr(c, "type", None) == "text"]
        return {
            "protocol_version": client.protocol_version,
            "asked": asked,
            "text": texts,
            "is_error": bool(called.is_error),
        }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--tool", required=True)
    parser.add_argument("--args", default="{}")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(asyncio.wait_for(run(args), 60))), flush=True)


if __name__ == "__main__":
    sys.exit(main())
