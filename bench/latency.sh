#!/usr/bin/env bash
# Benchmark (not a test): ping-pong RTT, linerate beside a peer tool, in the
# same run, on the same two-namespace veth bed, in interleaved rounds.
#
#   udp   64-byte UDP ping-pong against sockperf, blocking and spinning;
#   tcp   TCP echo of 1 and 64 bytes against `sockperf ping-pong --tcp`,
#         blocking and spinning (sockperf's smallest TCP message is 14 bytes:
#         its own header; linerate's 1-byte row is set beside that);
#   icmp  ICMP echo of 56 bytes against `ping -A` (adaptive: the next request
#         as soon as the reply is in), blocking only (ping has no spinning
#         mode); and against `ping -A -U`, whose time runs user to user as
#         linerate's full RTT does.
#
# Prints medians of p50/p99 per tool and the p50 ratio linerate/peer, as the
# median of the same-round ratios (also printed per round, with the ratio of
# the separate medians beside) (target,
# SPEC §5: linerate's p50 ≤ 1.05 × the peer's in the same mode). linerate runs
# three ways: as it runs by default (kernel stamps on one exchange in 4,
# stages from those, the RTT quoted from the other 3 in 4 that stamp nothing;
# ICMP's keep the reply's receive stamp, as ping's do), with --stamp-every 1
# (every exchange stamped: the RTT includes what stamping costs) and
# with --no-kernel-stamps (application stamps only, like sockperf), so the
# tool's own overhead and the cost of stamping are apart.
#
# Clocks: sockperf times with rdtsc from before send to after its receive
# returns, as linerate's RTT does (CLOCK_REALTIME application stamps). ping
# does not: its time runs from gettimeofday before the send to the kernel's
# receive stamp of the reply (SO_TIMESTAMP), so it leaves out the wake-up
# and the receive call that linerate's RTT includes. The ICMP row's ratio
# therefore sets ping's time beside linerate's like-for-like field,
# `rtt_send_to_kernel_rx` (per exchange: the send call to the kernel's
# receive stamp of the reply), and prints the ratio of linerate's full RTT
# to ping's time beside it, labelled as spanning more. ping prints its
# times in ms with 3 decimals, i.e. in whole µs, so the median of its
# replies is a whole number (5.00 for a true median anywhere from about 4.5
# to 5.5 µs) and a ratio to it can be off by 10 % either way at these
# spans; the target ratio therefore divides linerate's exact p50 by ping's
# grouped median (interpolated within its 1 µs bin), and the ratio of the
# two means (each unbiased) is printed beside it (see run_ping).
#
# SWITCH=1 adds a fourth linerate run to the UDP and TCP rows: without kernel
# stamps, while another socket holds the kernel's global receive-stamping
# switch on (net_enable_timestamp: every packet then gets a CLOCK_REALTIME
# stamp as it enters the stack), which measures what that switch alone costs
# every exchange when a stamped sample is running.
#
# Spinning needs a CPU for each end: on a host with two CPUs and other load
# its runs swing from microseconds to milliseconds for both tools alike; read
# its rows only on a quiet host.
#
# Needs root, iproute2, sockperf, ping (apt-get install sockperf
# iputils-ping); builds linerate in release mode. Every load loop is bounded
# by DURATION seconds (ICMP: by a count of requests).
#
# LR_BASE=PATH adds a run of another linerate build (server and client, its
# default stamps) to every row, in the same interleaved rounds: an A/B of two
# builds beside the peer ("linerate base").
#
# RT=1 runs every tool (peers and linerate alike) at real-time priority
# (chrt -f 5): on a host loaded from elsewhere the rounds then measure the
# tools rather than the scheduler. It starves other work while it runs.
# On the 2-vCPU VM it was tried on, ping under chrt timed 7 µs where it
# timed 4.3 µs without (linerate's same span: 4.3 µs either way; cause not
# found): read the ICMP row from a run without RT=1.
#
# usage: [ROUNDS=3] [PROTOS="udp tcp icmp"] [MODES="blocking spin"] [SWITCH=1] [LR_BASE=PATH] [RT=1] bench/latency.sh [DURATION_S]
#   (default 5 s per run; about (8 udp + 16 tcp + 3 icmp) × ROUNDS × DURATION s)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-5}
ROUNDS=${ROUNDS:-3}
PROTOS=${PROTOS:-udp tcp icmp}
MODES=${MODES:-blocking spin}
BED="bl$$"
PORT=11111
LR=target/release/linerate
LR_BASE=${LR_BASE:-}
[ -z "$LR_BASE" ] || [ -x "$LR_BASE" ] || { echo "LR_BASE=$LR_BASE is not an executable" >&2; exit 2; }
RT=${RT:+chrt -f 5}
# ICMP requests per run (ping has no time limit in adaptive mode): a few
# seconds' worth on a loaded host.
ICMP_COUNT=${ICMP_COUNT:-$((DURATION * 5000))}

