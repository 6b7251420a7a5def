#!/bin/sh
# `xyctl list` (human and --json) against a release xyd with N=200 and
# N=1000 xy-test-sleep servers, with hyperfine (60 runs, medians printed).
# Needs `cargo build --release -p xy-daemon -p xy-cli -p xy-testbins` first;
# NS="200" runs one size only.
set -e
T=${T:-$(cd "$(dirname "$0")/.." && pwd)/target/release}
for N in ${NS:-200 1000}; do
  D=$(mktemp -d /tmp/xyh.XXXX)
  mkdir -p $D/c/xy/servers
  i=0; while [ $i -lt $N ]; do
    printf 'command "%s/xy-test-sleep"\nargs "--interval-ms" "3600000"\nport %d\nstop {\n    grace "2s"\n}\n' $T $((24000+i)) > $D/c/xy/servers/s$i.kdl
    i=$((i+1)); done
  export XDG_CONFIG_HOME=$D/c XDG_STATE_HOME=$D/s XY_SOCKET=$D/x.sock XY_LOG=warn XY_NO_SPAWN=1
  $T/xyd > $D/xyd.log 2>&1 &
  PID=$!
  # the first xyctl list waits for the boot and every server running
  until [ "$($T/xyctl list --json 2>/dev/null | python3 -c 'import json,sys; print(sum(e["state"]=="running" for e in json.load(sys.stdin)))' 2>/dev/null)" = "$N" ]; do sleep 0.2; done
  echo "N=$N"
  hyperfine -N --warmup 5 -r 60 --export-json /tmp/wt12-hf-$N.json "$T/xyctl list" "$T/xyctl list --json" >/dev/null 2>&1; python3 -c "import json; [print(r[\"command\"].split(\"/\")[-1], \"median %.1f ms, min %.1f, mean %.1f\" % (r[\"median\"]*1e3, r[\"min\"]*1e3, r[\"mean\"]*1e3)) for r in json.load(open(\"/tmp/wt12-hf-$N.json\"))[\"results\"]]"
  kill -TERM $PID; wait $PID || true
  rm -rf $D
done
