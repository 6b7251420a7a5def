"""A user's own MCP server on the official Python SDK, the way a project
keeps one: `server.py` beside the project's `.venv`, launched as
`.venv/bin/python server.py` from the project directory (SPEC §25's "your
own server in a project venv"). `save` writes into the working directory,
as servers that keep notes next to the project do.
"""

from pathlib import Path

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("mine")


@mcp.tool()
def add(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b


@mcp.tool()
def echo(text: str) -> str:
    """Says the text back."""
    return text


@mcp.tool()
def save(text: str) -> str:
    """Writes the text to notes.txt in the working directory."""
    notes = Path("notes.txt")
    notes.write_text(text + "\n")
    return f"saved {len(notes.read_bytes())} bytes to notes.txt"


if __name__ == "__main__":
    mcp.run("stdio")
