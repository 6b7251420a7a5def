"""A FastMCP-style server from the official Python SDK (mcp 2.x, where
FastMCP is named MCPServer) for xy's interop tests: over streamable HTTP at
/mcp (a dual-era server: 2026-07-28 requests are served statelessly, 2025
clients get the legacy session transport), or over stdio with --stdio (the
way AI clients launch it, and what xy's stdio bridge serves).

Tools: add and shout; with --stdio also progress (three progress
notifications, `ms` apart) and touch (sends notifications/tools/list_changed
to its client), for the stdio bridge tests.

usage: python fastmcp_server.py (--port N [--host 127.0.0.1] | --stdio)
"""

import argparse
import sys

import anyio

from mcp.server.mcpserver import Context, MCPServer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--stdio", action="store_true")
    args = parser.parse_args()
    if not args.stdio and args.port is None:
        parser.error("--port N or --stdio")

    server = MCPServer("xy-interop-python", version="1.0.0")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Adds two integers."""
        return a + b

    @server.tool()
    def shout(text: str) -> str:
        """Returns the text in capitals."""
        return text.upper()

    if args.stdio:

        @server.tool()
        async def progress(ctx: Context, ms: int = 0) -> str:
            """Reports progress three times, ms milliseconds apart."""
            for step in (1, 2, 3):
                if step > 1 and ms:
                    await anyio.sleep(ms / 1000)
                await ctx.report_progress(step, 3)
            return "done"

        @server.tool()
        async def touch(ctx: Context) -> str:
            """Tells the client that the tool list changed: to its
            `subscriptions/listen` streams (2026) and on the session (2025).
            """
            try:
                await ctx.notify_tools_changed()
            except ValueError:
                pass  # no subscription bus: a 2025-era connection
            await ctx.request_context.session.send_tool_list_changed()
            return "touched"

        print("xy-interop-python serving on stdio", file=sys.stderr, flush=True)
        server.run("stdio")
    else:
        server.run("streamable-http", host=args.host, port=args.port)


if __name__ == "__main__":
    main()
