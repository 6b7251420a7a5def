#!/usr/bin/env bash
# Soak benchmark of the log ring's memory (issue 19); not a test.
#
# For each N (default "5 50"): boot a release xyd with N silent servers and
# take its idle RSS; then boot one with N servers printing 40-byte lines at
# 1,000 lines/s each (`xy-test-flood --rate 1000 --bytes 40`), let the rings
# fill (FILL seconds; a 1 MiB ring holds ~22,000 such lines, 22 s), and
# sample VmRSS every 5 s for HOLD more seconds. Pass when RSS once flat is
# at most idle + 1.25 MiB × N and the hold window grows by less than 1 MiB.
#
# Usage: bench/soak.sh [N ...]   env: FILL=40 HOLD=120
# Linux only (reads /proc). Prints one table; raw samples go to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
FILL=${FILL:-40}
HOLD=${HOLD:-120}
sizes=("$@")
[[ ${#sizes[@]} -gt 0 ]] || sizes=(5 50)

if [[ "$(uname -s)" != Linux ]]; then
    echo "bench/soak.sh reads /proc: Linux only" >&2
    exit 1
fi
echo "== cargo build --release (xyd, xyctl, test children)" >&2
[[ -n ${SOAK_NO_BUILD:-} ]] || cargo build --release -q -p xy-daemon -p xy-cli -p xy-testbins
rel=$PWD/target/release

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

# boot DIR N KIND → prints xyd's pid once all N servers are running.
boot() {
    local dir=$1 n=$2 kind=$3 i
    mkdir -p "$dir/c/xy/servers" "$dir/s"
    for ((i = 0; i < n; i++)); do
        if [[ $kind == silent ]]; then
            printf 'command "%s"\nargs "--interval-ms" "3600000"\nport %d\n' \
                "$rel/xy-test-sleep" $((23000 + i)) >"$dir/c/xy/servers/s$i.kdl"
        else
            printf 'command "%s"\nargs "--lines" "1000000000" "--bytes" "40" "--rate" "1000"\nport %d\n' \
                "$rel/xy-test-flood" $((23000 + i)) >"$dir/c/xy/servers/s$i.kdl"
        fi
    done
    XDG_CONFIG_HOME=$dir/c XDG_STATE_HOME=$dir/s XY_SOCKET=$dir/x.sock XY_LOG=warn \
        setsid "$rel/xyd" </dev/null >"$dir/xyd.out" 2>&1 &
    local pid=$! deadline=$((SECONDS + 120))
    until [[ $(ctl "$dir" list --json 2>/dev/null | grep -o '"state": *"running"' | wc -l) -eq $n ]]; do
        if ((SECONDS > deadline)); then
            echo "xyd with $n $kind servers not ready; see $dir/xyd.out" >&2
            exit 1
        fi
        sleep 0.2
    done
    echo "$pid"
}

ctl() {
    local dir=$1
    shift
    XDG_CONFIG_HOME=$dir/c XDG_STATE_HOME=$dir/s XY_SOCKET=$dir/x.sock "$rel/xyctl" --no-spawn "$@"
}

stop() {
    local dir=$1 pid=$2
    ctl "$dir" daemon stop >/dev/null 2>&1 || kill "$pid"
    while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
}

rows=()
for n in "${sizes[@]}"; do
    dir=$(mktemp -d /tmp/xysoak.XXXXXX)
    pid=$(boot "$dir/idle" "$n" silent)
    sleep 3 # boot-time allocations settle; a sample, not a wait for a state
    idle=$(rss_kib "$pid")
    stop "$dir/idle" "$pid"

    load_start=$(load)
    pid=$(boot "$dir/soak" "$n" chatty)
    echo "N=$n idle RSS ${idle} KiB; filling rings for ${FILL}s" >&2
    t=0
    while ((t < FILL)); do sleep 5; t=$((t + 5)); echo "  t=${t}s RSS $(rss_kib "$pid") KiB" >&2; done
    flat=$(rss_kib "$pid")
    max=$flat
    while ((t < FILL + HOLD)); do
        sleep 5
        t=$((t + 5))
        r=$(rss_kib "$pid")
        ((r > max)) && max=$r
        echo "  t=${t}s RSS $r KiB" >&2
    done
    last=$(rss_kib "$pid")
    # Are the rings full? Lines buffered for one server (all it can hold).
    held=$(ctl "$dir/soak" logs s0 --tail 100000 | wc -l)
    stop "$dir/soak" "$pid"
    budget=$((idle + n * 1280))
    verdict=met
    ((max <= budget)) || verdict=missed
    ((max - flat < 1024)) || verdict="$verdict; grew $((max - flat)) KiB while holding"
    rows+=("| $n | $idle | $flat | $max | $last | $budget | $(((max - idle) / n)) | $held | $load_start → $(load) | $verdict |")
    rm -rf "$dir"
done

echo
echo "Soak $(date -u +%FT%TZ): ${FILL}s fill, ${HOLD}s hold, 40-byte lines at 1,000 lines/s per server; $(nproc) cores"
echo
echo "| servers | idle RSS KiB | RSS after fill KiB | max over hold KiB | RSS at end KiB | budget (idle + 1.25 MiB × N) KiB | KiB per server | lines held (s0) | load | verdict |"
echo "|---|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
