#!/usr/bin/env bash
# Benchmark (not a test): the RFC 2544 frame generators against trafgen
# (Debian's netsniff-ng: `trafgen --cpus 2 --qdisc-path`, 64-byte frames
# through the qdisc, as linerate's `packet` and `packet-ring` send them) on
# an unshaped veth pair in two namespaces made here and always removed.
#
# Every generator sends the same 64-byte frames (60 bytes + FCS: Ethernet,
# IPv4, UDP to port 9, an 18-byte linerate test header) to a MAC nobody
# has, so the peer drops them on arrival. Frames are counted at the
# receiving side the same way for every generator: the peer veth's
# rx_packets counter over a fixed window (after a 0.5 s start), divided by
# the window's CLOCK_REALTIME length (date +%s%N). The peer is the same
# for every generator: with RX=xdp (the default) linerate's XDP receive
# counter on it (the frames are counted and dropped in the driver, so the
# receiving side costs little: the generators are measured, not the
# peer's stack); with RX=gro, GRO on and the peer's stack drops them
# (XDP live frames need NAPI at the peer: either gives it). Rounds
# interleave the generators; the table prints
# medians and the ratios of medians of this run. Targets: packet and
# packet-ring >= 1.0x trafgen, xdp-live >= 1.5 M frames/s (quiet host).
# Quote figures from a busy host only as "measured under load".
#
# usage: sudo [RX=xdp|gro] [GENS="trafgen packet …"] bench/rawgen.sh [ROUNDS] [SECONDS]
#        (default 5 rounds of 3 s, every generator)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
SECS=${2:-3}
RX=${RX:-xdp}
case "$RX" in xdp|gro) ;; *) echo "rawgen.sh: RX is xdp or gro" >&2; exit 2 ;; esac
[ "$(id -u)" = 0 ] || { echo "rawgen.sh: needs root (namespaces, raw sockets, BPF)" >&2; exit 2; }
command -v trafgen >/dev/null || { echo "rawgen.sh: needs trafgen (apt-get install netsniff-ng)" >&2; exit 2; }
command -v ethtool >/dev/null || { echo "rawgen.sh: needs ethtool" >&2; exit 2; }
cargo build --release -q -p linerate-io --example rawflood
FLOOD=target/release/examples/rawflood
A=lr-rg$$a
B=lr-rg$$b
CONF=$(mktemp /tmp/lr-rg$$.XXXXXX.cfg)
cleanup() {
    for ns in "$A" "$B"; do ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true; done
    ip netns del "$A" 2>/dev/null || true
    ip netns del "$B" 2>/dev/null || true
    rm -f "$CONF"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
ip netns add "$A"
ip netns add "$B"
ip link add lrga netns "$A" type veth peer name lrgb netns "$B"
for ns in "$A" "$B"; do ip -n "$ns" link set lo up; done
ip -n "$A" link set lrga up
ip -n "$B" link set lrgb up
if [ "$RX" = gro ]; then
    ip netns exec "$B" ethtool -K lrgb gro on >/dev/null
else
    # Bounded: the whole run's length and a margin.
    ip netns exec "$B" "$FLOOD" count lrgb "$(( (ROUNDS * 6 * (SECS + 2)) + 60 ))" >/dev/null &
    sleep 0.5
fi
MAC=$(ip -n "$A" -br link show lrga | awk '{print $3}' | sed 's/^/0x/; s/:/, 0x/g')
# The frame of rawflood's 64-byte test frame (stream 1; its sequence
# number and stamp vary, trafgen's stay 0).
cat > "$CONF" <<CFG
{ 0x02, 0x00, 0x00, 0x00, 0x00, 0x02, $MAC, 0x08, 0x00,
  0x45, 0x00, const16(46), const16(0), 0x40, 0x00, 64, 17, csumip(14, 33),
  198, 18, 0, 1, 198, 19, 255, 2,
  const16(9), const16(9), const16(26), const16(0),
  'L', 'R', 'T', '1', 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }
CFG

rx() { ip netns exec "$B" cat /sys/class/net/lrgb/statistics/rx_packets; }
# window CMD...: runs CMD in namespace A in the background, counts what the
# peer receives during SECS seconds after a 0.5 s start, stops CMD.
window() {
    ip netns exec "$A" timeout -s INT "$((SECS + 3))" "$@" >/dev/null 2>&1 &
    local pid=$!
    sleep 0.5
    local r0 t0 r1 t1
    r0=$(rx); t0=$(date +%s%N)
    sleep "$SECS"
    r1=$(rx); t1=$(date +%s%N)
    kill -INT "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    echo $(( (r1 - r0) * 1000000000 / (t1 - t0) ))
}
median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : int((a[NR/2]+a[NR/2+1])/2)}'; }

# trafgen1: trafgen with one process, beside the target's two; packet1 and
# packet-ring1: linerate's generators with one sender thread (packet and
# packet-ring have one per CPU, as `linerate rfc2544` by default), to
# compare per sending thread as well. GENS="…" runs a subset.
GENS=${GENS:-"trafgen trafgen1 packet packet-ring packet1 packet-ring1 xdp xdp-live"}
declare -A RES
for g in $GENS; do RES[$g]=""; done
for r in $(seq 1 "$ROUNDS"); do
    for g in $GENS; do
        if [ "$g" = trafgen ]; then
            fps=$(window trafgen --cpus 2 --qdisc-path --dev lrga --conf "$CONF" --no-sock-mem)
        elif [ "$g" = trafgen1 ]; then
            fps=$(window trafgen --cpus 1 --qdisc-path --dev lrga --conf "$CONF" --no-sock-mem)
        elif [ "${g%1}" != "$g" ]; then
            fps=$(window "$FLOOD" lrga "${g%1}" "$((SECS + 2))" 64 1)
        else
            fps=$(window "$FLOOD" lrga "$g" "$((SECS + 2))")
        fi
        RES[$g]="${RES[$g]} $fps"
        echo "round $r/$ROUNDS  $g: $fps frames/s" >&2
    done
done
T=$(echo "${RES[trafgen]:-}" | median)
T1=$(echo "${RES[trafgen1]:-}" | median)
ratio() { awk -v m="$1" -v t="$2" 'BEGIN { if (t > 0) printf "%.2f", m / t; else print "-" }'; }
printf '\n%-12s %12s %10s %11s   %s\n' generator "median fps" "x trafgen" "x trafgen1" "rounds (frames/s at the peer's rx_packets)"
for g in $GENS; do
    m=$(echo "${RES[$g]}" | median)
    printf '%-12s %12s %10s %11s  %s\n' "$g" "$m" "$(ratio "$m" "$T")" "$(ratio "$m" "$T1")" "${RES[$g]}"
done
echo "(trafgen: --cpus 2 --qdisc-path, trafgen1: --cpus 1; packet and packet-ring: one sender thread per CPU ($(nproc)), packet1 and packet-ring1: one; all four through the qdisc, xdp and xdp-live (one thread) skip it)"
echo "(receiving peer: RX=$RX)"
echo "(host load: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs; quote ratios from a busy host as \"measured under load\")"
