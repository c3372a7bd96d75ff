#!/usr/bin/env bash
# Benchmark (not a test): how faithful a bed's emulated link is, the targets
# of "emulated links as faithful as a cable":
#   1. 64-byte frames (UDP --size 18), pair --link 100M: median RTT minus the
#      median on an unshaped pair, same run, >= 95 % of 2 x 6.720 us;
#   2. the same at --link 1G: within +-1 us of 2 x 0.672 us (measured with
#      the emulator sleeping between frames, its default, and polling,
#      --emu-poll: a wire time this short is below a wake-up);
#   3. 1518-byte frames (--size 1472) at 100M: within 2 % of 2 x 123.04 us;
#   4. UDP throughput at 100M through the emulator: >= 99.5 % of the model at
#      1518-byte frames; at 64-byte frames >= 99.5 % or flagged
#      emulator_limited (the emulator's measured limit printed);
#   5. rfc2544 --tests single on a 100M bridge bed: never above line rate;
#      single frames far below streaming at 64 and 1518 bytes;
#   6. five identical ping-pong runs on a shaped bed: p50 within 10 % of
#      each other;
#   7. --delay 1ms adds 2 ms +- 20 us to the RTT.
# Prints each figure, its target and PASS/MISS. Quote numbers only from a
# quiet host.
#
# Needs root and iproute2; builds linerate in release mode. Every load loop
# is bounded (COUNT exchanges, DURATION seconds).
#
# usage: [COUNT=5000] [ROUNDS=3] bench/link.sh [DURATION_S]   (default 5 s per throughput run)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-5}
COUNT=${COUNT:-5000}
LR=target/release/linerate
P="lk$$"
ROUNDS=${ROUNDS:-3}
LAG=/tmp/lr-bench-lag.$$
NET=/tmp/lr-bench-net.$$

[ "$(id -u)" -eq 0 ] || { echo "needs root (network namespaces)" >&2; exit 2; }
command -v jq >/dev/null || { echo "jq missing: apt-get install jq" >&2; exit 2; }
cargo build --release -q -p linerate

cleanup() { "$LR" testbed sweep --prefix "$P" >/dev/null 2>&1 || true; rm -f "$LAG" "$NET"; }
trap cleanup EXIT INT TERM

up() { # name, flags…
  local n=$1; shift
  "$LR" testbed up "$P$n" "$@" >/dev/null
}
down() { "$LR" testbed down "$P$1" >/dev/null; }
limit() { # the emulator's measured limit, frames/s
  "$LR" testbed show "$P$1" --json | jq -r '.bed.emulator.capacity.frames_per_s // "none"'
}
rtt_p50() { # bed, size → median RTT in ns (every exchange stamped); the
  # emulator's mean departure lag (its own delay per pass, ns) into $LAG and
  # the median of the network stage (kernel stamps: client tx → responder rx
  # plus responder tx → client rx, the part a cable adds to) into $NET
  local doc
  doc=$("$LR" latency --bed "$P$1" --size "$2" --count "$COUNT" --stamp-every 1 --json 2>/dev/null)
  jq -r '.link_emulation.mean_lag_ns // 0 | floor' <<<"$doc" >"$LAG"
  jq -r '.runs[0].stages[] | select(.stage == "network") | .p50_ns' <<<"$doc" >"$NET"
  jq -r '.runs[0].stages[] | select(.stage == "rtt") | .p50_ns' <<<"$doc"
}
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : int((v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
diffs() { # bed, size[, reference bed] → "rtt_diff net_diff lag": medians
  # over ROUNDS interleaved rounds of (reference, bed); reference: the
  # unshaped pair
  local r rtt=() net=() lag=() b bn e
  for ((r = 0; r < ROUNDS; r++)); do
    b=$(rtt_p50 "${3:-base}" "$2"); bn=$(cat "$NET")
    e=$(rtt_p50 "$1" "$2")
    rtt+=($((e - b))); net+=($(($(cat "$NET") - bn))); lag+=("$(cat "$LAG")")
  done
  echo "$(printf '%s\n' "${rtt[@]}" | median) $(printf '%s\n' "${net[@]}" | median) $(printf '%s\n' "${lag[@]}" | median)"
}
verdict() { # ok(0/1) → PASS/MISS
  if [ "$1" = 1 ]; then echo PASS; else echo MISS; fi
}
calc() { awk "BEGIN { printf \"%.3f\", $1 }"; }
test_() { awk "BEGIN { exit !($1) }" && echo 1 || echo 0; }

echo "# beds: unshaped pair (base), pair 100M emu, pair 1G emu, pair 1G emu --emu-poll"
up base --topo pair --shaper tbf
up e100 --topo pair --link 100M --shaper emu
up e1g --topo pair --link 1G --shaper emu
up e1gp --topo pair --link 1G --shaper emu --emu-poll
echo "emulator limit (frames/s, measured at bed start): 100M $(limit e100), 1G $(limit e1g)"

# 1-3: RTT differences, emu bed minus unshaped pair, same run, medians of
# ROUNDS interleaved rounds; the network stage's difference beside it (the
# hosts' own stages differ between beds with the CPUs' wake-ups).
for spec in "e100 18 13440 95pct" "e1g 18 1344 1us" "e1gp 18 1344 1us" "e100 1472 246080 2pct"; do
  set -- $spec
  read -r diff ndiff lag < <(diffs "$1" "$2")
  case $4 in
    95pct) ok=$(test_ "$diff >= 0.95 * $3"); target=">= 95 % of $3 ns";;
    1us) ok=$(test_ "$diff >= $3 - 1000 && $diff <= $3 + 1000"); target="$3 ns +- 1000";;
    2pct) ok=$(test_ "$diff >= 0.98 * $3 && $diff <= 1.02 * $3"); target="$3 ns +- 2 %";;
  esac
  echo "RTT $1 size $2: difference $diff ns (target $target): $(verdict "$ok"); network stage difference $ndiff ns; the emulator's own lag $lag ns a pass"
