#!/usr/bin/env bash
# bench/grid.sh — the throughput grid: linerate beside iperf3 and iperf2,
# same veth pair, same run, interleaved rounds, medians.
#
# NOT a test: a benchmark (issue "ahead of every peer in every
# configuration": linerate ≥ 1.0× the better peer in every cell).
#
# Cells: TCP with 1, 2, 4, 8 streams, each forward (client sends), reverse
# (server sends) and bidirectional; UDP with 1472-byte and 18-byte
# datagrams, 1 and 4 streams, unpaced. Each tool runs its defaults apart
# from what the cell sets:
#   linerate throughput IP --time T --streams N [--reverse|--bidir]
#                       [--udp --size S]
#   iperf3 -c IP -t T -P N [-R|--bidir] [-u -b 0 -l S]
#   iperf  -c IP -t T -P N [-R|--full-duplex] [-u -b 100G -l S]
#     (iperf2 has no separate-connection bidirectional mode that reports
#     each side once: --full-duplex sends both ways on each of its N
#     connections, so its bidir cell is 2N flows like the others', over N
#     connections; -b 100G is "as fast as it can", -b 0 is refused.)
#
# Every number is a RECEIVER-side figure, summed over all flows that
# received (both directions for bidir), over the longest receiving time:
#   TCP, Gbit/s of payload received:
#     linerate: Σ bytes of every receiver flow (client and server_side)
#               × 8 / the longest receiver elapsed_ns (CLOCK_MONOTONIC of
#               the receiving end, first to last byte);
#     iperf3:   end.sum_received.bits_per_second (+ sum_received_bidir_reverse
#               for bidir): bytes received over the receiver's time;
#     iperf2:   its -y C report lines of the receiving end (the server's for
#               what it received, the client's for what it received):
#               Σ bytes × 8 / the longest line's time (bytes × 8 / its bit/s).
#   UDP, thousands of datagrams received per second (same size for every
#   tool in a cell, so the ratio is that of payload rates too):
#     linerate: Σ packets of the receiver flows / the longest receiver time;
#     iperf3:   (end.sum.packets − end.sum.lost_packets) / end.sum.seconds;
#     iperf2:   the server's report lines: Σ (total − lost) / the longest
#               line's time. A run whose iperf2 server reports nothing
#               (seen with 18-byte datagrams, shorter than iperf2's own UDP
#               header) counts as missing; a cell with none is "—".
# A linerate figure is marked "!" when any receiver flow was not fully
# verified, saw a corrupt block or datagram, or reported an error.
# ratio = the median over the rounds of linerate / the better peer of the
# same round (the three tools of a round run back to back, so a slow spell
# of the shared host weighs on all three); "of medians" beside it is the
# ratio of each tool's median over the rounds.
# CPU cost (second table): the CPU time (user + system) of the client
# process (/usr/bin/time) and of the server process (/proc/PID/stat ticks,
# before and after the run), per GB received (TCP) or per datagram received
# (UDP), median over the rounds. On veth the receive softirq runs inside the
# sender's syscall, so both ends together are the whole cost; it does not
# depend on what else the host runs the way throughput does, so it is the
# figure to compare on a loaded host.
# The host is a shared 2-vCPU VM: compare within one run only, quote the
# figures as measured under its load.
#
# Two namespaces lr-gr<pid>a / lr-gr<pid>b joined by a veth pair
# (198.18.78.1/24 ↔ 198.18.78.2/24), all servers up in b for the whole run,
# clients in a; each client run bounded by T + 20 s; everything removed on
# exit. About 16 cells × 3 tools × (T + 1.5) s per round.
# Needs root, ip, iperf3, iperf, time (apt-get install iperf3 iperf time), python3.
#
# LR_ARGS adds flags to every linerate run (e.g. LR_ARGS="--verify-one-in 16"
# for sampled verification; its figures are then marked "!": not every
# payload was compared). The header prints them.
#
# usage: [T=3] [ROUNDS=5] [CELLS=regex] [LR_ARGS=flags] bench/grid.sh
set -euo pipefail

