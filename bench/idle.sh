#!/usr/bin/env bash
# Idle daemon benchmark (issue 37); not a test.
#
# For each N (default "10 200"): boot a release xyd with N `xy-test-sleep`
# servers (a `port` each that never listens, as bench/compare.py's sleepers),
# wait until all run, settle SETTLE seconds, then print xyd's RSS (VmRSS,
# with the file-backed and anonymous parts) and, over WINDOW seconds, its CPU
# ticks (utime+stime of /proc/PID/stat) and, with STRACE=1, its connect()s.
#
# Usage: bench/idle.sh [N ...]   env: SETTLE=12 WINDOW=10 STRACE=0
#   REL=dir (the binaries; default target/release, built unless IDLE_NO_BUILD=1)
#   SMAPS=1 also prints where the RSS lives (per mapping)
# Linux only (reads /proc). Targets (issue 37): RSS ≤ 8 MiB at N=10,
# ≤ 14 MiB at N=200; 0 ticks at N=50 once the listing gave up.
set -euo pipefail
cd "$(dirname "$0")/.."
SETTLE=${SETTLE:-12}
WINDOW=${WINDOW:-10}
REL=${REL:-target/release}
if [[ -z ${IDLE_NO_BUILD:-} && $REL == target/release ]]; then
    cargo build -q --release -p xy-daemon -p xy-cli -p xy-testbins --bins
fi
REL=$(cd "$REL" && pwd)
[[ $# -gt 0 ]] || set -- 10 200

one() {
    local n=$1 dir pid
    dir=$(mktemp -d /tmp/xy-idle.XXXXXX)
    mkdir -p "$dir/c/xy/servers" "$dir/s"
    # Ports from 20000 up, one each, never listened on (the sleepers).
    for ((i = 0; i < n; i++)); do
        printf 'command "%s"\nargs "--interval-ms" "%d"\nport %d\n' \
            "$REL/xy-test-sleep" $((100000 + i)) $((20000 + i)) >"$dir/c/xy/servers/s$i.kdl"
    done
    export XDG_CONFIG_HOME=$dir/c XDG_STATE_HOME=$dir/s XDG_DATA_HOME=$dir/d \
        XY_SOCKET=$dir/x.sock XY_NO_SPAWN=1
    setsid "$REL/xyd" </dev/null >"$dir/xyd.out" 2>&1 &
    pid=$!
    local deadline=$((SECONDS + 120))
    until [[ $("$REL/xyctl" list --json 2>/dev/null | grep -o '"state": *"running"' | wc -l) -eq $n ]]; do
        ((SECONDS < deadline)) || { echo "N=$n: not all running after 120 s" >&2; kill "$pid"; return 1; }
        sleep 0.05
    done
    sleep "$SETTLE"
    local rss file anon a b connects=-
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")
    file=$(awk '/^RssFile:/ {print $2}' "/proc/$pid/status")
    anon=$(awk '/^RssAnon:/ {print $2}' "/proc/$pid/status")
    if [[ -n ${SMAPS:-} ]]; then
        awk '/^[0-9a-f]+-[0-9a-f]+ /{name=$6" "$2} /^Rss:/{r[name]+=$2} END{for(k in r) if(r[k]>0) print "  " r[k] " KiB " k}' \
            "/proc/$pid/smaps" | sort -k1,1nr | head -8
    fi
    ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
    a=$(ticks)
    if [[ ${STRACE:-0} == 1 ]]; then
        timeout -s INT "$WINDOW" strace -f -c -e trace=connect -p "$pid" -o "$dir/strace" >/dev/null 2>&1 || true
        connects=$(awk '$NF == "connect" {print $4}' "$dir/strace")
        connects=${connects:-0}
    else
        sleep "$WINDOW"
    fi
    b=$(ticks)
    printf 'N=%s RSS %.1f MiB (file %.1f, anon %.1f); over %ss from %ss after running: %s ticks, %s connects\n' \
        "$n" "$(awk -v k="$rss" 'BEGIN{print k/1024}')" "$(awk -v k="$file" 'BEGIN{print k/1024}')" \
        "$(awk -v k="$anon" 'BEGIN{print k/1024}')" "$WINDOW" "$SETTLE" $((b - a)) "$connects"
    "$REL/xyctl" daemon stop >/dev/null 2>&1 || kill "$pid"
    rm -rf "$dir"
}

for n in "$@"; do one "$n"; done
