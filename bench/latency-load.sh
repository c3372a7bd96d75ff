#!/usr/bin/env bash
# Benchmark (not a test): latency under load on an emulated bottleneck. A
# pair bed joined by linerate's link emulator at LINK (default 100M) with a
# LIMIT-frame tail-drop queue (default 100); UDP 64-byte exchanges idle, then
# under TCP loads of 1, 2 and 4 streams, and a paced UDP load at 90 % of the
# link. Prints, per load, the mean RTT growth and each stage's share of it
# (the queue's growth should sit in "network"), the load's throughput, and
# the flags. Quote the figures as measured on this host only: a busy host
# is flagged cpu_saturated_under_load and its growth is partly the host's.
#
# Needs root and iproute2 (network namespaces); builds linerate in release
# mode. Each phase is bounded by DURATION seconds (default 3; the whole run
# about 9 × DURATION s).
#
# usage: [LINK=100M] [LIMIT=100] bench/latency-load.sh [DURATION_S]
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-3}
LINK=${LINK:-100M}
LIMIT=${LIMIT:-100}
BED="bll$$"
LR=target/release/linerate

[ "$(id -u)" -eq 0 ] || { echo "needs root (network namespaces)" >&2; exit 2; }
command -v jq >/dev/null || { echo "jq missing: apt-get install jq" >&2; exit 2; }
cargo build --release -q -p linerate

cleanup() { "$LR" testbed down "$BED" >/dev/null 2>&1 || true; }
trap cleanup EXIT INT TERM
"$LR" testbed up "$BED" --topo pair --link "$LINK" --limit "$LIMIT" >/dev/null

summary() {
  jq -r '
    (.load.levels[] as $l
    | "\($l.load | "\(.protocol),\(.streams),\(.direction)\(if .rate_bits_per_s then ",rate=\(.rate_bits_per_s)" else "" end)"):"
      + " RTT \(first($l.growth[] | select(.stage == "rtt") | "+\(.growth_mean_ns / 1000 | floor) µs") // "not measured (no replies)") (mean);"
      + " " + ([$l.growth[] | select(.stage != "rtt" and .share_pct != null)
               | "\(.stage) \(.share_pct | floor) %"] | join(", "))
      + "; load " + ([$l.throughput.directions[]? | "\(.direction) \(.bits_per_s / 1e6 | floor) Mbit/s"] | join(", "))
      + "; host CPUs \($l.host_cpu_busy_pct // "?" | tostring) % busy"),
    (.flags[] | "  \(.severity): \(.code)")' "$1"
}

OUT=$(mktemp)
trap 'cleanup; rm -f "$OUT"' EXIT INT TERM
echo "== TCP loads, 1/2/4 streams forward ($LINK, $LIMIT-frame queue, $DURATION s per phase)"
"$LR" latency --bed "$BED" --time "${DURATION}s" --settle 1s \
  --load tcp,1,forward --sweep load-streams=1,2,4 --json >"$OUT" || true
summary "$OUT"
echo "== paced UDP load at 90 % of the link"
RATE=$(( $("$LR" calc --link "$LINK" --json | jq '.rows[0].link_bits_per_s') * 9 / 10 ))
"$LR" latency --bed "$BED" --time "${DURATION}s" --settle 1s \
  --load "udp,1,forward,rate=$RATE" --json >"$OUT" || true
summary "$OUT"