command -v sockperf >/dev/null || { echo "sockperf missing: apt-get install sockperf" >&2; exit 2; }
[[ " $PROTOS " == *" icmp "* ]] && { command -v ping >/dev/null || { echo "ping missing: apt-get install iputils-ping" >&2; exit 2; }; }
[ "$(id -u)" -eq 0 ] || { echo "needs root (network namespaces)" >&2; exit 2; }
cargo build --release -q -p linerate

# linerate server and client share a pre-shared key (the server serves
# loopback peers only without one).
LINERATE_AUTH_KEY="bench-$$-$(date +%s%N)"
export LINERATE_AUTH_KEY

TMP=$(mktemp -d)
cleanup() {
  [ -n "${SP_PID:-}" ] && kill -9 "$SP_PID" 2>/dev/null || true
  [ -n "${LR_PID:-}" ] && kill -9 "$LR_PID" 2>/dev/null || true
  "$LR" testbed down "$BED" >/dev/null 2>&1 || true
  rm -rf "$TMP"
}
trap cleanup EXIT INT TERM
"$LR" testbed up "$BED" --topo pair >/dev/null
NS_A="lr-$BED-a"; NS_B="lr-$BED-b"; B_IP=198.18.0.2

# Stops a background tool: TERM, then KILL if it is still there (a spinning
# server left behind would take a CPU from every later run).
stop() { # pid
  kill "$1" 2>/dev/null || true
  for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}

# sockperf's percentile lines: "sockperf: ---> percentile 50.000 =   23.456" (µs).
sp_pct() { awk -v p="$2" '$0 ~ "percentile "p" " { print $NF }' "$1"; }

run_sockperf() { # proto mode size
  local proto=$1 mode=$2 size=$3 extra=() out="$TMP/sp.txt"
  [ "$proto" = tcp ] && extra=(--tcp)
  # Spinning: non-blocking sockets and a zero epoll timeout (busy polling) on both ends.
  [ "$mode" = spin ] && extra+=(--nonblocked --timeout 0)
  # sockperf's smallest message is its 14-byte header.
  [ "$size" -lt 14 ] && size=14
  ip netns exec "$NS_B" $RT sockperf sr -i "$B_IP" -p "$PORT" "${extra[@]}" >/dev/null 2>&1 &
  SP_PID=$!
  sleep 0.5
  ip netns exec "$NS_A" timeout $((DURATION + 20)) $RT sockperf pp -i "$B_IP" -p "$PORT" -m "$size" -t "$DURATION" \
    --full-rtt "${extra[@]}" > "$out" 2>&1 || true
  stop "$SP_PID"; SP_PID=
  echo "$(sp_pct "$out" 50.000) $(sp_pct "$out" 99.000)"
}

