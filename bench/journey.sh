#!/usr/bin/env bash
# Benchmark (not a test): what `linerate journey`'s tracer costs. On a pair
# bed, UDP datagrams of 1472 bytes go back to back from a to b, alternately
# without tracing and with the journey's tracer open (every tracepoint of a
# journey on every CPU, one datagram in 100 of a traced length, the others
# filtered out in the kernel); the sender's CPU time per datagram (which on
# veth includes the receive path run inside its sendto()) is compared: it is
# how much slower a CPU-bound sender gets, and swings far less with the
# host's other load than datagrams/s do. EXTRA="--all-events" measures the
# full tracepoint set. TRACERS="tp_btf perf" (the default) measures both
# tracers: tp_btf programs that filter on the length in BPF before writing,
# and perf raw samples whose filter runs after the record is built.
# `linerate journey --cost-time` does exactly this; this script repeats it
# ROUNDS times and prints each ratio and their median (target: ≤ 10 % slower),
# and the median ratio of datagrams/s sent traced / untraced (the issue's
# throughput ratio; it swings more with the host's load). With tp_btf it
# also prints, from the kernel's BPF run statistics of each journey's extra
# round (independent of the host's load), the program runs per datagram and
# the programs' own ns per datagram over the empty program's floor.
#
# Needs root and iproute2; builds linerate in release mode. Each run lasts
# about 4 × DURATION s (two untraced and two traced rounds), 5 × with tp_btf
# (the statistics round).
#
# usage: [ROUNDS=3] [TRACERS="tp_btf perf"] bench/journey.sh [DURATION_S]
#        (default 3 s per half-round)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-3}
ROUNDS=${ROUNDS:-3}
TRACERS=${TRACERS:-tp_btf perf}
BED="bj$$"
LR=target/release/linerate

[ "$(id -u)" -eq 0 ] || { echo "needs root (network namespaces, perf_event_open)" >&2; exit 2; }
command -v jq >/dev/null || { echo "jq missing: apt-get install jq" >&2; exit 2; }
cargo build --release -q -p linerate

cleanup() { "$LR" testbed down "$BED" >/dev/null 2>&1 || true; }
trap cleanup EXIT INT TERM
"$LR" testbed up "$BED" --topo pair >/dev/null

echo "UDP 1472 B a → b on a pair bed, ${DURATION}s per half-round; sender CPU ns per datagram"
summary=()
for tracer in $TRACERS; do
  printf '%-8s %-6s %14s %14s %10s %12s %8s %10s\n' tracer round untraced traced slower% pps_ratio runs prog_ns
  slower=()
  ratios=()
  for r in $(seq 1 "$ROUNDS"); do
    out=$("$LR" journey --bed "$BED" --count 10 --cost-time "${DURATION}s" --tracer "$tracer" ${EXTRA:-} --json 2>/dev/null || true)
    u=$(jq -r '.cost.untraced_cpu_ns_per_datagram' <<<"$out"); t=$(jq -r '.cost.traced_cpu_ns_per_datagram' <<<"$out")
    s=$(jq -r '.cost.slower_pct' <<<"$out")
    q=$(jq -r '.cost.traced_pps / .cost.untraced_pps' <<<"$out")
    runs=$(jq -r '.cost.programs.runs_per_datagram // "-"' <<<"$out")
    prog=$(jq -r '.cost.programs.ns_per_datagram_over_floor // "-"' <<<"$out")
    printf '%-8s %-6s %14.0f %14.0f %10.1f %12.3f %8s %10s\n' "$tracer" "$r" "$u" "$t" "$s" "$q" \
      "$(printf '%.4s' "$runs")" "$(printf '%.5s' "$prog")"
    slower+=("$s")
    ratios+=("$q")
  done
  median=$(printf '%s\n' "${slower[@]}" | sort -g | awk '{ v[NR] = $1 } END { printf "%.1f", v[int((NR + 1) / 2)] }')
  ratio=$(printf '%s\n' "${ratios[@]}" | sort -g | awk '{ v[NR] = $1 } END { printf "%.3f", v[int((NR + 1) / 2)] }')
  summary+=("median ($tracer): tracing makes a CPU-bound UDP 1472 B sender ${median} % slower (target ≤ 10 %); datagrams/s traced / untraced ${ratio}")
done
printf '%s\n' "${summary[@]}"
