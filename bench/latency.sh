#!/usr/bin/env bash
# Benchmark (not a test): UDP 64-byte ping-pong RTT, linerate beside sockperf,
# in the same run, on the same two-namespace veth bed, blocking and spinning.
# Prints p50/p99 of each and the ratio linerate/sockperf (target, SPEC §5:
# linerate's p50 ≤ 1.05 × sockperf's in the same mode). linerate runs three
# ways: as it runs by default (kernel stamps on one exchange in 4, stages from
# those, the RTT quoted from the other 3 in 4 that stamp nothing), with
# --stamp-every 1 (every exchange stamped: the RTT includes what stamping
# costs) and with --no-kernel-stamps (application stamps only, like
# sockperf), so the tool's own overhead and the cost of stamping are apart.
#
# Needs root, iproute2, sockperf (apt-get install sockperf); builds linerate
# in release mode. Every load loop is bounded by DURATION seconds.
#
# usage: [ROUNDS=3] bench/latency.sh [DURATION_S]   (default 5 s per run; about
# 2 × 4 × ROUNDS × DURATION s in all)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-5}
ROUNDS=${ROUNDS:-3}
BED="bl$$"
PORT=11111
LR=target/release/linerate

command -v sockperf >/dev/null || { echo "sockperf missing: apt-get install sockperf" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "needs root (network namespaces)" >&2; exit 2; }
cargo build --release -q -p linerate

cleanup() {
  [ -n "${SP_PID:-}" ] && kill "$SP_PID" 2>/dev/null || true
  [ -n "${LR_PID:-}" ] && kill "$LR_PID" 2>/dev/null || true
  "$LR" testbed down "$BED" >/dev/null 2>&1 || true
}
trap cleanup EXIT INT TERM
"$LR" testbed up "$BED" --topo pair >/dev/null
NS_A="lr-$BED-a"; NS_B="lr-$BED-b"; B_IP=198.18.0.2

# sockperf's percentile lines: "sockperf: ---> percentile 50.000 =   23.456" (µs).
sp_pct() { awk -v p="$2" '$0 ~ "percentile "p" " { print $NF }' "$1"; }

run_sockperf() { # mode: blocking | spin
  local mode=$1 extra=()
  # Spinning: non-blocking sockets and a zero epoll timeout (busy polling) on both ends.
  [ "$mode" = spin ] && extra=(--nonblocked --timeout 0)
  ip netns exec "$NS_B" sockperf sr -i "$B_IP" -p "$PORT" "${extra[@]}" >/dev/null 2>&1 &
  SP_PID=$!
  sleep 0.5
  ip netns exec "$NS_A" timeout $((DURATION + 20)) sockperf pp -i "$B_IP" -p "$PORT" -m 64 -t "$DURATION" \
    --full-rtt "${extra[@]}" > "/tmp/lr-bench-sp-$mode.txt" 2>&1 || true
  kill "$SP_PID" 2>/dev/null || true; wait "$SP_PID" 2>/dev/null || true; SP_PID=
  echo "$(sp_pct "/tmp/lr-bench-sp-$mode.txt" 50.000) $(sp_pct "/tmp/lr-bench-sp-$mode.txt" 99.000)"
}

run_linerate() { # mode: blocking | spin; stamps: default | all | app — server in b, client in a: two processes, as sockperf
  local mode=$1 stamps=$2 extra=()
  [ "$mode" = spin ] && extra=(--spin --reflector-mode busy)
  [ "$stamps" = all ] && extra+=(--stamp-every 1)
  [ "$stamps" = app ] && extra+=(--no-kernel-stamps)
  ip netns exec "$NS_B" "$LR" server --bind "$B_IP" --port 5300 2>/dev/null &
  LR_PID=$!
  sleep 0.5
  ip netns exec "$NS_A" timeout $((DURATION + 20)) "$LR" latency "$B_IP" --size 64 --time "${DURATION}s" \
    "${extra[@]}" --json > "/tmp/lr-bench-lr-$mode-$stamps.json"
  kill "$LR_PID" 2>/dev/null || true; wait "$LR_PID" 2>/dev/null || true; LR_PID=
  python3 - "/tmp/lr-bench-lr-$mode-$stamps.json" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))["runs"][0]
# The RTT linerate quotes: that of the unstamped exchanges when stamps were
# sampled, else the (stamped or application-only) one.
rtt = run.get("rtt_unstamped") or next(s for s in run["stages"] if s["stage"] == "rtt")
print(f'{rtt["p50_ns"]/1000:.2f} {rtt["p99_ns"]/1000:.2f}')
PY
}

# Interleaved rounds, medians: the host is a shared VM whose run-to-run
# spread is far above the differences measured here.
results=$(mktemp)
for round in $(seq "$ROUNDS"); do
  echo "round $round/$ROUNDS …" >&2
  for mode in blocking spin; do
    echo "$mode sockperf $(run_sockperf "$mode")" >> "$results"
    echo "$mode default $(run_linerate "$mode" default)" >> "$results"
    echo "$mode all $(run_linerate "$mode" all)" >> "$results"
    echo "$mode app $(run_linerate "$mode" app)" >> "$results"
  done
done
python3 - "$results" "$ROUNDS" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    mode, tool, p50, p99 = line.split()
    rows.setdefault((mode, tool), []).append((float(p50), float(p99)))
names = {"sockperf": "sockperf", "default": "linerate (default)",
         "all": "linerate --stamp-every 1", "app": "linerate --no-kernel-stamps"}
print(f"{'mode':<9} {'tool':<28} {'p50 µs median (min-max)':>26} {'p99 µs median':>14}   ({sys.argv[2]} rounds)")
for mode in ("blocking", "spin"):
    med = {}
    for tool in ("sockperf", "default", "all", "app"):
        v = rows.get((mode, tool), [])
        p50 = [a for a, _ in v]; p99 = [b for _, b in v]
        med[tool] = statistics.median(p50)
        print(f"{mode:<9} {names[tool]:<28} {statistics.median(p50):>10.2f} ({min(p50):.2f}-{max(p50):.2f}) {statistics.median(p99):>14.2f}")
    print(f"{mode:<9} p50 ratio to sockperf: {med['default']/med['sockperf']:.3f} default (target <= 1.05); "
          f"{med['all']/med['sockperf']:.3f} with every exchange stamped, {med['app']/med['sockperf']:.3f} without kernel stamps")
PY
rm -f "$results"
echo "(UDP, 64-byte payload, veth between two namespaces, ${DURATION}s each; RTT from each tool's own clock: sockperf rdtsc, linerate CLOCK_REALTIME application stamps)"