# ping prints each time in ms with 3 decimals: whole µs, the difference of
# two µs-truncated stamps (gettimeofday, SO_TIMESTAMP's timeval). Such a
# difference is floor(d) or floor(d) + 1 for a true d (the latter with
# probability frac(d)): unbiased on average, but the median of whole numbers
# is itself a whole number, up to 0.5 µs from the true median (4.00 for any
# true median from about 3.5 to 4.5). So beside that median this prints the
# grouped median, interpolated within the 1 µs bin that holds it (each
# whole value k standing for [k - 0.5, k + 0.5)), which is within about
# 0.1 µs of the true median, and the mean of the replies' times, which is
# unbiased; those are what linerate's exact p50 and mean stand beside.
# Prints: median p99 grouped-median mean (µs).
run_ping() { # size [-U]
  local out="$TMP/ping.txt"
  ip netns exec "$NS_A" timeout $((DURATION + 20)) $RT ping -A ${2:-} -n -c "$ICMP_COUNT" -s "$1" "$B_IP" > "$out" 2>&1 || true
  python3 - "$out" <<'PY'
import re, statistics, sys
t = sorted(round(float(m.group(1)) * 1000) for m in re.finditer(r"time=([0-9.]+) ms", open(sys.argv[1]).read()))
if t:
    n, mid = len(t), statistics.median(t)
    k = t[n // 2]
    below, inbin = sum(1 for x in t if x < k), t.count(k)
    grouped = k - 0.5 + (n / 2 - below) / inbin
    print(f"{mid:.2f} {t[min(n - 1, int(n * 0.99))]:.2f} {grouped:.3f} {statistics.fmean(t):.3f}")
PY
}

# linerate's RTT quote: p50 and p99 µs; for ICMP also the p50 and p99 of
# rtt_send_to_kernel_rx (send → kernel receive stamp, ping's interval).
lr_summary() {
  python3 - "$1" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
run = doc["runs"][0]
stages = {s["stage"]: s for s in run["stages"]}
# The RTT linerate quotes: that of the unstamped exchanges when stamps were
# sampled, else the (stamped or application-only) one.
rtt = run.get("rtt_unstamped") or stages["rtt"]
extra = ""
span = run.get("rtt_send_to_kernel_rx")
if doc["protocol"] == "icmp" and span:
    extra = f' {span["p50_ns"]/1000:.3f} {span["p99_ns"]/1000:.2f} {span["mean_ns"]/1000:.3f} {rtt["mean_ns"]/1000:.3f}'
print(f'{rtt["p50_ns"]/1000:.3f} {rtt["p99_ns"]/1000:.2f}{extra}')
PY
}

run_linerate() { # proto mode size stamps (default | all | app | switch) [binary]: server in b, client in a: two processes, as the peers
  local proto=$1 mode=$2 size=$3 stamps=$4 lr=${5:-$LR} extra=() out="$TMP/lr.json"
  [ "$mode" = spin ] && extra=(--spin)
  [ "$stamps" = all ] && extra+=(--stamp-every 1)
  [ "$stamps" = app ] && extra+=(--no-kernel-stamps)
  local holder=
  if [ "$stamps" = switch ]; then
    extra+=(--no-kernel-stamps)
    # SO_TIMESTAMPING (37) with SOFTWARE | RX_SOFTWARE: the global switch on.
    python3 -c 'import socket, time, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, 37, (1 << 3) | (1 << 4))
time.sleep(float(sys.argv[1]))' $((DURATION + 25)) &
    holder=$!
    sleep 0.2
  fi
  if [ "$proto" = icmp ]; then
    ip netns exec "$NS_A" timeout $((DURATION + 20)) $RT "$lr" latency "$B_IP" --icmp --size "$size" \
      --count "$ICMP_COUNT" "${extra[@]}" --json > "$out"
  else
    [ "$proto" = tcp ] && extra+=(--tcp)
    [ "$mode" = spin ] && extra+=(--reflector-mode busy)
    ip netns exec "$NS_B" $RT "$lr" server --bind "$B_IP" --port 5300 2>/dev/null &
    LR_PID=$!
    sleep 0.5
    ip netns exec "$NS_A" timeout $((DURATION + 20)) $RT "$lr" latency "$B_IP" --size "$size" --time "${DURATION}s" \
      "${extra[@]}" --json > "$out"
    stop "$LR_PID"; LR_PID=
  fi
  [ -n "$holder" ] && { kill "$holder" 2>/dev/null || true; wait "$holder" 2>/dev/null || true; }
  lr_summary "$out"
}

# The rows: proto size mode.
rows=()
for p in $PROTOS; do
  case $p in
    udp) rows+=("udp 64 blocking" "udp 64 spin") ;;
    tcp) rows+=("tcp 1 blocking" "tcp 1 spin" "tcp 64 blocking" "tcp 64 spin") ;;
    icmp) rows+=("icmp 56 blocking") ;;
    *) echo "unknown protocol $p (udp, tcp, icmp)" >&2; exit 2 ;;
  esac
