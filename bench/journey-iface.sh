#!/usr/bin/env bash
# Benchmark (not a test): what `linerate journey --iface` costs the traffic
# it watches. On a pair bed, `linerate throughput --udp` (unpaced) runs from a
# to b, alternately alone and while `journey --iface lr-b --filter F` traces
# host b's interface; the sender's CPU time per packet (on veth it includes
# the receive path run inside its sendto()) is compared, as bench/journey.sh
# does for the probe journey. Two filters by default: one that matches none
# of the load (every packet's headers are still read and judged in BPF at
# each tracepoint: the cost of looking) and one that matches all of it (every
# packet written to the ring: the cost of following; --count 100000 stops
# the journey early when the load passes more packets than that).
#
# Needs root, iproute2 and jq; builds linerate in release mode. Each round
# lasts about 2 × DURATION s plus start-up, per filter.
#
# usage: [ROUNDS=3] [FILTERS="udp port 9|udp"] bench/journey-iface.sh [DURATION_S]
#        (default 2 s per half-round; filters separated by |)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-2}
ROUNDS=${ROUNDS:-3}
FILTERS=${FILTERS:-udp port 9|udp}
BED="bi$$"
LR=${LINERATE:-target/release/linerate}

[ "$(id -u)" -eq 0 ] || { echo "needs root (network namespaces, BPF)" >&2; exit 2; }
command -v jq >/dev/null || { echo "jq missing: apt-get install jq" >&2; exit 2; }
[ -n "${LINERATE:-}" ] || cargo build --release -q -p linerate
HIST=$(mktemp -d)
JPID=
cleanup() {
  [ -n "$JPID" ] && kill -INT "$JPID" 2>/dev/null || true
  "$LR" testbed down "$BED" --history "$HIST/h" >/dev/null 2>&1 || true
  rm -rf "$HIST"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
"$LR" testbed up "$BED" --topo pair --history "$HIST/h" >/dev/null

cpu_per_packet() {
  "$LR" throughput --bed "$BED" --udp --time "$DURATION" --json --history "$HIST/h" 2>/dev/null \
    | jq -r '.figures.flows[0].cpu_ns_per_packet'
}

echo "UDP unpaced a → b on a pair bed, ${DURATION}s per half-round; sender CPU ns per packet"
printf '%-14s %-6s %12s %12s %9s %9s\n' filter round untraced traced slower% followed
IFS='|' read -r -a filters <<<"$FILTERS"
for f in "${filters[@]}"; do
  slower=()
  for r in $(seq 1 "$ROUNDS"); do
    u=$(cpu_per_packet)
    "$LR" journey --iface lr-b --netns "lr-$BED-b" --filter "$f" --count 100000 \
      --time "$((DURATION * 3 + 10))s" --json --history "$HIST/h" >"$HIST/j.json" 2>"$HIST/j.err" &
    JPID=$!
    until grep -q attached "$HIST/j.err" 2>/dev/null; do
      kill -0 "$JPID" 2>/dev/null || { cat "$HIST/j.err" >&2; exit 1; }
      sleep 0.1
    done
    t=$(cpu_per_packet)
    kill -INT "$JPID"; wait "$JPID" || true; JPID=
    n=$(jq -r '.packets.matched' "$HIST/j.json")
    s=$(awk -v u="$u" -v t="$t" 'BEGIN { printf "%.1f", (t / u - 1) * 100 }')
    printf '%-14s %-6s %12.0f %12.0f %9s %9s\n' "$f" "$r" "$u" "$t" "$s" "$n"
    slower+=("$s")
  done
  median=$(printf '%s\n' "${slower[@]}" | sort -g | awk '{ v[NR] = $1 } END { printf "%.1f", v[int((NR + 1) / 2)] }')
  echo "median ($f): the sender's CPU per packet grows by ${median} % while journey --iface traces"
done
