#!/usr/bin/env bash
# bench/memory.sh — linerate's memory beside iperf3's, and a server's return
# to its idle size.
#
# NOT a test: a benchmark printing figures against the targets:
#   1. peak RSS of the client and of the server in a 4-stream TCP test,
#      forward and reverse, ≤ 1.5× iperf3's ("Maximum resident set size" of
#      /usr/bin/time -v, kB; one server process per test: `linerate server
#      --once`, `iperf3 -s -1`). Both tools' default paths: no `typical` path
#      (its application buffer of up to 64 MiB per flow is documented and
#      left out). RSS counts the program's own code and libraries' pages as
#      they are touched: linerate is one binary for every command, so the
#      file-backed part is larger; the anonymous part (buffers, heaps,
#      stacks) is shown apart: the largest RssAnon of /proc/PID/status seen
#      every 0.2 s during each test.
#   2. a long-running `linerate server` returns to within 10 MB of its idle
#      RSS when its sessions end: VmRSS idle, then after large sessions (16
#      streams of the `typical` path, reverse, twice: 16 × 16 MiB buffers;
#      4 streams of 4 MiB blocks both ways), one second after the last ended.
#
# Two namespaces lr-me<pid>a / lr-me<pid>b joined by a veth pair
# (198.18.79.1/24 ↔ 198.18.79.2/24), removed on exit; every run bounded
# (T seconds, default 3, plus a timeout).
# Needs root, ip, iperf3, python3, /usr/bin/time (apt-get install time).
#
# usage: [T=3] bench/memory.sh
set -euo pipefail

T=${T:-3}
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
IP_A=198.18.79.1
IP_B=198.18.79.2
need ip iperf3 python3 timeout
[ -x /usr/bin/time ] || { echo "memory.sh: /usr/bin/time is missing (apt-get install time)" >&2; exit 2; }
need_root
linerate_bin
TMPD=$(mktemp -d /tmp/lr-mem.XXXXXX)
veth_pair me $IP_A $IP_B

maxrss() { sed -n 's/.*Maximum resident set size (kbytes): //p' "$1"; }
# RssAnon (kB) of the process named $2 among the descendants of $1 (the
# background job running `inX timeout … /usr/bin/time … PROG`).
anon_of() {
    local p c
    for p in $(pgrep -P "$1" || true); do
        if [ "$(cat "/proc/$p/comm" 2>/dev/null)" = "$2" ]; then
            sed -n 's/^RssAnon:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$p/status"
            return
        fi
        c=$(anon_of "$p" "$2")
        [ "$c" != "?" ] && { echo "$c"; return; }
    done
    echo "?"
}

# One test: server under /usr/bin/time in b, client under /usr/bin/time in a,
# the largest RssAnon of both. Prints "client_kB server_kB client_anon server_anon".
one() { # tool dir
    local tool=$1 dir=$2 srv cli sa ca a
    if [ "$tool" = linerate ]; then
        srv=("$BIN" server --bind $IP_B --port 5300 --once --no-iperf3 --no-save)
        cli=("$BIN" throughput $IP_B --port 5300 --time "$T" --streams 4 --no-save --json)
        [ "$dir" = reverse ] && cli+=(--reverse)
    else
        srv=(iperf3 -s -1 -B $IP_B -p 5201)
        cli=(iperf3 -c $IP_B -p 5201 -t "$T" -P 4)
        [ "$dir" = reverse ] && cli+=(-R)
    fi
    inB timeout $((T + 30)) /usr/bin/time -v -o "$TMPD/srv" "${srv[@]}" >/dev/null 2>&1 &
    local spid=$!
    sleep 0.5
    inA timeout $((T + 20)) /usr/bin/time -v -o "$TMPD/cli" "${cli[@]}" >/dev/null 2>&1 &
    local cpid=$!
    # The largest RssAnon seen, every 0.2 s while the client runs.
    ca=0 sa=0
    while kill -0 "$cpid" 2>/dev/null; do
        a=$(anon_of "$cpid" "$(basename "${cli[0]}")")
        [ "$a" != "?" ] && [ "$a" -gt "$ca" ] && ca=$a
        a=$(anon_of "$spid" "$(basename "${srv[0]}")")
        [ "$a" != "?" ] && [ "$a" -gt "$sa" ] && sa=$a
        sleep 0.2
    done
    wait "$cpid" || true
    wait "$spid" || true
    echo "$(maxrss "$TMPD/cli") $(maxrss "$TMPD/srv") $ca $sa"
}

echo "memory over veth ($A ↔ $B), ${T} s per test, $(date -u +%FT%TZ); load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "1. peak RSS, 4 TCP streams (kB; anon = largest RssAnon seen)"
printf '%-8s %-9s %10s %10s %12s %12s\n' dir tool client server client-anon server-anon
declare -A R
for dir in forward reverse; do
    for tool in iperf3 linerate; do
        R[$dir,$tool]=$(one "$tool" "$dir")
        # shellcheck disable=SC2086
        printf '%-8s %-9s %10s %10s %12s %12s\n' "$dir" "$tool" ${R[$dir,$tool]}
    done
    python3 - "${R[$dir,linerate]}" "${R[$dir,iperf3]}" <<'PY'
import sys
lr, i3 = (s.split() for s in sys.argv[1:])
def r(a, b):
    try:
        return f"{float(a) / float(b):.2f}x"
    except (ValueError, ZeroDivisionError):
        return "?"
print(f"         linerate / iperf3: client {r(lr[0], i3[0])}, server {r(lr[1], i3[1])}; "
      f"anon: client {r(lr[2], i3[2])}, server {r(lr[3], i3[3])}  (target <= 1.5x)")
PY
done

echo
echo "2. a long-running server's RSS back at idle after large sessions"
bg_B "$BIN" server --bind $IP_B --port 5301 --no-iperf3 --no-save
SPID=$(pgrep -n -f -- "server --bind $IP_B --port 5301")
rss() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$SPID/status"; }
idle=$(rss)
echo "idle: $idle kB"
for args in "--streams 16 --reverse --path typical" "--streams 16 --reverse --path typical" "--streams 4 --bidir --size 4M"; do
    # shellcheck disable=SC2086
    inA timeout $((T + 20)) "$BIN" throughput $IP_B --port 5301 --time "$T" $args --no-save --json >/dev/null 2>&1 || true
    sleep 1
    echo "after throughput $args: $(rss) kB"
done
after=$(rss)
python3 -c "d = ($after - $idle) / 1000; print(f'back at idle + {d:.1f} MB (target: within 10 MB) ->', 'ok' if d <= 10 else 'NOT MET')"