T=${T:-3}
ROUNDS=${ROUNDS:-5}
CELLS=${CELLS:-.}
read -r -a LR_EXTRA <<<"${LR_ARGS:-}"
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
IP_A=198.18.78.1
IP_B=198.18.78.2
P_LR=5300
P_I3=5201
P_I2=5001
P_I2U=5002
need ip iperf3 iperf python3 timeout /usr/bin/time
need_root
linerate_bin
TMPD=$(mktemp -d /tmp/lr-grid.XXXXXX)
veth_pair gr $IP_A $IP_B

bg_B "$BIN" server --bind $IP_B --port $P_LR --no-iperf3
bg_B iperf3 -s -B $IP_B -p $P_I3
# Not through inB: a backgrounded function is a subshell, and $! would be it,
# not the server (which would then outlive the cleanup).
ip netns exec "$B" iperf -s -B $IP_B -p $P_I2 -y C >"$TMPD/i2tcp.csv" 2>/dev/null & PIDS+=($!)
ip netns exec "$B" iperf -s -u -B $IP_B -p $P_I2U -y C >"$TMPD/i2udp.csv" 2>/dev/null & PIDS+=($!)
# ip netns exec execs the server: these are the servers' own PIDs.
SRV_LR=${PIDS[0]} SRV_I3=${PIDS[1]} SRV_I2=${PIDS[2]} SRV_I2U=${PIDS[3]}
sleep 0.5

# The client's CPU time (user and system seconds) goes to $TMPD/ctime.
run() { inA /usr/bin/time -f '%U %S' -o "$TMPD/ctime" timeout $((T + 20)) "$@"; }
# CPU ticks (user + system, USER_HZ) a process has used so far.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }

# linerate: "value ok|bad" (see the header).
lr_cell() { # proto streams dir size
    local args=(throughput $IP_B --port $P_LR --time "$T" --streams "$2" --json --no-save)
    [ "$3" = reverse ] && args+=(--reverse)
    [ "$3" = bidir ] && args+=(--bidir)
    [ "$1" = udp ] && args+=(--udp --size "$4")
    args+=("${LR_EXTRA[@]}")
    # linerate exits 1 when its result carries a warning flag (a noisy
    # host, retransmits): the figures still count, the marks say the rest.
    { run "$BIN" "${args[@]}" 2>/dev/null || true; } | python3 -c '
import json, sys
d = json.load(sys.stdin)
fl = [f for s in ("client", "server_side") for f in (d.get(s) or {}).get("flows", []) if f["role"] == "receiver"]
el = max(f["elapsed_ns"] for f in fl) / 1e9
w = sum(f["bytes"] if sys.argv[1] == "tcp" else f["packets"] for f in fl)
v = w * 8 / el if sys.argv[1] == "tcp" else w / el
ok = all(f["verification"] == "full" and not f.get("error") and (f.get("recv") or {}).get("corrupt", 1) == 0 for f in fl)
print(v, "ok" if ok else "bad", w)' "$1" || echo "nan bad 0"
}

i3_cell() {
    local args=(-c $IP_B -p $P_I3 -t "$T" -P "$2" -J)
    [ "$3" = reverse ] && args+=(-R)
    [ "$3" = bidir ] && args+=(--bidir)
    [ "$1" = udp ] && args+=(-u -b 0 -l "$4")
    { run iperf3 "${args[@]}" 2>/dev/null || true; } | python3 -c '
import json, sys
e = json.load(sys.stdin)["end"]
if sys.argv[1] == "tcp":
    r, b = e["sum_received"], e.get("sum_received_bidir_reverse", {})
    print(r["bits_per_second"] + b.get("bits_per_second", 0), "-", r["bytes"] + b.get("bytes", 0))
else:
    s = e["sum"]; got = s["packets"] - s["lost_packets"]; print(got / s["seconds"], "-", got)' "$1" || echo "nan - 0"
}