done

# 4: UDP throughput through the emulator, % of the model.
for size in 1472 18; do
  doc=$("$LR" throughput --bed "${P}e100" --udp --size "$size" --time "$DURATION" --json 2>/dev/null || true)
  pct=$(jq -r '[.figures.directions[] | select(.role == "receiver") | .pct_of_max][0] // "?"' <<<"$doc")
  limited=$(jq -r '[.flags[] | select(.code == "emulator_limited")] | length' <<<"$doc")
  # 1518-byte frames: >= 99.5 % whatever the flags; 64-byte: or flagged.
  ok=0; flagged_ok=0; [ "$size" = 18 ] && flagged_ok=1
  [ "$pct" != "?" ] && ok=$(test_ "$pct >= 99.5 || ($flagged_ok && $limited > 0)")
  target=">= 99.5 %"; [ "$flagged_ok" = 1 ] && target=">= 99.5 % or flagged"
  echo "UDP throughput 100M size $size: $pct % of the model, emulator_limited flags $limited (target $target): $(verdict "$ok")"
done

# 5: rfc2544 single frames on a 100M bridge bed.
up br --topo bridge --link 100M --shaper emu
doc=$("$LR" rfc2544 --bed "${P}br" --tests throughput,single --frames 64,1518 --trial 2s \
  --resolution 2 --json 2>/dev/null || true)
jq -r '.link_bits_per_s as $l | .sizes[] | "\(.frame_bytes) \(.single_frame.single_frame_bits_per_s // "?") \(.single_frame.streaming_bits_per_s // "?") \($l)"' <<<"$doc" \
  | while read -r fb single stream line; do
      ok=0
      if [ "$single" != "?" ] && [ "$stream" != "?" ]; then ok=$(test_ "$single <= $line && $single < 0.5 * $stream"); fi
      echo "rfc2544 single, bridge 100M, $fb B: single $single bit/s, streaming $stream bit/s, line $line (target single <= line, far below streaming): $(verdict "$ok")"
    done
down br

# 6: five identical ping-pong runs on a shaped bed.
p50s=()
for _ in 1 2 3 4 5; do p50s+=("$(rtt_p50 e100 18)"); done
lo=$(printf '%s\n' "${p50s[@]}" | sort -n | head -1); hi=$(printf '%s\n' "${p50s[@]}" | sort -n | tail -1)
ok=$(test_ "$hi <= 1.10 * $lo")
echo "5 ping-pong runs 100M: p50 ${p50s[*]} ns, max/min $(calc "$hi / $lo") (target <= 1.10): $(verdict "$ok")"

# 7: --delay 1ms adds 2 ms to the RTT.
up d1 --topo pair --link 1G --delay 1ms
read -r d nd _ < <(diffs d1 18 e1g)
ok=$(test_ "$d >= 2000000 - 20000 && $d <= 2000000 + 20000")
echo "--delay 1ms: RTT +$d ns (target 2 000 000 +- 20 000): $(verdict "$ok"); network stage +$nd ns"
down d1
down e1gp; down e1g; down e100; down base