done

# Only the modes asked for.
kept=()
for row in "${rows[@]}"; do
  [[ " $MODES " == *" ${row##* } "* ]] && kept+=("$row")
done
rows=("${kept[@]}")

# Interleaved rounds, medians: the host is a shared VM whose run-to-run
# spread is far above the differences measured here.
results="$TMP/results"
for round in $(seq "$ROUNDS"); do
  echo "round $round/$ROUNDS …" >&2
  for row in "${rows[@]}"; do
    read -r proto size mode <<<"$row"
    if [ "$proto" = icmp ]; then
      echo "$row peer $(run_ping "$size")" >> "$results"
      echo "$row peeru $(run_ping "$size" -U)" >> "$results"
      echo "$row default $(run_linerate icmp "$mode" "$size" default)" >> "$results"
      echo "$row all $(run_linerate icmp "$mode" "$size" all)" >> "$results"
      echo "$row app $(run_linerate icmp "$mode" "$size" app)" >> "$results"
      [ -n "$LR_BASE" ] && echo "$row base $(run_linerate icmp "$mode" "$size" default "$LR_BASE")" >> "$results"
    else
      echo "$row peer $(run_sockperf "$proto" "$mode" "$size")" >> "$results"
      echo "$row default $(run_linerate "$proto" "$mode" "$size" default)" >> "$results"
      echo "$row all $(run_linerate "$proto" "$mode" "$size" all)" >> "$results"
      echo "$row app $(run_linerate "$proto" "$mode" "$size" app)" >> "$results"
      [ -n "$LR_BASE" ] && echo "$row base $(run_linerate "$proto" "$mode" "$size" default "$LR_BASE")" >> "$results"
      [ "${SWITCH:-0}" = 1 ] && echo "$row switch $(run_linerate "$proto" "$mode" "$size" switch)" >> "$results"
    fi
  done
done
python3 - "$results" "$ROUNDS" <<'PY'
import statistics, sys
rows, order = {}, []
for line in open(sys.argv[1]):
    f = line.split()
    key = tuple(f[:3])
    if key not in order:
        order.append(key)
    # A run that printed nothing (it failed) keeps its round's place: None.
    rows.setdefault((key, f[3]), []).append([float(x) for x in f[4:]] if len(f) >= 6 else None)
names = {"default": "linerate (default)", "all": "linerate --stamp-every 1",
         "app": "linerate --no-kernel-stamps", "peeru": "ping -A -U (user to user)",
         "switch": "linerate no-stamps+switch", "base": "linerate base (LR_BASE)"}
ok = lambda v: [x for x in v if x]
med = lambda v, i: statistics.median(x[i] for x in ok(v))
def per_round(a, i, b, j):
    """a[i] / b[j] round by round, for the rounds where both ran."""
    return " ".join(f"{x[i] / y[j]:.3f}" for x, y in zip(a, b) if x and y)