# iperf2 -y C lines: time,src_ip,src_port,dst_ip,dst_port,id,interval,bytes,bit/s[,jitter,lost,total,…]
i2_cell() {
    local proto=$1 port=$P_I2 file=$TMPD/i2tcp.csv args=(-c $IP_B -t "$T" -P "$2" -y C)
    [ "$proto" = udp ] && { port=$P_I2U; file=$TMPD/i2udp.csv; args+=(-u -b 100G -l "$4"); }
    [ "$3" = reverse ] && args+=(-R)
    [ "$3" = bidir ] && args+=(--full-duplex)
    local before client
    before=$(wc -l <"$file")
    client=$(run iperf -p "$port" "${args[@]}" 2>/dev/null || true)
    sleep 0.5 # the server writes its lines when its connections end
    { tail -n +$((before + 1)) "$file" | sed 's/^/server,/'; printf '%s\n' "$client" | sed 's/^/client,/'; } | python3 -c '
import sys
proto, port = sys.argv[1], sys.argv[2]
got, longest = 0.0, 0.0
for line in sys.stdin:
    f = line.strip().split(",")
    if len(f) < 10 or int(f[6]) < 0:
        continue  # not a report line, or a sum line
    end, f = f[0], f[1:]
    received = (end == "server" and f[4] == port) or (end == "client" and f[2] == port)
    if not received or float(f[8]) <= 0:
        continue
    if proto == "udp":
        if len(f) < 12 or int(f[11]) < 0:
            continue  # the sender'"'"'s own line
        got += int(f[11]) - int(f[10])
    else:
        got += int(f[7]) * 8
    longest = max(longest, int(f[7]) * 8 / float(f[8]))
print(got / longest if longest else "nan", "-", got / 8 if proto == "tcp" else got)' "$proto" "$port"
}

CELL_LIST=()
for n in 1 2 4 8; do for dir in forward reverse bidir; do CELL_LIST+=("tcp $n $dir 131072"); done; done
for s in 1472 18; do for n in 1 4; do CELL_LIST+=("udp $n forward $s"); done; done

echo "throughput grid over veth ($A ↔ $B), ${T} s per run, $ROUNDS rounds, $(date -u +%FT%TZ)"
[ -n "${LR_ARGS:-}" ] && echo "linerate runs with: $LR_ARGS"
echo "kernel $(uname -r), $(nproc) CPUs; load: $(cut -d' ' -f1-3 /proc/loadavg); $(iperf3 --version | head -1); $(iperf -v 2>&1 | head -1)"
tools=(linerate iperf3 iperf2)
for round in $(seq 1 "$ROUNDS"); do
    for cell in "${CELL_LIST[@]}"; do
        [[ "$cell" =~ $CELLS ]] || continue
        # Rotate the order of the tools every round.
        for k in 0 1 2; do
            tool=${tools[$(((k + round) % 3))]}
            printf 'round %s/%s: ' "$round" "$ROUNDS" >&2
            case $tool in
                linerate) srv=$SRV_LR ;;
                iperf3) srv=$SRV_I3 ;;
                iperf2) srv=$SRV_I2; [[ "$cell" == udp* ]] && srv=$SRV_I2U ;;
            esac
            t0=$(ticks "$srv")
            : >"$TMPD/ctime"
            # shellcheck disable=SC2086
            case $tool in
                linerate) v=$(lr_cell $cell) ;;
                iperf3) v=$(i3_cell $cell) ;;
                iperf2) v=$(i2_cell $cell) ;;
            esac
            # CPU seconds of client and server in this run.
            cpu=$(awk -v s=$(($(ticks "$srv") - t0)) -v hz="$(getconf CLK_TCK)" \
                'NF == 2 && $1 ~ /^[0-9.]+$/ {c = $1 + $2} END {print c + s / hz}' "$TMPD/ctime")
            echo "$round $cell $tool $v $cpu" | tee -a "$TMPD/results" >&2
        done
    done
done

python3 - "$TMPD/results" <<'PY'
import math, statistics, sys
from collections import defaultdict
vals, bad, order, cost = defaultdict(list), defaultdict(int), [], defaultdict(list)
# Every round's figure by round (nan kept), for the same-round ratios: a
# run whose figure line is malformed (skipped below) pairs with nothing.
every = defaultdict(dict)
for line in open(sys.argv[1]):
    if len(line.split()) != 10:
        continue
    rnd, proto, n, d, size, tool, v, ok, work, cpu = line.split()
    cell = (proto, int(n), d, int(size))
    if cell not in order:
        order.append(cell)
    v = float(v)
    every[cell, tool][rnd] = v
    if not math.isnan(v):
        vals[cell, tool].append(v)
        if float(work) > 0:
            # ms per GB (TCP) or ns per datagram (UDP)
            cost[cell, tool].append(float(cpu) * (1e12 if proto == "tcp" else 1e9) / float(work))
    if ok not in ("ok", "-"):
        bad[cell] += 1
