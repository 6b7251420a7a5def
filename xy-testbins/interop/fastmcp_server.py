"""A FastMCP-style server from the official Python SDK (mcp 2.x, where
FastMCP is named MCPServer), served over streamable HTTP at /mcp for xy's
interop tests. It is a dual-era server: 2026-07-28 requests are served
statelessly, 2025 clients get the legacy session transport.

usage: python fastmcp_server.py --port N [--host 127.0.0.1]
"""

import argparse

from mcp.server.mcpserver import MCPServer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args()

    server = MCPServer("xy-interop-python", version="1.0.0")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Adds two integers."""
        return a + b

    @server.tool()
    def shout(text: str) -> str:
        """Returns the text in capitals."""
        return text.upper()

    server.run("streamable-http", host=args.host, port=args.port)


if __name__ == "__main__":
    main()
