"""The official Python SDK's client (mcp 2.x) over streamable HTTP in each
of its ways to pick a protocol era, against several servers, for xy's era
matrix test (xy-daemon/tests/era_matrix.rs). For every (mode, server) cell
it lists the tools, calls `echo`, calls `elicit` (one elicitation, answered
`py-<mode>`), `sample` (answered `hello`) and `roots` (one root), then waits
for one `notifications/tools/list_changed` after calling `touch`, waits
for the log message `log` sends (a 2025 session first sets its level with
`logging/setLevel`; a 2026 client opts in per request, `log_level`), and
subscribes to a resource (`resources/subscribe`, removed in 2026: there
the refusal is what it records), and prints one JSON line of what it saw:

    {"mode", "server", "protocol_version", "tools", "echo", "elicit",
     "asked", "sample", "roots", "list_changed", "logged", "subscribed",
     "errors": {step: text}}

A step that fails records its error and the next step still runs.
The servers are driven at once, one mode at a time: a list_changed one
cell triggers cannot count for another cell of its server, and the pinned
legacy version (see `pinned`) never leaks into another mode's handshake.

Modes:
  legacy-2025-06-18  `mode="legacy"`, offering 2025-06-18 (see `pinned`)
  legacy             `mode="legacy"` (the SDK offers 2025-11-25)
  2026-07-28         `mode="2026-07-28"` (no probe, the 2026 envelope only)
  auto               `mode="auto"` (server/discover, else initialize)

usage: python sdk_matrix.py --modes M1,M2 --server NAME=URL [--server ...]
"""

import argparse
import asyncio
import json
import sys
from contextlib import contextmanager

import anyio

import mcp.client.session as client_session
from mcp import Client
from mcp import types

STEP_TIMEOUT = 15
#: How long one `touch` waits for its notification before touching again:
#: a 2025 client's GET stream opens in the background after the handshake,
#: and a notification sent before it is open reaches no one.
TOUCH_WAIT = 1.0


@contextmanager
def pinned(mode: str):
    """The SDK's `mode` takes "legacy", "auto" or a 2026-era version; a
    2025 version string is refused ("is a handshake-era version; use
    mode='legacy'"), and legacy always offers LATEST_HANDSHAKE_VERSION.
    `ClientSession.initialize` reads that name from its module, so setting
    it there is the SDK's own legacy handshake offering 2025-06-18."""
    if mode != "legacy-2025-06-18":
        yield "legacy" if mode.startswith("legacy") else mode
        return
    saved = client_session.LATEST_HANDSHAKE_VERSION
    client_session.LATEST_HANDSHAKE_VERSION = "2025-06-18"
    try:
        yield "legacy"
    finally:
        client_session.LATEST_HANDSHAKE_VERSION = saved


def text_of(result) -> list:
    return [c.text for c in result.content if getattr(c, "type", None) == "text"]


async def cell(mode: str, sdk_mode: str, server: str, url: str) -> dict:
    seen = {"mode": mode, "server": server, "protocol_version": None, "tools": None,
            "echo": None, "elicit": None, "asked": [], "sample": None, "roots": None,
            "list_changed": False, "logged": False, "subscribed": False, "errors": {}}
    changed = anyio.Event()
    logged = anyio.Event()

    async def on_log(params) -> None:
        if params.data == "logged":
            logged.set()

    async def on_message(message) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            changed.set()

    async def elicit(context, params):
        seen["asked"].append(params.message)
        return types.ElicitResult(action="accept", content={"answer": f"py-{mode}"})

    async def sample(context, params):
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="hello"),
            model="m", stop_reason="endTurn")

    async def roots(context):
        return types.ListRootsResult(roots=[types.Root(uri="file:///matrix", name="m")])

    async def step(name, run):
        try:
            with anyio.fail_after(STEP_TIMEOUT):
                return await run()
        except BaseException as e:  # noqa: BLE001 - every failure is a finding
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            seen["errors"][name] = f"{type(e).__name__}: {e}"[:600]
            return None

    try:
        client = Client(url, mode=sdk_mode, raise_exceptions=True, cache=None,
                        elicitation_callback=elicit, sampling_callback=sample,
                        list_roots_callback=roots, message_handler=on_message,
                    logging_callback=on_log, log_level="info")
        async with client:
            seen["protocol_version"] = client.protocol_version
            listed = await step("tools", client.list_tools)
            if listed is not None:
                seen["tools"] = [t.name for t in listed.tools]
            r = await step("echo", lambda: client.call_tool("echo", {"text": f"hi {mode}"}))
            if r is not None:
                seen["echo"] = text_of(r)
            r = await step("elicit", lambda: client.call_tool("elicit", {}))
            if r is not None:
                seen["elicit"] = text_of(r)
            r = await step("sample", lambda: client.call_tool("sample", {}))
            if r is not None:
                seen["sample"] = text_of(r)
            r = await step("roots", lambda: client.call_tool("roots", {}))
            if r is not None:
                seen["roots"] = text_of(r)

            async def list_changed() -> bool:
                if client.protocol_version.startswith("2026"):
                    async with client.listen(tools_list_changed=True) as sub:
                        await client.call_tool("touch", {})
                        async for _event in sub:
                            return True
                    return False
                while True:
                    await client.call_tool("touch", {})
                    with anyio.move_on_after(TOUCH_WAIT):
                        await changed.wait()
                        return True

            seen["list_changed"] = bool(await step("list_changed", list_changed))

            async def log() -> bool:
                if not client.protocol_version.startswith("2026"):
                    await client.set_logging_level("info")
                await client.call_tool("log", {})
                await logged.wait()
                return True

            seen["logged"] = bool(await step("logging", log))

            async def subscribe() -> bool:
                await client.subscribe_resource("test://watched")
                return True

            seen["subscribed"] = bool(await step("subscribe", subscribe))
    except BaseException as e:  # noqa: BLE001
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        seen["errors"]["connect"] = f"{type(e).__name__}: {e}"[:600]
    return seen


async def run(args) -> list:
    servers = [spec.split("=", 1) for spec in args.server]
    out = []
    for mode in args.modes.split(","):
        # Pinned once around the mode's cells: they run at once.
        with pinned(mode) as sdk_mode:
            cells = (cell(mode, sdk_mode, name, url) for name, url in servers)
            out.extend(await asyncio.gather(*cells))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--modes", required=True)
    parser.add_argument("--server", action="append", required=True)
    args = parser.parse_args()
    for seen in asyncio.run(asyncio.wait_for(run(args), 120)):
        print(json.dumps(seen), flush=True)


if __name__ == "__main__":
    sys.exit(main())
