#!/usr/bin/env bash
# Benchmark (not a test): the same iperf3 client, the same run, against
# `iperf3 -s` and against `linerate server` (its iperf3 port), on loopback:
# TCP with 1 and 4 streams, UDP with 1472-byte datagrams unpaced (-b 0).
# Rounds interleave the two servers so drift in the host's load hits both,
# and alternate which goes first (odd rounds iperf3, even rounds linerate)
# so neither always runs right after the other's heaviest case.
# Prints each run's received bit/s (iperf3's sum_received: what the server
# received, over the server's receiving time) and the ratio linerate /
# iperf3 per case, median over the rounds. Target: ratio >= 1.0.
#
# Needs iperf3 and python3 (parses iperf3 -J). Builds linerate in
# release mode (LINERATE=path: that binary instead, unbuilt). Every run is bounded by DURATION seconds (+ a timeout).
#
# usage: [ROUNDS=3] [CASES="tcp1:-P_1 …"] bench/iperf3.sh [DURATION_S]   (default 5 s per run;
# about 2 x 3 x ROUNDS x DURATION s in all)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-5}
ROUNDS=${ROUNDS:-3}
LR=${LINERATE:-target/release/linerate}
IPERF_PORT=${IPERF_PORT:-25301}
LR_PORT=${LR_PORT:-25401}
LR_I3_PORT=${LR_I3_PORT:-25302}

command -v iperf3 >/dev/null || { echo "iperf3 missing: apt-get install iperf3" >&2; exit 2; }
command -v python3 >/dev/null || { echo "python3 missing" >&2; exit 2; }
[ -n "${LINERATE:-}" ] || cargo build --release -q -p linerate

cleanup() {
  [ -n "${I3_PID:-}" ] && kill "$I3_PID" 2>/dev/null || true
  [ -n "${LR_PID:-}" ] && kill "$LR_PID" 2>/dev/null || true
}
trap cleanup EXIT INT TERM

iperf3 -s -B 127.0.0.1 -p "$IPERF_PORT" >/dev/null 2>&1 &
I3_PID=$!
"$LR" server --bind 127.0.0.1 --port "$LR_PORT" --iperf3-port "$LR_I3_PORT" 2>/dev/null &
LR_PID=$!
sleep 1

# received bit/s of one iperf3 -J run: what the server received
# (sum_received: bytes counted by the server over its receiving time).
rate() {
  python3 -c 'import json,sys
d = json.load(sys.stdin)
if "error" in d:
    print("error: " + d["error"], file=sys.stderr); print(0); sys.exit()
print(int(d["end"]["sum_received"]["bits_per_second"]))'
}

declare -A R
# CASES: NAME:ARGS, space-separated, '_' for a space inside ARGS.
read -r -a cases <<<"${CASES:-tcp1:-P_1 tcp4:-P_4 udp1472:-u_-b_0_-l_1472}"
cases=("${cases[@]//_/ }")
for round in $(seq 1 "$ROUNDS"); do
  for c in "${cases[@]}"; do
    name=${c%%:*}; args=${c#*:}
    order="iperf3 linerate"; [ $((round % 2)) = 0 ] && order="linerate iperf3"
    for srv in $order; do
      port=$IPERF_PORT; [ "$srv" = linerate ] && port=$LR_I3_PORT
      # shellcheck disable=SC2086
      r=$(timeout $((DURATION + 20)) iperf3 -c 127.0.0.1 -p "$port" -t "$DURATION" -J $args | rate)
      R[$name,$srv]="${R[$name,$srv]:-} $r"
      printf 'round %d %-8s %-8s %14.0f bit/s\n' "$round" "$name" "$srv" "$r"
    done
  done
done

echo
echo "median received bit/s over $ROUNDS rounds (measured on this host, now: quote only as measured under its load)"
printf '%-8s %16s %16s %8s\n' case iperf3 linerate ratio
for c in "${cases[@]}"; do
  name=${c%%:*}
  python3 - "$name" "${R[$name,iperf3]}" "${R[$name,linerate]}" <<'PY'
import statistics, sys
name, a, b = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()]
ma, mb = statistics.median(a), statistics.median(b)
print(f"{name:<8} {ma:16.0f} {mb:16.0f} {mb / ma if ma else 0:8.3f}")
PY
done
