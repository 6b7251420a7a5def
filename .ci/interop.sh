#!/usr/bin/env bash
# Installs the MCP implementations nobody here wrote (the pinned Python `mcp`
# SDK in a venv, `@modelcontextprotocol/server-everything`, the reference
# servers the firewall is checked against, and the conformance suite with
# Node 22 and the TypeScript SDK, from npm, and the compatibility corpus of
# real servers: an npm cache, a wheelhouse, uv and a project venv) into the
# interop cache (target/interop, or $XY_INTEROP_CACHE) once, before the tests,
# so no test pays for the install. The versions are pinned in
# xy-testbins/src/interop.rs and xy-testbins/src/corpus.rs; an unreachable
# registry is a loud skip there.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run -q -p xy-testbins --bin xy-test-interop
