#!/usr/bin/env bash
# Benchmark (not a test): UDP 64-byte ping-pong RTT, linerate beside sockperf,
# in the same run, on the same two-namespace veth bed, blocking and spinning.
# Prints p50/p99 of each and the ratio linerate/sockperf (target, SPEC §5:
# linerate's p50 ≤ 1.05 × sockperf's in the same mode). linerate runs twice:
# with kernel stamps (its normal mode: stages) and with --no-kernel-stamps
# (application stamps only, like sockperf), so what stamping itself costs is
# visible apart from the tool's own overhead.
#
# Needs root, iproute2, sockperf (apt-get install sockperf); builds linerate
# in release mode. Every load loop is bounded by DURATION seconds.
#
# usage: bench/latency.sh [DURATION_S]   (default 5)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-5}
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

run_linerate() { # mode: blocking | spin; stamps: kernel | app — server in b, client in a: two processes, as sockperf
  local mode=$1 stamps=$2 extra=()
  [ "$mode" = spin ] && extra=(--spin --reflector-mode busy)
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
rtt = next(s for s in run["stages"] if s["stage"] == "rtt")
print(f'{rtt["p50_ns"]/1000:.2f} {rtt["p99_ns"]/1000:.2f}')
PY
}

printf '%-9s %-28s %10s %10s\n' mode tool "p50 µs" "p99 µs"
for mode in blocking spin; do
  read -r sp50 sp99 < <(run_sockperf "$mode")
  read -r lr50 lr99 < <(run_linerate "$mode" kernel)
  read -r la50 la99 < <(run_linerate "$mode" app)
  printf '%-9s %-28s %10s %10s\n' "$mode" sockperf "$sp50" "$sp99"
  printf '%-9s %-28s %10s %10s\n' "$mode" "linerate (kernel stamps)" "$lr50" "$lr99"
  printf '%-9s %-28s %10s %10s\n' "$mode" "linerate --no-kernel-stamps" "$la50" "$la99"
  python3 - "$mode" "$sp50" "$lr50" "$la50" <<'PY'
import sys
mode, sp, lr, la = sys.argv[1], *map(float, sys.argv[2:])
print(f"{mode:<9} p50 ratio to sockperf: {lr/sp:.3f} with kernel stamps, {la/sp:.3f} without (target <= 1.05)")
PY
done
echo "(UDP, 64-byte payload, veth between two namespaces, ${DURATION}s each; RTT from each tool's own clock: sockperf rdtsc, linerate CLOCK_REALTIME application stamps)"
