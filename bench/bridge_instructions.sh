#!/bin/bash
# Instructions xyd spends per bridged request (callgrind counts
# instructions, not seconds: repeatable on a noisy machine). One stdio
# server (`xy-test-mcp --stdio --era 2025`) under a release xyd run by
# valgrind; 200 warm-up calls, then the counters are zeroed and
# `xy-mcp-load` sends 2,000 sequential `tools/call` (plus its own 50
# warm-up calls) on one keep-alive connection.
#   usage: bench/bridge_instructions.sh [TREE]   (default: this checkout)
# Needs valgrind and `cargo build --release -p xy-daemon -p xy-testbins`.
set -eu
TREE=${1:-$(cd "$(dirname "$0")/.." && pwd)}
T=$TREE/target/release
tmp=$(mktemp -d /tmp/xycg.XXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/c/xy/servers"
port=$((30000 + RANDOM % 5000))
printf 'command "%s/xy-test-mcp"\nargs "--stdio" "--era" "2025"\ntransport "stdio"\nport %d\n' \
    "$T" "$port" > "$tmp/c/xy/servers/echo.kdl"
env -u XDG_RUNTIME_DIR XDG_CONFIG_HOME="$tmp/c" XDG_STATE_HOME="$tmp/s" \
    XY_SOCKET="$tmp/x.sock" XY_LOG=warn \
    valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" "$T/xyd" \
    > /dev/null 2> "$tmp/valgrind.log" &
vp=$!
for _ in $(seq 1 300); do
    (echo > "/dev/tcp/127.0.0.1/$port") 2> /dev/null && break
    sleep 0.2
done
"$T/xy-mcp-load" http "$port" /mcp latency 200 > /dev/null
callgrind_control -z "$vp" > /dev/null
"$T/xy-mcp-load" http "$port" /mcp latency 2000 > /dev/null
callgrind_control -d "$vp" > /dev/null
sleep 1
kill -TERM "$vp"
wait "$vp" || true
f="$tmp/cg.out.1"  # the dump; cg.out itself holds the shutdown
ir=$(grep -E '^(summary|totals):' "$f" | head -1 | awk '{print $2}')
echo "$TREE: $ir instructions for 2,050 requests, $((ir / 2050)) per request"