def med(cell, tool):
    v = vals.get((cell, tool))
    return statistics.median(v) if v else float("nan")
def same_round(cell):
    """Median over the rounds of linerate / the better peer in that round:
    the three tools of a round run back to back, so a slow spell of the
    host weighs on the three of them alike."""
    rs = []
    for k, lr in every.get((cell, "linerate"), {}).items():
        peers = [v[k] for t in ("iperf3", "iperf2") if k in (v := every.get((cell, t), {})) and not math.isnan(v[k])]
        if peers and max(peers) > 0 and not math.isnan(lr):
            rs.append(lr / max(peers))
    return statistics.median(rs) if rs else float("nan")
def fmt(x, scale):
    return "—" if math.isnan(x) else f"{x / scale:.2f}" if scale == 1e9 else f"{x / scale:.0f}"
rounds = max((len(v) for v in vals.values()), default=0)
print(f"\nmedians over {rounds} rounds; TCP: Gbit/s received; UDP: thousand datagrams/s received")
print("ratio: median over the rounds of each round's linerate / better peer; of medians: the")
print("medians' ratio (one slow spell of the host in one tool's run moves it more)")
print(f"{'cell':<26} {'linerate':>10} {'iperf3':>10} {'iperf2':>10} {'ratio':>7} {'of medians':>10}")
worst = worst_of_medians = None
for cell in order:
    proto, n, d, size = cell
    scale = 1e9 if proto == "tcp" else 1e3
    lr, i3, i2 = (med(cell, t) for t in ("linerate", "iperf3", "iperf2"))
    peers = [x for x in (i3, i2) if not math.isnan(x)]
    best = max(peers) if peers else float("nan")
    of_medians = lr / best if peers and best > 0 and not math.isnan(lr) else float("nan")
    ratio = same_round(cell)
    if not math.isnan(ratio):
        worst = min(worst, ratio) if worst is not None else ratio
    if not math.isnan(of_medians):
        worst_of_medians = min(worst_of_medians, of_medians) if worst_of_medians is not None else of_medians
    name = f"{proto} {n}x {d}" + (f" {size} B" if proto == "udp" else "")
    mark = "!" if bad[cell] else " "
    print(f"{name:<26} {fmt(lr, scale):>9}{mark} {fmt(i3, scale):>10} {fmt(i2, scale):>10} {ratio:>6.3f}x {of_medians:>9.3f}x")
print("\nCPU time of client and server per GB received (TCP, ms) or per datagram received (UDP, ns), medians")
print(f"{'cell':<26} {'linerate':>10} {'iperf3':>10} {'iperf2':>10} {'lr/best':>7}")
for cell in order:
    proto, n, d, size = cell
    c = [statistics.median(cost[cell, t]) if cost.get((cell, t)) else float("nan") for t in ("linerate", "iperf3", "iperf2")]
    peers = [x for x in c[1:] if not math.isnan(x)]
    r = c[0] / min(peers) if peers and not math.isnan(c[0]) else float("nan")
    name = f"{proto} {n}x {d}" + (f" {size} B" if proto == "udp" else "")
    print(f"{name:<26} " + " ".join("—".rjust(10) if math.isnan(x) else f"{x:10.0f}" for x in c) + f" {r:6.2f}x")
print(f"\nworst cell: {worst:.3f}x the better peer, median of same-round ratios (target >= 1.00x in every cell); "
      f"ratio of medians {worst_of_medians:.3f}x" if worst is not None else "")
if any(bad.values()):
    print("! = a linerate run not fully verified, with corrupt data or an error, in that many rounds:",
          ", ".join(f"{c[0]} {c[1]}x {c[2]}: {k}" for c, k in bad.items() if k))
PY