def round_median(a, i, b, j):
    """The median of the same-round ratios a[i] / b[j]: the figure to hold
    against the target (both tools measured minutes apart at most, so a
    round in which the host's timer or load moved both p50s between their
    modes does not set the ratio, as a ratio of separate medians would)."""
    r = sorted(x[i] / y[j] for x, y in zip(a, b) if x and y)
    return r[(len(r) - 1) // 2] if len(r) % 2 else (r[len(r) // 2 - 1] + r[len(r) // 2]) / 2
print(f"{'row':<22} {'tool':<28} {'p50 µs median (min-max)':>26} {'p99 µs median':>14}   ({sys.argv[2]} rounds)")
for key in order:
    proto, size, mode = key
    peer = "ping -A" if proto == "icmp" else "sockperf" + (" (14 B)" if int(size) < 14 else "")
    label = f"{proto} {size} B {mode}"
    got = {t: rows[(key, t)] for t in ("peer", "peeru", "default", "all", "app", "switch", "base")
           if ok(rows.get((key, t), []))}
    for tool, v in got.items():
        lo, hi = min(x[0] for x in ok(v)), max(x[0] for x in ok(v))
        print(f"{label:<22} {(peer if tool == 'peer' else names[tool]):<28} {med(v, 0):>10.2f} ({lo:.2f}-{hi:.2f}) {med(v, 1):>14.2f}")
        if proto == "icmp" and tool in ("peer", "peeru"):
            # ping's whole-µs times: their grouped median and mean (see run_ping).
            print(f"{label:<22} {'  grouped median; mean':<28} {med(v, 2):>10.2f} {'':>11} {med(v, 3):>14.2f}   (sub-µs estimates from whole µs)")
        if proto == "icmp" and tool in ("default", "base"):
            lo, hi = min(x[2] for x in ok(v)), max(x[2] for x in ok(v))
            print(f"{label:<22} {'  send→rx stamp; mean':<28} {med(v, 2):>10.2f} ({lo:.2f}-{hi:.2f}) {med(v, 4):>14.2f}   (rtt_send_to_kernel_rx: ping's span)")
    if proto == "icmp" and "peer" in got and "default" in got:
        # ping times send → kernel receive stamp: compare like with like, at
        # a resolution finer than ping's whole µs (grouped median; means).
        pr, d = got["peer"], got["default"]
        print(f"{label:<22} ratio to {peer}, same span (send→rx stamp): p50 / grouped median, median of the rounds' ratios "
              f"{round_median(d, 2, pr, 2):.3f} (target <= 1.05; per round {per_round(d, 2, pr, 2)}; ratio of the medians {med(d, 2) / med(pr, 2):.3f}), "
              f"mean / mean {med(d, 4) / med(pr, 3):.3f}; full RTT / ping's span {med(d, 0) / med(pr, 2):.3f} (not like for like)")
        if "peeru" in got:
            pu = got["peeru"]
            print(f"{label:<22} full RTT / ping -A -U's (both user to user): p50 / grouped median "
                  f"{med(d, 0) / med(pu, 2):.3f}, mean / mean {med(d, 5) / med(pu, 3):.3f}")
        if "base" in got:
            b = got["base"]
            print(f"{label:<22} base same span / grouped median {med(b, 2) / med(pr, 2):.3f} "
                  f"(per round {per_round(b, 2, pr, 2)}); this build / base per round {per_round(d, 2, b, 2)}")
    elif "peer" in got and "default" in got:
        pr = got["peer"]
        line = (f"{label:<22} p50 ratio to {peer}, median of the rounds' ratios: "
                f"{round_median(got['default'], 0, pr, 0):.3f} default (target <= 1.05; per round "
                f"{per_round(got['default'], 0, pr, 0)}; ratio of the medians {med(got['default'], 0) / med(pr, 0):.3f})")
        for tool, what in (("all", "with every exchange stamped"), ("app", "without kernel stamps"),
                           ("switch", "without, global receive-stamping switch on"), ("base", "LR_BASE build")):
            if tool in got:
                line += f"; {med(got[tool], 0) / med(pr, 0):.3f} {what}"
        print(line)
        if "base" in got:
            print(f"{label:<22} LR_BASE build per round: {per_round(got['base'], 0, pr, 0)}")
PY
echo "(veth between two namespaces, ${DURATION}s a run, ICMP ${ICMP_COUNT} requests; RTT from each tool's own clock: sockperf rdtsc, ping gettimeofday to SO_TIMESTAMP, linerate CLOCK_REALTIME application stamps)"
