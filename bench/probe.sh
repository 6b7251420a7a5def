#!/usr/bin/env bash
# MCP probe benchmark (issue 13); not a test.
#
# For each N (default "10 200"): boot a release xyd with N `xy-test-mcp`
# servers, every one with an `mcp` probe (interval INTERVAL), half of them
# 2026-only and half 2025-only, wait until every one is healthy and has
# listed its tools, settle SETTLE seconds, then print xyd's RSS and the
# probe round trip per era (`health.latency_ms` of every server, sampled
# ROUNDS times one interval apart: p50 and max per era).
#
# Usage: bench/probe.sh [N ...]   env: INTERVAL=2s SETTLE=10 ROUNDS=5 PROBE_NO_BUILD=1
#   XYD=path (another xyd build, e.g. an older commit's, to compare)
#   SMAPS=1 also prints where the RSS lives (per mapping, from /proc/PID/smaps)
#   XY_LOG=… the daemon's log filter (default warn)
# Linux only (reads /proc). Targets (issue 13): idle RSS ≤ 8 MiB at N=10,
# ≤ 16 MiB at N=200.
set -euo pipefail
cd "$(dirname "$0")/.."
INTERVAL=${INTERVAL:-2s}
SETTLE=${SETTLE:-10}
ROUNDS=${ROUNDS:-5}
sizes=("$@")
[[ ${#sizes[@]} -gt 0 ]] || sizes=(10 200)

if [[ "$(uname -s)" != Linux ]]; then
    echo "bench/probe.sh reads /proc: Linux only" >&2
    exit 1
fi
[[ -n ${PROBE_NO_BUILD:-} ]] || cargo build --release -q -p xy-daemon -p xy-cli -p xy-testbins
rel=$PWD/target/release
xyd=${XYD:-$rel/xyd}
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
anon_kib() { awk '/^RssAnon:/ {print $2}' "/proc/$1/status"; }
ctl() {
    local dir=$1
    shift
    XDG_CONFIG_HOME=$dir/c XDG_STATE_HOME=$dir/s XY_SOCKET=$dir/x.sock "$rel/xyctl" --no-spawn "$@"
}

echo "xyd $(stat -c %s "$xyd") bytes ($xyd); load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-5s %-10s %-10s %-8s %-26s %-26s\n' N "RSS MiB" "anon MiB" threads "2026 RTT p50/max ms" "2025 RTT p50/max ms"
for n in "${sizes[@]}"; do
    dir=$(mktemp -d /tmp/xy-probe.XXXXXX)
    mkdir -p "$dir/c/xy/servers" "$dir/s"
    for ((i = 0; i < n; i++)); do
        era=2026
        ((i % 2)) && era=2025
        port=$((24000 + i))
        printf 'command "%s"\nargs "--port" "%d" "--era" "%s"\nport %d\nhealth {\n    mcp "/mcp"\n    interval "%s"\n    start-period "0s"\n}\n' \
            "$rel/xy-test-mcp" "$port" "$era" "$port" "$INTERVAL" >"$dir/c/xy/servers/m$i.kdl"
    done
    XDG_CONFIG_HOME=$dir/c XDG_STATE_HOME=$dir/s XY_SOCKET=$dir/x.sock XY_LOG=${XY_LOG:-warn} \
        setsid "$xyd" </dev/null >"$dir/xyd.out" 2>&1 &
    pid=$!
    deadline=$((SECONDS + 180))
    until [[ $(ctl "$dir" list --json 2>/dev/null | grep -o '"tool_count": *1' | wc -l) -eq $n ]]; do
        if ((SECONDS > deadline)); then
            echo "N=$n: not every server listed its tools in 180 s; see $dir" >&2
            exit 1
        fi
        sleep 0.5
    done
    sleep "$SETTLE"
    rss=$(rss_kib "$pid")
    anon=$(anon_kib "$pid")
    threads=$(ls "/proc/$pid/task" | wc -l)
    : >"$dir/rtt"
    for ((r = 0; r < ROUNDS; r++)); do
        for ((i = 0; i < n; i++)); do
            era=2026
            ((i % 2)) && era=2025
            ctl "$dir" status "m$i" --json |
                python3 -c 'import json,sys; v=json.load(sys.stdin); print(sys.argv[1], v["health"]["latency_ms"])' "$era" >>"$dir/rtt"
        done
        sleep "${INTERVAL%s}"
    done
    stats() {
        awk -v e="$1" '$1 == e && $2 != "None" {print $2}' "$dir/rtt" | sort -n |
            awk '{a[NR] = $1} END {if (NR) printf "%s / %s", a[int((NR + 1) / 2)], a[NR]; else printf "-"}'
    }
    printf '%-5s %-10s %-10s %-8s %-26s %-26s\n' "$n" "$(awk -v k="$rss" 'BEGIN {printf "%.1f", k / 1024}')" "$(awk -v k="$anon" 'BEGIN {printf "%.1f", k / 1024}')" "$threads" "$(stats 2026)" "$(stats 2025)"
    if [[ -n ${SMAPS:-} ]]; then
        # Resident KiB per mapping name (anonymous mappings as "[anon]"),
        # and the private/shared split that RSS does not show.
        awk '/^[0-9a-f]+-[0-9a-f]+ / {name = (NF >= 6) ? $6 : "[anon]"}
             /^Rss:/ {rss[name] += $2}
             /^Private_(Clean|Dirty):/ {priv[name] += $2}
             END {for (n in rss) if (rss[n]) printf "  %7d KiB rss %7d KiB private  %s\n", rss[n], priv[n], n}' \
            "/proc/$pid/smaps" | sort -rn | head -12
    fi
    ctl "$dir" daemon stop >/dev/null 2>&1 || kill "$pid"
    rm -rf "$dir"
done
