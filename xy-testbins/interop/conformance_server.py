"""The conformance harness's second server under test, on the official
Python SDK (mcp 2.x, dual-era): the tools, resources and prompts the
conformance suite's server scenarios call. `--stdio` serves it on
stdin/stdout (behind xy); `--port N` over streamable HTTP at /mcp by the
SDK itself (the reference, which speaks 2026-07-28 too).

usage: python conformance_server.py (--port N | --stdio)
"""

import argparse
import base64
import json
from typing import Annotated

from pydantic import BaseModel

from mcp import types
from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve, Sample
from mcp.server.mcpserver.prompts.base import UserMessage
from mcp.server.mcpserver.utilities.types import Audio, Image

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
WAV = base64.b64decode("UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA=")


def embedded(uri: str, mime: str, text: str) -> types.EmbeddedResource:
    return types.EmbeddedResource.model_validate(
        {"type": "resource", "resource": {"uri": uri, "mimeType": mime, "text": text}}
    )


class UserInfo(BaseModel):
    """What the scenario's elicitation asks for."""

    username: str
    email: str


# The SDK's era-agnostic way to ask the client (its `Resolve` markers): a
# server-to-client request mid-call in a 2025 session, an
# `InputRequiredResult` and its retry in the 2026 era. Behind xy this child
# is served in the 2026 era (it fixes the era on `server/discover`), so a
# tool calling `ctx.elicit()` directly would have no way to ask anyone.
def ask_user(message: str) -> Elicit[UserInfo]:
    return Elicit(message, UserInfo)


def ask_llm(prompt: str) -> Sample:
    return Sample(
        [types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))],
        max_tokens=100,
    )


def build() -> MCPServer:
    server = MCPServer("xy-conformance-python", version="1.0.0")

    @server.tool()
    def test_simple_text() -> str:
        """Returns one text item."""
        return "This is a simple text response for testing."

    @server.tool()
    def test_image_content() -> Image:
        """Returns an image."""
        return Image(data=PNG, format="png")

    @server.tool()
    def test_audio_content() -> Audio:
        """Returns audio."""
        return Audio(data=WAV, format="wav")

    @server.tool()
    def test_embedded_resource() -> list:
        """Returns an embedded resource."""
        return [embedded("test://embedded-resource", "text/plain", "This is an embedded resource content.")]

    @server.tool()
    def test_multiple_content_types() -> list:
        """Returns text, an image and a resource."""
        return [
            types.TextContent(type="text", text="Multiple content types test:"),
            Image(data=PNG, format="png"),
            embedded("test://mixed-content-resource", "application/json", json.dumps({"test": "data", "value": 123})),
        ]

    @server.tool()
    async def test_tool_with_logging(ctx: Context) -> str:
        """Logs three messages while it runs."""
        for m in ("Tool execution started", "Tool processing data", "Tool execution completed"):
            await ctx.info(m)
        return "Tool with logging executed successfully"

    @server.tool()
    async def test_tool_with_progress(ctx: Context) -> str:
        """Reports progress three times."""
        for p in (0, 50, 100):
            await ctx.report_progress(p, 100, f"Completed step {p} of 100")
        return "progress done"

    @server.tool()
    def test_error_handling() -> str:
        """Always fails."""
        raise RuntimeError("This tool intentionally returns an error for testing")

    @server.tool()
    async def test_sampling(
        prompt: str, sampled: Annotated[types.CreateMessageResult, Resolve(ask_llm)]
    ) -> str:
        """Asks the client for a completion."""
        text = getattr(sampled.content, "text", None) or "No response"
        return f"LLM response: {text}"

    @server.tool()
    async def test_elicitation(
        message: str, answer: Annotated[ElicitationResult[UserInfo], Resolve(ask_user)]
    ) -> str:
        """Asks the user through the client."""
        data = answer.data.model_dump() if isinstance(answer, AcceptedElicitation) else {}
        return f"User response: action={answer.action}, content={json.dumps(data)}"

    @server.resource("test://static-text", mime_type="text/plain")
    def static_text() -> str:
        return "This is the content of the static text resource."

    @server.resource("test://static-binary", mime_type="image/png")
    def static_binary() -> bytes:
        return PNG

    @server.resource("test://watched-resource", mime_type="text/plain")
    def watched() -> str:
        return "Watched resource content"

    @server.resource("test://template/{id}/data", mime_type="application/json")
    def template(id: str) -> str:
        return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})

    @server.prompt()
    def test_simple_prompt() -> str:
        """No arguments."""
        return "This is a simple prompt for testing."

    @server.prompt()
    def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
        """Two arguments."""
        return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"

    @server.prompt()
    def test_prompt_with_embedded_resource(resourceUri: str) -> list:
        """Embeds a resource."""
        return [
            UserMessage(content=embedded(resourceUri, "text/plain", "Embedded resource content for testing.")),
            UserMessage(content="Please process the embedded resource above."),
        ]

    @server.prompt()
    def test_prompt_with_image() -> list:
        """Includes an image."""
        img = types.ImageContent(type="image", data=base64.b64encode(PNG).decode(), mime_type="image/png")
        return [UserMessage(content=img), UserMessage(content="Please analyze the image above.")]

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int)
    parser.add_argument("--stdio", action="store_true")
    args = parser.parse_args()
    server = build()
    if args.stdio:
        server.run("stdio")
    elif args.port is not None:
        server.run("streamable-http", host="127.0.0.1", port=args.port)
    else:
        parser.error("--port N or --stdio")


if __name__ == "__main__":
    main()
